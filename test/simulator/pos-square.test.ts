/**
 * The simulator's fake Square API over real HTTP (docs/simulator-pos-apis.md, "Square"): its objects
 * read by the Square adapter, SearchOrders' cursor bound to its query, inclusive time ranges, faults
 * and refusals in Square's own shapes.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { serialization } from 'square';
import { squareAdapter } from '../../adapters/square/index.js';
import { retrieveOrder } from '../../adapters/square/api.js';
import { posApi } from '../../src/pos/api.js';
import { call, fakePosApis, minutesAfter, TWO_LINES, US } from '../support/pos-http.js';

const MERCHANT = 'ML8QMERCHANT1';
const OTHER = 'ML8QMERCHANT2';
const TOKEN = 'sq-token-1';
const LOCATIONS = ['LOCA0000000A1', 'LOCA0000000B2'];
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = minutesAfter(T0);

describe('fake Square API', () => {
  let clock = T0;
  const square = (path: string, init: { token?: string | null; body?: unknown } = {}) =>
    call(`${apis.url}/square${path}`, { headers: init.token === null ? {} : { authorization: `Bearer ${init.token ?? TOKEN}` }, body: init.body });
  const search = (body: unknown, token?: string) => square('/v2/orders/search', { body, token });

  const apis = fakePosApis({
    now: () => new Date(clock),
    accounts: (sim) => {
      sim.pos.square.addAccount({ merchantId: MERCHANT, accessToken: TOKEN, locationIds: LOCATIONS });
      sim.pos.square.addAccount({ merchantId: OTHER, accessToken: 'sq-token-2', locationIds: ['LOCOTHER00001'] });
    },
  });
  const { sim } = apis;
  beforeEach(() => {
    clock = T0;
  });

  it('answers a sale, its customer and its refund as Square objects that the Square adapter translates to the expected Check', async () => {
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: [{ ...TWO_LINES[0]!, itemId: 'VARIATION-LATTE' }, TWO_LINES[1]!], tip: 100, customer: { phone: '+14155550123', email: 'Ada@Example.com' } });
    const got = await square(`/v2/orders/${sale.id}`);
    expect(got.status).toBe(200);
    expect(got.body.order).toMatchObject({ id: sale.id, state: 'COMPLETED', location_id: LOCATIONS[0], total_money: { amount: 1792, currency: 'USD' }, total_tax_money: { amount: 93, currency: 'USD' } });
    expect(got.body.order.line_items[0]).toMatchObject({ quantity: '3', base_price_money: { amount: 450, currency: 'USD' }, total_money: { amount: 1368, currency: 'USD' } });
    expect(got.body.order.id).toMatch(/^[A-Za-z0-9]{27}$/);

    const checkout = squareAdapter.parseCheckout(got.body, US);
    expect(checkout.check).toMatchObject({ amount: 1599, currency: 'USD', taxAmount: 93, discountAmount: 50, tipAmount: 100 });
    expect(checkout.check.selections).toEqual([
      { id: 'VARIATION-LATTE', displayName: 'Latte', quantity: 3, price: 450, totalPrice: 1300 },
      { displayName: 'Bagel', quantity: 1, price: 299, totalPrice: 299 },
    ]);
    // The order names its customer only by id; the bridge's own read finds the contact details.
    const api = posApi('square', { apiBaseUrl: `${apis.url}/square`, accessToken: TOKEN }, 2000)!;
    await expect(squareAdapter.fetchCustomer!(checkout.customerRef!, api, US)).resolves.toMatchObject({ phone: '+14155550123', email: 'ada@example.com' });

    // One latte back: the return order measures it, tax excluded (its share of the discount taken off).
    const { refund } = sim.pos.square.addRefund(MERCHANT, { orderId: sale.id, lines: [{ line: 0, quantity: 1 }] });
    const fetchedRefund = await square(`/v2/refunds/${refund.id}`);
    expect(fetchedRefund.body.refund).toMatchObject({ status: 'COMPLETED', amount_money: { amount: 456, currency: 'USD' }, payment_id: (sale.tenders as { id: string }[])[0]!.id });
    const returnOrder = await retrieveOrder(api, fetchedRefund.body.refund.order_id);
    expect(squareAdapter.parseRefund({ refund: fetchedRefund.body.refund, order: returnOrder }, US)).toEqual({
      orderId: sale.id,
      refundId: fetchedRefund.body.refund.order_id,
      amountCents: 433,
      items: [{ id: 'VARIATION-LATTE', quantity: 1, totalCents: 433 }],
    });
    // The sale itself moved to a new version listing the refund.
    const after = await square(`/v2/orders/${sale.id}`);
    expect(after.body.order.version).toBe(sale.version + 1);
    // An Order's refunds[] are Square's legacy Refund: APPROVED, not the PaymentRefund's COMPLETED.
    expect(after.body.order.refunds).toEqual([expect.objectContaining({ id: refund.id, status: 'APPROVED' })]);
  });

  it('writes zero-decimal currencies in their own minor units (¥500 is amount 500)', async () => {
    const sale = sim.pos.square.addOrder(MERCHANT, { currency: 'JPY', lines: [{ name: 'Onigiri', unitPrice: 500, quantity: 2, tax: 80 }] });
    const got = await square(`/v2/orders/${sale.id}`);
    expect(got.body.order.total_money).toEqual({ amount: 1080, currency: 'JPY' });
    expect(squareAdapter.parseCheckout(got.body, US).check).toMatchObject({ amount: 100_000, currency: 'JPY', taxAmount: 8_000 });
  });

  it('pages SearchOrders with a cursor that answers only the query it was made for', async () => {
    const ids = [0, 1, 2, 3, 4].map((m) => sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(m), location: LOCATIONS[m % 2] }).id);
    const query = { filter: { date_time_filter: { updated_at: { start_at: at(0), end_at: at(10) } } }, sort: { sort_field: 'UPDATED_AT', sort_order: 'ASC' } };
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await search({ location_ids: LOCATIONS, query, limit: 2, ...(cursor ? { cursor } : {}) });
      expect(page.status).toBe(200);
      seen.push(...page.body.orders.map((o: { id: string }) => o.id));
      cursor = page.body.cursor;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids);

    const first = await search({ location_ids: LOCATIONS, query, limit: 2 });
    // Another limit is allowed on a later page; another query or other locations are not (Square: "you must use the original query").
    expect((await search({ location_ids: LOCATIONS, query, limit: 3, cursor: first.body.cursor })).body.orders).toHaveLength(3);
    const changed = await search({ location_ids: LOCATIONS, query: { ...query, sort: { sort_field: 'UPDATED_AT', sort_order: 'DESC' } }, limit: 2, cursor: first.body.cursor });
    expect(changed.status).toBe(400);
    expect(changed.body.errors[0]).toMatchObject({ category: 'INVALID_REQUEST_ERROR', code: 'INVALID_CURSOR', field: 'cursor' });
    expect((await search({ location_ids: [LOCATIONS[0]], query, limit: 2, cursor: first.body.cursor })).status).toBe(400);
    expect((await search({ location_ids: LOCATIONS, query, limit: 2, cursor: 'not-a-cursor' })).status).toBe(400);
  });

  it('filters on a time range inclusive at both ends, and an absent end stays the time of the first request', async () => {
    const before = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(0) });
    const atStart = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(1) });
    const atEnd = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(2) });
    const afterEnd = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(3) });
    const idsOf = (r: { body: { orders?: { id: string }[] } }) => (r.body.orders ?? []).map((o) => o.id);
    const sort = { sort_field: 'UPDATED_AT', sort_order: 'ASC' };
    const bounded = await search({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: at(1), end_at: at(2) } } }, sort } });
    expect(idsOf(bounded)).toEqual([atStart.id, atEnd.id]);
    expect(idsOf(bounded)).not.toContain(before.id);
    expect(idsOf(bounded)).not.toContain(afterEnd.id);

    clock = T0 + 5 * 60_000;
    const open = { location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: at(1) } } }, sort }, limit: 1 };
    const first = await search(open);
    expect(idsOf(first)).toEqual([atStart.id]);
    // Changed after the first request: beyond the cursor's end, so not in this pass.
    clock = T0 + 9 * 60_000;
    sim.pos.square.touchOrder(MERCHANT, before.id);
    const rest: string[] = [];
    let cursor: string | undefined = first.body.cursor;
    while (cursor) {
      const page = await search({ ...open, cursor });
      rest.push(...idsOf(page));
      cursor = page.body.cursor;
    }
    expect(rest).toEqual([atEnd.id, afterEnd.id]);
    // A fresh search (no cursor) sees it.
    expect(idsOf(await search({ ...open, limit: 10 }))).toContain(before.id);
    // Nothing matches: Square leaves the empty list out.
    const none = await search({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: at(100) } } }, sort } });
    expect(none.body).toEqual({});
  });

  it('refuses what Square refuses: a sort that is not the filtered field, more than 10 locations, another merchant\'s location, limit over 1000', async () => {
    const mismatch = await search({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: at(0) } } } } });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.errors[0].field).toBe('query.sort.sort_field');
    const eleven = await search({ location_ids: Array.from({ length: 11 }, (_, i) => `LOC${i}`) });
    expect(eleven.status).toBe(400);
    expect(eleven.body.errors[0].detail).toBe('Cannot provide more than 10 location_ids.');
    expect((await search({ location_ids: ['LOCOTHER00001'] })).status).toBe(403);
    expect((await search({ location_ids: LOCATIONS, limit: 1001 })).status).toBe(400);
    expect((await search({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: 'yesterday' } } }, sort: { sort_field: 'UPDATED_AT' } } })).status).toBe(400);
  });

  it('answers 401 in Square\'s shape without a token or with a wrong one, and keeps each merchant\'s orders its own', async () => {
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES });
    const missing = await square(`/v2/orders/${sale.id}`, { token: null });
    expect(missing.status).toBe(401);
    expect(missing.body.errors[0]).toMatchObject({ category: 'AUTHENTICATION_ERROR', code: 'UNAUTHORIZED' });
    expect((await square(`/v2/orders/${sale.id}`, { token: 'nope' })).status).toBe(401);
    const foreign = await square(`/v2/orders/${sale.id}`, { token: 'sq-token-2' });
    expect(foreign.status).toBe(404);
    expect(foreign.body.errors[0].code).toBe('NOT_FOUND');
  });

  it('rate-limits with 429 RATE_LIMITED and no Retry-After (as Square), then answers; faults count their times and aim at list or get reads', async () => {
    sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES });
    sim.pos.square.faults(MERCHANT).inject({ kind: 'rate_limit', times: 2, on: 'list' });
    for (let i = 0; i < 2; i++) {
      const limited = await search({ location_ids: LOCATIONS });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBeNull();
      expect(limited.body.errors[0]).toMatchObject({ category: 'RATE_LIMIT_ERROR', code: 'RATE_LIMITED' });
    }
    expect((await search({ location_ids: LOCATIONS })).body.orders).toHaveLength(1);

    sim.pos.square.faults(MERCHANT).inject({ kind: 'rate_limit', retryAfter: 3 });
    expect((await search({ location_ids: LOCATIONS })).headers.get('retry-after')).toBe('3');
    sim.pos.square.faults(MERCHANT).inject({ kind: 'server_error', status: 503, on: 'get' });
    expect((await search({ location_ids: LOCATIONS })).status).toBe(200);
    const unavailable = await square('/v2/orders/anything');
    expect(unavailable.status).toBe(503);
    expect(unavailable.body.errors[0].code).toBe('SERVICE_UNAVAILABLE');
    expect(sim.pos.square.faults(MERCHANT).pending()).toBe(0);
    // A refused request does not use up a fault.
    sim.pos.square.faults(MERCHANT).inject({ kind: 'server_error' });
    expect((await search({ location_ids: LOCATIONS }, 'nope')).status).toBe(401);
    expect(sim.pos.square.faults(MERCHANT).pending()).toBe(1);
  });

  it("lists the seller's locations (ListLocations), which a search must name", async () => {
    const res = await square('/v2/locations');
    expect(res.status).toBe(200);
    expect(res.body.locations.map((l: { id: string }) => l.id)).toEqual(LOCATIONS);
    expect(res.body.locations[0]).toMatchObject({ merchant_id: MERCHANT, status: 'ACTIVE' });
    expect((await square('/v2/locations', { token: null })).status).toBe(401);
  });
});

describe('fake Square SearchOrders reads its body as strictly as Square', () => {
  const apis = fakePosApis({
    now: () => new Date(T0 + 60 * 60_000),
    accounts: (sim) => void sim.pos.square.addAccount({ merchantId: MERCHANT, accessToken: TOKEN, locationIds: LOCATIONS }),
  });
  const { sim } = apis;
  const search = (body: unknown) => call(`${apis.url}/square/v2/orders/search`, { headers: { authorization: `Bearer ${TOKEN}` }, body });
  /** A 400 whose one error parses strictly as Square's SDK `Error_` (its ErrorCategory and ErrorCode enums), with this code and field. */
  const refused = async (body: unknown, code: string, field?: string) => {
    const res = await search(body);
    expect(res.status).toBe(400);
    expect(res.body.errors).toHaveLength(1);
    const parsed = serialization.Error_.parse(res.body.errors[0], { unrecognizedObjectKeys: 'fail', allowUnrecognizedEnumValues: false });
    expect(parsed.ok).toBe(true);
    expect(res.body.errors[0]).toEqual({ category: 'INVALID_REQUEST_ERROR', code, detail: expect.any(String), ...(field === undefined ? {} : { field }) });
    return res.body.errors[0] as { detail: string };
  };
  const updatedSince = (start: string) => ({ filter: { date_time_filter: { updated_at: { start_at: start } } }, sort: { sort_field: 'UPDATED_AT', sort_order: 'ASC' } });

  it('refuses unknown fields and wrong cases with 400 BAD_REQUEST naming the field, where it answered an unfiltered 200', async () => {
    sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(0) });
    // camelCase is not Square's JSON: dateTimeFilter is unknown, not a filter that matched everything.
    const camel = await refused({ location_ids: LOCATIONS, query: { filter: { dateTimeFilter: { updated_at: { start_at: at(100) } } } } }, 'BAD_REQUEST', 'query.filter.dateTimeFilter');
    expect(camel.detail).toContain('dateTimeFilter');
    await refused({ locationIds: LOCATIONS }, 'BAD_REQUEST', 'locationIds');
    await refused({ location_id: LOCATIONS }, 'BAD_REQUEST', 'location_id');
    await refused({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { updated_at: { start_at: at(0), finish_at: at(9) } } }, sort: { sort_field: 'UPDATED_AT' } } }, 'BAD_REQUEST', 'query.filter.date_time_filter.updated_at.finish_at');
    await refused({ location_ids: LOCATIONS, query: { filter: { date_time_filter: { modified_at: { start_at: at(0) } } } } }, 'BAD_REQUEST', 'query.filter.date_time_filter.modified_at');
    await refused({ location_ids: LOCATIONS, query: { sort: { sort_field: 'UPDATED_AT', sortOrder: 'ASC' } } }, 'BAD_REQUEST', 'query.sort.sortOrder');
    await refused({ location_ids: LOCATIONS, query: { filters: {} } }, 'BAD_REQUEST', 'query.filters');
    await refused({ location_ids: LOCATIONS, page_size: 10 }, 'BAD_REQUEST', 'page_size');
    // The same body, spelt as Square spells it, is answered.
    expect((await search({ location_ids: LOCATIONS, query: updatedSince(at(100)) })).body).toEqual({});
  });

  it('refuses enum values Square does not have with 400 INVALID_ENUM_VALUE', async () => {
    await refused({ location_ids: LOCATIONS, query: { sort: { sort_field: 'MODIFIED_AT' } } }, 'INVALID_ENUM_VALUE', 'query.sort.sort_field');
    await refused({ location_ids: LOCATIONS, query: { sort: { sort_field: 'updated_at' } } }, 'INVALID_ENUM_VALUE', 'query.sort.sort_field');
    await refused({ location_ids: LOCATIONS, query: { sort: { sort_field: 'UPDATED_AT', sort_order: 'ASCENDING' } } }, 'INVALID_ENUM_VALUE', 'query.sort.sort_order');
    await refused({ location_ids: LOCATIONS, query: { filter: { state_filter: { states: ['COMPLETED', 'PAID'] } } } }, 'INVALID_ENUM_VALUE', 'query.filter.state_filter.states[1]');
    await refused({ location_ids: LOCATIONS, query: { filter: { fulfillment_filter: { fulfillment_types: ['DRIVE_THRU'] } } } }, 'INVALID_ENUM_VALUE', 'query.filter.fulfillment_filter.fulfillment_types[0]');
  });

  it('refuses values of the wrong JSON type and a required field left out', async () => {
    await refused({ location_ids: LOCATIONS[0] }, 'EXPECTED_ARRAY', 'location_ids');
    await refused({ location_ids: [LOCATIONS[0], 7] }, 'EXPECTED_STRING', 'location_ids[1]');
    await refused({ location_ids: LOCATIONS, limit: '10' }, 'EXPECTED_INTEGER', 'limit');
    await refused({ location_ids: LOCATIONS, limit: 2.5 }, 'EXPECTED_INTEGER', 'limit');
    await refused({ location_ids: LOCATIONS, return_entries: 'yes' }, 'EXPECTED_BOOLEAN', 'return_entries');
    await refused({ location_ids: LOCATIONS, query: [] }, 'EXPECTED_OBJECT', 'query');
    await refused({ location_ids: LOCATIONS, query: { sort: { sort_order: 'ASC' } } }, 'MISSING_REQUIRED_PARAMETER', 'query.sort.sort_field');
    await refused({ location_ids: LOCATIONS, query: { filter: { state_filter: {} } } }, 'MISSING_REQUIRED_PARAMETER', 'query.filter.state_filter.states');
    await refused([LOCATIONS], 'EXPECTED_OBJECT');
    // Undecodable JSON: BAD_REQUEST, one of Square's codes.
    const garbled = await call(`${apis.url}/square/v2/orders/search`, { headers: { authorization: `Bearer ${TOKEN}` }, body: '{"location_ids": [' });
    expect(garbled.status).toBe(400);
    expect(garbled.body.errors[0]).toMatchObject({ category: 'INVALID_REQUEST_ERROR', code: 'BAD_REQUEST' });
    // A null optional field is absent, as Square reads it.
    expect((await search({ location_ids: LOCATIONS, cursor: null, query: { filter: null, sort: { sort_field: 'CREATED_AT', sort_order: null } } })).status).toBe(200);
  });

  it('applies the customer, source and fulfillment filters it knows instead of ignoring them', async () => {
    const ada = sim.pos.square.addCustomer(MERCHANT, { firstName: 'Ada' });
    const hers = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, customer: ada.id });
    const other = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES });
    const idsOf = async (filter: unknown) => ((await search({ location_ids: LOCATIONS, query: { filter } })).body.orders ?? []).map((o: { id: string }) => o.id).sort();
    expect(await idsOf({ customer_filter: { customer_ids: [ada.id] } })).toEqual([hers.id]);
    expect(await idsOf({ source_filter: { source_names: ['Loyalty bridge simulator'] } })).toEqual([hers.id, other.id].sort());
    expect(await idsOf({ source_filter: { source_names: ['Square Point of Sale'] } })).toEqual([]);
    // The fake's orders have no fulfillments: a fulfillment filter matches none of them.
    expect(await idsOf({ fulfillment_filter: { fulfillment_types: ['PICKUP'] } })).toEqual([]);
  });

  it('keeps accepting unknown query parameters on its GET reads (Square documents nothing about them)', async () => {
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES });
    const get = (path: string) => call(`${apis.url}/square${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect((await get(`/v2/orders/${sale.id}?expand=everything`)).status).toBe(200);
    expect((await get('/v2/locations?limit=1')).status).toBe(200);
  });
});
