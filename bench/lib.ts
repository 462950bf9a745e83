/**
 * What the benchmarks share: statistics, a keep-alive HTTP load generator, the simulator and
 * bridges as child processes that are always cleaned up, and /proc CPU readings. No dependency
 * beyond Node. Their tables and figures: bench/table.ts.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { PhaseFigures } from './table.js';

// ------------------------------------------------------------------ statistics

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function summarize(values: number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return { count: sorted.length, mean: sum / (sorted.length || 1), p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? Number.NaN };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * A phase's figures over a part's rounds: the medians of throughput and latency, the worst max, and
 * every round's answers that were not the expected success.
 */
export function roundMedians(phases: readonly PhaseResult[]): PhaseFigures {
  return {
    throughput: median(phases.map((p) => p.throughput)),
    latency: {
      p50: median(phases.map((p) => p.latency.p50)),
      p99: median(phases.map((p) => p.latency.p99)),
      max: Math.max(...phases.map((p) => p.latency.max)),
      mean: median(phases.map((p) => p.latency.mean)),
    },
    unexpected: phases.reduce((n, p) => n + p.unexpected, 0),
    errors: phases.reduce((n, p) => n + p.errors, 0),
  };
}

// ------------------------------------------------------------------ output

export function progress(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

// ------------------------------------------------------------------ HTTP load

/** Measured bridges run as a deployment does: direct POS posts carry a bearer token (POS_TOKEN). */
export const BENCH_POS_TOKEN = 'bench-pos-token-0123456789abcdef';
export const BRIDGE_POST_HEADERS: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${BENCH_POS_TOKEN}` };

export interface PhaseSpec {
  name: string;
  baseUrl: string;
  path: string;
  /** GET sends no body, and request i's path is `pathsOf[i]` when given (the register part's direct reads); POST by default. */
  method?: 'GET' | 'POST';
  pathsOf?: string[];
  headers: Record<string, string>;
  /** Request i's own headers instead of `headers` (each merchant's token, in the many-merchants part), built before the clock starts. */
  headersOf?: Record<string, string>[];
  /** One request body per request, built before the clock starts. */
  bodies: string[];
  concurrency: number;
  agent: http.Agent;
  /**
   * Several servers behind the same path (bridge instances on one shared ledger): request i goes to
   * `targets[i % targets.length]`, round-robin. When set, `baseUrl` and `agent` are not used.
   */
  targets?: { baseUrl: string; agent: http.Agent }[];
  /** True when the answer is the expected success (counted, never thrown). */
  accept: (status: number, body: string) => boolean;
}

export interface PhaseResult {
  name: string;
  requests: number;
  seconds: number;
  throughput: number;
  latency: Summary;
  /** Answers that were not the expected success (wrong status or body), and transport errors. */
  unexpected: number;
  errors: number;
  firstProblem?: string;
  /** Bodies of the first few unexpected answers, for a closer look. */
  problemBodies: string[];
}

const PROBLEM_BODIES_KEPT = 5;

export function keepAliveAgent(concurrency: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
}

/** An answer's status and its body as text. */
function answerOf(res: http.IncomingMessage): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    res.on('error', reject);
  });
}

function post(url: URL, path: string, headers: Record<string, string>, body: string, agent: http.Agent, method: 'GET' | 'POST' = 'POST'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const sent = method === 'GET' ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request({ host: url.hostname, port: url.port, path, method, agent, headers: sent }, (res) => answerOf(res).then(resolve, reject));
    req.on('error', reject);
    req.end(method === 'GET' ? undefined : body);
  });
}

/** Where request i goes: the one target, or round-robin over `targets`. */
function router(spec: Pick<PhaseSpec, 'baseUrl' | 'agent' | 'targets'>): (i: number) => { url: URL; agent: http.Agent } {
  const targets = (spec.targets?.length ? spec.targets : [{ baseUrl: spec.baseUrl, agent: spec.agent }]).map((t) => ({ url: new URL(t.baseUrl), agent: t.agent }));
  return (i) => targets[i % targets.length]!;
}

/** Fixed concurrency: `concurrency` loops, each sending its next request as soon as the last answered. */
export async function runPhase(spec: PhaseSpec): Promise<PhaseResult> {
  const target = router(spec);
  const latencies = new Array<number>(spec.bodies.length);
  let next = 0;
  let unexpected = 0;
  let errors = 0;
  let firstProblem: string | undefined;
  const problemBodies: string[] = [];
  const loop = async () => {
    for (;;) {
      const i = next++;
      if (i >= spec.bodies.length) return;
      const { url, agent } = target(i);
      const t0 = performance.now();
      try {
        const res = await post(url, spec.pathsOf?.[i] ?? spec.path, spec.headersOf?.[i] ?? spec.headers, spec.bodies[i]!, agent, spec.method);
        latencies[i] = performance.now() - t0;
        if (!spec.accept(res.status, res.body)) {
          unexpected++;
          firstProblem ??= `HTTP ${res.status} ${res.body.slice(0, 200)}`;
          if (problemBodies.length < PROBLEM_BODIES_KEPT) problemBodies.push(res.body);
        }
      } catch (error) {
        latencies[i] = performance.now() - t0;
        errors++;
        firstProblem ??= (error as Error).message;
      }
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: Math.max(1, spec.concurrency) }, loop));
  const seconds = (performance.now() - start) / 1000;
  return { name: spec.name, requests: spec.bodies.length, seconds, throughput: spec.bodies.length / seconds, latency: summarize(latencies), unexpected, errors, firstProblem, problemBodies };
}

/**
 * Open loop at a fixed offered rate: request i leaves at start + i / rate whether or not earlier
 * ones have answered, and its latency counts from that scheduled instant, so a stall shows up as
 * latency instead of silently lowering the rate (no coordinated omission).
 */
export async function runRatePhase(spec: Omit<PhaseSpec, 'concurrency'> & { rate: number }): Promise<PhaseResult> {
  const target = router(spec);
  const latencies = new Array<number>(spec.bodies.length);
  let unexpected = 0;
  let errors = 0;
  let firstProblem: string | undefined;
  const interval = 1000 / spec.rate;
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < spec.bodies.length; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const { url, agent } = target(i);
    inFlight.push(
      post(url, spec.pathsOf?.[i] ?? spec.path, spec.headersOf?.[i] ?? spec.headers, spec.bodies[i]!, agent, spec.method).then(
        (res) => {
          latencies[i] = performance.now() - due;
          if (!spec.accept(res.status, res.body)) {
            unexpected++;
            firstProblem ??= `HTTP ${res.status} ${res.body.slice(0, 200)}`;
          }
        },
        (error: Error) => {
          latencies[i] = performance.now() - due;
          errors++;
          firstProblem ??= error.message;
        },
      ),
    );
  }
  await Promise.all(inFlight);
  const seconds = (performance.now() - start) / 1000;
  return { name: spec.name, requests: spec.bodies.length, seconds, throughput: spec.bodies.length / seconds, latency: summarize(latencies), unexpected, errors, firstProblem, problemBodies: [] };
}

export async function getJson(url: string, timeoutMs = 2000, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false, headers }, (res) => {
      answerOf(res).then(({ status, body: text }) => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status, body });
      }, reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// ------------------------------------------------------------------ processes and clean-up

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
const syncCleanups = new Map<string, () => void>();

/**
 * A synchronous last-resort clean-up step (for example dropping a database schema through a
 * `spawnSync`ed helper), run by cleanupSync after the children are killed and before temporary
 * folders go. Keyed, so the normal path can `forgetSyncCleanup` once it has cleaned up itself.
 */
export function onSyncCleanup(key: string, fn: () => void): void {
  syncCleanups.set(key, fn);
}

export function forgetSyncCleanup(key: string): void {
  syncCleanups.delete(key);
}

export function trackTempDir(dir: string): string {
  tempDirs.add(dir);
  return dir;
}

export function forgetTempDir(dir: string): void {
  tempDirs.delete(dir);
}

/** A new temporary folder, removed at exit if whoever made it does not remove it first (removeDir). */
export function tempDir(prefix: string): string {
  return trackTempDir(mkdtempSync(join(os.tmpdir(), prefix)));
}

/** Removes a temporary folder made with tempDir. */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  forgetTempDir(dir);
}

export interface Child {
  process: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export function startChild(command: string, args: string[], options: SpawnOptions = {}): Child {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], ...options });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-20_000)));
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    });
    child.once('error', (error) => {
      err += `\n${error.message}`;
      children.delete(child);
      resolve(null);
    });
  });
  return {
    process: child,
    stdout: () => out,
    stderr: () => err,
    exited,
    async stop(graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Resolves with the first stdout line matching `pattern`, or rejects when the child exits first or time is up. */
export function waitForLine(child: Child, pattern: RegExp, timeoutMs = 15_000): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const match = child.stdout().match(pattern);
      if (match) {
        done();
        resolve(match);
      }
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`timed out waiting for ${pattern} from child; stderr: ${child.stderr().slice(-2000)}`));
    }, timeoutMs);
    const onExit = (code: number | null) => {
      done();
      reject(new Error(`child exited (${code}) before printing ${pattern}; stderr: ${child.stderr().slice(-2000)}`));
    };
    const done = () => {
      clearTimeout(timer);
      child.process.stdout?.off('data', check);
      child.process.off('exit', onExit);
    };
    child.process.stdout?.on('data', check);
    child.process.once('exit', onExit);
    check();
  });
}

/** Polls `url` until it answers 200. */
export async function waitForHttp(url: string, child: Child, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`child exited (${child.process.exitCode}) before ${url} answered; stderr: ${child.stderr().slice(-2000)}`);
    try {
      if ((await getJson(url, 1000)).status === 200) return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms; stderr: ${child.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Synchronous last resort: kill every child, remove every temporary folder. */
export function cleanupSync(): void {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  children.clear();
  const steps = [...syncCleanups.values()];
  syncCleanups.clear();
  for (const step of steps) {
    try {
      step();
    } catch (error) {
      progress(`clean-up step failed: ${(error as Error).message}`);
    }
  }
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
  tempDirs.clear();
}

export function installCleanup(): void {
  process.once('exit', cleanupSync);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping children and removing temporary folders`);
      cleanupSync();
      process.exit(130);
    });
  }
}

