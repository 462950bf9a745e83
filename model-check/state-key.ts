/**
 * When two states of the model are the same (docs/correctness.md, "State"). A state is what can
 * make a difference to what happens next: the ledger's records without their history text, attempt
 * log, version and absolute times (every time is kept relative to the clock: a nextAttemptAt 30 s
 * ahead is the same whenever it is); the learned reversal shape; the service's books and the calls
 * and reads it has not settled; each instance's liveness, its worker pass under way, the records
 * it has a pass or a call out for, and its rate-limit hold; the operator actions still running (a
 * bulk one with the record it is at); and, while exploring, which of the
 * scenario's events remain. A pass's position within its five steps is not part of the state:
 * states that differ only there are taken as one (the pass does the same whatever step it is on,
 * short of the fifth).
 */
import { hash } from 'node:crypto';
import { identitiesOf } from '../src/state/customer-index.js';
import type { LedgerRecord } from '../src/state/record.js';
import type { World } from './world.js';

/** `withScript`: include the events the scenario still allows (the explorer's states); without, what remains of the world only (the fault-free continuation's). */
export function stateKey(world: World, withScript: boolean): string {
  const now = world.nowMs;
  const rel = (time: string | undefined | null): number | null => (time ? Date.parse(time) - now : null);
  const records = [...world.store.state.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, r]) => recordView(r, rel));
  const settings = [...world.store.state.settings.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => {
    const shape = JSON.parse(value) as { eventId: number; sign: number; at?: string };
    return [name, shape.eventId, shape.sign, rel(shape.at)];
  });
  const { operations, transactions, refused, refusedReversals } = world.fake.state;
  const books = [
    operations.map((op) => [op.id, op.card, op.kind, op.transactionId, op.purchaseSum, op.createdAtMs - now]),
    Object.entries(transactions)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([id, tx]) => [id, tx.accruals, tx.reversals]),
    [...refused].sort(),
    [...refusedReversals].sort(),
  ];
  const calls = world.fake
    .outstandingCalls()
    .map((c) => [c.instance, c.live, c.lingering, c.operation, c.transactionId, c.sentAtMs - now])
    .sort(compareJson);
  const reads = world.fake
    .outstandingReads()
    .map((r) => [r.instance, r.card])
    .sort(compareJson);
  const keys = [...world.store.state.records.keys()].sort();
  const slots = world.slots.map((slot) => {
    const delivery = slot.core?.delivery;
    return [
      slot.index,
      slot.generation,
      slot.live,
      slot.tickPending,
      delivery ? keys.filter((k) => delivery.isRunning(k)) : [],
      delivery ? keys.filter((k) => delivery.calling.has(k)) : [],
      delivery?.learning ?? 0,
      slot.rateNotes.map((n) => n.at - now),
    ];
  });
  const script = withScript ? [world.budgets, world.facts] : [world.facts];
  // Operator actions still running, and where a bulk one is: alike otherwise, such states go on differently.
  const text = JSON.stringify([records, settings, books, calls, reads, slots, world.operatorWork(), script]);
  // One-shot: a Hash object per key (createHash, update, digest) was a few percent of the search.
  return hash('sha1', text, 'base64');
}

function recordView(r: LedgerRecord, rel: (time: string | undefined | null) => number | null): unknown[] {
  const { accrual: a, reversal: v } = r;
  return [
    r.transactionId,
    r.status,
    a.state,
    a.check?.amount ?? null,
    identitiesOf(a.customer),
    a.results.map((x) => [x.isSuccess, x.serialNumber ?? null, x.operationId ?? null]),
    a.operationIds,
    rel(a.inDoubtSince),
    a.waitingBehind ?? null,
    a.ambiguousWith ?? null,
    a.keyless ?? false,
    // The verifier weighs an accrual a person settled without naming its operation as a rival (history-verifier.ts `#settledByAPerson`).
    a.settledBy ?? null,
    // Settled without its operation named, until released: a rival by the time it was settled (history-verifier.ts `#rivals`).
    rel(a.personSettledAt),
    a.personSettledReleasedAt ? 1 : 0,
    a.countedWith ?? null,
    v.state,
    // A probe's reverse, not a refund's (transitions.ts `startProbe`).
    v.probe ? rel(v.probe.at) : null,
    v.refundIds,
    v.results.map((x) => [x.isSuccess, x.serialNumber ?? null, x.operationId ?? null, rel(x.reversedAt)]),
    rel(v.inDoubtSince),
    v.unknownUpstream ?? false,
    v.partial ? [v.partial.refundId, v.partial.refundedCents, v.partial.remainderTransactionId, v.partial.remainderCheck.amount, rel(v.partial.remainderInDoubtSince)] : null,
    v.partialRefundedCents ?? null,
    v.operationIds ?? null,
    v.shape ? [v.shape.eventId, v.shape.sign] : null,
    v.unproven ? rel(v.unproven.at) : null,
    v.countedWith ?? null,
    // A reversal a person settled without naming its entry is a rival of later ones while its last call could have left one (`#reversalRivals`).
    personSettledReversal(r) ? rel(r.attempts.filter((x) => x.operation === 'reverse').at(-1)?.startedAt) : null,
    r.parentTransactionId ?? null,
    r.remainderTransactionId ?? null,
    r.inFlight ? [r.inFlight.operation, rel(r.inFlight.startedAt), r.inFlight.owner] : null,
    r.rounds,
    rel(r.nextAttemptAt),
    rel(r.createdAt),
    rel(r.updatedAt),
    r.closed ? 1 : 0,
    r.acknowledged ? 1 : 0,
    r.changedRepeats?.count ?? 0,
  ];
}

/** Reversed without its entry noted or a confirmation from the service: a person's `resolve reversed`. */
function personSettledReversal(r: LedgerRecord): boolean {
  return r.reversal.state === 'reversed' && r.reversal.operationIds === undefined && !r.reversal.results.some((x) => x.reversedAt);
}

function compareJson(a: unknown, b: unknown): number {
  const [x, y] = [JSON.stringify(a), JSON.stringify(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}
