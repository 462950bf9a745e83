/**
 * A ledger record: one POS order ↔ one upstream `transactionId`. The record keeps the intent (the
 * Check and customer to send), every attempt with what was sent and what came back, and two
 * sub-states, one for the accrual and one for the reversal. The public `status` (bridge-contract
 * "Ledger statuses") is derived from them in exactly one place, `deriveStatus`.
 */
import { createHash } from 'node:crypto';
import type { Customer } from '../kernel/customer.js';
import { identitiesOf } from './customer-index.js';
import type { Attempt, UpstreamOperation } from '../loyalty/calls.js';
import type { AccrualResult, Check } from '../loyalty/contract.js';
import { DEFAULT_MERCHANT } from './merchant.js';
import { mutant } from '../kernel/mutants.js';
import { unreachable } from '../kernel/unreachable.js';

export { unreachable };

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

/** Statuses of a record the bridge is still delivering by itself: what an operator queued has not landed while it is in one. */
export const DELIVERING_STATUSES: ReadonlySet<LedgerStatus> = new Set(['pending', 'reversal_pending']);

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
  /** An operator's action: who (`admin`, a name from ADMIN_TOKENS, or `merchant:<id>`); `detail` holds their reason. */
  actor?: string;
}

/**
 * Who did an operator action and why: the actor comes from the token (`admin` for ADMIN_TOKEN, a
 * name from ADMIN_TOKENS, `merchant:<id>` for a merchant's admin token), the reason from the body.
 */
