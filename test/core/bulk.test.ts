/**
 * Bulk operator actions (src/core/bulk.ts) without HTTP: the core over the in-memory store, its clock
 * injected. Each record named goes through the single action and its rules, done or refused with
 * why; a filter names a merchant's records (or every merchant's, for the bridge's operator) and is
 * refused past BULK_MAX; the time budget is read on the core's clock, never the wall's.
 */
import { describe, expect, it } from '@jest/globals';
import { BULK_BUDGET_MS, BULK_MAX, CountMismatchError, runBulk, type BulkFilter, type BulkRequest } from '../../src/core/bulk.js';
import { createCore, type Core } from '../../src/core/core.js';
import type { PosCalls } from '../../src/core/delivery.js';
import { HistoryVerifier } from '../../src/core/history-verifier.js';
import { ConflictError, ValidationError } from '../../src/kernel/errors.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { makeRecord, type RecordOptions } from '../ledger/contracts/factories.js';

const T0 = Date.parse('2026-03-01T12:00:00.000Z');
const ALICE = { actor: 'alice', reason: 'the card block was lifted' };

/** A loyalty service no test here reaches: bulk retries and resolves leave delivery to the worker. */
const unreachableLoyalty: PosCalls = {
  accrue: () => Promise.reject(new Error('no call expected')),
  reverse: () => Promise.reject(new Error('no call expected')),
};

/** The core over a memory store, reading the time from `clock`. */
function coreWith(clock: () => Date = () => new Date(T0)): { core: Core; store: MemoryLedgerStore } {
  const store = new MemoryLedgerStore();
  const noHistory = { canVerify: false, findCards: async () => [], listOperations: async () => [] };
  const verifier = new HistoryVerifier(noHistory, store, { graceMs: 0, clockSkewMs: 0 });
  const options = { answerBudgetMs: 100, retryBaseMs: 10, inDoubtVerifyAfterMs: 100, partialRefundPolicy: 'reaccrue' as const, inFlightLeaseMs: 60_000 };
  const upstreams = { upstreamOf: async () => ({ calls: unreachableLoyalty, verifier, suspended: false, ambiguity: 'person' as const }), canVerifyAny: async () => false };
  return { core: createCore({ store, upstreams, options, logger: silentLogger, metrics: createMetrics(undefined, false), clock }), store };
}

async function put(store: MemoryLedgerStore, transactionId: string, options: RecordOptions & { merchantId?: string } = {}): Promise<LedgerRecord> {
  const record = makeRecord(transactionId, options);
  if (options.merchantId) record.merchantId = options.merchantId;
  return (await store.insert(record)).record;
}

/** A bulk retry by alice, as the bridge's operator unless `scope` says otherwise. */
const retry = (select: { ids: string[]; expectCount?: number } | { filter: BulkFilter; expectCount?: number }, scope: { merchantId?: string; global?: boolean } = {}): BulkRequest => ({
  action: 'retry',
  act: ALICE,
  global: scope.global ?? true,
  ...(scope.merchantId ? { merchantId: scope.merchantId } : {}),
  ...select,
});

describe('per-record outcomes', () => {
  it('each id is done or refused with what the single action answers, in the order named; each done one is in its history and the audit trail', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed' });
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [7] });
    await put(store, 'generic:D-1', { accrual: 'in_doubt' });

    const outcome = await core.operator.bulk(retry({ ids: ['generic:F-1', 'generic:A-1', 'generic:D-1', 'nope'] }));

    expect(outcome).toEqual({
      done: ['generic:F-1'],
      refused: [
        { id: 'generic:A-1', why: 'nothing to retry in status accrued' },
        { id: 'generic:D-1', why: expect.stringContaining('resolve it (or let reconcile settle it) first') },
        { id: 'nope', why: 'no ledger record nope' },
      ],
    });
    // Left to the worker: pending, with who asked and why; nothing was sent.
    const retried = (await store.get('generic:F-1'))!;
    expect(retried.status).toBe('pending');
    expect(retried.history.at(-1)).toMatchObject({ actor: 'alice', detail: 'the card block was lifted' });
    expect((await store.get('generic:A-1'))!.version).toBe(1);
    const audit = await store.listAudit({ offset: 0, limit: 10 });
    expect(audit.items).toEqual([expect.objectContaining({ actor: 'alice', action: 'bulk:retry', target: 'generic:F-1', reason: 'the card block was lifted' })]);
  });

  it('a record named twice in one request is acted on once, and answered once', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed' });

    const outcome = await core.operator.bulk({ ...retry({ ids: ['generic:F-1', 'default/generic:F-1', 'generic:F-1'] }) });

    expect(outcome).toEqual({ done: ['generic:F-1'], refused: [] });
    expect((await store.get('generic:F-1'))!.version).toBe(2);
    expect((await store.listAudit({ offset: 0, limit: 10 })).total).toBe(1);
  });

  it('resolve settles each record in doubt with the outcome given, and refuses one that is not', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:D-1', { accrual: 'in_doubt' });
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [7] });
    const outcome = await core.operator.bulk({ action: 'resolve', outcome: 'not_accrued', act: ALICE, global: true, ids: ['generic:D-1', 'generic:A-1'] });
    expect(outcome).toEqual({ done: ['generic:D-1'], refused: [{ id: 'generic:A-1', why: 'the accrual is accrued, not in doubt' }] });
    // Not accrued: to be delivered again, by the worker.
    const settled = (await store.get('generic:D-1'))!;
    expect(settled.accrual.state).toBe('pending');
    expect(settled.history.at(-1)).toMatchObject({ actor: 'alice', detail: 'the card block was lifted' });
    expect((await store.listAudit({ offset: 0, limit: 10 })).items[0]).toMatchObject({ action: 'bulk:resolve not_accrued', target: 'generic:D-1' });
  });

  it('a failure that is not a refusal (the ledger failing) is not reported as one: the action fails', async () => {
    const broken = { retry: () => Promise.reject(new Error('disk full')) } as never;
    const store = { list: () => Promise.reject(new Error('unused')) };
    await expect(runBulk(retry({ ids: ['generic:F-1'] }), { actions: broken, store, now: () => new Date(T0) })).rejects.toThrow('disk full');
  });
});

