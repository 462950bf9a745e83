/**
 * Part D of the benchmark: the PostgreSQL ledger store (`LEDGER_URL=postgres://…?schema=…`).
 *
 * One simulator child process; bridge children (`dist/src/main.js`) on one fresh schema
 * `bench_<pid>_<ms>` of BENCH_DATABASE_URL: first one instance, then three on the same schema, the
 * load generator spreading requests round-robin over them at part A's total concurrency. A
 * file-ledger bridge on the same simulator runs alternately with the one-instance phases, as a
 * reference taken under the same conditions. Same closed-loop and open-loop phase code as part A
 * (bench-lib runPhase / runRatePhase). After every PostgreSQL phase the ledger is read back
 * (every checkout recorded once and accrued) and the simulator's books are checked (one accrual
 * per checkout upstream). The schema is dropped at the end, and by the synchronous clean-up on an
 * error, SIGINT or early exit. No reachable database: one line says part D is skipped.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { posSettingDeclarations } from '../adapters/index.js';
import { startBridge as startInProcessBridge } from '../src/bridge.js';
import { loadConfig } from '../src/config.js';
import { PostgresLedgerStore } from '../src/ledger/pg-store.js';
import { silentLogger } from '../src/logger.js';
import {
  problemTransactionIds,
  cpuMsOf,
  fmt,
  forgetSyncCleanup,
  forgetTempDir,
  freePort,
  getJson,
  keepAliveAgent,
  median,
  onSyncCleanup,
  processCpuMsByName,
  progress,
  runPhase,
  runRatePhase,
  selfCpuMs,
  startChild,
  table,
  trackTempDir,
  waitForHttp,
  waitForLine,
  BENCH_POS_TOKEN,
  BRIDGE_POST_HEADERS,
  type Child,
  type PhaseResult,
  type PhaseSpec,
} from './bench-lib.js';
import { dropBenchSchema } from './bench-pg-drop.js';
import { serialDiagnostic } from './bench-serial.js';

export interface PartASummary {
  throughput: number;
  p50: number;
  p99: number;
  cpuBridge: number;
  rate?: { p50: number; p99: number };
}

export interface PgPartOptions {
  databaseUrl: string;
  requests: number;
  concurrency: number;
  warmup: number;
  rounds: number;
  rate: number;
  /** Checkouts in the one-at-a-time diagnostic with a counting PostgreSQL store (0 skips it). */
  serial: number;
  runId: string;
  /** dist/scripts and the project root, for the child processes. */
  here: string;
  distDir: string;
  projectRoot: string;
  appToken: string;
  apiKey: string;
  adminToken: string;
  /** Request bodies and the success test of part A's bridge phases, so both parts send the same checkouts. */
  bridgeBodies: (tag: string, count: number) => string[];
  accept: (status: number, body: string) => boolean;
  /** Part A's file-store bridge figures from this run, when part A ran. */
  partA?: PartASummary;
  gc?: () => void;
  out: (line?: string) => void;
}

const INSTANCES = 3;
const PROBE_REQUESTS = 2000;
/** PostgresLedgerStore's pool when main.ts opens it (no pool size option reaches it from LEDGER_URL or the environment). */
const BRIDGE_POOL_SIZE = 10;
const SETTLE_TIMEOUT_MS = 30_000;

interface Instance {
  name: string;
  child: Child;
  url: string;
  agent: http.Agent;
  rateAgent: http.Agent;
}

interface Cpu {
  client?: number;
  sim?: number;
  bridges?: number;
  postgres?: number;
}

interface Measured extends PhaseResult {
  config: string;
  round: number;
  cpu: Cpu;
  check?: string;
  checkOk?: boolean;
  backends?: BackendSummary;
  problems?: string[];
  /** WAL written on the server during the phase, per checkout (every client's, so approximate). */
  walBytes?: number;
}

// ------------------------------------------------------------------ what the bridges' backends do

/**
 * Local TCP ports of `pid`'s connections to `serverPort` (Linux /proc): a bridge's pool
 * connections, which pg_stat_activity shows as client_port. Empty where /proc cannot tell.
 */
function pgPortsOf(pid: number | undefined, serverPort: number): Set<number> {
  const ports = new Set<number>();
  if (pid === undefined) return ports;
  try {
    const inodes = new Set<string>();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {
        /* closed meanwhile */
      }
    }
    for (const file of ['tcp', 'tcp6']) {
      let text: string;
      try {
        text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
      } catch {
        continue;
      }
      for (const line of text.split('\n').slice(1)) {
        const f = line.trim().split(/\s+/);
        if (f.length < 10 || !inodes.has(f[9]!)) continue;
        const local = parseInt(f[1]!.split(':')[1]!, 16);
        const remote = parseInt(f[2]!.split(':')[1]!, 16);
        if (remote === serverPort) ports.add(local);
      }
    }
  } catch {
    /* not Linux, or the process is gone */
  }
  return ports;
}

