/**
 * `npm run simulator` as a person runs it (a process, the built dist/scripts/simulator.js): the
 * loyalty simulator with its fake POS APIs on its own port, printing (and writing, with --write-env)
 * the variables a bridge needs. A bridge started outside sandbox with those variables works as it
 * would against the real loyalty service: ready, a checkout accrued in the simulator's books, a
 * demo merchant onboarded from nothing but its printed app token, a sale its webhook never reported
 * found by backfill at the default merchant's fake Square account. The same bridge with a wrong
 * LOYALTY_APP_TOKEN, or a LOYALTY_BASE_URL past the simulator's address, starts not ready, says so
 * loudly naming the variable, and /readyz answers 503 with it. Needs `npm run build` first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DEFAULT_MERCHANT_ACCOUNTS } from '../../scripts/simulator.js';
import { freePort, POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN, checkout, eventually } from '../support/harness.js';

interface SimulatorProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** The built script, as `npm run simulator -- <args>` runs it after building, with only PATH and `env`. */
function simulator(args: string[], env: Record<string, string> = {}, launcherChannel = false): SimulatorProcess {
  const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'simulator.js'), ...args], {
    env: { PATH: process.env.PATH!, ...env },
    // scripts/start.mjs gives what it starts an IPC channel, which closes when it dies (src/launcher.ts).
    stdio: launcherChannel ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Variables as an env file holds them. */
function readEnvFile(path: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

describe('npm run simulator', () => {
  let dir: string;
  let sim: SimulatorProcess;
  let banner: string;
  let vars: Record<string, string>;
  let url: string;
  const bridges: BridgeProcess[] = [];
  const secretsKey = randomBytes(32).toString('base64');
  const bridge = async (env: Record<string, string> = {}) => {
    const b = await spawnBridge({ ...vars, LEDGER_URL: `file:${join(dir, `ledger-${bridges.length}`, 'ledger.json')}`, SECRETS_KEY: secretsKey, LOG_LEVEL: 'warn', ...env });
    bridges.push(b);
    return b;
  };
  const readyz = async (b: BridgeProcess) => {
    const res = await fetch(`${b.url}/readyz`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return { status: res.status, body: (await res.json()) as { status: string; checks: { upstream: string } } };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'simulator-cli-'));
    sim = simulator(['--port', '0', '--write-env', join(dir, 'sim.env')]);
    banner = await eventually(() => sim.output(), (o) => /Ctrl-C stops it.*\n=+\n/.test(o), 15_000);
    vars = readEnvFile(join(dir, 'sim.env'));
    url = vars.LOYALTY_BASE_URL!;
  }, 30_000);
  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    sim?.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('is the script npm runs, through scripts/start.mjs (which builds first), like the other commands', () => {
    const scripts = JSON.parse(readFileSync('package.json', 'utf8')).scripts;
    expect(scripts.simulator).toBe('exec node scripts/start.mjs dist/scripts/simulator.js');
  });

  it('prints its address and the variables a bridge needs, and writes them to the --write-env file (private)', () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(banner).toContain(` loyalty simulator: ${url}\n`);
    expect(vars).toMatchObject({ LOYALTY_BASE_URL: url, LOYALTY_APP_TOKEN: 'sim-app-token', LOYALTY_API_KEY: 'sim-api-key', SQUARE_API_BASE_URL: `${url}/square`, SQUARE_MERCHANT_ID: DEFAULT_MERCHANT_ACCOUNTS.square, SHOPIFY_API_BASE_URL: `${url}/shopify/{shop}` });
    for (const [name, value] of Object.entries(vars)) expect(banner).toContain(`${name}=${value}`);
    expect(statSync(join(dir, 'sim.env')).mode & 0o777).toBe(0o600);
    expect(banner).toMatch(/^ {3}demo-cafe +app token sim-app-token-demo-cafe +API key sim-api-key-demo-cafe$/m);
  });

  it('a bridge outside sandbox pointed at it is ready, accrues there, onboards a demo merchant from its app token, and backfills a sale from the fake Square', async () => {
    const b = await bridge();
    expect(b.output()).not.toContain('SANDBOX MODE');
    expect(await readyz(b)).toEqual({ status: 200, body: { status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } } });

    const res = await fetch(`${b.url}/v1/checkouts/generic`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(checkout({ orderId: 'SIM-1' })) });
    expect(((await res.json()) as any).status).toBe('accrued');
    const books = (await (await fetch(`${url}/__sim/books`)).json()) as any;
    expect(books.transactions['generic:SIM-1']).toMatchObject({ accruals: 1, amount: 5997 });

    const onboarded = await fetch(`${b.url}/v1/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'demo-cafe', loyalty: { appToken: 'sim-app-token-demo-cafe' } }),
    });
    expect(onboarded.status).toBe(201);
    expect(((await onboarded.json()) as any).merchant).toMatchObject({ id: 'demo-cafe', currency: 'GBP', pos: { square: { merchantId: 'DEMOCAFESQ001' } } });

    const order = (await (await fetch(`${url}/__sim/pos/square/accounts/${DEFAULT_MERCHANT_ACCOUNTS.square}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lines: [{ name: 'Scone', unitPrice: 220, quantity: 3, tax: 40 }], customer: { phone: '+15550001111' } }),
    })).json()) as { id: string };
    const pass = await fetch(`${b.url}/v1/admin/backfill`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pos: 'square', since: new Date(Date.now() - 3_600_000).toISOString() }),
    });
    expect(((await pass.json()) as any).new).toEqual([`square:${order.id}`]);
    const after = (await (await fetch(`${url}/__sim/books`)).json()) as any;
    expect(after.transactions[`square:${order.id}`]).toMatchObject({ accruals: 1, amount: 660 });
  }, 30_000);

  it('a wrong LOYALTY_APP_TOKEN: the bridge starts not ready, says so loudly naming the variable, and /readyz is 503 with it; the right one, ready', async () => {
    const wrong = await bridge({ LOYALTY_APP_TOKEN: 'not-the-sim-app-token' });
    await eventually(() => wrong.output(), (o) => o.includes('NOT READY'), 5000);
    expect(wrong.output()).toMatch(/!{78}\n NOT READY: the loyalty service refuses this configuration\.\n LOYALTY_APP_TOKEN is refused by the loyalty service at http:\/\/127\.0\.0\.1:\d+ \(403: Invalid app token\.\): /);
    expect(wrong.output()).not.toContain('not-the-sim-app-token');
    const { status, body } = await readyz(wrong);
    expect(status).toBe(503);
    expect(body.checks.upstream).toMatch(/^failing: LOYALTY_APP_TOKEN is refused by the loyalty service/);
    expect(await wrong.kill('SIGTERM')).toBe(0);
    // Fixed, as the banner printed it: ready.
    expect((await readyz(await bridge({ LOYALTY_APP_TOKEN: vars.LOYALTY_APP_TOKEN! }))).status).toBe(200);
  }, 30_000);

  it('a LOYALTY_BASE_URL that does not lead to /api/v2: not ready, naming LOYALTY_BASE_URL', async () => {
    const wrong = await bridge({ LOYALTY_BASE_URL: `${url}/loyalty` });
    await eventually(() => wrong.output(), (o) => o.includes('NOT READY'), 5000);
    expect(wrong.output()).toMatch(/ NOT READY: the loyalty service refuses this configuration\.\n LOYALTY_BASE_URL \(http:\/\/127\.0\.0\.1:\d+\/loyalty\) does not lead to the loyalty service's API: POST .*\/loyalty\/api\/v2\/marketplace\/resolve-credentials answered 404/);
    expect((await readyz(wrong)).status).toBe(503);
  }, 30_000);

  it('a port in use is exit 1 naming it; a bad --port is exit 2; SIGTERM stops it (exit 0)', async () => {
    const port = Number(new URL(url).port);
    const second = simulator(['--port', String(port)]);
    expect(await second.exited).toBe(1);
    expect(second.output()).toBe(`simulator: port ${port} is in use: stop what holds it, or choose another with --port (0 picks a free one)\n`);
    const bad = simulator(['--port', 'eighty']);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toBe('simulator: --port must be a port number from 0 to 65535, e.g. 4010 (got "eighty")\n');
    const byVariable = simulator([], { SIMULATOR_PORT: String(await freePort()) });
    await eventually(() => byVariable.output(), (o) => /loyalty simulator: /.test(o), 15_000);
    byVariable.child.kill('SIGTERM');
    expect(await byVariable.exited).toBe(0);
    expect(byVariable.output()).toContain('loyalty simulator stopped\n');
    sim.child.kill('SIGTERM');
    expect(await sim.exited).toBe(0);
  }, 30_000);

  it('SIGTERM and SIGINT stop it with the launcher\'s channel open, as npm run simulator starts it (exit 0, not left running)', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const launched = simulator(['--port', '0'], {}, true);
      await eventually(() => launched.output(), (o) => /loyalty simulator: http:\/\/\S+/.test(o), 15_000);
      launched.child.kill(signal);
      expect([signal, await launched.exited]).toEqual([signal, 0]);
      expect(launched.output()).toContain('loyalty simulator stopped\n');
    }
  }, 30_000);

  it('stops when the launcher that started it is gone (its channel closes, as when npm start is SIGKILLed)', async () => {
    const launched = simulator(['--port', '0'], {}, true);
    const address = (await eventually(() => launched.output(), (o) => /loyalty simulator: http:\/\/\S+/.test(o), 15_000)).match(/loyalty simulator: (http:\/\/\S+)/)![1]!;
    expect((await fetch(`${address}/__sim/books`)).status).toBe(200);
    launched.child.disconnect();
    expect(await launched.exited).toBe(0);
    expect(launched.output()).toContain('loyalty simulator stopped\n');
    await expect(fetch(`${address}/__sim/books`)).rejects.toThrow();
  }, 30_000);
});
