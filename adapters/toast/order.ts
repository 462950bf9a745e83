/**
 * Reading a Toast `Order`: the accepted wrappers, which checks and payments are live, the order's
 * state (paid, open, voided, deleted), and one selection as a neutral Selection.
 */
import { ValidationError } from '../../src/errors.js';
import type { Selection as CheckSelection } from '../../src/loyalty/contract.js';
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

