/**
 * Loyverse receipts → checkout and refund intents (pure). A receipt is identified by its
 * `receipt_number` within its store: numbers repeat across stores and accounts, so `store_id` (a
 * UUID) is the transaction scope. A SALE is a checkout; a REFUND is a separate receipt naming the
 * original in `refund_for`, with its own line items; a cancelled SALE reverses the sale.
 */
import { ValidationError } from '../../src/errors.js';
import { nonZero } from '../../src/pos/check.js';
import { parseWith } from '../../src/validation.js';
import type { AdapterContext, CheckoutIntent, RefundIntent } from '../../src/pos/contract.js';
import { measureReceipt } from './receipt.js';
import { LoyverseReceipt } from './schema.js';

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
function naming<T>(receipt: LoyverseReceipt, translate: () => T): T {
  try {
    return translate();
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new ValidationError(error.issues, `receipt ${receipt.receipt_number} of store ${receipt.store_id}: ${error.message}`);
  }
}

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
