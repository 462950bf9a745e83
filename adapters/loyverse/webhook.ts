/**
 * Loyverse webhooks. A delivery is `{ merchant_id, type, created_at, receipts: [ … ] }`: one event
 * type, a batch of whole objects (nothing to fetch). Only `receipts.update` matters here; it fires
 * when a receipt is created and when it changes (e.g. cancelled), so one receipt can arrive several
 * times: deliveries are at least once, and the core also refuses a second accrue per transaction.
 *
 * SIGNATURE. `X-Loyverse-Signature` is HMAC-SHA1 of the raw body keyed with the webhook secret
 * (LOYVERSE_WEBHOOK_SECRET). Whether Loyverse writes the digest as base64 or hex is *unconfirmed*
 * (pos-facts), so both encodings of the same HMAC are accepted; anything else is a 401. Neither
 * guess weakens the check: each is the full 160-bit HMAC of the exact bytes.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../../src/kernel/errors.js';
import { namedIn, type AdapterContext, type SignatureScheme, type WebhookAction, type WebhookSpec } from '../../src/pos/contract.js';
import { parseWith } from '../../src/kernel/validation.js';
import { parseLoyverseCheckout } from './checkout.js';
import { parseLoyverseRefund } from './refund.js';
import { LoyverseReceiptIdentity, LoyverseWebhookEnvelope, type LoyverseReceiptIdentity as Identity } from './schema.js';

export const LOYVERSE_SIGNATURE_HEADER = 'X-Loyverse-Signature';

export const loyverseSignature: SignatureScheme = {
  kind: 'hmac',
  header: LOYVERSE_SIGNATURE_HEADER,
  algorithm: 'sha1',
  encodings: ['base64', 'hex'],
  message: (raw) => raw,
};

/** The webhook event types Loyverse sends (developer.loyverse.com, Webhooks). */
const TOPICS = ['receipts.update', 'customers.update', 'items.update', 'inventory_levels.update', 'shifts.create'] as const;
type Topic = (typeof TOPICS)[number];

function topicOf(type: string): Topic | undefined {
  return (TOPICS as readonly string[]).includes(type) ? (type as Topic) : undefined;
}

/**
 * The dedupe key: the receipt's identity in its store and its version (`updated_at`, pos-facts),
 * plus what the bridge does with it, so a cancellation is never mistaken for a repeat of the sale
 * even if Loyverse did not move `updated_at` when cancelling.
 */
function receiptKey(receipt: Identity, kind: WebhookAction['kind']): string {
  const version = receipt.updated_at ?? receipt.created_at ?? 'unversioned';
  return `receipt:${receipt.store_id}:${receipt.receipt_number}@${version}:${kind}`;
}

/**
 * Only to check up front that a receipt translates: amounts in cents do not depend on the currency,
 * and no phone is read from a receipt, so these values cannot change the outcome.
 */
const PROBE_CONTEXT: AdapterContext = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };

function receiptAction(raw: unknown, index: number): { action: WebhookAction; translates: boolean } {
  const receipt = parseWith(LoyverseReceiptIdentity, raw, `receipts.${index}`);
  let action: WebhookAction;
  switch (receipt.receipt_type) {
    case 'SALE':
      // A cancelled sale never happened: it reverses whatever was accrued for it.
      action = receipt.cancelled_at ? { kind: 'refund', key: receiptKey(receipt, 'refund'), payload: raw } : { kind: 'checkout', key: receiptKey(receipt, 'checkout'), payload: raw };
      break;
    case 'REFUND':
      action = receipt.cancelled_at
        ? {
            kind: 'ignored',
            key: receiptKey(receipt, 'ignored'),
            reason: `refund receipt ${receipt.receipt_number} was cancelled: the bridge cannot undo a reversal; re-accrue the original sale by hand if its points are due again`,
          }
        : { kind: 'refund', key: receiptKey(receipt, 'refund'), payload: raw };
      break;
    default: {
      const unreachable: never = receipt.receipt_type;
      return unreachable;
    }
  }
  let translates = true;
  try {
    if (action.kind === 'checkout') parseLoyverseCheckout(raw, PROBE_CONTEXT);
    if (action.kind === 'refund') parseLoyverseRefund(raw);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    translates = false;
  }
  return { action, translates };
}

/** Order of work in a batch: sales before refunds (a refund in the same batch finds its sale). */
const RANK: Record<WebhookAction['kind'], number> = { checkout: 0, fetch: 0, refund: 1, ignored: 2 };

function receiptsUpdate(body: object, eventKey: string): WebhookAction[] {
  const receipts = (body as { receipts?: unknown }).receipts;
  if (!Array.isArray(receipts)) throw ValidationError.field('receipts', 'must be an array of receipts in a receipts.update delivery');
  if (receipts.length === 0) return [{ kind: 'ignored', key: eventKey, reason: 'receipts.update without receipts' }];
  const classified = receipts.map((raw, i) => ({ ...receiptAction(raw, i), i }));
  // A receipt that cannot be translated goes last: the core stops at it and keeps the whole delivery
  // as a dead letter, so placed last it holds back none of the others (replayed, they are repeats).
  return classified
    .sort((a, b) => Number(!a.translates) - Number(!b.translates) || RANK[a.action.kind] - RANK[b.action.kind] || a.i - b.i)
    .map((c) => c.action);
}

export function classifyLoyverse(body: unknown, _headers: IncomingHttpHeaders): WebhookAction[] {
  const envelope = parseWith(LoyverseWebhookEnvelope, body);
  const eventKey = `event:${envelope.merchant_id ?? 'unknown'}:${envelope.type}@${envelope.created_at ?? 'unknown'}`;
  const topic = topicOf(envelope.type);
  if (topic === undefined) return [{ kind: 'ignored', key: eventKey, reason: `event type ${JSON.stringify(envelope.type)} is not one the bridge acts on` }];
  switch (topic) {
    case 'receipts.update':
      return receiptsUpdate(envelope, eventKey);
    case 'customers.update':
    case 'items.update':
    case 'inventory_levels.update':
    case 'shifts.create':
      return [{ kind: 'ignored', key: eventKey, reason: `${topic} carries no sale or refund` }];
    default: {
      const unreachable: never = topic;
      return unreachable;
    }
  }
}

export const loyverseWebhook: WebhookSpec = {
  signature: loyverseSignature,
  classify: classifyLoyverse,
  // Loyverse names the merchant in each delivery's `merchant_id`, which the signature covers.
  accounts: (body) => [{ account: namedIn(body, 'merchant_id'), body }],
};
