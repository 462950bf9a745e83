/**
 * Every rule of the ledger's state machine, as pure functions: what a record needs next, and what
 * each event (a call's outcome, a history verdict, a refund, an operator's action) makes of it. No
 * I/O, no clock, no randomness: the caller passes `now` and writes what comes back. The service
 * (intake, delivery, recovery, operator actions) and the stores' due index both decide from here,
 * so a rule is written once.
 *
 * A transition answers the changed record (a copy; the input is never touched) and the event to
 * add to its history, or throws a ConflictError naming why the change is not allowed. Versions,
 * `updatedAt`, the derived `status` and the history line are added by `nextVersion`, in one place.
 *
 * The invariants behind them (bridge-contract, "Rules the loyalty service imposes"):
 * - one transactionId gets at most one `accrue` unless the previous one is proven not to have
 *   happened (a refusal, a 429/5xx, a refused connection, or the operations history after the
 *   grace period), and at most one `reverse`;
 * - a call is marked in flight before it is made; a call whose outcome is unknown puts its side
 *   in doubt, never resent before it is settled;
 * - an accrual is not sent while another of the same customer and amount is unsettled
 *   (`accrualKeys`): the history could not tell their operations apart.
 */
import { ConflictError } from '../kernel/errors.js';
import {
  awaitsRemainder,
  deriveStatus,
  dueOf,
  plan,
  unreachable,
  isOrphanReversal,
  isProbing,
  merchantOf,
  withAttempts,
  withChangedDelivery,
  withHistoryEvent,
  type Due,
  type LedgerRecord,
  type LedgerStatus,
  type OperatorAct,
  type PartialRefundPlan,
  type Plan,
  type ReversalShape,
} from '../state/record.js';
import type { Attempt, UpstreamOperation } from '../loyalty/calls.js';
import type { CallOutcome } from '../loyalty/client.js';
import type { Check } from '../loyalty/contract.js';
import { ACKNOWLEDGEABLE, attentionOf } from '../state/attention.js';
import { remainderAfterRefund, RefundExceedsRemainderError } from './remainder.js';
import type { RefundIntent } from '../pos/contract.js';
import { originOf, type Arrival } from './arrival.js';
import { mutant } from '../kernel/mutants.js';
import { backoffMs } from '../kernel/backoff.js';

export interface TransitionOptions {
  /** Unit of the pause between delivery rounds (the same unit as the 429 schedule). */
  retryBaseMs: number;
  /** Pause before the first history check of an accrual in doubt, and between checks. */
  inDoubtVerifyAfterMs: number;
  /** How long an accrual may wait behind another before the attention queue shows it (`held`); 15 minutes when not given. */
  holdAttentionAfterMs?: number;
  /** `full_only`: partial refunds are recorded and reverse nothing until together they cover the order. */
  partialRefundPolicy: 'reaccrue' | 'full_only';
}

export interface Transition {
  record: LedgerRecord;
  /** For the record's history; undefined when the change needs no line (a status change still gets one). */
  event?: string;
  /** An operator's action: who, and their reason (the history line's `detail`). */
  act?: OperatorAct;
}

/** Pause before the worker's next round after a round ended without an answer: 30 units, growing to 1 hour. */
const ROUND_PAUSES = [30, 60, 120, 300, 600, 1800, 3600];

/** The pause after the `rounds`-th round in a row that ended without an answer (1: the first). */
export function roundPauseMs(rounds: number, options: Pick<TransitionOptions, 'retryBaseMs'>): number {
  return backoffMs(ROUND_PAUSES, options.retryBaseMs, rounds);
}
const MAX_REFUND_IDS_REMEMBERED = 100;
const DEFAULT_HOLD_ATTENTION_AFTER_MS = 15 * 60_000;

// ------------------------------------------------------------------ what a record needs

// What a record needs (`plan`) and when the worker looks at it (`dueOf`) live with the record
// (state/record.ts), below both the stores, which index them, and these transitions, which act on them.
export { dueOf, plan, unreachable, type Plan };

export interface StepContext {
  nowMs: number;
  /** An operator's reconcile: pauses between rounds do not apply. */
  force: boolean;
  /** The history verifier can run (LOYALTY_API_KEY is set). */
  canVerify: boolean;
  /** The record's in-flight call belongs to a bridge that can no longer finish it (see DeliveryService). */
  abandoned: boolean;
  /**
   * The record's merchant, as the bridge knows it now: nothing is sent for a suspended merchant (its
   * records are kept, and read in the history), nor asked of the loyalty service for one no longer known.
   */
  merchant: 'active' | 'suspended' | 'unknown';
}

/** What a pass over the record does now. */
export type Step =
  | { kind: 'call'; operation: UpstreamOperation }
  | { kind: 'verify'; side: UpstreamOperation }
  | { kind: 'create_remainder' }
  | { kind: 'reversal_not_needed' }
  | { kind: 'take_over' }
  /** Nothing now: not due yet, a call is out, an operator's, or settled; `why` for the report. */
  | { kind: 'none'; why: string };

export function nextStep(record: LedgerRecord, ctx: StepContext): Step {
  const step = stepByPlan(record, ctx);
  if (ctx.merchant === 'unknown' && (step.kind === 'call' || step.kind === 'verify')) return { kind: 'none', why: `merchant ${merchantOf(record)} is not known to this bridge: nothing is sent` };
  if (ctx.merchant === 'suspended' && step.kind === 'call') return { kind: 'none', why: `merchant ${merchantOf(record)} is suspended: nothing is sent until it is active again` };
  return step;
}

function stepByPlan(record: LedgerRecord, ctx: StepContext): Step {
  const planned = plan(record);
  const due = (notBefore: string | undefined) => ctx.force || !notBefore || Date.parse(notBefore) <= ctx.nowMs;
  switch (planned.kind) {
    case 'in_flight':
      return ctx.abandoned ? { kind: 'take_over' } : { kind: 'none', why: `a ${planned.operation} call is in flight` };
    case 'create_remainder':
    case 'reversal_not_needed':
      return { kind: planned.kind };
    case 'call':
      if (!due(planned.notBefore)) return { kind: 'none', why: `next ${planned.operation} round at ${planned.notBefore}${record.accrual.waitingBehind ? ` (waits behind ${record.accrual.waitingBehind})` : ''}` };
      return { kind: 'call', operation: planned.operation };
    case 'verify': {
      const side = planned.side === 'accrue' ? 'accrual' : 'reverse';
      if (!ctx.canVerify) return { kind: 'none', why: `${side} outcome unknown; the merchant's loyalty API key is not set (LOYALTY_API_KEY for default), so a person must resolve it` };
      if (!due(planned.notBefore)) {
        const ambiguous = record.accrual.ambiguousWith?.length ? `; ambiguous with ${record.accrual.ambiguousWith.join(', ')}` : '';
        return { kind: 'none', why: `${side} outcome unknown; history check at ${planned.notBefore}${ambiguous}` };
      }
      return { kind: 'verify', side: planned.side };
    }
    case 'operator':
      return { kind: 'none', why: planned.why };
    case 'settled':
      return { kind: 'none', why: 'settled' };
    default:
      return unreachable(planned);
  }
}

// ------------------------------------------------------------------ the writer's part

/**
 * The version that follows `previous` after `transition`: version + 1, `updatedAt`, the status
 * derived again, and the history line (the event, or "status changed" when only the status did).
 */
