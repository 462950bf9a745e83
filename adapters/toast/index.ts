/**
 * The Toast adapter: Toast orders API v2 `Order` objects (bare, or wrapped as `{ "order": … }` or
 * `{ "orders": [ … ] }`) and the orders webhook (`order_updated`, `channel_order_updated`).
 *
 * Identity. `Order.guid` is a GUID, unique across restaurants, so it is the orderId with no scope:
 * transactionId `toast:<order guid>`.
 *
 * When to accrue. Toast sends the whole order on every change (a new order is an update too), so
 * the order's state decides: an order all of whose live checks are `PAID` or `CLOSED` is a
 * checkout; an open order is acknowledged and ignored; a deleted order (its checks were combined
 * into another order) is ignored; a voided order that had payments is a full refund. The core
 * records one accrual per transactionId, so the many updates of a paid order accrue once.
 *
 * Refunds stay on the order (pos-facts "Order identity and refunds"): `payments[].refundStatus`
 * NONE/PARTIAL/FULL and `refundDetails` on each refunded selection or service charge. See
 * `refund.ts` for how they are measured and identified.
 *
 * Money is major units in JSON numbers, read through their decimal text (schema.ts); the order has
 * no currency, so the Check takes DEFAULT_CURRENCY.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../../src/errors.js';
import type { Check as UpstreamCheck, Selection as CheckSelection } from '../../src/loyalty/contract.js';
import { centsToDecimalString } from '../../src/money.js';
import type { CheckPart } from '../../src/pos/check.js';
import { isObject, parseWith } from '../../src/validation.js';
import type { AdapterContext, CheckoutIntent, PosAdapter, RefundIntent, WebhookAction } from '../../src/pos/contract.js';
import { customerOf } from './customer.js';
import { at, liveChecks, livePayments, readOrder, selectionOf, stateOf, type ReadOrder } from './order.js';
import { refundIntent, refundsOf } from './refund.js';
import { Envelope, Order, type Check } from './schema.js';
import { timestampOf, TOAST_REPLAY_WINDOW, TOAST_SIGNATURE_HEADER } from './signature.js';

/** Toast writes `2019-02-24T13:48:44.206+0000`; the Check carries ISO 8601 UTC. */
const TOAST_DATE = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})$/;

function isoDate(value: string | null | undefined, field: string): string | undefined {
  if (!value) return undefined;
  const m = TOAST_DATE.exec(value.trim());
  const offset = m?.[3] === 'Z' ? 'Z' : m?.[3]?.replace(/^([+-]\d{2}):?(\d{2})$/, '$1:$2');
  const time = m ? Date.parse(`${m[1]}${m[2] ? `.${m[2].slice(0, 3).padEnd(3, '0')}` : ''}${offset}`) : NaN;
  if (Number.isNaN(time)) throw ValidationError.field(field, `must be an ISO 8601 date-time such as 2019-02-24T13:48:44.206+0000, got ${JSON.stringify(value.slice(0, 40))}`);
  return new Date(time).toISOString();
}

/** Discounts describe the sale; loyalty discounts whose redemption was voided are gone from it. */
function discountCents(discounts: Check['appliedDiscounts']): number {
  return discounts.reduce((sum, d) => (d.processingState === 'VOID' || d.processingState === 'PENDING_VOID' ? sum : sum + (d.nonTaxDiscountAmount ?? d.discountAmount ?? 0)), 0);
}

/**
 * Positive parts only: the Check carries tax, tip, discount and service when they come to more than
 * zero. Not the other adapters' `nonZero` (src/pos/check.ts): a part that comes to less than zero is
 * left out here too, as Toast's translation always did. Only service charges and gratuities can
 * (a CASH_ROUNDING charge rounds a check down), so a check whose charges sum below zero sends no
 * serviceAmount, where `nonZero` would send the negative figure.
 */
function positiveOnly(key: CheckPart, cents: number): Partial<Pick<UpstreamCheck, CheckPart>> {
  return cents > 0 ? { [key]: cents } : {};
}

