/**
 * Two accruals of one customer and one amount, a moment apart: the ordinary case in a coffee shop.
 * The operations history names no transactionId, so two such accruals both unsettled could match
 * the same operation. The bridge never sends the second while the first is unsettled, and its
 * history verifier claims an operation only when no other unsettled accrual could have made it.
 * Over HTTP, against the simulator's books: each transactionId booked exactly once, and every
 * record that says accrued booked under its own id (its claimed operations are its own).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { LedgerRecord } from '../../src/state/record.js';
import { ADMIN_TOKEN, checkout, eventually, postJson, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const record = (id: string) => h.bridge.store.get(id) as Promise<LedgerRecord>;

/** Every record that says accrued is booked once under its own id, with the operations it claims. */
async function expectBooksAgree(ids: string[]) {
  const books = h.sim.books();
  expect(books.doubleAccruals).toEqual([]);
  for (const id of ids) {
    const r = await record(id);
    expect([id, r.status]).toEqual([id, 'accrued']);
    expect([id, books.transactions[id]?.accruals]).toEqual([id, 1]);
    for (const op of r.accrual.operationIds) expect(books.transactions[id]!.operationIds).toContain(op);
  }
}

describe('the same customer buys the same thing twice, a few seconds apart', () => {
  it('the first accrue is reset before commit, then answered late: the second waits, and each is booked once under its own id', async () => {
    h = await startHarness({ env: { IN_DOUBT_GRACE_MS: '300' } });
    const phone = '+15550003333';
    // In request order: the first accrue is cut before the loyalty service commits it; the next one
    // (whichever it is) commits but answers after the bridge's 400 ms timeout.
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 800 });
    const first = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'C-1', total: '59.97', customer: { phone } }));
    expect(first.body.status).toBe('in_doubt');
    const second = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'C-2', total: '59.97', customer: { phone } }));
    expect(second.status).toBe(202);
    expect(second.body.status).toBe('pending');
    expect((await record('generic:C-2')).history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^waits behind generic:C-1: an accrual of the same customer and amount is unsettled/));
    // Nothing of C-2's was booked while C-1 is unsettled. (Counting requests would race the worker:
    // on a slow machine it may already have resent C-1, its grace period being past.)
    expect(h.sim.books().transactions['generic:C-2']).toBeUndefined();
    expect((await record('generic:C-1')).status).not.toBe('accrued');

    const settled = await eventually(
      async () => [await record('generic:C-1'), await record('generic:C-2')],
      (rs) => rs.every((r) => r.status === 'accrued'),
      10_000,
    );
    expect(settled.map((r) => r.status)).toEqual(['accrued', 'accrued']);
    await expectBooksAgree(['generic:C-1', 'generic:C-2']);
    // C-1 was sent again only after the history proved its first call never arrived.
    expect((await record('generic:C-1')).history.map((e) => e.event)).toContainEqual(expect.stringMatching(/no matching operation after the grace period: safe to accrue again/));
  });

  it('other customers and other amounts are not held up', async () => {
    h = await startHarness({ withApiKey: false, overrides: { startWorker: false } });
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-1', customer: { phone: '+15550003333' } }))).body.status).toBe('in_doubt');
    const otherAmount = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-2', total: '4.50', customer: { phone: '+15550003333' } }));
    const otherCustomer = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-3', customer: { phone: '+15550004444' } }));
    expect([otherAmount.body.status, otherCustomer.body.status]).toEqual(['accrued', 'accrued']);
  });
});