// ------------------------------------------------------------------ CPU readings

const CLOCK_TICKS = 100;

/** User + system CPU milliseconds of a process from /proc (Linux); undefined elsewhere. */
export function cpuMsOf(pid: number | undefined): number | undefined {
  const split = cpuSplitMsOf(pid);
  return split && split.user + split.system;
}

/** A process's CPU milliseconds so far, in user space and in the kernel (its system calls), from /proc; undefined off Linux or once it is gone. */
export function cpuSplitMsOf(pid: number | undefined): { user: number; system: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ", field 3 is state; utime and stime are fields 14 and 15 (indexes 11, 12 here).
    return { user: (Number(fields[11]) * 1000) / CLOCK_TICKS, system: (Number(fields[12]) * 1000) / CLOCK_TICKS };
  } catch {
    return undefined;
  }
}

/**
 * CPU milliseconds used so far by every process whose name is `postgres` (the PostgreSQL server:
 * postmaster, backends, background processes), from /proc: utime + stime, plus cutime + cstime so
 * backends that exited and were reaped by the postmaster still count. Approximate: it covers every
 * client's sessions on this server, not only ours, and a backend that exits between two readings
 * counts its whole life. Undefined when /proc shows no such process (server elsewhere, not Linux).
 */
export function processCpuMsByName(name: string): { ms: number; processes: number } | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  let ticks = 0;
  let processes = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== name) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, cutime, cstime: fields 14 to 17 (indexes 11 to 14 here).
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      processes++;
    } catch {
      /* gone meanwhile */
    }
  }
  return processes ? { ms: (ticks * 1000) / CLOCK_TICKS, processes } : undefined;
}

