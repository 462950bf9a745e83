/**
 * The worker shared between merchants, without disk or network: the in-memory store, one scripted
 * loyalty service per merchant, a clock the test moves. One merchant's due work takes its share of a
 * pass and of the lanes; a merchant the loyalty service rate-limits is held for a pause; the pause
 * grows while storms follow one another and ends when one of its calls is answered.
 */
import { describe, expect, it } from '@jest/globals';
import { createCore, type Core } from '../../src/core/core.js';
import { HistoryVerifier } from '../../src/core/history-verifier.js';
import { RateLimitPauses } from '../../src/core/rate-limits.js';
import { PER_MERCHANT, Worker } from '../../src/core/worker.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { CallReport } from '../../src/loyalty/client.js';
import { createMetrics } from '../../src/core/metrics.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';
import { ScriptedLoyalty } from '../support/scripted-loyalty.js';

const RETRY_BASE_MS = 1000;

const succeeded = (operationId: number): CallReport => ({
  outcome: { kind: 'succeeded', results: [{ isSuccess: true, errorMessage: null, serialNumber: '11-1', checkAmount: 5997, accruedValue: 59, operationId, createdAt: new Date().toISOString(), reversedAt: null }] },
  attempts: [],
});
/** A round whose five requests all met the front proxy's 429 page. */
const stormed: CallReport = {
  outcome: { kind: 'retryable', reason: 'HTTP 429, retries of this round spent' },
  attempts: Array.from({ length: 5 }, () => ({ operation: 'accrue' as const, startedAt: minutes(0), finishedAt: minutes(0), request: {}, response: { status: 429, body: '<html>429 Too Many Requests</html>' } })),
};
const serverError: CallReport = {
  outcome: { kind: 'retryable', reason: 'HTTP 503, retries of this round spent' },
  attempts: [{ operation: 'accrue', startedAt: minutes(0), finishedAt: minutes(0), request: {}, response: { status: 503, body: {} } }],
};

function bridge(upstreams: Record<string, ScriptedLoyalty>, concurrency = 4): { core: Core; store: MemoryLedgerStore; worker: Worker; clock: { ms: number } } {
  const store = new MemoryLedgerStore();
  const clock = { ms: Date.parse(minutes(24 * 60)) };
  const noHistory = { canVerify: false, findCards: async () => [], listOperations: async () => [] };
  const verifier = new HistoryVerifier(noHistory, store, { graceMs: 0, clockSkewMs: 0 });
  const options = { answerBudgetMs: 1000, retryBaseMs: RETRY_BASE_MS, inDoubtVerifyAfterMs: 100, partialRefundPolicy: 'reaccrue' as const, inFlightLeaseMs: 60_000 };
  const directory = { upstreamOf: async (id: string) => upstreams[id] && { calls: upstreams[id], verifier, suspended: false, ambiguity: 'person' as const }, canVerifyAny: async () => false };
  const core = createCore({ store, upstreams: directory, options, logger: silentLogger, metrics: createMetrics(undefined, false), clock: () => new Date(clock.ms) });
  const worker = new Worker(store, core.delivery, { intervalMs: 60_000, concurrency, leaseMs: 60_000, idleMs: 0 }, silentLogger);
  return { core, store, worker, clock };
}

/** `count` pending records of `merchantId` (orders `<name>-<n>`), due since `at` minutes after the contract suite's T0, a minute apart. */
async function seed(store: MemoryLedgerStore, merchantId: string, count: number, at = 0, name = merchantId): Promise<LedgerRecord[]> {
  const records = Array.from({ length: count }, (_, i) => ({ ...makeRecord(`generic:${name}-${i}`, { at: at + i }), merchantId }));
  for (const r of records) await store.insert(r);
  return records;
}

const examinedOf = (report: { fixed: { merchantId: string }[]; open: { merchantId: string }[] }, merchantId: string) => [...report.fixed, ...report.open].filter((r) => r.merchantId === merchantId).length;