describe('a filter', () => {
  it(`takes every record it matches, up to ${BULK_MAX}`, async () => {
    const { core, store } = coreWith();
    for (let i = 0; i < BULK_MAX; i++) await put(store, `generic:F-${i}`, { accrual: 'failed', at: i });
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [7] });
    const outcome = await core.operator.bulk(retry({ filter: { status: ['failed'] }, expectCount: BULK_MAX }));
    expect(outcome.refused).toEqual([]);
    expect(outcome.done).toHaveLength(BULK_MAX);
    // Newest first, as the list is.
    expect(outcome.done[0]).toBe(`generic:F-${BULK_MAX - 1}`);
  });

  it(`matching more than ${BULK_MAX} is refused with its count, and nothing is touched`, async () => {
    const { core, store } = coreWith();
    for (let i = 0; i <= BULK_MAX; i++) await put(store, `generic:F-${i}`, { accrual: 'failed', at: i });
    const refused = core.operator.bulk(retry({ filter: { status: ['failed'] } }));
    await expect(refused).rejects.toThrow(ValidationError);
    await expect(refused).rejects.toMatchObject({ issues: [{ field: 'filter', message: expect.stringContaining(`matches ${BULK_MAX + 1} records`) }] });
    expect((await store.list({ status: 'pending', offset: 0, limit: 1 })).total).toBe(0);
    expect((await store.listAudit({ offset: 0, limit: 1 })).total).toBe(0);
  });

  it('narrows by POS and time as the record list does', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed', at: 0 });
    await put(store, 'square:F-2', { accrual: 'failed', pos: 'square', at: 10 });
    await put(store, 'generic:F-3', { accrual: 'failed', at: 20 });
    expect((await core.operator.bulk(retry({ filter: { pos: 'square' }, expectCount: 1 }))).done).toEqual(['square:F-2']);
    const from = new Date(Date.parse('2026-03-01T09:00:00.000Z') + 5 * 60_000);
    expect((await core.operator.bulk(retry({ filter: { pos: 'generic', from }, expectCount: 1 }))).done).toEqual(['generic:F-3']);
  });
});

describe('scoped to a merchant', () => {
  async function twoMerchants() {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed' });
    await put(store, 'generic:B-1', { accrual: 'failed', merchantId: 'bakery', at: 1 });
    return { core, store };
  }

  it("a merchant's own admin reaches its own records only: another merchant's is as unknown as a missing one, slash or not", async () => {
    const { core, store } = await twoMerchants();
    const outcome = await core.operator.bulk(retry({ ids: ['generic:B-1', 'generic:F-1', 'default/generic:F-1'] }, { merchantId: 'bakery', global: false }));
    expect(outcome).toEqual({
      done: ['generic:B-1'],
      refused: [
        { id: 'generic:F-1', why: 'no ledger record generic:F-1' },
        { id: 'default/generic:F-1', why: 'no ledger record default/generic:F-1' },
      ],
    });
    expect((await store.get('generic:F-1'))!.status).toBe('failed');
    expect((await store.get('bakery/generic:B-1'))!.status).toBe('pending');
  });

  it("the bridge's operator names another merchant's record <merchantId>/<transactionId>; a plain id is the request's merchant's, default by default", async () => {
    const { core } = await twoMerchants();
    expect(await core.operator.bulk(retry({ ids: ['bakery/generic:B-1', 'generic:F-1', 'generic:B-1'] }))).toEqual({
      done: ['bakery/generic:B-1', 'generic:F-1'],
      refused: [{ id: 'generic:B-1', why: 'no ledger record generic:B-1' }],
    });
  });

  it("a filter takes the request's merchant's records only; the bridge's operator naming none takes every merchant's, another's named with its merchant", async () => {
    const { core: scoped } = await twoMerchants();
    expect(await scoped.operator.bulk(retry({ filter: {}, expectCount: 1 }, { merchantId: 'bakery', global: false }))).toEqual({ done: ['generic:B-1'], refused: [] });
    const { core: all } = await twoMerchants();
    expect(await all.operator.bulk(retry({ filter: { status: ['failed'] }, expectCount: 2 }))).toEqual({ done: ['bakery/generic:B-1', 'generic:F-1'], refused: [] });
  });
});

