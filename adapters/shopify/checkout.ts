/**
 * A Shopify order → the neutral checkout intent, and how Shopify's amounts are read (refund.ts reads
 * them the same way).
 *
 * HOW `Check.amount` IS DERIVED (bridge-contract: after discounts, tax, tip and shipping excluded):
 *
 *   amount = subtotal_price − (taxes_included ? the tax inside the line items : 0)
 *
 * `subtotal_price` is Shopify's "price of the order after discounts but before shipping, duties,
 * taxes and tips"; in a taxes-included shop the prices, and so the subtotal, contain the tax, which
 * is taken out using the line items' own `tax_lines`. Every input is cross-checked so that a payload
 * the bridge reads differently from Shopify fails loudly (ValidationError → 400 / dead letter)
 * instead of accruing a wrong amount:
 *
 * 1. The line items after their discounts, Σ (price × quantity − Σ discount_allocations), must equal
 *    `subtotal_price` to the cent. (Order-level discounts are allocated to the lines by Shopify, so
 *    each selection's `totalPrice` is the line's share and the selections add up to the amount.)
 * 2. With `taxes_included`, the line items' and shipping lines' tax lines must add up to
 *    `total_tax`, or the tax inside the lines is not known exactly.
 * 3. With a tip (`total_tip_received` > 0), `total_price` must equal subtotal + shipping + tax (when
 *    added on top) + duties + fees + tip, which proves the tip is outside the subtotal. Whether a
 *    tip can appear as a line item inside the subtotal is unconfirmed; if it does, this fails.
 *
 * Shipping is never in `subtotal_price`, so it is excluded without being read (except for check 3).
 * Money is the shop's currency (`currency`, the plain fields and `*_set.shop_money`); the buyer's
 * presentment currency is not used for the accrual.
 *
 * AFTER REFUNDS AND EDITS (docs/pos-systems.md, Shopify, "An order already refunded or edited").
 * A real order carries two sets of figures: the plain ones (`subtotal_price`, `total_price`,
 * `total_tax`, each line's `quantity`) keep what was sold, and `current_*` (with each line's
 * `current_quantity`) "reflect order edits, returns, and refunds". An order can arrive already
 * changed (a late `orders/paid`, or backfill reading it after the fact). The bridge's rule (README,
 * Partial refunds: a refund is a reverse) decides which figures are the sale:
 *
 * - Refunds are not part of the sale. The sale is what was paid, and each refund in `refunds[]`
 *   comes as a refund of its own (refunds/create, or backfill lists it after its order), which
 *   reverses the accrual and re-accrues what remains. So `current_subtotal_price` lower than
 *   `subtotal_price` by exactly the refunds' line subtotals is read from the plain figures.
 * - An edit is part of the sale. What `current_subtotal_price` is lower by beyond the refunds was
 *   removed by an order edit (before payment, nothing was paid for it; no refund will come for it),
 *   so the sale is the edited order: each line at `current_quantity` + the units its refunds name,
 *   which must add up, after discounts, to `current_subtotal_price` + the refunds' subtotals, to the
 *   cent. A line cut to some of its units (not 0, not all) is read only where nothing of it is
 *   split (no discount allocations; no tax inside a taxes-included price); otherwise refused.
 * - Refused (400 / dead letter), not guessed: `current_subtotal_price` above `subtotal_price` (an
 *   edit that added to the order), refunds claiming more than the order lost, or a changed order
 *   that does not carry its `refunds` (an edit cannot be told from a refund).
 *
 * E.g. 3 × 4.50 less 0.50 and 1 × 2.99 (15.99, tax 0.93): refunded one 4.50 unit (4.33 after its
 * discount share), `current_subtotal_price` 11.66 = 15.99 − 4.33: accrued 1599, then the refund
 * reverses it and 1166 is re-accrued. The 2.99 line removed by an edit before payment:
 * `current_subtotal_price` 13.00 with no refund: accrued 1300.
 *
 * The intent also carries `currentAmountCents`, where the order states its current figures (and
 * taxes are on top of prices): the Check the order stands at now, `current_subtotal_price`. The
 * three-way report compares it with what the ledger accrued less what it reversed
 * (src/reconcile, `pos_amount_differs`); nothing is accrued from it.
 *
 * Selections: one per line item with quantity > 0; `id` = the variant id (the catalogue item, which
 * per-product accrual rules need), or `line:<line item id>` for custom lines without a variant;
 * `groupId` = product id (the product family of its variants); `price` = unit price, left out in
 * taxes-included shops where it contains tax; `totalPrice` = the line after its discount
 * allocations, tax excluded. Shopify quantities are integers; anything else is refused.
 */
