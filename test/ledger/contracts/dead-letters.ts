/**
 * The dead letters' contract: kept by id, listed open or all, due by their schedule, changed one writer at a time.
 */
import { describe, expect, it } from '@jest/globals';
import { minutes, makeLetter } from './factories.js';
import { type DeadLetter, type DeadLetterStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function deadLetterStoreContract(name: string, makeStore: MakeStore<DeadLetterStore>): void {
  describe(`DeadLetterStore contract: ${name}`, () => {
    let store: DeadLetterStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('dead letters', () => {
      const letterIds = (letters: DeadLetter[]) => letters.map((l) => l.id);

      it('keeps a letter whole, lists newest first by pos, merchant and open, and keeps them across a reopen', async () => {
        const letters = [makeLetter('dl-a', { at: 0 }), makeLetter('dl-b', { at: 2, pos: 'clover', merchantId: 'bakery-17' }), makeLetter('dl-c', { at: 1, resolved: true })];
        for (const l of letters) await store.saveDeadLetter(l);
        expect(await store.getDeadLetter('dl-a')).toEqual(letters[0]);
        expect(await store.getDeadLetter('dl-nope')).toBeUndefined();
        expect(await store.listDeadLetters({ offset: 0, limit: 10 })).toEqual({ items: [letters[1], letters[2], letters[0]], total: 3 });
        expect(await store.listDeadLetters({ oldestFirst: true, offset: 0, limit: 10 })).toEqual({ items: [letters[0], letters[2], letters[1]], total: 3 });
        expect(letterIds((await store.listDeadLetters({ pos: 'square', offset: 0, limit: 10 })).items)).toEqual(['dl-c', 'dl-a']);
        expect(letterIds((await store.listDeadLetters({ merchantId: 'bakery-17', offset: 0, limit: 10 })).items)).toEqual(['dl-b']);
        expect(await store.listDeadLetters({ open: true, offset: 1, limit: 1 })).toEqual({ items: [letters[0]], total: 2 });
        await store.saveDeadLetter({ ...makeLetter('dl-d', { at: 3, merchantId: 'bakery-17' }), reasonCode: 'invalid_payload' });
        expect(await store.countOpenDeadLetters()).toEqual({ byReason: { unclassified: 2, invalid_payload: 1 }, byMerchant: { '': 1, 'bakery-17': 2 } });
        await reopen();
        expect(await store.getDeadLetter('dl-b')).toEqual(letters[1]);
        expect((await store.listDeadLetters({ open: false, offset: 0, limit: 10 })).items).toEqual([letters[2]]);
        expect(await store.countOpenDeadLetters()).toEqual({ byReason: { unclassified: 2, invalid_payload: 1 }, byMerchant: { '': 1, 'bakery-17': 2 } });
      });

      it('lists the letters due for an automatic run by the clock it is given, earliest first, never a resolved one or one waiting for a person', async () => {
        await store.saveDeadLetter(makeLetter('dl-late', { at: 0, nextAt: 30 }));
        await store.saveDeadLetter(makeLetter('dl-early', { at: 5, nextAt: 10 }));
        await store.saveDeadLetter(makeLetter('dl-person', { at: 1 }));
        await store.saveDeadLetter(makeLetter('dl-done', { at: 2, nextAt: 1, resolved: true }));
        expect(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(9)), limit: 10 })).toEqual([]);
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(10)), limit: 10 }))).toEqual(['dl-early']);
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(60)), limit: 10 }))).toEqual(['dl-early', 'dl-late']);
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(60)), limit: 1 }))).toEqual(['dl-early']);
        // Open letters by who moves them on: the bridge (a run scheduled) or a person.
        expect(letterIds((await store.listDeadLetters({ awaiting: 'bridge', offset: 0, limit: 10 })).items)).toEqual(['dl-early', 'dl-late']);
        expect((await store.listDeadLetters({ awaiting: 'operator', offset: 0, limit: 10 })).items).toEqual([makeLetter('dl-person', { at: 1 })]);
        await reopen();
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(60)), limit: 10 }))).toEqual(['dl-early', 'dl-late']);
        expect((await store.listDeadLetters({ awaiting: 'bridge', offset: 0, limit: 10 })).total).toBe(2);
      });

      it('a claim keeps a due letter out of the listing until it ends; the schedule follows updates', async () => {
        await store.saveDeadLetter(makeLetter('dl-1', { nextAt: 10, claim: { owner: 'instance-a', until: 20 } }));
        expect(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(15)), limit: 10 })).toEqual([]);
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(20)), limit: 10 }))).toEqual(['dl-1']);
        // The run failed again: the next one is later, and the claim is given back.
        await store.updateDeadLetter('dl-1', (l) => ({ ...l!, retry: { transient: true, attempts: 1, nextAt: minutes(40) } }));
        expect(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(39)), limit: 10 })).toEqual([]);
        expect(letterIds(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(40)), limit: 10 }))).toEqual(['dl-1']);
        // Attempts used up: it waits for a person.
        await store.updateDeadLetter('dl-1', (l) => ({ ...l!, retry: { transient: true, attempts: 8 } }));
        expect(await store.listDueDeadLetters({ nowMs: Date.parse(minutes(1000)), limit: 10 })).toEqual([]);
        expect(letterIds((await store.listDeadLetters({ awaiting: 'operator', offset: 0, limit: 10 })).items)).toEqual(['dl-1']);
      });

      it('updateDeadLetter: creates, changes or leaves a letter in one step; 40 concurrent changes all count', async () => {
        expect(await store.updateDeadLetter('dl-new', (current) => (current ? undefined : makeLetter('dl-new')))).toEqual(makeLetter('dl-new'));
        // Answering undefined writes nothing and answers what is stored.
        expect(await store.updateDeadLetter('dl-new', () => undefined)).toEqual(makeLetter('dl-new'));
        expect(await store.updateDeadLetter('dl-none', () => undefined)).toBeUndefined();
        expect(await store.getDeadLetter('dl-none')).toBeUndefined();
        await Promise.all(Array.from({ length: 40 }, () => store.updateDeadLetter('dl-new', (l) => ({ ...l!, deliveries: l!.deliveries + 1 }))));
        expect((await store.getDeadLetter('dl-new'))!.deliveries).toBe(41);
        // Two runs try to claim one letter at once: exactly one finds it free.
        const claims = await Promise.all(
          ['instance-a', 'instance-b'].map((owner) =>
            store.updateDeadLetter('dl-new', (l) => (l!.retry?.claim ? undefined : { ...l!, retry: { ...l!.retry!, claim: { owner, until: minutes(99) } } })),
          ),
        );
        const owners = claims.map((l) => l!.retry!.claim!.owner);
        expect(owners[0]).toBe(owners[1]);
        await reopen();
        expect((await store.getDeadLetter('dl-new'))!.retry!.claim!.owner).toBe(owners[0]);
      });
    });
  });
}