describe('the time budget, on the injected clock', () => {
  it(`takes no record once ${BULK_BUDGET_MS / 1000} s have passed: the rest are refused as not attempted, to be sent again`, async () => {
    let now = T0;
    const acted: string[] = [];
    // Each action takes 8 s of the clock's time: started at 0, 8 and 16 s; at 24 s the budget is spent.
    const actions = {
      retry: async (key: string) => {
        acted.push(key);
        now += 8_000;
        return undefined as never;
      },
    } as never;
    const store = { list: () => Promise.reject(new Error('unused')) };
    const outcome = await runBulk(retry({ ids: ['A', 'B', 'C', 'D', 'E'] }), { actions, store, now: () => new Date(now) });
    expect(acted).toEqual(['A', 'B', 'C']);
    expect(outcome.done).toEqual(['A', 'B', 'C']);
    expect(outcome.refused).toEqual(['D', 'E'].map((id) => ({ id, why: `not attempted: the bulk action's ${BULK_BUDGET_MS / 1000} s budget ran out; send it again` })));
  });

  it('a record started on the last millisecond of the budget is still taken', async () => {
    let now = T0;
    const actions = {
      retry: async () => {
        now += BULK_BUDGET_MS / 2;
        return undefined as never;
      },
    } as never;
    const outcome = await runBulk(retry({ ids: ['A', 'B', 'C', 'D'] }), { actions, store: { list: () => Promise.reject(new Error('unused')) }, now: () => new Date(now) });
    // Started at 0, 10 and 20 s (the deadline itself); at 30 s it is past.
    expect(outcome.done).toEqual(['A', 'B', 'C']);
    expect(outcome.refused.map((r) => r.id)).toEqual(['D']);
  });

  it("the core's bulk reads its budget on the core's clock: a clock already past it touches nothing", async () => {
    let reads = 0;
    // Every read of this clock is 21 s after the one before: the deadline set at the first read has passed at the next.
    const { core, store } = coreWith(() => new Date(T0 + 21_000 * reads++));
    await put(store, 'generic:F-1', { accrual: 'failed' });
    const outcome = await core.operator.bulk(retry({ ids: ['generic:F-1'] }));
    expect(outcome).toEqual({ done: [], refused: [{ id: 'generic:F-1', why: expect.stringContaining('not attempted') }] });
    expect((await store.get('generic:F-1'))!.status).toBe('failed');
  });

  it('a conflict while the budget lasts is a refusal with its words, and the next record is still taken', async () => {
    const actions = {
      retry: async (key: string) => {
        if (key === 'A') throw new ConflictError('a call is in flight');
        return undefined as never;
      },
    } as never;
    const outcome = await runBulk(retry({ ids: ['A', 'B'] }), { actions, store: { list: () => Promise.reject(new Error('unused')) }, now: () => new Date(T0) });
    expect(outcome).toEqual({ done: ['B'], refused: [{ id: 'A', why: 'a call is in flight' }] });
  });
});