export interface OperatorAct {
  actor: string;
  reason?: string;
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

/**
 * How a reversal shows in the operations history (the loyalty contract does not say): learned from
 * one the service confirmed. An entry of this shape is on the same card, carries this `eventId`, and
 * a `purchaseSum` of the reversed Check's amount with this sign.
 */
export interface ReversalShape {
  eventId: number;
  /** -1: a negative purchaseSum (a reversal written as the purchase taken back); 1: a positive one under its own event. */
  sign: -1 | 1;
  /** The record it was learned from, and when. */
  learnedFrom: string;
  at: string;
}

/** Where a record came from (its first delivery). */
export interface RecordOrigin {
  /**
   * pos: a direct post; webhook; backfill: found reading the POS back; replay: a dead letter run
   * again; remainder: a partial refund's rest; operator: an operator's reversal of an order the ledger never saw;
   * register: the POS's register called while the sale was open (Toast's loyalty integration).
   */
  via: 'pos' | 'webhook' | 'backfill' | 'replay' | 'remainder' | 'operator' | 'register';
  receivedAt: string;
  /** The HTTP request's id (x-request-id), as in the request log. */
  requestId?: string;
  /** The webhook event's key, as remembered against redeliveries. */
  webhookKey?: string;
  /** The dead letter whose replay created it. */
  deadLetterId?: string;
  /** The POS payload that arrived is kept beside the record (the store's `getPayload`). */
  payload: boolean;
}

/** The upstream operations a record has claimed: its accrual's and its reversal's. No other record may claim them. */
export function claimedOperationIds(record: Pick<LedgerRecord, 'accrual' | 'reversal'>): number[] {
  const reversal = record.reversal.operationIds ?? [];
  return reversal.length ? [...record.accrual.operationIds, ...reversal] : record.accrual.operationIds;
}


/**
 * The key a record is stored under: its transactionId within its merchant. Two merchants may send
 * equal order ids, and so derive equal transactionIds (each merchant's loyalty account keeps its
 * own), but their records never collide. The default merchant's key is the bare transactionId, so
 * ledgers written before merchants existed keep their keys; another merchant's is
 * `<merchant id>/<transactionId>` (merchant ids are `[a-z0-9-]`, transactionIds never hold `/`).
 */
export function ledgerKey(merchantId: string, transactionId: string): string {
  return merchantId === DEFAULT_MERCHANT ? transactionId : `${merchantId}/${transactionId}`;
}

/**
 * The transactionId a ledger key stands for (`ledgerKey`: the key without its merchant's prefix).
 * What a message shows: the key is the store's, and a 404 naming `shop-a/…` told a client how
 * records are kept (docs/security.md, "Hostile input"). TransactionIds hold no `/`, so the key alone says.
 */
export function transactionIdOf(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}

export function merchantOf(record: Pick<LedgerRecord, 'merchantId'>): string {
  return record.merchantId ?? DEFAULT_MERCHANT;
}

export function keyOf(record: Pick<LedgerRecord, 'merchantId' | 'transactionId'>): string {
  return ledgerKey(merchantOf(record), record.transactionId);
}

export interface LedgerRecord {
  /** The upstream transactionId (what accrue and reverse are called with); unique within the merchant. */
  transactionId: string;
  /** Absent on records written before merchants existed: the default merchant's. */
  merchantId?: string;
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
    /**
     * A pending accrual not sent because another accrual of the same customer and amount is
     * unsettled (`accrualKeys`): that record's transactionId. Cleared when this one goes out.
     */
    waitingBehind?: string;
    /**
     * The history shows an operation this accrual and others could each have made: their
     * transactionIds. None of them claims it until only one can (`HistoryVerifier`).
     */
    ambiguousWith?: string[];
    /**
     * The last history check found it ambiguous with every call of its group answered or lost past
     * the grace period, and it first to ask about (`Verdict.askable`): the service may be asked
     * (`startProbe`: by its merchant's policy, or a person's "ask the service").
     */
    askable?: true;
    /**
     * Put in doubt after lost journal lines while another record held its accrual key: it holds
     * none (both may have been sent before the crash, so neither can wait), and the history verifier
     * still counts it among the unsettled. Dropped when it is sent again.
     */
    keyless?: true;
    /**
     * When this accrual was settled as accrued without its operation named (a person's `resolve
     * accrued` where the history showed none or several, or a probe whose reversal the history or a
     * person proved, its answer lost): its operation is in the history, claimed by no record. While set, the record stays among its merchant's unsettled accruals of its amount
     * (`unsettledAmount`), so the history verifier weighs it as a rival of any accrual in doubt whose
     * window its operation could fall in; cleared once none can (`releasePersonSettled`).
     */
    personSettledAt?: string;
    /**
     * Settled by the count rule (`HistoryVerifier`): these other accruals were in doubt with it, as
     * many operations as accruals were in the history, so all happened. Which of those operations is
     * whose cannot be told where the calls overlapped (the same card and sum, the same window): each
     * claims one, and the set is theirs together.
     */
    countedWith?: string[];
    /** When `personSettledAt` was released: no accrual in doubt can mistake its operation any more. */
    personSettledReleasedAt?: string;
    /**
     * When this accrual began waiting behind `waitingBehind`, and when that hold has lasted too long
     * (`HOLD_ATTENTION_AFTER_MS` later): from then the attention queue shows it as `held`, with why
     * and what would settle it. Cleared with `waitingBehind`.
     */
    waitingSince?: string;
    holdAttentionAt?: string;
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
    /**
     * The reversal is the bridge's own question, not a refund (merchant policy `ambiguity: probe`):
     * the accrual is in doubt and ambiguous, and `reverse` of its transactionId tells whether it
     * happened (the service reverses only an accrual it made). While set with the accrual in doubt,
     * the accrual stays unsettled (its keys held, a rival to others); `settleProbe` reads the answer.
     */
    probe?: { at: string };
    /**
     * Cents refunded so far by partial refunds that reversed nothing: under PARTIAL_REFUND_POLICY=full_only,
     * or of an accrual the loyalty service refused (nothing was accrued to reverse).
     */
    partialRefundedCents?: number;
    /**
     * The operations history's entries of this reversal (one per card it reversed), once seen there:
     * claimed like an accrual's, so no other record's reversal can be settled by them.
     */
    operationIds?: number[];
    /**
     * How the history showed this reversal, learned after the service confirmed it (`reversedAt`):
     * what the bridge then looks for when a reversal's outcome is unknown (core/reversal-shape.ts).
     */
    shape?: ReversalShape;
    /** The history was read for this reversal in doubt and proved nothing: a person decides, shown the evidence. */
    unproven?: { at: string; why: string };
    /**
     * Settled by the count rule for reversals (`HistoryVerifier`): these other reversals were in
     * doubt with it on its card, and the card showed as many unclaimed entries of the shape and sum,
     * so all happened. Which entry is whose cannot be told (one card, one sum): each claims one, and
     * the set is theirs together.
     */
    countedWith?: string[];
  };
  /** Set on a record created to re-accrue what a partial refund left. */
  parentTransactionId?: string;
  /** How the order reached the bridge: the delivery or request that created the record (absent on records from before it was kept). */
  origin?: RecordOrigin;
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
  /**
   * Closed by an operator: a record that cannot succeed (an orphan `reverse_failed`: a refund of an
   * order the loyalty service never knew). Its status stays what it is (the contract's statuses are
   * fixed); the record is kept whole and leaves the attention queue.
   */
  closed?: { at: string; actor: string; reason: string };
  /**
   * An operator has seen what the attention queue showed (a refusal the loyalty service will keep
   * making, deliveries with another amount) and settled it outside the bridge: it leaves the queue
   * until the record comes into such a state again (a later failure, another such delivery).
   */
  acknowledged?: { at: string; actor: string; reason: string };
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
  // A probe's reverse asks about the accrual in doubt: the record is in doubt until it is answered.
  if (isProbing(record)) return 'in_doubt';
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
    default:
      return unreachable(record.reversal.state);
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
    default:
      return unreachable(record.accrual.state);
  }
}

