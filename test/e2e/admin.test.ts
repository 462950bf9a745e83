/** The operator's API over HTTP: auth, listing, one record, reconcile, retry, reverse, resolve. */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness, postJson } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ withApiKey: false, overrides: { startWorker: false } });
});
afterEach(async () => {
  await h.close();
});

const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);
const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

describe('authentication', () => {
  it.each([
    ['no header', undefined],
    ['a wrong token', `Bearer ${ADMIN_TOKEN}x`],
    ['a wrong scheme', `Basic ${ADMIN_TOKEN}`],
    ['an empty bearer', 'Bearer '],
  ])('%s → 401, the same answer for each', async (_name, header) => {
    const req = request(h.bridge.url).get('/v1/admin/transactions');
    const res = await (header ? req.set('authorization', header) : req);
    expect(res.status).toBe(401);
    expect(res.body.error).toEqual({ code: 'unauthorized', message: 'missing or invalid credentials' });
  });

  it('covers every admin path, known or not', async () => {
    expect((await request(h.bridge.url).post('/v1/admin/reconcile')).status).toBe(401);
    expect((await request(h.bridge.url).get('/v1/admin/nothing-here')).status).toBe(401);
  });
});

describe('GET /v1/admin/transactions', () => {
  beforeEach(async () => {
    for (let i = 1; i <= 5; i++) await post('/v1/checkouts/generic', checkout({ orderId: `A-${i}` }));
    await post('/v1/checkouts/generic', checkout({ orderId: 'S-1', customer: {} }));
    h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout({ orderId: 'F-1' }));
  });

  it('pages newest first with the total', async () => {
    const page1 = await admin('get', '/v1/admin/transactions?limit=3');
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ total: 7, page: 1, limit: 3 });
    expect(page1.body.items.map((i: { orderId: string }) => i.orderId)).toEqual(['F-1', 'S-1', 'A-5']);
    const page3 = await admin('get', '/v1/admin/transactions?limit=3&page=3');
    expect(page3.body.items.map((i: { orderId: string }) => i.orderId)).toEqual(['A-1']);
    expect(page3.body.items[0]).toMatchObject({ transactionId: 'generic:A-1', status: 'accrued', pos: 'generic', check: { amount: 5997 }, results: [expect.objectContaining({ isSuccess: true })] });
  });

  it('filters by status, pos and time', async () => {
    const failed = await admin('get', '/v1/admin/transactions?status=failed');
    expect(failed.body.items.map((i: { orderId: string }) => i.orderId)).toEqual(['F-1']);
    expect(failed.body.items[0].errors).toEqual([expect.stringContaining('Card is blocked')]);
    expect((await admin('get', '/v1/admin/transactions?status=skipped')).body.total).toBe(1);
    expect((await admin('get', '/v1/admin/transactions?pos=square')).body.total).toBe(0);
    expect((await admin('get', '/v1/admin/transactions?from=2000-01-01T00:00:00Z&to=2000-12-31T00:00:00Z')).body.total).toBe(0);
    expect((await admin('get', `/v1/admin/transactions?from=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}`)).body.total).toBe(7);
  });

  it.each(['status=lost', 'page=0', 'limit=100000', 'from=yesterday', 'colour=red'])('rejects %s with 400 naming it', async (query) => {
    const res = await admin('get', `/v1/admin/transactions?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].field).toBe(query.split('=')[0] === 'colour' ? '' : query.split('=')[0]);
  });
});

describe('one record', () => {
  it('shows the full history of attempts', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', times: 2, on: 'accrue' });
    await post('/v1/checkouts/generic', checkout());
    const res = await admin('get', '/v1/admin/transactions/generic:A-1001');
    expect(res.status).toBe(200);
    // The customer's contact details masked, as they are unless unmask=true (test/e2e/operators.test.ts).
    expect(res.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'accrued', customer: { phone: '***', email: '***', firstName: 'Ann' }, masked: true });
    expect(res.body.attempts.map((a: { response: { status: number } }) => a.response.status)).toEqual([429, 429, 200]);
    expect(res.body.attempts[2].request).toMatchObject({ transactionId: 'generic:A-1001', check: { amount: 5997 } });
    expect(res.body.history.map((e: { to?: string }) => e.to).filter(Boolean)).toEqual(['pending', 'accrued']);
  });

  it("shows the customer's card serial by its end only, unless unmask=true: the bridge masks, the console shows what it is given", async () => {
    const { cardIds } = h.sim.addCustomer({ phone: '+15550007777' });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'CARD-1', customer: { cardSerial: cardIds[0]! } }))).body.status).toBe('accrued');
    const masked = await admin('get', '/v1/admin/transactions/generic:CARD-1');
    expect(masked.body.customer).toEqual({ serialNumber: `…${cardIds[0]!.slice(-4)}` });
    expect(JSON.stringify(masked.body.customer)).not.toContain(cardIds[0]!);
    expect((await admin('get', '/v1/admin/transactions/generic:CARD-1?unmask=true')).body.customer).toEqual({ serialNumber: cardIds[0] });
  });

  it('404 for an unknown id', async () => {
    expect((await admin('get', '/v1/admin/transactions/generic:none')).status).toBe(404);
  });
});

describe('operator actions', () => {
  it('reconcile runs not-yet-due work now and reports what it fixed and left open, and why', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
    await post('/v1/checkouts/generic', checkout({ orderId: 'P-1' }));
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout({ orderId: 'D-1', customer: { phone: '+15550002222' } }));
    const report = await admin('post', '/v1/admin/reconcile');
    expect(report.status).toBe(200);
    expect(report.body.examined).toBe(2);
    expect(report.body.complete).toBe(true);
    expect(report.body.fixed).toEqual([expect.objectContaining({ transactionId: 'generic:P-1', from: 'pending', to: 'accrued', why: expect.stringContaining('accrue succeeded') })]);
    expect(report.body.open).toEqual([expect.objectContaining({ transactionId: 'generic:D-1', status: 'in_doubt', why: expect.stringContaining('LOYALTY_API_KEY') })]);
  });

  it('reconcile says a pending accrual waits behind an unsettled one of the same customer and amount, and sends nothing for it', async () => {
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'D-1' }))).body.status).toBe('in_doubt');
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'W-1' }))).body.status).toBe('pending');
    const report = await admin('post', '/v1/admin/reconcile');
    expect(report.body.open).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ transactionId: 'generic:D-1', status: 'in_doubt' }),
        expect.objectContaining({ transactionId: 'generic:W-1', status: 'pending', why: expect.stringContaining('waits behind generic:D-1') }),
      ]),
    );
    expect(h.sim.books().accrueRequests).toBe(1);
    // The operator settles D-1; W-1 then goes out on the next pass.
    expect((await admin('post', '/v1/admin/transactions/generic:D-1/resolve').send({ outcome: 'accrued' })).status).toBe(200);
    const after = await admin('post', '/v1/admin/reconcile');
    expect(after.body.fixed).toEqual([expect.objectContaining({ transactionId: 'generic:W-1', to: 'accrued' })]);
    expect(h.sim.books().transactions['generic:W-1']).toMatchObject({ accruals: 1 });
  });

  it('reconcile stops starting records when its time budget is spent, says so, and the next call takes the rest', async () => {
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue', times: 3 });
    for (const id of ['D-1', 'D-2', 'D-3']) await post('/v1/checkouts/generic', checkout({ orderId: id }));
    const cut = await admin('post', '/v1/admin/reconcile?budgetMs=0');
    expect(cut.status).toBe(200);
    expect(cut.body).toMatchObject({ examined: 0, complete: false });
    const whole = await admin('post', '/v1/admin/reconcile');
    expect(whole.body).toMatchObject({ examined: 3, complete: true });
    for (const bad of ['-1', '20001', 'soon']) expect((await admin('post', `/v1/admin/reconcile?budgetMs=${bad}`)).status).toBe(400);
  });

  it('retry re-sends an accrual the loyalty service refused, and refuses what could double', async () => {
    h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout());
    const retried = await admin('post', '/v1/admin/transactions/generic:A-1001/retry');
    expect(retried.status).toBe(200);
    expect(retried.body.status).toBe('accrued');
    const again = await admin('post', '/v1/admin/transactions/generic:A-1001/retry');
    expect(again.status).toBe(409);
    expect(h.sim.books().transactions['generic:A-1001']!.accruals).toBe(1);
  });

  it('reverse reverses an accrued record once', async () => {
    await post('/v1/checkouts/generic', checkout());
    const res = await admin('post', '/v1/admin/transactions/generic:A-1001/reverse').send({ reason: 'customer complaint' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('reversed');
    const twice = await admin('post', '/v1/admin/transactions/generic:A-1001/reverse');
    expect(twice.body).toMatchObject({ status: 'reversed', repeat: true });
    expect(h.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
  });

  it('resolve not_accrued sends the accrual again, once', async () => {
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout());
    expect((await h.bridge.store.get('generic:A-1001'))!.status).toBe('in_doubt');
    const res = await admin('post', '/v1/admin/transactions/generic:A-1001/resolve').send({ outcome: 'not_accrued', note: 'checked the card: nothing there' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('accrued');
    expect(h.sim.books().transactions['generic:A-1001']!.accruals).toBe(1);
  });

  it('resolve validates its body and the state', async () => {
    await post('/v1/checkouts/generic', checkout());
    expect((await admin('post', '/v1/admin/transactions/generic:A-1001/resolve').send({ outcome: 'maybe' })).status).toBe(400);
    expect((await admin('post', '/v1/admin/transactions/generic:A-1001/resolve').send({ outcome: 'accrued' })).status).toBe(409);
  });

  it('resolve refuses an operation id another record already claimed', async () => {
    await post('/v1/checkouts/generic', checkout({ orderId: 'OK-1' }));
    const claimed = (await h.bridge.store.get('generic:OK-1'))!.accrual.operationIds[0]!;
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout());
    const res = await admin('post', '/v1/admin/transactions/generic:A-1001/resolve').send({ outcome: 'accrued', operationId: claimed });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toMatch(/already claimed by generic:OK-1/);
    await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'in_doubt');
  });
});