describe('safe bulk (contract v1.5): one request never reaches further than the person saw', () => {
  it('a filter without expectCount, or with another number, is refused with the number matched, and nothing is touched', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed', at: 0 });
    await put(store, 'generic:F-2', { accrual: 'failed', at: 1 });
    for (const expectCount of [undefined, 1, 3]) {
      const refused = core.operator.bulk(retry({ filter: { status: ['failed'] }, ...(expectCount === undefined ? {} : { expectCount }) }));
      await expect(refused).rejects.toThrow(CountMismatchError);
      await expect(refused).rejects.toMatchObject({ status: 409, code: 'count_mismatch', matched: 2 });
    }
    expect((await store.list({ status: 'failed', offset: 0, limit: 10 })).total).toBe(2);
    expect((await store.listAudit({ offset: 0, limit: 1 })).total).toBe(0);
    expect((await core.operator.bulk(retry({ filter: { status: ['failed'] }, expectCount: 2 }))).done).toEqual(['generic:F-2', 'generic:F-1']);
  });

  it('ids need no count; one stated is held to the records named', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed' });
    await expect(core.operator.bulk(retry({ ids: ['generic:F-1', 'generic:F-1'], expectCount: 2 }))).rejects.toMatchObject({ code: 'count_mismatch', matched: 1 });
    expect((await core.operator.bulk(retry({ ids: ['generic:F-1'] }))).done).toEqual(['generic:F-1']);
  });

  it('a reverse over a filter spanning several merchants names them, exactly; one merchant needs no naming', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [1] });
    await put(store, 'generic:B-1', { accrual: 'accrued', operationIds: [2], merchantId: 'bakery', at: 1 });
    const reverse = (extra: Partial<BulkRequest>): BulkRequest => ({ action: 'reverse', act: ALICE, global: true, filter: { status: ['accrued'] }, expectCount: 2, ...extra }) as BulkRequest;
    await expect(core.operator.bulk(reverse({}))).rejects.toMatchObject({ status: 409, message: expect.stringContaining('the records of 2 merchants (bakery, default)') });
    await expect(core.operator.bulk(reverse({ merchants: ['bakery'] }))).rejects.toMatchObject({ status: 409 });
    expect((await store.get('generic:A-1'))!.status).toBe('accrued');
    expect((await store.get('bakery/generic:B-1'))!.status).toBe('accrued');
    expect((await core.operator.bulk(reverse({ filter: { status: ['accrued'] }, merchantId: 'bakery', expectCount: 1 }))).done).toEqual(['bakery/generic:B-1']);
  });

  it('a preview counts by merchant, status, amount and points, and names what would be refused, doing nothing', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed', at: 0 });
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [7], at: 1 });
    await put(store, 'generic:B-1', { accrual: 'failed', merchantId: 'bakery', at: 2 });
    const preview = await core.operator.previewBulk(retry({ filter: {} }));
    expect(preview).toMatchObject({
      matched: 3,
      acted: 2,
      byMerchant: [
        { merchantId: 'bakery', count: 1 },
        { merchantId: 'default', count: 2 },
      ],
      byStatus: [
        { status: 'accrued', count: 1 },
        { status: 'failed', count: 2 },
      ],
      refused: [{ id: 'generic:A-1', why: expect.any(String) }],
    });
    expect(preview.amounts).toEqual([{ currency: 'USD', cents: 11994, text: '119.94 USD' }]);
    expect((await store.get('generic:F-1'))!.status).toBe('failed');
    expect((await store.listAudit({ offset: 0, limit: 1 })).total).toBe(0);
  });

  it("the preview's digest refuses another set of records of the same count: one refunded, one new, nothing done", async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:F-1', { accrual: 'failed', at: 0 });
    await put(store, 'generic:F-2', { accrual: 'failed', at: 1 });
    const preview = await core.operator.previewBulk(retry({ filter: { status: ['failed'] } }));
    expect(preview).toMatchObject({ matched: 2, digest: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/) });
    // Between the look and the click: F-1 settled elsewhere, F-3 failed. Still two.
    await store.update({ ...(await store.get('generic:F-1'))!, version: 2, status: 'accrued', accrual: { ...(await store.get('generic:F-1'))!.accrual, state: 'accrued' } });
    await put(store, 'generic:F-3', { accrual: 'failed', at: 2 });
    await expect(core.operator.bulk(retry({ filter: { status: ['failed'] }, expectCount: 2, expectDigest: preview.digest } as never))).rejects.toMatchObject({ status: 409, code: 'records_changed' });
    expect((await store.get('generic:F-3'))!.status).toBe('failed');
    const now = await core.operator.previewBulk(retry({ filter: { status: ['failed'] } }));
    expect((await core.operator.bulk(retry({ filter: { status: ['failed'] }, expectCount: now.matched, expectDigest: now.digest } as never))).done.sort()).toEqual(['generic:F-2', 'generic:F-3']);
  });

  it('merchants named are held to whatever the action: naming another merchant never acts on the records matched', async () => {
    const { core, store } = coreWith();
    await put(store, 'generic:A-1', { accrual: 'accrued', operationIds: [1] });
    const reverse: BulkRequest = { action: 'reverse', act: ALICE, global: true, filter: { status: ['accrued'] }, expectCount: 1, merchants: ['bakery'] };
    await expect(core.operator.bulk(reverse)).rejects.toMatchObject({ status: 409, message: expect.stringContaining('not of the merchants named (bakery)') });
    expect((await store.get('generic:A-1'))!.status).toBe('accrued');
    expect((await core.operator.bulk({ ...reverse, merchants: ['default'] })).done).toEqual(['generic:A-1']);
  });
});