describe('a pass shared between merchants', () => {
  it(`takes at most ${PER_MERCHANT} records of one merchant, the others' all, and the next pass the next ${PER_MERCHANT}`, async () => {
    const up = { 'm-a': new ScriptedLoyalty(succeeded), 'm-b': new ScriptedLoyalty(succeeded) };
    const { store, worker } = bridge(up);
    await seed(store, 'm-a', 120);
    await seed(store, 'm-b', 3, 500);
    const first = await worker.reconcile(false);
    expect([examinedOf(first, 'm-a'), examinedOf(first, 'm-b')]).toEqual([PER_MERCHANT, 3]);
    // Earliest due first within the merchant: the first 50 of A's went.
    expect(up['m-a'].calls.map((c) => c.transactionId).sort()).toEqual(Array.from({ length: PER_MERCHANT }, (_, i) => `generic:m-a-${i}`).sort());
    const second = await worker.reconcile(false);
    expect([examinedOf(second, 'm-a'), examinedOf(second, 'm-b')]).toEqual([PER_MERCHANT, 0]);
    expect(await store.countOpen()).toBe(120 - 2 * PER_MERCHANT);
  });

  it("gives one merchant's calls at most half the lanes while another merchant's records wait", async () => {
    const up = { 'm-a': new ScriptedLoyalty(), 'm-b': new ScriptedLoyalty() };
    const [a, b] = [up['m-a'], up['m-b']];
    const { store, worker } = bridge(up, 4);
    await seed(store, 'm-a', 10);
    await seed(store, 'm-b', 6, 1);
    const pass = worker.reconcile(false);
    await a.made(2);
    await b.made(2);
    expect([a.out, b.out]).toEqual([2, 2]);
    // A's calls stay unanswered; each lane B frees goes to B's next record, never to a third of A's.
    for (const made of [4, 6]) {
      b.calls[made - 4]!.answer(succeeded(made - 3));
      b.calls[made - 3]!.answer(succeeded(made - 2));
      await b.made(made);
      expect([a.out, b.out]).toEqual([2, 2]);
    }
    // Once nobody else waits, A's records take every lane.
    b.calls[4]!.answer(succeeded(5));
    b.calls[5]!.answer(succeeded(6));
    await a.made(4);
    expect([a.out, b.out]).toEqual([4, 0]);
    for (let i = 0; i < 10; i++) {
      await a.made(i + 1);
      a.calls[i]!.answer(succeeded(i + 1));
    }
    const report = await pass;
    expect([examinedOf(report, 'm-a'), examinedOf(report, 'm-b'), a.mostOut]).toEqual([10, 6, 4]);
    expect(await store.countOpen()).toBe(0);
  });
});

