/**
 * The file ledger after an operating-system crash or power loss: the journal does not fsync, so a
 * segment can come back with a zero-filled or garbled block in the middle. Start-up skips what it
 * cannot read, keeps every readable line before and after it, reports the damage, keeps a copy of
 * the damaged segment, and leaves the segment as found until `compactDamaged`.
 */
import { mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { makeRecord } from './contracts/factories.js';

interface JournalLine {
  offset: number;
  length: number;
  header: { k: string; id?: string; v?: number };
  body: string;
}

const IDS = Array.from({ length: 30 }, (_, i) => `generic:R-${i}`);

let dir: string;
let path: string;
let segment1: string;
let store: FileLedgerStore | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ledger-journal-recovery-'));
  path = join(dir, 'ledger.json');
  segment1 = join(dir, 'ledger.journal', '000001.jsonl');
  store = undefined;
});
afterEach(async () => {
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

async function openAt(): Promise<FileLedgerStore> {
  const s = new FileLedgerStore(path);
  await s.init();
  return s;
}

function nextVersion(record: LedgerRecord, event: string): LedgerRecord {
  return { ...record, version: record.version + 1, updatedAt: new Date().toISOString(), history: [...record.history, { at: new Date().toISOString(), event }] };
}

/** 30 records of one to four versions, some versions far from the others, and webhook events between. */
async function populate(s: FileLedgerStore): Promise<void> {
  for (const [i, id] of IDS.entries()) {
    let record = makeRecord(id, { at: i });
    await s.insert(record);
    for (let v = 0; v < i % 3; v++) record = await s.update(nextVersion(record, `step ${v}`));
    if (i % 5 === 0) await s.rememberWebhookEvent('square', `evt-${i}`);
  }
  for (const id of IDS.filter((_, i) => i % 4 === 0)) await s.update(nextVersion((await s.get(id))!, 'later step'));
}

function parseJournal(bytes: Buffer): JournalLine[] {
  const lines: JournalLine[] = [];
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0x0a, start);
    const text = bytes.toString('utf8', start, end);
    const tab = text.indexOf('\t');
    lines.push({ offset: start, length: end + 1 - start, header: JSON.parse(text.slice(0, tab)), body: text.slice(tab + 1) });
    start = end + 1;
  }
  return lines;
}

/** Each record's latest version among the lines that lie wholly outside `[from, to)`. */
function survivors(lines: JournalLine[], from: number, to: number): Map<string, LedgerRecord> {
  const latest = new Map<string, LedgerRecord>();
  for (const line of lines) {
    if (line.header.k !== 'r' || !(line.offset + line.length <= from || line.offset >= to)) continue;
    const record = JSON.parse(line.body) as LedgerRecord;
    if ((latest.get(record.transactionId)?.version ?? 0) < record.version) latest.set(record.transactionId, record);
  }
  return latest;
}

async function overwrite(file: string, offset: number, bytes: Buffer): Promise<void> {
  const handle = await open(file, 'r+');
  await handle.write(bytes, 0, bytes.length, offset);
  await handle.close();
}

