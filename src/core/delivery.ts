/**
 * Delivery: carries open records to the loyalty service, for the POS's answer (within the answer
 * budget), the background worker and an operator's reconcile. A pass over a record takes its next
 * step (`transitions.nextStep`): mark the call in flight durably, make it, record the outcome; ask
 * the operations history about an accrual in doubt; create a partial refund's remainder. It goes on
 * while steps settle (a settled accrual can make a waiting reversal due at once).
 *
 * An accrual whose customer and amount another unsettled accrual holds (`accrualKeys`) is not sent:
 * the store refuses its in-flight marker, and it waits behind that record. When the holder's pass
 * runs in this process (the usual case: two identical orders a moment apart), the waiting pass
 * waits for it, within the budget, and goes right after.
 */
import { randomUUID } from 'node:crypto';
import { isHeld, leaseFrom, standing } from '../kernel/lease.js';
import { AccrualKeyHeldError, ConflictError, NotFoundError, VersionConflictError } from '../kernel/errors.js';
import { failpoint } from '../kernel/failpoints.js';
import { mutant } from '../kernel/mutants.js';
import { isOpen, keyOf, ledgerKey, merchantOf, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import type { UpstreamOperation } from '../loyalty/calls.js';
import type { DueQuery, OpenClaim } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import type { CallReport, LoyaltyClient } from '../loyalty/client.js';
import type { AccrueRequest } from '../loyalty/contract.js';
import type { Metrics } from './metrics.js';
import type { Evidence, HistoryVerifier } from './history-verifier.js';
import { RateLimitPauses, type InlineDelivery } from './rate-limits.js';
import type { RecordWriter } from './record-writer.js';
import { readShape, shapeSettingName } from './reversal-shape.js';
import { applyReversalVerdict, applyVerdict, describeReversalVerdict, describeVerdict, keyless, noteReversalEntries, linkRemainder, reconsiderUnproven, markInFlight, newRemainder, nextStep, recordOutcome, releasePersonSettled, reversalNotNeeded, startProbe, takeOver, waitBehind, type Step, type TransitionOptions } from './transitions.js';
import type { AmbiguityPolicy } from '../state/merchant.js';

export interface DeliveryOptions extends TransitionOptions {
  answerBudgetMs: number;
  /** After this long, a call marked in flight by another instance of a shared ledger is taken over as in doubt. */
  inFlightLeaseMs: number;
}

/** What one pass over one record did, for the reconcile report. */
export interface StepReport {
  /** The ledger key (`keyOf`); `record` names its transactionId and merchant. */
  key: string;
  transactionId: string;
  merchantId: string;
  before: LedgerStatus;
  after: LedgerStatus;
  action: 'accrue' | 'reverse' | 'verify' | 'none';
  note: string;
  /** The record as the pass left it. */
  record?: LedgerRecord;
}

/** A record this instance has already marked in flight for a call: the pass makes it at once. */
export interface Claimed {
  record: LedgerRecord;
  operation: UpstreamOperation;
}

/** What the loyalty service is asked (the client's point-of-sale calls). */
export type PosCalls = Pick<LoyaltyClient, 'accrue' | 'reverse'>;

/** One merchant's way to the loyalty service: its app token's calls, its API key's history. */
export interface Upstream {
  calls: PosCalls;
  verifier: HistoryVerifier;
  /**
   * What settles an accrual the history leaves ambiguous: `person` (the attention queue) or `probe`
   * (the bridge asks the service by reversing it: transitions.ts `startProbe`).
   */
  ambiguity: AmbiguityPolicy;
  /** A suspended merchant's records are kept, and read in the history, but nothing is sent for them. */
  suspended: boolean;
}

export interface UpstreamDirectory {
  /** Undefined: no such merchant (any more). */
  upstreamOf(merchantId: string): Promise<Upstream | undefined>;
  /** Whether any merchant's history can be read: accruals in doubt are worth listing as due. */
  canVerifyAny(): Promise<boolean>;
}

/** A claim's result: the record and the step it takes now (with the merchant's upstream for a call or a check), or the holder it must wait behind. */
type ClaimResult = { record: LedgerRecord; step: Step; upstream?: Upstream } | { record: LedgerRecord; heldBy: string };

export class DeliveryService {
  /** Upstream calls out from this process right now (or about to go out: a checkout's claim), by ledger key. */
  readonly calling = new CallsOut();
  /** Passes running in this process, so the worker never starts a second one for a record. */
  readonly #running = new Map<string, Promise<StepReport>>();
  /** Confirmed reversals' history entries being noted (`#learnLater`). */
  readonly #learning = new Set<Promise<void>>();
  readonly instanceId = randomUUID();
  /** Merchants whose calls the loyalty service is answering with 429s: the worker holds their due work. */
  readonly rateLimits: RateLimitPauses;

  constructor(
    private readonly writer: RecordWriter,
    private readonly upstreams: UpstreamDirectory,
    private readonly options: DeliveryOptions,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.rateLimits = new RateLimitPauses(options);
  }

  /**
   * Runs one pass over a record unless one is already running here. `force` ignores the pause
   * between rounds (an operator's reconcile runs due and not-yet-due work at once). `claimed`: the
   * checkout that recorded the order already marked in flight; its pass must make that call.
   */
  advance(key: string, force = false, claimed?: Claimed): Promise<StepReport> {
    const running = this.#running.get(key);
    if (running && !claimed) return running;
    // A pass already running here (the worker's) will have found the claim's marker and left it alone.
    const pass = (running ? running.catch(() => undefined).then(() => this.#pass(key, force, claimed)) : this.#pass(key, force, claimed))
      .catch(async (error: unknown) => {
        // Another instance wrote the record between this pass's read and write. Nothing was sent on
        // a stale basis (calls are claimed by compare-and-set); the record is where that instance left it.
        if (!(error instanceof VersionConflictError)) throw error;
        this.logger.warn({ key }, 'another bridge instance changed the record during this pass');
        const record = await this.writer.require(key);
        return { ...idsOf(record), before: record.status, after: record.status, action: 'none' as const, note: 'another bridge instance changed it during this pass' };
      })
      .finally(() => {
        if (this.#running.get(key) === pass) this.#running.delete(key);
      });
    this.#running.set(key, pass);
    return pass;
  }

  /** A pass that answers within the budget: the record it left, or where things stand when the budget ran out. */
  async deliverWithinBudget(key: string, claimed?: Claimed): Promise<LedgerRecord> {
    const pass = this.advance(key, false, claimed).catch((error: unknown) => {
      this.logger.error({ key, err: error }, 'delivery failed; the worker will pick it up');
    });
    let timer: NodeJS.Timeout | undefined;
    // A budget of zero waits for nothing, not for a timer: the model check runs so (docs/correctness.md),
    // and what follows the answer (a bulk action's next record) must not wait on a timer it cannot order.
    const budget = this.options.answerBudgetMs > 0 ? new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.options.answerBudgetMs))) : Promise.resolve(undefined);
    const finished = await Promise.race([pass, budget]);
    clearTimeout(timer);
    return (finished && finished.record) || this.writer.require(key);
  }

  /**
   * What the worker's scheduled pass may take: records due by this bridge's clock, `perMerchant` of
   * each merchant at most, none of a merchant being rate-limited; accruals in doubt only when the
   * verifier can run.
   */
  async dueQuery(limit: number, perMerchant: number, claim: OpenClaim): Promise<DueQuery> {
    const nowMs = this.writer.now().getTime();
    return { nowMs, limit, perMerchant, skipMerchants: this.rateLimits.paused(nowMs), canVerify: await this.upstreams.canVerifyAny(), claim };
  }

  /**
   * Whether a new checkout or refund of this merchant is delivered as it arrives: yes, unless the
   * loyalty service is rate-limiting the merchant and another of its checkouts is already probing
   * (RateLimitPauses.mayProbe); then it is recorded and answered 202, the worker delivering it.
   */
  mayDeliverInline(merchantId: string): InlineDelivery {
    return this.rateLimits.mayProbe(merchantId, this.writer.now().getTime(), 2 * this.options.answerBudgetMs);
  }

  /** The probe's delivery within the budget is over (`mayDeliverInline` said probe): another may probe. */
  inlineDone(merchantId: string): void {
    this.rateLimits.probeDone(merchantId);
  }

  /** The merchant's due work is held: the loyalty service is rate-limiting it (see RateLimitPauses). */
  isRateLimited(merchantId: string): boolean {
    return this.rateLimits.isPaused(merchantId, this.writer.now().getTime());
  }

  isRunning(key: string): boolean {
    return this.#running.has(key);
  }

  /** Waits for the pass over this record running here, if any (operator actions wait for it). */
  async passFinished(key: string): Promise<void> {
    await this.#running.get(key)?.catch(() => undefined);
  }

  /** Waits for every pass running in this process, and what they noted afterwards (graceful shutdown). */
  async drain(): Promise<void> {
    while (this.#running.size > 0 || this.#learning.size > 0) await Promise.allSettled([...this.#running.values(), ...this.#learning]);
  }

  /** The evidence for a person deciding the record: its cards' operations around its uncertain call, read live (history-verifier.ts `evidence`). */
  async evidence(key: string, withReading = true): Promise<Evidence> {
    const record = await this.writer.require(key);
    const upstream = await this.upstreams.upstreamOf(merchantOf(record));
    if (!upstream) throw new NotFoundError(`merchant ${merchantOf(record)} is not known to this bridge: its history cannot be read`);
    return upstream.verifier.evidence(record, this.writer.now(), withReading);
  }

  /** Whether the bridge can read the merchant's operations history (its loyalty API key is set): undefined for a merchant it does not know. */
  async canVerify(merchantId: string): Promise<boolean | undefined> {
    return (await this.upstreams.upstreamOf(merchantId))?.verifier.enabled;
  }

  /** Whom a card belongs to, asked of the merchant's loyalty service (needs its API key; throws where it cannot be asked): undefined when it knows no such card. */
  async cardOwner(merchantId: string, serial: string): Promise<{ phone?: string; email?: string } | undefined> {
    const upstream = await this.upstreams.upstreamOf(merchantId);
    if (!upstream) throw new NotFoundError(`merchant ${merchantId} is not known to this bridge`);
    return upstream.verifier.cardOwner(serial);
  }

  /** Confirmed reversals whose history entries are being looked for now (tests wait for them). */
  get learning(): number {
    return this.#learning.size;
  }

  /**
   * A call marked in flight by a bridge that can no longer finish it. The marker is a lease
   * (lease.ts: its owner, from its start for `inFlightLeaseMs`): our own, with no call of ours out
   * (the pass that set it failed to record the outcome); with a single-process ledger, any other
   * owner's (that process is gone: the ledger's lock says so); with a shared ledger, another owner's
   * that ran out (it died, or is far past any round's length).
   */
  abandoned(record: LedgerRecord): boolean {
    const flight = record.inFlight;
    if (!flight) return false;
    if (flight.owner === this.instanceId) return !this.calling.has(keyOf(record));
    const lease = standing(leaseFrom(flight.owner, flight.startedAt, this.options.inFlightLeaseMs), this.instanceId, this.writer.store.sharedByInstances === true);
    return !isHeld(lease, this.writer.now().getTime(), this.instanceId);
  }

  /** Takes over an abandoned call: in doubt. Undefined when another instance took it over first. */
  async takeOver(record: LedgerRecord): Promise<LedgerRecord | undefined> {
    try {
      return await this.writer.write(record, takeOver(record, this.writer.now(), this.options, this.instanceId));
    } catch (error) {
      if (error instanceof VersionConflictError) return undefined;
      throw error;
    }
  }

  async #pass(key: string, force: boolean, claimed?: Claimed): Promise<StepReport> {
    let before: LedgerStatus | undefined;
    /** The record as this pass last read or wrote it; undefined once another path may have changed it. */
    let latest: LedgerRecord | undefined;
    let lastAction: StepReport['action'] = 'none';
    let note = '';
    let waitedFor: string | undefined;
    for (let step = 0; step < 5; step++) {
      const claim: ClaimResult = step === 0 && claimed ? await this.#claimedCall(claimed) : await this.#claim(key, force);
      before ??= claim.record.status;
      latest = claim.record;
      if ('heldBy' in claim) {
        // Its holder's pass runs here: wait for it once, then try again.
        const holderPass = this.#running.get(ledgerKey(merchantOf(claim.record), claim.heldBy));
        if (holderPass && waitedFor !== claim.heldBy) {
          waitedFor = claim.heldBy;
          await holderPass.catch(() => undefined);
          continue;
        }
        ({ record: latest, note } = await this.#waitBehind(claim.record, claim.heldBy));
        break;
      }
      const next = claim.step;
      if (next.kind === 'none') {
        if (!note) note = next.why;
        break;
      }
      if (next.kind === 'create_remainder') {
        note = await this.#createRemainder(claim.record);
        lastAction = 'accrue';
        latest = undefined;
        break;
      }
      if (next.kind === 'take_over') {
        // The claim put the abandoned call in doubt: the next step decides what that record needs.
        note = 'an abandoned call was taken over: in doubt';
        continue;
      }
      if (next.kind === 'reversal_not_needed') {
        note = 'nothing to reverse';
        break;
      }
      lastAction = next.kind === 'verify' ? 'verify' : next.operation;
      if (next.kind === 'verify' && next.side === 'reverse') {
        const verdict = await claim.upstream!.verifier.verifyReversal(claim.record, this.writer.now());
        try {
          latest = await this.writer.change(key, (r) => (r.reversal.state === 'in_doubt' && !r.inFlight ? applyReversalVerdict(r, verdict, this.writer.now(), this.options) : undefined));
        } catch (error) {
          // One of its entries was claimed by another record meanwhile: looked at again at the next pass.
          if (!(error instanceof ConflictError)) throw error;
          note = `not settled: ${error.message}`;
          break;
        }
        note = describeReversalVerdict(verdict);
        if (verdict.kind === 'unproven') this.logger.warn({ transactionId: latest.transactionId, why: verdict.why }, 'a reversal in doubt waits for a person: the operations history does not prove it');
        if (verdict.kind !== 'reversed') break;
        await this.#reconsiderUnproven(claim.upstream!.verifier, latest);
        // Reversed: a partial refund's remainder is created next.
        continue;
      }
      if (next.kind === 'verify') {
        const verifier = claim.upstream!.verifier;
        const verdict = await verifier.verifyAccrual(claim.record, this.writer.now());
        try {
          latest = await this.writer.change(key, (r) => (r.accrual.state === 'in_doubt' ? applyVerdict(r, verdict, this.writer.now(), this.options) : undefined));
        } catch (error) {
          // The operation the count gave it was claimed by another record meanwhile: looked at again at the next pass.
          if (!(error instanceof ConflictError)) throw error;
          note = `not settled: ${error.message}`;
          break;
        }
        note = describeVerdict(verdict);
        await this.#releasePersonSettled(verifier, claim.record);
        const probeClaimed = mutant('probe-claimed') && verdict.kind === 'happened' && claim.upstream!.ambiguity === 'probe';
        if (((verdict.kind === 'ambiguous' && verdict.askable) || probeClaimed) && claim.upstream!.ambiguity === 'probe' && (latest.accrual.state === 'in_doubt' || probeClaimed) && latest.reversal.state === 'none' && !latest.inFlight) {
          try {
            latest = await this.writer.change(key, (r) => ((r.accrual.askable || probeClaimed) && r.reversal.state === 'none' && !r.inFlight ? startProbe(r, this.writer.now()) : undefined));
          } catch (error) {
            if (!(error instanceof ConflictError)) throw error;
            note = `not asked: ${error.message}`;
            break;
          }
          note = latest.history.at(-1)?.event ?? note;
          lastAction = 'reverse';
          force = true;
          continue;
        }
        if (verdict.kind !== 'did_not_happen') break;
        continue;
      }
      const called = await this.#call(claim.record, next.operation, claim.upstream!, step === 0 && claimed !== undefined);
      ({ record: latest, note } = called);
      if (called.outcome === 'retryable' || called.outcome === 'unknown') break;
      // Nothing left to do (the usual end of a checkout or a refund): no need to look again.
      if (!isOpen(latest)) break;
      force = false;
    }
    const after = latest ?? (await this.writer.require(key));
    return { ...idsOf(after), before: before ?? after.status, after: after.status, action: lastAction, note, record: after };
  }

  /** A checkout recorded already marked in flight (only for a merchant that is active: intake checks). */
  async #claimedCall(claimed: Claimed): Promise<ClaimResult> {
    const upstream = await this.upstreams.upstreamOf(merchantOf(claimed.record));
    if (!upstream || upstream.suspended) throw new Error(`a call was claimed for merchant ${merchantOf(claimed.record)}, which cannot be called`);
    return { record: claimed.record, step: { kind: 'call', operation: claimed.operation }, upstream };
  }

  /**
   * Decides the next step under the record's lock and, for a call, durably marks the record in
   * flight before it is made: the compare-and-set decides which instance calls, and the store
   * refuses the marker while another accrual of the same customer and amount is unsettled.
   */
  #claim(key: string, force: boolean): Promise<ClaimResult> {
    return this.writer.locked(key, async () => {
      let record = await this.writer.require(key);
      const now = this.writer.now();
      const upstream = await this.upstreams.upstreamOf(merchantOf(record));
      const merchant = !upstream ? 'unknown' : upstream.suspended ? 'suspended' : 'active';
      const step = nextStep(record, { nowMs: now.getTime(), force, canVerify: upstream?.verifier.enabled ?? false, abandoned: this.abandoned(record), merchant });
      try {
        switch (step.kind) {
          case 'take_over':
            record = (await this.takeOver(record)) ?? (await this.writer.require(key));
            return { record, step };
          case 'reversal_not_needed':
            return { record: await this.writer.write(record, reversalNotNeeded(record)), step };
          case 'call':
            return { record: await this.writer.write(record, markInFlight(record, step.operation, this.instanceId, now)), step, upstream };
          case 'verify':
            return { record, step, upstream };
          case 'create_remainder':
          case 'none':
            return { record, step };
          default:
            return unreachableStep(step);
        }
      } catch (error) {
        if (error instanceof AccrualKeyHeldError) return { record, heldBy: error.holder };
        // Another instance changed the record first (and may be calling): this one stays out.
        if (error instanceof VersionConflictError) return { record, step: { kind: 'none', why: 'another bridge instance is working on it' } };
        throw error;
      }
    });
  }

  /** The accrual waits behind `holder` (a transactionId of its merchant): looked at again soon while the holder's call is out, later while it is in doubt. */
  async #waitBehind(waiting: LedgerRecord, holder: string): Promise<{ record: LedgerRecord; note: string }> {
    const holding = await this.writer.store.get(ledgerKey(merchantOf(waiting), holder));
    const record = await this.writer.change(keyOf(waiting), (r) => (r.accrual.state === 'pending' && !r.inFlight ? waitBehind(r, holder, holding, this.writer.now(), this.options) : undefined));
    this.metrics.accrualsHeldBack.inc(this.metrics.merchant(merchantOf(waiting)));
    return { record, note: `waits behind ${holder}: an accrual of the same customer and amount is unsettled` };
  }

  /** Makes the call the record is marked in flight for, and records its outcome. */
  async #call(record: LedgerRecord, operation: UpstreamOperation, upstream: Upstream, countedByClaim: boolean): Promise<{ record: LedgerRecord; note: string; outcome: CallReport['outcome']['kind'] }> {
    const { calls } = upstream;
    const { transactionId } = record;
    const key = keyOf(record);
    const startedAt = record.inFlight!.startedAt;
    failpoint('call:before-send');
    // A checkout's claim already counts this call (entered before its insert); it ends here too.
    if (!countedByClaim) this.calling.enter(key);
    let report: CallReport;
    try {
      // The in-flight marker (for a new checkout, the record itself) must survive an OS crash
      // before the call goes out: lost, the record would read pending and be called again.
      await this.writer.store.durable?.();
      report = operation === 'accrue' ? await calls.accrue(accrueRequest(record)) : await calls.reverse({ transactionId });
    } finally {
      this.calling.leave(key);
    }
    failpoint('call:after-answer');
    const pausedUntil = this.rateLimits.note(merchantOf(record), report, this.writer.now().getTime());
    if (pausedUntil !== undefined) this.logger.warn({ merchantId: merchantOf(record), until: new Date(pausedUntil).toISOString() }, "the loyalty service is rate-limiting this merchant's app token: its due work waits until then, or until one of its calls is answered");
    this.metrics.upstreamCalls.inc({ operation, outcome: report.outcome.kind, ...this.metrics.merchant(merchantOf(record)) });
    this.logger.info({ transactionId, operation, outcome: report.outcome.kind, requests: report.attempts.length }, 'loyalty service call finished');
    const answer = { operation, outcome: report.outcome, attempts: report.attempts, startedAt, owner: this.instanceId };
    // Read again and applied again if another instance wrote the record while the call was out (a refund recorded meanwhile).
    // An accrue's outcome may be acknowledged before it is durable where its merchant's history can
    // be read: lost in a database crash, it leaves the durable in-flight marker, and the call is
    // taken over in doubt and settled from the operations history, never sent again. A reversal in
    // doubt waits for a person, so its outcome is written durably.
    const synchronous = !(operation === 'accrue' && upstream.verifier.enabled);
    const written = await this.writer.change(key, (r) => recordOutcome(r, answer, this.writer.now(), this.options), { synchronous }, record);
    if (operation === 'reverse' && (written.reversal.state === 'reversed' || written.reversal.state === 'failed') && upstream.verifier.enabled) this.#learnLater(key, upstream);
    return { record: written, note: written.history.at(-1)?.event ?? report.outcome.kind, outcome: report.outcome.kind };
  }

  /**
   * After a history check of an accrual: the merchant's accruals of the amount a person settled
   * without naming their operation that no accrual can mistake any more leave the unsettled ones
   * (`releasePersonSettled`), so that list stays as short as the merchant's recent doubts. Best
   * effort: one not released now is released after a later check.
   */
  async #releasePersonSettled(verifier: HistoryVerifier, checked: LedgerRecord): Promise<void> {
    const amount = checked.accrual.check?.amount;
    if (amount === undefined) return;
    try {
      for (const stale of await verifier.releasable(merchantOf(checked), amount, this.writer.now())) {
        await this.writer.change(keyOf(stale), (r) => releasePersonSettled(r, this.writer.now()));
      }
    } catch (error) {
      this.logger.warn({ transactionId: checked.transactionId, err: error }, 'accruals settled by a person could not be released after a history check');
    }
  }

  /**
   * After a reversal settled (confirmed, refused, or proven from the history): the merchant's
   * reversals of its amount the history did not prove are looked at again (transitions.ts
   * `reconsiderUnproven`), since this one may have been their rival. Without it, two reversals in
   * doubt of one customer and amount, both unproven, stay a person's even after one is settled
   * (docs/correctness.md, finding 3). Best effort, as `#releasePersonSettled`.
   */
  async #reconsiderUnproven(verifier: HistoryVerifier, settled: LedgerRecord): Promise<void> {
    const amount = settled.accrual.check?.amount;
    if (amount === undefined || !verifier.enabled) return;
    try {
      for (const unproven of await verifier.unprovenReversals(merchantOf(settled), amount, settled.transactionId)) {
        await this.writer.change(keyOf(unproven), (r) => reconsiderUnproven(r, settled.transactionId));
      }
    } catch (error) {
      this.logger.warn({ transactionId: settled.transactionId, err: error }, 'reversals the history did not prove could not be looked at again after a reversal settled');
    }
  }

  /**
   * After the service answered a reverse definitely, off the POS's path: a confirmed reversal's
   * history entries are found and claimed, and the merchant's reversal shape kept
   * (reversal-shape.ts); then, confirmed or refused, the reversals of its amount left unproven are
   * looked at again (`#reconsiderUnproven`). Best effort: a reversal whose entries are not claimed
   * only makes the verifier more careful (it counts as a rival of another reversal in doubt of the
   * customer and amount).
   */
  #learnLater(key: string, upstream: Upstream): void {
    const task: Promise<void> = this.#learn(key, upstream)
      .catch((error: unknown) => this.logger.warn({ key, err: error }, "a confirmed reversal's history entries could not be noted"))
      .finally(() => this.#learning.delete(task));
    this.#learning.add(task);
  }

  async #learn(key: string, upstream: Upstream): Promise<void> {
    const record = await this.writer.require(key);
    await this.#noteEntries(key, record, upstream);
    // Its merchant, transactionId and amount are all this needs, and noting its entries changes none of them.
    await this.#reconsiderUnproven(upstream.verifier, record);
  }

  async #noteEntries(key: string, record: LedgerRecord, upstream: Upstream): Promise<void> {
    if (record.reversal.state !== 'reversed' || record.reversal.operationIds) return;
    const learned = await upstream.verifier.learnReversal(record);
    const merchantId = merchantOf(record);
    if (learned.kind === 'not_learned') {
      this.logger.info({ transactionId: record.transactionId, merchantId, why: learned.why }, "a confirmed reversal's history entries were not identified");
      return;
    }
    const shape = { ...learned.shape, learnedFrom: record.transactionId, at: this.writer.now().toISOString() };
    try {
      await this.writer.change(key, (r) => (r.reversal.state === 'reversed' && !r.reversal.operationIds ? noteReversalEntries(r, learned.operationIds, shape) : undefined));
    } catch (error) {
      // Claimed by another record meanwhile: this one is left as it was.
      if (error instanceof ConflictError) return;
      throw error;
    }
    const known = await readShape(this.writer.store, merchantId);
    if (known?.eventId === shape.eventId && known.sign === shape.sign) return;
    if (known) this.logger.warn({ merchantId, was: known, now: shape }, 'the loyalty service now shows a reversal differently in its history: the new shape is kept');
    await this.writer.store.putSetting(shapeSettingName(merchantId), JSON.stringify(shape));
  }

  /**
   * Second step of a partial refund, after the whole accrual was reversed: the remainder's record is
   * inserted (at most once: insert is keyed by its derived id), then linked from the parent, then
   * delivered. A crash between the steps resumes here, because the parent stays open until linked.
   * Under the parent's lock, so a refund arriving now either joins the plan before the remainder
   * exists or finds the remainder linked afterwards, never a plan that changed after the insert.
   */
  async #createRemainder(parent: LedgerRecord): Promise<string> {
    const parentKey = keyOf(parent);
    const childId = await this.writer.locked(parentKey, async () => {
      const current = await this.writer.require(parentKey);
      const partial = current.reversal.partial;
      if (current.remainderTransactionId || !partial) return current.remainderTransactionId;
      failpoint('partial:before-remainder');
      await insertRemainder(this.writer, newRemainder(current, partial, this.writer.now(), this.options, partial.remainderInDoubtSince));
      failpoint('partial:before-link');
      await this.writer.write(current, linkRemainder(current, partial.remainderTransactionId));
      return partial.remainderTransactionId;
    });
    if (!childId) return 'a full refund superseded the partial one: nothing remains to accrue';
    const child = await this.advance(ledgerKey(merchantOf(parent), childId));
    return `remainder ${childId}: ${child.after}`;
  }
}

