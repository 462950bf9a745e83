/**
 * Loyverse refunds → refund intents (pure). A REFUND receipt names the receipt it refunds in
 * `refund_for` and is measured like a sale (checkout.ts), tax and tip excluded; a cancelled SALE
 * reverses the whole sale.
 */
import { ValidationError } from '../../src/kernel/errors.js';
import type { RefundIntent } from '../../src/pos/contract.js';
import { measureReceipt, naming, readReceipt } from './checkout.js';
import type { LoyverseReceipt } from './schema.js';

/** The refund id of a cancellation, prefixed so it is never taken for a refund receipt's number. */
export function cancellationRefundId(receiptNumber: string): string {
  return `cancelled:${receiptNumber}`;
}

export function parseLoyverseRefund(body: unknown): RefundIntent {
  const { receipt, prefix } = readReceipt(body);
  return naming(receipt, () => refundOf(receipt, prefix));
}

function refundOf(receipt: LoyverseReceipt, prefix: string): RefundIntent {
  if (receipt.receipt_type === 'SALE') {
    if (!receipt.cancelled_at) {
      throw ValidationError.field(`${prefix}receipt_type`, 'is SALE: only REFUND receipts, and SALE receipts with cancelled_at set, are refunds');
    }
    // A cancelled sale never happened: the whole accrual is reversed.
    return { orderId: receipt.receipt_number, scope: receipt.store_id, refundId: cancellationRefundId(receipt.receipt_number) };
  }
  if (receipt.cancelled_at) {
    throw ValidationError.field(
      `${prefix}cancelled_at`,
      'is set on a REFUND receipt: the bridge cannot undo a reversal; re-accrue the original sale by hand if its points are due again',
    );
  }
  const original = receipt.refund_for?.trim();
  if (!original) throw ValidationError.field(`${prefix}refund_for`, 'is required: a refund receipt must name the receipt it refunds');
  const measured = measureReceipt(receipt, prefix);
  // Refunded lines are sent when every one of them can be matched to the sale's selections (an id
  // and a whole quantity); otherwise only the amount, and the remainder is one amount-only line.
  const lines = measured.lines.map((l) => l.refundLine);
  const items = lines.length > 0 && lines.every((l) => l !== undefined) ? lines : undefined;
  return {
    orderId: original,
    // Loyverse refunds a receipt from its own store: the refund's store is the original's.
    scope: receipt.store_id,
    refundId: receipt.receipt_number,
    // The refund is partial as far as the adapter knows; the core turns one that covers all that
    // remains into a full reversal.
    amountCents: measured.amountCents,
    ...(items ? { items } : {}),
  };
}
