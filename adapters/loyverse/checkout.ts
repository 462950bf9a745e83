/**
 * A Loyverse SALE receipt → the checkout intent (pure), and how a receipt is read and measured
 * (refund.ts measures REFUND receipts the same way). A receipt is identified by its
 * `receipt_number` within its store: numbers repeat across stores and accounts, so `store_id` (a
 * UUID) is the transaction scope. A SALE is a checkout; a REFUND is a separate receipt naming the
 * original in `refund_for`, with its own line items; a cancelled SALE reverses the sale.
 *
 * WHAT THE AMOUNT IS. Check.amount is the total after discounts, surcharge included, tax and tip
 * excluded (bridge-contract "Translation rules"). It is computed from the line items:
 *
 *     amount = Σ line.total_money − Σ INCLUDED line taxes + surcharge
 *
 * because a line's `total_money` is the line after its discounts, and it contains the taxes of
 * type INCLUDED (the listed price contains them) but not those of type ADDED (charged on top).
 * Each selection's totalPrice is the same thing per line: `total_money` − its INCLUDED taxes.
 *
 * WHY IT CANNOT SILENTLY BE WRONG. Loyverse does not document in so many words what its receipt
 * totals contain (tip inside `total_money` or not; receipt-level discounts spread over the lines or
 * not; surcharge inside the lines or not). So the amount computed from the lines is checked against
 * the receipt's own totals before anything is sent:
 *
 *     total_money − total_tax  must equal  amount   (tip not in total_money)
 *                          or  amount + tip         (tip in total_money)
 *
 * compared in cents. Both readings of the tip give the same amount (the amount never uses
 * total_money), so the unconfirmed fact cannot change what is accrued. Every other wrong guess
 * (a receipt discount not in the line totals, a surcharge inside them, a tax type read the wrong
 * way round) breaks the equation and the receipt is refused with a ValidationError naming
 * `total_money` (400, or a dead letter for a webhook), never translated into a wrong amount.
 * A non-zero tax whose `type` is neither INCLUDED nor ADDED is refused for the same reason.
 *
 * REFUND receipts are measured the same way (tax and tip excluded). Their amounts are read as
 * magnitudes: whether Loyverse writes a refund's money as positive or negative numbers is not
 * confirmed, and the equation above still checks that they add up.
 */
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import type { Selection } from '../../src/loyalty/contract.js';
import { decimalToCents, decimalToString, isWholeNumber, type Decimal } from '../../src/kernel/money.js';
import { nonZero } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent, RefundLine } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { parseWith } from '../../src/kernel/validation.js';
import { LoyverseReceipt, type LoyverseLineItem, type LoyverseTax } from './schema.js';

export interface ReadReceipt {
  receipt: LoyverseReceipt;
  /** Path of the receipt in the body, with a trailing dot when not empty ("receipts.0."). */
  prefix: string;
}

/**
 * A bare receipt, or the API's `{ "receipts": [ … ] }` wrapper (GET /v1.0/receipts, and the webhook
 * body) holding exactly one: one body is one order here; batches go through the webhook.
 */
export function readReceipt(body: unknown): ReadReceipt {
  if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'receipts' in body && !('receipt_number' in body)) {
    const receipts = (body as { receipts: unknown }).receipts;
    if (!Array.isArray(receipts) || receipts.length !== 1) {
      throw ValidationError.field('receipts', `must hold exactly one receipt here (got ${Array.isArray(receipts) ? receipts.length : 'no array'}); deliver batches to /v1/webhooks/loyverse`);
    }
    return { receipt: parseWith(LoyverseReceipt, receipts[0], 'receipts.0'), prefix: 'receipts.0.' };
  }
  return { receipt: parseWith(LoyverseReceipt, body), prefix: '' };
}

/**
 * Errors found after the receipt's identity is known name the receipt too: in a batched webhook
 * delivery (and its dead letter) the field path alone does not say which receipt it was.
 */
export function naming<T>(receipt: LoyverseReceipt, translate: () => T): T {
  try {
    return translate();
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new ValidationError(error.issues, `receipt ${echoed(String(receipt.receipt_number))} of store ${echoed(String(receipt.store_id))}: ${error.message}`);
  }
}

// ------------------------------------------------------------------ measuring a receipt

