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
import { BridgeError } from '../errors.js';
import type { Check, Selection } from '../loyalty/contract.js';
import type { RefundLine } from '../pos/contract.js';

export class RefundExceedsRemainderError extends BridgeError {
  constructor(message: string, remainingCents: number) {
    super(message, 409, 'refund_exceeds_remainder', { remainingCents });
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
    throw new RefundExceedsRemainderError(`the refund of ${refundedCents} cents is more than the ${remaining} cents that remain of this order`, remaining);
  }
  const amount = remaining - refundedCents;
  if (amount === 0) return { refundedCents };
  const selections = refund.items ? takeLines(check.selections, refund.items) : [{ quantity: 1, totalPrice: amount, price: amount, displayName: 'remainder after partial refund' }];
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

function takeLines(selections: Selection[], lines: RefundLine[]): Selection[] {
  const left = selections.map((s) => ({ ...s }));
  lines.forEach((line, i) => {
    const selection = left.find((s) => s.id === line.id && s.quantity >= line.quantity && s.totalPrice >= line.totalCents);
    if (!selection) {
      const known = left.find((s) => s.id === line.id);
      throw new RefundExceedsRemainderError(
        known
          ? `items.${i}: refunds ${line.quantity} × ${line.id} for ${line.totalCents} cents, but ${known.quantity} for ${known.totalPrice} cents remain`
          : `items.${i}: ${line.id} is not among what remains of this order`,
        known?.totalPrice ?? 0,
      );
    }
    selection.quantity -= line.quantity;
    selection.totalPrice -= line.totalCents;
  });
  return left.filter((s) => s.quantity > 0);
}
