/**
 * Part Z of the benchmark, the fleet (`npm run bench -- --only=fleet`, run only when named): what
 * one more bridge instance on one PostgreSQL buys, under many merchants' traffic shaped like a day.
 *
 * One simulator and a fresh schema of BENCH_DATABASE_URL. MERCHANTS merchants are installed at the
 * simulator and created through the first bridge's admin API (each its own app token and POS
 * token, sealed with one SECRETS_KEY that every instance shares). Then, for 1, 2, … instances on
 * the same schema (requests round-robin over them, as a load balancer would), one compressed day:
 * six slots (night, morning, lunch, afternoon, dinner, evening) at their share of the peak rate,
 * offered open-loop (a checkout is sent when it is due, whether or not the ones before were
 * answered), each checkout carried by one merchant's token, a few merchants much busier than most.
 *
 * Per day it prints what was offered and acknowledged, p50 and p99 at the two peaks, the CPU per
 * checkout of the bridges and of the PostgreSQL server (every process named `postgres`, as
 * /proc shows them), the database's share of the CPU, and the WAL written per checkout. After each
 * day every checkout must be in the ledger, settled, and booked once at the simulator.
 *
 * Each instance is warmed first with WARMUP_CHECKOUTS checkouts back to back, not counted: a fresh
 * process costs about twice as much per checkout over its first few thousand (V8 is still
 * compiling the path), and a day of a few thousand checkouts would otherwise measure mostly that.
 *
 * On one machine the instances, the database, the simulator and the load generator share the same
 * cores, so the figures say what each part costs per checkout, which is what sizing needs
 * (docs/postgresql-and-scale.md, "The road to 10,000 merchants"); they are not a fleet's throughput.
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import type http from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import {
  bridgeEnv,
  cpuSplitMsOf,
  createMerchants,
  forgetSyncCleanup,
  getJson,
  inLanes,
  keepAliveAgent,
  onSyncCleanup,
  processCpuMsByName,
  progress,
  reason,
  redact,
  runPhase,
  runRatePhase,
  startBridgeProcess,
  startSimulator,
  walLsn,
  withSchema,
  type Child,
  type CreatedMerchant,
  type PartContext,
  type PhaseResult,
} from './lib.js';
import { checkoutPayload } from './records.js';
import { dropBenchSchema } from './pg-drop.js';
import { fmt, tableOf, type Column } from './table.js';

export interface FleetPartOptions extends PartContext {
  databaseUrl: string;
  /** Merchants created (each its own tokens at the simulator and the bridge). */
  merchants: number;
  /** Checkouts per second offered at the day's two peaks. */
  peakRate: number;
  /** Seconds each of the day's six slots lasts. */
  slotSeconds: number;
  /** The instance counts measured, one day each, in order (e.g. 1, 2, 3). */
  instanceCounts: number[];
}

/** A day's slots and their share of the peak: quiet nights, a lunch and a dinner peak. */
const DAY: readonly (readonly [slot: string, share: number])[] = [
  ['night', 0.05],
  ['morning', 0.25],
  ['lunch', 1],
  ['afternoon', 0.35],
  ['dinner', 1],
  ['evening', 0.3],
];
const SETTLE_TIMEOUT_MS = 60_000;
/** Checkouts each instance serves, back to back, before it is measured (see the head of this file). */
const WARMUP_CHECKOUTS = 6000;
const WARMUP_CONCURRENCY = 16;

interface Instance {
  child: Child;
  url: string;
  agent: http.Agent;
}

type Merchant = CreatedMerchant;

interface DayFigures {
  instances: number;
  /** CPU ms a second of the bridges, and of PostgreSQL, with nothing offered (workers, timers, gauges): what an instance costs by being there. */
  idleBridgeCpuPerSecond?: number;
  idlePgCpuPerSecond?: number;
  offered: number;
  acknowledged: number;
  seconds: number;
  peakP50: number;
  peakP99: number;
  bridgeCpuPerCheckout?: number;
  pgCpuPerCheckout?: number;
  walBytesPerCheckout?: number;
  check: string;
  checkOk: boolean;
  /** The bridges' CPU per checkout in each slot of the day, in user space and in the kernel: how it follows the rate. */
  slots: { slot: string; rate: number; userMs?: number; systemMs?: number }[];
}

