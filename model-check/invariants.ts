/**
 * What must hold in every state the checker reaches (docs/correctness.md, "Invariants"), judged
 * against the loyalty service's books, never against the bridge's own rules:
 *
 * - at most one booked accrual and one booked reversal per transactionId, and a reversal only of
 *   a booked accrual;
 * - no record claims another's operation: every operation a record holds was booked by a call of
 *   its own transactionId, of its own kind, and no two records hold one;
 * - the ledger never says what the books deny: `accrued` or `partially_accrued` only when an
 *   accrual is booked, `reversed` only when a reversal is, `failed` and `reverse_failed` only when the
 *   service refused, and nothing still to send (`pending`) that the service has booked already;
 * - once everything is settled, each customer's card holds what the orders and refunds should give.
 */
import { keyOf } from '../src/state/record.js';
import type { World } from './world.js';

/** The first invariant the state breaks, in words; undefined when all hold. */
export function safetyViolation(world: World): string | undefined {
  const { operations, transactions, refused, refusedReversals } = world.fake.state;
  for (const [id, tx] of Object.entries(transactions)) {
    if (tx.accruals > 1) return `the loyalty service booked ${tx.accruals} accruals of ${id}`;
    if (tx.reversals > 1) return `the loyalty service booked ${tx.reversals} reversals of ${id}`;
    if (tx.reversals > tx.accruals) return `the loyalty service booked a reversal of ${id} without an accrual`;
  }
  const byId = new Map(operations.map((op) => [op.id, op]));
  const claimedBy = new Map<number, string>();
  const records = world.records().sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1));
  for (const r of records) {
    const claims = [...r.accrual.operationIds.map((id) => ({ id, kind: 'accrual' as const })), ...(r.reversal.operationIds ?? []).map((id) => ({ id, kind: 'reversal' as const }))];
    for (const { id, kind } of claims) {
      const op = byId.get(id);
      if (!op) return `${r.transactionId} claims operation ${id}, which the loyalty service never booked`;
      // Settled by the count rule, an accrual's operation may be any of its counted group's (record.ts
      // `countedWith`): the same card and sum, all of them booked, which is whose not told apart.
      // The group is mutual: the one counted first names the others, who may then settle plainly.
      const owner = records.find((o) => o.transactionId === op.transactionId);
      const counted =
        op.kind === kind &&
        (kind === 'accrual'
          ? (r.accrual.countedWith ?? []).includes(op.transactionId) || (owner?.accrual.countedWith ?? []).includes(r.transactionId)
          : (r.reversal.countedWith ?? []).includes(op.transactionId) || (owner?.reversal.countedWith ?? []).includes(r.transactionId));
      if ((op.transactionId !== r.transactionId && !counted) || op.kind !== kind) return `${r.transactionId} claims operation ${id} as its ${kind}, but it is the ${op.kind} of ${op.transactionId}`;
      const other = claimedBy.get(id);
      if (other) return `operation ${id} is claimed by ${other} and by ${r.transactionId}`;
      claimedBy.set(id, r.transactionId);
    }
    const tx = transactions[r.transactionId];
    const accruals = tx?.accruals ?? 0;
    const reversals = tx?.reversals ?? 0;
    const callOut = (operation: 'accrue' | 'reverse') => world.fake.outstandingCalls().some((c) => c.transactionId === r.transactionId && c.operation === operation);
    if ((r.accrual.state === 'accrued' || r.accrual.state === 'partially_accrued') && accruals === 0) return `the ledger says ${r.transactionId} is ${r.accrual.state}, but the loyalty service booked no accrual of it`;
    if (r.accrual.state === 'failed' && (accruals > 0 || !refused.includes(r.transactionId))) return `the ledger says the loyalty service refused ${r.transactionId}, but ${accruals > 0 ? 'it booked the accrual' : 'it did not refuse it'}`;
    if (r.accrual.state === 'pending' && accruals > 0 && !r.inFlight && !callOut('accrue')) return `the ledger has ${r.transactionId} still to accrue, but the loyalty service booked it already: the next accrue doubles it`;
    if (r.reversal.state === 'reversed' && reversals === 0) return `the ledger says ${r.transactionId} is reversed, but the loyalty service booked no reversal of it`;
    if (r.reversal.state === 'failed' && !refusedReversals.includes(r.transactionId)) return `the ledger says the loyalty service refused the reversal of ${r.transactionId}, but ${reversals > 0 ? 'it booked it' : 'it did not refuse it'}`;
    if (r.reversal.state === 'pending' && reversals > 0 && !r.inFlight && !callOut('reverse')) return `the ledger has ${r.transactionId} still to reverse, but the loyalty service reversed it already: the next reverse doubles it`;
  }
  if (world.problems.length > 0) return `the bridge threw where it must not: ${world.problems[0]}`;
  return undefined;
}

/** Once nothing is left to do, each customer's balance against what the orders and refunds should give (undefined: it matches, or it is too early to say). */
export function balanceViolation(world: World): string | undefined {
  // A reversal the service refused (reverse_failed) is a person's to finish: the balance is theirs to set right first.
  if (!world.settled() || world.records().some((r) => r.status === 'reverse_failed')) return undefined;
  const expected = expectedPoints(world);
  for (const customer of world.scenario.customers) {
    const want = expected.get(customer.card) ?? 0;
    const have = world.fake.balanceOf(customer.card);
    if (want !== have) return `everything is settled, but customer ${customer.name}'s card holds ${have} points where the orders and refunds give ${want}`;
  }
  return undefined;
}

/**
 * Points each card should hold: per order the bridge recorded, nothing when it was refunded whole,
 * what remains after a partial refund otherwise (one point per whole currency unit, as the service
 * credits), and nothing where the service itself refused the accrual of what remains (a person's,
 * shown in the attention queue as `failed`).
 */
export function expectedPoints(world: World): Map<string, number> {
  const points = new Map<string, number>();
  for (const order of world.scenario.orders) {
    const chain = world.chainOf(order.id);
    const last = chain.at(-1);
    if (!last) continue;
    const card = world.scenario.customers.find((c) => c.name === order.customer)!.card;
    let owed = 0;
    if (!world.facts.fullRefunds.includes(order.id) && !world.fake.state.refused.includes(last.transactionId)) {
      const partial = world.facts.partialRefunds.includes(order.id) ? world.scenario.partialRefund!.cents : 0;
      owed = Math.floor((order.amountCents - partial) / 100);
    }
    points.set(card, (points.get(card) ?? 0) + owed);
  }
  return points;
}
