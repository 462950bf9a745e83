/**
 * What the operators' reads cost, and what a record update costs on PostgreSQL:
 *   npm run bench:operators [-- <records>]   (default 20,000 records)
 * On a file ledger and on a fresh PostgreSQL schema of BENCH_DATABASE_URL (default the local test
 * server; skipped with one line when none is reachable): a ledger of `records` orders, 2% of them
 * needing a person (failed, in doubt, reverse_failed), 1% refunded. Prints the median time of the
 * attention listing, a search by order id and by refund id, by an order id's beginning in another
 * case and by a customer's phone, the open-records count by status, and, on PostgreSQL, the time of
 * one record update (compare-and-set). Figures only: nothing here fails on a number.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { attentionQueue } from '../src/core/attention-queue.js';
import { newCheckout, nextVersion } from '../src/core/transitions.js';
import { FileLedgerStore } from '../src/ledger/file-store.js';
import { PostgresLedgerStore } from '../src/ledger/pg-store.js';
import { deriveStatus, type LedgerRecord } from '../src/state/record.js';
import type { LedgerStore } from '../src/ledger/store.js';

const RECORDS = Number(process.argv[2] ?? 20_000);
const RUNS = 7;
const UPDATES = 1_000;
const T0 = Date.parse('2026-11-01T00:00:00Z');

/** Order n: most accrued; every 50th failed, in doubt or an orphan reverse_failed by turns; every 100th refunded. */
function recordOf(n: number): LedgerRecord {
  const at = new Date(T0 + n * 1000);
  const check = { amount: 1000 + (n % 500), currency: 'USD', externalTransactionId: `generic:O-${n}`, selections: [] };
  const r = newCheckout({ transactionId: `generic:O-${n}`, merchantId: 'default', pos: 'generic', orderId: `O-${n}` }, { check, customer: { phone: `+1555${String(n).padStart(7, '0')}` } }, true, at);
  r.accrual = { ...r.accrual, state: 'accrued', operationIds: [n + 1] };
  if (n % 50 === 7) r.accrual = { ...r.accrual, state: 'failed', operationIds: [], errors: ['Card is blocked'] };
  if (n % 50 === 17) r.accrual = { ...r.accrual, state: 'in_doubt', operationIds: [], inDoubtSince: at.toISOString() };
  if (n % 50 === 27) {
    r.accrual = { ...r.accrual, state: 'none', operationIds: [] };
    r.reversal = { ...r.reversal, state: 'failed', unknownUpstream: true, refundIds: [`RF-${n}`], errors: ['Transaction not found'] };
  }
  if (n % 100 === 3) r.reversal = { ...r.reversal, state: 'reversed', refundIds: [`RF-${n}`] };
  r.status = deriveStatus(r);
  return r;
}

async function median(run: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await run();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!;
}

const ms = (n: number) => `${n.toFixed(n < 10 ? 2 : 1)} ms`;

async function reads(name: string, store: LedgerStore): Promise<void> {
  // An order halfway through the ledger, one of the refunded (n % 100 === 3).
  const probe = 100 * Math.floor(RECORDS / 200) + 3;
  const queue = await attentionQueue(store, { limit: 100 });
  console.log(`${name}: attention queue (${queue.total} items, 100 listed) ${ms(await median(() => attentionQueue(store, { limit: 100 })))}`);
  console.log(`${name}: search by order id ${ms(await median(() => store.list({ orderId: `O-${probe}`, offset: 0, limit: 50 })))}, by refund id ${ms(await median(() => store.list({ refundId: `RF-${probe}`, offset: 0, limit: 50 })))}, by two statuses ${ms(await median(() => store.list({ status: ['failed', 'in_doubt'], offset: 0, limit: 50 })))}`);
  // Issue 18's searches: an order id's beginning in another case (the ten O-<probe/10>… ids) and a customer's phone.
  const prefix = `o-${Math.floor(probe / 10)}`;
  const phone = `phone:+1555${String(probe).padStart(7, '0')}`;
  console.log(`${name}: search by order id prefix "${prefix}" ${ms(await median(() => store.list({ orderId: prefix, offset: 0, limit: 50 })))}, by customer phone ${ms(await median(() => store.list({ customer: [phone], offset: 0, limit: 50 })))}`);
  console.log(`${name}: open records by status (the gauge) ${ms(await median(() => store.countOpenByStatus()))}`);
}

async function updates(store: PostgresLedgerStore, from: number): Promise<number> {
  const t0 = performance.now();
  for (let n = from; n < from + UPDATES; n++) {
    const current = (await store.get(`generic:O-${n}`))!;
    await store.update(nextVersion(current, { record: { ...current, history: [...current.history] }, event: 'bench' }, new Date()));
  }
  return (performance.now() - t0) / UPDATES;
}

const records = Array.from({ length: RECORDS }, (_, n) => recordOf(n));
console.log(`operators bench: ${RECORDS.toLocaleString('en-US')} records, median of ${RUNS} runs`);

const dir = mkdtempSync(join(tmpdir(), 'bench-operators-'));
try {
  const file = new FileLedgerStore(join(dir, 'ledger.json'));
  await file.init();
  for (const r of records) await file.insert(r);
  await reads('file', file);
  await file.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const base = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `bench_operators_${process.pid}`;
const admin = new pg.Client({ connectionString: base });
try {
  await admin.connect();
} catch (error) {
  console.log(`postgres: skipped, no database at ${base.replace(/\/\/[^@]*@/, '//***@')} (${(error as Error).message})`);
  process.exit(0);
}
const url = new URL(base);
url.searchParams.set('schema', schema);
const store = new PostgresLedgerStore(url.toString());
try {
  await store.init();
  for (let i = 0; i < records.length; i += 1000) await store.importRecords(records.slice(i, i + 1000));
  await store.pool.query('ANALYZE ledger_records');
  await reads('postgres', store);
  // Migration 9's record indexes this once compared with and without went with migration 10 (the
  // attention and work tables); an update's cost is printed alone, to compare across commits.
  console.log(`postgres: one record update ${ms(await updates(store, 0))} (${UPDATES} sequential updates)`);
} finally {
  await store.close();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
}
