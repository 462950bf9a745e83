/**
 * One world of the model checker: the real core services (createCore: intake, delivery, recovery,
 * operator actions, with the real transitions and HistoryVerifier) of one or two bridge instances
 * over one in-memory ledger, the scripted loyalty service (fake-loyalty.ts), and a clock that moves
 * only when the explorer says time passes. Every event is applied, then the world is run until it
 * is quiescent: nothing can move any more except through a choice of the explorer (a call's fate, a
 * history read's order, the next event). See docs/correctness.md.
 *
 * Quiescence needs no timer: the core's work is promise chains over the in-memory store and the
 * fake service, so one turn of the event loop (`setImmediate`) drains it. The one timer on the way
 * is the answer budget (`deliverWithinBudget`); the model runs with a budget of zero, so a POS's
 * answer is given as soon as the pass blocks on a call, and what runs when that timer fires only
 * reads (the answer, metrics, the audit trail): the state never depends on when it fires.
 */
import { createCore, type Core } from '../src/core/core.js';
import type { Upstream, UpstreamDirectory } from '../src/core/delivery.js';
import { HistoryVerifier } from '../src/core/history-verifier.js';
import { Worker } from '../src/core/worker.js';
import { BridgeError, ConflictError } from '../src/kernel/errors.js';
import { emptyMemoryLedger, MemoryLedgerStore, type MemoryLedgerState } from '../src/ledger/memory-store.js';
import { isOpen, keyOf, ledgerKey, transactionIdOf, unreachable, type LedgerRecord, type ReversalShape } from '../src/state/record.js';
import { shapeSettingName } from '../src/core/reversal-shape.js';
import { DEFAULT_REVERSAL_ENTRY } from '../simulator/state.js';
import { DEFAULT_MERCHANT } from '../src/state/merchant.js';
import { silentLogger } from '../src/kernel/logger.js';
import type { CallReport } from '../src/loyalty/client.js';
import { createMetrics, type Metrics } from '../src/core/metrics.js';
import { RefundExceedsRemainderError } from '../src/core/remainder.js';
import type { OperatorActionName, ResolveInput } from '../src/core/transitions.js';
import { runBulk, type BulkRequest } from '../src/core/bulk.js';
import { deriveTransactionId } from '../src/kernel/transaction-id.js';
import { copyPlain } from '../src/ledger/plain-copy.js';
import { FakeLoyalty, FATE_WORDS, type Fate, type FakeLoyaltyState, type OutstandingCall } from './fake-loyalty.js';
import { TIMING, type OrderSpec, type Scenario } from './scenario.js';

/** The model's clock starts here; every time in a state is kept relative to the clock. */
export const EPOCH_MS = Date.parse('2026-03-02T09:00:00.000Z');
const POS = 'generic';

/** The ledger as several instances share it on PostgreSQL: a call marked in flight by another live instance is left alone until its lease ends. */
export class SharedMemoryLedgerStore extends MemoryLedgerStore {
  readonly sharedByInstances = true;
}

export type ModelEvent =
  | { kind: 'checkout'; order: string; instance: number }
  /** The register's ACCRUE of the order's check (src/core/register.ts): recorded, answered, delivered in the background. */
  | { kind: 'register_accrue'; order: string; instance: number }
  | { kind: 'refund'; refund: 'full' | 'partial'; instance: number }
  | { kind: 'tick'; instance: number }
  | { kind: 'fate'; call: number; fate: Fate }
  | { kind: 'orphan'; call: number; booked: boolean }
  | { kind: 'late_commit'; call: number }
  | { kind: 'read'; read: number; order: 'oldest_first' | 'newest_first' }
  | { kind: 'crash'; instance: number }
  | { kind: 'restart'; instance: number }
  | { kind: 'time'; toMs: number }
  | { kind: 'operator'; action: OperatorActionName; outcome?: ResolveInput['outcome']; key: string; instance: number }
  /** The console's bulk action: one action over the records a person ticked (two or more; one is the single action). */
  | { kind: 'bulk'; action: Exclude<OperatorActionName, 'close' | 'ask'>; outcome?: ResolveInput['outcome']; keys: string[]; instance: number };