export function nextVersion(previous: LedgerRecord, transition: Transition, now: Date): LedgerRecord {
  const at = now.toISOString();
  const next = { ...transition.record, version: previous.version + 1, updatedAt: at };
  next.status = deriveStatus(next);
  if (transition.event || next.status !== previous.status) {
    next.history = withHistoryEvent(next.history, {
      at,
      event: transition.event ?? 'status changed',
      ...(next.status !== previous.status ? { from: previous.status, to: next.status } : {}),
      ...(transition.act ? { actor: transition.act.actor, ...(transition.act.reason ? { detail: transition.act.reason } : {}) } : {}),
    });
  }
  return next;
}

/**
 * A copy `change` may mutate: top-level fields, the `accrual` and `reversal` objects; arrays and
 * objects inside them are reassigned, never mutated. Cheaper than a deep clone of the attempt log.
 */
function changed(record: LedgerRecord, change: (draft: LedgerRecord) => string | undefined, act?: OperatorAct): Transition {
  const draft: LedgerRecord = { ...record, accrual: { ...record.accrual }, reversal: { ...record.reversal }, history: [...record.history] };
  const event = change(draft);
  return { record: draft, event, ...(act ? { act } : {}) };
}

const later = (now: Date, ms: number): string => new Date(now.getTime() + ms).toISOString();

/** The side of `operation` is in doubt since `since`: verified from the history (or resolved by a person) before anything is resent. */
function putInDoubt(r: LedgerRecord, operation: UpstreamOperation, since: string, now: Date, options: TransitionOptions): void {
  Object.assign(operation === 'accrue' ? r.accrual : r.reversal, { state: 'in_doubt', inDoubtSince: since });
  if (operation === 'reverse') r.reversal.unproven = undefined;
  r.nextAttemptAt = later(now, options.inDoubtVerifyAfterMs);
}

function settledRounds(r: LedgerRecord): void {
  r.rounds = 0;
  r.nextAttemptAt = undefined;
}

// ------------------------------------------------------------------ new records

/** Which record: the upstream transactionId, the merchant whose it is, and the POS order it stands for. */
export interface RecordIds {
  transactionId: string;
  merchantId: string;
  pos: string;
  orderId: string;
}

export function newRecord(ids: RecordIds, now: Date): LedgerRecord {
  const at = now.toISOString();
  return {
    transactionId: ids.transactionId,
    merchantId: ids.merchantId,
    version: 1,
    pos: ids.pos,
    orderId: ids.orderId,
    status: 'pending',
    createdAt: at,
    updatedAt: at,
    accrual: { state: 'pending', results: [], errors: [], operationIds: [] },
    reversal: { state: 'none', refundIds: [], results: [], errors: [] },
    rounds: 0,
    attempts: [],
    history: [],
  };
}

/** A first record with its history line; `record.status` derived. */
function born(record: LedgerRecord, event: string): LedgerRecord {
  record.status = deriveStatus(record);
  record.history = [{ at: record.createdAt, event, to: record.status }];
  return record;
}

/**
 * A checkout. `owner`: the instance that will make the accrue at once; the record is then born
 * marked in flight, so one write serves as both the intent and the marker that must precede the
 * call (a crash right after it leaves the record in doubt, verified before anything is sent).
 */
export function newCheckout(
  ids: RecordIds,
  intent: { check: Check; customer: LedgerRecord['accrual']['customer'] },
  hasContact: boolean,
  now: Date,
  owner?: string,
  /** What brought it: kept as its `origin`; its note ("found by backfill: …") said in its first history event. */
  arrival?: Arrival,
): LedgerRecord {
  const record = newRecord(ids, now);
  if (arrival) record.origin = originOf(arrival);
  record.accrual.check = intent.check;
  record.accrual.customer = intent.customer;
  record.accrual.state = hasContact ? 'pending' : 'skipped';
  if (hasContact && owner) record.inFlight = { operation: 'accrue', startedAt: now.toISOString(), owner };
  const event = hasContact ? 'checkout recorded' : 'recorded without phone, email or card serial: nothing to accrue';
  return born(record, arrival?.note ? `${event} (${arrival.note})` : event);
}

/** A refund of an order this ledger never saw (accrued before the ledger existed, or lost): reversed by the derived id. */
export function newRefundOfUnknownOrder(ids: RecordIds, refundId: string | undefined, now: Date, arrival?: Arrival): LedgerRecord {
  const record = newRecord(ids, now);
  if (arrival) record.origin = originOf(arrival);
  record.accrual.state = 'none';
  record.reversal = { ...record.reversal, state: 'pending', requestedAt: now.toISOString(), refundIds: refundId ? [refundId] : [] };
  return born(record, `refund${refundId ? ` ${refundId}` : ''} for an order this ledger never saw: reversing by its derived id${arrival?.note ? ` (${arrival.note})` : ''}`);
}

/**
 * The record that accrues what a partial refund of `parent` left. `inDoubtSince`: lines lost in a
 * crash may have created and accrued it already; then it is born in doubt, verified before any accrue.
 */
export function newRemainder(parent: LedgerRecord, partial: PartialRefundPlan, now: Date, options: TransitionOptions, inDoubtSince?: string, cause?: string): LedgerRecord {
  const record = newRecord({ transactionId: partial.remainderTransactionId, merchantId: merchantOf(parent), pos: parent.pos, orderId: parent.orderId }, now);
  record.accrual.check = partial.remainderCheck;
  record.accrual.customer = parent.accrual.customer;
  record.parentTransactionId = parent.transactionId;
  record.origin = { via: 'remainder', receivedAt: record.createdAt, payload: false };
  if (inDoubtSince) putInDoubt(record, 'accrue', inDoubtSince, now, options);
  const doubt = cause ? `, created after ${cause}: it may have been created and accrued already` : inDoubtSince ? ': in doubt, lines lost in a crash may have accrued it already' : '';
  return born(record, `remainder of ${parent.transactionId} after partial refund ${partial.refundId}${doubt}`);
}

// ------------------------------------------------------------------ delivery

/** The call goes out now, made by `owner`: the durable marker that must precede it. */
export function markInFlight(record: LedgerRecord, operation: UpstreamOperation, owner: string, now: Date): Transition {
  return changed(record, (r) => {
    r.inFlight = { operation, startedAt: now.toISOString(), owner };
    if (operation === 'accrue') Object.assign(r.accrual, { waitingBehind: undefined, waitingSince: undefined, holdAttentionAt: undefined, keyless: undefined });
    return undefined;
  });
}

/**
 * A record that must be in doubt while `holder` holds its accrual key (lines lost in a crash may
 * have sent both): kept without the key, and said so; the history verifier weighs both.
 */
export function keyless(record: LedgerRecord, holder: string): LedgerRecord {
  const at = record.updatedAt;
  return {
    ...record,
    accrual: { ...record.accrual, keyless: true },
    history: withHistoryEvent(record.history, { at, event: `${holder}, an accrual of the same customer and amount, is unsettled too: both are weighed by the history verifier` }),
  };
}

/**
 * The accrual is not sent: `holder`, an accrual of the same customer and amount, is unsettled
 * (`accrualKeys`). It stays pending and is looked at again after `pauseMs`; the history says so
 * when it starts waiting behind another record, not at every look.
 */
