/**
 * A Shopify refund (`refunds/create`, REST `Refund`) → the neutral refund intent.
 *
 * Shopify refunds are itemized: `refund_line_items[]` name the order line (`line_item_id`, with the
 * line embedded as `line_item`), the quantity, and its `subtotal` and `total_tax`. Each becomes a
 * RefundLine keyed like the checkout's selection (variant id, or `line:<line item id>`), so the
 * core takes exactly those units off the accrued Check. The intent is always itemized; when the
 * lines cover everything that remains of the order, the core finds nothing left and reverses the
 * whole accrual (a full refund). Shipping (`order_adjustments` of kind `shipping_refund`), duties
 * and the refunded tax are not part of the measure: refunds are measured like `Check.amount`.
 *
 * TAX. `subtotal` is tax-excluded in taxes-on-top shops (fixture refunds_create_pos_partial_CAD:
 * 143.97 + tax 17.28 = the 161.25 refunded). In taxes-included shops it is unconfirmed whether it
 * contains the tax, and the refund does not carry `taxes_included`. So, when the refunded lines
 * carry tax, the money actually refunded (`transactions` of kind `refund`) decides: it must equal
 * either the lines with tax on top or the lines with tax inside (± shipping and discrepancy
 * adjustments, + duties), and exactly one of them; otherwise the refund is refused (loudly) rather
 * than measured on a guess.
 *
 * Old payloads (2016) have no `subtotal`/`total_tax` on refund lines: they are worked out from the
 * embedded line when the whole line is refunded, or when nothing about it was discounted or taxed;
 * otherwise the refund is refused.
 */
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import { decimalToCents, mulDecimal, nonNegativeCents, parseDecimal } from '../../src/kernel/money.js';
import type { RefundIntent, RefundLine } from '../../src/pos/contract.js';
import { parseWith } from '../../src/kernel/validation.js';
import { at, presentmentCents, requiredShopCents, selectionId, shopCents, show, sum } from './checkout.js';
import { Refund, unwrap, type MoneySet, type RefundedLineItem, type RefundLineItem } from './schema.js';

/** Transaction statuses that moved no money. */
const FAILED = new Set(['failure', 'error']);

interface Figure {
  shop: number;
  /** The same figure in the buyer's currency, when every part of it states one. */
  presentment?: { currency: string; cents: number };
}

interface ReadRefundLine {
  id: string;
  quantity: number;
  subtotal: Figure;
  tax: Figure;
}

function figure(shop: number, set: MoneySet | null | undefined, field: string, signed = false): Figure {
  const presentment = presentmentCents(set, field, { signed });
  return presentment ? { shop, presentment } : { shop };
}

function addFigures(figures: Figure[]): Figure {
  const shop = sum(figures.map((f) => f.shop));
  const currencies = new Set(figures.map((f) => f.presentment?.currency));
  const [currency] = [...currencies];
  if (figures.length > 0 && currencies.size === 1 && currency) return { shop, presentment: { currency, cents: sum(figures.map((f) => f.presentment!.cents)) } };
  return { shop };
}

function embeddedDiscount(line: RefundedLineItem, field: string): number {
  if (line.discount_allocations?.length) {
    return sum(line.discount_allocations.map((a, j) => requiredShopCents(a.amount, a.amount_set, `${field}.line_item.discount_allocations.${j}.amount`)));
  }
  return line.total_discount === null || line.total_discount === undefined ? 0 : nonNegativeCents(line.total_discount, `${field}.line_item.total_discount`);
}

/** `subtotal` of an old-shape refund line: price × quantity less the line's discount, when that is exact. */
function derivedSubtotal(line: RefundedLineItem, quantity: number, field: string): number {
  if (line.price === null || line.price === undefined) {
    throw ValidationError.field(`${field}.subtotal`, 'is required (the embedded line_item has no price to work it out from)');
  }
  const unit = parseDecimal(line.price, `${field}.line_item.price`);
  if (unit.units < 0n) throw ValidationError.field(`${field}.line_item.price`, 'must not be negative');
  const gross = decimalToCents(mulDecimal(unit, { units: BigInt(quantity), scale: 0 }), `${field}.line_item.price`);
  const discount = embeddedDiscount(line, field);
  if (discount === 0) return gross;
  if (line.quantity === quantity) return gross - discount;
  throw ValidationError.field(`${field}.subtotal`, 'is required when part of a discounted line is refunded: how Shopify split the discount is not in the payload');
}

/** `total_tax` of an old-shape refund line: the line's tax when all of it (or nothing taxed) is refunded. */
function derivedTax(line: RefundedLineItem, quantity: number, field: string): number {
  const tax = sum((line.tax_lines ?? []).map((t, j) => requiredShopCents(t.price, t.price_set, `${field}.line_item.tax_lines.${j}.price`)));
  if (tax === 0 || line.quantity === quantity) return tax;
  throw ValidationError.field(`${field}.total_tax`, 'is required when part of a taxed line is refunded: how Shopify split the tax is not in the payload');
}

