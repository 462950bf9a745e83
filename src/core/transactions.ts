/**
 * The bridge's core: turns checkout and refund intents into ledger records and upstream calls.
 *
 * The invariants it keeps (bridge-contract, "Rules the loyalty service imposes"):
 * - the intent is in the ledger before the loyalty service is called;
 * - one transactionId gets at most one `accrue` unless the previous one is proven not to have
 *   happened (a refusal, a 429/5xx, a refused connection, or the operations history after the
 *   grace period), and at most one `reverse`;
 * - before every call a durable `inFlight` marker is written; a record found with it after a
 *   restart was mid-call and becomes `in_doubt`, never resent blindly;
 * - every per-card result is inspected.
 *
 * A POS gets its answer within `answerBudgetMs`: delivery starts at once and the answer waits for it
 * that long; whatever is not finished by then continues in the background and the answer is 202.
 */
import { randomUUID } from 'node:crypto';
import { hasContact } from '../customer.js';
import { ConflictError, NotFoundError, VersionConflictError } from '../errors.js';
import { failpoint } from '../failpoints.js';
import { KeyedMutex } from '../keyed-mutex.js';
import type { Logger } from '../logger.js';
import { awaitsRemainder, deriveStatus, isOpen, withAttempts, withChangedDelivery, withHistoryEvent, FINAL_STATUSES, type LedgerRecord, type LedgerStatus, type PartialRefundPlan } from '../ledger/record.js';
import type { DueQuery, LedgerStore, OpenClaim } from '../ledger/store.js';
import type { UpstreamOperation } from '../loyalty/calls.js';
import type { CallReport, LoyaltyClient } from '../loyalty/client.js';
import type { AccrueRequest } from '../loyalty/contract.js';
import type { CheckoutIntent, RefundIntent } from '../pos/contract.js';
import { checkId, deriveTransactionId } from '../transaction-id.js';
import type { HistoryVerifier } from './history-verifier.js';
import { remainderAfterRefund, RefundExceedsRemainderError } from './remainder.js';
import type { Metrics } from '../metrics.js';

export interface ServiceOptions {
  answerBudgetMs: number;
  /** Unit of the pause between delivery rounds (the same unit as the 429 schedule). */
  retryBaseMs: number;
  inDoubtVerifyAfterMs: number;
  /** `full_only`: partial refunds are recorded and reverse nothing until together they cover the order. */
  partialRefundPolicy: 'reaccrue' | 'full_only';
  /** After this long, a call marked in flight by another instance of a shared ledger is taken over as in doubt. */
  inFlightLeaseMs: number;
}

export interface Answer {
  record: LedgerRecord;
  /** The order or refund was already recorded: its recorded outcome, no new upstream call. */
  repeat: boolean;
  refundId?: string;
  /** After a partial refund: the record that accrues what remains. */
  remainder?: { transactionId: string; status: LedgerStatus };
  httpStatus: number;
}

/** What one pass over one record did, for the reconcile report. */
export interface StepReport {
  transactionId: string;
  before: LedgerStatus;
  after: LedgerStatus;
  action: 'accrue' | 'reverse' | 'verify' | 'none';
  note: string;
  /** The record as the pass left it. */
  record?: LedgerRecord;
}

export interface ResolveInput {
  outcome: 'accrued' | 'not_accrued' | 'reversed' | 'not_reversed';
  operationId?: number;
  note?: string;
}

/** Pause before the worker's next round after a round ended without an answer: 30 units, growing to 1 hour. */
const ROUND_PAUSES = [30, 60, 120, 300, 600, 1800, 3600];
const MAX_REFUND_IDS_REMEMBERED = 100;
/** The refund reached a record whose remainder now holds what is left of the order: walk the chain again. */
const MOVED = Symbol('moved to the remainder');

type Action = { kind: 'accrue' | 'reverse' } | { kind: 'verify' } | { kind: 'remainder' } | { kind: 'none'; note: string };
/** A record this instance has already marked in flight for `action`: the pass makes the call at once. */
type Claimed = { record: LedgerRecord; action: { kind: 'accrue' | 'reverse' } };

export class TransactionService {
  readonly #locks = new KeyedMutex();
  /** Upstream calls out from this process right now, by transactionId. */
  readonly #calling = new CallsOut();
  /** Deliveries running in this process, so the worker never starts a second one for a record. */
  readonly #running = new Map<string, Promise<StepReport>>();
  readonly instanceId = randomUUID();

