/**
 * Who an operation of the loyalty history belongs to: the one rule the record page (its evidence,
 * history-verifier.ts) and the three-way report (reconcile/classify.ts) both answer with, so the two
 * never name different owners for one operation.
 *
 * - An operation a record claims (the ledger's operation claims: what an accrue's or a reverse's
 *   answer named, or what the history verifier or an operator settled) is that record's.
 * - Otherwise it may be the call of a record whose accrue or reverse is in doubt (or still out):
 *   the Check's sum on a card the call could have reached, created after the call began (less the
 *   clock-skew margin). Such an operation is not "claimed by no record": the next step is to settle
 *   that record, and taking its points back by hand could take them twice (contract v1.5, "an
 *   honest report").
 * The history carries no transactionId (docs/how-it-works.md), so "may be" is as far as it goes
 * here; the history verifier decides, or a person does, shown this evidence.
 */
import type { Operation } from '../loyalty/contract.js';
import { centsEqualsMajor } from '../kernel/money.js';
import type { LedgerRecord, ReversalShape } from '../state/record.js';
import { isReversalEntry } from './reversal-shape.js';

/** A record's call whose outcome is not known: which side, and since when (epoch ms). */
export interface CallInDoubt {
  side: 'accrue' | 'reverse';
  sinceMs: number;
}

/** The record's call in doubt: a reverse before an accrue (a record reverses only what accrued); undefined when no call of it is in doubt or out. */
export function callInDoubt(record: LedgerRecord): CallInDoubt | undefined {
  const out = record.inFlight;
  if (record.reversal.state === 'in_doubt' || out?.operation === 'reverse') {
    return { side: 'reverse', sinceMs: Date.parse(record.reversal.inDoubtSince ?? out?.startedAt ?? record.reversal.requestedAt ?? record.updatedAt) };
  }
  if (record.accrual.state === 'in_doubt' || out?.operation === 'accrue') {
    return { side: 'accrue', sinceMs: Date.parse(record.accrual.inDoubtSince ?? out?.startedAt ?? record.createdAt) };
  }
  return undefined;
}

/** The cards an accrual credited, as its successful results name them. */
function creditedCards(record: LedgerRecord): string[] {
  return [...new Set(record.accrual.results.filter((r) => r.isSuccess && r.serialNumber).map((r) => r.serialNumber!))];
}

/**
 * Whether `op` could be the record's call in doubt. Without the customer's cards at hand (the
 * report has none), any card counts where the record names none: the rule errs towards "settle
 * the record first", never towards "take it back by hand". A reversal's entry is the learned shape
 * (reversal-shape.ts) with the Check's sum, or, before one is learned, the purchase taken back (the
 * Check's sum, negative).
 */
export function mayBeCallOf(op: Operation, record: LedgerRecord, shape: Pick<ReversalShape, 'eventId' | 'sign'> | undefined, clockSkewMs: number): boolean {
  const call = callInDoubt(record);
  const check = record.accrual.check;
  if (!call || !check || op.purchaseSum == null || Date.parse(op.createdAt) < call.sinceMs - clockSkewMs) return false;
  const cards = creditedCards(record);
  if (cards.length > 0 && !cards.includes(op.cardId)) return false;
  if (call.side === 'reverse') return shape ? isReversalEntry(op, shape, check.amount) : centsEqualsMajor(-check.amount, op.purchaseSum);
  return centsEqualsMajor(check.amount, op.purchaseSum) && !(shape && isReversalEntry(op, shape, check.amount));
}

/** Who an operation belongs to: the record that claims it, or every record in doubt whose call it may be (none: nobody's). */
export type OperationOwners = { claimedBy: string } | { mayBeOf: string[] };

/**
 * `claimedBy`: the ledger's claim on the operation, when one is held; `doubtful`: records whose
 * call may be in doubt (others are passed over), in the order to name them.
 */
export function ownersOf(op: Operation, claimedBy: string | undefined, doubtful: readonly LedgerRecord[], shape: Pick<ReversalShape, 'eventId' | 'sign'> | undefined, clockSkewMs: number): OperationOwners {
  if (claimedBy) return { claimedBy };
  return { mayBeOf: [...new Set(doubtful.filter((r) => mayBeCallOf(op, r, shape, clockSkewMs)).map((r) => r.transactionId))] };
}