interface BackendSummary {
  samples: number;
  /** Mean per sample over the bridges' connections. */
  open: number;
  busy: number;
  /** What the busy ones were doing: `running` (no wait event) or wait_event_type:wait_event; share of busy backend-samples. */
  doing: [string, number][];
  /** Share of samples in which some instance had every connection of a full pool (10) busy. */
  poolFull: number;
  /** Other clients of the server (not these bridges, not the benchmark's own connection): busy backends per sample. */
  othersBusy: number;
}

/**
 * Samples pg_stat_activity every `everyMs` for the backends of the given bridge processes, until
 * stopped: how many connections each pool holds, how many are busy and on what they wait. If the
 * pools are rarely full, requests did not queue for a connection.
 */
function sampleBackends(admin: pg.Client, pids: (number | undefined)[], serverPort: number, poolSize: number, everyMs = 50): { stop(): Promise<BackendSummary> } {
  let samples = 0;
  let open = 0;
  let busy = 0;
  let poolFull = 0;
  let othersBusy = 0;
  const doing = new Map<string, number>();
  let stopped = false;
  const loop = (async () => {
    let ports = pids.map((pid) => pgPortsOf(pid, serverPort));
    let lastPorts = Date.now();
    while (!stopped) {
      if (Date.now() - lastPorts > 1000) {
        ports = pids.map((pid) => pgPortsOf(pid, serverPort));
        lastPorts = Date.now();
      }
      const all = new Set(ports.flatMap((p) => [...p]));
      try {
        const { rows } = await admin.query<{ client_port: number; state: string | null; wait_event_type: string | null; wait_event: string | null }>(
          "SELECT client_port, state, wait_event_type, wait_event FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        );
        samples++;
        othersBusy += rows.filter((r) => !all.has(r.client_port) && r.state !== 'idle').length;
        rows.splice(0, rows.length, ...rows.filter((r) => all.has(r.client_port)));
        open += rows.length;
        const busyPerInstance = ports.map(() => 0);
        const openPerInstance = ports.map(() => 0);
        for (const r of rows) {
          const k = ports.findIndex((p) => p.has(r.client_port));
          if (k >= 0) openPerInstance[k]!++;
          if (r.state === 'idle') continue;
          busy++;
          if (k >= 0) busyPerInstance[k]!++;
          const what = r.state === 'active' ? (r.wait_event ? `${r.wait_event_type}:${r.wait_event}` : 'running') : (r.state ?? 'unknown');
          doing.set(what, (doing.get(what) ?? 0) + 1);
        }
        if (busyPerInstance.some((b, k) => b >= poolSize && openPerInstance[k]! >= poolSize)) poolFull++;
      } catch {
        /* a failed sample is just skipped */
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const n = samples || 1;
      const busyTotal = busy || 1;
      return {
        samples,
        open: open / n,
        busy: busy / n,
        doing: [...doing].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, v / busyTotal] as [string, number]),
        poolFull: poolFull / n,
        othersBusy: othersBusy / n,
      };
    },
  };
}

function describeBackends(b: BackendSummary): string {
  const top = b.doing.slice(0, 4).map(([k, share]) => `${k} ${fmt(share * 100, 0)}%`).join(', ');
  return `${fmt(b.open, 1)} connections open, ${fmt(b.busy, 2)} busy on average (${top || 'never busy'}); some pool full in ${fmt(b.poolFull * 100, 0)}% of ${b.samples} samples; other clients' busy backends ${fmt(b.othersBusy, 2)}`;
}

/** The URL with our own `schema` parameter set (or removed), credentials kept. */
function withSchema(url: string, schema?: string): string {
  const u = new URL(url);
  if (schema) u.searchParams.set('schema', schema);
  else u.searchParams.delete('schema');
  return u.toString();
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*)(:[^@/]*)?@/, (_m, user: string, pass?: string) => `//${user}${pass ? ':***' : ''}@`);
}

function reason(error: unknown): string {
  const e = error as { code?: string; message?: string; errors?: { message?: string }[] };
  const message = e.message || e.errors?.map((x) => x.message).join('; ') || String(error);
  return e.code && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}

