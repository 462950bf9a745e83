import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness, postJson } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.close();
});

const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

describe('checkout → accrue', () => {
  it('accrues the exact Check once and answers 200 accrued with the results', async () => {
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'accrued', repeat: false });
    expect(res.body.results).toHaveLength(1);
    expect(res.body.results[0]).toMatchObject({ isSuccess: true, checkAmount: 5997 });

    const books = h.sim.books();
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 0, amount: 5997 });
    const record = await h.bridge.store.get('generic:A-1001');
    expect(record!.accrual.check).toEqual({
      amount: 5997,
      currency: 'USD',
      externalTransactionId: 'A-1001',
      checkOpenedAt: '2026-11-21T10:00:00Z',
      checkClosedAt: '2026-11-21T10:20:00Z',
      taxAmount: 480,
      tipAmount: 500,
      selections: [{ id: 'sku-1', groupId: 'coffee', displayName: 'Latte', quantity: 3, price: 1999, totalPrice: 5997 }],
    });
    expect(record!.attempts).toHaveLength(1);
    expect(record!.attempts[0]).toMatchObject({ operation: 'accrue', response: { status: 200 } });
  });

  it('a repeated delivery answers the recorded outcome and calls nothing', async () => {
    await post('/v1/checkouts/generic', checkout());
    const again = await post('/v1/checkouts/generic', checkout());
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'accrued', repeat: true });
    expect(h.sim.books().accrueRequests).toBe(1);
  });

  it('the same order again with another amount (a reopened check) is not accrued again, and the record says so once', async () => {
    await post('/v1/checkouts/generic', checkout());
    const changed = checkout({ total: '79.96', items: [{ id: 'sku-1', groupId: 'coffee', name: 'Latte', quantity: 4, unitPrice: '19.99', total: '79.96' }] });
    for (let i = 0; i < 2; i++) {
      const again = await post('/v1/checkouts/generic', changed);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ status: 'accrued', repeat: true });
    }
    expect(h.sim.books()).toMatchObject({ accrueRequests: 1, doubleAccruals: [] });
    const record = await h.bridge.store.get('generic:A-1001');
    expect(record!.accrual.check!.amount).toBe(5997);
    const notes = record!.history.filter((e) => e.event.includes('delivered again with a check of 7996 cents (recorded with 5997 cents): not accrued again'));
    expect(notes).toHaveLength(1);
    const metrics = await request(h.bridge.url).get('/metrics');
    expect(metrics.text).toMatch(/bridge_checkouts_total\{pos="generic",result="repeat_changed",merchant="default"\} 2/);
  });

  it('an order re-posted with a new amount every time keeps a bounded record: counted, first and latest kept, one note', async () => {
    await post('/v1/checkouts/generic', checkout());
    const size = async () => JSON.stringify(await h.bridge.store.get('generic:A-1001')).length;
    const sizeBefore = await size();
    for (let i = 1; i <= 300; i++) {
      const again = await post('/v1/checkouts/generic', checkout({ total: `${60 + i}.00`, items: [] }));
      expect(again.body).toMatchObject({ status: 'accrued', repeat: true });
    }
    const record = (await h.bridge.store.get('generic:A-1001'))!;
    expect(record.changedRepeats).toEqual({
      count: 300,
      first: [6100, 6200, 6300].map((amountCents) => ({ at: expect.any(String), amountCents })),
      latest: [35800, 35900, 36000].map((amountCents) => ({ at: expect.any(String), amountCents })),
    });
    expect(record.history.filter((e) => e.event.includes('delivered again'))).toHaveLength(1);
    // 300 notes of ~150 bytes each grew it by ~45 kB before; now by the counter alone.
    expect((await size()) - sizeBefore).toBeLessThan(1024);
    expect(h.sim.books()).toMatchObject({ accrueRequests: 1, doubleAccruals: [] });
    const detail = await request(h.bridge.url).get('/v1/admin/transactions/generic:A-1001').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(detail.body.changedRepeats.count).toBe(300);
  });

  it('twenty concurrent deliveries of one order cause one accrue', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => post('/v1/checkouts/generic', checkout())));
    for (const a of answers) expect([200, 202]).toContain(a.status);
    expect(answers.filter((a) => a.body.repeat === false)).toHaveLength(1);
    await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'accrued');
    expect(h.sim.books().accrueRequests).toBe(1);
    expect(h.sim.books().doubleAccruals).toEqual([]);
  });

  it('a checkout without phone, email or card serial is recorded as skipped and calls nothing', async () => {
    const res = await post('/v1/checkouts/generic', checkout({ customer: { firstName: 'Ann' } }));
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('skipped');
    expect(h.sim.books().accrueRequests).toBe(0);
    const refund = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    expect(refund.status).toBe(200);
    expect(refund.body.status).toBe('skipped');
    expect(h.sim.books().reverseRequests).toBe(0);
  });
});

