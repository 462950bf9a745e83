/**
 * What the search went through (docs/correctness.md, "Bounds"): named situations of issue 20's
 * world, noted as each event is applied, so that each run shows, and the model check's test
 * asserts, that the CI scenarios together reach every one. A bound trimmed too far shows here as
 * a situation no scenario reaches any more. Coverage is about the paths explored, not part of a state.
 */
import { isAccrualUnsettled, keyOf } from '../src/state/record.js';
import { FATES } from './fake-loyalty.js';
import type { ModelEvent, World } from './world.js';

/** What the CI scenarios must reach together: issue 20's "The world", item 2, one situation a line. */
export const REQUIRED_COVERAGE: readonly string[] = [
  ...FATES.flatMap((fate) => [`accrue → ${fate}`, `reverse → ${fate}`]),
  'crashed instance\'s call booked',
  'crashed instance\'s call not booked',
  'timed-out call booked late',
  'checkout delivered again',
  "register's ACCRUE after its webhook",
  "webhook after its register's ACCRUE",
  "register's ACCRUE again under a new call id",
  "register's REVERSE",
  'full refund delivered again',
  'full refund before its sale settled',
  'partial refund before its sale settled',
  'partial refund after its sale settled',
  'full refund after a partial refund',
  'accrual waited behind another of the customer and amount',
  'accrual ambiguous with another of the customer',
  'history listed newest first',
  'history read in pages',
  'worker pass',
  'crash',
  'restart took over its crashed call',
  'in-flight lease ended, call taken over by the other instance',
  'checkout delivered to the second instance',
  'operator retry',
  'operator reverse',
  'operator resolve accrued',
  'operator resolve not_accrued',
  'operator acknowledge',
  'operator bulk retry',
];

/** What `noteCoverage` compares with: each record's in-flight owner and accrual, before the event. */
export interface CoverageBefore {
  owners: Map<string, string | undefined>;
  /** The call an event settles: which operation it was. */
  operation?: 'accrue' | 'reverse';
  /** For a refund: whether its order's accrual was still unsettled, and whether a partial refund was taken already. */
  saleUnsettled?: boolean;
  partiallyRefunded?: boolean;
  /** The fake's count of reads that took more than one page. */
  readsInPages: number;
}

export function coverageBefore(world: World, event: ModelEvent): CoverageBefore {
  const owners = new Map(world.records().map((r) => [keyOf(r), r.inFlight?.owner]));
  const before: CoverageBefore = { owners, readsInPages: world.fake.readsInPages };
  if (event.kind === 'fate' || event.kind === 'orphan' || event.kind === 'late_commit') {
    before.operation = world.fake.outstandingCalls().find((c) => c.seq === event.call)?.operation;
  }
  if (event.kind === 'refund') {
    const order = event.refund === 'full' ? world.scenario.fullRefund!.order : world.scenario.partialRefund!.order;
    const chain = world.chainOf(order);
    before.saleUnsettled = chain.some((r) => isAccrualUnsettled(r) || r.accrual.state === 'pending');
    before.partiallyRefunded = world.facts.partialRefunds.includes(order);
  }
  return before;
}

/** The situations `event` (applied, the world quiescent again) went through, added to `covered`. */
export function noteCoverage(world: World, event: ModelEvent, before: CoverageBefore, covered: Set<string>): void {
  const note = (situation: string) => covered.add(situation);
  switch (event.kind) {
    case 'checkout':
      if (world.budgets.deliveries[event.order]! < world.order(event.order).deliveries - 1) note('checkout delivered again');
      if (event.instance === 1) note('checkout delivered to the second instance');
      if (world.budgets.registerDeliveries[event.order]! < (world.order(event.order).register ?? 0)) note("webhook after its register's ACCRUE");
      break;
    case 'register_accrue': {
      const order = world.order(event.order);
      if (world.budgets.registerDeliveries[event.order]! < (order.register ?? 0) - 1) note("register's ACCRUE again under a new call id");
      if (world.budgets.deliveries[event.order]! < order.deliveries) note("register's ACCRUE after its webhook");
      break;
    }
    case 'refund': {
      const spec = event.refund === 'full' ? world.scenario.fullRefund! : world.scenario.partialRefund!;
      const left = event.refund === 'full' ? world.budgets.fullRefund : world.budgets.partialRefund;
      if (left < spec.deliveries - 1) note(`${event.refund} refund delivered again`);
      else note(`${event.refund} refund ${before.saleUnsettled ? 'before' : 'after'} its sale settled`);
      if (event.refund === 'full' && before.partiallyRefunded) note('full refund after a partial refund');
      if (spec.register) note("register's REVERSE");
      break;
    }
    case 'fate':
      note(`${before.operation} → ${event.fate}`);
      break;
    case 'orphan':
      note(event.booked ? 'crashed instance\'s call booked' : 'crashed instance\'s call not booked');
      break;
    case 'late_commit':
      note('timed-out call booked late');
      break;
    case 'read':
      if (event.order === 'newest_first') note('history listed newest first');
      break;
    case 'tick':
      note('worker pass');
      break;
    case 'crash':
      note('crash');
      break;
    case 'operator':
      note(`operator ${event.action}${event.outcome ? ` ${event.outcome}` : ''}`);
      break;
    case 'bulk':
      note(`operator bulk ${event.action}${event.outcome ? ` ${event.outcome}` : ''}`);
      break;
    case 'restart':
    case 'time':
      break;
    default:
      return event satisfies never;
  }
  if (world.fake.readsInPages > before.readsInPages) note('history read in pages');
  // A call marked in flight by an instance that is gone, taken over: at a restart, or by the other instance once its lease ended.
  const liveIds = new Set(world.slots.filter((s) => s.live).map((s) => world.instanceId(s)));
  for (const record of world.records()) {
    const was = before.owners.get(keyOf(record));
    if (was === undefined || liveIds.has(was) || record.inFlight?.owner === was) continue;
    note(event.kind === 'restart' ? 'restart took over its crashed call' : 'in-flight lease ended, call taken over by the other instance');
  }
  if (world.records().some((r) => r.accrual.waitingBehind)) note('accrual waited behind another of the customer and amount');
  if (world.records().some((r) => r.accrual.ambiguousWith?.length)) note('accrual ambiguous with another of the customer');
}

/**
 * Applies one event to the world as World.apply does, and notes in `world.covered` the situations
 * it went through. Every step of the search goes through here, so that the world itself knows
 * nothing of coverage.
 */
export async function applyNoted(world: World, event: ModelEvent): Promise<void> {
  const before = coverageBefore(world, event);
  await world.apply(event);
  noteCoverage(world, event, before, world.covered);
}