import { z } from 'zod';
import { normalizeCustomer, toE164, type Customer as BridgeCustomer } from '../../src/kernel/customer.js';
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import type { Selection } from '../../src/loyalty/contract.js';
import { assertCurrency, centsToDecimalString, decimalToCents, mulDecimal, nonNegativeCents, parseDecimal, toCents } from '../../src/kernel/money.js';
import { nonZero } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { parseWith } from '../../src/kernel/validation.js';
import { Order, unwrap, type Amount, type LineItem, type MoneySet, type ShippingLine } from './schema.js';

// ------------------------------------------------------------------ Shopify money
// Shopify money → cents. Shopify states most amounts twice: the plain field in the shop's
// currency ("59.97", or a JSON number on refund lines: `subtotal: 143.97`) and its `*_set` twin
// `{shop_money, presentment_money}`. Old payloads (before 2019) have only the plain field; a
// stripped-down one might have only the set. Either is read; where both are present they must
// agree to the cent, so a payload whose two statements disagree fails loudly instead of the bridge
// picking one. Conversion and its single rounding rule are `src/kernel/money.ts`'s (real Shopify text
// such as "130.64999999999998" becomes 13065): nothing here rounds.

export interface MoneyOptions {
  /** Order adjustments are signed (a shipping refund is "-5.00"); everything else must be ≥ 0. */
  signed?: boolean;
  /** The shop currency the amount must be in, when it is known. */
  currency?: string;
}

/** Dotted path under an optional prefix (`order.` when the API's wrapper was sent). */
export function at(prefix: string, path: string): string {
  return prefix ? `${prefix}.${path}` : path;
}

/** The amount in the shop's currency, in cents, from `field` and/or `field_set`; undefined when neither is present. */
export function shopCents(plain: Amount | null | undefined, set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): number | undefined {
  const convert = options.signed ? toCents : nonNegativeCents;
  const fromPlain = plain === null || plain === undefined ? undefined : convert(plain, field);
  let fromSet: number | undefined;
  if (set) {
    const code = set.shop_money.currency_code;
    if (options.currency && code && code !== options.currency) {
      throw ValidationError.field(`${field}_set.shop_money.currency_code`, `is ${echoed(code)}, but the order's currency is ${options.currency}`);
    }
    fromSet = convert(set.shop_money.amount, `${field}_set.shop_money.amount`);
  }
  if (fromPlain !== undefined && fromSet !== undefined && fromPlain !== fromSet) {
    throw ValidationError.field(
      `${field}_set.shop_money.amount`,
      `says ${centsToDecimalString(fromSet)} but ${field} says ${centsToDecimalString(fromPlain)}: the two shop-currency amounts must agree`,
    );
  }
  return fromPlain ?? fromSet;
}

/** Like `shopCents`, for amounts that must be present. */
export function requiredShopCents(plain: Amount | null | undefined, set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): number {
  const cents = shopCents(plain, set, field, options);
  if (cents === undefined) throw ValidationError.field(field, 'is required');
  return cents;
}

/** The buyer-currency twin of a `*_set`, when the payload states it. */
export function presentmentCents(set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): { currency: string; cents: number } | undefined {
  const bag = set?.presentment_money;
  if (!bag?.currency_code) return undefined;
  const convert = options.signed ? toCents : nonNegativeCents;
  return { currency: bag.currency_code, cents: convert(bag.amount, `${field}_set.presentment_money.amount`) };
}

export function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

export function show(cents: number): string {
  return centsToDecimalString(cents);
}

// ------------------------------------------------------------------ the order

/**
 * The selection id of a line, shared with refunds (their lines embed the same `line_item` with its
 * `variant_id`), so a refunded line is taken off the selection it was accrued under.
 */
