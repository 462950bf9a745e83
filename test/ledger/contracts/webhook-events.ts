/**
 * The webhook events' contract: a delivery the bridge took is remembered by its POS and dedupe key,
 * once; the same key again is a duplicate (false), for good (across a reopen); another POS's equal
 * key is its own. A delivery bound to an account stays bound to it: insert-once, across a reopen,
 * and with the clock days ahead (webhook events may expire; bindings never do).
 */
import { describe, expect, it, jest } from '@jest/globals';
import type { StoreLifecycle, WebhookEventStore } from '../../../src/ledger/store.js';
import { storeForEachTest, type MakeStore } from './subject.js';

export function webhookEventStoreContract(name: string, makeStore: MakeStore<WebhookEventStore>): void {
  describe(`WebhookEventStore contract: ${name}`, () => {
    let store: WebhookEventStore & StoreLifecycle;
    const reopen = storeForEachTest(makeStore, (s) => (store = s));

    it('remembers a key once: the first remember is true, every later one false, and has() says so', async () => {
      expect(await store.hasWebhookEvent('square', 'evt-1')).toBe(false);
      expect(await store.rememberWebhookEvent('square', 'evt-1')).toBe(true);
      expect(await store.rememberWebhookEvent('square', 'evt-1')).toBe(false);
      expect(await store.hasWebhookEvent('square', 'evt-1')).toBe(true);
      expect(await store.hasWebhookEvent('square', 'evt-2')).toBe(false);
    });

    it("keeps each POS's keys apart: an equal key from another POS is not a duplicate", async () => {
      expect(await store.rememberWebhookEvent('square', 'same-key')).toBe(true);
      expect(await store.rememberWebhookEvent('clover', 'same-key')).toBe(true);
      expect(await store.hasWebhookEvent('toast', 'same-key')).toBe(false);
    });

    it('of two takers of one key at once, exactly one gets it', async () => {
      const taken = await Promise.all(Array.from({ length: 8 }, () => store.rememberWebhookEvent('shopify', 'race')));
      expect(taken.filter(Boolean)).toHaveLength(1);
    });

    it('remembers across a reopen', async () => {
      await store.rememberWebhookEvent('loyverse', 'kept');
      const reopened = await reopen();
      expect(await reopened.hasWebhookEvent('loyverse', 'kept')).toBe(true);
      expect(await reopened.rememberWebhookEvent('loyverse', 'kept')).toBe(false);
    });

    it('binds a delivery to the first account it is taken for: a later account is answered the first', async () => {
      expect(await store.bindDelivery('toast', 'digest-1', 'restaurant-a')).toBe('restaurant-a');
      expect(await store.bindDelivery('toast', 'digest-1', 'restaurant-a')).toBe('restaurant-a');
      expect(await store.bindDelivery('toast', 'digest-1', 'restaurant-b')).toBe('restaurant-a');
      expect(await store.bindDelivery('toast', 'digest-2', 'restaurant-b')).toBe('restaurant-b');
      // Another POS's equal digest is its own.
      expect(await store.bindDelivery('shopify', 'digest-1', 'shop-b')).toBe('shop-b');
      expect(await store.deliveryBinding('toast', 'digest-1')).toBe('restaurant-a');
      expect(await store.deliveryBinding('toast', 'digest-9')).toBeUndefined();
      // Looking binds nothing.
      expect(await store.bindDelivery('toast', 'digest-9', 'restaurant-c')).toBe('restaurant-c');
      // "Named no account" is an account like any other.
      expect(await store.bindDelivery('shopify', 'digest-3', '')).toBe('');
      expect(await store.bindDelivery('shopify', 'digest-3', 'shop-a')).toBe('');
    });

    it('of many binding one delivery at once to different accounts, all are answered the same one', async () => {
      const bound = await Promise.all(Array.from({ length: 8 }, (_, n) => store.bindDelivery('shopify', 'raced', `shop-${n}`)));
      expect(new Set(bound).size).toBe(1);
      expect(await store.bindDelivery('shopify', 'raced', 'shop-x')).toBe(bound[0]);
    });

    it('keeps a binding across a reopen, also with the clock eight days ahead', async () => {
      await store.bindDelivery('shopify', 'kept-digest', 'shop-a.myshopify.com');
      jest.useFakeTimers({ now: Date.now() + 8 * 24 * 3600_000, doNotFake: ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
      try {
        const reopened = await reopen();
        expect(await reopened.bindDelivery('shopify', 'kept-digest', 'shop-b.myshopify.com')).toBe('shop-a.myshopify.com');
      } finally {
        jest.useRealTimers();
      }
    });
  });
}
