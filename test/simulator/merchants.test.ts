/**
 * Several merchants on one simulator (issue 11): each is one install of the point-of-sale app with
 * its own X-App-Token, X-API-Key, books, numbering, faults and resolve-credentials answer. Every
 * request is routed by its credential, over real HTTP.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { Card, Operation, PosResponse } from '../../src/loyalty/contract.js';
import { createSimulator, type ListeningSimulator, type MerchantOptions, type SimMerchant, type Simulator } from '../../simulator/index.js';

const BAKERY: MerchantOptions = {
  id: 'bakery-17',
  appToken: 'tok-bakery',
  apiKey: 'key-bakery',
  credentials: { 'square.merchantId': 'ML8Q-BAKERY', 'square.accessToken': 'sq-bakery', currency: 'EUR', phoneRegion: 'DE' },
};
const CAFE: MerchantOptions = {
  id: 'cafe-9',
  appToken: 'tok-cafe',
  apiKey: 'key-cafe',
  credentials: [
    { name: 'shopify.shopDomain', value: 'cafe-9.myshopify.com' },
    { name: 'toast.restaurantGuid', value: '4f6c-cafe' },
    { name: 'currency', value: 'USD' },
    { name: 'phoneRegion', value: 'US' },
  ],
};
const PHONE = '+4915550001111';

/** The Card fields these tests read beyond what the bridge's Card schema declares. */
interface CardOut {
  companyId: number;
  balance: { balance: number };
}

function check(amount: number) {
  return { amount, currency: 'EUR', selections: [{ quantity: 1, totalPrice: amount }] };
}

