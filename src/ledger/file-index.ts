/**
 * The file ledger's on-disk index (`<stem>.index.sqlite`, SQLite through `@photostructure/sqlite`): what the
 * store looks records up by, so that memory holds no entry per record and start-up reads no line
 * of the journal it has indexed already. The journal stays the source of truth; everything here is
 * derived from it (and from the audit trail's and the dead letters' own files) and can be rebuilt
 * from them at any time (`FileLedgerStore` decides when: see file-store.ts).
 *
 * Why SQLite: a B-tree per query shape, read through a bounded page cache, costs what a query
 * answers whatever the ledger holds; it is synchronous, so a write's journal append
 * and its index update happen with nothing in between, as the in-memory index's did. Why
 * `synchronous=OFF`: the index is never the only copy of anything, and a power loss is already
 * detected (the lock names the boot) and answered by a rebuild; syncing it would double the cost
 * of a write for nothing.
 *
 * Tables: `records` (one row per ledger key: the fields lists, claims and the worker's passes look
 * at, and where the latest version's line lies), `refunds` (folded: store.ts foldCase),
 * `customers` (keyed hashes: customer-index.ts), `payloads` (where each kept POS payload's line
 * lies), `claims`, `accrual_keys`, `attention`
 * (exactly `attentionEntriesOf` of each record), `webhook_events`, `dead_letters`, `audit`, and
 * `segments` and `meta`: how far into the journal the index has applied lines (`applied_segment`,
 * `segments.applied_to`), how many live bytes each segment holds, and each sealed segment's stamp
 * (`Journal.stamp`), by which a file changed behind the index's back is told.
 *
 * Orders: SQLite compares text as UTF-8 bytes (BINARY), which is JavaScript's code-unit order for
 * text of the Basic Multilingual Plane but not beyond it. Every order and every cursor of this store
 * is taken in SQLite, so its pages are consistent among themselves whatever the keys hold.
 */
import { existsSync } from 'node:fs';
// node:sqlite's API as a package with prebuilt binaries for every platform npm installs on: no
// compiler runs at npm ci (a native build of SQLite was most of a fresh clone's install time), and
// it is the same API as Node's own node:sqlite, which later Node versions ship built in.
import { DatabaseSync, type DatabaseSyncInstance, type StatementSyncInstance } from '@photostructure/sqlite';
import type { AttentionKind } from '../state/attention.js';
import type { Location, Position, SegmentStamp } from './journal.js';
import type { LedgerStatus } from '../state/record.js';
import { attentionCountsOf, CUSTOMER_SEARCH_DEPTH, foldCase, likeLiteral, LIST_COUNT_CAP, type AttentionCounts, type AuditEntry, type AuditQuery, type DeadLetterCounts, type DeadLetterQuery } from './store.js';

/**
 * Bumped whenever the schema or the meaning of a column changes: an index of another format is
 * rebuilt. 3: delivery bindings' keys are held escaped (`bindingText`).
 */
export const INDEX_FORMAT = 3;

/** What the index keeps of one attention entry (`attentionEntriesOf`). */
export interface IndexedAttention {
  kind: AttentionKind;
  since: string;
}

/** One record's row: what its latest journal line's header says, and where that line lies. */
export interface RecordRow {
  key: string;
  merchant: string;
  version: number;
  status: LedgerStatus;
  pos: string;
  createdMs: number;
  open: boolean;
  /** Open records only: the due time (`dueOf`); null when only an operator can move the record. */
  dueMs: number | null;
  dueVerifier: boolean;
  unsettled: number | null;
  orderId: string | null;
  refunds: string[];
  /** The record's customer search entries (customer-index.ts `customerHashesOf`). */
  customers: string[];
  ops: number[];
  accrualKeys: string[];
  attention: IndexedAttention[];
  /**
   * The line's header did not hold everything (written by an earlier build: no order id, no due
   * time) or what only the body tells (attention entries): the body is read once the scan is over.
   */
  bodyPending: boolean;
  location: Location;
}

/** Where a listing of records starts and what it keeps (`list`, `count`). */
export interface RecordFilter {
  merchantId?: string;
  statuses?: readonly LedgerStatus[];
  pos?: string;
  /** Order ids starting with this, folded (store.ts foldCase). */
  orderId?: string;
  /** Refund ids starting with this, folded. */
  refundId?: string;
  /** Customer search entries (customer-index.ts `customerHash`): records with any of them. */
  customerHashes?: readonly string[];
  fromMs?: number;
  toMs?: number;
}

export interface KeyAt {
  key: string;
  location: Location;
}

export interface DeadLetterRow {
  id: string;
  receivedMs: number;
  pos: string;
  merchantId?: string;
  open: boolean;
  dueMs?: number;
  reasonCode: string;
}

interface SegmentRow {
  n: number;
  live: number;
  applied_to: number;
  stamp_size: number | null;
  stamp_mtime: string | null;
}

/** Columns of `records` and how a row's field is stored in each. */
const COLUMNS = {
  merchant: (r: RecordRow) => r.merchant,
  version: (r: RecordRow) => r.version,
  status: (r: RecordRow) => r.status,
  pos: (r: RecordRow) => r.pos,
  created_ms: (r: RecordRow) => r.createdMs,
  open: (r: RecordRow) => (r.open ? 1 : 0),
  due_ms: (r: RecordRow) => r.dueMs,
  due_verifier: (r: RecordRow) => (r.dueVerifier ? 1 : 0),
  unsettled: (r: RecordRow) => r.unsettled,
  order_id: (r: RecordRow) => r.orderId,
  order_folded: (r: RecordRow) => (r.orderId === null ? null : foldCase(r.orderId)),
  refunds: (r: RecordRow) => listText(r.refunds),
  customers: (r: RecordRow) => listText(r.customers),
  ops: (r: RecordRow) => listText(r.ops),
  akeys: (r: RecordRow) => listText(r.accrualKeys),
  attention: (r: RecordRow) => listText(r.attention),
  body_pending: (r: RecordRow) => (r.bodyPending ? 1 : 0),
  segment: (r: RecordRow) => r.location.segment,
  line_offset: (r: RecordRow) => r.location.offset,
  line_length: (r: RecordRow) => r.location.length,
} as const;
type Column = keyof typeof COLUMNS;
const COLUMN_NAMES = Object.keys(COLUMNS) as Column[];

/**
 * Deliveries bound to the account they were first taken for (store.ts `bindDelivery`), kept for good.
 * Added after format 2 without a rebuild: a journal of an earlier build holds no `b` line, so an
 * index opened without the table is complete once it has an empty one.
 */