export function selectionId(variantId: string | null | undefined, lineItemId: string): string {
  return variantId ?? `line:${lineItemId}`;
}

interface ReadLine {
  /** price × quantity − discount allocations: what the line adds to `subtotal_price`. */
  afterDiscounts: number;
  discount: number;
  tax: number;
  selection?: Selection;
}

function readLine(line: LineItem, index: number, prefix: string, currency: string, taxesIncluded: boolean): ReadLine {
  const field = at(prefix, `line_items.${index}`);
  const quantity = line.quantity;
  if (!Number.isSafeInteger(quantity) || quantity < 0) {
    throw ValidationError.field(`${field}.quantity`, `must be a whole number of units (Shopify quantities are integers), got ${quantity}`);
  }
  requiredShopCents(line.price, line.price_set, `${field}.price`, { currency });
  const unitPrice = parseDecimal(line.price, `${field}.price`);
  const beforeDiscounts = decimalToCents(mulDecimal(unitPrice, { units: BigInt(quantity), scale: 0 }), `${field}.price`);
  const discount = sum(
    (line.discount_allocations ?? []).map((a, j) => requiredShopCents(a.amount, a.amount_set, `${field}.discount_allocations.${j}.amount`, { currency })),
  );
  const tax = sum((line.tax_lines ?? []).map((t, j) => requiredShopCents(t.price, t.price_set, `${field}.tax_lines.${j}.price`, { currency })));
  const afterDiscounts = beforeDiscounts - discount;
  if (afterDiscounts < 0) {
    throw ValidationError.field(`${field}.discount_allocations`, `add up to ${show(discount)}, more than the line's ${show(beforeDiscounts)}`);
  }
  const totalCents = afterDiscounts - (taxesIncluded ? tax : 0);
  if (totalCents < 0) throw ValidationError.field(`${field}.tax_lines`, `add up to ${show(tax)}, more than the line's ${show(afterDiscounts)} that includes them`);
  // A line with quantity 0 sold nothing (voided/removed); it adds nothing to the subtotal either.
  if (quantity === 0) return { afterDiscounts, discount, tax };
  const selection = toSelection(
    {
      id: selectionId(line.variant_id, line.id),
      groupId: line.product_id ?? undefined,
      name: line.name ?? line.title ?? undefined,
      quantity,
      // In a taxes-included shop the unit price contains tax; the contract wants prices tax-excluded.
      unitPrice: taxesIncluded ? undefined : unitPrice,
      totalCents,
    },
    field,
  );
  return { afterDiscounts, discount, tax, selection };
}

function shippingTax(lines: ShippingLine[], prefix: string, currency: string): number {
  return sum(lines.flatMap((line, i) => (line.tax_lines ?? []).map((t, j) => requiredShopCents(t.price, t.price_set, at(prefix, `shipping_lines.${i}.tax_lines.${j}.price`), { currency }))));
}

/** Shipping charged: each line after its own discounts (`discounted_price`, or price − allocations in older shapes). */
function shippingCharged(lines: ShippingLine[], prefix: string, currency: string): number {
  return sum(
    lines.map((line, i) => {
      const field = at(prefix, `shipping_lines.${i}`);
      const discounted = shopCents(line.discounted_price, line.discounted_price_set, `${field}.discounted_price`, { currency });
      if (discounted !== undefined) return discounted;
      const price = requiredShopCents(line.price, line.price_set, `${field}.price`, { currency });
      const discount = sum((line.discount_allocations ?? []).map((a, j) => requiredShopCents(a.amount, a.amount_set, `${field}.discount_allocations.${j}.amount`, { currency })));
      return price - discount;
    }),
  );
}

const isoTimestamp = z.iso.datetime({ offset: true });

/** Timestamps are informative (not money): an unreadable one is left out rather than failing the checkout. */
function timestamp(value: string | null | undefined): string | undefined {
  return value && isoTimestamp.safeParse(value).success ? value : undefined;
}

function email(value: string, field: string, region: string): string {
  try {
    return normalizeCustomer({ email: value }, region).email!;
  } catch (error) {
    if (error instanceof ValidationError) throw ValidationError.field(field, error.issues.map((i) => i.message).join('; '));
    throw error;
  }
}