  constructor(
    private readonly store: LedgerStore,
    private readonly client: LoyaltyClient,
    private readonly verifier: HistoryVerifier,
    private readonly options: ServiceOptions,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  // ---------------------------------------------------------------- POS-facing

  async checkout(pos: string, intent: CheckoutIntent): Promise<Answer> {
    const transactionId = deriveTransactionId(pos, intent.orderId, intent.scope);
    const now = this.#now();
    const skipped = !hasContact(intent.customer);
    const draft = this.#newRecord(transactionId, pos, intent.orderId, now);
    draft.accrual.check = intent.check;
    draft.accrual.customer = intent.customer;
    draft.accrual.state = skipped ? 'skipped' : 'pending';
    draft.status = deriveStatus(draft);
    draft.history.push({ at: now, event: skipped ? 'recorded without phone, email or card serial: nothing to accrue' : 'checkout recorded', to: draft.status });
    // A new order is recorded already marked in flight, so one ledger write serves as both the
    // intent and the marker that must precede the call (a crash right after it leaves the record
    // in doubt, verified before anything is sent, exactly as a crash after a separate marker would).
    // Only when no call for this id is out from here: then the insert can only find the order.
    failpoint('checkout:before-ledger-write');
    const claiming = !skipped && !this.#calling.has(transactionId);
    if (claiming) {
      draft.inFlight = { operation: 'accrue', startedAt: now, owner: this.instanceId };
      this.#calling.enter(transactionId);
    }
    const { record, created } = await this.store.insert(draft).catch((error: unknown) => {
      if (claiming) this.#calling.leave(transactionId);
      throw error;
    });
    if (claiming && !created) this.#calling.leave(transactionId);
    if (created) failpoint('checkout:after-ledger-write');
    if (created) this.logger.info({ transactionId, pos, status: record.status }, 'checkout recorded');
    const claimed = claiming && created ? { record, action: { kind: 'accrue' } as const } : undefined;
    const changed = !created && record.accrual.check?.amount !== intent.check.amount;
    if (changed) await this.#noteChangedRepeat(transactionId, intent.check.amount, record.accrual.check?.amount);
    const answer = !created ? await this.#answer(record, true) : await this.#answer(skipped ? record : await this.#deliverWithinBudget(transactionId, claimed), false);
    this.metrics.checkouts.inc({ pos, result: answer.repeat ? (changed ? 'repeat_changed' : 'repeat') : answer.record.status });
    return answer;
  }

  /**
   * An order already recorded came again with another amount (a POS reopened and changed the check,
   * or a checkout arrived after its refund was recorded by the derived id). One transactionId is
   * one accrual, so nothing is sent; the record counts such deliveries (`changedRepeats`, bounded)
   * and its history says so once, for the operator who decides whether a difference is owed (a
   * refund and a new order, or by hand).
   */
  async #noteChangedRepeat(transactionId: string, amount: number, recorded: number | undefined): Promise<void> {
    const was = recorded === undefined ? 'recorded without a check' : `recorded with ${recorded} cents`;
    this.logger.warn({ transactionId, amountCents: amount, recordedCents: recorded }, 'an order already recorded was delivered again with a different amount; nothing sent');
    try {
      await this.#locks.run(transactionId, async () => {
        const record = await this.#require(transactionId);
        await this.#write(record, (r) => {
          r.changedRepeats = withChangedDelivery(r.changedRepeats, { at: this.#now(), amountCents: amount });
          if (r.changedRepeats.count > 1) return undefined;
          return `delivered again with a check of ${amount} cents (${was}): not accrued again; further deliveries with another amount are counted in changedRepeats`;
        });
      });
    } catch (error) {
      // Another instance wrote the record meanwhile: the note is informational, the answer stands.
      if (!(error instanceof VersionConflictError)) throw error;
    }
  }

  async refund(pos: string, intent: RefundIntent): Promise<Answer> {
    const rootId = deriveTransactionId(pos, intent.orderId, intent.scope);
    const { refundId } = intent;
    if (refundId !== undefined) checkId('refundId', refundId);
    const partial = intent.amountCents !== undefined || intent.items !== undefined;
    // Earlier partial refunds moved what remains of the order to remainder records: act on the
    // last. If a remainder appears while this refund is applied, walk the chain again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const chain = await this.#chainOf(rootId);
      const seen = refundId ? chain.find((r) => r.reversal.refundIds.includes(refundId)) : undefined;
      if (seen) return this.#answer(seen, true, refundId);
      const current = chain.at(-1);
      if (partial && !current) throw new NotFoundError(`no order ${intent.orderId} in the ledger: a partial refund needs the original to know what remains`, 'unknown_order');
      let answer: Answer | typeof MOVED;
      try {
        answer = partial
          ? await this.#requestPartialReversal(current!.transactionId, refundId!, intent)
          : await this.#requestReversal(current?.transactionId ?? rootId, pos, intent.orderId, refundId);
      } catch (error) {
        // Another instance wrote the record between our read and write: read again and re-decide.
        if (error instanceof VersionConflictError) continue;
        throw error;
      }
      if (answer !== MOVED) return answer;
    }
    throw new ConflictError('the order kept changing while this refund was applied; deliver it again', { orderId: intent.orderId });
  }

  async #requestPartialReversal(transactionId: string, refundId: string, intent: RefundIntent): Promise<Answer | typeof MOVED> {
    const now = this.#now();
    const outcome = await this.#locks.run(transactionId, async () => {
      const record = await this.#require(transactionId);
      if (await this.#linkedRemainder(record)) return MOVED;
      const plan = record.reversal.partial;
      if (!plan && record.reversal.state !== 'none' && record.reversal.state !== 'not_needed') {
        throw new RefundExceedsRemainderError(`this order is already ${record.status}: nothing remains to refund`, 0);
      }
      if (plan && record.reversal.state === 'failed') {
        throw new ConflictError('the reversal for an earlier refund of this order was refused; an operator must look at it first', { transactionId });
      }
      const next = await this.#write(record, (r) => {
        r.reversal.refundIds = [...r.reversal.refundIds, refundId].slice(-MAX_REFUND_IDS_REMEMBERED);
        r.reversal.requestedAt = now;
        if (plan) {
          // An earlier partial refund is still being carried out: this one is taken off the remainder it will accrue.
          const remainder = remainderAfterRefund(plan.remainderCheck, intent);
          if (!remainder.check) {
            r.reversal.partial = undefined;
            return `partial refund ${refundId} covers what the earlier refund left: nothing remains to accrue`;
          }
          r.reversal.partial = { ...plan, refundedCents: plan.refundedCents + remainder.refundedCents, remainderCheck: remainder.check };
          return `partial refund ${refundId} of ${remainder.refundedCents} cents joins the refund in progress: ${plan.remainderTransactionId} will accrue ${remainder.check.amount} cents`;
        }
        if (r.accrual.state === 'skipped') return `partial refund ${refundId} of a skipped checkout: nothing to do`;
        if (r.accrual.state === 'failed' || r.accrual.state === 'none') {
          r.reversal.state = 'not_needed';
          return `partial refund ${refundId} of an accrual the loyalty service refused: nothing to reverse`;
        }
        const remainder = remainderAfterRefund(r.accrual.check!, intent, r.reversal.partialRefundedCents ?? 0);
        if (this.options.partialRefundPolicy === 'full_only') {
          r.reversal.partialRefundedCents = (r.reversal.partialRefundedCents ?? 0) + remainder.refundedCents;
          if (remainder.check) return `partial refund ${refundId} of ${remainder.refundedCents} cents recorded; PARTIAL_REFUND_POLICY=full_only reverses only when refunds cover the order (${r.reversal.partialRefundedCents} of ${r.accrual.check!.amount} cents so far)`;
          r.reversal.state = 'pending';
          return `partial refund ${refundId} completes refunds of the whole order: reversing in full`;
        }
        r.reversal.state = 'pending';
        r.rounds = 0;
        r.nextAttemptAt = undefined;
        if (!remainder.check) return `partial refund ${refundId} covers all that remains: reversing in full`;
        const remainderTransactionId = `${rootOf(r.transactionId)}~r${depthOf(r.transactionId) + 1}`;
        r.reversal.partial = { refundId, refundedCents: remainder.refundedCents, remainderTransactionId, remainderCheck: remainder.check };
        return `partial refund ${refundId} of ${remainder.refundedCents} cents: reverse this accrual, then accrue the remaining ${remainder.check.amount} cents as ${remainderTransactionId}`;
      });
      return { record: next, deliver: isOpen(next) };
    });
    if (outcome === MOVED) return MOVED;
    failpoint('refund:after-ledger-write');
    const record = outcome.deliver ? await this.#deliverWithinBudget(transactionId) : outcome.record;
    this.metrics.refunds.inc({ pos: record.pos, result: record.status });
    return this.#answer(record, false, refundId);
  }

  /** The order's original record followed by the remainders of its partial refunds, in order. */
  async #chainOf(rootId: string): Promise<LedgerRecord[]> {
    const chain: LedgerRecord[] = [];
    for (let id: string | undefined = rootId; id && chain.length < 1000; ) {
      const record = await this.store.get(id);
      if (!record) break;
      chain.push(record);
      id = record.remainderTransactionId;
    }
    return chain;
  }

  /**
   * True when what remains of this record's order lives in a remainder record now: already linked,
   * or created but not linked yet (a crash between the two steps), in which case it is linked here.
   * Called under the record's lock, so the partial-refund plan cannot change after the remainder exists.
   */
  async #linkedRemainder(record: LedgerRecord): Promise<boolean> {
    if (record.remainderTransactionId) return true;
    const plan = record.reversal.partial;
    if (!plan || !(await this.store.get(plan.remainderTransactionId))) return false;
    await this.#write(record, (r) => {
      r.remainderTransactionId = plan.remainderTransactionId;
      return `what remains is accrued as ${plan.remainderTransactionId}`;
    });
    return true;
  }

  async #requestReversal(transactionId: string, pos: string, orderId: string, refundId: string | undefined): Promise<Answer | typeof MOVED> {
    const now = this.#now();
    const outcome = await this.#locks.run(transactionId, async () => {
      const existing = await this.store.get(transactionId);
      if (!existing) {
        // Never seen here (accrued before the ledger existed, or lost): reverse by the derived id.
        const draft = this.#newRecord(transactionId, pos, orderId, now);
        draft.accrual.state = 'none';
        draft.reversal = { ...draft.reversal, state: 'pending', requestedAt: now, refundIds: refundId ? [refundId] : [] };
        draft.status = deriveStatus(draft);
        draft.history.push({ at: now, event: `refund${refundId ? ` ${refundId}` : ''} for an order this ledger never saw: reversing by its derived id`, to: draft.status });
        const { record, created } = await this.store.insert(draft);
        return { record, repeat: !created, deliver: created };
      }
      if (await this.#linkedRemainder(existing)) return MOVED;
      if (refundId && existing.reversal.refundIds.includes(refundId)) return { record: existing, repeat: true, deliver: false };
      if (existing.reversal.partial) {
        // A full refund while a partial one is carried out: the reversal goes ahead, and nothing remains to accrue.
        const next = await this.#write(existing, (r) => {
          if (refundId) r.reversal.refundIds = [...r.reversal.refundIds, refundId].slice(-MAX_REFUND_IDS_REMEMBERED);
          r.reversal.partial = undefined;
          return `full refund${refundId ? ` ${refundId}` : ''} supersedes the partial refund in progress: nothing remains to accrue`;
        });
        return { record: next, repeat: false, deliver: isOpen(next) };
      }
      if (existing.reversal.state !== 'none') return { record: existing, repeat: true, deliver: false };
      const next = await this.#write(existing, (r) => {
        if (refundId) r.reversal.refundIds = [...r.reversal.refundIds, refundId].slice(-MAX_REFUND_IDS_REMEMBERED);
        r.reversal.requestedAt = now;
        switch (r.accrual.state) {
          case 'skipped':
            return 'refund of a checkout that was skipped: nothing to reverse';
          case 'failed':
            r.reversal.state = 'not_needed';
            return 'refund of an accrual the loyalty service refused: nothing to reverse';
          case 'accrued':
          case 'partially_accrued':
            r.reversal.state = 'pending';
            r.rounds = 0;
            r.nextAttemptAt = undefined;
            return `refund${refundId ? ` ${refundId}` : ''} recorded`;
          case 'pending':
          case 'in_doubt':
          case 'none':
            r.reversal.state = 'pending';
            return `refund${refundId ? ` ${refundId}` : ''} recorded: waits until the accrual is settled`;
        }
      });
      return { record: next, repeat: false, deliver: next.reversal.state === 'pending' };
    });
    if (outcome === MOVED) return MOVED;
    if (!outcome.repeat) failpoint('refund:after-ledger-write');
    const record = outcome.deliver ? await this.#deliverWithinBudget(transactionId) : outcome.record;
    this.metrics.refunds.inc({ pos, result: outcome.repeat ? 'repeat' : record.status });
    return this.#answer(record, outcome.repeat, refundId);
  }

  // ---------------------------------------------------------------- worker and reconciler

  /**
   * Runs one pass over a record unless one is already running here: the next due step (accrue,
   * reverse, or verify an in-doubt accrual), continuing while steps settle. `force` ignores the
   * pause between rounds (an operator's reconcile runs due and not-yet-due work at once).
   */
  advance(transactionId: string, force = false, claimed?: Claimed): Promise<StepReport> {
    const running = this.#running.get(transactionId);
    if (running && !claimed) return running;
    // A pass holding a claim (the checkout that recorded the order marked in flight) must make its
    // call; a pass already running here (the worker's) will have found the marker and left it alone.
    const pass = (running ? running.catch(() => undefined).then(() => this.#advance(transactionId, force, claimed)) : this.#advance(transactionId, force, claimed))
      .catch(async (error: unknown) => {
        // Another instance wrote the record between this pass's read and write. Nothing was sent on
        // a stale basis (calls are claimed by compare-and-set); the record is where that instance left it.
        if (!(error instanceof VersionConflictError)) throw error;
        this.logger.warn({ transactionId }, 'another bridge instance changed the record during this pass');
        const status = (await this.#require(transactionId)).status;
        return { transactionId, before: status, after: status, action: 'none' as const, note: 'another bridge instance changed it during this pass' };
      })
      .finally(() => {
        if (this.#running.get(transactionId) === pass) this.#running.delete(transactionId);
      });
    this.#running.set(transactionId, pass);
    return pass;
  }

  /**
   * What the worker's scheduled pass may take: records due by this service's clock (the one that
   * set their `nextAttemptAt`); accruals in doubt only when the history verifier can run (`#claim`
   * leaves them to an operator otherwise).
   */
  dueQuery(limit: number, claim: OpenClaim): DueQuery {
    return { nowMs: this.clock().getTime(), limit, canVerify: this.verifier.enabled, claim };
  }

  isRunning(transactionId: string): boolean {
    return this.#running.has(transactionId);
  }

  /** Waits for every delivery running in this process (graceful shutdown). */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running.values()]);
  }

  /**
   * After a restart, records still marked in flight were mid-call when the process stopped: the
   * call may have gone out, so they become in doubt (verified before anything is resent).
   */
  async recoverInterrupted(): Promise<number> {
    let recovered = 0;
    for (const record of await this.store.listOpen(Number.MAX_SAFE_INTEGER)) {
      if (!this.#abandoned(record)) continue;
      await this.#locks.run(record.transactionId, async () => {
        const current = await this.store.get(record.transactionId);
        if (current && this.#abandoned(current) && (await this.#takeOver(current))) recovered++;
      });
    }
    return recovered;
  }

  /**
   * After the ledger skipped damaged journal lines at start-up (an OS crash or power loss: the file
   * ledger syncs only before upstream calls), any record may have lost its latest lines, the in-flight marker of a
   * call that went out among them. Resending what such a record shows as `pending` could double it,
   * so every side that could have been called is put in doubt, as a surviving marker would have
   * put it: an accrual is verified in the operations history before anything is resent, a reversal
   * waits for an operator. Run after `recoverInterrupted`. Answers how many records it changed.
   * `cause` says why lines may be lost: damage found, or a machine that restarted (an OS crash can
   * cut the journal's tail cleanly, leaving nothing damaged to find).
   */
  async recoverAfterJournalDamage(cause = 'journal damage found at start-up'): Promise<number> {
    let changed = 0;
    for (const { transactionId } of await this.store.listOpen(Number.MAX_SAFE_INTEGER)) {
      await this.#locks.run(transactionId, async () => {
        const current = await this.store.get(transactionId);
        if (current && (await this.#doubtAfterDamage(current, cause))) changed++;
      });
    }
    return changed;
  }

  /**
   * A lost call began after the surviving version was written, so the history is searched from its
   * `updatedAt`. A reversal that follows a refused or skipped accrual is never called (`#claim`
   * marks it not needed), so it stays pending. A partial refund whose remainder is not there may
   * have lost the lines that created and accrued it: the remainder is created in doubt here.
   */
  async #doubtAfterDamage(record: LedgerRecord, cause: string): Promise<boolean> {
    if (record.inFlight) return false;
    const since = record.updatedAt;
    const plan = record.reversal.partial;
    if (awaitsRemainder(record) && plan && !(await this.store.get(plan.remainderTransactionId))) {
      const now = this.#now();
      const draft = this.#remainderDraft(record, plan, now, since);
      draft.history.push({ at: now, event: `remainder of ${record.transactionId} after partial refund ${plan.refundId}, created after ${cause}: it may have been created and accrued already`, to: draft.status });
      return (await this.store.insert(draft)).created;
    }
    const accrual = record.accrual.state === 'pending';
    const reversal = record.reversal.state === 'pending' && record.accrual.state !== 'failed' && record.accrual.state !== 'skipped';
    // A partial refund not carried out yet as this version reads: the lost lines may also have
    // reversed, created and accrued its remainder (an operator may resolve the reversal later).
    const remainderAtRisk = plan !== undefined && !plan.remainderInDoubtSince && !record.remainderTransactionId && !(await this.store.get(plan.remainderTransactionId));
    if (!accrual && !reversal && !remainderAtRisk) return false;
    const sides = [accrual && 'accrue', reversal && 'reverse'].filter(Boolean).join(' or ');
    await this.#write(record, (r) => {
      if (accrual) this.#inDoubt(r, 'accrue', since);
      if (reversal) this.#inDoubt(r, 'reverse', since);
      if (remainderAtRisk) r.reversal.partial = { ...plan, remainderInDoubtSince: since };
      const lost = [sides && `an in-flight ${sides}`, remainderAtRisk && `the accrual of remainder ${plan.remainderTransactionId}`].filter(Boolean).join(' and ');
      return `${cause}: lines written after this version may be lost, among them ${lost} that may have reached the loyalty service`;
    });
    return true;
  }

  /**
   * A call marked in flight by a bridge that can no longer finish it: with a single-process ledger,
   * any other owner (that process is gone: the ledger's lock says so); with a shared ledger, an
   * owner whose lease ran out (it died, or is far past any round's length).
   */
  #abandoned(record: LedgerRecord): boolean {
    const flight = record.inFlight;
    if (!flight) return false;
    // Our own marker with no call of ours out: the pass that set it failed to record the outcome.
    if (flight.owner === this.instanceId) return !this.#calling.has(record.transactionId);
    if (!this.store.sharedByInstances) return true;
    return this.clock().getTime() - Date.parse(flight.startedAt) > this.options.inFlightLeaseMs;
  }

  /** The call may have reached the loyalty service: in doubt, verified before anything is resent. */
  async #takeOver(record: LedgerRecord): Promise<LedgerRecord | undefined> {
    const { operation, startedAt, owner } = record.inFlight!;
    try {
      return await this.#write(record, (r) => {
        r.inFlight = undefined;
        this.#inDoubt(r, operation, startedAt);
        return `found mid-${operation} left by bridge ${owner.slice(0, 8)} (restarted or gone): it may have reached the loyalty service`;
      });
    } catch (error) {
      if (error instanceof VersionConflictError) return undefined; // another instance took it over first
      throw error;
    }
  }

  // ---------------------------------------------------------------- operator actions

  async retry(transactionId: string): Promise<Answer> {
    await this.#passFinished(transactionId);
    await this.#locks.run(transactionId, async () => {
      const record = await this.#require(transactionId);
      if (record.inFlight) throw new ConflictError(`a ${record.inFlight.operation} call is in flight for this record; try again when it has finished`);
      if (record.accrual.state === 'in_doubt' || record.reversal.state === 'in_doubt') {
        throw new ConflictError('the last call may have reached the loyalty service: settle it with /resolve (or reconcile) first; a retry could double it');
      }
      await this.#write(record, (r) => {
        if (r.reversal.state === 'failed') {
          if (r.reversal.results.some((x) => x.isSuccess)) throw new ConflictError('the reversal succeeded on some cards: reversing again would reverse those twice');
          Object.assign(r.reversal, { state: 'pending', errors: [], unknownUpstream: undefined });
        } else if (r.accrual.state === 'failed' && r.reversal.state === 'none') {
          if (r.accrual.results.some((x) => x.isSuccess)) throw new ConflictError('the accrual succeeded on some cards: accruing again would double those');
          Object.assign(r.accrual, { state: 'pending', errors: [] });
        } else if (r.accrual.state !== 'pending' && r.reversal.state !== 'pending') {
          throw new ConflictError(`nothing to retry in status ${r.status}`);
        }
        r.rounds = 0;
        r.nextAttemptAt = undefined;
        return 'operator asked for a retry';
      });
    });
    return this.#answer(await this.#deliverWithinBudget(transactionId), false);
  }

  async reverse(transactionId: string, reason?: string): Promise<Answer> {
    const refundId = `operator:${this.#now()}${reason ? `:${reason.slice(0, 40)}` : ''}`;
    // What remains of the order may have moved to remainder records: the operator reverses the last.
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = (await this.#chainOf(transactionId)).at(-1);
      if (!current) throw new NotFoundError(`no ledger record ${transactionId}`);
      const answer = await this.#requestReversal(current.transactionId, current.pos, current.orderId, refundId);
      if (answer !== MOVED) return answer;
    }
    throw new ConflictError('the record kept changing; try again');
  }

  async resolve(transactionId: string, input: ResolveInput): Promise<Answer> {
    await this.#passFinished(transactionId);
    await this.#locks.run(transactionId, async () => {
      const record = await this.#require(transactionId);
      if (record.inFlight) throw new ConflictError(`a ${record.inFlight.operation} call is in flight for this record; try again when it has finished`);
      if (input.operationId !== undefined) {
        const claimedBy = await this.store.findOperationClaim(input.operationId);
        if (claimedBy && claimedBy !== transactionId) throw new ConflictError(`operation ${input.operationId} is already claimed by ${claimedBy}`);
      }
      const note = input.note ? `: ${input.note.slice(0, 200)}` : '';
      await this.#write(record, (r) => {
        if (input.outcome === 'accrued' || input.outcome === 'not_accrued') {
          if (r.accrual.state !== 'in_doubt') throw new ConflictError(`the accrual is ${r.accrual.state}, not in doubt`);
          if (input.outcome === 'accrued') {
            Object.assign(r.accrual, { state: 'accrued', settledBy: 'operator', inDoubtSince: undefined });
            if (input.operationId !== undefined) r.accrual.operationIds = [...r.accrual.operationIds, input.operationId];
          } else {
            Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined });
            r.rounds = 0;
          }
        } else if (input.outcome === 'reversed' && r.reversal.state === 'failed') {
          // A reverse that failed on some cards cannot be retried (it would reverse the others
          // twice): the operator finishes those cards in the loyalty service and attests it here.
          // A partial refund's plan then goes ahead and accrues what remains.
          Object.assign(r.reversal, { state: 'reversed', errors: [], unknownUpstream: undefined });
          r.rounds = 0;
        } else {
          if (r.reversal.state !== 'in_doubt') {
            throw new ConflictError(`the reversal is ${r.reversal.state}: not_reversed needs one in doubt, reversed one in doubt or failed`);
          }
          Object.assign(r.reversal, { state: input.outcome === 'reversed' ? 'reversed' : 'pending', inDoubtSince: undefined });
          r.rounds = 0;
        }
        r.nextAttemptAt = undefined;
        return `operator resolved: ${input.outcome}${note}`;
      });
    });
    return this.#answer(await this.#deliverWithinBudget(transactionId), false);
  }

  // ---------------------------------------------------------------- internals

  /** Operator actions wait for a worker pass over the same record (they are short unless a call is in flight). */
  async #passFinished(transactionId: string): Promise<void> {
    await this.#running.get(transactionId)?.catch(() => undefined);
  }

  async #deliverWithinBudget(transactionId: string, claimed?: Claimed): Promise<LedgerRecord> {
    const pass = this.advance(transactionId, false, claimed).catch((error: unknown) => {
      this.logger.error({ transactionId, err: error }, 'delivery failed; the worker will pick it up');
    });
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([pass, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.options.answerBudgetMs)))]);
    clearTimeout(timer);
    // A pass that ended in time hands back the record it last wrote; otherwise read where things stand.
    return (finished && finished.record) || this.#require(transactionId);
  }

  async #advance(transactionId: string, force: boolean, claimed?: Claimed): Promise<StepReport> {
    let before: LedgerStatus | undefined;
    /** The record as this pass last read or wrote it; undefined once another path may have changed it. */
    let latest: LedgerRecord | undefined;
    let lastAction: StepReport['action'] = 'none';
    let note = '';
    // Each step settles one thing; a settled accrual can make a waiting reversal due at once.
    for (let step = 0; step < 4; step++) {
      const { record, action } = step === 0 && claimed ? claimed : await this.#claim(transactionId, force);
      before ??= record.status;
      latest = record;
      if (action.kind === 'none') {
        if (!note) note = action.note;
        break;
      }
      if (action.kind === 'remainder') {
        note = await this.#createRemainder(record);
        lastAction = 'accrue';
        latest = undefined;
        break;
      }
      lastAction = action.kind;
      if (action.kind === 'verify') {
        const verdict = await this.verifier.verifyAccrual(record, this.clock());
        ({ note, record: latest } = await this.#applyVerdict(transactionId, verdict));
        if (verdict.kind !== 'did_not_happen') break;
        continue;
      }
      failpoint('call:before-send');
      // A checkout's claim already counts this call (entered before its insert); it ends here too.
      if (!(step === 0 && claimed)) this.#calling.enter(transactionId);
      let report: CallReport;
      try {
        // The in-flight marker (for a new checkout, the record itself) must survive an OS crash
        // before the call goes out: lost, the record would read pending and be called again.
        await this.store.durable?.();
        report = action.kind === 'accrue' ? await this.client.accrue(accrueRequest(record)) : await this.client.reverse({ transactionId });
      } finally {
        this.#calling.leave(transactionId);
      }
      failpoint('call:after-answer');
      ({ note, record: latest } = await this.#applyCall(transactionId, action.kind, report, record.inFlight!.startedAt));
      if (report.outcome.kind === 'retryable' || report.outcome.kind === 'unknown') break;
      // Nothing left to do (the usual end of a checkout or a refund): no need to look again.
      if (latest && !isOpen(latest)) break;
      force = false;
    }
    const after = latest ?? (await this.#require(transactionId));
    return { transactionId, before: before ?? after.status, after: after.status, action: lastAction, note, record: after };
  }

  /** Decides the next step and, for a call, durably marks the record in flight before it is made. */
  #claim(transactionId: string, force: boolean): Promise<{ record: LedgerRecord; action: Action }> {
    return this.#locks.run(transactionId, async () => {
      let record = await this.#require(transactionId);
      if (this.#abandoned(record)) record = (await this.#takeOver(record)) ?? (await this.#require(transactionId));
      const now = this.clock().getTime();
      const due = force || !record.nextAttemptAt || Date.parse(record.nextAttemptAt) <= now;
      if (record.inFlight) return { record, action: { kind: 'none', note: `a ${record.inFlight.operation} call is in flight` } };
      if (awaitsRemainder(record)) return { record, action: { kind: 'remainder' } };
      const { accrual, reversal } = record;
      let call: UpstreamOperation | undefined;
      if (accrual.state === 'pending') {
        if (!due) return { record, action: { kind: 'none', note: `next accrue round at ${record.nextAttemptAt}` } };
        call = 'accrue';
      } else if (accrual.state === 'in_doubt') {
        if (!this.verifier.enabled) return { record, action: { kind: 'none', note: 'accrual outcome unknown; LOYALTY_API_KEY is not set, so an operator must /resolve it' } };
        if (!due) return { record, action: { kind: 'none', note: `accrual outcome unknown; history check at ${record.nextAttemptAt}` } };
        return { record, action: { kind: 'verify' } };
      } else if (reversal.state === 'in_doubt') {
        return { record, action: { kind: 'none', note: 'reverse outcome unknown; the operations history cannot prove a reversal, so an operator must /resolve it' } };
      } else if (reversal.state === 'pending') {
        if (accrual.state === 'failed' || accrual.state === 'skipped') {
          const next = await this.#write(record, (r) => {
            r.reversal.state = 'not_needed';
            return 'the accrual was refused: the refund has nothing to reverse';
          });
          return { record: next, action: { kind: 'none', note: 'nothing to reverse' } };
        }
        if (!due) return { record, action: { kind: 'none', note: `next reverse round at ${record.nextAttemptAt}` } };
        call = 'reverse';
      }
      if (!call) return { record, action: { kind: 'none', note: 'settled' } };
      const operation = call;
      try {
        const marked = await this.#write(record, (r) => {
          r.inFlight = { operation, startedAt: this.#now(), owner: this.instanceId };
          return undefined;
        });
        return { record: marked, action: { kind: operation } };
      } catch (error) {
        // Another instance changed the record first (and may be calling): this one stays out.
        if (error instanceof VersionConflictError) return { record, action: { kind: 'none', note: 'another bridge instance is working on it' } };
        throw error;
      }
    });
  }

  /**
   * Records a call's outcome. It depends only on the outcome, so a write that loses a race (a refund
   * recorded by another instance while the call was out) is read again and applied again. It
   * applies while the record still shows this attempt: our in-flight marker, or the in-doubt state
   * another instance took it over into (the outcome settles that doubt). Otherwise the record has
   * moved on, and only the attempts and a note are added.
   */
  async #applyCall(transactionId: string, operation: UpstreamOperation, report: CallReport, startedAt: string): Promise<{ note: string; record: LedgerRecord }> {
    const { outcome } = report;
    this.metrics.upstreamCalls.inc({ operation, outcome: outcome.kind });
    this.logger.info({ transactionId, operation, outcome: outcome.kind, requests: report.attempts.length }, 'loyalty service call finished');
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#locks.run(transactionId, () => this.#recordOutcome(transactionId, operation, report, startedAt));
      } catch (error) {
        if (!(error instanceof VersionConflictError) || attempt >= 5) throw error;
      }
    }
  }

  async #recordOutcome(transactionId: string, operation: UpstreamOperation, report: CallReport, startedAt: string): Promise<{ note: string; record: LedgerRecord }> {
    const { outcome } = report;
    // Read again: a refund may have been recorded while the call was out.
    const record = await this.#require(transactionId);
    const side = operation === 'accrue' ? record.accrual : record.reversal;
    const ours = record.inFlight ? record.inFlight.owner === this.instanceId && record.inFlight.startedAt === startedAt : side.state === 'in_doubt' && side.inDoubtSince === startedAt;
    if (!ours) {
      const late = await this.#write(record, (r) => {
        Object.assign(r, withAttempts(r, report.attempts));
        return `${operation} answered (${outcome.kind}) after another bridge instance had taken the record over; left as that instance recorded it`;
      });
      return { note: 'outcome arrived after a takeover', record: late };
    }
    let note = '';
    const written = await this.#write(record, (r) => {
      r.inFlight = undefined;
      Object.assign(r, withAttempts(r, report.attempts));
      const side = operation === 'accrue' ? r.accrual : r.reversal;
      switch (outcome.kind) {
        case 'succeeded':
          side.results = outcome.results;
          side.errors = [];
          if (operation === 'accrue') {
            r.accrual.state = 'accrued';
            r.accrual.settledBy = 'upstream';
            r.accrual.operationIds = operationIdsOf(outcome.results);
          } else r.reversal.state = 'reversed';
          this.#settled(r);
          note = `${operation} succeeded for ${outcome.results.length} card(s)`;
          break;
        case 'results_failed': {
          side.results = outcome.results;
          side.errors = outcome.errors;
          const anySuccess = outcome.results.some((x) => x.isSuccess);
          if (operation === 'accrue') {
            r.accrual.state = anySuccess ? 'partially_accrued' : 'failed';
            r.accrual.settledBy = 'upstream';
            r.accrual.operationIds = operationIdsOf(outcome.results);
          } else r.reversal.state = 'failed';
          this.#settled(r);
          note = `${operation} answered with failed results: ${outcome.errors.join('; ')}`;
          break;
        }
        case 'refused':
          side.errors = outcome.errors;
          if (operation === 'accrue') r.accrual.state = 'failed';
          else {
            r.reversal.state = 'failed';
            r.reversal.unknownUpstream = outcome.errors.some((e) => /not\s*found|unknown|does not exist/i.test(e));
          }
          this.#settled(r);
          note = `${operation} refused (HTTP ${outcome.status}): ${outcome.errors.join('; ')}`;
          break;
        case 'retryable':
          // Provably not carried out: pending again (it may have been taken over into in_doubt meanwhile).
          if (operation === 'accrue') Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined });
          else Object.assign(r.reversal, { state: 'pending', inDoubtSince: undefined });
          r.rounds += 1;
          r.nextAttemptAt = this.#later(this.options.retryBaseMs * ROUND_PAUSES[Math.min(r.rounds - 1, ROUND_PAUSES.length - 1)]!);
          note = `${operation} not carried out (${outcome.reason}); next round at ${r.nextAttemptAt}`;
          break;
        case 'unknown':
          this.#inDoubt(r, operation, startedAt);
          note = `${operation} outcome unknown (${outcome.reason}); it will not be resent until verified`;
          break;
      }
      return note;
    });
    return { note, record: written };
  }

  async #applyVerdict(transactionId: string, verdict: Awaited<ReturnType<HistoryVerifier['verifyAccrual']>>): Promise<{ note: string; record: LedgerRecord }> {
    return this.#locks.run(transactionId, async () => {
      const record = await this.#require(transactionId);
      if (record.accrual.state !== 'in_doubt') return { note: 'already settled', record };
      let note = '';
      const written = await this.#write(record, (r) => {
        switch (verdict.kind) {
          case 'happened':
            Object.assign(r.accrual, { state: 'accrued', settledBy: 'history', inDoubtSince: undefined });
            r.accrual.operationIds = [...r.accrual.operationIds, verdict.operationId];
            this.#settled(r);
            note = `operations history shows operation ${verdict.operationId} on card ${verdict.cardId}: accrued`;
            break;
          case 'did_not_happen':
            Object.assign(r.accrual, { state: 'pending', inDoubtSince: undefined });
            r.rounds = 0;
            r.nextAttemptAt = undefined;
            note = `operations history of ${verdict.examinedCards} card(s) shows no matching operation after the grace period: safe to accrue again`;
            break;
          case 'too_early':
          case 'cannot_verify':
            r.nextAttemptAt = this.#later(Math.max(this.options.inDoubtVerifyAfterMs, this.options.retryBaseMs));
            note = verdict.reason;
            break;
        }
        return note;
      });
      return { note, record: written };
    });
  }

  /**
   * Second step of a partial refund, after the whole accrual was reversed: the remainder's record is
   * inserted (at most once: insert is keyed by its derived id), then linked from the parent, then
   * delivered. A crash between the steps resumes here, because the parent stays open until linked.
   */
  async #createRemainder(parent: LedgerRecord): Promise<string> {
    // Under the parent's lock, so a refund arriving now either joins the plan before the remainder
    // exists or finds the remainder linked afterwards, never a plan that changed after the insert.
    const childId = await this.#locks.run(parent.transactionId, async () => {
      const current = await this.#require(parent.transactionId);
      const plan = current.reversal.partial;
      if (current.remainderTransactionId || !plan) return current.remainderTransactionId;
      failpoint('partial:before-remainder');
      const now = this.#now();
      // Lines lost in a crash may have created and accrued it already: then verified before any accrue.
      const draft = this.#remainderDraft(current, plan, now, plan.remainderInDoubtSince);
      draft.history.push({
        at: now,
        event: `remainder of ${current.transactionId} after partial refund ${plan.refundId}${plan.remainderInDoubtSince ? ': in doubt, lines lost in a crash may have accrued it already' : ''}`,
        to: draft.status,
      });
      await this.store.insert(draft);
      failpoint('partial:before-link');
      await this.#linkedRemainder(current);
      return plan.remainderTransactionId;
    });
    if (!childId) return 'a full refund superseded the partial one: nothing remains to accrue';
    const child = await this.advance(childId);
    return `remainder ${childId}: ${child.after}`;
  }

  /** The record that accrues what a partial refund of `parent` leaves; in doubt from `inDoubtSince` when given. */
  #remainderDraft(parent: LedgerRecord, plan: PartialRefundPlan, now: string, inDoubtSince?: string): LedgerRecord {
    const draft = this.#newRecord(plan.remainderTransactionId, parent.pos, parent.orderId, now);
    draft.accrual.check = plan.remainderCheck;
    draft.accrual.customer = parent.accrual.customer;
    draft.parentTransactionId = parent.transactionId;
    if (inDoubtSince) {
      this.#inDoubt(draft, 'accrue', inDoubtSince);
      draft.status = deriveStatus(draft);
    }
    return draft;
  }

  /** A call that may have reached the loyalty service since `since`: never resent before it is verified (or resolved). */
  #inDoubt(r: LedgerRecord, operation: UpstreamOperation, since: string): void {
    Object.assign(operation === 'accrue' ? r.accrual : r.reversal, { state: 'in_doubt', inDoubtSince: since });
    r.nextAttemptAt = this.#later(this.options.inDoubtVerifyAfterMs);
  }

  #settled(r: LedgerRecord): void {
    r.rounds = 0;
    r.nextAttemptAt = undefined;
  }

  /** Applies `change` to a copy, bumps the version, re-derives the status and writes it (compare-and-set). */
  async #write(record: LedgerRecord, change: (draft: LedgerRecord) => string | undefined): Promise<LedgerRecord> {
    const draft = copyForChange(record);
    const event = change(draft);
    const now = this.#now();
    draft.version = record.version + 1;
    draft.updatedAt = now;
    draft.status = deriveStatus(draft);
    if (event || draft.status !== record.status) {
      draft.history = withHistoryEvent(draft.history, { at: now, event: event ?? 'status changed', ...(draft.status !== record.status ? { from: record.status, to: draft.status } : {}) });
    }
    const written = await this.store.update(draft);
    if (draft.status !== record.status) this.logger.info({ transactionId: draft.transactionId, from: record.status, to: draft.status }, 'ledger status changed');
    return written;
  }

  async #answer(record: LedgerRecord, repeat: boolean, refundId?: string): Promise<Answer> {
    const child = record.remainderTransactionId ? await this.store.get(record.remainderTransactionId) : undefined;
    const remainder = child ? { transactionId: child.transactionId, status: child.status } : undefined;
    const unknownOrder = record.reversal.state === 'failed' && record.reversal.unknownUpstream && record.accrual.state === 'none';
    const settled = FINAL_STATUSES.has(record.status) && !isOpen(record) && (!child || (FINAL_STATUSES.has(child.status) && !isOpen(child)));
    const httpStatus = unknownOrder ? 404 : settled ? 200 : 202;
    return { record, repeat, refundId, remainder, httpStatus };
  }

  async #require(transactionId: string): Promise<LedgerRecord> {
    const record = await this.store.get(transactionId);
    if (!record) throw new NotFoundError(`no ledger record ${transactionId}`);
    return record;
  }

  #newRecord(transactionId: string, pos: string, orderId: string, now: string): LedgerRecord {
    return {
      transactionId,
      version: 1,
      pos,
      orderId,
      status: 'pending',
      createdAt: now,
      updatedAt: now,
      accrual: { state: 'pending', results: [], errors: [], operationIds: [] },
      reversal: { state: 'none', refundIds: [], results: [], errors: [] },
      rounds: 0,
      attempts: [],
      history: [],
    };
  }

  #now(): string {
    return this.clock().toISOString();
  }

  #later(ms: number): string {
    return new Date(this.clock().getTime() + ms).toISOString();
  }
}

