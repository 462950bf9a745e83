/**
 * Square's own SDK (square 46.0.0, a devDependency) as the oracle for the simulator's fake Square
 * (docs/simulator-pos-apis.md, "Square") and for the Square fixtures the adapters read.
 *
 * The fakes and the adapters were written by the same hands, so they can agree with each other and
 * not with Square. Here the SDK's own client drives the fake over real HTTP (ListLocations,
 * RetrieveOrder, SearchOrders paged by cursor, RetrieveCustomer, GetPaymentRefund), and every raw
 * answer is parsed with the SDK's serialization schema for it, strictly: an unknown key, an enum
 * value the SDK does not know, a missing required field or a wrong type fails. (The SDK's own
 * client parses with `skipValidation: true`, so a call that merely succeeds proves nothing: the
 * raw bodies are captured by the `fetch` given to the client and parsed here.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { serialization, SquareClient } from 'square';
import { fakePosApis, minutesAfter, TWO_LINES } from '../support/pos-http.js';

const MERCHANT = 'ORACLEMERCHA1';
const TOKEN = 'sq-oracle-token';
const LOCATIONS = ['ORACLELOCAA01', 'ORACLELOCAB02'];
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = minutesAfter(T0);

/** The SDK's strictest parse: nothing unknown, nothing skipped. */
const STRICT = { unrecognizedObjectKeys: 'fail', allowUnrecognizedUnionMembers: false, allowUnrecognizedEnumValues: false, skipValidation: false } as const;

interface Schema {
  parse(raw: unknown, opts?: typeof STRICT): { ok: true; value: unknown } | { ok: false; errors: { path: string[]; message: string }[] };
}

/** The SDK's complaints about `raw` read as `schema` ([] when it parses strictly), as "path: message". */
function complaints(schema: Schema, raw: unknown): string[] {
  const result = schema.parse(raw, STRICT);
  return result.ok ? [] : result.errors.map((e) => `${e.path.join('.')}: ${e.message}`);
}

/** A fetch that keeps every answer's raw JSON, keyed "METHOD path", for the strict parse. */
function recordingFetch() {
  const answers: { method: string; path: string; status: number; body: unknown }[] = [];
  const record: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const text = await res.clone().text();
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    answers.push({ method: init?.method ?? 'GET', path: url.pathname, status: res.status, body: text === '' ? undefined : JSON.parse(text) });
    return res;
  };
  return { answers, fetch: record };
}

