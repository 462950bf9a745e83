/**
 * Liveness (docs/correctness.md, "Liveness"): from a state, faults stop and the world runs on a
 * fair schedule: every call is booked and answered, every call given up on is booked, a crashed
 * instance restarts, every history read is answered, each instance's worker passes while work is
 * due, and time passes when nothing else moves. Every record must then settle by itself, except
 * where the contract leaves it to a person (`leftToAPerson`); a person asked anywhere else is a
 * violation. Those left to a person are then resolved by a truthful one (as the chaos campaign
 * does), the run goes on, and once everything is settled each customer's balance must be what the
 * orders and refunds give. The safety invariants are checked at every step too.
 *
 * How time passes (`TimeSteps`): to the next deadline while things move; once a look at the records
 * moved nothing, straight to the next deadline that can change what a look finds (the end of a
 * grace period, a lease, a clock-skew window, a rate-limit hold), skipping the rechecks in between,
 * which would find the same: a worker that looks less often is still a fair schedule. Once no such
 * deadline is left and every record the worker would look at was looked at since anything last
 * moved, nothing will move by itself any more: what is open then waits for a person.
 *
 * The continuation is deterministic, and a state it went through on its way to settling has a fair
 * schedule that settles (the rest of that run): those states are remembered (`settles`) and a later
 * continuation that reaches one stops there.
 */
import { identitiesOf } from '../src/state/customer-index.js';
import { dueOf, isOpen, isProbing, keyOf, type LedgerRecord } from '../src/state/record.js';
import { readShape } from '../src/core/reversal-shape.js';
import type { ResolveInput } from '../src/core/transitions.js';
import { workDue, nextDeadline, truthful } from './choices.js';
import { balanceViolation, safetyViolation } from './invariants.js';
import { TIMING } from './scenario.js';
import { stateKey } from './state-key.js';
import type { ModelEvent, World } from './world.js';
import { applyNoted } from './coverage.js';
import { centsEqualsMajor } from '../src/kernel/money.js';

/**
 * Steps of a continuation at most, a guard against a model that never stops: with the rechecks
 * skipped (`TimeSteps`), the longest continuations of the bounds take a few dozen steps.
 */
const MAX_STEPS = 5_000;

export interface LivenessResult {
  ok: boolean;
  /** The continuation's events in words (for a counterexample). */
  trace: string[];
  why?: string;
  /** What broke: an invariant (safety, or the balance once settled) on the way, or the records not settling without a person (liveness). */
  kind?: 'safety' | 'liveness';
  /** Events it applied, and whether it stopped at a state an earlier continuation had shown to settle. */
  steps: number;
  remembered: boolean;
}

export async function continueFaultFree(world: World, settles: Set<string>, describe = false): Promise<LivenessResult> {
  const trace: string[] = [];
  const seen: string[] = [];
  /** Per instance, the state at which its last worker pass moved nothing: not passed again until something changes. */
  const idleAt = new Map<number, string>();
  const time = new TimeSteps(world);
  let steps = 0;
  const step = async (event: ModelEvent, note?: string) => {
    if (describe) trace.push(`${world.describe(event)}${note ? ` (${note})` : ''}`);
    steps += 1;
    await applyNoted(world, event);
  };
  const failed = (kind: 'safety' | 'liveness', why: string): LivenessResult => ({ ok: false, kind, trace, why, steps, remembered: false });
  while (steps < MAX_STEPS) {
    const key = stateKey(world, false);
    if (settles.has(key)) return remember(seen, settles, { ok: true, trace, steps, remembered: true });
    seen.push(key);
    const broken = safetyViolation(world);
    if (broken) return failed('safety', broken);

    const read = world.fake.outstandingReads()[0];
    if (read) {
      await step({ kind: 'read', read: read.seq, order: 'oldest_first' });
      continue;
    }
    const calls = world.fake.outstandingCalls();
    const live = calls.find((c) => c.live && !c.lingering);
    if (live) {
      await step({ kind: 'fate', call: live.seq, fate: 'answered' });
      continue;
    }
    const given = calls[0];
    if (given) {
      await step(given.lingering ? { kind: 'late_commit', call: given.seq } : { kind: 'orphan', call: given.seq, booked: true });
      continue;
    }
    const down = world.slots.find((s) => !s.live);
    if (down) {
      await step({ kind: 'restart', instance: down.index });
      continue;
    }
    let passed = false;
    for (const slot of world.slots) {
      if (slot.tickPending || idleAt.get(slot.index) === key || !(await workDue(world, slot.index))) continue;
      await step({ kind: 'tick', instance: slot.index });
      if (stateKey(world, false) === key) idleAt.set(slot.index, key);
      passed = true;
      break;
    }
    if (passed) continue;
    if (world.settled()) {
      const wrong = balanceViolation(world);
      if (wrong) return failed('safety', wrong);
      return remember(seen, settles, { ok: true, trace, steps, remembered: false });
    }
    const target = time.next();
    if (target !== undefined) {
      // Not one of the scenario's time steps: the continuation may wait as long as it takes.
      world.budgets.timeSteps += 1;
      await step({ kind: 'time', toMs: target });
      time.passed(target);
      continue;
    }
    // Nothing moves by itself any more: what is open waits for a person. Only where the contract says so.
    const waiting = world.records().filter((r) => isOpen(r) || r.status === 'reverse_failed');
    let helped = false;
    for (const record of waiting) {
      const verdict = await leftToAPerson(world, record);
      if (!verdict.legitimate) return failed('liveness', `${record.transactionId} (${record.status}) waits for a person, though ${verdict.why}`);
      const action = personsAction(world, record);
      if (!action) continue;
      const slot = world.slots.find((s) => s.live)!;
      world.budgets.operatorActions += 1;
      await step({ kind: 'operator', ...action, key: keyOf(record), instance: slot.index }, `a person, as the contract leaves it to one: ${verdict.why}`);
      helped = true;
      break;
    }
    if (!helped) return failed('liveness', `nothing moves any more and ${waiting.map((r) => `${r.transactionId} (${r.status})`).join(', ')} never settle${waiting.length === 1 ? 's' : ''}`);
  }
  return failed('liveness', `the records do not settle within ${MAX_STEPS} steps of a fault-free, fair schedule`);
}

