/**
 * Scripted misbehaviour of the fake loyalty service. Each kind reproduces one way the real upstream
 * can leave a point-of-sale write ambiguous or refused (loyalty-service-api.md, Errors: 429 from the
 * front proxy, 5xx, and rule 3 "after a network timeout on a write, verify ... because no operation
 * is idempotent").
 */
export const FAULT_KINDS = [
  'rate_limit',
  'server_error',
  'slow_after_commit',
  'drop_before_commit',
  'drop_after_commit',
  'result_failure',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export type FaultTarget = 'accrue' | 'reverse' | 'any';

export interface FaultSpec {
  kind: FaultKind;
  /** How many matching requests this fault hits before it is used up. */
  times?: number;
  on?: FaultTarget;
  /** slow_after_commit only; default 5000. */
  delayMs?: number;
  /** server_error only; default 503. */
  status?: number;
  /** result_failure: the failed result's errorMessage; server_error: the body's message. */
  message?: string;
}

export interface Fault {
  kind: FaultKind;
  on: FaultTarget;
  delayMs?: number;
  status?: number;
  message?: string;
}

/**
 * Faults that are used up: each is taken by the oldest-first match of a request and lasts its
 * `times`. What the loyalty service's FaultQueue and the fake POS APIs' PosFaultQueue
 * (pos-apis/faults.ts) are made of.
 */
export class CountedQueue<T> {
  #entries: { item: T; remaining: number }[] = [];

  /** `times` must be an integer >= 1 (the callers check it, with their own message). */
  push(item: T, times: number): void {
    this.#entries.push({ item, remaining: times });
  }

  /** The oldest item `matches` accepts, using up one of its times. */
  take(matches: (item: T) => boolean): T | undefined {
    const index = this.#entries.findIndex((e) => matches(e.item));
    if (index < 0) return undefined;
    const entry = this.#entries[index]!;
    entry.remaining -= 1;
    if (entry.remaining === 0) this.#entries.splice(index, 1);
    return entry.item;
  }

  clear(): void {
    this.#entries = [];
  }

  /** Remaining uses: an item pushed with times 3 counts 3. */
  pending(): number {
    return this.#entries.reduce((sum, e) => sum + e.remaining, 0);
  }
}

export class FaultQueue {
  readonly #queue = new CountedQueue<Fault>();
  #rateLimitAll = false;

  /**
   * While true, every point-of-sale call carrying this merchant's app token (resolve-credentials
   * included, whatever its body) is answered 429 with the front proxy's HTML page and no
   * Retry-After, commits nothing and consumes no queued fault; other merchants are served as usual.
   * It models a rate limit that does not lift however the client backs off. clear() ends it.
   */
  get rateLimitAll(): boolean {
    return this.#rateLimitAll;
  }

  set rateLimitAll(on: boolean) {
    this.#rateLimitAll = on;
  }

  inject(spec: FaultSpec): void {
    const { kind, times = 1, on = 'any', delayMs, status, message } = spec;
    if (!FAULT_KINDS.includes(kind)) throw new RangeError(`unknown fault kind ${String(kind)}`);
    if (!Number.isInteger(times) || times < 1) throw new RangeError('times must be an integer >= 1');
    if (status !== undefined && (!Number.isInteger(status) || status < 500 || status > 599)) {
      throw new RangeError('status must be a 5xx integer');
    }
    if (delayMs !== undefined && (!Number.isFinite(delayMs) || delayMs < 0)) throw new RangeError('delayMs must be >= 0');
    const fault: Fault = { kind, on };
    if (delayMs !== undefined) fault.delayMs = delayMs;
    if (status !== undefined) fault.status = status;
    if (message !== undefined) fault.message = message;
    this.#queue.push(fault, times);
  }

  /**
   * The oldest fault aimed at this operation, consuming one of its uses. Called only after the body
   * and X-App-Token passed, so refused requests never eat a fault meant for a real write.
   */
  take(operation: 'accrue' | 'reverse'): Fault | undefined {
    return this.#queue.take((fault) => fault.on === 'any' || fault.on === operation);
  }

  /** Drops every queued fault and ends a rateLimitAll storm. */
  clear(): void {
    this.#queue.clear();
    this.#rateLimitAll = false;
  }

  /** Remaining queued fault applications (a fault injected with times: 3 counts 3); a storm is not counted. */
  pending(): number {
    return this.#queue.pending();
  }
}
