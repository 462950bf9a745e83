/**
 * Backfill from Shopify (docs/backfill-and-reconcile.md): `GET /admin/api/<version>/orders.json` with
 * `status=any` (the default, `open`, hides every archived order, and a paid sale is archived at
 * once), `updated_at_min`/`updated_at_max` (both inclusive, to the second, so the window [since,
 * until) ends at the last whole second before `until`), oldest change first. Pages follow the
 * `Link` header's `rel="next"` URL as it is: a request carrying `page_info` may carry nothing else.
 *
 * Refunds ride on their order (`order.refunds[]`): each is listed as a refund of its own, after its
 * order. A sale is paid when its `financial_status` says so (`paid`, or `partially_refunded` /
 * `refunded`, which only a paid order becomes); `pending`, `authorized` and the rest are listed,
 * not accrued (the adapter refuses them too: checkout.ts).
 */
import type { BackfillSpec, ListedObject } from '../../src/pos/contract.js';
import { clampPageSize, floorToSecond, inclusiveEnd, isoSeconds, listAt, textOf } from '../../src/pos/backfill-kit.js';
import { PAID_FINANCIAL_STATUSES } from './checkout.js';

/** A stable Admin API version whose orders.json takes every parameter used here. */
export const SHOPIFY_API_VERSION = '2025-01';
/** Shopify: `limit` at most 250. */
const MAX_LIMIT = 250;

function listed(order: Record<string, unknown>): ListedObject[] {
  const orderId = textOf(order, 'id') ?? '';
  const updatedAt = textOf(order, 'updated_at') ?? '';
  const sale: ListedObject = { kind: 'checkout', payload: order, orderId, updatedAt, paid: PAID_FINANCIAL_STATUSES.has(String(order.financial_status)) };
  const refunds = listAt(order, 'refunds').map(
    (refund): ListedObject => ({
      kind: 'refund',
      payload: { order_id: order.id, ...refund },
      orderId,
      refundId: textOf(refund, 'id') ?? '',
      updatedAt: textOf(refund, 'created_at') ?? updatedAt,
      paid: true,
    }),
  );
  return [sale, ...refunds];
}

/** The URL of a `Link` header's `rel="next"`, if any. */
export function nextLink(link: string | undefined): string | undefined {
  for (const part of (link ?? '').split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part.trim());
    if (match) return match[1];
  }
  return undefined;
}

export const shopifyBackfill: BackfillSpec = {
  listings(window, _account, pageSize) {
    return [
      {
        method: 'GET',
        path: `/admin/api/${SHOPIFY_API_VERSION}/orders.json`,
        query: {
          status: 'any',
          updated_at_min: isoSeconds(floorToSecond(window.since)),
          updated_at_max: isoSeconds(inclusiveEnd(window, 's')),
          order: 'updated_at asc',
          limit: String(clampPageSize(pageSize, MAX_LIMIT)),
        },
      },
    ];
  },
  page(answer) {
    const found = listAt(answer.data, 'orders').flatMap(listed);
    const next = nextLink(answer.headers.link);
    return { found, ...(next ? { next: { method: 'GET' as const, path: next } } : {}) };
  },
};