describe('a merchant the loyalty service rate-limits', () => {
  it("is held for the pause after a round of 429s: the rest of its pass is dropped, later passes leave it out, other merchants' work goes on", async () => {
    const storm = new ScriptedLoyalty();
    const up = { 'm-a': storm, 'm-b': new ScriptedLoyalty(succeeded) };
    const { core, store, worker, clock } = bridge(up, 1);
    await seed(store, 'm-a', 30);
    await seed(store, 'm-b', 4, 1);
    const pass = worker.reconcile(false);
    await storm.made(1);
    storm.calls[0]!.answer(stormed);
    const first = await pass;
    // One round was spent on A; its other 29 records were not sent, and stay as they were; B's four went.
    expect(storm.calls).toHaveLength(1);
    expect([examinedOf(first, 'm-a'), examinedOf(first, 'm-b')]).toEqual([1, 4]);
    expect((await store.get('m-a/generic:m-a-1'))!.version).toBe(1);
    expect(core.delivery.isRateLimited('m-a')).toBe(true);

    // New work of B's goes on in the next passes; A's is not even listed.
    await seed(store, 'm-b', 2, 100, 'later');
    expect((await core.delivery.dueQuery(500, PER_MERCHANT, { owner: 'x', leaseMs: 1 })).skipMerchants).toEqual(['m-a']);
    const second = await worker.reconcile(false);
    expect([examinedOf(second, 'm-a'), examinedOf(second, 'm-b')]).toEqual([0, 2]);
    expect(storm.calls).toHaveLength(1);

    // The pause is the first round's (30 units). When it ends A's records go again, and another storm holds them twice as long.
    clock.ms += 30 * RETRY_BASE_MS;
    expect(core.delivery.isRateLimited('m-a')).toBe(false);
    const third = worker.reconcile(false);
    await storm.made(2);
    storm.calls[1]!.answer(stormed);
    expect(examinedOf(await third, 'm-a')).toBe(1);
    clock.ms += 30 * RETRY_BASE_MS;
    expect(core.delivery.isRateLimited('m-a')).toBe(true);
    clock.ms += 30 * RETRY_BASE_MS;
    expect(core.delivery.isRateLimited('m-a')).toBe(false);
    expect(await store.countOpen()).toBe(30);
  });

  it('is released as soon as one of its calls is answered (a new checkout went through)', async () => {
    const storm = new ScriptedLoyalty();
    const up = { 'm-a': storm };
    const { core, store, worker } = bridge(up, 1);
    await seed(store, 'm-a', 5);
    const pass = worker.reconcile(false);
    await storm.made(1);
    storm.calls[0]!.answer(stormed);
    await pass;
    expect(core.delivery.isRateLimited('m-a')).toBe(true);
    const checkout = core.intake.checkout('generic', { orderId: 'NEW-1', check: { amount: 100, currency: 'USD', selections: [{ quantity: 1, totalPrice: 100 }] }, customer: { phone: '+15550009999' } }, 'm-a');
    await storm.made(2);
    storm.calls[1]!.answer(succeeded(77));
    expect((await checkout).record.status).toBe('accrued');
    expect(core.delivery.isRateLimited('m-a')).toBe(false);
    storm.answer = succeeded;
    const after = await worker.reconcile(false);
    // The record the storm sent back waits for its own next round; the four others go now.
    expect(examinedOf(after, 'm-a')).toBe(4);
    expect((await store.get('m-a/generic:m-a-0'))!).toMatchObject({ status: 'pending', rounds: 1 });
    expect(await store.countOpen()).toBe(1);
  });

  it("sends one of its new checkouts at a time while held (a probe); the others are recorded and answered at once, holding no POS request for the budget", async () => {
    const storm = new ScriptedLoyalty();
    const up = { 'm-a': storm, 'm-b': new ScriptedLoyalty(succeeded) };
    const { core, store, worker } = bridge(up, 1);
    await seed(store, 'm-a', 1);
    const pass = worker.reconcile(false);
    await storm.made(1);
    storm.calls[0]!.answer(stormed);
    await pass;
    expect(core.delivery.isRateLimited('m-a')).toBe(true);
    const order = (n: number, merchantId: string) =>
      core.intake.checkout('generic', { orderId: `HELD-${n}`, check: { amount: 100 + n, currency: 'USD', selections: [{ quantity: 1, totalPrice: 100 + n }] }, customer: { phone: `+1555000${2000 + n}` } }, merchantId);
    // The probe goes out and is held unanswered; five more of A's are answered pending without a call.
    const probe = order(0, 'm-a');
    await storm.made(2);
    const others = await Promise.all([1, 2, 3, 4, 5].map((n) => order(n, 'm-a')));
    expect(others.map((a) => [a.record.status, a.record.attempts.length])).toEqual(Array.from({ length: 5 }, () => ['pending', 0]));
    expect(storm.calls).toHaveLength(2);
    // B's go through as ever.
    expect((await order(9, 'm-b')).record.status).toBe('accrued');
    // The probe meets the storm again: the next checkout may probe.
    storm.calls[1]!.answer(stormed);
    expect((await probe).record.status).toBe('pending');
    const next = order(6, 'm-a');
    await storm.made(3);
    storm.calls[2]!.answer(succeeded(88));
    expect((await next).record.status).toBe('accrued');
    expect(core.delivery.isRateLimited('m-a')).toBe(false);
    expect((await store.get('m-a/generic:HELD-1'))!.status).toBe('pending');
  });

  it('is not held for 5xx rounds, nor past a round whose last answer was not a 429', () => {
    const pauses = new RateLimitPauses({ retryBaseMs: RETRY_BASE_MS });
    expect(pauses.note('m-a', serverError, 0)).toBeUndefined();
    expect(pauses.isPaused('m-a', 1)).toBe(false);
    const mixed = { ...stormed, attempts: [...stormed.attempts.slice(0, 4), serverError.attempts[0]!] };
    expect(pauses.note('m-a', mixed, 0)).toBeUndefined();
    expect(pauses.note('m-a', stormed, 0)).toBe(30 * RETRY_BASE_MS);
    // Rounds that were out when the pause began do not lengthen it; the next storm after it does.
    expect(pauses.note('m-a', stormed, 1000)).toBeUndefined();
    expect(pauses.paused(29_999)).toEqual(['m-a']);
    expect(pauses.note('m-a', stormed, 30_000)).toBe(30_000 + 60 * RETRY_BASE_MS);
    expect(pauses.isPaused('m-b', 30_000)).toBe(false);
    pauses.note('m-a', { outcome: { kind: 'refused', status: 400, errors: ['bad'] }, attempts: [] }, 31_000);
    expect(pauses.paused(31_000)).toEqual([]);
    // After an answer the schedule starts over.
    expect(pauses.note('m-a', stormed, 40_000)).toBe(40_000 + 30 * RETRY_BASE_MS);
  });
});
