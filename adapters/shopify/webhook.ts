/**
 * Shopify webhooks: how they are signed, and what each topic asks of the bridge.
 *
 * Authenticity: `X-Shopify-Hmac-Sha256` = base64(HMAC-SHA256(app secret, raw body)) (pos-facts
 * "Webhook deliveries"); the core verifies it over the exact bytes. The topic is the
 * `X-Shopify-Topic` header; the body is the bare REST object (an order, a refund).
 *
 * Dedupe: `X-Shopify-Event-Id` names the event (the same across retries, which Shopify makes up to
 * 8 times over 4 hours with the original payload), else `X-Shopify-Webhook-Id` (older API
 * versions). Both are UUIDs Shopify issues, unique across every shop, so a delivery taken once is a
 * duplicate whichever shop a later copy names in `X-Shopify-Shop-Domain`, which the HMAC does not
 * cover (contract v1.4). Without either, the topic and the object's id are the key, the shop's own
 * (order ids are Shopify's too, but the key is not an event's): one order is paid once and one
 * refund created once, and the core's ledger dedupes on the order and refund ids anyway.
 *
 * Header names: Shopify's own library also sends and accepts them without the `X-` prefix
 * (`shopify-hmac-sha256`, `shopify-topic`, …); both are read (`headerAliases`).
 *
 * Topics acted on: `orders/paid` → checkout (the moment the order's money is in); `orders/create`
 * → checkout only when already `paid` (POS sales are created paid, and a shop subscribed to
 * `orders/create` alone still accrues; when both topics arrive the second is a repeat of the same
 * order id and calls nothing); `refunds/create` → refund. Everything else is acknowledged and ignored.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import { singleHeaderValue, type ActionKey, type WebhookAction, type WebhookSpec } from '../../src/pos/contract.js';
import { parseRefundPayload, withoutItemsReason } from './refund.js';
import { unwrap } from './schema.js';

export const SIGNATURE_HEADER = 'x-shopify-hmac-sha256';
export const TOPIC_HEADER = 'x-shopify-topic';
export const EVENT_ID_HEADER = 'x-shopify-event-id';
export const WEBHOOK_ID_HEADER = 'x-shopify-webhook-id';
export const SHOP_DOMAIN_HEADER = 'x-shopify-shop-domain';

/** Each header's name without `X-`, as Shopify's own library sends and accepts it, for the name read here. */
const UNPREFIXED_NAMES: Readonly<Record<string, string>> = Object.fromEntries(
  [SIGNATURE_HEADER, TOPIC_HEADER, EVENT_ID_HEADER, WEBHOOK_ID_HEADER, SHOP_DOMAIN_HEADER].map((name) => [name.replace(/^x-/, ''), name]),
);

/** Topics the bridge knows; each is mapped below, unknown ones are ignored with a generic reason. */
const TOPICS = ['orders/paid', 'orders/create', 'refunds/create', 'orders/cancelled', 'orders/updated', 'orders/edited', 'orders/fulfilled', 'orders/partially_fulfilled', 'orders/delete'] as const;
type Topic = (typeof TOPICS)[number];

function isTopic(topic: string): topic is Topic {
  return (TOPICS as readonly string[]).includes(topic);
}

const TOPIC_FORMAT = /^[a-z_]+\/[a-z_]+$/;
/** Event and webhook ids are UUIDs; a comma means Node folded a repeated header into one value. */
const ID_FORMAT = /^[A-Za-z0-9._:-]{1,128}$/;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  if (Array.isArray(value)) throw ValidationError.field(name, 'is repeated');
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

function idHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = header(headers, name);
  if (value !== undefined && !ID_FORMAT.test(value)) throw ValidationError.field(name, `is not one event id (repeated, or not an id): ${JSON.stringify(value.slice(0, 80))}`);
  return value;
}