function firstPresent(candidates: [string | null | undefined, string][]): [string, string] | undefined {
  for (const [value, field] of candidates) if (value?.trim()) return [value.trim(), field];
  return undefined;
}

/**
 * The buyer: the contact given with this order (`phone`, `email`, `contact_email`) first, then the
 * Shopify customer's (`customer.phone`, `customer.email`); names from the customer. Address phones
 * are not used: a billing or shipping phone may be someone else's.
 */
function readCustomer(order: Order, prefix: string, region: string): BridgeCustomer {
  const customer: BridgeCustomer = {};
  const phone = firstPresent([
    [order.phone, at(prefix, 'phone')],
    [order.customer?.phone, at(prefix, 'customer.phone')],
  ]);
  const mail = firstPresent([
    [order.email, at(prefix, 'email')],
    [order.contact_email, at(prefix, 'contact_email')],
    [order.customer?.email, at(prefix, 'customer.email')],
  ]);
  if (phone) customer.phone = toE164(phone[0], region, phone[1]);
  if (mail) customer.email = email(mail[0], mail[1], region);
  if (order.customer?.first_name?.trim()) customer.firstName = order.customer.first_name.trim();
  if (order.customer?.last_name?.trim()) customer.lastName = order.customer.last_name.trim();
  return customer;
}

/**
 * The `financial_status` values of an order whose money was taken: `paid`, and the two only a paid
 * order can become. `pending`, `authorized` (not captured yet), `partially_paid`, `voided` and
 * `expired` are not paid, so nothing accrues: the order accrues when it is paid (orders/paid, or the
 * next backfill pass). The field is optional, as it has always been for orders posted directly;
 * when it is there, it decides.
 */
export const PAID_FINANCIAL_STATUSES: ReadonlySet<string> = new Set(['paid', 'partially_refunded', 'refunded']);

function requirePaid(status: string | null | undefined, field: string): void {
  if (status === undefined || status === null || PAID_FINANCIAL_STATUSES.has(status)) return;
  throw ValidationError.field(field, `is ${echoed(JSON.stringify(status))}: the order is not paid, so nothing accrues until it is (${[...PAID_FINANCIAL_STATUSES].join(', ')})`);
}