describe('the fake Square, read by Square\'s own SDK and parsed with its schemas strictly', () => {
  const clock = T0 + 60 * 60_000;
  const apis = fakePosApis({
    now: () => new Date(clock),
    accounts: (sim) => void sim.pos.square.addAccount({ merchantId: MERCHANT, accessToken: TOKEN, locationIds: LOCATIONS }),
  });
  const { sim } = apis;
  const client = () => {
    const recorder = recordingFetch();
    return { recorder, client: new SquareClient({ token: TOKEN, baseUrl: `${apis.url}/square`, fetch: recorder.fetch, maxRetries: 0 }) };
  };
  /** The one answer recorded for `path`, asserted 200 and strictly parsed as `schema`. */
  const onlyAnswer = (answers: ReturnType<typeof recordingFetch>['answers'], path: string) => {
    const found = answers.filter((a) => a.path === `/square${path}`);
    expect(found).toHaveLength(1);
    expect(found[0]!.status).toBe(200);
    return found[0]!.body;
  };

  it('ListLocations answers a ListLocationsResponse', async () => {
    const { recorder, client: square } = client();
    const listed = await square.locations.list();
    expect(listed.locations?.map((l) => l.id)).toEqual(LOCATIONS);
    expect(complaints(serialization.ListLocationsResponse, onlyAnswer(recorder.answers, '/v2/locations'))).toEqual([]);
  });

  it('RetrieveOrder answers a GetOrderResponse: a sale with discount, tax, tip and customer, OPEN orders, a refunded sale and its return order', async () => {
    const { recorder, client: square } = client();
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: [{ ...TWO_LINES[0]!, itemId: 'VARIATION-LATTE' }, TWO_LINES[1]!], tip: 100, customer: { firstName: 'Ada', phone: '+14155550123' } });
    const open = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, open: true, location: LOCATIONS[1] });
    const yen = sim.pos.square.addOrder(MERCHANT, { currency: 'JPY', lines: [{ name: 'Onigiri', unitPrice: 500, quantity: 2, tax: 80 }] });
    const { order: returnOrder } = sim.pos.square.addRefund(MERCHANT, { orderId: sale.id, lines: [{ line: 0, quantity: 1 }] });
    // A second refund: the sale's refunds[] lists both.
    sim.pos.square.addRefund(MERCHANT, { orderId: sale.id });
    for (const id of [sale.id, open.id, yen.id, returnOrder.id]) {
      const got = await square.orders.get({ orderId: id });
      expect(got.order?.id).toBe(id);
      expect({ id, complaints: complaints(serialization.GetOrderResponse, onlyAnswer(recorder.answers, `/v2/orders/${id}`)) }).toEqual({ id, complaints: [] });
    }
    // The refunded sale lists its refunds as Square's legacy Refund, whose status enum has no COMPLETED.
    const refunded = onlyAnswer(recorder.answers, `/v2/orders/${sale.id}`) as { order: { refunds: { status: string }[] } };
    expect(refunded.order.refunds.map((r) => r.status)).toEqual(['APPROVED', 'APPROVED']);
  });

  it('SearchOrders answers SearchOrdersResponses, paged by cursor to the end, orders and order_entries alike', async () => {
    const { recorder, client: square } = client();
    const ids = [0, 1, 2, 3, 4].map((m) => sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(m), location: LOCATIONS[m % 2], tip: m * 10 }).id);
    const { order: returnOrder } = sim.pos.square.addRefund(MERCHANT, { orderId: ids[0]!, at: at(5) });
    const query = { filter: { dateTimeFilter: { updatedAt: { startAt: at(0), endAt: at(10) } } }, sort: { sortField: 'UPDATED_AT', sortOrder: 'ASC' } } as const;
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await square.orders.search({ locationIds: LOCATIONS, query, limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...(page.orders ?? []).map((o) => o.id!));
      cursor = page.cursor;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(3);
    // Refunded at minute 5, the sale moved after the others, beside its return order (ties by id).
    expect(seen).toEqual([...ids.slice(1), ...[ids[0]!, returnOrder.id].sort()]);
    expect(new Set(seen)).toEqual(new Set([...ids, returnOrder.id]));

    const entries = await square.orders.search({ locationIds: LOCATIONS, returnEntries: true, limit: 4 });
    expect(entries.orderEntries).toHaveLength(4);
    expect(entries.cursor).toBeDefined();
    const none = await square.orders.search({ locationIds: LOCATIONS, query: { filter: { dateTimeFilter: { createdAt: { startAt: at(100) } } } } });
    expect(none.orders).toBeUndefined();

    const searches = recorder.answers.filter((a) => a.path === '/square/v2/orders/search');
    expect(searches).toHaveLength(5);
    for (const answer of searches) {
      expect(answer.status).toBe(200);
      expect(complaints(serialization.SearchOrdersResponse, answer.body)).toEqual([]);
    }
  });

  it('RetrieveCustomer answers a GetCustomerResponse, with and without contact details', async () => {
    const { recorder, client: square } = client();
    const full = sim.pos.square.addCustomer(MERCHANT, { firstName: 'Ada', lastName: 'Lovelace', phone: '+14155550123', email: 'ada@example.com' });
    const bare = sim.pos.square.addCustomer(MERCHANT, {});
    for (const id of [full.id, bare.id]) {
      const got = await square.customers.get({ customerId: id });
      expect(got.customer?.id).toBe(id);
      expect(complaints(serialization.GetCustomerResponse, onlyAnswer(recorder.answers, `/v2/customers/${id}`))).toEqual([]);
    }
  });

  it('GetPaymentRefund answers a GetPaymentRefundResponse for a partial and a full refund', async () => {
    const { recorder, client: square } = client();
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES, tip: 100 });
    const partial = sim.pos.square.addRefund(MERCHANT, { orderId: sale.id, lines: [{ line: 1, quantity: 1 }] });
    const rest = sim.pos.square.addRefund(MERCHANT, { orderId: sale.id });
    for (const { refund } of [partial, rest]) {
      const got = await square.refunds.get({ refundId: refund.id });
      expect(got.refund?.status).toBe('COMPLETED');
      expect(complaints(serialization.GetPaymentRefundResponse, onlyAnswer(recorder.answers, `/v2/refunds/${refund.id}`))).toEqual([]);
    }
  });

  it('answers its errors as an SDK Error_ list (ErrorCategory and ErrorCode of Square\'s): the SDK raises SquareError', async () => {
    const { recorder, client: square } = client();
    await expect(square.orders.get({ orderId: 'missing' })).rejects.toMatchObject({ statusCode: 404 });
    await expect(square.orders.search({ locationIds: [] })).rejects.toMatchObject({ statusCode: 400 });
    const unauthorized = new SquareClient({ token: 'wrong', baseUrl: `${apis.url}/square`, fetch: recorder.fetch, maxRetries: 0 });
    await expect(unauthorized.locations.list()).rejects.toMatchObject({ statusCode: 401 });
    // Faults and a foreign location: 429, 503, 500 and 403 in the same envelope.
    sim.pos.square.addAccount({ merchantId: 'ORACLEOTHER01', accessToken: 'sq-oracle-other', locationIds: ['ORACLEOTHLOC1'] });
    sim.pos.square.faults(MERCHANT).inject({ kind: 'rate_limit', on: 'list' });
    sim.pos.square.faults(MERCHANT).inject({ kind: 'server_error', status: 503, on: 'get' });
    sim.pos.square.faults(MERCHANT).inject({ kind: 'server_error', on: 'get' });
    await expect(square.orders.search({ locationIds: LOCATIONS })).rejects.toMatchObject({ statusCode: 429 });
    await expect(square.locations.list()).rejects.toMatchObject({ statusCode: 503 });
    await expect(square.customers.get({ customerId: 'any' })).rejects.toMatchObject({ statusCode: 500 });
    await expect(square.orders.search({ locationIds: ['ORACLEOTHLOC1'] })).rejects.toMatchObject({ statusCode: 403 });
    expect(recorder.answers.map((a) => a.status)).toEqual([404, 400, 401, 429, 503, 500, 403]);
    for (const answer of recorder.answers) {
      // Every error answer is `{errors: Error_[]}`, which every Square response type carries.
      expect(complaints(serialization.GetOrderResponse, answer.body)).toEqual([]);
      expect((answer.body as { errors: unknown[] }).errors).toHaveLength(1);
    }
  });

  it('signs webhook events whose bodies parse as the SDK\'s event types', () => {
    const sale = sim.pos.square.addOrder(MERCHANT, { lines: TWO_LINES });
    const { refund } = sim.pos.square.addRefund(MERCHANT, { orderId: sale.id });
    const cases = [
      ['order.created', sale.id, serialization.OrderCreatedEvent],
      ['order.updated', sale.id, serialization.OrderUpdatedEvent],
      ['refund.created', refund.id, serialization.RefundCreatedEvent],
      ['refund.updated', refund.id, serialization.RefundUpdatedEvent],
    ] as const;
    for (const [event, id, schema] of cases) {
      const delivery = sim.pos.square.webhook(MERCHANT, { event, id, signatureKey: 'k', notificationUrl: 'https://example.com/hook' });
      expect({ event, complaints: complaints(schema, JSON.parse(delivery.body)) }).toEqual({ event, complaints: [] });
    }
  });
});

