/**
 * The embedded ledger: an append-only journal of record versions, with a lowdb manifest, and an
 * on-disk index of it (SQLite) through which records are found.
 *
 * Why not one lowdb JSON file: lowdb rewrites its whole file on every write, measured here at ~6 ms
 * for 1k records and ~1 s for 100k; a ledger only grows, so every checkout would be slower than the
 * last. Why not one lowdb file per record: creating or renaming a file costs ~500 µs on these
 * disks. Here a write appends one line (~5 µs), whatever the ledger's size; see `journal.ts`.
 *
 * Layout for `file:./data/ledger.json`:
 *   ./data/ledger.json                      lowdb manifest: format version and the journal's segments
 *   ./data/ledger.journal/000001.jsonl …    record versions and processed webhook events, one a line
 *   ./data/ledger.index.sqlite (-wal)       the index: derived from the files around it, rebuilt from them when in doubt
 *   ./data/ledger.backfill.json             backfill watermarks, one per merchant and POS account
 *   ./data/ledger.journal/.write-probe      empty; written while writes fail, to tell when they work again
 *   ./data/ledger.dead-letters/<id>.json    one lowdb document per dead letter (rare, kept whole)
 *   ./data/ledger.audit.jsonl               the operators' audit trail, one action a line
 *   ./data/ledger.json.lock                 the owning process's pid and the machine's boot id
 *   ./data/ledger.json.restarted            an unclean stop on an earlier boot, until the service has acted
 * Every file is 0600 and every folder the bridge creates 0700 (`private-files.ts`): they hold
 * customers' contacts (the index holds order ids).
 *
 * Memory holds the most recently used open records, the merchants and the backfill states (few),
 * and nothing per settled record, per dead letter or per audit entry: at a million records the
 * in-memory index this replaces took ~730 MB and 8.5 s to build at every start. Everything else is
 * found through `<stem>.index.sqlite` (file-index.ts): records by key, order id, refund id,
 * status, merchant and time, claims, accrual keys, the open, due and attention sets, webhook
 * events, the dead letters' and the audit trail's listing fields. Superseded versions are
 * garbage: a segment whose live share falls under half is compacted by copying its live lines to
 * the end and deleting it, at start-up and whenever a segment fills.
 *
 * The journal is the truth; the index follows it. A write appends its line and then, synchronously
 * (nothing else runs in between), updates the index in one SQLite transaction that also moves the
 * position the index has applied the journal up to. So:
 * - A process killed between the two leaves the index one line behind: start-up reads the journal
 *   from the applied position to its end and applies those lines. Nothing before the position is read.
 * - The index can be ahead of the journal only if the journal lost lines the index kept: an OS crash
 *   or power loss (the journal is synced only in `durable()`, the index not at all). Those are the
 *   cases the store already detects, a lock left on an earlier boot (`recovery.machineRestarted`)
 *   and damaged lines, and in them the index is rebuilt from a full scan of the journal, as it is
 *   whenever its file is missing, unreadable, of another format, or a segment's size or mtime is
 *   not what the index recorded (a file changed behind its back: `Journal.stamp`). A rebuild reads
 *   only what the journal (and the dead letters' and audit trail's own files) hold, so it cannot
 *   carry over anything the crash took back; that is what makes trusting the index safe otherwise:
 *   without an OS crash nothing the index applied can be missing from the page cache's journal,
 *   and any other change to a segment shows in its size or mtime.
 * - A clean stop stamps the active segment, syncs the journal and checkpoints the index with a sync,
 *   so an OS crash after a clean stop (which leaves no lock to tell) finds both as they were.
 * - A ledger written by an earlier build (no index) builds it once, from a full scan.
 *
 * Damaged journal lines (an OS crash or power loss) are skipped at start-up and reported in
 * `recovery`; the damaged segments are left as found (and copied) until the service has acted on
 * the report and calls `compactDamaged`, so a crash in between finds them again (the index is
 * rebuilt at every start until then). A lost tail leaves no damaged bytes, so `recovery` also
 * reports a lock left on an earlier boot of the machine (`machineRestarted`): the last writes may
 * be lost even though every line reads.
 *
 * One process at a time: insert-once and compare-and-set are enforced by this process's index, so
 * a lock file keeps a second process out; a lock left by a process that no longer runs (killed) is
 * taken over. Several instances need the PostgreSQL store.
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { mkdir, open, readdir, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { Low } from 'lowdb';
import { VersionConflictError } from '../kernel/errors.js';
import { KeyedMutex } from '../kernel/keyed-mutex.js';
import type { StoredMerchant } from '../state/merchant.js';
import { Journal, syncDirectory, type Location, type Position, type WriteFailure, type WriteFile } from './journal.js';
import { BackfillStateTable, MerchantTable } from './held-tables.js';
import { checkClaims } from './claims.js';
import { LedgerIndex, type DeadLetterRow, type KeyAt, type RecordFilter, type RecordRow } from './file-index.js';
import { makePrivate, PRIVATE_DIR, PRIVATE_FILE, PrivateJSONFile } from './private-files.js';
import { ProcessLock } from './process-lock.js';
import { customerHash, customerHashesOf, newSearchKey } from '../state/customer-index.js';
import { accrualKeys, dueOf, claimedOperationIds, isOpen, keyOf, LEDGER_STATUSES, merchantOf, transactionIdOf, unsettledAmount, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import { attentionEntriesOf, needsAttention, UNCLASSIFIED, type AttentionInput } from '../state/attention.js';
import {
  derivedKey,
  deadLetterDueAtMs,
  pageOf,
  PREFIX_MATCH_CAP,
  statusesOf,
  tooManyPrefixMatches,
  type AttentionCounts,
  type AttentionEntry,
  type AttentionQuery,
  type AuditEntry,
  type AuditQuery,
  type BackfillState,
  type DeadLetter,
  type DeadLetterCounts,
  type DeadLetterQuery,
  type DueQuery,
  type InsertOptions,
  type KeptPayload,
  type LedgerStore,
  type ListQuery,
  type OpenQuery,
  type Page,
} from './store.js';

const FORMAT_VERSION = 2;

interface Manifest {
  format: 'loyalty-bridge/ledger';
  formatVersion: number;
  createdAt: string;
  segments: number[];
  /**
   * The customer search key (customer-index.ts): made once with the ledger (or by the first build
   * that searches customers) and kept with it, since the index's and the lines' hashes were made with it.
   */
  searchKey?: string;
  /** `putSetting`'s: few and small, written seldom (the manifest is rewritten whole, synced). */
  settings?: Record<string, string>;
}

/**
 * What each journal line's header holds: enough to rebuild the index without parsing bodies.
 * `d` (open records only): the due time (`dueOf`) in epoch ms, null when only an operator can move
 * the record; `dv: 1` when only the history verifier can. Lines written before due times existed
 * have no `d`: the index reads their bodies once, for the open records among them only.
 * `oi` (the POS order id), `rf` (refund ids, when any), `na: 1` (`needsAttention`: the index reads
 * the body for its attention entries) and `cl: 1` (closed by an operator) serve the operators'
 * search and the attention queue; lines written before them have no `oi`, and the index reads
 * their bodies once. `ch`: the customer search entries (customer-index.ts), on every line since
 * the search began (an empty list for a record without a customer); a line without it has its body
 * read once. A `p` line is the POS payload a record was created from (`insert`'s `payload`), its
 * body the KeptPayload.
 */
type LineHeader =
  | { k: 'r'; id: string; m?: string; v: number; s: LedgerStatus; p: string; c: number; o: 0 | 1; d?: number | null; dv?: 1; ops?: number[]; ak?: string[]; ua?: number; oi?: string | null; rf?: string[]; ch?: string[]; na?: 1; cl?: 1 }
  | { k: 'w'; key: string; t: number }
  | { k: 'b'; key: string; a: string }
  | { k: 'p'; id: string };
type RecordHeader = Extract<LineHeader, { k: 'r' }>;

