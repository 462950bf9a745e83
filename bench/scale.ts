/**
 * Part S of the benchmark (`npm run bench -- --only=scale`): what each path costs as the ledger's
 * history grows, on PostgreSQL at 10k and 1M records (10M with --scale-10m) and on the file ledger
 * at 1k and 1M, with the growth ratio of each figure to the smallest size. Figures only; the aims
 * (docs/benchmark.md) are printed beside them.
 *
 * The PostgreSQL ledgers are made the way an operator's would be: a bridge process writes a seed
 * through its HTTP API against the simulator (checkouts, full and partial refunds, refusals, a
 * reversal in doubt, skipped checkouts, orphan refunds, changed repeats, and operators'
 * acknowledgements, resolutions and closes), then SQL clones the seed's settled records over 1,000
 * merchants and 90 days up to the size. The newest copy is the seed itself, whole: what is open and
 * what needs a person is what the last day left, the same at every size (an operated bridge's queue
 * is what its operators have not cleared yet, not its history), while the history grows.
 *
 * Each size is measured by a bridge process of its own: start-up to ready, then each read path
 * `SAMPLES` times after a warm-up (p50 and p99), the store's own background queries from this
 * process, the bridge's resident memory after the reads, and a closed-loop checkout phase with the
 * WAL, commits and HOT updates it caused.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { ledgerReading } from '../src/core/attention-queue.js';
import { attentionEntriesOf } from '../src/state/attention.js';
import { writeLedgerInBulk } from '../src/ledger/file-store.js';
import { isOpen, type LedgerRecord } from '../src/state/record.js';
import { MIGRATIONS } from '../src/ledger/pg-migrations.js';
import { migrate, PostgresLedgerStore } from '../src/ledger/pg-store.js';
import {
  bridgeEnv,
  BRIDGE_POST_HEADERS,
  keepAliveAgent,
  percentile,
  postJson,
  progress,
  reason,
  removeDir,
  runPhase,
  startBridgeProcess,
  startSimulator,
  tempDir,
  withSchema,
  type BridgeChild,
  type LoadOptions,
  type PartContext,
} from './lib.js';
import { accruedRecord, checkoutPayload } from './records.js';
import { fmt, growthTable, p50p99, type GrowthRow } from './table.js';

export interface ScalePartOptions extends PartContext, Pick<LoadOptions, 'concurrency' | 'requests'> {
  databaseUrl: string;
  /** PostgreSQL sizes, smallest first (10k and 1M; 10M with --scale-10m). */
  pgSizes: number[];
  /** File ledger sizes (1k and 1M). */
  fileSizes: number[];
  /** Records of the version-9 ledger migration 10 is timed on (0: not timed). */
  migrationSize?: number;
}

/** Read samples per path and size, after WARMUP. */
const SAMPLES = 40;
const WARMUP = 5;
const MERCHANTS = 1000;
const DAYS = 90;

/** What is measured at every size, on either ledger. */
interface Measured {
  size: number;
  buildSeconds: number;
  startupMs: number;
  reads: Map<string, { p50: number; p99: number }>;
  rssMb: number;
}

interface SizeFigures extends Measured {
  tableBytes: number;
  checkout: { perSecond: number; p50: number; walBytes: number; commits: number; hotShare: number | undefined; unexpected: number; walKinds?: string };
}

function rssMbOf(pid: number | undefined): number {
  if (!pid) return Number.NaN;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  return kb / 1024;
}

