/**
 * What can happen next in a world (docs/correctness.md, "Events"): every event the scenario still
 * allows, every fate of every call the service holds, the order of every suspended history read,
 * a worker pass where work is due, a crash and a restart, time passing to the next deadline, and
 * the console's operator actions where the transitions allow them (`operatorActions`) and the
 * person would be telling the truth.
 */
import { keyOf, unreachable, type LedgerRecord } from '../src/state/record.js';
import { DEFAULT_MERCHANT } from '../src/state/merchant.js';
import { isOpen } from '../src/state/record.js';
import type { OperatorActionName, ResolveInput } from '../src/core/transitions.js';
import { TIMING } from './scenario.js';
import type { ModelEvent, World } from './world.js';

export async function enabledEvents(world: World): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  const { scenario, budgets } = world;
  const live = world.slots.filter((s) => s.live);

  for (const read of world.fake.outstandingReads()) {
    events.push({ kind: 'read', read: read.seq, order: 'oldest_first' }, { kind: 'read', read: read.seq, order: 'newest_first' });
  }
  for (const call of world.fake.outstandingCalls()) {
    if (call.lingering) events.push({ kind: 'late_commit', call: call.seq });
    else if (!call.live) events.push({ kind: 'orphan', call: call.seq, booked: true }, { kind: 'orphan', call: call.seq, booked: false });
    else for (const fate of (call.operation === 'accrue' && scenario.accrueFates) || scenario.fates) events.push({ kind: 'fate', call: call.seq, fate });
  }
  for (const slot of live) if (!slot.tickPending && (await workDue(world, slot.index))) events.push({ kind: 'tick', instance: slot.index });
  for (const order of scenario.orders) {
    if (budgets.deliveries[order.id]! > 0) for (const slot of live) events.push({ kind: 'checkout', order: order.id, instance: slot.index });
    if (budgets.registerDeliveries[order.id]! > 0) for (const slot of live) events.push({ kind: 'register_accrue', order: order.id, instance: slot.index });
  }
  // A refund follows its sale: the POS refunds an order it has sold (and the bridge has recorded).
  const recorded = (order: string) => world.store.state.records.has(world.transactionIdOf(order));
  if (scenario.fullRefund && budgets.fullRefund > 0 && recorded(scenario.fullRefund.order)) for (const slot of live) events.push({ kind: 'refund', refund: 'full', instance: slot.index });
  if (scenario.partialRefund && budgets.partialRefund > 0 && recorded(scenario.partialRefund.order)) for (const slot of live) events.push({ kind: 'refund', refund: 'partial', instance: slot.index });
  if (budgets.crashes > 0) for (const slot of live) events.push({ kind: 'crash', instance: slot.index });
  for (const slot of world.slots) if (!slot.live) events.push({ kind: 'restart', instance: slot.index });
  if (budgets.timeSteps > 0) {
    const next = nextDeadline(world);
    if (next !== undefined && timeMayPass(world, next)) events.push({ kind: 'time', toMs: next });
  }
  if (budgets.operatorActions > 0) events.push(...(await operatorChoices(world)));
  return events;
}

/**
 * A worker pass on this instance would move something: a record is due (the worker's own query) that
 * has no pass running here already (a pass over only those would just wait for them).
 */
export async function workDue(world: World, instance: number): Promise<boolean> {
  const slot = world.slots[instance]!;
  const delivery = slot.core!.delivery;
  const due = await world.store.listDue(await delivery.dueQuery(500, 50, { owner: delivery.instanceId, leaseMs: TIMING.inFlightLeaseMs, idleMs: 0 }));
  return due.some((r) => !delivery.isRunning(keyOf(r)));
}

/**
 * The next moment something can change by itself: a record's next round or history check, the end
 * of a grace period or of an in-flight lease, the end of the clock-skew window around an operation
 * (an accrue begun later no longer matches it), the end of a rate-limit hold. Whole seconds.
 * `rechecks: false`: the deadlines that can change what a look at a record finds, without the
 * records' own next looks (a history check that found nothing looks again a few seconds later and
 * finds the same until one of those passes).
 */
export function nextDeadline(world: World, options: { rechecks: boolean } = { rechecks: true }): number | undefined {
  const now = world.nowMs;
  let next: number | undefined;
  const add = (ms: number | undefined) => {
    if (ms === undefined || Number.isNaN(ms)) return;
    const at = Math.ceil(ms / 1000) * 1000;
    if (at > now && (next === undefined || at < next)) next = at;
  };
  const shared = world.scenario.instances > 1;
  for (const r of world.records()) {
    if (isOpen(r)) {
      if (r.nextAttemptAt && options.rechecks) add(Date.parse(r.nextAttemptAt));
      if (r.accrual.inDoubtSince) add(Date.parse(r.accrual.inDoubtSince) + TIMING.graceMs);
      if (r.reversal.inDoubtSince) add(Date.parse(r.reversal.inDoubtSince) + TIMING.graceMs);
      if (r.inFlight && shared) add(Date.parse(r.inFlight.startedAt) + TIMING.inFlightLeaseMs + 1);
    }
    // A confirmed reversal whose entries are not noted counts as a rival until the grace period ends (history-verifier.ts).
    for (const result of r.reversal.results) if (result.reversedAt) add(Date.parse(result.reversedAt) + TIMING.graceMs);
  }
  for (const op of world.fake.state.operations) add(op.createdAtMs + TIMING.clockSkewMs + 1);
  for (const slot of world.slots) {
    const limits = slot.core?.delivery.rateLimits;
    if (limits?.isPaused(DEFAULT_MERCHANT, now)) add(holdEnd(now, (t) => limits.isPaused(DEFAULT_MERCHANT, t)));
  }
  return next;
}

