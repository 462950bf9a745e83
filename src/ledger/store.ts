/**
 * The one interface every ledger store implements (JSON files, PostgreSQL, memory for unit tests).
 * Stores are dumb and safe: they keep records and enforce the rules that make "exactly once" hold
 * across concurrent writers, atomically with each write: `insert` creates a transactionId at most
 * once; `update` is a compare-and-set on `version`; an upstream operation id is claimed by one
 * record at most; an accrual key (`accrualKeys`: one customer and amount with an accrual
 * unsettled) is held by one record at most. Every store passes `test/ledger/store-contract.ts`.
 */
import { createHmac } from 'node:crypto';
import type { Lease } from '../kernel/lease.js';
import { ValidationError, type FieldIssue } from '../kernel/errors.js';
import type { StoredMerchant } from '../state/merchant.js';
import type { AttentionInput, AttentionKind } from '../state/attention.js';
import { identitiesOf } from '../state/customer-index.js';
import { keyOf, merchantOf, type LedgerRecord, type LedgerStatus } from '../state/record.js';

export interface ListQuery {
  /** Only this merchant's records. */
  merchantId?: string;
  /** Only records in this status, or in any of these. */
  status?: LedgerStatus | readonly LedgerStatus[];
  pos?: string;
  /** The POS's own order id (`orderId`): records whose order id starts with this, whatever the case (the order's record and its remainders). */
  orderId?: string;
  /** Records whose reversal was asked for by a refund id starting with this, whatever the case. */
  refundId?: string;
  /**
   * Customer identifiers as the ledger compares them (customer-index.ts `identitiesOf`:
   * `phone:+15550001111`, `email:ann@example.test`, `card:11-100001-2`): the records of a customer
   * with any of them, found through the keyed-hash index, never by reading contacts. A search text
   * that could be a phone or a card serial is asked as both (customer-index.ts `searchIdentities`).
   * Each identifier's newest CUSTOMER_SEARCH_DEPTH records are searched (the other filters apply to those).
   */
  customer?: readonly string[];
  /** Inclusive bounds on `createdAt`. */
  from?: Date;
  to?: Date;
  /**
   * Keyset paging: only records after this one in the list's order (newest first: createdAt, then
   * ledger key, both descending). A page read this way costs what it returns however deep it is;
   * `offset` (counted after the cursor, usually 0) costs what it skips.
   */
  after?: ListCursor;
  offset: number;
  limit: number;
}

/** Where a list of records resumes (`ListQuery.after`): the last record of the page before. */
export interface ListCursor {
  createdAt: string;
  /** The ledger key (`keyOf`). */
  key: string;
}

/**
 * A list's total is counted exactly up to this many matches and no further: counting every match
 * of a filter over millions of records would cost what the table holds on every page. Past it the
 * answer says `totalCapped` and `total` is the cap ("at least this many").
 */
export const LIST_COUNT_CAP = 1_000;

/**
 * A customer search looks at each identifier's newest this many records: newest first through its
 * index, so a customer with years of orders costs what a page does, not what the customer holds.
 */
export const CUSTOMER_SEARCH_DEPTH = 1_000;

/**
 * An order or refund id search (a prefix) that matches more ledger keys than this is refused: the
 * page is the newest of the matches, which takes ordering every one of them, and a prefix of one
 * or two characters can match millions. An exact id matches a few records.
 */
export const PREFIX_MATCH_CAP = 1_000;

/** The refusal of a prefix matching more than PREFIX_MATCH_CAP ledger keys (each store counts them in its own id index, stopping past the cap). */
export function tooManyPrefixMatches(field: 'orderId' | 'refundId', prefix: string): ValidationError {
  return ValidationError.field(field, `${JSON.stringify(prefix.slice(0, 40))} is the start of more than ${PREFIX_MATCH_CAP.toLocaleString('en-US')} ${field === 'orderId' ? 'order' : 'refund'} ids: give more of it`);
}

/** One page of a list, and how many match the filters in all, wherever the page starts (at most LIST_COUNT_CAP; see there). */
export interface Page<T> {
  items: T[];
  total: number;
  /** More than `total` match: counting stopped at LIST_COUNT_CAP. */
  totalCapped?: true;
}

/** A list's page and total from the matches counted up to the cap (`counted` may hold one more than the cap). */
export function pageOf<T>(items: T[], counted: number): Page<T> {
  return counted > LIST_COUNT_CAP ? { items, total: LIST_COUNT_CAP, totalCapped: true } : { items, total: counted };
}

