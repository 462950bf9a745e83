/**
 * Part D of the benchmark: the PostgreSQL ledger store (`LEDGER_URL=postgres://…?schema=…`).
 *
 * One simulator child process; bridge children (`dist/src/main.js`) on one fresh schema
 * `bench_<pid>_<ms>` of BENCH_DATABASE_URL: first one instance, then three on the same schema, the
 * load generator spreading requests round-robin over them at part A's total concurrency. A
 * file-ledger bridge on the same simulator runs alternately with the one-instance phases, as a
 * reference taken under the same conditions. Same closed-loop and open-loop phase code as part A
 * (bench/lib runPhase / runRatePhase). After every PostgreSQL phase the ledger is read back
 * (every checkout recorded once and accrued) and the simulator's books are checked (one accrual
 * per checkout upstream). The schema is dropped at the end, and by the synchronous clean-up on an
 * error, SIGINT or early exit. No reachable database: one line says part D is skipped.
 *
 * The steps, each a function below: openDatabase, startProcesses, fileVersusOnePg (closed rounds
 * alternating with the file reference, then open loop), severalInstances (the same on three
 * bridges), schemaAtEnd, oneAtATime (ledger calls per checkout), poolProbes (does the pool make
 * checkouts wait), recordStatistics; then the report, a function per table.
 */
import { spawnSync } from 'node:child_process';
import type http from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresLedgerStore } from '../src/ledger/pg-store.js';
import type { PartASummary } from './checkout-http.js';
import { serialDiagnostic } from './checkout-breakdown.js';
import {
  bridgeEnv,
  cpuMsOf,
  forgetSyncCleanup,
  getJson,
  keepAliveAgent,
  median,
  onSyncCleanup,
  perRequest,
  problemTransactionIds,
  processCpuMsByName,
  progress,
  reason,
  redact,
  removeDir,
  roundMedians,
  runPhase,
  runRatePhase,
  selfCpuMs,
  startBridgeProcess,
  startSimulator,
  tempDir,
  walLsn,
  withSchema,
  BRIDGE_POST_HEADERS,
} from './lib.js';
import type { Child, LoadOptions, PartContext, PhaseResult, PhaseSpec } from './lib.js';
import { describeBackends, sampleBackends, type BackendSummary } from './pg-backends.js';
import { dropBenchSchema } from './pg-drop.js';
import { poolProbe, type PoolProbe } from './pg-pool.js';
import { fmt, phaseColumns, roundColumns, tableOf, type Column, type PhaseFigures } from './table.js';

const INSTANCES = 3;
const PROBE_REQUESTS = 2000;
/** PostgresLedgerStore's pool when main.ts opens it (no pool size option reaches it from LEDGER_URL or the environment). */
const BRIDGE_POOL_SIZE = 10;
const SETTLE_TIMEOUT_MS = 30_000;

export interface PgPartOptions extends PartContext, LoadOptions {
  databaseUrl: string;
  /** Checkouts in the one-at-a-time diagnostic with a counting PostgreSQL store (0 skips it). */
  serial: number;
  /** Request bodies and the success test of part A's bridge phases, so both parts send the same checkouts. */
  bridgeBodies: (tag: string, count: number) => string[];
  accept: (status: number, body: string) => boolean;
  /** Part A's file-store bridge figures from this run, when part A ran. */
  partA?: PartASummary;
}

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

/** The ledger and the upstream's books after a phase: one line, and whether every checkout is there once, accrued. */
interface Check {
  check?: string;
  checkOk?: boolean;
}

interface Measured extends PhaseResult, Check {
  config: string;
  round: number;
  cpu: Cpu;
  backends?: BackendSummary;
  problems?: string[];
  /** WAL written on the server during the phase, per checkout (every client's, so approximate). */
  walBytes?: number;
}

interface OpenLoop extends Check {
  config: string;
  result: PhaseResult;
}

/** The database part D runs on: the benchmark's own connection, and the schema made for this run. */
interface Database {
  admin: pg.Client;
  baseUrl: string;
  serverVersion: string;
  serverPort: number;
  schema: string;
  ledgerUrl: string;
  /** The synchronous clean-up that drops the schema should the process end first. */
  cleanupKey: string;
}

