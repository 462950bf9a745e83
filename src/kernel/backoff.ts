/**
 * The one way the bridge waits longer after each failure in a row. Every back-off is a schedule of
 * steps in units: the n-th wait (the first is 1) is the n-th step times the unit, and past the last
 * step each further wait is the last again. The schedules themselves stay beside the rule they
 * serve, since each is argued there:
 * - the loyalty client's 429/5xx retries within one round, `DOUBLING` (1, 2, 4, 8 units, README
 *   "loyalty rules");
 * - the worker's pause between rounds that ended without an answer (core/transitions.ts);
 * - a dead letter's automatic runs (core/dead-letter-transitions.ts);
 * - a POS listing's transient failures in backfill, `DOUBLING` under the POS's Retry-After.
 */

/** 1, 2, 4, … units: the waits of a retry that doubles. */
export const DOUBLING: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128];

/** Milliseconds of the `n`-th wait in a row (1-based; anything below 1 is the first) on `schedule`, in units of `unitMs`. */
export function backoffMs(schedule: readonly number[], unitMs: number, n: number): number {
  if (schedule.length === 0) throw new RangeError('a back-off schedule needs at least one step');
  const step = schedule[Math.min(Math.max(Math.floor(n), 1), schedule.length) - 1]!;
  return unitMs * step;
}