export function selfCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** The transactionIds named by the first few answers that were not the expected success. */
export function problemTransactionIds(bodies: string[], max = 3): string[] {
  return bodies
    .map((body) => {
      try {
        return (JSON.parse(body) as { transactionId?: string }).transactionId;
      } catch {
        return undefined;
      }
    })
    .filter((id): id is string => typeof id === 'string')
    .slice(0, max);
}

/** POSTs JSON and answers the status and the parsed body (the benchmark's set-up calls: control APIs, admin). */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

// ------------------------------------------------------------------ PostgreSQL

/** The URL with our own `schema` parameter set (or removed), credentials kept. */
export function withSchema(url: string, schema?: string): string {
  const u = new URL(url);
  if (schema) u.searchParams.set('schema', schema);
  else u.searchParams.delete('schema');
  return u.toString();
}

/** The URL with its password masked. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*)(:[^@/]*)?@/, (_m, user: string, pass?: string) => `//${user}${pass ? ':***' : ''}@`);
}

/** Why a database call failed, on one line: the error's code and message, or what an AggregateError (several addresses refused) holds. */
export function reason(error: unknown): string {
  const e = error as { code?: string; message?: string; errors?: { message?: string }[] };
  const message = (e.message || e.errors?.map((x) => x.message).join('; ') || String(error)).split('\n')[0]!.slice(0, 300);
  return e.code && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}

