/** A dead letter's rules, as tables: kept, kept again, claimed for a run, written after it, dismissed. */
import { describe, expect, it } from '@jest/globals';
import { afterRun, claimForRun, dismiss, keep, keepCause, type KeepCause, type RunBy, type RunResult } from '../../src/core/dead-letter-transitions.js';
import { NotFoundError, ValidationError } from '../../src/kernel/errors.js';
import type { DeadLetter } from '../../src/ledger/store.js';
import { PosApiError } from '../../src/pos/api.js';

const MINUTE = 60_000;
const T0 = Date.parse('2026-11-20T10:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * MINUTE).toISOString();
const policy = { baseMs: MINUTE, maxAttempts: 3 };
const delivery = { id: 'L1', pos: 'square', merchantId: 'cafe', headers: { 'content-type': 'application/json' }, body: '{}', bodyEncoding: 'utf8' as const };
const transient: KeepCause = { reason: "square's API timed out", reasonCode: 'pos_api_failed', issues: [], transient: true };
const forAPerson: KeepCause = { reason: 'no merchant has the square account X', reasonCode: 'unknown_merchant', issues: [{ field: 'merchant_id', message: 'unknown' }], transient: false };
const mine = { owner: 'instance-a', until: at(10) };
const theirs = { owner: 'instance-b', until: at(12) };

function letter(change: Partial<DeadLetter> = {}): DeadLetter {
  return { ...keep(undefined, delivery, transient, policy, T0), ...change };
}

describe('keepCause: why a part of a delivery is kept', () => {
  const timedOut = new PosApiError("square's API timed out", true);
  const refused = new PosApiError("square's API answered 401", false);
  const invalid = ValidationError.field('total', 'must not be negative');

  it('the first failure names the code; every message in one line; one transient failure is enough to run it again', () => {
    expect(keepCause([invalid, timedOut])).toEqual({ reason: `${invalid.message}; ${timedOut.message}`, reasonCode: 'invalid_payload', issues: invalid.issues, transient: true });
    expect(keepCause([refused, new NotFoundError('no order O-1')])).toEqual({ reason: `${refused.message}; no order O-1`, reasonCode: 'pos_api_failed', issues: [], transient: false });
  });

  it('bounded: the reason at 2000 characters, the issues at 20', () => {
    const many = Array.from({ length: 30 }, (_, i) => ValidationError.field(`f${i}`, 'x'.repeat(100)));
    const cause = keepCause(many);
    expect(cause.reason).toHaveLength(2001);
    expect(cause.reason.endsWith('…')).toBe(true);
    expect(cause.issues).toHaveLength(20);
  });
});

describe('keep: a delivery kept, or kept again', () => {
  it.each<[string, DeadLetter | undefined, KeepCause, number, Partial<DeadLetter>]>([
    ['new, a transient cause: the bridge runs it after one unit', undefined, transient, 0, { deliveries: 1, retry: { transient: true, attempts: 0, nextAt: at(1) }, receivedAt: at(0), merchantId: 'cafe', replays: [] }],
    ['new, a cause for a person: no run scheduled, its issues kept', undefined, forAPerson, 0, { deliveries: 1, retry: { transient: false, attempts: 0 }, issues: forAPerson.issues }],
    ['delivered again while its schedule runs: the schedule is not pushed back', letter(), transient, 5, { deliveries: 2, lastReceivedAt: at(5), receivedAt: at(0), retry: { transient: true, attempts: 0, nextAt: at(1) } }],
    ['delivered again for a person now: the new cause decides, no run, its issues replace none', letter(), forAPerson, 5, { deliveries: 2, reason: forAPerson.reason, reasonCode: 'unknown_merchant', retry: { transient: false, attempts: 0 }, issues: forAPerson.issues }],
    ['delivered again while a run holds it, for a person: the run keeps its claim', letter({ retry: { transient: false, attempts: 1, claim: theirs } }), forAPerson, 5, { retry: { transient: false, attempts: 1, claim: theirs } }],
  ])('%s', (_name, existing, cause, minute, expected) => {
    expect(keep(existing, delivery, cause, policy, T0 + minute * MINUTE)).toMatchObject(expected);
  });

  it('a delivery again with no issues drops the issues an earlier cause had', () => {
    const kept = keep(undefined, delivery, forAPerson, policy, T0);
    expect(keep(kept, delivery, transient, policy, T0 + MINUTE).issues).toBeUndefined();
  });
});

describe('claimForRun', () => {
  it.each<[string, DeadLetter | undefined, RunBy, number, string]>([
    ['no such letter', undefined, 'operator', 0, 'missing'],
    ['resolved: nothing to run again', letter({ resolvedAt: at(2) }), 'operator', 3, 'refused'],
    ['held by another run until minute 12', letter({ retry: { transient: true, attempts: 1, nextAt: at(5), claim: theirs } }), 'operator', 11, 'refused'],
    ["that run's lease ended: taken over", letter({ retry: { transient: true, attempts: 1, nextAt: at(5), claim: theirs } }), 'bridge', 13, 'claimed'],
    ['the bridge, before it is due', letter(), 'bridge', 0, 'not_due'],
    ['the bridge, once due', letter(), 'bridge', 1, 'claimed'],
    ["the bridge, a person's letter", keep(undefined, delivery, forAPerson, policy, T0), 'bridge', 60, 'not_due'],
    ["an operator, a person's letter, any time", keep(undefined, delivery, forAPerson, policy, T0), 'operator', 0, 'claimed'],
    // A claim names the instance (lease.ts): its own claim, with no run of its own going, was left by a run that could not give it back.
    ['its own claim, no run of it going here: taken again', letter({ retry: { transient: true, attempts: 1, claim: mine } }), 'operator', 5, 'claimed'],
  ])('%s', (_name, current, by, minute, expected) => {
    const nowMs = T0 + minute * MINUTE;
    const result = claimForRun(current, by, { owner: mine.owner, leaseMs: 10 * MINUTE }, nowMs);
    expect(result.kind).toBe(expected);
    if (result.kind === 'claimed') expect(result.letter.retry!.claim).toEqual({ owner: mine.owner, until: new Date(nowMs + 10 * MINUTE).toISOString() });
    if (result.kind === 'refused') expect(result.why).toMatch(/^dead letter L1 (was resolved|is being run now \(by instance-b, held until)/);
  });

  it('refused while a run of it by this instance is going, naming that run, whether or not its claim ran out', () => {
    const held = letter({ retry: { transient: true, attempts: 1, nextAt: at(1), claim: mine } });
    for (const minute of [5, 11]) {
      const result = claimForRun(held, 'operator', { owner: mine.owner, leaseMs: 10 * MINUTE, underWay: true }, T0 + minute * MINUTE);
      expect(result).toEqual({ kind: 'refused', why: expect.stringMatching(/^dead letter L1 is being run now \(by instance-a/) });
    }
    expect(claimForRun(held, 'bridge', { owner: mine.owner, leaseMs: 10 * MINUTE, underWay: true }, T0 + 11 * MINUTE).kind).toBe('refused');
    expect(claimForRun(letter({ resolvedAt: at(2) }), 'operator', { owner: mine.owner, leaseMs: MINUTE, underWay: true }, T0 + 3 * MINUTE)).toEqual({ kind: 'refused', why: expect.stringMatching(/was resolved/) });
  });
});

describe('afterRun', () => {
  const claimed = (change: Partial<DeadLetter> = {}) => ({ ...letter(change), retry: { ...(change.retry ?? letter().retry!), claim: mine } });
  const processed: RunResult = { kind: 'processed', outcome: 'accrued', created: ['square:O-1'] };
  const failedAgain: RunResult = { kind: 'failed', reason: "square's API answered 503", transient: true, created: [] };

  it.each<[string, DeadLetter, RunBy, RunResult, Partial<DeadLetter>]>([
    ["the bridge's run went through: resolved, the run counted, its claim given back", claimed(), 'bridge', processed, { resolvedAt: at(1), retry: { transient: true, attempts: 1 }, replays: [{ at: at(1), by: 'bridge', outcome: 'processed: accrued', created: ['square:O-1'] }] }],
    ["an operator's replay went through: resolved, no run counted", claimed(), 'operator', processed, { resolvedAt: at(1), retry: { transient: true, attempts: 0 } }],
    ["a refund's replay: the record it acted on kept beside the run, nothing created", claimed(), 'operator', { kind: 'processed', outcome: 'reversed', created: [], actedOn: ['shopify:7002'] }, { resolvedAt: at(1), replays: [{ at: at(1), by: 'operator', outcome: 'processed: reversed', actedOn: ['shopify:7002'] }] }],
    ['failed again, transient: the next run after two units', claimed(), 'bridge', failedAgain, { reason: failedAgain.reason, retry: { transient: true, attempts: 1, nextAt: at(3) }, replays: [{ at: at(1), by: 'bridge', outcome: `failed: ${failedAgain.reason}` }] }],
    ['failed on its last run: left to a person', claimed({ retry: { transient: true, attempts: 2, nextAt: at(0) } }), 'bridge', failedAgain, { retry: { transient: true, attempts: 3 } }],
    ['failed for a person: no run scheduled, its issues kept', claimed(), 'operator', { kind: 'failed', reason: 'unknown merchant', issues: [{ field: 'merchant_id', message: 'x' }], transient: false, created: [] }, { retry: { transient: false, attempts: 0 }, issues: [{ field: 'merchant_id', message: 'x' }] }],
  ])('%s', (_name, current, by, result, expected) => {
    const written = afterRun(current, by, mine, at(1), result, policy, T0 + MINUTE);
    expect(written).toMatchObject(expected);
    expect(written.retry!.claim).toBeUndefined();
    if (result.kind === 'failed') expect(written.resolvedAt).toBeUndefined();
  });

  it('a run that outlived its lease leaves the claim of the run that took it over', () => {
    const takenOver = { ...letter(), retry: { transient: true, attempts: 0, claim: theirs } };
    expect(afterRun(takenOver, 'bridge', mine, at(11), failedAgain, policy, T0 + 11 * MINUTE).retry!.claim).toEqual(theirs);
    expect(afterRun(takenOver, 'bridge', mine, at(11), processed, policy, T0 + 11 * MINUTE).retry!.claim).toEqual(theirs);
  });
});

describe('dismiss', () => {
  const act = { actor: 'ann', reason: 'a test delivery from the POS vendor' };
  // Every row names its expected reason (undefined: none), so that jest never takes a missing one for a `done` callback.
  it.each<[string, DeadLetter | undefined, number, string, RegExp | undefined]>([
    ['no such letter', undefined, 0, 'missing', undefined],
    ['dismissed already', letter({ resolvedAt: at(1), dismissed: { at: at(1), actor: 'bob', reason: 'x' } }), 2, 'refused', /was dismissed by bob/],
    ['resolved by a replay', letter({ resolvedAt: at(1) }), 2, 'refused', /a replay carried it out/],
    ['held by a run', letter({ retry: { transient: true, attempts: 0, claim: theirs } }), 11, 'refused', /is being run now/],
    ['open: dismissed', letter(), 2, 'dismissed', undefined],
  ])('%s', (_name, current, minute, expected, why) => {
    const result = dismiss(current, act, T0 + minute * MINUTE);
    expect(result.kind).toBe(expected);
    if (result.kind === 'refused') expect(result.why).toMatch(why!);
    if (result.kind === 'dismissed') expect(result.letter).toMatchObject({ resolvedAt: at(minute), dismissed: { at: at(minute), actor: 'ann', reason: act.reason }, retry: { transient: true, attempts: 0, nextAt: undefined, claim: undefined } });
  });
});
