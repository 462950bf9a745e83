/**
 * A ledger kept in memory, for unit tests of the core: it passes the same store contract suite as
 * the file and PostgreSQL stores (`test/ledger/store-contract.ts`), so a test that passes against it
 * relies on nothing the real stores do not promise. Nothing survives the process; `reopen` in tests
 * hands the same maps to a new instance. Records are copied in and out, as a store on disk would,
 * so a caller that changes a record it was given changes nothing stored.
 */
import { randomBytes } from 'node:crypto';
import { copyPlain } from './plain-copy.js';
import { VersionConflictError } from '../kernel/errors.js';
import { mutant } from '../kernel/mutants.js';
import { takeTurns } from './due-turns.js';
import { checkClaims } from './claims.js';
import { BackfillStateTable, MerchantTable } from './held-tables.js';
import { identitiesOf } from '../state/customer-index.js';
import { accrualKeys, dueOf, claimedOperationIds, isOpen, keyOf, ledgerKey, merchantOf, unsettledAmount, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import type { StoredMerchant } from '../state/merchant.js';
import { attentionEntriesOf, UNCLASSIFIED, type AttentionInput } from '../state/attention.js';
import {
  derivedKey,
  attentionOrder,
  auditMatches,
  attentionCountsOf,
  deadLetterDueAtMs,
  LIST_COUNT_CAP,
  listMatches,
  newestFirst,
  pageOf,
  statusesOf,
  type AttentionCounts,
  type AttentionEntry,
  type AttentionQuery,
  type AuditEntry,
  type AuditQuery,
  type BackfillState,
  type DeadLetter,
  type DeadLetterCounts,
  CUSTOMER_SEARCH_DEPTH,
  PREFIX_MATCH_CAP,
  tooManyPrefixMatches,
  type DeadLetterQuery,
  type DueQuery,
  type InsertOptions,
  type KeptPayload,
  type LedgerStore,
  type ListQuery,
  type OpenQuery,
  type Page,
} from './store.js';

/** What a memory store holds; a new store over the same state is a "restart" that kept everything. */
export interface MemoryLedgerState {
  /** By ledger key. */
  records: Map<string, LedgerRecord>;
  /** `<merchant>\u0000<operation id>` → the claiming record's transactionId. */
  operationClaims: Map<string, string>;
  /** Accrual key → the holding record's ledger key. */
  accrualKeys: Map<string, string>;
  webhookEvents: Set<string>;
  /** Deliveries by `pos\u0000key`, each with the account it was first taken for (`bindDelivery`). */
  deliveryBindings: Map<string, string>;
  deadLetters: Map<string, DeadLetter>;
  merchants: Map<string, StoredMerchant>;
  /** Operator actions, in the order written. */
  audit: AuditEntry[];
  /** By `backfillKey`. */
  backfill: Map<string, BackfillState>;
  /** By ledger key: the payload each record was created from, where one was kept. */
  payloads: Map<string, KeptPayload>;
  settings: Map<string, string>;
}

export function emptyMemoryLedger(): MemoryLedgerState {
  return { records: new Map(), operationClaims: new Map(), accrualKeys: new Map(), webhookEvents: new Set(), deliveryBindings: new Map(), deadLetters: new Map(), merchants: new Map(), audit: [], backfill: new Map(), payloads: new Map(), settings: new Map() };
}

/** Records, letters, payloads and audit entries are plain data: copied by hand (plain-copy.ts). */
const copy = <T>(value: T): T => copyPlain(value);

export class MemoryLedgerStore implements LedgerStore {
  readonly kind = 'memory';

  readonly #merchants: MerchantTable;
  readonly #backfill: BackfillStateTable;

  constructor(readonly state: MemoryLedgerState = emptyMemoryLedger()) {
    this.#merchants = new MerchantTable(state.merchants);
    this.#backfill = new BackfillStateTable(state.backfill);
  }

  #open = false;
  /**
   * The memory ledger's own secret: it lives as long as the store, as every key derived from it does.
   * Drawn when first asked for: the model check makes a store per state it rebuilds and asks none.
   */
  #secret: string | undefined;

  keyFor(purpose: string): Buffer {
    this.#secret ??= randomBytes(32).toString('base64url');
    return derivedKey(this.#secret, purpose);
  }

  async init(): Promise<void> {
    this.#open = true;
  }

  async close(): Promise<void> {
    this.#open = false;
  }

  async ping(): Promise<void> {
    if (!this.#open) throw new Error('memory ledger is closed');
  }

  async get(key: string): Promise<LedgerRecord | undefined> {
    const record = this.state.records.get(key);
    return record && copy(record);
  }

  async insert(record: LedgerRecord, options: InsertOptions = {}): Promise<{ record: LedgerRecord; created: boolean }> {
    const existing = this.state.records.get(keyOf(record));
    if (existing) return { record: copy(existing), created: false };
    if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version}`);
    this.#store(record, undefined);
    if (options.payload) this.state.payloads.set(keyOf(record), copy(options.payload));
    return { record: copy(record), created: true };
  }

  async getSetting(name: string): Promise<string | undefined> {
    return this.state.settings.get(name);
  }

  async putSetting(name: string, value: string): Promise<void> {
    this.state.settings.set(name, value);
  }

  async getPayload(key: string): Promise<KeptPayload | undefined> {
    const payload = this.state.payloads.get(key);
    return payload && copy(payload);
  }

  async update(next: LedgerRecord): Promise<LedgerRecord> {
    const current = this.state.records.get(keyOf(next));
    if (!current || current.version !== next.version - 1) throw new VersionConflictError(keyOf(next), next.version - 1, current?.version);
    this.#store(next, current);
    return copy(next);
  }

  // A test double: it reads every record for every query, which the real stores must never do.

  async list(query: ListQuery): Promise<Page<LedgerRecord>> {
    for (const field of ['orderId', 'refundId'] as const) {
      const prefix = query[field];
      if (prefix && [...this.state.records.values()].filter((r) => listMatches(r, { [field]: prefix, offset: 0, limit: 0 })).length > PREFIX_MATCH_CAP) throw tooManyPrefixMatches(field, prefix);
    }
    const statuses = statusesOf(query);
    // A customer search reads each identifier's newest CUSTOMER_SEARCH_DEPTH records, as the other stores' indexes do.
    const searched = query.customer && new Set(query.customer.flatMap((identity) => [...this.state.records.values()].filter((r) => identitiesOf(r.accrual.customer).includes(identity)).sort((a, b) => newestFirst(rowOf(a), rowOf(b))).slice(0, CUSTOMER_SEARCH_DEPTH)));
    // The total counts the filter's matches: the cursor only says where the page starts.
    const matching = [...this.state.records.values()].filter((r) => (!searched || searched.has(r)) && listMatches(r, { ...query, after: undefined }, statuses)).sort((a, b) => newestFirst(rowOf(a), rowOf(b)));
    const after = matching.filter((r) => listMatches(r, query, statuses));
    return pageOf(after.slice(query.offset, query.offset + query.limit).map(copy), Math.min(matching.length, LIST_COUNT_CAP + 1));
  }

  async listAttention(query: AttentionQuery): Promise<{ entry: AttentionEntry; record: AttentionInput }[]> {
    return this.#attentionEntries(query.merchantId)
      .filter((e) => !query.after || attentionOrder(e.entry, query.after) > 0)
      .slice(0, query.limit)
      .map((e) => ({ entry: e.entry, record: copy(e.record) }));
  }

  async countAttention(merchantId?: string): Promise<AttentionCounts> {
    return attentionCountsOf(this.#attentionEntries(merchantId).map(({ entry }) => ({ kind: entry.kind, merchantId: entry.merchantId, count: 1, oldestSince: entry.since })));
  }

  #attentionEntries(merchantId: string | undefined): { entry: AttentionEntry; record: LedgerRecord }[] {
    return [...this.state.records.values()]
      .filter((r) => !merchantId || merchantOf(r) === merchantId)
      .flatMap((record) => attentionEntriesOf(record).map((entry) => ({ entry, record })))
      .sort((a, b) => attentionOrder(a.entry, b.entry));
  }

  async appendAudit(entry: AuditEntry): Promise<void> {
    this.state.audit.push(copy(entry));
  }

  async listAudit(query: AuditQuery): Promise<Page<AuditEntry>> {
    const matching = this.state.audit.filter((e) => auditMatches(e, query)).reverse();
    matching.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
    return pageOf(matching.slice(query.offset, query.offset + query.limit).map(copy), Math.min(matching.length, LIST_COUNT_CAP + 1));
  }

  async listOpen(query: OpenQuery): Promise<LedgerRecord[]> {
    const { after, merchantId } = query;
    return [...this.state.records.values()]
      .filter((r) => isOpen(r) && (!query.dueOnly || dueOf(r) !== undefined) && (!after || byAge(r, after) > 0) && (!merchantId || merchantOf(r) === merchantId))
      .sort(byAge)
      .slice(0, query.limit)
      .map(copy);
  }

  async listDue(query: DueQuery): Promise<LedgerRecord[]> {
    const skip = new Set(query.skipMerchants);
    const due: { record: LedgerRecord; atMs: number }[] = [];
    for (const record of this.state.records.values()) {
      const d = isOpen(record) && !skip.has(merchantOf(record)) ? dueOf(record) : undefined;
      if (d && d.atMs <= query.nowMs && (query.canVerify || !d.needsVerifier)) due.push({ record, atMs: d.atMs });
    }
    return takeTurns(due, { merchantOf: (d) => merchantOf(d.record), earlier: (a, b) => a.atMs - b.atMs || byAge(a.record, b.record), perMerchant: query.perMerchant, limit: query.limit }).map((d) => copy(d.record));
  }

  async listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]> {
    return [...this.state.records.values()].filter((r) => merchantOf(r) === merchantId && unsettledAmount(r) === amountCents).sort(byAge).map(copy);
  }

  async findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined> {
    return this.state.operationClaims.get(claimKey(merchantId, operationId));
  }

  async count(): Promise<number> {
    return this.state.records.size;
  }

  async countOpen(): Promise<number> {
    return [...this.state.records.values()].filter(isOpen).length;
  }

  async countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>> {
    const counts: Partial<Record<LedgerStatus, number>> = {};
    for (const r of this.state.records.values()) if (isOpen(r)) counts[r.status] = (counts[r.status] ?? 0) + 1;
    return counts;
  }

  async countOpenDeadLetters(): Promise<DeadLetterCounts> {
    const counts: DeadLetterCounts = { byReason: {}, byMerchant: {} };
    for (const l of this.state.deadLetters.values()) {
      if (l.resolvedAt) continue;
      const reason = l.reasonCode ?? UNCLASSIFIED;
      counts.byReason[reason] = (counts.byReason[reason] ?? 0) + 1;
      counts.byMerchant[l.merchantId ?? ''] = (counts.byMerchant[l.merchantId ?? ''] ?? 0) + 1;
    }
    return counts;
  }

  async rememberWebhookEvent(pos: string, key: string): Promise<boolean> {
    const id = `${pos}\u0000${key}`;
    if (this.state.webhookEvents.has(id)) return false;
    this.state.webhookEvents.add(id);
    return true;
  }

  async hasWebhookEvent(pos: string, key: string): Promise<boolean> {
    return this.state.webhookEvents.has(`${pos}\u0000${key}`);
  }

  async deliveryBinding(pos: string, key: string): Promise<string | undefined> {
    return this.state.deliveryBindings.get(`${pos}\u0000${key}`);
  }

  async bindDelivery(pos: string, key: string, account: string): Promise<string> {
    const id = `${pos}\u0000${key}`;
    const bound = this.state.deliveryBindings.get(id);
    if (bound !== undefined) return bound;
    this.state.deliveryBindings.set(id, account);
    return account;
  }

  async saveDeadLetter(letter: DeadLetter): Promise<void> {
    this.state.deadLetters.set(letter.id, copy(letter));
  }

  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    const letter = this.state.deadLetters.get(id);
    return letter && copy(letter);
  }

  async listDeadLetters(query: DeadLetterQuery): Promise<Page<DeadLetter>> {
    const matching = [...this.state.deadLetters.values()]
      .filter((l) => (!query.pos || l.pos === query.pos) && (query.open === undefined || !l.resolvedAt === query.open) && (!query.merchantId || l.merchantId === query.merchantId))
      .filter((l) => !query.awaiting || (!l.resolvedAt && (deadLetterDueAtMs(l) !== undefined) === (query.awaiting === 'bridge')))
      .sort((a, b) => Date.parse(b.receivedAt) - Date.parse(a.receivedAt) || (a.id < b.id ? 1 : -1));
    if (query.oldestFirst) matching.reverse();
    return pageOf(matching.slice(query.offset, query.offset + query.limit).map(copy), Math.min(matching.length, LIST_COUNT_CAP + 1));
  }

  async updateDeadLetter(id: string, change: (current: DeadLetter | undefined) => DeadLetter | undefined): Promise<DeadLetter | undefined> {
    // Nothing awaits between the read and the write: no other writer can come between them.
    const current = this.state.deadLetters.get(id);
    const next = change(current && copy(current));
    if (next) this.state.deadLetters.set(id, copy({ ...next, id }));
    const stored = this.state.deadLetters.get(id);
    return stored && copy(stored);
  }

  async listDueDeadLetters(query: { nowMs: number; limit: number }): Promise<DeadLetter[]> {
    return [...this.state.deadLetters.values()]
      .map((letter) => ({ letter, due: deadLetterDueAtMs(letter) }))
      .filter((l): l is { letter: DeadLetter; due: number } => l.due !== undefined && l.due <= query.nowMs)
      .sort((a, b) => a.due - b.due || (a.letter.id < b.letter.id ? -1 : 1))
      .slice(0, query.limit)
      .map((l) => copy(l.letter));
  }

  async getBackfillState(merchantId: string, pos: string): Promise<BackfillState | undefined> {
    return this.#backfill.get(merchantId, pos);
  }

  async updateBackfillState(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): Promise<BackfillState | undefined> {
    // Nothing awaits between the read and the write: no other writer can come between them.
    const next = this.#backfill.next(merchantId, pos, change);
    if (next) this.#backfill.put(next);
    return this.#backfill.get(merchantId, pos);
  }

  async listBackfillStates(merchantId?: string): Promise<BackfillState[]> {
    return this.#backfill.list(merchantId);
  }

  async saveMerchant(merchant: StoredMerchant): Promise<StoredMerchant> {
    this.#merchants.checkSave(merchant);
    this.#merchants.put(merchant);
    return copy(merchant);
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

  /** The claims are checked before anything changes, so a refused write leaves everything as it was. */
  #store(next: LedgerRecord, previous: LedgerRecord | undefined): void {
    const id = next.transactionId;
    const key = keyOf(next);
    const merchant = merchantOf(next);
    const held = previous ? accrualKeys(previous) : [];
    const keys = mutant('no-accrual-keys') ? [] : accrualKeys(next);
    checkClaims(next, keys, held, {
      operation: (merchantId, op) => {
        const holder = this.state.operationClaims.get(claimKey(merchantId, op));
        return holder === undefined ? undefined : ledgerKey(merchantId, holder);
      },
      accrualKey: (accrualKey) => this.state.accrualKeys.get(accrualKey),
    });
    for (const op of previous ? claimedOperationIds(previous) : []) if (this.state.operationClaims.get(claimKey(merchant, op)) === id) this.state.operationClaims.delete(claimKey(merchant, op));
    for (const op of claimedOperationIds(next)) this.state.operationClaims.set(claimKey(merchant, op), id);
    for (const accrualKey of held) if (this.state.accrualKeys.get(accrualKey) === key) this.state.accrualKeys.delete(accrualKey);
    for (const accrualKey of keys) if (!this.state.accrualKeys.has(accrualKey)) this.state.accrualKeys.set(accrualKey, key);
    this.state.records.set(key, copy(next));
  }
}

function rowOf(record: LedgerRecord): { createdAtMs: number; key: string } {
  return { createdAtMs: Date.parse(record.createdAt), key: keyOf(record) };
}

/** Oldest first by createdAt, ties by ledger key: `listOpen`'s order. */
function byAge(a: Pick<LedgerRecord, 'createdAt' | 'transactionId' | 'merchantId'>, b: Pick<LedgerRecord, 'createdAt' | 'transactionId' | 'merchantId'>): number {
  const [ka, kb] = [keyOf(a), keyOf(b)];
  return Date.parse(a.createdAt) - Date.parse(b.createdAt) || (ka < kb ? -1 : ka > kb ? 1 : 0);
}

function claimKey(merchantId: string, operationId: number): string {
  return `${merchantId}\u0000${operationId}`;
}
