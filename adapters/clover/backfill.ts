/**
 * Backfill from Clover (docs/backfill-and-reconcile.md): `GET /v3/merchants/{mId}/orders` with
 * `filter=modifiedTime>=since` and `filter=modifiedTime<until` (epoch milliseconds: exactly the
 * window [since, until)), oldest change first, every expansion translation needs, and offset
 * paging (`limit` at most 1000): a page shorter than the limit is the last. Offset paging runs over
 * a live list, so an order that changes mid-pass can move past the offset; the next pass's overlap
 * finds it.
 *
 * Each order is decided as its webhook decides a fetched order (webhook.ts `decideOrder`), so both
 * paths record the same refunds under the same ids: a refunded order gives its refunds (one full
 * reversal when they cover the payment), a paid one its sale, anything else an unpaid sale. The
 * sale of a refunded order is listed too, as paid: its webhook may be the one that was lost.
 *
 * Clover expands at most three collections a call while translation needs six (api.ts reads a
 * single order twice, as here): each page is listed with the lines and discounts, then the same
 * page again with payments, refunds and customers, and the two are merged order by order. An order
 * that changed between the two reads (another `modifiedTime`, or it moved out of the page) is read
 * whole on its own (`fetchOrder`, which checks the same).
 */
import type { BackfillSpec, ListedObject, WebhookAction } from '../../src/pos/contract.js';
import { clampPageSize, listAt, textOf } from '../../src/pos/backfill-kit.js';
import { fetchOrder, ORDER_LINES_EXPAND, ORDER_MONEY_EXPAND } from './api.js';
import { refundsOf } from './refund.js';
import { CloverOrder } from './schema.js';
import { decideOrder } from './webhook.js';
import { parseWith } from '../../src/kernel/validation.js';

const MAX_LIMIT = 1000;

function decided(order: Record<string, unknown>, merchantId: string, orderId: string): WebhookAction[] {
  try {
    const actions = decideOrder(order, merchantId, orderId, 'backfill');
    return Array.isArray(actions) ? actions : [actions];
  } catch {
    // Malformed: handed to the adapter as a sale, which refuses it naming the field.
    return [{ kind: 'checkout', key: 'backfill', payload: order }];
  }
}

function listed(order: Record<string, unknown>, merchantId: string): ListedObject[] {
  const orderId = textOf(order, 'id') ?? '';
  const modified = Number(order.modifiedTime);
  const updatedAt = Number.isFinite(modified) ? new Date(modified).toISOString() : '';
  const payload = { ...order, merchant: { id: merchantId } };
  const actions = decided(order, merchantId, orderId);
  const refunds = actions.flatMap((action): ListedObject[] => {
    if (action.kind !== 'refund') return [];
    const refundId = textOf(action.payload, 'refundId');
    return [{ kind: 'refund', payload: action.payload, orderId, ...(refundId ? { refundId } : {}), updatedAt, paid: true }];
  });
  // An order with any refund was paid, even one whose refunds give back only tax or tip (no refund
  // action, and no checkout action either: the order is decided as refunded).
  const paid = refundsOf(parseWith(CloverOrder, order, 'order')).length > 0 || actions.some((a) => a.kind === 'checkout');
  return [{ kind: 'checkout', payload, orderId, updatedAt, paid }, ...refunds];
}

/** The merchant a listing's path names (`/v3/merchants/{mId}/orders`). */
function merchantOfPath(path: string): string {
  return decodeURIComponent(path.split('/')[3] ?? '');
}

export const cloverBackfill: BackfillSpec = {
  listings(window, account, pageSize) {
    return [
      {
        method: 'GET',
        path: `/v3/merchants/${encodeURIComponent(account)}/orders`,
        query: {
          filter: [`modifiedTime>=${window.since.getTime()}`, `modifiedTime<${window.until.getTime()}`],
          orderBy: 'modifiedTime ASC',
          expand: ORDER_LINES_EXPAND,
          offset: '0',
          limit: String(clampPageSize(pageSize, MAX_LIMIT)),
        },
      },
    ];
  },
  async completePage(api, answer, request) {
    const lines = listAt(answer.data, 'elements');
    if (lines.length === 0) return answer;
    const money = new Map(listAt((await api.request({ ...request, query: { ...request.query, expand: ORDER_MONEY_EXPAND } })).data, 'elements').map((o) => [textOf(o, 'id'), o]));
    const merchantId = merchantOfPath(request.path);
    const elements: unknown[] = [];
    for (const order of lines) {
      const other = money.get(textOf(order, 'id'));
      if (other && other.modifiedTime === order.modifiedTime) elements.push({ ...order, payments: other.payments, refunds: other.refunds, customers: other.customers });
      else elements.push(await fetchOrder(api, merchantId, textOf(order, 'id') ?? ''));
    }
    return { ...answer, data: { ...(answer.data as object), elements } };
  },
  page(answer, request) {
    const account = merchantOfPath(request.path);
    const orders = listAt(answer.data, 'elements');
    const found = orders.flatMap((order) => listed(order, account));
    const limit = Number(request.query!.limit);
    if (orders.length < limit) return { found };
    const offset = Number(request.query!.offset) + limit;
    return { found, next: { ...request, query: { ...request.query, offset: String(offset) } } };
  },
};
