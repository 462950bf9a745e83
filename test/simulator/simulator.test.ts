import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { AccrualResult, Card, Operation, PosResponse } from '../../src/loyalty/contract.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { eventually } from '../support/eventually.js';

interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

function client(base: () => string) {
  async function send(method: string, path: string, init: { body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    let body: string | undefined;
    if (init.raw !== undefined) body = init.raw;
    else if (init.body !== undefined) body = JSON.stringify(init.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base()}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    if (res.headers.get('content-type')?.startsWith('application/json')) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed };
  }
  return {
    send,
    pos: (op: string, body: unknown, token?: string) =>
      send('POST', `/api/v2/marketplace/${op}`, { body, headers: token === undefined ? {} : { 'x-app-token': token } }),
    get: (path: string, key?: string) => send('GET', path, { headers: key === undefined ? {} : { 'x-api-key': key } }),
  };
}

function check(amount: number) {
  return { amount, currency: 'EUR', selections: [{ quantity: 1, totalPrice: amount }] };
}

describe('simulator over HTTP', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  const http = client(() => server.url);
  const TOKEN = 'sim-app-token';
  const KEY = 'sim-api-key';
  const accrue = (body: Record<string, unknown>, token = TOKEN) => http.pos('accrue', body, token);
  const reverse = (transactionId: string, token = TOKEN) => http.pos('reverse', { transactionId }, token);

  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
  });
  afterAll(() => server.close());
  beforeEach(() => sim.reset());

  it('listens on 127.0.0.1 without a trailing slash and tags every response with X-Request-ID', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const missing = await http.get('/nope');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
    expect(missing.headers.get('x-request-id')).toBeTruthy();
  });

  describe('point-of-sale refusals', () => {
    it('answers undecodable JSON with 400 {errors}', async () => {
      const res = await http.send('POST', '/api/v2/marketplace/accrue', { raw: '{"check":', headers: { 'x-app-token': TOKEN } });
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([expect.stringContaining('body')]);
    });

    it('validates the body before the credential, naming each bad field', async () => {
      const bad = await accrue({ transactionId: '', check: { amount: 12.5, currency: 'EUR', selections: [{ quantity: 0, totalPrice: 1 }] } }, 'wrong');
      expect(bad.status).toBe(400);
      const text = bad.body.errors.join('\n');
      for (const field of ['transactionId', 'check.amount', 'check.selections.0.quantity', 'phone, email, serialNumber']) {
        expect(text).toContain(field);
      }
      const noToken = await http.pos('reverse', {}, undefined);
      expect(noToken.status).toBe(400);
      expect(noToken.body.errors.join()).toContain('transactionId');
    });

    it('refuses a missing or wrong app token, and the API key, with 403 {errors}', async () => {
      const body = { transactionId: 't', phone: '+100', check: check(1000) };
      for (const token of [undefined, 'wrong', KEY]) {
        const res = await http.pos('accrue', body, token);
        expect(res.status).toBe(403);
        expect(res.body.errors).toHaveLength(1);
      }
      const books = sim.books();
      expect(books.accrueRequests).toBe(3);
      expect(books.transactions).toEqual({});
    });
  });

  describe('accrue and reverse', () => {
    it('registers an unknown customer, credits one point per whole unit and books it', async () => {
      const res = await accrue({ transactionId: 'tx-1', phone: '+3111', firstName: 'Ann', check: check(12_345) });
      expect(res.status).toBe(200);
      const body = PosResponse.parse(res.body);
      expect(body.transactionId).toBe('tx-1');
      expect(body.results).toHaveLength(1);
      const [result] = body.results as [AccrualResult];
      expect(result).toMatchObject({ isSuccess: true, errorMessage: null, checkAmount: 12_345, accruedValue: 123, reversedAt: null, companyId: 1, templateId: 1 });
      expect(result.serialNumber).toMatch(/^\d+-\d+-\d$/);

      const again = await accrue({ transactionId: 'tx-2', phone: '+3111', check: check(100) });
      expect(again.body.results[0].serialNumber).toBe(result.serialNumber);

      const books = sim.books();
      expect(books.transactions['tx-1']).toEqual({ accruals: 1, reversals: 0, amount: 12_345, cards: [result.serialNumber], points: 123, operationIds: [result.operationId] });
      expect(books.cardBalances[result.serialNumber!]).toBe(124);
      expect(books.doubleAccruals).toEqual([]);
    });

    it('has no idempotency: the same transactionId accrued twice is credited twice and flagged', async () => {
      const body = { transactionId: 'dup', email: 'a@b.c', check: check(500) };
      const first = await accrue(body);
      const second = await accrue(body);
      expect(second.body.results[0].operationId).not.toBe(first.body.results[0].operationId);
      const books = sim.books();
      expect(books.transactions.dup).toMatchObject({ accruals: 2, points: 10 });
      expect(books.doubleAccruals).toEqual(['dup']);
      expect(Object.values(books.cardBalances)).toEqual([10]);
    });

    it('reverses once, reverses again when asked, and refuses an unknown transaction', async () => {
      const accrued = await accrue({ transactionId: 'r', phone: '+1', check: check(700) });
      const serial = accrued.body.results[0].serialNumber as string;

      const once = await reverse('r');
      expect(once.status).toBe(200);
      expect(once.body.transactionId).toBe('r');
      expect(once.body.results[0]).toMatchObject({ isSuccess: true, serialNumber: serial, accruedValue: 7 });
      expect(once.body.results[0].reversedAt).toEqual(expect.any(String));
      expect(sim.books()).toMatchObject({ transactions: { r: { reversals: 1, points: 0 } }, cardBalances: { [serial]: 0 }, doubleReversals: [] });

      await reverse('r');
      expect(sim.books()).toMatchObject({ transactions: { r: { reversals: 2, points: -7 } }, cardBalances: { [serial]: -7 }, doubleReversals: ['r'] });

      const unknown = await reverse('never');
      expect(unknown.status).toBe(400);
      expect(unknown.body).toEqual({ errors: ['transaction never not found'] });
      expect(sim.books().reverseRequests).toBe(3);
    });

    it('finds a card by serial number and reports an unknown serial as a failed result', async () => {
      const { cardIds } = sim.addCustomer({ phone: '+42' });
      const hit = await accrue({ transactionId: 's1', serialNumber: cardIds[0], check: check(200) });
      expect(hit.body.results).toEqual([expect.objectContaining({ isSuccess: true, serialNumber: cardIds[0], accruedValue: 2 })]);
      const miss = await accrue({ transactionId: 's2', serialNumber: '99-999999-9', check: check(200) });
      expect(miss.status).toBe(200);
      expect(miss.body.results).toEqual([expect.objectContaining({ isSuccess: false, errorMessage: 'Card not found' })]);
      expect(Object.keys(sim.books().transactions)).toEqual(['s1']);
    });

    it('resolves credentials, filtered by name', async () => {
      const all = await http.pos('resolve-credentials', {}, TOKEN);
      expect(all.status).toBe(200);
      expect(all.body.credentials.length).toBeGreaterThan(1);
      const some = await http.pos('resolve-credentials', { names: ['locationId'] }, TOKEN);
      expect(some.body.credentials).toEqual([{ name: 'locationId', value: '1' }]);
      expect((await http.pos('resolve-credentials', { credentials: [] }, 'bad')).status).toBe(400);
      expect((await http.pos('resolve-credentials', {}, KEY)).status).toBe(403);
    });
  });

  describe('faults', () => {
    const body = { transactionId: 'f', phone: '+7', check: check(1000) };

    it('rate_limit: an HTML 429 without rate-limit headers, nothing committed', async () => {
      sim.faults.inject({ kind: 'rate_limit' });
      const res = await accrue(body);
      expect(res.status).toBe(429);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('retry-after')).toBeNull();
      expect([...res.headers.keys()].filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
      expect(res.body).toContain('429');
      expect(sim.books()).toMatchObject({ accrueRequests: 1, transactions: {} });
      expect(sim.faults.pending()).toBe(0);
    });

    it('server_error: 503 by default or the given status, nothing committed', async () => {
      sim.faults.inject({ kind: 'server_error', times: 2 });
      sim.faults.inject({ kind: 'server_error', status: 500, message: 'boom' });
      expect((await accrue(body)).status).toBe(503);
      expect((await accrue(body)).status).toBe(503);
      const third = await accrue(body);
      expect(third).toMatchObject({ status: 500, body: { message: 'boom' } });
      expect(sim.books().transactions).toEqual({});
    });

    it('is consumed only by valid, authorised requests of the targeted operation', async () => {
      sim.faults.inject({ kind: 'rate_limit', on: 'reverse' });
      expect((await accrue({ transactionId: '' , check: check(1) })).status).toBe(400);
      expect((await accrue(body, 'wrong')).status).toBe(403);
      expect((await accrue(body)).status).toBe(200);
      expect(sim.faults.pending()).toBe(1);
      expect((await reverse('f')).status).toBe(429);
      expect(sim.faults.pending()).toBe(0);
    });

    it('drop_before_commit: the client sees a broken connection and the books stay empty', async () => {
      sim.faults.inject({ kind: 'drop_before_commit' });
      await expect(accrue(body)).rejects.toThrow();
      expect(sim.books()).toMatchObject({ accrueRequests: 1, transactions: {}, cardBalances: {} });
    });

    it('drop_after_commit: the client sees a broken connection but the accrual happened', async () => {
      sim.faults.inject({ kind: 'drop_after_commit' });
      await expect(accrue(body)).rejects.toThrow();
      expect(sim.books().transactions.f).toMatchObject({ accruals: 1, points: 10 });
    });

    it('slow_after_commit: the books show the accrual before the answer arrives', async () => {
      sim.faults.inject({ kind: 'slow_after_commit', delayMs: 1000 });
      const started = Date.now();
      let answered = false;
      const pending = accrue(body).finally(() => (answered = true));
      // The commit is seen while the answer is still held back (a second's wait gives a loaded machine room).
      await eventually(() => sim.books().transactions.f?.accruals, (accruals) => accruals === 1, 5000, { what: 'the accrual committed' });
      expect(answered).toBe(false);
      const res = await pending;
      // A timer fires no earlier than it was set for (give or take the clock's millisecond).
      expect(Date.now() - started).toBeGreaterThanOrEqual(995);
      expect(res.status).toBe(200);
      expect(res.body.results[0].isSuccess).toBe(true);
    });

    it('result_failure: 200 whose first result failed, with no points for that card', async () => {
      sim.faults.inject({ kind: 'result_failure' });
      const res = await accrue(body);
      expect(res.status).toBe(200);
      expect(res.body.results).toEqual([expect.objectContaining({ isSuccess: false, errorMessage: 'Card is blocked', accruedValue: 0 })]);
      expect(sim.books()).toMatchObject({ transactions: {}, cardBalances: { [res.body.results[0].serialNumber]: 0 } });
      expect((await reverse('f')).status).toBe(400);
    });

    it('can be driven through the control API', async () => {
      const injected = await http.send('POST', '/__sim/faults', { body: { kind: 'rate_limit', times: 2 } });
      expect(injected).toMatchObject({ status: 201, body: { pending: 2 } });
      expect((await http.send('POST', '/__sim/faults', { body: { kind: 'nope' } })).status).toBe(400);
      expect((await accrue(body)).status).toBe(429);
      await http.send('POST', '/__sim/reset');
      expect(sim.faults.pending()).toBe(0);
      const customer = await http.send('POST', '/__sim/customers', { body: { email: 'x@y.z' } });
      expect(customer.status).toBe(201);
      expect(customer.body.cardIds).toHaveLength(1);
      const books = await http.get('/__sim/books');
      expect(books.body).toEqual(sim.books());
      expect(books.body.cardBalances[customer.body.cardIds[0]]).toBe(0);
    });
  });

  describe('history reads', () => {
    it('lists operations in the standard envelope, paged and filtered, behind X-API-Key', async () => {
      await accrue({ transactionId: 'a', phone: '+1', check: check(150) });
      await accrue({ transactionId: 'b', phone: '+2', check: check(250) });
      await accrue({ transactionId: 'c', phone: '+1', check: check(350) });
      await reverse('a');

      const page = await http.get('/api/v2/operations?itemsPerPage=3&page=2', KEY);
      expect(page.status).toBe(200);
      expect(page.body).toMatchObject({ code: 200, meta: { totalItems: 4, itemsPerPage: 3, currentPage: 2 } });
      expect(page.body.responseId).toMatch(/^[0-9a-f-]{36}$/);
      expect(page.body.data).toHaveLength(1);
      const reversal = Operation.parse(page.body.data[0]);
      expect(reversal).toMatchObject({ eventId: 24, amount: -1, purchaseSum: -1.5, balance: 3, source: 'api' });
      expect(reversal.createdAt).toMatch(/\+00:00$/);

      const cardId = reversal.cardId;
      const byCard = await http.get(`/api/v2/operations?cardId=${cardId}`, KEY);
      expect(byCard.body.data.map((o: Operation) => o.amount)).toEqual([1, 3, -1]);
      expect(byCard.body.meta).toEqual({ totalItems: 3, itemsPerPage: 30, currentPage: 1 });
      const byCustomer = await http.get(`/api/v2/operations?customerId=${reversal.customerId}&templateId=1`, KEY);
      expect(byCustomer.body.meta.totalItems).toBe(3);
    });

    it('refuses a missing key and the app token with 401 {message}, and bad paging with 400', async () => {
      for (const key of [undefined, TOKEN, 'wrong']) {
        const res = await http.get('/api/v2/operations', key);
        expect(res.status).toBe(401);
        expect(res.body.message).toEqual(expect.any(String));
      }
      expect((await http.get('/api/v2/cards', undefined)).status).toBe(401);
      for (const query of ['page=0', 'itemsPerPage=1001', 'itemsPerPage=0', 'page=x', 'startDate=2024-13-01', 'customerId=nope']) {
        const res = await http.get(`/api/v2/operations?${query}`, KEY);
        expect(res.status).toBe(400);
        expect(res.body.message).toEqual(expect.any(String));
      }
      expect((await http.get('/api/v2/cards?itemsPerPage=1000', KEY)).status).toBe(200);
    });

    it('lists cards with balances, filtered by customer', async () => {
      const { customerId, cardIds } = sim.addCustomer({ phone: '+9', email: 'Nine@Example.com' });
      sim.addCustomer({ phone: '+10' });
      await accrue({ transactionId: 'k', phone: '+9', check: check(900) });

      const all = await http.get('/api/v2/cards', KEY);
      expect(all.body.meta).toEqual({ totalItems: 2, itemsPerPage: 30, currentPage: 1 });
      for (const query of [`customerId=${customerId}`, 'customerPhone=%2B9', 'customerEmail=nine@example.com']) {
        const res = await http.get(`/api/v2/cards?${query}`, KEY);
        expect(res.body.data).toHaveLength(1);
        const card = Card.parse(res.body.data[0]);
        expect(card).toMatchObject({ id: cardIds[0], customerId, templateId: 1, status: 'active', customer: { id: customerId, segments: [] } });
        expect(card.balance).toMatchObject({ bonusBalance: 9, balance: 9 });
        expect(card.qrLink).toEqual(expect.any(String));
      }
      expect((await http.get('/api/v2/cards?templateId=2', KEY)).body).toMatchObject({ data: [], meta: { totalItems: 0 } });
    });
  });
});

