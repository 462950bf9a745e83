/** The schedule of a dead letter's automatic runs (src/core/dead-letter-retry.ts), as the README states it. */
import { describe, expect, it } from '@jest/globals';
import { isDueForRetry, retryAfterFailure, retryDelayMs, RETRY_STEPS } from '../../src/core/dead-letter-transitions.js';
import type { DeadLetter } from '../../src/ledger/store.js';

const policy = { baseMs: 60_000, maxAttempts: 8 };
const T = Date.parse('2026-03-01T09:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

describe('dead-letter retry schedule', () => {
  it('waits 1, 2, 5, 10, 30, 60, 120, 240 units, then the last step again', () => {
    expect(RETRY_STEPS.map((_, attempts) => retryDelayMs(policy, attempts) / 60_000)).toEqual([1, 2, 5, 10, 30, 60, 120, 240]);
    expect(retryDelayMs(policy, 12)).toBe(240 * 60_000);
  });

  it('a transient failure schedules the next run; an automatic run counts, a redelivery or an operator does not', () => {
    expect(retryAfterFailure(policy, undefined, true, T, false)).toEqual({ transient: true, attempts: 0, nextAt: iso(T + 60_000) });
    expect(retryAfterFailure(policy, { transient: true, attempts: 0, nextAt: iso(T) }, true, T, true)).toEqual({ transient: true, attempts: 1, nextAt: iso(T + 120_000) });
    expect(retryAfterFailure(policy, { transient: true, attempts: 3 }, true, T, false)).toEqual({ transient: true, attempts: 3, nextAt: iso(T + 600_000) });
  });

  it('a cause that needs a person, or the last run allowed, schedules nothing; the claim is given back', () => {
    expect(retryAfterFailure(policy, undefined, false, T, false)).toEqual({ transient: false, attempts: 0 });
    expect(retryAfterFailure(policy, { transient: true, attempts: 7, claim: { owner: 'a', until: iso(T + 1000) } }, true, T, true)).toEqual({ transient: true, attempts: 8 });
    expect(retryAfterFailure({ ...policy, maxAttempts: 0 }, undefined, true, T, false)).toEqual({ transient: true, attempts: 0 });
  });

  it('due: its time has come, it is open, and no run holds it', () => {
    const letter = (retry: DeadLetter['retry'], resolvedAt?: string) => ({ retry, ...(resolvedAt ? { resolvedAt } : {}) }) as DeadLetter;
    expect(isDueForRetry(letter({ transient: true, attempts: 0, nextAt: iso(T) }), T)).toBe(true);
    expect(isDueForRetry(letter({ transient: true, attempts: 0, nextAt: iso(T + 1) }), T)).toBe(false);
    expect(isDueForRetry(letter({ transient: true, attempts: 0, nextAt: iso(T) }, iso(T)), T)).toBe(false);
    expect(isDueForRetry(letter({ transient: false, attempts: 0 }), T)).toBe(false);
    expect(isDueForRetry(letter({ transient: true, attempts: 0, nextAt: iso(T), claim: { owner: 'a', until: iso(T + 1) } }), T)).toBe(false);
    // A claim that ended was left by an instance that stopped mid-run: the letter is due again.
    expect(isDueForRetry(letter({ transient: true, attempts: 0, nextAt: iso(T - 10), claim: { owner: 'a', until: iso(T) } }), T)).toBe(true);
  });
});