const DELIVERY_BINDINGS = 'CREATE TABLE IF NOT EXISTS delivery_bindings (bkey TEXT PRIMARY KEY NOT NULL, account TEXT NOT NULL, segment INTEGER NOT NULL, line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL) WITHOUT ROWID';

const TABLES = `
  CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
  CREATE TABLE segments (n INTEGER PRIMARY KEY, live INTEGER NOT NULL DEFAULT 0, applied_to INTEGER NOT NULL DEFAULT 0, stamp_size INTEGER, stamp_mtime TEXT);
  CREATE TABLE records (
    key TEXT PRIMARY KEY NOT NULL, merchant TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL, pos TEXT NOT NULL,
    created_ms INTEGER NOT NULL, open INTEGER NOT NULL, due_ms INTEGER, due_verifier INTEGER NOT NULL, unsettled INTEGER,
    order_id TEXT, order_folded TEXT, refunds TEXT, customers TEXT, ops TEXT, akeys TEXT, attention TEXT, body_pending INTEGER NOT NULL,
    segment INTEGER NOT NULL, line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE refunds (refund_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (refund_id, key)) WITHOUT ROWID;
  CREATE TABLE customers (hash TEXT NOT NULL, created_ms INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (hash, created_ms, key)) WITHOUT ROWID;
  CREATE TABLE payloads (key TEXT PRIMARY KEY NOT NULL, segment INTEGER NOT NULL, line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL) WITHOUT ROWID;
  CREATE TABLE claims (merchant TEXT NOT NULL, op INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (merchant, op)) WITHOUT ROWID;
  CREATE TABLE accrual_keys (akey TEXT PRIMARY KEY NOT NULL, key TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE attention (since_ms INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, merchant TEXT NOT NULL, since TEXT NOT NULL, PRIMARY KEY (since_ms, key, kind)) WITHOUT ROWID;
  CREATE TABLE webhook_events (wkey TEXT PRIMARY KEY NOT NULL, at_ms INTEGER NOT NULL, segment INTEGER NOT NULL, line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL) WITHOUT ROWID;
  ${DELIVERY_BINDINGS};
  CREATE TABLE dead_letters (id TEXT PRIMARY KEY NOT NULL, received_ms INTEGER NOT NULL, pos TEXT NOT NULL, merchant TEXT, open INTEGER NOT NULL, due_ms INTEGER, reason_code TEXT NOT NULL, dirty INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
  CREATE TABLE audit (seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, actor TEXT NOT NULL, merchant TEXT, entry TEXT NOT NULL);
`;

/**
 * One index per query shape, so that each costs what it answers. Secondary indexes of a WITHOUT
 * ROWID table end with its key, so `(created_ms)` orders by createdAt then ledger key: the list's
 * order and its cursor. Partial indexes hold only the rows they are for (open, due, unsettled):
 * a settled record costs them nothing. Created after the rows when the index is rebuilt (sorting
 * once is faster than inserting a million times).
 */
const INDEXES = `
  CREATE INDEX records_created ON records (created_ms);
  CREATE INDEX records_merchant ON records (merchant, created_ms);
  CREATE INDEX records_status ON records (status, created_ms);
  CREATE INDEX records_merchant_status ON records (merchant, status, created_ms);
  CREATE INDEX records_order ON records (order_folded);
  CREATE INDEX records_open ON records (created_ms) WHERE open = 1;
  CREATE INDEX records_due ON records (due_ms) WHERE due_ms IS NOT NULL;
  CREATE INDEX records_unsettled ON records (merchant, unsettled) WHERE unsettled IS NOT NULL;
  CREATE INDEX records_body_pending ON records (body_pending) WHERE body_pending = 1;
  CREATE INDEX attention_merchant ON attention (merchant, since_ms);
  CREATE INDEX webhook_events_at ON webhook_events (at_ms);
  CREATE INDEX dead_letters_received ON dead_letters (received_ms);
  CREATE INDEX dead_letters_open_received ON dead_letters (received_ms) WHERE open = 1;
  CREATE INDEX dead_letters_due ON dead_letters (due_ms) WHERE due_ms IS NOT NULL;
  CREATE INDEX dead_letters_open ON dead_letters (reason_code) WHERE open = 1;
  CREATE INDEX dead_letters_dirty ON dead_letters (dirty) WHERE dirty = 1;
  CREATE INDEX audit_at ON audit (at_ms);
`;

/** SQLite's page cache, in KiB (negative `cache_size`): what the index may hold in memory, whatever the ledger's size. */
const CACHE_KIB = 16_000;

export class LedgerIndex {
  readonly #db: DatabaseSyncInstance;
  readonly #statements = new Map<string, CheckedStatement>();
  /** The segment of the last line applied (`meta.applied_segment`), kept here so that a write moves it only when it changes. */
  #appliedSegment: number;

  private constructor(db: DatabaseSyncInstance) {
    this.#db = db;
    this.#appliedSegment = Number(this.meta('applied_segment') ?? 0);
  }