const ZERO: Decimal = { units: 0n, scale: 0 };

/** Exact sum of decimals (bigint arithmetic, nothing rounded: rounding happens only in money.ts). */
function add(...ds: Decimal[]): Decimal {
  const scale = Math.max(0, ...ds.map((d) => d.scale));
  return { units: ds.reduce((sum, d) => sum + d.units * 10n ** BigInt(scale - d.scale), 0n), scale };
}

function negate(d: Decimal): Decimal {
  return { units: -d.units, scale: d.scale };
}

function abs(d: Decimal): Decimal {
  return d.units < 0n ? negate(d) : d;
}

function show(d: Decimal): string {
  return decimalToString(d);
}

export interface MeasuredLine {
  selection: Selection;
  /** The line as a refunded item, when it can be matched to the sale's selection (an id and a whole quantity). */
  refundLine?: RefundLine;
}

export interface MeasuredReceipt {
  /** Check.amount basis, in cents: after discounts, surcharge included, tax and tip excluded. */
  amountCents: number;
  taxCents: number;
  discountCents: number;
  tipCents: number;
  serviceCents: number;
  lines: MeasuredLine[];
}

/**
 * The selection id is the variant (what was sold: "Latte, large"), the group its item (the product
 * family of its variants), so per-product rules can target either and a refund line matches the
 * very variant it returns. Items without variants still have one default variant in Loyverse.
 */
function lineIds(line: LoyverseLineItem): { id?: string; groupId?: string } {
  const id = line.variant_id?.trim() || line.item_id?.trim() || undefined;
  const groupId = line.item_id?.trim() || undefined;
  return { ...(id ? { id } : {}), ...(groupId ? { groupId } : {}) };
}

function lineName(line: LoyverseLineItem): string | undefined {
  const item = line.item_name?.trim();
  const variant = line.variant_name?.trim();
  if (!item) return variant || undefined;
  return variant ? `${item} (${variant})` : item;
}

/** The INCLUDED part of a line's taxes; refuses a non-zero tax whose type does not say which it is. */
function includedTax(taxes: LoyverseTax[], read: (d: Decimal, field: string) => Decimal, field: string): Decimal {
  let included = ZERO;
  taxes.forEach((tax, j) => {
    const amount = read(tax.money_amount, `${field}.${j}.money_amount`);
    if (amount.units === 0n) return;
    switch (tax.type) {
      case 'INCLUDED':
        included = add(included, amount);
        return;
      case 'ADDED':
        return;
      default:
        throw ValidationError.field(
          `${field}.${j}.type`,
          `must be "INCLUDED" or "ADDED" for a non-zero tax, got ${echoed(JSON.stringify(tax.type ?? null))}: the bridge must know whether the price contains it`,
        );
    }
  });
  return included;
}

/**
 * Measures a receipt. `prefix` is the path of the receipt in the body ("" or "receipts.0."), so
 * every error names the field as the POS sent it.
 */
