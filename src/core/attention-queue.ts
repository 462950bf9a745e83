/**
 * The attention queue: everything that needs a person, oldest first, as `GET /v1/admin/attention`
 * answers it. Records come from the store's attention index (`attentionOf` words each), open
 * dead letters from the dead-letter listing. The answer holds at most `limit` items; its counts
 * (per kind, per merchant) and the oldest `since` are over everything that needs a person.
 */
import { ATTENTION_KINDS, attentionOf, SETTLED_ATTENTION_STATUSES, type AttentionContext, type AttentionInput, type AttentionItem, type AttentionKind } from '../state/attention.js';
import { merchantOf } from '../state/record.js';
import { moneyInText } from '../kernel/money.js';
import type { LedgerReading } from './metrics.js';
import type { AttentionCounts, AttentionEntry, DeadLetter, DeadLetterCounts, DeadLetterStore, RecordStore } from '../ledger/store.js';

/** What the queue and its counts read: the attention index and the dead letters, nothing written. */
type AttentionReads = Pick<RecordStore, 'listAttention' | 'countAttention' | 'countOpenByStatus'> & Pick<DeadLetterStore, 'listDeadLetters' | 'countOpenDeadLetters'>;

export interface AttentionQueue {
  items: AttentionItem[];
  counts: Record<AttentionKind, number>;
  perMerchant: Record<string, number>;
  oldestSince?: string;
  total: number;
}

/** The merchant of a letter no merchant is known for: not a merchant id (those are `[a-z0-9-]`), so it never counts as one. */
export const NO_MERCHANT = '(none)';

function letterItem(letter: DeadLetter): AttentionItem {
  const retryAt = letter.retry?.nextAt;
  const why = retryAt
    ? `${letter.reason}; the bridge runs it again by itself at ${retryAt} (a transient cause)`
    : `${letter.reason}; waits for a person: fix the cause and replay it, or dismiss it with a reason`;
  return { kind: 'dead_letter', deadLetterId: letter.id, merchantId: letter.merchantId ?? NO_MERCHANT, since: letter.receivedAt, why, pos: letter.pos };
}

/** The item an attention entry stands for, worded from its record as it stands now and for the case of its merchant. */
function recordItem(entry: AttentionEntry, record: AttentionInput, context: AttentionContext): AttentionItem | undefined {
  const item = attentionOf(record, context).find((i) => i.kind === entry.kind);
  // Amounts in its words shown as money in the record's currency, as every answer an operator reads shows them.
  return item && { ...item, why: moneyInText(item.why, record.accrual.check?.currency) };
}

/** Whether the bridge can read a merchant's operations history (its loyalty API key is set); undefined for a merchant it does not know. */
export type CanVerifyOf = (merchantId: string) => Promise<boolean | undefined>;

/** Oldest first; ties by the record or letter id, so pages of the same state read the same. */
function oldestFirst(a: AttentionItem, b: AttentionItem): number {
  return Date.parse(a.since) - Date.parse(b.since) || (a.transactionId ?? a.deadLetterId ?? '').localeCompare(b.transactionId ?? b.deadLetterId ?? '') || a.kind.localeCompare(b.kind);
}

/** Open dead letters by merchant as the queue counts them: the letters of no known merchant under NO_MERCHANT; one merchant's only when `merchantId` is given. */
function lettersByMerchant(counts: DeadLetterCounts, merchantId: string | undefined): Record<string, number> {
  const byMerchant: Record<string, number> = {};
  for (const [id, n] of Object.entries(counts.byMerchant)) if (!merchantId || id === merchantId) byMerchant[id || NO_MERCHANT] = n;
  return byMerchant;
}

/**
 * Everything that needs a person, oldest first, at most `limit` items. The store's attention index
 * and the open dead letters are each read oldest first up to `limit`, then merged; the counts come
 * from counting the index and the letters. Nothing here reads more records than it answers.
 */