/** One run of part D: its database, processes and what it has measured. */
interface PgRun {
  o: PgPartOptions;
  db: Database;
  sim?: Child;
  simUrl: string;
  children: Child[];
  agents: http.Agent[];
  phases: Measured[];
  openLoops: OpenLoop[];
  /** Checkouts in each open-loop phase. */
  rateCount: number;
}

/** What the schema holds once the bridges are done. */
interface SchemaState {
  byStatus: { count: number; status: string }[];
  claims: number;
  migrations: number[];
  settings: { name: string; setting: string }[];
}

interface RecordStatistics {
  ins: string;
  upd: string;
  hot: string;
  dead: string;
  total: string;
  heap: string;
  avg_record: string;
}

export async function pgPart(o: PgPartOptions): Promise<void> {
  const db = await openDatabase(o);
  if (!db) return;
  const fileDir = tempDir('bench-pg-ref-');
  const run: PgRun = { o, db, simUrl: '', children: [], agents: [], phases: [], openLoops: [], rateCount: Math.max(200, o.rate * 8) };
  try {
    const { fileRef, first } = await startProcesses(run, fileDir);
    const pgInstances = [first];
    await fileVersusOnePg(run, fileRef, pgInstances);
    await fileRef.child.stop();
    await severalInstances(run, pgInstances);
    const state = await schemaAtEnd(run);
    // The in-process diagnostics below must not share the schema with live bridge workers (they
    // would claim the diagnostics' records while those are delivered).
    progress('part D: stopping the bridge processes before the in-process diagnostics');
    await Promise.all(pgInstances.map((i) => i.child.stop()));
    const serial = await oneAtATime(run);
    const probes = await poolProbes(run);
    const statistics = await recordStatistics(run);
    report(run, state, statistics, probes, serial);
  } finally {
    await tearDown(run, fileDir);
  }
}

// ------------------------------------------------------------------ the database

/** The benchmark's connection and a fresh schema; undefined, with one line saying why, where there is none. */
async function openDatabase(o: PgPartOptions): Promise<Database | undefined> {
  const out = o.out;
  const baseUrl = withSchema(o.databaseUrl);
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
    return undefined;
  }

  const schema = `bench_${process.pid}_${Date.now()}`;
  const cleanupKey = `pg-schema:${schema}`;
  onSyncCleanup(cleanupKey, () => {
    progress(`dropping schema ${schema}`);
    const r = spawnSync(process.execPath, [join(o.here, 'pg-drop.js'), baseUrl, schema], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 30_000 });
    if (r.status !== 0) progress(`could not drop schema ${schema} (exit ${r.status ?? r.signal}); drop it by hand: DROP SCHEMA ${schema} CASCADE`);
  });
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } catch (error) {
    forgetSyncCleanup(cleanupKey);
    await admin.end().catch(() => undefined);
    out(`D. PostgreSQL store: skipped: cannot create schema ${schema} in ${redact(baseUrl)} (${reason(error)})`);
    out();
    return undefined;
  }
  progress(`part D: PostgreSQL ${serverVersion} at ${redact(baseUrl)}, schema ${schema}`);
  return { admin, baseUrl, serverVersion, serverPort: Number(new URL(baseUrl).port || 5432), schema, ledgerUrl: withSchema(baseUrl, schema), cleanupKey };
}

/** Stops every process, drops the schema (on a new connection if the benchmark's fails) and removes the file reference's folder. */
async function tearDown({ db, children, agents }: PgRun, fileDir: string): Promise<void> {
  const { admin, schema } = db;
  for (const agent of agents) agent.destroy();
  await Promise.all(children.map((c) => c.stop()));
  try {
    await admin.query("SET lock_timeout = '5s'");
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    progress(`part D: schema ${schema} dropped`);
  } catch (error) {
    progress(`part D: dropping ${schema} on the benchmark's connection failed (${reason(error)}); retrying on a new one`);
    await dropBenchSchema(db.baseUrl, schema).then(
      () => undefined,
      (e: unknown) => progress(`part D: could not drop schema ${schema}: ${reason(e)}; drop it by hand`),
    );
  }
  forgetSyncCleanup(db.cleanupKey);
  await admin.end().catch(() => undefined);
  await removeDir(fileDir);
}

// ------------------------------------------------------------------ processes and phases

