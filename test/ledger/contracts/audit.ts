/**
 * The audit trail's contract: operator actions kept for good, newest first, filtered.
 */
import { describe, expect, it } from '@jest/globals';
import { minutes } from './factories.js';
import { type AuditStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function auditStoreContract(name: string, makeStore: MakeStore<AuditStore>): void {
  describe(`AuditStore contract: ${name}`, () => {
    let store: AuditStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('audit trail', () => {
      it('keeps the audit trail newest first, filtered by merchant, actor and time, across a reopen', async () => {
        const entry = (n: number, actor: string, merchantId?: string) => ({ at: minutes(n), actor, action: 'retry', target: `generic:${n}`, reason: `because ${n}`, ...(merchantId ? { merchantId } : {}), outcome: 'accrued' });
        await store.appendAudit(entry(1, 'admin', 'default'));
        await store.appendAudit(entry(2, 'alice', 'bakery-17'));
        await store.appendAudit(entry(3, 'merchant:bakery-17', 'bakery-17'));
        await store.appendAudit(entry(3, 'alice'));
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          const all = await s.listAudit({ offset: 0, limit: 10 });
          expect(all.total).toBe(4);
          // Newest first; of two at the same time, the one written later first.
          expect(all.items).toEqual([entry(3, 'alice'), entry(3, 'merchant:bakery-17', 'bakery-17'), entry(2, 'alice', 'bakery-17'), entry(1, 'admin', 'default')]);
          expect((await s.listAudit({ merchantId: 'bakery-17', offset: 0, limit: 10 })).items.map((e) => e.actor)).toEqual(['merchant:bakery-17', 'alice']);
          expect((await s.listAudit({ actor: 'alice', offset: 0, limit: 1 })).total).toBe(2);
          expect((await s.listAudit({ actor: 'alice', offset: 1, limit: 1 })).items).toEqual([entry(2, 'alice', 'bakery-17')]);
          expect((await s.listAudit({ from: new Date(minutes(2)), to: new Date(minutes(2)), offset: 0, limit: 10 })).items).toEqual([entry(2, 'alice', 'bakery-17')]);
        }
      });

      it('matches the actor by its start, exactly: a prefix finds every actor it begins, its LIKE wildcards and case taken as written', async () => {
        const entry = (n: number, actor: string) => ({ at: minutes(n), actor, action: 'retry', target: `generic:${n}`, outcome: 'accrued' });
        for (const [n, actor] of ['alice', 'alicia', 'Alina', 'merchant:north', 'merchant:south', 'a_b%c', 'axb'].entries()) await store.appendAudit(entry(n + 1, actor));
        const actors = async (actor: string) => (await store.listAudit({ actor, offset: 0, limit: 10 })).items.map((e) => e.actor).sort();
        expect(await actors('ali')).toEqual(['alice', 'alicia']);
        expect(await actors('alice')).toEqual(['alice']);
        expect(await actors('merchant:')).toEqual(['merchant:north', 'merchant:south']);
        expect(await actors('a_')).toEqual(['a_b%c']);
        expect(await actors('a_b%')).toEqual(['a_b%c']);
        expect(await actors('ALI')).toEqual([]);
        expect((await store.listAudit({ actor: 'merchant:', offset: 0, limit: 1 })).total).toBe(2);
      });
    });
  });
}
