/**
 * Backfill from Toast (docs/backfill-and-reconcile.md): `GET /orders/v2/ordersBulk` with `startDate` (included)
 * and `endDate` (excluded), exactly the window [since, until), written as Toast writes dates
 * (`2026-03-01T10:00:00.000+0000`, its `+` sent as %2B: unencoded it reaches Toast as a space and the
 * date is refused), the restaurant in `Toast-Restaurant-External-ID`, and page paging (`pageSize`
 * at most 100): a page shorter than the page size is the last. Page paging runs over a live list,
 * so an order that changes mid-pass can move; the next pass's overlap finds it.
 *
 * Each order is decided as its webhook decides it (webhook.ts `decideOrder`), check by check: a
 * paid check gives its sale then one refund per refund transaction (one full reversal when all
 * came back), a paid and voided one its reversal; an order with no paid check an unpaid sale.
 */
import type { BackfillSpec, ListedObject } from '../../src/pos/contract.js';
import { clampPageSize, textOf } from '../../src/pos/backfill-kit.js';
import { isObject } from '../../src/kernel/validation.js';
import { decideOrder } from './webhook.js';

const MAX_PAGE_SIZE = 100;
export const RESTAURANT_HEADER = 'Toast-Restaurant-External-ID';

/** Toast's date format: milliseconds and a numeric offset. */
export function toastDate(at: Date): string {
  return at.toISOString().replace('Z', '+0000');
}

function listed(order: Record<string, unknown>): ListedObject[] {
  const orderId = textOf(order, 'guid') ?? '';
  const modified = Date.parse(textOf(order, 'modifiedDate') ?? '');
  const updatedAt = Number.isNaN(modified) ? '' : new Date(modified).toISOString();
  let actions;
  try {
    actions = decideOrder(order, '', orderId);
  } catch {
    // Malformed: handed to the adapter as a sale, which refuses it naming the field.
    return [{ kind: 'checkout', payload: order, orderId, updatedAt, paid: true }];
  }
  // Each check's sale and refunds, as the webhook decides them; an order with none paid is one unpaid sale.
  const found = actions.flatMap((action): ListedObject[] => {
    if (action.kind === 'checkout') return [{ kind: 'checkout', payload: action.payload, orderId, updatedAt, paid: true }];
    if (action.kind !== 'refund') return [];
    const refundId = textOf(action.payload, 'refundTransactionGuid');
    return [{ kind: 'refund', payload: action.payload, orderId, ...(refundId ? { refundId } : {}), updatedAt, paid: true }];
  });
  return found.some((f) => f.kind === 'checkout') ? found : [{ kind: 'checkout', payload: order, orderId, updatedAt, paid: false }, ...found];
}

export const toastBackfill: BackfillSpec = {
  listings(window, account, pageSize) {
    return [
      {
        method: 'GET',
        path: '/orders/v2/ordersBulk',
        query: { startDate: toastDate(window.since), endDate: toastDate(window.until), page: '1', pageSize: String(clampPageSize(pageSize, MAX_PAGE_SIZE)) },
        headers: { [RESTAURANT_HEADER]: account },
      },
    ];
  },
  page(answer, request) {
    const orders = Array.isArray(answer.data) ? answer.data.filter(isObject) : [];
    const found = orders.flatMap(listed);
    const pageSize = Number(request.query!.pageSize);
    if (orders.length < pageSize) return { found };
    return { found, next: { ...request, query: { ...request.query, page: String(Number(request.query!.page) + 1) } } };
  },
};