/** A bridge instance's place in the world: its core while it runs, nothing once it crashed. */
interface Slot {
  index: number;
  generation: number;
  live: boolean;
  core?: Core;
  worker?: Worker;
  /** The worker's scheduled pass under way (a pass never overlaps the next). */
  tickPending: boolean;
  /**
   * What the instance's rate-limit holds were told (RateLimitPauses.note: a 429 round, or an answer
   * that ends a hold), with when: kept in memory by the instance, so part of the state.
   */
  rateNotes: { at: number }[];
}

/** Remaining events of the scenario's script. */
interface Budgets {
  deliveries: Record<string, number>;
  /** The register's ACCRUEs left, by order. */
  registerDeliveries: Record<string, number>;
  fullRefund: number;
  partialRefund: number;
  crashes: number;
  timeSteps: number;
  operatorActions: number;
}

/** What the POS and the operator did: what the customers' balances should come to. */
interface Facts {
  /** Orders refunded whole (by the POS or an operator's reverse). */
  fullRefunds: string[];
  /** Orders a partial refund of which the bridge took. */
  partialRefunds: string[];
}

/** Everything of a quiescent world with no live call or read pending: enough to build it again without replaying its past. */
export interface WorldSnapshot {
  nowMs: number;
  ledger: MemoryLedgerState;
  fake: FakeLoyaltyState;
  slots: Pick<Slot, 'index' | 'generation' | 'live' | 'rateNotes'>[];
  budgets: Budgets;
  facts: Facts;
}

export class World {
  nowMs = EPOCH_MS;
  readonly store: MemoryLedgerStore;
  readonly fake: FakeLoyalty;
  readonly slots: Slot[] = [];
  budgets: Budgets;
  facts: Facts = { fullRefunds: [], partialRefunds: [] };
  /** Exceptions the bridge threw that no POS or operator should ever see: each is a finding. */
  readonly problems: string[] = [];
  /** The situations of issue 20's world the events applied to this world went through (coverage.ts). */
  readonly covered = new Set<string>();
  readonly #clock = () => new Date(this.nowMs);
  /**
   * Operator actions still running (waiting on a call or a history read), each as what it is and,
   * for a bulk one, the record it is at: part of the state, since two states alike in everything
   * else go on differently (a single resolve of A ends there; a bulk resolve of A and B goes on to B).
   */
  readonly #operatorWork = new Map<number, { instance: number; what: () => string }>();
  #nextWork = 0;

  private constructor(
    readonly scenario: Scenario,
    snapshot?: WorldSnapshot,
  ) {
    const ledger = snapshot ? copyLedger(snapshot.ledger) : emptyMemoryLedger();
    this.store = scenario.instances > 1 ? new SharedMemoryLedgerStore(ledger) : new MemoryLedgerStore(ledger);
    this.fake = snapshot ? new FakeLoyalty(copyPlain(snapshot.fake), () => this.nowMs) : FakeLoyalty.empty(copyPlain(scenario.customers), () => this.nowMs);
    this.budgets = snapshot
      ? copyPlain(snapshot.budgets)
      : {
          deliveries: Object.fromEntries(scenario.orders.map((o) => [o.id, o.deliveries])),
          registerDeliveries: Object.fromEntries(scenario.orders.map((o) => [o.id, o.register ?? 0])),
          fullRefund: scenario.fullRefund?.deliveries ?? 0,
          partialRefund: scenario.partialRefund?.deliveries ?? 0,
          crashes: scenario.crashes,
          timeSteps: scenario.timeSteps,
          operatorActions: scenario.operatorActions,
        };
    if (snapshot) {
      this.nowMs = snapshot.nowMs;
      this.facts = copyPlain(snapshot.facts);
    }
  }

