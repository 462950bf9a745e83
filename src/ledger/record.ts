/**
 * A ledger record: one POS order ↔ one upstream `transactionId`. The record keeps the intent (the
 * Check and customer to send), every attempt with what was sent and what came back, and two
 * sub-states, one for the accrual and one for the reversal. The public `status` (bridge-contract
 * "Ledger statuses") is derived from them in exactly one place, `deriveStatus`.
 */
import type { Customer } from '../customer.js';
import type { Attempt, UpstreamOperation } from '../loyalty/calls.js';
import type { AccrualResult, Check } from '../loyalty/contract.js';

export const LEDGER_STATUSES = [
  'skipped',
  'pending',
  'in_doubt',
  'accrued',
  'partially_accrued',
  'failed',
  'reversal_pending',
  'reversed',
  'reverse_failed',
] as const;
export type LedgerStatus = (typeof LEDGER_STATUSES)[number];

/** Statuses whose answer is final now (HTTP 200); the others are still being delivered (HTTP 202). */
export const FINAL_STATUSES: ReadonlySet<LedgerStatus> = new Set(['skipped', 'accrued', 'partially_accrued', 'failed', 'reversed', 'reverse_failed']);

/**
 * `none`: the record was created by a refund of an order the ledger never saw.
 * `in_doubt`: an accrue may or may not have happened upstream (timeout or connection lost after
 * sending); it is never resent until the operations history or an operator settles it.
 */
export type AccrualState = 'none' | 'skipped' | 'pending' | 'in_doubt' | 'accrued' | 'partially_accrued' | 'failed';

/** `not_needed`: a refund arrived for an accrual the loyalty service refused: nothing to reverse. */
export type ReversalState = 'none' | 'pending' | 'in_doubt' | 'reversed' | 'failed' | 'not_needed';

export interface PartialRefundPlan {
  refundId: string;
  refundedCents: number;
  remainderTransactionId: string;
  remainderCheck: Check;
  /**
   * Set when journal damage or a machine restart may have lost the lines that created and accrued
   * the remainder: when it is created, it is created in doubt from this time, verified before any accrue.
   */
  remainderInDoubtSince?: string;
}

export interface HistoryEvent {
  at: string;
  event: string;
  from?: LedgerStatus;
  to?: LedgerStatus;
  detail?: string;
  /** Set on the one event that stands for events dropped to keep the history bounded: how many. */
  omitted?: number;
}

/** One delivery of a recorded order with another amount. */
export interface ChangedDelivery {
  at: string;
  amountCents: number;
}

/**
 * Deliveries of a recorded order with another amount (a reopened check): counted, and the first
 * and latest few kept, however many come. They used to add a history note each, so one order
 * re-posted with new amounts grew its record without bound (529 KB after ~3,900 posts), and every
 * rewrite of it slowed unrelated checkouts.
 */
export interface ChangedRepeats {
  count: number;
  first: ChangedDelivery[];
  latest: ChangedDelivery[];
}

