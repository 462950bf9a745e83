/**
 * Backfill from Square (docs/backfill-and-reconcile.md): SearchOrders (`POST /v2/orders/search`) filtered on
 * `updated_at` and sorted by UPDATED_AT (Square requires the filtered time to be the sort field),
 * for the seller's locations (ListLocations, at most 10 per search, so one listing per 10), paged
 * by `cursor` with the very same body on every page (Square refuses a cursor with another query).
 * A Square TimeRange includes both ends, so the window [since, until) ends one millisecond early.
 *
 * Return orders are orders, so refunds are listed beside the sales: an order with `returns[]` is
 * a refund, read alone by the adapter (its id is the refund id the webhook path records too). A
 * sale is paid when COMPLETED; OPEN orders are listed, not accrued.
 */
import type { BackfillSpec, ListedObject, PosRequest } from '../../src/pos/contract.js';
import { clampPageSize, inclusiveEnd, listAt, textOf } from '../../src/pos/backfill-kit.js';

const SEARCH_PATH = '/v2/orders/search';
/** Square: "Cannot provide more than 10 location_ids." */
const LOCATIONS_PER_SEARCH = 10;
const MAX_LIMIT = 1000;

function listed(order: Record<string, unknown>): ListedObject {
  const id = textOf(order, 'id') ?? '';
  const updatedAt = textOf(order, 'updated_at') ?? '';
  const returned = listAt(order, 'returns')[0];
  if (returned) return { kind: 'refund', payload: order, orderId: textOf(returned, 'source_order_id') ?? '', refundId: id, updatedAt, paid: true };
  return { kind: 'checkout', payload: order, orderId: id, updatedAt, paid: order.state === 'COMPLETED' };
}

export const squareBackfill: BackfillSpec = {
  async prepare(api) {
    const answer = await api.request({ method: 'GET', path: '/v2/locations' });
    return listAt(answer.data, 'locations').flatMap((l) => textOf(l, 'id') ?? []);
  },
  listings(window, _account, pageSize, prepared) {
    const locations = prepared as string[];
    const requests: PosRequest[] = [];
    for (let i = 0; i < locations.length; i += LOCATIONS_PER_SEARCH) {
      requests.push({
        method: 'POST',
        path: SEARCH_PATH,
        body: {
          location_ids: locations.slice(i, i + LOCATIONS_PER_SEARCH),
          query: {
            filter: { date_time_filter: { updated_at: { start_at: window.since.toISOString(), end_at: inclusiveEnd(window).toISOString() } } },
            sort: { sort_field: 'UPDATED_AT', sort_order: 'ASC' },
          },
          limit: clampPageSize(pageSize, MAX_LIMIT),
        },
      });
    }
    return requests;
  },
  page(answer, request) {
    const found = listAt(answer.data, 'orders').map(listed);
    const cursor = textOf(answer.data, 'cursor');
    const { cursor: _previous, ...body } = request.body as Record<string, unknown>;
    return { found, ...(cursor ? { next: { ...request, body: { ...body, cursor } } } : {}) };
  },
};
