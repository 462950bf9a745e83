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
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../../scripts/bridge-process.js';
import { commandLine, copyProject, descendants, healthy, killAll, runJob, running, shellEnv, waitFor, type Job } from '../support/jobs.js';

const ADMIN_TOKEN = 'launcher-test-admin-token-0123456789';

const cleanEnv = (extra: Record<string, string>) => shellEnv(ADMIN_TOKEN, extra);
const started: Job[] = [];

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
  dir = copyProject('bridge-launcher-');
  // Built once here, so that no start below compiles while it is timed.
  const build = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: dir, env: cleanEnv({}), encoding: 'utf8', timeout: 120_000 });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
}, 150_000);

afterAll(() => {
  for (const proc of started) killAll([...descendants(proc.pid), proc.pid], 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('npm start: nothing outlives its launcher', () => {
  /** A sandbox bridge's settings: its own ledger, on `port`. */
  const bridgeEnv = (ledger: string, port: number) => cleanEnv({ PORT: String(port), LEDGER_URL: `file:${ledger}` });

  /** `npm start` (or `prefix… npm start`) as a job, up and answering; with its launcher's and bridge's pids. */
  async function startJob(ledger: string, port: number, prefix: string[] = []): Promise<Job & { url: string; launcher: number; bridge: number }> {
    const [command, ...args] = [...prefix, 'npm', 'start'];
    const job = runJob(started, command!, args, dir, bridgeEnv(ledger, port));
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      `${url}/healthz to answer 200`,
      () => {
        if (job.child.exitCode !== null || job.child.signalCode !== null) throw new Error(`npm start ended before ${url} was up:\n${job.output()}`);
        return healthy(url);
      },
      60_000,
      job.output,
    );
    // The banner comes once sandbox has made its demo merchants, a moment after the bridge listens.
    await waitFor('the sandbox banner', () => / simulator: {2}http:\/\/127\.0\.0\.1:\d+/.test(job.output()), 20_000, job.output);
    return { ...job, url, launcher: processBelow(job.pid, 'scripts/start.mjs'), bridge: processBelow(job.pid, 'dist/src/main.js') };
  }

  /**
   * A checkout whose accrue the simulator (in the bridge's process, in sandbox) commits at once and
   * answers `delayMs` later: its answer, once the accrue is committed and while that answer is still to come.
   */
  async function accrueInFlight(job: Job & { url: string }, prefix: string, delayMs: number): Promise<{ orderId: string; checkout: Promise<Response> }> {
    const simulator = / simulator: {2}(http:\/\/127\.0\.0\.1:\d+)/.exec(job.output())![1]!;
    const fault = await fetch(`${simulator}/__sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'slow_after_commit', delayMs }) });
    expect(fault.status).toBeLessThan(300);
    const orderId = `${prefix}-${Date.now()}`;
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
    return { orderId, checkout };
  }

  /** Waits until the bridge process is gone, nothing answers at `url` and the ledger's lock is released; fails otherwise. */
  async function waitAllGone(job: { output: () => string; url: string; launcher: number; bridge: number }, ledger: string): Promise<void> {
    const context = () => `${job.output()}\nbridge ${job.bridge} running: ${running(job.bridge)}; launcher ${job.launcher} running: ${running(job.launcher)}; lock: ${JSON.stringify(lockOf(ledger))}`;
    await waitFor(`the bridge (pid ${job.bridge}) and the launcher (pid ${job.launcher}) to end`, () => !running(job.bridge) && !running(job.launcher), 20_000, context);
    expect(await healthy(job.url)).toBe(false);
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
    const { orderId, checkout } = await accrueInFlight(job, 'KILL', 800);

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

  it("a supervisor's restart right after a group kill, while the old bridge still finishes a slow call, waits for its lock instead of failing, and comes up once it is released", async () => {
    const ledger = join(dir, 'restart-while-stopping', 'ledger.json');
    const port = await freePort();
    const job = await startJob(ledger, port);
    // Committed at once, answered 6 s later: the old bridge holds the ledger's lock until then.
    const { checkout } = await accrueInFlight(job, 'RESTART', 6_000);
    process.kill(-job.pid, 'SIGKILL');
    expect(await job.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await waitFor('the old bridge to begin its graceful stop', () => job.output().includes('"launcher":"scripts/start.mjs, which started this bridge, is gone'), 10_000, job.output);
    expect(running(job.bridge)).toBe(true);
    expect(lockOf(ledger)).toEqual({ exists: true, ownerRunning: true });

    // The restart, at once: on the same ledger and port, while the old one still holds the lock.
    const next = runJob(started, 'npm', ['start'], dir, bridgeEnv(ledger, port));
    await waitFor('the restart to say it waits for the old bridge', () => next.output().includes(`is held by process ${job.bridge}: waiting up to 20 s for it to finish stopping`), 20_000, next.output);
    // The old bridge finishes its call (the POS had its answer within its budget) and releases the lock.
    expect((await checkout).status).toBe(202);
    await waitFor(`the old bridge (pid ${job.bridge}) to end`, () => !running(job.bridge), 20_000, job.output);
    expect(job.output()).toContain('"msg":"stopped"');
    // Then the restart comes up: the sandbox's ledger emptied as at every start, nothing refused.
    await waitFor(`the restart to answer at http://127.0.0.1:${port}`, () => healthy(`http://127.0.0.1:${port}`), 30_000, next.output);
    // Its banner (a moment after it listens) says the sandbox ledger was emptied at this start, as at every start.
    await waitFor('the restart\'s banner to say its ledger was emptied', () => /ledger: .*\(emptied at this start/.test(next.output()), 20_000, next.output);
    expect(next.output()).not.toContain('in use by process');
    process.kill(next.pid, 'SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
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
    // An accrue answered only after 30 s: the graceful stop waits for it (up to its 15 s limit).
    const checkout = (await accrueInFlight(job, 'CTRL-C', 30_000)).checkout.then(
      (r) => r.status,
      () => 'no answer',
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
    expect(await healthy(job.url)).toBe(false);
    // Stopped at once, its lock is left behind, stale: the next start takes it over.
    expect(lockOf(ledger)).toEqual({ exists: true, ownerRunning: false });
    await nextStartComesUp(ledger, port);
  }, 120_000);
});