/**
 * An authentic webhook delivery the bridge could not translate, kept whole so it can be fixed and
 * replayed. The id is derived from the POS and the body, so a POS redelivering it finds the same letter.
 */
export interface DeadLetter {
  id: string;
  pos: string;
  /** Whose delivery it is; absent when no merchant is known for it (and on letters from before merchants: the default's). */
  merchantId?: string;
  receivedAt: string;
  lastReceivedAt: string;
  deliveries: number;
  reason: string;
  /**
   * The code of the first cause (unknown_merchant, merchant_suspended, invalid_payload,
   * pos_api_failed, pos_api_not_configured, …): a small set, the dead-letter gauge's reason label.
   * Absent on letters kept before it existed.
   */
  reasonCode?: string;
  issues?: FieldIssue[];
  /** The headers that matter to processing (event type, ids, content type). */
  headers: Record<string, string>;
  body: string;
  bodyEncoding: 'utf8' | 'base64';
  /** Each run since it was kept: an operator's replay or the bridge's own run (`by`; absent on runs from before the bridge ran any). */
  /** `created`: the checkouts the run recorded (transactionIds; not repeats); `actedOn`: the records it found and acted on or matched (a refund's order, a repeat). */
  replays: { at: string; outcome: string; by?: 'operator' | 'bridge'; created?: string[]; actedOn?: string[] }[];
  /** Set when a replay went through, or when an operator dismissed it (`dismissed`). */
  resolvedAt?: string;
  /** An operator closed it without running it (nothing to carry out): kept whole, never run again. */
  dismissed?: { at: string; actor: string; reason: string };
  /** Who moves it on: the bridge by itself, or a person. Absent on letters kept before the bridge retried any: a person's. */
  retry?: DeadLetterRetry;
}

/**
 * A dead letter's retry state. A transient cause (the POS API timed out, or answered 5xx or 429,
 * when the bridge fetched what the delivery names) passes by itself: the bridge runs the letter
 * again on its schedule, `attempts` times at most, then leaves it to a person. Any other cause
 * (missing configuration, an unknown or suspended merchant, a payload it cannot translate) needs a
 * person from the start: no `nextAt`.
 */
export interface DeadLetterRetry {
  transient: boolean;
  /** Automatic runs made so far. */
  attempts: number;
  /** When the next automatic run is due; absent when the bridge will not run it by itself. */
  nextAt?: string;
  /**
   * The bridge instance running it now (an automatic run or an operator's replay), and until when it
   * holds it: no other instance runs it meanwhile. A claim past `until` was left by an instance
   * that stopped; it no longer holds anything.
   */
  claim?: Lease;
}

/**
 * When the bridge should look at the letter next, by itself: its `nextAt`, or the end of a claim
 * that holds it past that (an instance that stopped mid-run leaves its letter to others once the
 * claim ends). Undefined when it never will: resolved, or waiting for a person. The one rule every
 * store orders and filters letters by.
 */
export function deadLetterDueAtMs(letter: Pick<DeadLetter, 'resolvedAt' | 'retry'>): number | undefined {
  const next = letter.retry?.nextAt;
  if (letter.resolvedAt || !next) return undefined;
  const claimedUntil = letter.retry?.claim ? Date.parse(letter.retry.claim.until) : Number.NEGATIVE_INFINITY;
  return Math.max(Date.parse(next), claimedUntil);
}

export interface DeadLetterQuery {
  pos?: string;
  open?: boolean;
  merchantId?: string;
  /**
   * Open letters only: `bridge`, those the bridge will run again by itself (`deadLetterDueAtMs`
   * defined); `operator`, those waiting for a person.
   */
  awaiting?: 'bridge' | 'operator';
  /** Oldest first (by `receivedAt`, then id) instead of newest first: the attention queue's order. */
  oldestFirst?: boolean;
  offset: number;
  limit: number;
}

/** Open dead letters counted: by the code of their cause (`unclassified` for letters kept before codes), and by merchant (`''` for letters of no known merchant). */
export interface DeadLetterCounts {
  byReason: Record<string, number>;
  byMerchant: Record<string, number>;
}

/** A worker taking open records for a while, so that other instances leave them alone. */
export interface OpenClaim {
  owner: string;
  leaseMs: number;
  /** Leave records written less than this long ago: the instance that wrote them is delivering them. */
  idleMs?: number;
}

