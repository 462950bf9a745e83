/**
 * The file ledger holds customers' phones, emails and names (records, dead letters' bodies): after
 * real writes over HTTP (a checkout, a webhook kept as a dead letter), every file of the ledger is
 * readable by its owner only, and its folders are open to its owner only.
 */
import { readFileSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { checkout, startHarness, type Harness, postJson } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const settings: PosSettings = { webhookSecret: 'shpss_e2e_secret_0123456789', apiBaseUrl: '' };

let h: Harness;

beforeEach(async () => {
  h = await startHarness({ overrides: { posSettings: { shopify: settings } } });
});
afterEach(async () => {
  await h.close();
});

const mode = (path: string) => statSync(path).mode & 0o777;

/** Every file and folder under `dir` with its permission bits, as `name: 0oNNN` lines. */
async function modesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).sort().map((entry) => `${entry}: 0o${mode(join(dir, entry)).toString(8)}`);
}

describe('ledger files are private to the bridge', () => {
  it('after a checkout and a dead letter over HTTP: files 0600, folders 0700', async () => {
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout())).body.status).toBe('accrued');
    // Shopify's own 2016 order fixture does not add up: kept whole (customer and all) as a dead letter.
    const body = readFileSync(new URL('../fixtures/shopify/order_fixture_shopify_python_api.json', import.meta.url), 'utf8');
    const res = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [signature(shopifyAdapter, settings, body), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', 'evt-1']]);
    expect(res.body.results[0].action).toBe('dead_lettered');
    const letter = `${res.body.results[0].deadLetterId as string}.json`;

    expect(await modesUnder(h.dir)).toEqual([
      'ledger.dead-letters: 0o700',
      `ledger.dead-letters/${letter}: 0o600`,
      'ledger.index.sqlite: 0o600',
      'ledger.index.sqlite-wal: 0o600',
      'ledger.journal: 0o700',
      'ledger.journal/000001.jsonl: 0o600',
      'ledger.json: 0o600',
      'ledger.json.lock: 0o600',
      'ledger.merchants: 0o700',
    ]);
  });
});