export async function scalePart(o: ScalePartOptions): Promise<void> {
  const out = o.out;
  const admin = new pg.Client({ connectionString: o.databaseUrl, connectionTimeoutMillis: 3000 });
  admin.on('error', () => undefined);
  try {
    await admin.connect();
  } catch (error) {
    out(`S. Scale: skipped: no database reachable (${reason(error)}); set BENCH_DATABASE_URL to run it`);
    return;
  }
  const stamp = `${process.pid}_${Date.now().toString(36)}`;
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect').catch(() => undefined);
  const seedSchema = `bench_scale_seed_${stamp}`;
  const schemas = [seedSchema, ...o.pgSizes.map((n) => `bench_scale_${n}_${stamp}`)];
  const { child: sim, url: simUrl } = await startSimulator(o);
  const figures: SizeFigures[] = [];
  try {
    const seed = await writeSeed(o, simUrl, seedSchema, admin);
    out('S. Scale: the same paths as the ledger grows (PostgreSQL)');
    out(`   seed written by a bridge over HTTP: ${seed.records} records (${seed.describe}); cloned in SQL over ${MERCHANTS} merchants and ${DAYS} days`);
    out('   (the newest copy is the seed whole: what is open or needs a person is the same at every size; the history grows)');
    for (const size of o.pgSizes) {
      const schema = `bench_scale_${size}_${stamp}`;
      figures.push(await measureSize(o, admin, simUrl, seedSchema, schema, size, seed.records));
      // A size measured is dropped before the next is built: 10M records take tens of GB.
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    }
    printGrowth(out, figures, pgRows(figures), [...figures.filter((f) => f.checkout.walKinds).map((f) => `   WAL per checkout at ${f.size.toLocaleString('en-US')}: ${f.checkout.walKinds}`), PG_AIMS]);
    if (o.fileSizes.length) {
      const seedRecords = (await admin.query<{ record: LedgerRecord }>(`SELECT record FROM ${seedSchema}.ledger_records ORDER BY created_at, transaction_id`)).rows.map((r) => r.record);
      out('S. Scale: the same paths on the file ledger (the same seed and clones, written in bulk in its own line format)');
      const files: FileFigures[] = [];
      for (const size of o.fileSizes) files.push(await measureFileSize(o, simUrl, seedRecords, size));
      printGrowth(out, files, fileRows(files), [FILE_AIMS]);
    }
    if (o.migrationSize) {
      const m = await migrationFigure(o, admin, o.migrationSize);
      out(`   migration 10 (records partitioned by month, keys, work and attention tables) on a ledger at version 9 holding ${m.records.toLocaleString('en-US')} records`);
      out(`   (${m.open} open, ${m.attention} needing a person): ${fmt(m.seconds, 1)} s; the ledger written as the build before it writes it, in SQL`);
      out();
    }
  } finally {
    await sim.stop();
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

/** Starts a bridge process on `ledgerUrl` and waits for /readyz (a large ledger may take minutes); answers how long that took. */
function startBridge(o: ScalePartOptions, simUrl: string, ledgerUrl: string): Promise<BridgeChild> {
  return startBridgeProcess(o, { ledgerUrl, env: bridgeEnv(o, simUrl), readyTimeoutMs: 600_000 });
}

/**
 * The seed, written by a bridge over HTTP: what a day of a small shop's traffic leaves, faults and
 * operators included. Answers how many records it holds.
 */
async function writeSeed(o: ScalePartOptions, simUrl: string, schema: string, admin: pg.Client): Promise<{ records: number; describe: string }> {
  progress('part S: writing the seed through a bridge (PostgreSQL)');
  const bridge = await startBridge(o, simUrl, withSchema(o.databaseUrl, schema));
  const adminHeaders = { authorization: `Bearer ${o.adminToken}` };
  const fault = (spec: Record<string, unknown>) => postJson(`${simUrl}/__sim/faults`, spec);
  const checkout = (body: unknown) => postJson(`${bridge.url}/v1/checkouts/generic`, body, BRIDGE_POST_HEADERS);
  const refund = (body: unknown) => postJson(`${bridge.url}/v1/refunds/generic`, body, BRIDGE_POST_HEADERS);
  const act = (id: string, action: string, body: unknown) => postJson(`${bridge.url}/v1/admin/transactions/${encodeURIComponent(id)}/${action}`, body, adminHeaders);
  const tag = Date.now().toString(36);
  const order = (kind: string, i: number) => `S-${tag}-${kind}-${i}`;
  try {
    for (let i = 0; i < 1000; i++) await checkout(checkoutPayload(order('sale', i), i));
    for (let i = 0; i < 100; i++) await refund({ orderId: order('sale', i), refundId: `RF-${tag}-${i}` });
    for (let i = 100; i < 150; i++) await refund({ orderId: order('sale', i), refundId: `RP-${tag}-${i}`, amount: '19.99' });
    for (let i = 0; i < 20; i++) {
      await fault({ kind: 'result_failure', on: 'accrue', times: 1 });
      await checkout(checkoutPayload(order('refused', i), 2000 + i));
      if (i < 15) await act(`generic:${order('refused', i)}`, 'acknowledge', { reason: 'credited by hand' });
    }
    for (let i = 150; i < 160; i++) {
      await fault({ kind: 'drop_after_commit', on: 'reverse', times: 1 });
      await refund({ orderId: order('sale', i), refundId: `RD-${tag}-${i}` });
      if (i < 155) await act(`generic:${order('sale', i)}`, 'resolve', { outcome: 'reversed', reason: 'reversal seen in the history' });
    }
    for (let i = 0; i < 10; i++) await checkout({ ...checkoutPayload(order('anon', i), 3000 + i), customer: undefined });
    for (let i = 0; i < 5; i++) {
      await refund({ orderId: order('orphan', i), refundId: `RO-${tag}-${i}` });
      if (i < 3) await act(`generic:${order('orphan', i)}`, 'close', { reason: 'an order from before the program' });
    }
    for (let i = 200; i < 210; i++) await checkout({ ...checkoutPayload(order('sale', i), i), total: '61.00' });
  } finally {
    await bridge.child.stop();
  }
  const { rows } = await admin.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM ${schema}.ledger_records GROUP BY status ORDER BY status`);
  return { records: rows.reduce((sum, r) => sum + r.n, 0), describe: rows.map((r) => `${r.n} ${r.status}`).join(', ') };
}

/**
 * A ledger of `size` records in `schema`: the seed whole (its open records and attention entries
 * with it), then copies of its settled records needing no one, each under one of MERCHANTS
 * merchants, older copy by older copy over DAYS days, until `size`.
 */
async function buildLedger(o: ScalePartOptions, admin: pg.Client, seedSchema: string, schema: string, size: number, seedRecords: number): Promise<number> {
  const started = performance.now();
  const store = new PostgresLedgerStore(withSchema(o.databaseUrl, schema), { poolSize: 1 });
  await store.init();
  await store.close();
  const s = seedSchema;
  const t = schema;
  // The function names its tables unqualified, as the bridge's connections (search_path = the schema) see them.
  await admin.query(`SET search_path TO ${t}; SELECT ledger_ensure_partitions(now() - interval '${DAYS + 31} days', now() + interval '4 months'); RESET search_path`);
  // The seed whole: records, keys, work, attention, claims, accrual keys, audit.
  await admin.query(`
    INSERT INTO ${t}.ledger_keys SELECT * FROM ${s}.ledger_keys;
    INSERT INTO ${t}.ledger_records SELECT * FROM ${s}.ledger_records;
    INSERT INTO ${t}.ledger_work SELECT * FROM ${s}.ledger_work;
    INSERT INTO ${t}.ledger_attention SELECT * FROM ${s}.ledger_attention;
    INSERT INTO ${t}.ledger_operation_claims SELECT * FROM ${s}.ledger_operation_claims;
    INSERT INTO ${t}.ledger_accrual_keys SELECT * FROM ${s}.ledger_accrual_keys;
    INSERT INTO ${t}.ledger_audit (at, actor, merchant_id, entry) SELECT at, actor, merchant_id, entry FROM ${s}.ledger_audit;`);
  // The seed's settled records needing no one, numbered: what each older copy repeats.
  await admin.query(`CREATE TABLE ${t}.bench_seed AS SELECT x.*, row_number() OVER (ORDER BY x.created_at, x.transaction_id) AS rn FROM ${s}.ledger_records x WHERE NOT x.open AND NOT x.attention`);
  const settled = Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}.bench_seed`)).rows[0]!.n);
  const copies = Math.max(0, Math.ceil((size - seedRecords) / settled));
  // Copies numbered 1..copies, older as the number grows, spread over DAYS days; a batch of copies per statement.
  const batch = Math.max(1, Math.floor(250_000 / settled));
  const spanSeconds = DAYS * 86_400;
  // A copy's order and refund ids end in '.', so that no id is the beginning of another's (the
  // search by POS order id is a prefix search: 'A~c5' would also find 'A~c50'…'A~c599', more of them
  // the larger the ledger, and measure the answer's growth instead of the lookup's).
  const cloned = (columns: string) => `
    SELECT ${columns} FROM (
      SELECT r.*, c.n AS copy, 'm-' || lpad((((c.n * 7919) + r.rn) % ${MERCHANTS})::text, 4, '0') AS merchant, r.transaction_id || '~c' || c.n AS tx,
             r.order_id || '~c' || c.n || '.' AS new_order, r.created_at - make_interval(secs => c.n::double precision * ${spanSeconds} / ${Math.max(1, copies)}) AS created
        FROM ${t}.bench_seed r CROSS JOIN generate_series($1::int, $2::int) AS c(n)) k`;
  for (let first = 1; first <= copies; first += batch) {
    const last = Math.min(copies, first + batch - 1);
    progress(`part S: ${size} records: copies ${first}-${last} of ${copies}`);
    await admin.query(`INSERT INTO ${t}.ledger_keys (transaction_id, merchant_id, created_at, order_id) ${cloned("merchant || '/' || tx, merchant, created, new_order")}`, [first, last]);
    await admin.query(
      `INSERT INTO ${t}.ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, merchant_id, refund_ids, attention)
       ${cloned(`merchant || '/' || tx, version, pos, new_order, status, false, created, created + (updated_at - created_at),
                 jsonb_set(jsonb_set(jsonb_set(jsonb_set(record, '{transactionId}', to_jsonb(tx)), '{merchantId}', to_jsonb(merchant)), '{orderId}', to_jsonb(new_order)),
                           '{createdAt}', to_jsonb(to_char(created AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))),
                 merchant, (SELECT array_agg(x || '~c' || copy || '.') FROM unnest(refund_ids) x), false`)}`,
      [first, last],
    );
    await admin.query(
      `INSERT INTO ${t}.ledger_operation_claims (merchant_id, operation_id, transaction_id)
       SELECT k.merchant, c.operation_id + k.copy::bigint * 10000000, k.merchant || '/' || k.tx
         FROM (${cloned('merchant, copy, tx, transaction_id')}) k JOIN ${s}.ledger_operation_claims c ON c.transaction_id = k.transaction_id`,
      [first, last],
    );
  }
  await admin.query(`DROP TABLE ${t}.bench_seed`);
  await admin.query(`VACUUM ANALYZE ${t}.ledger_records, ${t}.ledger_keys, ${t}.ledger_operation_claims, ${t}.ledger_work, ${t}.ledger_attention`);
  await admin.query('CHECKPOINT').catch(() => undefined);
  progress(`part S: ${size} records built in ${fmt((performance.now() - started) / 1000, 1)} s`);
  return (performance.now() - started) / 1000;
}

