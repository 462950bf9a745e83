/**
 * Clover orders → checkout intents (pure), and how an order is identified and measured (refund.ts
 * and webhook.ts read orders the same way).
 *
 * IDENTITY. A Clover order id is 13 characters, unique within its merchant: the merchant id is the
 * transaction scope (`clover:<merchant>:<order>`). It comes from `merchant.id`, else from the
 * order's `href` (`…/v3/merchants/{mId}/orders/{id}`, as the API returns it), and for webhooks from
 * the delivery's `merchants` key. A direct post that names none is in the posting merchant's
 * Clover account (CLOVER_MERCHANT_ID, its pos.clover.merchantId, or the only Clover account the
 * bridge has configured: `requireMerchant`); without one it is refused: guessing could merge two
 * Clover merchants' orders.
 *
 * AMOUNTS. `order.total` is Clover's own figure: after discounts, service charge and tax included,
 * tip excluded (the fixture: total 22900 = the payment's amount, tax 0, no tip). The tax inside it
 * is stated only on the payments (`payments[].taxAmount`); Clover computes tax per line and tax rate
 * in ways third parties cannot reproduce to the cent, so the bridge never recomputes it. Hence:
 *
 *   Check.amount = order.total − Σ payments.taxAmount          (Clover's numbers, exact)
 *
 * and, independently, from the lines (Clover "Calculate order totals", steps 1–3):
 *
 *   line     = price (× unitQty / 1000 for weighed goods) + modifications
 *              − percentage discounts (whole percent, capped at 100 as Clover's OrderCalc does)
 *              − amount discounts (negative in Clover: -100 is 1.00 off)
 *   lines    = Σ lines (exchanged lines left out; refunded lines kept: see measureOrder)
 *   order    = lines − order-level percentage, then amount discounts + service charge
 *
 * The two must agree to the minor unit (`order + tax = total`) or the order is refused: a list
 * fetched without `lineItems.discounts` or `modifications` expanded, a charge this code does not
 * know, or a rounding Clover does differently all fail loudly instead of accruing a wrong amount.
 *
 * ROUNDING. Clover computes in its currency's minor unit and rounds each amount a receipt shows
 * (a weighed line, a percentage discount, a service charge) half up; we round the same amounts the
 * same way, once each, with the bridge's one rounding function (`divRoundHalfAwayFromZero`: equal to
 * half up for these non-negative amounts). Each final minor-unit amount then becomes cents through
 * the currency's ISO 4217 exponent (`minorUnitsToCents`): exact for USD and JPY, rounded once there
 * for three-decimal currencies. For USD this is exactly "price × unitQty / 1000, rounded once".
 */
import { hasContact, normalizeCustomer, type Customer } from '../../src/kernel/customer.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { Selection } from '../../src/loyalty/contract.js';
import { assertCurrency, decimalToString, divRoundHalfAwayFromZero, minorUnitsToCents, minorUnitsToDecimal } from '../../src/kernel/money.js';
import { nonZero } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { CLOVER_ID, CloverOrder, type CloverCustomer, type CloverDiscount, type CloverLineItem, type CloverPayment } from './schema.js';

/** Payment results that mean the money was taken (an AUTH is captured later with its tip: tax and amount are final). */
const COUNTED_RESULTS = new Set(['SUCCESS', 'AUTH', 'AUTH_COMPLETED']);
/** Payment results that took no money: left out of the sums. */
const VOID_RESULTS = new Set(['FAIL', 'VOIDED']);

export const HREF_MERCHANT = /\/v3\/merchants\/([0-9A-Z]{13})\//;

export function sum(values: Iterable<bigint>): bigint {
  let total = 0n;
  for (const v of values) total += v;
  return total;
}