/**
 * Where the continuation's clock goes next, when nothing but time can move the world (see the
 * module's comment): undefined when nothing will move by itself any more.
 */
class TimeSteps {
  /** The records and books at the last time step. */
  #viewAtLastStep: string | undefined;
  /** Since when nothing moved: the view then, and each record's version then (a look writes the record it looked at). */
  #quiet: { view: string; versions: Map<string, number> } = { view: '', versions: new Map() };
  /** The next deadline that can change what a look finds, as of the last `next`. */
  #telling: number | undefined;

  constructor(private readonly world: World) {}

  next(): number | undefined {
    const view = progressView(this.world);
    if (view !== this.#quiet.view) this.#quiet = { view, versions: this.#versions() };
    const moved = view !== this.#viewAtLastStep;
    this.#viewAtLastStep = view;
    const next = nextDeadline(this.world);
    this.#telling = nextDeadline(this.world, { rechecks: false });
    if (moved) return next;
    // The last look moved nothing: the rechecks before the next deadline that matters would find the same.
    if (this.#telling !== undefined) return this.#telling;
    // None is left: rechecks until every record the worker looks at was looked at since the quiet began.
    return this.#lookedAtSinceQuiet() ? undefined : next;
  }

  /** After the clock moved to `toMs`: once past a deadline that can change what a look finds, every record must be looked at again. */
  passed(toMs: number): void {
    if (this.#telling !== undefined && toMs >= this.#telling) this.#quiet = { view: this.#quiet.view, versions: this.#versions() };
  }

  #versions(): Map<string, number> {
    return new Map(this.world.records().map((r) => [keyOf(r), r.version]));
  }

  #lookedAtSinceQuiet(): boolean {
    return this.world.records().every((r) => dueOf(r) === undefined || r.version !== this.#quiet.versions.get(keyOf(r)));
  }
}

/** The records' states and claims and the service's books: what moving means (rechecks that only reschedule do not count). */
function progressView(world: World): string {
  const records = world.records().map((r) => [r.transactionId, r.status, r.accrual.state, r.reversal.state, r.inFlight?.owner ?? null, r.accrual.operationIds, r.reversal.operationIds ?? null, r.accrual.ambiguousWith ?? null, r.reversal.unproven ? 1 : 0, r.remainderTransactionId ?? null]);
  return JSON.stringify([records, world.fake.state.transactions]);
}

function remember(seen: string[], settles: Set<string>, result: LivenessResult): LivenessResult {
  for (const key of seen) settles.add(key);
  return result;
}

/**
 * Whether the contract leaves this record to a person (docs/how-it-works.md and docs/operators.md,
 * "Evidence"), and why; judged from the service's books:
 * - an accrual in doubt that the history matches alike with another unsettled accrual whose
 *   identifiers share none of its own (one person known by a phone on one order and an email on the
 *   other: the bridge cannot tell they are one);
 * - a reversal in doubt when no reversal shape was learned for the merchant before the history was
 *   read for it, when the service did not book it (`not_reversed` is never concluded alone), or
 *   when another record of the card and amount has a reversal in doubt or booked without its
 *   entry claimed (the entries could be either's);
 * - a reversal the service refused (`reverse_failed`).
 * Anything else left to a person is a person asked where the history is unambiguous.
 */
export async function leftToAPerson(world: World, record: LedgerRecord): Promise<{ legitimate: boolean; why: string }> {
  const { transactions, refusedReversals, operations } = world.fake.state;
  if (record.status === 'reverse_failed') {
    return refusedReversals.includes(record.transactionId) ? { legitimate: true, why: 'the loyalty service refused the reversal' } : { legitimate: false, why: 'the loyalty service did not refuse its reversal' };
  }
  if (record.accrual.state === 'in_doubt') {
    const rivals = record.accrual.ambiguousWith ?? [];
    const mine = identitiesOf(record.accrual.customer);
    const disjoint = rivals.length > 0 && rivals.every((id) => {
      const other = world.records().find((r) => r.transactionId === id);
      return other !== undefined && !identitiesOf(other.accrual.customer).some((identity) => mine.includes(identity));
    });
    if (disjoint) return { legitimate: true, why: `the history matches it and ${rivals.join(', ')} alike, which the bridge cannot tell are one customer` };
    // A rival a person settled without its operation named (a resolve, or a probe proven by a person
    // after its answer was lost): its operation is somewhere in the history, unclaimed, and only a
    // person who reads the books can say which (history-verifier.ts `#rivals`).
    const personSettled = rivals.filter((id) => world.records().find((r) => r.transactionId === id)?.accrual.personSettledAt !== undefined);
    if (personSettled.length > 0) return { legitimate: true, why: `the history matches it and ${personSettled.join(', ')}, which a person settled without naming its operation, alike` };
    return { legitimate: false, why: rivals.length ? `its rivals ${rivals.join(', ')} share an identifier with it (the accrual keys should have kept them apart)` : 'the history settles an accrual in doubt' };
  }
  if (record.reversal.state === 'in_doubt') {
    const shape = await readShape(world.store, record.merchantId ?? 'default');
    if (!shape) return { legitimate: true, why: 'no reversal shape was learned for the merchant' };
    if (readBeforeTheShape(record.reversal.unproven, shape.at)) return { legitimate: true, why: 'the history was read for it before the reversal shape was learned' };
    if ((transactions[record.transactionId]?.reversals ?? 0) === 0) return { legitimate: true, why: 'the loyalty service did not book it, and not_reversed is never concluded alone' };
    const card = world.fake.customerOf(record.accrual.customer ?? {})?.card;
    const amount = record.accrual.check?.amount;
    const rival = world.records().find((r) => {
      if (r.transactionId === record.transactionId || r.accrual.check?.amount !== amount || world.fake.customerOf(r.accrual.customer ?? {})?.card !== card) return false;
      const booked = (transactions[r.transactionId]?.reversals ?? 0) > 0;
      return r.reversal.state === 'in_doubt' || r.inFlight?.operation === 'reverse' || (booked && !r.reversal.operationIds);
    });
    if (rival) return { legitimate: true, why: `${rival.transactionId}'s reversal of the same card and amount could have left the same entry` };
    const since = Date.parse(record.reversal.inDoubtSince!) - TIMING.clockSkewMs;
    const claimed = new Set(world.records().flatMap((r) => [...r.accrual.operationIds, ...(r.reversal.operationIds ?? [])]));
    const entries = operations.filter((op) => op.card === card && op.kind === 'reversal' && op.createdAtMs >= since && !claimed.has(op.id) && amount !== undefined && centsEqualsMajor(amount, Math.abs(op.purchaseSum)));
    if (entries.length > 1) return { legitimate: true, why: `the card shows ${entries.length} unclaimed reversal entries of that amount` };
    return { legitimate: false, why: 'the reversal shape is known, the service booked the reversal and its card shows its one entry, which no other record could have left' };
  }
  return { legitimate: false, why: 'the bridge moves such a record by itself' };
}

/**
 * Whether the history check that left a reversal unproven ran before the merchant's reversal shape
 * was learned. The model's clock stands still within a moment, so a check and a learning at the
 * same time are told apart by the verifier's reason (history-verifier.ts `verifyReversal`).
 */
function readBeforeTheShape(unproven: { at: string; why: string } | undefined, shapeAt: string | undefined): boolean {
  if (!unproven || !shapeAt) return false;
  const [read, learned] = [Date.parse(unproven.at), Date.parse(shapeAt)];
  return learned > read || (learned === read && unproven.why.startsWith('no reversal of this merchant has been confirmed'));
}

/** What a truthful person does with it: resolves it as the books say, or retries a reversal the service refused. */
function personsAction(world: World, record: LedgerRecord): { action: 'retry' | 'resolve'; outcome?: ResolveInput['outcome'] } | undefined {
  if (record.status === 'reverse_failed') return { action: 'retry' };
  // A probe's reverse in doubt is settled first: it settles the accrual (transitions.ts `resolve`).
  const candidates: ResolveInput['outcome'][] = record.accrual.state === 'in_doubt' && !isProbing(record) ? ['accrued', 'not_accrued'] : record.reversal.state === 'in_doubt' ? ['reversed', 'not_reversed'] : [];
  const outcome = candidates.find((o) => truthful(world, record, o));
  return outcome ? { action: 'resolve', outcome } : undefined;
}