function objectOf(body: unknown, wrapper: 'order' | 'refund'): Record<string, unknown> {
  const { value } = unwrap(body, wrapper);
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** The action's key: Shopify's event id (unique across shops), else its webhook id (the same), else the shop's own topic and object id. */
function dedupeKey(headers: IncomingHttpHeaders, topic: string, body: unknown): ActionKey {
  const eventId = idHeader(headers, EVENT_ID_HEADER);
  if (eventId) return { key: `event:${eventId}`, uniqueAcrossAccounts: true };
  const webhookId = idHeader(headers, WEBHOOK_ID_HEADER);
  if (webhookId) return { key: `webhook:${webhookId}`, uniqueAcrossAccounts: true };
  const id = objectOf(body, topic.startsWith('refunds/') ? 'refund' : 'order').id;
  return { key: typeof id === 'number' || typeof id === 'string' ? `${topic}:${id}` : topic };
}

/** A refund that returns nothing or only shipping is acknowledged here; anything unreadable goes on to be refused loudly. */
function refundAction(key: ActionKey, body: unknown): WebhookAction {
  try {
    const { refund } = parseRefundPayload(body);
    const refundsUnits = (refund.refund_line_items ?? []).some((line) => line.quantity !== 0);
    if (!refundsUnits) {
      const { ignorable, reason } = withoutItemsReason(refund);
      if (ignorable) return { kind: 'ignored', ...key, reason };
    }
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
  }
  return { kind: 'refund', ...key, payload: body };
}

function classify(body: unknown, headers: IncomingHttpHeaders): WebhookAction[] {
  const topic = header(headers, TOPIC_HEADER);
  if (!topic) throw ValidationError.field(TOPIC_HEADER, 'is missing: without the topic the delivery cannot be understood');
  if (!TOPIC_FORMAT.test(topic)) throw ValidationError.field(TOPIC_HEADER, `is not one topic: ${JSON.stringify(topic.slice(0, 80))}`);
  const key = dedupeKey(headers, topic, body);
  if (!isTopic(topic)) return [{ kind: 'ignored', ...key, reason: `topic ${echoed(topic)} is not one the bridge acts on` }];
  switch (topic) {
    case 'orders/paid':
      return [{ kind: 'checkout', ...key, payload: body }];
    case 'orders/create': {
      const status = objectOf(body, 'order').financial_status;
      if (status === 'paid') return [{ kind: 'checkout', ...key, payload: body }];
      return [{ kind: 'ignored', ...key, reason: `orders/create with financial_status ${echoed(JSON.stringify(status ?? null))}: accrued when orders/paid arrives` }];
    }
    case 'refunds/create':
      return [refundAction(key, body)];
    case 'orders/cancelled':
      return [{ kind: 'ignored', ...key, reason: 'a cancellation itself changes nothing: money given back arrives as refunds/create' }];
    case 'orders/updated':
    case 'orders/edited':
      return [{ kind: 'ignored', ...key, reason: `${topic}: the accrual is the order as paid (orders/paid); later changes are not re-accrued, refunds arrive as refunds/create` }];
    case 'orders/fulfilled':
    case 'orders/partially_fulfilled':
      return [{ kind: 'ignored', ...key, reason: `${topic}: fulfilment does not change what was paid` }];
    case 'orders/delete':
      return [{ kind: 'ignored', ...key, reason: 'orders/delete: deleting an order record returns no money; refunds arrive as refunds/create' }];
    default: {
      const unhandled: never = topic;
      throw new Error(`unmapped Shopify topic ${String(unhandled)}`);
    }
  }
}

export const shopifyWebhook: WebhookSpec = {
  signature: {
    kind: 'hmac',
    header: SIGNATURE_HEADER,
    algorithm: 'sha256',
    encodings: ['base64'],
    message: (raw) => raw,
  },
  classify,
  // Shopify names the shop in X-Shopify-Shop-Domain. The HMAC covers the body only, and no shop is
  // named in it: the header is what Shopify gives (docs/merchants.md says what that means), which is
  // why its event ids are deduplicated across shops (dedupeKey).
  // Only the unsigned X-Shopify-Shop-Domain names the shop (an order's body does not): the core binds
  // each delivery's signed bytes to the shop it was first taken for.
  accounts: (body, headers) => [{ headerAccount: singleHeaderValue(headers, SHOP_DOMAIN_HEADER), body }],
  headerAliases: UNPREFIXED_NAMES,
};
