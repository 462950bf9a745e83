/**
 * Start-up failures of the real process (the built dist/src/main.js, as `npm start` runs it): one
 * line naming the variable and what to do, a non-zero exit, no stack trace. Needs `npm run build`
 * first (npm test does it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnBridge } from '../support/bridge-process.js';
import { describeWithDatabase } from '../support/postgres.js';

const { url: pgBase } = await describeWithDatabase();

/** The process run to its end with only these variables: its exit code and what it printed. */
function run(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'src', 'main.js')], { env: { PATH: process.env.PATH!, HOME: tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('start-up failures name the variable', () => {
  let dir: string;
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'startup-failures-'));
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    port = (holder.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('PostgreSQL out of reach, or its database missing: one line naming LEDGER_URL (its password hidden) and what to do, exit 78', async () => {
    const unreachable = await run({ LEDGER_URL: 'postgres://bridge:s3cret-pw@127.0.0.1:1/loyalty', PORT: '0' });
    expect([unreachable.code, unreachable.stderr]).toEqual([78, 'loyalty-bridge: LEDGER_URL postgres://***@127.0.0.1:1/loyalty cannot be reached (ECONNREFUSED 127.0.0.1:1): start PostgreSQL there, or set LEDGER_URL to where it runs\n']);
    if (!pgBase) return;
    const missing = new URL(pgBase);
    missing.pathname = '/no_such_database_here';
    const absent = await run({ LEDGER_URL: missing.toString(), PORT: '0' });
    expect(absent.code).toBe(78);
    expect(absent.stderr).toMatch(/^loyalty-bridge: LEDGER_URL postgres:\/\/\S+\/no_such_database_here: database "no_such_database_here" does not exist: create it \(createdb <name>\), or name a database that exists\n$/);
  }, 60_000);

  it('a file ledger another bridge holds: one line naming LEDGER_URL after the documented wait, exit 78, and the running bridge untouched', async () => {
    const ledger = `file:${join(dir, 'held', 'ledger.json')}`;
    const first = await spawnBridge({ LEDGER_URL: ledger });
    try {
      const second = await run({ LEDGER_URL: ledger, PORT: '0' });
      expect(second.code).toBe(78);
      expect(second.stderr).toMatch(/waiting up to 20 s for it to finish stopping\n/);
      expect(second.stderr).toMatch(/loyalty-bridge: LEDGER_URL file:\S+ledger\.json: the ledger is in use by process \d+ .*: stop the other bridge \(or sandbox of this clone\) first, or point LEDGER_URL at another file\n$/);
      expect(second.stderr).not.toMatch(/\n\s+at /);
      // It waits once, as it says (it used to wait twice, sandbox's emptying and then the start: about 43 s).
      expect(second.stderr.match(/waiting up to 20 s/g)).toHaveLength(1);
      expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    } finally {
      await first.kill('SIGTERM');
    }
  }, 90_000);

  it("the sandbox's SANDBOX_SIMULATOR_PORT already in use: one line naming it, exit 78, no stack trace", async () => {
    const { code, stderr } = await run({ PORT: '0', SANDBOX_SIMULATOR_PORT: String(port), LEDGER_URL: `file:${join(dir, 'sandbox-port', 'ledger.json')}` });
    expect(code).toBe(78);
    expect(stderr).toBe(`loyalty-bridge: SANDBOX_SIMULATOR_PORT ${port} is in use: stop what holds it (another sandbox?), or set SANDBOX_SIMULATOR_PORT to another port (or leave it unset for any free one)\n`);
  }, 60_000);

  it('a PORT already in use: one line naming PORT, exit 78, no stack trace', async () => {
    const env = { PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger.json')}` };
    const { code, stderr } = await run(env);
    expect(code).toBe(78);
    expect(stderr).toBe(`loyalty-bridge: PORT ${port} is in use on 127.0.0.1: stop what holds it (another bridge?), or set PORT to another port\n`);
  }, 60_000);
});

/** A built command (dist/scripts/<script>.js) run to its end with only these variables. */
function runCommandScript(script: string, args: string[], env: Record<string, string>): { code: number | null; stderr: string } {
  const done = spawnSync(process.execPath, [join(process.cwd(), 'dist', 'scripts', `${script}.js`), ...args], { cwd: tmpdir(), env: { PATH: process.env.PATH!, HOME: tmpdir(), ...env }, encoding: 'utf8', timeout: 60_000 });
  return { code: done.status, stderr: done.stderr };
}

describe("the operator commands say a ledger they cannot open as the bridge does", () => {
  const unreachable = 'postgres://bridge:s3cret-pw@127.0.0.1:1/loyalty';
  const said = (name: string) => `${name}: LEDGER_URL postgres://***@127.0.0.1:1/loyalty cannot be reached (ECONNREFUSED 127.0.0.1:1): start PostgreSQL there, or set LEDGER_URL to where it runs\n`;

  it.each([
    ['migrate', []],
    ['ledger-archive', ['--list']],
    ['secrets-rotate', ['--to', Buffer.alloc(32, 7).toString('base64')]],
  ] as const)('%s: PostgreSQL out of reach is one line naming LEDGER_URL (its password hidden) and what to do, exit 1', (script, args) => {
    const name = script === 'ledger-archive' ? 'ledger:archive' : script === 'secrets-rotate' ? 'secrets:rotate' : script;
    const env: Record<string, string> = { LEDGER_URL: unreachable, ...(script === 'secrets-rotate' ? { SECRETS_KEY: Buffer.alloc(32, 1).toString('base64') } : {}) };
    expect(runCommandScript(script, [...args], env)).toEqual({ code: 1, stderr: said(name) });
  });

  it('reconcile-report: the same line', () => {
    const { code, stderr } = runCommandScript('reconcile-report', ['--from', '2026-11-01T00:00:00Z', '--to', '2026-11-02T00:00:00Z'], { LEDGER_URL: unreachable, LOYALTY_BASE_URL: 'http://127.0.0.1:1', LOYALTY_APP_TOKEN: 'app-token', LOYALTY_API_KEY: 'api-key', ADMIN_TOKEN: 'admin-token-0123456789' });
    expect([code, stderr]).toEqual([1, said('reconcile-report')]);
  });

  it('migrate: a database that does not exist is named, with what to do', () => {
    if (!pgBase) return;
    const missing = new URL(pgBase);
    missing.pathname = '/no_such_database_here';
    const { code, stderr } = runCommandScript('migrate', [], { LEDGER_URL: missing.toString() });
    expect(code).toBe(1);
    expect(stderr).toMatch(/^migrate: LEDGER_URL postgres:\/\/\S+\/no_such_database_here: database "no_such_database_here" does not exist: create it \(createdb <name>\), or name a database that exists\n$/);
  });

  it('chaos: a bad argument is one line and the usage, exit 2, no stack trace', () => {
    const { code, stderr } = runCommandScript('chaos', ['--orders', 'many'], {});
    expect(code).toBe(2);
    expect(stderr).toBe('chaos: --orders must be a number, not "many"\nusage: npm run chaos [-- --orders 1000 --kills 2 --concurrency 8 --fault-rate 0.3 --seed 42 --customers 5 --prices 3 --ambiguity person|probe]\n');
  });
});
