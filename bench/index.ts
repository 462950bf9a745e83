/**
 * The benchmark: `npm run bench` (builds, then `node --expose-gc dist/bench/index.js`).
 *
 * A. Checkout throughput and latency (bench/checkout-http.ts) through the bridge (its own process,
 *    `dist/src/main.js`, file ledger) next to direct accrue calls to the same simulator (its own
 *    process), same load generator, same concurrency, keep-alive. Phases alternate direct, bridge,
 *    direct, bridge, ...; the summary takes the median of the rounds for each figure.
 * C. (diagnostic, bench/checkout-breakdown.ts) What one checkout does to the ledger: an in-process
 *    bridge with a counting store, one request at a time.
 * D. The PostgreSQL ledger store (bench/pg.ts): checkouts through one bridge, then three
 *    bridges on one schema (requests round-robin), on a fresh schema of BENCH_DATABASE_URL that is
 *    dropped afterwards, next to a file-ledger bridge; the ledger and the simulator's books are
 *    checked after every phase. No reachable database: one line says it is skipped.
 * M. Many merchants (bench/merchants.ts): the bridge's CPU per checkout with checkouts spread
 *    over 1,000 merchants' tokens, next to the same checkouts of one merchant.
 * F. Backfill (bench/backfill.ts): a pass over 10,000 Square orders already in the ledger,
 *    in orders per second, and the checkout path's p99 beside it with and without passes running.
 * B. The file ledger (bench/file-ledger.ts) at 1k / 10k / 100k records (1M by hand: --ledger-sizes=1000,100000,1000000): per-write
 *    cost, start-up time, resident memory, and the one-time build of its index from a full scan.
 * R. The register (bench/register.ts): Toast's SEARCH and INQUIRE against the upstream's own reads, at
 *    0 and 100 ms of upstream latency, cold and cached, at fixed concurrency and at 50 and 200/s;
 *    ACCRUE through the loyalty API against the same check posted to /v1/checkouts/toast (CPU).
 * S. Scale (bench/scale.ts, `--only=scale` only): each read path, the background queries,
 *    start-up, memory and the checkout path's WAL and commits at 10k, 1M (and 10M) records on
 *    PostgreSQL, cloned in SQL from a seed a bridge wrote, with the growth ratio.
 * Z. Fleet (bench/fleet.ts, `--only=fleet` only): 1, 2, 3 bridge instances on one PostgreSQL schema
 *    under many merchants' day (night, lunch and dinner peaks): acknowledged, peak p99, the bridges'
 *    and the database's CPU per checkout, WAL per checkout, every checkout checked.
 *
 * Figures only: targets are printed beside them, nothing fails. Its options are USAGE below
 * (`npm run bench -- --help` prints them).
 */
import os from 'node:os';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { backfillPart } from './backfill.js';
import { accepts, bodiesFor, httpPart, startProcesses, type PartASummary } from './checkout-http.js';
import { serialDiagnostic } from './checkout-breakdown.js';
import { ledgerPart, type LedgerBuild } from './file-ledger.js';
import { cleanupSync, installCleanup, progress, type LoadOptions, type PartContext } from './lib.js';
import { merchantsPart } from './merchants.js';
import { pgPart } from './pg.js';
import { registerPart } from './register.js';
import { scalePart } from './scale.js';
import { fmt } from './table.js';
import { fleetPart } from './fleet.js';

const started = performance.now();
const here = dirname(fileURLToPath(import.meta.url)); // dist/bench
const distDir = resolve(here, '..');

// ------------------------------------------------------------------ options

