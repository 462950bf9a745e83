/**
 * Part B of the benchmark: the file ledger (FileLedgerStore directly) at 1k / 10k / 100k records
 * (1M by hand: --ledger-sizes=1000,100000,1000000): per-write cost, start-up time, resident memory,
 * and the one-time build of its index from a full scan, each open in a fresh process
 * (bench/ledger-open.ts).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { FileLedgerStore, writeLedgerInBulk } from '../src/ledger/file-store.js';
import type { LedgerRecord } from '../src/state/record.js';
import { progress, removeDir, startChild, summarize, tempDir, waitForLine, type BenchPaths } from './lib.js';
import { accruedRecord } from './records.js';
import { figureTable, fmt, tableOf, times, verdict, type Figure } from './table.js';

/**
 * How part B builds each size's ledger: `insert` (store.insert, POPULATE_CONCURRENCY in flight: the
 * journal and the index written as the service writes them), `bulk` (the journal's lines written in
 * bulk in the store's own line format, `writeLedgerInBulk`, with no index: the first open builds it
 * from a full scan, which is timed), or `auto`: bulk above 100k records (a million inserts one by
 * one take minutes; the bulk ledger is the same lines).
 */
export type LedgerBuild = 'auto' | 'insert' | 'bulk';

export interface LedgerPartOptions extends BenchPaths {
  sizes: number[];
  /** Measured inserts, updates and gets per size. */
  writes: number;
  build: LedgerBuild;
  out: (line?: string) => void;
  gc?: () => void;
}

const buildOf = (o: LedgerPartOptions, size: number): 'insert' | 'bulk' => (o.build === 'auto' ? (size > 100_000 ? 'bulk' : 'insert') : o.build);

/** What ledger-open.ts reports of one open in a fresh process. */
interface OpenFigures {
  count: number;
  initMs: number;
  index?: { mode: string; reason?: string; linesRead: number };
  indexMb: number;
  rssMb: number;
  baselineRssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  gcExposed: boolean;
}

interface LedgerRow {
  size: number;
  build: 'insert' | 'bulk';
  populateSeconds: number;
  recordBytes: number;
  /** The index built from a full scan of the journal, in a fresh process: a bulk ledger's first open; for an inserted one, with its index file removed. */
  indexBuild?: OpenFigures;
  insert: ReturnType<typeof summarize>;
  update: ReturnType<typeof summarize>;
  get: ReturnType<typeof summarize>;
  /** An ordinary start-up (the index there and trusted), in a fresh process. */
  open?: OpenFigures;
}

const POPULATE_CONCURRENCY = 32;
const WRITE_WARMUP = 200;

