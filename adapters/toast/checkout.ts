/**
 * A paid Toast check → the checkout intent (pure), and how a Toast `Order` is read (refund.ts and
 * webhook.ts read it the same way): the accepted wrappers, which checks and payments are live, each
 * check's state (paid, open, voided), one selection as a neutral Selection, and a check's guest.
 *
 * Loyalty belongs to the check, not to the order (pos-facts "Toast's loyalty integration API"): an
 * order's checks may name different guests, and Toast's register sends each check's ACCRUE on its
 * own. So each check is a sale of its own: transactionId `toast:<order guid>:<check guid>`, the
 * order guid its orderId. Builds before kept the order whole (`toast:<order guid>`, every check
 * summed): a check of such an order is found there (`recordedAs`), never accrued again.
 */
import { normalizeCustomer, toE164, type Customer } from '../../src/kernel/customer.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { Check as UpstreamCheck, Selection as CheckSelection } from '../../src/loyalty/contract.js';
import { centsToDecimalString } from '../../src/kernel/money.js';
import type { CheckPart } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { Order, type Check, type Selection } from './schema.js';

const PAID_CHECK_STATUSES: ReadonlySet<string> = new Set(['PAID', 'CLOSED']);
/** Payment statuses of money that never reached the restaurant: no tip, no refund counts from them. */
const DEAD_PAYMENT_STATUSES: ReadonlySet<string> = new Set(['VOIDED', 'CANCELLED', 'DENIED', 'ERROR', 'ERROR_NETWORK', 'PROCESSING_VOID', 'VOIDED_AT_RISK']);

/** An `Order` read from a request, with the path its fields are reported under. */
export interface ReadOrder {
  raw: Record<string, unknown>;
  order: Order;
  prefix: string;
  refundTransactionGuid?: string;
  /** The check a request names (`{ "order": …, "checkGuid": … }`): the sale it is about. */
  checkGuid?: string;
}

export function at(prefix: string, field: string): string {
  return prefix ? `${prefix}.${field}` : field;
}

/**
 * Bare `Order`, `{ "order": Order }` (also with `refundTransactionGuid` to pick one refund), or the
 * `{ "orders": [Order] }` wrapper of the orders API with exactly one order.
 */
export function readOrder(body: unknown): ReadOrder {
  if (!isObject(body)) throw ValidationError.field('', 'must be a Toast order (a JSON object)');
  let raw: unknown = body;
  let prefix = '';
  if ('order' in body) {
    raw = body.order;
    prefix = 'order';
  } else if ('orders' in body) {
    if (!Array.isArray(body.orders) || body.orders.length !== 1) throw ValidationError.field('orders', 'must hold exactly one Toast order');
    raw = body.orders[0];
    prefix = 'orders.0';
  }
  if (!isObject(raw)) throw ValidationError.field(prefix, 'must be a Toast order (a JSON object)');
  const selector = prefix === 'order' ? body.refundTransactionGuid : undefined;
  if (selector !== undefined && (typeof selector !== 'string' || selector.trim() === '')) {
    throw ValidationError.field('refundTransactionGuid', 'must be the guid of one of the order\'s refund transactions');
  }
  const check = prefix === 'order' ? body.checkGuid : undefined;
  if (check !== undefined && (typeof check !== 'string' || check.trim() === '')) throw ValidationError.field('checkGuid', "must be the guid of one of the order's checks");
  return {
    raw,
    order: parseWith(Order, raw, prefix),
    prefix,
    ...(typeof selector === 'string' ? { refundTransactionGuid: selector.trim() } : {}),
    ...(typeof check === 'string' ? { checkGuid: check.trim() } : {}),
  };
}

/** The transactionId builds before per-check sales gave the whole order: where a check of an order recorded then is found. */
export function wholeOrderId(orderGuid: string): string {
  return deriveTransactionId('toast', orderGuid);
}

/** A check's guid: what its sale is known by (its transactionId's part). */
export function checkGuidOf({ check, path }: LiveCheck): string {
  if (!check.guid) throw ValidationError.field(`${path}.guid`, 'is required: loyalty belongs to the check, and a check is known by its guid');
  return check.guid;
}

/**
 * The check a request is about: the one it names (`checkGuid`), else the order's only one among
 * `among`. An order of several checks names one: each is a sale of its own.
 */
export function chosenCheck(read: ReadOrder, among: readonly LiveCheck[], posted: string): LiveCheck {
  if (read.checkGuid !== undefined) {
    const named = among.find((c) => c.check.guid === read.checkGuid);
    if (!named) throw ValidationError.field('checkGuid', `names no ${posted === 'refund' ? '' : 'live '}check of this order; it has ${among.map((c) => c.check.guid ?? '(no guid)').join(', ') || 'none'}`);
    return named;
  }
  if (among.length === 1) return among[0]!;
  throw ValidationError.field(
    'checkGuid',
    `is required: this order has ${among.length} checks, each a sale of its own (loyalty belongs to the check); post each as { "order": …, "checkGuid": "…" }`,
  );
}