describe('simulator options', () => {
  it('gives a multi-template customer one card and one result per template', async () => {
    const sim = createSimulator({ templateIds: [1, 2], appToken: 'tok' });
    const server = await sim.listen();
    try {
      const http = client(() => server.url);
      const res = await http.pos('accrue', { transactionId: 'm', email: 'm@x.io', check: check(300) }, 'tok');
      expect(res.body.results.map((r: AccrualResult) => [r.templateId, r.isSuccess, r.accruedValue])).toEqual([
        [1, true, 3],
        [2, true, 3],
      ]);
      expect(sim.books().transactions.m).toMatchObject({ points: 6, cards: res.body.results.map((r: AccrualResult) => r.serialNumber) });
      const reversed = await http.pos('reverse', { transactionId: 'm' }, 'tok');
      expect(reversed.body.results).toHaveLength(2);
      expect(Object.values(sim.books().cardBalances)).toEqual([0, 0]);
    } finally {
      await server.close();
    }
  });

  it('numbers every merchant\'s operations from firstOperationId (a sandbox run goes on past the ids its ledger already holds)', async () => {
    const first = 1_795_000_000_000_000;
    const sim = createSimulator({ firstOperationId: first, merchants: [{ id: 'other' }] });
    const server = await sim.listen();
    try {
      const http = client(() => server.url);
      const a = await http.pos('accrue', { transactionId: 'f1', phone: '+15550001111', check: check(100) }, sim.appToken);
      const b = await http.pos('accrue', { transactionId: 'f2', phone: '+15550001111', check: check(100) }, sim.appToken);
      const other = await http.pos('accrue', { transactionId: 'f1', phone: '+15550001111', check: check(100) }, sim.merchant('other').appToken);
      expect([a.body.results[0].operationId, b.body.results[0].operationId, other.body.results[0].operationId]).toEqual([first, first + 1, first]);
      expect((await http.get('/api/v2/operations', sim.apiKey)).body.data.map((o: Operation) => o.id)).toEqual([first, first + 1]);
      sim.reset();
      expect((await http.pos('accrue', { transactionId: 'f3', phone: '+15550001111', check: check(100) }, sim.appToken)).body.results[0].operationId).toBe(first);
      expect(() => createSimulator({ firstOperationId: 0 })).toThrow(RangeError);
      expect(() => createSimulator({ firstOperationId: 2 ** 53 })).toThrow(RangeError);
    } finally {
      await server.close();
    }
  });

  it('filters operations by the UTC date of createdAt, bounds inclusive', async () => {
    let clock = new Date('2024-03-01T23:30:00Z');
    const sim = createSimulator({ now: () => clock });
    const server = await sim.listen();
    try {
      const http = client(() => server.url);
      await http.pos('accrue', { transactionId: 'd1', phone: '+1', check: check(100) }, sim.appToken);
      clock = new Date('2024-03-02T00:30:00Z');
      await http.pos('accrue', { transactionId: 'd2', phone: '+1', check: check(200) }, sim.appToken);
      const get = async (q: string) => (await http.get(`/api/v2/operations?${q}`, sim.apiKey)).body.data.map((o: Operation) => o.amount);
      expect(await get('startDate=2024-03-01&endDate=2024-03-01')).toEqual([1]);
      expect(await get('startDate=2024-03-02')).toEqual([2]);
      expect(await get('endDate=2024-03-02')).toEqual([1, 2]);
    } finally {
      await server.close();
    }
  });

  it('close() ends promptly even while a slow fault holds a connection open', async () => {
    const sim = createSimulator();
    const server = await sim.listen();
    const http = client(() => server.url);
    sim.faults.inject({ kind: 'slow_after_commit', delayMs: 60_000 });
    const pending = http.pos('accrue', { transactionId: 'z', phone: '+1', check: check(100) }, sim.appToken);
    const settled = pending.then(
      () => 'answered',
      () => 'failed',
    );
    await eventually(() => sim.books().accrueRequests, (requests) => requests === 1, 5000, { what: 'the accrue to arrive' });
    const started = Date.now();
    await server.close();
    expect(await settled).toBe('failed');
    // Far below the fault's 60 s, whatever the machine's load: close() did not wait for the held answer.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(sim.books().transactions.z).toMatchObject({ accruals: 1 });
  });
});