export async function pgPart(o: PgPartOptions): Promise<void> {
  const out = o.out;
  const baseUrl = withSchema(o.databaseUrl);
  // ---------------------------------------------------------------- reachable?
  const admin = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 });
  admin.on('error', () => undefined);
  let serverVersion: string;
  try {
    await admin.connect();
    serverVersion = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
  } catch (error) {
    await admin.end().catch(() => undefined);
    out(`D. PostgreSQL store: skipped: no database reachable at ${redact(baseUrl)} (${reason(error)}); set BENCH_DATABASE_URL to run it`);
    out();
    return;
  }

  const schema = `bench_${process.pid}_${Date.now()}`;
  const cleanupKey = `pg-schema:${schema}`;
  onSyncCleanup(cleanupKey, () => {
    progress(`dropping schema ${schema}`);
    const r = spawnSync(process.execPath, [join(o.here, 'bench-pg-drop.js'), baseUrl, schema], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 30_000 });
    if (r.status !== 0) progress(`could not drop schema ${schema} (exit ${r.status ?? r.signal}); drop it by hand: DROP SCHEMA ${schema} CASCADE`);
  });
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } catch (error) {
    forgetSyncCleanup(cleanupKey);
    await admin.end().catch(() => undefined);
    out(`D. PostgreSQL store: skipped: cannot create schema ${schema} in ${redact(baseUrl)} (${reason(error)})`);
    out();
    return;
  }
  const ledgerUrl = withSchema(baseUrl, schema);
  const serverPort = Number(new URL(baseUrl).port || 5432);
  progress(`part D: PostgreSQL ${serverVersion} at ${redact(baseUrl)}, schema ${schema}`);

  const children: Child[] = [];
  const agents: http.Agent[] = [];
  const fileDir = trackTempDir(mkdtempSync(join(os.tmpdir(), 'bench-pg-ref-')));
  let failed: unknown;
  try {
    await run();
  } catch (error) {
    failed = error;
  } finally {
    for (const agent of agents) agent.destroy();
    await Promise.all(children.map((c) => c.stop()));
    try {
      await admin.query("SET lock_timeout = '5s'");
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      progress(`part D: schema ${schema} dropped`);
    } catch (error) {
      progress(`part D: dropping ${schema} on the benchmark's connection failed (${reason(error)}); retrying on a new one`);
      await dropBenchSchema(baseUrl, schema).then(
        () => undefined,
        (e: unknown) => progress(`part D: could not drop schema ${schema}: ${reason(e)}; drop it by hand`),
      );
    }
    forgetSyncCleanup(cleanupKey);
    await admin.end().catch(() => undefined);
    await rm(fileDir, { recursive: true, force: true });
    forgetTempDir(fileDir);
  }
  if (failed) throw failed;

  // ---------------------------------------------------------------- the run

  async function run(): Promise<void> {
    progress('part D: starting the simulator, a file-ledger bridge (reference) and bridge 1 on PostgreSQL');
    const sim = startChild(process.execPath, [join(o.here, 'bench-sim.js'), '0'], { cwd: o.projectRoot });
    children.push(sim);
    const simUrl = (await waitForLine(sim, /SIMULATOR_URL=(\S+)/))[1]!;

    const startBridge = async (name: string, ledger: string): Promise<Instance> => {
      const port = await freePort();
      const child = startChild(process.execPath, [join(o.distDir, 'src', 'main.js')], {
        cwd: o.projectRoot,
        env: {
          ...process.env,
          PORT: String(port),
          LOYALTY_BASE_URL: simUrl,
          LOYALTY_APP_TOKEN: o.appToken,
          LOYALTY_API_KEY: o.apiKey,
          ADMIN_TOKEN: o.adminToken,
          POS_TOKEN: BENCH_POS_TOKEN,
          LEDGER_URL: ledger,
          LOG_LEVEL: 'silent',
        },
      });
      children.push(child);
      const url = `http://127.0.0.1:${port}`;
      await waitForHttp(`${url}/readyz`, child, 30_000);
      const agent = keepAliveAgent(o.concurrency);
      const rateAgent = keepAliveAgent(64);
      agents.push(agent, rateAgent);
      return { name, child, url, agent, rateAgent };
    };

    const [fileRef, first] = await Promise.all([startBridge('file', `file:${join(fileDir, 'ledger.json')}`), startBridge('pg-1', ledgerUrl)]);
    progress(`part D: simulator ${simUrl} (pid ${sim.process.pid}), file bridge pid ${fileRef.child.process.pid}, pg bridge 1 pid ${first.child.process.pid}`);
    const pgInstances: Instance[] = [first];

    const spec = (instances: Instance[], tag: string, count: number): PhaseSpec => ({
      name: tag,
      baseUrl: instances[0]!.url,
      agent: instances[0]!.agent,
      targets: instances.map((i) => ({ baseUrl: i.url, agent: i.agent })),
      path: '/v1/checkouts/generic',
      headers: BRIDGE_POST_HEADERS,
      bodies: o.bridgeBodies(tag, count),
      concurrency: o.concurrency,
      accept: o.accept,
    });
    const cpuNow = (instances: Instance[]): Cpu => {
      const bridgeMs = instances.map((i) => cpuMsOf(i.child.process.pid));
      return {
        client: selfCpuMs(),
        sim: cpuMsOf(sim.process.pid),
        bridges: bridgeMs.every((v) => v !== undefined) ? bridgeMs.reduce((a, b) => a! + b!, 0) : undefined,
        postgres: processCpuMsByName('postgres')?.ms,
      };
    };
    const perRequest = (a: Cpu, b: Cpu, n: number): Cpu => {
      const d = (x?: number, y?: number) => (x === undefined || y === undefined ? undefined : (y - x) / n);
      return { client: d(a.client, b.client), sim: d(a.sim, b.sim), bridges: d(a.bridges, b.bridges), postgres: d(a.postgres, b.postgres) };
    };
    const settle = async () => {
      o.gc?.();
      await new Promise((r) => setTimeout(r, 200));
    };
    const prefixOf = (tag: string) => JSON.parse(o.bridgeBodies(tag, 1)[0]!).orderId.replace(/0$/, '') as string;

    const walLsn = () => admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn').then((r) => r.rows[0]!.lsn, () => undefined);
    const phases: Measured[] = [];
    const closed = async (config: string, instances: Instance[], round: number, tag: string, isPg: boolean) => {
      const s = spec(instances, tag, o.requests);
      await settle();
      progress(`part D round ${round}/${o.rounds}: ${o.requests} checkouts to ${config} at concurrency ${o.concurrency}`);
      const booksBefore = isPg ? await accrueRequests(simUrl) : undefined;
      const sampler = isPg ? sampleBackends(admin, instances.map((i) => i.child.process.pid), serverPort, BRIDGE_POOL_SIZE) : undefined;
      const lsn0 = await walLsn();
      const c0 = cpuNow(instances);
      const result = await runPhase(s);
      const c1 = cpuNow(instances);
      const lsn1 = await walLsn();
      const backends = await sampler?.stop();
      const walBytes = lsn0 && lsn1 ? Number((await admin.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2) AS d', [lsn1, lsn0])).rows[0]!.d) / result.requests : undefined;
      const m: Measured = { ...result, config, round, cpu: perRequest(c0, c1, result.requests), backends, walBytes };
      if (isPg && result.problemBodies.length) m.problems = await explain(result.problemBodies);
      if (result.unexpected || result.errors) progress(`${config} round ${round}: ${result.unexpected} unexpected answers, ${result.errors} errors; first: ${result.firstProblem}`);
      if (isPg) Object.assign(m, await verify(prefixOf(tag), result.requests, booksBefore));
      phases.push(m);
      return m;
    };

    // The ledger and the upstream's books after a phase: each checkout one record, accrued, with its
    // operation claimed, and one accrual upstream.
    const verify = async (prefix: string, expected: number, accrueRequestsBefore: number | undefined): Promise<{ check: string; checkOk: boolean }> => {
      const deadline = Date.now() + SETTLE_TIMEOUT_MS;
      for (;;) {
        const { rows } = await admin.query<{ open: number }>(`SELECT count(*) FILTER (WHERE open)::int AS open FROM ${schema}.ledger_records WHERE starts_with(order_id, $1)`, [prefix]);
        if (rows[0]!.open === 0 || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const byStatus = (
        await admin.query<{ count: number; status: string }>(`SELECT count(*)::int AS count, status FROM ${schema}.ledger_records WHERE starts_with(order_id, $1) GROUP BY status ORDER BY status`, [prefix])
      ).rows;
      const ids = (await admin.query<{ transaction_id: string; version: number }>(`SELECT transaction_id, version FROM ${schema}.ledger_records WHERE starts_with(order_id, $1)`, [prefix])).rows;
      const claims = Number(
        (
          await admin.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${schema}.ledger_operation_claims c JOIN ${schema}.ledger_records r USING (transaction_id) WHERE starts_with(r.order_id, $1)`,
            [prefix],
          )
        ).rows[0]!.n,
      );
      const leased = Number(
        // Leases are taken on the work rows of open records (migration 10): one left means a worker holds a record of this phase still open.
        (await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.ledger_work w JOIN ${schema}.ledger_keys k USING (transaction_id) WHERE starts_with(k.order_id, $1) AND w.lease_owner IS NOT NULL`, [prefix])).rows[0]!.n,
      );
      const total = byStatus.reduce((s, r) => s + r.count, 0);
      const accrued = byStatus.find((r) => r.status === 'accrued')?.count ?? 0;
      const versions = new Map<number, number>();
      for (const r of ids) versions.set(r.version, (versions.get(r.version) ?? 0) + 1);
      const books = await getJson(`${simUrl}/__sim/books`, 60_000).catch(() => undefined);
      let upstream = 'simulator books unavailable';
      let upstreamOk = true;
      if (books?.status === 200) {
        const b = books.body as { accrueRequests: number; transactions: Record<string, { accruals: number }>; doubleAccruals: string[] };
        const once = ids.filter((r) => b.transactions[r.transaction_id]?.accruals === 1).length;
        const doubled = ids.filter((r) => (b.transactions[r.transaction_id]?.accruals ?? 0) > 1).length;
        const calls = accrueRequestsBefore === undefined ? undefined : b.accrueRequests - accrueRequestsBefore;
        upstreamOk = once === expected && doubled === 0;
        upstream = `upstream: ${once} accrued once, ${doubled} more than once${calls === undefined ? '' : `, ${calls} accrue requests`}`;
      }
      const checkOk = total === expected && accrued === expected && claims === expected && upstreamOk;
      const check =
        `${byStatus.map((r) => `${r.count} ${r.status}`).join(', ') || 'no records'} (of ${expected} checkouts); ${claims} operation claims; ` +
        `versions ${[...versions].sort((a, b) => a[0] - b[0]).map(([v, n]) => `v${v}×${n}`).join(' ')}; ${leased} claimed by a worker meanwhile; ${upstream}${checkOk ? '' : '  <-- MISMATCH'}`;
      return { check, checkOk };
    };

    // The first few checkouts not answered 200 accrued, as the ledger has them now: did another
    // instance's worker (lease_owner set by its claim) take the record while it was being delivered?
    const explain = async (bodies: string[]): Promise<string[]> => {
      const ids = problemTransactionIds(bodies);
      const lines: string[] = [];
      for (const id of ids) {
        const { rows } = await admin.query<{ status: string; version: number; leased: boolean; history: { event?: string }[] }>(
          `SELECT r.status, r.version, w.lease_owner IS NOT NULL AS leased, r.record->'history' AS history FROM ${schema}.ledger_records r LEFT JOIN ${schema}.ledger_work w USING (transaction_id) WHERE r.transaction_id = $1`,
          [id],
        );
        const r = rows[0];
        lines.push(r ? `${id}: now ${r.status} v${r.version}, ${r.leased ? 'leased by a worker claim' : 'never leased by a worker'}; history: ${r.history.map((h) => h.event).join(' | ')}` : `${id}: not in the ledger`);
      }
      return lines;
    };

    // ---- warm-up, then file vs one PostgreSQL instance, alternating
    if (o.warmup > 0) {
      for (const [label, instances] of [['file', [fileRef]], ['pg ×1', pgInstances]] as const) {
        progress(`part D warm-up: ${o.warmup} checkouts to ${label}`);
        const w = await runPhase(spec([...instances], `dw-${label === 'file' ? 'f' : 'p1'}`, o.warmup));
        if (w.unexpected || w.errors) progress(`part D warm-up ${label}: ${w.unexpected} unexpected answers, ${w.errors} errors; first: ${w.firstProblem}`);
      }
    }
    for (let round = 1; round <= o.rounds; round++) {
      await closed('file ×1', [fileRef], round, `df-r${round}`, false);
      await closed('pg ×1', pgInstances, round, `dp1-r${round}`, true);
    }
    const rateCount = Math.max(200, o.rate * 8);
    const ratePhases: { config: string; result: PhaseResult; check?: string; checkOk?: boolean }[] = [];
    const open = async (config: string, instances: Instance[], tag: string, isPg: boolean) => {
      await settle();
      progress(`part D latency phase: ${rateCount} checkouts to ${config} at ${o.rate}/s, open loop`);
      const before = isPg ? await accrueRequests(simUrl) : undefined;
      const result = await runRatePhase({ ...spec(instances, tag, rateCount), targets: instances.map((i) => ({ baseUrl: i.url, agent: i.rateAgent })), rate: o.rate });
      ratePhases.push({ config, result, ...(isPg ? await verify(prefixOf(tag), rateCount, before) : {}) });
    };
    await open('file ×1', [fileRef], 'dfo', false);
    await open('pg ×1', pgInstances, 'dp1o', true);

    // ---- three instances on the same schema
    progress(`part D: starting bridges 2..${INSTANCES} on the same schema (at once: migrations race on the advisory lock)`);
    await fileRef.child.stop();
    pgInstances.push(...(await Promise.all(Array.from({ length: INSTANCES - 1 }, (_, k) => startBridge(`pg-${k + 2}`, ledgerUrl)))));
    progress(`part D: pg bridges ${pgInstances.map((i) => i.child.process.pid).join(', ')}`);
    if (o.warmup > 0) {
      progress(`part D warm-up: ${o.warmup * INSTANCES} checkouts round-robin over ${INSTANCES} instances`);
      const w = await runPhase(spec(pgInstances, 'dw-p3', o.warmup * INSTANCES));
      if (w.unexpected || w.errors) progress(`part D warm-up pg ×${INSTANCES}: ${w.unexpected} unexpected answers, ${w.errors} errors; first: ${w.firstProblem}`);
    }
    for (let round = 1; round <= o.rounds; round++) await closed(`pg ×${INSTANCES}`, pgInstances, round, `dp3-r${round}`, true);
    await open(`pg ×${INSTANCES}`, pgInstances, 'dp3o', true);

    const wholeTable = (await admin.query<{ count: number; status: string }>(`SELECT count(*)::int AS count, status FROM ${schema}.ledger_records GROUP BY status ORDER BY status`)).rows;
    const claimsTotal = Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.ledger_operation_claims`)).rows[0]!.n);
    const migrations = (await admin.query<{ version: number }>(`SELECT version FROM ${schema}.ledger_schema_migrations ORDER BY version`)).rows.map((r) => r.version);
    const pgSettings = (
      await admin.query<{ name: string; setting: string }>(
        "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'max_connections', 'shared_buffers', 'wal_sync_method') ORDER BY name",
      )
    ).rows;

    // The in-process diagnostics below must not share the schema with live bridge workers (they
    // would claim the diagnostics' records while those are delivered).
    progress('part D: stopping the bridge processes before the in-process diagnostics');
    await Promise.all(pgInstances.map((i) => i.child.stop()));

    // ---- one at a time with a counting PostgreSQL store: ledger calls per checkout and their cost
    let serial: string | undefined;
    if (o.serial > 0) {
      progress(`part D diagnostic: ${o.serial} checkouts one at a time through an in-process bridge with a counting PostgreSQL store`);
      serial = await serialDiagnostic({
        simUrl,
        appToken: o.appToken,
        apiKey: o.apiKey,
        requests: o.serial,
        runId: `${o.runId}d`,
        ledgerUrl,
        store: () => new PostgresLedgerStore(ledgerUrl),
        title: `   One at a time (diagnostic: bridge in the benchmark process with a counting PostgreSQL store on the same schema, no worker; ${o.serial} checkouts)`,
      });
    }

    // ---- pool size: in-process bridges with pool 10 (what main.ts gets) and a larger one
    const probes: PoolProbe[] = [];
    const probeSizes = [BRIDGE_POOL_SIZE, BRIDGE_POOL_SIZE * 3, BRIDGE_POOL_SIZE, BRIDGE_POOL_SIZE * 3]; // alternated, against drift
    for (const [k, poolSize] of probeSizes.entries()) {
      await settle();
      progress(`part D pool probe ${k + 1}/${probeSizes.length}: in-process bridge, pool ${poolSize}, ${PROBE_REQUESTS} checkouts at concurrency ${o.concurrency}`);
      probes.push(
        await poolProbe({
          simUrl,
          ledgerUrl,
          appToken: o.appToken,
          apiKey: o.apiKey,
          adminToken: o.adminToken,
          poolSize,
          bodies: o.bridgeBodies(`dpool${k}`, PROBE_REQUESTS),
          concurrency: o.concurrency,
          accept: o.accept,
        }),
      );
    }

    await new Promise((r) => setTimeout(r, 1500)); // backends flush their table statistics at most once a second
    const tableStats = (
      await admin.query<{ ins: string; upd: string; hot: string; dead: string; total: string; heap: string; avg_record: string }>(
        // The records are partitioned by month (migration 10): their statistics are the partitions'.
        `SELECT sum(s.n_tup_ins) AS ins, sum(s.n_tup_upd) AS upd, sum(s.n_tup_hot_upd) AS hot, sum(s.n_dead_tup) AS dead,
                sum(pg_total_relation_size(s.relid)) AS total, sum(pg_relation_size(s.relid)) AS heap,
                (SELECT avg(pg_column_size(record)) FROM ${schema}.ledger_records) AS avg_record
           FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid
          WHERE s.schemaname = $1 AND i.inhparent = (quote_ident($1) || '.ledger_records')::regclass`,
        [schema],
      )
    ).rows[0];

    // ---------------------------------------------------------------- report
    out(`D. PostgreSQL store (PostgreSQL ${serverVersion} at ${redact(baseUrl)}, schema ${schema}, dropped at the end)`);
    out(`   POST /v1/checkouts/generic, every request a new order with a phone, ${o.requests} per phase, total concurrency ${o.concurrency}, keep-alive;`);
    out(`   pg ×1 = one bridge process on LEDGER_URL=postgres://…?schema=${schema}; pg ×${INSTANCES} = ${INSTANCES} bridge processes on that same schema, requests`);
    out(`   round-robin over them (${o.concurrency} in flight in all). One simulator process for all. file ×1 = a file-ledger bridge on the same`);
    out('   simulator, alternating with the pg ×1 rounds (a reference under the same conditions as part D).');
    out('   cpu ms/checkout: bridges = sum over the instances in the phase; postgres = every process named postgres on this machine');
    out('   (utime+stime from /proc, reaped backends included): approximate, and it includes any other client of that server.');
    out();
    out(
      table([
        ['phase', 'round', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'not-200-ok', 'cpu ms/checkout: bridges', 'postgres', 'simulator', 'client', 'WAL kB/checkout'],
        ...phases.map((ph) => [
          ph.config,
          String(ph.round),
          fmt(ph.throughput, 0),
          fmt(ph.latency.p50),
          fmt(ph.latency.p99),
          fmt(ph.latency.max),
          String(ph.unexpected + ph.errors),
          fmt(ph.cpu.bridges),
          fmt(ph.cpu.postgres),
          fmt(ph.cpu.sim),
          fmt(ph.cpu.client),
          fmt(ph.walBytes === undefined ? undefined : ph.walBytes / 1024, 1),
        ]),
      ]),
    );
    for (const ph of phases.filter((p) => p.firstProblem)) {
      out(`  ${ph.config} round ${ph.round}: first unexpected answer: ${ph.firstProblem}`);
      for (const line of ph.problems ?? []) out(`    ${line}`);
    }
    out();
    out(`   The bridges' PostgreSQL backends during each phase (pg_stat_activity every 50 ms, matched to the bridge processes by client port; busy = not idle;`);
    out('   a connection whose answer waits for the bridge\'s event loop shows idle, so "pool full" is a lower bound: see the pool probe below):');
    for (const ph of phases.filter((p) => p.backends)) out(`   ${ph.config} round ${ph.round}: ${describeBackends(ph.backends!)}`);
    out();
    out('   Ledger after each PostgreSQL phase (SELECT count(*), status FROM <schema>.ledger_records WHERE the phase\'s orders GROUP BY status; then the simulator\'s books):');
    for (const ph of phases.filter((p) => p.check)) out(`   ${ph.config} round ${ph.round}: ${ph.check}`);
    for (const r of ratePhases.filter((p) => p.check)) out(`   ${r.config} open loop: ${r.check}`);
    out(`   whole schema at the end: ${wholeTable.map((r) => `${r.count} ${r.status}`).join(', ')}; ${claimsTotal} operation claims; migrations applied once: [${migrations.join(', ')}]`);
    if (tableStats) {
      const rows = wholeTable.reduce((s, r) => s + r.count, 0) || 1;
      out(
        `   ledger_records: ${tableStats.ins} inserts, ${tableStats.upd} updates of which ${tableStats.hot} HOT (heap-only: no index entries written), ${tableStats.dead} dead row versions; ` +
          `record jsonb ${fmt(Number(tableStats.avg_record), 0)} B stored (avg); ${fmt(Number(tableStats.total) / rows, 0)} B per record with indexes and TOAST (heap ${fmt(Number(tableStats.heap) / rows, 0)} B); statistics may lag a second or two`,
      );
    }
    out();

    const summary = (config: string) => {
      const ps = phases.filter((p) => p.config === config);
      return {
        throughput: median(ps.map((p) => p.throughput)),
        p50: median(ps.map((p) => p.latency.p50)),
        p99: median(ps.map((p) => p.latency.p99)),
        bridges: median(ps.map((p) => p.cpu.bridges ?? Number.NaN)),
        postgres: median(ps.map((p) => p.cpu.postgres ?? Number.NaN)),
        bad: ps.reduce((s, p) => s + p.unexpected + p.errors, 0),
      };
    };
    const rateOf = (config: string) => ratePhases.find((r) => r.config === config)?.result;
    const fileD = summary('file ×1');
    const pg1 = summary('pg ×1');
    const pg3 = summary(`pg ×${INSTANCES}`);
    const row = (label: string, s: ReturnType<typeof summary>, rate?: PhaseResult) => [
      label,
      fmt(s.throughput, 0),
      fmt(s.p50),
      fmt(s.p99),
      fmt(rate?.latency.p50),
      fmt(rate?.latency.p99),
      fmt(s.bridges),
      fmt(s.postgres),
      fmt(s.throughput / fileD.throughput, 2),
    ];
    out(`   Summary: median of the ${o.rounds} round(s); open loop = ${rateCount} checkouts at ${o.rate}/s (latency from each request's scheduled send time)`);
    out(
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', `p50 ms @${o.rate}/s`, `p99 ms @${o.rate}/s`, 'cpu ms/checkout: bridges', 'postgres', 'vs file ×1 (D)'],
        o.partA
          ? [
              'file store, 1 bridge (part A, this run)',
              fmt(o.partA.throughput, 0),
              fmt(o.partA.p50),
              fmt(o.partA.p99),
              fmt(o.partA.rate?.p50),
              fmt(o.partA.rate?.p99),
              fmt(o.partA.cpuBridge),
              '',
              fmt(o.partA.throughput / fileD.throughput, 2),
            ]
          : ['file store, 1 bridge (part A not run)', '-', '-', '-', '-', '-', '-', '', ''],
        row('file store, 1 bridge (part D reference)', fileD, rateOf('file ×1')),
        row('PostgreSQL, 1 bridge', pg1, rateOf('pg ×1')),
        row(`PostgreSQL, ${INSTANCES} bridges round-robin`, pg3, rateOf(`pg ×${INSTANCES}`)),
      ]),
    );
    const rateBad = ratePhases.filter((r) => r.result.unexpected + r.result.errors > 0);
    for (const r of rateBad) out(`   open loop ${r.config}: ${r.result.unexpected + r.result.errors} not 200 accrued; first: ${r.result.firstProblem}`);
    out(
      `   pg ×${INSTANCES} / pg ×1 throughput: ${fmt(pg3.throughput / pg1.throughput, 2)}; pg ×1 / file ×1: ${fmt(pg1.throughput / fileD.throughput, 2)}; ` +
        `every checkout recorded once and accrued: ${[...phases, ...ratePhases].every((p) => p.checkOk !== false) ? 'yes' : 'NO (see above)'}`,
    );
    out(`   server settings: ${pgSettings.map((s) => `${s.name}=${s.setting}`).join(', ')}; bridge pool: ${BRIDGE_POOL_SIZE} connections per instance (PostgresLedgerStore default)`);
    out();
    out(`   Pool size (in-process bridge on the same schema, no worker, the load generator in the same process; ${PROBE_REQUESTS} checkouts after a warm-up, concurrency ${o.concurrency};`);
    out('   pg.Pool counters sampled every 5 ms: waiting = queries queued for a free connection, checked out = connections lent out, answers not yet handled included)');
    out(
      table([
        ['pool', 'req/s', 'p50 ms', 'p99 ms', 'not-200-ok', 'samples with waiters', 'mean waiting', 'max waiting', 'mean checked out'],
        ...probes.map((p) => [
          String(p.poolSize),
          fmt(p.result.throughput, 0),
          fmt(p.result.latency.p50),
          fmt(p.result.latency.p99),
          String(p.result.unexpected + p.result.errors),
          `${fmt(p.waitingShare * 100, 0)}%`,
          fmt(p.waitingMean, 2),
          String(p.waitingMax),
          fmt(p.checkedOutMean, 2),
        ]),
      ]),
    );
    for (const p of probes.filter((x) => x.result.firstProblem)) out(`   pool ${p.poolSize}: first unexpected answer: ${p.result.firstProblem}`);
    if (serial) {
      out();
      out(serial);
    }
    out();
  }
}

