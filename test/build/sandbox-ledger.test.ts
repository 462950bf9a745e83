/**
 * The sandbox's ledger and its simulator's books start the same way: empty (src/sandbox.ts
 * prepareSandboxLedger). The in-process simulator starts with empty books at every start, so sandbox
 * empties its own ledger too, and the three-way report of a restarted sandbox agrees instead of
 * listing the earlier run's records as differences. SANDBOX_LEDGER=keep keeps the ledger and says
 * loudly what that does (the report then shows it); a ledger sandbox did not make (perhaps a real
 * one, started without LOYALTY_BASE_URL by mistake) is never emptied, only warned about.
 * As processes (the built dist/src/main.js); needs `npm run build` first (npm test does it).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN, checkout } from '../support/harness.js';
import { eventually } from '../support/eventually.js';
import { bannerOf, sandboxLedgerUrl, simulatorBooks } from '../support/sandbox.js';

const today = () => new Date().toISOString().slice(0, 10);

describe('sandbox: the ledger starts as empty as the simulator\'s books', () => {
  let dir: string;
  const running: BridgeProcess[] = [];
  const start = async (env: Record<string, string> = {}, ledgerDir = dir) => {
    const bridge = await spawnBridge({ LEDGER_URL: sandboxLedgerUrl(ledgerDir), LOG_LEVEL: 'info', BACKFILL_INTERVAL_MS: '0', ...env });
    running.push(bridge);
    return { bridge, banner: await bannerOf(bridge) };
  };
  const get = async (bridge: BridgeProcess, path: string) => (await fetch(`${bridge.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json() as Promise<any>;
  const report = (bridge: BridgeProcess) => get(bridge, `/v1/admin/reports/reconcile?merchantId=demo-cafe&from=${today()}&to=${today()}`);
  const sale = async (bridge: BridgeProcess, posToken: string, orderId: string) => {
    const res = await fetch(`${bridge.url}/v1/checkouts/generic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${posToken}` },
      body: JSON.stringify(checkout({ orderId, currency: 'GBP', customer: { phone: '+442079460018' } })),
    });
    expect(((await res.json()) as any).status).toBe('accrued');
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bridge-sandbox-ledger-'));
  });
  afterAll(async () => {
    await Promise.all(running.map((b) => b.kill('SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a first start makes a new ledger, marked as sandbox\'s; its report agrees with the books', async () => {
    const { bridge, banner } = await start();
    expect(banner.text).toContain(`ledger:     ${sandboxLedgerUrl(dir)} (new; emptied at every sandbox start, as the simulator's books are; SANDBOX_LEDGER=keep keeps it)`);
    expect(existsSync(join(dir, 'data', 'ledger.sandbox.json'))).toBe(true);
    await sale(bridge, banner.demos['demo-cafe']!.posToken, 'RUN-1');
    expect((await simulatorBooks(banner, 'demo-cafe')).transactions['generic:RUN-1']).toMatchObject({ accruals: 1 });
    expect(await report(bridge)).toMatchObject({ merchantId: 'demo-cafe', complete: true, examined: { ledger: 1, history: 1 }, differences: [] });
    expect(await bridge.kill('SIGTERM')).toBe(0);
  }, 60_000);

  it('a restart empties it, as the new simulator\'s books are empty: the demo merchants are made again, the earlier run\'s records are gone, and the report agrees', async () => {
    const keyBefore = readFileSync(join(dir, 'data', 'sandbox-secrets.key'), 'utf8');
    const { bridge, banner } = await start();
    expect(banner.text).toContain(`ledger:     ${sandboxLedgerUrl(dir)} (emptied at this start, as the simulator's books are; SANDBOX_LEDGER=keep keeps it)`);
    expect(banner.text).not.toContain('WARNING');
    expect(Object.values(banner.demos).map((d) => d.created)).toEqual([true, true]);
    // The key file is the sandbox's, not the ledger's: kept.
    expect(banner.text).toContain('(generated at an earlier start; SECRETS_KEY is not set)');
    expect(readFileSync(join(dir, 'data', 'sandbox-secrets.key'), 'utf8')).toBe(keyBefore);
    expect((await get(bridge, '/v1/admin/transactions?merchantId=demo-cafe')).items).toEqual([]);
    expect(await report(bridge)).toMatchObject({ complete: true, examined: { ledger: 0, history: 0 }, differences: [] });
    // This run's sale, for the next start to keep.
    await sale(bridge, banner.demos['demo-cafe']!.posToken, 'RUN-2');
    expect(await bridge.kill('SIGTERM')).toBe(0);
  }, 60_000);

  it('SANDBOX_LEDGER=keep keeps it, and says loudly that the report will list what the new books never saw (which it then does)', async () => {
    const { bridge, banner } = await start({ SANDBOX_LEDGER: 'keep' });
    expect(banner.text).toContain(`ledger:     ${sandboxLedgerUrl(dir)} (KEPT from an earlier run: SANDBOX_LEDGER=keep)`);
    expect(banner.text).toMatch(/!!! WARNING: the simulator starts with empty books at every start, but this ledger keeps the\n !!! earlier runs' records/);
    // The log line is written beside the banner, not before it: waited for, not read at once.
    await eventually(() => bridge.output(), (output) => /"level":40,.*"msg":"sandbox kept an earlier run's ledger, but its simulator starts with empty books/.test(output), 10_000, { what: "the warning that the kept ledger's records are not in the new books" });
    expect(Object.values(banner.demos).map((d) => d.created)).toEqual([false, false]);
    const kept = await report(bridge);
    expect(kept.differences).toEqual([expect.objectContaining({ kind: 'not_in_history', transactionId: 'generic:RUN-2' })]);
    expect(await bridge.kill('SIGTERM')).toBe(0);
  }, 60_000);

  it('a ledger sandbox did not make is never emptied: kept, with the warning and how to start afresh', async () => {
    const other = mkdtempSync(join(tmpdir(), 'bridge-not-sandbox-'));
    try {
      // A ledger made by a bridge outside sandbox (nothing listens on port 9: the upstream is just unreachable).
      const real = await spawnBridge({ LEDGER_URL: sandboxLedgerUrl(other), LOYALTY_BASE_URL: 'http://127.0.0.1:9', LOYALTY_APP_TOKEN: 'app-token-not-sandbox' });
      running.push(real);
      expect(await real.kill('SIGTERM')).toBe(0);
      const before = readdirSync(join(other, 'data')).sort();
      expect(before).toContain('ledger.json');
      const { bridge, banner } = await start({}, other);
      expect(banner.text).toContain(`ledger:     ${sandboxLedgerUrl(other)} (KEPT from an earlier run: it was not made by sandbox (or by a build before sandbox emptied its ledger), so it is left as it is)`);
      expect(banner.text).toContain(' !!! start it on a new ledger (LEDGER_URL=file:./data/sandbox-$(date +%s)/ledger.json npm start).');
      expect(existsSync(join(other, 'data', 'ledger.sandbox.json'))).toBe(false);
      expect(await bridge.kill('SIGTERM')).toBe(0);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  }, 60_000);
});