describe('the Square fixtures the adapters read, parsed with the SDK\'s schemas strictly', () => {
  const dir = new URL('../fixtures/square/', import.meta.url);
  const read = (name: string): any => JSON.parse(readFileSync(new URL(name, dir), 'utf8'));

  /** Each fixture, the SDK type of the whole file, and what the SDK refuses in it (known differences, each explained). */
  const FIXTURES: Record<string, { schema: Schema; known?: string[] }> = {
    'CalculateOrderResponse_example.json': { schema: serialization.CalculateOrderResponse },
    'CreateOrderResponse_example.json': { schema: serialization.CreateOrderResponse },
    'PayOrderResponse_example.json': { schema: serialization.PayOrderResponse },
    'RetrieveOrderResponse_example.json': { schema: serialization.GetOrderResponse },
    'webhook_loyalty_account_updated.json': { schema: serialization.LoyaltyAccountUpdatedEvent },
    'webhook_loyalty_event_created.json': { schema: serialization.LoyaltyEventCreatedEvent },
    'webhook_order_created.json': { schema: serialization.OrderCreatedEvent },
    'webhook_order_updated.json': { schema: serialization.OrderUpdatedEvent },
    'webhook_payment_updated.json': { schema: serialization.PaymentUpdatedEvent },
    // Square's own api.json example of a refund event carries `version`, which the SDK's
    // PaymentRefund does not model: the example is Square's, not hand-made, so it stays as it is.
    'webhook_refund_created.json': { schema: serialization.RefundCreatedEvent, known: ['data.object.refund.version: Unexpected key "version"'] },
    'webhook_refund_updated.json': { schema: serialization.RefundUpdatedEvent, known: ['data.object.refund.version: Unexpected key "version"'] },
  };

  it('names every fixture in the directory', () => {
    expect(readdirSync(dir).filter((f) => f.endsWith('.json')).sort()).toEqual(Object.keys(FIXTURES).sort());
  });

  it.each(Object.entries(FIXTURES))('%s parses as its SDK type (known differences aside)', (name, { schema, known }) => {
    expect(complaints(schema, read(name))).toEqual(known ?? []);
  });

  it.each([
    ['webhook_payment_updated.json', 'payment', serialization.Payment, []],
    ['webhook_refund_created.json', 'refund', serialization.PaymentRefund, ['version: Unexpected key "version"']],
    ['webhook_refund_updated.json', 'refund', serialization.PaymentRefund, ['version: Unexpected key "version"']],
  ] as const)('%s: data.object.%s parses as the SDK object', (name, key, schema, known) => {
    expect(complaints(schema, read(name).data.object[key])).toEqual(known);
  });

  it.each(['CalculateOrderResponse_example.json', 'CreateOrderResponse_example.json', 'PayOrderResponse_example.json', 'RetrieveOrderResponse_example.json'])(
    '%s: its order parses as the SDK Order',
    (name) => {
      expect(complaints(serialization.Order, read(name).order)).toEqual([]);
    },
  );
});
