/**
 * The backfill states' contract: one per merchant and POS, changed one writer at a time.
 */
import { describe, expect, it } from '@jest/globals';
import { minutes } from './factories.js';
import { type BackfillState, type BackfillStateStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function backfillStateStoreContract(name: string, makeStore: MakeStore<BackfillStateStore>): void {
  describe(`BackfillStateStore contract: ${name}`, () => {
    let store: BackfillStateStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('backfill states', () => {
      const state = (merchantId: string, pos: string, watermark?: string): BackfillState => ({ merchantId, pos, account: `${pos}-account`, ...(watermark ? { watermark } : {}) });

      it('keeps one state per merchant and POS, lists them by merchant then POS, and keeps them across a reopen', async () => {
        expect(await store.getBackfillState('m1', 'square')).toBeUndefined();
        await store.updateBackfillState('m2', 'clover', () => state('m2', 'clover', minutes(1)));
        await store.updateBackfillState('m1', 'square', () => state('m1', 'square', minutes(2)));
        await store.updateBackfillState('m1', 'clover', () => state('m1', 'clover'));
        // The key is the merchant and POS it is stored under, whatever the document says.
        await store.updateBackfillState('m1', 'square', (s) => ({ ...s!, merchantId: 'other', watermark: minutes(3) }));
        expect(await store.getBackfillState('m1', 'square')).toEqual(state('m1', 'square', minutes(3)));
        const keys = (states: BackfillState[]) => states.map((s) => `${s.merchantId}/${s.pos}`);
        expect(keys(await store.listBackfillStates())).toEqual(['m1/clover', 'm1/square', 'm2/clover']);
        expect(keys(await store.listBackfillStates('m2'))).toEqual(['m2/clover']);
        await reopen();
        expect(await store.getBackfillState('m1', 'square')).toEqual(state('m1', 'square', minutes(3)));
        expect(keys(await store.listBackfillStates())).toEqual(['m1/clover', 'm1/square', 'm2/clover']);
      });

      it('updateBackfillState: answering undefined writes nothing; of two instances leasing one account at once exactly one gets it', async () => {
        expect(await store.updateBackfillState('m1', 'toast', () => undefined)).toBeUndefined();
        expect(await store.getBackfillState('m1', 'toast')).toBeUndefined();
        const lease = (owner: string) => (s: BackfillState | undefined) => (s?.lease ? undefined : { ...(s ?? state('m1', 'toast')), lease: { owner, until: minutes(99) } });
        // The first lease of an account never written before: both race to create it.
        const taken = await Promise.all(['instance-a', 'instance-b', 'instance-c'].map((owner) => store.updateBackfillState('m1', 'toast', lease(owner))));
        const owners = taken.map((s) => s!.lease!.owner);
        expect(new Set(owners).size).toBe(1);
        // Given back and taken again: 30 concurrent passes count one each.
        await store.updateBackfillState('m1', 'toast', (s) => ({ ...s!, lease: undefined, lastPass: undefined }));
        const count = (s: BackfillState | undefined): BackfillState => ({ ...s!, nextPassAt: String(Number(s!.nextPassAt ?? 0) + 1) });
        await Promise.all(Array.from({ length: 30 }, () => store.updateBackfillState('m1', 'toast', count)));
        expect((await store.getBackfillState('m1', 'toast'))!.nextPassAt).toBe('30');
        expect((await store.getBackfillState('m1', 'toast'))!.lease).toBeUndefined();
      });
    });
  });
}