/**
 * Inserts a remainder record. One born in doubt (its accrual may have happened in lost lines) must
 * be in doubt whatever else is unsettled; when another record holds its accrual key, it is kept
 * without one (`keyless`), and the history verifier still weighs it against that record.
 */
export async function insertRemainder(writer: RecordWriter, draft: LedgerRecord): Promise<boolean> {
  try {
    return (await writer.insert(draft)).created;
  } catch (error) {
    if (!(error instanceof AccrualKeyHeldError) || draft.accrual.state !== 'in_doubt') throw error;
    return (await writer.insert(keyless(draft, error.holder))).created;
  }
}

function idsOf(record: LedgerRecord): Pick<StepReport, 'key' | 'transactionId' | 'merchantId'> {
  return { key: keyOf(record), transactionId: record.transactionId, merchantId: merchantOf(record) };
}

/**
 * Upstream calls out from this process (or about to go out: a checkout's claim), counted per
 * ledger key: a checkout's claim and a pass's call may overlap for one record, and one ending must
 * not make the other's marker look abandoned.
 */
export class CallsOut {
  readonly #count = new Map<string, number>();

  has(key: string): boolean {
    return this.#count.has(key);
  }

  enter(key: string): void {
    this.#count.set(key, (this.#count.get(key) ?? 0) + 1);
  }

  leave(key: string): void {
    const left = (this.#count.get(key) ?? 1) - 1;
    if (left > 0) this.#count.set(key, left);
    else this.#count.delete(key);
  }
}

function accrueRequest(record: LedgerRecord): AccrueRequest {
  const { check, customer } = record.accrual;
  if (!check) throw new Error(`record ${record.transactionId} has no check to accrue`);
  return { transactionId: record.transactionId, check, ...customer };
}

function unreachableStep(step: never): never {
  throw new Error(`unhandled step ${JSON.stringify(step)}`);
}