export interface LiveCheck {
  check: Check;
  path: string;
}

/** Voided and deleted checks are not part of the sale (a deleted check was combined into another order). */
export function liveChecks(read: ReadOrder): LiveCheck[] {
  return read.order.checks.flatMap((check, i) => (check.voided || check.deleted ? [] : [{ check, path: at(read.prefix, `checks.${i}`) }]));
}

/** Payments that took money: voided, cancelled, denied and failed ones took none. */
export function livePayments(check: Check): { payment: Check['payments'][number]; index: number }[] {
  return check.payments.flatMap((payment, index) =>
    (payment.paymentStatus && DEAD_PAYMENT_STATUSES.has(payment.paymentStatus)) || (payment.voidInfo !== undefined && payment.voidInfo !== null) ? [] : [{ payment, index }],
  );
}

export type OrderState =
  | { kind: 'closed' }
  | { kind: 'open'; field: string; reason: string }
  | { kind: 'voided'; paid: boolean }
  | { kind: 'deleted' };

/**
 * Check `paymentStatus` (response only): OPEN has an outstanding balance; PAID is paid with the tip
 * not yet adjusted; CLOSED is settled. Tips are not part of the Check amount, so PAID is enough.
 * Without a `paymentStatus` only a `closedDate` proves payment: Toast fills `paidDate` with the
 * current time on orders POSTed without one, so it proves nothing.
 */
export function stateOf(read: ReadOrder): OrderState {
  const { order } = read;
  // Deleted checks were combined into another order, which carries their sale from then on.
  if (order.deleted || order.checks.every((c) => c.deleted)) return { kind: 'deleted' };
  if (order.voided || liveChecks(read).length === 0) {
    // An order voided before anyone paid was never accrued; one voided after payment (it has
    // payments, voided ones included, or it was closed) may have been, so it is reversed.
    return { kind: 'voided', paid: Boolean(order.closedDate) || order.checks.some((c) => c.payments.length > 0) };
  }
  for (const live of liveChecks(read)) {
    const open = unpaid(live);
    if (open) return { kind: 'open', ...open };
  }
  return { kind: 'closed' };
}

/** Why a live check is not paid yet (then it is no sale yet), or undefined when it is. */
export function unpaid({ check, path }: LiveCheck): { field: string; reason: string } | undefined {
  if (check.paymentStatus) {
    return PAID_CHECK_STATUSES.has(check.paymentStatus) ? undefined : { field: `${path}.paymentStatus`, reason: `is ${check.paymentStatus}: the check is not paid yet` };
  }
  return check.closedDate ? undefined : { field: `${path}.paymentStatus`, reason: 'is missing and the check has no closedDate: the check is not known to be paid' };
}

/** A check that may have been accrued: it was paid, or money was taken on it. */
export function wasPaid(check: Check): boolean {
  if (check.payments.length > 0) return true;
  return check.paymentStatus ? PAID_CHECK_STATUSES.has(check.paymentStatus) : Boolean(check.closedDate);
}

/**
 * One selection → the neutral Selection. Toast's `price` is the net LINE price (after item and
 * check discounts, quantity and modifiers; tax excluded), so it is the selection's `totalPrice`.
 * Toast has no net unit price (`receiptLinePrice` is before discounts and can include tax), so the
 * unit `price` is the line total ÷ a whole quantity when that is exact, else left out. A weighed
 * quantity (0.45 lb) follows the one quantity rule of src/loyalty/selection.ts: quantity 1 at the line total.
 */
export function selectionOf(selection: Selection, path: string): CheckSelection {
  if (selection.quantity === undefined || selection.quantity === null) throw ValidationError.field(`${path}.quantity`, 'is required on a selection that is not voided');
  if (selection.price === undefined || selection.price === null) throw ValidationError.field(`${path}.price`, 'is required on a selection that is not voided');
  const line = toSelection(
    {
      id: selection.item?.guid ?? undefined,
      groupId: selection.itemGroup?.guid ?? undefined,
      name: selection.displayName?.trim() || undefined,
      quantity: selection.quantity,
      totalCents: selection.price,
    },
    path,
  );
  if (line.price === undefined && line.totalPrice % line.quantity === 0) return { ...line, price: line.totalPrice / line.quantity };
  return line;
}

// ------------------------------------------------------------------ the customer
// The guest of a Toast check: `checks[].customer {phone, phoneCountryCode, email, firstName,
// lastName}` and `checks[].appliedLoyaltyInfo.loyaltyIdentifier` (pos-facts "Customer
// identification"). Each check is a sale of its own, so each has its own guest.

/**
 * `loyaltyIdentifier` names an account of the loyalty program in `vendor`. Only an INTEGRATION
 * vendor (a partner program, as this loyalty service is to Toast) can hold this service's card
 * serial; TOAST, PUNCHH, PAYTRONIX… identifiers belong to other programs and would make the
 * loyalty service look for a card that is not its own, so they are not sent.
 */
