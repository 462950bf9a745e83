/**
 * Child of the benchmark: opens an existing file ledger in a fresh process and reports how long
 * `init()` took, how it came by its index (trusted, caught up, or rebuilt from a full scan of the
 * journal, and how many journal lines it read), and the process's resident memory once it is open
 * (after a full GC), beside the empty process's.
 *   node --expose-gc dist/bench/ledger-open.js <manifest path>
 * Prints one line: `LEDGER_OPEN=<json>`.
 */
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { FileLedgerStore } from '../src/ledger/file-store.js';

const gc = (globalThis as { gc?: () => void }).gc;
const settle = async () => {
  // Two passes with a turn of the event loop between them so weak/finalizable garbage goes too.
  gc?.();
  await new Promise((r) => setImmediate(r));
  gc?.();
};
const mb = (bytes: number) => bytes / (1024 * 1024);

const path = process.argv[2];
if (!path) throw new Error('usage: ledger-open.js <manifest path>');

await settle();
const before = process.memoryUsage();
const store = new FileLedgerStore(path);
const t0 = performance.now();
await store.init();
const initMs = performance.now() - t0;
const startup = store.indexStartup;
await settle();
const after = process.memoryUsage();
// Counted after the measurement: `count` reads what the ledger holds (through SQLite's page cache), start-up does not.
const count = await store.count();
const indexMb = mb(statSync(store.indexPath).size);
await store.close();
process.stdout.write(
  `LEDGER_OPEN=${JSON.stringify({
    count,
    initMs,
    index: startup ? { mode: startup.mode, reason: startup.reason, linesRead: startup.linesRead } : undefined,
    indexMb,
    gcExposed: gc !== undefined,
    baselineRssMb: mb(before.rss),
    rssMb: mb(after.rss),
    heapUsedMb: mb(after.heapUsed),
    heapTotalMb: mb(after.heapTotal),
    externalMb: mb(after.external),
    baselineHeapUsedMb: mb(before.heapUsed),
  })}\n`,
);