// ------------------------------------------------------------------ the simulator and bridges

/** Where the built benchmark runs from: dist/bench (its child scripts), dist/, and the project (the children's working folder). */
export interface BenchPaths {
  here: string;
  distDir: string;
  projectRoot: string;
}

/** What every part of `npm run bench` is given besides its own knobs. */
export interface PartContext extends BenchPaths {
  /** Told apart in every order id, so that runs never collide. */
  runId: string;
  appToken: string;
  apiKey: string;
  adminToken: string;
  out: (line?: string) => void;
  gc?: () => void;
}

/** The load knobs of `npm run bench` (--requests, --concurrency, --warmup, --rounds, --rate). */
export interface LoadOptions {
  requests: number;
  concurrency: number;
  warmup: number;
  rounds: number;
  rate: number;
}

/** The simulator as a child process (`simulator-process.js`), listening. */
export async function startSimulator(paths: BenchPaths): Promise<{ child: Child; url: string }> {
  const child = startChild(process.execPath, [join(paths.here, 'simulator-process.js'), '0'], { cwd: paths.projectRoot });
  return { child, url: (await waitForLine(child, /SIMULATOR_URL=(\S+)/))[1]! };
}

/** A measured bridge's variables, as a deployment runs it against the simulator at `simUrl` (direct POS posts carry BENCH_POS_TOKEN). */
export function bridgeEnv(tokens: Pick<PartContext, 'appToken' | 'apiKey' | 'adminToken'>, simUrl: string): Record<string, string> {
  return {
    LOYALTY_BASE_URL: simUrl,
    LOYALTY_APP_TOKEN: tokens.appToken,
    LOYALTY_API_KEY: tokens.apiKey,
    ADMIN_TOKEN: tokens.adminToken,
    POS_TOKEN: BENCH_POS_TOKEN,
    LOG_LEVEL: 'silent',
  };
}

export interface BridgeChild {
  child: Child;
  url: string;
  /** From the process's start to /readyz answering 200. */
  startupMs: number;
}

/**
 * A bridge (`dist/src/main.js`) as a child process on `ledgerUrl`, ready; stopped again if it does
 * not become ready. `nodeArgs` default to BENCH_BRIDGE_NODE_ARGS (e.g. `--cpu-prof`), so every
 * part's bridges can be profiled the same way.
 */