  static async create(scenario: Scenario): Promise<World> {
    const world = new World(scenario);
    await world.store.init();
    if (scenario.reversalShapeKnown) {
      // As the fake books a reversal (fake-loyalty.ts, the simulator's default entry).
      const shape: ReversalShape = { eventId: DEFAULT_REVERSAL_ENTRY.eventId, sign: DEFAULT_REVERSAL_ENTRY.sign, learnedFrom: 'an earlier refund', at: new Date(world.nowMs).toISOString() };
      await world.store.putSetting(shapeSettingName(DEFAULT_MERCHANT), JSON.stringify(shape));
    }
    for (let index = 0; index < scenario.instances; index++) {
      world.slots.push({ index, generation: 1, live: true, tickPending: false, rateNotes: [] });
      world.#start(world.slots[index]!);
    }
    return world;
  }

  /** The world as it was when `snapshot` was taken: the same ledger, books, clock, instances (their ids and rate-limit holds). */
  static async restore(scenario: Scenario, snapshot: WorldSnapshot): Promise<World> {
    const world = new World(scenario, snapshot);
    await world.store.init();
    for (const saved of snapshot.slots) {
      const slot: Slot = { ...copyPlain(saved), tickPending: false };
      world.slots.push(slot);
      if (!slot.live) continue;
      world.#start(slot);
      // The holds this instance had, told again what it was told, at the times it was told.
      for (const note of slot.rateNotes) slot.core!.delivery.rateLimits.note(DEFAULT_MERCHANT, RATE_LIMITED, note.at);
    }
    return world;
  }

  /** Only when quiescent with no live call or read pending (`calm`). */
  snapshot(): WorldSnapshot {
    if (!this.calm()) throw new Error('a snapshot was asked for while work is pending');
    return {
      nowMs: this.nowMs,
      ledger: copyLedger(this.store.state),
      fake: this.fake.snapshot(),
      slots: this.slots.map(({ index, generation, live, rateNotes }) => ({ index, generation, live, rateNotes: copyPlain(rateNotes) })),
      budgets: copyPlain(this.budgets),
      facts: copyPlain(this.facts),
    };
  }

