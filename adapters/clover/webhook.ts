/**
 * Clover webhooks (docs.clover.com "Use webhooks").
 *
 * AUTHENTICITY. Clover does not sign: every message carries the app's static Clover Auth Code in
 * `X-Clover-Auth`, compared by the core to CLOVER_AUTH_CODE.
 *
 * SHAPE. `{ appId, merchants: { <merchant id>: [ { objectId: "O:<id>", type, ts } ] } }`: ids only,
 * batched across merchants, delivered with no guarantee of order or of delivery at all. Each order
 * notification becomes one `fetch` of the order from Clover's API, then a decision on what the
 * order now is: refunded → refund; paid (locked) → checkout; anything else → acknowledged and
 * ignored. Repeated notifications of one order are harmless: the transaction id derives from
 * (merchant, order) and the core answers a recorded order or refund with its recorded outcome.
 *
 * DEDUPE KEY. Clover has no event id: a notification is identified by (merchant, objectId, type,
 * ts), so the same delivery again is recognised and a later change of the same order is not.
 *
 * URL VERIFICATION. When a webhook URL is set up, Clover POSTs `{ "verificationCode": "<uuid>" }`
 * to it before any auth code exists (the code is shown only after verification), so that POST has
 * no `X-Clover-Auth`. While CLOVER_AUTH_CODE is unset, the core lets exactly that body through
 * unsigned (`unsignedHandshake`), logs the code for the operator and records nothing; once it is
 * set, an unsigned one is refused like any unsigned delivery; signed, it is acknowledged as `ignored`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../../src/kernel/errors.js';
import type { WebhookAction, WebhookPart, WebhookSpec } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { fetchOrder } from './api.js';
import { isPaid, unsettledPayment } from './checkout.js';
import { refundsCoverOrder, refundsInOrder, refundsOf } from './refund.js';
import { CLOVER_ID, CloverOrder, CloverVerification, CloverWebhookBody, NOTIFICATION_TYPES, type NotificationType } from './schema.js';

export const CLOVER_AUTH_HEADER = 'X-Clover-Auth';

/** Object-id prefixes Clover sends, named for the reason an ignored notification gives. */
const OBJECT_KINDS: Readonly<Record<string, string>> = {
  O: 'order',
  P: 'payment',
  C: 'customer',
  I: 'inventory item',
  IC: 'inventory category',
  IG: 'inventory item group',
  IM: 'inventory modifier',
  E: 'employee',
  A: 'app',
  M: 'merchant',
  CH: 'cash adjustment',
};

/**
 * The verification code when `body` is exactly Clover's URL-verification POST, else undefined.
 * Meant for a core hook that lets this one body through without `X-Clover-Auth` (answering 200 and
 * logging the code for the operator to paste into the Clover dashboard), since Clover sends it
 * before the auth code exists.
 */
export function cloverVerificationCode(body: unknown): string | undefined {
  const parsed = CloverVerification.safeParse(body);
  return parsed.success ? parsed.data.verificationCode : undefined;
}

function isNotificationType(type: string): type is NotificationType {
  return (NOTIFICATION_TYPES as readonly string[]).includes(type);
}

/**
 * What a fetched order asks for. Refunds win over the sale: a refunded order is still "locked", and
 * its sale was recorded by an earlier notification (or, if that was lost, the refund settles it:
 * a full refund reverses by the derived id; see docs/pos-systems.md for the partial case).
 */