export async function fleetPart(o: FleetPartOptions): Promise<void> {
  const baseUrl = withSchema(o.databaseUrl);
  const admin = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 });
  admin.on('error', () => undefined);
  try {
    await admin.connect();
  } catch (error) {
    o.out(`Z. Fleet: skipped: no database reachable at ${redact(baseUrl)} (${reason(error)}); set BENCH_DATABASE_URL to run it`);
    o.out();
    return;
  }
  const schema = `bench_fleet_${process.pid}_${Date.now()}`;
  const cleanupKey = `pg-schema:${schema}`;
  onSyncCleanup(cleanupKey, () => {
    spawnSync(process.execPath, [join(o.here, 'pg-drop.js'), baseUrl, schema], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 30_000 });
  });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const ledgerUrl = withSchema(baseUrl, schema);
  const children: Child[] = [];
  const instances: Instance[] = [];
  try {
    const sim = await startSimulator(o);
    children.push(sim.child);
    // Every instance seals and opens the merchants' secrets with the same key, as a deployment's do.
    const env = { ...bridgeEnv(o, sim.url), POS_AUTH: 'token', SECRETS_KEY: randomBytes(32).toString('base64') };
    const start = async (): Promise<Instance> => {
      const bridge = await startBridgeProcess(o, { ledgerUrl, env, readyTimeoutMs: 30_000 });
      children.push(bridge.child);
      return { child: bridge.child, url: bridge.url, agent: keepAliveAgent(64) };
    };
    instances.push(await start());
    const merchants = await createFleet(o, sim.url, instances[0]!.url);
    await warm(o, instances[0]!, merchants, 0);
    const days: DayFigures[] = [];
    for (const count of o.instanceCounts) {
      while (instances.length < count) {
        instances.push(await start());
        await warm(o, instances.at(-1)!, merchants, instances.length - 1);
      }
      const serving = instances.slice(0, count);
      progress(`fleet: a day on ${count} instance(s), peak ${o.peakRate}/s, ${o.slotSeconds} s a slot`);
      days.push(await runDay(o, admin, schema, sim.url, serving, merchants));
    }
    report(o, days);
  } finally {
    for (const instance of instances) instance.agent.destroy();
    await Promise.all(children.map((c) => c.stop()));
    await dropBenchSchema(baseUrl, schema).catch((e: unknown) => progress(`fleet: could not drop schema ${schema}: ${reason(e)}; drop it by hand`));
    forgetSyncCleanup(cleanupKey);
    await admin.end().catch(() => undefined);
  }
}

/** WARMUP_CHECKOUTS checkouts of the fleet's merchants through one instance, back to back, each accrued; not measured. */
async function warm(o: FleetPartOptions, instance: Instance, merchants: Merchant[], index: number): Promise<void> {
  const tag = `W-${o.runId}-${index}`;
  const started = performance.now();
  const result = await runPhase({
    name: 'warm-up',
    baseUrl: instance.url,
    agent: instance.agent,
    path: '/v1/checkouts/generic',
    headers: {},
    headersOf: Array.from({ length: WARMUP_CHECKOUTS }, (_, i) => ({ accept: 'application/json', authorization: `Bearer ${merchants[merchantOf(i, merchants.length)]!.posToken}` })),
    bodies: Array.from({ length: WARMUP_CHECKOUTS }, (_, i) => JSON.stringify(checkoutPayload(`${tag}-${i}`, i))),
    concurrency: WARMUP_CONCURRENCY,
    accept: (status) => status === 200 || status === 202,
  });
  if (result.unexpected + result.errors > 0) throw new Error(`fleet: warming instance ${index + 1}: ${result.unexpected + result.errors} checkouts not acknowledged (${result.firstProblem})`);
  progress(`fleet: instance ${index + 1} warmed with ${WARMUP_CHECKOUTS} checkouts in ${fmt((performance.now() - started) / 1000, 1)} s`);
}