/** Where a listing of open records resumes: after this record, in `listOpen`'s order (createdAt, then ledger key). */
export type OpenCursor = Pick<LedgerRecord, 'createdAt' | 'transactionId' | 'merchantId'>;

export interface OpenQuery {
  limit: number;
  /** A shared store leases what it answers to this worker (see `OpenClaim`). */
  claim?: OpenClaim;
  after?: OpenCursor;
  merchantId?: string;
  /**
   * Only records the bridge moves by itself (`dueOf` defined: a call, a check, a call in flight, a
   * remainder to create), due now or later. Those waiting for a person are left out: start-up
   * recovery has nothing to do for them, and however many pile up they cost it nothing.
   */
  dueOnly?: boolean;
}

/**
 * One item of the attention queue as a store indexes it, written with the record: what
 * `attentionOf` finds (attention.ts `attentionEntriesOf`). A record leaves the index with the write
 * that settles, closes or acknowledges it.
 */
export interface AttentionEntry {
  /** The ledger key (`keyOf`). */
  key: string;
  merchantId: string;
  kind: AttentionKind;
  since: string;
}

/** Where an attention listing resumes: after this entry, oldest first (since, then key, then kind). */
export type AttentionCursor = Pick<AttentionEntry, 'since' | 'key' | 'kind'>;

export interface AttentionQuery {
  merchantId?: string;
  after?: AttentionCursor;
  limit: number;
}

/** The records' attention entries counted: per kind how many and since when the oldest; per merchant how many. */
export interface AttentionCounts {
  byKind: Partial<Record<AttentionKind, { count: number; oldestSince: string }>>;
  byMerchant: Record<string, number>;
}

/** The worker's scheduled pass: what is due by `nowMs` (see `dueOf` in record.ts). */
export interface DueQuery {
  /** The bridge's clock, the one `nextAttemptAt` was set with. */
  nowMs: number;
  limit: number;
  /** At most this many records of one merchant (none: no cap but `limit`). */
  perMerchant?: number;
  /** These merchants' records are left out, and not claimed (the worker holds a rate-limited merchant's work). */
  skipMerchants?: readonly string[];
  /**
   * The bridge can read the operations history (LOYALTY_API_KEY is set). Without it, an accrual in
   * doubt waits for an operator and is left out: it would fill every batch and move no further.
   */
  canVerify: boolean;
  claim?: OpenClaim;
}

/**
 * One operator action, kept for the audit trail (`GET /v1/admin/audit`) whatever became of it in
 * the record: who, what, to which record or dead letter, why, when. Never changed or removed.
 */
export interface AuditEntry {
  at: string;
  /** `admin`, a name from ADMIN_TOKENS, or `merchant:<id>`. */
  actor: string;
  /** retry, reverse, resolve, close, acknowledge, dismiss, replay, unmask, or bulk:<action>. */
  action: string;
  /** The transactionId or dead-letter id acted on (a bulk action: one entry per record). */
  target: string;
  reason?: string;
  /** Whose record or letter; absent for a letter of no known merchant. */
  merchantId?: string;
  /** What came of it, in words (e.g. the status after, or why it was refused). */
  outcome?: string;
}

export interface AuditQuery {
  merchantId?: string;
  actor?: string;
  /** Inclusive bounds on `at`. */
  from?: Date;
  to?: Date;
  offset: number;
  limit: number;
}

/** `list`'s status filter as a set (undefined: any status). */
export function statusesOf(query: Pick<ListQuery, 'status'>): ReadonlySet<LedgerStatus> | undefined {
  if (query.status === undefined) return undefined;
  return new Set(typeof query.status === 'string' ? [query.status] : query.status);
}

