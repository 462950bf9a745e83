/**
 * Partial refunds: the upstream's reverse is all-or-nothing, so the accrual is reversed whole and
 * the remainder accrued under a new linked transactionId; later refunds act on what remains.
 */
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
const order = () =>
  checkout({
    total: '50.00',
    items: [
      { id: 'latte', quantity: 2, unitPrice: '10.00', total: '20.00' },
      { id: 'cake', quantity: 3, unitPrice: '10.00', total: '30.00' },
    ],
  });

describe('partial refunds', () => {
  it('by items: reverses the accrual and accrues the remainder under a linked id', async () => {
    await post('/v1/checkouts/generic', order());
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', items: [{ id: 'cake', quantity: 1, total: '10.00' }] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'reversed', refundId: 'R-1', remainder: { transactionId: 'generic:A-1001~r1', status: 'accrued' } });
    const remainder = await h.bridge.store.get('generic:A-1001~r1');
    expect(remainder!.parentTransactionId).toBe('generic:A-1001');
    expect(remainder!.accrual.check).toMatchObject({
      amount: 4000,
      selections: [
        { id: 'latte', quantity: 2, price: 1000, totalPrice: 2000 },
        { id: 'cake', quantity: 2, price: 1000, totalPrice: 2000 },
      ],
    });
    const books = h.sim.books();
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions['generic:A-1001~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 4000 });
  });

  it('partial, partial, full: each acts on what remains, the full one reverses the last remainder', async () => {
    await post('/v1/checkouts/generic', order());
    expect((await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '5.00' })).body.remainder).toEqual({ transactionId: 'generic:A-1001~r1', status: 'accrued' });
    const second = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2', amount: 15 });
    expect(second.body).toMatchObject({ transactionId: 'generic:A-1001~r1', status: 'reversed', remainder: { transactionId: 'generic:A-1001~r2', status: 'accrued' } });
    expect((await h.bridge.store.get('generic:A-1001~r2'))!.accrual.check!.amount).toBe(3000);
    const full = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-3' });
    expect(full.body).toMatchObject({ transactionId: 'generic:A-1001~r2', status: 'reversed' });
    const books = h.sim.books();
    for (const id of ['generic:A-1001', 'generic:A-1001~r1', 'generic:A-1001~r2']) expect(books.transactions[id]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
  });

  it('a partial refund delivered twice changes nothing the second time', async () => {
    await post('/v1/checkouts/generic', order());
    const refund = { orderId: 'A-1001', refundId: 'R-1', amount: '5.00' };
    await post('/v1/refunds/generic', refund);
    const again = await post('/v1/refunds/generic', refund);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ repeat: true, transactionId: 'generic:A-1001', remainder: { transactionId: 'generic:A-1001~r1' } });
    expect(h.sim.books().reverseRequests).toBe(1);
    expect(h.sim.books().accrueRequests).toBe(2);
  });

  it('refunding more than remains is refused with 409 and changes nothing', async () => {
    await post('/v1/checkouts/generic', order());
    await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '45.00' });
    const before = await h.bridge.store.get('generic:A-1001~r1');
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2', amount: '5.01' });
    expect(res.status).toBe(409);
    // In the currency's major units, as the POS sent the amount; cents stay for programs.
    expect(res.body.error).toMatchObject({ code: 'refund_exceeds_remainder', message: 'refund of 5.01 USD is more than the 5.00 USD that remains of this order', remainingCents: 500, remaining: '5.00', refunded: '5.01', currency: 'USD' });
    const items = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-3', items: [{ id: 'tea', quantity: 1, total: '1.00' }] });
    expect(items.status).toBe(409);
    expect(await h.bridge.store.get('generic:A-1001~r1')).toEqual(before);
  });

  it('a partial refund of an order the ledger never saw is refused', async () => {
    const res = await post('/v1/refunds/generic', { orderId: 'NOPE', refundId: 'R-1', amount: '1.00' });
    expect(res.status).toBe(404);
    expect(await h.bridge.store.count()).toBe(0);
    expect(h.sim.books().reverseRequests).toBe(0);
  });

  it('a full refund while a partial one is still reversing cancels the remainder: nothing is accrued again', async () => {
    await post('/v1/checkouts/generic', order());
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'reverse' });
    const partial = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '10.00' });
    expect(partial.body.status).toBe('reversal_pending');
    const full = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2' });
    expect(full.body.transactionId).toBe('generic:A-1001');
    const settled = await eventually(() => h.bridge.store.get('generic:A-1001'), (r) => r?.status === 'reversed' && !r.reversal.partial);
    expect(settled!.remainderTransactionId).toBeUndefined();
    await h.bridge.worker.passes(2);
    expect(await h.bridge.store.get('generic:A-1001~r1')).toBeUndefined();
    expect(h.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(h.sim.books().accrueRequests).toBe(1);
  });

  it('a second partial refund while the first is still reversing joins it: one remainder for what both left', async () => {
    await post('/v1/checkouts/generic', order());
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'reverse' });
    await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '10.00' });
    const second = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2', amount: '15.00' });
    expect(second.status).toBe(202);
    expect(await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-3', amount: '25.01' })).toMatchObject({ status: 409 });
    const remainder = await eventually(() => h.bridge.store.get('generic:A-1001~r1'), (r) => r?.status === 'accrued');
    expect(remainder!.accrual.check!.amount).toBe(2500);
    expect((await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2', amount: '15.00' })).body.repeat).toBe(true);
    const books = h.sim.books();
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions['generic:A-1001~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 2500 });
  });

  it('a partial refund before the accrual settled waits, then reverses and re-accrues once', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
    expect((await post('/v1/checkouts/generic', order())).status).toBe(202);
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '10.00' });
    // Either it waits (202 reversal_pending) or the worker's next round settled everything within the answer budget.
    expect([res.status, res.body.status]).toEqual(res.status === 202 ? [202, 'reversal_pending'] : [200, 'reversed']);
    await eventually(() => h.bridge.store.get('generic:A-1001~r1'), (r) => r?.status === 'accrued');
    const books = h.sim.books();
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions['generic:A-1001~r1']).toMatchObject({ accruals: 1, amount: 4000 });
  });
});