function checkoutOf(read: ReadOrder, context: AdapterContext): CheckoutIntent {
  const { order, prefix } = read;
  const live = liveChecks(read);
  let amount = 0;
  let tax = 0;
  let tip = 0;
  let discount = 0;
  let service = 0;
  const selections: CheckSelection[] = [];
  for (const { check, path } of live) {
    if (check.amount === undefined || check.amount === null) throw ValidationError.field(`${path}.amount`, 'is required on a check that is not voided');
    let items = 0;
    check.selections.forEach((selection, j) => {
      if (selection.voided) return;
      const line = selectionOf(selection, `${path}.selections.${j}`);
      selections.push(line);
      items += line.totalPrice;
      discount += discountCents(selection.appliedDiscounts);
    });
    let charges = 0;
    let gratuity = 0;
    check.appliedServiceCharges.forEach((charge, k) => {
      if (charge.chargeAmount === undefined || charge.chargeAmount === null) throw ValidationError.field(`${path}.appliedServiceCharges.${k}.chargeAmount`, 'is required: the service charge is part of the check amount');
      // A gratuity service charge is a tip the restaurant imposes: tip, not purchase (contract: tip excluded).
      if (charge.gratuity) gratuity += charge.chargeAmount;
      else charges += charge.chargeAmount;
    });
    // Toast's `amount` is "including discounts and service charges, not including gratuity or
    // taxes". Its parts must add up to it; whether a gratuity charge is inside is not confirmed, so
    // both readings are tried and anything else is refused rather than sent as a guess.
    let checkAmount: number;
    if (items + charges === check.amount) checkAmount = check.amount;
    else if (gratuity !== 0 && items + charges + gratuity === check.amount) checkAmount = check.amount - gratuity;
    else {
      throw ValidationError.field(
        `${path}.amount`,
        `is ${centsToDecimalString(check.amount)} but the check's selections (price) and service charges (chargeAmount) add up to ${centsToDecimalString(items + charges)}` +
          (gratuity ? ` (${centsToDecimalString(items + charges + gratuity)} with its gratuity)` : '') +
          ': the bridge cannot tell which amount the loyalty service should see',
      );
    }
    if (checkAmount < 0) throw ValidationError.field(`${path}.amount`, `comes to ${centsToDecimalString(checkAmount)} without gratuity: a purchase cannot be negative`);
    amount += checkAmount;
    service += charges;
    tip += gratuity;
    tax += check.taxAmount ?? 0;
    discount += discountCents(check.appliedDiscounts);
    for (const { payment } of livePayments(check)) tip += payment.tipAmount ?? 0;
  }
  const closedAt = isoDate(order.closedDate, at(prefix, 'closedDate')) ?? isoDate(order.paidDate, at(prefix, 'paidDate'));
  const openedAt = isoDate(order.openedDate, at(prefix, 'openedDate'));
  return {
    orderId: order.guid,
    customer: customerOf(live, context.defaultPhoneRegion),
    check: {
      amount,
      currency: context.defaultCurrency,
      selections,
      externalTransactionId: order.guid,
      ...(openedAt ? { checkOpenedAt: openedAt } : {}),
      ...(closedAt ? { checkClosedAt: closedAt } : {}),
      ...positiveOnly('taxAmount', tax),
      ...positiveOnly('discountAmount', discount),
      ...positiveOnly('tipAmount', tip),
      ...positiveOnly('serviceAmount', service),
    },
  };
}

function parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
  const read = readOrder(body);
  const state = stateOf(read);
  switch (state.kind) {
    case 'closed':
      return checkoutOf(read, context);
    case 'open':
      throw ValidationError.field(state.field, state.reason);
    case 'voided':
      throw ValidationError.field(at(read.prefix, 'voided'), 'the order is voided: post it to /v1/refunds/toast to reverse its accrual');
    case 'deleted':
      throw ValidationError.field(at(read.prefix, 'deleted'), 'is true: the order was deleted (its checks were combined into another order), so it is not a sale of its own');
    default: {
      const never: never = state;
      throw new Error(`unhandled order state ${JSON.stringify(never)}`);
    }
  }
}