/** What start-up found unreadable in the journal; no record contents (they hold customer contacts). */
export interface JournalRecovery {
  /** Unreadable lines skipped (a zero-filled block counts once). */
  corruptLines: number;
  /** Bytes those lines hold. */
  bytes: number;
  /** The segments they are in. */
  segments: number[];
  /** Copies of those segments as found, for forensics. */
  copies: string[];
  /** The ledger was last held on an earlier boot and not released: an OS crash or power loss may have cut its tail. */
  machineRestarted: boolean;
  /** Readable lines holding an older version than one read before them (stale blocks), skipped. */
  staleLines: number;
}

/** How the last start-up came by its index (for logs, operators and tests). */
export interface IndexStartup {
  /**
   * `trusted`: the index had every line; `caught-up`: it applied the lines after its position (a
   * process killed mid-write); `rebuilt`: built anew from a full scan of the journal (`reason`).
   */
  mode: 'trusted' | 'caught-up' | 'rebuilt';
  reason?: string;
  /** Journal lines whose header start-up read (`Journal.linesRead`). */
  linesRead: number;
  /** Where the scan began: the index's applied position, or the journal's start on a rebuild. */
  scannedFrom: Position;
  ms: number;
}

/**
 * Records with work left, most recently used, kept in memory: the service reads a record back
 * while it works on it. Settled records are not kept: they are seldom read again (a refund comes
 * much later), and keeping them made every record outlive two scavenges into the old generation
 * (~4 kB each), so major collections came often and their pauses showed in the tail latency
 * (the bench saw 7-10 ms event-loop stalls after each). A miss costs one index lookup and one read.
 */
const CACHE_RECORDS = 1000;
/** A segment is sealed and a new one started past this size. */
const SEGMENT_BYTES = 64 * 1024 * 1024;
/** Segments with less than this share of live bytes are compacted. */
const COMPACT_BELOW_LIVE_SHARE = 0.5;
/** At start-up, the active segment is compacted too once it holds this much. */
const COMPACT_ACTIVE_FROM_BYTES = 1024 * 1024;
/** Webhook event ids are remembered this long: POS retries end within a day (Square's 24 h is the longest). */
const WEBHOOK_EVENT_RETENTION_MS = 7 * 24 * 3600 * 1000;
const COMPACT_BATCH = 2000;
/** Lines applied per index transaction while scanning (a rebuild, a catch-up): one commit per line would cost a WAL frame set each. */
const SCAN_BATCH = 20_000;
/** Rows completed from their bodies, or files indexed, per transaction. */
const FILL_BATCH = 1000;
/** How much of the audit trail's file is read at once when its lines are indexed. */
const AUDIT_CHUNK = 1024 * 1024;

export class FileLedgerStore implements LedgerStore {
  readonly kind = 'file';
  readonly manifestPath: string;
  readonly journalDir: string;
  readonly deadLettersDir: string;
  /** One private JSON document per merchant (`<stem>.merchants/<id>.json`); all held in memory (merchants are few). */
  readonly merchantsDir: string;
  /** The operators' audit trail: one JSON line per action, appended and synced; indexed, not held in memory. */
  readonly auditPath: string;
  /** The index (file-index.ts); `-wal` beside it while the store is open. */
  readonly indexPath: string;
  /** Every merchant's backfill state in one private JSON document (`<stem>.backfill.json`): one per merchant and POS, few. */
  readonly backfillPath: string;
  readonly #backfill = new BackfillStateTable();
  readonly #merchants = new MerchantTable();
  readonly #journal: Journal;
  readonly #lock: ProcessLock;
  #index?: LedgerIndex;
  readonly #cache = new Map<string, LedgerRecord>();
  readonly #locks = new KeyedMutex();
  /** Damaged segments not compacted away yet: never compacted before `compactDamaged`. */
  readonly #damaged = new Set<number>();
  #recovery?: JournalRecovery;
  #startup?: IndexStartup;
  /** Lines older than a version read before them, skipped by the last start-up. */
  #staleLines = 0;
  #manifest?: Low<Manifest | null>;
  /** The manifest's `searchKey`. */
  #searchKey = '';
  #compacting?: Promise<void>;
  #ready = false;
  readonly #restartedMarker: string;
  /** The first failure of the manifest's and dead letters' writes since one last succeeded (the journal keeps its own). */
  #fileWriteFailure?: WriteFailure;
  /** The first failure of the index's writes since one last succeeded. */
  #indexWriteFailure?: WriteFailure;
  #probing?: Promise<void>;
  readonly #beforeIndexWrite?: () => void;

  constructor(
    path: string,
    /**
     * `writeFile`: how the journal writes (tests make the disk full where they cannot mount a small
     * one); `beforeIndexWrite`: runs inside each index write's transaction (tests make it throw, as
     * an index on a full disk would).
     */
    options: { writeFile?: WriteFile; beforeIndexWrite?: () => void; lockWaitMs?: number } = {},
  ) {
    this.#beforeIndexWrite = options.beforeIndexWrite;
    this.manifestPath = resolve(path);
    const stem = join(dirname(this.manifestPath), basename(this.manifestPath, extname(this.manifestPath)));
    this.journalDir = `${stem}.journal`;
    this.deadLettersDir = `${stem}.dead-letters`;
    this.merchantsDir = `${stem}.merchants`;
    this.auditPath = `${stem}.audit.jsonl`;
    this.backfillPath = `${stem}.backfill.json`;
    this.indexPath = `${stem}.index.sqlite`;
    this.#journal = new Journal(this.journalDir, undefined, options.writeFile);
    // `lockWaitMs`: how long a start waits for a bridge still stopping on this ledger to let go (process-lock.ts).
    this.#lock = new ProcessLock(`${this.manifestPath}.lock`, { waitForOwnerMs: options.lockWaitMs });
    this.#restartedMarker = `${this.manifestPath}.restarted`;
  }

  static fromUrl(url: string, options: { lockWaitMs?: number } = {}): FileLedgerStore {
    return new FileLedgerStore(url.replace(/^file:(\/\/)?/, ''), options);
  }

