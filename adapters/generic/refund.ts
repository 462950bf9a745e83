/** A generic refund → the refund intent: full without an amount or items, else partial by them. */
import type { RefundIntent } from '../../src/pos/contract.js';
import { parseWith } from '../../src/kernel/validation.js';
import { GenericRefund } from './schema.js';

export function parseGenericRefund(body: unknown): RefundIntent {
  const refund = parseWith(GenericRefund, body);
  return {
    orderId: refund.orderId,
    scope: refund.storeId,
    refundId: refund.refundId,
    amountCents: refund.amount,
    items: refund.items?.map((item) => ({ id: item.id, quantity: item.quantity, totalCents: item.total })),
  };
}
