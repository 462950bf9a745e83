/**
 * `npm run backfill` as an operator runs it (a process, on the built dist/scripts/backfill.js) on a
 * file ledger, against the simulator's fake Loyverse API and loyalty service: an order whose webhook
 * never came is recorded and accrued once, the answer is printed as JSON on stdout with the progress
 * line on stderr; run again it finds the order known; a bad argument is exit 2 naming it; a POS that
 * keeps refusing the page is exit 1 with the watermark unmoved. Needs `npm run build` first.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { sale } from '../support/backfill-pos.js';

/** The built script with only these variables; resolves once it exits. */
function backfill(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'backfill.js'), ...args], { env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? tmpdir(), ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

describe('npm run backfill', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let dir: string;
  let env: Record<string, string>;
  let merchantId: string;
  const since = () => new Date(Date.now() - 3_600_000).toISOString();

  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
    dir = mkdtempSync(join(tmpdir(), 'backfill-cli-'));
    const account = sim.pos.loyverse.addAccount({});
    merchantId = account.merchantId;
    env = {
      LEDGER_URL: `file:${join(dir, 'ledger.json')}`,
      LOYALTY_BASE_URL: server.url,
      LOYALTY_APP_TOKEN: sim.appToken,
      LOYVERSE_API_BASE_URL: `${server.url}/loyverse`,
      LOYVERSE_ACCESS_TOKEN: account.accessToken,
      LOYVERSE_MERCHANT_ID: account.merchantId,
      LOG_LEVEL: 'warn',
    };
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('records and accrues an order whose webhook never came, printing the answer on stdout and its progress on stderr; run again it finds it known', async () => {
    const receipt = sim.pos.loyverse.addOrder(merchantId, sale('+14155550301', new Date(Date.now() - 600_000).toISOString()));
    const first = await backfill(['--pos', 'loyverse', '--since', since()], env);
    expect(first.stderr).toMatch(/backfill: 1 page read, 1 order/);
    expect(first.status).toBe(0);
    // One line of JSON, as the docs show it.
    expect(first.stdout.trimEnd().split('\n')).toHaveLength(1);
    const answer = JSON.parse(first.stdout) as { examined: number; new: string[]; known: number; watermark: string };
    expect(answer).toMatchObject({ examined: 1, known: 0 });
    expect(answer.new).toHaveLength(1);
    expect(answer.new[0]).toContain(receipt.receipt_number);
    expect(sim.books().transactions[answer.new[0]!]).toMatchObject({ accruals: 1 });

    const again = await backfill(['--merchant', 'default', '--pos', 'loyverse', '--since', since()], env);
    expect(again.status).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ examined: 1, new: [], known: 1 });
    expect(sim.books().transactions[answer.new[0]!]).toMatchObject({ accruals: 1 });
  });

  it('--help prints the usage and exits 0', async () => {
    const help = await backfill(['--help'], env);
    expect([help.status, help.stdout, help.stderr]).toEqual([0, expect.stringMatching(/^usage: npm run backfill -- --merchant <id> --pos /), '']);
  });

  it('a bad argument is exit 2, naming it', async () => {
    const missing = await backfill(['--pos', 'loyverse'], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/--since/);
    const bad = await backfill(['--pos', 'loyverse', '--since', 'yesterday'], env);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--since must be an ISO 8601/);
  });

  it('a POS that keeps refusing the page is exit 1, and the watermark stays where it was', async () => {
    const store = new FileLedgerStore(join(dir, 'ledger.json'));
    await store.init();
    const before = (await store.getBackfillState('default', 'loyverse'))!.watermark;
    await store.close();
    sim.pos.loyverse.faults(merchantId).inject({ kind: 'rate_limit', on: 'list', times: 20, retryAfter: 0 });
    const failed = await backfill(['--pos', 'loyverse', '--since', since()], env);
    sim.pos.loyverse.faults(merchantId).clear();
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(/loyverse API GET \/v1\.0\/receipts answered 429/);
    await store.init();
    expect((await store.getBackfillState('default', 'loyverse'))!.watermark).toBe(before);
    await store.close();
  });
});