export interface LedgerRecord {
  transactionId: string;
  /** Incremented by every write; stores use it for compare-and-set. */
  version: number;
  pos: string;
  orderId: string;
  status: LedgerStatus;
  createdAt: string;
  updatedAt: string;
  accrual: {
    state: AccrualState;
    check?: Check;
    customer?: Customer;
    results: AccrualResult[];
    /** Refusal reasons (upstream `errors`) or per-result `errorMessage`s. */
    errors: string[];
    /** Upstream operation ids this accrual produced or was matched to; no other record may claim them. */
    operationIds: number[];
    settledBy?: 'upstream' | 'history' | 'operator';
    /** When the call whose outcome is unknown began: the operations history is searched from here. */
    inDoubtSince?: string;
  };
  reversal: {
    state: ReversalState;
    refundIds: string[];
    requestedAt?: string;
    results: AccrualResult[];
    errors: string[];
    inDoubtSince?: string;
    /** The loyalty service answered that it does not know this transaction. */
    unknownUpstream?: boolean;
    /**
     * A partial refund: `reverse` is all-or-nothing upstream, so this record is reversed whole and
     * what remains is accrued again as a new record under `remainderTransactionId`.
     */
    partial?: PartialRefundPlan;
    /** PARTIAL_REFUND_POLICY=full_only: cents refunded so far by partial refunds that reversed nothing. */
    partialRefundedCents?: number;
  };
  /** Set on a record created to re-accrue what a partial refund left. */
  parentTransactionId?: string;
  /** Set once the remainder's record exists; later refunds of the order act on it. */
  remainderTransactionId?: string;
  /**
   * Written durably before a call to the loyalty service and cleared after its outcome is recorded.
   * A record found with it set after a restart was mid-call: the call may have gone out (in doubt).
   */
  inFlight?: { operation: UpstreamOperation; startedAt: string; owner: string };
  /** Rounds of delivery tried for the current operation, and when the worker may try the next. */
  rounds: number;
  nextAttemptAt?: string;
  attempts: Attempt[];
  /** Attempts dropped from the middle of `attempts` to keep the record bounded (the first and latest are kept). */
  attemptsOmitted?: number;
  history: HistoryEvent[];
  changedRepeats?: ChangedRepeats;
}

/**
 * What one record may accumulate. A record is rewritten whole on every change, so its size is paid
 * on every write of it; history and attempts keep their first entries (how it began) and their
 * latest (where it stands), and count what was dropped between.
 */
export const RECORD_BOUNDS = { historyEvents: 100, historyKeptFirst: 10, attempts: 50, attemptsKeptFirst: 5, changedDeliveriesKept: 3 } as const;

/** `history` with `event` appended, folding the oldest events after the first few into one "omitted" event past the bound. */
export function withHistoryEvent(history: readonly HistoryEvent[], event: HistoryEvent): HistoryEvent[] {
  const next = [...history, event];
  if (next.length <= RECORD_BOUNDS.historyEvents) return next;
  const at = RECORD_BOUNDS.historyKeptFirst;
  const already = next[at]!.omitted ?? 0;
  // With a marker in place, the event after it is dropped; without one, two events make way for it.
  const dropped = already ? next.splice(at + 1, 1) : next.splice(at, 2);
  const omitted = already + dropped.length;
  next.splice(at, already ? 1 : 0, { at: dropped.at(-1)!.at, event: `${omitted} earlier events omitted (a record keeps its first ${at} and latest events)`, omitted });
  return next;
}

/** `record`'s attempts with `added` appended, dropping the oldest after the first few past the bound. */
export function withAttempts(record: Pick<LedgerRecord, 'attempts' | 'attemptsOmitted'>, added: readonly Attempt[]): Pick<LedgerRecord, 'attempts' | 'attemptsOmitted'> {
  const attempts = [...record.attempts, ...added];
  const over = attempts.length - RECORD_BOUNDS.attempts;
  if (over <= 0) return { attempts, attemptsOmitted: record.attemptsOmitted };
  attempts.splice(RECORD_BOUNDS.attemptsKeptFirst, over);
  return { attempts, attemptsOmitted: (record.attemptsOmitted ?? 0) + over };
}

/** `changed` counting one more delivery with another amount. */
export function withChangedDelivery(changed: ChangedRepeats | undefined, delivery: ChangedDelivery): ChangedRepeats {
  const keep = RECORD_BOUNDS.changedDeliveriesKept;
  const count = (changed?.count ?? 0) + 1;
  const first = changed?.first ?? [];
  // The first few stay as they were; later ones only in `latest`, which holds the last few.
  if (first.length < keep) return { count, first: [...first, delivery], latest: [] };
  return { count, first, latest: [...(changed?.latest ?? []), delivery].slice(-keep) };
}

