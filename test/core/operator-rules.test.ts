/**
 * The operator's rules as pure functions: what needs a person (attention.ts), what may be done to a
 * record now and why not (`operatorActions`, from the very transitions the actions run), closing an
 * orphan reversal and acknowledging changed repeats, each with the actor in the history.
 */
import { describe, expect, it } from '@jest/globals';
import { acknowledge, close, nextVersion, operatorActions, requestPartialReversal, requestReversal, resolve, retry, type TransitionOptions } from '../../src/core/transitions.js';
import { ConflictError } from '../../src/kernel/errors.js';
import { ATTENTION_STATUSES, attentionOf } from '../../src/state/attention.js';
import { ATTENTION_PREDICATE } from '../../src/ledger/pg-migrations.js';
import { deriveStatus, type AccrualState, type LedgerRecord, type ReversalState } from '../../src/state/record.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

const NOW = new Date(minutes(60));
const ALICE = { actor: 'alice', reason: 'checked with the loyalty team' };

function record(accrual: AccrualState, reversal: ReversalState = 'none', change: (r: LedgerRecord) => void = () => {}): LedgerRecord {
  const r = makeRecord('generic:T-1', { accrual, reversal, operationIds: accrual === 'accrued' ? [11] : [] });
  change(r);
  r.status = deriveStatus(r);
  return r;
}

/** A refund of an order the loyalty service never knew. */
const orphan = () =>
  record('none', 'failed', (r) => {
    r.reversal.unknownUpstream = true;
    r.reversal.errors = ['Transaction not found'];
  });

