/**
 * Scripted misbehaviour of one fake POS account's API (docs/simulator-pos-apis.md, "Faults"): the
 * ways a POS's own API refuses or delays a reader such as the backfill poller. Kept apart from the
 * loyalty service's FaultQueue (../faults.ts), whose CountedQueue it shares: those model ambiguous
 * writes, these model reads.
 *
 * - `rate_limit`: 429 in the POS's own shape, with a Retry-After header when that POS sends one
 *   (`retryAfter` undefined), with the given seconds (a number), or without it (null);
 * - `server_error`: a 5xx in the POS's own shape (default 500);
 * - `slow`: the normal answer, `delayMs` late (default 5000); a client that gives up sooner sees a
 *   timeout, and close() of the simulator cancels the wait.
 *
 * A fault is taken only by a request that passed authentication (the account must be known to
 * choose its queue), so a refused request never uses up a fault meant for a real read.
 */
import { CountedQueue } from '../faults.js';

export const POS_FAULT_KINDS = ['rate_limit', 'server_error', 'slow'] as const;
export type PosFaultKind = (typeof POS_FAULT_KINDS)[number];

/** `list`: the paged list or search endpoint; `get`: any single-object read. */
export const POS_FAULT_TARGETS = ['list', 'get', 'any'] as const;
export type PosFaultTarget = (typeof POS_FAULT_TARGETS)[number];

export interface PosFaultSpec {
  kind: PosFaultKind;
  /** How many matching requests it hits before it is used up; default 1. */
  times?: number;
  on?: PosFaultTarget;
  /** rate_limit: seconds for Retry-After; null sends none; undefined sends what the POS sends. */
  retryAfter?: number | null;
  /** server_error: a 5xx status; default 500. */
  status?: number;
  /** slow: default 5000. */
  delayMs?: number;
  /** Matching requests let through before it hits (default 0): a 429 on a listing's third page is `after: 2`. */
  after?: number;
}

export interface PosFault {
  kind: PosFaultKind;
  on: PosFaultTarget;
  retryAfter?: number | null;
  status?: number;
  delayMs?: number;
  /** Matching requests still to let through before it hits. */
  after?: number;
}

export class PosFaultQueue {
  readonly #queue = new CountedQueue<PosFault>();

  inject(spec: PosFaultSpec): void {
    const { kind, times = 1, on = 'any', retryAfter, status, delayMs, after } = spec;
    if (!POS_FAULT_KINDS.includes(kind)) throw new RangeError(`unknown fault kind ${String(kind)}`);
    if (!POS_FAULT_TARGETS.includes(on)) throw new RangeError(`on must be one of ${POS_FAULT_TARGETS.join(', ')}`);
    if (!Number.isInteger(times) || times < 1) throw new RangeError('times must be an integer >= 1');
    if (status !== undefined && (!Number.isInteger(status) || status < 500 || status > 599)) throw new RangeError('status must be a 5xx integer');
    if (delayMs !== undefined && (!Number.isFinite(delayMs) || delayMs < 0)) throw new RangeError('delayMs must be >= 0');
    if (retryAfter !== undefined && retryAfter !== null && (!Number.isFinite(retryAfter) || retryAfter < 0)) throw new RangeError('retryAfter must be >= 0 seconds, or null');
    if (after !== undefined && (!Number.isInteger(after) || after < 0)) throw new RangeError('after must be an integer >= 0');
    const fault: PosFault = { kind, on };
    if (retryAfter !== undefined) fault.retryAfter = retryAfter;
    if (status !== undefined) fault.status = status;
    if (delayMs !== undefined) fault.delayMs = delayMs;
    if (after) fault.after = after;
    this.#queue.push(fault, times);
  }

  /** The oldest fault aimed at this kind of read, using up one of its times. */
  take(target: 'list' | 'get'): PosFault | undefined {
    return this.#queue.take((fault) => {
      if (fault.on !== 'any' && fault.on !== target) return false;
      // Still letting requests through: this one passes it (and may meet an older-queued one after it).
      if (fault.after) {
        fault.after -= 1;
        return false;
      }
      return true;
    });
  }

  clear(): void {
    this.#queue.clear();
  }

  /** Remaining applications, a fault injected with times: 3 counting 3. */
  pending(): number {
    return this.#queue.pending();
  }
}
