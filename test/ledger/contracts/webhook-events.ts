/**
 * The webhook events' contract: a delivery the bridge took is remembered by its POS and dedupe key,
 * once; the same key again is a duplicate (false), for good (across a reopen); another POS's equal
 * key is its own.
 */
import { describe, expect, it } from '@jest/globals';
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
  });
}