async function startBridge(run: PgRun, name: string, ledgerUrl: string): Promise<Instance> {
  const bridge = await startBridgeProcess(run.o, { ledgerUrl, env: bridgeEnv(run.o, run.simUrl), readyTimeoutMs: 30_000 });
  run.children.push(bridge.child);
  const agent = keepAliveAgent(run.o.concurrency);
  const rateAgent = keepAliveAgent(64);
  run.agents.push(agent, rateAgent);
  return { name, child: bridge.child, url: bridge.url, agent, rateAgent };
}

/** The simulator, a file-ledger bridge (the reference) and the first bridge on PostgreSQL. */
async function startProcesses(run: PgRun, fileDir: string): Promise<{ fileRef: Instance; first: Instance }> {
  progress('part D: starting the simulator, a file-ledger bridge (reference) and bridge 1 on PostgreSQL');
  const sim = await startSimulator(run.o);
  run.children.push(sim.child);
  run.sim = sim.child;
  run.simUrl = sim.url;
  const [fileRef, first] = await Promise.all([startBridge(run, 'file', `file:${join(fileDir, 'ledger.json')}`), startBridge(run, 'pg-1', run.db.ledgerUrl)]);
  progress(`part D: simulator ${sim.url} (pid ${sim.child.process.pid}), file bridge pid ${fileRef.child.process.pid}, pg bridge 1 pid ${first.child.process.pid}`);
  return { fileRef, first };
}

/** `count` of part A's checkouts, round-robin over `instances`. */
function spec({ o }: PgRun, instances: Instance[], tag: string, count: number): PhaseSpec {
  return {
    name: tag,
    baseUrl: instances[0]!.url,
    agent: instances[0]!.agent,
    targets: instances.map((i) => ({ baseUrl: i.url, agent: i.agent })),
    path: '/v1/checkouts/generic',
    headers: BRIDGE_POST_HEADERS,
    bodies: o.bridgeBodies(tag, count),
    concurrency: o.concurrency,
    accept: o.accept,
  };
}

function cpuNow(run: PgRun, instances: Instance[]): Cpu {
  const bridgeMs = instances.map((i) => cpuMsOf(i.child.process.pid));
  return {
    client: selfCpuMs(),
    sim: cpuMsOf(run.sim?.process.pid),
    bridges: bridgeMs.every((v) => v !== undefined) ? bridgeMs.reduce((a, b) => a! + b!, 0) : undefined,
    postgres: processCpuMsByName('postgres')?.ms,
  };
}

async function settle({ o }: PgRun): Promise<void> {
  o.gc?.();
  await new Promise((r) => setTimeout(r, 200));
}

/** The order ids' common beginning of a phase's checkouts. */
function prefixOf({ o }: PgRun, tag: string): string {
  return JSON.parse(o.bridgeBodies(tag, 1)[0]!).orderId.replace(/0$/, '') as string;
}


async function accrueRequests(simUrl: string): Promise<number | undefined> {
  const books = await getJson(`${simUrl}/__sim/books`, 60_000).catch(() => undefined);
  return books?.status === 200 ? (books.body as { accrueRequests: number }).accrueRequests : undefined;
}

/**
 * A closed-loop phase: throughput, latency, CPU per checkout of every process, WAL per checkout and
 * (PostgreSQL) what the bridges' backends did; then the ledger and the books checked.
 */