describe('a partial refund whose reverse failed on one of two cards', () => {
  let two: Harness;
  beforeEach(async () => {
    // Two card templates: every customer holds two cards, so one reverse answers two results.
    two = await startHarness({ simulator: { templateIds: [1, 2] } });
  });
  afterEach(async () => {
    await two.close();
  });
  const send = (path: string, body: unknown) => postJson(two.bridge.url, path, body);
  const operator = (path: string, body: unknown) => request(two.bridge.url).post(path).set('authorization', `Bearer ${ADMIN_TOKEN}`).send(body as object);

  it('cannot be retried; once the operator finished the failed card, resolve reversed accrues the remainder once', async () => {
    expect((await send('/v1/checkouts/generic', order())).body).toMatchObject({ status: 'accrued' });
    two.sim.faults.inject({ kind: 'result_failure', on: 'reverse', message: 'Card is blocked' });
    const refund = await send('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', items: [{ id: 'cake', quantity: 1, total: '10.00' }] });
    expect(refund.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'reverse_failed' });
    expect(await two.bridge.store.get('generic:A-1001~r1')).toBeUndefined();

    // The second card was reversed: a retry would reverse it twice.
    expect((await operator('/v1/admin/transactions/generic:A-1001/retry', {})).status).toBe(409);
    expect((await operator('/v1/admin/transactions/generic:A-1001/resolve', { outcome: 'not_reversed' })).status).toBe(409);

    const resolved = await operator('/v1/admin/transactions/generic:A-1001/resolve', { outcome: 'reversed', note: 'reversed the blocked card by hand' });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ status: 'reversed', remainder: { transactionId: 'generic:A-1001~r1', status: 'accrued' } });
    const record = await two.bridge.store.get('generic:A-1001');
    expect(record!.history.at(-2)!.event).toContain('admin resolved: reversed: reversed the blocked card by hand');

    const books = two.sim.books();
    expect(books.transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions['generic:A-1001~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 4000 });
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
    // Settled: a second resolve finds nothing to settle.
    expect((await operator('/v1/admin/transactions/generic:A-1001/resolve', { outcome: 'reversed' })).status).toBe(409);
  });
});

describe('PARTIAL_REFUND_POLICY=full_only', () => {
  let f: Harness;
  afterEach(async () => {
    await f?.close();
  });

  it('records partial refunds without calling, and reverses once they cover the order', async () => {
    f = await startHarness({ env: { PARTIAL_REFUND_POLICY: 'full_only' } });
    const send = (path: string, body: unknown) => postJson(f.bridge.url, path, body);
    await send('/v1/checkouts/generic', order());
    const first = await send('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '20.00' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'accrued' });
    expect(f.sim.books().reverseRequests).toBe(0);
    expect((await send('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-2', amount: '30.01' })).status).toBe(409);
    const last = await send('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-3', amount: '30.00' });
    expect(last.body).toMatchObject({ status: 'reversed' });
    expect(f.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(f.sim.books().accrueRequests).toBe(1);
  });
});