/** Work remains for the worker, the reconciler or an operator. */
export function isOpen(record: PlanInput): boolean {
  return plan(record).kind !== 'settled';
}

export interface Due {
  /** Epoch ms. */
  atMs: number;
  /** Only the history verifier can act then (an accrual in doubt): an operator where it cannot run. */
  needsVerifier: boolean;
}

/**
 * True while an accrual may be reaching the loyalty service or may have reached it unseen: a call
 * marked in flight, or an outcome in doubt. Such an accrual is settled only by its answer or by the
 * operations history, and the history names no transactionId.
 */
export function isAccrualUnsettled(record: PlanInput): boolean {
  // As the transitions plan it (`plan`): an accrue out now, or one whose outcome the history is to
  // settle; or one in doubt whose probe (a reverse that asks whether it happened) is under way.
  const planned = plan(record);
  return (planned.kind === 'in_flight' && planned.operation === 'accrue') || (planned.kind === 'verify' && planned.side === 'accrue') || (isProbing(record) && !mutant('release-hold-early'));
}

/** An accrual in doubt that the bridge is asking about by reversing it (`reversal.probe`). */
export function isProbing(record: Pick<LedgerRecord, 'accrual' | 'reversal'>): boolean {
  return record.accrual.state === 'in_doubt' && record.reversal.probe !== undefined;
}

/**
 * The keys an unsettled accrual holds: one per customer identifier (phone, email, card serial,
 * normalized), each with the Check amount. No two records may hold one key: a second accrual of
 * the same customer and amount waits until the first is settled, because the operations history
 * could not tell their operations apart (an operation carries no transactionId, and one of the
 * customer's cards with that `purchaseSum` would match either). Hashed: the keys are compared
 * only, and the ledger's indexes need not hold contact details in clear.
 */
export function accrualKeys(record: PlanInput & Pick<LedgerRecord, 'merchantId'>): string[] {
  const { check, customer } = record.accrual;
  if (!check || !customer || !isAccrualUnsettled(record) || record.accrual.keyless) return [];
  const identities = identitiesOf(customer);
  // Per merchant: two merchants' customers are different people to the loyalty service.
  const merchant = merchantOf(record);
  return identities.map((identity) => createHash('sha256').update(`${merchant}\u0000${identity}\u0000${check.amount}`).digest('base64url').slice(0, 22));
}

/**
 * The amount of an unsettled accrual, or of one a person settled without naming its operation
 * (`personSettledAt`), for finding the records an operation could belong to; else undefined.
 */
export function unsettledAmount(record: PlanInput): number | undefined {
  return isAccrualUnsettled(record) || record.accrual.personSettledAt !== undefined ? record.accrual.check?.amount : undefined;
}

/** Reversed for a partial refund, but the remainder's record is not created yet (a crash can stop between the two). */
export function awaitsRemainder(record: Pick<LedgerRecord, 'reversal' | 'remainderTransactionId'>): boolean {
  return record.reversal.state === 'reversed' && record.reversal.partial !== undefined && record.remainderTransactionId === undefined;
}

/** A refund of an order the loyalty service never knew: nothing was accrued under its id, so nothing can be reversed. */
export function isOrphanReversal(record: Pick<LedgerRecord, 'reversal' | 'accrual'>): boolean {
  return record.reversal.state === 'failed' && record.reversal.unknownUpstream === true && record.accrual.state === 'none';
}

// ------------------------------------------------------------------ what a record needs

/** What `plan` reads of a record. */
export type PlanInput = Pick<LedgerRecord, 'accrual' | 'reversal' | 'inFlight' | 'remainderTransactionId' | 'nextAttemptAt'>;