function parseRefund(body: unknown): RefundIntent {
  const read = readOrder(body);
  const { order } = read;
  if (order.deleted) throw ValidationError.field(at(read.prefix, 'deleted'), 'is true: a deleted order was never a sale of its own, so there is nothing to refund');
  // A void takes back the whole sale, whatever was refunded before.
  if (stateOf(read).kind === 'voided') return { orderId: order.guid, refundId: `void:${order.guid}` };
  const refunds = refundsOf(read);
  if (read.refundTransactionGuid) {
    const group = refunds.groups.find((g) => g.id === read.refundTransactionGuid);
    if (!group) {
      throw ValidationError.field('refundTransactionGuid', `names no refund transaction of this order; it has ${refunds.groups.map((g) => g.id).join(', ') || 'none'}`);
    }
    return refundIntent(read, group);
  }
  if (refunds.full) return { orderId: order.guid, refundId: `full:${order.guid}` };
  const measured = refunds.groups.filter((g) => g.cents > 0);
  if (measured.length === 1) return refundIntent(read, measured[0]!);
  if (measured.length > 1) {
    throw ValidationError.field(
      'refundTransactionGuid',
      `is required: this order carries ${measured.length} refunds (${measured.map((g) => g.id).join(', ')}); post each as { "order": …, "refundTransactionGuid": "…" }`,
    );
  }
  if (refunds.groups.length > 0) throw ValidationError.field(at(read.prefix, 'checks'), 'the refund returns only tax or gratuity: no purchase amount to take back');
  throw ValidationError.field(at(read.prefix, 'checks'), 'carry no refund: no payment has refundStatus FULL, no selection or service charge has refundDetails, and the order is not voided');
}

// ------------------------------------------------------------------ webhooks

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
  const read: ReadOrder = { raw, order: parseWith(Order, raw, prefix), prefix };
  const orderGuid = read.order.guid;
  const state = stateOf(read);
  switch (state.kind) {
    case 'deleted':
      return [{ kind: 'ignored', key: eventGuid, reason: `order ${orderGuid} was deleted (its checks were combined into another order)` }];
    case 'open':
      return [{ kind: 'ignored', key: eventGuid, reason: `order ${orderGuid} is not paid yet (${state.field} ${state.reason})` }];
    case 'voided':
      return state.paid
        ? [{ kind: 'refund', key: `${eventGuid}:refund:void`, payload: raw }]
        : [{ kind: 'ignored', key: eventGuid, reason: `order ${orderGuid} was voided before it was paid: nothing was accrued` }];
    case 'closed': {
      // The checkout comes first even when the order already shows refunds: a partial refund needs
      // the accrual it reduces, and a repeated checkout is answered from the ledger without a call.
      const actions: WebhookAction[] = [{ kind: 'checkout', key: `${eventGuid}:checkout`, payload: raw }];
      const refunds = refundsOf(read);
      if (refunds.full) {
        // Everything came back: one full reversal of what remains, whatever was refunded before.
        actions.push({ kind: 'refund', key: `${eventGuid}:refund:full`, payload: raw });
      } else {
        // One partial refund per refund transaction; a transaction applied before is a repeat to the core.
        for (const group of refunds.groups.filter((g) => g.cents > 0)) {
          actions.push({ kind: 'refund', key: `${eventGuid}:refund:${group.id}`, payload: { order: raw, refundTransactionGuid: group.id } });
        }
      }
      return actions;
    }
    default: {
      const never: never = state;
      throw new Error(`unhandled order state ${JSON.stringify(never)}`);
    }
  }
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

export const toastAdapter: PosAdapter = {
  name: 'toast',
  parseCheckout,
  parseRefund,
  webhook: {
    signature: {
      kind: 'hmac',
      header: TOAST_SIGNATURE_HEADER,
      algorithm: 'sha256',
      encodings: ['base64'],
      // Toast: base64(HMAC-SHA256(secret, body + timestamp)); see signature.ts for which timestamp.
      message(raw, headers) {
        const timestamp = timestampOf(raw, headers);
        return timestamp === undefined ? undefined : Buffer.concat([raw, Buffer.from(timestamp, 'utf8')]);
      },
      replay: TOAST_REPLAY_WINDOW,
    },
    classify,
  },
};