export function translateOrder(body: unknown, context: AdapterContext): CheckoutIntent {
  const { value, prefix } = unwrap(body, 'order');
  const order = parseWith(Order, value, prefix);
  if (order.cancelled_at) throw ValidationError.field(at(prefix, 'cancelled_at'), 'the order was cancelled: there is nothing to accrue');

  const currency = assertCurrency(order.currency ?? order.subtotal_price_set?.shop_money.currency_code ?? context.defaultCurrency, at(prefix, 'currency'));
  const money = { currency };
  const totalTax = shopCents(order.total_tax, order.total_tax_set, at(prefix, 'total_tax'), money) ?? 0;
  if (totalTax > 0 && typeof order.taxes_included !== 'boolean') {
    throw ValidationError.field(at(prefix, 'taxes_included'), 'is required when total_tax is not zero: without it the tax cannot be told apart from the prices');
  }
  const taxesIncluded = order.taxes_included === true;
  const shippingLines = order.shipping_lines ?? [];

  const lines = order.line_items.map((line, i) => readLine(line, i, prefix, currency, taxesIncluded));
  const subtotal = requiredShopCents(order.subtotal_price, order.subtotal_price_set, at(prefix, 'subtotal_price'), money);
  const linesAfterDiscounts = sum(lines.map((l) => l.afterDiscounts));
  if (linesAfterDiscounts !== subtotal) {
    throw ValidationError.field(
      at(prefix, 'subtotal_price'),
      `is ${show(subtotal)}, but the line items after their discount allocations add up to ${show(linesAfterDiscounts)}: the bridge cannot tell which is the amount sold`,
    );
  }

  const lineTax = sum(lines.map((l) => l.tax));
  if (taxesIncluded) {
    const shipping = shippingTax(shippingLines, prefix, currency);
    if (lineTax + shipping !== totalTax) {
      throw ValidationError.field(
        at(prefix, 'total_tax'),
        `is ${show(totalTax)}, but the tax lines of the line items (${show(lineTax)}) and shipping lines (${show(shipping)}) add up to ${show(lineTax + shipping)}: with taxes included in prices the tax inside each line must be known exactly to take it out`,
      );
    }
  }
  const amount = subtotal - (taxesIncluded ? lineTax : 0);

  const tip = shopCents(order.total_tip_received, undefined, at(prefix, 'total_tip_received'), money) ?? 0;
  if (tip > 0) {
    const totalPrice = requiredShopCents(order.total_price, order.total_price_set, at(prefix, 'total_price'), money);
    const duties = shopCents(undefined, order.original_total_duties_set, at(prefix, 'original_total_duties'), money) ?? 0;
    const fees = shopCents(undefined, order.original_total_additional_fees_set, at(prefix, 'original_total_additional_fees'), money) ?? 0;
    const expected = subtotal + shippingCharged(shippingLines, prefix, currency) + (taxesIncluded ? 0 : totalTax) + duties + fees + tip;
    if (totalPrice !== expected) {
      throw ValidationError.field(
        at(prefix, 'total_tip_received'),
        `is ${show(tip)}, but total_price ${show(totalPrice)} is not subtotal + shipping + tax + duties + fees + tip (${show(expected)}): the tip may be inside subtotal_price, so the amount without it is not known`,
      );
    }
  }

  const now = afterEdits(order, lines, prefix, currency, taxesIncluded, subtotal);
  const sold = now.edited ?? { amount, lines: lines.flatMap((l) => (l.selection ? [l.selection] : [])), discount: sum(lines.map((l) => l.discount)), tax: totalTax };

  // Checked once the amounts are read, so an order that does not add up is refused for that first.
  requirePaid(order.financial_status, at(prefix, 'financial_status'));
  const openedAt = timestamp(order.created_at);
  const closedAt = timestamp(order.processed_at);
  const intent: CheckoutIntent & { currentAmountCents?: number } = {
    orderId: order.id,
    customer: readCustomer(order, prefix, context.defaultPhoneRegion),
    check: {
      amount: sold.amount,
      currency,
      selections: sold.lines,
      externalTransactionId: order.id,
      ...(openedAt ? { checkOpenedAt: openedAt } : {}),
      ...(closedAt ? { checkClosedAt: closedAt } : {}),
      ...nonZero('taxAmount', sold.tax),
      ...nonZero('discountAmount', sold.discount),
      ...nonZero('tipAmount', tip),
      ...(tip > 0 ? { totalTipReceived: String(order.total_tip_received) } : {}),
    },
    ...(now.current !== undefined ? { currentAmountCents: now.current } : {}),
  };
  return intent;
}

interface AfterEdits {
  /** The order as edited, when an edit removed something; undefined when the sale is the plain figures. */
  edited?: { amount: number; lines: Selection[]; discount: number; tax: number };
  /** The Check the order stands at now (`current_subtotal_price`, taxes on top only). */
  current?: number;
}

