/**
 * Toast webhooks: how they are signed, and what each delivery asks of the bridge.
 *
 * Toast signs each webhook message: `Toast-Signature` = base64(HMAC-SHA256(subscription secret,
 * body + timestamp)) (developer guide "Message signing": "The signature is derived by concatenating
 * the body and timestamp of the webhook message into a string"). The core verifies; this file only
 * says which timestamp.
 *
 * WHICH TIMESTAMP IS UNCONFIRMED (pos-facts). Toast's guide does not say where the timestamp comes
 * from. Two readings are possible:
 *   1. a `Toast-Timestamp` request header, when Toast sends one: used first;
 *   2. otherwise the message's own `timestamp` field (every Toast webhook body has one, "ISO
 *      formatted timestamp in UTC"), as the text it holds in the body.
 * Either way the HMAC is still keyed by the secret and compared in constant time, so a wrong
 * reading cannot let a forged message in: it makes every delivery fail with 401 (loudly: the
 * bridge's logs and metrics show the refusals), never a wrong amount. A present but empty
 * `Toast-Timestamp` header is refused rather than guessed around (no fallback to the body).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../../src/kernel/errors.js';
import { namedIn, singleHeaderValue, type ReplayWindow, type WebhookAction, type WebhookSpec } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { checkGuidOf, unpaid, wasPaid, type ReadOrder } from './checkout.js';
import { refundableChecks, refundsOf } from './refund.js';
import { Envelope, Order } from './schema.js';

export const TOAST_SIGNATURE_HEADER = 'Toast-Signature';
export const TOAST_TIMESTAMP_HEADER = 'Toast-Timestamp';

/** The timestamp the signature covers, or undefined when there is none to use (→ 401). */
export function timestampOf(raw: Buffer, headers: IncomingHttpHeaders): string | undefined {
  const value = headers[TOAST_TIMESTAMP_HEADER.toLowerCase()];
  if (value !== undefined) {
    // A repeated header reaches here joined ("a, b"), which no signature covers: it fails as a mismatch.
    const text = Array.isArray(value) ? value.join(', ') : value;
    return text.trim() === '' ? undefined : text.trim();
  }
  try {
    const body: unknown = JSON.parse(raw.toString('utf8'));
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      const timestamp = (body as { timestamp?: unknown }).timestamp;
      if (typeof timestamp === 'string' && timestamp !== '') return timestamp;
    }
  } catch {
    // Not JSON: nothing signed can be found, and the delivery is refused as unsigned.
  }
  return undefined;
}

/**
 * Toast signs the timestamp so that a captured delivery cannot be replayed later. Toast retries a
 * failed delivery after 5 and then 10 minutes and then drops it (pos-facts); if the signed time is
 * the first attempt's, the last retry comes ~15 minutes after it. 20 minutes lets every retry
 * through with room for clock skew, and refuses anything older or further ahead.
 */
export const TOAST_REPLAY_WINDOW: ReplayWindow = {
  signedAt: timestampOf,
  windowMs: 20 * 60_000,
  why: 'Toast retries for ~15 minutes',
};

/** Toast event types the bridge knows (developer guide, webhooks reference). */
const EVENT_KINDS: Readonly<Record<string, 'order' | 'other'>> = {
  order_updated: 'order',
  channel_order_updated: 'order',
  partner_added: 'other',
  partner_removed: 'other',
  partner_updated: 'other',
  in_stock: 'other',
  low_quantity: 'other',
  out_of_stock: 'other',
  menus_updated: 'other',
  guest_order_fulfillment_status_updated: 'other',
};

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  const text = Array.isArray(value) ? value.join(', ') : value;
  return text?.trim() || undefined;
}

/**
 * The orders webhook puts the Order in `details.order` (developer guide "Orders webhook", with
 * `details.restaurantGuid` beside it). A `details` that is itself the Order, and an order sent as
 * JSON text, are read too; an order without its checks (only a guid) cannot be translated: the
 * bridge does not fetch orders from Toast's API, so it is kept as a dead letter.
 */
function orderOf(details: unknown): { raw: Record<string, unknown>; prefix: string } {
  if (!isObject(details)) throw ValidationError.field('details', 'is missing: an order_updated message carries the order in details.order');
  let raw: unknown;
  let prefix: string;
  if ('order' in details) {
    raw = details.order;
    prefix = 'details.order';
    if (typeof raw === 'string') {
      try {
        raw = JSON.parse(raw);
      } catch {
        throw ValidationError.field(prefix, 'is text that is not a JSON order');
      }
    }
  } else if ('checks' in details || details.entityType === 'Order') {
    raw = details;
    prefix = 'details';
  } else {
    throw ValidationError.field('details.order', 'is missing: an order_updated message carries the order in details.order');
  }
  if (!isObject(raw)) throw ValidationError.field(prefix, 'must be a Toast order (a JSON object)');
  if (!('checks' in raw)) {
    throw ValidationError.field(
      `${prefix}.checks`,
      `is missing: this delivery names order ${JSON.stringify(String(raw.guid ?? '?')).slice(0, 60)} without its content, and the bridge does not fetch orders from the Toast API`,
    );
  }
  return { raw, prefix };
}

