/**
 * The state machine's rules, table by table, as pure functions: what a record needs next, and what
 * every outcome, verdict, operator action and refund makes of every state.
 */
import { describe, expect, it } from '@jest/globals';
import {
  applyVerdict,
  doubtAfterDamage,
  markInFlight,
  nextStep,
  nextVersion,
  recordOutcome,
  requestPartialReversal,
  refundAlreadySeen,
  requestReversal,
  resolve,
  retry,
  waitBehind,
  type CallAnswer,
  type StepContext,
  type TransitionOptions,
  type Verdict,
} from '../../src/core/transitions.js';
import { ConflictError } from '../../src/kernel/errors.js';
import { accrualKeys, deriveStatus, type AccrualState, type LedgerRecord, type LedgerStatus, type ReversalState } from '../../src/state/record.js';
import type { UpstreamOperation } from '../../src/loyalty/calls.js';
import type { CallOutcome } from '../../src/loyalty/client.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

const options: TransitionOptions = { retryBaseMs: 1000, inDoubtVerifyAfterMs: 5000, partialRefundPolicy: 'reaccrue' };
const NOW = new Date(minutes(60));
const OWNER = 'instance-a';

function record(accrual: AccrualState, reversal: ReversalState = 'none', change: (r: LedgerRecord) => void = () => {}): LedgerRecord {
  const r = makeRecord('generic:T-1', { accrual, reversal, operationIds: accrual === 'accrued' ? [11] : [] });
  change(r);
  r.status = deriveStatus(r);
  return r;
}

/** A record whose `operation` call was marked in flight by OWNER at minute 59. */
function calling(operation: UpstreamOperation, accrual: AccrualState, reversal: ReversalState = 'none'): LedgerRecord {
  return record(accrual, reversal, (r) => (r.inFlight = { operation, startedAt: minutes(59), owner: OWNER }));
}

const result = (isSuccess: boolean, operationId: number) => ({ isSuccess, errorMessage: isSuccess ? null : 'card blocked', serialNumber: `11-${operationId}`, checkAmount: 5997, accruedValue: isSuccess ? 59 : 0, operationId, createdAt: minutes(59), reversedAt: null });

const OUTCOMES: Record<string, CallOutcome> = {
  succeeded: { kind: 'succeeded', results: [result(true, 21)] },
  'results_failed (some cards)': { kind: 'results_failed', results: [result(true, 21), result(false, 22)], errors: ['card blocked'] },
  'results_failed (every card)': { kind: 'results_failed', results: [result(false, 22)], errors: ['card blocked'] },
  refused: { kind: 'refused', status: 400, errors: ['transaction not found'] },
  retryable: { kind: 'retryable', reason: '429 five times' },
  unknown: { kind: 'unknown', reason: 'timeout' },
};

const answer = (operation: UpstreamOperation, outcome: CallOutcome): CallAnswer => ({ operation, outcome, attempts: [], startedAt: minutes(59), owner: OWNER });
const apply = (r: LedgerRecord, operation: UpstreamOperation, outcome: CallOutcome) => nextVersion(r, recordOutcome(r, answer(operation, outcome), NOW, options), NOW);