async function closedPhase(run: PgRun, config: string, instances: Instance[], round: number, tag: string, isPg: boolean): Promise<void> {
  const { o, db } = run;
  const s = spec(run, instances, tag, o.requests);
  await settle(run);
  progress(`part D round ${round}/${o.rounds}: ${o.requests} checkouts to ${config} at concurrency ${o.concurrency}`);
  const booksBefore = isPg ? await accrueRequests(run.simUrl) : undefined;
  const sampler = isPg ? sampleBackends(db.admin, instances.map((i) => i.child.process.pid), db.serverPort, BRIDGE_POOL_SIZE) : undefined;
  const lsn0 = await walLsn(run.db.admin);
  const c0 = cpuNow(run, instances);
  const result = await runPhase(s);
  const c1 = cpuNow(run, instances);
  const lsn1 = await walLsn(run.db.admin);
  const backends = await sampler?.stop();
  const walBytes = lsn0 && lsn1 ? Number((await db.admin.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2) AS d', [lsn1, lsn0])).rows[0]!.d) / result.requests : undefined;
  const m: Measured = { ...result, config, round, cpu: perRequest(c0, c1, result.requests), backends, walBytes };
  if (isPg && result.problemBodies.length) m.problems = await explain(run, result.problemBodies);
  if (result.unexpected || result.errors) progress(`${config} round ${round}: ${result.unexpected} unexpected answers, ${result.errors} errors; first: ${result.firstProblem}`);
  if (isPg) Object.assign(m, await verify(run, prefixOf(run, tag), result.requests, booksBefore));
  run.phases.push(m);
}

/** An open-loop phase at the offered rate: latency from each request's scheduled send time; then (PostgreSQL) the ledger and the books checked. */
async function openLoopPhase(run: PgRun, config: string, instances: Instance[], tag: string, isPg: boolean): Promise<void> {
  const { o } = run;
  await settle(run);
  progress(`part D latency phase: ${run.rateCount} checkouts to ${config} at ${o.rate}/s, open loop`);
  const before = isPg ? await accrueRequests(run.simUrl) : undefined;
  const result = await runRatePhase({ ...spec(run, instances, tag, run.rateCount), targets: instances.map((i) => ({ baseUrl: i.url, agent: i.rateAgent })), rate: o.rate });
  run.openLoops.push({ config, result, ...(isPg ? await verify(run, prefixOf(run, tag), run.rateCount, before) : {}) });
}

async function warmUp(run: PgRun, label: string, instances: Instance[], tag: string, count: number): Promise<void> {
  const w = await runPhase(spec(run, instances, tag, count));
  if (w.unexpected || w.errors) progress(`part D warm-up ${label}: ${w.unexpected} unexpected answers, ${w.errors} errors; first: ${w.firstProblem}`);
}

/** The file reference and one PostgreSQL bridge, closed-loop rounds alternating, then each open loop. */
async function fileVersusOnePg(run: PgRun, fileRef: Instance, pgInstances: Instance[]): Promise<void> {
  const { o } = run;
  if (o.warmup > 0) {
    for (const [label, instances] of [['file', [fileRef]], ['pg ×1', pgInstances]] as const) {
      progress(`part D warm-up: ${o.warmup} checkouts to ${label}`);
      await warmUp(run, label, [...instances], `dw-${label === 'file' ? 'f' : 'p1'}`, o.warmup);
    }
  }
  for (let round = 1; round <= o.rounds; round++) {
    await closedPhase(run, 'file ×1', [fileRef], round, `df-r${round}`, false);
    await closedPhase(run, 'pg ×1', pgInstances, round, `dp1-r${round}`, true);
  }
  await openLoopPhase(run, 'file ×1', [fileRef], 'dfo', false);
  await openLoopPhase(run, 'pg ×1', pgInstances, 'dp1o', true);
}

/** INSTANCES bridges on the same schema, requests round-robin: closed-loop rounds, then the open loop. */
async function severalInstances(run: PgRun, pgInstances: Instance[]): Promise<void> {
  const { o } = run;
  progress(`part D: starting bridges 2..${INSTANCES} on the same schema (at once: migrations race on the advisory lock)`);
  pgInstances.push(...(await Promise.all(Array.from({ length: INSTANCES - 1 }, (_, k) => startBridge(run, `pg-${k + 2}`, run.db.ledgerUrl)))));
  progress(`part D: pg bridges ${pgInstances.map((i) => i.child.process.pid).join(', ')}`);
  if (o.warmup > 0) {
    progress(`part D warm-up: ${o.warmup * INSTANCES} checkouts round-robin over ${INSTANCES} instances`);
    await warmUp(run, `pg ×${INSTANCES}`, pgInstances, 'dw-p3', o.warmup * INSTANCES);
  }
  for (let round = 1; round <= o.rounds; round++) await closedPhase(run, `pg ×${INSTANCES}`, pgInstances, round, `dp3-r${round}`, true);
  await openLoopPhase(run, `pg ×${INSTANCES}`, pgInstances, 'dp3o', true);
}

// ------------------------------------------------------------------ checks

/**
 * The ledger and the upstream's books after a phase: each checkout one record, accrued, with its
 * operation claimed, and one accrual upstream.
 */
async function verify(run: PgRun, prefix: string, expected: number, accrueRequestsBefore: number | undefined): Promise<Required<Check>> {
  const { admin, schema } = run.db;
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
  const books = await getJson(`${run.simUrl}/__sim/books`, 60_000).catch(() => undefined);
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
}

/**
 * The first few checkouts not answered 200 accrued, as the ledger has them now: did another
 * instance's worker (lease_owner set by its claim) take the record while it was being delivered?
 */
async function explain(run: PgRun, bodies: string[]): Promise<string[]> {
  const { admin, schema } = run.db;
  const lines: string[] = [];
  for (const id of problemTransactionIds(bodies)) {
    const { rows } = await admin.query<{ status: string; version: number; leased: boolean; history: { event?: string }[] }>(
      `SELECT r.status, r.version, w.lease_owner IS NOT NULL AS leased, r.record->'history' AS history FROM ${schema}.ledger_records r LEFT JOIN ${schema}.ledger_work w USING (transaction_id) WHERE r.transaction_id = $1`,
      [id],
    );
    const r = rows[0];
    lines.push(r ? `${id}: now ${r.status} v${r.version}, ${r.leased ? 'leased by a worker claim' : 'never leased by a worker'}; history: ${r.history.map((h) => h.event).join(' | ')}` : `${id}: not in the ledger`);
  }
  return lines;
}

/** The whole schema once the bridges are done: records by status, claims, migrations, and the server's settings that bear on commits. */
async function schemaAtEnd({ db }: PgRun): Promise<SchemaState> {
  const { admin, schema } = db;
  return {
    byStatus: (await admin.query<{ count: number; status: string }>(`SELECT count(*)::int AS count, status FROM ${schema}.ledger_records GROUP BY status ORDER BY status`)).rows,
    claims: Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.ledger_operation_claims`)).rows[0]!.n),
    migrations: (await admin.query<{ version: number }>(`SELECT version FROM ${schema}.ledger_schema_migrations ORDER BY version`)).rows.map((r) => r.version),
    settings: (
      await admin.query<{ name: string; setting: string }>(
        "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'max_connections', 'shared_buffers', 'wal_sync_method') ORDER BY name",
      )
    ).rows,
  };
}

// ------------------------------------------------------------------ diagnostics in this process

/** One at a time with a counting PostgreSQL store: ledger calls per checkout and their cost. */
async function oneAtATime({ o, db, simUrl }: PgRun): Promise<string | undefined> {
  if (o.serial <= 0) return undefined;
  progress(`part D diagnostic: ${o.serial} checkouts one at a time through an in-process bridge with a counting PostgreSQL store`);
  return serialDiagnostic({
    simUrl,
    appToken: o.appToken,
    apiKey: o.apiKey,
    requests: o.serial,
    runId: `${o.runId}d`,
    ledgerUrl: db.ledgerUrl,
    store: () => new PostgresLedgerStore(db.ledgerUrl),
    title: `   One at a time (diagnostic: bridge in the benchmark process with a counting PostgreSQL store on the same schema, no worker; ${o.serial} checkouts)`,
  });
}

/** Pool size: in-process bridges with pool 10 (what main.ts gets) and a larger one, alternated against drift. */
async function poolProbes(run: PgRun): Promise<PoolProbe[]> {
  const { o } = run;
  const probes: PoolProbe[] = [];
  const probeSizes = [BRIDGE_POOL_SIZE, BRIDGE_POOL_SIZE * 3, BRIDGE_POOL_SIZE, BRIDGE_POOL_SIZE * 3];
  for (const [k, poolSize] of probeSizes.entries()) {
    await settle(run);
    progress(`part D pool probe ${k + 1}/${probeSizes.length}: in-process bridge, pool ${poolSize}, ${PROBE_REQUESTS} checkouts at concurrency ${o.concurrency}`);
    probes.push(
      await poolProbe({
        simUrl: run.simUrl,
        ledgerUrl: run.db.ledgerUrl,
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
  return probes;
}

/** The records' table statistics: inserts, updates (HOT ones), dead versions, and the bytes a record takes. */
async function recordStatistics({ db }: PgRun): Promise<RecordStatistics | undefined> {
  await new Promise((r) => setTimeout(r, 1500)); // backends flush their table statistics at most once a second
  return (
    await db.admin.query<RecordStatistics>(
      // The records are partitioned by month (migration 10): their statistics are the partitions'.
      `SELECT sum(s.n_tup_ins) AS ins, sum(s.n_tup_upd) AS upd, sum(s.n_tup_hot_upd) AS hot, sum(s.n_dead_tup) AS dead,
              sum(pg_total_relation_size(s.relid)) AS total, sum(pg_relation_size(s.relid)) AS heap,
              (SELECT avg(pg_column_size(record)) FROM ${db.schema}.ledger_records) AS avg_record
         FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid
        WHERE s.schemaname = $1 AND i.inhparent = (quote_ident($1) || '.ledger_records')::regclass`,
      [db.schema],
    )
  ).rows[0];
}

// ------------------------------------------------------------------ report

function report(run: PgRun, state: SchemaState, statistics: RecordStatistics | undefined, probes: PoolProbe[], serial: string | undefined): void {
  const out = run.o.out;
  printPhases(run);
  printBackends(run);
  printChecks(run, state, statistics);
  printSummary(run, state);
  printPoolProbes(run, probes);
  if (serial) {
    out();
    out(serial);
  }
  out();
}

function printPhases({ o, db, phases }: PgRun): void {
  const out = o.out;
  out(`D. PostgreSQL store (PostgreSQL ${db.serverVersion} at ${redact(db.baseUrl)}, schema ${db.schema}, dropped at the end)`);
  out(`   POST /v1/checkouts/generic, every request a new order with a phone, ${o.requests} per phase, total concurrency ${o.concurrency}, keep-alive;`);
  out(`   pg ×1 = one bridge process on LEDGER_URL=postgres://…?schema=${db.schema}; pg ×${INSTANCES} = ${INSTANCES} bridge processes on that same schema, requests`);
  out(`   round-robin over them (${o.concurrency} in flight in all). One simulator process for all. file ×1 = a file-ledger bridge on the same`);
  out('   simulator, alternating with the pg ×1 rounds (a reference under the same conditions as part D).');
  out('   cpu ms/checkout: bridges = sum over the instances in the phase; postgres = every process named postgres on this machine');
  out('   (utime+stime from /proc, reaped backends included): approximate, and it includes any other client of that server.');
  out();
  out(
    tableOf(phases, [
      ...roundColumns<Measured>((ph) => ph.config),
      ...phaseColumns<Measured>(),
      ['cpu ms/checkout: bridges', (ph) => fmt(ph.cpu.bridges)],
      ['postgres', (ph) => fmt(ph.cpu.postgres)],
      ['simulator', (ph) => fmt(ph.cpu.sim)],
      ['client', (ph) => fmt(ph.cpu.client)],
      ['WAL kB/checkout', (ph) => fmt(ph.walBytes === undefined ? undefined : ph.walBytes / 1024, 1)],
    ]),
  );
  for (const ph of phases.filter((p) => p.firstProblem)) {
    out(`  ${ph.config} round ${ph.round}: first unexpected answer: ${ph.firstProblem}`);
    for (const line of ph.problems ?? []) out(`    ${line}`);
  }
  out();
}

function printBackends({ o, phases }: PgRun): void {
  const out = o.out;
  out(`   The bridges' PostgreSQL backends during each phase (pg_stat_activity every 50 ms, matched to the bridge processes by client port; busy = not idle;`);
  out('   a connection whose answer waits for the bridge\'s event loop shows idle, so "pool full" is a lower bound: see the pool probe below):');
  for (const ph of phases.filter((p) => p.backends)) out(`   ${ph.config} round ${ph.round}: ${describeBackends(ph.backends!)}`);
  out();
}

function printChecks({ o, phases, openLoops }: PgRun, state: SchemaState, statistics: RecordStatistics | undefined): void {
  const out = o.out;
  out('   Ledger after each PostgreSQL phase (SELECT count(*), status FROM <schema>.ledger_records WHERE the phase\'s orders GROUP BY status; then the simulator\'s books):');
  for (const ph of phases.filter((p) => p.check)) out(`   ${ph.config} round ${ph.round}: ${ph.check}`);
  for (const r of openLoops.filter((p) => p.check)) out(`   ${r.config} open loop: ${r.check}`);
  out(`   whole schema at the end: ${state.byStatus.map((r) => `${r.count} ${r.status}`).join(', ')}; ${state.claims} operation claims; migrations applied once: [${state.migrations.join(', ')}]`);
  if (statistics) {
    const rows = state.byStatus.reduce((s, r) => s + r.count, 0) || 1;
    out(
      `   ledger_records: ${statistics.ins} inserts, ${statistics.upd} updates of which ${statistics.hot} HOT (heap-only: no index entries written), ${statistics.dead} dead row versions; ` +
        `record jsonb ${fmt(Number(statistics.avg_record), 0)} B stored (avg); ${fmt(Number(statistics.total) / rows, 0)} B per record with indexes and TOAST (heap ${fmt(Number(statistics.heap) / rows, 0)} B); statistics may lag a second or two`,
    );
  }
  out();
}

/** A configuration's medians over its rounds, its open loop beside them. */
interface SummaryRow extends PhaseFigures {
  label: string;
  bridges: number;
  postgres: number;
  rate?: PhaseResult;
}

function printSummary(run: PgRun, state: SchemaState): void {
  const { o, phases, openLoops } = run;
  const out = o.out;
  const summary = (label: string, config: string): SummaryRow => {
    const ps = phases.filter((p) => p.config === config);
    return {
      label,
      ...roundMedians(ps),
      bridges: median(ps.map((p) => p.cpu.bridges ?? Number.NaN)),
      postgres: median(ps.map((p) => p.cpu.postgres ?? Number.NaN)),
      rate: openLoops.find((r) => r.config === config)?.result,
    };
  };
  const fileD = summary('file store, 1 bridge (part D reference)', 'file ×1');
  const pg1 = summary('PostgreSQL, 1 bridge', 'pg ×1');
  const pg3 = summary(`PostgreSQL, ${INSTANCES} bridges round-robin`, `pg ×${INSTANCES}`);
  const partA = o.partA
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
    : ['file store, 1 bridge (part A not run)', '-', '-', '-', '-', '-', '-', '', ''];
  const columns: Column<SummaryRow>[] = [
    ['', (s) => s.label],
    ...phaseColumns<SummaryRow>('req/s', 'p50', 'p99'),
    [`p50 ms @${o.rate}/s`, (s) => fmt(s.rate?.latency.p50)],
    [`p99 ms @${o.rate}/s`, (s) => fmt(s.rate?.latency.p99)],
    ['cpu ms/checkout: bridges', (s) => fmt(s.bridges)],
    ['postgres', (s) => fmt(s.postgres)],
    ['vs file ×1 (D)', (s) => fmt(s.throughput / fileD.throughput, 2)],
  ];
  out(`   Summary: median of the ${o.rounds} round(s); open loop = ${run.rateCount} checkouts at ${o.rate}/s (latency from each request's scheduled send time)`);
  out(tableOf([partA, fileD, pg1, pg3], columns));
  for (const r of openLoops.filter((x) => x.result.unexpected + x.result.errors > 0)) out(`   open loop ${r.config}: ${r.result.unexpected + r.result.errors} not 200 accrued; first: ${r.result.firstProblem}`);
  out(
    `   pg ×${INSTANCES} / pg ×1 throughput: ${fmt(pg3.throughput / pg1.throughput, 2)}; pg ×1 / file ×1: ${fmt(pg1.throughput / fileD.throughput, 2)}; ` +
      `every checkout recorded once and accrued: ${[...phases, ...openLoops].every((p) => p.checkOk !== false) ? 'yes' : 'NO (see above)'}`,
  );
  out(`   server settings: ${state.settings.map((s) => `${s.name}=${s.setting}`).join(', ')}; bridge pool: ${BRIDGE_POOL_SIZE} connections per instance (PostgresLedgerStore default)`);
  out();
}

function printPoolProbes({ o }: PgRun, probes: PoolProbe[]): void {
  const out = o.out;
  out(`   Pool size (in-process bridge on the same schema, no worker, the load generator in the same process; ${PROBE_REQUESTS} checkouts after a warm-up, concurrency ${o.concurrency};`);
  out('   pg.Pool counters sampled every 5 ms: waiting = queries queued for a free connection, checked out = connections lent out, answers not yet handled included)');
  out(
    tableOf(
      probes.map((p) => ({ ...p, ...p.result })),
      [
        ['pool', (p) => String(p.poolSize)],
        ...phaseColumns<PoolProbe & PhaseResult>('req/s', 'p50', 'p99', 'not-200-ok'),
        ['samples with waiters', (p) => `${fmt(p.waitingShare * 100, 0)}%`],
        ['mean waiting', (p) => fmt(p.waitingMean, 2)],
        ['max waiting', (p) => String(p.waitingMax)],
        ['mean checked out', (p) => fmt(p.checkedOutMean, 2)],
      ],
    ),
  );
  for (const p of probes.filter((x) => x.result.firstProblem)) out(`   pool ${p.poolSize}: first unexpected answer: ${p.result.firstProblem}`);
}
