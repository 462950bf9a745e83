/**
 * A paid Toast order → the checkout intent (pure), and how a Toast `Order` is read (refund.ts and
 * webhook.ts read it the same way): the accepted wrappers, which checks and payments are live, the
 * order's state (paid, open, voided, deleted), one selection as a neutral Selection, and the
 * order's customer.
 */
import { hasContact, normalizeCustomer, toE164, type Customer } from '../../src/customer.js';
import { ValidationError } from '../../src/errors.js';
import type { Check as UpstreamCheck, Selection as CheckSelection } from '../../src/loyalty/contract.js';
import { centsToDecimalString } from '../../src/money.js';
import type { CheckPart } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/selection.js';
import { isObject, parseWith } from '../../src/validation.js';
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
  return { raw, order: parseWith(Order, raw, prefix), prefix, ...(typeof selector === 'string' ? { refundTransactionGuid: selector.trim() } : {}) };
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
  const live = liveChecks(read);
  if (order.voided || live.length === 0) {
    // An order voided before anyone paid was never accrued; one voided after payment (it has
    // payments, voided ones included, or it was closed) may have been, so it is reversed.
    return { kind: 'voided', paid: Boolean(order.closedDate) || order.checks.some((c) => c.payments.length > 0) };
  }
  for (const { check, path } of live) {
    if (check.paymentStatus) {
      if (!PAID_CHECK_STATUSES.has(check.paymentStatus)) return { kind: 'open', field: `${path}.paymentStatus`, reason: `is ${check.paymentStatus}: the order is not paid yet` };
    } else if (!check.closedDate) {
      return { kind: 'open', field: `${path}.paymentStatus`, reason: 'is missing and the check has no closedDate: the order is not known to be paid' };
    }
  }
  return { kind: 'closed' };
}

/**
 * One selection → the neutral Selection. Toast's `price` is the net LINE price (after item and
 * check discounts, quantity and modifiers; tax excluded), so it is the selection's `totalPrice`.
 * Toast has no net unit price (`receiptLinePrice` is before discounts and can include tax), so the
 * unit `price` is the line total ÷ a whole quantity when that is exact, else left out. A weighed
 * quantity (0.45 lb) follows the one quantity rule of src/selection.ts: quantity 1 at the line total.
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
// The customer of a Toast order: `checks[].customer {phone, phoneCountryCode, email, firstName,
// lastName}` and `checks[].appliedLoyaltyInfo.loyaltyIdentifier` (pos-facts "Customer
// identification"). The order is one transaction, so it has one customer.

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

const CONTACT_KEYS = ['phone', 'email', 'serialNumber'] as const;

/** Same guest: they share a contact value and contradict each other on none. */
function sameGuest(a: Customer, b: Customer): boolean {
  const shared = CONTACT_KEYS.filter((k) => a[k] && b[k]);
  return shared.length > 0 && shared.every((k) => a[k] === b[k]);
}

/**
 * A split order can carry a guest per check. The first check's guest with contact details takes
 * the order; a second, different guest is refused (the points of one guest's check would go to
 * another), so it fails loudly instead of crediting the wrong person.
 */
function customerOf(live: LiveCheck[], region: string): Customer {
  let found: { customer: Customer; path: string } | undefined;
  for (const { check, path } of live) {
    const customerPath = `${path}.customer`;
    const raw = check.customer;
    const customer = normalizeCustomer(
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
    if (!hasContact(customer)) continue;
    if (!found) {
      found = { customer, path: customerPath };
    } else if (sameGuest(found.customer, customer)) {
      found.customer = { ...customer, ...found.customer };
    } else {
      throw ValidationError.field(customerPath, `is a different guest than ${found.path}: the bridge accrues one order to one customer, and will not credit one guest with another's check`);
    }
  }
  return found?.customer ?? {};
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

export function parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
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