export function measureReceipt(receipt: LoyverseReceipt, prefix = ''): MeasuredReceipt {
  const refund = receipt.receipt_type === 'REFUND';
  // A sale's money must not be negative; a refund's is read as magnitudes (sign unconfirmed).
  // `field` is the full path of the amount in the body.
  const read = (d: Decimal, field: string): Decimal => {
    if (refund) return abs(d);
    if (d.units < 0n) throw ValidationError.field(field, `must not be negative in a SALE receipt, got ${show(d)}`);
    return d;
  };
  const total = read(receipt.total_money, `${prefix}total_money`);
  const tax = read(receipt.total_tax, `${prefix}total_tax`);
  const discount = read(receipt.total_discount, `${prefix}total_discount`);
  const tip = read(receipt.tip, `${prefix}tip`);
  const surcharge = read(receipt.surcharge, `${prefix}surcharge`);

  let linesTotal = ZERO;
  let linesIncludedTax = ZERO;
  const lines = receipt.line_items.map((line, i): MeasuredLine => {
    const field = `${prefix}line_items.${i}`;
    const lineTotal = read(line.total_money, `${field}.total_money`);
    const included = includedTax(line.line_taxes, read, `${field}.line_taxes`);
    const net = add(lineTotal, negate(included));
    if (net.units < 0n) throw ValidationError.field(`${field}.total_money`, `${show(lineTotal)} is less than the line's included tax ${show(included)}`);
    linesTotal = add(linesTotal, lineTotal);
    linesIncludedTax = add(linesIncludedTax, included);
    const qty = refund ? abs(line.quantity) : line.quantity;
    const quantityText = decimalToString(qty);
    const totalCents = decimalToCents(net, `${field}.total_money`);
    // The listed price contains INCLUDED tax while the bridge sends money tax-excluded: such a
    // line gets no unit price rather than one inconsistent with its total.
    const unitPrice = line.price && included.units === 0n ? read(line.price, `${field}.price`) : undefined;
    const ids = lineIds(line);
    const selection = toSelection({ ...ids, name: lineName(line), quantity: quantityText, unitPrice, totalCents }, field);
    const refundLine = ids.id && isWholeNumber(quantityText) ? { id: ids.id, quantity: selection.quantity, totalCents } : undefined;
    return { selection, ...(refundLine ? { refundLine } : {}) };
  });

  const amount = add(linesTotal, negate(linesIncludedTax), surcharge);
  const amountCents = decimalToCents(amount, `${prefix}total_money`);

  // The receipt's own totals must agree with the lines (see the top of this file).
  const withoutTax = add(total, negate(tax));
  const tipOutside = decimalToCents(withoutTax, `${prefix}total_money`);
  const tipInside = decimalToCents(add(withoutTax, negate(tip)), `${prefix}total_money`);
  if (amountCents !== tipOutside && amountCents !== tipInside) {
    throw ValidationError.field(
      `${prefix}total_money`,
      `${show(total)} less total_tax ${show(tax)}${tip.units !== 0n ? ` (with or without tip ${show(tip)})` : ''} does not equal the line items after discounts ` +
        `${show(linesTotal)} less their included tax ${show(linesIncludedTax)} plus surcharge ${show(surcharge)} = ${show(amount)}: ` +
        'the bridge cannot tell what this receipt total contains, so it refuses to guess the amount',
    );
  }

  return {
    amountCents,
    taxCents: decimalToCents(tax, `${prefix}total_tax`),
    discountCents: decimalToCents(discount, `${prefix}total_discount`),
    tipCents: decimalToCents(tip, `${prefix}tip`),
    serviceCents: decimalToCents(surcharge, `${prefix}surcharge`),
    lines,
  };
}

// ------------------------------------------------------------------ the checkout

export function parseLoyverseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
  const { receipt, prefix } = readReceipt(body);
  return naming(receipt, () => checkoutOf(receipt, prefix, context));
}

function checkoutOf(receipt: LoyverseReceipt, prefix: string, context: AdapterContext): CheckoutIntent {
  if (receipt.receipt_type !== 'SALE') {
    throw ValidationError.field(`${prefix}receipt_type`, `is ${receipt.receipt_type}: refund receipts go to /v1/refunds/loyverse`);
  }
  if (receipt.cancelled_at) {
    throw ValidationError.field(`${prefix}cancelled_at`, 'is set: a cancelled receipt accrues nothing; post it to /v1/refunds/loyverse to reverse the sale');
  }
  const measured = measureReceipt(receipt, prefix);
  const closedAt = receipt.receipt_date ?? receipt.created_at;
  const customerRef = receipt.customer_id?.trim();
  return {
    orderId: receipt.receipt_number,
    scope: receipt.store_id,
    // The receipt carries no contact details, only `customer_id` (fetched by the core when it can).
    customer: {},
    ...(customerRef ? { customerRef } : {}),
    check: {
      amount: measured.amountCents,
      // Receipts carry no currency (pos-facts): the store's currency is DEFAULT_CURRENCY.
      currency: context.defaultCurrency,
      selections: measured.lines.map((l) => l.selection),
      externalTransactionId: receipt.receipt_number,
      ...(closedAt ? { checkClosedAt: closedAt } : {}),
      ...(receipt.updated_at ? { orderUpdatedAt: receipt.updated_at } : {}),
      ...nonZero('taxAmount', measured.taxCents),
      ...nonZero('discountAmount', measured.discountCents),
      ...nonZero('tipAmount', measured.tipCents),
      ...nonZero('serviceAmount', measured.serviceCents),
    },
  };
}