async function accrueRequests(simUrl: string): Promise<number | undefined> {
  const books = await getJson(`${simUrl}/__sim/books`, 60_000).catch(() => undefined);
  return books?.status === 200 ? (books.body as { accrueRequests: number }).accrueRequests : undefined;
}

export interface PoolProbe {
  poolSize: number;
  result: PhaseResult;
  /** Share of samples with requests waiting for a connection, and the mean and largest number waiting. */
  waitingShare: number;
  waitingMean: number;
  waitingMax: number;
  checkedOutMean: number;
}

/**
 * Does the pool make checkouts wait for a connection? A bridge in this process (startBridge with a
 * PostgresLedgerStore of the given pool size, no worker) takes the same closed-loop load, while
 * pg.Pool's own counters are sampled every 5 ms: waitingCount = queries queued for a connection,
 * totalCount − idleCount = connections checked out (including ones whose answer waits for the
 * event loop, which pg_stat_activity shows as idle). The load generator shares this process, so
 * its req/s are for comparing pool sizes with each other, not with the bridge processes above.
 */
export async function poolProbe(o: {
  simUrl: string;
  ledgerUrl: string;
  appToken: string;
  apiKey: string;
  adminToken: string;
  poolSize: number;
  bodies: string[];
  concurrency: number;
  accept: (status: number, body: string) => boolean;
}): Promise<PoolProbe> {
  const config = loadConfig(posSettingDeclarations, {
    PORT: '0',
    LEDGER_URL: o.ledgerUrl,
    LOG_LEVEL: 'silent',
    LOYALTY_BASE_URL: o.simUrl,
    LOYALTY_APP_TOKEN: o.appToken,
    LOYALTY_API_KEY: o.apiKey,
    ADMIN_TOKEN: o.adminToken,
    POS_TOKEN: BENCH_POS_TOKEN,
  });
  const store = new PostgresLedgerStore(o.ledgerUrl, { poolSize: o.poolSize });
  const bridge = await startInProcessBridge(config, silentLogger, { store, defaultMetrics: false, startWorker: false });
  const agent = keepAliveAgent(o.concurrency);
  let samples = 0;
  let waitingSamples = 0;
  let waitingSum = 0;
  let waitingMax = 0;
  let checkedOut = 0;
  const timer = setInterval(() => {
    const { waitingCount, totalCount, idleCount } = store.pool;
    samples++;
    if (waitingCount > 0) waitingSamples++;
    waitingSum += waitingCount;
    waitingMax = Math.max(waitingMax, waitingCount);
    checkedOut += totalCount - idleCount;
  }, 5);
  try {
    const warm = Math.min(300, Math.floor(o.bodies.length / 4));
    await runPhase({ name: 'pool-warm', baseUrl: bridge.url, path: '/v1/checkouts/generic', headers: BRIDGE_POST_HEADERS, bodies: o.bodies.slice(0, warm), concurrency: o.concurrency, agent, accept: o.accept });
    samples = waitingSamples = waitingSum = waitingMax = checkedOut = 0;
    const result = await runPhase({ name: `pool-${o.poolSize}`, baseUrl: bridge.url, path: '/v1/checkouts/generic', headers: BRIDGE_POST_HEADERS, bodies: o.bodies.slice(warm), concurrency: o.concurrency, agent, accept: o.accept });
    const n = samples || 1;
    return { poolSize: o.poolSize, result, waitingShare: waitingSamples / n, waitingMean: waitingSum / n, waitingMax, checkedOutMean: checkedOut / n };
  } finally {
    clearInterval(timer);
    agent.destroy();
    await bridge.close();
  }
}
