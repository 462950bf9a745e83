/**
 * What a partial refund leaves of a Check. The loyalty service's `reverse` is all-or-nothing, so a
 * partial refund reverses the whole accrual and accrues this remainder under a new transactionId.
 *
 * Refunds are measured like `Check.amount` (tax and tip excluded). With refunded lines, each line
 * is taken off its selection (by item id) in quantity and total. With an amount only, the POS has
 * not said which items were returned, so the remainder carries one selection for the remaining
 * amount: per-product rules then see no product rather than products that were refunded.
 * Tax, tip, discount and service amounts describe the original sale and are not carried over.
 */
import { BridgeError } from '../kernel/errors.js';
import type { Check, Selection } from '../loyalty/contract.js';
import { formatCents, majorUnits } from '../kernel/money.js';
import type { RefundLine } from '../pos/contract.js';

/**
 * 409. The message speaks the POS's language, major units of the order's currency ("70.00 USD"),
 * since that is what it sent; `remainingCents` stays for programs, `remaining` and `currency` say
 * the same in major units.
 */
export class RefundExceedsRemainderError extends BridgeError {
  constructor(message: string, remainingCents: number, amounts?: { remaining: string; currency: string; refunded?: string }) {
    super(message, 409, 'refund_exceeds_remainder', { remainingCents, ...amounts });
  }
}

export interface Remainder {
  refundedCents: number;
  /** Undefined when nothing remains: the partial refund is in fact a full one. */
  check?: Check;
}

/** `alreadyRefundedCents`: earlier partial refunds recorded without a remainder (PARTIAL_REFUND_POLICY=full_only). */
export function remainderAfterRefund(check: Check, refund: { amountCents?: number; items?: RefundLine[] }, alreadyRefundedCents = 0): Remainder {
  const refundedCents = refund.amountCents ?? (refund.items ?? []).reduce((sum, line) => sum + line.totalCents, 0);
  const remaining = check.amount - alreadyRefundedCents;
  if (refundedCents > remaining) {
    throw new RefundExceedsRemainderError(`refund of ${formatCents(refundedCents, check.currency)} is more than the ${formatCents(remaining, check.currency)} that remains of this order`, remaining, {
      refunded: majorUnits(refundedCents, check.currency),
      remaining: majorUnits(remaining, check.currency),
      currency: check.currency,
    });
  }
  const amount = remaining - refundedCents;
  if (amount === 0) return { refundedCents };
  const selections = refund.items ? takeLines(check.selections, refund.items, check.currency) : [{ quantity: 1, totalPrice: amount, price: amount, displayName: 'remainder after partial refund' }];
  return {
    refundedCents,
    check: {
      amount,
      currency: check.currency,
      selections,
      ...(check.externalTransactionId ? { externalTransactionId: check.externalTransactionId } : {}),
      ...(check.checkOpenedAt ? { checkOpenedAt: check.checkOpenedAt } : {}),
      ...(check.checkClosedAt ? { checkClosedAt: check.checkClosedAt } : {}),
    },
  };
}

function takeLines(selections: Selection[], lines: RefundLine[], currency: string): Selection[] {
  const left = selections.map((s) => ({ ...s }));
  lines.forEach((line, i) => {
    const selection = left.find((s) => s.id === line.id && s.quantity >= line.quantity && s.totalPrice >= line.totalCents);
    if (!selection) {
      const known = left.find((s) => s.id === line.id);
      const remainingCents = known?.totalPrice ?? 0;
      throw new RefundExceedsRemainderError(
        known
          ? `items.${i}: refunds ${line.quantity} × ${line.id} for ${formatCents(line.totalCents, currency)}, but ${known.quantity} for ${formatCents(known.totalPrice, currency)} remain`
          : `items.${i}: ${line.id} is not among what remains of this order`,
        remainingCents,
        { ...(known ? { refunded: majorUnits(line.totalCents, currency) } : {}), remaining: majorUnits(remainingCents, currency), currency },
      );
    }
    selection.quantity -= line.quantity;
    selection.totalPrice -= line.totalCents;
  });
  return left.filter((s) => s.quantity > 0);
}
