/**
 * Square webhooks (Square developer docs, "Webhooks" and "Validate notifications"):
 * - authenticity: `x-square-hmacsha256-signature` = base64(HMAC-SHA256(signature key,
 *   notification URL + raw body)); the URL is the one configured in Square's dashboard, exactly
 *   (SQUARE_NOTIFICATION_URL), since the bridge cannot reconstruct it behind proxies;
 * - event type in the body's `type`, the delivery's identity in `event_id` (repeats of one event
 *   keep it: Square retries for up to 24 h);
 * - `order.created` / `order.updated` carry only ids and the state (`data.object.order_created |
 *   order_updated {order_id, state, version}`): the order is fetched (GET /v2/orders/{id}) before
 *   it is translated. `order.updated` fires once per version; every version maps to the same
 *   transactionId, so the core records and accrues the order once;
 * - `refund.created` / `refund.updated` carry the PaymentRefund itself; it is acted on when its
 *   status is COMPLETED, after fetching the order its order_id names (the return order); without
 *   SQUARE_ACCESS_TOKEN, measured against the sale the ledger recorded.
 */
import { ValidationError } from '../../src/kernel/errors.js';
import { namedIn, type SignatureScheme, type WebhookAction, type WebhookSpec } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { retrieveOrder } from './api.js';
import { COMPLETED, parseOrder } from './checkout.js';
import { OrderNotice, PaymentRefund, SquareEvent } from './schema.js';

export const SIGNATURE_HEADER = 'x-square-hmacsha256-signature';

export const squareSignature: SignatureScheme = {
  kind: 'hmac',
  header: SIGNATURE_HEADER,
  algorithm: 'sha256',
  encodings: ['base64'],
  // Without the notification URL the signed bytes are unknown: undefined makes the core answer 401.
  message: (raw, _headers, settings) => (settings.notificationUrl ? Buffer.concat([Buffer.from(settings.notificationUrl, 'utf8'), raw]) : undefined),
  // The body's `created_at` (the event's time) is signed with it. Square retries an event for up
  // to 24 h with the same body, so the window is a day and two hours; older deliveries are refused.
  replay: { signedAt: eventCreatedAt, windowMs: 26 * 3600_000, why: 'Square retries an event for up to 24 h' },
};

/** The event's `created_at`, when the body is an object that states one. */
function eventCreatedAt(raw: Buffer): string | undefined {
  try {
    const body: unknown = JSON.parse(raw.toString('utf8'));
    const createdAt = isObject(body) ? body.created_at : undefined;
    return typeof createdAt === 'string' ? createdAt : undefined;
  } catch {
    return undefined;
  }
}

/** The event types the bridge names; anything else (and every loyalty.*) is acknowledged and ignored. */
const NAMED_EVENTS = ['order.created', 'order.updated', 'order.fulfillment.updated', 'refund.created', 'refund.updated', 'payment.created', 'payment.updated'] as const;
type NamedEvent = (typeof NAMED_EVENTS)[number];
const isNamed = (type: string): type is NamedEvent => (NAMED_EVENTS as readonly string[]).includes(type);

/** PaymentRefund.status values (Square API reference). */
const REFUND_STATUSES = ['PENDING', 'COMPLETED', 'REJECTED', 'FAILED'] as const;
type RefundStatus = (typeof REFUND_STATUSES)[number];
const isRefundStatus = (status: string): status is RefundStatus => (REFUND_STATUSES as readonly string[]).includes(status);

const ignored = (key: string, reason: string): WebhookAction => ({ kind: 'ignored', key, reason });

function objectOf(event: SquareEvent, name: string): unknown {
  return event.data?.object?.[name];
}

/** After fetching: a COMPLETED sale is a checkout; anything else is acknowledged with the reason. */
export function decideOrder(fetched: unknown, orderId: string, key: string): WebhookAction {
  const { order, prefix } = parseOrder(fetched);
  if (order.id !== orderId) {
    throw ValidationError.field([prefix, 'id'].filter(Boolean).join('.'), `is ${JSON.stringify(order.id ?? null)} but the webhook named order ${JSON.stringify(orderId)}`);
  }
  if (order.state !== COMPLETED) return ignored(key, `order ${orderId} is ${order.state ?? 'without a state'}: only ${COMPLETED} orders accrue`);
  if ((order.returns ?? []).length > 0 && (order.line_items ?? []).length === 0) {
    return ignored(key, `order ${orderId} is a return order: it is reversed through its PaymentRefund once that is ${COMPLETED} (refund.created / refund.updated)`);
  }
  // Exchanges (returns and new lines together) go on to the checkout, which refuses them loudly.
  return { kind: 'checkout', key, payload: fetched };
}

