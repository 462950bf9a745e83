import { spawn } from 'node:child_process';
import { existsSync, statSync, utimesSync, writeSync } from 'node:fs';
import { chmod, cp, mkdtemp, open, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { DatabaseSync } from '@photostructure/sqlite';
import { FileLedgerStore, writeLedgerInBulk } from '../../src/ledger/file-store.js';
import { currentBootId } from '../../src/ledger/process-lock.js';
import { openStore } from '../../src/ledger/open-store.js';
import { isOpen, keyOf, type LedgerRecord } from '../../src/state/record.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { ledgerStoreContract } from './store-contract.js';
import { makeLetter, makeMerchant, makeRecord, minutes, nextVersion, settle } from './contracts/factories.js';

/** Whether a process with this pid runs (signal 0 checks without sending anything). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Permission bits of every file and folder under `dir`, as `name: 0oNNN` lines. */
async function modesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).sort().map((entry) => `${entry}: 0o${(statSync(join(dir, entry)).mode & 0o777).toString(8)}`);
}

async function freshDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'ledger-file-store-'));
}

async function openAt(path: string): Promise<FileLedgerStore> {
  const store = new FileLedgerStore(path);
  await store.init();
  return store;
}

ledgerStoreContract('FileLedgerStore', async () => {
  const dir = await freshDir();
  const path = join(dir, 'ledger.json');
  let current: LedgerStore = await openAt(path);
  return {
    store: current,
    async reopen() {
      await current.close();
      current = await openAt(path);
      return current;
    },
    async cleanup() {
      await current.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('FileLedgerStore on disk', () => {
  let dir: string;
  let path: string;
  let store: FileLedgerStore | undefined;

  beforeEach(async () => {
    dir = await freshDir();
    path = join(dir, 'ledger.json');
    store = undefined;
  });
  afterEach(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lays out a lowdb JSON manifest and an append-only journal of header-tab-body lines', async () => {
    store = await openAt(path);
    expect(store.manifestPath).toBe(path);
    expect(store.journalDir).toBe(join(dir, 'ledger.journal'));
    const manifest = JSON.parse(await readFile(path, 'utf8'));
    expect(manifest).toEqual({ format: 'loyalty-bridge/ledger', formatVersion: 2, createdAt: expect.any(String), segments: [1], searchKey: expect.stringMatching(/^[\w-]{43}$/) });

    const records = ['generic:A-1', 'square:ORDER/2', 'shopify:3 with spaces', '../../escape'].map((id, i) => makeRecord(id, { at: i }));
    for (const r of records) await store.insert(r);
    await store.update(settle(records[0]!));
    // The index beside the journal, and its write-ahead log while the store is open (see file-index.ts).
    expect((await readdir(dir)).sort()).toEqual(['ledger.dead-letters', 'ledger.index.sqlite', 'ledger.index.sqlite-wal', 'ledger.journal', 'ledger.json', 'ledger.json.lock', 'ledger.merchants']);
    expect((await readFile(`${path}.lock`, 'utf8')).split('\n')[0]).toBe(String(process.pid));
    expect(await readdir(store.journalDir)).toEqual(['000001.jsonl']);

    const lines = (await readFile(join(store.journalDir, '000001.jsonl'), 'utf8')).split('\n').filter(Boolean);
    expect(lines).toHaveLength(5);
    const [header, body] = lines[4]!.split('\t');
    expect(JSON.parse(header!)).toMatchObject({ k: 'r', id: 'generic:A-1', v: 2 });
    expect(JSON.parse(body!)).toEqual(await store.get('generic:A-1'));
    // Five versions written, four live: the superseded first version of generic:A-1 is garbage.
    expect(store.journalStats().liveBytes).toBeLessThan(store.journalStats().bytes);
  });

  it('keeps the manifest of an existing ledger across restarts', async () => {
    store = await openAt(path);
    const first = await readFile(path, 'utf8');
    await store.close();
    store = await openAt(path);
    expect(await readFile(path, 'utf8')).toBe(first);
  });

  it('is chosen by openStore for file: URLs', async () => {
    const s = openStore(`file:${path}`);
    expect(s).toBeInstanceOf(FileLedgerStore);
    expect((s as FileLedgerStore).manifestPath).toBe(path);
    expect(FileLedgerStore.fromUrl(`file://${path}`).manifestPath).toBe(path);
    expect(() => openStore('mysql://x')).toThrow(/not supported/);
  });

  it('cuts off a line torn by a crash at start-up and keeps working on top of it', async () => {
    store = await openAt(path);
    const kept = makeRecord('generic:kept', { accrual: 'pending', operationIds: [11] });
    await store.insert(kept);
    await store.close();
    const segment = join(dir, 'ledger.journal', '000001.jsonl');
    const intact = (await readFile(segment)).length;
    // A crash in the middle of writing the next version leaves a line without its newline.
    await writeFile(segment, '{"k":"r","id":"generic:kept","v":2,"s":"accr', { flag: 'a' });

    store = await openAt(path);
    expect((await readFile(segment)).length).toBe(intact);
    expect(await store.count()).toBe(1);
    expect(await store.get('generic:kept')).toEqual(kept);
    expect((await store.listOpen({ limit: 10 })).map((r) => r.transactionId)).toEqual(['generic:kept']);
    expect(await store.findOperationClaim('default', 11)).toBe('generic:kept');
    const updated = await store.update(settle(kept));
    await store.close();
    store = await openAt(path);
    expect(await store.get('generic:kept')).toEqual(updated);
  });

  it('loads lines written before due times (no `d` in the header), deriving due times from the open records', async () => {
    store = await openAt(path);
    await store.close();
    const records = [
      makeRecord('generic:reversal-in-doubt', { at: 0, accrual: 'accrued', reversal: 'in_doubt' }),
      makeRecord('generic:accrual-in-doubt', { at: 1, accrual: 'in_doubt', nextAttemptAt: 20 }),
      makeRecord('generic:next-round-later', { at: 2, accrual: 'pending', nextAttemptAt: 5000 }),
      makeRecord('generic:due', { at: 3, accrual: 'pending' }),
      makeRecord('generic:settled', { at: 4, accrual: 'accrued' }),
    ];
    const earlierLine = (r: LedgerRecord) =>
      `${JSON.stringify({ k: 'r', id: r.transactionId, v: r.version, s: r.status, p: r.pos, c: Date.parse(r.createdAt), o: isOpen(r) ? 1 : 0 })}\t${JSON.stringify(r)}\n`;
    const segment = join(dir, 'ledger.journal', '000001.jsonl');
    await writeFile(segment, records.map(earlierLine).join(''));

    store = await openAt(path);
    const due = async (at: number, canVerify = true) => (await store!.listDue({ nowMs: Date.parse(minutes(at)), limit: 500, canVerify })).map((r) => r.transactionId);
    // A reversal in doubt is looked for in the history (by the merchant's learned reversal shape) where it can be read.
    expect(await due(10)).toEqual(['generic:reversal-in-doubt', 'generic:due']);
    expect(await due(100)).toEqual(['generic:reversal-in-doubt', 'generic:due', 'generic:accrual-in-doubt']);
    expect(await due(100, false)).toEqual(['generic:due']);
    expect(await due(5000)).toEqual(['generic:reversal-in-doubt', 'generic:due', 'generic:accrual-in-doubt', 'generic:next-round-later']);
    expect((await store.listOpen({ limit: 10 })).map((r) => r.transactionId)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:next-round-later', 'generic:due']);

    // Written again by this build, a record's line carries its due time, which the next start-up reads.
    await store.update(nextVersion(records[3]!, (r) => (r.nextAttemptAt = minutes(6000))));
    await store.update(nextVersion(records[1]!));
    const lines = (await readFile(segment, 'utf8')).split('\n').filter(Boolean);
    expect(JSON.parse(lines.at(-2)!.split('\t')[0]!)).toMatchObject({ id: 'generic:due', o: 1, d: Date.parse(minutes(6000)) });
    expect(JSON.parse(lines.at(-1)!.split('\t')[0]!)).toMatchObject({ id: 'generic:accrual-in-doubt', o: 1, d: Date.parse(minutes(20)), dv: 1 });
    await store.close();
    store = await openAt(path);
    expect(await due(5000)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:next-round-later']);
    expect(await due(6000)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:next-round-later', 'generic:due']);
  });

  it('compacts superseded versions at start-up, keeping every record', async () => {
    store = await openAt(path);
    const ids = Array.from({ length: 300 }, (_, i) => `generic:C-${i}`);
    for (const id of ids) {
      let record = makeRecord(id, { accrual: 'pending' });
      await store.insert(record);
      for (let v = 0; v < 6; v++) record = await store.update({ ...record, version: record.version + 1, history: [...record.history, { at: new Date().toISOString(), event: 'x'.repeat(200) }] });
    }
    const before = store.journalStats();
    expect(before.bytes).toBeGreaterThan(1024 * 1024);
    const snapshot = await Promise.all(ids.map((id) => store!.get(id)));
    await store.close();

    store = await openAt(path);
    const after = store.journalStats();
    expect(after.bytes).toBeLessThan(before.bytes / 2);
    expect(after.liveBytes).toBe(after.bytes);
    expect(await Promise.all(ids.map((id) => store!.get(id)))).toEqual(snapshot);
    expect(await readdir(join(dir, 'ledger.journal'))).toEqual(['000002.jsonl']);
    await store.close();
    store = await openAt(path);
    expect(await Promise.all(ids.map((id) => store!.get(id)))).toEqual(snapshot);
  });

  it('remembers processed webhook events across restarts', async () => {
    store = await openAt(path);
    expect(await store.rememberWebhookEvent('square', 'evt-1')).toBe(true);
    expect(await store.rememberWebhookEvent('square', 'evt-1')).toBe(false);
    expect(await store.hasWebhookEvent('shopify', 'evt-1')).toBe(false);
    await store.close();
    store = await openAt(path);
    expect(await store.hasWebhookEvent('square', 'evt-1')).toBe(true);
    expect(await store.rememberWebhookEvent('square', 'evt-1')).toBe(false);
  });

  it('opens a segment the manifest lists but a crash kept from being created', async () => {
    store = await openAt(path);
    await store.insert(makeRecord('generic:one'));
    await store.close();
    const manifest = JSON.parse(await readFile(path, 'utf8'));
    await writeFile(path, JSON.stringify({ ...manifest, segments: [1, 2] }));
    store = await openAt(path);
    expect(await store.get('generic:one')).toBeDefined();
    await store.insert(makeRecord('generic:two'));
    await store.close();
    store = await openAt(path);
    expect(await store.count()).toBe(2);
    expect((await readdir(join(dir, 'ledger.journal'))).sort()).toEqual(['000001.jsonl', '000002.jsonl']);
  });

  it('removes a segment file the manifest does not list (left by a crash while compacting)', async () => {
    store = await openAt(path);
    await store.insert(makeRecord('generic:one'));
    await store.close();
    await writeFile(join(dir, 'ledger.journal', '000007.jsonl'), '{"k":"r","id":"generic:ghost","v":1,"s":"pending","p":"generic","c":0,"o":1}\t{}\n');
    store = await openAt(path);
    expect(await store.get('generic:ghost')).toBeUndefined();
    expect(await readdir(join(dir, 'ledger.journal'))).toEqual(['000001.jsonl']);
  });

  describe('refuses to start on a manifest it does not own', () => {
    const cases: [string, string][] = [
      ['another format', JSON.stringify({ format: 'someone-else/db', formatVersion: 1 })],
      ['a plain lowdb database', JSON.stringify({ posts: [], users: [] })],
      ['a JSON array', '[]'],
      ['a newer format version of the ledger', JSON.stringify({ format: 'loyalty-bridge/ledger', formatVersion: 3, createdAt: '2026-01-01T00:00:00.000Z', segments: [1] })],
      ['the per-record-file format of earlier builds', JSON.stringify({ format: 'loyalty-bridge/ledger', formatVersion: 1, createdAt: '2026-01-01T00:00:00.000Z' })],
      ['text that is not JSON', 'this is not json\n'],
    ];
    for (const [what, content] of cases) {
      it(`fails loudly on ${what} and leaves the file untouched`, async () => {
        await writeFile(path, content);
        const s = new FileLedgerStore(path);
        await expect(s.init()).rejects.toThrow();
        await expect(s.ping()).rejects.toThrow();
        expect(await readFile(path, 'utf8')).toBe(content);
      });
    }

    it('names the manifest in the error', async () => {
      await writeFile(path, JSON.stringify({ format: 'someone-else/db' }));
      await expect(new FileLedgerStore(path).init()).rejects.toThrow(path);
    });
  });

  it('serves one process: a second opener is refused while the first holds the lock', async () => {
    store = await openAt(path);
    const second = new FileLedgerStore(path);
    await expect(second.init()).rejects.toThrow(/in use by process/);
    await store.close();
    await second.init();
    await second.close();
  });

  it('takes over a lock left by a process that no longer runs', async () => {
    await writeFile(`${path}.lock`, '999999999');
    store = await openAt(path);
    expect((await readFile(`${path}.lock`, 'utf8')).split('\n')[0]).toBe(String(process.pid));
  });

  it("takes over a lock naming this process's own pid that this process does not hold (PID 1 in a container, restarted)", async () => {
    await writeFile(`${path}.lock`, String(process.pid));
    store = await openAt(path);
    expect((await readFile(`${path}.lock`, 'utf8')).split('\n')[0]).toBe(String(process.pid));
    await expect(new FileLedgerStore(path).init()).rejects.toThrow(/in use by process/);
  });

  it('a stale lock written on an earlier boot reports a machine restart, kept until the service has acted on it', async () => {
    expect(currentBootId()).toBeDefined(); // Linux: the boot id is what tells a machine restart from a process kill
    await writeFile(`${path}.lock`, '999999999\nan-earlier-boot-id\n');
    store = await openAt(path);
    expect(store.recovery).toEqual({ corruptLines: 0, bytes: 0, segments: [], copies: [], machineRestarted: true, staleLines: 0 });
    // A crash before the service acted: the next start still knows (the lock now names this boot).
    await store.close();
    store = await openAt(path);
    expect(store.recovery).toMatchObject({ machineRestarted: true });
    await store.compactDamaged();
    expect(store.recovery).toBeUndefined();
    await store.close();
    store = await openAt(path);
    expect(store.recovery).toBeUndefined();
  });

  it('a lock written on an earlier boot is stale even when its pid runs again now (pids restart with the machine)', async () => {
    expect(isAlive(1)).toBe(true); // PID 1 always runs: after a reboot, any pid a lock names may be someone else's
    await writeFile(`${path}.lock`, '1\nan-earlier-boot-id\n');
    store = await openAt(path);
    // Its owner now: this process, this boot (and, third, its start time: process-lock.ts).
    expect((await readFile(`${path}.lock`, 'utf8')).split('\n').slice(0, 2)).toEqual([String(process.pid), currentBootId()]);
    expect(store.recovery).toMatchObject({ machineRestarted: true, corruptLines: 0 });
  });

  it('a lock written on this boot by a bridge (a node process) that runs is in use', async () => {
    // A lock of an older build (no start time) naming a live node process: another bridge holds it.
    const owner = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      await new Promise<void>((resolve, reject) => owner.once('spawn', resolve).once('error', reject));
      await writeFile(`${path}.lock`, `${owner.pid}\n${currentBootId()}\n`);
      await expect(openAt(path)).rejects.toThrow(new RegExp(`in use by process ${owner.pid} `));
      expect(await readFile(`${path}.lock`, 'utf8')).toBe(`${owner.pid}\n${currentBootId()}\n`);
    } finally {
      owner.kill('SIGKILL');
    }
  });

  it.each([
    ['empty', ''],
    ['zero-filled', '\u0000'.repeat(48)],
  ])('a lock left %s (cut by an OS crash: a lock is linked into place whole) counts as a machine restart', async (_name, contents) => {
    await writeFile(`${path}.lock`, contents);
    store = await openAt(path);
    expect(store.recovery).toMatchObject({ machineRestarted: true, corruptLines: 0 });
  });

  it.each([
    ['written on this boot', () => `999999999\n${currentBootId()}\n`],
    ['holding only a pid (older builds)', () => '999999999'],
  ])('a stale lock %s is a process kill: nothing to recover', async (_name, contents) => {
    await writeFile(`${path}.lock`, contents());
    store = await openAt(path);
    expect(store.recovery).toBeUndefined();
  });

  it('creates missing parent folders for a new ledger', async () => {
    const nested = join(dir, 'a', 'b', 'ledger.json');
    store = await openAt(nested);
    expect(existsSync(nested)).toBe(true);
    expect(existsSync(join(dir, 'a', 'b', 'ledger.journal', '000001.jsonl'))).toBe(true);
  });

  describe('private files (they hold customers\' contacts)', () => {
    const letter = (id: string) => ({ id, pos: 'shopify', receivedAt: minutes(1), lastReceivedAt: minutes(1), deliveries: 1, reason: 'x', headers: {}, body: '{"phone":"+15550001111"}', bodyEncoding: 'utf8' as const, replays: [] });

    it('a ledger written by an earlier build (0644 files, 0755 folders) is made private when opened', async () => {
      store = await openAt(path);
      await store.insert(makeRecord('generic:A-1'));
      await store.saveDeadLetter(letter('dl-1'));
      await store.saveMerchant(makeMerchant('m-1'));
      await store.close();
      await writeFile(join(dir, 'ledger.journal', '000001.jsonl.corrupt-2026-01-01T00-00-00-000Z'), 'a copy kept for forensics');
      await writeFile(`${path}.restarted`, 'an unclean stop on an earlier boot');
      for (const entry of await readdir(dir, { recursive: true })) await chmod(join(dir, entry), statSync(join(dir, entry)).isDirectory() ? 0o755 : 0o644);

      store = await openAt(path);
      expect(await modesUnder(dir)).toEqual([
        'ledger.dead-letters: 0o700',
        'ledger.dead-letters/dl-1.json: 0o600',
        // The index holds order ids: made private with the rest, its write-ahead log created so.
        'ledger.index.sqlite: 0o600',
        'ledger.index.sqlite-wal: 0o600',
        'ledger.journal: 0o700',
        'ledger.journal/000001.jsonl: 0o600',
        'ledger.journal/000001.jsonl.corrupt-2026-01-01T00-00-00-000Z: 0o600',
        'ledger.json: 0o600',
        'ledger.json.lock: 0o600',
        'ledger.json.restarted: 0o600',
        'ledger.merchants: 0o700',
        'ledger.merchants/m-1.json: 0o600',
      ]);
      expect(await store.get('generic:A-1')).toEqual(makeRecord('generic:A-1'));
      expect(await store.getDeadLetter('dl-1')).toEqual(letter('dl-1'));
    });

    it('files written later are private from the start: a new segment and the manifest after compaction, a dead letter replaced, the restart marker', async () => {
      await writeFile(`${path}.lock`, '999999999\nan-earlier-boot-id\n');
      store = await openAt(path);
      await store.saveDeadLetter(letter('dl-2'));
      await store.saveDeadLetter({ ...letter('dl-2'), deliveries: 2 });
      for (let i = 0; i < 150; i++) {
        let record = makeRecord(`generic:C-${i}`, { accrual: 'pending' });
        await store.insert(record);
        for (let v = 0; v < 6; v++) record = await store.update({ ...record, version: record.version + 1, history: [...record.history, { at: minutes(v), event: 'x'.repeat(400) }] });
      }
      await store.close();
      store = await openAt(path);
      expect(await readdir(join(dir, 'ledger.journal'))).toEqual(['000002.jsonl']);
      expect(await modesUnder(dir)).toEqual([
        'ledger.dead-letters: 0o700',
        'ledger.dead-letters/dl-2.json: 0o600',
        'ledger.index.sqlite: 0o600',
        'ledger.index.sqlite-wal: 0o600',
        'ledger.journal: 0o700',
        'ledger.journal/000002.jsonl: 0o600',
        'ledger.json: 0o600',
        'ledger.json.lock: 0o600',
        'ledger.json.restarted: 0o600',
        'ledger.merchants: 0o700',
      ]);
      expect((await store.getDeadLetter('dl-2'))?.deliveries).toBe(2);
    });

    it('folders the bridge creates for a new ledger are private; a folder that was there is left as it is', async () => {
      await chmod(dir, 0o755);
      store = await openAt(join(dir, 'a', 'b', 'ledger.json'));
      expect(statSync(dir).mode & 0o777).toBe(0o755);
      expect(await modesUnder(dir)).toEqual([
        'a: 0o700',
        'a/b: 0o700',
        'a/b/ledger.dead-letters: 0o700',
        'a/b/ledger.index.sqlite: 0o600',
        'a/b/ledger.index.sqlite-wal: 0o600',
        'a/b/ledger.journal: 0o700',
        'a/b/ledger.journal/000001.jsonl: 0o600',
        'a/b/ledger.json: 0o600',
        'a/b/ledger.json.lock: 0o600',
        'a/b/ledger.merchants: 0o700',
      ]);
    });
  });

  describe('a disk that cannot take writes', () => {
    /** `writeSync`, except that while `full` it writes the `room` left and then fails as a full disk does. */
    function disk() {
      const state = {
        full: false,
        room: 0,
        write(fd: number, buffer: Buffer, offset: number, length: number, position: number): number {
          if (!state.full) return writeSync(fd, buffer, offset, length, position);
          if (state.room === 0) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
          const n = Math.min(length, state.room);
          state.room -= n;
          return writeSync(fd, buffer, offset, n, position);
        },
      };
      return state;
    }

    it('ping fails while writes fail, naming the ledger and the cause, until a write can be made again; nothing written before is lost', async () => {
      const full = disk();
      store = new FileLedgerStore(path, { writeFile: full.write });
      await store.init();
      const kept = makeRecord('generic:kept', { accrual: 'pending' });
      await store.insert(kept);
      await store.ping();
      const segment = join(dir, 'ledger.journal', '000001.jsonl');
      const before = statSync(segment).size;

      // Room for part of the next line only: the write is cut short, then fails.
      Object.assign(full, { full: true, room: 100 });
      await expect(store.insert(makeRecord('generic:refused'))).rejects.toMatchObject({ code: 'ENOSPC' });
      // What the failed write put there is cut off again: the segment ends with the last whole line.
      expect(statSync(segment).size).toBe(before);
      await expect(store.ping()).rejects.toThrow(/^the file ledger cannot write to disk \(ENOSPC\), failing since \d{4}-/);
      // Still full: still not ready (each ping tries a write, which fails).
      await expect(store.ping()).rejects.toThrow(/ENOSPC/);
      await expect(store.update(settle(kept))).rejects.toMatchObject({ code: 'ENOSPC' });
      expect(await store.get('generic:kept')).toEqual(kept);
      expect(await store.get('generic:refused')).toBeUndefined();

      full.full = false;
      await store.ping();
      const settled = await store.update(settle(kept));
      await store.insert(makeRecord('generic:later'));
      await store.close();
      store = await openAt(path);
      expect(store.recovery).toBeUndefined();
      expect(await store.get('generic:kept')).toEqual(settled);
      expect(await store.get('generic:later')).toEqual(makeRecord('generic:later'));
      expect(await store.count()).toBe(2);
    });

  });
});

/**
 * The on-disk index (file-index.ts): trusted after a clean stop without reading a journal line,
 * caught up from its position after a kill, rebuilt from the journal when missing, unreadable, of
 * another format, or when a segment changed behind its back; and memory holds no settled record.
 */
describe('FileLedgerStore: the on-disk index', () => {
  let dir: string;
  let path: string;
  let segment1: string;
  let store: FileLedgerStore | undefined;

  beforeEach(async () => {
    dir = await freshDir();
    path = join(dir, 'ledger.json');
    segment1 = join(dir, 'ledger.journal', '000001.jsonl');
    store = undefined;
  });
  afterEach(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const ACCRUALS = ['pending', 'accrued', 'in_doubt', 'failed', 'accrued', 'partially_accrued'] as const;

  /** Records in every shape the index keeps (claims, accrual keys, order and refund ids, attention, due times, two merchants), a webhook event, dead letters, audit entries. */
  async function populate(s: FileLedgerStore): Promise<void> {
    for (let i = 0; i < 24; i++) {
      const accrual = ACCRUALS[i % ACCRUALS.length]!;
      const record = makeRecord(`generic:F-${i}`, { at: i, accrual, orderId: `O-${i % 5}`, operationIds: accrual === 'accrued' ? [100 + i] : [], ...(i % 7 === 0 ? { nextAttemptAt: 500 } : {}) });
      await s.insert(i % 3 === 0 ? { ...record, merchantId: 'bakery-17' } : record);
    }
    const refunded = (await s.get('generic:F-1'))!;
    await s.update(nextVersion(refunded, (r) => ((r.reversal.state = 'reversed'), (r.reversal.refundIds = ['R-1']))));
    await s.update(nextVersion((await s.get('generic:F-2'))!, (r) => ((r.accrual.state = 'accrued'), (r.accrual.operationIds = [900]), delete r.accrual.inDoubtSince)));
    await s.update(nextVersion((await s.get('generic:F-4'))!, (r) => (r.changedRepeats = { count: 1, first: [{ at: minutes(40), amountCents: 100 }], latest: [] })));
    await s.rememberWebhookEvent('square', 'evt-1');
    await s.saveDeadLetter(makeLetter('dl-1', { at: 1 }));
    await s.saveDeadLetter(makeLetter('dl-2', { at: 2, merchantId: 'bakery-17', nextAt: 30 }));
    await s.appendAudit({ at: minutes(3), actor: 'alice', action: 'retry', target: 'generic:F-3', merchantId: 'default', outcome: 'pending' });
  }

  /** What the store answers to everything the index serves: equal answers, an equal index. */
  async function answers(s: FileLedgerStore) {
    const all = (await s.list({ offset: 0, limit: 1000 })).items;
    return {
      count: await s.count(),
      all,
      byKey: await Promise.all(all.map((r) => s.get(keyOf(r)))),
      byOrder: await Promise.all(['O-0', 'O-1', 'O-2', 'O-3', 'O-4'].map((orderId) => s.list({ orderId, offset: 0, limit: 100 }))),
      byRefund: await s.list({ refundId: 'R-1', offset: 0, limit: 100 }),
      byStatus: await s.list({ status: ['failed', 'in_doubt', 'partially_accrued'], offset: 0, limit: 100 }),
      byMerchantStatus: await s.list({ merchantId: 'bakery-17', status: ['accrued', 'pending'], offset: 0, limit: 100 }),
      open: await s.listOpen({ limit: 100 }),
      due: await s.listDue({ nowMs: Date.parse(minutes(10_000)), limit: 100, canVerify: true }),
      unsettled: await s.listUnsettledAccruals('default', 5997),
      claims: await Promise.all([...Array.from({ length: 30 }, (_, i) => 100 + i), 900].flatMap((op) => [s.findOperationClaim('default', op), s.findOperationClaim('bakery-17', op)])),
      attention: await s.listAttention({ limit: 100 }),
      attentionCounts: await s.countAttention(),
      openByStatus: await s.countOpenByStatus(),
      letters: await s.listDeadLetters({ offset: 0, limit: 10 }),
      letterCounts: await s.countOpenDeadLetters(),
      dueLetters: await s.listDueDeadLetters({ nowMs: Date.parse(minutes(100)), limit: 10 }),
      audit: await s.listAudit({ offset: 0, limit: 10 }),
      events: [await s.hasWebhookEvent('square', 'evt-1'), await s.hasWebhookEvent('square', 'evt-2')],
      liveBytes: s.journalStats().liveBytes,
    };
  }

  /** The answers of a populated store are not empty: a comparison of them compares something. */
  function expectSubstance(a: Awaited<ReturnType<typeof answers>>): void {
    expect(a.count).toBe(24);
    expect(a.byRefund.items.map((r) => r.transactionId)).toEqual(['generic:F-1']);
    expect(a.attention.length).toBeGreaterThan(3);
    expect(a.open.length).toBeGreaterThan(3);
    expect(a.claims.filter((c) => c !== undefined).length).toBeGreaterThan(5);
    expect(a.letters.total).toBe(2);
    expect(a.audit.total).toBe(1);
    expect(a.events).toEqual([true, false]);
  }

  /** A line's offset and length in segment 1, by record id and version. */
  async function lineOf(id: string, version: number): Promise<{ offset: number; length: number }> {
    const bytes = await readFile(segment1);
    for (let start = 0; start < bytes.length; ) {
      const end = bytes.indexOf(0x0a, start);
      const header = JSON.parse(bytes.toString('utf8', start, bytes.indexOf(0x09, start))) as { id?: string; v?: number };
      if (header.id === id && header.v === version) return { offset: start, length: end + 1 - start };
      start = end + 1;
    }
    throw new Error(`no line of ${id} v${version}`);
  }

  /** Changes one value of the index's `meta` table, as another build or an interrupted rebuild would have left it. */
  function setMeta(indexPath: string, name: string, value: unknown): void {
    const db = new DatabaseSync(indexPath);
    try {
      expect(db.prepare('UPDATE meta SET value = ? WHERE name = ?').run(value, name).changes).toBe(1);
    } finally {
      db.close();
    }
  }

  async function overwrite(file: string, offset: number, text: string): Promise<void> {
    const handle = await open(file, 'r+');
    await handle.write(Buffer.from(text), 0, text.length, offset);
    await handle.close();
  }

  it('after a clean stop, start-up reads no journal line: the index is trusted up to its position, which is the journal\'s end', async () => {
    store = await openAt(path);
    await populate(store);
    const before = await answers(store);
    expectSubstance(before);
    const end = statSync(segment1).size;
    await store.close();

    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0, scannedFrom: { segment: 1, offset: end } });
    expect(store.recovery).toBeUndefined();
    expect(await answers(store)).toEqual(before);
  });

  it('keeps delivery bindings\' keys exactly (a backslash, a literal "\\0"), across a restart and through the copy\'s walk; refuses a text holding NUL rather than storing it cut short', async () => {
    store = await openAt(path);
    // SQLite is given text as a C string by the driver: a binding's key joins POS and digest with a NUL, so the index escapes it.
    const keys = ['digest-1', 'digest-2', 'a\\0b', 'a\\\\b', 'a\\'];
    for (const [i, key] of keys.entries()) expect(await store.bindDelivery('toast', key, `restaurant-${i}`)).toBe(`restaurant-${i}`);
    expect(await store.bindDelivery('toast', 'a\\0b', 'restaurant-9')).toBe('restaurant-2');
    await store.close();
    store = await openAt(path);
    for (const [i, key] of keys.entries()) expect(await store.deliveryBinding('toast', key)).toBe(`restaurant-${i}`);
    expect([...store.deliveryBindings(2)].sort((a, b) => a.account.localeCompare(b.account))).toEqual(keys.map((key, i) => ({ pos: 'toast', key, account: `restaurant-${i}` })));

    const before = statSync(segment1).size;
    await expect(store.insert(makeRecord('generic:N-1', { orderId: 'O\u0000-1' }))).rejects.toThrow(/refuses a text holding NUL/);
    expect(statSync(segment1).size).toBe(before);
    expect(await store.get('generic:N-1')).toBeUndefined();
  });

  it('a line before the position made unreadable, its segment\'s size and mtime kept, is not even seen while the index is trusted; a full scan reports it', async () => {
    store = await openAt(path);
    const first = makeRecord('generic:superseded', { accrual: 'pending' });
    await store.insert(first);
    const latest = await store.update(settle(first));
    await store.insert(makeRecord('generic:other', { at: 1 }));
    await store.close();

    // The stamp a clean stop leaves: whole seconds in the past (journal.ts `stamp`), restored exactly below.
    const { mtimeNs, size } = statSync(segment1, { bigint: true });
    expect(mtimeNs % 1_000_000_000n).toBe(0n);
    const superseded = await lineOf('generic:superseded', 1);
    expect(superseded.offset).toBe(0);
    await overwrite(segment1, 2, 'garbled!');
    utimesSync(segment1, new Date(), Number(mtimeNs / 1_000_000_000n));
    expect(statSync(segment1, { bigint: true })).toMatchObject({ size, mtimeNs });

    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0 });
    expect(store.recovery).toBeUndefined();
    expect(await store.get('generic:superseded')).toEqual(latest);
    await store.close();

    // Without the index, the scan reads every line, that one too.
    await rm(join(dir, 'ledger.index.sqlite'));
    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'rebuilt', reason: expect.stringMatching(/^no index/), linesRead: 3 });
    expect(store.recovery).toMatchObject({ corruptLines: 1, bytes: superseded.length, segments: [1] });
    expect(await store.get('generic:superseded')).toEqual(latest);
  });

  it('a process killed between a journal append and its index commit: start-up applies the lines after the index\'s position, and only those', async () => {
    store = await openAt(path);
    await populate(store);
    // The index as a process killed now leaves it (its page cache: the files as they are).
    const indexPath = join(dir, 'ledger.index.sqlite');
    const snapshot = { db: await readFile(indexPath), wal: await readFile(`${indexPath}-wal`) };
    const position = statSync(segment1).size;
    // Three writes whose journal lines are appended and whose index commits the kill takes away:
    // a new record holding an accrual key, an update that settles one (leaving the open set,
    // claiming an operation), a webhook event.
    await store.insert(makeRecord('generic:after-kill', { at: 90, accrual: 'in_doubt', orderId: 'K-1' }));
    const open = (await store.listOpen({ limit: 1, merchantId: 'default' }))[0]!;
    await store.update(nextVersion(open, (r) => ((r.accrual.state = 'accrued'), (r.accrual.operationIds = [777]), delete r.accrual.inDoubtSince, delete r.inFlight)));
    await store.rememberWebhookEvent('square', 'evt-after-kill');
    const expected = {
      ...(await answers(store)),
      afterKill: await store.list({ orderId: 'K-1', offset: 0, limit: 10 }),
      claim: await store.findOperationClaim('default', 777),
      event: await store.hasWebhookEvent('square', 'evt-after-kill'),
    };
    expect(expected.afterKill.total).toBe(1);
    expect(expected.claim).toBe(open.transactionId);

    // The killed process's files: the journal with every line, the index without the last three,
    // its lock naming this process (which does not hold that copy: a killed process's, on this boot).
    const killed = await freshDir();
    try {
      await cp(dir, killed, { recursive: true });
      await writeFile(join(killed, 'ledger.index.sqlite'), snapshot.db);
      await writeFile(join(killed, 'ledger.index.sqlite-wal'), snapshot.wal);
      let caughtUp: FileLedgerStore | undefined = await openAt(join(killed, 'ledger.json'));
      try {
        expect(caughtUp.indexStartup).toMatchObject({ mode: 'caught-up', linesRead: 3, scannedFrom: { segment: 1, offset: position } });
        expect(caughtUp.recovery).toBeUndefined();
        const found = {
          ...(await answers(caughtUp)),
          afterKill: await caughtUp.list({ orderId: 'K-1', offset: 0, limit: 10 }),
          claim: await caughtUp.findOperationClaim('default', 777),
          event: await caughtUp.hasWebhookEvent('square', 'evt-after-kill'),
        };
        expect(found.count).toBe(25);
        expect(found).toEqual(expected);
        await caughtUp.close();
        // Caught up, the index is whole: the next start reads nothing.
        caughtUp = await openAt(join(killed, 'ledger.json'));
        expect(caughtUp.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0 });
      } finally {
        await caughtUp.close();
      }
    } finally {
      await rm(killed, { recursive: true, force: true });
    }
  });

  it.each<[string, (indexPath: string) => Promise<void>, RegExp]>([
    ['missing', (p) => rm(p), /^no index/],
    ['that is not a database', (p) => writeFile(p, 'not an SQLite database\n'.repeat(500)), /^the index cannot be used/],
    ['cut short', (p) => truncate(p, 4096), /^the index cannot be used/],
    ['of another format version', async (p) => setMeta(p, 'format', 999), /format 999/],
    ['left half-built by a process stopped while building it', async (p) => setMeta(p, 'state', 'building'), /being built/],
  ])('an index %s is rebuilt from the journal (and the letters\' and audit trail\'s files): every answer is as before', async (_what, spoil, reason) => {
    store = await openAt(path);
    await populate(store);
    const before = await answers(store);
    expectSubstance(before);
    await store.close();
    const indexPath = join(dir, 'ledger.index.sqlite');
    expect(existsSync(`${indexPath}-wal`)).toBe(false); // a clean stop checkpoints it
    await spoil(indexPath);

    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'rebuilt', reason: expect.stringMatching(reason) });
    expect(store.recovery).toBeUndefined();
    expect(await answers(store)).toEqual(before);
    expect(statSync(indexPath).mode & 0o777).toBe(0o600);
    await store.close();
    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0 });
  });

  it('a segment changed behind the index\'s back moments after a clean stop (its size kept) makes start-up rebuild the index from the journal', async () => {
    store = await openAt(path);
    await populate(store);
    const before = await answers(store);
    await store.close();
    // At once: the coarse clock a write's mtime comes from has not moved on, the stamp still tells.
    const line = await lineOf('generic:F-1', 1);
    await overwrite(segment1, line.offset + 3, 'XX');

    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'rebuilt', reason: 'segment 000001.jsonl was changed since the index last saw it (size or modification time)' });
    expect(store.recovery).toMatchObject({ corruptLines: 1, bytes: line.length, segments: [1] });
    // That version was superseded: every answer stands.
    expect(await answers(store)).toEqual(before);
  });

  it('a write the index cannot take is refused whole: its journal line is taken back, and journal and index stay level', async () => {
    let failing = false;
    const full = () => {
      if (failing) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    };
    store = new FileLedgerStore(path, { beforeIndexWrite: full });
    await store.init();
    const kept = makeRecord('generic:kept', { accrual: 'pending' });
    await store.insert(kept);
    const size = statSync(segment1).size;

    failing = true;
    await expect(store.insert(makeRecord('generic:refused', { at: 1 }))).rejects.toMatchObject({ code: 'SQLITE_FULL' });
    await expect(store.update(settle(kept))).rejects.toMatchObject({ code: 'SQLITE_FULL' });
    await expect(store.rememberWebhookEvent('square', 'evt-refused')).rejects.toMatchObject({ code: 'SQLITE_FULL' });
    // Nothing of them is left in the journal, and nothing in the index.
    expect(statSync(segment1).size).toBe(size);
    expect(await store.get('generic:refused')).toBeUndefined();
    expect(await store.get('generic:kept')).toEqual(kept);
    expect(await store.hasWebhookEvent('square', 'evt-refused')).toBe(false);

    failing = false;
    const settled = await store.update(settle(kept));
    await store.insert(makeRecord('generic:later', { at: 2 }));
    await store.close();
    store = await openAt(path);
    // Journal and index agree: nothing to catch up, nothing refused reappears.
    expect(store.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0 });
    expect(await store.count()).toBe(2);
    expect(await store.get('generic:kept')).toEqual(settled);
    expect(await store.get('generic:refused')).toBeUndefined();
  });

  it('holds no settled record in memory, however many the ledger holds: after a restart, reading them all caches only the open ones', async () => {
    store = await openAt(path);
    for (let i = 0; i < 3000; i++) await store.insert(makeRecord(`generic:S-${i}`, { at: i, accrual: 'accrued', operationIds: [i + 1] }));
    for (let i = 0; i < 5; i++) await store.insert(makeRecord(`generic:P-${i}`, { at: 3000 + i, accrual: 'pending' }));
    await store.saveMerchant(makeMerchant('m-1'));
    await store.close();

    store = await openAt(path);
    expect(store.memoryFootprint()).toEqual({ cachedRecords: 0, merchants: 1, backfillStates: 0 });
    let read = 0;
    for (let page = await store.list({ offset: 0, limit: 500 }); page.items.length > 0; page = await store.list({ after: { createdAt: page.items.at(-1)!.createdAt, key: keyOf(page.items.at(-1)!) }, offset: 0, limit: 500 })) read += page.items.length;
    for (let i = 0; i < 3000; i += 7) expect((await store.get(`generic:S-${i}`))?.version).toBe(1);
    expect(await store.findOperationClaim('default', 2999)).toBe('generic:S-2998');
    expect(read).toBe(3005);
    expect(store.memoryFootprint()).toEqual({ cachedRecords: 5, merchants: 1, backfillStates: 0 });
  });

  it('a ledger whose journal was written without an index (an earlier build, or written in bulk) builds it once, from a full scan', async () => {
    const records = Array.from({ length: 50 }, (_, i) => makeRecord(`generic:B-${i}`, { at: i, accrual: i % 2 ? 'accrued' : 'pending', operationIds: i % 2 ? [i] : [] }));
    expect(writeLedgerInBulk(path, records)).toEqual({ records: 50, segments: 1, bytes: statSync(segment1).size });
    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'rebuilt', reason: expect.stringMatching(/^no index/), linesRead: 50 });
    expect(await store.count()).toBe(50);
    for (const r of records) expect(await store.get(r.transactionId)).toEqual(r);
    expect((await store.listOpen({ limit: 100 })).map((r) => r.transactionId)).toEqual(records.filter(isOpen).map((r) => r.transactionId));
    expect(await store.findOperationClaim('default', 7)).toBe('generic:B-7');
    await store.close();
    store = await openAt(path);
    expect(store.indexStartup).toMatchObject({ mode: 'trusted', linesRead: 0 });
    expect(() => writeLedgerInBulk(path, [])).toThrow(/a ledger is there already/);
  });
});
