/**
 * The embedded ledger: an append-only journal of record versions, with a lowdb manifest.
 *
 * Why not one lowdb JSON file: lowdb rewrites its whole file on every write, measured here at ~6 ms
 * for 1k records and ~1 s for 100k; a ledger only grows, so every checkout would be slower than the
 * last. Why not one lowdb file per record: creating or renaming a file costs ~500 µs on these
 * disks. Here a write appends one line (~5 µs), whatever the ledger's size; see `journal.ts`.
 *
 * Layout for `file:./data/ledger.json`:
 *   ./data/ledger.json                      lowdb manifest: format version and the journal's segments
 *   ./data/ledger.journal/000001.jsonl …    record versions and processed webhook events, one a line
 *   ./data/ledger.backfill.json             backfill watermarks, one per merchant and POS account
 *   ./data/ledger.journal/.write-probe      empty; written while writes fail, to tell when they work again
 *   ./data/ledger.dead-letters/<id>.json    one lowdb document per dead letter (rare, kept whole)
 *   ./data/ledger.json.lock                 the owning process's pid and the machine's boot id
 *   ./data/ledger.json.restarted            an unclean stop on an earlier boot, until the service has acted
 * Every file is 0600 and every folder the bridge creates 0700 (`private-files.ts`): they hold
 * customers' contacts.
 *
 * Memory holds a compact index (status, pos, time, open flag, due time, claimed operation ids, where
 * the latest version lies) and the most recently used records; start-up reads only line headers.
 * Superseded versions are garbage: a segment whose live share falls under half is compacted by
 * copying its live lines to the end and deleting it, at start-up and whenever a segment fills.
 *
 * Damaged journal lines (an OS crash or power loss: the journal syncs only before upstream calls) are skipped at
 * start-up and reported in `recovery`; the damaged segments are left as found (and copied) until the
 * service has acted on the report and calls `compactDamaged`, so a crash in between finds them again.
 * A lost tail leaves no damaged bytes, so `recovery` also reports a lock left on an earlier boot of
 * the machine (`machineRestarted`): the last writes may be lost even though every line reads.
 *
 * One process at a time: insert-once and compare-and-set are enforced by this process's index, so
 * a lock file keeps a second process out; a lock left by a process that no longer runs (killed) is
 * taken over. Several instances need the PostgreSQL store.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { Low } from 'lowdb';
import { AccrualKeyHeldError, ConflictError, VersionConflictError } from '../errors.js';
import { KeyedMutex } from '../keyed-mutex.js';
import { accountKeysOf, type StoredMerchant } from '../merchants/merchant.js';
import { Journal, syncDirectory, type Location, type WriteFailure, type WriteFile } from './journal.js';
import { makePrivate, PRIVATE_DIR, PRIVATE_FILE, PrivateJSONFile } from './private-files.js';
import { ProcessLock } from './process-lock.js';
import { dueOf } from '../core/transitions.js';
import { takeTurns } from './due-turns.js';
import { accrualKeys, DEFAULT_MERCHANT, isOpen, keyOf, LEDGER_STATUSES, merchantOf, unsettledAmount, type Due, type LedgerRecord, type LedgerStatus } from './record.js';
import { ATTENTION_STATUSES, needsAttention, SETTLED_ATTENTION_STATUSES, UNCLASSIFIED, type AttentionInput } from './attention.js';
import { auditMatches, backfillKey, deadLetterDueAtMs, statusesOf, type AuditEntry, type AuditQuery, type BackfillState, type DeadLetter, type DeadLetterQuery, type DueQuery, type LedgerStore, type ListQuery, type OpenClaim, type OpenCursor } from './store.js';

const FORMAT_VERSION = 2;

interface Manifest {
  format: 'loyalty-bridge/ledger';
  formatVersion: number;
  createdAt: string;
  segments: number[];
}

/**
 * What each journal line's header holds: enough to rebuild the index without parsing bodies.
 * `d` (open records only): the due time (`dueOf`) in epoch ms, null when only an operator can move
 * the record; `dv: 1` when only the history verifier can. Lines written before due times existed
 * have no `d`: start-up derives it from their bodies, for the open records among them only.
 * `oi` (the POS order id), `rf` (refund ids, when any), `na: 1` (`needsAttention`) and `cl: 1`
 * (closed by an operator) serve the operators' search, attention queue and the open-records gauge; lines written before them have no `oi`, and their records
 * are read when a search or the queue needs them.
 */
type LineHeader =
  | { k: 'r'; id: string; m?: string; v: number; s: LedgerStatus; p: string; c: number; o: 0 | 1; d?: number | null; dv?: 1; ops?: number[]; ak?: string[]; ua?: number; oi?: string; rf?: string[]; na?: 1; cl?: 1 }
  | { k: 'w'; key: string; t: number };

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