/**
 * Upstream calls out from this process (or about to go out: a checkout's claim), counted per
 * transactionId: a checkout's claim and a pass's call may overlap for one id, and one ending must
 * not make the other's marker look abandoned.
 */
class CallsOut {
  readonly #count = new Map<string, number>();

  has(transactionId: string): boolean {
    return this.#count.has(transactionId);
  }

  enter(transactionId: string): void {
    this.#count.set(transactionId, (this.#count.get(transactionId) ?? 0) + 1);
  }

  leave(transactionId: string): void {
    const left = (this.#count.get(transactionId) ?? 1) - 1;
    if (left > 0) this.#count.set(transactionId, left);
    else this.#count.delete(transactionId);
  }
}

function accrueRequest(record: LedgerRecord): AccrueRequest {
  const { check, customer } = record.accrual;
  if (!check) throw new Error(`record ${record.transactionId} has no check to accrue`);
  return { transactionId: record.transactionId, check, ...customer };
}

function operationIdsOf(results: { isSuccess: boolean; operationId?: number | null }[]): number[] {
  return results.filter((r) => r.isSuccess && typeof r.operationId === 'number').map((r) => r.operationId as number);
}

/** `generic:A-1~r2` → `generic:A-1`: remainder ids hang off the order's original id. */
function rootOf(transactionId: string): string {
  return transactionId.replace(/~r\d+$/, '');
}

function depthOf(transactionId: string): number {
  return Number(/~r(\d+)$/.exec(transactionId)?.[1] ?? 0);
}

/**
 * A copy that `#write`'s change functions may mutate: they assign top-level fields, mutate the
 * `accrual` and `reversal` objects, and reassign (never mutate) the arrays and objects inside them.
 * Cheaper than a deep clone of the attempt log on every write; stored records stay untouched.
 */
function copyForChange(record: LedgerRecord): LedgerRecord {
  return { ...record, accrual: { ...record.accrual }, reversal: { ...record.reversal }, history: [...record.history] };
}
