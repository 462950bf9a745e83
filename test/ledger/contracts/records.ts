/**
 * The records' contract: insert-once, compare-and-set, the claims (operation ids, accrual keys), the listings an operator and the worker read, and what survives a reopen.
 */
import { describe, expect, it } from '@jest/globals';
import { type RecordOptions, minutes, makeRecord, nextVersion, settle, ids, keys } from './factories.js';
import { AccrualKeyHeldError, ConflictError, ValidationError, VersionConflictError } from '../../../src/kernel/errors.js';
import { deriveStatus, isOpen, keyOf, type LedgerRecord } from '../../../src/state/record.js';
import { CUSTOMER_SEARCH_DEPTH, LIST_COUNT_CAP, PREFIX_MATCH_CAP, type RecordStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

/** Stores many records at once: in one batch where the store has a bulk import (PostgreSQL's, for ledger:copy), one by one otherwise. */
async function importOrInsert(store: RecordStore, records: LedgerRecord[]): Promise<void> {
  const bulk = (store as { importRecords?: (rs: LedgerRecord[]) => Promise<unknown> }).importRecords;
  if (bulk) await bulk.call(store, records);
  else for (const r of records) await store.insert(r);
}

export function recordStoreContract(name: string, makeStore: MakeStore<RecordStore>): void {
  describe(`RecordStore contract: ${name}`, () => {
    let store: RecordStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('basics', () => {
      it('names its kind, answers ping, starts empty', async () => {
        expect(typeof store.kind).toBe('string');
        expect(store.kind.length).toBeGreaterThan(0);
        await expect(store.ping()).resolves.toBeUndefined();
        expect(await store.count()).toBe(0);
        expect(await store.list({ offset: 0, limit: 10 })).toEqual({ items: [], total: 0 });
        expect(await store.listOpen({ limit: 10 })).toEqual([]);
        expect(await store.listDue({ nowMs: Date.now(), limit: 10, canVerify: true })).toEqual([]);
        expect(await store.findOperationClaim('default', 1)).toBeUndefined();
      });

      it('get of a missing transactionId is undefined', async () => {
        expect(await store.get('generic:nope')).toBeUndefined();
        await store.insert(makeRecord('generic:A'));
        expect(await store.get('generic:nope')).toBeUndefined();
        expect(await store.get('generic:a')).toBeUndefined(); // ids are case-sensitive
      });

      it('ping rejects once the store is closed', async () => {
        await store.close();
        await expect(store.ping()).rejects.toThrow();
      });
    });

    describe('insert', () => {
      it('stores the record whole and answers it with created: true', async () => {
        const record = makeRecord('square:ORD-1', { pos: 'square', operationIds: [7], accrual: 'in_doubt', inFlight: true });
        const out = await store.insert(record);
        expect(out.created).toBe(true);
        expect(out.record).toEqual(record);
        expect(await store.get(record.transactionId)).toEqual(record);
        expect(await store.count()).toBe(1);
      });

      it('creates a transactionId once: a second insert answers the stored record unchanged, created: false', async () => {
        const first = makeRecord('generic:A-1', { orderId: 'first' });
        await store.insert(first);
        const second = makeRecord('generic:A-1', { orderId: 'second', pos: 'generic', at: 5, accrual: 'skipped', operationIds: [99] });
        const out = await store.insert(second);
        expect(out.created).toBe(false);
        expect(out.record).toEqual(first);
        expect(await store.get('generic:A-1')).toEqual(first);
        expect(await store.count()).toBe(1);
        expect(await store.findOperationClaim('default', 99)).toBeUndefined();
      });

      it('a repeated insert after an update answers the current version, not the first', async () => {
        const first = makeRecord('generic:A-2');
        await store.insert(first);
        const updated = await store.update(settle(first));
        const out = await store.insert(makeRecord('generic:A-2'));
        expect(out).toEqual({ created: false, record: updated });
      });

      it('50 concurrent inserts of one transactionId create it exactly once', async () => {
        const attempts = Array.from({ length: 50 }, (_, i) => makeRecord('generic:RACE', { orderId: `writer-${i}` }));
        const outs = await Promise.all(attempts.map((r) => store.insert(r)));
        const created = outs.filter((o) => o.created);
        expect(created).toHaveLength(1);
        const winner = created[0]!.record;
        for (const out of outs) expect(out.record).toEqual(winner);
        expect(await store.get('generic:RACE')).toEqual(winner);
        expect(await store.count()).toBe(1);
      });

      it('50 concurrent inserts of different transactionIds all create', async () => {
        const outs = await Promise.all(Array.from({ length: 50 }, (_, i) => store.insert(makeRecord(`generic:M-${i}`, { at: i }))));
        expect(outs.every((o) => o.created)).toBe(true);
        expect(await store.count()).toBe(50);
        const page = await store.list({ offset: 0, limit: 100 });
        expect(page.total).toBe(50);
        expect(new Set(ids(page.items)).size).toBe(50);
      });

      it('refuses a new record whose version is not 1', async () => {
        const record = { ...makeRecord('generic:V'), version: 2 };
        await expect(store.insert(record)).rejects.toThrow();
        expect(await store.get('generic:V')).toBeUndefined();
        expect(await store.count()).toBe(0);
      });
    });

    describe('update (compare-and-set on version)', () => {
      it('replaces the record when its version is the stored version + 1', async () => {
        const v1 = makeRecord('generic:U-1');
        await store.insert(v1);
        const v2 = nextVersion(v1, (r) => {
          r.accrual.state = 'accrued';
          r.accrual.results = [{ isSuccess: true, serialNumber: '11-100001-2', operationId: 5 }];
          r.accrual.operationIds = [5];
          r.attempts.push({ operation: 'accrue', startedAt: minutes(2), finishedAt: minutes(2), request: {}, error: 'ECONNRESET: socket hang up' });
        });
        expect(await store.update(v2)).toEqual(v2);
        expect(await store.get('generic:U-1')).toEqual(v2);
        const v3 = nextVersion(v2, (r) => {
          r.reversal.state = 'reversed';
          r.reversal.refundIds = ['R-1'];
        });
        expect(await store.update(v3)).toEqual(v3);
        expect(await store.get('generic:U-1')).toEqual(v3);
        expect(await store.count()).toBe(1);
      });

      it('refuses a stale version with VersionConflictError and keeps the stored record', async () => {
        const v1 = makeRecord('generic:U-2');
        await store.insert(v1);
        const v2 = await store.update(settle(v1));
        // Another writer still holding v1 tries to write its own v2.
        const stale = nextVersion(v1, (r) => (r.accrual.state = 'failed'));
        await expect(store.update(stale)).rejects.toBeInstanceOf(VersionConflictError);
        // Same version as stored (no increment) and a version that skips one are refused too.
        await expect(store.update({ ...v2, orderId: 'same-version' })).rejects.toBeInstanceOf(VersionConflictError);
        await expect(store.update({ ...nextVersion(v2), version: 4 })).rejects.toBeInstanceOf(VersionConflictError);
        expect(await store.get('generic:U-2')).toEqual(v2);
      });

      it('refuses an unknown transactionId with VersionConflictError and creates nothing', async () => {
        const ghost = nextVersion(makeRecord('generic:GHOST'));
        await expect(store.update(ghost)).rejects.toBeInstanceOf(VersionConflictError);
        expect(await store.get('generic:GHOST')).toBeUndefined();
        expect(await store.count()).toBe(0);
        // Even "version 1" on an unknown id is not an upsert.
        await expect(store.update(makeRecord('generic:GHOST'))).rejects.toBeInstanceOf(VersionConflictError);
        expect(await store.get('generic:GHOST')).toBeUndefined();
      });

      it('of 20 concurrent writers of the same next version exactly one wins', async () => {
        const v1 = makeRecord('generic:U-3');
        await store.insert(v1);
        const writers = Array.from({ length: 20 }, (_, i) => nextVersion(v1, (r) => (r.orderId = `writer-${i}`)));
        const outcomes = await Promise.allSettled(writers.map((w) => store.update(w)));
        const won = outcomes.filter((o) => o.status === 'fulfilled');
        const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(19);
        for (const l of lost) expect(l.reason).toBeInstanceOf(VersionConflictError);
        const stored = await store.get('generic:U-3');
        expect(stored).toEqual((won[0] as PromiseFulfilledResult<LedgerRecord>).value);
        expect(stored!.version).toBe(2);
      });

      it('does not change count', async () => {
        const v1 = makeRecord('generic:U-4');
        await store.insert(v1);
        await store.update(settle(v1));
        expect(await store.count()).toBe(1);
      });
    });

    describe('list', () => {
      // Inserted in creation order: a..f, with distinct creation minutes.
      const fixtures = (): LedgerRecord[] => [
        makeRecord('generic:a', { at: 0, accrual: 'accrued' }),
        makeRecord('square:b', { pos: 'square', at: 10, accrual: 'pending' }),
        makeRecord('generic:c', { at: 20, accrual: 'failed' }),
        makeRecord('square:d', { pos: 'square', at: 30, accrual: 'accrued' }),
        makeRecord('shopify:e', { pos: 'shopify', at: 40, accrual: 'accrued', reversal: 'reversed' }),
        makeRecord('generic:f', { at: 50, accrual: 'accrued' }),
      ];
      beforeEach(async () => {
        for (const r of fixtures()) await store.insert(r);
      });

      it('lists everything newest first with the total', async () => {
        const all = await store.list({ offset: 0, limit: 100 });
        expect(all.total).toBe(6);
        expect(ids(all.items)).toEqual(['generic:f', 'shopify:e', 'square:d', 'generic:c', 'square:b', 'generic:a']);
        expect(all.items[0]).toEqual(fixtures()[5]);
      });

      it('pages with offset and limit; total counts every match', async () => {
        expect(ids((await store.list({ offset: 0, limit: 2 })).items)).toEqual(['generic:f', 'shopify:e']);
        expect(await store.list({ offset: 2, limit: 2 })).toMatchObject({ total: 6 });
        expect(ids((await store.list({ offset: 2, limit: 2 })).items)).toEqual(['square:d', 'generic:c']);
        expect(ids((await store.list({ offset: 4, limit: 2 })).items)).toEqual(['square:b', 'generic:a']);
        expect(ids((await store.list({ offset: 5, limit: 10 })).items)).toEqual(['generic:a']);
        expect(await store.list({ offset: 6, limit: 10 })).toEqual({ items: [], total: 6 });
        expect(await store.list({ offset: 100, limit: 10 })).toEqual({ items: [], total: 6 });
      });

      it('filters by status', async () => {
        const accrued = await store.list({ status: 'accrued', offset: 0, limit: 100 });
        expect(accrued.total).toBe(3);
        expect(ids(accrued.items)).toEqual(['generic:f', 'square:d', 'generic:a']);
        expect(ids((await store.list({ status: 'reversed', offset: 0, limit: 100 })).items)).toEqual(['shopify:e']);
        expect(await store.list({ status: 'in_doubt', offset: 0, limit: 100 })).toEqual({ items: [], total: 0 });
        const page = await store.list({ status: 'accrued', offset: 1, limit: 1 });
        expect(page.total).toBe(3);
        expect(ids(page.items)).toEqual(['square:d']);
      });

      it('filters by pos', async () => {
        const square = await store.list({ pos: 'square', offset: 0, limit: 100 });
        expect(square.total).toBe(2);
        expect(ids(square.items)).toEqual(['square:d', 'square:b']);
        expect(await store.list({ pos: 'clover', offset: 0, limit: 100 })).toEqual({ items: [], total: 0 });
      });

      it('filters by from/to on createdAt, bounds inclusive', async () => {
        const window = await store.list({ from: new Date(minutes(10)), to: new Date(minutes(40)), offset: 0, limit: 100 });
        expect(window.total).toBe(4);
        expect(ids(window.items)).toEqual(['shopify:e', 'square:d', 'generic:c', 'square:b']);
        expect(ids((await store.list({ from: new Date(minutes(45)), offset: 0, limit: 100 })).items)).toEqual(['generic:f']);
        expect(ids((await store.list({ to: new Date(minutes(5)), offset: 0, limit: 100 })).items)).toEqual(['generic:a']);
        expect((await store.list({ from: new Date(minutes(41)), to: new Date(minutes(49)), offset: 0, limit: 100 })).total).toBe(0);
      });

      it('combines filters', async () => {
        const out = await store.list({ pos: 'generic', status: 'accrued', from: new Date(minutes(1)), offset: 0, limit: 100 });
        expect(out.total).toBe(1);
        expect(ids(out.items)).toEqual(['generic:f']);
      });

      it('follows updates: a new status is listed under it, createdAt and the order do not move', async () => {
        const b = (await store.get('square:b'))!;
        await store.update(settle(b));
        expect(ids((await store.list({ status: 'pending', offset: 0, limit: 100 })).items)).toEqual([]);
        expect(ids((await store.list({ status: 'accrued', offset: 0, limit: 100 })).items)).toEqual(['generic:f', 'square:d', 'square:b', 'generic:a']);
        expect(ids((await store.list({ offset: 0, limit: 100 })).items)).toEqual(['generic:f', 'shopify:e', 'square:d', 'generic:c', 'square:b', 'generic:a']);
        const listed = (await store.list({ pos: 'square', status: 'accrued', offset: 0, limit: 1, from: new Date(minutes(5)), to: new Date(minutes(15)) })).items[0];
        expect(listed).toEqual(await store.get('square:b'));
      });

      it('orders by createdAt, not by the order records were inserted', async () => {
        await store.insert(makeRecord('generic:late-but-old', { at: 25 }));
        await store.insert(makeRecord('generic:late-and-oldest', { at: -10 }));
        const live = ids((await store.list({ offset: 0, limit: 100 })).items);
        const afterRestart = ids((await (await reopen()).list({ offset: 0, limit: 100 })).items);
        // Same order whether or not the process restarted in between...
        expect(live).toEqual(afterRestart);
        // ...and that order is newest createdAt first.
        expect(afterRestart).toEqual([
          'generic:f',
          'shopify:e',
          'square:d',
          'generic:late-but-old',
          'generic:c',
          'square:b',
          'generic:a',
          'generic:late-and-oldest',
        ]);
      });
    });

    describe('listOpen', () => {
      it('returns only records with work left (isOpen), oldest first', async () => {
        const records = [
          makeRecord('generic:accrued', { at: 0, accrual: 'accrued' }),
          makeRecord('generic:pending', { at: 1, accrual: 'pending' }),
          makeRecord('generic:skipped', { at: 2, accrual: 'skipped' }),
          makeRecord('generic:in-doubt', { at: 3, accrual: 'in_doubt' }),
          makeRecord('generic:failed', { at: 4, accrual: 'failed' }),
          makeRecord('generic:reversal-pending', { at: 5, accrual: 'accrued', reversal: 'pending' }),
          makeRecord('generic:reversed', { at: 6, accrual: 'accrued', reversal: 'reversed' }),
          makeRecord('generic:reversal-in-doubt', { at: 7, accrual: 'accrued', reversal: 'in_doubt' }),
          makeRecord('generic:in-flight', { at: 8, accrual: 'accrued', inFlight: true }),
          makeRecord('generic:not-needed', { at: 9, accrual: 'failed', reversal: 'not_needed' }),
          makeRecord('generic:reverse-failed', { at: 10, accrual: 'accrued', reversal: 'failed' }),
          makeRecord('generic:partial', { at: 11, accrual: 'partially_accrued' }),
        ];
        // Insert newest first so "oldest first" cannot come from insertion order.
        for (const r of [...records].reverse()) await store.insert(r);
        const expected = records.filter(isOpen);
        expect(ids(expected)).toEqual(['generic:pending', 'generic:in-doubt', 'generic:reversal-pending', 'generic:reversal-in-doubt', 'generic:in-flight']);
        const open = await store.listOpen({ limit: 100 });
        expect(ids(open)).toEqual(ids(expected));
        expect(open).toEqual(expected);
      });

      it('respects the limit, keeping the oldest', async () => {
        for (let i = 0; i < 5; i++) await store.insert(makeRecord(`generic:o-${i}`, { at: i }));
        expect(ids(await store.listOpen({ limit: 2 }))).toEqual(['generic:o-0', 'generic:o-1']);
        expect(ids(await store.listOpen({ limit: 5 }))).toEqual(['generic:o-0', 'generic:o-1', 'generic:o-2', 'generic:o-3', 'generic:o-4']);
        expect(await store.listOpen({ limit: 100 })).toHaveLength(5);
      });

      it('a record leaves the open set when settled and re-enters when work appears again', async () => {
        const a = makeRecord('generic:a', { at: 0 });
        const b = makeRecord('generic:b', { at: 1 });
        await store.insert(a);
        await store.insert(b);
        const aAccrued = await store.update(settle(a));
        expect(ids(await store.listOpen({ limit: 10 }))).toEqual(['generic:b']);
        // A refund arrives for a: a reversal is pending, so a is open again (and still the oldest).
        const aRefund = await store.update(nextVersion(aAccrued, (r) => (r.reversal.state = 'pending')));
        expect(aRefund.status).toBe('reversal_pending');
        expect(ids(await store.listOpen({ limit: 10 }))).toEqual(['generic:a', 'generic:b']);
        // Marking a call in flight keeps it open; clearing the flag with the work done closes it.
        const inFlight = await store.update(nextVersion(aRefund, (r) => (r.inFlight = { operation: 'reverse', startedAt: minutes(3), owner: 'w' })));
        expect(ids(await store.listOpen({ limit: 10 }))).toEqual(['generic:a', 'generic:b']);
        await store.update(
          nextVersion(inFlight, (r) => {
            delete r.inFlight;
            r.reversal.state = 'reversed';
          }),
        );
        await store.update(settle(b));
        expect(await store.listOpen({ limit: 10 })).toEqual([]);
      });

      it('answers the current version of each open record', async () => {
        const a = makeRecord('generic:a', { accrual: 'pending' });
        await store.insert(a);
        const a2 = await store.update(nextVersion(a, (r) => (r.rounds = 3)));
        expect(await store.listOpen({ limit: 10 })).toEqual([a2]);
      });

      it('pages after a given record (how a reconcile goes through them all), ties on createdAt by id', async () => {
        for (const [id, at] of [['generic:p-1', 0], ['generic:p-3', 1], ['generic:p-2', 1], ['generic:p-4', 2], ['generic:p-5', 3]] as const) {
          await store.insert(makeRecord(id, { at }));
        }
        await store.insert(makeRecord('generic:p-settled', { at: 1, accrual: 'accrued' }));
        const first = await store.listOpen({ limit: 2 });
        expect(ids(first)).toEqual(['generic:p-1', 'generic:p-2']);
        const second = await store.listOpen({ limit: 2, after: first.at(-1) });
        expect(ids(second)).toEqual(['generic:p-3', 'generic:p-4']);
        expect(ids(await store.listOpen({ limit: 2, after: second.at(-1) }))).toEqual(['generic:p-5']);
        expect(await store.listOpen({ limit: 2, after: makeRecord('generic:p-5', { at: 3 }) })).toEqual([]);
      });
    });

    describe('listDue', () => {
      const at = (n: number): number => Date.parse(minutes(n));
      const due = (now: number, limit = 1000, canVerify = true) => store.listDue({ nowMs: at(now), limit, canVerify });

      it('finds a due record behind 600 older ones that an operator or a distant round holds (limit 500)', async () => {
        // What a worker used to starve on: the oldest open records, none of which it can move now.
        for (let i = 0; i < 200; i++) {
          await store.insert(makeRecord(`generic:reversal-in-doubt-${i}`, { at: i, accrual: 'accrued', reversal: 'in_doubt', reversalUnproven: true }));
          await store.insert(makeRecord(`generic:accrual-in-doubt-${i}`, { at: 200 + i, accrual: 'in_doubt' }));
          await store.insert(makeRecord(`generic:next-round-later-${i}`, { at: 400 + i, accrual: 'pending', nextAttemptAt: 2000 }));
        }
        await store.insert(makeRecord('generic:due', { at: 700, accrual: 'pending' }));
        expect(ids(await due(701, 500, false))).toEqual(['generic:due']);
        // A bridge that can read the operations history verifies the in-doubt accruals, due earlier.
        const verifying = await due(701, 500, true);
        expect(ids(verifying)).toEqual([...Array.from({ length: 200 }, (_, i) => `generic:accrual-in-doubt-${i}`), 'generic:due']);
        // Nothing is lost to anyone who looks at every open record.
        expect(await store.countOpen()).toBe(601);
        expect(await store.listOpen({ limit: 1000 })).toHaveLength(601);
      });

      it('leaves a record out until its time has come, by the clock it is given', async () => {
        await store.insert(makeRecord('generic:later', { at: 0, nextAttemptAt: 30 }));
        await store.insert(makeRecord('generic:now', { at: 10 }));
        expect(ids(await due(5))).toEqual([]);
        expect(ids(await due(29))).toEqual(['generic:now']);
        expect(ids(await due(30))).toEqual(['generic:now', 'generic:later']);
        const later = (await due(30))[1]!;
        expect(later).toEqual(await store.get('generic:later'));
      });

      it('orders by due time, not by age; keeps the earliest under the limit; follows updates and restarts', async () => {
        const records = [
          makeRecord('generic:round-at-50', { at: 0, accrual: 'pending', nextAttemptAt: 50 }),
          makeRecord('generic:verify-at-40', { at: 1, accrual: 'in_doubt', nextAttemptAt: 40 }),
          makeRecord('generic:in-flight', { at: 5, accrual: 'pending', inFlight: true, nextAttemptAt: 100 }),
          makeRecord('generic:new', { at: 10, accrual: 'pending' }),
          makeRecord('generic:reverse-at-15', { at: 20, accrual: 'accrued', reversal: 'pending', nextAttemptAt: 15 }),
          makeRecord('generic:nothing-to-reverse', { at: 30, accrual: 'failed', reversal: 'pending', nextAttemptAt: 90 }),
          makeRecord('generic:settled', { at: 3, accrual: 'accrued' }),
        ];
        for (const r of records) await store.insert(r);
        const order = ['generic:in-flight', 'generic:new', 'generic:reverse-at-15', 'generic:nothing-to-reverse', 'generic:verify-at-40', 'generic:round-at-50'];
        expect(ids(await due(100))).toEqual(order);
        expect(ids(await due(100, 1000, false))).toEqual(order.filter((id) => id !== 'generic:verify-at-40'));
        expect(ids(await due(100, 3))).toEqual(order.slice(0, 3));

        // A round without an answer moves the new record behind the others.
        await store.update(nextVersion(records[3]!, (r) => (r.nextAttemptAt = minutes(60))));
        const moved = ['generic:in-flight', 'generic:reverse-at-15', 'generic:nothing-to-reverse', 'generic:verify-at-40', 'generic:round-at-50', 'generic:new'];
        expect(ids(await due(100))).toEqual(moved);
        await reopen();
        expect(ids(await due(100))).toEqual(moved);
        expect(ids(await due(55))).toEqual(moved.slice(0, -1));
      });

      describe('merchants take turns', () => {
        const of = (merchantId: string, transactionId: string, options: RecordOptions = {}): LedgerRecord => ({ ...makeRecord(transactionId, options), merchantId });
        const turns = (now: number, options: { limit?: number; perMerchant?: number; skipMerchants?: string[] } = {}) =>
          store.listDue({ nowMs: at(now), limit: options.limit ?? 1000, canVerify: true, perMerchant: options.perMerchant, skipMerchants: options.skipMerchants });

        it("each merchant's earliest due first, at most perMerchant of each; then every merchant's first, every merchant's second, …", async () => {
          for (let i = 0; i < 10; i++) await store.insert(of('m-a', `generic:a-${i}`, { at: i }));
          for (let i = 0; i < 3; i++) await store.insert(of('m-b', `generic:b-${i}`, { at: 20 + i }));
          for (let i = 0; i < 2; i++) await store.insert(makeRecord(`generic:d-${i}`, { at: 15 + i }));
          await store.insert(of('m-c', 'generic:c-later', { at: 1, nextAttemptAt: 500 }));
          const firstFour = ['m-a/generic:a-0', 'generic:d-0', 'm-b/generic:b-0', 'm-a/generic:a-1', 'generic:d-1', 'm-b/generic:b-1', 'm-a/generic:a-2', 'm-b/generic:b-2', 'm-a/generic:a-3'];
          expect(keys(await turns(100, { perMerchant: 4 }))).toEqual(firstFour);
          expect(keys(await turns(100, { perMerchant: 4, limit: 5 }))).toEqual(firstFour.slice(0, 5));
          // Without a cap, the turns go on until every due record is listed.
          expect(keys(await turns(100))).toEqual([...firstFour, ...[4, 5, 6, 7, 8, 9].map((i) => `m-a/generic:a-${i}`)]);
          expect(keys(await turns(100, { perMerchant: 4, skipMerchants: ['m-a', 'm-c'] }))).toEqual(['generic:d-0', 'm-b/generic:b-0', 'generic:d-1', 'm-b/generic:b-1', 'm-b/generic:b-2']);
          expect(keys(await turns(15.5, { perMerchant: 2 }))).toEqual(['m-a/generic:a-0', 'generic:d-0', 'm-a/generic:a-1']);
          // Still earliest due first within a merchant: a round without an answer moves a-0 behind its others.
          await store.update(nextVersion((await store.get('m-a/generic:a-0'))!, (r) => (r.nextAttemptAt = minutes(50))));
          const moved = ['m-a/generic:a-1', 'generic:d-0', 'm-b/generic:b-0', 'm-a/generic:a-2', 'generic:d-1', 'm-b/generic:b-1', 'm-a/generic:a-3', 'm-b/generic:b-2', 'm-a/generic:a-4'];
          expect(keys(await turns(100, { perMerchant: 4 }))).toEqual(moved);
          await reopen();
          expect(keys(await turns(100, { perMerchant: 4 }))).toEqual(moved);
          // A turn goes earliest due first, whenever the merchant's records were created.
          expect(keys(await turns(600, { perMerchant: 1 }))).toEqual(['m-a/generic:a-1', 'generic:d-0', 'm-b/generic:b-0', 'm-c/generic:c-later']);
        });

        it("one merchant's 800 due records take its share of a batch; another's one record is in the first turn", async () => {
          for (let i = 0; i < 800; i++) await store.insert(of('m-storm', `generic:s-${i}`, { at: i / 10 }));
          await store.insert(of('m-calm', 'generic:calm-1', { at: 90 }));
          const batch = await turns(100, { limit: 500, perMerchant: 50 });
          expect(batch).toHaveLength(51);
          expect(keys(batch).slice(0, 3)).toEqual(['m-storm/generic:s-0', 'm-calm/generic:calm-1', 'm-storm/generic:s-1']);
          expect(keys(batch).at(-1)).toBe('m-storm/generic:s-49');
          // Without a cap the turns still put it second, not behind the 800.
          expect(keys(await turns(100, { limit: 500 })).slice(0, 2)).toEqual(['m-storm/generic:s-0', 'm-calm/generic:calm-1']);
          expect(await turns(100, { limit: 500, perMerchant: 50, skipMerchants: ['m-storm'] })).toEqual([await store.get('m-calm/generic:calm-1')]);
        });
      });
    });

    describe('findOperationClaim', () => {
      it('maps each accrual.operationId to its record', async () => {
        await store.insert(makeRecord('generic:a', { operationIds: [101, 102], accrual: 'accrued' }));
        await store.insert(makeRecord('generic:b', { operationIds: [200], accrual: 'accrued' }));
        expect(await store.findOperationClaim('default', 101)).toBe('generic:a');
        expect(await store.findOperationClaim('default', 102)).toBe('generic:a');
        expect(await store.findOperationClaim('default', 200)).toBe('generic:b');
        expect(await store.findOperationClaim('default', 103)).toBeUndefined();
      });

      it('refuses an id another record holds, with ConflictError, and writes nothing of that update', async () => {
        await store.insert(makeRecord('generic:holder', { operationIds: [777], accrual: 'accrued' }));
        const other = makeRecord('generic:other', { accrual: 'in_doubt' });
        await store.insert(other);
        await expect(store.update(nextVersion(other, (r) => ((r.accrual.state = 'accrued'), (r.accrual.operationIds = [777]))))).rejects.toBeInstanceOf(ConflictError);
        expect(await store.get('generic:other')).toEqual(other);
        expect(await store.findOperationClaim('default', 777)).toBe('generic:holder');
        await expect(store.insert(makeRecord('generic:third', { operationIds: [777] }))).rejects.toBeInstanceOf(ConflictError);
        expect(await store.get('generic:third')).toBeUndefined();
      });

      it('follows updates: new ids are claimed, dropped ids are released', async () => {
        const a = makeRecord('generic:a', { accrual: 'in_doubt' });
        await store.insert(a);
        expect(await store.findOperationClaim('default', 300)).toBeUndefined();
        // The history verifier matches the in-doubt accrual to operation 300.
        const a2 = await store.update(
          nextVersion(a, (r) => {
            r.accrual.state = 'accrued';
            r.accrual.operationIds = [300, 301];
            r.accrual.settledBy = 'history';
          }),
        );
        expect(await store.findOperationClaim('default', 300)).toBe('generic:a');
        expect(await store.findOperationClaim('default', 301)).toBe('generic:a');
        const a3 = await store.update(nextVersion(a2, (r) => (r.accrual.operationIds = [301, 302])));
        expect(await store.findOperationClaim('default', 300)).toBeUndefined();
        expect(await store.findOperationClaim('default', 301)).toBe('generic:a');
        expect(await store.findOperationClaim('default', 302)).toBe('generic:a');
        await store.update(nextVersion(a3, (r) => (r.accrual.operationIds = [])));
        for (const id of [300, 301, 302]) expect(await store.findOperationClaim('default', id)).toBeUndefined();
      });

      it('a refused update claims nothing', async () => {
        const a = makeRecord('generic:a');
        await store.insert(a);
        await store.update(settle(a));
        await expect(store.update(nextVersion(a, (r) => (r.accrual.operationIds = [400])))).rejects.toBeInstanceOf(VersionConflictError);
        expect(await store.findOperationClaim('default', 400)).toBeUndefined();
      });
    });

    describe('accrual keys: one unsettled accrual per customer and amount', () => {
      const ann = { phone: '+15550003333', email: 'ann@example.test' };
      const inFlight = (r: LedgerRecord) => (r.inFlight = { operation: 'accrue', startedAt: r.updatedAt, owner: 'test-worker' });

      it('a second record of the same customer and amount cannot be inserted unsettled; nothing of it is stored', async () => {
        await store.insert(makeRecord('generic:first', { customer: ann, inFlight: true }));
        const second = makeRecord('generic:second', { customer: { phone: '+15550003333' }, inFlight: true });
        await expect(store.insert(second)).rejects.toMatchObject({ constructor: AccrualKeyHeldError, holder: 'generic:first', transactionId: 'generic:second' });
        expect(await store.get('generic:second')).toBeUndefined();
        // Pending (not sent) it may be recorded: it holds nothing until it goes out.
        expect((await store.insert(makeRecord('generic:second', { customer: { phone: '+15550003333' } }))).created).toBe(true);
      });

      it('any shared identifier counts, emails without regard to case; another amount or customer does not', async () => {
        await store.insert(makeRecord('generic:first', { customer: ann, accrual: 'in_doubt' }));
        await expect(store.insert(makeRecord('generic:by-email', { customer: { email: ' ANN@example.test' }, inFlight: true }))).rejects.toBeInstanceOf(AccrualKeyHeldError);
        expect((await store.insert(makeRecord('generic:other-amount', { customer: ann, amount: 1000, inFlight: true }))).created).toBe(true);
        expect((await store.insert(makeRecord('generic:other-customer', { customer: { phone: '+15550004444' }, inFlight: true }))).created).toBe(true);
      });

      it('a pending record cannot go out while the key is held, and can once the holder settles', async () => {
        const holder = makeRecord('generic:holder', { customer: ann, inFlight: true });
        await store.insert(holder);
        const waiting = makeRecord('generic:waiting', { customer: ann });
        await store.insert(waiting);
        await expect(store.update(nextVersion(waiting, inFlight))).rejects.toMatchObject({ holder: 'generic:holder' });
        expect(await store.get('generic:waiting')).toEqual(waiting);
        // The holder's call ends in doubt: still unsettled, still holding.
        const doubt = await store.update(nextVersion(holder, (r) => ((r.inFlight = undefined), (r.accrual.state = 'in_doubt'), (r.accrual.inDoubtSince = r.createdAt))));
        await expect(store.update(nextVersion(waiting, inFlight))).rejects.toBeInstanceOf(AccrualKeyHeldError);
        await store.update(settle(doubt));
        expect((await store.update(nextVersion(waiting, inFlight))).version).toBe(2);
      });

      it("are per merchant: another merchant's accrual of the same customer and amount is not held up, nor listed with it", async () => {
        await store.insert({ ...makeRecord('generic:first', { customer: ann, inFlight: true }), merchantId: 'm-a' });
        // The same phone and amount at another merchant (the default one too) is another customer of another account.
        const theirs = { ...makeRecord('generic:first', { customer: ann, inFlight: true }), merchantId: 'm-b' };
        expect((await store.insert(theirs)).created).toBe(true);
        expect((await store.insert(makeRecord('generic:mine', { customer: ann, inFlight: true }))).created).toBe(true);
        await expect(store.insert({ ...makeRecord('generic:second', { customer: ann, inFlight: true }), merchantId: 'm-a' })).rejects.toMatchObject({ holder: 'generic:first' });
        expect((await store.listUnsettledAccruals('m-b', 5997)).map((r) => keyOf(r))).toEqual(['m-b/generic:first']);
      });

      it('the holder keeps moving while it holds its keys', async () => {
        const holder = makeRecord('generic:holder', { customer: ann, accrual: 'in_doubt' });
        await store.insert(holder);
        const later = await store.update(nextVersion(holder, (r) => (r.nextAttemptAt = minutes(30))));
        expect((await store.update(nextVersion(later, inFlight))).version).toBe(3);
      });

      it('lists the unsettled accruals of an amount, and keeps the keys across a reopen', async () => {
        await store.insert(makeRecord('generic:a', { customer: ann, accrual: 'in_doubt', at: 1 }));
        await store.insert(makeRecord('generic:b', { inFlight: true, at: 2 }));
        await store.insert(makeRecord('generic:c', { at: 3 }));
        await store.insert(makeRecord('generic:d', { amount: 1000, accrual: 'in_doubt', at: 4 }));
        await store.insert(makeRecord('generic:e', { accrual: 'accrued', at: 5 }));
        expect(ids(await store.listUnsettledAccruals('default', 5997))).toEqual(['generic:a', 'generic:b']);
        expect(ids(await store.listUnsettledAccruals('default', 1000))).toEqual(['generic:d']);
        await reopen();
        expect(ids(await store.listUnsettledAccruals('default', 5997))).toEqual(['generic:a', 'generic:b']);
        await expect(store.insert(makeRecord('generic:f', { customer: { phone: '+15550003333' }, inFlight: true }))).rejects.toMatchObject({ holder: 'generic:a' });
      });
    });

    describe('merchants', () => {
      it('records of two merchants with one transactionId never touch', async () => {
        const mine = { ...makeRecord('generic:A-1', { accrual: 'accrued', operationIds: [1] }), merchantId: 'bakery-17' };
        const theirs = { ...makeRecord('generic:A-1', { accrual: 'accrued', operationIds: [1] }), merchantId: 'cafe-2' };
        expect((await store.insert(mine)).created).toBe(true);
        expect((await store.insert(theirs)).created).toBe(true);
        expect(await store.get('bakery-17/generic:A-1')).toEqual(mine);
        expect(await store.get('cafe-2/generic:A-1')).toEqual(theirs);
        expect(await store.get('generic:A-1')).toBeUndefined();
        // Operation 1 is each merchant's own (their loyalty accounts number operations alike).
        expect(await store.findOperationClaim('bakery-17', 1)).toBe('generic:A-1');
        expect(await store.findOperationClaim('cafe-2', 1)).toBe('generic:A-1');
        expect(await store.findOperationClaim('default', 1)).toBeUndefined();
        expect((await store.list({ merchantId: 'cafe-2', offset: 0, limit: 10 })).items).toEqual([theirs]);
        await store.update(nextVersion(theirs, (r) => (r.reversal.state = 'reversed')));
        expect(await store.get('bakery-17/generic:A-1')).toEqual(mine);
      });
    });

    describe('operators: search and attention', () => {
      /** A refund of an order the loyalty service never knew: reverse_failed, nothing accrued. */
      const orphan = (transactionId: string, at: number): LedgerRecord => {
        const r = makeRecord(transactionId, { at, accrual: 'none', reversal: 'failed' });
        r.reversal = { ...r.reversal, refundIds: ['R-orphan'], unknownUpstream: true, errors: ['Transaction not found'] };
        r.status = deriveStatus(r);
        return r;
      };

      it('lists by several statuses, the POS order id and a refund id, alone or together, after a reopen too', async () => {
        await store.insert(makeRecord('generic:a', { at: 0, accrual: 'failed' }));
        await store.insert(makeRecord('square:b', { pos: 'square', orderId: 'H-1', at: 10, accrual: 'in_doubt' }));
        await store.insert(makeRecord('generic:c', { at: 20, accrual: 'accrued' }));
        const refunded = makeRecord('generic:d', { at: 30, accrual: 'accrued', reversal: 'reversed' });
        refunded.reversal.refundIds = ['R-1', 'R-2'];
        await store.insert(refunded);
        await store.insert(makeRecord('generic:H-1', { orderId: 'H-1', at: 40, accrual: 'accrued' }));
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          expect(ids((await s.list({ status: ['failed', 'in_doubt'], offset: 0, limit: 100 })).items)).toEqual(['square:b', 'generic:a']);
          expect((await s.list({ status: ['failed', 'in_doubt'], offset: 1, limit: 1 })).total).toBe(2);
          expect(ids((await s.list({ status: 'failed', offset: 0, limit: 100 })).items)).toEqual(['generic:a']);
          expect(ids((await s.list({ orderId: 'H-1', offset: 0, limit: 100 })).items)).toEqual(['generic:H-1', 'square:b']);
          expect(ids((await s.list({ orderId: 'H-1', pos: 'square', offset: 0, limit: 100 })).items)).toEqual(['square:b']);
          expect(ids((await s.list({ refundId: 'R-2', offset: 0, limit: 100 })).items)).toEqual(['generic:d']);
          expect((await s.list({ refundId: 'R-3', offset: 0, limit: 100 })).total).toBe(0);
          expect((await s.list({ orderId: 'H-1', status: ['failed'], offset: 0, limit: 100 })).total).toBe(0);
        }
      });

      it('finds order and refund ids by their start whatever the case of A-Z, % and _ taken literally, and refund ids an update adds, after a reopen too', async () => {
        await store.insert(makeRecord('square:a', { pos: 'square', orderId: 'SqOrd-1001', at: 0, accrual: 'accrued' }));
        await store.insert(makeRecord('square:b', { pos: 'square', orderId: 'sqord-1002', at: 1, accrual: 'accrued' }));
        await store.insert(makeRecord('generic:c', { orderId: 'SQO%_9', at: 2, accrual: 'accrued' }));
        await store.insert(makeRecord('generic:d', { orderId: 'other', at: 3, accrual: 'accrued' }));
        const refunded = (await store.insert(makeRecord('generic:e', { orderId: 'E-1', at: 4, accrual: 'accrued' }))).record;
        await store.update(nextVersion(refunded, (r) => (r.reversal = { ...r.reversal, state: 'reversed', refundIds: ['Ref-77', 'ref-78'] })));
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          const found = async (query: { orderId?: string; refundId?: string }) => ids((await s.list({ ...query, offset: 0, limit: 100 })).items);
          expect(await found({ orderId: 'sqord-' })).toEqual(['square:b', 'square:a']);
          expect(await found({ orderId: 'SQORD-100' })).toEqual(['square:b', 'square:a']);
          expect(await found({ orderId: 'SqOrd-1001' })).toEqual(['square:a']);
          expect(await found({ orderId: 'sqo' })).toEqual(['generic:c', 'square:b', 'square:a']);
          // % and _ are characters of the id, not patterns: "sq%" is no order's start.
          expect(await found({ orderId: 'sq%' })).toEqual([]);
          expect(await found({ orderId: 'sqo%_' })).toEqual(['generic:c']);
          expect(await found({ orderId: 'SqOrd-10011' })).toEqual([]);
          // One record with two matching refund ids is listed once.
          expect(await found({ refundId: 'REF-7' })).toEqual(['generic:e']);
          expect((await s.list({ refundId: 'ref-7', offset: 0, limit: 100 })).total).toBe(1);
          expect(await found({ refundId: 'ref-78' })).toEqual(['generic:e']);
          expect(await found({ refundId: 'ref-79' })).toEqual([]);
        }
      });

      it('refuses an order or refund id start that more than 1,000 ids share, naming the field; an id that few share is found', async () => {
        const many = Array.from({ length: PREFIX_MATCH_CAP + 1 }, (_, i) => {
          const r = makeRecord(`generic:W-${i}`, { orderId: `W-${String(i).padStart(4, '0')}`, at: i % 50, accrual: 'accrued', reversal: 'reversed' });
          r.reversal.refundIds = [`RW-${i}`];
          return r;
        });
        await Promise.all(many.map((r) => store.insert(r)));
        for (const [field, prefix] of [['orderId', 'w-'], ['refundId', 'rw-']] as const) {
          const refused = store.list({ [field]: prefix, offset: 0, limit: 10 });
          await expect(refused).rejects.toBeInstanceOf(ValidationError);
          await expect(store.list({ [field]: prefix, offset: 0, limit: 10 })).rejects.toThrow(/is the start of more than 1,000/);
          await expect(store.list({ [field]: prefix, offset: 0, limit: 10 })).rejects.toMatchObject({ issues: [{ field }] });
        }
        expect(ids((await store.list({ orderId: 'w-010', offset: 0, limit: 100 })).items).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `generic:W-${100 + i}`));
        expect(ids((await store.list({ refundId: 'RW-999', offset: 0, limit: 100 })).items)).toEqual(['generic:W-999']);
      });

      it("finds a customer's records by phone, email (any case) or card, through the search index only, of one merchant or all, after a reopen too", async () => {
        const ann = { phone: '+15550001111', email: 'ann@example.test', firstName: 'Ann' };
        await store.insert(makeRecord('generic:ann-1', { at: 0, accrual: 'accrued', customer: ann }));
        await store.insert(makeRecord('generic:ann-2', { at: 1, accrual: 'accrued', customer: { ...ann, phone: undefined } }));
        await store.insert({ ...makeRecord('generic:ann-3', { at: 2, accrual: 'accrued', customer: ann }), merchantId: 'bakery-17' });
        await store.insert(makeRecord('generic:card', { at: 3, accrual: 'accrued', customer: { serialNumber: '11-100001-2' } }));
        await store.insert(makeRecord('generic:bob', { at: 4, accrual: 'accrued', customer: { phone: '+15550002222' } }));
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          const found = async (customer: string, merchantId?: string) => ids((await s.list({ customer: [customer], ...(merchantId ? { merchantId } : {}), offset: 0, limit: 100 })).items);
          expect(await found('phone:+15550001111')).toEqual(['generic:ann-3', 'generic:ann-1']);
          expect(await found('phone:+15550001111', 'default')).toEqual(['generic:ann-1']);
          expect(await found('email:ann@example.test')).toEqual(['generic:ann-3', 'generic:ann-2', 'generic:ann-1']);
          expect(await found('card:11-100001-2')).toEqual(['generic:card']);
          expect(await found('phone:+15550009999')).toEqual([]);
          // Any of several: a record matching two is listed once.
          expect(ids((await s.list({ customer: ['phone:+15550001111', 'email:ann@example.test', 'card:11-100001-2'], offset: 0, limit: 100 })).items)).toEqual(['generic:card', 'generic:ann-3', 'generic:ann-2', 'generic:ann-1']);
        }
      });

      it("searches each customer identifier's newest 1,000 records only: what lies beyond is not read", async () => {
        const phone = '+15550007000';
        await Promise.all(Array.from({ length: CUSTOMER_SEARCH_DEPTH + 5 }, (_, i) => store.insert(makeRecord(`generic:C-${i}`, { at: i, accrual: 'accrued', customer: { phone } }))));
        const page = await store.list({ customer: [`phone:${phone}`], offset: 0, limit: 3 });
        expect([ids(page.items), page.total, page.totalCapped]).toEqual([[`generic:C-${CUSTOMER_SEARCH_DEPTH + 4}`, `generic:C-${CUSTOMER_SEARCH_DEPTH + 3}`, `generic:C-${CUSTOMER_SEARCH_DEPTH + 2}`], CUSTOMER_SEARCH_DEPTH, undefined]);
        // The five oldest are beyond the depth.
        expect((await store.list({ customer: [`phone:${phone}`], to: new Date(minutes(4)), offset: 0, limit: 10 })).total).toBe(0);
        expect((await store.list({ customer: [`phone:${phone}`], to: new Date(minutes(5)), offset: 0, limit: 10 })).items.map((r) => r.transactionId)).toEqual(['generic:C-5']);
      });

      it('keeps the POS payload a record was created from, once, and nothing for an insert that found the record', async () => {
        const payload = { receivedAt: minutes(0), pos: 'square', headers: { 'content-type': 'application/json' }, body: '{"type":"order.updated","data":{"id":"☕"}}', bodyEncoding: 'utf8' as const };
        const first = makeRecord('square:kept', { pos: 'square', at: 0 });
        expect((await store.insert(first, { payload })).created).toBe(true);
        expect((await store.insert(first, { payload: { ...payload, body: 'a later delivery' } })).created).toBe(false);
        await store.insert(makeRecord('square:none', { pos: 'square', at: 1 }));
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          expect(await s.getPayload('square:kept')).toEqual(payload);
          expect(await s.getPayload('square:none')).toBeUndefined();
          expect(await s.getPayload('square:missing')).toBeUndefined();
        }
      });

      it('lists what needs a person, of one merchant or all, and follows updates: a closed record leaves, changed repeats come and go', async () => {
        await store.insert(makeRecord('generic:settled', { at: 0, accrual: 'accrued' }));
        await store.insert(makeRecord('generic:pending', { at: 1, accrual: 'pending' }));
        await store.insert(makeRecord('generic:failed', { at: 2, accrual: 'failed' }));
        await store.insert(makeRecord('generic:doubt', { at: 3, accrual: 'in_doubt' }));
        await store.insert({ ...makeRecord('generic:other', { at: 4, accrual: 'failed' }), merchantId: 'bakery-17' });
        const lost = await store.insert(orphan('generic:lost', 5));
        const repeated = (await store.insert(makeRecord('generic:repeated', { at: 6, accrual: 'accrued' }))).record;
        const names = async (merchantId?: string) => (await store.listAttention({ merchantId, limit: 100 })).map((e) => e.record.transactionId).sort();
        expect(await names()).toEqual(['generic:doubt', 'generic:failed', 'generic:lost', 'generic:other']);
        expect(await names('bakery-17')).toEqual(['generic:other']);
        expect(await names('default')).toEqual(['generic:doubt', 'generic:failed', 'generic:lost']);

        const changed = await store.update(nextVersion(repeated, (r) => (r.changedRepeats = { count: 2, first: [{ at: minutes(7), amountCents: 100 }], latest: [] })));
        await store.update(nextVersion(lost.record, (r) => (r.closed = { at: minutes(8), actor: 'admin', reason: 'never known' })));
        expect(await names('default')).toEqual(['generic:doubt', 'generic:failed', 'generic:repeated']);
        await store.update(nextVersion(changed, (r) => (r.acknowledged = { at: minutes(9), actor: 'alice', reason: 'difference paid' })));
        const failed = (await store.get('generic:failed'))!;
        await store.update(nextVersion(failed, (r) => (r.acknowledged = { at: minutes(2000), actor: 'alice', reason: 'card closed for good' })));
        expect(await names('default')).toEqual(['generic:doubt']);
        const reopened = await reopen();
        expect(await reopened.listAttention({ merchantId: 'default', limit: 100 }).then((es) => es.map((e) => e.record.transactionId).sort())).toEqual(['generic:doubt']);
        // Closed and acknowledged records have left the index: counted, only what still needs a person.
        expect(await reopened.countAttention()).toEqual({ byKind: { in_doubt: { count: 1, oldestSince: minutes(3) }, failed: { count: 1, oldestSince: minutes(4) } }, byMerchant: { default: 1, 'bakery-17': 1 } });
        expect(await reopened.countAttention('default')).toEqual({ byKind: { in_doubt: { count: 1, oldestSince: minutes(3) } }, byMerchant: { default: 1 } });
        // The open-records count holds records with work left only.
        expect(await reopened.countOpenByStatus()).toEqual({ in_doubt: 1, pending: 1 });
      });

      it('pages a list by key (after a record) in the same order as by offset, with every filter, across a reopen', async () => {
        // Ties on createdAt are broken by the ledger key, descending: a keyset page never skips or repeats one.
        for (const [id, at] of [['generic:k-1', 0], ['generic:k-3', 1], ['generic:k-2', 1], ['square:k-4', 2], ['generic:k-5', 3], ['generic:k-6', 3]] as const) {
          await store.insert(makeRecord(id, { at, pos: id.split(':')[0], accrual: id === 'generic:k-2' ? 'accrued' : 'pending' }));
        }
        await store.insert({ ...makeRecord('generic:k-7', { at: 4 }), merchantId: 'bakery-17' });
        const cursorOf = (r: LedgerRecord) => ({ createdAt: r.createdAt, key: keyOf(r) });
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          const all = (await s.list({ offset: 0, limit: 100 })).items;
          expect(ids(all)).toEqual(['generic:k-7', 'generic:k-6', 'generic:k-5', 'square:k-4', 'generic:k-3', 'generic:k-2', 'generic:k-1']);
          const paged: LedgerRecord[] = [];
          for (let page = await s.list({ offset: 0, limit: 2 }); page.items.length > 0; page = await s.list({ after: cursorOf(page.items.at(-1)!), offset: 0, limit: 2 })) paged.push(...page.items);
          expect(paged).toEqual(all);
          // The cursor with filters: what follows it among the matches only; the total counts every match, before the cursor too.
          const after = await s.list({ pos: 'generic', merchantId: 'default', after: cursorOf(all[1]!), offset: 0, limit: 2 });
          expect(ids(after.items)).toEqual(['generic:k-5', 'generic:k-3']);
          expect(after.total).toBe(5);
          expect(ids((await s.list({ status: 'pending', after: cursorOf(all[4]!), offset: 0, limit: 10 })).items)).toEqual(['generic:k-1']);
        }
      });

      it(`counts a list's total up to ${LIST_COUNT_CAP} and says when more match`, async () => {
        const records = Array.from({ length: LIST_COUNT_CAP + 2 }, (_, i) => ({ ...makeRecord(`generic:many-${i}`, { at: i % 1440, accrual: 'accrued' }), version: 1 }));
        await importOrInsert(store, records);
        const page = await store.list({ offset: 0, limit: 3 });
        expect(page.items).toHaveLength(3);
        expect(page.total).toBe(LIST_COUNT_CAP);
        expect(page.totalCapped).toBe(true);
        const exact = await store.list({ from: new Date(minutes(0)), to: new Date(minutes(0)), offset: 0, limit: 3 });
        expect(exact.total).toBe(records.filter((r) => r.createdAt === minutes(0)).length);
        expect(exact.totalCapped).toBeUndefined();
      });

      it('the attention index: oldest first (since, key, kind), paged after an entry, counted per kind and merchant, written with each record', async () => {
        const failed = makeRecord('generic:failed', { at: 5, accrual: 'failed' });
        await store.insert(failed);
        await store.insert(makeRecord('generic:doubt-b', { at: 3, accrual: 'in_doubt' }));
        await store.insert(makeRecord('generic:doubt-a', { at: 3, accrual: 'in_doubt' }));
        await store.insert({ ...makeRecord('generic:theirs', { at: 1, accrual: 'in_doubt' }), merchantId: 'bakery-17' });
        const twice = makeRecord('generic:twice', { at: 0, accrual: 'failed' });
        twice.changedRepeats = { count: 1, first: [{ at: minutes(8), amountCents: 100 }], latest: [] };
        await store.insert(twice);
        for (let i = 0; i < 50; i++) await store.insert(makeRecord(`generic:fine-${i}`, { at: i, accrual: 'accrued' }));
        const order = [
          ['generic:twice', 'failed', minutes(0)],
          ['bakery-17/generic:theirs', 'in_doubt', minutes(1)],
          ['generic:doubt-a', 'in_doubt', minutes(3)],
          ['generic:doubt-b', 'in_doubt', minutes(3)],
          ['generic:failed', 'failed', minutes(5)],
          ['generic:twice', 'changed_repeats', minutes(8)],
        ];
        const entries = (es: { entry: { key: string; kind: string; since: string } }[]) => es.map((e) => [e.entry.key, e.entry.kind, e.entry.since]);
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          const all = await s.listAttention({ limit: 100 });
          expect(entries(all)).toEqual(order);
          // Each entry comes with its record, as it stands, and its merchant.
          expect(all[1]!.record.transactionId).toBe('generic:theirs');
          expect(all[1]!.entry.merchantId).toBe('bakery-17');
          expect(entries(await s.listAttention({ limit: 2, after: all[1]!.entry }))).toEqual(order.slice(2, 4));
          expect(entries(await s.listAttention({ limit: 10, after: all[4]!.entry }))).toEqual(order.slice(5));
          expect(entries(await s.listAttention({ merchantId: 'bakery-17', limit: 10 }))).toEqual([order[1]]);
          expect(await s.countAttention()).toEqual({
            byKind: { failed: { count: 2, oldestSince: minutes(0) }, in_doubt: { count: 3, oldestSince: minutes(1) }, changed_repeats: { count: 1, oldestSince: minutes(8) } },
            byMerchant: { default: 5, 'bakery-17': 1 },
          });
        }
        // Settled, acknowledged: the write that does it takes its entries out.
        const current = (await store.get('generic:failed'))!;
        await store.update(nextVersion(current, (r) => (r.acknowledged = { at: minutes(5000), actor: 'alice', reason: 'credited by hand' })));
        expect(entries(await store.listAttention({ limit: 100 }))).toEqual(order.filter(([key]) => key !== 'generic:failed'));
        expect((await store.countAttention()).byKind.failed).toEqual({ count: 1, oldestSince: minutes(0) });
      });
    });

    describe('durability across reopen', () => {
      it('keeps every record, the listing, the open set, the claims and the versions', async () => {
        const records = [
          makeRecord('generic:a', { at: 0, accrual: 'accrued', operationIds: [1] }),
          makeRecord('square:b', { pos: 'square', at: 1, accrual: 'in_doubt' }),
          makeRecord('generic:c', { at: 2, accrual: 'pending' }),
          makeRecord('generic:d', { at: 3, accrual: 'accrued', operationIds: [4, 5] }),
        ];
        for (const r of records) await store.insert(r);
        const b2 = await store.update(
          nextVersion(records[1]!, (r) => {
            r.accrual.state = 'accrued';
            r.accrual.operationIds = [2];
          }),
        );
        const d2 = await store.update(nextVersion(records[3]!, (r) => (r.accrual.operationIds = [5, 6])));
        const current = [records[0]!, b2, records[2]!, d2];

        const before = {
          count: await store.count(),
          list: await store.list({ offset: 0, limit: 100 }),
          open: await store.listOpen({ limit: 100 }),
          square: await store.list({ pos: 'square', status: 'accrued', offset: 0, limit: 100 }),
        };
        expect(ids(before.list.items)).toEqual(['generic:d', 'generic:c', 'square:b', 'generic:a']);
        expect(ids(before.open)).toEqual(['generic:c']);

        const reopened = await reopen();
        await expect(reopened.ping()).resolves.toBeUndefined();
        expect(await reopened.count()).toBe(before.count);
        for (const r of current) expect(await reopened.get(r.transactionId)).toEqual(r);
        expect(await reopened.list({ offset: 0, limit: 100 })).toEqual(before.list);
        expect(await reopened.list({ pos: 'square', status: 'accrued', offset: 0, limit: 100 })).toEqual(before.square);
        expect(await reopened.listOpen({ limit: 100 })).toEqual(before.open);
        expect(await reopened.findOperationClaim('default', 1)).toBe('generic:a');
        expect(await reopened.findOperationClaim('default', 2)).toBe('square:b');
        expect(await reopened.findOperationClaim('default', 4)).toBeUndefined();
        expect(await reopened.findOperationClaim('default', 5)).toBe('generic:d');
        expect(await reopened.findOperationClaim('default', 6)).toBe('generic:d');

        // Still insert-once and compare-and-set after the restart.
        expect(await reopened.insert(makeRecord('generic:a', { orderId: 'again' }))).toEqual({ created: false, record: records[0] });
        await expect(reopened.update(nextVersion(records[2]!))).resolves.toMatchObject({ version: 2 });
        await expect(reopened.update(nextVersion(records[1]!))).rejects.toBeInstanceOf(VersionConflictError);
        const c3 = await reopened.update(settle((await reopened.get('generic:c'))!));
        expect(c3.version).toBe(3);
        expect(await reopened.listOpen({ limit: 100 })).toEqual([]);
        expect(await reopened.count()).toBe(4);
      });

      it('an empty store reopens empty, and what is written after a reopen survives the next', async () => {
        let s = await reopen();
        expect(await s.count()).toBe(0);
        const a = makeRecord('generic:a', { operationIds: [9], accrual: 'accrued' });
        await s.insert(a);
        s = await reopen();
        expect(await s.get('generic:a')).toEqual(a);
        expect(await s.findOperationClaim('default', 9)).toBe('generic:a');
        expect(ids(await s.listOpen({ limit: 10 }))).toEqual([]);
      });
    });
  });
}