function minBig(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/** A bare order, or the `{ "order": … }` wrapper. */
export function readOrder(body: unknown): { order: CloverOrder; raw: unknown; prefix: string } {
  if (isObject(body) && 'order' in body && !('id' in body)) {
    return { order: parseWith(CloverOrder, body.order, 'order'), raw: body.order, prefix: 'order.' };
  }
  return { order: parseWith(CloverOrder, body), raw: body, prefix: '' };
}

/** The merchant that scopes an order id: `merchant.id`, else the merchant in the order's API `href`. */
export function merchantOf(order: { merchant?: { id: string } | null; href?: string | null }, prefix: string, what = 'order'): string | undefined {
  const fromRef = order.merchant?.id;
  const fromHref = order.href ? HREF_MERCHANT.exec(order.href)?.[1] : undefined;
  if (fromRef && fromHref && fromRef !== fromHref) {
    throw ValidationError.field(`${prefix}merchant.id`, `is ${fromRef}, but the ${what}'s href names merchant ${fromHref}`);
  }
  return fromRef ?? fromHref;
}

/**
 * The merchant scope of an order id: the one the payload names; else, for a direct post, the posting
 * merchant's Clover account (`context.posAccount`: its binding, CLOVER_MERCHANT_ID or its
 * pos.clover.merchantId, or the only Clover account the bridge has configured); else refused.
 */
export function requireMerchant(merchant: string | undefined, prefix: string, what: string, context?: AdapterContext): string {
  if (merchant) return merchant;
  const bound = context?.posAccount?.trim().toUpperCase();
  if (bound && CLOVER_ID.test(bound)) return bound;
  if (bound) {
    throw ValidationError.field(`${prefix}merchant.id`, `is required: the Clover account this merchant is bound to (${JSON.stringify(context!.posAccount)}) is not a 13-character Clover merchant id, so it cannot stand in for one`);
  }
  throw ValidationError.field(
    `${prefix}merchant.id`,
    `is required: Clover ${what} ids are unique only within a merchant; send the ${what} as the Clover API returns it (its href names the merchant), add "merchant": { "id": "<merchant id>" }, or bind this merchant to its Clover account (CLOVER_MERCHANT_ID, or the merchant's pos.clover.merchantId)`,
  );
}

/** Paid: Clover locks an order once it is paid ("locked"), and newer orders also say `paymentState: PAID`. */
export function isPaid(order: CloverOrder): boolean {
  return order.state === 'locked' || order.paymentState === 'PAID';
}

/** The first payment whose outcome is not settled yet (pending, offline, being voided, unknown), if any. */
export function unsettledPayment(order: CloverOrder): { index: number; payment: CloverPayment } | undefined {
  const payments = order.payments ?? [];
  const index = payments.findIndex((p) => !p.result || (!COUNTED_RESULTS.has(p.result) && !VOID_RESULTS.has(p.result)));
  return index < 0 ? undefined : { index, payment: payments[index]! };
}

interface MeasuredLine {
  line: CloverLineItem;
  index: number;
  /** After the line's own discounts, tax excluded; minor units. */
  total: bigint;
  discount: bigint;
}

function percentOf(discounts: readonly CloverDiscount[]): bigint {
  // Clover's OrderCalc adds the percentages of all discounts and caps the sum at 100.
  return minBig(100n, sum(discounts.map((d) => BigInt(d.percentage ?? 0))));
}

function amountOff(discounts: readonly CloverDiscount[]): bigint {
  return -sum(discounts.map((d) => d.amount ?? 0n));
}

function measureLine(line: CloverLineItem, index: number, field: string): MeasuredLine {
  // Weighed goods: price is per unit and unitQty counts thousandths (2500 = 2.5 units).
  const base = line.unitQty == null ? line.price : divRoundHalfAwayFromZero(line.price * BigInt(line.unitQty), 1000n);
  const subtotal = base + sum((line.modifications ?? []).map((m) => m.amount ?? 0n));
  if (subtotal < 0n) throw ValidationError.field(`${field}.modifications`, `make the line negative (${subtotal} minor units)`);
  const discounts = line.discounts ?? [];
  // Percentage discounts first, then amount discounts (Clover "Calculate order totals", step 2).
  const discount = divRoundHalfAwayFromZero(subtotal * percentOf(discounts), 100n) + amountOff(discounts);
  const total = subtotal - discount;
  if (total < 0n) throw ValidationError.field(`${field}.discounts`, `take ${discount} minor units off a line of ${subtotal}: the line would be negative`);
  return { line, index, total, discount };
}

export interface MeasuredOrder {
  currency: string;
  merchant: string;
  lines: MeasuredLine[];
  /** All in minor units of `currency`. */
  total: bigint;
  amount: bigint;
  tax: bigint;
  tip: bigint;
  service: bigint;
  discount: bigint;
  paidAt?: number;
}

export function countedPayments(order: CloverOrder, prefix: string): { payment: CloverPayment; index: number }[] {
  if (!order.payments) {
    throw ValidationError.field(`${prefix}payments`, 'are required: the tax inside order.total is stated only on the payments (fetch the order with expand=payments)');
  }
  const unsettled = unsettledPayment(order);
  if (unsettled) {
    throw ValidationError.field(
      `${prefix}payments.${unsettled.index}.result`,
      unsettled.payment.result ? `is ${unsettled.payment.result}: the payment is not settled yet` : 'is required to know whether the payment took money',
    );
  }
  return order.payments.map((payment, index) => ({ payment, index })).filter(({ payment }) => COUNTED_RESULTS.has(payment.result!));
}

export function measureOrder(order: CloverOrder, context: AdapterContext, prefix = ''): MeasuredOrder {
  const merchant = requireMerchant(merchantOf(order, prefix), prefix, 'order', context);
  // Clover states the merchant's currency on the order; DEFAULT_CURRENCY only where it does not.
  const currency = assertCurrency(order.currency ?? context.defaultCurrency, `${prefix}currency`);
  if (order.total == null) throw ValidationError.field(`${prefix}total`, 'is required');
  if (!order.lineItems) throw ValidationError.field(`${prefix}lineItems`, 'are required (fetch the order with expand=lineItems.discounts,lineItems.modifications)');
  const total = order.total;

  // Exchanged lines are not part of the sale (they were swapped). Refunded lines are: Clover marks
  // a refunded line `refunded` and keeps the order's `total` and payments as they were, the money
  // given back being a Refund of its own. Leaving them out made a partly refunded order (as
  // backfill or a late webhook reads it) no longer add up to its total, so its sale could not be
  // accrued; its refunds are measured from the Refunds (refund.ts).
  const lines = order.lineItems
    .map((line, index) => ({ line, index }))
    .filter(({ line }) => !line.exchanged)
    .map(({ line, index }) => measureLine(line, index, `${prefix}lineItems.${index}`));
  const linesNet = sum(lines.map((l) => l.total));
  const lineDiscounts = sum(lines.map((l) => l.discount));

  const orderDiscounts = order.discounts ?? [];
  const orderDiscount = divRoundHalfAwayFromZero(linesNet * percentOf(orderDiscounts), 100n) + amountOff(orderDiscounts);

  const counted = countedPayments(order, prefix);
  const paid = sum(counted.map(({ payment }) => payment.amount));
  if (paid !== total) {
    throw ValidationError.field(`${prefix}payments`, `pay ${paid} of the order's total ${total} (minor units): only a fully paid order accrues`);
  }
  const tax = sum(
    counted.map(({ payment, index }) => {
      if (payment.taxAmount == null) throw ValidationError.field(`${prefix}payments.${index}.taxAmount`, 'is required: it is the tax inside order.total');
      return payment.taxAmount;
    }),
  );
  const tip = sum(counted.map(({ payment }) => payment.tipAmount ?? 0n));

  // The service charge Clover applied is stated on the payments; from the rate only when they do not.
  const stated = counted.filter(({ payment }) => payment.serviceCharge?.amount != null);
  let service = 0n;
  if (stated.length > 0) {
    service = sum(stated.map(({ payment }) => payment.serviceCharge!.amount!));
  } else if (order.serviceCharge) {
    const sc = order.serviceCharge;
    // On the lines after their own discounts (Clover: "(item + modifiers − line item discounts) × %").
    if (sc.percentageDecimal != null) service = divRoundHalfAwayFromZero(linesNet * BigInt(sc.percentageDecimal), 1_000_000n);
    else if (sc.percentage != null) service = divRoundHalfAwayFromZero(linesNet * BigInt(sc.percentage), 100n);
    else throw ValidationError.field(`${prefix}serviceCharge`, 'has no percentage and no payment states its amount');
  }

  if (order.isVat && tax !== 0n) {
    // VAT prices contain the tax, and Clover states it only per payment, not per line: the lines'
    // tax-excluded totals cannot be known exactly, so such orders are refused rather than guessed.
    throw ValidationError.field(`${prefix}isVat`, 'is true with tax in the prices: VAT-inclusive Clover orders are not supported (line totals without tax are unknown)');
  }
  const fromLines = linesNet - orderDiscount + service + tax;
  if (fromLines !== total) {
    throw ValidationError.field(
      `${prefix}total`,
      `is ${total}, but the order's parts add up to ${fromLines} (lines ${linesNet} − order discounts ${orderDiscount} + service charge ${service} + tax ${tax}, minor units): ` +
        'fetch the order with expand=lineItems.discounts,lineItems.modifications,discounts,payments so every part is present',
    );
  }
  const amount = total - tax;
  if (amount < 0n) throw ValidationError.field(`${prefix}total`, `is less than its tax (${total} < ${tax})`);
  const paidTimes = counted.map(({ payment }) => payment.createdTime).filter((t): t is number => t != null);
  return {
    currency,
    merchant,
    lines,
    total,
    amount,
    tax,
    tip,
    service,
    discount: lineDiscounts + orderDiscount,
    ...(paidTimes.length > 0 ? { paidAt: Math.max(...paidTimes) } : {}),
  };
}

/**
 * Lines → selections. Clover usually sends one line per unit: identical lines (same item, name,
 * unit price and total) become one selection with their count as quantity. A weighed line keeps its
 * quantity in units (unitQty / 1000) and goes through the one quantity rule (`toSelection`): whole →
 * quantity and unit price; fractional → quantity 1 at the exact line total.
 */
function selectionsOf(measured: MeasuredOrder, prefix: string): Selection[] {
  const { currency } = measured;
  const groups = new Map<string, { first: MeasuredLine; count: number }>();
  const order: (string | MeasuredLine)[] = [];
  for (const m of measured.lines) {
    if (m.line.unitQty != null) {
      order.push(m);
      continue;
    }
    const key = JSON.stringify([m.line.item?.id ?? m.line.id, m.line.name ?? '', String(m.line.price), String(m.total)]);
    const group = groups.get(key);
    if (group) group.count++;
    else {
      groups.set(key, { first: m, count: 1 });
      order.push(key);
    }
  }
  return order.map((entry) => {
    const m = typeof entry === 'string' ? groups.get(entry)!.first : entry;
    const count = typeof entry === 'string' ? groups.get(entry)!.count : 1;
    const field = `${prefix}lineItems.${m.index}`;
    const quantity = m.line.unitQty != null ? decimalToString({ units: BigInt(m.line.unitQty), scale: 3 }) : count;
    return toSelection(
      {
        id: m.line.item?.id ?? m.line.id,
        name: m.line.name ?? undefined,
        quantity,
        unitPrice: minorUnitsToDecimal(m.line.price, currency, `${field}.price`),
        totalCents: minorUnitsToCents(m.total * BigInt(count), currency, `${field}.price`),
      },
      field,
    );
  });
}

/** Phone and email of a Clover customer (the primary email first), normalized by the core's rules. */
export function contactOf(customer: CloverCustomer, region: string, field: string): Customer {
  const phone = (customer.phoneNumbers ?? []).map((p) => p.phoneNumber?.trim()).find((p) => p);
  const emails = (customer.emailAddresses ?? []).filter((e) => e.emailAddress?.trim());
  const email = (emails.find((e) => e.primaryEmail) ?? emails[0])?.emailAddress;
  return normalizeCustomer({ phone, email, firstName: customer.firstName, lastName: customer.lastName }, region, field);
}

function iso(ms: number | null | undefined): string | undefined {
  return ms == null ? undefined : new Date(ms).toISOString();
}

export function parseCloverCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
  const { order, prefix } = readOrder(body);
  if (!isPaid(order)) {
    throw ValidationError.field(`${prefix}state`, `is ${JSON.stringify(order.state ?? null)}: only paid Clover orders (state "locked") accrue`);
  }
  const measured = measureOrder(order, context, prefix);
  const cents = (minor: bigint, field: string) => minorUnitsToCents(minor, measured.currency, `${prefix}${field}`);

  // The order's customer: contact details when `customers` was expanded with them, else its id for
  // the core to fetch (`fetchCustomer`); the merchant travels in the ref because customer ids are
  // fetched under /v3/merchants/{mId}/.
  const first = order.customers?.[0];
  const customer = first ? contactOf(first, context.defaultPhoneRegion, `${prefix}customers.0`) : {};
  const customerRef = first?.id && !hasContact(customer) ? `${measured.merchant}/${first.id}` : undefined;

  const openedAt = iso(order.createdTime);
  const closedAt = iso(measured.paidAt);
  return {
    orderId: order.id,
    scope: measured.merchant,
    customer,
    ...(customerRef ? { customerRef } : {}),
    check: {
      amount: cents(measured.amount, 'total'),
      currency: measured.currency,
      selections: selectionsOf(measured, prefix),
      externalTransactionId: order.id,
      ...(openedAt ? { checkOpenedAt: openedAt } : {}),
      ...(closedAt ? { checkClosedAt: closedAt } : {}),
      ...nonZero('taxAmount', cents(measured.tax, 'payments.taxAmount')),
      ...nonZero('discountAmount', cents(measured.discount, 'discounts')),
      ...nonZero('tipAmount', cents(measured.tip, 'payments.tipAmount')),
      ...nonZero('serviceAmount', cents(measured.service, 'serviceCharge')),
    },
  };
}
