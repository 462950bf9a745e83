import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { openStore } from '../../src/ledger/open-store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { ledgerStoreContract, makeRecord, settle } from './store-contract.js';

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

  const sha = (id: string) => createHash('sha256').update(id).digest('hex');

  it('lays out a lowdb JSON manifest and one record file per transaction under <name>.records/<2 hex>/', async () => {
    store = await openAt(path);
    expect(store.manifestPath).toBe(path);
    expect(store.recordsDir).toBe(join(dir, 'ledger.records'));

    const manifest = JSON.parse(await readFile(path, 'utf8'));
    expect(manifest).toEqual({ format: 'loyalty-bridge/ledger', formatVersion: 1, createdAt: expect.any(String) });
    expect(new Date(manifest.createdAt).toISOString()).toBe(manifest.createdAt);

    const records = ['generic:A-1', 'square:ORDER/2', 'shopify:3 with spaces', '../../escape'].map((id, i) => makeRecord(id, { at: i }));
    for (const r of records) await store.insert(r);
    expect(await readdir(dir)).toEqual(expect.arrayContaining(['ledger.json', 'ledger.records']));
    expect((await readdir(dir)).sort()).toEqual(['ledger.dead-letters', 'ledger.json', 'ledger.json.lock', 'ledger.records', 'ledger.webhooks']);
    expect(await readFile(`${path}.lock`, 'utf8')).toBe(String(process.pid));

    const shards = await readdir(store.recordsDir);
    for (const shard of shards) {
      expect(shard).toMatch(/^[0-9a-f]{2}$/);
      expect((await stat(join(store.recordsDir, shard))).isDirectory()).toBe(true);
    }
    let files = 0;
    for (const r of records) {
      const hash = sha(r.transactionId);
      const file = join(store.recordsDir, hash.slice(0, 2), `${hash}.json`);
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(r);
      files++;
    }
    const all = (await Promise.all(shards.map((s) => readdir(join(store!.recordsDir, s))))).flat();
    expect(all).toHaveLength(files);
    for (const f of all) expect(f).toMatch(/^[0-9a-f]{64}\.json$/);

    // The manifest is written once; records do not touch it.
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(manifest);

    // An update rewrites the record's own file in place, no stray files.
    const updated = await store.update(settle(records[0]!));
    const hash = sha(records[0]!.transactionId);
    expect(JSON.parse(await readFile(join(store.recordsDir, hash.slice(0, 2), `${hash}.json`), 'utf8'))).toEqual(updated);
    expect((await readdir(join(store.recordsDir, hash.slice(0, 2)))).filter((f) => f.startsWith('.'))).toEqual([]);
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

  it('ignores torn temporary files left by a crash at start-up', async () => {
    store = await openAt(path);
    const kept = makeRecord('generic:kept', { accrual: 'pending', operationIds: [11] });
    await store.insert(kept);
    await store.close();

    // A crash mid-write of an update to `kept` leaves lowdb/steno's `.<file>.tmp` half written...
    const keptHash = sha('generic:kept');
    const keptShard = join(dir, 'ledger.records', keptHash.slice(0, 2));
    await writeFile(join(keptShard, `.${keptHash}.json.tmp`), '{"transactionId":"generic:kept","version":2,"status":"acc');
    // ...and a crash mid-insert of a new record leaves only its temporary file, maybe in a new shard.
    const lostHash = sha('generic:never-renamed');
    const lostShard = join(dir, 'ledger.records', lostHash.slice(0, 2));
    await mkdir(lostShard, { recursive: true });
    await writeFile(join(lostShard, `.${lostHash}.json.tmp`), '{"transactionId":"generic:never-ren');
    // A complete but never-renamed temporary file is not a record either.
    const otherHash = sha('generic:complete-tmp');
    await mkdir(join(dir, 'ledger.records', otherHash.slice(0, 2)), { recursive: true });
    await writeFile(join(dir, 'ledger.records', otherHash.slice(0, 2), `.${otherHash}.json.tmp`), JSON.stringify(makeRecord('generic:complete-tmp')));

    store = await openAt(path);
    expect(await store.count()).toBe(1);
    expect(await store.get('generic:kept')).toEqual(kept);
    expect(await store.get('generic:never-renamed')).toBeUndefined();
    expect(await store.get('generic:complete-tmp')).toBeUndefined();
    expect((await store.listOpen(10)).map((r) => r.transactionId)).toEqual(['generic:kept']);
    expect(await store.findOperationClaim(11)).toBe('generic:kept');

    // The store keeps working on top of the debris: the update and the insert go through.
    const updated = await store.update(settle(kept));
    expect(await store.get('generic:kept')).toEqual(updated);
    const fresh = makeRecord('generic:never-renamed');
    expect(await store.insert(fresh)).toEqual({ created: true, record: fresh });
    await store.close();
    store = await openAt(path);
    expect(await store.count()).toBe(2);
    expect(await store.get('generic:kept')).toEqual(updated);
  });

  describe('refuses to start on a manifest it does not own', () => {
    const cases: [string, string][] = [
      ['another format', JSON.stringify({ format: 'someone-else/db', formatVersion: 1 })],
      ['a plain lowdb database', JSON.stringify({ posts: [], users: [] })],
      ['a JSON array', '[]'],
      ['a newer format version of the ledger', JSON.stringify({ format: 'loyalty-bridge/ledger', formatVersion: 2, createdAt: '2026-01-01T00:00:00.000Z' })],
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
    expect(await readFile(`${path}.lock`, 'utf8')).toBe(String(process.pid));
  });

  it('creates missing parent folders for a new ledger', async () => {
    const nested = join(dir, 'a', 'b', 'ledger.json');
    store = await openAt(nested);
    expect(existsSync(nested)).toBe(true);
    expect(existsSync(join(dir, 'a', 'b', 'ledger.records'))).toBe(true);
  });
});