function readRefundLine(line: RefundLineItem, field: string): ReadRefundLine | undefined {
  const quantity = line.quantity;
  if (!Number.isSafeInteger(quantity) || quantity < 0) {
    throw ValidationError.field(`${field}.quantity`, `must be a whole number of units (Shopify quantities are integers), got ${quantity}`);
  }
  if (quantity === 0) return undefined;
  const embedded = line.line_item;
  if (!embedded) throw ValidationError.field(`${field}.line_item`, 'is required: its variant_id names the selection the refunded units were accrued under');
  if (embedded.id && embedded.id !== line.line_item_id) {
    throw ValidationError.field(`${field}.line_item.id`, `is ${echoed(String(embedded.id))}, but line_item_id is ${echoed(String(line.line_item_id))}`);
  }
  if (typeof embedded.quantity === 'number' && quantity > embedded.quantity) {
    throw ValidationError.field(`${field}.quantity`, `refunds ${quantity} units of a line that sold ${embedded.quantity}`);
  }
  const subtotal = shopCents(line.subtotal, line.subtotal_set, `${field}.subtotal`) ?? derivedSubtotal(embedded, quantity, field);
  const tax = shopCents(line.total_tax, line.total_tax_set, `${field}.total_tax`) ?? derivedTax(embedded, quantity, field);
  if (tax > subtotal) {
    // No real tax rate makes a line's tax exceed its price: the fields are being misread.
    throw ValidationError.field(`${field}.total_tax`, `is ${show(tax)}, more than the subtotal ${show(subtotal)}`);
  }
  return {
    id: selectionId(embedded.variant_id, line.line_item_id),
    quantity,
    subtotal: figure(subtotal, line.subtotal_set, `${field}.subtotal`),
    tax: figure(tax, line.total_tax_set, `${field}.total_tax`),
  };
}

/** Every `*_set.shop_money.currency_code` of the refund must be one currency: the shop's. */
function shopCurrencyOf(refund: Refund, prefix: string): string | undefined {
  const sets: (MoneySet | null | undefined)[] = [
    refund.total_duties_set,
    ...(refund.refund_line_items ?? []).flatMap((l) => [l.subtotal_set, l.total_tax_set]),
    ...(refund.order_adjustments ?? []).flatMap((a) => [a.amount_set, a.tax_amount_set]),
  ];
  const codes = new Set(sets.map((s) => s?.shop_money.currency_code).filter((c): c is string => Boolean(c)));
  if (codes.size > 1) throw ValidationError.field(at(prefix, 'refund_line_items'), `the shop-currency amounts are in several currencies (${echoed([...codes].join(', '))})`);
  return [...codes][0];
}

interface Adjustments {
  amount: Figure;
  tax: Figure;
}

function readAdjustments(refund: Refund, prefix: string, currency: string | undefined): Adjustments {
  const amounts: Figure[] = [];
  const taxes: Figure[] = [];
  (refund.order_adjustments ?? []).forEach((a, i) => {
    const field = at(prefix, `order_adjustments.${i}`);
    amounts.push(figure(shopCents(a.amount, a.amount_set, `${field}.amount`, { signed: true, currency }) ?? 0, a.amount_set, `${field}.amount`, true));
    taxes.push(figure(shopCents(a.tax_amount, a.tax_amount_set, `${field}.tax_amount`, { signed: true, currency }) ?? 0, a.tax_amount_set, `${field}.tax_amount`, true));
  });
  return { amount: addFigures(amounts), tax: addFigures(taxes) };
}

/** The money the refund returned, in its transactions' one currency. */
function refunded(refund: Refund, prefix: string): { cents: number; currency?: string } {
  const transactions = (refund.transactions ?? []).map((t, i) => ({ t, field: at(prefix, `transactions.${i}`) })).filter(({ t }) => t.kind === 'refund' && !FAILED.has(t.status ?? ''));
  const currencies = new Set(transactions.map(({ t }) => t.currency).filter((c): c is string => Boolean(c)));
  if (currencies.size > 1) throw ValidationError.field(at(prefix, 'transactions'), `return money in several currencies (${echoed([...currencies].join(', '))})`);
  return { cents: sum(transactions.map(({ t, field }) => nonNegativeCents(t.amount, `${field}.amount`))), currency: [...currencies][0] };
}

/** A figure in the transactions' currency: the shop's, or the presentment twin when the money moved in the buyer's. */
function inCurrency(figures: Figure[], currency: string | undefined, shopCurrency: string | undefined): number | undefined {
  if (!currency || !shopCurrency || currency === shopCurrency) return sum(figures.map((f) => f.shop));
  if (figures.every((f) => f.presentment?.currency === currency || (f.shop === 0 && !f.presentment))) return sum(figures.map((f) => f.presentment?.cents ?? 0));
  return undefined;
}

/**
 * Whether the refund lines' `subtotal` contains their tax, decided by the money refunded (see the
 * top of this file). Only asked when the refunded lines carry tax.
 */
