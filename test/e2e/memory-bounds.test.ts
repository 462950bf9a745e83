/**
 * What the bridge keeps in memory does not grow with what it has seen: the merchant lookups that
 * requests drive (any token a POS post bears, any account a webhook names) are cached, and the
 * caches keep at most CACHE_ENTRIES entries whatever comes; a scrape of /metrics reads no ledger.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { CACHE_ENTRIES } from '../../src/merchants/registry.js';
import { checkout, postJson, startHarness, type Harness } from '../support/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ overrides: { startWorker: false } });
});
afterAll(async () => {
  await h.close();
});

describe('memory that requests drive', () => {
  it(`keeps at most ${CACHE_ENTRIES} lookups of tokens and accounts however many distinct ones come, and still finds the ones that are known`, async () => {
    const registry = h.bridge.registry;
    for (let i = 0; i < CACHE_ENTRIES + 2_000; i++) {
      expect(await registry.byPosToken(`pos_forged_${i}_0123456789abcdef`)).toBeUndefined();
      await registry.byAccount('shopify', `shop-${i}.myshopify.com`);
    }
    const sizes = registry.cacheSizes;
    expect(sizes.byToken).toBe(CACHE_ENTRIES);
    expect(sizes.byAccount).toBe(CACHE_ENTRIES);
    // The default merchant's token is still its own, and a checkout with it goes through.
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'MEM-1' }))).body.status).toBe('accrued');
  }, 60_000);

  it('answers a scrape from the last count of the ledger gauges, without reading the ledger', async () => {
    const store = h.bridge.store;
    const reads: string[] = [];
    const spied = ['list', 'listAttention', 'countAttention', 'countOpenByStatus', 'countOpenDeadLetters', 'listDeadLetters', 'listOpen', 'get', 'count', 'countOpen'] as const;
    const originals = spied.map((name) => [name, (store as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!] as const);
    for (const [name, original] of originals) {
      (store as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
        reads.push(name);
        return original.apply(store, args);
      };
    }
    try {
      const scrape = await request(h.bridge.url).get('/metrics');
      expect(scrape.status).toBe(200);
      expect(scrape.text).toMatch(/^bridge_ledger_reading_age_seconds \d/m);
      expect(reads).toEqual([]);
      // The timer's count reads the ledger, through its counts only.
      await h.bridge.readings.refresh();
      expect(new Set(reads)).toEqual(new Set(['countOpenByStatus', 'countAttention', 'countOpenDeadLetters', 'listDeadLetters']));
    } finally {
      for (const [name, original] of originals) (store as unknown as Record<string, unknown>)[name] = original;
    }
  });
});