async function createFleet(o: FleetPartOptions, simUrl: string, bridgeUrl: string): Promise<Merchant[]> {
  const started = performance.now();
  const merchants = await createMerchants(simUrl, bridgeUrl, o.adminToken, Array.from({ length: o.merchants }, (_, i) => `fleet-m${i}`));
  progress(`fleet: ${merchants.length} merchants created in ${fmt((performance.now() - started) / 1000, 1)} s`);
  return merchants;
}

/**
 * The merchant of the day's checkout `i`: a few merchants are much busier than most (the square of
 * a well-spread fraction puts half the checkouts on the first quarter of the merchants).
 */
function merchantOf(i: number, merchants: number): number {
  const spread = (i * 0.6180339887498949) % 1;
  return Math.min(merchants - 1, Math.floor(spread * spread * merchants));
}

async function runDay(o: FleetPartOptions, admin: pg.Client, schema: string, simUrl: string, serving: Instance[], merchants: Merchant[]): Promise<DayFigures> {
  const tag = `Z-${o.runId}-${serving.length}i`;
  const idle = await idleCpu(serving);
  const booksBefore = (await booksOf(simUrl, merchants))?.accrueRequests;
  const wal0 = await walLsn(admin);
  const bridges0 = bridgesCpuMs(serving);
  const pg0 = processCpuMsByName('postgres')?.ms;
  const started = performance.now();
  const slots: { slot: string; result: PhaseResult }[] = [];
  const cpuBySlot: DayFigures['slots'] = [];
  let n = 0;
  for (const [slot, share] of DAY) {
    const rate = Math.max(1, Math.round(o.peakRate * share));
    const count = Math.max(1, Math.round(rate * o.slotSeconds));
    const first = n;
    n += count;
    const cpu0 = bridgesCpu(serving);
    const result = await runRatePhase({
      name: slot,
      baseUrl: serving[0]!.url,
      agent: serving[0]!.agent,
      targets: serving.map((s) => ({ baseUrl: s.url, agent: s.agent })),
      path: '/v1/checkouts/generic',
      headers: {},
      headersOf: Array.from({ length: count }, (_, i) => ({ accept: 'application/json', authorization: `Bearer ${merchants[merchantOf(first + i, merchants.length)]!.posToken}` })),
      bodies: Array.from({ length: count }, (_, i) => JSON.stringify(checkoutPayload(`${tag}-${first + i}`, first + i))),
      rate,
      // Acknowledged: accrued within the answer budget (200), or recorded for delivery later (202).
      accept: (status) => status === 200 || status === 202,
    });
    const cpu1 = bridgesCpu(serving);
    slots.push({ slot, result });
    cpuBySlot.push({ slot, rate, ...(cpu0 && cpu1 ? { userMs: (cpu1.user - cpu0.user) / count, systemMs: (cpu1.system - cpu0.system) / count } : {}) });
    progress(`fleet: ${serving.length} instance(s), ${slot}: ${count} at ${rate}/s, p99 ${fmt(result.latency.p99, 1)} ms, ${result.unexpected + result.errors} not acknowledged${result.firstProblem ? ` (${result.firstProblem})` : ''}`);
  }
  const seconds = (performance.now() - started) / 1000;
  const bridges1 = bridgesCpuMs(serving);
  const pg1 = processCpuMsByName('postgres')?.ms;
  const wal1 = await walLsn(admin);
  const { check, checkOk } = await verify(admin, schema, simUrl, merchants, tag, n, booksBefore);
  const peaks = slots.filter((s) => s.slot === 'lunch' || s.slot === 'dinner').map((s) => s.result);
  const acknowledged = slots.reduce((sum, s) => sum + s.result.requests - s.result.unexpected - s.result.errors, 0);
  const bridgeCpu = bridges0 === undefined || bridges1 === undefined ? undefined : bridges1 - bridges0;
  return {
    instances: serving.length,
    idleBridgeCpuPerSecond: idle.bridges,
    idlePgCpuPerSecond: idle.postgres,
    offered: n,
    acknowledged,
    seconds,
    peakP50: Math.max(...peaks.map((p) => p.latency.p50)),
    peakP99: Math.max(...peaks.map((p) => p.latency.p99)),
    bridgeCpuPerCheckout: bridgeCpu === undefined ? undefined : bridgeCpu / n,
    pgCpuPerCheckout: pg0 === undefined || pg1 === undefined ? undefined : (pg1 - pg0) / n,
    walBytesPerCheckout: wal0 === undefined || wal1 === undefined ? undefined : (await walBytes(admin, wal0, wal1)) / n,
    check,
    checkOk,
    slots: cpuBySlot,
  };
}

