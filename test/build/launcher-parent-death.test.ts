/**
 * Nothing outlives `npm start` (scripts/start.mjs): however the chain npm → launcher is killed, the
 * bridge under it ends, having finished what it had in flight, and releases the ledger's lock, so
 * that a supervisor's next start on the same ledger and port comes up. Run as a person or a
 * supervisor runs it: `npm start` in a process group of its own, on a copy of the project in a
 * temporary folder (the checkout's own dist/ is never touched), in sandbox with a ledger of its own.
 *
 * - SIGKILL of the whole group (`kill -KILL -<pgid>`): npm and the launcher die at once; the bridge,
 *   in a group of its own, sees its IPC channel to the launcher close and stops as on SIGTERM.
 * - SIGKILL of npm alone: the launcher, orphaned, stops the bridge as SIGTERM does, and ends.
 * - `timeout -s KILL <n> npm start`: timeout SIGKILLs npm and then its own group.
 * - Ctrl-C twice: the first stops the bridge gracefully, a second one a second later stops it at once.
 *
 * Linux: processes are found through /proc. Every wait has a deadline and fails when it passes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../../scripts/bridge-process.js';

const CHECKOUT = process.cwd();
const PROJECT_FILES = ['src', 'adapters', 'scripts', 'config', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];
const ADMIN_TOKEN = 'launcher-test-admin-token-0123456789';

/** The environment of a person's shell: none of jest's or the outer npm's settings. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('npm_') || key.startsWith('JEST') || key === 'NODE_OPTIONS' || key === 'NODE_ENV' || key === 'INIT_CWD') continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'info', ADMIN_TOKEN, ...extra };
}

interface Proc {
  child: ChildProcess;
  pid: number;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: Proc[] = [];

/** Starts `command` in a process group of its own (its pid is the group's id), as a shell starts a job. */
function runJob(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Proc {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  // The bridge keeps writing to these pipes after npm and the launcher are gone: its last lines are read here.
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const proc = { child, pid: child.pid!, output: () => output, exited };
  started.push(proc);
  return proc;
}

/** Waits for `check` to answer true; fails naming what it waited for, with `context()`, once `timeoutMs` have passed. */
async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, context: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function answers(url: string): Promise<boolean> {
  return fetch(`${url}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
}

/** The fields of /proc/<pid>/stat after the command name (state first), or undefined once the process is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** The process exists and is not a zombie waiting to be reaped. */
function running(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== 'Z';
}

/** Every process below `pid` (from /proc). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const ppid = Number(statFields(Number(name))?.[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      found.push(c);
      walk(c);
    }
  };
  walk(pid);
  return found;
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** The one process below `root` whose command line contains `what`; fails when there is not exactly one. */
function processBelow(root: number, what: string): number {
  const found = descendants(root).filter((pid) => commandLine(pid).includes(what));
  if (found.length !== 1) throw new Error(`expected one process running ${what} below ${root}, found ${found.length}: ${found.map((pid) => `${pid} ${commandLine(pid)}`).join('; ')}`);
  return found[0]!;
}

/** The lock file of a file ledger, and whether a live process holds it. */
function lockOf(ledger: string): { exists: boolean; ownerRunning: boolean } {
  const path = `${ledger}.lock`;
  if (!existsSync(path)) return { exists: false, ownerRunning: false };
  const pid = Number(readFileSync(path, 'utf8').split('\n')[0]);
  return { exists: true, ownerRunning: Number.isInteger(pid) && pid > 0 && running(pid) };
}

let dir: string;

beforeAll(() => {
  // The project's sources, and the checkout's node_modules: what a fresh clone has after `npm ci`.
  dir = mkdtempSync(join(tmpdir(), 'bridge-launcher-'));
  for (const name of PROJECT_FILES) cpSync(join(CHECKOUT, name), join(dir, name), { recursive: true });
  symlinkSync(realpathSync(join(CHECKOUT, 'node_modules')), join(dir, 'node_modules'));
  // Built once here, so that no start below compiles while it is timed.
  const build = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: dir, env: cleanEnv({}), encoding: 'utf8', timeout: 120_000 });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
}, 150_000);

afterAll(() => {
  for (const proc of started) {
    for (const pid of [...descendants(proc.pid), proc.pid]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('npm start: nothing outlives its launcher', () => {
  /** A sandbox bridge's settings: its own ledger, on `port`. */
  const bridgeEnv = (ledger: string, port: number) => cleanEnv({ PORT: String(port), LEDGER_URL: `file:${ledger}` });

  /** `npm start` (or `prefix… npm start`) as a job, up and answering; with its launcher's and bridge's pids. */
  async function startJob(ledger: string, port: number, prefix: string[] = []): Promise<Proc & { url: string; launcher: number; bridge: number }> {
    const [command, ...args] = [...prefix, 'npm', 'start'];
    const job = runJob(command!, args, dir, bridgeEnv(ledger, port));
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      `${url}/healthz to answer 200`,
      () => {
        if (job.child.exitCode !== null || job.child.signalCode !== null) throw new Error(`npm start ended before ${url} was up:\n${job.output()}`);
        return answers(url);
      },
      60_000,
      job.output,
    );
    // The banner comes once sandbox has made its demo merchants, a moment after the bridge listens.
    await waitFor('the sandbox banner', () => / simulator: {2}http:\/\/127\.0\.0\.1:\d+/.test(job.output()), 20_000, job.output);
    return { ...job, url, launcher: processBelow(job.pid, 'scripts/start.mjs'), bridge: processBelow(job.pid, 'dist/src/main.js') };
  }

  /** Waits until the bridge process is gone, nothing answers at `url` and the ledger's lock is released; fails otherwise. */
  async function waitAllGone(job: { output: () => string; url: string; launcher: number; bridge: number }, ledger: string): Promise<void> {
    const context = () => `${job.output()}\nbridge ${job.bridge} running: ${running(job.bridge)}; launcher ${job.launcher} running: ${running(job.launcher)}; lock: ${JSON.stringify(lockOf(ledger))}`;
    await waitFor(`the bridge (pid ${job.bridge}) and the launcher (pid ${job.launcher}) to end`, () => !running(job.bridge) && !running(job.launcher), 20_000, context);
    expect(await answers(job.url)).toBe(false);
    // Stopped gracefully: the lock is released, not merely stale.
    expect(lockOf(ledger)).toEqual({ exists: false, ownerRunning: false });
    expect(job.output()).toContain('"msg":"stopped"');
  }

  /** The next start on the same ledger and port comes up (as a supervisor's restart would), and stops with SIGTERM. */
  async function nextStartComesUp(ledger: string, port: number): Promise<void> {
    const next = await startJob(ledger, port);
    expect(next.output()).not.toContain('in use by process');
    process.kill(next.pid, 'SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
    await waitFor(`the restarted bridge (pid ${next.bridge}) to end`, () => !running(next.bridge), 10_000, next.output);
  }

  it("a SIGKILL of npm start's process group ends the bridge, which finishes the call it had in flight first; the next start comes up", async () => {
    const ledger = join(dir, 'group-kill', 'ledger.json');
    const port = await freePort();
    const job = await startJob(ledger, port);
    // A checkout whose accrue the simulator (in the bridge's process, in sandbox) commits at once and answers 800 ms later.
    const simulator = / simulator: {2}(http:\/\/127\.0\.0\.1:\d+)/.exec(job.output())![1]!;
    const fault = await fetch(`${simulator}/__sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'slow_after_commit', delayMs: 800 }) });
    expect(fault.status).toBeLessThan(300);
    const orderId = `KILL-${Date.now()}`;
    const checkout = fetch(`${job.url}/v1/checkouts/generic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ orderId, currency: 'USD', total: '12.50', customer: { phone: '+15550001111' } }),
    });
    await waitFor(
      'the accrue to be committed at the simulator, its answer still to come',
      async () => {
        const books = (await fetch(`${simulator}/__sim/books`).then((r) => r.json())) as { transactions?: Record<string, unknown> };
        return Boolean(books.transactions?.[`generic:${orderId}`]);
      },
      10_000,
      job.output,
    );

    process.kill(-job.pid, 'SIGKILL');
    expect(await job.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // The call in flight when the launcher died is answered, as on SIGTERM.
    const answer = await checkout;
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ transactionId: `generic:${orderId}`, status: 'accrued' });
    await waitAllGone(job, ledger);
    expect(job.output()).toContain('"launcher":"scripts/start.mjs, which started this bridge, is gone');
    await nextStartComesUp(ledger, port);
  }, 120_000);

  it('a SIGKILL of npm alone: the launcher stops the bridge as SIGTERM does, and ends; the next start comes up', async () => {
    const ledger = join(dir, 'npm-kill', 'ledger.json');
    const port = await freePort();
    const job = await startJob(ledger, port);
    process.kill(job.pid, 'SIGKILL');
    expect(await job.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await waitAllGone(job, ledger);
    expect(job.output()).toContain(`start: process ${job.pid}, which started this one, is gone; stopping dist/src/main.js as SIGTERM does`);
    expect(job.output()).toContain('"signal":"SIGTERM","msg":"shutting down');
    await nextStartComesUp(ledger, port);
  }, 120_000);

  it('timeout -s KILL <n> npm start: when the time is up the bridge ends too; the next start comes up', async () => {
    const ledger = join(dir, 'timeout-kill', 'ledger.json');
    const port = await freePort();
    // Long enough for the bridge to come up on a loaded machine; the test then waits for timeout to fire.
    const seconds = 10;
    const t0 = Date.now();
    const job = await startJob(ledger, port, ['timeout', '-s', 'KILL', String(seconds)]);
    const npm = processBelow(job.pid, 'npm start');
    // Up before the time is up: what follows is the timeout's kill, not a failed start.
    expect(Date.now() - t0).toBeLessThan(seconds * 1000);
    // timeout SIGKILLs npm, then signals its own group, itself included.
    await waitFor(`timeout to fire after ${seconds} s`, () => job.child.exitCode !== null || job.child.signalCode !== null, seconds * 1000 + 10_000, job.output);
    expect(await job.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await waitFor(`npm (pid ${npm}) to end`, () => !running(npm), 5_000, job.output);
    await waitAllGone(job, ledger);
    await nextStartComesUp(ledger, port);
  }, 120_000);

  it('Ctrl-C stops the bridge gracefully; a second Ctrl-C a second later stops it at once, with its call still in flight', async () => {
    const ledger = join(dir, 'ctrl-c', 'ledger.json');
    const port = await freePort();
    const job = await startJob(ledger, port);
    const simulator = / simulator: {2}(http:\/\/127\.0\.0\.1:\d+)/.exec(job.output())![1]!;
    // An accrue answered only after 30 s: the graceful stop waits for it (up to its 15 s limit).
    await fetch(`${simulator}/__sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'slow_after_commit', delayMs: 30_000 }) });
    const orderId = `CTRL-C-${Date.now()}`;
    const checkout = fetch(`${job.url}/v1/checkouts/generic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ orderId, currency: 'USD', total: '12.50', customer: { phone: '+15550001111' } }),
    }).then(
      (r) => r.status,
      () => 'no answer',
    );
    await waitFor(
      'the accrue to be committed at the simulator, its answer still to come',
      async () => {
        const books = (await fetch(`${simulator}/__sim/books`).then((r) => r.json())) as { transactions?: Record<string, unknown> };
        return Boolean(books.transactions?.[`generic:${orderId}`]);
      },
      10_000,
      job.output,
    );
    // A terminal's Ctrl-C signals the whole foreground job; npm passes it on again: the bridge sees one.
    process.kill(-job.pid, 'SIGINT');
    const firstCtrlC = Date.now();
    await waitFor('the bridge to begin its graceful stop', () => job.output().includes('"signal":"SIGINT","msg":"shutting down'), 10_000, job.output);
    // The POS is answered within its budget while the bridge stops, the accrue's answer still to come.
    expect(await checkout).toBe(202);
    // A repeat within a second of the first is taken for the same Ctrl-C (REPEAT_MS in scripts/start.mjs): the second comes after it.
    await new Promise((r) => setTimeout(r, Math.max(0, firstCtrlC + 1_100 - Date.now())));
    expect(running(job.bridge)).toBe(true);
    process.kill(-job.pid, 'SIGINT');
    await waitFor(`the bridge (pid ${job.bridge}) to end at once`, () => !running(job.bridge), 5_000, job.output);
    await waitFor('npm to end', () => job.child.exitCode !== null || job.child.signalCode !== null, 5_000, job.output);
    expect(job.output()).not.toContain('"msg":"stopped"');
    expect(await answers(job.url)).toBe(false);
    // Stopped at once, its lock is left behind, stale: the next start takes it over.
    expect(lockOf(ledger)).toEqual({ exists: true, ownerRunning: false });
    await nextStartComesUp(ledger, port);
  }, 120_000);
});