export async function startBridgeProcess(
  paths: BenchPaths,
  options: { ledgerUrl: string; env: Record<string, string>; nodeArgs?: string[]; readyTimeoutMs?: number },
): Promise<BridgeChild> {
  const port = await freePort();
  const started = performance.now();
  const nodeArgs = options.nodeArgs ?? (process.env.BENCH_BRIDGE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = startChild(process.execPath, [...nodeArgs, join(paths.distDir, 'src', 'main.js')], {
    cwd: paths.projectRoot,
    env: { ...process.env, ...options.env, PORT: String(port), LEDGER_URL: options.ledgerUrl },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/readyz`, child, options.readyTimeoutMs);
  } catch (error) {
    await child.stop();
    throw error;
  }
  return { child, url, startupMs: performance.now() - started };
}

/**
 * A simulator and a bridge (a file ledger in a new temporary folder) as child processes, the bridge
 * ready; `env` gives the bridge's variables besides PORT and LEDGER_URL, knowing the simulator's address.
 */
export async function startSimulatorAndBridge(
  paths: BenchPaths,
  label: string,
  env: (simUrl: string) => Record<string, string>,
): Promise<{ sim: Child; simUrl: string; bridge: Child; bridgeUrl: string }> {
  const sim = await startSimulator(paths);
  const dir = tempDir(`bench-${label}-`);
  try {
    const bridge = await startBridgeProcess(paths, { ledgerUrl: `file:${join(dir, 'ledger.json')}`, env: env(sim.url) });
    return { sim: sim.child, simUrl: sim.url, bridge: bridge.child, bridgeUrl: bridge.url };
  } catch (error) {
    await sim.child.stop();
    throw error;
  }
}

/** CPU ms per request between two readings of the same processes; undefined where either reading is. */
export function perRequest<K extends string>(before: { [key in K]?: number }, after: { [key in K]?: number }, requests: number): { [key in K]?: number } {
  const per: { [key in K]?: number } = {};
  for (const key of Object.keys(before) as K[]) {
    const [a, b] = [before[key], after[key]];
    per[key] = a === undefined || b === undefined ? undefined : (b - a) / requests;
  }
  return per;
}

/** Runs `task` over `items`, `lanes` at a time (setting up many merchants or guests over HTTP). */
export async function inLanes<T, R>(items: T[], lanes: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      for (let i = next++; i < items.length; i = next++) results[i] = await task(items[i]!);
    }),
  );
  return results;
}

/** A merchant installed at the simulator and created in the bridge through its admin API: its id and POS token. */
export interface CreatedMerchant {
  id: string;
  posToken: string;
}

/**
 * Each id installed as a merchant at the simulator (its own app token and API key) and created in
 * the bridge with them (resolve-credentials, secrets sealed), 16 at a time.
 */
export async function createMerchants(simUrl: string, bridgeUrl: string, adminToken: string, ids: string[]): Promise<CreatedMerchant[]> {
  return inLanes(ids, 16, async (id): Promise<CreatedMerchant> => {
    const installed = await postJson(`${simUrl}/__sim/merchants`, { id });
    if (installed.status !== 201 && installed.status !== 200) throw new Error(`simulator refused merchant ${id}: HTTP ${installed.status} ${JSON.stringify(installed.body)}`);
    const { appToken, apiKey } = installed.body as { appToken: string; apiKey: string };
    const made = await postJson(`${bridgeUrl}/v1/admin/merchants`, { id, loyalty: { appToken, apiKey } }, { authorization: `Bearer ${adminToken}` });
    if (made.status !== 201) throw new Error(`bridge refused merchant ${id}: HTTP ${made.status} ${JSON.stringify(made.body)}`);
    return { id, posToken: (made.body as { posToken: string }).posToken };
  });
}

/** The server's WAL position now, or undefined when it cannot be read. */
export async function walLsn(client: { query<R>(text: string): Promise<{ rows: R[] }> }): Promise<string | undefined> {
  return client.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn').then(
    (r) => r.rows[0]!.lsn,
    () => undefined,
  );
}