export function decideOrder(fetched: unknown, merchantId: string, orderId: string, key: string): WebhookAction | WebhookAction[] {
  const order = parseWith(CloverOrder, fetched, 'order');
  if (order.id !== orderId) throw ValidationError.field('order.id', `is ${order.id}, but the notification named order ${orderId}`);
  if (order.merchant && order.merchant.id !== merchantId) {
    throw ValidationError.field('order.merchant.id', `is ${order.merchant.id}, but the notification came for merchant ${merchantId}`);
  }
  // The notification's merchant scopes the order id (the API does not always name it in the order).
  const payload = { ...(fetched as Record<string, unknown>), merchant: { id: merchantId } };
  const refunds = refundsOf(order);
  if (refunds.length > 0) {
    // Fully refunded: one full reversal (whatever partial refunds came before it). Otherwise every
    // refund by its own id, oldest first: two refunds new in one fetch (a notification lost, or two
    // refunds in a minute) are both applied; those applied before are repeats (by refund id).
    const ordered = refundsInOrder(refunds, 'order.refunds');
    if (refundsCoverOrder(order, refunds, 'order.')) return { kind: 'refund', key, payload };
    const actions = ordered.map((refund): WebhookAction => {
      // With several, the core files each under the notification's key and this one.
      const refundKey = ordered.length === 1 ? key : refund.id;
      const net = refund.amount - (refund.taxAmount ?? 0n) - (refund.tipAmount ?? 0n);
      if (refund.taxAmount != null && net === 0n) {
        return { kind: 'ignored', key: refundKey, reason: `refund ${refund.id} of order ${orderId} gives back only tax and tip: no purchase amount to reverse` };
      }
      return { kind: 'refund', key: refundKey, payload: { order: payload, refundId: refund.id } };
    });
    return actions.length === 1 ? actions[0]! : actions;
  }
  if (!isPaid(order)) {
    return { kind: 'ignored', key, reason: `order ${orderId} is ${order.state ? `"${order.state}"` : 'without state'}: it accrues once paid (state "locked")` };
  }
  const unsettled = unsettledPayment(order);
  if (unsettled?.payment.result) {
    return { kind: 'ignored', key, reason: `payment ${unsettled.payment.id} of order ${orderId} is ${unsettled.payment.result}: waiting for the update that settles it` };
  }
  return { kind: 'checkout', key, payload };
}

export function classifyCloverWebhook(body: unknown, _headers: IncomingHttpHeaders): WebhookAction[] {
  const code = cloverVerificationCode(body);
  if (code !== undefined) {
    return [{ kind: 'ignored', key: `verification:${code}`, reason: `Clover webhook URL verification: enter the code ${code} in the Clover developer dashboard` }];
  }
  const delivery = parseWith(CloverWebhookBody, body);
  const actions: WebhookAction[] = [];
  for (const [merchantId, notifications] of Object.entries(delivery.merchants)) {
    notifications.forEach((n, i) => {
      const key = `${merchantId}/${n.objectId}/${n.type}/${n.ts}`;
      const colon = n.objectId.indexOf(':');
      const kind = n.objectId.slice(0, colon);
      const objectId = n.objectId.slice(colon + 1);
      if (kind !== 'O') {
        actions.push({ kind: 'ignored', key, reason: `${OBJECT_KINDS[kind] ?? `"${kind}:"`} notifications are not orders: nothing to accrue or reverse` });
        return;
      }
      if (!CLOVER_ID.test(objectId)) {
        throw ValidationError.field(`merchants.${merchantId}.${i}.objectId`, 'must be "O:" and a 13-character Clover order id');
      }
      if (!isNotificationType(n.type)) {
        actions.push({ kind: 'ignored', key, reason: `order notification type ${JSON.stringify(n.type)} is not one Clover documents (CREATE, UPDATE, DELETE)` });
        return;
      }
      switch (n.type) {
        case 'CREATE':
        case 'UPDATE':
          actions.push({
            kind: 'fetch',
            key,
            fetch: (api) => fetchOrder(api, merchantId, objectId),
            decide: (fetched) => decideOrder(fetched, merchantId, objectId, key),
          });
          return;
        case 'DELETE':
          // A deleted order is an unpaid one (paid orders are refunded, not deleted): nothing to do.
          actions.push({ kind: 'ignored', key, reason: `order ${objectId} was deleted: nothing to accrue or reverse` });
          return;
        default: {
          const unreachable: never = n.type;
          throw new Error(`unhandled Clover notification type ${String(unreachable)}`);
        }
      }
    });
  }
  return actions;
}

export const cloverWebhook: WebhookSpec = {
  signature: { kind: 'static', header: CLOVER_AUTH_HEADER },
  classify: classifyCloverWebhook,
  accounts: cloverAccounts,
  unsignedHandshake: cloverVerificationCode,
};

/**
 * One part per merchant of the `merchants` map: Clover batches notifications of every merchant that
 * installed the app into one POST, and each merchant's are that merchant's work alone.
 */
export function cloverAccounts(body: unknown): WebhookPart[] {
  const merchants = isObject(body) ? body.merchants : undefined;
  if (!isObject(merchants) || Object.keys(merchants).length === 0) return [{ body }];
  return Object.entries(merchants).map(([merchant, notifications]) => ({ account: merchant, body: { ...(body as object), merchants: { [merchant]: notifications } } }));
}