function subtotalIncludesTax(refund: Refund, lines: ReadRefundLine[], prefix: string): boolean {
  const shopCurrency = shopCurrencyOf(refund, prefix);
  const money = refunded(refund, prefix);
  const adjustments = readAdjustments(refund, prefix, shopCurrency);
  const dutiesShop = shopCents(undefined, refund.total_duties_set, at(prefix, 'total_duties'), { currency: shopCurrency }) ?? 0;
  const duties = figure(dutiesShop, refund.total_duties_set, at(prefix, 'total_duties'));
  const part = (figures: Figure[]) => inCurrency(figures, money.currency, shopCurrency);
  const subtotal = part(lines.map((l) => l.subtotal));
  const tax = part(lines.map((l) => l.tax));
  const dutiesIn = part([duties]);
  const adjAmount = part([adjustments.amount]);
  const adjTax = part([adjustments.tax]);
  if (subtotal === undefined || tax === undefined || dutiesIn === undefined || adjAmount === undefined || adjTax === undefined) {
    throw ValidationError.field(at(prefix, 'transactions'), `return money in ${echoed(String(money.currency))}, but the refund lines do not all state their amounts in ${echoed(String(money.currency))}: the refund cannot be checked`);
  }
  // Adjustments are signed from the order's side: a shipping refund of 5.00 is amount "-5.00".
  const taxOnTop = subtotal + tax + dutiesIn - adjAmount - adjTax;
  const taxInside = [subtotal + dutiesIn - adjAmount, subtotal + dutiesIn - adjAmount - adjTax];
  const onTop = money.cents === taxOnTop;
  const inside = taxInside.includes(money.cents);
  if (onTop !== inside) return inside;
  const currency = money.currency ? ` ${echoed(money.currency)}` : '';
  throw ValidationError.field(
    at(prefix, 'transactions'),
    `return ${show(money.cents)}${currency}, which matches ${onTop ? 'both' : 'neither'} the refunded lines with their tax on top (${show(taxOnTop)}) ${onTop ? 'and' : 'nor'} with the tax inside their subtotal (${show(taxInside[0]!)}): whether refund_line_items[].subtotal includes tax is not stated in a refund, so the bridge will not guess`,
  );
}

/**
 * What a refund that names no refunded units means. `ignorable` when it returns nothing, or only
 * shipping (not part of `Check.amount`): the webhook acknowledges it. Other money returned without
 * naming items (a custom amount, a discrepancy, duties, a tip) cannot be measured tax-excluded, so
 * `translateRefund` refuses it (400 / dead letter) for an operator to reverse by hand.
 */
export function withoutItemsReason(refund: Refund, prefix = ''): { ignorable: boolean; reason: string } {
  const adjustments = refund.order_adjustments ?? [];
  const money = refunded(refund, prefix);
  if (money.cents === 0 && adjustments.length === 0) return { ignorable: true, reason: 'the refund returns no items and no money: nothing to reverse' };
  if (adjustments.length > 0 && adjustments.every((a) => a.kind === 'shipping_refund')) {
    const field = (i: number, name: string) => at(prefix, `order_adjustments.${i}.${name}`);
    const shipping = adjustments.map((a, i) => -(shopCents(a.amount, a.amount_set, field(i, 'amount'), { signed: true }) ?? 0));
    const shippingTax = adjustments.map((a, i) => -(shopCents(a.tax_amount, a.tax_amount_set, field(i, 'tax_amount'), { signed: true }) ?? 0));
    if (money.cents === sum(shipping) || money.cents === sum(shipping) + sum(shippingTax)) {
      return { ignorable: true, reason: 'the refund returns only shipping, which is not part of the accrued amount: nothing to reverse' };
    }
  }
  return {
    ignorable: false,
    reason: `names no refunded items but returns ${show(money.cents)}${money.currency ? ` ${echoed(money.currency)}` : ''} that is not only shipping: an amount-only refund cannot be measured without its tax; reverse this order by hand`,
  };
}

export function parseRefundPayload(body: unknown): { refund: Refund; prefix: string } {
  const { value, prefix } = unwrap(body, 'refund');
  return { refund: parseWith(Refund, value, prefix), prefix };
}

export function translateRefund(body: unknown): RefundIntent {
  const { refund, prefix } = parseRefundPayload(body);
  const lines = (refund.refund_line_items ?? []).flatMap((line, i) => readRefundLine(line, at(prefix, `refund_line_items.${i}`)) ?? []);
  if (lines.length === 0) throw ValidationError.field(at(prefix, 'refund_line_items'), withoutItemsReason(refund, prefix).reason);
  const taxInside = sum(lines.map((l) => l.tax.shop)) > 0 && subtotalIncludesTax(refund, lines, prefix);
  const items: RefundLine[] = lines.map((l) => ({ id: l.id, quantity: l.quantity, totalCents: l.subtotal.shop - (taxInside ? l.tax.shop : 0) }));
  return { orderId: refund.order_id, refundId: refund.id, amountCents: sum(items.map((i) => i.totalCents)), items };
}
