/**
 * The operator commands against a real PostgreSQL: `npm run ledger:copy` (a JSON-file ledger into
 * PostgreSQL, exactly, resumable, refusing a ledger a bridge holds) and `npm run migrate`, through
 * the functions the scripts export, so no build is needed.
 */
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { checkLocations, copyLedger, SECRETS_NOTE, WEBHOOK_NOTE, type CopyOptions } from '../../scripts/ledger-copy.js';
import { migrateLedger, resolveLedgerUrl } from '../../scripts/migrate.js';
import { CommandError, formatProgress, hidePasswords } from '../../scripts/cli.js';
import { ConflictError } from '../../src/kernel/errors.js';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { MIGRATIONS } from '../../src/ledger/pg-migrations.js';
import { PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { dueOf } from '../../src/core/transitions.js';
import { isOpen, type AccrualState, type LedgerRecord, type ReversalState } from '../../src/state/record.js';
import type { DeadLetter } from '../../src/ledger/store.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { makeMerchant, makeRecord, nextVersion } from './contracts/factories.js';

const { url: base, describeIf } = await describeWithDatabase();

const RECORDS = 300;
const STATES: [AccrualState, ReversalState][] = [
  ['pending', 'none'],
  ['accrued', 'none'],
  ['in_doubt', 'none'],
  ['failed', 'none'],
  ['skipped', 'none'],
  ['partially_accrued', 'none'],
  ['accrued', 'reversed'],
  ['accrued', 'pending'],
  ['accrued', 'failed'],
  ['failed', 'not_needed'],
];

function deadLetter(id: string, minute: number, resolved: boolean): DeadLetter {
  const at = new Date(Date.parse('2026-03-02T10:00:00Z') + minute * 60_000).toISOString();
  return {
    id,
    pos: 'square',
    receivedAt: at,
    lastReceivedAt: at,
    deliveries: 2,
    reason: 'invalid_payload',
    issues: [{ field: 'order.total_money.amount', message: 'must be an integer' }],
    headers: { 'content-type': 'application/json', 'x-square-event-type': 'order.updated' },
    body: '{"type":"order.updated","data":{"id":"ORD-☕"}}',
    bodyEncoding: 'utf8',
    replays: resolved ? [{ at, outcome: 'processed: accrued' }] : [],
    ...(resolved ? { resolvedAt: at } : {}),
  };
}

/**
 * A file ledger of RECORDS records in every status, at versions 1 to 4: later versions add history
 * events and attempts and some gain operation ids on the way (as an accrual settles), some are in
 * flight; plus two dead letters. Answers the records as the file ledger holds them.
 */
async function buildFileLedger(path: string): Promise<{ records: Map<string, LedgerRecord>; letters: DeadLetter[] }> {
  const store = new FileLedgerStore(path);
  await store.init();
  const records = new Map<string, LedgerRecord>();
  try {
    for (let i = 0; i < RECORDS; i++) {
      const [accrual, reversal] = STATES[i % STATES.length]!;
      const ops = i % 3 === 0 ? [10_000 + 2 * i, 10_001 + 2 * i] : i % 3 === 1 ? [10_000 + 2 * i] : [];
      // Records at version 1 carry their ids from the start; the others gain them on the last write.
      const updates = i % 4;
      let record = makeRecord(`${i % 2 ? 'square' : 'generic'}:ORD-${i}`, {
        pos: i % 2 ? 'square' : 'generic',
        at: i,
        accrual,
        reversal,
        operationIds: updates === 0 ? ops : [],
        inFlight: i % 25 === 0,
      });
      await store.insert(record);
      for (let u = 1; u <= updates; u++) {
        record = nextVersion(record, (r) => {
          r.history.push({ at: r.updatedAt, event: `update ${u}`, from: r.status, to: r.status, detail: `round ${u} ✓` });
          r.rounds = u;
          r.nextAttemptAt = new Date(Date.parse(r.createdAt) + u * 1000).toISOString();
          r.attempts.push({ operation: 'accrue', startedAt: r.createdAt, finishedAt: r.createdAt, request: { n: u }, error: 'socket hang up' });
          if (u === updates) {
            r.accrual.operationIds = ops;
            r.accrual.errors = i % 5 === 0 ? ['card is blocked'] : [];
          }
        });
        await store.update(record);
      }
      records.set(record.transactionId, record);
    }
    const letters = [deadLetter('dl-1', 1, false), deadLetter('dl-2', 2, true)];
    for (const letter of letters) await store.saveDeadLetter(letter);
    // Two operators' actions at the same instant: both kept, in the order written.
    for (const actor of ['alice', 'bob']) await store.appendAudit({ at: '2026-03-01T10:00:00.000Z', actor, action: 'retry', target: 'generic:ORD-1', reason: 'card unblocked', merchantId: 'default', outcome: 'accrued' });
    await store.updateBackfillState('default', 'square', () => ({ merchantId: 'default', pos: 'square', account: 'MLSQUARE', watermark: '2026-03-01T10:00:00.000Z', lease: { owner: 'gone', until: '2999-01-01T00:00:00.000Z' } }));
    await store.rememberWebhookEvent('square', 'evt-1');
    // Two deliveries bound to the shops they were first taken for (docs/security.md).
    await store.bindDelivery('shopify', 'digest-a', 'shop-a.myshopify.com');
    await store.bindDelivery('toast', 'digest-b', 'restaurant-b');
    return { records, letters };
  } finally {
    await store.close();
  }
}

async function allRecords(store: PostgresLedgerStore): Promise<Map<string, LedgerRecord>> {
  const { rows } = await store.pool.query<{ record: LedgerRecord }>('SELECT record FROM ledger_records');
  return new Map(rows.map((r) => [r.record.transactionId, r.record]));
}

async function claims(store: PostgresLedgerStore): Promise<Map<number, string>> {
  const { rows } = await store.pool.query<{ operation_id: string; transaction_id: string }>('SELECT operation_id, transaction_id FROM ledger_operation_claims');
  return new Map(rows.map((r) => [Number(r.operation_id), r.transaction_id]));
}

describe('ledger:copy and migrate arguments', () => {
  const exitCodeOf = (fn: () => unknown): number | undefined => {
    try {
      fn();
    } catch (error) {
      return error instanceof CommandError ? error.exitCode : -1;
    }
    return undefined;
  };

  it('refuses missing, swapped or identical locations with exit code 2', () => {
    expect(exitCodeOf(() => checkLocations(undefined, 'postgres://h/db'))).toBe(2);
    expect(exitCodeOf(() => checkLocations('file:./x.json', undefined))).toBe(2);
    expect(exitCodeOf(() => checkLocations('postgres://h/db', 'file:./x.json'))).toBe(2);
    expect(exitCodeOf(() => checkLocations('file:./x.json', 'file:./y.json'))).toBe(2);
    expect(exitCodeOf(() => checkLocations('file:./x.json', 'file:./x.json'))).toBe(2);
    expect(exitCodeOf(() => checkLocations('file:./x.json', 'postgres://h/db?schema=Bad-Name'))).toBe(2);
    expect(() => checkLocations('file:/nonexistent/ledger.json', 'postgres://u:pw123@h/db')).toThrow(/there is no ledger at \/nonexistent\/ledger\.json/);
    expect(() => checkLocations('postgres://u:s3cret@h/db', 'postgres://u:s3cret@h/db')).toThrow(/^(?!.*s3cret).*same ledger/);
  });

  it('migrate names LEDGER_URL when it is missing or not PostgreSQL (exit code 2)', () => {
    expect(() => resolveLedgerUrl([], {})).toThrow(/LEDGER_URL/);
    expect(() => resolveLedgerUrl([], { LEDGER_URL: 'file:./data/ledger.json' })).toThrow(/LEDGER_URL must be a postgres/);
    expect(exitCodeOf(() => resolveLedgerUrl([], {}))).toBe(2);
    expect(exitCodeOf(() => resolveLedgerUrl(['--url'], { LEDGER_URL: 'postgres://h/db' }))).toBe(2);
    expect(exitCodeOf(() => resolveLedgerUrl(['--bogus', 'x'], { LEDGER_URL: 'postgres://h/db' }))).toBe(2);
    expect(resolveLedgerUrl(['--url', 'postgres://h/other'], { LEDGER_URL: 'postgres://h/db' })).toBe('postgres://h/other');
    expect(resolveLedgerUrl(['--url=postgresql://h/other'], {})).toBe('postgresql://h/other');
  });

  it('never shows a password, and draws the progress bar', () => {
    const url = 'postgres://bridge:pa%40ss%2Fword@db.example:5432/ledger';
    const text = hidePasswords(`could not connect to ${url}: password pa@ss/word rejected; see postgres://x:yz@h/db`, url);
    expect(text).not.toMatch(/pa%40ss|pa@ss|yz@/);
    expect(text).toContain('postgres://***@db.example:5432/ledger');
    expect(formatProgress(12_345, 100_000, 3210.4, 'records', 10)).toBe('[#.........] 12,345 / 100,000 records  3,210/s');
  });
});

describeIf('ledger:copy into PostgreSQL', () => {
  let dir: string;
  let from: string;
  let schema: { url: string; drop(): Promise<void> };
  let to: string;
  let pg: PostgresLedgerStore;
  let built: { records: Map<string, LedgerRecord>; letters: DeadLetter[] };
  const password = (() => {
    const u = new URL(base ?? 'postgres://x@h/db');
    return u.password || 'not-a-real-Pa55word';
  })();

  const copy = async (extra: Partial<CopyOptions> = {}) => {
    const lines: string[] = [];
    const progress: string[] = [];
    const result = await copyLedger({
      from,
      to,
      log: (line) => lines.push(line),
      progress: { stream: { write: (chunk: string) => progress.push(chunk), isTTY: false } },
      pageSize: 128,
      ...extra,
    });
    return { result, output: lines.join('\n'), progress: progress.join('') };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ledger-copy-'));
    from = `file:${join(dir, 'ledger.json')}`;
    built = await buildFileLedger(join(dir, 'ledger.json'));
    schema = await freshSchema(base!, 'copy');
    // Trust authentication ignores a password: one is put in the URL to show it is never printed.
    const withPassword = new URL(schema.url);
    withPassword.password = password;
    to = withPassword.toString();
    pg = new PostgresLedgerStore(schema.url, { poolSize: 2 });
  });
  afterAll(async () => {
    await pg?.close().catch(() => undefined);
    await schema?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('copies every record exactly (version, status, history, attempts), their claims and the dead letters, and the counts match', async () => {
    const { result, output, progress } = await copy();
    expect(result.ok).toBe(true);
    expect(result.migrationsApplied).toEqual(MIGRATIONS.map((m) => m.version));
    expect(result.records).toEqual({ inFile: RECORDS, imported: RECORDS, skipped: 0, inPostgres: RECORDS });
    expect(result.deadLetters).toEqual({ inFile: 2, imported: 2, skipped: 0, inPostgres: 2 });
    expect(result.audit).toEqual({ inFile: 2, imported: 2, skipped: 0, inPostgres: 2 });
    expect((await pg.listAudit({ offset: 0, limit: 10 })).items.map((e) => e.actor)).toEqual(['bob', 'alice']);
    // The backfill watermark, without the lease of the process that held the file ledger.
    expect(result.backfill).toEqual({ inFile: 1, imported: 1, skipped: 0, inPostgres: 1 });
    expect(await pg.getBackfillState('default', 'square')).toEqual({ merchantId: 'default', pos: 'square', account: 'MLSQUARE', watermark: '2026-03-01T10:00:00.000Z' });

    const stored = await allRecords(pg);
    expect(stored.size).toBe(RECORDS);
    for (const [id, record] of built.records) expect(stored.get(id)).toEqual(record);
    expect(new Set([...built.records.values()].map((r) => r.version))).toEqual(new Set([1, 2, 3, 4]));

    const expectedClaims = new Map<number, string>();
    for (const r of built.records.values()) for (const op of r.accrual.operationIds) expectedClaims.set(op, r.transactionId);
    expect(expectedClaims.size).toBe(300); // 100 records with two ids, 100 with one
    expect(await claims(pg)).toEqual(expectedClaims);

    // The columns the store queries by agree with the records.
    const { rows } = await pg.pool.query<{ transaction_id: string; version: number; status: string; open: boolean; pos: string; created_at: Date }>(
      'SELECT transaction_id, version, status, open, pos, created_at FROM ledger_records',
    );
    for (const row of rows) {
      const r = built.records.get(row.transaction_id)!;
      expect([row.version, row.status, row.pos, row.created_at.toISOString()]).toEqual([r.version, r.status, r.pos, r.createdAt]);
    }
    expect(await pg.countOpen()).toBe([...built.records.values()].filter((r) => isOpen(r)).length);
    // The due time the worker claims by, on every open record's work row (a settled record has none).
    const due = await pg.pool.query<{ transaction_id: string; due_ms: string; due_needs_verifier: boolean }>(
      'SELECT transaction_id, extract(epoch FROM due_at) * 1000 AS due_ms, due_needs_verifier FROM ledger_work',
    );
    expect(due.rows).toHaveLength(await pg.countOpen());
    expect(new Set(due.rows.map((row) => Number(row.due_ms))).size).toBeGreaterThan(2);
    for (const row of due.rows) {
      const expected = dueOf(built.records.get(row.transaction_id)!);
      expect([Number(row.due_ms), row.due_needs_verifier]).toEqual([expected?.atMs ?? Infinity, expected?.needsVerifier ?? false]);
    }

    for (const letter of built.letters) expect(await pg.getDeadLetter(letter.id)).toEqual(letter);
    expect((await pg.listDeadLetters({ open: true, offset: 0, limit: 10 })).items.map((l) => l.id)).toEqual(['dl-1']);
    // Webhook dedupe events are not copied, and the output says so once; the delivery bindings are:
    // a copy of a delivery naming another shop stays a duplicate after the move.
    expect(await pg.hasWebhookEvent('square', 'evt-1')).toBe(false);
    expect(output.split(WEBHOOK_NOTE).length).toBe(2);
    expect(result.bindings).toEqual({ inFile: 2, imported: 2, skipped: 0, inPostgres: 2 });
    expect(await pg.bindDelivery('shopify', 'digest-a', 'shop-b.myshopify.com')).toBe('shop-a.myshopify.com');
    expect(await pg.bindDelivery('toast', 'digest-b', 'restaurant-x')).toBe('restaurant-b');

    expect(output).toMatch(/records: 300 imported, 0 skipped/);
    expect(output).toMatch(/count check: merchants: file ledger 0, PostgreSQL 0; records: file ledger 300, PostgreSQL 300; dead letters: file ledger 2, PostgreSQL 2; delivery bindings: file ledger 2, PostgreSQL 2: OK/);
    expect(progress).toMatch(/\[#+\] 300 \/ 300 records {2}[\d,]+\/s\n$/);
    expect(output + progress).not.toContain(password);
    expect(output).toContain('postgres://***@');
  });

  it('a second run imports nothing and skips everything', async () => {
    const { result, output } = await copy();
    expect(result.ok).toBe(true);
    expect(result.migrationsApplied).toEqual([]);
    expect(result.records).toEqual({ inFile: RECORDS, imported: 0, skipped: RECORDS, inPostgres: RECORDS });
    expect(result.deadLetters).toEqual({ inFile: 2, imported: 0, skipped: 2, inPostgres: 2 });
    expect(result.audit).toEqual({ inFile: 2, imported: 0, skipped: 2, inPostgres: 2 });
    expect(result.backfill).toEqual({ inFile: 1, imported: 0, skipped: 1, inPostgres: 1 });
    expect(output).toMatch(/records: 0 imported, 300 skipped \(already in PostgreSQL at the same or a newer version\)/);
    expect(await pg.count()).toBe(RECORDS);
  });

  it('brings over a record the file ledger changed since, with its new claims, and leaves one PostgreSQL moved further alone', async () => {
    const changedId = 'square:ORD-7'; // version 4, one operation id
    const aheadId = 'generic:ORD-8'; // version 1 in the file, moved on in PostgreSQL
    const file = new FileLedgerStore(join(dir, 'ledger.json'));
    await file.init();
    let changed: LedgerRecord;
    try {
      changed = nextVersion((await file.get(changedId))!, (r) => {
        r.accrual.state = 'accrued';
        r.accrual.operationIds = [77_777];
        r.history.push({ at: r.updatedAt, event: 'settled by operator' });
      });
      await file.update(changed);
      const letter = (await file.getDeadLetter('dl-1'))!;
      await file.saveDeadLetter({ ...letter, deliveries: letter.deliveries + 1 });
    } finally {
      await file.close();
    }
    const ahead = nextVersion((await pg.get(aheadId))!, (r) => r.history.push({ at: r.updatedAt, event: 'worked on by a PostgreSQL bridge' }));
    await pg.update(ahead);
    expect(await pg.findOperationClaim('default', 10_014)).toBe(changedId);

    const { result } = await copy();
    expect(result.ok).toBe(true);
    expect(result.records).toEqual({ inFile: RECORDS, imported: 1, skipped: RECORDS - 1, inPostgres: RECORDS });
    expect(result.deadLetters).toMatchObject({ imported: 1, skipped: 1 });
    expect(await pg.get(changedId)).toEqual(changed);
    expect(await pg.findOperationClaim('default', 77_777)).toBe(changedId);
    expect(await pg.findOperationClaim('default', 10_014)).toBeUndefined(); // the id its previous version claimed
    expect(await pg.get(aheadId)).toEqual(ahead);
    expect((await pg.getDeadLetter('dl-1'))!.deliveries).toBe(3);
  });

  it('refuses a file ledger a bridge has open: stop the bridge first', async () => {
    const holder = new FileLedgerStore(join(dir, 'ledger.json'));
    await holder.init();
    try {
      await expect(copy()).rejects.toThrow(/in use by process \d+: stop the bridge first/);
      await expect(copy()).rejects.toMatchObject({ exitCode: 1 });
    } finally {
      await holder.close();
    }
  });

  it('importRecords refuses an operation id another transaction holds, naming both, and rolls the batch back', async () => {
    await pg.init(); // the copies above brought the schema up; this loads the search key the import indexes customers with
    const own = (await pg.get('generic:ORD-0'))!; // claims 10000 and 10001
    const thief = makeRecord('generic:THIEF', { at: 999, accrual: 'accrued', operationIds: [10_000] });
    const bystander = makeRecord('generic:BYSTANDER', { at: 998 });
    await expect(pg.importRecords([bystander, thief])).rejects.toThrow(ConflictError);
    await expect(pg.importRecords([bystander, thief])).rejects.toThrow(/operation 10000 is claimed by generic:ORD-0; generic:THIEF claims it too/);
    expect(await pg.get('generic:BYSTANDER')).toBeUndefined();
    expect(await pg.findOperationClaim('default', 10_000)).toBe(own.transactionId);
    // Two records of one batch claiming the same new id.
    const twins = [makeRecord('generic:TWIN-A', { at: 997, operationIds: [55_555] }), makeRecord('generic:TWIN-B', { at: 996, operationIds: [55_555] })];
    await expect(pg.importRecords(twins)).rejects.toThrow(/operation 55555 is claimed by generic:TWIN-A; generic:TWIN-B claims it too/);
    expect(await pg.findOperationClaim('default', 55_555)).toBeUndefined();
  });

  it('copies a record whose text holds a NUL character (which jsonb cannot hold) with U+FFFD in its place', async () => {
    const other = await mkdtemp(join(tmpdir(), 'ledger-copy-nul-'));
    const target = await freshSchema(base!, 'nul');
    try {
      const file = new FileLedgerStore(join(other, 'ledger.json'));
      await file.init();
      await file.insert(makeRecord('generic:FINE', { at: 1 }));
      const bad = makeRecord('generic:NUL-1', { at: 2 });
      bad.attempts[0]!.response = { status: 502, body: 'bad gateway\u0000\u0000' };
      await file.insert(bad);
      await file.close();
      await copy({ from: `file:${join(other, 'ledger.json')}`, to: target.url });
      const pgStore = new PostgresLedgerStore(target.url, { poolSize: 1 });
      try {
        expect((await pgStore.get('generic:NUL-1'))!.attempts[0]!.response).toEqual({ status: 502, body: 'bad gateway\uFFFD\uFFFD' });
        expect(await pgStore.get('generic:FINE')).toBeDefined();
      } finally {
        await pgStore.close();
      }
    } finally {
      await target.drop();
      await rm(other, { recursive: true, force: true });
    }
  });

  it('stops between pages when aborted, and a re-run resumes', async () => {
    const second = await freshSchema(base!, 'resume');
    const other = new PostgresLedgerStore(second.url, { poolSize: 1 });
    try {
      // The progress bar draws after every page here: the first drawing aborts, the copy stops before the next page.
      const aborter = new AbortController();
      const origin = copyLedger({
        from,
        to: second.url,
        log: () => undefined,
        pageSize: 100,
        signal: aborter.signal,
        progress: { stream: { write: () => aborter.abort(), isTTY: false }, plainIntervalMs: 0 },
      });
      await expect(origin).rejects.toMatchObject({ exitCode: 130 });
      // The page being written alongside the first one (two at once) is finished, not cut short.
      const partial = await other.count();
      expect([100, 200]).toContain(partial);
      const { result } = await copy({ to: second.url });
      expect(result.ok).toBe(true);
      expect(result.records.imported + result.records.skipped).toBe(RECORDS);
      expect(result.records.skipped).toBe(partial);
    } finally {
      await other.close();
      await second.drop();
    }
  });
});

describeIf('ledger:copy carries merchants', () => {
  let dir: string;
  let from: string;
  let schema: { url: string; drop(): Promise<void> };
  let pg: PostgresLedgerStore;
  const quiet = (to = schema.url) => {
    const lines: string[] = [];
    return copyLedger({ from, to, log: (l) => lines.push(l), progress: false }).then((result) => ({ result, output: lines.join('\n') }));
  };
  /** The merchant as the file ledger holds it now. */
  const inFile = async (id: string) => {
    const file = new FileLedgerStore(join(dir, 'ledger.json'));
    await file.init();
    try {
      return (await file.getMerchant(id))!;
    } finally {
      await file.close();
    }
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ledger-copy-merchants-'));
    from = `file:${join(dir, 'ledger.json')}`;
    schema = await freshSchema(base!, 'copymerchants');
    pg = new PostgresLedgerStore(schema.url, { poolSize: 2 });
    const file = new FileLedgerStore(join(dir, 'ledger.json'));
    await file.init();
    try {
      // A merchant at version 3 (its accounts changed, its tokens rotated), another at version 1.
      let bakery = makeMerchant('bakery-17', { square: 'ML-BAKERY', shopify: 'bakery-old.myshopify.com' });
      await file.saveMerchant(bakery);
      bakery = { ...bakery, version: 2, pos: { ...bakery.pos, shopify: { ...bakery.pos.shopify!, account: 'bakery-17.myshopify.com' } } };
      await file.saveMerchant(bakery);
      await file.saveMerchant({ ...bakery, version: 3, tokens: { pos: 'pos-hash-bakery-rotated', admin: 'admin-hash-bakery-rotated' } });
      await file.saveMerchant({ ...makeMerchant('cafe-2', { toast: 'toast-cafe-2', clover: 'CLOVERCAFE002' }), createdAt: '2026-03-01T10:00:00.000Z' });
      // The same transactionId in three merchants, the default one included, and a dead letter of one.
      for (const merchantId of [undefined, 'bakery-17', 'cafe-2']) {
        await file.insert({ ...makeRecord('generic:A-1001', { accrual: 'accrued', operationIds: [1] }), ...(merchantId ? { merchantId } : {}) });
      }
      await file.saveDeadLetter({ ...deadLetter('dl-cafe', 3, false), merchantId: 'cafe-2' });
    } finally {
      await file.close();
    }
  });
  afterAll(async () => {
    await pg?.close().catch(() => undefined);
    await schema?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('copies every merchant as it is (version, sealed secrets, token hashes, POS accounts) with the records of merchants that share a transactionId, and the counts match', async () => {
    const { result, output } = await quiet();
    expect(result.ok).toBe(true);
    expect(result.merchants).toEqual({ inFile: 2, imported: 2, skipped: 0, inPostgres: 2 });
    expect(result.records).toEqual({ inFile: 3, imported: 3, skipped: 0, inPostgres: 3 });
    expect(result.deadLetters).toEqual({ inFile: 1, imported: 1, skipped: 0, inPostgres: 1 });
    expect(output).toMatch(/from: file ledger .*: 2 merchants, 3 records/);
    expect(output).toMatch(/merchants: 2 imported, 0 skipped/);
    expect(output).toContain(SECRETS_NOTE);
    expect(output).toMatch(/count check: merchants: file ledger 2, PostgreSQL 2; records: file ledger 3, PostgreSQL 3; dead letters: file ledger 1, PostgreSQL 1: OK/);

    for (const id of ['bakery-17', 'cafe-2']) expect(await pg.getMerchant(id)).toEqual(await inFile(id));
    expect((await pg.getMerchant('bakery-17'))!.version).toBe(3);
    expect((await pg.listMerchants({ offset: 0, limit: 10 })).items.map((m) => m.id)).toEqual(['bakery-17', 'cafe-2']);
    // Found by what the bridge looks them up by: token hashes and POS accounts (the current ones only).
    expect((await pg.findMerchantByToken('pos', 'pos-hash-bakery-rotated'))?.id).toBe('bakery-17');
    expect((await pg.findMerchantByToken('admin', 'admin-hash-bakery-rotated'))?.id).toBe('bakery-17');
    expect(await pg.findMerchantByToken('pos', 'pos-hash-bakery-17')).toBeUndefined();
    expect((await pg.findMerchantByAccount('shopify:bakery-17.myshopify.com'))?.id).toBe('bakery-17');
    expect(await pg.findMerchantByAccount('shopify:bakery-old.myshopify.com')).toBeUndefined();
    expect((await pg.findMerchantByAccount('clover:clovercafe002'))?.id).toBe('cafe-2');
    // Three records, one transactionId, each its merchant's with its own claim of operation 1.
    for (const merchantId of ['default', 'bakery-17', 'cafe-2']) {
      const key = merchantId === 'default' ? 'generic:A-1001' : `${merchantId}/generic:A-1001`;
      expect(await pg.get(key)).toMatchObject({ transactionId: 'generic:A-1001', ...(merchantId === 'default' ? {} : { merchantId }) });
      expect(await pg.findOperationClaim(merchantId, 1)).toBe('generic:A-1001');
    }
    expect((await pg.listDeadLetters({ merchantId: 'cafe-2', offset: 0, limit: 10 })).items.map((l) => l.id)).toEqual(['dl-cafe']);
  });

  it('a second run skips every merchant; a merchant changed in the file since is brought over with its accounts', async () => {
    const again = await quiet();
    expect(again.result.ok).toBe(true);
    expect(again.result.merchants).toEqual({ inFile: 2, imported: 0, skipped: 2, inPostgres: 2 });

    const file = new FileLedgerStore(join(dir, 'ledger.json'));
    await file.init();
    const cafe = (await file.getMerchant('cafe-2'))!;
    const { toast: _toast, ...rest } = cafe.pos;
    await file.saveMerchant({ ...cafe, version: 2, status: 'suspended', pos: { ...rest, square: { account: 'ML-CAFE' } } });
    await file.close();
    const { result } = await quiet();
    expect(result.ok).toBe(true);
    expect(result.merchants).toEqual({ inFile: 2, imported: 1, skipped: 1, inPostgres: 2 });
    expect(await pg.getMerchant('cafe-2')).toEqual(await inFile('cafe-2'));
    expect((await pg.findMerchantByAccount('square:ml-cafe'))?.id).toBe('cafe-2');
    expect(await pg.findMerchantByAccount('toast:toast-cafe-2')).toBeUndefined();
  });

  it('refuses a merchant whose POS account another merchant holds in PostgreSQL, writing nothing of it, and says what to do', async () => {
    const target = await freshSchema(base!, 'copyclash');
    const other = new PostgresLedgerStore(target.url, { poolSize: 1 });
    try {
      await other.init();
      await other.saveMerchant(makeMerchant('squatter', { square: 'ml-bakery' }));
      const copy = quiet(target.url);
      await expect(copy).rejects.toThrow(/merchant bakery-17: POS account square:ml-bakery belongs to merchant squatter here: nothing of this merchant was written/);
      await expect(copy).rejects.toMatchObject({ exitCode: 1 });
      expect(await other.getMerchant('bakery-17')).toBeUndefined();
      expect((await other.findMerchantByAccount('square:ml-bakery'))?.id).toBe('squatter');
    } finally {
      await other.close();
      await target.drop();
    }
  });
});

describeIf('migrate', () => {
  it('applies the migrations to a fresh schema, and is a no-op the second time', async () => {
    const schema = await freshSchema(base!, 'migrate');
    try {
      const first: string[] = [];
      expect(await migrateLedger({ url: schema.url, log: (l) => first.push(l) })).toEqual({ applied: MIGRATIONS.map((m) => m.version), version: MIGRATIONS.at(-1)!.version });
      expect(first.join('\n')).toMatch(/applied migration 1: /);
      const second: string[] = [];
      expect(await migrateLedger({ url: schema.url, log: (l) => second.push(l) })).toEqual({ applied: [], version: MIGRATIONS.at(-1)!.version });
      expect(second.join('\n')).toMatch(`up to date: schema version ${MIGRATIONS.at(-1)!.version}, nothing applied`);
      const store = new PostgresLedgerStore(schema.url, { poolSize: 1 });
      try {
        expect(await store.count()).toBe(0);
      } finally {
        await store.close();
      }
    } finally {
      await schema.drop();
    }
  });
});

describe('ledger:copy of a damaged journal', () => {
  it('refuses until a bridge start-up has put the records that may have lost a call in doubt', async () => {
    const damagedDir = await mkdtemp(join(tmpdir(), 'ledger-copy-damaged-'));
    try {
      const store = new FileLedgerStore(join(damagedDir, 'ledger.json'));
      await store.init();
      for (const id of ['generic:D-1', 'generic:D-2', 'generic:D-3']) await store.insert(makeRecord(id, { accrual: 'pending' }));
      await store.close();
      // Zeros over the middle of the journal, as an OS crash leaves pages that were never written.
      const segment = join(damagedDir, 'ledger.journal', '000001.jsonl');
      const handle = await open(segment, 'r+');
      const { size } = await handle.stat();
      await handle.write(Buffer.alloc(64), 0, 64, Math.floor(size / 2));
      await handle.close();

      const run = copyLedger({ from: `file:${join(damagedDir, 'ledger.json')}`, to: 'postgres://postgres@127.0.0.1:1/none', log: () => undefined, progress: false });
      await expect(run).rejects.toThrow(/damaged journal \(1 unreadable, 0 stale line\(s\)\): start the bridge on it once/);
    } finally {
      await rm(damagedDir, { recursive: true, force: true });
    }
  });
});