interface IndexEntry {
  /** The ledger key (`keyOf`): the transactionId within its merchant. */
  key: string;
  merchantId: string;
  version: number;
  status: LedgerStatus;
  pos: string;
  createdAtMs: number;
  open: boolean;
  /** Undefined when the worker has nothing to do on its own (settled, or an operator's to move). */
  due?: Due;
  operationIds: number[];
  /** `accrualKeys` of the latest version, and the amount of an unsettled accrual (`unsettledAmount`). */
  accrualKeys: string[];
  unsettledAmount?: number;
  /** Undefined on lines written before the header held it: the record is read to know. */
  orderId?: string;
  refundIds?: string[];
  attention: boolean;
  closed: boolean;
  location: Location;
}

/**
 * Records with work left, most recently used, kept in memory: the service reads a record back
 * while it works on it. Settled records are not kept: they are seldom read again (a refund comes
 * much later), and keeping them made every record outlive two scavenges into the old generation
 * (~4 kB each), so major collections came often and their pauses showed in the tail latency
 * (the bench saw 7-10 ms event-loop stalls after each). A miss costs one read.
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

export class FileLedgerStore implements LedgerStore {
  readonly kind = 'file';
  readonly manifestPath: string;
  readonly journalDir: string;
  readonly deadLettersDir: string;
  /** One private JSON document per merchant (`<stem>.merchants/<id>.json`); all held in memory (merchants are few). */
  readonly merchantsDir: string;
  /** The operators' audit trail: one JSON line per action, appended and synced, all held in memory. */
  readonly auditPath: string;
  readonly #audit: AuditEntry[] = [];
  /** Every merchant's backfill state in one private JSON document (`<stem>.backfill.json`): one per merchant and POS, few. */
  readonly backfillPath: string;
  readonly #backfill = new Map<string, BackfillState>();
  readonly #merchants = new Map<string, StoredMerchant>();
  readonly #journal: Journal;
  readonly #lock: ProcessLock;
  readonly #index = new Map<string, IndexEntry>();
  readonly #open = new Set<string>();
  /** `<merchant>\u0000<operation id>` → the ledger key of the record that claimed it (ids are per loyalty account). */
  readonly #claims = new Map<string, string>();
  /** Accrual key → the record holding it (see `accrualKeys`). */
  readonly #accrualKeys = new Map<string, string>();
  readonly #cache = new Map<string, LedgerRecord>();
  readonly #webhookEvents = new Map<string, { at: number; location: Location }>();
  readonly #liveBytes = new Map<number, number>();
  /** Every dead letter's listing fields (`dueAtMs`: `deadLetterDueAtMs`); the letters themselves stay on disk. */
  readonly #deadLetters = new Map<string, DeadLetterEntry>();
  readonly #locks = new KeyedMutex();
  /** Damaged segments not compacted away yet: never compacted before `compactDamaged`. */
  readonly #damaged = new Set<number>();
  #recovery?: JournalRecovery;
  /** Lines older than a version read before them, skipped by the last start-up. */
  #staleLines = 0;
  #manifest?: Low<Manifest | null>;
  #compacting?: Promise<void>;
  #ready = false;
  readonly #restartedMarker: string;
  /** The first failure of the manifest's and dead letters' writes since one last succeeded (the journal keeps its own). */
  #fileWriteFailure?: WriteFailure;
  #probing?: Promise<void>;

  constructor(
    path: string,
    /** `writeFile`: how the journal writes (tests make the disk full where they cannot mount a small one). */
    options: { writeFile?: WriteFile } = {},
  ) {
    this.manifestPath = resolve(path);
    const stem = join(dirname(this.manifestPath), basename(this.manifestPath, extname(this.manifestPath)));
    this.journalDir = `${stem}.journal`;
    this.deadLettersDir = `${stem}.dead-letters`;
    this.merchantsDir = `${stem}.merchants`;
    this.auditPath = `${stem}.audit.jsonl`;
    this.backfillPath = `${stem}.backfill.json`;
    this.#journal = new Journal(this.journalDir, undefined, options.writeFile);
    this.#lock = new ProcessLock(`${this.manifestPath}.lock`);
    this.#restartedMarker = `${this.manifestPath}.restarted`;
  }

  static fromUrl(url: string): FileLedgerStore {
    return new FileLedgerStore(url.replace(/^file:(\/\/)?/, ''));
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
      // Written before anything else and removed only by `compactDamaged`: a crash before the service
      // has acted on it finds it again (the new lock already names this boot).
      if (takeover.machineRestarted) await writeFile(this.#restartedMarker, `${new Date().toISOString()}\n`, { mode: PRIVATE_FILE });
      const machineRestarted = existsSync(this.#restartedMarker);
      // Files of a ledger written by an earlier build are 0644: made private now (see private-files.ts).
      await makePrivate(this.manifestPath, PRIVATE_FILE);
      await makePrivate(this.#restartedMarker, PRIVATE_FILE);
      if (!found) {
        manifest.data = { format: 'loyalty-bridge/ledger', formatVersion: FORMAT_VERSION, createdAt: new Date().toISOString(), segments: [1] };
        await manifest.write();
      }
      this.#manifest = manifest;
      this.#journal.open(manifest.data!.segments);
      this.#rebuildIndex();
      this.#noteDamage(machineRestarted);
      // Appends never go after damage: a damaged active segment is sealed as found.
      if (this.#damaged.has(this.#journal.active)) await this.#roll();
      await mkdir(this.deadLettersDir, { recursive: true, mode: PRIVATE_DIR });
      await makePrivate(this.deadLettersDir, PRIVATE_DIR);
      await this.#loadDeadLetters();
      await mkdir(this.merchantsDir, { recursive: true, mode: PRIVATE_DIR });
      await makePrivate(this.merchantsDir, PRIVATE_DIR);
      await this.#loadMerchants();
      await this.#loadAudit();
      await this.#loadBackfill();
      const active = this.#journal.active;
      if (this.#journal.sizeOf(active) >= COMPACT_ACTIVE_FROM_BYTES && this.#liveShare(active) < COMPACT_BELOW_LIVE_SHARE) await this.#roll();
      await this.#compactSealed();
      this.#ready = true;
    } catch (error) {
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
    this.#journal.close();
    await this.#lock.release();
  }

  /**
   * Not ready while the ledger cannot write: with a full disk every checkout fails, and a load
   * balancer must stop sending them here. The failures are those the writes themselves met (no
   * syscall is added to a write); once one is remembered, each ping tries a write in the journal's
   * folder (`Journal.probe`), and the store is ready again as soon as that, or any write, succeeds.
   */
  async ping(): Promise<void> {
    if (!this.#ready) throw new Error('file ledger is not open');
    const failure = this.#journal.writeFailure ?? this.#fileWriteFailure;
    if (!failure) return;
    this.#probing ??= this.#journal.probe().finally(() => (this.#probing = undefined));
    try {
      await this.#probing;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new Error(`the file ledger cannot write to disk (${code}), failing since ${new Date(failure.sinceMs).toISOString()}`);
    }
    this.#fileWriteFailure = undefined;
  }

  durable(): Promise<void> {
    return this.#journal.durable();
  }

  async get(key: string): Promise<LedgerRecord | undefined> {
    return this.#read(key);
  }

  insert(record: LedgerRecord): Promise<{ record: LedgerRecord; created: boolean }> {
    const key = keyOf(record);
    return this.#locks.run(key, async () => {
      if (this.#index.has(key)) return { record: this.#read(key)!, created: false };
      if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version}`);
      const keys = accrualKeys(record);
      this.#checkClaims(record, keys, []);
      this.#write(record, keys);
      return { record, created: true };
    });
  }

  update(next: LedgerRecord): Promise<LedgerRecord> {
    const key = keyOf(next);
    return this.#locks.run(key, async () => {
      const current = this.#index.get(key);
      if (!current || current.version !== next.version - 1) {
        throw new VersionConflictError(key, next.version - 1, current?.version);
      }
      const keys = accrualKeys(next);
      this.#checkClaims(next, keys, current.accrualKeys);
      this.#write(next, keys);
      return next;
    });
  }

  async list(query: ListQuery): Promise<{ items: LedgerRecord[]; total: number }> {
    const fromMs = query.from?.getTime() ?? -Infinity;
    const toMs = query.to?.getTime() ?? Infinity;
    const statuses = statusesOf(query);
    const matching = [...this.#index.values()].filter(
      (e) =>
        (!query.merchantId || e.merchantId === query.merchantId) &&
        (!statuses || statuses.has(e.status)) &&
        (!query.pos || e.pos === query.pos) &&
        e.createdAtMs >= fromMs &&
        e.createdAtMs <= toMs &&
        this.#matchesIds(e, query),
    );
    // Newest first by createdAt (ties by key), the same before and after a restart.
    matching.sort((a, b) => b.createdAtMs - a.createdAtMs || (a.key < b.key ? 1 : -1));
    const items = matching.slice(query.offset, query.offset + query.limit).map((e) => this.#read(e.key)!);
    return { items, total: matching.length };
  }

  /** The order and refund ids a search names, from the index, or from the record on a line from before the index held them. */
  #matchesIds(entry: IndexEntry, query: Pick<ListQuery, 'orderId' | 'refundId'>): boolean {
    if (!query.orderId && !query.refundId) return true;
    const ids = entry.orderId !== undefined ? { orderId: entry.orderId, refundIds: entry.refundIds ?? [] } : (() => {
      const record = this.#read(entry.key)!;
      return { orderId: record.orderId, refundIds: record.reversal.refundIds };
    })();
    return (!query.orderId || ids.orderId === query.orderId) && (!query.refundId || ids.refundIds.includes(query.refundId));
  }

  async listAttention(merchantId?: string): Promise<AttentionInput[]> {
    return [...this.#index.values()]
      .filter((e) => e.attention && (!merchantId || e.merchantId === merchantId))
      .map((e) => this.#read(e.key)!)
      .filter((r) => needsAttention(r));
  }

  async appendAudit(entry: AuditEntry): Promise<void> {
    const file = await open(this.auditPath, 'a', PRIVATE_FILE);
    try {
      await file.appendFile(`${JSON.stringify(entry)}\n`);
      await file.datasync();
    } finally {
      await file.close();
    }
    this.#audit.push(entry);
  }

  async listAudit(query: AuditQuery): Promise<{ items: AuditEntry[]; total: number }> {
    const matching = this.#audit.filter((e) => auditMatches(e, query)).reverse();
    matching.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
    return { items: matching.slice(query.offset, query.offset + query.limit), total: matching.length };
  }

  /**
   * The audit trail, one JSON line per action, read whole at start-up (operator actions are few). A
   * line cut by a crash mid-append is the last one: it is left out, and the next append starts a new line.
   */
  async #loadAudit(): Promise<void> {
    this.#audit.length = 0;
    let text: string;
    try {
      text = await readFile(this.auditPath, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    await makePrivate(this.auditPath, PRIVATE_FILE);
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        this.#audit.push(JSON.parse(line) as AuditEntry);
      } catch {
        // The torn tail of a crash mid-append; what was acknowledged was synced before.
      }
    }
    if (text.length && !text.endsWith('\n')) await writeFile(this.auditPath, '\n', { flag: 'a', mode: PRIVATE_FILE });
  }

  /** One process owns this ledger, so claims (for shared stores) have nothing to arbitrate. */
  async listOpen(limit: number, _claim?: OpenClaim, after?: OpenCursor, merchantId?: string): Promise<LedgerRecord[]> {
    const from = after ? { createdAtMs: Date.parse(after.createdAt), key: keyOf(after) } : undefined;
    return [...this.#open]
      .map((key) => this.#index.get(key)!)
      .filter((e) => (!from || byAge(e, from) > 0) && (!merchantId || e.merchantId === merchantId))
      .sort(byAge)
      .slice(0, limit)
      .map((e) => this.#read(e.key)!);
  }

  /** One pass over the open set, never the whole ledger: due times and merchants are in the index. */
  async listDue(query: DueQuery): Promise<LedgerRecord[]> {
    const skip = new Set(query.skipMerchants);
    const due: { entry: IndexEntry; atMs: number }[] = [];
    for (const id of this.#open) {
      const entry = this.#index.get(id)!;
      if (entry.due && entry.due.atMs <= query.nowMs && (query.canVerify || !entry.due.needsVerifier) && !skip.has(entry.merchantId)) due.push({ entry, atMs: entry.due.atMs });
    }
    return takeTurns(due, { merchantOf: (d) => d.entry.merchantId, earlier: (a, b) => a.atMs - b.atMs || byAge(a.entry, b.entry), perMerchant: query.perMerchant, limit: query.limit }).map(({ entry }) => this.#read(entry.key)!);
  }

  async countOpen(): Promise<number> {
    return this.#open.size;
  }

  async countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>> {
    const counts: Partial<Record<LedgerStatus, number>> = {};
    const add = (status: LedgerStatus) => (counts[status] = (counts[status] ?? 0) + 1);
    for (const key of this.#open) add(this.#index.get(key)!.status);
    for (const e of this.#index.values()) if (!e.open && !e.closed && SETTLED_ATTENTION_STATUSES.includes(e.status)) add(e.status);
    return counts;
  }

  async countOpenDeadLetters(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const e of this.#deadLetters.values()) if (e.open) counts[e.reasonCode] = (counts[e.reasonCode] ?? 0) + 1;
    return counts;
  }

  async listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]> {
    const found: LedgerRecord[] = [];
    for (const key of this.#open) {
      const entry = this.#index.get(key)!;
      if (entry.unsettledAmount === amountCents && entry.merchantId === merchantId) found.push(this.#read(key)!);
    }
    return found;
  }

  async findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined> {
    const holder = this.#claims.get(claimKey(merchantId, operationId));
    return holder === undefined ? undefined : this.#transactionIdOf(holder);
  }

  /** The transactionId a ledger key stands for (the key without its merchant's prefix). */
  #transactionIdOf(key: string): string {
    const merchant = this.#index.get(key)?.merchantId ?? DEFAULT_MERCHANT;
    return merchant === DEFAULT_MERCHANT ? key : key.slice(merchant.length + 1);
  }

  async count(): Promise<number> {
    return this.#index.size;
  }

  async rememberWebhookEvent(pos: string, key: string): Promise<boolean> {
    const hashed = webhookKey(pos, key);
    if (this.#webhookEvents.has(hashed)) return false;
    const at = Date.now();
    const location = this.#journal.append({ k: 'w', key: hashed, t: at } satisfies LineHeader, '0');
    this.#webhookEvents.set(hashed, { at, location });
    this.#addLive(location);
    this.#afterAppend();
    return true;
  }

  async hasWebhookEvent(pos: string, key: string): Promise<boolean> {
    return this.#webhookEvents.has(webhookKey(pos, key));
  }

  saveMerchant(merchant: StoredMerchant): Promise<StoredMerchant> {
    return this.#locks.run('merchants', async () => {
      const current = this.#merchants.get(merchant.id);
      if (merchant.version === 1 && current) throw new ConflictError(`merchant ${merchant.id} exists`);
      if (merchant.version !== 1 && current?.version !== merchant.version - 1) throw new VersionConflictError(`merchant ${merchant.id}`, merchant.version - 1, current?.version);
      const accounts = accountKeysOf(merchant);
      for (const other of this.#merchants.values()) {
        if (other.id === merchant.id) continue;
        const taken = accountKeysOf(other).find((a) => accounts.includes(a));
        if (taken) throw new ConflictError(`POS account ${taken} belongs to merchant ${other.id}`);
        if ([other.tokens.pos, other.tokens.admin].some((t) => t === merchant.tokens.pos || t === merchant.tokens.admin)) throw new ConflictError('token already in use');
      }
      // The merchant's file holds sealed secrets and token hashes only; synced, since an app token
      // lost in a crash could not be asked for again.
      const db = new Low<StoredMerchant>(new PrivateJSONFile(join(this.merchantsDir, `${merchant.id}.json`), { syncData: true }), merchant);
      await this.#writingFile(() => db.write());
      syncDirectory(this.merchantsDir);
      this.#merchants.set(merchant.id, structuredClone(merchant));
      return merchant;
    });
  }

  async getBackfillState(merchantId: string, pos: string): Promise<BackfillState | undefined> {
    const state = this.#backfill.get(backfillKey(merchantId, pos));
    return state && structuredClone(state);
  }

  updateBackfillState(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): Promise<BackfillState | undefined> {
    return this.#locks.run('backfill', async () => {
      const key = backfillKey(merchantId, pos);
      const current = this.#backfill.get(key);
      const next = change(current && structuredClone(current));
      if (!next) return current && structuredClone(current);
      const states = new Map(this.#backfill).set(key, structuredClone({ ...next, merchantId, pos }));
      // Synced: a watermark taken back by a crash is only read again (the pass repeats), but one
      // moved ahead of what was recorded would skip orders; the journal is synced before any call, this file at once.
      const db = new Low<BackfillState[]>(new PrivateJSONFile(this.backfillPath, { syncData: true }), [...states.values()]);
      await this.#writingFile(() => db.write());
      this.#backfill.set(key, states.get(key)!);
      return structuredClone(states.get(key)!);
    });
  }

  async listBackfillStates(merchantId?: string): Promise<BackfillState[]> {
    return [...this.#backfill.values()]
      .filter((s) => !merchantId || s.merchantId === merchantId)
      .sort((a, b) => backfillKey(a.merchantId, a.pos).localeCompare(backfillKey(b.merchantId, b.pos)))
      .map((s) => structuredClone(s));
  }

  async getMerchant(id: string): Promise<StoredMerchant | undefined> {
    const merchant = this.#merchants.get(id);
    return merchant && structuredClone(merchant);
  }

  async listMerchants(query: { offset: number; limit: number }): Promise<{ items: StoredMerchant[]; total: number }> {
    const all = [...this.#merchants.values()].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.id < b.id ? -1 : 1));
    return { items: all.slice(query.offset, query.offset + query.limit).map((m) => structuredClone(m)), total: all.length };
  }

  async findMerchantByToken(kind: 'pos' | 'admin', hash: string): Promise<StoredMerchant | undefined> {
    for (const merchant of this.#merchants.values()) if (merchant.tokens[kind] === hash) return structuredClone(merchant);
    return undefined;
  }

  async findMerchantByAccount(accountKey: string): Promise<StoredMerchant | undefined> {
    for (const merchant of this.#merchants.values()) if (accountKeysOf(merchant).includes(accountKey)) return structuredClone(merchant);
    return undefined;
  }

  async saveDeadLetter(letter: DeadLetter): Promise<void> {
    await this.#locks.run(`dead-letter:${letter.id}`, () => this.#writeDeadLetter(letter));
  }

  async #writeDeadLetter(letter: DeadLetter): Promise<void> {
    const db = new Low<DeadLetter>(new PrivateJSONFile(join(this.deadLettersDir, `${letter.id}.json`)), letter);
    await this.#writingFile(() => db.write());
    this.#deadLetters.set(letter.id, deadLetterEntry(letter));
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
    const due = [...this.#deadLetters.entries()]
      .filter((e): e is [string, DeadLetterEntry & { dueAtMs: number }] => e[1].dueAtMs !== undefined && e[1].dueAtMs <= query.nowMs)
      .sort(([a, x], [b, y]) => x.dueAtMs - y.dueAtMs || (a < b ? -1 : 1))
      .slice(0, query.limit);
    const letters = await Promise.all(due.map(([id]) => this.getDeadLetter(id)));
    return letters.filter((l): l is DeadLetter => l !== undefined);
  }

  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    if (!this.#deadLetters.has(id)) return undefined;
    const db = new Low<DeadLetter | null>(new PrivateJSONFile(join(this.deadLettersDir, `${id}.json`)), null);
    await db.read();
    return db.data ?? undefined;
  }

  async listDeadLetters(query: DeadLetterQuery): Promise<{ items: DeadLetter[]; total: number }> {
    const matching = [...this.#deadLetters.entries()]
      .filter(([, e]) => (!query.pos || e.pos === query.pos) && (query.open === undefined || e.open === query.open) && (!query.merchantId || e.merchantId === query.merchantId))
      .filter(([, e]) => !query.awaiting || (e.open && (e.dueAtMs !== undefined) === (query.awaiting === 'bridge')))
      .sort(([a, x], [b, y]) => y.receivedAtMs - x.receivedAtMs || (a < b ? 1 : -1));
    const items = await Promise.all(matching.slice(query.offset, query.offset + query.limit).map(([id]) => this.getDeadLetter(id)));
    return { items: items.filter((l): l is DeadLetter => l !== undefined), total: matching.length };
  }

  /** What start-up found unreadable in the journal, if anything (see `JournalRecovery`). */
  get recovery(): JournalRecovery | undefined {
    return this.#recovery;
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
    if (this.#damaged.size === 0) return;
    await this.#compacting;
    this.#compacting = this.#compactSealed(this.#damaged).finally(() => (this.#compacting = undefined));
    await this.#compacting;
    this.#damaged.clear();
  }

  /** Bytes the journal holds, and how many of them are live (for the benchmark and operators). */
  journalStats(): { segments: number; bytes: number; liveBytes: number } {
    const bytes = this.#journal.segments.reduce((sum, s) => sum + this.#journal.sizeOf(s), 0);
    const liveBytes = [...this.#liveBytes.values()].reduce((sum, n) => sum + n, 0);
    return { segments: this.#journal.segments.length, bytes, liveBytes };
  }

  /**
   * Records with work left that this process wrote or read last come from memory. Callers must treat returned records
   * as immutable (the service copies before changing one).
   */
  #read(key: string): LedgerRecord | undefined {
    const cached = this.#cache.get(key);
    if (cached) {
      this.#cache.delete(key);
      this.#cache.set(key, cached);
      return cached;
    }
    const entry = this.#index.get(key);
    if (!entry) return undefined;
    const record = JSON.parse(this.#journal.readBody(entry.location)) as LedgerRecord;
    this.#keep(record);
    return record;
  }

  /** `keys`: the record's `accrualKeys`, hashed once per write by the caller. */
  #write(record: LedgerRecord, keys: string[]): void {
    const open = isOpen(record);
    const due = dueOf(record);
    const amount = unsettledAmount(record);
    const key = keyOf(record);
    const merchant = merchantOf(record);
    const header: LineHeader = {
      k: 'r',
      id: key,
      ...(merchant !== DEFAULT_MERCHANT ? { m: merchant } : {}),
      v: record.version,
      s: record.status,
      p: record.pos,
      c: this.#index.get(key)?.createdAtMs ?? Date.parse(record.createdAt),
      o: open ? 1 : 0,
      ...(open ? { d: due?.atMs ?? null } : {}),
      ...(due?.needsVerifier ? { dv: 1 } : {}),
      ...(record.accrual.operationIds.length ? { ops: record.accrual.operationIds } : {}),
      ...(keys.length ? { ak: keys } : {}),
      ...(amount !== undefined ? { ua: amount } : {}),
      oi: record.orderId,
      ...(record.reversal.refundIds.length ? { rf: record.reversal.refundIds } : {}),
      ...(needsAttention(record) ? { na: 1 } : {}),
      ...(record.closed ? { cl: 1 } : {}),
    };
    const location = this.#journal.append(header, JSON.stringify(record));
    this.#keep(record);
    this.#remember(header as Extract<LineHeader, { k: 'r' }>, location);
    this.#afterAppend();
  }

  /**
   * An upstream operation proves one accrual: an id another record holds is refused, as in PostgreSQL.
   * An accrual key another record holds is refused when this version takes it newly (`held` are the
   * keys the stored version has), so a record already holding a key keeps moving.
   */
  #checkClaims(record: LedgerRecord, keys: readonly string[], held: readonly string[]): void {
    const key = keyOf(record);
    const merchant = merchantOf(record);
    for (const id of record.accrual.operationIds) {
      const holder = this.#claims.get(claimKey(merchant, id));
      if (holder !== undefined && holder !== key) throw new ConflictError(`operation ${id} is claimed by ${this.#transactionIdOf(holder)}`);
    }
    for (const accrualKey of keys) {
      const holder = this.#accrualKeys.get(accrualKey);
      if (holder !== undefined && holder !== key && !held.includes(accrualKey)) throw new AccrualKeyHeldError(record.transactionId, this.#transactionIdOf(holder));
    }
  }

  #keep(record: LedgerRecord): void {
    const key = keyOf(record);
    this.#cache.delete(key);
    if (!isOpen(record)) return;
    this.#cache.set(key, record);
    if (this.#cache.size > CACHE_RECORDS) this.#cache.delete(this.#cache.keys().next().value!);
  }

  #remember(h: Extract<LineHeader, { k: 'r' }>, location: Location): void {
    const previous = this.#index.get(h.id);
    if (previous) this.#removeLive(previous.location);
    this.#addLive(location);
    const due = h.o === 1 && typeof h.d === 'number' ? { atMs: h.d, needsVerifier: h.dv === 1 } : undefined;
    const keys = h.ak ?? [];
    const merchantId = h.m ?? DEFAULT_MERCHANT;
    this.#index.set(h.id, { key: h.id, merchantId, version: h.v, status: h.s, pos: h.p, createdAtMs: h.c, open: h.o === 1, due, operationIds: h.ops ?? [], accrualKeys: keys, unsettledAmount: h.ua, ...(h.oi !== undefined ? { orderId: h.oi, refundIds: h.rf ?? [] } : {}), attention: h.oi !== undefined ? h.na === 1 : ATTENTION_STATUSES.includes(h.s), closed: h.cl === 1, location });
    if (h.o === 1) this.#open.add(h.id);
    else this.#open.delete(h.id);
    for (const id of previous?.operationIds ?? []) this.#claims.delete(claimKey(merchantId, id));
    for (const id of h.ops ?? []) this.#claims.set(claimKey(merchantId, id), h.id);
    for (const key of previous?.accrualKeys ?? []) if (this.#accrualKeys.get(key) === h.id) this.#accrualKeys.delete(key);
    // A key already held stays with its holder: two unsettled accruals of one key can only come from
    // an earlier build's ledger, and the history verifier treats such a pair as ambiguous.
    for (const key of keys) if (!this.#accrualKeys.has(key)) this.#accrualKeys.set(key, h.id);
  }

  #rebuildIndex(): void {
    this.#index.clear();
    this.#open.clear();
    this.#claims.clear();
    this.#accrualKeys.clear();
    this.#cache.clear();
    this.#webhookEvents.clear();
    this.#liveBytes.clear();
    const oldest = Date.now() - WEBHOOK_EVENT_RETENTION_MS;
    /** Open records whose latest line predates due times in headers. */
    const undated = new Set<string>();
    this.#staleLines = 0;
    for (const { header, location } of this.#journal.scan(isLineHeader)) {
      if (header.k === 'r') {
        // Versions only grow, and compaction copies the latest one (an equal version, which wins):
        // an older version after a newer one is a stale block a crashed filesystem brought back.
        if ((this.#index.get(header.id)?.version ?? 0) > header.v) {
          this.#staleLines++;
          continue;
        }
        this.#remember(header, location);
        if (header.o === 1 && header.d === undefined) undated.add(header.id);
        else undated.delete(header.id);
      } else if (header.t >= oldest && !this.#webhookEvents.has(header.key)) {
        this.#webhookEvents.set(header.key, { at: header.t, location });
        this.#addLive(location);
      }
    }
    // Not "due now" for all of them: a reversal in doubt is never written again by the worker, so
    // it would stay due and take a place in every batch. Compaction copies lines as they are, so
    // this is done at every start-up until the record is written again.
    for (const id of undated) this.#index.get(id)!.due = dueOf(this.#read(id)!);
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

  #addLive(location: Location): void {
    this.#liveBytes.set(location.segment, (this.#liveBytes.get(location.segment) ?? 0) + location.length);
  }

  #removeLive(location: Location): void {
    this.#liveBytes.set(location.segment, (this.#liveBytes.get(location.segment) ?? 0) - location.length);
  }

  #liveShare(segment: number): number {
    const size = this.#journal.sizeOf(segment);
    return size === 0 ? 1 : (this.#liveBytes.get(segment) ?? 0) / size;
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
   * manifest does not list, which open would delete.
   */
  async #roll(): Promise<void> {
    this.#manifest!.data!.segments = [...this.#journal.segments, this.#journal.active + 1];
    await this.#writeManifest();
    this.#journal.roll();
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
   * then drops those segments from the manifest and deletes them. A crash part-way leaves copies
   * of lines that are also in the old segment: identical versions, the later one wins at start-up.
   * Damaged segments are compacted only when `force` names them (see `compactDamaged`).
   */
  async #compactSealed(force: ReadonlySet<number> = new Set()): Promise<void> {
    const oldest = Date.now() - WEBHOOK_EVENT_RETENTION_MS;
    for (const segment of this.#journal.segments.slice(0, -1)) {
      const due = force.has(segment) || (!this.#damaged.has(segment) && this.#liveShare(segment) < COMPACT_BELOW_LIVE_SHARE);
      if (!due) continue;
      const live = [
        ...[...this.#index.values()].filter((e) => e.location.segment === segment).map((e) => ({ kind: 'r' as const, id: e.key, location: e.location })),
        ...[...this.#webhookEvents.entries()].filter(([, e]) => e.location.segment === segment).map(([key, e]) => ({ kind: 'w' as const, id: key, location: e.location, at: e.at })),
      ];
      for (let i = 0; i < live.length; i += COMPACT_BATCH) {
        for (const item of live.slice(i, i + COMPACT_BATCH)) {
          if (item.kind === 'r') {
            const entry = this.#index.get(item.id);
            // Rewritten since the list was taken: the newer version lives elsewhere already.
            if (!entry || entry.location !== item.location) continue;
            const moved = this.#journal.appendRaw(this.#journal.readLine(entry.location));
            this.#removeLive(entry.location);
            this.#addLive(moved);
            entry.location = moved;
          } else {
            const event = this.#webhookEvents.get(item.id);
            if (!event || event.location !== item.location) continue;
            this.#removeLive(event.location);
            if (event.at < oldest) {
              this.#webhookEvents.delete(item.id);
              continue;
            }
            event.location = this.#journal.appendRaw(this.#journal.readLine(event.location));
            this.#addLive(event.location);
          }
        }
        await yieldToLoop();
      }
      // The copies must be on disk before the segment they came from stops being listed.
      await this.#journal.durable();
      this.#journal.drop(segment);
      this.#liveBytes.delete(segment);
      await this.#saveSegments();
      this.#journal.deleteDropped(segment);
    }
  }

  async #loadMerchants(): Promise<void> {
    this.#merchants.clear();
    const files = await readdir(this.merchantsDir);
    for (const file of files) await makePrivate(join(this.merchantsDir, file), PRIVATE_FILE);
    for (const file of files.filter((f) => f.endsWith('.json') && !f.startsWith('.'))) {
      const merchant = JSON.parse(await readFile(join(this.merchantsDir, file), 'utf8')) as StoredMerchant;
      this.#merchants.set(merchant.id, merchant);
    }
  }

  async #loadBackfill(): Promise<void> {
    this.#backfill.clear();
    if (!existsSync(this.backfillPath)) return;
    await makePrivate(this.backfillPath, PRIVATE_FILE);
    const states = JSON.parse(await readFile(this.backfillPath, 'utf8')) as BackfillState[];
    for (const state of states) this.#backfill.set(backfillKey(state.merchantId, state.pos), state);
  }

  async #loadDeadLetters(): Promise<void> {
    this.#deadLetters.clear();
    const files = await readdir(this.deadLettersDir);
    // Their bodies are the POS's payloads, customers included; a temporary file left by a crash too.
    for (const file of files) await makePrivate(join(this.deadLettersDir, file), PRIVATE_FILE);
    for (const file of files.filter((f) => f.endsWith('.json') && !f.startsWith('.'))) {
      const letter = JSON.parse(await readFile(join(this.deadLettersDir, file), 'utf8')) as DeadLetter;
      this.#deadLetters.set(letter.id, deadLetterEntry(letter));
    }
  }
}

/**
 * A parsed header is a line's only when its fields have their types: after damage, a fragment of
 * JSON can parse, and indexing it would point a record at bytes that are not its body.
 */
function isLineHeader(h: unknown): h is LineHeader {
  if (typeof h !== 'object' || h === null) return false;
  const x = h as Record<string, unknown>;
  if (x.k === 'w') return typeof x.key === 'string' && typeof x.t === 'number';
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
    (x.ua === undefined || typeof x.ua === 'number')
  );
}

interface DeadLetterEntry {
  receivedAtMs: number;
  pos: string;
  open: boolean;
  merchantId?: string;
  dueAtMs?: number;
  reasonCode: string;
}

function deadLetterEntry(letter: DeadLetter): DeadLetterEntry {
  const dueAtMs = deadLetterDueAtMs(letter);
  return { receivedAtMs: Date.parse(letter.receivedAt), pos: letter.pos, open: !letter.resolvedAt, reasonCode: letter.reasonCode ?? UNCLASSIFIED, ...(letter.merchantId ? { merchantId: letter.merchantId } : {}), ...(dueAtMs !== undefined ? { dueAtMs } : {}) };
}

/** Oldest first by createdAt, ties by id: `listOpen`'s order, the same before and after a restart. */
function byAge(a: Pick<IndexEntry, 'createdAtMs' | 'key'>, b: Pick<IndexEntry, 'createdAtMs' | 'key'>): number {
  return a.createdAtMs - b.createdAtMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/** Webhook dedupe keys are kept as short hashes: they are only ever compared. */
function webhookKey(pos: string, key: string): string {
  return createHash('sha256').update(`${pos}\u0000${key}`).digest('base64url').slice(0, 22);
}

/** Operation ids are per loyalty account, so per merchant. */
function claimKey(merchantId: string, operationId: number): string {
  return `${merchantId}\u0000${operationId}`;
}