/** Garbage as a failing disk returns it: every byte value, newlines and tabs included (seeded, so reproducible). */
function garbage(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let x = 0x2545f491;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

async function expectRecords(s: FileLedgerStore, expected: Map<string, LedgerRecord>): Promise<void> {
  for (const id of new Set([...IDS, ...expected.keys()])) expect([id, await s.get(id)]).toEqual([id, expected.get(id)]);
  expect(await s.count()).toBe(expected.size);
}

async function journalFiles(): Promise<string[]> {
  return (await readdir(join(dir, 'ledger.journal'))).sort();
}

/** Writes the 30 records, closes the ledger, and answers the journal's lines as written. */
async function writtenJournal(): Promise<{ bytes: Buffer; lines: JournalLine[] }> {
  store = await openAt();
  await populate(store);
  await store.close();
  store = undefined;
  const bytes = await readFile(segment1);
  return { bytes, lines: parseJournal(bytes) };
}

function lineAt(lines: JournalLine[], offset: number): JournalLine {
  return lines.find((l) => l.offset <= offset && offset < l.offset + l.length)!;
}

describe('a zero-filled block in the middle of a segment', () => {
  it('is skipped and reported; every readable line before and after it is kept; writes and restarts go on', async () => {
    const { lines } = await writtenJournal();
    // A 4 KiB block starting and ending inside lines, as a page the OS never wrote comes back.
    const from = lines[20]!.offset + 7;
    const to = from + 4096;
    await overwrite(segment1, from, Buffer.alloc(4096));
    const damaged = await readFile(segment1);
    const expected = survivors(lines, from, to);
    expect(expected.size).toBeGreaterThan(20);

    store = await openAt();
    await expectRecords(store, expected);
    // Without newlines, the zeros and the broken lines on both sides are one unreadable line.
    const first = lineAt(lines, from);
    const last = lineAt(lines, to - 1);
    expect(store.recovery).toEqual({ corruptLines: 1, bytes: last.offset + last.length - first.offset, segments: [1], copies: [expect.stringMatching(/000001\.jsonl\.corrupt-/)], machineRestarted: false, staleLines: 0 });
    const copy = store.recovery!.copies[0]!;
    expect(await readFile(copy)).toEqual(damaged);
    expect((await stat(copy)).mode & 0o777).toBe(0o600); // it holds the same customers' records
    // The damaged segment is sealed as found; writes go to a new one.
    expect(await journalFiles()).toEqual(['000001.jsonl', copy.split('/').pop(), '000002.jsonl']);
    expect(await readFile(segment1)).toEqual(damaged);

    const changed = await store.update(nextVersion((await store.get(IDS[1]!))!, 'after the crash'));
    const added = makeRecord('generic:new');
    await store.insert(added);
    await store.close();

    // Not compacted yet (the service has not acted on it): found again, with the same copy.
    store = await openAt();
    expect(store.recovery).toEqual({ corruptLines: 1, bytes: last.offset + last.length - first.offset, segments: [1], copies: [copy], machineRestarted: false, staleLines: 0 });
    expect(await store.get(IDS[1]!)).toEqual(changed);
    expect(await store.get('generic:new')).toBeDefined();

    await store.compactDamaged();
    expect(await journalFiles()).toEqual([copy.split('/').pop(), '000002.jsonl']);
    await store.close();

    store = await openAt();
    expect(store.recovery).toBeUndefined();
    await expectRecords(store, new Map([...expected, [IDS[1]!, changed], [added.transactionId, added]]));
    expect(await readFile(copy)).toEqual(damaged);
  });

  it('that ends where a line begins: that line is kept', async () => {
    const { lines } = await writtenJournal();
    const from = lines[12]!.offset;
    const to = lines[16]!.offset;
    await overwrite(segment1, from, Buffer.alloc(to - from));

    store = await openAt();
    await expectRecords(store, survivors(lines, from, to));
    expect(store.recovery).toMatchObject({ corruptLines: 1, bytes: to - from });
    // lines[16] follows the zeros on the same "line" as the scanner first sees it.
    const kept = lines[16]!.header;
    if (kept.k === 'r') expect((await store.get(kept.id!))!.version).toBeGreaterThanOrEqual(kept.v!);
  });

  it('larger than the 1 MiB reads start-up makes: the lines after it are still found', async () => {
    store = await openAt();
    const ids = Array.from({ length: 1200 }, (_, i) => `generic:big-${i}`);
    for (const id of ids) await store.insert({ ...makeRecord(id), history: [{ at: new Date().toISOString(), event: 'x'.repeat(2000) }] });
    await store.close();
    store = undefined;
    const lines = parseJournal(await readFile(segment1));
    const from = 700_000;
    const to = from + 1_500_000;
    await overwrite(segment1, from, Buffer.alloc(to - from));

    store = await openAt();
    const expected = survivors(lines, from, to);
    for (const id of ids) expect([id, (await store.get(id))?.version]).toEqual([id, expected.get(id)?.version]);
    expect(await store.count()).toBe(expected.size);
    expect(store.recovery).toMatchObject({ corruptLines: 1, segments: [1] });
  });

  it('at the end of the last segment is damage, not a torn write: nothing is cut, appends go elsewhere', async () => {
    const { bytes, lines } = await writtenJournal();
    await writeFile(segment1, Buffer.alloc(8192), { flag: 'a' });

    store = await openAt();
    await expectRecords(store, survivors(lines, bytes.length, Infinity));
    expect(store.recovery).toMatchObject({ corruptLines: 1, bytes: 8192, segments: [1] });
    expect((await readFile(segment1)).length).toBe(bytes.length + 8192);
    await store.insert(makeRecord('generic:new'));
    expect(store.journalStats().segments).toBe(2);
  });
});

describe('garbled bytes in the middle of a segment', () => {
  it('are skipped line by line; every readable line before and after them is kept', async () => {
    const { lines } = await writtenJournal();
    const from = lines[25]!.offset + 100;
    const to = from + 3000;
    const noise = garbage(3000);
    await overwrite(segment1, from, noise);

    store = await openAt();
    await expectRecords(store, survivors(lines, from, to));
    const last = lineAt(lines, to - 1);
    expect(store.recovery!.bytes).toBe(last.offset + last.length - lineAt(lines, from).offset);
    // One unreadable line per newline in the noise, plus the one it ends in.
    expect(store.recovery!.corruptLines).toBe(noise.filter((b) => b === 0x0a).length + 1);
    await store.insert(makeRecord('generic:new'));
    await store.close();
    store = await openAt();
    expect(await store.get('generic:new')).toBeDefined();
  });

  it.each<[string, (line: Buffer) => void]>([
    ['a header that is not JSON', (line) => (line[3] = 0x21)],
    ['a header of the wrong shape', (line) => line.write('"x"', 5)],
    ['a line without a tab', (line) => (line[line.indexOf(0x09)] = 0x20)],
  ])('%s: that line is skipped, the record keeps its previous version', async (_what, spoil) => {
    const { bytes, lines } = await writtenJournal();
    // A later version of a record, so that an earlier version remains.
    const target = lines.filter((l) => l.header.k === 'r' && l.header.v! > 1)[5]!;
    const line = Buffer.from(bytes.subarray(target.offset, target.offset + target.length));
    spoil(line);
    await overwrite(segment1, target.offset, line);

    store = await openAt();
    const expected = survivors(lines, target.offset, target.offset + target.length);
    expect(expected.get(target.header.id!)!.version).toBe(target.header.v! - 1);
    await expectRecords(store, expected);
    expect(store.recovery).toMatchObject({ corruptLines: 1, bytes: target.length });
  });
});

describe('torn lines', () => {
  it('a torn last line of the last segment is cut off quietly, as after a kill', async () => {
    const { bytes, lines } = await writtenJournal();
    await writeFile(segment1, '{"k":"r","id":"generic:R-3","v":9,"s":"accr', { flag: 'a' });

    store = await openAt();
    expect(store.recovery).toBeUndefined();
    await expectRecords(store, survivors(lines, bytes.length, Infinity));
    expect(await readFile(segment1)).toEqual(bytes);
    expect(await journalFiles()).toEqual(['000001.jsonl']);
  });

  it('a torn last line of a sealed segment is damage (only a crashed OS loses a sealed segment’s end)', async () => {
    const { bytes, lines } = await writtenJournal();
    await writeFile(segment1, '{"k":"r","id":"generic:R-3","v":9,"s":"accr', { flag: 'a' });
    const manifest = JSON.parse(await readFile(path, 'utf8'));
    await writeFile(path, JSON.stringify({ ...manifest, segments: [1, 2] }));

    store = await openAt();
    await expectRecords(store, survivors(lines, bytes.length, Infinity));
    expect(store.recovery).toMatchObject({ corruptLines: 1, segments: [1] });
    await store.compactDamaged();
    await store.close();
    store = await openAt();
    expect(store.recovery).toBeUndefined();
    await expectRecords(store, survivors(lines, bytes.length, Infinity));
  });
});

describe('a stale block: whole, readable lines of an older version after a newer one', () => {
  it('is skipped and reported: no record rolls back', async () => {
    const { bytes, lines } = await writtenJournal();
    const latest = survivors(lines, 0, 0);
    // A record with several versions: its first line comes back at the end of the segment, as a
    // block of an older file a crashed filesystem handed back would.
    const target = lines.find((l) => l.header.k === 'r' && (latest.get(l.header.id!)?.version ?? 0) > 1 && l.header.v === 1)!;
    await overwrite(segment1, bytes.length, bytes.subarray(target.offset, target.offset + target.length));
    store = await openAt();
    expect(store.recovery).toMatchObject({ corruptLines: 0, staleLines: 1, machineRestarted: false });
    await expectRecords(store, latest);
  });
});