  /**
   * Opens an existing index. Throws when the file is not an SQLite database or not a complete index
   * of this format (the caller rebuilds it then); `ledger` must be the one its manifest names.
   */
  static open(path: string, ledger: string): LedgerIndex {
    // Opening a missing file would create an empty database: an index that is not there is rebuilt instead.
    if (!existsSync(path)) throw new Error(`no index at ${path}`);
    const db = new DatabaseSync(path);
    try {
      configure(db);
      const index = new LedgerIndex(db);
      const format = index.meta('format');
      if (format !== INDEX_FORMAT) throw new Error(`index format ${String(format)}, this build writes ${INDEX_FORMAT}`);
      if (index.meta('state') !== 'ready') throw new Error('the index was being built when its process stopped');
      if (index.meta('ledger') !== ledger) throw new Error('the index belongs to another ledger');
      db.exec(DELIVERY_BINDINGS);
      return index;
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** A new, empty index at `path` (the file must exist, private, and be empty), without its secondary indexes (`createIndexes`), not ready (`markReady`). */
  static create(path: string, ledger: string): LedgerIndex {
    const db = new DatabaseSync(path);
    try {
      configure(db);
      db.exec(TABLES);
      const index = new LedgerIndex(db);
      index.#setMeta({ format: INDEX_FORMAT, state: 'building', ledger, applied_segment: 0, recovery_pending: 0, audit_bytes: 0 });
      return index;
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /**
   * After the rows of a rebuild: the secondary indexes. Each is built by sorting the table, which
   * spills to temporary files past the page cache: on disk for this (`temp_store = FILE`), since
   * in memory they grow with the ledger (at a million records the rebuild's peak was 178 MB resident
   * with them in memory, 148 MB without).
   */
  createIndexes(): void {
    this.#db.exec('PRAGMA temp_store = FILE');
    try {
      this.#db.exec(INDEXES);
    } finally {
      this.#db.exec('PRAGMA temp_store = MEMORY');
    }
  }

  /** The rebuild is complete: `open` accepts the index from now on. */
  markReady(): void {
    this.#setMeta({ state: 'ready' });
  }

  /**
   * Closes the index. `clean`: the store stopped cleanly, everything is applied and the segments
   * stamped; the index is then checkpointed and synced (an OS crash right after a clean stop finds
   * no lock to tell it, so what a clean stop leaves must be on disk).
   */
  close(clean: boolean): void {
    if (clean) {
      this.#db.exec('PRAGMA synchronous = FULL');
      this.#db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    }
    this.#db.close();
  }

  // ---------------------------------------------------------------- meta, segments

  meta(name: string): unknown {
    return (this.#prepare('SELECT value FROM meta WHERE name = ?').get(name) as { value: unknown } | undefined)?.value;
  }

  #setMeta(values: Record<string, unknown>): void {
    const set = this.#prepare('INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value');
    for (const [name, value] of Object.entries(values)) set.run(name, value);
  }

  /** The journal position the index has applied lines up to. */
  applied(): Position {
    const segment = this.#appliedSegment;
    return { segment, offset: this.segment(segment)?.applied_to ?? 0 };
  }

  segment(n: number): SegmentRow | undefined {
    return this.#prepare('SELECT * FROM segments WHERE n = ?').get(n) as SegmentRow | undefined;
  }

  segments(): SegmentRow[] {
    return this.#prepare('SELECT * FROM segments ORDER BY n').all() as SegmentRow[];
  }

  /** A segment the journal rolled to (no line in it yet). */
  addSegment(n: number): void {
    this.#prepare('INSERT OR IGNORE INTO segments (n) VALUES (?)').run(n);
  }

  dropSegment(n: number): void {
    this.#prepare('DELETE FROM segments WHERE n = ?').run(n);
  }

  /** Records what a sealed or closed segment looked like (`Journal.stamp`); null: it is being appended to. */
  setStamp(n: number, stamp: SegmentStamp | null): void {
    this.#prepare('UPDATE segments SET stamp_size = ?, stamp_mtime = ? WHERE n = ?').run(stamp?.size ?? null, stamp?.mtimeNs ?? null, n);
  }

  /** Whether the last start-up found damage or stale lines that the service has not acted on (`FileLedgerStore.compactDamaged`). */
  get recoveryPending(): boolean {
    return this.meta('recovery_pending') === 1;
  }

  set recoveryPending(pending: boolean) {
    this.#setMeta({ recovery_pending: pending ? 1 : 0 });
  }

  /** Live bytes of every segment: the rows' lines and the webhook events', counted anew (after a rebuild). */
  countLive(segments: readonly number[], sizes: (n: number) => number): void {
    const live = new Map<number, number>();
    for (const table of ['records', 'webhook_events', 'payloads', 'delivery_bindings']) {
      for (const row of this.#prepare(`SELECT segment, sum(line_length) AS bytes FROM ${table} GROUP BY segment`).all() as { segment: number; bytes: number }[]) {
        live.set(row.segment, (live.get(row.segment) ?? 0) + row.bytes);
      }
    }
    this.#db.prepare('DELETE FROM segments').run();
    const insert = this.#prepare('INSERT INTO segments (n, live, applied_to) VALUES (?, ?, ?)');
    for (const n of segments) insert.run(n, live.get(n) ?? 0, sizes(n));
    this.#moveApplied(segments.at(-1) ?? 0);
  }

  liveBytes(segment?: number): number {
    if (segment !== undefined) return this.segment(segment)?.live ?? 0;
    return (this.#prepare('SELECT coalesce(sum(live), 0) AS bytes FROM segments').get() as { bytes: number }).bytes;
  }

  #moveApplied(segment: number): void {
    if (segment === this.#appliedSegment) return;
    this.#setMeta({ applied_segment: segment });
    this.#appliedSegment = segment;
  }

  /** `location`'s line is applied: its segment's live bytes grow by it (and shrink by `replaced`'s), and the applied position moves past it. */
  #applied(location: Location, replaced: Location | undefined, live = true): void {
    // One statement when the line replaces one in its own segment (the usual update).
    const sameSegment = replaced?.segment === location.segment;
    if (replaced && !sameSegment) this.#prepare('UPDATE segments SET live = live - ? WHERE n = ?').run(replaced.length, replaced.segment);
    const end = location.offset + location.length;
    const grows = (live ? location.length : 0) - (sameSegment ? replaced!.length : 0);
    const update = this.#prepare('UPDATE segments SET live = live + ?, applied_to = max(applied_to, ?) WHERE n = ?').run(grows, end, location.segment);
    if (update.changes === 0) this.#prepare('INSERT INTO segments (n, live, applied_to) VALUES (?, ?, ?)').run(location.segment, live ? location.length : 0, end);
    this.#moveApplied(location.segment);
  }

  /**
   * Runs `work` in one transaction, rolled back whole when it throws; inside another, as part of
   * it, by prepared BEGIN and COMMIT statements (a wrapper built per call cost ~4 µs, where a
   * write's whole budget for its index is a few times that).
   */
  transaction<T>(work: () => T): T {
    if (this.#db.isTransaction) return work();
    this.#prepare('BEGIN').run();
    try {
      const result = work();
      this.#prepare('COMMIT').run();
      return result;
    } catch (error) {
      if (this.#db.isTransaction) this.#prepare('ROLLBACK').run();
      throw error;
    }
  }

  // ---------------------------------------------------------------- records: writes

  record(key: string): RecordRow | undefined {
    const row = this.#prepare('SELECT * FROM records WHERE key = ?').get(key) as Record<string, unknown> | undefined;
    return row && rowOf(row);
  }

  /**
   * Stores `row` over `previous` (the key's current row, read by the caller) and moves the claims,
   * accrual keys, refund ids and attention entries from the previous version's to this one's; the
   * line's bytes become live and the applied position moves past it (unless `move` is false: a
   * row completed from its body, whose line is where it was). Only the columns that change are
   * written, so an index whose columns did not change is not touched.
   */
  putRecord(row: RecordRow, previous: RecordRow | undefined, move = true): void {
    if (!previous) {
      this.#prepare(`INSERT INTO records (key, ${COLUMN_NAMES.join(', ')}) VALUES (?${', ?'.repeat(COLUMN_NAMES.length)})`).run(row.key, ...COLUMN_NAMES.map((c) => COLUMNS[c](row)));
    } else {
      const changed = COLUMN_NAMES.filter((c) => COLUMNS[c](row) !== COLUMNS[c](previous));
      if (changed.length) this.#prepare(`UPDATE records SET ${changed.map((c) => `${c} = ?`).join(', ')} WHERE key = ?`).run(...changed.map((c) => COLUMNS[c](row)), row.key);
    }
    const before = previous ?? EMPTY_ROW;
    // Kept folded (a search folds what it looks for): two ids differing in case only are one row.
    const { added: refundsAdded, removed: refundsRemoved } = difference([...new Set(before.refunds.map(foldCase))], [...new Set(row.refunds.map(foldCase))]);
    for (const id of refundsRemoved) this.#prepare('DELETE FROM refunds WHERE refund_id = ? AND key = ?').run(id, row.key);
    for (const id of refundsAdded) this.#prepare('INSERT OR IGNORE INTO refunds (refund_id, key) VALUES (?, ?)').run(id, row.key);
    const { added: customersAdded, removed: customersRemoved } = difference(before.customers, row.customers);
    for (const hash of customersRemoved) this.#prepare('DELETE FROM customers WHERE hash = ? AND created_ms = ? AND key = ?').run(hash, previous!.createdMs, row.key);
    for (const hash of customersAdded) this.#prepare('INSERT OR IGNORE INTO customers (hash, created_ms, key) VALUES (?, ?, ?)').run(hash, row.createdMs, row.key);
    const { added: opsAdded, removed: opsRemoved } = difference(before.ops, row.ops);
    for (const op of opsRemoved) this.#prepare('DELETE FROM claims WHERE merchant = ? AND op = ? AND key = ?').run(row.merchant, op, row.key);
    // The store refused any id another record holds; on a rebuild, the later line wins, as the in-memory index's did.
    for (const op of opsAdded) this.#prepare('INSERT OR REPLACE INTO claims (merchant, op, key) VALUES (?, ?, ?)').run(row.merchant, op, row.key);
    const { added: keysAdded, removed: keysRemoved } = difference(before.accrualKeys, row.accrualKeys);
    for (const akey of keysRemoved) this.#prepare('DELETE FROM accrual_keys WHERE akey = ? AND key = ?').run(akey, row.key);
    // A key already held stays with its holder: two unsettled accruals of one key can only come from
    // an earlier build's ledger, and the history verifier treats such a pair as ambiguous.
    for (const akey of keysAdded) this.#prepare('INSERT OR IGNORE INTO accrual_keys (akey, key) VALUES (?, ?)').run(akey, row.key);
    const entryKey = (e: IndexedAttention) => `${e.kind}\u0000${e.since}`;
    const beforeEntries = new Map(before.attention.map((e) => [entryKey(e), e]));
    const afterEntries = new Map(row.attention.map((e) => [entryKey(e), e]));
    for (const [k, e] of beforeEntries) if (!afterEntries.has(k)) this.#prepare('DELETE FROM attention WHERE since_ms = ? AND key = ? AND kind = ?').run(sinceMs(e.since), row.key, e.kind);
    for (const [k, e] of afterEntries) if (!beforeEntries.has(k)) this.#prepare('INSERT OR REPLACE INTO attention (since_ms, key, kind, merchant, since) VALUES (?, ?, ?, ?, ?)').run(sinceMs(e.since), row.key, e.kind, row.merchant, e.since);
    if (move) this.#applied(row.location, previous?.location);
  }

  /** A record's line copied elsewhere by compaction (or found copied by a scan): only where it lies changes. */
  moveRecord(key: string, from: Location, to: Location): void {
    this.#prepare('UPDATE records SET segment = ?, line_offset = ?, line_length = ? WHERE key = ?').run(to.segment, to.offset, to.length, key);
    this.#applied(to, from);
  }

  /** A line the index does not keep (a stale version, an expired webhook event): applied, not live. */
  skipLine(location: Location): void {
    this.#applied(location, undefined, false);
  }

  /** Up to `limit` keys whose rows wait for their bodies to be read (`RecordRow.bodyPending`). */
  pendingBodies(limit: number): KeyAt[] {
    return (this.#prepare('SELECT key, segment, line_offset, line_length FROM records INDEXED BY records_body_pending WHERE body_pending = 1 LIMIT ?').all(limit) as Record<string, unknown>[]).map(keyAtOf);
  }

  /** Where the latest version of the record `key` lies, if there is one. */
  lineAt(key: string): Location | undefined {
    const row = this.#prepare('SELECT segment, line_offset, line_length FROM records WHERE key = ?').get(key) as Record<string, number> | undefined;
    return row && { segment: row.segment!, offset: row.line_offset!, length: row.line_length! };
  }

  // ---------------------------------------------------------------- records: reads

  claimHolder(merchant: string, op: number): string | undefined {
    return (this.#prepare('SELECT key FROM claims WHERE merchant = ? AND op = ?').get(merchant, op) as { key: string } | undefined)?.key;
  }

  accrualKeyHolder(akey: string): string | undefined {
    return (this.#prepare('SELECT key FROM accrual_keys WHERE akey = ?').get(akey) as { key: string } | undefined)?.key;
  }

  count(): number {
    return (this.#prepare('SELECT count(*) AS n FROM records').get() as { n: number }).n;
  }

  countOpen(): number {
    return (this.#prepare('SELECT count(*) AS n FROM records INDEXED BY records_open WHERE open = 1').get() as { n: number }).n;
  }

  countOpenByStatus(): Partial<Record<LedgerStatus, number>> {
    const counts: Partial<Record<LedgerStatus, number>> = {};
    for (const row of this.#prepare('SELECT status, count(*) AS n FROM records INDEXED BY records_open WHERE open = 1 GROUP BY status').all() as { status: LedgerStatus; n: number }[]) counts[row.status] = row.n;
    return counts;
  }

  /**
   * A page of `list`: newest first (createdAt, then ledger key, both descending), after `after`.
   * The index that walks is chosen here, not by SQLite's planner (it has no statistics to go by):
   * a refund id or an order id finds its few rows directly; statuses walk their own index each
   * (the merchant's, with a merchant), newest first, and only the first `offset + limit` of each
   * are merged; a merchant walks its index; else the time index. The remaining filters are checked
   * on the rows walked: a POS alone or a time range costs the rows walked to fill the page (and the
   * count, up to its cap), which is why the POS has no index of its own (every index is paid for by
   * every write: ~3 µs each here).
   */
  listRecords(filter: RecordFilter, page: { after?: { createdMs: number; key: string }; offset: number; limit: number }): KeyAt[] {
    const take = page.offset + page.limit;
    if (take <= 0) return [];
    const order = 'ORDER BY created_ms DESC, key DESC';
    const cursor = page.after ? [page.after.createdMs, page.after.key] : [];
    const parts = this.#walks(filter).map((walk) => {
      const where = [...walk.where, ...(page.after ? ['(r.created_ms, r.key) < (?, ?)'] : [])];
      return { sql: `SELECT * FROM (SELECT r.key AS key, r.created_ms AS created_ms, r.segment AS segment, r.line_offset AS line_offset, r.line_length AS line_length ${walk.from} WHERE ${where.join(' AND ')} ORDER BY r.created_ms DESC, r.key DESC LIMIT ?)`, params: [...walk.params, ...cursor, take] };
    });
    const sql = `${parts.map((p) => p.sql).join(' UNION ALL ')} ${order} LIMIT ? OFFSET ?`;
    return (this.#prepare(sql).all(...parts.flatMap((p) => p.params), page.limit, page.offset) as Record<string, unknown>[]).map(keyAtOf);
  }

  /** How many records match `filter`, counted up to LIST_COUNT_CAP + 1 (`pageOf` says capped past it). */
  countRecords(filter: RecordFilter): number {
    const parts = this.#walks(filter).map((walk) => ({ sql: `(SELECT count(*) FROM (SELECT 1 ${walk.from} WHERE ${walk.where.join(' AND ')} LIMIT ${LIST_COUNT_CAP + 1}))`, params: walk.params }));
    const n = (this.#prepare(`SELECT ${parts.map((p) => p.sql).join(' + ')} AS n`).get(...parts.flatMap((p) => p.params)) as { n: number }).n;
    return Math.min(n, LIST_COUNT_CAP + 1);
  }

  /** The index walks that together find `filter`'s matches in order (one per status when several are asked for), with the checks left. */
  #walks(filter: RecordFilter): { from: string; where: string[]; params: unknown[] }[] {
    const checks = (skip: { merchant?: boolean; status?: boolean; pos?: boolean; order?: boolean }) => {
      const where: string[] = ['1'];
      const params: unknown[] = [];
      if (filter.merchantId !== undefined && !skip.merchant) where.push('r.merchant = ?'), params.push(filter.merchantId);
      if (filter.statuses && !skip.status) where.push(`r.status IN (${filter.statuses.map(() => '?').join(', ')})`), params.push(...filter.statuses);
      if (filter.pos !== undefined && !skip.pos) where.push('r.pos = ?'), params.push(filter.pos);
      if (filter.orderId !== undefined && !skip.order) where.push(...PREFIX('r.order_folded')), params.push(...prefixParams(filter.orderId));
      if (filter.fromMs !== undefined) where.push('r.created_ms >= ?'), params.push(filter.fromMs);
      if (filter.toMs !== undefined) where.push('r.created_ms <= ?'), params.push(filter.toMs);
      return { where, params };
    };
    if (filter.customerHashes !== undefined) {
      const rest = checks({});
      // Each identifier's newest CUSTOMER_SEARCH_DEPTH (the primary key orders them); IN: a record with two of them is listed once.
      const newest = filter.customerHashes.map(() => `SELECT * FROM (SELECT c.key FROM customers c WHERE c.hash = ? ORDER BY c.created_ms DESC, c.key DESC LIMIT ${CUSTOMER_SEARCH_DEPTH})`);
      const found = newest.length ? newest.join(' UNION ALL ') : 'SELECT NULL WHERE 0';
      return [{ from: 'FROM records r', where: [`r.key IN (${found})`, ...rest.where], params: [...filter.customerHashes, ...rest.params] }];
    }
    if (filter.refundId !== undefined) {
      const rest = checks({});
      // DISTINCT: two refund ids of one record can share the prefix.
      return [{ from: 'FROM records r', where: [`r.key IN (SELECT f.key FROM refunds f WHERE ${PREFIX('f.refund_id').join(' AND ')})`, ...rest.where], params: [...prefixParams(filter.refundId), ...rest.params] }];
    }
    if (filter.orderId !== undefined) {
      const rest = checks({ order: true });
      return [{ from: 'FROM records r INDEXED BY records_order', where: [...PREFIX('r.order_folded'), ...rest.where], params: [...prefixParams(filter.orderId), ...rest.params] }];
    }
    if (filter.statuses) {
      const rest = checks({ status: true, merchant: filter.merchantId !== undefined });
      return [...new Set(filter.statuses)].map((status) =>
        filter.merchantId !== undefined
          ? { from: 'FROM records r INDEXED BY records_merchant_status', where: ['r.merchant = ?', 'r.status = ?', ...rest.where], params: [filter.merchantId, status, ...rest.params] }
          : { from: 'FROM records r INDEXED BY records_status', where: ['r.status = ?', ...rest.where], params: [status, ...rest.params] },
      );
    }
    if (filter.merchantId !== undefined) {
      const rest = checks({ merchant: true });
      return [{ from: 'FROM records r INDEXED BY records_merchant', where: ['r.merchant = ?', ...rest.where], params: [filter.merchantId, ...rest.params] }];
    }
    const rest = checks({});
    return [{ from: 'FROM records r INDEXED BY records_created', where: rest.where, params: rest.params }];
  }

  /** How many order ids (records) or refund ids (rows) start with `prefix`, folded, counted up to `upTo`. */
  countPrefix(field: 'orderId' | 'refundId', prefix: string, upTo: number): number {
    const sql =
      field === 'orderId'
        ? `SELECT count(*) AS n FROM (SELECT 1 FROM records r INDEXED BY records_order WHERE ${PREFIX('r.order_folded').join(' AND ')} LIMIT ?)`
        : `SELECT count(*) AS n FROM (SELECT 1 FROM refunds f WHERE ${PREFIX('f.refund_id').join(' AND ')} LIMIT ?)`;
    return (this.#prepare(sql).get(...prefixParams(prefix), upTo) as { n: number }).n;
  }

  /** Open records, oldest first (createdAt, then key), after `after`: through the open index only. */
  listOpen(query: { limit: number; after?: { createdMs: number; key: string }; merchantId?: string; dueOnly?: boolean }): KeyAt[] {
    const where = ['r.open = 1'];
    const params: unknown[] = [];
    if (query.dueOnly) where.push('r.due_ms IS NOT NULL');
    if (query.merchantId !== undefined) where.push('r.merchant = ?'), params.push(query.merchantId);
    if (query.after) where.push('(r.created_ms, r.key) > (?, ?)'), params.push(query.after.createdMs, query.after.key);
    const sql = `SELECT r.key, r.segment, r.line_offset, r.line_length FROM records r INDEXED BY records_open WHERE ${where.join(' AND ')} ORDER BY r.created_ms, r.key LIMIT ?`;
    return (this.#prepare(sql).all(...params, Math.min(query.limit, Number.MAX_SAFE_INTEGER)) as Record<string, unknown>[]).map(keyAtOf);
  }

  /**
   * Due records as `takeTurns` orders them (due-turns.ts), said in SQL: each merchant's numbered
   * earliest due first (ties by createdAt, then key), cut at `perMerchant`, then by turn. Reads the
   * due index only: what is due, never what is settled.
   */
  listDue(query: { nowMs: number; limit: number; perMerchant?: number; skipMerchants?: readonly string[]; canVerify: boolean }): KeyAt[] {
    const cap = Math.min(query.perMerchant ?? query.limit, query.limit);
    const sql = `SELECT key, segment, line_offset, line_length FROM (
        SELECT r.key, r.segment, r.line_offset, r.line_length, r.due_ms, r.created_ms,
               row_number() OVER (PARTITION BY r.merchant ORDER BY r.due_ms, r.created_ms, r.key) AS turn
          FROM records r INDEXED BY records_due
         WHERE r.due_ms IS NOT NULL AND r.due_ms <= ? AND (? OR r.due_verifier = 0) AND r.merchant NOT IN (SELECT value FROM json_each(?)))
      WHERE turn <= ? ORDER BY turn, due_ms, created_ms, key LIMIT ?`;
    return (this.#prepare(sql).all(query.nowMs, query.canVerify ? 1 : 0, JSON.stringify(query.skipMerchants ?? []), cap, query.limit) as Record<string, unknown>[]).map(keyAtOf);
  }

  listUnsettled(merchant: string, amount: number): KeyAt[] {
    const sql = 'SELECT key, segment, line_offset, line_length FROM records INDEXED BY records_unsettled WHERE merchant = ? AND unsettled = ? ORDER BY created_ms, key';
    return (this.#prepare(sql).all(merchant, amount) as Record<string, unknown>[]).map(keyAtOf);
  }

  // ---------------------------------------------------------------- attention

  listAttention(query: { merchantId?: string; after?: { sinceMs: number; key: string; kind: string }; limit: number }): { key: string; kind: AttentionKind; merchant: string; since: string; location: Location }[] {
    const where = ['1'];
    const params: unknown[] = [];
    if (query.merchantId !== undefined) where.push('a.merchant = ?'), params.push(query.merchantId);
    if (query.after) where.push('(a.since_ms, a.key, a.kind) > (?, ?, ?)'), params.push(query.after.sinceMs, query.after.key, query.after.kind);
    const sql = `SELECT a.key, a.kind, a.merchant, a.since, r.segment, r.line_offset, r.line_length
        FROM attention a ${query.merchantId !== undefined ? 'INDEXED BY attention_merchant' : ''} JOIN records r ON r.key = a.key
       WHERE ${where.join(' AND ')} ORDER BY a.since_ms, a.key, a.kind LIMIT ?`;
    return (this.#prepare(sql).all(...params, query.limit) as Record<string, unknown>[]).map((r) => ({ key: r.key as string, kind: r.kind as AttentionKind, merchant: r.merchant as string, since: r.since as string, location: locationOf(r) }));
  }

  /** Counted in the attention table alone (one row per entry, never a record). */
  countAttention(merchantId?: string): AttentionCounts {
    const sql = `SELECT kind, merchant, count(*) AS n, min(since_ms) AS oldest_ms, since FROM attention ${merchantId !== undefined ? 'WHERE merchant = ?' : ''} GROUP BY kind, merchant`;
    const rows = this.#prepare(sql).all(...(merchantId !== undefined ? [merchantId] : [])) as { kind: AttentionKind; merchant: string; n: number; oldest_ms: number; since: string }[];
    // `since` is the row holding the minimum (SQLite's rule for a bare column beside min()).
    return attentionCountsOf(rows.map((r) => ({ kind: r.kind, merchantId: r.merchant, count: r.n, oldestSince: r.since })));
  }

  // ---------------------------------------------------------------- payloads

  payloadAt(key: string): Location | undefined {
    const row = this.#prepare('SELECT segment, line_offset, line_length FROM payloads WHERE key = ?').get(key) as Record<string, unknown> | undefined;
    return row && locationOf(row);
  }

  /** Keeps where a record's payload line lies (a new one, or its copy by compaction). */
  putPayload(key: string, location: Location): void {
    const previous = this.payloadAt(key);
    this.#prepare('INSERT INTO payloads (key, segment, line_offset, line_length) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET segment = excluded.segment, line_offset = excluded.line_offset, line_length = excluded.line_length').run(
      key,
      location.segment,
      location.offset,
      location.length,
    );
    this.#applied(location, previous);
  }

  // ---------------------------------------------------------------- webhook events

  webhookEvent(wkey: string): { atMs: number; location: Location } | undefined {
    const row = this.#prepare('SELECT * FROM webhook_events WHERE wkey = ?').get(wkey) as Record<string, unknown> | undefined;
    return row && { atMs: row.at_ms as number, location: locationOf(row) };
  }

  /** Keeps a processed event's line (a new one, or its copy: then only where it lies changes). */
  putWebhookEvent(wkey: string, atMs: number, location: Location): void {
    const previous = this.webhookEvent(wkey);
    this.#prepare('INSERT INTO webhook_events (wkey, at_ms, segment, line_offset, line_length) VALUES (?, ?, ?, ?, ?) ON CONFLICT (wkey) DO UPDATE SET segment = excluded.segment, line_offset = excluded.line_offset, line_length = excluded.line_length').run(
      wkey,
      atMs,
      location.segment,
      location.offset,
      location.length,
    );
    this.#applied(location, previous?.location);
  }

  binding(bkey: string): { account: string; location: Location } | undefined {
    const row = this.#prepare('SELECT * FROM delivery_bindings WHERE bkey = ?').get(bindingText(bkey)) as Record<string, unknown> | undefined;
    return row && { account: row.account as string, location: locationOf(row) };
  }

  /** Up to `limit` bindings after `after` in key order. */
  bindingsAfter(after: string, limit: number): { bkey: string; account: string }[] {
    const rows = this.#prepare('SELECT bkey, account FROM delivery_bindings WHERE bkey > ? ORDER BY bkey LIMIT ?').all(bindingText(after), limit) as { bkey: string; account: string }[];
    return rows.map((row) => ({ bkey: bindingKeyOf(row.bkey), account: row.account }));
  }

  /** Keeps a delivery's binding line (a new one, or its copy by compaction: then only where it lies changes). */
  putBinding(bkey: string, account: string, location: Location): void {
    const previous = this.binding(bkey);
    this.#prepare('INSERT INTO delivery_bindings (bkey, account, segment, line_offset, line_length) VALUES (?, ?, ?, ?, ?) ON CONFLICT (bkey) DO UPDATE SET segment = excluded.segment, line_offset = excluded.line_offset, line_length = excluded.line_length').run(
      bindingText(bkey),
      account,
      location.segment,
      location.offset,
      location.length,
    );
    this.#applied(location, previous?.location);
  }

  /** An event past its retention, met by compaction: forgotten, its line no longer live. */
  dropWebhookEvent(wkey: string, location: Location): void {
    this.#prepare('DELETE FROM webhook_events WHERE wkey = ?').run(wkey);
    this.#prepare('UPDATE segments SET live = live - ? WHERE n = ?').run(location.length, location.segment);
  }

  /** Forgets the events received before `oldestMs` (their lines stop being live, so their segments compact). */
  purgeWebhookEvents(oldestMs: number): number {
    return this.transaction(() => {
      const expired = this.#prepare('SELECT segment, sum(line_length) AS bytes FROM webhook_events WHERE at_ms < ? GROUP BY segment').all(oldestMs) as { segment: number; bytes: number }[];
      for (const e of expired) this.#prepare('UPDATE segments SET live = live - ? WHERE n = ?').run(e.bytes, e.segment);
      return this.#prepare('DELETE FROM webhook_events WHERE at_ms < ?').run(oldestMs).changes;
    });
  }

  // ---------------------------------------------------------------- dead letters

  hasDeadLetter(id: string): boolean {
    return this.#prepare('SELECT 1 FROM dead_letters WHERE id = ?').get(id) !== undefined;
  }

  /** Stores a letter's listing fields; `dirty`: its file is being written, and is read again at start-up should the process stop before it is. */
  putDeadLetter(row: DeadLetterRow, dirty = false): void {
    this.#prepare(
      `INSERT INTO dead_letters (id, received_ms, pos, merchant, open, due_ms, reason_code, dirty) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET ${dirty ? 'dirty = 1' : 'received_ms = excluded.received_ms, pos = excluded.pos, merchant = excluded.merchant, open = excluded.open, due_ms = excluded.due_ms, reason_code = excluded.reason_code, dirty = 0'}`,
    ).run(row.id, row.receivedMs, row.pos, row.merchantId ?? null, row.open ? 1 : 0, row.dueMs ?? null, row.reasonCode, dirty ? 1 : 0);
  }

  dropDeadLetter(id: string): void {
    this.#prepare('DELETE FROM dead_letters WHERE id = ?').run(id);
  }

  dirtyDeadLetters(): string[] {
    return (this.#prepare('SELECT id FROM dead_letters INDEXED BY dead_letters_dirty WHERE dirty = 1').all() as { id: string }[]).map((r) => r.id);
  }

  clearDeadLetters(): void {
    this.#prepare('DELETE FROM dead_letters').run();
  }

  listDeadLetters(query: DeadLetterQuery): { ids: string[]; counted: number } {
    const where = ['1'];
    const params: unknown[] = [];
    if (query.pos) where.push('pos = ?'), params.push(query.pos);
    if (query.open !== undefined) where.push('open = ?'), params.push(query.open ? 1 : 0);
    if (query.merchantId) where.push('merchant = ?'), params.push(query.merchantId);
    if (query.awaiting) where.push(`open = 1 AND due_ms IS ${query.awaiting === 'bridge' ? 'NOT ' : ''}NULL`);
    // Open letters (the attention queue, the console) through the index of open ones only: however many were resolved since, they are not walked.
    const index = query.open === true || query.awaiting ? 'dead_letters_open_received' : 'dead_letters_received';
    if (index === 'dead_letters_open_received') where.push('open = 1');
    const filter = `FROM dead_letters INDEXED BY ${index} WHERE ${where.join(' AND ')}`;
    const counted = (this.#prepare(`SELECT count(*) AS n FROM (SELECT 1 ${filter} LIMIT ${LIST_COUNT_CAP + 1})`).get(...params) as { n: number }).n;
    const order = query.oldestFirst ? 'received_ms, id' : 'received_ms DESC, id DESC';
    const ids = query.limit > 0 ? (this.#prepare(`SELECT id ${filter} ORDER BY ${order} LIMIT ? OFFSET ?`).all(...params, query.limit, query.offset) as { id: string }[]).map((r) => r.id) : [];
    return { ids, counted };
  }

  listDueDeadLetters(nowMs: number, limit: number): string[] {
    return (this.#prepare('SELECT id FROM dead_letters INDEXED BY dead_letters_due WHERE due_ms IS NOT NULL AND due_ms <= ? AND open = 1 ORDER BY due_ms, id LIMIT ?').all(nowMs, limit) as { id: string }[]).map((r) => r.id);
  }

  countOpenDeadLetters(): DeadLetterCounts {
    const counts: DeadLetterCounts = { byReason: {}, byMerchant: {} };
    const rows = this.#prepare('SELECT reason_code, coalesce(merchant, \'\') AS merchant, count(*) AS n FROM dead_letters INDEXED BY dead_letters_open WHERE open = 1 GROUP BY reason_code, merchant').all() as { reason_code: string; merchant: string; n: number }[];
    for (const r of rows) {
      counts.byReason[r.reason_code] = (counts.byReason[r.reason_code] ?? 0) + r.n;
      counts.byMerchant[r.merchant] = (counts.byMerchant[r.merchant] ?? 0) + r.n;
    }
    return counts;
  }

  // ---------------------------------------------------------------- audit

  /** Bytes of the audit trail's file whose lines are in the index. */
  get auditBytes(): number {
    return Number(this.meta('audit_bytes') ?? 0);
  }

  /** Adds audit entries read from the file, and moves the bytes applied to `bytes`, in one transaction. */
  addAudit(entries: readonly AuditEntry[], bytes: number): void {
    this.transaction(() => {
      const insert = this.#prepare('INSERT INTO audit (at_ms, actor, merchant, entry) VALUES (?, ?, ?, ?)');
      for (const e of entries) insert.run(Date.parse(e.at) || 0, e.actor, e.merchantId ?? null, JSON.stringify(e));
      this.#setMeta({ audit_bytes: bytes });
    });
  }

  clearAudit(): void {
    this.transaction(() => {
      this.#prepare('DELETE FROM audit').run();
      this.#setMeta({ audit_bytes: 0 });
    });
  }

  listAudit(query: AuditQuery): { items: AuditEntry[]; counted: number } {
    const where = ['1'];
    const params: unknown[] = [];
    if (query.merchantId) where.push('merchant = ?'), params.push(query.merchantId);
    // A prefix, as every store matches it (store.ts `auditMatches`); SQLite's LIKE ignores ASCII case, so the prefix is checked exactly too.
    if (query.actor) where.push("actor LIKE ? ESCAPE '\\' AND substr(actor, 1, ?) = ?"), params.push(`${likeLiteral(query.actor)}%`, query.actor.length, query.actor);
    if (query.from) where.push('at_ms >= ?'), params.push(query.from.getTime());
    if (query.to) where.push('at_ms <= ?'), params.push(query.to.getTime());
    const filter = `FROM audit INDEXED BY audit_at WHERE ${where.join(' AND ')}`;
    const counted = (this.#prepare(`SELECT count(*) AS n FROM (SELECT 1 ${filter} LIMIT ${LIST_COUNT_CAP + 1})`).get(...params) as { n: number }).n;
    // Newest first; of two at the same time, the one written later first.
    const rows = query.limit > 0 ? (this.#prepare(`SELECT entry ${filter} ORDER BY at_ms DESC, seq DESC LIMIT ? OFFSET ?`).all(...params, query.limit, query.offset) as { entry: string }[]) : [];
    return { items: rows.map((r) => JSON.parse(r.entry) as AuditEntry), counted };
  }

  // ---------------------------------------------------------------- plumbing

  /** Prepared once per text: the statements of a query shape are few (a list's filters, a write's changed columns). */
  #prepare(sql: string): CheckedStatement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = new CheckedStatement(this.#db.prepare(sql));
      this.#statements.set(sql, statement);
    }
    return statement;
  }
}

/**
 * WAL: a write appends its pages to one file (no rollback journal to write first); `synchronous =
 * OFF`: see the file's comment; a bounded page cache, temporary tables in memory; the database
 * held by this process alone (the ledger's lock already says so), so no shared-memory file.
 */
function configure(db: DatabaseSyncInstance): void {
  db.exec('PRAGMA locking_mode = EXCLUSIVE');
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = OFF');
  db.exec(`PRAGMA cache_size = -${CACHE_KIB}`);
  db.exec('PRAGMA temp_store = MEMORY');
}

/**
 * A prepared statement whose text parameters are checked before they are bound. The driver passes
 * text to SQLite as a C string, so it binds a text only up to its first NUL: a key holding one would
 * silently be cut short and match another's. Nothing the bridge stores holds a NUL (POS and admin
 * input refuses control characters, and a delivery binding's key is written escaped: `bindingText`),
 * so one here is a bug, refused loudly rather than stored wrong.
 */
class CheckedStatement {
  readonly #statement: StatementSyncInstance;

  constructor(statement: StatementSyncInstance) {
    this.#statement = statement;
  }

  /** `changes` is a number: integers are read as numbers (the driver's default, `readBigInts` off). */
  run(...parameters: unknown[]): { changes: number } {
    refuseNul(parameters);
    return this.#statement.run(...parameters) as { changes: number };
  }

  get(...parameters: unknown[]): unknown {
    refuseNul(parameters);
    return this.#statement.get(...parameters);
  }

  all(...parameters: unknown[]): unknown[] {
    refuseNul(parameters);
    return this.#statement.all(...parameters);
  }
}

function refuseNul(parameters: readonly unknown[]): void {
  for (const value of parameters) {
    if (typeof value === 'string' && value.includes('\u0000')) throw new Error(`the ledger's index refuses a text holding NUL (it would be stored cut short at it): ${JSON.stringify(value.slice(0, 80))}`);
  }
}

/**
 * A delivery binding's key as the index holds it. The key joins the POS and the delivery's digest
 * with a NUL (file-store.ts `bindingKey`), which the driver cannot bind (`CheckedStatement`): NUL is
 * written `\0` and a backslash `\\`, one to one, so the key read back is the key written.
 */
function bindingText(bkey: string): string {
  return bkey.replace(/[\\\u0000]/g, (c) => (c === '\\' ? '\\\\' : '\\0'));
}

function bindingKeyOf(text: string): string {
  return text.replace(/\\(.)/g, (_, c: string) => (c === '0' ? '\u0000' : c));
}

const EMPTY_ROW: Pick<RecordRow, 'refunds' | 'customers' | 'ops' | 'accrualKeys' | 'attention'> = { refunds: [], customers: [], ops: [], accrualKeys: [], attention: [] };

/**
 * "Starts with ?" on a folded column, through its index: a range from the prefix to the prefix
 * followed by the highest code point (bytes compare as code points in UTF-8), then checked exactly.
 */
const PREFIX = (column: string) => [`${column} >= ?`, `${column} < ?`, `substr(${column}, 1, length(?)) = ?`];

function prefixParams(prefix: string): string[] {
  const folded = foldCase(prefix);
  return [folded, `${folded}\u{10FFFF}`, folded, folded];
}

function listText(list: readonly unknown[]): string | null {
  return list.length ? JSON.stringify(list) : null;
}

function listOf<T>(text: unknown): T[] {
  return typeof text === 'string' ? (JSON.parse(text) as T[]) : [];
}

function difference<T>(before: readonly T[], after: readonly T[]): { added: T[]; removed: T[] } {
  return { added: after.filter((x) => !before.includes(x)), removed: before.filter((x) => !after.includes(x)) };
}

/** An attention entry's since as the index orders it (attentionOrder: by time); an unparsable one first. */
function sinceMs(since: string): number {
  return Date.parse(since) || 0;
}

function locationOf(row: Record<string, unknown>): Location {
  return { segment: row.segment as number, offset: row.line_offset as number, length: row.line_length as number };
}

function keyAtOf(row: Record<string, unknown>): KeyAt {
  return { key: row.key as string, location: locationOf(row) };
}

function rowOf(r: Record<string, unknown>): RecordRow {
  return {
    key: r.key as string,
    merchant: r.merchant as string,
    version: r.version as number,
    status: r.status as LedgerStatus,
    pos: r.pos as string,
    createdMs: r.created_ms as number,
    open: r.open === 1,
    dueMs: (r.due_ms as number | null) ?? null,
    dueVerifier: r.due_verifier === 1,
    unsettled: (r.unsettled as number | null) ?? null,
    orderId: (r.order_id as string | null) ?? null,
    refunds: listOf<string>(r.refunds),
    customers: listOf<string>(r.customers),
    ops: listOf<number>(r.ops),
    accrualKeys: listOf<string>(r.akeys),
    attention: listOf<IndexedAttention>(r.attention),
    bodyPending: r.body_pending === 1,
    location: locationOf(r),
  };
}