/** What a record needs, whatever the time: the scheduler's and the delivery's one source. */
export type Plan =
  /** A call is marked in flight: its owner finishes it, or it is taken over once abandoned. */
  | { kind: 'in_flight'; operation: UpstreamOperation }
  /** Reversed for a partial refund; the remainder's record is still to be created. */
  | { kind: 'create_remainder' }
  /** Send it, not before the end of the pause between rounds when there is one. */
  | { kind: 'call'; operation: UpstreamOperation; notBefore?: string }
  /** An accrual or (with the merchant's reversal shape learned) a reversal in doubt: ask the operations history, not before `notBefore`. */
  | { kind: 'verify'; side: UpstreamOperation; notBefore?: string }
  /** A refund of an accrual that was refused or skipped: nothing to reverse; record so. */
  | { kind: 'reversal_not_needed' }
  /** Only a person can move it. */
  | { kind: 'operator'; why: string }
  | { kind: 'settled' };

export function plan(record: PlanInput): Plan {
  const { accrual, reversal } = record;
  if (record.inFlight) return { kind: 'in_flight', operation: record.inFlight.operation };
  if (awaitsRemainder(record)) return { kind: 'create_remainder' };
  switch (accrual.state) {
    case 'pending':
      return { kind: 'call', operation: 'accrue', notBefore: record.nextAttemptAt };
    case 'in_doubt':
      // Being asked by a probe: its reverse (below) decides, not the history.
      if (reversal.probe) break;
      return mutant('resend-after-reset') ? { kind: 'call', operation: 'accrue' } : { kind: 'verify', side: 'accrue', notBefore: record.nextAttemptAt };
    case 'none':
    case 'skipped':
    case 'accrued':
    case 'partially_accrued':
    case 'failed':
      break;
    default:
      return unreachable(accrual.state);
  }
  switch (reversal.state) {
    case 'in_doubt':
      // Looked for in the history once the merchant's reversal shape is known (reversal-shape.ts); what that cannot prove is a person's.
      if (reversal.unproven) return { kind: 'operator', why: `reverse outcome unknown; the history did not prove it (${reversal.unproven.why}), so a person must resolve it as reversed or not reversed, shown the evidence` };
      return { kind: 'verify', side: 'reverse', notBefore: record.nextAttemptAt };
    case 'pending':
      if (accrual.state === 'failed' || accrual.state === 'skipped') return { kind: 'reversal_not_needed' };
      return { kind: 'call', operation: 'reverse', notBefore: record.nextAttemptAt };
    case 'none':
    case 'not_needed':
    case 'reversed':
    case 'failed':
      return { kind: 'settled' };
    default:
      return unreachable(reversal.state);
  }
}

/**
 * When the worker should next look at an open record by itself (the scheduled pass; an operator's
 * reconcile looks at every open record), from `plan`:
 * - a call marked in flight, a remainder to create, a reversal with nothing to reverse: now (its
 *   `updatedAt`). An in-flight record is looked at so that a call its bridge can no longer finish
 *   is taken over, whatever pause `nextAttemptAt` still shows;
 * - a call to make: `nextAttemptAt`, the end of the pause between rounds, else now;
 * - an accrual in doubt: `nextAttemptAt`, when the history is checked. Only the history verifier
 *   settles it, and it runs only where LOYALTY_API_KEY is set: a setting of the running bridge
 *   that can change at a restart without the record being written again. So the answer says
 *   `needsVerifier`, stores keep it, and the worker's query says whether it can verify;
 * - a reversal in doubt: as an accrual in doubt (the history is asked once the merchant's reversal
 *   shape is learned: reversal-shape.ts), until the history did not prove it (`reversal.unproven`);
 * - then, and a settled record: never (undefined): only an operator's /resolve moves it.
 */
export function dueOf(record: PlanInput & Pick<LedgerRecord, 'updatedAt'>): Due | undefined {
  const now = Date.parse(record.updatedAt);
  const after = (notBefore: string | undefined) => (notBefore ? Date.parse(notBefore) : now);
  const planned = plan(record);
  switch (planned.kind) {
    case 'in_flight':
    case 'create_remainder':
    case 'reversal_not_needed':
      return { atMs: now, needsVerifier: false };
    case 'call':
      return { atMs: after(planned.notBefore), needsVerifier: false };
    case 'verify':
      return { atMs: after(planned.notBefore), needsVerifier: true };
    case 'operator':
    case 'settled':
      return undefined;
    default:
      return unreachable(planned);
  }
}