describe('refund → reverse', () => {
  it('reverses once however often the refund is delivered', async () => {
    await post('/v1/checkouts/generic', checkout());
    const answers = await Promise.all(Array.from({ length: 10 }, () => post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' })));
    for (const a of answers) expect(a.body.transactionId).toBe('generic:A-1001');
    await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'reversed');
    const again = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'reversed', repeat: true });
    const books = h.sim.books();
    expect(books.reverseRequests).toBe(1);
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.doubleReversals).toEqual([]);
  });

  it('a refund while the accrual is pending waits (reversal_pending) and is carried out once the accrual settles', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
    const first = await post('/v1/checkouts/generic', checkout());
    expect(first.status).toBe(202);
    expect(first.body.status).toBe('pending');
    const refund = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    expect(refund.status).toBe(202);
    expect(refund.body.status).toBe('reversal_pending');
    const settled = await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'reversed');
    expect(settled!.status).toBe('reversed');
    expect(h.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
  });

  it('a refund recorded while the accrue is still out keeps the accrue\'s outcome, then reverses once', async () => {
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 250 });
    // supertest sends when a request is awaited or then'd: start it now.
    const accruing = post('/v1/checkouts/generic', checkout()).then((r) => r);
    const marked = await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.inFlight !== undefined);
    expect(marked?.inFlight?.operation).toBe('accrue');
    const refund = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    expect(refund.body.transactionId).toBe('generic:A-1001');
    await accruing;
    const settled = await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'reversed');
    expect(settled!.accrual).toMatchObject({ state: 'accrued', settledBy: 'upstream' });
    expect(h.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(h.sim.books().accrueRequests).toBe(1);
  });

  it('a refund of an order the ledger never saw reverses by the derived id', async () => {
    // Accrued directly upstream (e.g. before the bridge's ledger existed).
    await request(h.simServer.url)
      .post('/api/v2/marketplace/accrue')
      .set('X-App-Token', h.sim.appToken)
      .send({ transactionId: 'generic:OLD-1', phone: '+15550002222', check: { amount: 1000, currency: 'USD', selections: [] } });
    const res = await post('/v1/refunds/generic', { orderId: 'OLD-1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'generic:OLD-1', status: 'reversed' });
    expect(h.sim.books().transactions['generic:OLD-1']).toMatchObject({ accruals: 1, reversals: 1 });
  });

  it('a refund of an order neither the ledger nor the loyalty service knows answers 404', async () => {
    const res = await post('/v1/refunds/generic', { orderId: 'NEVER-1', refundId: 'R-9' });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ transactionId: 'generic:NEVER-1', status: 'reverse_failed' });
    // Delivered late, the checkout of a refunded order must not accrue.
    const late = await post('/v1/checkouts/generic', checkout({ orderId: 'NEVER-1' }));
    expect(late.body.repeat).toBe(true);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});

describe('admin', () => {
  it('lists what happened', async () => {
    await post('/v1/checkouts/generic', checkout());
    const list = await request(h.bridge.url).get('/v1/admin/transactions?status=accrued').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 1, page: 1, limit: 50 });
  });
});