/** Whether `record` passes `list`'s filters (stores that filter in memory use this one rule). */
export function listMatches(record: Pick<LedgerRecord, 'transactionId' | 'merchantId' | 'status' | 'pos' | 'orderId' | 'createdAt' | 'reversal' | 'accrual'>, query: ListQuery, statuses = statusesOf(query)): boolean {
  const createdMs = Date.parse(record.createdAt);
  return (
    (!query.merchantId || merchantOf(record) === query.merchantId) &&
    (!statuses || statuses.has(record.status)) &&
    (!query.pos || record.pos === query.pos) &&
    (!query.orderId || startsWithFolded(record.orderId, query.orderId)) &&
    (!query.refundId || record.reversal.refundIds.some((id) => startsWithFolded(id, query.refundId!))) &&
    (!query.customer || identitiesOf(record.accrual.customer).some((identity) => query.customer!.includes(identity))) &&
    (!query.from || createdMs >= query.from.getTime()) &&
    (!query.to || createdMs <= query.to.getTime()) &&
    (!query.after || newestFirst({ createdAtMs: createdMs, key: keyOf(record) }, { createdAtMs: Date.parse(query.after.createdAt), key: query.after.key }) > 0)
  );
}

/** An id search's rule: `text` starts with `prefix`, ASCII letters' case ignored (`foldCase`). */
export function startsWithFolded(text: string, prefix: string): boolean {
  return foldCase(text).startsWith(foldCase(prefix));
}

/**
 * How order and refund ids are compared when searched: A-Z as a-z, nothing else changed. ASCII only,
 * so that every store folds alike (PostgreSQL's lower() would follow the database's locale, SQLite's
 * folds ASCII only); the six POSes' order and refund ids are ASCII. PostgreSQL says it as FOLD_CASE_SQL.
 */
export function foldCase(text: string): string {
  return text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** `foldCase` of a PostgreSQL text expression (immutable, so an index can be built on it). */
export const FOLD_CASE_SQL = (expression: string) => `translate(${expression}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`;

/** `list`'s order for stores that sort in memory: newest first by createdAt, ties by ledger key descending (negative: `a` comes first). */
export function newestFirst(a: { createdAtMs: number; key: string }, b: { createdAtMs: number; key: string }): number {
  return b.createdAtMs - a.createdAtMs || (a.key < b.key ? 1 : a.key > b.key ? -1 : 0);
}

/** One group of the attention index counted: its kind and merchant, how many, and the oldest entry's `since`. */
export interface AttentionGroup {
  kind: AttentionKind;
  merchantId: string;
  count: number;
  oldestSince: string;
}

/**
 * The attention index's groups folded into what `countAttention` answers, by every store alike: the
 * SQL stores group in their tables, the memory store passes each entry as a group of one.
 */
export function attentionCountsOf(groups: Iterable<AttentionGroup>): AttentionCounts {
  const counts: AttentionCounts = { byKind: {}, byMerchant: {} };
  for (const g of groups) {
    const kind = (counts.byKind[g.kind] ??= { count: 0, oldestSince: g.oldestSince });
    kind.count += g.count;
    if (Date.parse(g.oldestSince) < Date.parse(kind.oldestSince)) kind.oldestSince = g.oldestSince;
    counts.byMerchant[g.merchantId] = (counts.byMerchant[g.merchantId] ?? 0) + g.count;
  }
  return counts;
}

/** The attention index's order: oldest first by since, then ledger key, then kind (negative: `a` comes first). */
export function attentionOrder(a: AttentionCursor, b: AttentionCursor): number {
  const [x, y] = [Date.parse(a.since), Date.parse(b.since)];
  return x - y || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0);
}

/** `text` inside a SQL LIKE pattern with `\\` as its escape: its `%`, `_` and `\\` match themselves. */
export function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Whether an audit entry passes `listAudit`'s filters: `actor` is a prefix of the entry's actor. */
export function auditMatches(entry: AuditEntry, query: AuditQuery): boolean {
  const atMs = Date.parse(entry.at);
  return (!query.merchantId || entry.merchantId === query.merchantId) && (!query.actor || entry.actor.startsWith(query.actor)) && (!query.from || atMs >= query.from.getTime()) && (!query.to || atMs <= query.to.getTime());
}

/** What one backfill pass found (docs/backfill-and-reconcile.md), kept with its account's state. */
export interface BackfillPassSummary {
  startedAt: string;
  finishedAt: string;
  /** The window read: [since, until). */
  since: string;
  until: string;
  /** `scheduled` by the poller, `request` by POST /v1/admin/backfill or the CLI. */
  by: 'scheduled' | 'request';
  examined: number;
  new: number;
  known: number;
  refused: number;
  /** Unpaid sales listed and left alone. */
  unpaid: number;
  /** Why the pass stopped before the end of its window (the watermark did not move). */
  error?: string;
}

/**
 * One merchant's backfill of one POS account: how far the POS's orders have been read back, and
 * which instance is reading them now. Kept durably in the ledger store, so it survives restarts and
 * a change of instances.
 */