describe('one person known by a phone on one order and an email on the other', () => {
  it('an operation either could have made is claimed by neither and neither is resent; once an operator settles one, the other settles itself', async () => {
    h = await startHarness({ env: { IN_DOUBT_GRACE_MS: '300' }, overrides: { startWorker: false } });
    // The customer is known to the loyalty service by both.
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'K-0', total: '1.00', customer: { phone: '+15550005555', email: 'kim@example.test' } }));
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 800 });
    // Different identifiers: the bridge cannot know they are one person, so both go out.
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'K-1', customer: { phone: '+15550005555' } }))).body.status).toBe('in_doubt');
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'K-2', customer: { email: 'kim@example.test' } }))).body.status).toBe('in_doubt');
    const sent = h.sim.books().accrueRequests;
    // One operation in the history (K-2's), and two unsettled records that could each own it.
    const report = await admin('post', '/v1/admin/reconcile');
    expect(report.body.open).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ transactionId: 'generic:K-1', status: 'in_doubt', why: expect.stringContaining('ambiguous with generic:K-2') }),
        expect.objectContaining({ transactionId: 'generic:K-2', status: 'in_doubt', why: expect.stringContaining('ambiguous with generic:K-1') }),
      ]),
    );
    expect(h.sim.books().accrueRequests).toBe(sent);
    expect((await record('generic:K-1')).accrual.operationIds).toEqual([]);
    expect((await record('generic:K-2')).accrual.operationIds).toEqual([]);
    expect((await record('generic:K-1')).history.filter((e) => e.event.startsWith('ambiguous with'))).toHaveLength(1);

    // The operator reads the loyalty service's books: K-2's call arrived, with this operation.
    const operationId = h.sim.books().transactions['generic:K-2']!.operationIds[0]!;
    expect((await admin('post', '/v1/admin/transactions/generic:K-2/resolve').send({ outcome: 'accrued', operationId })).body.status).toBe('accrued');
    // K-1 now finds nothing of its own, so once its grace period is over it is sent again, once.
    const after = await eventually(
      () => admin('post', '/v1/admin/reconcile'),
      (res) => res.body.fixed.length > 0,
      5000,
    );
    expect(after.body.fixed).toEqual([expect.objectContaining({ transactionId: 'generic:K-1', to: 'accrued' })]);
    await expectBooksAgree(['generic:K-0', 'generic:K-1', 'generic:K-2']);
  });
});

describe('a person settles an accrual in doubt as the console does: the outcome, no operation named', () => {
  it("the resolve claims the one operation the history shows for it, so a later accrual of the customer and amount whose call never arrived does not take it (found by the model check)", async () => {
    h = await startHarness({ env: { IN_DOUBT_GRACE_MS: '300' }, overrides: { startWorker: false } });
    const phone = '+15550006666';
    // O1 is booked, but its answer is lost: in doubt.
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'P-1', customer: { phone } }))).body.status).toBe('in_doubt');
    const booked = h.sim.books().transactions['generic:P-1']!.operationIds;
    expect(booked).toHaveLength(1);
    // A person resolves it from the console: the outcome and a reason, nothing else.
    const resolved = await admin('post', '/v1/admin/transactions/generic:P-1/resolve').send({ outcome: 'accrued', reason: 'the card shows it' });
    expect(resolved.body.status).toBe('accrued');
    expect((await record('generic:P-1')).accrual.operationIds).toEqual(booked);
    expect((await record('generic:P-1')).history.at(-1)!.event).toMatch(new RegExp(`resolved: accrued: .*operation ${booked[0]}, the only one the history shows for it, claimed`));

    // O2 of the same customer and amount: its call is cut before the service commits it.
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'P-2', customer: { phone } }))).body.status).toBe('in_doubt');
    // The history shows only O1's operation, claimed: O2 did not happen, and once the grace period
    // is over it is sent again and booked under its own id.
    const after = await eventually(
      () => admin('post', '/v1/admin/reconcile'),
      (res) => res.body.fixed.some((f: { transactionId: string; to: string }) => f.transactionId === 'generic:P-2' && f.to === 'accrued'),
      5000,
    );
    expect(after.body.open).toEqual([]);
    await expectBooksAgree(['generic:P-1', 'generic:P-2']);
    expect((await record('generic:P-2')).accrual.operationIds).not.toContain(booked[0]);
  });
});