/**
 * The accrual waits behind `holder` (an unsettled accrual of the same customer and amount, as it was
 * found): looked at again after a round's unit while the holder's call is out, and no sooner than
 * the holder's history check while it is in doubt.
 */
export function waitBehind(record: LedgerRecord, holder: string, holding: Pick<LedgerRecord, 'accrual'> | undefined, now: Date, options: Pick<TransitionOptions, 'retryBaseMs' | 'inDoubtVerifyAfterMs' | 'holdAttentionAfterMs'>): Transition {
  const pauseMs = holding?.accrual.state === 'in_doubt' ? Math.max(options.inDoubtVerifyAfterMs, options.retryBaseMs) : options.retryBaseMs;
  return changed(record, (r) => {
    const already = r.accrual.waitingBehind === holder;
    r.accrual.waitingBehind = holder;
    // The hold's life counts from its start, whoever it waits behind now (`held` in the attention queue after it).
    if (r.accrual.waitingSince === undefined) {
      r.accrual.waitingSince = now.toISOString();
      r.accrual.holdAttentionAt = later(now, options.holdAttentionAfterMs ?? DEFAULT_HOLD_ATTENTION_AFTER_MS);
    }
    r.nextAttemptAt = later(now, pauseMs);
    if (already) return undefined;
    return `waits behind ${holder}: an accrual of the same customer and amount is unsettled, and the operations history could not tell the two apart`;
  });
}

/**
 * An accrual a person settled without naming its operation leaves the merchant's unsettled accruals
 * of its amount: no accrual in doubt, nor one sent from now on, can take its operation for its own
 * (`HistoryVerifier.releasable`).
 */
export function releasePersonSettled(record: LedgerRecord, now: Date): Transition | undefined {
  if (record.accrual.personSettledAt === undefined) return undefined;
  return changed(record, (r) => {
    r.accrual.personSettledAt = undefined;
    r.accrual.personSettledReleasedAt = now.toISOString();
    return 'released: no accrual in doubt can take the operation a person settled this one by for its own';
  });
}

/**
 * A reversal the history did not prove is looked at again once another reversal of its amount has
 * settled (`HistoryVerifier.unprovenReversals`): that one's entry may have been what made this one's
 * ambiguous, and is now claimed or ruled out (docs/correctness.md, finding 3). Unproven again if the
 * history still cannot tell; nothing is sent either way.
 */
export function reconsiderUnproven(record: LedgerRecord, settled: string): Transition | undefined {
  if (record.reversal.state !== 'in_doubt' || !record.reversal.unproven || record.inFlight || mutant('keep-unproven')) return undefined;
  return changed(record, (r) => {
    r.reversal.unproven = undefined;
    r.nextAttemptAt = undefined;
    return `looked for in the history again: the reversal of ${settled}, of the same amount, has settled, which may have been what kept this one from being proven`;
  });
}

// ------------------------------------------------------------------ the probe

/**
 * An accrual in doubt that the history cannot settle (fewer operations than the accruals that could
 * have made them) is asked about, where its merchant allows it (`ambiguity: probe`): `reverse` of
 * its transactionId. The service reverses only an accrual it made (its contract's states table), so
 * a refusal naming the transaction unknown means it never happened, and a reversal means it had:
 * its answer's results name the accrual's operations, which it then claims, and the purchase is
 * accrued again under a linked transactionId (`~r<n>`, as a partial refund's remainder is). A lost
 * answer puts the reversal in doubt, verified from the history like any reversal or by a person:
 * never sent again blindly (a second reverse of an accrual reversed already would reverse twice).
 */
export function startProbe(record: LedgerRecord, now: Date, act?: OperatorAct): Transition {
  if (!mutant('probe-claimed')) {
    if (record.inFlight) throw new ConflictError(`a ${record.inFlight.operation} call is in flight for this record; try again when it has finished`);
    if (record.accrual.state !== 'in_doubt') throw new ConflictError(`the accrual is ${record.accrual.state}, not in doubt: nothing to ask`);
    if (record.reversal.state !== 'none') throw new ConflictError(`a reversal is ${record.reversal.state === 'pending' ? 'asked for' : record.reversal.state} (a refund or a probe): its answer settles the accrual`);
    if (!record.accrual.askable || !record.accrual.ambiguousWith?.length) {
      throw new ConflictError('the history has not shown this accrual ambiguous with every call of its group answered and past the grace period, first of them to ask about: the bridge settles it from the history, or asks when it can');
    }
  }
  const rivals = record.accrual.ambiguousWith ?? [];
  return changed(
    record,
    (r) => {
      r.reversal = { ...r.reversal, state: 'pending', probe: { at: now.toISOString() }, requestedAt: now.toISOString(), errors: [] };
      r.accrual.askable = undefined;
      r.nextAttemptAt = undefined;
      const who = act ? `${act.actor} asked` : 'merchant policy ambiguity=probe';
      return `ambiguous with ${rivals.join(', ')}: the loyalty service is asked (${who}) by reversing ${r.transactionId}: refused as unknown, it never accrued and is sent again; reversed, it had, and is accrued again under a linked transactionId`;
    },
    act,
  );
}

/**
 * A refund that arrives while a probe's reverse asks about the accrual is refused for now (409, as a
 * partial refund still being carried out is): the probe's reversal is not the refund's, and taken as
 * it, the refund would be forgotten when the probe finds the accrual never happened (and sends it) or
 * accrues the purchase again. Delivered again once the probe is answered, it applies as any refund.
 */
function refuseWhileProbing(record: LedgerRecord): void {
  if (isProbing(record)) throw new ConflictError(`the bridge is asking the loyalty service whether ${record.transactionId}'s accrual happened (a probe: its reverse is ${record.reversal.state}); deliver the refund again once that is answered`);
}