export interface BackfillState {
  merchantId: string;
  pos: string;
  /** The merchant's account on the POS the watermark belongs to (another account starts over). */
  account: string;
  /** Every change the POS made before this instant has been read (ISO 8601); absent before the first complete pass. */
  watermark?: string;
  lastPass?: BackfillPassSummary;
  /** When the poller runs its next scheduled pass. */
  nextPassAt?: string;
  /**
   * The instance running a pass of this account now, and until when it holds it: no other instance
   * starts one meanwhile. A lease past `until` was left by an instance that stopped.
   */
  lease?: Lease;
}

/** A backfill state's key within a store: merchant ids (MERCHANT_ID) and POS names hold no `/`. */
export function backfillKey(merchantId: string, pos: string): string {
  return `${merchantId}/${pos}`;
}

/** The delivery or request body that created a record, kept beside it for operators (`RecordOrigin.payload`). */
export interface KeptPayload {
  receivedAt: string;
  pos: string;
  /** The headers that matter to reading it again (content type, event type and ids; never a credential or signature). */
  headers: Record<string, string>;
  body: string;
  bodyEncoding: 'utf8' | 'base64';
}

/** Payloads larger than this are not kept (the record says so): a record's page shows what fits a page. */
export const PAYLOAD_KEPT_BYTES = 64 * 1024;

export interface InsertOptions {
  /** Kept with the record when it is created (nothing is kept for a record that exists already). */
  payload?: KeptPayload;
}

export interface UpdateOptions {
  /**
   * false: the store may acknowledge the write before it is durable (PostgreSQL commits it without
   * waiting for the WAL flush), so a crash of the database, never of the bridge, can take it back.
   * Only for a write whose loss the bridge re-verifies safely: the outcome of an accrue whose
   * in-flight marker is durable and whose merchant's history can be read (a lost outcome leaves the
   * marker, the call is taken over in doubt and settled from the operations history). Default true.
   */
  synchronous?: boolean;
}

/**
 * The ledger is one store of several aggregates, each its own interface with its own contract suite
 * (test/ledger/contracts/): records, audit, webhook events, merchants, dead letters, backfill states
 * and settings. A part of the bridge names the aggregates it uses, so what it may touch is in its
 * signature; the three stores implement them all, as `LedgerStore`.
 */
export interface StoreLifecycle {
  /** A short name for logs and readiness (`file`, `postgres`). */
  readonly kind: string;
  /**
   * True when other bridge instances may use the same ledger (PostgreSQL). A single-process store
   * knows that a record still marked in flight at start-up was left by a process that is gone.
   */
  readonly sharedByInstances?: boolean;
  init(): Promise<void>;
  close(): Promise<void>;
  /** Throws when the store cannot be reached (readiness). */
  ping(): Promise<void>;
  /**
   * Resolves once everything written so far would survive an operating-system crash. Called before
   * every upstream call: the line that marks a call in flight must not be taken back by a crash
   * while the call went out. Absent where every write is durable when it returns (PostgreSQL commits).
   */
  durable?(): Promise<void>;
  /**
   * A key for `purpose` derived from the ledger's own secret (made once with the ledger: the
   * customer search key), so every instance on one ledger derives the same one and no other ledger
   * does: what signs the list cursors the bridge hands out. Only after `init`.
   */
  keyFor(purpose: string): Buffer;
}

/** A key for `purpose` from a ledger's secret: HMAC-SHA256, so keys for different purposes say nothing of each other or of the secret. */
export function derivedKey(secret: string, purpose: string): Buffer {
  return createHmac('sha256', secret).update(`loyalty-bridge/${purpose}`).digest();
}