function orderActions(eventGuid: string, details: unknown): WebhookAction[] {
  const { raw, prefix } = orderOf(details);
  return decideOrder(raw, prefix, eventGuid);
}

/**
 * What one whole order asks for, check by check (each check is a sale of its own: checkout.ts): a
 * paid check's sale then its refunds, a voided check that had been paid its reversal, an open
 * check nothing yet. Shared by the webhook and backfill (backfill.ts), so both record the same
 * sales and refunds under the same ids. Each action's payload names its check (`checkGuid`).
 */
export function decideOrder(raw: Record<string, unknown>, prefix: string, eventGuid: string): WebhookAction[] {
  const read: ReadOrder = { raw, order: parseWith(Order, raw, prefix), prefix };
  const { order } = read;
  if (order.deleted || order.checks.every((c) => c.deleted)) return [{ kind: 'ignored', key: eventGuid, reason: `order ${order.guid} was deleted (its checks were combined into another order)` }];
  const actions: WebhookAction[] = [];
  const idle: string[] = [];
  for (const live of refundableChecks(read)) {
    const checkGuid = checkGuidOf(live);
    const payload = (extra: Record<string, string> = {}) => ({ order: raw, checkGuid, ...extra });
    if (order.voided || live.check.voided) {
      // Voided after it was paid: it may have been accrued, so it is reversed. Before: nothing was.
      if (wasPaid(live.check) || order.closedDate) actions.push({ kind: 'refund', key: `${eventGuid}:refund:void:${checkGuid}`, payload: payload() });
      else idle.push(order.voided ? `order ${order.guid} was voided before it was paid: nothing was accrued` : `check ${checkGuid} was voided before it was paid: nothing was accrued`);
      continue;
    }
    const open = unpaid(live);
    if (open) {
      idle.push(`order ${order.guid} is not paid yet (${open.field} ${open.reason})`);
      continue;
    }
    // The checkout comes first even when the check already shows refunds: a partial refund needs
    // the accrual it reduces, and a repeated checkout is answered from the ledger without a call.
    actions.push({ kind: 'checkout', key: `${eventGuid}:checkout:${checkGuid}`, payload: payload() });
    const refunds = refundsOf(live);
    if (refunds.full) {
      // Everything came back: one full reversal of what remains, whatever was refunded before.
      actions.push({ kind: 'refund', key: `${eventGuid}:refund:full:${checkGuid}`, payload: payload() });
    } else {
      // One partial refund per refund transaction; a transaction applied before is a repeat to the core.
      for (const group of refunds.groups.filter((g) => g.cents > 0)) actions.push({ kind: 'refund', key: `${eventGuid}:refund:${group.id}:${checkGuid}`, payload: payload({ refundTransactionGuid: group.id }) });
    }
  }
  return actions.length > 0 ? actions : [{ kind: 'ignored', key: eventGuid, reason: [...new Set(idle)].join('; ') }];
}

function classify(body: unknown, headers: IncomingHttpHeaders): WebhookAction[] {
  if (!isObject(body)) throw ValidationError.field('', 'must be a Toast webhook message (a JSON object)');
  const message = parseWith(Envelope, body);
  // The body is covered by the signature and the Toast-Event-Type header is not, so the body wins.
  const type = message.eventType?.trim() || header(headers, 'toast-event-type');
  if (!type) throw ValidationError.field('eventType', 'is missing, and so is the Toast-Event-Type header');
  const kind = EVENT_KINDS[type];
  switch (kind) {
    case undefined:
      return [{ kind: 'ignored', key: message.guid ?? `${type}:unidentified`, reason: `Toast event type ${type} is not one the bridge acts on` }];
    case 'other':
      return [{ kind: 'ignored', key: message.guid ?? `${type}:unidentified`, reason: `Toast ${type} events carry no sale` }];
    case 'order':
      if (!message.guid) throw ValidationError.field('guid', 'is required: it is the event id repeated deliveries are recognised by');
      return orderActions(message.guid, message.details);
    default: {
      const never: never = kind;
      throw new Error(`unhandled event kind ${String(never)}`);
    }
  }
}

export const toastWebhook: WebhookSpec = {
  signature: {
    kind: 'hmac',
    header: TOAST_SIGNATURE_HEADER,
    algorithm: 'sha256',
    encodings: ['base64'],
    // Toast: base64(HMAC-SHA256(secret, body + timestamp)); see timestampOf above for which timestamp.
    message(raw, headers) {
      const timestamp = timestampOf(raw, headers);
      return timestamp === undefined ? undefined : Buffer.concat([raw, Buffer.from(timestamp, 'utf8')]);
    },
    replay: TOAST_REPLAY_WINDOW,
  },
  classify,
  // The message's own details.restaurantGuid (signed) where it has one, and the unsigned
  // Toast-Restaurant-External-ID header Toast sends with every message: the core refuses the two
  // disagreeing, and binds a message named by the header alone to the restaurant it was first taken for.
  accounts: (body, headers) => [{ account: namedIn(isObject(body) ? body.details : undefined, 'restaurantGuid'), headerAccount: singleHeaderValue(headers, 'toast-restaurant-external-id'), body }],
};