/** Deterministic pseudo-random sequence, so every size updates records spread over the whole ledger. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Opens the ledger in a fresh `node --expose-gc` process (ledger-open.ts) and answers what it reports. */
async function openInChild(o: LedgerPartOptions, manifestPath: string): Promise<OpenFigures> {
  const child = startChild(process.execPath, ['--expose-gc', join(o.here, 'ledger-open.js'), manifestPath], { cwd: o.projectRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  const line = await waitForLine(child, /LEDGER_OPEN=(\{.*\})/, 3_600_000);
  await child.exited;
  return JSON.parse(line[1]!) as OpenFigures;
}

async function ledgerSize(o: LedgerPartOptions, size: number): Promise<LedgerRow> {
  const dir = tempDir(`bench-ledger-${size}-`);
  const orderId = (n: number) => `L-${n}`;
  const build = buildOf(o, size);
  try {
    const path = join(dir, 'ledger.json');
    let populateSeconds: number;
    let recordBytes: number;
    let indexBuild: OpenFigures | undefined;
    if (build === 'bulk') {
      progress(`ledger ${size}: writing the journal in bulk (the store's line format, no index)`);
      const t0 = performance.now();
      function* records(): Generator<LedgerRecord> {
        for (let n = 0; n < size; n++) {
          if (n > 0 && n % 100_000 === 0) progress(`ledger ${size}: ${n}/${size} lines (${fmt((n / (performance.now() - t0)) * 1000, 0)}/s)`);
          yield accruedRecord(orderId(n), n);
        }
      }
      const written = writeLedgerInBulk(path, records());
      populateSeconds = (performance.now() - t0) / 1000;
      recordBytes = Math.round(written.bytes / size);
      progress(`ledger ${size}: ${written.segments} segments, ${fmt(written.bytes / 2 ** 20, 0)} MiB in ${fmt(populateSeconds, 1)} s; first open (builds the index from a full scan) in a fresh process`);
      indexBuild = await openInChild(o, path);
    } else {
      const store = new FileLedgerStore(path);
      await store.init();
      progress(`ledger ${size}: populating (${POPULATE_CONCURRENCY} inserts in flight)`);
      const t0 = performance.now();
      let next = 0;
      let done = 0;
      let lastReport = performance.now();
      await Promise.all(
        Array.from({ length: POPULATE_CONCURRENCY }, async () => {
          for (;;) {
            const n = next++;
            if (n >= size) return;
            await store.insert(accruedRecord(orderId(n), n));
            done++;
            if (performance.now() - lastReport > 5000) {
              lastReport = performance.now();
              progress(`ledger ${size}: ${done}/${size} records (${fmt((done / (performance.now() - t0)) * 1000, 0)}/s)`);
            }
          }
        }),
      );
      populateSeconds = (performance.now() - t0) / 1000;
      // Bytes per record in the journal: one line (header, tab, compact JSON body) for each live record.
      recordBytes = Math.round(store.journalStats().liveBytes / size);
      await store.close();
      progress(`ledger ${size}: populated in ${fmt(populateSeconds, 1)} s; index removed and rebuilt from a full scan in a fresh process`);
      for (const suffix of ['', '-wal', '-shm']) await rm(`${store.indexPath}${suffix}`, { force: true });
      indexBuild = await openInChild(o, path);
    }

    progress(`ledger ${size}: measuring writes`);
    const store = new FileLedgerStore(path);
    await store.init();
    // Writes, one at a time (each awaited), as a single checkout would see them.
    const versions = new Map<number, number>();
    const random = lcg(size);
    let fresh = size;
    const time = async (fn: () => Promise<unknown>) => {
      const s = performance.now();
      await fn();
      return (performance.now() - s) * 1000; // µs
    };
    const insertOnce = () => {
      const n = fresh++;
      const record = accruedRecord(orderId(n), n);
      return time(() => store.insert(record));
    };
    const updateOnce = () => {
      const n = Math.floor(random() * size);
      const version = (versions.get(n) ?? 1) + 1;
      versions.set(n, version);
      const record: LedgerRecord = accruedRecord(orderId(n), n, version);
      record.updatedAt = new Date().toISOString();
      record.history.push({ at: record.updatedAt, event: 'benchmark update' });
      return time(() => store.update(record));
    };
    const getOnce = () => {
      const n = Math.floor(random() * size);
      const id = accruedRecord(orderId(n), n).transactionId;
      return time(() => store.get(id));
    };
    for (let i = 0; i < WRITE_WARMUP; i++) {
      await insertOnce();
      await updateOnce();
      await getOnce();
    }
    o.gc?.();
    const inserts: number[] = [];
    const updates: number[] = [];
    const gets: number[] = [];
    for (let i = 0; i < o.writes; i++) inserts.push(await insertOnce());
    for (let i = 0; i < o.writes; i++) updates.push(await updateOnce());
    for (let i = 0; i < o.writes; i++) gets.push(await getOnce());
    await store.close();

    progress(`ledger ${size}: opening it in a fresh process (start-up time, RSS)`);
    const open = await openInChild(o, path);
    return { size, build, populateSeconds, recordBytes, indexBuild, insert: summarize(inserts), update: summarize(updates), get: summarize(gets), open };
  } finally {
    progress(`ledger ${size}: removing ${dir}`);
    await removeDir(dir);
  }
}

/** JIT warm-up on a scratch ledger, so the first size measured does not pay for compilation. */
async function ledgerWarmup(): Promise<void> {
  const dir = tempDir('bench-ledger-warmup-');
  try {
    progress('ledger: warm-up on a scratch ledger');
    const store = new FileLedgerStore(join(dir, 'ledger.json'));
    await store.init();
    for (let n = 0; n < 1000; n++) {
      await store.insert(accruedRecord(`W-${n}`, n));
      await store.update(accruedRecord(`W-${n}`, n, 2));
      await store.get(accruedRecord(`W-${n}`, n).transactionId);
    }
    await store.close();
  } finally {
    await removeDir(dir);
  }
}

export async function ledgerPart(o: LedgerPartOptions): Promise<void> {
  const out = o.out;
  await ledgerWarmup();
  const rows: LedgerRow[] = [];
  for (const size of o.sizes) rows.push(await ledgerSize(o, size));

  out(`B. File ledger (FileLedgerStore directly; fresh temp folder per size; ${o.writes} sequential inserts, updates and gets per size after ${WRITE_WARMUP} warm-up each)`);
  out('   record = an accrued generic checkout as the service stores it (2 selections, customer, 1 attempt with request and answer, 2 history events);');
  out(`   built by: insert = store.insert, ${POPULATE_CONCURRENCY} in flight (records at version 1); bulk = the same records' journal lines written in bulk`);
  out('   in the store\'s own line format (writeLedgerInBulk), no index, then opened once to build it (--ledger-build=auto|insert|bulk; auto: bulk above 100k).');
  out('   index build = an open that builds the index from a full scan of the journal (a bulk ledger\'s first open; an inserted one\'s with its index removed);');
  out('   start-up = an ordinary open (index there and trusted); both in a fresh `node --expose-gc` process that only opens the store, then gc() twice; page cache warm.');
  out();
  out(
    tableOf(rows, [
      ['records', (r) => String(r.size)],
      ['built by', (r) => r.build],
      ['build s', (r) => fmt(r.populateSeconds, 1)],
      ['bytes/rec', (r) => String(r.recordBytes)],
      ['insert mean µs', (r) => fmt(r.insert.mean, 0)],
      ['insert p99 µs', (r) => fmt(r.insert.p99, 0)],
      ['update mean µs', (r) => fmt(r.update.mean, 0)],
      ['update p99 µs', (r) => fmt(r.update.p99, 0)],
      ['get mean µs', (r) => fmt(r.get.mean, 0)],
      ['index build s', (r) => fmt(r.indexBuild && r.indexBuild.initMs / 1000, 1)],
      ['start-up ms', (r) => fmt(r.open?.initMs, 0)],
      ['lines read', (r) => String(r.open?.index?.linesRead ?? '-')],
      ['RSS MB', (r) => fmt(r.open?.rssMb, 1)],
      ['(empty proc RSS MB)', (r) => fmt(r.open?.baselineRssMb, 1)],
      ['heap used/total MB', (r) => `${fmt(r.open?.heapUsedMb, 1)}/${fmt(r.open?.heapTotalMb, 1)}`],
      ['index MB', (r) => fmt(r.open?.indexMb, 0)],
    ]),
  );
  for (const r of rows) {
    if (r.open?.index?.mode !== 'trusted') out(`   note: the ${r.size}-record start-up was ${r.open?.index?.mode ?? 'unknown'} (${r.open?.index?.reason ?? 'no reason given'}), not trusted`);
    if (r.indexBuild?.index?.mode !== 'rebuilt') out(`   note: the ${r.size}-record index build was ${r.indexBuild?.index?.mode ?? 'unknown'}, not a rebuild`);
  }
  if (rows.some((r) => r.open && !r.open.gcExposed)) out('   note: gc() was not exposed in the child; RSS includes uncollected garbage');
  out();

  const small = rows.reduce((a, b) => (b.size < a.size ? b : a));
  const large = rows.reduce((a, b) => (b.size > a.size ? b : a));
  const label = (n: number) => (n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n % 1000 === 0 ? `${n / 1000}k` : String(n));
  const figures: Figure[] = [];
  if (large.size > small.size) {
    const writeMean = (r: LedgerRow) => (r.insert.mean + r.update.mean) / 2;
    const ratio = writeMean(large) / writeMean(small);
    const per = (what: string, of: LedgerRow) => `${what} ${label(large.size)}/${label(of.size)}`;
    figures.push([`${per('per-write cost', small)} (mean of insert and update means)`, times(ratio), '≤ 2× (flat)', ratio <= 2]);
    for (const middle of rows.filter((r) => r.size > small.size && r.size < large.size)) figures.push([`  ${per('per-write cost', middle)} (same measure)`, times(writeMean(large) / writeMean(middle))]);
    figures.push([`  ${per('insert mean', small)}`, times(large.insert.mean / small.insert.mean)]);
    figures.push([`  ${per('update mean', small)}`, times(large.update.mean / small.update.mean)]);
    figures.push([`  ${per('insert p99', small)}`, times(large.insert.p99 / small.insert.p99)]);
    figures.push([`  ${per('update p99', small)}`, times(large.update.p99 / small.update.p99)]);
  }
  if (large.open) {
    const atAim = large.size >= 1_000_000;
    const status = (met: boolean) => (atAim ? met : `n/a (the aim is at 1M; ${verdict(met)} at ${label(large.size)})`);
    figures.push([`RSS with ${label(large.size)} records open`, `${fmt(large.open.rssMb, 1)} MB`, '≤ 256 MB at 1M', status(large.open.rssMb <= 256)]);
    figures.push([`start-up (init) with ${label(large.size)} records`, `${fmt(large.open.initMs / 1000, 2)} s`, '≤ 3 s at 1M', status(large.open.initMs <= 3000)]);
  }
  if (large.indexBuild) figures.push([`one-time index build with ${label(large.size)} records (full scan)`, `${fmt(large.indexBuild.initMs / 1000, 1)} s`]);
  if (figures.length) out(figureTable(figures, { aim: 'target' }));
  out();
}
