/**
 * `npm start` with nothing configured, as a process (the built dist/src/main.js): sandbox makes its
 * own SECRETS_KEY in a private file beside the ledger and starts with two demo merchants besides the
 * default one, created from nothing but their app tokens at the in-process simulator; a restart
 * that keeps the ledger (SANDBOX_LEDGER=keep) finds them and creates nothing, and issues new tokens
 * (the old ones stop working). Outside sandbox,
 * a ledger holding merchants without SECRETS_KEY stops start-up with one line naming the variable.
 * Needs `npm run build` first (npm test does it).
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { BRIDGE_PROCESS_POS_TOKEN } from '../../scripts/bridge-process.js';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN, checkout } from '../support/harness.js';
import { bannerOf, simulatorBooks, type Banner } from '../support/sandbox.js';
import { postRaw, signature } from '../support/webhooks.js';

describe('sandbox: demo merchants and its own SECRETS_KEY', () => {
  let dir: string;
  let ledgerUrl: string;
  const running: BridgeProcess[] = [];
  const start = async (env: Record<string, string> = {}) => {
    // No LOYALTY_BASE_URL: sandbox. POS_TOKEN (spawnBridge's) keeps direct posts on tokens, so a wrong one is a 401.
    const bridge = await spawnBridge({ LEDGER_URL: ledgerUrl, LOG_LEVEL: 'info', ...env });
    running.push(bridge);
    return bridge;
  };
  const admin = (bridge: BridgeProcess, path: string, token = ADMIN_TOKEN) => fetch(`${bridge.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const post = (bridge: BridgeProcess, path: string, body: unknown, token: string) =>
    fetch(`${bridge.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
  const books = simulatorBooks;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bridge-sandbox-'));
    ledgerUrl = `file:${join(dir, 'data', 'ledger.json')}`;
  });
  // A test that fails before its own SIGTERM leaves no bridge holding the ledger for the next one
  // (which would then fail on the lock, hiding what went wrong first).
  afterEach(async () => {
    await Promise.all(running.splice(0).map((b) => b.kill('SIGKILL')));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  let firstRun: Banner;

  it('the first start generates a private SECRETS_KEY file and creates two demo merchants from their app tokens, printing their tokens', async () => {
    const bridge = await start();
    const banner = await bannerOf(bridge);
    firstRun = banner;
    const keyFile = join(dir, 'data', 'sandbox-secrets.key');
    expect(banner.text).toContain(`secrets key: ${keyFile} (generated now; SECRETS_KEY is not set)`);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'data')).mode & 0o777).toBe(0o700);
    expect(Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'base64')).toHaveLength(32);

    expect(Object.keys(banner.demos).sort()).toEqual(['demo-bakery', 'demo-cafe']);
    expect(banner.demos['demo-bakery']).toMatchObject({
      created: true,
      summary: 'square DEMOBAKERYSQ1, shopify demo-bakery.myshopify.com, clover DEMOBAKERYCL1, toast b0000000-0000-4000-8000-000000000001, loyverse b0000000-0000-4000-8000-000000000002, EUR, DE',
    });
    expect(banner.demos['demo-cafe']).toMatchObject({
      created: true,
      summary: 'square DEMOCAFESQ001, shopify demo-cafe.myshopify.com, clover DEMOCAFECL001, toast c0000000-0000-4000-8000-000000000001, loyverse c0000000-0000-4000-8000-000000000002, GBP, GB',
    });
    // Printed, never logged.
    const logs = bridge.output().split('\n').filter((l) => l.startsWith('{'));
    for (const demo of Object.values(banner.demos)) expect(logs.join('\n')).not.toContain(demo.posToken);

    // What resolve-credentials filled in, as the API shows it.
    const list = (await (await admin(bridge, '/v1/admin/merchants')).json()) as any;
    expect(list.total).toBe(2);
    expect(list.items.map((m: any) => [m.id, m.currency, m.phoneRegion, m.pos.square.merchantId, m.pos.shopify.shopDomain])).toEqual([
      ['demo-bakery', 'EUR', 'DE', 'DEMOBAKERYSQ1', 'demo-bakery.myshopify.com'],
      ['demo-cafe', 'GBP', 'GB', 'DEMOCAFESQ001', 'demo-cafe.myshopify.com'],
    ]);

    // A checkout with each demo merchant's POS token lands in its own books; a Shopify webhook for demo-cafe's shop in its.
    for (const id of ['demo-bakery', 'demo-cafe']) {
      const res = await post(bridge, '/v1/checkouts/generic', checkout({ orderId: 'DEMO-1' }), banner.demos[id]!.posToken);
      expect([id, res.status, ((await res.json()) as any).status]).toEqual([id, 200, 'accrued']);
      expect((await books(banner, id)).transactions['generic:DEMO-1']).toMatchObject({ accruals: 1, amount: 5997 });
    }
    const order = {
      id: 4242,
      currency: 'GBP',
      financial_status: 'paid',
      taxes_included: false,
      created_at: '2026-11-21T10:00:00Z',
      processed_at: '2026-11-21T10:05:00Z',
      email: 'ann@example.test',
      customer: { id: 1, email: 'ann@example.test' },
      line_items: [{ id: 1, variant_id: 11, product_id: 111, title: 'Flat white', quantity: 1, price: '3.50', discount_allocations: [], tax_lines: [] }],
      shipping_lines: [],
      total_discounts: '0.00',
      subtotal_price: '3.50',
      total_tax: '0.00',
      total_price: '3.50',
    };
    const raw = JSON.stringify(order);
    const hook = await postRaw(`${bridge.url}/v1/webhooks/shopify`, raw, [
      signature(shopifyAdapter, { webhookSecret: SANDBOX_WEBHOOK_SECRET, apiBaseUrl: '' }, raw),
      ['X-Shopify-Topic', 'orders/paid'],
      ['X-Shopify-Event-Id', 'demo-evt-1'],
      ['X-Shopify-Shop-Domain', 'demo-cafe.myshopify.com'],
    ]);
    expect(hook.status).toBe(200);
    expect(hook.body.results).toEqual([expect.objectContaining({ transactionId: 'shopify:4242', status: 'accrued', merchantId: 'demo-cafe' })]);
    expect((await books(banner, 'demo-cafe')).transactions['shopify:4242']).toMatchObject({ accruals: 1, amount: 350 });
    expect((await books(banner, 'demo-bakery')).transactions['shopify:4242']).toBeUndefined();
    // Each demo merchant's admin token sees its own records.
    const own = (await (await admin(bridge, '/v1/admin/transactions', banner.demos['demo-cafe']!.adminToken)).json()) as any;
    expect(own.items.map((r: any) => [r.merchantId, r.transactionId]).sort()).toEqual([
      ['demo-cafe', 'generic:DEMO-1'],
      ['demo-cafe', 'shopify:4242'],
    ]);

    expect(await bridge.kill('SIGTERM')).toBe(0);
  }, 60_000);

  it('a restart that keeps the ledger (SANDBOX_LEDGER=keep) creates nothing, keeps the key, and issues new tokens: the earlier ones are refused', async () => {
    const keyBefore = readFileSync(join(dir, 'data', 'sandbox-secrets.key'), 'utf8');
    // Kept, the ledger outlives the simulator's books (test/build/sandbox-ledger.test.ts: the default empties it).
    const bridge = await start({ SANDBOX_LEDGER: 'keep' });
    const banner = await bannerOf(bridge);
    expect(banner.text).toContain('(generated at an earlier start; SECRETS_KEY is not set)');
    expect(readFileSync(join(dir, 'data', 'sandbox-secrets.key'), 'utf8')).toBe(keyBefore);
    expect(banner.demos['demo-bakery']).toMatchObject({ created: false });
    expect(banner.demos['demo-cafe']).toMatchObject({ created: false });
    expect(bridge.output()).not.toContain('"msg":"merchant created"');
    expect(((await (await admin(bridge, '/v1/admin/merchants')).json()) as any).total).toBe(2);

    const old = firstRun.demos['demo-bakery']!;
    expect((await post(bridge, '/v1/checkouts/generic', checkout({ orderId: 'DEMO-2' }), old.posToken)).status).toBe(401);
    expect((await admin(bridge, '/v1/admin/transactions', old.adminToken)).status).toBe(401);
    const fresh = banner.demos['demo-bakery']!;
    expect(fresh.posToken).not.toBe(old.posToken);
    // The secrets sealed at the first start open with the kept key: the app token reaches its books.
    const res = await post(bridge, '/v1/checkouts/generic', checkout({ orderId: 'DEMO-2' }), fresh.posToken);
    expect(((await res.json()) as any).status).toBe('accrued');
    expect((await books(banner, 'demo-bakery')).transactions['generic:DEMO-2']).toMatchObject({ accruals: 1 });
    const mine = (await (await admin(bridge, '/v1/admin/transactions', fresh.adminToken)).json()) as any;
    expect(mine.items.map((r: any) => [r.transactionId, r.status]).sort()).toEqual([
      ['generic:DEMO-1', 'accrued'],
      ['generic:DEMO-2', 'accrued'],
    ]);
    // The simulator starts empty at every run, but numbers its operations past the last run's, which
    // the ledger's records claim: a new run's accruals are never refused as taken.
    const operations = mine.items.map((r: any) => r.results[0].operationId);
    expect(new Set(operations).size).toBe(2);
    // The default merchant too (POS_TOKEN).
    const byDefault = await post(bridge, '/v1/checkouts/generic', checkout({ orderId: 'DEMO-1' }), BRIDGE_PROCESS_POS_TOKEN);
    expect(((await byDefault.json()) as any).status).toBe('accrued');
    expect(await bridge.kill('SIGTERM')).toBe(0);
  }, 60_000);

  it('outside sandbox, a ledger that holds merchants and no SECRETS_KEY stops start-up with one line naming it', async () => {
    const bridge = spawnBridge({ LEDGER_URL: ledgerUrl, LOYALTY_BASE_URL: 'http://127.0.0.1:9', LOYALTY_APP_TOKEN: 'app-token-outside-sandbox' });
    await expect(bridge).rejects.toThrow(/bridge did not start:\nloyalty-bridge: SECRETS_KEY is required: this ledger holds merchants whose secrets are sealed with it\n$/);
  }, 30_000);
});