/** The records: the transactions the bridge delivers, their claims (operation ids, accrual keys) and the indexes that find them. */
export interface RecordStore {
  /**
   * By ledger key (`keyOf`, `ledgerKey`): the transactionId within its merchant. Records are kept per
   * merchant, so two merchants' equal transactionIds never touch; claims (operation ids, accrual keys)
   * are per merchant too.
   */
  get(key: string): Promise<LedgerRecord | undefined>;
  /**
   * Stores `record` (its `version` must be 1) unless the transactionId exists; answers the stored
   * record either way. Throws ConflictError when it claims an operation id another record holds,
   * AccrualKeyHeldError when it would take an accrual key another record holds (nothing stored).
   */
  insert(record: LedgerRecord, options?: InsertOptions): Promise<{ record: LedgerRecord; created: boolean }>;
  /** The POS payload kept with a record when it was created (`InsertOptions.payload`); undefined when none was. */
  getPayload(key: string): Promise<KeptPayload | undefined>;
  /**
   * Replaces the stored record when its version is `next.version - 1`; throws VersionConflictError
   * otherwise (another writer won) or when it does not exist. Claims as in `insert`; an accrual key
   * the stored version already holds is kept whoever else lists it (ledgers from before keys).
   */
  update(next: LedgerRecord, options?: UpdateOptions): Promise<LedgerRecord>;
  /** Newest first (createdAt, then ledger key, both descending). The total is capped (`Page`). */
  list(query: ListQuery): Promise<Page<LedgerRecord>>;
  /**
   * The attention index's entries (`AttentionEntry`), oldest first (since, then ledger key, then
   * kind), at most `limit`, each with its record as it stands (the attempt log may be left out):
   * the caller words each item (`attentionOf`). Costs what it answers, never what the ledger holds.
   */
  listAttention(query: AttentionQuery): Promise<{ entry: AttentionEntry; record: AttentionInput }[]>;
  /** The attention index counted (no record is read): what the queue's counts and the gauges show. */
  countAttention(merchantId?: string): Promise<AttentionCounts>;
  /**
   * Records with work left (see `isOpen`), due or not (`dueOnly`: see there), oldest first (by
   * createdAt, then ledger key), at most `limit`, after `after` when given (to page through them
   * all). With `claim`, a shared store hands each instance records no other live instance holds,
   * and holds them for the lease.
   */
  listOpen(query: OpenQuery): Promise<LedgerRecord[]>;
  /**
   * Open records due by `query.nowMs` (`dueOf`), at most `query.limit`, the merchants taking turns:
   * each merchant's records earliest due first (ties by createdAt, then ledger key), at most
   * `query.perMerchant` of them; then every merchant's first record, then every merchant's second,
   * and so on, each turn earliest due first (`takeTurns` in due-turns.ts). So one merchant's
   * thousands of due records take one merchant's share of a batch, never the whole of it, and a
   * merchant whose work has waited longest goes first. Records not due yet, those only an operator
   * can move, and those of `query.skipMerchants` are left out, so that however many of them pile up
   * they never take the place of work that can go ahead. Claims as in `listOpen`: the turns are
   * taken among the records this instance may claim.
   */
  listDue(query: DueQuery): Promise<LedgerRecord[]>;
  /** The merchant's records whose accrual is unsettled (`isAccrualUnsettled`) with this Check amount: those an operation of that sum could belong to. */
  listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]>;
  /** The transactionId (within the merchant) that has claimed this upstream operation id, if any. */
  findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined>;
  /** How many records the ledger holds (for operators' tools: it may cost what the ledger holds). */
  count(): Promise<number>;
  /** How many records have work left (a metric; costs what is open). */
  countOpen(): Promise<number>;
  /** Records with work left (`isOpen`), by status: costs what is open, never what the ledger holds. */
  countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>>;
}

/** Operator actions, kept for good. */
export interface AuditStore {
  /** Keeps one operator action for good. */
  appendAudit(entry: AuditEntry): Promise<void>;
  /** Newest first (ties: the later written first). The total is capped (`Page`). */
  listAudit(query: AuditQuery): Promise<Page<AuditEntry>>;
}

/** The POS deliveries already taken (a redelivery is a duplicate), and the account each was taken for. */
export interface WebhookEventStore {
  /** Records that a webhook event (by the POS's dedupe key) was processed; false when it already was. */
  rememberWebhookEvent(pos: string, key: string): Promise<boolean>;
  hasWebhookEvent(pos: string, key: string): Promise<boolean>;
  /**
   * Binds a verified delivery (`key`: the digest of its signed bytes) to `account`, the account it
   * is being taken for, once and for good: insert-once, atomic across instances, never expired (a
   * copy can come back any time, after a restart or with the clock days ahead). Answers the account
   * it is bound to: `account` when this call bound it or it was bound to it before, another when
   * it was first taken for another.
   */
  bindDelivery(pos: string, key: string, account: string): Promise<string>;
  /** What `key` is bound to, without binding it: undefined when nothing is. */
  deliveryBinding(pos: string, key: string): Promise<string | undefined>;
}

