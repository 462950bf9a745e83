/**
 * The settings' contract: what the bridge learned, by name.
 */
import { describe, expect, it } from '@jest/globals';
import { type SettingStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function settingStoreContract(name: string, makeStore: MakeStore<SettingStore>): void {
  describe(`SettingStore contract: ${name}`, () => {
    let store: SettingStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('settings', () => {
      it('keeps settings by name, replaced by a later value, after a reopen too', async () => {
        expect(await store.getSetting('reversal_shape/default')).toBeUndefined();
        await store.putSetting('reversal_shape/default', '{"eventId":24,"sign":-1}');
        await store.putSetting('reversal_shape/bakery-17', '{"eventId":77,"sign":1}');
        await store.putSetting('reversal_shape/default', '{"eventId":24,"sign":1}');
        for (const restart of [false, true]) {
          const s = restart ? await reopen() : store;
          expect(await s.getSetting('reversal_shape/default')).toBe('{"eventId":24,"sign":1}');
          expect(await s.getSetting('reversal_shape/bakery-17')).toBe('{"eventId":77,"sign":1}');
        }
      });
    });
  });
}