describe('attentionOf', () => {
  it.each([
    ['accrued', 'none', []],
    ['pending', 'none', []],
    ['skipped', 'none', []],
    ['accrued', 'reversed', []],
    ['in_doubt', 'none', ['in_doubt']],
    ['failed', 'none', ['failed']],
    // Refunded after the refusal: nothing was accrued, nothing is left to reverse, retry is refused.
    ['failed', 'not_needed', []],
    ['partially_accrued', 'none', ['partially_accrued']],
    ['accrued', 'failed', ['reverse_failed']],
    ['accrued', 'in_doubt', ['in_doubt']],
  ] as const)('accrual %s, reversal %s → %j', (accrual, reversal, kinds) => {
    expect(attentionOf(record(accrual, reversal)).map((i) => i.kind)).toEqual(kinds);
  });

  it('a refused accrual refunded in part stays in the queue (the rest earned nothing); refunded whole, it leaves', () => {
    const partly = record('failed', 'not_needed', (r) => (r.reversal.partialRefundedCents = r.accrual.check!.amount - 100));
    expect(attentionOf(partly)).toEqual([expect.objectContaining({ kind: 'failed', why: expect.stringContaining('then part of the order was refunded') })]);
    const whole = record('failed', 'not_needed', (r) => (r.reversal.partialRefundedCents = r.accrual.check!.amount));
    expect(attentionOf(whole)).toEqual([]);
  });

  it('a partial refund of a refused accrual counts what was refunded, and refuses more than the check', () => {
    const refused = record('failed');
    const amount = refused.accrual.check!.amount;
    const options: TransitionOptions = { retryBaseMs: 1000, inDoubtVerifyAfterMs: 60_000, partialRefundPolicy: 'reaccrue' };
    const once = nextVersion(refused, requestPartialReversal(refused, 'R-1', { amountCents: 100 }, NOW, options), NOW);
    expect(once.reversal).toMatchObject({ state: 'not_needed', partialRefundedCents: 100 });
    const twice = nextVersion(once, requestPartialReversal(once, 'R-2', { amountCents: amount - 100 }, NOW, options), NOW);
    expect(twice.reversal.partialRefundedCents).toBe(amount);
    expect(attentionOf(twice)).toEqual([]);
    expect(() => requestPartialReversal(twice, 'R-3', { amountCents: 1 }, NOW, options)).toThrow(/more than/);
  });

  it('a full refund after a partial one of a refused accrual: nothing is owed, it leaves the queue, and the same refund again is a repeat', () => {
    const options: TransitionOptions = { retryBaseMs: 1000, inDoubtVerifyAfterMs: 60_000, partialRefundPolicy: 'reaccrue' };
    const refused = record('failed');
    const partly = nextVersion(refused, requestPartialReversal(refused, 'R-1', { amountCents: 100 }, NOW, options), NOW);
    expect(attentionOf(partly).map((i) => i.kind)).toEqual(['failed']);
    const rest = nextVersion(partly, requestReversal(partly, 'R-2', NOW)!, NOW);
    expect(rest.reversal).toMatchObject({ state: 'not_needed', partialRefundedCents: refused.accrual.check!.amount, refundIds: ['R-1', 'R-2'] });
    expect(rest.status).toBe('failed');
    expect(attentionOf(rest)).toEqual([]);
    expect(requestReversal(rest, 'R-2', NOW)).toBeUndefined();
    expect(requestReversal(rest, undefined, NOW)).toBeUndefined();
  });

  it('an accrual the history matches with others is ambiguous, since it went in doubt', () => {
    const r = record('in_doubt', 'none', (x) => {
      x.accrual.ambiguousWith = ['generic:T-2'];
      x.accrual.inDoubtSince = minutes(3);
    });
    expect(attentionOf(r)).toEqual([expect.objectContaining({ kind: 'ambiguous', since: minutes(3), transactionId: 'generic:T-1', merchantId: 'default', why: expect.stringContaining('generic:T-2') })]);
  });

  it('a call in flight is the bridge\'s, not a person\'s', () => {
    expect(attentionOf(record('in_doubt', 'none', (x) => (x.inFlight = { operation: 'accrue', startedAt: minutes(1), owner: 'a' })))).toEqual([]);
  });

  it('an orphan reverse_failed says to close it, and leaves once closed', () => {
    expect(attentionOf(orphan())[0]!.why).toMatch(/never knew.*close it/);
    expect(attentionOf({ ...orphan(), closed: { at: minutes(5), actor: 'admin', reason: 'x' } })).toEqual([]);
  });

  it('changed repeats need a person until acknowledged, and again when another comes', () => {
    const repeats = { count: 2, first: [{ at: minutes(4), amountCents: 100 }, { at: minutes(5), amountCents: 200 }], latest: [] };
    const seen = { at: minutes(6), actor: 'alice', reason: 'difference paid' };
    expect(attentionOf(record('accrued', 'none', (r) => (r.changedRepeats = repeats)))).toEqual([expect.objectContaining({ kind: 'changed_repeats', since: minutes(4) })]);
    expect(attentionOf(record('accrued', 'none', (r) => ((r.changedRepeats = repeats), (r.acknowledged = seen))))).toEqual([]);
    const again = { ...repeats, count: 3, latest: [{ at: minutes(9), amountCents: 300 }] };
    expect(attentionOf(record('accrued', 'none', (r) => ((r.changedRepeats = again), (r.acknowledged = seen))))).toEqual([expect.objectContaining({ kind: 'changed_repeats', since: minutes(9) })]);
  });

  it('a refusal acknowledged leaves the queue; failing again after it brings it back', () => {
    const failed = record('failed', 'none', (r) => (r.history = [{ at: minutes(2), event: 'refused', to: 'failed' }]));
    expect(attentionOf({ ...failed, acknowledged: { at: minutes(3), actor: 'alice', reason: 'card closed' } })).toEqual([]);
    expect(attentionOf({ ...failed, acknowledged: { at: minutes(1), actor: 'alice', reason: 'an earlier failure' } })).toEqual([expect.objectContaining({ kind: 'failed', since: minutes(2) })]);
  });

  it("PostgreSQL's attention index covers every status that needs a person", () => {
    for (const status of ATTENTION_STATUSES) expect(ATTENTION_PREDICATE).toContain(`'${status}'`);
    expect(ATTENTION_PREDICATE).toContain("record ? 'changedRepeats'");
  });
});

