/**
 * Scripted misbehaviour of the fake loyalty service. Each kind reproduces one way the real upstream
 * can leave a point-of-sale write ambiguous or refused (loyalty-service-api.md, Errors: 429 from the
 * front proxy, 5xx, and rule 3 "after a network timeout on a write, verify ... because no operation
 * is idempotent"). Aimed `on: 'history'`, a fault hits the operations history reads instead (a 429 or
 * a 5xx there, or `history_moves`: the list moves between page requests, as "paging through a
 * changing collection can skip or repeat rows" warns, Limits).
 */
export const FAULT_KINDS = [
  'rate_limit',
  'server_error',
  'slow_after_commit',
  'drop_before_commit',
  'drop_after_commit',
  'result_failure',
  'history_moves',
  'slow',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * `any`: accrue or reverse. `history`: GET /api/v2/operations only. `cards`: GET /api/v2/cards and
 * /api/v2/cards/{id}, a register's reads (neither read is ever hit by `any`).
 */
export type FaultTarget = 'accrue' | 'reverse' | 'any' | 'history' | 'cards';
export const FAULT_TARGETS = ['accrue', 'reverse', 'any', 'history', 'cards'] as const satisfies readonly FaultTarget[];
/** What a history read can be made to do. */
const HISTORY_FAULTS: readonly FaultKind[] = ['rate_limit', 'server_error', 'history_moves', 'slow'];
/** What a card read can be made to do. */
const CARD_FAULTS: readonly FaultKind[] = ['rate_limit', 'server_error', 'slow'];
/** Reads only: a write's slowness is slow_after_commit's. */
const READ_ONLY_FAULTS: readonly FaultKind[] = ['history_moves', 'slow'];
/** history_moves: rows the list turns by on each read, unless told. */
const DEFAULT_SHIFT = 10;

export interface FaultSpec {
  kind: FaultKind;
  /** How many matching requests this fault hits before it is used up. */
  times?: number;
  on?: FaultTarget;
  /** slow_after_commit and slow (a read answered late) only; default 5000. */
  delayMs?: number;
  /** server_error only; default 503. */
  status?: number;
  /** result_failure: the failed result's errorMessage; server_error: the body's message. */
  message?: string;
  /**
   * history_moves only (default 10): on each read it hits, the operations list turns by this many
   * more rows (the row at position n is then served at n − shift), so a reader paging through it
   * without overlap skips rows. Once its times are used up the list stays in its last order.
   */
  shift?: number;
}

export interface Fault {
  kind: FaultKind;
  on: FaultTarget;
  delayMs?: number;
  shift?: number;
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
  /** Rows the operations list is turned by (history_moves): the order it is served in now. */
  historyRotation = 0;
  /**
   * How long every card read (GET /api/v2/cards, /api/v2/cards/{id}) waits before it is answered, in
   * ms: the loyalty service's own latency, as a register sees it (the benchmark's 0 and 100 ms).
   */
  cardReadLatencyMs = 0;

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
    const { kind, times = 1, on = kind === 'history_moves' || kind === 'slow' ? 'history' : 'any', delayMs, status, message, shift } = spec;
    if (!FAULT_KINDS.includes(kind)) throw new RangeError(`unknown fault kind ${String(kind)}`);
    if (on === 'history' && !HISTORY_FAULTS.includes(kind)) throw new RangeError(`on: history takes ${HISTORY_FAULTS.join(', ')} only`);
    if (on === 'cards' && !CARD_FAULTS.includes(kind)) throw new RangeError(`on: cards takes ${CARD_FAULTS.join(', ')} only`);
    if (kind === 'history_moves' && on !== 'history') throw new RangeError('history_moves is on: history only');
    if (READ_ONLY_FAULTS.includes(kind) && on !== 'history' && on !== 'cards') throw new RangeError(`${kind} is a read's: on: history or cards`);
    if (shift !== undefined && (!Number.isInteger(shift) || shift < 1)) throw new RangeError('shift must be an integer >= 1');
    if (!Number.isInteger(times) || times < 1) throw new RangeError('times must be an integer >= 1');
    if (status !== undefined && (!Number.isInteger(status) || status < 500 || status > 599)) {
      throw new RangeError('status must be a 5xx integer');
    }
    if (delayMs !== undefined && (!Number.isFinite(delayMs) || delayMs < 0)) throw new RangeError('delayMs must be >= 0');
    const fault: Fault = { kind, on };
    if (delayMs !== undefined) fault.delayMs = delayMs;
    if (status !== undefined) fault.status = status;
    if (message !== undefined) fault.message = message;
    if (kind === 'history_moves') fault.shift = shift ?? DEFAULT_SHIFT;
    this.#queue.push(fault, times);
  }

  /**
   * The oldest fault aimed at this operation, consuming one of its uses. Called only after the body
   * and X-App-Token passed, so refused requests never eat a fault meant for a real write.
   */
  take(operation: 'accrue' | 'reverse'): Fault | undefined {
    return this.#queue.take((fault) => fault.on === 'any' || fault.on === operation);
  }

  /** The oldest fault aimed at history reads (`on: 'history'`), consuming one of its uses. */
  takeHistory(): Fault | undefined {
    return this.#queue.take((fault) => fault.on === 'history');
  }

  /** The oldest fault aimed at card reads (`on: 'cards'`), consuming one of its uses. */
  takeCards(): Fault | undefined {
    return this.#queue.take((fault) => fault.on === 'cards');
  }

  /** Drops every queued fault, ends a rateLimitAll storm and puts the history back in its own order. */
  clear(): void {
    this.#queue.clear();
    this.#rateLimitAll = false;
    this.historyRotation = 0;
    this.cardReadLatencyMs = 0;
  }

  /** Remaining queued fault applications (a fault injected with times: 3 counts 3); a storm is not counted. */
  pending(): number {
    return this.#queue.pending();
  }
}