/** The serving bridges' CPU so far, summed; undefined when /proc cannot say for one of them. */
function bridgesCpu(serving: Instance[]): { user: number; system: number } | undefined {
  const each = serving.map((s) => cpuSplitMsOf(s.child.process.pid));
  return each.every((c) => c !== undefined) ? each.reduce((a, c) => ({ user: a.user + c!.user, system: a.system + c!.system }), { user: 0, system: 0 }) : undefined;
}

/** The same, user and kernel together. */
function bridgesCpuMs(serving: Instance[]): number | undefined {
  const cpu = bridgesCpu(serving);
  return cpu && cpu.user + cpu.system;
}

const IDLE_MS = 5000;

/** The bridges' and PostgreSQL's CPU a second over IDLE_MS with nothing offered. */
async function idleCpu(serving: Instance[]): Promise<{ bridges?: number; postgres?: number }> {
  const b0 = bridgesCpuMs(serving);
  const p0 = processCpuMsByName('postgres')?.ms;
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const b1 = bridgesCpuMs(serving);
  const p1 = processCpuMsByName('postgres')?.ms;
  return {
    bridges: b0 === undefined || b1 === undefined ? undefined : ((b1 - b0) * 1000) / IDLE_MS,
    postgres: p0 === undefined || p1 === undefined ? undefined : ((p1 - p0) * 1000) / IDLE_MS,
  };
}