  /** Nothing pending in any instance: no live call or history read out, no worker pass, no pass or reversal being noted. */
  calm(): boolean {
    if (this.#operatorWork.size > 0) return false;
    if (this.fake.outstandingReads().length > 0) return false;
    if (this.fake.outstandingCalls().some((c) => c.live && !c.lingering)) return false;
    for (const slot of this.slots) {
      if (!slot.live) continue;
      if (slot.tickPending || slot.core!.delivery.learning > 0) return false;
      for (const key of this.store.state.records.keys()) if (slot.core!.delivery.isRunning(key) || slot.core!.delivery.calling.has(key)) return false;
    }
    return true;
  }

  instanceId(slot: { index: number; generation: number }): string {
    return `bridge-${slot.index + 1}#${slot.generation}`;
  }

  order(id: string): OrderSpec {
    const order = this.scenario.orders.find((o) => o.id === id);
    if (!order) throw new Error(`no order ${id} in scenario ${this.scenario.name}`);
    return order;
  }

  transactionIdOf(order: string): string {
    return deriveTransactionId(POS, order);
  }

  records(): LedgerRecord[] {
    return [...this.store.state.records.values()];
  }

  /** Applies one event and runs the world until it is quiescent (coverage.ts' applyNoted also notes what it went through). */
  async apply(event: ModelEvent): Promise<void> {
    switch (event.kind) {
      case 'checkout':
      case 'register_accrue': {
        const register = event.kind === 'register_accrue';
        (register ? this.budgets.registerDeliveries : this.budgets.deliveries)[event.order]! -= 1;
        const order = this.order(event.order);
        const customer = this.scenario.customers.find((c) => c.name === order.customer)!;
        const check = { amount: order.amountCents, currency: 'USD', selections: [{ id: 'sku-1', quantity: 1, price: order.amountCents, totalPrice: order.amountCents }] };
        const identity = order.by === 'phone' ? { phone: customer.phone } : order.by === 'email' ? { email: customer.email } : { serialNumber: customer.card };
        const intake = this.#core(event.instance).intake;
        const intent = { orderId: order.id, check, customer: identity };
        // The register's ACCRUE goes through the intake as src/core/register.ts sends it: answered once recorded, delivered in the background.
        const taken = register ? intake.checkout(POS, intent, DEFAULT_MERCHANT, { via: 'register', receivedAt: this.#clock().toISOString() }, { background: true }) : intake.checkout(POS, intent);
        this.#watch(`${register ? "register's ACCRUE of" : 'checkout'} ${order.id}`, taken);
        break;
      }
      case 'refund': {
        const spec = event.refund === 'full' ? this.scenario.fullRefund! : this.scenario.partialRefund!;
        if (event.refund === 'full') {
          this.budgets.fullRefund -= 1;
          if (!this.facts.fullRefunds.includes(spec.order)) this.facts.fullRefunds.push(spec.order);
          const intake = this.#core(event.instance).intake;
          const taken = spec.register
            ? // The register's REVERSE: the whole sale back, answered once recorded, delivered in the background (src/core/register.ts).
              intake.reverseSale(ledgerKey(DEFAULT_MERCHANT, this.transactionIdOf(spec.order)), `F-${spec.order}`, 'reversed at the register', { arrival: { via: 'register', receivedAt: this.#clock().toISOString() }, background: true })
            : intake.refund(POS, { orderId: spec.order, refundId: `F-${spec.order}` });
          // Refused for now while a probe asks about the accrual (409, "deliver the refund again"): the POS delivers it again later.
          this.#watch(`full refund of ${spec.order}`, taken, (error) => this.#deliverAgain(error, 'full'));
        } else {
          this.budgets.partialRefund -= 1;
          const cents = this.scenario.partialRefund!.cents;
          const taken = this.#core(event.instance).intake.refund(POS, { orderId: spec.order, refundId: `P-${spec.order}`, amountCents: cents });
          // Taken unless the bridge answers that nothing remains to refund (a full refund came first): the customer then keeps nothing of the order anyway.
          this.#watch(`partial refund of ${spec.order}`, taken, (error) => error instanceof RefundExceedsRemainderError || this.#deliverAgain(error, 'partial'));
          if (!this.facts.partialRefunds.includes(spec.order)) this.facts.partialRefunds.push(spec.order);
        }
        break;
      }
      case 'tick': {
        const slot = this.slots[event.instance]!;
        slot.tickPending = true;
        const generation = slot.generation;
        this.#watch(
          `worker pass of ${this.instanceId(slot)}`,
          slot.worker!.reconcile(false).finally(() => {
            if (slot.generation === generation) slot.tickPending = false;
          }),
        );
        break;
      }
      case 'fate': {
        const call = this.#outstanding(event.call);
        const slot = this.slots.find((s) => s.live && this.instanceId(s) === call.instance);
        if (!slot) throw new Error(`call ${event.call} has no live instance`);
        // What the instance's rate-limit holds will be told (RateLimitPauses.note), kept for snapshots.
        // An answer ends a hold whatever came before it, so only the 429 rounds since the last answer are kept.
        if (event.fate === 'rate_limited') slot.rateNotes.push({ at: this.nowMs });
        if (event.fate === 'answered' || event.fate === 'results_failed') slot.rateNotes = [];
        this.fake.settle(event.call, event.fate);
        break;
      }
      case 'orphan':
        this.fake.settleOrphan(event.call, event.booked);
        break;
      case 'late_commit':
        this.fake.lateCommit(event.call);
        break;
      case 'read':
        this.fake.answerRead(event.read, event.order);
        break;
      case 'crash': {
        const slot = this.slots[event.instance]!;
        this.budgets.crashes -= 1;
        this.fake.crash(this.instanceId(slot));
        // The person's request to it dies with it.
        for (const [id, work] of this.#operatorWork) if (work.instance === event.instance) this.#operatorWork.delete(id);
        // Everything not in the ledger is lost: its core, its passes (left waiting for answers that never come), its holds.
        Object.assign(slot, { live: false, core: undefined, worker: undefined, tickPending: false, rateNotes: [] });
        break;
      }
      case 'restart': {
        const slot = this.slots[event.instance]!;
        slot.generation += 1;
        slot.live = true;
        this.#start(slot);
        // As src/bridge.ts does at start-up, before it takes any request.
        this.#watch(`recovery of ${this.instanceId(slot)}`, slot.core!.recovery.recoverInterrupted());
        break;
      }
      case 'time':
        this.budgets.timeSteps -= 1;
        this.nowMs = event.toMs;
        break;
      case 'operator': {
        this.budgets.operatorActions -= 1;
        const act = { actor: 'operator', reason: 'model check' };
        const operator = this.#core(event.instance).operator;
        // The record may change between the person's choice and the action's write (a worker pass settles it
        // meanwhile): the action is then refused with a 409 that says so, the console's answer to a race.
        const version = this.store.state.records.get(event.key)?.version;
        const overtaken = (error: unknown) => error instanceof ConflictError && this.store.state.records.get(event.key)?.version !== version;
        const action = event.action;
        const what = `operator ${action}${event.outcome ? ` ${event.outcome}` : ''} of ${event.key}`;
        const run = (work: Promise<unknown>) => this.#watch(what, this.#operatorRunning(event.instance, () => what, work), overtaken);
        switch (action) {
          case 'reverse':
            this.#notePersonsRefund(event.key);
            run(operator.reverse(event.key, act));
            break;
          case 'retry':
            run(operator.retry(event.key, act));
            break;
          case 'resolve':
            run(operator.resolve(event.key, { outcome: event.outcome! }, act));
            break;
          case 'acknowledge':
            run(operator.acknowledge(event.key, act));
            break;
          case 'close':
            run(operator.close(event.key, act));
            break;
          case 'ask':
            run(operator.ask(event.key, act));
            break;
          default:
            unreachable(action);
        }
        break;
      }
      case 'bulk': {
        this.budgets.operatorActions -= 1;
        const act = { actor: 'operator', reason: 'model check' };
        const versions = new Map(event.keys.map((key) => [key, this.store.state.records.get(key)?.version]));
        if (event.action === 'reverse') for (const key of event.keys) this.#notePersonsRefund(key);
        const ids = event.keys.map((key) => transactionIdOf(key));
        const request: BulkRequest = event.action === 'resolve' ? { act, global: false, action: 'resolve', outcome: event.outcome!, ids } : { act, global: false, action: event.action, ids };
        // The operator's own bulk (runBulk, as OperatorActions.bulk runs it), its single-record actions seen going by:
        // which record it is at is part of the state while it runs.
        const operator = this.#core(event.instance).operator;
        let at = '';
        const seen = <A extends unknown[], R>(single: (key: string, ...rest: A) => Promise<R>) => (key: string, ...rest: A) => ((at = key), single.call(operator, key, ...rest));
        const actions = { retry: seen(operator.retry), reverse: seen(operator.reverse), resolve: seen(operator.resolve), close: seen(operator.close), acknowledge: seen(operator.acknowledge) };
        const what = `operator bulk ${event.action}${event.outcome ? ` ${event.outcome}` : ''} of ${ids.join(', ')}`;
        // A record refused is a problem unless it changed between the person's ticks and the action (a race the answer reports).
        const work = runBulk(request, { actions, store: this.store, now: this.#clock }).then((outcome) => {
          const unexplained = outcome.refused.filter((r) => this.store.state.records.get(ledgerKey(DEFAULT_MERCHANT, r.id))?.version === versions.get(ledgerKey(DEFAULT_MERCHANT, r.id)));
          if (unexplained.length) throw new Error(`bulk ${event.action} refused ${unexplained.map((r) => `${r.id} (${r.why})`).join(', ')}`);
        });
        this.#watch(what, this.#operatorRunning(event.instance, () => `${what}, at ${at}`, work));
        break;
      }
      default:
        unreachableEvent(event);
    }
    await quiescent();
  }

  /** The event in words, as a line of a counterexample (read before it is applied). */
  describe(event: ModelEvent): string {
    const at = `[${this.clockText()}]`;
    switch (event.kind) {
      case 'checkout': {
        const order = this.order(event.order);
        const left = this.budgets.deliveries[order.id]!;
        const again = left < order.deliveries ? ' again' : '';
        return `${at} POS delivers checkout ${order.id}${again} (customer ${order.customer} by ${order.by}, ${(order.amountCents / 100).toFixed(2)}) to ${this.#name(event.instance)}`;
      }
      case 'register_accrue': {
        const order = this.order(event.order);
        const again = this.budgets.registerDeliveries[order.id]! < (order.register ?? 0) ? ' again, under a new call id' : '';
        return `${at} register sends ACCRUE of ${order.id}${again} (card of ${order.customer}, ${(order.amountCents / 100).toFixed(2)}) to ${this.#name(event.instance)}`;
      }
      case 'refund': {
        const spec = event.refund === 'full' ? this.scenario.fullRefund! : this.scenario.partialRefund!;
        const left = event.refund === 'full' ? this.budgets.fullRefund : this.budgets.partialRefund;
        const again = left < spec.deliveries ? ' again' : '';
        const what = event.refund === 'full' ? `full refund F-${spec.order}` : `partial refund P-${spec.order} of ${(this.scenario.partialRefund!.cents / 100).toFixed(2)}`;
        if (spec.register) return `${at} register sends REVERSE of ${spec.order}'s ACCRUE${again ? ' again, with the same call id' : ''} to ${this.#name(event.instance)}`;
        return `${at} POS delivers ${what}${again} of ${spec.order} to ${this.#name(event.instance)}`;
      }
      case 'tick':
        return `${at} ${this.#name(event.instance)}: worker pass`;
      case 'fate': {
        const call = this.#outstanding(event.call);
        return `${at} loyalty service: ${call.operation} ${call.transactionId} from ${call.instance} → ${FATE_WORDS[event.fate]}`;
      }
      case 'orphan': {
        const call = this.#outstanding(event.call);
        return `${at} loyalty service: ${call.operation} ${call.transactionId} from ${call.instance} (crashed) → ${event.booked ? 'booked (the answer reaches nobody)' : 'not booked'}`;
      }
      case 'late_commit': {
        const call = this.#outstanding(event.call);
        return `${at} loyalty service: books ${call.operation} ${call.transactionId} from ${call.instance} late, after its timeout`;
      }
      case 'read': {
        const read = this.fake.outstandingReads().find((r) => r.seq === event.read)!;
        return `${at} loyalty service: history of card ${read.card} read by ${read.instance} → listed ${event.order === 'oldest_first' ? 'oldest first' : 'newest first'}`;
      }
      case 'crash':
        return `${at} ${this.#name(event.instance)} crashes (everything not in the ledger is lost)`;
      case 'restart':
        return `${at} bridge-${event.instance + 1} restarts as ${this.instanceId({ index: event.instance, generation: this.slots[event.instance]!.generation + 1 })} (start-up recovery)`;
      case 'time':
        return `${at} time passes: +${(event.toMs - this.nowMs) / 1000} s`;
      case 'operator':
        return `${at} operator (console, on ${this.#name(event.instance)}): ${event.action}${event.outcome ? ` ${event.outcome}` : ''} ${event.key}`;
      case 'bulk':
        return `${at} operator (console, on ${this.#name(event.instance)}): bulk ${event.action}${event.outcome ? ` ${event.outcome}` : ''} of ${event.keys.join(', ')}`;
      default:
        return unreachableEvent(event);
    }
  }

  /** The clock as seconds since the world began. */
  clockText(): string {
    return `t+${((this.nowMs - EPOCH_MS) / 1000).toFixed(0)}s`;
  }

  /** Where things stand, in a few lines: for the end of a counterexample. */
  summary(): string[] {
    const lines: string[] = [];
    for (const r of this.records().sort((a, b) => keyOf(a).localeCompare(keyOf(b)))) {
      const flight = r.inFlight ? `, ${r.inFlight.operation} in flight (${r.inFlight.owner})` : '';
      const claims = [...r.accrual.operationIds.map((id) => `accrual op ${id}`), ...(r.reversal.operationIds ?? []).map((id) => `reversal op ${id}`)];
      lines.push(`ledger ${r.transactionId}: ${r.status} (accrual ${r.accrual.state}, reversal ${r.reversal.state}${flight}${claims.length ? `; claims ${claims.join(', ')}` : ''})`);
    }
    for (const [id, tx] of Object.entries(this.fake.state.transactions).sort()) lines.push(`service books ${id}: ${tx.accruals} accrual(s), ${tx.reversals} reversal(s)`);
    for (const op of this.fake.state.operations) lines.push(`service operation ${op.id}: card ${op.card}, ${op.kind} of ${op.transactionId}, purchaseSum ${op.purchaseSum}, at t+${(op.createdAtMs - EPOCH_MS) / 1000}s`);
    for (const call of this.fake.outstandingCalls()) lines.push(`call out: ${call.operation} ${call.transactionId} from ${call.instance}${call.live ? '' : ' (crashed)'}${call.lingering ? ' (timed out, to be booked)' : ''}`);
    return lines;
  }

  #name(index: number): string {
    return this.instanceId(this.slots[index]!);
  }

  #core(index: number): Core {
    const core = this.slots[index]?.core;
    if (!core) throw new Error(`instance ${index + 1} is not running`);
    return core;
  }

  #outstanding(seq: number): OutstandingCall {
    const call = this.fake.outstandingCalls().find((c) => c.seq === seq);
    if (!call) throw new Error(`no outstanding call ${seq}`);
    return call;
  }

  /** A new core for the slot: the real services, this world's clock, the fake service's calls and history for its instance id. */
  #start(slot: Slot): void {
    const id = this.instanceId(slot);
    const verifier = new HistoryVerifier(this.fake.readerFor(id), this.store, { graceMs: TIMING.graceMs, clockSkewMs: TIMING.clockSkewMs });
    const upstream: Upstream = { calls: this.fake.callsFor(id), verifier, suspended: false, ambiguity: this.scenario.ambiguity ?? 'person' };
    const upstreams: UpstreamDirectory = {
      upstreamOf: async (merchantId) => (merchantId === DEFAULT_MERCHANT ? upstream : undefined),
      canVerifyAny: async () => true,
    };
    const core = createCore({
      store: this.store,
      upstreams,
      options: {
        // Zero: a POS is answered as soon as the pass waits for a call (see the module's comment).
        answerBudgetMs: 0,
        retryBaseMs: TIMING.retryBaseMs,
        inDoubtVerifyAfterMs: TIMING.inDoubtVerifyAfterMs,
        partialRefundPolicy: 'reaccrue',
        inFlightLeaseMs: TIMING.inFlightLeaseMs,
      },
      logger: silentLogger,
      metrics: modelMetrics(),
      clock: this.#clock,
    });
    // The instance's id names its in-flight markers: fixed, so that replaying a path gives the same ledger.
    (core.delivery as { instanceId: string }).instanceId = id;
    slot.core = core;
    slot.worker = new Worker(this.store, core.delivery, { intervalMs: 1000, concurrency: 8, leaseMs: TIMING.inFlightLeaseMs, idleMs: 0 }, silentLogger);
  }

  /**
   * Follows what an event started: a refusal a POS or operator may meet (`expected`) is part of the
   * contract; any other exception is a problem the checker reports.
   */
  /**
   * A refund the bridge asked to be delivered again (a probe under way, transitions.ts
   * `refuseWhileProbing`; nothing of it was recorded): its delivery is not used up, and until one is
   * taken the books owe nothing for it. (The fault-free continuation delivers nothing from the POS:
   * a POS's retries of a refused refund are the explored deliveries, within the scenario's bound.)
   */
  #deliverAgain(error: unknown, refund: 'full' | 'partial'): boolean {
    if (!(error instanceof ConflictError) || !/deliver the refund again/.test(error.message)) return false;
    const order = (refund === 'full' ? this.scenario.fullRefund : this.scenario.partialRefund)!.order;
    if (refund === 'full') {
      this.budgets.fullRefund += 1;
      this.facts.fullRefunds = this.facts.fullRefunds.filter((o) => o !== order);
    } else {
      this.budgets.partialRefund += 1;
      this.facts.partialRefunds = this.facts.partialRefunds.filter((o) => o !== order);
    }
    return true;
  }

  #watch(what: string, work: Promise<unknown>, expected: (error: unknown) => boolean = () => false): void {
    work.catch((error: unknown) => {
      if (expected(error)) return;
      this.problems.push(`${what} failed: ${error instanceof BridgeError ? `${error.constructor.name} ${error.message}` : (error as Error)?.stack ?? String(error)}`);
    });
  }