describe('recordOutcome: every outcome of every call', () => {
  // [call, outcome, status after, what else must hold]
  const table: [string, LedgerRecord, UpstreamOperation, string, LedgerStatus, (r: LedgerRecord) => void][] = [
    ['accrue', calling('accrue', 'pending'), 'accrue', 'succeeded', 'accrued', (r) => expect(r.accrual).toMatchObject({ settledBy: 'upstream', operationIds: [21] })],
    ['accrue', calling('accrue', 'pending'), 'accrue', 'results_failed (some cards)', 'partially_accrued', (r) => expect(r.accrual.operationIds).toEqual([21])],
    ['accrue', calling('accrue', 'pending'), 'accrue', 'results_failed (every card)', 'failed', (r) => expect(r.accrual.errors).toEqual(['card blocked'])],
    ['accrue', calling('accrue', 'pending'), 'accrue', 'refused', 'failed', (r) => expect(r.accrual.operationIds).toEqual([])],
    ['accrue', calling('accrue', 'pending'), 'accrue', 'retryable', 'pending', (r) => expect(r).toMatchObject({ rounds: 1, nextAttemptAt: new Date(NOW.getTime() + 30_000).toISOString() })],
    ['accrue', calling('accrue', 'pending'), 'accrue', 'unknown', 'in_doubt', (r) => expect(r.accrual).toMatchObject({ inDoubtSince: minutes(59) })],
    ['accrue with a refund waiting', calling('accrue', 'pending', 'pending'), 'accrue', 'succeeded', 'reversal_pending', (r) => expect(r.accrual.state).toBe('accrued')],
    ['reverse', calling('reverse', 'accrued', 'pending'), 'reverse', 'succeeded', 'reversed', (r) => expect(r.reversal.results).toHaveLength(1)],
    ['reverse', calling('reverse', 'accrued', 'pending'), 'reverse', 'results_failed (some cards)', 'reverse_failed', () => {}],
    ['reverse', calling('reverse', 'accrued', 'pending'), 'reverse', 'results_failed (every card)', 'reverse_failed', () => {}],
    ['reverse', calling('reverse', 'none', 'pending'), 'reverse', 'refused', 'reverse_failed', (r) => expect(r.reversal.unknownUpstream).toBe(true)],
    ['reverse', calling('reverse', 'accrued', 'pending'), 'reverse', 'retryable', 'reversal_pending', (r) => expect(r.rounds).toBe(1)],
    ['reverse', calling('reverse', 'accrued', 'pending'), 'reverse', 'unknown', 'in_doubt', (r) => expect(r.reversal).toMatchObject({ state: 'in_doubt', inDoubtSince: minutes(59) })],
  ];
  it.each(table)('%s answered %s → %s', (_call, before, operation, outcome, status, also) => {
    const after = apply(before, operation, OUTCOMES[outcome]!);
    expect(after.status).toBe(status);
    expect(after.inFlight).toBeUndefined();
    expect(after.version).toBe(before.version + 1);
    expect(after.history.at(-1)!.event).toContain(operation);
    also(after);
  });

  it('a call taken over into doubt meanwhile is settled by its own late answer', () => {
    const takenOver = record('in_doubt', 'none', (r) => (r.accrual.inDoubtSince = minutes(59)));
    expect(apply(takenOver, 'accrue', OUTCOMES.succeeded!).status).toBe('accrued');
  });

  it('an answer to an attempt the record no longer shows changes nothing but the attempt log', () => {
    const moved = record('accrued', 'none', (r) => (r.attempts = []));
    const late = apply(moved, 'accrue', { kind: 'succeeded', results: [result(true, 99)] });
    expect(late.accrual).toEqual(moved.accrual);
    expect(late.history.at(-1)!.event).toMatch(/after another bridge instance had taken the record over/);
  });

  it('leaves the record it was given untouched', () => {
    const before = calling('accrue', 'pending');
    const copy = structuredClone(before);
    apply(before, 'accrue', OUTCOMES.succeeded!);
    expect(before).toEqual(copy);
  });
});

