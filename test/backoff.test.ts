import { describe, expect, it } from '@jest/globals';
import { backoffMs, DOUBLING } from '../src/kernel/backoff.js';
import { RETRY_STEPS, retryDelayMs } from '../src/core/dead-letter-transitions.js';
import { roundPauseMs } from '../src/core/transitions.js';

describe('backoffMs, the one back-off rule', () => {
  it('the n-th wait is the n-th step in units; past the last step, the last again', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffMs([1, 2, 5], 1000, n))).toEqual([1000, 2000, 5000, 5000, 5000]);
  });

  it('anything below the first wait is the first (a count that starts at 0 cannot index before the schedule)', () => {
    expect([0, -3, 0.5].map((n) => backoffMs([7, 9], 10, n))).toEqual([70, 70, 70]);
  });

  it('refuses an empty schedule rather than waiting NaN', () => {
    expect(() => backoffMs([], 1000, 1)).toThrow(/at least one step/);
  });

  it('the loyalty client doubles 1, 2, 4, 8 units over its four retries', () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(DOUBLING, 5, n))).toEqual([5, 10, 20, 40]);
  });

  it("the worker's pauses between rounds grow from 30 units to an hour's worth", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 20].map((rounds) => roundPauseMs(rounds, { retryBaseMs: 1 }))).toEqual([30, 30, 60, 120, 300, 600, 1800, 3600, 3600]);
  });

  it("a dead letter's runs come 1, 2, 5, 10, 30, 60, 120, 240 units after the failures before them", () => {
    expect(Array.from({ length: 10 }, (_, attempts) => retryDelayMs({ baseMs: 60_000 }, attempts) / 60_000)).toEqual([...RETRY_STEPS, 240, 240]);
  });
});