  keyFor(purpose: string): Buffer {
    if (!this.#searchKey) throw new Error('the file ledger is not open');
    return derivedKey(this.#searchKey, purpose);
  }

  get #idx(): LedgerIndex {
    if (!this.#index) throw new Error('file ledger is not open');
    return this.#index;
  }

  async init(): Promise<void> {
    // Private only where the bridge creates it: a folder that is there (a volume, /var/lib/…) is the operator's.
    await mkdir(dirname(this.manifestPath), { recursive: true, mode: PRIVATE_DIR });
    const manifest = new Low<Manifest | null>(new PrivateJSONFile(this.manifestPath, { syncData: true }), null);
    try {
      await manifest.read();
    } catch (error) {
      throw new Error(`${this.manifestPath} is not a loyalty-bridge ledger manifest: ${(error as Error).message}`);
    }
    const found = manifest.data as Partial<Manifest> | null;
    if (found && (typeof found !== 'object' || found.format !== 'loyalty-bridge/ledger')) {
      throw new Error(`${this.manifestPath} is not a loyalty-bridge ledger manifest`);
    }
    if (found && found.formatVersion !== FORMAT_VERSION) {
      throw new Error(`${this.manifestPath} has ledger format version ${String(found.formatVersion)}; this build reads version ${FORMAT_VERSION}`);
    }
    const takeover = await this.#lock.acquire();
    try {
      // The lock's name made durable now: an OS crash while this process holds the ledger must leave
      // it behind (`machineRestarted`), since that is what tells the next start not to trust the index.
      syncDirectory(dirname(this.manifestPath));
      // Written before anything else and removed only by `compactDamaged`: a crash before the service
      // has acted on it finds it again (the new lock already names this boot).
      if (takeover.machineRestarted) await writeFile(this.#restartedMarker, `${new Date().toISOString()}\n`, { mode: PRIVATE_FILE });
      const machineRestarted = existsSync(this.#restartedMarker);
      // Files of a ledger written by an earlier build are 0644: made private now (see private-files.ts).
      await makePrivate(this.manifestPath, PRIVATE_FILE);
      await makePrivate(this.#restartedMarker, PRIVATE_FILE);
      if (!found) {
        manifest.data = { format: 'loyalty-bridge/ledger', formatVersion: FORMAT_VERSION, createdAt: new Date().toISOString(), segments: [1], searchKey: newSearchKey() };
        await manifest.write();
      } else if (!manifest.data!.searchKey) {
        // A ledger from before the customer search: its lines have no `ch`, and the index is rebuilt (INDEX_FORMAT 2) reading their bodies once.
        manifest.data!.searchKey = newSearchKey();
        await manifest.write();
      }
      this.#manifest = manifest;
      this.#searchKey = manifest.data!.searchKey!;
      this.#journal.open(manifest.data!.segments);
      await mkdir(this.deadLettersDir, { recursive: true, mode: PRIVATE_DIR });
      await this.#makeFolderPrivate(this.deadLettersDir);
      await this.#startIndex(machineRestarted, manifest.data!.createdAt);
      this.#noteDamage(machineRestarted);
      // Appends never go after damage: a damaged active segment is sealed as found.
      if (this.#damaged.has(this.#journal.active)) await this.#roll();
      await mkdir(this.merchantsDir, { recursive: true, mode: PRIVATE_DIR });
      await makePrivate(this.merchantsDir, PRIVATE_DIR);
      await this.#loadMerchants();
      await this.#loadBackfill();
      this.#idx.purgeWebhookEvents(Date.now() - WEBHOOK_EVENT_RETENTION_MS);
      // From here on the active segment is appended to: its stamp no longer holds (a kill now leaves
      // lines after the applied position, which the next start reads; see the file's comment).
      this.#idx.setStamp(this.#journal.active, null);
      const active = this.#journal.active;
      if (this.#journal.sizeOf(active) >= COMPACT_ACTIVE_FROM_BYTES && this.#liveShare(active) < COMPACT_BELOW_LIVE_SHARE) await this.#roll();
      await this.#compactSealed();
      this.#ready = true;
    } catch (error) {
      this.#index?.close(false);
      this.#index = undefined;
      this.#journal.close();
      await this.#lock.release();
      throw error;
    }
  }

  async close(): Promise<void> {
    if (!this.#ready) return;
    this.#ready = false;
    await this.#compacting;
    await this.#journal.settle();
    const index = this.#idx;
    this.#index = undefined;
    this.#cache.clear();
    let clean = true;
    try {
      // A clean stop: the journal on disk, the active segment stamped, the index synced (see the file's comment).
      await this.#journal.durable();
      index.setStamp(this.#journal.active, this.#journal.stamp(this.#journal.active));
    } catch {
      // Not known to be on disk: left as a killed process leaves it, for the next start to check.
      clean = false;
    }
    try {
      index.close(clean);
    } finally {
      this.#journal.close();
      await this.#lock.release();
    }
  }

  /**
   * Not ready while the ledger cannot write: with a full disk every checkout fails, and a load
   * balancer must stop sending them here. The failures are those the writes themselves met (no
   * syscall is added to a write); once one is remembered, each ping tries a write in the journal's
   * folder (`Journal.probe`), and the store is ready again as soon as that, or any write, succeeds.
   */
  async ping(): Promise<void> {
    if (!this.#ready) throw new Error('file ledger is not open');
    const failure = this.#journal.writeFailure ?? this.#fileWriteFailure ?? this.#indexWriteFailure;
    if (!failure) return;
    this.#probing ??= this.#journal.probe().finally(() => (this.#probing = undefined));
    try {
      await this.#probing;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new Error(`the file ledger cannot write to disk (${code}), failing since ${new Date(failure.sinceMs).toISOString()}`);
    }
    this.#fileWriteFailure = undefined;
    this.#indexWriteFailure = undefined;
  }

  durable(): Promise<void> {
    return this.#journal.durable();
  }

  async get(key: string): Promise<LedgerRecord | undefined> {
    return this.#read(key);
  }

  insert(record: LedgerRecord, options: InsertOptions = {}): Promise<{ record: LedgerRecord; created: boolean }> {
    const key = keyOf(record);
    return this.#locks.run(key, async () => {
      if (this.#cache.has(key) || this.#idx.lineAt(key)) return { record: this.#read(key)!, created: false };
      if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version}`);
      const keys = accrualKeys(record);
      this.#checkClaims(record, keys, []);
      // The payload's line first: a record is never indexed as having one that is not there yet
      // (one written for a record whose own line then fails is an orphan a retry replaces).
      if (options.payload) {
        const location = this.#journal.append({ k: 'p', id: key }, JSON.stringify(options.payload));
        this.#indexing(location, (index) => index.putPayload(key, location));
      }
      this.#write(record, keys, undefined);
      return { record, created: true };
    });
  }

  async getPayload(key: string): Promise<KeptPayload | undefined> {
    const location = this.#idx.payloadAt(key);
    return location && (JSON.parse(this.#journal.readBody(location)) as KeptPayload);
  }

  update(next: LedgerRecord): Promise<LedgerRecord> {
    const key = keyOf(next);
    return this.#locks.run(key, async () => {
      const current = this.#idx.record(key);
      if (!current || current.version !== next.version - 1) {
        throw new VersionConflictError(key, next.version - 1, current?.version);
      }
      const keys = accrualKeys(next);
      this.#checkClaims(next, keys, current.accrualKeys);
      this.#write(next, keys, current);
      return next;
    });
  }

  async list(query: ListQuery): Promise<Page<LedgerRecord>> {
    for (const field of ['orderId', 'refundId'] as const) {
      const prefix = query[field];
      if (prefix && this.#idx.countPrefix(field, prefix, PREFIX_MATCH_CAP + 1) > PREFIX_MATCH_CAP) throw tooManyPrefixMatches(field, prefix);
    }
    const statuses = statusesOf(query);
    if (statuses?.size === 0) return pageOf([], 0);
    const filter: RecordFilter = {
      ...(query.merchantId ? { merchantId: query.merchantId } : {}),
      ...(statuses ? { statuses: [...statuses] } : {}),
      ...(query.pos ? { pos: query.pos } : {}),
      ...(query.orderId ? { orderId: query.orderId } : {}),
      ...(query.refundId ? { refundId: query.refundId } : {}),
      ...(query.customer ? { customerHashes: query.customer.map((identity) => customerHash(this.#searchKey, identity)) } : {}),
      ...(query.from ? { fromMs: query.from.getTime() } : {}),
      ...(query.to ? { toMs: query.to.getTime() } : {}),
    };
    const after = query.after ? { createdMs: Date.parse(query.after.createdAt), key: query.after.key } : undefined;
    const items = this.#idx.listRecords(filter, { after, offset: query.offset, limit: query.limit }).map((k) => this.#readAt(k));
    // The total counts the filter's matches: the cursor only says where the page starts.
    return pageOf(items, this.#idx.countRecords(filter));
  }

  async listAttention(query: AttentionQuery): Promise<{ entry: AttentionEntry; record: AttentionInput }[]> {
    const after = query.after ? { sinceMs: Date.parse(query.after.since) || 0, key: query.after.key, kind: query.after.kind } : undefined;
    return this.#idx.listAttention({ merchantId: query.merchantId || undefined, after, limit: query.limit }).map((e) => ({
      entry: { key: e.key, merchantId: e.merchant, kind: e.kind, since: e.since },
      record: this.#readAt(e),
    }));
  }

  async countAttention(merchantId?: string): Promise<AttentionCounts> {
    return this.#idx.countAttention(merchantId || undefined);
  }

  /** Appended and synced to the trail's file (the record of it), then indexed; serialized, so each entry's place in the file is known. */
  appendAudit(entry: AuditEntry): Promise<void> {
    return this.#locks.run('audit', async () => {
      const line = `${JSON.stringify(entry)}\n`;
      const file = await open(this.auditPath, 'a', PRIVATE_FILE);
      let start: number;
      try {
        start = (await file.stat()).size;
        await file.appendFile(line);
        await file.datasync();
      } finally {
        await file.close();
      }
      try {
        // Behind (an earlier entry could not be indexed): the file says what is missing.
        if (this.#idx.auditBytes === start) this.#idx.addAudit([entry], start + Buffer.byteLength(line));
        else await this.#indexAudit();
        this.#indexWriteFailure = undefined;
      } catch (error) {
        // The entry is kept for good in the file; the index takes it from there at the next entry or start.
        this.#noteIndexFailure(error);
      }
    });
  }

  async listAudit(query: AuditQuery): Promise<Page<AuditEntry>> {
    const { items, counted } = this.#idx.listAudit(query);
    return pageOf(items, counted);
  }

  /**
   * Indexes the audit trail's lines past what the index holds (all of them when `fromStart`, or
   * when the file is shorter than that: replaced). A line cut by a crash mid-append is the last
   * one: it is left out, and a newline ends it so that the next append starts a line of its own.
   */
  async #indexAudit(fromStart = false): Promise<void> {
    const index = this.#idx;
    let size: number;
    try {
      size = (await stat(this.auditPath)).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      if (index.auditBytes > 0) index.clearAudit();
      return;
    }
    await makePrivate(this.auditPath, PRIVATE_FILE);
    if (fromStart || size < index.auditBytes) index.clearAudit();
    let position = index.auditBytes;
    if (position >= size) return;
    const file = await open(this.auditPath, 'r');
    let rest = Buffer.alloc(0);
    try {
      while (position + rest.length < size) {
        const chunk = Buffer.allocUnsafe(Math.min(AUDIT_CHUNK, size - position - rest.length));
        const { bytesRead } = await file.read(chunk, 0, chunk.length, position + rest.length);
        if (bytesRead === 0) break;
        const bytes = rest.length ? Buffer.concat([rest, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
        const end = bytes.lastIndexOf(0x0a) + 1;
        const entries: AuditEntry[] = [];
        for (const line of bytes.toString('utf8', 0, end).split('\n')) {
          if (!line.trim()) continue;
          try {
            entries.push(JSON.parse(line) as AuditEntry);
          } catch {
            // The torn tail of a crash mid-append, ended by a newline since; what was acknowledged was synced before.
          }
        }
        position += end;
        index.addAudit(entries, position);
        rest = Buffer.from(bytes.subarray(end));
      }
    } finally {
      await file.close();
    }
    if (rest.length) {
      await writeFile(this.auditPath, '\n', { flag: 'a', mode: PRIVATE_FILE });
      index.addAudit([], position + rest.length + 1);
    }
  }

  /** One process owns this ledger, so claims (for shared stores) have nothing to arbitrate. */
  async listOpen(query: OpenQuery): Promise<LedgerRecord[]> {
    const after = query.after ? { createdMs: Date.parse(query.after.createdAt), key: keyOf(query.after) } : undefined;
    return this.#idx.listOpen({ limit: query.limit, after, merchantId: query.merchantId || undefined, dueOnly: query.dueOnly }).map((k) => this.#readAt(k));
  }

  /** Through the due index: what is due now, never what is settled or waits for a person. */
  async listDue(query: DueQuery): Promise<LedgerRecord[]> {
    return this.#idx.listDue(query).map((k) => this.#readAt(k));
  }

  async countOpen(): Promise<number> {
    return this.#idx.countOpen();
  }

  async countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>> {
    return this.#idx.countOpenByStatus();
  }

  async countOpenDeadLetters(): Promise<DeadLetterCounts> {
    return this.#idx.countOpenDeadLetters();
  }

  async listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]> {
    return this.#idx.listUnsettled(merchantId, amountCents).map((k) => this.#readAt(k));
  }

  async findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined> {
    const holder = this.#idx.claimHolder(merchantId, operationId);
    return holder === undefined ? undefined : transactionIdOf(holder);
  }

  async count(): Promise<number> {
    return this.#idx.count();
  }

  async rememberWebhookEvent(pos: string, key: string): Promise<boolean> {
    const hashed = webhookKey(pos, key);
    if (this.#idx.webhookEvent(hashed)) return false;
    const at = Date.now();
    const location = this.#journal.append({ k: 'w', key: hashed, t: at } satisfies LineHeader, '0');
    this.#indexing(location, (index) => index.putWebhookEvent(hashed, at, location));
    this.#afterAppend();
    return true;
  }

  async hasWebhookEvent(pos: string, key: string): Promise<boolean> {
    return this.#idx.webhookEvent(webhookKey(pos, key)) !== undefined;
  }

  /**
   * One `b` line, never purged (unlike webhook events): insert-once is this process's index (one
   * process holds the ledger). Kept as given, not hashed again (the key is a digest already): so
   * `npm run ledger:copy` can carry every binding to PostgreSQL (`deliveryBindings`).
   */
  async bindDelivery(pos: string, key: string, account: string): Promise<string> {
    const bkey = bindingKey(pos, key);
    const bound = this.#idx.binding(bkey);
    if (bound) return bound.account;
    const location = this.#journal.append({ k: 'b', key: bkey, a: account } satisfies LineHeader, '0');
    this.#indexing(location, (index) => index.putBinding(bkey, account, location));
    this.#afterAppend();
    return account;
  }

  async deliveryBinding(pos: string, key: string): Promise<string | undefined> {
    return this.#idx.binding(bindingKey(pos, key))?.account;
  }

  /** Every delivery binding, in key order, a page at a time (`npm run ledger:copy`). */
  *deliveryBindings(pageSize = 1000): Iterable<{ pos: string; key: string; account: string }> {
    for (let after = ''; ; ) {
      const page = this.#idx.bindingsAfter(after, pageSize);
      for (const row of page) {
        const [pos, key] = row.bkey.split('\u0000') as [string, string];
        yield { pos, key, account: row.account };
      }
      if (page.length < pageSize) return;
      after = page.at(-1)!.bkey;
    }
  }

  saveMerchant(merchant: StoredMerchant): Promise<StoredMerchant> {
    return this.#locks.run('merchants', async () => {
      this.#merchants.checkSave(merchant);
      // The merchant's file holds sealed secrets and token hashes only; synced, since an app token
      // lost in a crash could not be asked for again.
      const db = new Low<StoredMerchant>(new PrivateJSONFile(join(this.merchantsDir, `${merchant.id}.json`), { syncData: true }), merchant);
      await this.#writingFile(() => db.write());
      syncDirectory(this.merchantsDir);
      this.#merchants.put(merchant);
      return merchant;
    });
  }

  async getSetting(name: string): Promise<string | undefined> {
    return this.#manifest!.data!.settings?.[name];
  }

  putSetting(name: string, value: string): Promise<void> {
    return this.#locks.run('manifest', async () => {
      const manifest = this.#manifest!.data!;
      const before = manifest.settings;
      manifest.settings = { ...before, [name]: value };
      try {
        await this.#writeManifest();
      } catch (error) {
        manifest.settings = before;
        throw error;
      }
    });
  }

  async getBackfillState(merchantId: string, pos: string): Promise<BackfillState | undefined> {
    return this.#backfill.get(merchantId, pos);
  }

  updateBackfillState(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): Promise<BackfillState | undefined> {
    return this.#locks.run('backfill', async () => {
      const next = this.#backfill.next(merchantId, pos, change);
      if (!next) return this.#backfill.get(merchantId, pos);
      // Synced: a watermark taken back by a crash is only read again (the pass repeats), but one
      // moved ahead of what was recorded would skip orders; the journal is synced before any call, this file at once.
      const db = new Low<BackfillState[]>(new PrivateJSONFile(this.backfillPath, { syncData: true }), this.#backfill.allWith(next));
      await this.#writingFile(() => db.write());
      this.#backfill.put(next);
      return this.#backfill.get(merchantId, pos);
    });
  }

  async listBackfillStates(merchantId?: string): Promise<BackfillState[]> {
    return this.#backfill.list(merchantId);
  }

  async getMerchant(id: string): Promise<StoredMerchant | undefined> {
    return this.#merchants.get(id);
  }

  async listMerchants(query: { offset: number; limit: number }): Promise<{ items: StoredMerchant[]; total: number }> {
    return this.#merchants.list(query);
  }

  async findMerchantByToken(kind: 'pos' | 'admin', hash: string): Promise<StoredMerchant | undefined> {
    return this.#merchants.byToken(kind, hash);
  }

  async findMerchantByAccount(accountKey: string): Promise<StoredMerchant | undefined> {
    return this.#merchants.byAccount(accountKey);
  }

  async saveDeadLetter(letter: DeadLetter): Promise<void> {
    await this.#locks.run(`dead-letter:${letter.id}`, () => this.#writeDeadLetter(letter));
  }

  /**
   * The letter's file is its record; the index holds its listing fields. The row is marked dirty
   * before the file is written and made clean after, so that a process stopped in between leaves a
   * mark the next start reads the file again for (`#refreshDeadLetter`).
   */
  async #writeDeadLetter(letter: DeadLetter): Promise<void> {
    const row = deadLetterRow(letter);
    this.#indexing(undefined, (index) => index.putDeadLetter(row, true));
    const db = new Low<DeadLetter>(new PrivateJSONFile(join(this.deadLettersDir, `${letter.id}.json`)), letter);
    try {
      await this.#writingFile(() => db.write());
    } catch (error) {
      await this.#refreshDeadLetter(letter.id).catch(() => undefined);
      throw error;
    }
    this.#indexing(undefined, (index) => index.putDeadLetter(row));
  }

  /** The letter's row from its file as it is (none when there is no file). */
  async #refreshDeadLetter(id: string): Promise<void> {
    const letter = await new PrivateJSONFile<DeadLetter>(join(this.deadLettersDir, `${id}.json`)).read();
    if (letter) this.#idx.putDeadLetter(deadLetterRow(letter));
    else this.#idx.dropDeadLetter(id);
  }

  async updateDeadLetter(id: string, change: (current: DeadLetter | undefined) => DeadLetter | undefined): Promise<DeadLetter | undefined> {
    // One process owns the ledger (the lock file), so the per-letter mutex is all the exclusion there is to have.
    return this.#locks.run(`dead-letter:${id}`, async () => {
      const next = change(await this.getDeadLetter(id));
      if (next) await this.#writeDeadLetter({ ...next, id });
      return this.getDeadLetter(id);
    });
  }

  async listDueDeadLetters(query: { nowMs: number; limit: number }): Promise<DeadLetter[]> {
    const letters = await Promise.all(this.#idx.listDueDeadLetters(query.nowMs, query.limit).map((id) => this.getDeadLetter(id)));
    return letters.filter((l): l is DeadLetter => l !== undefined);
  }

  /** Read from its file; only ids the index knows name a file (an id is never a path of its own). */
  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    if (!this.#idx.hasDeadLetter(id)) return undefined;
    return (await new PrivateJSONFile<DeadLetter>(join(this.deadLettersDir, `${id}.json`)).read()) ?? undefined;
  }

  async listDeadLetters(query: DeadLetterQuery): Promise<Page<DeadLetter>> {
    const { ids, counted } = this.#idx.listDeadLetters(query);
    const items = await Promise.all(ids.map((id) => this.getDeadLetter(id)));
    return pageOf(
      items.filter((l): l is DeadLetter => l !== undefined),
      counted,
    );
  }

  /** What start-up found unreadable in the journal, if anything (see `JournalRecovery`). */
  get recovery(): JournalRecovery | undefined {
    return this.#recovery;
  }

  /** How the last start-up came by its index (see `IndexStartup`). */
  get indexStartup(): IndexStartup | undefined {
    return this.#startup;
  }

  /**
   * Copies the readable lines of the damaged segments forward and deletes the segments (their
   * copies stay), and forgets an earlier boot's unclean stop. Called once the service has acted on
   * `recovery`: until then every start-up finds the same again, so a crash before the service has
   * made records in doubt cannot hide it.
   */
  async compactDamaged(): Promise<void> {
    await unlink(this.#restartedMarker).catch(() => undefined);
    this.#recovery = undefined;
    if (this.#damaged.size > 0) {
      await this.#compacting;
      this.#compacting = this.#compactSealed(this.#damaged).finally(() => (this.#compacting = undefined));
      await this.#compacting;
      this.#damaged.clear();
    }
    this.#idx.recoveryPending = false;
  }

  /** Bytes the journal holds, and how many of them are live (for the benchmark and operators). */
  journalStats(): { segments: number; bytes: number; liveBytes: number } {
    const bytes = this.#journal.segments.reduce((sum, s) => sum + this.#journal.sizeOf(s), 0);
    return { segments: this.#journal.segments.length, bytes, liveBytes: this.#idx.liveBytes() };
  }

  /** What this store holds in memory, by kind: bounded whatever the ledger holds (records cached: CACHE_RECORDS at most). */
  memoryFootprint(): { cachedRecords: number; merchants: number; backfillStates: number } {
    return { cachedRecords: this.#cache.size, merchants: this.#merchants.size, backfillStates: this.#backfill.size };
  }

  /**
   * Records with work left that this process wrote or read last come from memory. Callers must treat returned records
   * as immutable (the service copies before changing one).
   */
  #read(key: string): LedgerRecord | undefined {
    const cached = this.#fromCache(key);
    if (cached) return cached;
    const location = this.#idx.lineAt(key);
    return location && this.#load(location);
  }

  /** As `#read`, where the index already said where the line lies. */
  #readAt({ key, location }: KeyAt): LedgerRecord {
    return this.#fromCache(key) ?? this.#load(location);
  }

  #fromCache(key: string): LedgerRecord | undefined {
    const cached = this.#cache.get(key);
    if (cached) {
      this.#cache.delete(key);
      this.#cache.set(key, cached);
    }
    return cached;
  }

  #load(location: Location): LedgerRecord {
    const record = JSON.parse(this.#journal.readBody(location)) as LedgerRecord;
    this.#keep(record);
    return record;
  }

  /**
   * Appends the record's line, then indexes it; a line the index could not take is taken back
   * (`#indexing`), so the write is refused whole. `keys`: the record's `accrualKeys`, hashed once
   * per write by the caller; `previous`: its row before this write.
   */
  #write(record: LedgerRecord, keys: string[], previous: RecordRow | undefined): void {
    const header = headerOf(record, this.#searchKey, keys, previous?.createdMs);
    const location = this.#journal.append(header, JSON.stringify(record));
    const row: RecordRow = { ...rowOfHeader(header, location), attention: attentionEntriesOf(record).map(({ kind, since }) => ({ kind, since })), bodyPending: false };
    this.#indexing(location, (index) => index.putRecord(row, previous));
    this.#keep(record);
    this.#afterAppend();
  }

  /**
   * Runs an index write in one transaction. When it fails (the disk full, an I/O error) the journal
   * line `appended` for it is taken back, so journal and index never disagree about an
   * acknowledged write, and the failure is remembered for readiness (`ping`).
   */
  #indexing(appended: Location | undefined, write: (index: LedgerIndex) => void): void {
    const index = this.#idx;
    try {
      index.transaction(() => {
        this.#beforeIndexWrite?.();
        write(index);
      });
    } catch (error) {
      if (appended) this.#journal.takeBack(appended);
      this.#noteIndexFailure(error);
      throw error;
    }
    this.#indexWriteFailure = undefined;
  }

  #noteIndexFailure(error: unknown): void {
    this.#indexWriteFailure ??= { error: error as NodeJS.ErrnoException, sinceMs: Date.now() };
  }

  /** The claims' rules (claims.ts), over the index's holders. */
  #checkClaims(record: LedgerRecord, keys: readonly string[], held: readonly string[]): void {
    checkClaims(record, keys, held, { operation: (merchant, id) => this.#idx.claimHolder(merchant, id), accrualKey: (accrualKey) => this.#idx.accrualKeyHolder(accrualKey) });
  }

  #keep(record: LedgerRecord): void {
    const key = keyOf(record);
    this.#cache.delete(key);
    if (!isOpen(record)) return;
    this.#cache.set(key, record);
    if (this.#cache.size > CACHE_RECORDS) this.#cache.delete(this.#cache.keys().next().value!);
  }

  // ---------------------------------------------------------------- start-up: the index

  /**
   * Opens the index and brings it up to the journal's end (trusted, caught up), or builds it anew
   * from a full scan (see the file's comment for when, and why the rest is safe).
   */
  async #startIndex(machineRestarted: boolean, ledger: string): Promise<void> {
    const started = performance.now();
    const linesBefore = this.#journal.linesRead;
    this.#staleLines = 0;
    let reason: string | undefined;
    let index: LedgerIndex | undefined;
    if (machineRestarted) reason = 'the machine restarted since the ledger was last held without a clean stop';
    else if (!existsSync(this.indexPath)) reason = 'no index (a new ledger, or one written by an earlier build)';
    else {
      try {
        await makePrivate(this.indexPath, PRIVATE_FILE);
        await makePrivate(`${this.indexPath}-wal`, PRIVATE_FILE);
        index = LedgerIndex.open(this.indexPath, ledger);
        reason = this.#distrust(index);
      } catch (error) {
        reason = `the index cannot be used: ${(error as Error).message}`;
      }
    }
    let scannedFrom: Position = { segment: this.#journal.segments[0] ?? 1, offset: 0 };
    if (index && !reason) {
      this.#index = index;
      scannedFrom = index.applied();
      try {
        this.#applyScan(scannedFrom);
        // Damage after the position: the OS crashed under a process it did not restart (a lock that
        // was never written), or someone edited the journal: only a full scan knows what is left.
        if (this.#journal.damage.length > 0) reason = 'damaged lines after the position the index had applied';
        else {
          this.#completeBodies();
          for (const id of index.dirtyDeadLetters()) await this.#refreshDeadLetter(id);
          await this.#indexAudit();
          // Stale lines after the position are reported (`recovery`): found again until acted on.
          if (this.#staleLines > 0) index.recoveryPending = true;
        }
      } catch (error) {
        reason = `the index cannot be used: ${(error as Error).message}`;
      }
    }
    if (reason) {
      index?.close(false);
      this.#index = undefined;
      scannedFrom = { segment: this.#journal.segments[0] ?? 1, offset: 0 };
      await this.#rebuildIndex(ledger);
    }
    const linesRead = this.#journal.linesRead - linesBefore;
    this.#startup = { mode: reason ? 'rebuilt' : linesRead > 0 ? 'caught-up' : 'trusted', ...(reason ? { reason } : {}), linesRead, scannedFrom, ms: performance.now() - started };
  }

  /**
   * Why the index cannot be trusted up to its applied position, if it cannot: a segment it has
   * applied lines of differs from what it recorded (changed behind its back), or is missing.
   */
  #distrust(index: LedgerIndex): string | undefined {
    if (index.recoveryPending) return 'damage found at the last start-up has not been acted on yet';
    const applied = index.applied();
    const rows = new Map(index.segments().map((r) => [r.n, r]));
    for (const n of this.#journal.segments) {
      // Not applied at all: read whole by the catch-up.
      if (n > applied.segment) continue;
      const row = rows.get(n);
      const name = segmentName(n);
      if (!row) return `segment ${name} is not in the index`;
      const now = this.#journal.statOf(n);
      if (row.stamp_mtime !== null) {
        if (now.size !== row.stamp_size || now.mtimeNs !== row.stamp_mtime || now.size !== row.applied_to) return `segment ${name} was changed since the index last saw it (size or modification time)`;
      } else if (now.size < row.applied_to || (n < applied.segment && now.size !== row.applied_to)) {
        return `segment ${name} holds ${now.size} bytes, the index applied ${row.applied_to}`;
      }
    }
    for (const row of rows.values()) {
      if (this.#journal.segments.includes(row.n)) continue;
      if (row.live > 0) return `segment ${segmentName(row.n)} holds lines the index points at but is no longer in the journal`;
      index.dropSegment(row.n);
    }
    return undefined;
  }

  /** A fresh index from every line of the journal, every dead letter's file and the whole audit trail. */
  async #rebuildIndex(ledger: string): Promise<void> {
    for (const suffix of ['', '-wal', '-shm', '-journal']) await unlink(`${this.indexPath}${suffix}`).catch(() => undefined);
    // Created private before SQLite opens it: SQLite gives its -wal file the database file's mode.
    writeFileSync(this.indexPath, '', { mode: PRIVATE_FILE, flag: 'wx' });
    const index = LedgerIndex.create(this.indexPath, ledger);
    this.#index = index;
    this.#applyScan(undefined);
    index.createIndexes();
    this.#completeBodies();
    const segments = this.#journal.segments;
    index.countLive(segments, (n) => this.#journal.sizeOf(n));
    // Sealed segments are never appended to again: stamped now, they are checked at every start.
    for (const n of segments.slice(0, -1)) index.setStamp(n, this.#journal.stamp(n));
    const damaged = this.#journal.damage.length > 0 || this.#staleLines > 0;
    await this.#indexDeadLetters();
    await this.#indexAudit(true);
    index.recoveryPending = damaged;
    index.markReady();
  }

  /**
   * Applies every readable journal line from `from` (all of them without it) to the index, in
   * batches of one transaction each, each moving the applied position: a process stopped part-way
   * goes on from there next time (a rebuild starts over: it is not marked ready).
   */
  #applyScan(from: Position | undefined): void {
    const index = this.#idx;
    const oldest = Date.now() - WEBHOOK_EVENT_RETENTION_MS;
    const lines = this.#journal.scan(isLineHeader, from);
    for (let done = false; !done; ) {
      index.transaction(() => {
        for (let n = 0; n < SCAN_BATCH; n++) {
          const next = lines.next();
          if (next.done) return void (done = true);
          this.#applyLine(index, next.value.header, next.value.location, oldest);
        }
      });
    }
  }

  #applyLine(index: LedgerIndex, header: LineHeader, location: Location, oldestEvent: number): void {
    if (header.k === 'w') {
      if (header.t >= oldestEvent) index.putWebhookEvent(header.key, header.t, location);
      else index.skipLine(location);
      return;
    }
    if (header.k === 'p') return index.putPayload(header.id, location);
    if (header.k === 'b') return index.putBinding(header.key, header.a, location);
    const previous = index.record(header.id);
    // Versions only grow, and compaction copies the latest one (an equal version, which wins):
    // an older version after a newer one is a stale block a crashed filesystem brought back.
    if (previous && previous.version > header.v) {
      this.#staleLines++;
      index.skipLine(location);
    } else if (previous && previous.version === header.v) index.moveRecord(header.id, previous.location, location);
    else index.putRecord(rowOfHeader(header, location), previous);
  }

  /**
   * Rows whose headers did not say everything (`RecordRow.bodyPending`) completed from their
   * bodies: attention entries, and on lines of earlier builds the order and refund ids, the customer search entries and the due
   * time. Not "due now" for undated open records: a reversal in doubt is never written again by
   * the worker, so it would stay due and take a place in every batch.
   */
  #completeBodies(): void {
    const index = this.#idx;
    for (let pending = index.pendingBodies(FILL_BATCH); pending.length > 0; pending = index.pendingBodies(FILL_BATCH)) {
      index.transaction(() => {
        for (const { key, location } of pending) {
          const record = JSON.parse(this.#journal.readBody(location)) as LedgerRecord;
          const row = index.record(key)!;
          const due = row.open ? dueOf(record) : undefined;
          const complete: RecordRow = {
            ...row,
            orderId: record.orderId ?? null,
            refunds: record.reversal?.refundIds ?? [],
            customers: customerHashesOf(record.accrual?.customer, this.#searchKey),
            dueMs: due?.atMs ?? null,
            dueVerifier: due?.needsVerifier ?? false,
            attention: attentionEntriesOf(record).map(({ kind, since }) => ({ kind, since })),
            bodyPending: false,
          };
          index.putRecord(complete, row, false);
        }
      });
    }
  }

  /** Every dead letter's listing fields, from the letters' files (a rebuild). */
  async #indexDeadLetters(): Promise<void> {
    const index = this.#idx;
    index.clearDeadLetters();
    const files = (await readdir(this.deadLettersDir)).filter((f) => f.endsWith('.json') && !f.startsWith('.'));
    for (let i = 0; i < files.length; i += FILL_BATCH) {
      const letters = await Promise.all(files.slice(i, i + FILL_BATCH).map(async (f) => JSON.parse(await readFile(join(this.deadLettersDir, f), 'utf8')) as DeadLetter));
      index.transaction(() => {
        for (const letter of letters) index.putDeadLetter(deadLetterRow(letter));
      });
    }
  }

  /**
   * Makes the dead letters' folder private, and its files when the folder was not: a file in a
   * folder only its owner can enter is out of anyone else's reach whatever its own mode, and the
   * letters this build writes are created private; only an earlier build left 0644 files, in a
   * 0755 folder. So start-up walks the letters once, not at every start.
   */
  async #makeFolderPrivate(dir: string): Promise<void> {
    const wasOpen = ((await stat(dir)).mode & 0o077) !== 0;
    await makePrivate(dir, PRIVATE_DIR);
    // Their bodies are the POS's payloads, customers included; a temporary file left by a crash too.
    if (wasOpen) for (const file of await readdir(dir)) await makePrivate(join(dir, file), PRIVATE_FILE);
  }

  /** Keeps what `scan` found damaged: the segments to leave alone, and the report (counts only). */
  #noteDamage(machineRestarted: boolean): void {
    const damage = this.#journal.damage;
    this.#damaged.clear();
    for (const d of damage) this.#damaged.add(d.segment);
    const regions = damage.flatMap((d) => d.regions);
    this.#recovery =
      damage.length || machineRestarted || this.#staleLines
        ? { corruptLines: regions.length, bytes: regions.reduce((sum, r) => sum + r.length, 0), segments: damage.map((d) => d.segment), copies: damage.map((d) => d.copy), machineRestarted, staleLines: this.#staleLines }
        : undefined;
  }

  #liveShare(segment: number): number {
    const size = this.#journal.sizeOf(segment);
    return size === 0 ? 1 : this.#idx.liveBytes(segment) / size;
  }

  #afterAppend(): void {
    if (this.#journal.sizeOf(this.#journal.active) < SEGMENT_BYTES || this.#compacting) return;
    // A failure here (a full disk) loses nothing: appends go on to the listed active segment, and
    // rolling and compacting are tried again at the next append past the size and at start-up.
    this.#compacting = this.#roll()
      .then(() => this.#compactSealed())
      .catch((error: unknown) => this.#noteFileWriteFailure(error))
      .finally(() => (this.#compacting = undefined));
  }

  /**
   * The manifest lists the new segment before anything is appended to it: a crash in between leaves
   * a listed segment with no lines (created at open), never acknowledged lines in a file the
   * manifest does not list, which open would delete. The segment it seals is stamped: every line of
   * it is indexed, and none will be appended.
   */
  async #roll(): Promise<void> {
    this.#manifest!.data!.segments = [...this.#journal.segments, this.#journal.active + 1];
    await this.#writeManifest();
    const sealed = this.#journal.active;
    this.#journal.roll();
    this.#idx.addSegment(this.#journal.active);
    this.#idx.setStamp(sealed, this.#journal.stamp(sealed));
  }

  async #saveSegments(): Promise<void> {
    this.#manifest!.data!.segments = [...this.#journal.segments];
    await this.#writeManifest();
  }

  /**
   * The manifest is written to a temporary file, synced, and renamed into place; the rename is
   * synced here, since start-up deletes segment files the manifest does not list.
   */
  async #writeManifest(): Promise<void> {
    await this.#writingFile(() => this.#manifest!.write());
    syncDirectory(dirname(this.manifestPath));
  }

  /** Runs a write of the manifest or a dead letter, remembering whether it failed (see `ping`). */
  async #writingFile(write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (error) {
      this.#noteFileWriteFailure(error);
      throw error;
    }
    this.#fileWriteFailure = undefined;
  }

  #noteFileWriteFailure(error: unknown): void {
    this.#fileWriteFailure ??= { error: error as NodeJS.ErrnoException, sinceMs: Date.now() };
  }

  /**
   * Copies the live lines of mostly-dead sealed segments to the end of the journal, byte for byte,
   * then drops those segments from the manifest and deletes them. A line is live when the index
   * points at it; the segment's lines are read in order (a segment is read whole here, not the
   * index searched by place), and each batch of copies is indexed in one transaction. A crash
   * part-way leaves copies of lines that are also in the old segment: identical versions, the later
   * one wins at start-up. Damaged segments are compacted only when `force` names them (see
   * `compactDamaged`).
   */
  async #compactSealed(force: ReadonlySet<number> = new Set()): Promise<void> {
    const oldest = Date.now() - WEBHOOK_EVENT_RETENTION_MS;
    for (const segment of this.#journal.segments.slice(0, -1)) {
      const due = force.has(segment) || (!this.#damaged.has(segment) && this.#liveShare(segment) < COMPACT_BELOW_LIVE_SHARE);
      if (!due) continue;
      const lines = this.#journal.linesIn(segment, isLineHeader);
      for (let done = false; !done; ) {
        const index = this.#idx;
        index.transaction(() => {
          for (let n = 0; n < COMPACT_BATCH; n++) {
            const next = lines.next();
            if (next.done) return void (done = true);
            const { header, location } = next.value;
            if (header.k === 'r') {
              const current = index.lineAt(header.id);
              // Rewritten since, or a superseded version: the live line is elsewhere.
              if (!current || current.segment !== segment || current.offset !== location.offset) continue;
              index.moveRecord(header.id, current, this.#journal.appendRaw(this.#journal.readLine(location)));
            } else if (header.k === 'p') {
              const current = index.payloadAt(header.id);
              if (!current || current.segment !== segment || current.offset !== location.offset) continue;
              index.putPayload(header.id, this.#journal.appendRaw(this.#journal.readLine(location)));
            } else if (header.k === 'b') {
              const current = index.binding(header.key);
              if (!current || current.location.segment !== segment || current.location.offset !== location.offset) continue;
              index.putBinding(header.key, current.account, this.#journal.appendRaw(this.#journal.readLine(location)));
            } else {
              const event = index.webhookEvent(header.key);
              if (!event || event.location.segment !== segment || event.location.offset !== location.offset) continue;
              if (event.atMs < oldest) index.dropWebhookEvent(header.key, location);
              else index.putWebhookEvent(header.key, event.atMs, this.#journal.appendRaw(this.#journal.readLine(location)));
            }
          }
        });
        await yieldToLoop();
      }
      // The copies must be on disk before the segment they came from stops being listed.
      await this.#journal.durable();
      this.#journal.drop(segment);
      await this.#saveSegments();
      this.#journal.deleteDropped(segment);
      this.#idx.dropSegment(segment);
    }
  }

  async #loadMerchants(): Promise<void> {
    this.#merchants.clear();
    const files = await readdir(this.merchantsDir);
    for (const file of files) await makePrivate(join(this.merchantsDir, file), PRIVATE_FILE);
    for (const file of files.filter((f) => f.endsWith('.json') && !f.startsWith('.'))) {
      const merchant = JSON.parse(await readFile(join(this.merchantsDir, file), 'utf8')) as StoredMerchant;
      this.#merchants.put(merchant);
    }
  }

  async #loadBackfill(): Promise<void> {
    this.#backfill.clear();
    if (!existsSync(this.backfillPath)) return;
    await makePrivate(this.backfillPath, PRIVATE_FILE);
    const states = JSON.parse(await readFile(this.backfillPath, 'utf8')) as BackfillState[];
    for (const state of states) this.#backfill.put(state);
  }
}

/**
 * A record's journal line header, as every write of this store writes it (`createdMs`: the
 * record's first version's, for records already stored). Exported for tools that write a ledger's
 * journal in bulk (the benchmark's million-record ledger): a line so written is this store's.
 */
export function headerOf(record: LedgerRecord, searchKey: string, keys: readonly string[] = accrualKeys(record), createdMs?: number): RecordHeader {
  const open = isOpen(record);
  const due = dueOf(record);
  const amount = unsettledAmount(record);
  const merchant = merchantOf(record);
  return {
    k: 'r',
    id: keyOf(record),
    ...(merchant !== DEFAULT_MERCHANT ? { m: merchant } : {}),
    v: record.version,
    s: record.status,
    p: record.pos,
    c: createdMs ?? Date.parse(record.createdAt),
    o: open ? 1 : 0,
    ...(open ? { d: due?.atMs ?? null } : {}),
    ...(due?.needsVerifier ? { dv: 1 } : {}),
    ...(claimedOperationIds(record).length ? { ops: claimedOperationIds(record) } : {}),
    ...(keys.length ? { ak: [...keys] } : {}),
    ...(amount !== undefined ? { ua: amount } : {}),
    oi: record.orderId,
    ...(record.reversal.refundIds.length ? { rf: record.reversal.refundIds } : {}),
    ch: customerHashesOf(record.accrual.customer, searchKey),
    ...(needsAttention(record) ? { na: 1 } : {}),
    ...(record.closed ? { cl: 1 } : {}),
  };
}

/** A whole journal line (header, tab, body, newline) for a record's first version, as `insert` appends it. */
export function journalLine(record: LedgerRecord, searchKey: string): string {
  return `${JSON.stringify(headerOf(record, searchKey))}\t${JSON.stringify(record)}\n`;
}

/**
 * Writes a new ledger at `path` (no ledger may be there) holding `records`, each at version 1, as
 * their inserts would have: the lines `journalLine` makes, in segments rolled at the store's size,
 * and the manifest listing them; no index (the first `init` builds it from a full scan). For tools
 * that need a large ledger fast (the benchmark's million records): nothing is checked beyond the
 * version, so the records must be distinct and claim distinct operation ids and accrual keys, as
 * inserts would have refused otherwise.
 */
export function writeLedgerInBulk(path: string, records: Iterable<LedgerRecord>): { records: number; segments: number; bytes: number } {
  const { manifestPath, journalDir } = new FileLedgerStore(path);
  if (existsSync(manifestPath) || existsSync(journalDir)) throw new Error(`${manifestPath}: a ledger is there already`);
  mkdirSync(dirname(manifestPath), { recursive: true, mode: PRIVATE_DIR });
  mkdirSync(journalDir, { mode: PRIVATE_DIR });
  const segments = [1];
  const searchKey = newSearchKey();
  let fd = openSync(join(journalDir, segmentName(1)), 'wx', PRIVATE_FILE);
  let size = 0;
  let bytes = 0;
  let count = 0;
  let pending: string[] = [];
  let pendingBytes = 0;
  const flush = () => {
    const buffer = Buffer.from(pending.join(''), 'utf8');
    for (let written = 0; written < buffer.length; ) written += writeSync(fd, buffer, written, buffer.length - written, size + written);
    size += buffer.length;
    bytes += buffer.length;
    pending = [];
    pendingBytes = 0;
  };
  try {
    for (const record of records) {
      if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version} (${keyOf(record)})`);
      const line = journalLine(record, searchKey);
      // As `#afterAppend`: a segment is sealed once it holds SEGMENT_BYTES.
      if (size + pendingBytes >= SEGMENT_BYTES) {
        flush();
        closeSync(fd);
        segments.push(segments.length + 1);
        fd = openSync(join(journalDir, segmentName(segments.length)), 'wx', PRIVATE_FILE);
        size = 0;
      }
      pending.push(line);
      pendingBytes += Buffer.byteLength(line, 'utf8');
      count++;
      if (pendingBytes >= 1024 * 1024) flush();
    }
    flush();
  } finally {
    closeSync(fd);
  }
  const manifest: Manifest = { format: 'loyalty-bridge/ledger', formatVersion: FORMAT_VERSION, createdAt: new Date().toISOString(), segments, searchKey };
  writeFileSync(manifestPath, JSON.stringify(manifest, null, 2), { mode: PRIVATE_FILE, flag: 'wx' });
  return { records: count, segments: segments.length, bytes };
}

/** The index row a header makes; what only the body tells is left for later (`bodyPending`). */
function rowOfHeader(h: RecordHeader, location: Location): RecordRow {
  const open = h.o === 1;
  const dated = open && typeof h.d === 'number';
  return {
    key: h.id,
    merchant: h.m ?? DEFAULT_MERCHANT,
    version: h.v,
    status: h.s,
    pos: h.p,
    createdMs: h.c,
    open,
    dueMs: dated ? (h.d as number) : null,
    dueVerifier: dated && h.dv === 1,
    unsettled: h.ua ?? null,
    orderId: h.oi ?? null,
    refunds: h.rf ?? [],
    customers: h.ch ?? [],
    ops: h.ops ?? [],
    accrualKeys: h.ak ?? [],
    attention: [],
    // Lines of earlier builds lack the order id, the customer entries (and open ones the due time); attention needs the body.
    bodyPending: h.oi === undefined || h.ch === undefined || (open && h.d === undefined) || h.na === 1,
    location,
  };
}

/**
 * A parsed header is a line's only when its fields have their types: after damage, a fragment of
 * JSON can parse, and indexing it would point a record at bytes that are not its body.
 */
function isLineHeader(h: unknown): h is LineHeader {
  if (typeof h !== 'object' || h === null) return false;
  const x = h as Record<string, unknown>;
  if (x.k === 'w') return typeof x.key === 'string' && typeof x.t === 'number';
  if (x.k === 'p') return typeof x.id === 'string';
  if (x.k === 'b') return typeof x.key === 'string' && typeof x.a === 'string';
  return (
    x.k === 'r' &&
    typeof x.id === 'string' &&
    (x.m === undefined || typeof x.m === 'string') &&
    Number.isInteger(x.v) &&
    LEDGER_STATUSES.includes(x.s as LedgerStatus) &&
    typeof x.p === 'string' &&
    typeof x.c === 'number' &&
    (x.o === 0 || x.o === 1) &&
    (x.d === undefined || x.d === null || typeof x.d === 'number') &&
    (x.dv === undefined || x.dv === 1) &&
    (x.ops === undefined || (Array.isArray(x.ops) && x.ops.every((id) => typeof id === 'number'))) &&
    (x.ak === undefined || (Array.isArray(x.ak) && x.ak.every((key) => typeof key === 'string'))) &&
    (x.ua === undefined || typeof x.ua === 'number') &&
    (x.oi === undefined || x.oi === null || typeof x.oi === 'string') &&
    (x.rf === undefined || (Array.isArray(x.rf) && x.rf.every((id) => typeof id === 'string'))) &&
    (x.ch === undefined || (Array.isArray(x.ch) && x.ch.every((hash) => typeof hash === 'string'))) &&
    (x.na === undefined || x.na === 1)
  );
}

function deadLetterRow(letter: DeadLetter): DeadLetterRow {
  const dueMs = deadLetterDueAtMs(letter);
  return { id: letter.id, receivedMs: Date.parse(letter.receivedAt) || 0, pos: letter.pos, open: !letter.resolvedAt, reasonCode: letter.reasonCode ?? UNCLASSIFIED, ...(letter.merchantId ? { merchantId: letter.merchantId } : {}), ...(dueMs !== undefined ? { dueMs } : {}) };
}

function segmentName(n: number): string {
  return `${String(n).padStart(6, '0')}.jsonl`;
}

/** Webhook dedupe keys are kept as short hashes: they are only ever compared. */
/** A binding's key in the index: its POS and the delivery's digest (POS names hold no NUL). */
function bindingKey(pos: string, key: string): string {
  return `${pos}\u0000${key}`;
}

function webhookKey(pos: string, key: string): string {
  return createHash('sha256').update(`${pos}\u0000${key}`).digest('base64url').slice(0, 22);
}
