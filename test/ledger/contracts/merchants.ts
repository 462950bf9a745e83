/**
 * The merchants' contract: insert-once, compare-and-set, one holder per POS account and per token, found by token hash and by account.
 */
import { describe, expect, it } from '@jest/globals';
import { minutes, makeMerchant } from './factories.js';
import { ConflictError, VersionConflictError } from '../../../src/kernel/errors.js';
import { type MerchantStore, type StoreLifecycle } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function merchantStoreContract(name: string, makeStore: MakeStore<MerchantStore>): void {
  describe(`MerchantStore contract: ${name}`, () => {
    let store: MerchantStore & StoreLifecycle;
    /** Reopens on the same location; later calls in the test use the new store. */
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    describe('merchants', () => {
      it('inserts once, reads back, replaces by compare-and-set on version', async () => {
        const m = makeMerchant('bakery-17');
        expect(await store.saveMerchant(m)).toEqual(m);
        expect(await store.getMerchant('bakery-17')).toEqual(m);
        await expect(store.saveMerchant(makeMerchant('bakery-17'))).rejects.toBeInstanceOf(ConflictError);
        const v2 = { ...m, version: 2, status: 'suspended' as const, updatedAt: minutes(5) };
        expect(await store.saveMerchant(v2)).toEqual(v2);
        // A writer that read version 1 loses.
        await expect(store.saveMerchant({ ...m, version: 2, name: 'stale' })).rejects.toBeInstanceOf(VersionConflictError);
        expect(await store.getMerchant('bakery-17')).toEqual(v2);
        expect(await store.getMerchant('nobody')).toBeUndefined();
      });

      it('a POS account belongs to one merchant (case-insensitive), and is free again once given up', async () => {
        await store.saveMerchant(makeMerchant('a', { shopify: 'Shop-A.myshopify.com' }));
        await expect(store.saveMerchant(makeMerchant('b', { shopify: 'shop-a.myshopify.com' }))).rejects.toThrow(/belongs to merchant a/);
        expect(await store.getMerchant('b')).toBeUndefined();
        // The same id on another POS is another account.
        await store.saveMerchant(makeMerchant('c', { square: 'shop-a.myshopify.com' }));
        expect((await store.findMerchantByAccount('shopify:shop-a.myshopify.com'))?.id).toBe('a');
        expect((await store.findMerchantByAccount('square:shop-a.myshopify.com'))?.id).toBe('c');
        const a = (await store.getMerchant('a'))!;
        await store.saveMerchant({ ...a, version: 2, pos: {} });
        expect(await store.findMerchantByAccount('shopify:shop-a.myshopify.com')).toBeUndefined();
        expect((await store.saveMerchant(makeMerchant('b', { shopify: 'shop-a.myshopify.com' }))).id).toBe('b');
      });

      it('finds a merchant by the hash of its POS or admin token; a rotated token finds nothing', async () => {
        const m = makeMerchant('m-1');
        await store.saveMerchant(m);
        expect((await store.findMerchantByToken('pos', m.tokens.pos))?.id).toBe('m-1');
        expect((await store.findMerchantByToken('admin', m.tokens.admin))?.id).toBe('m-1');
        expect(await store.findMerchantByToken('admin', m.tokens.pos)).toBeUndefined();
        await store.saveMerchant({ ...m, version: 2, tokens: { pos: 'new-pos-hash', admin: 'new-admin-hash' } });
        expect(await store.findMerchantByToken('pos', m.tokens.pos)).toBeUndefined();
        expect((await store.findMerchantByToken('pos', 'new-pos-hash'))?.id).toBe('m-1');
        await expect(store.saveMerchant({ ...makeMerchant('m-2'), tokens: { pos: 'new-pos-hash', admin: 'x' } })).rejects.toBeInstanceOf(ConflictError);
      });

      it('lists oldest first, in pages, and keeps everything across a reopen', async () => {
        for (const [i, id] of ['m-c', 'm-a', 'm-b'].entries()) await store.saveMerchant({ ...makeMerchant(id), createdAt: minutes(i) });
        expect((await store.listMerchants({ offset: 0, limit: 2 })).items.map((m) => m.id)).toEqual(['m-c', 'm-a']);
        expect(await store.listMerchants({ offset: 2, limit: 2 })).toMatchObject({ total: 3, items: [{ id: 'm-b' }] });
        const before = await store.getMerchant('m-a');
        await reopen();
        expect(await store.getMerchant('m-a')).toEqual(before);
        expect((await store.listMerchants({ offset: 0, limit: 10 })).total).toBe(3);
      });
    });
  });
}
