/**
 * `npm run reconcile-report` as an operator runs it (a process, on the built
 * dist/scripts/reconcile-report.js) against a file ledger a bridge left and the loyalty simulator:
 * the report on stdout (JSON or CSV), a status line and a summary on stderr, the exit code saying
 * whether anything differs; bad arguments are refused naming them; a ledger still held by a running
 * bridge is refused with where to ask instead. Needs `npm run build` first (npm test does it).
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { startBridge } from '../../src/bridge.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { ADMIN_TOKEN, checkout, testConfig } from '../support/harness.js';

const today = () => new Date().toISOString().slice(0, 10);

/** The built script with only these variables; stdout and stderr as they came. */
function run(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'reconcile-report.js'), ...args], { env: { PATH: process.env.PATH!, NODE_ENV: 'test', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

describe('npm run reconcile-report', () => {
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let env: Record<string, string>;
  let dir: string;
  let ledgerFile: string;

  beforeAll(async () => {
    sim = createSimulator();
    simServer = await sim.listen();
    const config = testConfig({ LOYALTY_TIMEOUT_MS: '2000' });
    dir = join(new URL(config.ledgerUrl).pathname, '..');
    ledgerFile = config.ledgerUrl;
    const bridge = await startBridge(config, silentLogger, { loyaltyBaseUrl: simServer.url, loyaltyAppToken: sim.appToken, loyaltyApiKey: sim.apiKey, adminToken: ADMIN_TOKEN, defaultMetrics: false, startWorker: false });
    const post = (body: unknown) => request(bridge.url).post('/v1/checkouts/generic').set('content-type', 'application/json').send(JSON.stringify(body));
    expect((await post(checkout({ orderId: 'A-1' }))).body.status).toBe('accrued');
    // A difference: an accrual resolved by hand that the loyalty service never booked.
    sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    expect((await post(checkout({ orderId: 'N-1', customer: { phone: '+15550007777' } }))).body.status).toBe('in_doubt');
    const resolved = await request(bridge.url).post('/v1/admin/transactions/generic:N-1/resolve').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ outcome: 'accrued' });
    expect(resolved.body.status).toBe('accrued');
    await bridge.close();
    env = { LEDGER_URL: ledgerFile, LOYALTY_BASE_URL: simServer.url, LOYALTY_APP_TOKEN: sim.appToken, LOYALTY_API_KEY: sim.apiKey, LOYALTY_RETRY_BASE_MS: '5' };
  }, 30_000);
  afterAll(async () => {
    await simServer.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints the report as JSON on stdout, a summary on stderr, and exits 3 when something differs', async () => {
    const ledgerBefore = readFileSync(new URL(ledgerFile).pathname, 'utf8');
    const books = sim.books();
    const out = await run(['--merchant', 'default', '--from', today(), '--to', today()], env);
    expect(out.status).toBe(3);
    expect(out.stdout.trimEnd().split('\n')).toHaveLength(1);
    const report = JSON.parse(out.stdout);
    expect(report).toMatchObject({ merchantId: 'default', examined: { ledger: 2, history: 1 }, complete: true });
    expect(report.differences.map((d: { kind: string; transactionId: string }) => [d.kind, d.transactionId])).toEqual([['not_in_history', 'generic:N-1']]);
    // What it is doing, as it goes (plain lines when stderr is not a terminal), then the summary.
    expect(out.stderr.split('\n')[0]).toBe('ledger: 2 of 2 records created in the range');
    expect(out.stderr.trim().split('\n').at(-1)).toMatch(/^default .* … .*: 0 POS entries, 2 ledger records, 1 operations; 1 not_in_history$/);
    // It reads only.
    expect(readFileSync(new URL(ledgerFile).pathname, 'utf8')).toBe(ledgerBefore);
    expect(sim.books()).toEqual(books);
  });

  it('--csv: the differences as CSV; a range with none exits 0', async () => {
    const csv = await run(['--from', today(), '--to', today(), '--csv'], env);
    expect(csv.status).toBe(3);
    expect(csv.stdout.split('\r\n')).toEqual(['kind,transactionId,orderId,operationId,why,next', expect.stringMatching(/^not_in_history,"generic:N-1","N-1",,"the ledger holds it/), '']);
    const clean = await run(['--from', '2026-01-01', '--to', '2026-01-31'], env);
    expect(clean.stderr).toContain('no difference');
    expect(clean.status).toBe(0);
  });

  it.each([
    [['--from', today()], '--from and --to are required'],
    [['--from', 'yesterday', '--to', today()], '--from: must be a day'],
    [['--from', '2026-01-01', '--to', '2026-06-01'], '--to: the range may span at most 32 days'],
    [['--from', today(), '--to', today(), '--colour', 'red'], 'unknown argument "--colour"'],
  ])('%j → exit 2 naming the problem', async (args, message) => {
    const out = await run(args, env);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(message);
    expect(out.stdout).toBe('');
  });

  it('a variable missing: exit 2 naming it', async () => {
    const { LOYALTY_APP_TOKEN: _dropped, ...rest } = env;
    const out = await run(['--from', today(), '--to', today()], rest);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('LOYALTY_APP_TOKEN');
  });

  it('a file ledger a running bridge holds: refused, saying to ask the bridge', async () => {
    const bridge = await startBridge(testConfig({ LEDGER_URL: ledgerFile }), silentLogger, { loyaltyBaseUrl: simServer.url, loyaltyAppToken: sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, startWorker: false });
    try {
      const out = await run(['--from', today(), '--to', today()], env);
      expect(out.status).toBe(1);
      expect(out.stderr).toContain('GET /v1/admin/reports/reconcile');
    } finally {
      await bridge.close();
    }
  });
});
