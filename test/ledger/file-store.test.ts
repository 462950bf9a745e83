import { existsSync, statSync, writeSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { currentBootId } from '../../src/ledger/process-lock.js';
import { openStore } from '../../src/ledger/open-store.js';
import { isOpen, type LedgerRecord } from '../../src/ledger/record.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { ledgerStoreContract, makeMerchant, makeRecord, minutes, nextVersion, settle } from './store-contract.js';

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
    expect(manifest).toEqual({ format: 'loyalty-bridge/ledger', formatVersion: 2, createdAt: expect.any(String), segments: [1] });

    const records = ['generic:A-1', 'square:ORDER/2', 'shopify:3 with spaces', '../../escape'].map((id, i) => makeRecord(id, { at: i }));
    for (const r of records) await store.insert(r);
    await store.update(settle(records[0]!));
    expect((await readdir(dir)).sort()).toEqual(['ledger.dead-letters', 'ledger.journal', 'ledger.json', 'ledger.json.lock', 'ledger.merchants']);
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
    expect((await store.listOpen(10)).map((r) => r.transactionId)).toEqual(['generic:kept']);
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
    expect(await due(10)).toEqual(['generic:due']);
    expect(await due(100)).toEqual(['generic:due', 'generic:accrual-in-doubt']);
    expect(await due(100, false)).toEqual(['generic:due']);
    expect(await due(5000)).toEqual(['generic:due', 'generic:accrual-in-doubt', 'generic:next-round-later']);
    expect((await store.listOpen(10)).map((r) => r.transactionId)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:next-round-later', 'generic:due']);

    // Written again by this build, a record's line carries its due time, which the next start-up reads.
    await store.update(nextVersion(records[3]!, (r) => (r.nextAttemptAt = minutes(6000))));
    await store.update(nextVersion(records[1]!));
    const lines = (await readFile(segment, 'utf8')).split('\n').filter(Boolean);
    expect(JSON.parse(lines.at(-2)!.split('\t')[0]!)).toMatchObject({ id: 'generic:due', o: 1, d: Date.parse(minutes(6000)) });
    expect(JSON.parse(lines.at(-1)!.split('\t')[0]!)).toMatchObject({ id: 'generic:accrual-in-doubt', o: 1, d: Date.parse(minutes(20)), dv: 1 });
    await store.close();
    store = await openAt(path);
    expect(await due(5000)).toEqual(['generic:accrual-in-doubt', 'generic:next-round-later']);
    expect(await due(6000)).toEqual(['generic:accrual-in-doubt', 'generic:next-round-later', 'generic:due']);
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
    expect((await readFile(`${path}.lock`, 'utf8')).split('\n')).toEqual([String(process.pid), currentBootId(), '']);
    expect(store.recovery).toMatchObject({ machineRestarted: true, corruptLines: 0 });
  });

  it('a lock written on this boot by a process that runs is in use', async () => {
    await writeFile(`${path}.lock`, `1\n${currentBootId()}\n`);
    await expect(openAt(path)).rejects.toThrow(/in use by process 1 /);
    expect(await readFile(`${path}.lock`, 'utf8')).toBe(`1\n${currentBootId()}\n`);
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