describe('nextStep: what a pass does now, for every state', () => {
  const ctx = (over: Partial<StepContext> = {}): StepContext => ({ nowMs: NOW.getTime(), force: false, canVerify: true, abandoned: false, merchant: 'active', ...over });
  const later = (r: LedgerRecord) => (r.nextAttemptAt = minutes(90));
  const table: [string, LedgerRecord, Partial<StepContext>, string][] = [
    ['pending, due', record('pending'), {}, 'call accrue'],
    ['pending, its pause not over', record('pending', 'none', later), {}, 'none'],
    ['pending, its pause not over, forced', record('pending', 'none', later), { force: true }, 'call accrue'],
    ['in doubt, verifier available', record('in_doubt'), {}, 'verify'],
    ['in doubt, no verifier', record('in_doubt'), { canVerify: false }, 'none'],
    ['in doubt, check not due', record('in_doubt', 'none', later), {}, 'none'],
    ['a call in flight', calling('accrue', 'pending'), {}, 'none'],
    ['a call in flight its bridge abandoned', calling('accrue', 'pending'), { abandoned: true }, 'take_over'],
    ['accrued', record('accrued'), {}, 'none'],
    ['accrued, refund pending', record('accrued', 'pending'), {}, 'call reverse'],
    ['pending accrual, refund pending: the accrual first', record('pending', 'pending'), {}, 'call accrue'],
    ['in-doubt accrual, refund pending: verify first', record('in_doubt', 'pending'), {}, 'verify'],
    ['refused accrual, refund pending', record('failed', 'pending'), {}, 'reversal_not_needed'],
    ['skipped, refund pending', record('skipped', 'pending'), {}, 'reversal_not_needed'],
    ['pending, its merchant suspended: nothing is sent', record('pending'), { merchant: 'suspended' }, 'none'],
    ['in doubt, its merchant suspended: the history is still read', record('in_doubt'), { merchant: 'suspended' }, 'verify'],
    ['pending, its merchant no longer known: nothing is sent', record('pending'), { merchant: 'unknown' }, 'none'],
    ['in doubt, its merchant no longer known: nothing is asked', record('in_doubt'), { merchant: 'unknown' }, 'none'],
    ['reversal in doubt, verifier available: the history is read for it', record('accrued', 'in_doubt'), {}, 'verify'],
    ['reversal in doubt, no verifier: an operator', record('accrued', 'in_doubt'), { canVerify: false, force: true }, 'none'],
    ['reversal in doubt the history did not prove: an operator', record('accrued', 'in_doubt', (r) => (r.reversal.unproven = { at: r.updatedAt, why: 'no reversal shape learned' })), { force: true }, 'none'],
    ['reversed', record('accrued', 'reversed'), {}, 'none'],
    ['reverse failed', record('accrued', 'failed'), {}, 'none'],
    ['refund of an unknown order', record('none', 'pending'), {}, 'call reverse'],
    [
      'reversed for a partial refund, remainder not created',
      record('accrued', 'reversed', (r) => (r.reversal.partial = { refundId: 'R-1', refundedCents: 100, remainderTransactionId: 'generic:T-1~r1', remainderCheck: r.accrual.check! })),
      {},
      'create_remainder',
    ],
  ];
  it.each(table)('%s → %s', (_name, r, over, expected) => {
    const step = nextStep(r, ctx(over));
    expect(step.kind === 'call' ? `call ${step.operation}` : step.kind).toBe(expected);
  });
});

describe('applyVerdict: every verdict on an accrual in doubt', () => {
  const doubt = () => record('in_doubt', 'none', (r) => (r.accrual.inDoubtSince = minutes(50)));
  const table: [Verdict, LedgerStatus, (r: LedgerRecord) => void][] = [
    [{ kind: 'happened', operationId: 77, cardId: '11-1' }, 'accrued', (r) => expect(r.accrual).toMatchObject({ settledBy: 'history', operationIds: [77] })],
    [{ kind: 'did_not_happen', examinedCards: 2 }, 'pending', (r) => expect(r.nextAttemptAt).toBeUndefined()],
    [{ kind: 'ambiguous', operationId: 77, cardId: '11-1', with: ['generic:T-2'] }, 'in_doubt', (r) => expect(r.accrual).toMatchObject({ ambiguousWith: ['generic:T-2'], operationIds: [] })],
    [{ kind: 'too_early', reason: 'wait' }, 'in_doubt', (r) => expect(r.nextAttemptAt).toBe(new Date(NOW.getTime() + 5000).toISOString())],
    [{ kind: 'cannot_verify', reason: 'lookup failed' }, 'in_doubt', (r) => expect(r.accrual.operationIds).toEqual([])],
  ];
  it.each(table)('%o → %s', (verdict, status, also) => {
    const after = nextVersion(doubt(), applyVerdict(doubt(), verdict, NOW, options), NOW);
    expect(after.status).toBe(status);
    also(after);
  });

  it('says it is ambiguous once per set of rivals, however often it is checked', () => {
    const verdict: Verdict = { kind: 'ambiguous', operationId: 77, cardId: '11-1', with: ['generic:T-2'] };
    const once = nextVersion(doubt(), applyVerdict(doubt(), verdict, NOW, options), NOW);
    const twice = nextVersion(once, applyVerdict(once, verdict, NOW, options), NOW);
    expect(twice.history.filter((e) => e.event.startsWith('ambiguous with generic:T-2'))).toHaveLength(1);
  });
});

