/**
 * One merchant's trouble does not hold up another's, over HTTP against the simulator, on the file
 * ledger and on PostgreSQL. The loyalty service answers every call with merchant A's app token 429
 * (its rate-limit storm) while A has 2,000 pending records. Merchant B's checkouts still accrue
 * within the answer budget (200, accrued); B's records left pending by a short fault of its own are
 * delivered by the worker's next passes while A's thousands stay pending; the simulator's books, per
 * app token, show nothing of A's and exactly B's accruals. Then A's storm ends, one of its checkouts
 * goes through, and its backlog drains, each record accrued once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { parseGenericCheckout } from '../../adapters/generic/checkout.js';
import { newCheckout } from '../../src/core/transitions.js';
import { PER_MERCHANT } from '../../src/core/worker.js';
import { keyOf, ledgerKey, type LedgerRecord } from '../../src/state/record.js';
import type { SimMerchant } from '../../simulator/merchant.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: base, describeIf } = await describeWithDatabase();

/** A's backlog: forty of the worker's passes at its share of 50. */
const SEEDED = 2000;

function fairness(ledger: () => Promise<{ env: Record<string, string>; drop(): Promise<void> }>): void {
  let h: Harness;
  let drop: (() => Promise<void>) | undefined;
  let simA: SimMerchant;
  let simB: SimMerchant;
  const posTokens: Record<string, string> = {};
  const seededIds = Array.from({ length: SEEDED }, (_, i) => deriveTransactionId('generic', `SEED-${i}`));
  const bIds: string[] = [];

  const post = (merchantId: string, body: Record<string, unknown>) =>
    request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${posTokens[merchantId]}`).set('content-type', 'application/json').send(JSON.stringify(body));
  /**
   * Exact counts, page by page (a list's total stops counting at LIST_COUNT_CAP), of every status a
   * checkout passes through: a drain on a loaded machine can leave a record in doubt for a while
   * (its accrue timed out), which the verifier settles from the history.
   */
  const statuses = async (merchantId: string): Promise<Record<string, number>> => {
    const counts: Record<string, number> = {};
    for (const status of ['pending', 'in_doubt', 'accrued', 'failed'] as const) {
      counts[status] = 0;
      for (let page = await h.bridge.store.list({ merchantId, status, offset: 0, limit: 500 }); page.items.length > 0; ) {
        counts[status] += page.items.length;
        const last = page.items.at(-1)!;
        page = await h.bridge.store.list({ merchantId, status, after: { createdAt: last.createdAt, key: keyOf(last) }, offset: 0, limit: 500 });
      }
    }
    return counts;
  };

  beforeAll(async () => {
    const l = await ledger();
    drop = l.drop;
    h = await startHarness({ env: l.env, overrides: { secretsKey: randomBytes(32).toString('base64') } });
    simA = h.sim.addMerchant({ id: 'storm-a' });
    simB = h.sim.addMerchant({ id: 'calm-b' });
    for (const [id, sim] of [['m-a', simA], ['m-b', simB]] as const) {
      // With its API key, as a production merchant has: an accrue that times out on a loaded machine
      // is settled from the history (without it, it would wait for a person, and the drain never end).
      const created = await request(h.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id, loyalty: { appToken: sim.appToken, apiKey: sim.apiKey } });
      expect(created.status).toBe(201);
      posTokens[id] = created.body.posToken as string;
    }
    simA.faults.rateLimitAll = true;
    // A's backlog, recorded as its checkouts would be (the generic adapter's intent, the core's new
    // record), straight into the running bridge's ledger: each customer its own, so none waits behind another.
    const now = new Date();
    const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
    for (let i = 0; i < SEEDED; i += 100) {
      await Promise.all(
        seededIds.slice(i, i + 100).map((transactionId, j) => {
          const orderId = `SEED-${i + j}`;
          const intent = parseGenericCheckout(checkout({ orderId, customer: { phone: `+1555${2_000_000 + i + j}`, firstName: 'Sam' } }), context);
          return h.bridge.store.insert(newCheckout({ transactionId, merchantId: 'm-a', pos: 'generic', orderId }, intent, true, now));
        }),
      );
    }
    expect(await statuses('m-a')).toEqual({ pending: SEEDED, in_doubt: 0, accrued: 0, failed: 0 });
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await drop?.();
  });

  it("B's checkouts accrue within the answer budget and B's pending records are delivered by the next passes while A's thousands stay pending", async () => {
    // The worker met A's storm: A is held, and nothing of A's was booked.
    await eventually(() => h.bridge.core.delivery.isRateLimited('m-a'), (held) => held, 15_000);
    expect(simA.books().accrueRequests).toBeGreaterThan(0);

    // B's checkouts answer 200 accrued: delivered inline, within the budget (past it the answer is 202).
    for (let i = 1; i <= 5; i++) {
      const res = await post('m-b', checkout({ orderId: `B-${i}`, customer: { phone: `+1555300000${i}` } }));
      expect([res.status, res.body.status]).toEqual([200, 'accrued']);
      bIds.push(res.body.transactionId as string);
    }
    // A fault of B's own (every accrue a 5xx while it lasts, however the inline rounds and the
    // worker's passes share it out) leaves three of its checkouts pending; then it ends.
    simB.faults.inject({ kind: 'server_error', times: 1000, on: 'accrue' });
    for (let i = 1; i <= 3; i++) {
      const res = await post('m-b', checkout({ orderId: `B-LATE-${i}`, customer: { phone: `+1555400000${i}` } }));
      expect([res.status, res.body.status]).toEqual([202, 'pending']);
      bIds.push(res.body.transactionId as string);
    }
    simB.faults.clear();
    const late = bIds.slice(5).map((id) => ledgerKey('m-b', id));
    const delivered = await eventually(() => Promise.all(late.map((key) => h.bridge.store.get(key))), (rs) => rs.every((r) => r?.status === 'accrued'), 15_000);
    expect(delivered.map((r) => r!.history.map((e) => e.event))).toEqual(late.map(() => expect.arrayContaining([expect.stringMatching(/^accrue succeeded/)])));

    // A stays held: over the next 20 passes the worker tries A's records only when A's pause ends, a
    // lane's worth at a time, where a pass without the hold would spend a round (5 requests) on each
    // of PER_MERCHANT more of them.
    const before = simA.books().accrueRequests;
    await h.bridge.worker.passes(20);
    expect(simA.books().accrueRequests - before).toBeLessThan(PER_MERCHANT * 5);

    // Meanwhile A's thousands stayed undelivered, and the worker spent far fewer than one round each
    // on them. On a loaded machine a 429's retry can time out, which leaves that record in doubt
    // until the history says nothing was booked: undelivered either way, never accrued.
    const a = await statuses('m-a');
    expect({ undelivered: a.pending! + a.in_doubt!, accrued: a.accrued, failed: a.failed }).toEqual({ undelivered: SEEDED, accrued: 0, failed: 0 });
    expect(Object.values(simA.books().transactions).filter((t) => t.accruals > 0)).toEqual([]);
    expect(await statuses('m-b')).toEqual({ pending: 0, in_doubt: 0, accrued: 8, failed: 0 });
    expect(h.bridge.core.delivery.isRateLimited('m-b')).toBe(false);
    const booksA = simA.books();
    expect(booksA.transactions).toEqual({});
    expect(booksA.accrueRequests).toBeLessThan(SEEDED);
    const booksB = simB.books();
    expect(Object.keys(booksB.transactions).sort()).toEqual([...bIds].sort());
    expect(Object.values(booksB.transactions).map((t) => t.accruals)).toEqual(bIds.map(() => 1));
    expect(booksB.doubleAccruals).toEqual([]);
    // The default merchant's books saw nothing of either.
    expect(h.sim.books().accrueRequests).toBe(0);
  });

  it("once A's storm ends, one of its checkouts goes through, the hold is lifted and A's backlog drains, each accrued once", async () => {
    simA.faults.rateLimitAll = false;
    const res = await post('m-a', checkout({ orderId: 'A-AFTER', customer: { phone: '+15555000001' } }));
    expect([res.status, res.body.status]).toEqual([200, 'accrued']);
    expect(h.bridge.core.delivery.isRateLimited('m-a')).toBe(false);
    // Drained means nothing left to deliver and nothing left in doubt: a record whose accrue timed
    // out on a loaded machine is settled from the history, not counted early.
    const drained = await eventually(() => statuses('m-a'), (s) => s.pending === 0 && s.in_doubt === 0, 120_000);
    expect(drained).toEqual({ pending: 0, in_doubt: 0, accrued: SEEDED + 1, failed: 0 });
    const booksA = simA.books();
    expect(Object.keys(booksA.transactions).sort()).toEqual([...seededIds, res.body.transactionId as string].sort());
    expect(Object.values(booksA.transactions).every((t) => t.accruals === 1)).toBe(true);
    expect(booksA.doubleAccruals).toEqual([]);
    // B's books are as they were.
    expect(Object.keys(simB.books().transactions).sort()).toEqual([...bIds].sort());
    const sample = (await h.bridge.store.get(ledgerKey('m-a', seededIds[0]!))) as LedgerRecord;
    expect(sample.accrual.state).toBe('accrued');
  }, 150_000);
}

describe('file ledger', () => {
  fairness(async () => ({ env: {}, drop: async () => undefined }));
});

describeIf('PostgreSQL ledger', () => {
  fairness(async () => {
    const schema = await freshSchema(base!, 'fairness');
    return { env: { LEDGER_URL: schema.url }, drop: () => schema.drop() };
  });
});
