/**
 * What needs a person, read off a record: the one rule behind the attention queue
 * (`GET /v1/admin/attention`), the stores' attention listing and the open-records gauge. Pure: the
 * stores use it to keep their attention index, the core to answer.
 */
import { isOrphanReversal, keyOf, merchantOf, plan, type LedgerRecord, type LedgerStatus } from './record.js';

export const ATTENTION_KINDS = ['in_doubt', 'ambiguous', 'held', 'failed', 'partially_accrued', 'reverse_failed', 'changed_repeats', 'dead_letter'] as const;
export type AttentionKind = (typeof ATTENTION_KINDS)[number];

/**
 * Statuses whose records a person must look at: a call whose outcome is unknown, or an outcome the
 * loyalty service refused in whole or in part. A store may narrow its reads to these (and to
 * records with changed repeats) before `attentionOf` decides.
 */
export const ATTENTION_STATUSES: readonly LedgerStatus[] = ['in_doubt', 'failed', 'partially_accrued', 'reverse_failed'];

/** Of those, the statuses of records the bridge has settled (no pass moves them): a person has not. */
export const SETTLED_ATTENTION_STATUSES: readonly LedgerStatus[] = ['failed', 'partially_accrued', 'reverse_failed'];

/** The dead-letter gauge's label for letters kept before `reasonCode` existed. */
export const UNCLASSIFIED = 'unclassified';

export interface AttentionItem {
  kind: AttentionKind;
  transactionId?: string;
  deadLetterId?: string;
  merchantId: string;
  /** Since when it has needed a person (ISO 8601). */
  since: string;
  why: string;
  status?: LedgerStatus;
  pos?: string;
  orderId?: string;
}

/** What `attentionOf` reads: everything but the attempt log, which stores may leave out of the read. */
export type AttentionInput = Pick<LedgerRecord, 'transactionId' | 'merchantId' | 'status' | 'pos' | 'orderId' | 'updatedAt' | 'accrual' | 'reversal' | 'history' | 'changedRepeats' | 'closed' | 'acknowledged' | 'inFlight' | 'remainderTransactionId' | 'nextAttemptAt'>;

/** The kinds an operator may acknowledge (`acknowledged`): the others have an action that settles them. */
export const ACKNOWLEDGEABLE: ReadonlySet<AttentionKind> = new Set(['failed', 'partially_accrued', 'changed_repeats']);

/** When the record came into its status (its history's last line that moved it there), else its last write. */
function statusSince(record: AttentionInput): string {
  for (let i = record.history.length - 1; i >= 0; i--) if (record.history[i]!.to === record.status) return record.history[i]!.at;
  return record.updatedAt;
}

/** True when an operator acknowledged the record at or after `since`. */
function acknowledgedSince(record: Pick<LedgerRecord, 'acknowledged'>, since: string): boolean {
  return record.acknowledged !== undefined && Date.parse(record.acknowledged.at) >= Date.parse(since);
}

/**
 * The deliveries of this order with another amount that came after the last acknowledgement, as
 * far as the record keeps them (its first and latest few): a person decides whether a difference
 * is owed. Their number, and the first of them.
 */
function changedRepeatsPending(record: Pick<LedgerRecord, 'changedRepeats' | 'acknowledged'>): { count: number; since?: string } {
  const repeats = record.changedRepeats;
  if (!repeats) return { count: 0 };
  if (!record.acknowledged) return { count: repeats.count, since: repeats.first[0]?.at };
  const after = [...repeats.first, ...repeats.latest].filter((d) => !acknowledgedSince(record, d.at));
  return { count: after.length, since: after[0]?.at };
}

/** True when `attentionOf` finds something. */
export function needsAttention(record: AttentionInput): boolean {
  return attentionOf(record).length > 0;
}

/**
 * What a store's attention index keeps of a record, written with it: one entry per item
 * `attentionOf` finds (its kind and since when). None for a record settled, closed or
 * acknowledged, so such records leave the index by the very write that makes them so.
 */
export function attentionEntriesOf(record: AttentionInput): { key: string; merchantId: string; kind: AttentionKind; since: string }[] {
  return attentionOf(record).map((item) => ({ key: keyOf(record), merchantId: item.merchantId, kind: item.kind, since: item.since }));
}

/**
 * What the caller knows of the record's merchant, so each reason says which case applies: whether
 * the bridge can read that merchant's operations history (its loyalty API key is set), which decides
 * whether a call in doubt settles by itself or waits for a person. Unknown (the stores' index, which
 * keeps only kinds): both cases are named.
 */
export interface AttentionContext {
  canVerify?: boolean;
}

/** An accrual in doubt, in words for the case that applies (`context.canVerify`). */
function accrualInDoubtWhy(context: AttentionContext): string {
  if (context.canVerify === true) return 'the accrual was sent and its answer was lost; the bridge settles it by itself from the operations history, which this merchant\'s API key lets it read: a person is needed only if the history cannot tell';
  if (context.canVerify === false) return 'the accrual was sent and its answer was lost; this merchant has no loyalty API key, so the bridge cannot read the operations history: a person must check the card in the loyalty service and resolve it as accrued or not accrued';
  return 'the accrual was sent and its answer was lost; settled by the operations history where the merchant\'s loyalty API key is set, otherwise a person must resolve it as accrued or not accrued';
}

