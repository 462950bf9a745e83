/**
 * Clover refunds → refund intents (pure). A refund is measured like the sale, without the tax and
 * tip inside its amount, in its order's merchant scope (checkout.ts): the merchant the refund names
 * (`merchant.id`, or the href of its `orderRef`), else the posting merchant's Clover account
 * (`requireMerchant`); a refund that gives back only tax and tip reverses nothing.
 */
import { ValidationError } from '../../src/kernel/errors.js';
import { assertCurrency, minorUnitsToCents } from '../../src/kernel/money.js';
import type { AdapterContext, RefundIntent } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { countedPayments, HREF_MERCHANT, merchantOf, requireMerchant, sum } from './checkout.js';
import { CloverOrder, CloverRefund } from './schema.js';

/** Every refund of the order, from `refunds` and from `payments[].refunds`, once each by id. */
export function refundsOf(order: CloverOrder): CloverRefund[] {
  const byId = new Map<string, CloverRefund>();
  for (const r of order.refunds ?? []) byId.set(r.id, r);
  for (const p of order.payments ?? []) for (const r of p.refunds ?? []) if (!byId.has(r.id)) byId.set(r.id, r);
  return [...byId.values()];
}

/** What a refund gives back of the purchase: its amount less the tax and tip inside it (minor units). */
export function refundNet(refund: CloverRefund, prefix: string): bigint {
  if (refund.taxAmount == null) {
    throw ValidationError.field(`${prefix}taxAmount`, 'is required: a Clover refund amount includes tax, and the bridge measures refunds without it');
  }
  const net = refund.amount - refund.taxAmount - (refund.tipAmount ?? 0n);
  if (net < 0n) throw ValidationError.field(`${prefix}amount`, `is less than the tax and tip it includes (${refund.amount} < ${refund.taxAmount} + ${refund.tipAmount ?? 0n})`);
  return net;
}

function parseBareRefund(raw: unknown, prefix: string, context: AdapterContext): RefundIntent {
  const refund = parseWith(CloverRefund, raw, prefix.replace(/\.$/, ''));
  if (!refund.orderRef) throw ValidationError.field(`${prefix}orderRef.id`, 'is required: it names the refunded order');
  const merchant = requireMerchant(merchantOf(refund, prefix, 'refund') ?? (refund.orderRef.href ? HREF_MERCHANT.exec(refund.orderRef.href)?.[1] : undefined), prefix, 'order', context);
  // A Clover refund carries no currency: it is the merchant's, DEFAULT_CURRENCY (unless stated here).
  const currency = assertCurrency(isObject(raw) && typeof raw.currency === 'string' ? raw.currency : context.defaultCurrency, `${prefix}currency`);
  const net = refundNet(refund, prefix);
  if (net === 0n) throw ValidationError.field(`${prefix}amount`, 'gives back only tax and tip: there is no purchase amount to reverse');
  // Measured alone, a refund is partial by its amount; the core reverses in full when it covers all
  // that remains of the order (remainder 0).
  return { orderId: refund.orderRef.id, scope: merchant, refundId: refund.id, amountCents: minorUnitsToCents(net, currency, `${prefix}amount`) };
}

/**
 * True when the order's refunds together give back all that was paid (gross, tip excluded,
 * Clover's own numbers). Unknown (false) when the order came without its payments.
 */
export function refundsCoverOrder(order: CloverOrder, refunds: CloverRefund[], prefix: string): boolean {
  if (!order.payments) return false;
  const paid = sum(countedPayments(order, prefix).map(({ payment }) => payment.amount));
  const refunded = sum(refunds.map((r) => r.amount - (r.tipAmount ?? 0n)));
  return paid > 0n && refunded >= paid;
}

/** The order's refunds, oldest first by `createdTime` (ties by id); with several, each must carry one (else which is new is a guess). */
export function refundsInOrder(refunds: CloverRefund[], field: string): CloverRefund[] {
  if (refunds.length > 1 && refunds.some((r) => r.createdTime == null)) {
    throw ValidationError.field(`${field}`, 'hold several refunds, and not all have a createdTime: which one is new cannot be told');
  }
  return [...refunds].sort((a, b) => (a.createdTime ?? 0) - (b.createdTime ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * An order carrying its refunds (what the bridge fetches for a webhook, or a client posts), acting
 * on one of them: `refundId`, else the latest. Full when it is the latest and all the order's
 * refunds together give back all that was paid; else partial by that refund's amount without tax
 * and tip. Several refunds new at once are each applied by their own id (the webhook asks for one
 * action per refund), so an earlier one is never lost behind the latest.
 */
function parseOrderRefund(raw: unknown, prefix: string, context: AdapterContext, refundId?: unknown): RefundIntent {
  const order = parseWith(CloverOrder, raw, prefix.replace(/\.$/, ''));
  const merchant = requireMerchant(merchantOf(order, prefix), prefix, 'order', context);
  const currency = assertCurrency(order.currency ?? context.defaultCurrency, `${prefix}currency`);
  const refunds = refundsOf(order);
  if (refunds.length === 0) throw ValidationError.field(`${prefix}refunds`, 'are empty: this order has not been refunded');
  for (const r of refunds) {
    if (r.orderRef && r.orderRef.id !== order.id) throw ValidationError.field(`${prefix}refunds`, `hold refund ${r.id} of another order (${r.orderRef.id})`);
  }
  const latest = refundsInOrder(refunds, `${prefix}refunds`).at(-1)!;
  if (refundId !== undefined && typeof refundId !== 'string') throw ValidationError.field('refundId', 'must be the id of one of the order\'s refunds');
  const chosen = refundId === undefined ? latest : refunds.find((r) => r.id === refundId);
  if (!chosen) throw ValidationError.field('refundId', `names no refund of order ${order.id} (it has ${refunds.map((r) => r.id).join(', ')})`);
  if (chosen === latest && refundsCoverOrder(order, refunds, prefix)) {
    // With several refunds, the full reversal has its own id: the latest may already have been
    // applied as a partial one (a fetch that missed an earlier refund), and must not hide the full.
    return { orderId: order.id, scope: merchant, refundId: refunds.length === 1 ? latest.id : `${latest.id}:full` };
  }
  const field = `${prefix}refunds[${chosen.id}].`;
  const net = refundNet(chosen, field);
  if (net === 0n) throw ValidationError.field(`${field}amount`, 'gives back only tax and tip: there is no purchase amount to reverse');
  return { orderId: order.id, scope: merchant, refundId: chosen.id, amountCents: minorUnitsToCents(net, currency, `${field}amount`) };
}

/**
 * Accepted: a bare Refund (`{ id, orderRef, amount, taxAmount, tipAmount, … }`), `{ "refund": … }`,
 * an order with its refunds (bare or `{ "order": … }`, which may name the refund to act on:
 * `{ "order": …, "refundId": … }`).
 */
export function parseCloverRefund(body: unknown, context: AdapterContext): RefundIntent {
  if (isObject(body) && isObject(body.refund) && !('orderRef' in body)) return parseBareRefund(body.refund, 'refund.', context);
  if (isObject(body) && isObject(body.order) && !('id' in body)) return parseOrderRefund(body.order, 'order.', context, body.refundId);
  if (isObject(body) && !('orderRef' in body) && ('refunds' in body || 'payments' in body || 'lineItems' in body || 'total' in body)) {
    return parseOrderRefund(body, '', context);
  }
  return parseBareRefund(body, '', context);
}