/** What `--help` prints, and what a refused option points to. A flag wins over its variable. */
const USAGE = `usage: npm run bench -- [--option=value ...]   (or node --expose-gc dist/bench/index.js)
Runs parts A, C, D, M, F, B and R; S (scale) and Z (fleet) run only when named with --only.
Figures only: targets are printed beside them, nothing fails.

  option           variable             what (default)
  --requests=N       BENCH_REQUESTS       requests per measured phase (3000)
  --concurrency=N    BENCH_CONCURRENCY    requests in flight (16)
  --warmup=N         BENCH_WARMUP         warm-up requests per target (300)
  --rounds=N         BENCH_ROUNDS         direct+bridge rounds (3)
  --serial=N         BENCH_SERIAL         checkouts in the diagnostic (200; 0 skips it)
  --ledger-sizes=L   BENCH_LEDGER_SIZES   comma list (1000,10000,100000)
  --ledger-writes=N  BENCH_LEDGER_WRITES  measured inserts and updates per size (1000)
  --ledger-build=B   BENCH_LEDGER_BUILD   how part B builds a ledger: insert, bulk (journal lines in bulk, then the index
                     built by one open) or auto (bulk above 100k records)
  --rate=N           BENCH_RATE           offered load of the latency phase, requests/s (200)
  --database-url=U   BENCH_DATABASE_URL   PostgreSQL for part D (postgres://postgres@127.0.0.1:5432/test)
  --merchants=N      BENCH_MERCHANTS      merchants in part M (1000)
  --backfill-orders=N BENCH_BACKFILL_ORDERS orders in the ledger for part F (10000)
  --only=http|ledger|pg|merchants|backfill|register|scale|fleet  BENCH_ONLY  run one part (http = A and C, ledger = B, pg = D, merchants = M,
                     backfill = F, register = R, scale = S and fleet = Z, which run only when named)
  --scale-sizes=L    BENCH_SCALE_SIZES    part S's PostgreSQL sizes (10000,1000000); --scale-10m adds 10,000,000
  --migration-size=N BENCH_MIGRATION_SIZE records of the version-9 ledger part S times migration 10 on (1000000; 0: none)
  --scale-file-sizes=L BENCH_SCALE_FILE_SIZES part S's file ledger sizes (1000,1000000; empty: none)
  --fleet-merchants=N BENCH_FLEET_MERCHANTS merchants in part Z (200)
  --fleet-peak=N      BENCH_FLEET_PEAK      checkouts/s offered at part Z's lunch and dinner peaks (200)
  --fleet-slot-seconds=N BENCH_FLEET_SLOT_SECONDS seconds of each of the day's six slots (5)
  --fleet-instances=L BENCH_FLEET_INSTANCES instance counts, a day each (1,2,3)
  BENCH_BRIDGE_NODE_ARGS  extra node flags for every part's bridge processes, e.g.
                          "--cpu-prof --cpu-prof-dir=/tmp/prof" (node refuses --cpu-prof in NODE_OPTIONS)
  --scale-10m                             part S also at 10,000,000 records
  --help, -h                              this text`;

/** An option refused: said in one line with where to look, exit 2 (as every CLI of the bridge does). */
class UsageError extends Error {}

function option(flag: string, env: string, fallback: string): string {
  const prefix = `--${flag}=`;
  const arg = process.argv.slice(2).find((a) => a.startsWith(prefix));
  return arg?.slice(prefix.length) ?? (process.env[env] || fallback);
}
function intOption(flag: string, env: string, fallback: number, min = 1): number {
  const raw = option(flag, env, String(fallback));
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new UsageError(`--${flag} / ${env} must be an integer ≥ ${min}, got ${JSON.stringify(raw)}`);
  return value;
}

const PARTS = ['http', 'ledger', 'pg', 'merchants', 'backfill', 'register', 'scale', 'fleet'] as const;