describe('operator actions, for every state', () => {
  const allowed = (run: () => unknown) => {
    try {
      run();
      return 'allowed';
    } catch (error) {
      if (error instanceof ConflictError) return 'refused';
      throw error;
    }
  };
  const states: [string, LedgerRecord][] = [
    ['pending', record('pending')],
    ['in_doubt', record('in_doubt')],
    ['accrued', record('accrued')],
    ['failed', record('failed')],
    ['partially_accrued', record('partially_accrued', 'none', (r) => (r.accrual.results = [result(true, 1), result(false, 2)]))],
    ['reversal_pending', record('accrued', 'pending')],
    ['reversal in doubt', record('accrued', 'in_doubt')],
    ['reverse_failed', record('accrued', 'failed')],
    ['reverse_failed on some cards', record('accrued', 'failed', (r) => (r.reversal.results = [result(true, 1), result(false, 2)]))],
    ['in flight', calling('accrue', 'pending')],
  ];
  const expected: Record<string, Record<string, string>> = {
    //                         retry      accrued    not_accrued reversed   not_reversed
    pending: { retry: 'allowed', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
    in_doubt: { retry: 'refused', accrued: 'allowed', not_accrued: 'allowed', reversed: 'refused', not_reversed: 'refused' },
    accrued: { retry: 'refused', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
    failed: { retry: 'allowed', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
    partially_accrued: { retry: 'refused', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
    reversal_pending: { retry: 'allowed', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
    'reversal in doubt': { retry: 'refused', accrued: 'refused', not_accrued: 'refused', reversed: 'allowed', not_reversed: 'allowed' },
    reverse_failed: { retry: 'allowed', accrued: 'refused', not_accrued: 'refused', reversed: 'allowed', not_reversed: 'refused' },
    'reverse_failed on some cards': { retry: 'refused', accrued: 'refused', not_accrued: 'refused', reversed: 'allowed', not_reversed: 'refused' },
    'in flight': { retry: 'refused', accrued: 'refused', not_accrued: 'refused', reversed: 'refused', not_reversed: 'refused' },
  };
  it.each(states)('%s', (name, r) => {
    const got = {
      retry: allowed(() => retry(r)),
      ...Object.fromEntries((['accrued', 'not_accrued', 'reversed', 'not_reversed'] as const).map((outcome) => [outcome, allowed(() => resolve(r, { outcome }))])),
    };
    expect(got).toEqual(expected[name]);
  });

  it('resolve refuses an operation another record claimed; not_accrued makes the accrual due again', () => {
    expect(() => resolve(record('in_doubt'), { outcome: 'accrued', operationId: 5 }, 'generic:other')).toThrow(/already claimed by generic:other/);
    const again = nextVersion(record('in_doubt'), resolve(record('in_doubt'), { outcome: 'not_accrued', note: 'checked by phone' }), NOW);
    expect(again.status).toBe('pending');
    expect(nextStep(again, { nowMs: NOW.getTime(), force: false, canVerify: true, abandoned: false, merchant: 'active' })).toEqual({ kind: 'call', operation: 'accrue' });
    expect(again.history.at(-1)!.event).toBe('operator resolved: not_accrued: checked by phone');
  });
});

describe('refunds', () => {
  it.each<[string, LedgerRecord, LedgerStatus | 'repeat']>([
    ['accrued', record('accrued'), 'reversal_pending'],
    ['pending accrual: waits for it', record('pending'), 'reversal_pending'],
    ['refused accrual: nothing to reverse', record('failed'), 'failed'],
    ['skipped', record('skipped'), 'skipped'],
    ['already reversed', record('accrued', 'reversed'), 'repeat'],
  ])('a full refund of %s → %s', (_name, r, expected) => {
    const transition = requestReversal(r, 'R-1', NOW);
    expect(transition ? nextVersion(r, transition, NOW).status : 'repeat').toBe(expected);
  });

  it('the same refund id again is a repeat', () => {
    const once = nextVersion(record('accrued'), requestReversal(record('accrued'), 'R-1', NOW)!, NOW);
    expect(requestReversal(once, 'R-1', NOW)).toBeUndefined();
  });

  it('refundAlreadySeen is the one rule: a remembered refund id, never an absent one or another', () => {
    const once = nextVersion(record('accrued'), requestReversal(record('accrued'), 'R-1', NOW)!, NOW);
    expect([refundAlreadySeen(once, 'R-1'), refundAlreadySeen(once, 'R-2'), refundAlreadySeen(once, undefined), refundAlreadySeen(record('accrued'), 'R-1')]).toEqual([true, false, false, false]);
    // A partial refund's id is remembered too, so its redelivery is a repeat.
    const part = nextVersion(record('accrued'), requestPartialReversal(record('accrued'), 'P-1', { amountCents: 100 }, NOW, options), NOW);
    expect(refundAlreadySeen(part, 'P-1')).toBe(true);
  });

  it('a partial refund plans the reversal and the remainder; more than remains is refused', () => {
    const planned = nextVersion(record('accrued'), requestPartialReversal(record('accrued'), 'R-1', { amountCents: 1999 }, NOW, options), NOW);
    expect(planned.reversal.partial).toMatchObject({ refundedCents: 1999, remainderTransactionId: 'generic:T-1~r1', remainderCheck: { amount: 3998 } });
    expect(() => requestPartialReversal(record('accrued'), 'R-2', { amountCents: 6000 }, NOW, options)).toThrow(/more|exceed|remain/);
    expect(() => requestPartialReversal(record('accrued', 'reversed'), 'R-3', { amountCents: 1 }, NOW, options)).toThrow(/nothing remains/);
  });
});

describe('one unsettled accrual per customer and amount', () => {
  it('holds keys only while the accrual is in flight or in doubt', () => {
    expect(accrualKeys(record('pending'))).toEqual([]);
    expect(accrualKeys(nextVersion(record('pending'), markInFlight(record('pending'), 'accrue', OWNER, NOW), NOW))).toHaveLength(2);
    const inFlight = calling('accrue', 'pending');
    expect(accrualKeys(inFlight)).toHaveLength(2);
    expect(accrualKeys(apply(inFlight, 'accrue', OUTCOMES.unknown!))).toEqual(accrualKeys(inFlight));
    expect(accrualKeys(apply(inFlight, 'accrue', OUTCOMES.succeeded!))).toEqual([]);
    expect(accrualKeys(apply(inFlight, 'accrue', OUTCOMES.retryable!))).toEqual([]);
    expect(accrualKeys(calling('reverse', 'accrued', 'pending'))).toEqual([]);
  });

  it('waiting behind a holder is said once, and going out clears it', () => {
    const options = { retryBaseMs: 1000, inDoubtVerifyAfterMs: 5000 };
    const holding = calling('accrue', 'pending');
    const waiting = nextVersion(record('pending'), waitBehind(record('pending'), 'generic:H-1', holding, NOW, options), NOW);
    const again = nextVersion(waiting, waitBehind(waiting, 'generic:H-1', holding, NOW, options), NOW);
    expect(again.history.filter((e) => e.event.startsWith('waits behind generic:H-1'))).toHaveLength(1);
    expect(again).toMatchObject({ status: 'pending', nextAttemptAt: new Date(NOW.getTime() + 1000).toISOString(), accrual: { waitingBehind: 'generic:H-1' } });
    expect(markInFlight(again, 'accrue', OWNER, NOW).record.accrual.waitingBehind).toBeUndefined();
  });

  it("behind a holder in doubt, it is looked at again no sooner than the holder's history check; behind one whose call is out, after a round's unit", () => {
    const options = { retryBaseMs: 1000, inDoubtVerifyAfterMs: 5000 };
    const behindDoubt = waitBehind(record('pending'), 'generic:H-1', record('in_doubt'), NOW, options).record;
    expect(behindDoubt.nextAttemptAt).toBe(new Date(NOW.getTime() + 5000).toISOString());
    const behindCall = waitBehind(record('pending'), 'generic:H-1', calling('accrue', 'pending'), NOW, options).record;
    expect(behindCall.nextAttemptAt).toBe(new Date(NOW.getTime() + 1000).toISOString());
  });
});

describe('recovery after lost journal lines', () => {
  it.each<[string, LedgerRecord, LedgerStatus | 'unchanged']>([
    ['a pending accrual may have gone out', record('pending'), 'in_doubt'],
    ['a pending reversal may have gone out', record('accrued', 'pending'), 'in_doubt'],
    ['the refund of a refused accrual is never sent', record('failed', 'pending'), 'unchanged'],
    ['settled', record('accrued'), 'unchanged'],
    ['in flight already', calling('accrue', 'pending'), 'unchanged'],
  ])('%s → %s', (_name, r, expected) => {
    const transition = doubtAfterDamage(r, 'journal damage', NOW, options, false);
    expect(transition ? nextVersion(r, transition, NOW).status : 'unchanged').toBe(expected);
  });
});