/** The first moment `paused` is false, after `now` (a hold lasts at most an hour of retry units). */
function holdEnd(now: number, paused: (t: number) => boolean): number {
  let [low, high] = [now, now + 3600 * TIMING.retryBaseMs * 2];
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (paused(mid)) low = mid;
    else high = mid;
  }
  return high;
}

/**
 * Time may pass to `target` unless something must happen first: a live call is answered (or given
 * up on) within LOYALTY_TIMEOUT_MS; a call the service holds for a crashed instance, or one given up
 * on, is booked or not before the grace period ends (the contract's assumption, docs/correctness.md);
 * a history read is answered before time moves.
 */
export function timeMayPass(world: World, target: number): boolean {
  if (world.fake.outstandingReads().length > 0) return false;
  for (const call of world.fake.outstandingCalls()) {
    if (call.live && !call.lingering) {
      if (target > call.sentAtMs + TIMING.loyaltyTimeoutMs) return false;
    } else if (target >= call.sentAtMs + TIMING.graceMs) return false;
  }
  return true;
}

/**
 * The console's actions on each record, as `OperatorActions.allowed` offers them, by a person who
 * tells the truth: `resolve accrued` only when the service booked the accrual, `not_accrued` only
 * when it did not and no call of it is still out (likewise for reversals). A person who resolves
 * against the service's books breaks the ledger by hand, which no bridge can prevent. The action
 * goes to an instance with no pass over the record running (the action would first wait for it).
 */
export async function operatorChoices(world: World): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  // What the console would offer on each record's page, and the records a bulk action of each kind could tick.
  const ticked = new Map<string, { action: Exclude<OperatorActionName, 'close' | 'ask'>; outcome?: ResolveInput['outcome']; keys: string[]; instance: number }>();
  const tick = (action: Exclude<OperatorActionName, 'close' | 'ask'>, key: string, instance: number, outcome?: ResolveInput['outcome']) => {
    const name = `${action} ${outcome ?? ''}`;
    const group = ticked.get(name) ?? { action, ...(outcome ? { outcome } : {}), keys: [], instance };
    group.keys.push(key);
    ticked.set(name, group);
  };
  for (const record of world.records().sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1))) {
    const key = keyOf(record);
    const slot = world.slots.find((s) => s.live && !s.core!.delivery.isRunning(key));
    if (!slot) continue;
    const allowed = await slot.core!.operator.allowed(structuredClone(record));
    const offer = (action: OperatorActionName, outcome?: ResolveInput['outcome']) => {
      events.push({ kind: 'operator', action, ...(outcome ? { outcome } : {}), key, instance: slot.index });
      // Bulk has no close and no ask: each is a decision about one record.
      if (action !== 'close' && action !== 'ask') tick(action, key, slot.index, outcome);
    };
    if (allowed.retry.allowed) offer('retry');
    // Reverse acts on the order (its last remainder): offered once, on the order's own record.
    if (allowed.reverse.allowed && !record.parentTransactionId) offer('reverse');
    for (const outcome of allowed.resolve.outcomes ?? []) if (truthful(world, record, outcome)) offer('resolve', outcome);
    if (allowed.acknowledge.allowed) offer('acknowledge');
    if (allowed.close.allowed) offer('close');
    if (allowed.ask.allowed) offer('ask');
  }
  // Bulk goes through the same single-record rules with delivery left to the worker; one record ticked is the single action.
  for (const { action, outcome, keys, instance } of ticked.values()) if (keys.length > 1) events.push({ kind: 'bulk', action, ...(outcome ? { outcome } : {}), keys, instance });
  return events;
}

/** Whether a person who read the service's books would resolve `record` so. */
export function truthful(world: World, record: LedgerRecord, outcome: ResolveInput['outcome']): boolean {
  const tx = world.fake.state.transactions[record.transactionId];
  const out = (operation: 'accrue' | 'reverse') => world.fake.outstandingCalls().some((c) => c.transactionId === record.transactionId && c.operation === operation);
  switch (outcome) {
    case 'accrued':
      return (tx?.accruals ?? 0) > 0;
    case 'not_accrued':
      return (tx?.accruals ?? 0) === 0 && !out('accrue');
    case 'reversed':
      return (tx?.reversals ?? 0) > 0;
    case 'not_reversed':
      return (tx?.reversals ?? 0) === 0 && !out('reverse');
    default:
      return unreachable(outcome);
  }
}