  /** `work`, kept among the operator actions running until it ends (`operatorWork`). */
  #operatorRunning<T>(instance: number, what: () => string, work: Promise<T>): Promise<T> {
    const id = this.#nextWork++;
    this.#operatorWork.set(id, { instance, what });
    return work.finally(() => this.#operatorWork.delete(id));
  }

  /** What the operator actions running are, for the state key. */
  operatorWork(): string[] {
    return [...this.#operatorWork.values()].map((work) => `${work.instance} ${work.what()}`).sort();
  }

  /** A person's reverse refunds the order whole: what the customer's balance should come to then. */
  #notePersonsRefund(key: string): void {
    const root = this.records().find((r) => keyOf(r) === key)!;
    if (!this.facts.fullRefunds.includes(root.orderId)) this.facts.fullRefunds.push(root.orderId);
  }

  /** The records of an order: the original and its remainders, in order. */
  chainOf(order: string): LedgerRecord[] {
    const chain: LedgerRecord[] = [];
    for (let key: string | undefined = ledgerKey(DEFAULT_MERCHANT, this.transactionIdOf(order)); key; ) {
      const record = this.store.state.records.get(key);
      if (!record) break;
      chain.push(record);
      key = record.remainderTransactionId ? ledgerKey(DEFAULT_MERCHANT, record.remainderTransactionId) : undefined;
    }
    return chain;
  }