function readOptions() {
  const options = {
    requests: intOption('requests', 'BENCH_REQUESTS', 3000),
    concurrency: intOption('concurrency', 'BENCH_CONCURRENCY', 16),
    warmup: intOption('warmup', 'BENCH_WARMUP', 300, 0),
    rounds: intOption('rounds', 'BENCH_ROUNDS', 3),
    serial: intOption('serial', 'BENCH_SERIAL', 200, 0),
    ledgerSizes: option('ledger-sizes', 'BENCH_LEDGER_SIZES', '1000,10000,100000')
      .split(',')
      .map((s) => Number(s.trim()))
      .filter((n) => {
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--ledger-sizes / BENCH_LEDGER_SIZES: ${n} is not a positive integer`);
        return true;
      }),
    ledgerWrites: intOption('ledger-writes', 'BENCH_LEDGER_WRITES', 1000),
    ledgerBuild: option('ledger-build', 'BENCH_LEDGER_BUILD', 'auto') as LedgerBuild,
    only: option('only', 'BENCH_ONLY', ''),
    merchants: intOption('merchants', 'BENCH_MERCHANTS', 1000),
    backfillOrders: intOption('backfill-orders', 'BENCH_BACKFILL_ORDERS', 10_000),
    rate: intOption('rate', 'BENCH_RATE', 200),
    databaseUrl: option('database-url', 'BENCH_DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/test'),
    scaleSizes: option('scale-sizes', 'BENCH_SCALE_SIZES', '10000,1000000')
      .split(',')
      .map((s) => Number(s.trim()))
      .concat(process.argv.includes('--scale-10m') ? [10_000_000] : []),
    migrationSize: intOption('migration-size', 'BENCH_MIGRATION_SIZE', 1_000_000, 0),
    scaleFileSizes: option('scale-file-sizes', 'BENCH_SCALE_FILE_SIZES', '1000,1000000')
      .split(',')
      .filter(Boolean)
      .map((s) => Number(s.trim())),
    fleetMerchants: intOption('fleet-merchants', 'BENCH_FLEET_MERCHANTS', 200),
    fleetPeak: intOption('fleet-peak', 'BENCH_FLEET_PEAK', 200),
    fleetSlotSeconds: intOption('fleet-slot-seconds', 'BENCH_FLEET_SLOT_SECONDS', 5),
    fleetInstances: option('fleet-instances', 'BENCH_FLEET_INSTANCES', '1,2,3')
      .split(',')
      .map((s) => {
        const n = Number(s.trim());
        if (!Number.isInteger(n) || n < 1 || n > 8) throw new UsageError(`--fleet-instances / BENCH_FLEET_INSTANCES: ${JSON.stringify(s)} is not an instance count from 1 to 8`);
        return n;
      }),
  };
  if (!['auto', 'insert', 'bulk'].includes(options.ledgerBuild)) throw new UsageError(`--ledger-build / BENCH_LEDGER_BUILD must be auto, insert or bulk, got ${JSON.stringify(options.ledgerBuild)}`);
  if (options.only && !(PARTS as readonly string[]).includes(options.only)) throw new UsageError(`--only must be one of ${PARTS.join(', ')}`);
  return options;
}

/** Every flag USAGE names, so that a misspelt one is refused rather than quietly ignored. */
const KNOWN_FLAGS = new Set([...USAGE.matchAll(/^ {2}(--[a-z0-9-]+)/gm)].map((m) => m[1]!));

const opts = (() => {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  try {
    const unknown = argv.find((arg) => !KNOWN_FLAGS.has(arg.split('=')[0]!));
    if (unknown) throw new UsageError(`unknown argument ${JSON.stringify(unknown)}`);
    return readOptions();
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`bench: ${error.message} (npm run bench -- --help lists the options)\n`);
    process.exit(2);
  }
})();

// Part S (scale) builds ledgers of a million records and more, and part Z (fleet) runs a day per
// instance count: they run only when asked for by name.
const runs = (part: (typeof PARTS)[number]) => (part === 'scale' || part === 'fleet' ? opts.only === part : !opts.only || opts.only === part);

const out = (line = '') => process.stdout.write(`${line}\n`);

/** What every part is given: where the built files are, the tokens, the output. */
const context: PartContext = {
  here,
  distDir,
  projectRoot: resolve(distDir, '..'),
  runId: Date.now().toString(36),
  appToken: 'sim-app-token',
  apiKey: 'sim-api-key',
  adminToken: 'bench-admin-token-0123456789',
  out,
  gc: (globalThis as { gc?: () => void }).gc,
};
const load: LoadOptions = { requests: opts.requests, concurrency: opts.concurrency, warmup: opts.warmup, rounds: opts.rounds, rate: opts.rate };

// ------------------------------------------------------------------ header

function header(): void {
  const cpus = os.cpus();
  out('loyalty-bridge benchmark');
  out(`date:     ${new Date().toISOString()}`);
  out(`machine:  ${cpus.length} cpus (${cpus[0]?.model.trim() ?? 'unknown'}), ${fmt(os.totalmem() / 2 ** 30, 1)} GiB RAM, ${os.platform()} ${os.release()} ${os.arch()}`);
  out(`node:     ${process.version}   load average at start: ${os.loadavg().map((l) => fmt(l, 2)).join(' ')}`);
  out(
    `options:  requests=${opts.requests} concurrency=${opts.concurrency} warmup=${opts.warmup} rounds=${opts.rounds} serial=${opts.serial} ` +
      `ledger-sizes=${opts.ledgerSizes.join(',')} ledger-writes=${opts.ledgerWrites} rate=${opts.rate}${runs('pg') ? ` database=${opts.databaseUrl.replace(/:[^:@/]*@/, ':***@')}` : ''}${opts.only ? ` only=${opts.only}` : ''}`,
  );
  out();
}

// ------------------------------------------------------------------ run

async function main(): Promise<void> {
  installCleanup();
  header();
  let partA: PartASummary | undefined;
  if (runs('http')) {
    const p = await startProcesses(context);
    try {
      partA = await httpPart({ ...context, ...load }, p);
      if (opts.serial > 0) {
        progress(`diagnostic: ${opts.serial} checkouts one at a time through an in-process bridge with a counting ledger store`);
        out(await serialDiagnostic({ simUrl: p.simUrl, appToken: context.appToken, apiKey: context.apiKey, requests: opts.serial, runId: context.runId }));
        out();
      }
    } finally {
      await Promise.all([p.bridge.stop(), p.floor.stop(), p.sim.stop()]);
    }
  }
  if (runs('pg')) {
    try {
      await pgPart({
        ...context,
        ...load,
        databaseUrl: opts.databaseUrl,
        serial: opts.serial,
        bridgeBodies: (tag, count) => bodiesFor('bridge', context.runId, tag, count),
        accept: accepts('bridge'),
        partA,
      });
    } catch (error) {
      // A database problem must not cost the other parts; the bench still says so, and exits non-zero.
      out(`D. PostgreSQL store: stopped by an error: ${(error as Error).message.split('\n')[0]}`);
      out();
      process.stderr.write(`part D failed: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    }
  }
  if (runs('merchants')) await merchantsPart({ ...context, ...load, merchants: opts.merchants });
  if (runs('backfill')) await backfillPart({ ...context, ...load, orders: opts.backfillOrders });
  if (runs('register')) await registerPart({ ...context, ...load });
  if (runs('ledger')) await ledgerPart({ ...context, sizes: opts.ledgerSizes, writes: opts.ledgerWrites, build: opts.ledgerBuild });
  if (runs('scale')) {
    await scalePart({
      ...context,
      ...load,
      databaseUrl: opts.databaseUrl,
      pgSizes: opts.scaleSizes,
      migrationSize: opts.migrationSize,
      fileSizes: opts.scaleFileSizes,
    });
  }
  if (runs('fleet')) {
    await fleetPart({
      ...context,
      databaseUrl: opts.databaseUrl,
      merchants: opts.fleetMerchants,
      peakRate: opts.fleetPeak,
      slotSeconds: opts.fleetSlotSeconds,
      instanceCounts: opts.fleetInstances,
    });
  }
  out(`total wall time: ${fmt((performance.now() - started) / 1000, 1)} s`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  cleanupSync();
  process.exitCode = 1;
});