describe('operatorActions: the same rules the actions run, nothing written', () => {
  it('an accrual in doubt: resolve accrued or not_accrued; retry refused with why', () => {
    const actions = operatorActions(record('in_doubt'), NOW);
    expect(actions.resolve).toEqual({ allowed: true, outcomes: ['accrued', 'not_accrued'] });
    expect(actions.retry).toEqual({ allowed: false, why: expect.stringContaining('resolve it (or let reconcile settle it) first') });
    expect(actions.close.allowed).toBe(false);
  });

  it('a failed accrual: retry; reverse has nothing to reverse; resolve says why not', () => {
    const actions = operatorActions(record('failed'), NOW);
    expect(actions.retry).toEqual({ allowed: true });
    expect(actions.reverse).toEqual({ allowed: false, why: 'nothing to reverse: the accrual is failed' });
    expect(actions.resolve).toEqual({ allowed: false, why: 'the accrual is failed, not in doubt', outcomes: [] });
  });

  it('an accrued record may be reversed; a reversed one not again', () => {
    expect(operatorActions(record('accrued'), NOW).reverse).toEqual({ allowed: true });
    expect(operatorActions(record('accrued', 'reversed'), NOW).reverse).toEqual({ allowed: false, why: 'the reversal is already reversed' });
  });

  it('an orphan: close allowed; resolve reversed refused (it would be a lie)', () => {
    const actions = operatorActions(orphan(), NOW);
    expect(actions.close).toEqual({ allowed: true });
    expect(actions.resolve.outcomes ?? []).not.toContain('reversed');
    expect(() => resolve(orphan(), { outcome: 'reversed' })).toThrow(/never knew this order/);
  });
});

describe('close and acknowledge', () => {
  it('closes an orphan with who and why, keeps its status, and refuses a second close', () => {
    const t = close(orphan(), ALICE, NOW);
    const closed = nextVersion(orphan(), t, NOW);
    expect(closed.status).toBe('reverse_failed');
    expect(closed.closed).toEqual({ at: NOW.toISOString(), actor: 'alice', reason: ALICE.reason });
    expect(closed.history.at(-1)).toMatchObject({ actor: 'alice', detail: ALICE.reason, event: expect.stringContaining('closed') });
    expect(() => close(closed, ALICE, NOW)).toThrow(/already closed by alice/);
  });

  it.each([
    ['a reverse refused for another reason', record('accrued', 'failed')],
    ['an accrued record', record('accrued')],
    ['an accrual in doubt', record('in_doubt')],
  ])('refuses %s with why', (_name, r) => {
    expect(() => close(r, ALICE, NOW)).toThrow(ConflictError);
  });

  it('acknowledges changed repeats or a refusal once, with who and why; never a doubt or a reversal', () => {
    const r = record('accrued', 'none', (x) => (x.changedRepeats = { count: 2, first: [{ at: minutes(4), amountCents: 1 }], latest: [] }));
    const acked = nextVersion(r, acknowledge(r, ALICE, NOW), NOW);
    expect(acked.acknowledged).toEqual({ at: NOW.toISOString(), actor: 'alice', reason: ALICE.reason });
    expect(acked.history.at(-1)).toMatchObject({ actor: 'alice', event: 'alice acknowledged changed repeats' });
    expect(() => acknowledge(acked, ALICE, NOW)).toThrow(/nothing to acknowledge.*acknowledged by alice/);
    const failed = record('failed');
    expect(nextVersion(failed, acknowledge(failed, ALICE, NOW), NOW).acknowledged?.actor).toBe('alice');
    for (const other of [record('in_doubt'), orphan(), record('accrued', 'failed'), record('accrued')]) expect(() => acknowledge(other, ALICE, NOW)).toThrow(ConflictError);
  });

  it('retry and resolve name the actor and keep the reason in the history', () => {
    const retried = nextVersion(record('failed'), retry(record('failed'), ALICE), NOW);
    expect(retried.history.at(-1)).toMatchObject({ event: 'alice asked for a retry', actor: 'alice', detail: ALICE.reason });
    const resolved = nextVersion(record('in_doubt'), resolve(record('in_doubt'), { outcome: 'accrued' }, undefined, { actor: 'merchant:bakery-17' }), NOW);
    expect(resolved.history.at(-1)).toMatchObject({ event: 'merchant:bakery-17 resolved: accrued', actor: 'merchant:bakery-17' });
    expect(resolved.history.at(-1)!.detail).toBeUndefined();
  });
});