/** Created merchants (the `default` merchant is built from the variables, never stored). */
export interface MerchantStore {
  /**
   * Inserts a merchant (version 1, an id not used yet) or replaces it (compare-and-set: the stored
   * version must be `merchant.version - 1`; VersionConflictError otherwise). ConflictError, and
   * nothing stored, when the id exists (insert) or another merchant holds one of its POS accounts
   * (`accountKeysOf`) or token hashes. The `default` merchant is never stored.
   */
  saveMerchant(merchant: StoredMerchant): Promise<StoredMerchant>;
  getMerchant(id: string): Promise<StoredMerchant | undefined>;
  /** Oldest first. */
  listMerchants(query: { offset: number; limit: number }): Promise<{ items: StoredMerchant[]; total: number }>;
  /** The merchant whose POS or admin token has this hash (`tokenHash`). */
  findMerchantByToken(kind: 'pos' | 'admin', hash: string): Promise<StoredMerchant | undefined>;
  /** The merchant holding this POS account (`accountKey`). */
  findMerchantByAccount(accountKey: string): Promise<StoredMerchant | undefined>;
}

/** Webhook deliveries that could not be taken, kept to be replayed. */
export interface DeadLetterStore {
  /** Inserts or replaces a dead letter by id. */
  saveDeadLetter(letter: DeadLetter): Promise<void>;
  getDeadLetter(id: string): Promise<DeadLetter | undefined>;
  /** Newest first (`oldestFirst`: oldest first); `open` = not resolved by a replay; `merchantId` = that merchant's letters only. The total is capped (`Page`). */
  listDeadLetters(query: DeadLetterQuery): Promise<Page<DeadLetter>>;
  /**
   * Reads the letter `id` (undefined when there is none), hands it to `change`, and stores what
   * `change` answers, as one step no other writer of that letter can come between, in this process
   * or another instance on the same store: how a claim is taken and how a run's outcome is written
   * without losing a delivery counted meanwhile. `change` answering undefined writes nothing.
   * Answers the letter as stored afterwards.
   */
  updateDeadLetter(id: string, change: (current: DeadLetter | undefined) => DeadLetter | undefined): Promise<DeadLetter | undefined>;
  /** Open letters due for an automatic run by `nowMs` (`deadLetterDueAtMs`), earliest first, at most `limit`. */
  listDueDeadLetters(query: { nowMs: number; limit: number }): Promise<DeadLetter[]>;
  /** Open dead letters (not resolved nor dismissed), by cause and by merchant. */
  countOpenDeadLetters(): Promise<DeadLetterCounts>;
}

/** Each merchant's backfill of each POS: its watermark, lease and last passes. */
export interface BackfillStateStore {
  getBackfillState(merchantId: string, pos: string): Promise<BackfillState | undefined>;
  /**
   * As `updateDeadLetter`, for one merchant's backfill of one POS: reads the state (undefined when
   * there is none), hands it to `change` and stores what it answers, as one step no other writer can
   * come between, in this process or another instance on the same store: how a lease is taken and a
   * watermark moved. `change` answering undefined writes nothing. Answers the state as stored afterwards.
   */
  updateBackfillState(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): Promise<BackfillState | undefined>;
  /** Every merchant's, by merchant then POS; `merchantId`: that merchant's only. */
  listBackfillStates(merchantId?: string): Promise<BackfillState[]>;
}

/** What the bridge learned and keeps with the ledger. */
export interface SettingStore {
  /** What the bridge learned and keeps with the ledger, by name (a merchant's reversal shape: core/reversal-shape.ts); few and small. */
  getSetting(name: string): Promise<string | undefined>;
  /** Stores a setting, replacing what it held; durable when it answers. */
  putSetting(name: string, value: string): Promise<void>;}

export interface LedgerStore extends StoreLifecycle, RecordStore, AuditStore, WebhookEventStore, MerchantStore, DeadLetterStore, BackfillStateStore, SettingStore {}

/**
 * The ledger as everything but the core's record writer sees it: all but a record's insert and
 * update, which only `core/record-writer.ts` makes, so its compare-and-set, its lock and its
 * written-metric cannot be skipped. Audit, settings, dead letters and the other aggregates are
 * written directly by their owners.
 */
export type StoreWithoutRecordWrites = Omit<LedgerStore, 'insert' | 'update'>;