function orderAction(event: SquareEvent, field: 'order_created' | 'order_updated', key: string): WebhookAction {
  const notice = parseWith(OrderNotice, objectOf(event, field), `data.object.${field}`);
  const version = notice.version === undefined || notice.version === null ? '' : ` (version ${notice.version})`;
  // The notice states the order's state at this version: an OPEN or DRAFT order is not a sale yet,
  // and the version that completes it sends its own order.updated; no need to call Square for it.
  if (notice.state && notice.state !== COMPLETED) {
    return ignored(key, `order ${notice.order_id} is ${notice.state}${version}: only ${COMPLETED} orders accrue; the update that completes it is acted on`);
  }
  return { kind: 'fetch', key, fetch: (api) => retrieveOrder(api, notice.order_id), decide: (fetched) => decideOrder(fetched, notice.order_id, key) };
}

function refundAction(event: SquareEvent, key: string): WebhookAction {
  const raw = objectOf(event, 'refund');
  const refund = parseWith(PaymentRefund, raw, 'data.object.refund');
  const status = refund.status;
  if (!isRefundStatus(status)) {
    throw ValidationError.field('data.object.refund.status', `is ${JSON.stringify(status)}: not a PaymentRefund status the bridge knows (${REFUND_STATUSES.join(', ')})`);
  }
  switch (status) {
    case 'PENDING':
      return ignored(key, `refund ${refund.id} is PENDING: waits for COMPLETED (a later refund.updated)`);
    case 'REJECTED':
    case 'FAILED':
      return ignored(key, `refund ${refund.id} is ${status}: no money went back, nothing to reverse`);
    case 'COMPLETED': {
      const orderId = refund.order_id;
      if (!orderId) {
        if (refund.unlinked) return ignored(key, `refund ${refund.id} is unlinked (not tied to a Square payment or order): nothing to reverse`);
        throw ValidationError.field('data.object.refund.order_id', 'is required: it names the order the refund belongs to');
      }
      // The refund's order is the return order Square created for it; its return lines measure the
      // refund tax-excluded. The PaymentRefund travels with it so parseRefund can check they match.
      // Without SQUARE_ACCESS_TOKEN it travels alone and is measured against the sale as the ledger
      // recorded it (refund.ts, refundWithoutOrder). When Square's API fails it waits instead, as a
      // dead letter the bridge retries: the return order's exact figures are worth the wait.
      return {
        kind: 'fetch',
        key,
        fetch: (api) => retrieveOrder(api, orderId),
        decide: (fetched) => ({ kind: 'refund', key, payload: { refund: raw, order: fetched } }),
        withoutApi: () => ({ kind: 'refund', key, payload: { refund: raw } }),
      };
    }
    default: {
      const unreachable: never = status;
      throw new Error(`unhandled refund status ${String(unreachable)}`);
    }
  }
}

export function classifySquare(body: unknown): WebhookAction[] {
  if (!isObject(body)) throw ValidationError.field('', 'must be a Square webhook event (a JSON object)');
  const event = parseWith(SquareEvent, body);
  const { type, event_id: key } = event;
  if (!isNamed(type)) {
    return [ignored(key, type.startsWith('loyalty.') ? `${type}: Square Loyalty's own events; the bridge accrues from COMPLETED orders` : `${type} is not a Square event the bridge acts on`)];
  }
  switch (type) {
    case 'order.created':
      return [orderAction(event, 'order_created', key)];
    case 'order.updated':
      return [orderAction(event, 'order_updated', key)];
    case 'order.fulfillment.updated':
      return [ignored(key, `${type}: a fulfillment's progress; the order's own order.updated says when it is ${COMPLETED}`)];
    case 'refund.created':
    case 'refund.updated':
      return [refundAction(event, key)];
    case 'payment.created':
    case 'payment.updated':
      return [ignored(key, `${type}: payments are not what accrues; the ${COMPLETED} order is (order.created / order.updated)`)];
    default: {
      const unreachable: never = type;
      throw new Error(`unhandled Square event ${String(unreachable)}`);
    }
  }
}

export const squareWebhook: WebhookSpec = {
  signature: squareSignature,
  classify: (body) => classifySquare(body),
  // Square names the seller in every event's `merchant_id`, which the signature covers.
  accounts: (body) => [{ account: namedIn(body, 'merchant_id'), body }],
};