/** A probe's reverse answered (`recordOutcome`). */
function probeAnswered(record: LedgerRecord, call: CallAnswer, now: Date, options: TransitionOptions): Transition {
  const { outcome } = call;
  return changed(record, (r) => {
    r.inFlight = undefined;
    Object.assign(r, withAttempts(r, call.attempts));
    switch (outcome.kind) {
      case 'succeeded':
        r.reversal.results = outcome.results;
        r.accrual.operationIds = operationIdsOf(outcome.results);
        r.reversal.state = 'reversed';
        return `probe: the loyalty service reversed ${r.transactionId}, so its accrual had happened (operation ${r.accrual.operationIds.join(', ') || 'not named'})${settleProbe(r, now)}`;
      case 'results_failed': {
        r.reversal.errors = outcome.errors;
        r.accrual.operationIds = operationIdsOf(outcome.results);
        if (outcome.results.some((x) => x.isSuccess)) {
          // Reversed on some cards only: the accrual had happened; the rest is a person's, as any failed reversal.
          Object.assign(r.accrual, { state: 'accrued', settledBy: 'upstream', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
          Object.assign(r.reversal, { state: 'failed', results: outcome.results, probe: undefined });
          settledRounds(r);
          return `probe: the loyalty service reversed ${r.transactionId} on some cards only (${outcome.errors.join('; ')}): its accrual had happened; the cards not reversed keep their points, the others need a person`;
        }
        // Nothing reversed, but the service knew the transaction: the accrual stands as it was made.
        Object.assign(r.accrual, { state: 'accrued', settledBy: 'upstream', results: outcome.results.map((x) => ({ ...x, reversedAt: null })), inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        r.reversal = { ...r.reversal, state: 'none', probe: undefined, requestedAt: undefined, results: [] };
        settledRounds(r);
        return `probe: the loyalty service knows ${r.transactionId} and reversed nothing (${outcome.errors.join('; ')}): its accrual had happened and stands`;
      }
      case 'refused': {
        const unknown = outcome.errors.some((e) => /not\s*found|unknown|does not exist/i.test(e));
        r.reversal = { ...r.reversal, state: 'none', probe: undefined, requestedAt: undefined, errors: [] };
        if (unknown) {
          Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
          settledRounds(r);
          return `probe: the loyalty service does not know ${r.transactionId} (${outcome.errors.join('; ')}): its accrual never happened, and it is sent again`;
        }
        // Refused for another reason: nothing learned; the accrual stays in doubt and ambiguous.
        r.nextAttemptAt = later(now, Math.max(options.inDoubtVerifyAfterMs, options.retryBaseMs));
        return `probe refused (HTTP ${outcome.status}: ${outcome.errors.join('; ')}): nothing learned; the accrual stays in doubt`;
      }
      case 'retryable':
        r.rounds += 1;
        r.nextAttemptAt = later(now, roundPauseMs(r.rounds, options));
        return `probe not carried out (${outcome.reason}): asked again after a pause`;
      case 'unknown':
        putInDoubt(r, 'reverse', call.startedAt, now, options);
        return `probe's answer lost (${outcome.reason}): whether ${r.transactionId} was reversed is verified from the history or by a person, never asked again blindly`;
      default:
        return unreachable(outcome);
    }
  });
}

/**
 * Once a probe's reversal is known to have happened (its answer, the history, or a person): the
 * accrual had happened, and the purchase is accrued again under a linked transactionId, as what a
 * partial refund leaves is (`reversal.partial`, created by the remainder step). The words for the
 * history line's end.
 */
function settleProbe(r: LedgerRecord, now: Date): string {
  if (!r.reversal.probe || r.reversal.state !== 'reversed' || r.accrual.state !== 'in_doubt') return '';
  Object.assign(r.accrual, { state: 'accrued', settledBy: 'upstream', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
  // Proven by the history or a person rather than the answer, its operation is not named: it stays a
  // rival of the others' matches, as an accrual a person settled so (`personSettledAt`).
  if (r.accrual.operationIds.length === 0) r.accrual.personSettledAt = now.toISOString();
  settledRounds(r);
  if (!r.accrual.check) return '';
  if (mutant('reaccrue-same-id')) {
    Object.assign(r.accrual, { state: 'pending' });
    r.reversal = { ...r.reversal, state: 'none', probe: undefined };
    return '; the purchase is accrued again under its own transactionId';
  }
  const remainderTransactionId = `${rootOf(r.transactionId)}~r${remainderDepthOf(r.transactionId) + 1}`;
  r.reversal.partial = { refundId: `probe:${r.reversal.probe.at}`, refundedCents: 0, remainderTransactionId, remainderCheck: r.accrual.check };
  return `; the purchase is accrued again as ${remainderTransactionId}`;
}

/**
 * A call marked in flight by a bridge that can no longer finish it: it may have reached the loyalty
 * service. `by`: the bridge taking it over; when that is the marker's own, its call ended but its
 * outcome was not recorded (the write failed, or a database failover took back its commit).
 */
export function takeOver(record: LedgerRecord, now: Date, options: TransitionOptions, by?: string): Transition {
  const { operation, startedAt, owner } = record.inFlight!;
  return changed(record, (r) => {
    r.inFlight = undefined;
    putInDoubt(r, operation, startedAt, now, options);
    if (owner === by) return `found mid-${operation} marked by this bridge (${owner.slice(0, 8)}) with no call of its out: the outcome was not recorded (a failed write, or a database failover took it back); it may have reached the loyalty service`;
    return `found mid-${operation} left by bridge ${owner.slice(0, 8)} (restarted or gone): it may have reached the loyalty service`;
  });
}

export function reversalNotNeeded(record: LedgerRecord): Transition {
  return changed(record, (r) => {
    r.reversal.state = 'not_needed';
    return 'the accrual was refused: the refund has nothing to reverse';
  });
}

/** One call's answer, as the client classified it; `owner` and `startedAt` name the attempt. */
export interface CallAnswer {
  operation: UpstreamOperation;
  outcome: CallOutcome;
  attempts: Attempt[];
  startedAt: string;
  owner: string;
}

/**
 * Whether the record still shows this attempt: our in-flight marker, or the in-doubt state another
 * instance took it over into (the outcome settles that doubt).
 */
export function showsAttempt(record: LedgerRecord, call: Pick<CallAnswer, 'operation' | 'startedAt' | 'owner'>): boolean {
  const side = call.operation === 'accrue' ? record.accrual : record.reversal;
  return record.inFlight ? record.inFlight.owner === call.owner && record.inFlight.startedAt === call.startedAt : side.state === 'in_doubt' && side.inDoubtSince === call.startedAt;
}

/**
 * A call's outcome. It depends only on the outcome, so a write that lost a race can be applied
 * again to the record read again. When the record no longer shows this attempt (another instance
 * took it over and settled it), only the attempts and a note are added.
 */
export function recordOutcome(record: LedgerRecord, call: CallAnswer, now: Date, options: TransitionOptions): Transition {
  if (call.operation === 'reverse' && isProbing(record) && showsAttempt(record, call)) return probeAnswered(record, call, now, options);
  const { operation, outcome } = call;
  if (!showsAttempt(record, call)) {
    return changed(record, (r) => {
      Object.assign(r, withAttempts(r, call.attempts));
      return `${operation} answered (${outcome.kind}) after another bridge instance had taken the record over; left as that instance recorded it`;
    });
  }
  return changed(record, (r) => {
    r.inFlight = undefined;
    Object.assign(r, withAttempts(r, call.attempts));
    const side = operation === 'accrue' ? r.accrual : r.reversal;
    switch (outcome.kind) {
      case 'succeeded':
        side.results = outcome.results;
        side.errors = [];
        if (operation === 'accrue') Object.assign(r.accrual, { state: 'accrued', settledBy: 'upstream', operationIds: operationIdsOf(outcome.results), inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        else Object.assign(r.reversal, { state: 'reversed', inDoubtSince: undefined });
        settledRounds(r);
        return `${operation} succeeded for ${outcome.results.length} card(s)`;
      case 'results_failed': {
        side.results = outcome.results;
        side.errors = outcome.errors;
        const anySuccess = outcome.results.some((x) => x.isSuccess);
        if (operation === 'accrue') {
          Object.assign(r.accrual, { state: anySuccess ? 'partially_accrued' : 'failed', settledBy: 'upstream', operationIds: operationIdsOf(outcome.results), inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        } else Object.assign(r.reversal, { state: 'failed', inDoubtSince: undefined });
        settledRounds(r);
        return `${operation} answered with failed results: ${outcome.errors.join('; ')}`;
      }
      case 'refused':
        side.errors = outcome.errors;
        if (operation === 'accrue') Object.assign(r.accrual, { state: 'failed', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        else Object.assign(r.reversal, { state: 'failed', inDoubtSince: undefined, unknownUpstream: outcome.errors.some((e) => /not\s*found|unknown|does not exist/i.test(e)) });
        settledRounds(r);
        return `${operation} refused (HTTP ${outcome.status}): ${outcome.errors.join('; ')}`;
      case 'retryable':
        // Provably not carried out: pending again (it may have been taken over into in_doubt meanwhile).
        Object.assign(side, { state: 'pending', inDoubtSince: undefined });
        if (operation === 'accrue') Object.assign(r.accrual, { ambiguousWith: undefined, askable: undefined });
        r.rounds += 1;
        r.nextAttemptAt = later(now, roundPauseMs(r.rounds, options));
        return `${operation} not carried out (${outcome.reason}); next round at ${r.nextAttemptAt}`;
      case 'unknown':
        putInDoubt(r, operation, call.startedAt, now, options);
        return `${operation} outcome unknown (${outcome.reason}); it will not be resent until verified`;
      default:
        return unreachable(outcome);
    }
  });
}

/** What the operations history says of an accrual in doubt (see HistoryVerifier). */
export type Verdict =
  /**
   * `counted`: the operation could be another's too, but as many unclaimed matching operations as
   * accruals in doubt that could have made them are in the history, so all of them happened
   * (`HistoryVerifier`, the count rule); this one takes the operation the count gave it.
   */
  | { kind: 'happened'; operationId: number; cardId: string; counted?: { inDoubt: string[]; operations: number } }
  | { kind: 'did_not_happen'; examinedCards: number }
  /** An operation this accrual could have made, but so could these other unsettled records: nobody claims it yet. */
  /**
   * `askable`: the group is settled enough to ask the service (every call answered or lost, past the
   * grace period), and this record is the one to ask about first (`startProbe`, where the merchant's
   * policy is `probe`).
   */
  | { kind: 'ambiguous'; operationId: number; cardId: string; with: string[]; askable?: true }
  | { kind: 'too_early'; reason: string }
  | { kind: 'cannot_verify'; reason: string };

/** A verdict in words, for the history and the reconcile report. */
export function describeVerdict(verdict: Verdict): string {
  switch (verdict.kind) {
    case 'happened':
      if (verdict.counted) return `operations history shows ${verdict.counted.operations} unclaimed matching operation(s) for the ${verdict.counted.inDoubt.length} accruals in doubt that could have made them (${verdict.counted.inDoubt.join(', ')}): all happened; operation ${verdict.operationId} on card ${verdict.cardId} is this one's: accrued`;
      return `operations history shows operation ${verdict.operationId} on card ${verdict.cardId}: accrued`;
    case 'did_not_happen':
      return `operations history of ${verdict.examinedCards} card(s) shows no matching operation after the grace period: safe to accrue again`;
    case 'ambiguous':
      return `ambiguous with ${verdict.with.join(', ')}: operation ${verdict.operationId} on card ${verdict.cardId} could be any of theirs; none claims it, none is resent, until the others settle or an operator resolves`;
    case 'too_early':
    case 'cannot_verify':
      return verdict.reason;
    default:
      return unreachable(verdict);
  }
}

/** Applies to an accrual still in doubt (the caller checks); other states are left as they are. */
export function applyVerdict(record: LedgerRecord, verdict: Verdict, now: Date, options: TransitionOptions): Transition {
  return changed(record, (r) => {
    const recheck = () => (r.nextAttemptAt = later(now, Math.max(options.inDoubtVerifyAfterMs, options.retryBaseMs)));
    switch (verdict.kind) {
      case 'happened':
        Object.assign(r.accrual, { state: 'accrued', settledBy: 'history', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        r.accrual.operationIds = [...r.accrual.operationIds, verdict.operationId];
        if (verdict.counted) r.accrual.countedWith = verdict.counted.inDoubt.filter((id) => id !== r.transactionId);
        settledRounds(r);
        return describeVerdict(verdict);
      case 'did_not_happen':
        Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
        settledRounds(r);
        return describeVerdict(verdict);
      case 'ambiguous': {
        const known = r.accrual.ambiguousWith?.join() === verdict.with.join();
        r.accrual.ambiguousWith = verdict.with;
        r.accrual.askable = verdict.askable;
        recheck();
        // Said once per set of rivals: the check is repeated until they settle or an operator resolves.
        return known ? undefined : describeVerdict(verdict);
      }
      case 'too_early':
      case 'cannot_verify':
        recheck();
        return describeVerdict(verdict);
      default:
        return unreachable(verdict);
    }
  });
}

/** What the history showed of a reversal in doubt (history-verifier.ts `verifyReversal`). */
export type ReversalVerdict =
  /**
   * `counted`: the entry could be another reversal's too, but the card shows as many unclaimed
   * entries of the shape and sum as the reversals in doubt that could have made them, so all
   * happened (history-verifier.ts `#countReversals`).
   */
  | { kind: 'reversed'; operationIds: number[]; cards: string[]; shape: Pick<ReversalShape, 'eventId' | 'sign'>; counted?: { inDoubt: string[]; operations: number } }
  /** Nothing the bridge may act on: a person decides, shown the evidence. `reading`: what it looks like. */
  | { kind: 'unproven'; reading: 'not_reversed' | 'ambiguous' | 'unknown'; why: string }
  | { kind: 'too_early'; reason: string }
  | { kind: 'cannot_verify'; reason: string };

export function describeReversalVerdict(verdict: ReversalVerdict): string {
  switch (verdict.kind) {
    case 'reversed': {
      const shown = `operation ${verdict.operationIds.join(', ')} on card ${verdict.cards.join(', ')} (${verdict.shape.sign < 0 ? 'negative' : 'positive'} purchase sum, event ${verdict.shape.eventId}, as this service records a reversal)`;
      if (verdict.counted) return `operations history shows ${verdict.counted.operations} unclaimed reversal entr${verdict.counted.operations === 1 ? 'y' : 'ies'} for the ${verdict.counted.inDoubt.length} reversals in doubt that could have made them (${verdict.counted.inDoubt.join(', ')}): all happened; ${shown} is this one's: reversed`;
      return `operations history shows ${shown}: reversed`;
    }
    case 'unproven':
      return `the operations history does not prove the reversal: ${verdict.why}`;
    case 'too_early':
    case 'cannot_verify':
      return verdict.reason;
    default:
      return unreachable(verdict);
  }
}

/** Applies to a reversal still in doubt (the caller checks). Reversed: its entries are claimed, as an accrual's are; a partial refund's remainder follows. */
export function applyReversalVerdict(record: LedgerRecord, verdict: ReversalVerdict, now: Date, options: TransitionOptions): Transition {
  return changed(record, (r) => {
    switch (verdict.kind) {
      case 'reversed':
        Object.assign(r.reversal, { state: 'reversed', inDoubtSince: undefined, unproven: undefined, operationIds: [...(r.reversal.operationIds ?? []), ...verdict.operationIds] });
        if (verdict.counted) r.reversal.countedWith = verdict.counted.inDoubt.filter((id) => id !== r.transactionId);
        settledRounds(r);
        return `${describeReversalVerdict(verdict)}${settleProbe(r, now)}`;
      case 'unproven':
        r.reversal.unproven = { at: now.toISOString(), why: verdict.why };
        r.nextAttemptAt = undefined;
        return describeReversalVerdict(verdict);
      case 'too_early':
      case 'cannot_verify':
        r.nextAttemptAt = later(now, Math.max(options.inDoubtVerifyAfterMs, options.retryBaseMs));
        return describeReversalVerdict(verdict);
      default:
        return unreachable(verdict);
    }
  });
}

/** A confirmed reversal's history entries, found once (history-verifier.ts `learnReversal`): claimed, and the shape they showed kept. */
export function noteReversalEntries(record: LedgerRecord, operationIds: number[], shape: ReversalShape): Transition {
  return changed(record, (r) => {
    r.reversal.operationIds = operationIds;
    r.reversal.shape = shape;
    return `the operations history shows this reversal as operation ${operationIds.join(', ')} (event ${shape.eventId}, ${shape.sign < 0 ? 'negative' : 'positive'} purchase sum): claimed`;
  });
}

/** Links the remainder a partial refund created (the parent then leaves the open set). */
export function linkRemainder(record: LedgerRecord, remainderTransactionId: string): Transition {
  return changed(record, (r) => {
    r.remainderTransactionId = remainderTransactionId;
    return `what remains is accrued as ${remainderTransactionId}`;
  });
}

// ------------------------------------------------------------------ refunds (intake)

/**
 * The one rule of a refund delivered again: a refund id the record remembers was applied already,
 * so nothing changes and nothing is sent (docs/how-it-works.md, "Refunds act once"; the
 * double-reverse mutant of docs/correctness.md, "Mutants", plants its breach here). Intake asks it of every record of an order's chain before choosing one;
 * `requestReversal` asks it again of the record it changes.
 */
export function refundAlreadySeen(record: LedgerRecord, refundId: string | undefined): boolean {
  return refundId !== undefined && record.reversal.refundIds.includes(refundId) && !mutant('double-reverse');
}

/** A full refund of a recorded order. Answers undefined when it is a repeat (nothing to change). */
export function requestReversal(record: LedgerRecord, refundId: string | undefined, now: Date): Transition | undefined {
  if (refundAlreadySeen(record, refundId)) return undefined;
  refuseWhileProbing(record);
  const remember = (r: LedgerRecord) => {
    if (refundId) r.reversal.refundIds = [...r.reversal.refundIds, refundId].slice(-MAX_REFUND_IDS_REMEMBERED);
  };
  const named = refundId ? ` ${refundId}` : '';
  if (record.reversal.partial) {
    // A full refund while a partial one is carried out: the reversal goes ahead, and nothing remains to accrue.
    return changed(record, (r) => {
      remember(r);
      r.reversal.partial = undefined;
      return `full refund${named} supersedes the partial refund in progress: nothing remains to accrue`;
    });
  }
  const check = record.accrual.check;
  if (record.reversal.state === 'not_needed' && record.reversal.partialRefundedCents !== undefined && check && record.reversal.partialRefundedCents < check.amount) {
    // The rest of an order whose accrual was refused, refunded after a part of it: the customer kept
    // nothing, so nothing is owed (the attention queue stops asking for points by hand).
    return changed(record, (r) => {
      remember(r);
      r.reversal.partialRefundedCents = check.amount;
      return `refund${named} of the rest of an order whose accrual the loyalty service refused: nothing was accrued, nothing is owed`;
    });
  }
  if (record.reversal.state !== 'none' && !(mutant('double-reverse') && record.reversal.state === 'reversed')) return undefined;
  return changed(record, (r) => {
    remember(r);
    r.reversal.requestedAt = now.toISOString();
    switch (r.accrual.state) {
      case 'skipped':
        return 'refund of a checkout that was skipped: nothing to reverse';
      case 'failed':
        r.reversal.state = 'not_needed';
        return 'refund of an accrual the loyalty service refused: nothing to reverse';
      case 'accrued':
      case 'partially_accrued':
        r.reversal.state = 'pending';
        settledRounds(r);
        return `refund${named} recorded`;
      case 'pending':
      case 'in_doubt':
      case 'none':
        r.reversal.state = 'pending';
        return `refund${named} recorded: waits until the accrual is settled`;
      default:
        return unreachable(r.accrual.state);
    }
  });
}

/**
 * A partial refund (`intent` names cents and/or lines) of the record that holds what remains of the
 * order. `reaccrue`: the whole accrual is reversed and what remains accrued again under
 * `<order id>~r<n+1>` (reverse is all-or-nothing upstream). `full_only`: only counted until refunds
 * cover the order. Throws RefundExceedsRemainderError or ConflictError when it cannot apply.
 */
export function requestPartialReversal(record: LedgerRecord, refundId: string, intent: Pick<RefundIntent, 'amountCents' | 'items'>, now: Date, options: TransitionOptions): Transition {
  refuseWhileProbing(record);
  const existing = record.reversal.partial;
  if (!existing && record.reversal.state !== 'none' && record.reversal.state !== 'not_needed') {
    throw new RefundExceedsRemainderError(`this order is already ${record.status}: nothing remains to refund`, 0);
  }
  if (existing && record.reversal.state === 'failed') {
    throw new ConflictError('the reversal for an earlier refund of this order was refused; an operator must look at it first', { transactionId: record.transactionId });
  }
  return changed(record, (r) => {
    r.reversal.refundIds = [...r.reversal.refundIds, refundId].slice(-MAX_REFUND_IDS_REMEMBERED);
    r.reversal.requestedAt = now.toISOString();
    if (existing) {
      // An earlier partial refund is still being carried out: this one is taken off the remainder it will accrue.
      const remainder = remainderAfterRefund(existing.remainderCheck, intent);
      if (!remainder.check) {
        r.reversal.partial = undefined;
        return `partial refund ${refundId} covers what the earlier refund left: nothing remains to accrue`;
      }
      r.reversal.partial = { ...existing, refundedCents: existing.refundedCents + remainder.refundedCents, remainderCheck: remainder.check };
      return `partial refund ${refundId} of ${remainder.refundedCents} cents joins the refund in progress: ${existing.remainderTransactionId} will accrue ${remainder.check.amount} cents`;
    }
    if (r.accrual.state === 'skipped') return `partial refund ${refundId} of a skipped checkout: nothing to do`;
    if (r.accrual.state === 'failed' || r.accrual.state === 'none') {
      r.reversal.state = 'not_needed';
      // Kept so the attention queue can tell what the customer kept (and may still be owed points for
      // by hand) from a refund of everything, and so a later refund cannot exceed what is left.
      if (r.accrual.check) r.reversal.partialRefundedCents = (r.reversal.partialRefundedCents ?? 0) + remainderAfterRefund(r.accrual.check, intent, r.reversal.partialRefundedCents ?? 0).refundedCents;
      return `partial refund ${refundId} of an accrual the loyalty service refused: nothing to reverse`;
    }
    const remainder = remainderAfterRefund(r.accrual.check!, intent, r.reversal.partialRefundedCents ?? 0);
    if (options.partialRefundPolicy === 'full_only') {
      r.reversal.partialRefundedCents = (r.reversal.partialRefundedCents ?? 0) + remainder.refundedCents;
      if (remainder.check) {
        return `partial refund ${refundId} of ${remainder.refundedCents} cents recorded; PARTIAL_REFUND_POLICY=full_only reverses only when refunds cover the order (${r.reversal.partialRefundedCents} of ${r.accrual.check!.amount} cents so far)`;
      }
      r.reversal.state = 'pending';
      return `partial refund ${refundId} completes refunds of the whole order: reversing in full`;
    }
    r.reversal.state = 'pending';
    settledRounds(r);
    if (!remainder.check) return `partial refund ${refundId} covers all that remains: reversing in full`;
    const remainderTransactionId = `${rootOf(r.transactionId)}~r${remainderDepthOf(r.transactionId) + 1}`;
    r.reversal.partial = { refundId, refundedCents: remainder.refundedCents, remainderTransactionId, remainderCheck: remainder.check };
    return `partial refund ${refundId} of ${remainder.refundedCents} cents: reverse this accrual, then accrue the remaining ${remainder.check.amount} cents as ${remainderTransactionId}`;
  });
}

/**
 * A recorded order delivered again with another amount (a reopened check, or a checkout after its
 * refund was recorded by the derived id). One transactionId is one accrual, so nothing is sent; the
 * record counts such deliveries and its history says so once, for the operator who decides whether
 * a difference is owed.
 */
export function noteChangedRepeat(record: LedgerRecord, amountCents: number, now: Date): Transition {
  const recorded = record.accrual.check?.amount;
  return changed(record, (r) => {
    r.changedRepeats = withChangedDelivery(r.changedRepeats, { at: now.toISOString(), amountCents });
    if (r.changedRepeats.count > 1) return undefined;
    const was = recorded === undefined ? 'recorded without a check' : `recorded with ${recorded} cents`;
    return `delivered again with a check of ${amountCents} cents (${was}): not accrued again; further deliveries with another amount are counted in changedRepeats`;
  });
}

// ------------------------------------------------------------------ operator actions

/** Deliver again what provably did not happen (a refusal, pending rounds). Throws where a retry could double. */
export function retry(record: LedgerRecord, act?: OperatorAct): Transition {
  if (record.inFlight) throw new ConflictError(`a ${record.inFlight.operation} call is in flight for this record; try again when it has finished`);
  if (record.accrual.state === 'in_doubt' || record.reversal.state === 'in_doubt') {
    throw new ConflictError('the last call may have reached the loyalty service: resolve it (or let reconcile settle it) first; a retry could double it');
  }
  return changed(record, (r) => {
    if (r.reversal.state === 'failed') {
      if (r.reversal.results.some((x) => x.isSuccess)) throw new ConflictError('the reversal succeeded on some cards: reversing again would reverse those twice');
      Object.assign(r.reversal, { state: 'pending', errors: [], unknownUpstream: undefined });
    } else if (r.accrual.state === 'failed' && r.reversal.state === 'none') {
      if (r.accrual.results.some((x) => x.isSuccess)) throw new ConflictError('the accrual succeeded on some cards: accruing again would double those');
      Object.assign(r.accrual, { state: 'pending', errors: [] });
    } else if (r.accrual.state !== 'pending' && r.reversal.state !== 'pending') {
      throw new ConflictError(`nothing to retry in status ${r.status}`);
    }
    settledRounds(r);
    return `${act?.actor ?? 'operator'} asked for a retry`;
  }, act);
}

/**
 * What a person may say happened upstream (`/resolve`), written here once: the admin route's schema,
 * the answers' schemas, the console's choices and the history verifier's readings all take it.
 */
export const RESOLVE_OUTCOMES = ['accrued', 'not_accrued', 'reversed', 'not_reversed'] as const;
export type ResolveOutcome = (typeof RESOLVE_OUTCOMES)[number];

export interface ResolveInput {
  outcome: ResolveOutcome;
  operationId?: number;
  note?: string;
}

/**
 * An operator settles a call by hand. `operationClaimedBy`: who holds `input.operationId`, when it
 * is claimed. `now`: when (an accrual settled without its operation named keeps the moment, as
 * `personSettledAt`; the record's last write when not given, for asking what is allowed).
 */
export function resolve(record: LedgerRecord, input: ResolveInput, operationClaimedBy?: string, act?: OperatorAct, now: Date = new Date(record.updatedAt)): Transition {
  if (record.inFlight) throw new ConflictError(`a ${record.inFlight.operation} call is in flight for this record; try again when it has finished`);
  if (input.operationId !== undefined && operationClaimedBy && operationClaimedBy !== record.transactionId) {
    throw new ConflictError(`operation ${input.operationId} is already claimed by ${operationClaimedBy}`);
  }
  const note = input.note ? `: ${input.note.slice(0, 200)}` : '';
  return changed(record, (r) => {
    switch (input.outcome) {
      case 'accrued':
      case 'not_accrued':
        if (r.accrual.state !== 'in_doubt') throw new ConflictError(`the accrual is ${r.accrual.state}, not in doubt`);
        // The probe's reverse is the question under way: its answer decides the accrual (a person
        // settling the accrual now could leave that reverse to take back a later accrual).
        if (isProbing(r)) throw new ConflictError(`the bridge is asking the loyalty service about this accrual by reversing it (that reverse is ${r.reversal.state}): settle the reversal (reversed or not_reversed), which settles the accrual`);
        if (input.outcome === 'accrued') {
          Object.assign(r.accrual, { state: 'accrued', settledBy: 'operator', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
          if (input.operationId !== undefined) r.accrual.operationIds = [...r.accrual.operationIds, input.operationId];
          // Its operation is in the history, claimed by nobody: a rival of any accrual in doubt it could be mistaken for, until released (`releasePersonSettled`).
          else r.accrual.personSettledAt = now.toISOString();
        } else {
          Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined, ambiguousWith: undefined, askable: undefined });
          r.rounds = 0;
        }
        break;
      case 'reversed':
      case 'not_reversed':
        if (input.outcome === 'reversed' && isOrphanReversal(r)) {
          throw new ConflictError('the loyalty service never knew this order, so nothing was reversed: close it (POST .../close with a reason) instead');
        }
        if (input.outcome === 'reversed' && r.reversal.state === 'failed') {
          // A reverse that failed on some cards cannot be retried (it would reverse the others
          // twice): the operator finishes those cards in the loyalty service and attests it here.
          // A partial refund's plan then goes ahead and accrues what remains.
          Object.assign(r.reversal, { state: 'reversed', errors: [], unknownUpstream: undefined });
        } else {
          if (r.reversal.state !== 'in_doubt') throw new ConflictError(`the reversal is ${r.reversal.state}: not_reversed needs one in doubt, reversed one in doubt or failed`);
          Object.assign(r.reversal, { state: input.outcome === 'reversed' ? 'reversed' : 'pending', inDoubtSince: undefined, unproven: undefined });
          // A probe a person says was reversed: its accrual had happened, and is accrued again.
          if (input.outcome === 'reversed') settleProbe(r, now);
        }
        r.rounds = 0;
        break;
      default:
        return unreachable(input.outcome);
    }
    r.nextAttemptAt = undefined;
    return `${act?.actor ?? 'operator'} resolved: ${input.outcome}${note}`;
  }, act);
}

/**
 * An operator closes a record that cannot succeed: an orphan `reverse_failed`. Retrying it meets the
 * same "unknown" answer, `not_reversed` would leave it open for ever, and `reversed` would be a lie;
 * closing keeps it whole and in its status, with who closed it and why, and takes it out of the
 * attention queue. Anything else has an honest way out (retry, reverse or resolve): 409 naming why.
 */
export function close(record: LedgerRecord, act: OperatorAct & { reason: string }, now: Date): Transition {
  if (record.closed) throw new ConflictError(`already closed by ${record.closed.actor} at ${record.closed.at}`);
  if (!isOrphanReversal(record)) {
    throw new ConflictError(
      record.status === 'reverse_failed'
        ? 'only a refund of an order the loyalty service never knew can be closed; this reversal was refused for another reason: retry it, or resolve it reversed once finished by hand'
        : `only an orphan reverse_failed record (a refund of an order the loyalty service never knew) can be closed; this one is ${record.status}`,
    );
  }
  return changed(record, (r) => {
    r.closed = { at: now.toISOString(), actor: act.actor, reason: act.reason.slice(0, 500) };
    return `${act.actor} closed it: the loyalty service never knew this order, so there is nothing to reverse`;
  }, act);
}

/**
 * An operator has seen what the attention queue shows of the record and settled it outside the
 * bridge: a refused accrual (failed, or partially accrued) the loyalty service will keep refusing,
 * or deliveries with another amount. It leaves the queue until the record needs a person again.
 * Doubts and reversals are not acknowledged: resolve, retry or close settles those.
 */
export function acknowledge(record: LedgerRecord, act: OperatorAct & { reason: string }, now: Date): Transition {
  const items = attentionOf(record).filter((i) => ACKNOWLEDGEABLE.has(i.kind));
  if (items.length === 0) throw new ConflictError(`nothing to acknowledge: acknowledging is for a failed or partially accrued record, or deliveries with another amount, that wait for a person; this one is ${record.status}${record.acknowledged ? `, acknowledged by ${record.acknowledged.actor} at ${record.acknowledged.at}` : ''}`);
  return changed(record, (r) => {
    r.acknowledged = { at: now.toISOString(), actor: act.actor, reason: act.reason.slice(0, 500) };
    return `${act.actor} acknowledged ${items.map((i) => i.kind.replace('_', ' ')).join(' and ')}`;
  }, act);
}

export type OperatorActionName = 'retry' | 'reverse' | 'resolve' | 'close' | 'acknowledge' | 'ask';
export interface ActionAllowed {
  allowed: boolean;
  /** Why not, when not allowed: the refusal the action itself would answer. */
  why?: string;
  /** resolve: the outcomes it accepts now. */
  outcomes?: ResolveInput['outcome'][];
}

/**
 * What an operator may do to `record` now, decided by running the very transitions the actions run
 * (on a copy; nothing is written): allowed when the transition applies, and otherwise the reason it
 * refuses. `chainLast`: the last record of the order's chain (a partial refund's remainder), which an
 * operator's reverse acts on; the record itself when it has none.
 */
export function operatorActions(record: LedgerRecord, now: Date, chainLast: LedgerRecord = record): Record<OperatorActionName, ActionAllowed> {
  const act: OperatorAct & { reason: string } = { actor: 'probe', reason: 'probe' };
  const attempt = (run: () => Transition | undefined, refusedWhy: string): ActionAllowed => {
    try {
      return run() ? { allowed: true } : { allowed: false, why: refusedWhy };
    } catch (error) {
      if (error instanceof ConflictError) return { allowed: false, why: error.message };
      throw error;
    }
  };
  const outcomes = RESOLVE_OUTCOMES.filter((outcome) => attempt(() => resolve(record, { outcome }), '').allowed);
  let reversal: Transition | undefined;
  let refused: string | undefined;
  try {
    reversal = requestReversal(chainLast, `${REVERSE_PROBE}`, now);
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    refused = error.message;
  }
  const reverse: ActionAllowed = refused
    ? { allowed: false, why: refused }
    : reversal && reversal.record.reversal.state === 'pending'
      ? { allowed: true }
      : { allowed: false, why: reversal ? `nothing to reverse: the accrual is ${chainLast.accrual.state}` : `the reversal is already ${chainLast.reversal.state === 'not_needed' ? 'not needed' : chainLast.reversal.state}${chainLast === record ? '' : ` (on ${chainLast.transactionId}, what remains of the order)`}` };
  return {
    retry: attempt(() => retry(record), 'nothing to retry'),
    reverse,
    resolve: outcomes.length ? { allowed: true, outcomes } : { allowed: false, why: attempt(() => resolve(record, { outcome: record.reversal.state === 'none' ? 'accrued' : 'reversed' }), '').why ?? 'nothing in doubt', outcomes: [] },
    close: attempt(() => close(record, act, now), 'cannot be closed'),
    acknowledge: attempt(() => acknowledge(record, act, now), 'nothing to acknowledge'),
    ask: attempt(() => startProbe(record, now, act), 'nothing to ask'),
  };
}

/** The refund id a probe of `operatorActions` asks with: never one a POS sends. */
const REVERSE_PROBE = '\u0000probe';

// ------------------------------------------------------------------ recovery

/**
 * After journal damage or a machine restart, lines written after this version may be lost, among
 * them an in-flight marker of a call that went out. Every side that could have been called is put
 * in doubt from this version's `updatedAt`, as a surviving marker would have put it. A reversal
 * that follows a refused or skipped accrual is never called (`plan`), so it stays pending. A partial
 * refund not carried out yet as this version reads may have reversed, created and accrued its
 * remainder in the lost lines: the remainder is then created in doubt. Answers undefined when
 * nothing could have been lost. `remainderExists`: the plan's remainder record is in the ledger.
 */
export function doubtAfterDamage(record: LedgerRecord, cause: string, now: Date, options: TransitionOptions, remainderExists: boolean): Transition | undefined {
  if (record.inFlight) return undefined;
  const since = record.updatedAt;
  const partial = record.reversal.partial;
  const accrual = record.accrual.state === 'pending';
  const reversal = record.reversal.state === 'pending' && record.accrual.state !== 'failed' && record.accrual.state !== 'skipped';
  const remainderAtRisk = partial !== undefined && !partial.remainderInDoubtSince && !record.remainderTransactionId && !remainderExists;
  if (!accrual && !reversal && !remainderAtRisk) return undefined;
  const sides = [accrual && 'accrue', reversal && 'reverse'].filter(Boolean).join(' or ');
  return changed(record, (r) => {
    if (accrual) putInDoubt(r, 'accrue', since, now, options);
    if (reversal) putInDoubt(r, 'reverse', since, now, options);
    if (remainderAtRisk) r.reversal.partial = { ...partial, remainderInDoubtSince: since };
    const lost = [sides && `an in-flight ${sides}`, remainderAtRisk && `the accrual of remainder ${partial.remainderTransactionId}`].filter(Boolean).join(' and ');
    return `${cause}: lines written after this version may be lost, among them ${lost} that may have reached the loyalty service`;
  });
}

// ------------------------------------------------------------------ helpers

function operationIdsOf(results: { isSuccess: boolean; operationId?: number | null }[]): number[] {
  return results.filter((r) => r.isSuccess && typeof r.operationId === 'number').map((r) => r.operationId as number);
}

/** `generic:A-1~r2` → `generic:A-1`: remainder ids hang off the order's original id. */
export function rootOf(transactionId: string): string {
  return transactionId.replace(/~r\d+$/, '');
}

function remainderDepthOf(transactionId: string): number {
  return Number(/~r(\d+)$/.exec(transactionId)?.[1] ?? 0);
}

export type { LedgerStatus };
