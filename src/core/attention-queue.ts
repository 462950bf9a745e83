/**
 * The attention queue: everything that needs a person, oldest first, as `GET /v1/admin/attention`
 * answers it. Records come from the store's attention listing (`attentionOf` decides each), open
 * dead letters from the dead-letter listing. The answer holds at most `limit` items; its counts
 * (per kind, per merchant) and the oldest `since` are over everything found.
 */
import { ATTENTION_KINDS, attentionOf, type AttentionItem, type AttentionKind } from '../ledger/attention.js';
import type { DeadLetter, LedgerStore } from '../ledger/store.js';

/**
 * Open dead letters read for one answer. Letters are few (each is an authentic delivery the bridge
 * could not carry out); past this many, the oldest beyond it are left out of the items and the
 * per-merchant counts, `counts.dead_letter` still counts them all, and `deadLettersTruncated` says so.
 */
export const ATTENTION_DEAD_LETTERS_READ = 1000;

export interface AttentionQueue {
  items: AttentionItem[];
  counts: Record<AttentionKind, number>;
  perMerchant: Record<string, number>;
  oldestSince?: string;
  total: number;
  deadLettersTruncated?: boolean;
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

/** Everything that needs a person, oldest first, and the open dead letters not read (past ATTENTION_DEAD_LETTERS_READ). */
async function everything(store: LedgerStore, merchantId: string | undefined): Promise<{ all: AttentionItem[]; lettersTotal: number; lettersUnread: number }> {
  const records = await store.listAttention(merchantId);
  const letters = await store.listDeadLetters({ merchantId, open: true, offset: 0, limit: ATTENTION_DEAD_LETTERS_READ });
  const all = [...records.flatMap((r) => attentionOf(r)), ...letters.items.map(letterItem)];
  // Oldest first; ties by the record or letter id, so pages of the same state read the same.
  all.sort((a, b) => Date.parse(a.since) - Date.parse(b.since) || (a.transactionId ?? a.deadLetterId ?? '').localeCompare(b.transactionId ?? b.deadLetterId ?? '') || a.kind.localeCompare(b.kind));
  return { all, lettersTotal: letters.total, lettersUnread: letters.total - letters.items.length };
}

function countsOf(all: AttentionItem[], lettersTotal: number): Record<AttentionKind, number> {
  const counts = Object.fromEntries(ATTENTION_KINDS.map((k) => [k, 0])) as Record<AttentionKind, number>;
  for (const item of all) counts[item.kind]++;
  counts.dead_letter = lettersTotal;
  return counts;
}

export async function attentionQueue(store: LedgerStore, query: { merchantId?: string; limit: number }): Promise<AttentionQueue> {
  const { all, lettersTotal, lettersUnread } = await everything(store, query.merchantId);
  const perMerchant: Record<string, number> = {};
  for (const item of all) perMerchant[item.merchantId] = (perMerchant[item.merchantId] ?? 0) + 1;
  return {
    items: all.slice(0, query.limit),
    counts: countsOf(all, lettersTotal),
    perMerchant,
    ...(all[0] ? { oldestSince: all[0].since } : {}),
    total: all.length + lettersUnread,
    ...(lettersUnread > 0 ? { deadLettersTruncated: true } : {}),
  };
}

/**
 * For the metrics, at every scrape: how many of each kind, and since when (epoch ms) the oldest of
 * each has waited. Dead letters are counted, and only the oldest is read (letters hold whole
 * deliveries: a scrape must not read a thousand bodies).
 */
export async function attentionByKind(store: LedgerStore): Promise<{ counts: Record<AttentionKind, number>; oldestSinceMs: Partial<Record<AttentionKind, number>> }> {
  const records = (await store.listAttention()).flatMap((r) => attentionOf(r));
  const open = { open: true, offset: 0, limit: 0 };
  const lettersTotal = (await store.listDeadLetters(open)).total;
  // Newest first: the last of the open letters is the oldest.
  const oldestLetter = lettersTotal > 0 ? (await store.listDeadLetters({ ...open, offset: lettersTotal - 1, limit: 1 })).items[0] : undefined;
  const oldestSinceMs: Partial<Record<AttentionKind, number>> = {};
  for (const item of records) oldestSinceMs[item.kind] = Math.min(oldestSinceMs[item.kind] ?? Infinity, Date.parse(item.since));
  if (oldestLetter) oldestSinceMs.dead_letter = Date.parse(oldestLetter.receivedAt);
  return { counts: countsOf(records, lettersTotal), oldestSinceMs };
}