/** The rule in the header, "AFTER REFUNDS AND EDITS": refunds are refunds, edits are the sale. */
function afterEdits(order: Order, lines: ReadLine[], prefix: string, currency: string, taxesIncluded: boolean, subtotal: number): AfterEdits {
  const money = { currency };
  const currentSubtotal = shopCents(order.current_subtotal_price, order.current_subtotal_price_set, at(prefix, 'current_subtotal_price'), money);
  // Old payloads (before the current_* fields) are what was sold.
  if (currentSubtotal === undefined) return {};
  const current = taxesIncluded ? undefined : currentSubtotal;
  const field = at(prefix, 'current_subtotal_price');
  if (currentSubtotal > subtotal) {
    throw ValidationError.field(field, `is ${show(currentSubtotal)}, more than subtotal_price ${show(subtotal)}: an edit that added to the order is not read (the bridge cannot tell which lines were added)`);
  }
  if (currentSubtotal === subtotal) return { ...(current !== undefined ? { current } : {}) };
  if (!order.refunds) {
    throw ValidationError.field(at(prefix, 'refunds'), `are required when current_subtotal_price (${show(currentSubtotal)}) is below subtotal_price (${show(subtotal)}): without them an edit cannot be told from a refund`);
  }
  let refundedNet = 0;
  let refundedTax = 0;
  const refundedUnits = new Map<string, number>();
  order.refunds.forEach((refund, i) =>
    (refund.refund_line_items ?? []).forEach((rli, j) => {
      const f = at(prefix, `refunds.${i}.refund_line_items.${j}`);
      refundedNet += requiredShopCents(rli.subtotal, rli.subtotal_set, `${f}.subtotal`, money);
      refundedTax += shopCents(rli.total_tax, rli.total_tax_set, `${f}.total_tax`, money) ?? 0;
      if (rli.line_item_id) refundedUnits.set(rli.line_item_id, (refundedUnits.get(rli.line_item_id) ?? 0) + (rli.quantity ?? 0));
    }),
  );
  const edits = subtotal - currentSubtotal - refundedNet;
  if (edits < 0) {
    throw ValidationError.field(at(prefix, 'refunds'), `take ${show(refundedNet)} off the lines, more than the ${show(subtotal - currentSubtotal)} between subtotal_price and current_subtotal_price`);
  }
  // The refunds explain the whole difference: the sale is what was paid.
  if (edits === 0) return { ...(current !== undefined ? { current } : {}) };

  // An edit: each line at what is left of it plus what its refunds took (they are refunds, not edits).
  const kept: { value: number; discount: number; tax: number; selection?: Selection }[] = order.line_items.map((line, i) => {
    const read = lines[i]!;
    const f = at(prefix, `line_items.${i}`);
    if (line.current_quantity === null || line.current_quantity === undefined) {
      throw ValidationError.field(`${f}.current_quantity`, `is required: current_subtotal_price is ${show(edits)} below subtotal_price less the refunds, an edit, and which lines it removed is not known without it`);
    }
    const units = line.current_quantity + (refundedUnits.get(line.id) ?? 0);
    if (!Number.isSafeInteger(units) || units < 0 || units > line.quantity) {
      throw ValidationError.field(`${f}.current_quantity`, `is ${line.current_quantity}, which with the ${refundedUnits.get(line.id) ?? 0} units refunded is not 0 to the ${line.quantity} sold`);
    }
    if (units === line.quantity) return { value: read.afterDiscounts, discount: read.discount, tax: read.tax, ...(read.selection ? { selection: read.selection } : {}) };
    if (units === 0) return { value: 0, discount: 0, tax: 0 };
    if (read.discount > 0 || (taxesIncluded && read.tax > 0)) {
      throw ValidationError.field(`${f}.current_quantity`, `is ${line.current_quantity} of ${line.quantity}: an edit removed part of a line whose ${read.discount > 0 ? 'discount' : 'tax'} is not split per unit in the payload`);
    }
    const value = decimalToCents(mulDecimal(parseDecimal(line.price, `${f}.price`), { units: BigInt(units), scale: 0 }), `${f}.price`);
    const selection = toSelection({ id: selectionId(line.variant_id, line.id), groupId: line.product_id ?? undefined, name: line.name ?? line.title ?? undefined, quantity: units, unitPrice: taxesIncluded ? undefined : parseDecimal(line.price, `${f}.price`), totalCents: value }, f);
    return { value, discount: 0, tax: 0, selection };
  });
  const keptValue = sum(kept.map((k) => k.value));
  if (keptValue !== currentSubtotal + refundedNet) {
    throw ValidationError.field(
      field,
      `is ${show(currentSubtotal)}; with the refunds' ${show(refundedNet)} that is ${show(currentSubtotal + refundedNet)}, but the lines at their current_quantity (and refunded units) add up to ${show(keptValue)}: the edited order cannot be read exactly`,
    );
  }
  const currentTax = shopCents(order.current_total_tax, order.current_total_tax_set, at(prefix, 'current_total_tax'), money);
  const amount = keptValue - (taxesIncluded ? sum(kept.map((k) => k.tax)) : 0);
  return {
    edited: {
      amount,
      lines: kept.flatMap((k) => (k.selection ? [k.selection] : [])),
      discount: sum(kept.map((k) => k.discount)),
      tax: currentTax !== undefined ? currentTax + refundedTax : sum(kept.map((k) => k.tax)),
    },
    ...(current !== undefined ? { current } : {}),
  };
}