export function deriveStatus(record: Pick<LedgerRecord, 'accrual' | 'reversal'>): LedgerStatus {
  switch (record.reversal.state) {
    case 'reversed':
      return 'reversed';
    case 'failed':
      return 'reverse_failed';
    case 'in_doubt':
      return 'in_doubt';
    case 'pending':
      return 'reversal_pending';
    case 'none':
    case 'not_needed':
      break;
  }
  switch (record.accrual.state) {
    case 'none':
      return 'pending';
    case 'skipped':
    case 'pending':
    case 'in_doubt':
    case 'accrued':
    case 'partially_accrued':
    case 'failed':
      return record.accrual.state;
  }
}

/** Work remains for the worker, the reconciler or an operator. */
export function isOpen(record: Pick<LedgerRecord, 'accrual' | 'reversal' | 'inFlight' | 'remainderTransactionId'>): boolean {
  return (
    record.inFlight !== undefined ||
    awaitsRemainder(record) ||
    record.accrual.state === 'pending' ||
    record.accrual.state === 'in_doubt' ||
    record.reversal.state === 'pending' ||
    record.reversal.state === 'in_doubt'
  );
}

export interface Due {
  /** Epoch ms. */
  atMs: number;
  /** Only the history verifier can act then (an accrual in doubt): an operator where it cannot run. */
  needsVerifier: boolean;
}

/**
 * When the worker should next look at an open record by itself (the scheduled pass; an operator's
 * reconcile looks at every open record). It follows the decisions of `TransactionService#claim`:
 * - a call marked in flight, or a remainder still to create: now (its `updatedAt`). An in-flight
 *   record is looked at so that a call its bridge can no longer finish is taken over, whatever
 *   pause `nextAttemptAt` still shows (a reconcile can mark a call before its round was due);
 * - a pending accrual or reversal: `nextAttemptAt`, the end of the pause between rounds, else now;
 *   a reversal of an accrual that was refused or skipped has nothing to wait for: now;
 * - an accrual in doubt: `nextAttemptAt`, when the operations history is checked. Only the history
 *   verifier settles it, and it runs only where LOYALTY_API_KEY is set: a setting of the running
 *   bridge that can change at a restart without the record being written again. So the answer
 *   says `needsVerifier`, stores keep it, and the worker's query says whether it can verify;
 *   without a verifier, an operator must /resolve these, as the reversals below;
 * - a reversal in doubt: never (undefined). The operations history cannot prove a reversal, so
 *   only an operator's /resolve moves it (bridge-contract, "Rules the loyalty service imposes").
 * Undefined too for a settled record: nothing left to do.
 */
export function dueOf(
  record: Pick<LedgerRecord, 'accrual' | 'reversal' | 'inFlight' | 'remainderTransactionId' | 'nextAttemptAt' | 'updatedAt'>,
): Due | undefined {
  const now = Date.parse(record.updatedAt);
  const afterPause = record.nextAttemptAt ? Date.parse(record.nextAttemptAt) : now;
  const { accrual, reversal } = record;
  if (record.inFlight || awaitsRemainder(record)) return { atMs: now, needsVerifier: false };
  if (accrual.state === 'pending') return { atMs: afterPause, needsVerifier: false };
  if (accrual.state === 'in_doubt') return { atMs: afterPause, needsVerifier: true };
  if (reversal.state === 'in_doubt') return undefined;
  if (reversal.state === 'pending') return { atMs: accrual.state === 'failed' || accrual.state === 'skipped' ? now : afterPause, needsVerifier: false };
  return undefined;
}

/** Reversed for a partial refund, but the remainder's record is not created yet (a crash can stop between the two). */
export function awaitsRemainder(record: Pick<LedgerRecord, 'reversal' | 'remainderTransactionId'>): boolean {
  return record.reversal.state === 'reversed' && record.reversal.partial !== undefined && record.remainderTransactionId === undefined;
}
