/**
 * Backfill from Loyverse (docs/backfill-and-reconcile.md): `GET /v1.0/receipts` with `updated_at_min` and
 * `updated_at_max` (both included, so the window [since, until) ends one millisecond early), at
 * most 250 a page, paged by `cursor` with only `limit` beside it (a cursor carries its own filters;
 * Loyverse refuses one sent with other filters). Receipts come newest first.
 *
 * Refunds are REFUND receipts of their own, naming the sale in `refund_for`, listed in the window of
 * their own time. As in the webhook (webhook.ts): a cancelled SALE never happened (listed unpaid,
 * and as a refund reversing whatever was accrued for it); a cancelled REFUND is not acted on.
 */
import type { BackfillSpec, ListedObject } from '../../src/pos/contract.js';
import { clampPageSize, inclusiveEnd, listAt, textOf } from '../../src/pos/backfill-kit.js';
import { cancellationRefundId } from './refund.js';

const MAX_LIMIT = 250;

function listed(receipt: Record<string, unknown>): ListedObject[] {
  const number = textOf(receipt, 'receipt_number') ?? '';
  const updatedAt = textOf(receipt, 'updated_at') ?? '';
  const cancelled = textOf(receipt, 'cancelled_at') !== undefined;
  if (receipt.receipt_type === 'REFUND') {
    return cancelled ? [] : [{ kind: 'refund', payload: receipt, orderId: textOf(receipt, 'refund_for') ?? '', refundId: number, updatedAt, paid: true }];
  }
  const sale: ListedObject = { kind: 'checkout', payload: receipt, orderId: number, updatedAt, paid: !cancelled };
  return cancelled ? [sale, { kind: 'refund', payload: receipt, orderId: number, refundId: cancellationRefundId(number), updatedAt, paid: true }] : [sale];
}

export const loyverseBackfill: BackfillSpec = {
  listings(window, _account, pageSize) {
    return [
      {
        method: 'GET',
        path: '/v1.0/receipts',
        query: { updated_at_min: window.since.toISOString(), updated_at_max: inclusiveEnd(window).toISOString(), limit: String(clampPageSize(pageSize, MAX_LIMIT)) },
      },
    ];
  },
  page(answer, request) {
    const found = listAt(answer.data, 'receipts').flatMap(listed);
    const cursor = textOf(answer.data, 'cursor');
    // The cursor carries the filters; `limit` is not one, and without it the next page is Loyverse's default size.
    return { found, ...(cursor ? { next: { method: 'GET' as const, path: request.path, query: { cursor, limit: request.query!.limit! } } } : {}) };
  },
};