function cardSerialOf(info: Check['appliedLoyaltyInfo']): string | undefined {
  if (!info?.loyaltyIdentifier?.trim()) return undefined;
  return info.vendor === undefined || info.vendor === null || info.vendor === 'INTEGRATION' ? info.loyaltyIdentifier.trim() : undefined;
}

/**
 * `phoneCountryCode` (the guest's international calling code) completes a national `phone`; a
 * value that is not a calling code (`1`, `+1`, `44`) is refused rather than guessed at. Without it
 * the number is read in DEFAULT_PHONE_REGION.
 */
function phoneOf(customer: NonNullable<Check['customer']>, region: string, path: string): string | undefined {
  const phone = customer.phone?.trim();
  if (!phone) return undefined;
  const code = customer.phoneCountryCode?.trim();
  if (!code || phone.startsWith('+')) return toE164(phone, region, `${path}.phone`);
  if (!/^\+?[0-9]{1,3}$/.test(code)) throw ValidationError.field(`${path}.phoneCountryCode`, 'must be an international calling code such as "1" or "+1"');
  return toE164(`+${code.replace(/^\+/, '')}${phone}`, region, `${path}.phone`);
}

/** The check's guest: its customer's contacts and the loyalty account the register attached to it. */
function customerOf({ check, path }: LiveCheck, region: string): Customer {
  const customerPath = `${path}.customer`;
  const raw = check.customer;
  return normalizeCustomer(
    {
      phone: raw ? phoneOf(raw, region, customerPath) : undefined,
      email: raw?.email,
      firstName: raw?.firstName,
      lastName: raw?.lastName,
      cardSerial: cardSerialOf(check.appliedLoyaltyInfo),
    },
    region,
    customerPath,
  );
}

// ------------------------------------------------------------------ the Check

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

/** A check's purchase in cents, and its parts: what the Check carries of it (the refund of the whole check takes back `amount`). */
export function checkMoneyOf({ check, path }: LiveCheck): { amount: number; tax: number; tip: number; discount: number; service: number; selections: CheckSelection[] } {
  if (check.amount === undefined || check.amount === null) throw ValidationError.field(`${path}.amount`, 'is required on a check that is not voided');
  let items = 0;
  let discount = discountCents(check.appliedDiscounts);
  const selections: CheckSelection[] = [];
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
  let amount: number;
  if (items + charges === check.amount) amount = check.amount;
  else if (gratuity !== 0 && items + charges + gratuity === check.amount) amount = check.amount - gratuity;
  else {
    throw ValidationError.field(
      `${path}.amount`,
      `is ${centsToDecimalString(check.amount)} but the check's selections (price) and service charges (chargeAmount) add up to ${centsToDecimalString(items + charges)}` +
        (gratuity ? ` (${centsToDecimalString(items + charges + gratuity)} with its gratuity)` : '') +
        ': the bridge cannot tell which amount the loyalty service should see',
    );
  }
  if (amount < 0) throw ValidationError.field(`${path}.amount`, `comes to ${centsToDecimalString(amount)} without gratuity: a purchase cannot be negative`);
  let tip = gratuity;
  for (const { payment } of livePayments(check)) tip += payment.tipAmount ?? 0;
  return { amount, tax: check.taxAmount ?? 0, tip, discount, service: charges, selections };
}

/** One check's sale: its purchase, its guest, its own transactionId (`part`), and the whole order's id builds before gave it. */
export function checkSaleOf(read: ReadOrder, live: LiveCheck, context: AdapterContext): CheckoutIntent {
  const { order, prefix } = read;
  const money = checkMoneyOf(live);
  const closedAt = isoDate(live.check.closedDate, `${live.path}.closedDate`) ?? isoDate(order.closedDate, at(prefix, 'closedDate')) ?? isoDate(order.paidDate, at(prefix, 'paidDate'));
  const openedAt = isoDate(order.openedDate, at(prefix, 'openedDate'));
  return {
    orderId: order.guid,
    part: checkGuidOf(live),
    recordedAs: [wholeOrderId(order.guid)],
    customer: customerOf(live, context.defaultPhoneRegion),
    check: {
      amount: money.amount,
      currency: context.defaultCurrency,
      selections: money.selections,
      externalTransactionId: order.guid,
      ...(openedAt ? { checkOpenedAt: openedAt } : {}),
      ...(closedAt ? { checkClosedAt: closedAt } : {}),
      ...positiveOnly('taxAmount', money.tax),
      ...positiveOnly('discountAmount', money.discount),
      ...positiveOnly('tipAmount', money.tip),
      ...positiveOnly('serviceAmount', money.service),
    },
  };
}

export function parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
  const read = readOrder(body);
  const state = stateOf(read);
  switch (state.kind) {
    case 'closed':
    case 'open': {
      // Each paid check is a sale of its own, whatever the others' state.
      const live = chosenCheck(read, liveChecks(read), 'sale');
      const open = unpaid(live);
      if (open) throw ValidationError.field(open.field, open.reason);
      return checkSaleOf(read, live, context);
    }
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