describe('a simulator with several merchants', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let bakery: SimMerchant;
  let cafe: SimMerchant;

  const pos = (op: 'accrue' | 'reverse' | 'resolve-credentials', body: unknown, token?: string) =>
    request(server.url).post(`/api/v2/marketplace/${op}`).set(token === undefined ? {} : { 'x-app-token': token }).send(body as object);
  const get = (path: string, key?: string) => request(server.url).get(path).set(key === undefined ? {} : { 'x-api-key': key });
  const control = () => request(server.url);
  const accrue = (m: SimMerchant, transactionId: string, amount: number, contact: Record<string, string> = { phone: PHONE }) =>
    pos('accrue', { transactionId, ...contact, check: check(amount) }, m.appToken);

  beforeEach(async () => {
    sim = createSimulator({ merchants: [BAKERY, CAFE] });
    server = await sim.listen();
    bakery = sim.merchant('bakery-17');
    cafe = sim.merchant('cafe-9');
  });
  afterEach(() => server.close());

  it('keeps equal transactionIds and equal customer phones of two merchants apart: books, cards, history, numbering', async () => {
    const a = await accrue(bakery, 'tx-1', 1_000);
    const b = await accrue(cafe, 'tx-1', 2_500);
    expect([a.status, b.status]).toEqual([200, 200]);
    const [ra] = PosResponse.parse(a.body).results;
    const [rb] = PosResponse.parse(b.body).results;
    // Each merchant is its own account: its own companyId, and serials that start with it.
    expect(ra).toMatchObject({ isSuccess: true, companyId: 2, accruedValue: 10, serialNumber: '21-100001-2' });
    expect(rb).toMatchObject({ isSuccess: true, companyId: 3, accruedValue: 25, serialNumber: '31-100001-2' });
    // Independent numbering of operations: the same id in both accounts, which a bridge must key per merchant.
    expect(ra!.operationId).toBe(1);
    expect(rb!.operationId).toBe(1);

    expect(bakery.books().transactions).toEqual({ 'tx-1': { accruals: 1, reversals: 0, amount: 1_000, cards: ['21-100001-2'], points: 10, operationIds: [1] } });
    expect(cafe.books().transactions).toEqual({ 'tx-1': { accruals: 1, reversals: 0, amount: 2_500, cards: ['31-100001-2'], points: 25, operationIds: [1] } });
    expect(sim.books()).toMatchObject({ accrueRequests: 0, transactions: {}, cardBalances: {} });

    const opsA = await get('/api/v2/operations', bakery.apiKey);
    const opsB = await get('/api/v2/operations', cafe.apiKey);
    expect(opsA.body.meta.totalItems).toBe(1);
    expect(opsB.body.meta.totalItems).toBe(1);
    const opA = Operation.parse(opsA.body.data[0]);
    const opB = Operation.parse(opsB.body.data[0]);
    expect(opA).toMatchObject({ id: 1, companyId: 2, cardId: '21-100001-2', purchaseSum: 10, balance: 10 });
    expect(opB).toMatchObject({ id: 1, companyId: 3, cardId: '31-100001-2', purchaseSum: 25, balance: 25 });
    // Same phone, two accounts: two customers.
    expect(opA.customerId).not.toBe(opB.customerId);

    const cardsA = await get(`/api/v2/cards?customerPhone=${encodeURIComponent(PHONE)}`, bakery.apiKey);
    const cardsB = await get(`/api/v2/cards?customerPhone=${encodeURIComponent(PHONE)}`, cafe.apiKey);
    const summary = (data: unknown[]) => data.map((c) => [Card.parse(c).id, (c as CardOut).companyId, (c as CardOut).balance.balance]);
    expect(summary(cardsA.body.data)).toEqual([['21-100001-2', 2, 10]]);
    expect(summary(cardsB.body.data)).toEqual([['31-100001-2', 3, 25]]);

    // Reversing one merchant's tx-1 leaves the other's untouched; a repeat is flagged in its own books only.
    expect((await pos('reverse', { transactionId: 'tx-1' }, bakery.appToken)).status).toBe(200);
    await accrue(cafe, 'tx-1', 2_500);
    expect(bakery.books()).toMatchObject({ transactions: { 'tx-1': { reversals: 1, points: 0 } }, cardBalances: { '21-100001-2': 0 }, doubleAccruals: [] });
    expect(cafe.books()).toMatchObject({ transactions: { 'tx-1': { accruals: 2, reversals: 0, operationIds: [1, 2] } }, cardBalances: { '31-100001-2': 50 }, doubleAccruals: ['tx-1'] });
  });

  it('routes point-of-sale calls by X-App-Token and history reads by X-API-Key, refusing each credential on the other group', async () => {
    for (const token of [bakery.apiKey, cafe.apiKey, sim.apiKey]) {
      const res = await pos('accrue', { transactionId: 'x', phone: PHONE, check: check(100) }, token);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ errors: ['An API key is not accepted here; use X-App-Token.'] });
    }
    for (const token of [undefined, 'nobody']) {
      const res = await pos('resolve-credentials', {}, token);
      expect(res.status).toBe(403);
      expect(res.body.errors).toHaveLength(1);
    }
    for (const key of [bakery.appToken, cafe.appToken, sim.appToken]) {
      for (const path of ['/api/v2/operations', '/api/v2/cards']) {
        const res = await get(path, key);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ message: 'An app token is not accepted here; use X-API-Key.' });
      }
    }
    expect((await get('/api/v2/cards', 'nobody')).status).toBe(401);
    // A refusal that names no merchant is counted by the default one, as before there were several.
    expect(sim.books()).toMatchObject({ accrueRequests: 3, transactions: {} });
    expect(bakery.books()).toMatchObject({ accrueRequests: 0, transactions: {} });
    expect(cafe.books()).toMatchObject({ accrueRequests: 0, transactions: {} });

    expect((await accrue(cafe, 'c-1', 300)).status).toBe(200);
    expect(cafe.books()).toMatchObject({ accrueRequests: 1, transactions: { 'c-1': { accruals: 1 } } });
    expect((await get('/api/v2/operations', cafe.apiKey)).body.meta.totalItems).toBe(1);
    expect((await get('/api/v2/operations', bakery.apiKey)).body.meta.totalItems).toBe(0);
    expect((await get('/api/v2/operations', sim.apiKey)).body.meta.totalItems).toBe(0);
  });

  it("shows a merchant nothing of another's cards, customers, operations or transactions", async () => {
    const res = await accrue(bakery, 'secret', 700);
    const serial = res.body.results[0].serialNumber as string;
    const cards = await get(`/api/v2/cards?customerPhone=${encodeURIComponent(PHONE)}`, bakery.apiKey);
    expect(cards.body.data.map((c: { id: string }) => c.id)).toEqual([serial]);
    const customerId = cards.body.data[0].customerId as string;

    for (const path of [
      '/api/v2/operations',
      `/api/v2/operations?cardId=${serial}`,
      `/api/v2/operations?customerId=${customerId}`,
      '/api/v2/cards',
      `/api/v2/cards?customerId=${customerId}`,
      `/api/v2/cards?customerPhone=${encodeURIComponent(PHONE)}`,
    ]) {
      const seen = await get(path, cafe.apiKey);
      expect(seen.status).toBe(200);
      expect(seen.body).toMatchObject({ data: [], meta: { totalItems: 0 } });
    }

    // The other merchant's token can neither reverse the transaction nor credit the card.
    const reversed = await pos('reverse', { transactionId: 'secret' }, cafe.appToken);
    expect(reversed.status).toBe(400);
    expect(reversed.body).toEqual({ errors: ['transaction secret not found'] });
    const credited = await pos('accrue', { transactionId: 'steal', serialNumber: serial, check: check(5_000) }, cafe.appToken);
    expect(credited.body.results).toEqual([expect.objectContaining({ isSuccess: false, errorMessage: 'Card not found' })]);
    expect(bakery.books()).toMatchObject({ transactions: { secret: { accruals: 1, reversals: 0, points: 7 } }, cardBalances: { [serial]: 7 } });
    expect(cafe.books()).toMatchObject({ transactions: {}, cardBalances: {} });
  });

  it("resolves each merchant's own credentials, filtered by name, all of them when names is empty or omitted", async () => {
    const all = await pos('resolve-credentials', {}, bakery.appToken);
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      credentials: [
        { name: 'companyId', value: '2' },
        { name: 'locationId', value: '1' },
        { name: 'templateId', value: '1' },
        { name: 'square.merchantId', value: 'ML8Q-BAKERY' },
        { name: 'square.accessToken', value: 'sq-bakery' },
        { name: 'currency', value: 'EUR' },
        { name: 'phoneRegion', value: 'DE' },
      ],
    });
    expect((await pos('resolve-credentials', { names: [] }, bakery.appToken)).body).toEqual(all.body);

    const names = { names: ['currency', 'phoneRegion', 'shopify.shopDomain'] };
    expect((await pos('resolve-credentials', names, bakery.appToken)).body.credentials).toEqual([
      { name: 'currency', value: 'EUR' },
      { name: 'phoneRegion', value: 'DE' },
    ]);
    expect((await pos('resolve-credentials', names, cafe.appToken)).body.credentials).toEqual([
      { name: 'shopify.shopDomain', value: 'cafe-9.myshopify.com' },
      { name: 'currency', value: 'USD' },
      { name: 'phoneRegion', value: 'US' },
    ]);
    // The default merchant answers exactly what the single-merchant simulator did.
    expect((await pos('resolve-credentials', {}, sim.appToken)).body.credentials).toEqual([
      { name: 'companyId', value: '1' },
      { name: 'locationId', value: '1' },
      { name: 'templateId', value: '1' },
    ]);

    // Settings can change between two reads (what a bridge's /refresh would pick up).
    const patched = await control().patch('/__sim/merchants/cafe-9/credentials').send({ currency: 'CAD', 'toast.restaurantGuid': null });
    expect(patched.status).toBe(200);
    expect((await pos('resolve-credentials', { names: ['currency', 'toast.restaurantGuid'] }, cafe.appToken)).body.credentials).toEqual([
      { name: 'currency', value: 'CAD' },
    ]);
  });

  it('refuses a revoked install with 403 on all three operations, keeps its API key and the other merchants working, and serves it once restored', async () => {
    expect((await accrue(bakery, 'before', 400)).status).toBe(200);
    bakery.revoke();

    for (const [op, body] of [
      ['resolve-credentials', {}],
      ['accrue', { transactionId: 'after', phone: PHONE, check: check(400) }],
      ['reverse', { transactionId: 'before' }],
    ] as const) {
      const res = await pos(op, body, bakery.appToken);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ errors: [expect.stringContaining('uninstalled')] });
    }
    // Contract, Errors rule 1: the body is still validated before the credential.
    expect((await pos('accrue', { transactionId: 'after' }, bakery.appToken)).status).toBe(400);

    expect(bakery.books()).toMatchObject({ accrueRequests: 3, reverseRequests: 1, transactions: { before: { accruals: 1, reversals: 0 } } });
    expect((await get('/api/v2/operations', bakery.apiKey)).body.meta.totalItems).toBe(1);
    expect((await pos('resolve-credentials', {}, cafe.appToken)).status).toBe(200);
    expect((await accrue(cafe, 'before', 400)).status).toBe(200);

    bakery.restore();
    expect((await pos('resolve-credentials', { names: ['currency'] }, bakery.appToken)).body).toEqual({ credentials: [{ name: 'currency', value: 'EUR' }] });

    const revoked = await control().post('/__sim/merchants/cafe-9/revoke');
    expect(revoked.body).toMatchObject({ id: 'cafe-9', revoked: true });
    expect((await pos('resolve-credentials', {}, cafe.appToken)).status).toBe(403);
    expect((await control().post('/__sim/merchants/cafe-9/restore')).body).toMatchObject({ revoked: false });
    expect((await pos('resolve-credentials', {}, cafe.appToken)).status).toBe(200);
  });

  it("answers one merchant's every point-of-sale call with the HTML 429 until cleared, while the other merchant is served", async () => {
    bakery.faults.inject({ kind: 'server_error' });
    bakery.faults.rateLimitAll = true;

    const calls = Array.from({ length: 10 }, (_, i) => [accrue(bakery, `a-${i}`, 100), accrue(cafe, `c-${i}`, 100)]).flat();
    const answers = await Promise.all(calls);
    const stormed = answers.filter((_, i) => i % 2 === 0);
    const served = answers.filter((_, i) => i % 2 === 1);
    for (const res of stormed) {
      expect(res.status).toBe(429);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['retry-after']).toBeUndefined();
      expect(Object.keys(res.headers).filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
      expect(res.text).toContain('429 Too Many Requests');
    }
    for (const res of served) {
      expect(res.status).toBe(200);
      expect(res.body.results[0].isSuccess).toBe(true);
    }
    // The front proxy answers before the service: reverse, resolve-credentials and even a bad body.
    expect((await pos('reverse', { transactionId: 'a-0' }, bakery.appToken)).status).toBe(429);
    expect((await pos('resolve-credentials', {}, bakery.appToken)).status).toBe(429);
    expect((await pos('accrue', {}, bakery.appToken)).status).toBe(429);

    expect(bakery.books()).toMatchObject({ accrueRequests: 11, reverseRequests: 1, transactions: {} });
    expect(Object.keys(cafe.books().transactions)).toHaveLength(10);
    // The storm neither uses itself up nor consumes a queued fault.
    expect(bakery.faults.pending()).toBe(1);
    expect((await control().get('/__sim/merchants/bakery-17/faults')).body).toEqual({ pending: 1, rateLimitAll: true });

    const ended = await control().put('/__sim/merchants/bakery-17/faults/rate-limit-all').send({ on: false });
    expect(ended.body).toEqual({ pending: 1, rateLimitAll: false });
    expect((await accrue(bakery, 'a-x', 100)).status).toBe(503);
    expect((await accrue(bakery, 'a-y', 100)).status).toBe(200);

    // Over HTTP as well; clearing the faults ends it.
    expect((await control().put('/__sim/merchants/bakery-17/faults/rate-limit-all').send({ on: true })).body.rateLimitAll).toBe(true);
    expect((await accrue(bakery, 'a-z', 100)).status).toBe(429);
    expect((await control().delete('/__sim/merchants/bakery-17/faults')).body).toEqual({ pending: 0, rateLimitAll: false });
    expect((await accrue(bakery, 'a-z', 100)).status).toBe(200);
  });

  it("keeps each merchant's queued faults to its own requests", async () => {
    cafe.faults.inject({ kind: 'rate_limit', times: 2 });
    expect((await accrue(bakery, 'a', 100)).status).toBe(200);
    expect((await accrue(sim.merchant('default'), 'd', 100)).status).toBe(200);
    expect(cafe.faults.pending()).toBe(2);
    expect((await accrue(cafe, 'c', 100)).status).toBe(429);
    expect((await accrue(cafe, 'c', 100)).status).toBe(429);
    expect((await accrue(cafe, 'c', 100)).status).toBe(200);
  });

  it('exposes every merchant on the control API, beside the default merchant at the older paths', async () => {
    const listed = await control().get('/__sim/merchants');
    expect(listed.body.merchants.map((m: { id: string; companyId: number; appToken: string; apiKey: string }) => [m.id, m.companyId, m.appToken, m.apiKey])).toEqual([
      ['default', 1, 'sim-app-token', 'sim-api-key'],
      ['bakery-17', 2, 'tok-bakery', 'key-bakery'],
      ['cafe-9', 3, 'tok-cafe', 'key-cafe'],
    ]);

    const created = await control().post('/__sim/merchants').send({ id: 'deli-3', credentials: { currency: 'GBP' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'deli-3', companyId: 4, appToken: 'sim-app-token-deli-3', apiKey: 'sim-api-key-deli-3', revoked: false });
    expect((await control().get('/__sim/merchants/deli-3')).body).toEqual(created.body);
    const deli = await pos('accrue', { transactionId: 'd-1', email: 'x@deli.test', check: check(900) }, 'sim-app-token-deli-3');
    expect(deli.body.results[0]).toMatchObject({ isSuccess: true, companyId: 4, serialNumber: '41-100001-2' });
    expect((await control().get('/__sim/merchants/deli-3/books')).body).toEqual(sim.merchant('deli-3').books());
    expect((await control().get('/__sim/merchants/deli-3/books')).body.transactions['d-1']).toMatchObject({ accruals: 1, points: 9 });
    expect((await control().get('/__sim/books')).body.transactions).toEqual({});

    expect((await control().post('/__sim/merchants').send({ id: 'deli-3' })).status).toBe(409);
    const reused = await control().post('/__sim/merchants').send({ id: 'deli-4', appToken: 'key-bakery' });
    expect(reused.status).toBe(409);
    expect(reused.body.errors).toEqual([expect.stringContaining('appToken')]);
    expect((await control().post('/__sim/merchants').send({ id: 'Deli 4' })).status).toBe(400);
    expect((await control().get('/__sim/merchants/nope/books')).status).toBe(404);

    const fault = await control().post('/__sim/merchants/cafe-9/faults').send({ kind: 'server_error' });
    expect(fault).toMatchObject({ status: 201, body: { pending: 1, rateLimitAll: false } });
    expect((await control().get('/__sim/faults')).body).toEqual({ pending: 0, rateLimitAll: false });
    expect((await accrue(cafe, 'c-1', 100)).status).toBe(503);

    const customer = await control().post('/__sim/merchants/cafe-9/customers').send({ phone: '+15550009999' });
    expect(customer.status).toBe(201);
    expect(customer.body.cardIds).toEqual(['31-100001-2']);
    expect((await get('/api/v2/cards?customerPhone=%2B15550009999', cafe.apiKey)).body.meta.totalItems).toBe(1);
    expect((await get('/api/v2/cards?customerPhone=%2B15550009999', bakery.apiKey)).body.meta.totalItems).toBe(0);

    await accrue(bakery, 'b-1', 100);
    expect((await control().post('/__sim/merchants/cafe-9/reset')).status).toBe(200);
    expect((await control().get('/__sim/merchants/cafe-9/books')).body).toMatchObject({ accrueRequests: 0, cardBalances: {} });
    expect((await control().get('/__sim/merchants/bakery-17/books')).body.transactions['b-1']).toMatchObject({ accruals: 1 });
  });

  it('keeps the default merchant behind the single-merchant API: sim.faults, books(), addCustomer() and reset() act on it alone', async () => {
    const def = sim.merchant('default');
    expect(def).toMatchObject({ appToken: sim.appToken, apiKey: sim.apiKey, companyId: 1, templateIds: [1] });
    expect(def.faults).toBe(sim.faults);
    expect(sim.merchants().map((m) => m.id)).toEqual(['default', 'bakery-17', 'cafe-9']);

    // Per-merchant card numbering; the prefix (companyId, templateId) tells whose card it is.
    expect(sim.addCustomer({ phone: PHONE }).cardIds).toEqual(['11-100001-2']);
    expect(bakery.addCustomer({ phone: PHONE }).cardIds).toEqual(['21-100001-2']);

    await accrue(def, 'same', 100);
    await accrue(bakery, 'same', 100);
    sim.faults.inject({ kind: 'rate_limit' });
    bakery.faults.inject({ kind: 'rate_limit' });
    sim.reset();
    expect(sim.books()).toMatchObject({ accrueRequests: 0, transactions: {}, cardBalances: {} });
    expect(sim.faults.pending()).toBe(0);
    expect(bakery.books().transactions.same).toMatchObject({ accruals: 1 });
    expect(bakery.faults.pending()).toBe(1);
  });

  it('refuses merchants whose id, credentials, companyId or card serials would be ambiguous', () => {
    expect(() => sim.merchant('nope')).toThrow(RangeError);
    expect(() => sim.addMerchant({ id: 'bakery-17' })).toThrow(/already exists/);
    expect(() => sim.addMerchant({ id: 'Bad Id' })).toThrow(/merchant id/);
    expect(() => sim.addMerchant({ id: 'x1', appToken: 'key-cafe' })).toThrow(/appToken/);
    expect(() => sim.addMerchant({ id: 'x2', apiKey: 'sim-app-token' })).toThrow(/apiKey/);
    expect(() => sim.addMerchant({ id: 'x3', appToken: 'same', apiKey: 'same' })).toThrow(/differ/);
    expect(() => sim.addMerchant({ id: 'x4', companyId: 2 })).toThrow(/companyId 2/);
    sim.addMerchant({ id: 'x5', companyId: 4, templateIds: [12] });
    // 41 then template 2 would print the same "412" prefix as company 4, template 12.
    expect(() => sim.addMerchant({ id: 'x6', companyId: 41, templateIds: [2] })).toThrow(/412/);
    expect(sim.merchants().map((m) => m.id)).toEqual(['default', 'bakery-17', 'cafe-9', 'x5']);
  });
});