/** A record to look up at every size: one of merchant m-0042's, by its key and order id. */
interface Sample {
  transactionId: string;
  merchantId: string;
  orderId: string;
}

/** Each read path through the bridge's HTTP API, SAMPLES times after WARMUP: p50 and p99 in ms. */
async function measureReads(o: ScalePartOptions, bridge: BridgeChild, sample: Sample): Promise<Map<string, { p50: number; p99: number }>> {
  const reads = new Map<string, { p50: number; p99: number }>();
  const headers = { authorization: `Bearer ${o.adminToken}`, accept: 'application/json' };
  const weekAgo = new Date(Date.now() - 7 * 86_400_000).toISOString();
  const first = (await (await fetch(`${bridge.url}/v1/admin/transactions?limit=50`, { headers })).json()) as { nextCursor?: string };
  const paths: [string, string][] = [
    ['GET /metrics (one scrape)', '/metrics'],
    ['GET /v1/admin/attention', '/v1/admin/attention'],
    ['GET /v1/admin/transactions (default list)', '/v1/admin/transactions'],
    ['  its next page (cursor)', `/v1/admin/transactions?cursor=${encodeURIComponent(first.nextCursor ?? '')}`],
    ['  by status reversed', '/v1/admin/transactions?status=reversed'],
    ['  over the last 7 days', `/v1/admin/transactions?from=${encodeURIComponent(weekAgo)}`],
    ['  one merchant (10 a page: it holds ~10 at 10k)', '/v1/admin/transactions?merchantId=m-0042&limit=10'],
    ['  by POS order id', `/v1/admin/transactions?orderId=${encodeURIComponent(sample.orderId)}`],
    ['GET one record by id', `/v1/admin/transactions/${encodeURIComponent(sample.transactionId)}?merchantId=${sample.merchantId}`],
    ['GET /healthz', '/healthz'],
  ];
  for (const [name, path] of paths) {
    const times: number[] = [];
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const t0 = performance.now();
      const res = await fetch(`${bridge.url}${path}`, { headers });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
      if (i >= WARMUP) times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    reads.set(name, { p50: percentile(times, 50), p99: percentile(times, 99) });
  }
  return reads;
}

