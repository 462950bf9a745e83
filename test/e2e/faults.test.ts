/**
 * One test per upstream fault kind, through the bridge over HTTP against the simulator over HTTP.
 * Each asserts the final ledger status and the simulator's books: never a double accrual or reversal.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import type { LedgerRecord, LedgerStatus } from '../../src/state/record.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness, type HarnessOptions, postJson } from '../support/harness.js';

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const TX = 'generic:A-1001';
const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);
const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const record = () => h.bridge.store.get(TX) as Promise<LedgerRecord>;
const settle = (status: LedgerStatus, timeoutMs = 5000) => eventually(record, (r) => r?.status === status, timeoutMs);

function expectCleanBooks(accruals: number, reversals = 0) {
  const books = h.sim.books();
  expect(books.doubleAccruals).toEqual([]);
  expect(books.doubleReversals).toEqual([]);
  expect(books.transactions[TX]?.accruals ?? 0).toBe(accruals);
  expect(books.transactions[TX]?.reversals ?? 0).toBe(reversals);
}

async function start(options?: HarnessOptions) {
  h = await startHarness(options);
}

describe('429 with an HTML body and no Retry-After', () => {
  it('retried within the round (1, 2, 4, 8 units): three 429s then success is accrued, 4 requests', async () => {
    await start();
    h.sim.faults.inject({ kind: 'rate_limit', times: 3, on: 'accrue' });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('accrued');
    const r = await record();
    expect(r.attempts.map((a) => a.response?.status)).toEqual([429, 429, 429, 200]);
    expect(typeof r.attempts[0]!.response!.body).toBe('string');
    expectCleanBooks(1);
  });

  it('five 429s end the round at 5 requests: pending (202), then the worker accrues it once', async () => {
    await start();
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('pending');
    expect((await record()).attempts).toHaveLength(5);
    await settle('accrued');
    expect(h.sim.books().accrueRequests).toBe(6);
    expectCleanBooks(1);
  });
});

describe('a record retried for a long time', () => {
  it('keeps its first and latest attempts and counts the rest, so each rewrite stays small', async () => {
    await start({ env: { WORKER_INTERVAL_MS: '3600000' } });
    h.sim.faults.inject({ kind: 'rate_limit', times: 1000, on: 'accrue' });
    expect((await post('/v1/checkouts/generic', checkout())).body.status).toBe('pending');
    // Each operator reconcile runs one more round of 5 requests, all answered 429.
    for (let round = 2; round <= 14; round++) expect((await admin('post', '/v1/admin/reconcile')).status).toBe(200);
    const r = await record();
    expect(r.status).toBe('pending');
    expect(h.sim.books().accrueRequests).toBe(70);
    expect(r.attempts).toHaveLength(50);
    expect(r.attemptsOmitted).toBe(20);
    expect(r.attempts.every((a) => a.response?.status === 429)).toBe(true);
    // Then it goes through: the latest attempt is the one that succeeded.
    h.sim.faults.clear();
    expect((await admin('post', '/v1/admin/reconcile')).status).toBe(200);
    const done = await record();
    expect(done.status).toBe('accrued');
    expect(done.attempts.at(-1)!.response!.status).toBe(200);
    expect(done.attemptsOmitted).toBe(21);
    expectCleanBooks(1);
  });
});

describe('5xx', () => {
  it('at most 3 requests in a round; the next round succeeds once', async () => {
    await start();
    h.sim.faults.inject({ kind: 'server_error', times: 3, on: 'accrue', status: 503 });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(202);
    expect((await record()).attempts.map((a) => a.response?.status)).toEqual([503, 503, 503]);
    await settle('accrued');
    expectCleanBooks(1);
  });
});

describe('slow answer after committing (timeout)', () => {
  it('becomes in_doubt, is never resent, and the operations history proves it accrued', async () => {
    await start();
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 1500 });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(202);
    expect(['in_doubt', 'accrued']).toContain(res.body.status);
    const r = await settle('accrued');
    expect(r.accrual.settledBy).toBe('history');
    expect(r.accrual.operationIds).toHaveLength(1);
    expect(h.sim.books().accrueRequests).toBe(1);
    expectCleanBooks(1);
  });

  it('answers the POS within 2 s while the upstream is slow, and finishes in the background', async () => {
    // A budget well under the 2 s the POS allows, so the bound below holds on a loaded machine too.
    await start({ env: { LOYALTY_TIMEOUT_MS: '5000', ANSWER_BUDGET_MS: '500' } });
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 2500 });
    const began = Date.now();
    const res = await post('/v1/checkouts/generic', checkout());
    expect(Date.now() - began).toBeLessThan(2000);
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('pending');
    const r = await settle('accrued');
    expect(r.accrual.settledBy).toBe('upstream');
    expectCleanBooks(1);
  });
});

describe('connection dropped', () => {
  it('before committing: in_doubt, the history shows nothing after the grace period, so it is accrued once', async () => {
    await start();
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(202);
    const r = await settle('accrued');
    expect(r.history.map((e) => e.event).join('\n')).toMatch(/no matching operation after the grace period/);
    expect(h.sim.books().accrueRequests).toBe(2);
    expectCleanBooks(1);
  });

  it('after committing: in_doubt, then matched to the operation it made: accrued, never resent', async () => {
    await start();
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(202);
    const r = await settle('accrued');
    expect(r.accrual.settledBy).toBe('history');
    expect(h.sim.books().accrueRequests).toBe(1);
    expectCleanBooks(1);
  });

  it('after committing to a card found by email (the phone unknown upstream): the history of that card proves it', async () => {
    await start();
    h.sim.addCustomer({ email: 'known@shop.test' });
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout({ customer: { phone: '+15557770000', email: 'known@shop.test' } }));
    const r = await settle('accrued');
    expect(r.accrual.settledBy).toBe('history');
    // Two full passes of the worker later, nothing more was sent.
    await h.bridge.worker.passes(2);
    expect(h.sim.books().accrueRequests).toBe(1);
    expectCleanBooks(1);
  });

  it('without LOYALTY_API_KEY the record waits for an operator; /resolve settles it', async () => {
    await start({ withApiKey: false });
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    await post('/v1/checkouts/generic', checkout());
    expect((await record()).status).toBe('in_doubt');
    const report = await admin('post', '/v1/admin/reconcile');
    expect(report.status).toBe(200);
    expect(report.body.open).toEqual([expect.objectContaining({ transactionId: TX, status: 'in_doubt', why: expect.stringMatching(/LOYALTY_API_KEY/) })]);
    const retry = await admin('post', `/v1/admin/transactions/${TX}/retry`);
    expect(retry.status).toBe(409);
    const resolved = await admin('post', `/v1/admin/transactions/${TX}/resolve`).send({ outcome: 'accrued', note: 'seen on the card' });
    expect(resolved.status).toBe(200);
    expect(resolved.body.status).toBe('accrued');
    expect((await record()).accrual.settledBy).toBe('operator');
    expect(h.sim.books().accrueRequests).toBe(1);
    expectCleanBooks(1);
  });
});

describe('per-result failures in a 200', () => {
  it('a failed result is inspected: failed, with the errorMessage kept, and not retried', async () => {
    await start();
    h.sim.faults.inject({ kind: 'result_failure', on: 'accrue', message: 'Card is blocked' });
    const res = await post('/v1/checkouts/generic', checkout());
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('failed');
    expect(res.body.errors).toEqual([expect.stringContaining('Card is blocked')]);
    await h.bridge.worker.passes(2);
    expect(h.sim.books().accrueRequests).toBe(1);
    expectCleanBooks(0);
  });
});

describe('reverse under faults', () => {
  it('429s past the round leave reversal_pending; the worker reverses once', async () => {
    await start();
    await post('/v1/checkouts/generic', checkout());
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'reverse' });
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('reversal_pending');
    await settle('reversed');
    expectCleanBooks(1, 1);
  });

  it('a reverse whose connection drops after committing is in doubt and is never sent again', async () => {
    await start();
    await post('/v1/checkouts/generic', checkout());
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('in_doubt');
    const report = await admin('post', '/v1/admin/reconcile');
    // No reversal of this merchant was confirmed yet: how its history shows one is not known, so a person decides.
    expect(report.body.open).toEqual([expect.objectContaining({ transactionId: TX, why: expect.stringMatching(/no reversal of this merchant has been confirmed by the loyalty service yet/) })]);
    await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
    const resolved = await admin('post', `/v1/admin/transactions/${TX}/resolve`).send({ outcome: 'reversed' });
    expect(resolved.body.status).toBe('reversed');
    expect(h.sim.books().reverseRequests).toBe(1);
    expectCleanBooks(1, 1);
  });
});

describe('restart', () => {
  it('a record left mid-call by a crash becomes in_doubt at start-up and is settled from the history', async () => {
    await start();
    await post('/v1/checkouts/generic', checkout({ orderId: 'WARM-UP' }));
    await h.bridge.close();
    // What a crash during the call leaves behind: the intent and the in-flight marker in the
    // ledger, the accrue committed upstream, and no outcome recorded.
    const startedAt = new Date().toISOString();
    const sent = await request(h.simServer.url)
      .post('/api/v2/marketplace/accrue')
      .set('X-App-Token', h.sim.appToken)
      .send({ transactionId: TX, phone: '+15550001111', check: { amount: 5997, currency: 'USD', selections: [] } });
    expect(sent.status).toBe(200);
    const store = new FileLedgerStore(h.config.ledgerUrl.slice('file:'.length));
    await store.init();
    await store.insert({
      transactionId: TX, version: 1, pos: 'generic', orderId: 'A-1001', status: 'pending', createdAt: startedAt, updatedAt: startedAt,
      accrual: { state: 'pending', check: { amount: 5997, currency: 'USD', selections: [] }, customer: { phone: '+15550001111' }, results: [], errors: [], operationIds: [] },
      reversal: { state: 'none', refundIds: [], results: [], errors: [] },
      inFlight: { operation: 'accrue', startedAt, owner: 'crashed-instance' },
      rounds: 0, attempts: [], history: [],
    });
    await store.close();

    await h.restart();
    const settled = await settle('accrued');
    expect(settled.inFlight).toBeUndefined();
    expect(settled.accrual.settledBy).toBe('history');
    expect(settled.history.map((e) => e.event).join('\n')).toMatch(/found mid-accrue left by bridge crashed- \(restarted or gone\)/);
    expect(settled.history.some((e) => e.to === 'in_doubt')).toBe(true);
    expect(h.sim.books().accrueRequests).toBe(2);
    expectCleanBooks(1);
  });
});