/** A reversal in doubt the history has not yet been asked about, in words for the case that applies. */
function reversalInDoubtWhy(context: AttentionContext): string {
  if (context.canVerify === false) return 'the reversal was sent and its answer was lost; this merchant has no loyalty API key, so the bridge cannot read the operations history: a person must check the card in the loyalty service and resolve it as reversed or not reversed';
  const settles = "settled from the operations history once it shows the reversal (the bridge learns how this service shows a reversal from one it confirmed)";
  return context.canVerify === true
    ? `the reversal was sent and its answer was lost; the bridge ${settles.replace('settled', 'settles it by itself')}: a person is needed only if the history cannot prove it`
    : `the reversal was sent and its answer was lost; ${settles} where the merchant's loyalty API key is set, otherwise a person must resolve it as reversed or not reversed`;
}

/** Each reason the record needs a person now (none for a record closed by an operator or one the bridge is still moving). */
export function attentionOf(record: AttentionInput, context: AttentionContext = {}): AttentionItem[] {
  if (record.closed) return [];
  const base = { transactionId: record.transactionId, merchantId: merchantOf(record), status: record.status, pos: record.pos, orderId: record.orderId };
  const items: AttentionItem[] = [];
  const { accrual, reversal } = record;
  // A call in doubt, as the transitions plan it (`plan`): the history is to be asked, or a person.
  const planned = plan(record);
  if ((planned.kind === 'verify' && planned.side === 'reverse') || (planned.kind === 'operator' && reversal.state === 'in_doubt')) {
    const why = reversal.unproven
      ? `the reversal was sent and its answer was lost, and the operations history does not prove it (${reversal.unproven.why}): the bridge will not guess; a person must resolve it as reversed or not reversed, shown the evidence`
      : reversalInDoubtWhy(context);
    items.push({ ...base, kind: 'in_doubt', since: reversal.inDoubtSince ?? statusSince(record), why });
  } else if (planned.kind === 'verify' && planned.side === 'accrue') {
    const rivals = accrual.ambiguousWith?.length ? accrual.ambiguousWith : undefined;
    items.push(
      rivals
        ? { ...base, kind: 'ambiguous', since: accrual.inDoubtSince ?? statusSince(record), why: `the accrual was sent and its answer was lost, and the operations history matches it and ${rivals.join(', ')} alike (fewer operations than accruals): the bridge cannot tell which happened; a person decides from the evidence, or asks the service (Ask the service…)` }
        : { ...base, kind: 'in_doubt', since: accrual.inDoubtSince ?? statusSince(record), why: accrualInDoubtWhy(context) },
    );
  }
  // Held back behind another accrual past the hold's life (`holdAttentionAt`, written by the pass
  // that looks at it again while it waits): apart from the doubts, since what settles it is the other's.
  if (accrual.state === 'pending' && accrual.waitingBehind && accrual.holdAttentionAt && Date.parse(record.updatedAt) >= Date.parse(accrual.holdAttentionAt)) {
    items.push({
      ...base,
      kind: 'held',
      since: accrual.holdAttentionAt,
      why: `not sent since ${accrual.waitingSince ?? accrual.holdAttentionAt}: it waits behind ${accrual.waitingBehind}, an accrual of the same customer and amount that is unsettled (the operations history could not tell the two apart); it goes out by itself once that one is settled: settle ${accrual.waitingBehind} (its evidence shows how)`,
    });
  }
  const settledSince = statusSince(record);
  const acknowledged = acknowledgedSince(record, settledSince);
  // A refused accrual whose order has been refunded whole since (`reversal.state` not_needed and no
  // part of the check kept): nothing was accrued and nothing is owed, so there is nothing for a person.
  // Refunded only in part, the customer kept the rest, which earned nothing and cannot be retried.
  const refundedWhole = reversal.state === 'not_needed' && (reversal.partialRefundedCents === undefined || reversal.partialRefundedCents >= (accrual.check?.amount ?? 0));
  if (record.status === 'failed' && !refundedWhole && !acknowledged) {
    const why =
      reversal.state === 'not_needed'
        ? `the loyalty service refused the accrual${accrual.errors.length ? ` (${accrual.errors[0]})` : ''}, then part of the order was refunded: what the customer kept earned nothing and a retry is not possible; credit it in the loyalty service by hand if owed, then acknowledge it`
        : `the loyalty service refused the accrual${accrual.errors.length ? `: ${accrual.errors[0]}` : ''}; retry it once the cause is fixed, or acknowledge it`;
    items.push({ ...base, kind: 'failed', since: settledSince, why });
  } else if (record.status === 'partially_accrued' && !acknowledged) {
    items.push({ ...base, kind: 'partially_accrued', since: settledSince, why: `some cards refused the accrual${accrual.errors.length ? `: ${accrual.errors[0]}` : ''}; settle them in the loyalty service, then acknowledge it` });
  } else if (record.status === 'reverse_failed') {
    const why = isOrphanReversal(record)
      ? 'a refund of an order the loyalty service never knew: nothing to reverse; close it with a reason'
      : `the loyalty service refused the reversal${reversal.errors.length ? `: ${reversal.errors[0]}` : ''}`;
    items.push({ ...base, kind: 'reverse_failed', since: settledSince, why });
  }
  const repeats = changedRepeatsPending(record);
  if (repeats.count > 0 && repeats.since) {
    const latest = record.changedRepeats!.latest.at(-1) ?? record.changedRepeats!.first.at(-1)!;
    items.push({ ...base, kind: 'changed_repeats', since: repeats.since, why: `delivered again with another amount (latest ${latest.amountCents} cents, recorded ${accrual.check?.amount ?? 'none'}; ${record.changedRepeats!.count} such deliveries in all): nothing was sent; a person decides whether a difference is owed, then acknowledges them` });
  }
  return items;
}