async function walBytes(admin: pg.Client, from: string, to: string): Promise<number> {
  return Number((await admin.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($1, $2) AS bytes', [to, from])).rows[0]!.bytes);
}

interface Books {
  accrueRequests: number;
  transactions: Record<string, { accruals: number }>;
}

/** Every merchant's books at the simulator (each merchant keeps its own), added together. */
async function booksOf(simUrl: string, merchants: Merchant[]): Promise<Books | undefined> {
  const each = await inLanes(merchants, 16, async (m) => getJson(`${simUrl}/__sim/merchants/${encodeURIComponent(m.id)}/books`, 60_000).catch(() => undefined));
  if (each.some((b) => b?.status !== 200)) return undefined;
  const books: Books = { accrueRequests: 0, transactions: {} };
  for (const b of each) {
    const one = b!.body as Books;
    books.accrueRequests += one.accrueRequests;
    Object.assign(books.transactions, one.transactions);
  }
  return books;
}

/** Every checkout of the day in the ledger and settled (waited for), each booked once at the simulator. */
async function verify(admin: pg.Client, schema: string, simUrl: string, merchants: Merchant[], prefix: string, expected: number, accrueRequestsBefore: number | undefined): Promise<{ check: string; checkOk: boolean }> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  for (;;) {
    const { rows } = await admin.query<{ open: number }>(`SELECT count(*) FILTER (WHERE open)::int AS open FROM ${schema}.ledger_records WHERE starts_with(order_id, $1)`, [`${prefix}-`]);
    if (rows[0]!.open === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const byStatus = (await admin.query<{ count: number; status: string }>(`SELECT count(*)::int AS count, status FROM ${schema}.ledger_records WHERE starts_with(order_id, $1) GROUP BY status ORDER BY status`, [`${prefix}-`])).rows;
  const ids = (
    // The column holds the ledger key (`<merchant>/<transactionId>` for a merchant but the default); the record, the id sent upstream.
    await admin.query<{ transaction_id: string }>(`SELECT record->>'transactionId' AS transaction_id FROM ${schema}.ledger_records WHERE starts_with(order_id, $1)`, [`${prefix}-`])
  ).rows.map((r) => r.transaction_id);
  const total = byStatus.reduce((s, r) => s + r.count, 0);
  const accrued = byStatus.find((r) => r.status === 'accrued')?.count ?? 0;
  const books = await booksOf(simUrl, merchants);
  let upstream = 'simulator books unavailable';
  let upstreamOk = false;
  if (books) {
    const once = ids.filter((id) => books.transactions[id]?.accruals === 1).length;
    const doubled = ids.filter((id) => (books.transactions[id]?.accruals ?? 0) > 1).length;
    upstreamOk = once === expected && doubled === 0;
    const calls = accrueRequestsBefore === undefined ? '' : `, ${books.accrueRequests - accrueRequestsBefore} accrue requests`;
    upstream = `${once} booked once, ${doubled} more than once${calls}`;
  }
  const checkOk = total === expected && accrued === expected && upstreamOk;
  return { check: `${byStatus.map((r) => `${r.count} ${r.status}`).join(', ') || 'no records'} of ${expected}; ${upstream}${checkOk ? '' : '  <-- MISMATCH'}`, checkOk };
}

function report(o: FleetPartOptions, days: DayFigures[]): void {
  const one = days[0];
  const columns: Column<DayFigures>[] = [
    ['instances', (d) => String(d.instances)],
    ['checkouts', (d) => String(d.offered)],
    ['acknowledged', (d) => `${d.acknowledged} (${fmt((100 * d.acknowledged) / d.offered, 1)} %)`],
    ['mean /s', (d) => fmt(d.offered / d.seconds, 0)],
    ['peak p50 ms', (d) => fmt(d.peakP50, 1)],
    ['peak p99 ms', (d) => fmt(d.peakP99, 1)],
    ['bridges CPU ms/checkout', (d) => fmt(d.bridgeCpuPerCheckout, 2)],
    ['PostgreSQL CPU ms/checkout', (d) => fmt(d.pgCpuPerCheckout, 2)],
    ['database share of CPU', (d) => (d.bridgeCpuPerCheckout === undefined || d.pgCpuPerCheckout === undefined ? '-' : `${fmt((100 * d.pgCpuPerCheckout) / (d.pgCpuPerCheckout + d.bridgeCpuPerCheckout), 0)} %`)],
    ['PostgreSQL CPU vs 1 instance', (d) => (one?.pgCpuPerCheckout && d.pgCpuPerCheckout !== undefined ? `${fmt(d.pgCpuPerCheckout / one.pgCpuPerCheckout, 2)}x` : '-')],
    ['WAL B/checkout', (d) => fmt(d.walBytesPerCheckout, 0)],
    ['idle CPU ms/s: bridges, PostgreSQL', (d) => `${fmt(d.idleBridgeCpuPerSecond, 1)}, ${fmt(d.idlePgCpuPerSecond, 1)}`],
  ];
  o.out(`Z. Fleet: ${o.merchants} merchants, a day of six slots of ${o.slotSeconds} s (peak ${o.peakRate}/s at lunch and dinner), instances on one PostgreSQL schema, round-robin`);
  o.out(tableOf(days, columns));
  for (const d of days) o.out(`   ${d.instances} instance(s): ${d.check}`);
  // CPU ticks are 10 ms: a slot of a few hundred checkouts reads to about 0.05 ms a checkout.
  for (const d of days) {
    o.out(`   ${d.instances} instance(s), bridges' CPU ms/checkout by slot (user + kernel): ${d.slots.map((s) => `${s.slot} ${s.rate}/s ${s.userMs === undefined ? '-' : `${fmt(s.userMs + s.systemMs!, 2)} (${fmt(s.userMs, 2)} + ${fmt(s.systemMs, 2)})`}`).join(', ')}`);
  }
  o.out();
}