async function measureSize(o: ScalePartOptions, admin: pg.Client, simUrl: string, seedSchema: string, schema: string, size: number, seedRecords: number): Promise<SizeFigures> {
  await admin.query(`CREATE SCHEMA ${schema}`);
  const buildSeconds = await buildLedger(o, admin, seedSchema, schema, size, seedRecords);
  const records = Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.ledger_keys`)).rows[0]!.n);
  const tableBytes = Number((await admin.query<{ b: string }>(`SELECT sum(pg_total_relation_size(c.oid)) AS b FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`, [schema])).rows[0]!.b);
  progress(`part S: measuring ${records} records (${fmt(tableBytes / 2 ** 30, 2)} GiB)`);
  const ledgerUrl = withSchema(o.databaseUrl, schema);
  const bridge = await startBridge(o, simUrl, ledgerUrl);
  try {
    const row = (await admin.query<{ transaction_id: string; merchant_id: string; order_id: string }>(`SELECT transaction_id, merchant_id, order_id FROM ${schema}.ledger_keys WHERE merchant_id = 'm-0042' LIMIT 1`)).rows[0]!;
    const reads = await measureReads(o, bridge, { transactionId: row.transaction_id.split('/')[1]!, merchantId: row.merchant_id, orderId: row.order_id });
    // The store's background queries, as the worker, start-up recovery and the gauges' timer run them.
    const store = new PostgresLedgerStore(ledgerUrl, { poolSize: 2 });
    try {
      const timeIt = async (name: string, run: () => Promise<unknown>) => {
        const times: number[] = [];
        for (let i = 0; i < WARMUP + SAMPLES; i++) {
          const t0 = performance.now();
          await run();
          if (i >= WARMUP) times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        reads.set(name, { p50: percentile(times, 50), p99: percentile(times, 99) });
      };
      await timeIt("worker's due-work query (listDue)", () => store.listDue({ nowMs: Date.now(), limit: 500, perMerchant: 50, canVerify: true }));
      await timeIt('start-up recovery read (listOpen dueOnly)', () => store.listOpen({ limit: 500, dueOnly: true }));
      await timeIt('gauges counted (the readings timer)', () => ledgerReading(store, () => Date.now()));
    } finally {
      await store.close();
    }
    const rssMb = rssMbOf(bridge.child.process.pid);
    const checkout = await checkoutPhase(o, admin, bridge, schema);
    return { size: records, buildSeconds, tableBytes, startupMs: bridge.startupMs, reads, rssMb, checkout };
  } finally {
    await bridge.child.stop();
  }
}

/**
 * The file ledger at `size` records: the seed's records whole, then copies of its settled ones
 * under MERCHANTS merchants over DAYS days, as for PostgreSQL, written in bulk in the store's own
 * line format (`writeLedgerInBulk`). The first bridge on it builds its index (timed); the figures
 * are a second start's, as every start after the first.
 */
async function measureFileSize(o: ScalePartOptions, simUrl: string, seed: LedgerRecord[], size: number): Promise<FileFigures> {
  const dir = tempDir('bench-scale-file-');
  try {
    const path = join(dir, 'ledger.json');
    const settled = seed.filter((r) => !isOpen(r) && attentionEntriesOf(r).length === 0);
    const copies = Math.max(0, Math.ceil((size - seed.length) / settled.length));
    let sample: Sample | undefined;
    function* records(): Generator<LedgerRecord> {
      for (const r of seed) yield { ...r, version: 1 };
      let made = seed.length;
      for (let copy = 1; copy <= copies && made < size; copy++) {
        const shiftMs = (copy * DAYS * 86_400_000) / Math.max(1, copies);
        for (const [i, r] of settled.entries()) {
          if (made++ >= size) return;
          const merchantId = `m-${String((copy * 7919 + i + 1) % MERCHANTS).padStart(4, '0')}`;
          const clone: LedgerRecord = {
            ...r,
            version: 1,
            transactionId: `${r.transactionId}~c${copy}`,
            merchantId,
            // Ends in '.': no clone's order id is the beginning of another's (as in the SQL clone above).
            orderId: `${r.orderId}~c${copy}.`,
            createdAt: new Date(Date.parse(r.createdAt) - shiftMs).toISOString(),
            updatedAt: new Date(Date.parse(r.updatedAt) - shiftMs).toISOString(),
            reversal: { ...r.reversal, refundIds: r.reversal.refundIds.map((id) => `${id}~c${copy}.`) },
            accrual: { ...r.accrual, operationIds: r.accrual.operationIds.map((op) => op + copy * 10_000_000) },
          };
          if (!sample && merchantId === 'm-0042') sample = { transactionId: clone.transactionId, merchantId, orderId: clone.orderId };
          yield clone;
        }
      }
    }
    const built = performance.now();
    progress(`part S: file ledger of ${size} records: writing its journal in bulk`);
    const written = writeLedgerInBulk(path, records());
    const ledgerUrl = `file:${path}`;
    const first = await startBridge(o, simUrl, ledgerUrl);
    const indexMs = first.startupMs;
    await first.child.stop();
    const buildSeconds = (performance.now() - built) / 1000;
    const bridge = await startBridge(o, simUrl, ledgerUrl);
    try {
      const reads = await measureReads(o, bridge, sample ?? { transactionId: seed[0]!.transactionId, merchantId: 'default', orderId: seed[0]!.orderId });
      return { size: written.records, buildSeconds, bytes: folderBytes(dir), indexStartupMs: indexMs, startupMs: bridge.startupMs, reads, rssMb: rssMbOf(bridge.child.process.pid) };
    } finally {
      await bridge.child.stop();
    }
  } finally {
    await removeDir(dir);
  }
}

interface FileFigures extends Measured {
  bytes: number;
  /** The first start, which builds the index from the journal. */
  indexStartupMs: number;
}

async function checkoutPhase(o: ScalePartOptions, admin: pg.Client, bridge: BridgeChild, schema: string): Promise<SizeFigures['checkout']> {
  const tag = `${schema}-co`;
  const bodies = Array.from({ length: o.requests }, (_, i) => JSON.stringify(checkoutPayload(`C-${tag}-${i}`, 5000 + i)));
  const agent = keepAliveAgent(o.concurrency);
  const stats = async () => {
    const db = (await admin.query<{ commits: string; lsn: string }>('SELECT xact_commit AS commits, pg_current_wal_lsn() AS lsn FROM pg_stat_database WHERE datname = current_database()')).rows[0]!;
    const tables = (
      await admin.query<{ upd: string; hot: string }>(
        `SELECT coalesce(sum(n_tup_upd), 0) AS upd, coalesce(sum(n_tup_hot_upd), 0) AS hot FROM pg_stat_user_tables WHERE schemaname = $1 AND relname LIKE 'ledger_records%'`,
        [schema],
      )
    ).rows[0]!;
    return { commits: Number(db.commits), lsn: db.lsn, upd: Number(tables.upd), hot: Number(tables.hot) };
  };
  await admin.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  const before = await stats();
  const result = await runPhase({
    name: 'scale-checkouts',
    baseUrl: bridge.url,
    path: '/v1/checkouts/generic',
    headers: BRIDGE_POST_HEADERS,
    bodies,
    concurrency: o.concurrency,
    agent,
    accept: (status, body) => status === 200 && body.includes('"accrued"'),
  });
  // Statistics reach the views within a second; the WAL position at once.
  await new Promise((r) => setTimeout(r, 1500));
  const after = await stats();
  agent.destroy();
  const wal = Number((await admin.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2) AS d', [after.lsn, before.lsn])).rows[0]!.d);
  // What the WAL was made of, where pg_walinspect (PostgreSQL 15's contrib) can be had.
  const kinds = await admin
    .query<{ kind: string; bytes: string; fpi: string }>(
      `SELECT "resource_manager/record_type" AS kind, combined_size AS bytes, fpi_size AS fpi FROM pg_get_wal_stats($1, $2, false) WHERE count > 0 ORDER BY combined_size DESC`,
      [before.lsn, after.lsn],
    )
    .then(
      (r) => r.rows.map((k) => `${k.kind} ${fmt(Number(k.bytes) / result.requests / 1024, 2)} kB (page images ${fmt(Number(k.fpi) / result.requests / 1024, 2)})`).join(', '),
      () => undefined,
    );
  return {
    perSecond: result.throughput,
    p50: result.latency.p50,
    walBytes: wal / result.requests,
    commits: (after.commits - before.commits) / result.requests,
    hotShare: after.upd > before.upd ? (after.hot - before.hot) / (after.upd - before.upd) : undefined,
    unexpected: result.unexpected + result.errors,
    walKinds: kinds,
  };
}

/** A ledger's figures by size, then `notes`. */
function printGrowth<T extends Measured>(out: (line?: string) => void, figures: T[], rows: GrowthRow<T>[], notes: string[]): void {
  if (figures.length === 0) return;
  out(growthTable('p50 ms (p99)', figures, rows));
  for (const line of notes) out(line);
  out();
}

/** The lines both ledgers' tables begin with: each read path. */
function readRows(figures: readonly Measured[]): GrowthRow<Measured>[] {
  return [...(figures[0]?.reads.keys() ?? [])].map((name) => ({ name, cell: (f) => p50p99(f.reads.get(name)!), value: (f) => f.reads.get(name)!.p50 }));
}

const STARTUP_ROW: GrowthRow<Measured> = { name: 'start-up to ready, ms', cell: (f) => fmt(f.startupMs, 0), value: (f) => f.startupMs };
const RSS_ROW: GrowthRow<Measured> = { name: 'bridge RSS after the reads, MB', cell: (f) => fmt(f.rssMb, 0), value: (f) => f.rssMb };

/** PostgreSQL's table: the reads, start-up, memory, then the checkout path's cost and the ledger's size. */
function pgRows(figures: SizeFigures[]): GrowthRow<SizeFigures>[] {
  return [
    ...readRows(figures),
    STARTUP_ROW,
    RSS_ROW,
    { name: `checkouts/s at 16 concurrent`, cell: (f) => fmt(f.checkout.perSecond, 0), value: (f) => f.checkout.perSecond },
    { name: '  checkout p50 ms', cell: (f) => fmt(f.checkout.p50, 1), value: (f) => f.checkout.p50 },
    { name: '  WAL per checkout, kB', cell: (f) => fmt(f.checkout.walBytes / 1024, 2), value: (f) => f.checkout.walBytes },
    { name: '  commits per checkout', cell: (f) => fmt(f.checkout.commits, 2) },
    { name: '  HOT share of record updates', cell: (f) => (f.checkout.hotShare === undefined ? '-' : `${fmt(f.checkout.hotShare * 100, 0)} %`) },
    { name: '  checkouts not answered 200 accrued', cell: (f) => String(f.checkout.unexpected) },
    { name: 'ledger size on disk, GiB', cell: (f) => fmt(f.tableBytes / 2 ** 30, 2) },
    { name: 'built in, s', cell: (f) => fmt(f.buildSeconds, 0) },
  ];
}

const PG_AIMS = '   aims: every path ≤ 1.3× its 10k cost at 10M; list p99 ≤ 50 ms and a scrape ≤ 100 ms at 10M; RSS flat; ≤ 2.5 kB WAL and ≤ 1.5 commits per checkout';

/** The file ledger's table: the reads, start-up (and the first, which builds the index), memory, and its size. */
function fileRows(figures: FileFigures[]): GrowthRow<FileFigures>[] {
  return [
    ...readRows(figures),
    STARTUP_ROW,
    { name: '  the first start (builds the index), ms', cell: (f) => fmt(f.indexStartupMs, 0) },
    RSS_ROW,
    { name: 'ledger size on disk, MiB', cell: (f) => fmt(f.bytes / 2 ** 20, 0) },
  ];
}

const FILE_AIMS = '   aims: 1M records open in ≤ 256 MB RSS and start in ≤ 3 s; every path ≤ 1.3× its smallest-size cost';

/**
 * How long migration 10 takes on a populated ledger: a schema at version 9 (migrations 1-9 as
 * shipped), `size` records written in SQL as the build before it wrote them (one in 200 open, one
 * in 500 failed, an operation claim each), then this build's `migrate`.
 */
async function migrationFigure(o: ScalePartOptions, admin: pg.Client, size: number): Promise<{ records: number; open: number; attention: number; seconds: number }> {
  const schema = `bench_scale_migrate_${process.pid}_${Date.now().toString(36)}`;
  progress(`part S: a version-9 ledger of ${size} records for migration 10`);
  await admin.query(`CREATE SCHEMA ${schema}; SET search_path TO ${schema}`);
  try {
    await admin.query('CREATE TABLE ledger_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const m of MIGRATIONS.filter((x) => x.version <= 9)) {
      await admin.query(m.sql);
      await admin.query('INSERT INTO ledger_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
    }
    const template = JSON.stringify(accruedRecord('MIG-0', 0));
    for (let first = 0; first < size; first += 200_000) {
      const last = Math.min(size, first + 200_000) - 1;
      progress(`part S: version-9 ledger: records ${first}-${last}`);
      await admin.query(
        `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, due_at, due_needs_verifier, accrual_keys, unsettled_amount, merchant_id)
         SELECT 'm-' || lpad((g % ${MERCHANTS})::text, 4, '0') || '/generic:MIG-' || g, 2, 'generic', 'MIG-' || g,
                CASE WHEN g % 200 = 0 THEN 'pending' WHEN g % 500 = 1 THEN 'failed' ELSE 'accrued' END, g % 200 = 0,
                now() - make_interval(secs => (g % (${DAYS} * 86400))::double precision), now(),
                jsonb_set(jsonb_set(jsonb_set(jsonb_set($1::jsonb, '{transactionId}', to_jsonb('generic:MIG-' || g)), '{merchantId}', to_jsonb('m-' || lpad((g % ${MERCHANTS})::text, 4, '0'))),
                          '{status}', to_jsonb(CASE WHEN g % 200 = 0 THEN 'pending' WHEN g % 500 = 1 THEN 'failed' ELSE 'accrued' END)),
                          '{accrual,state}', to_jsonb(CASE WHEN g % 200 = 0 THEN 'pending' WHEN g % 500 = 1 THEN 'failed' ELSE 'accrued' END)),
                CASE WHEN g % 200 = 0 THEN now() ELSE 'infinity' END, false, '{}', NULL, 'm-' || lpad((g % ${MERCHANTS})::text, 4, '0')
           FROM generate_series($2::int, $3::int) g`,
        [template, first, last],
      );
      await admin.query(
        `INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id)
         SELECT 'm-' || lpad((g % ${MERCHANTS})::text, 4, '0'), g, 'm-' || lpad((g % ${MERCHANTS})::text, 4, '0') || '/generic:MIG-' || g FROM generate_series($1::int, $2::int) g WHERE g % 200 <> 0`,
        [first, last],
      );
    }
    await admin.query('ANALYZE ledger_records');
    await admin.query('RESET search_path; CHECKPOINT');
    const store = new PostgresLedgerStore(withSchema(o.databaseUrl, schema), { poolSize: 1 });
    const started = performance.now();
    try {
      await migrate(store.pool, schema);
    } finally {
      await store.close();
    }
    const seconds = (performance.now() - started) / 1000;
    const count = async (sql: string) => Number((await admin.query<{ n: string }>(sql)).rows[0]!.n);
    return {
      records: await count(`SELECT count(*) AS n FROM ${schema}.ledger_keys`),
      open: await count(`SELECT count(*) AS n FROM ${schema}.ledger_work`),
      attention: await count(`SELECT count(*) AS n FROM ${schema}.ledger_attention`),
      seconds,
    };
  } finally {
    await admin.query(`RESET search_path; DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}

/** Exact size of a folder in bytes (du -sb), for the file ledgers. */
function folderBytes(dir: string): number {
  const r = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
  return Number(r.stdout.split(/\s/)[0]);
}