  /** Nothing left to do: no call or read out, no open record. */
  settled(): boolean {
    return this.fake.outstandingCalls().length === 0 && this.fake.outstandingReads().length === 0 && this.records().every((r) => !isOpen(r));
  }

}

/**
 * The ledger's maps copied, its records shared, not cloned: the memory store replaces a record on
 * every write and hands out copies, never changing a stored one in place. Each record is frozen
 * once, so that anything changing one in place would throw instead of changing a snapshot. The
 * audit trail and kept payloads are not part of a state (only read by people), so not kept.
 */
function copyLedger(state: MemoryLedgerState): MemoryLedgerState {
  for (const record of state.records.values()) deepFreeze(record);
  return {
    records: new Map(state.records),
    operationClaims: new Map(state.operationClaims),
    accrualKeys: new Map(state.accrualKeys),
    webhookEvents: new Set(state.webhookEvents),
    deliveryBindings: new Map(state.deliveryBindings),
    deadLetters: structuredClone(state.deadLetters),
    merchants: structuredClone(state.merchants),
    audit: [],
    backfill: structuredClone(state.backfill),
    payloads: new Map(),
    settings: new Map(state.settings),
  };
}

function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
}

/**
 * One set of metrics for every core of every world: the core only writes them, never decides from
 * them, and a new registry per core (one per replayed state) was a tenth of the checker's time.
 */
let sharedMetrics: Metrics | undefined;
function modelMetrics(): Metrics {
  sharedMetrics ??= createMetrics(undefined, false);
  return sharedMetrics;
}

/** A round that ended in 429s (its last request answered 429), as RateLimitPauses.note reads it. */
const RATE_LIMITED: CallReport = { outcome: { kind: 'retryable', reason: '429' }, attempts: [{ operation: 'accrue', startedAt: '', finishedAt: '', request: null, response: { status: 429, body: '' } }] };

/** Runs everything the last event set moving until only the explorer's choices can move the world (see the module's comment). */
export function quiescent(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function unreachableEvent(event: never): never {
  throw new Error(`unhandled event ${JSON.stringify(event)}`);
}