export async function attentionQueue(store: AttentionReads, query: { merchantId?: string; limit: number }, canVerifyOf?: CanVerifyOf): Promise<AttentionQueue> {
  const [entries, letters, recordCounts, letterCounts] = await Promise.all([
    store.listAttention({ merchantId: query.merchantId, limit: query.limit }),
    store.listDeadLetters({ merchantId: query.merchantId, open: true, oldestFirst: true, offset: 0, limit: query.limit }),
    store.countAttention(query.merchantId),
    store.countOpenDeadLetters(),
  ]);
  // Each merchant on the page is asked once (they are few; the registry caches them).
  const merchants = [...new Set(entries.map((e) => merchantOf(e.record)))];
  const canVerify = new Map(await Promise.all(merchants.map(async (id) => [id, canVerifyOf ? await canVerifyOf(id) : undefined] as const)));
  const items = [...entries.map((e) => recordItem(e.entry, e.record, { canVerify: canVerify.get(merchantOf(e.record)) })).filter((i): i is AttentionItem => i !== undefined), ...letters.items.map(letterItem)].sort(oldestFirst).slice(0, query.limit);
  const letterMerchants = lettersByMerchant(letterCounts, query.merchantId);
  const counts = countsOf(recordCounts, Object.values(letterMerchants).reduce((sum, n) => sum + n, 0));
  const perMerchant: Record<string, number> = { ...recordCounts.byMerchant };
  for (const [id, n] of Object.entries(letterMerchants)) perMerchant[id] = (perMerchant[id] ?? 0) + n;
  const oldest = [...Object.values(recordCounts.byKind).map((k) => k.oldestSince), ...(letters.items[0] ? [letters.items[0].receivedAt] : [])].sort((a, b) => Date.parse(a) - Date.parse(b))[0];
  return { items, counts, perMerchant, ...(oldest ? { oldestSince: oldest } : {}), total: Object.values(counts).reduce((sum, n) => sum + n, 0) };
}

function countsOf(records: AttentionCounts, letters: number): Record<AttentionKind, number> {
  const counts = Object.fromEntries(ATTENTION_KINDS.map((k) => [k, records.byKind[k]?.count ?? 0])) as Record<AttentionKind, number>;
  counts.dead_letter = letters;
  return counts;
}

/**
 * What the ledger gauges show (metrics.ts `LedgerReading`), counted on the readings' timer: open
 * records by status, with the settled ones that need a person (their attention kind is their
 * status); open dead letters by cause; the attention queue by kind. Costs what is open or needs a
 * person, never what the ledger holds.
 */
export async function ledgerReading(store: AttentionReads, nowMs: () => number): Promise<LedgerReading> {
  const letters = await store.countOpenDeadLetters();
  const [open, attention] = await Promise.all([store.countOpenByStatus(), attentionByKind(store, letters)]);
  const openRecords: Partial<Record<string, number>> = { ...open };
  for (const status of SETTLED_ATTENTION_STATUSES) openRecords[status] = (openRecords[status] ?? 0) + attention.counts[status as AttentionKind];
  return { atMs: nowMs(), openRecords, openDeadLetters: letters.byReason, attention };
}

/**
 * For the metrics: how many of each kind, and since when (epoch ms) the oldest of each has waited.
 * Counted from the attention index and the open letters; one letter, the oldest, is read.
 */
export async function attentionByKind(store: AttentionReads, counted?: DeadLetterCounts): Promise<{ counts: Record<AttentionKind, number>; oldestSinceMs: Partial<Record<AttentionKind, number>> }> {
  const [records, letters, oldestLetter] = await Promise.all([store.countAttention(), counted ?? store.countOpenDeadLetters(), store.listDeadLetters({ open: true, oldestFirst: true, offset: 0, limit: 1 })]);
  const oldestSinceMs: Partial<Record<AttentionKind, number>> = {};
  for (const [kind, k] of Object.entries(records.byKind)) oldestSinceMs[kind as AttentionKind] = Date.parse(k.oldestSince);
  if (oldestLetter.items[0]) oldestSinceMs.dead_letter = Date.parse(oldestLetter.items[0].receivedAt);
  return { counts: countsOf(records, Object.values(letters.byReason).reduce((sum, n) => sum + n, 0)), oldestSinceMs };
}
