/**
 * How backfill shares the process with checkouts (docs/backfill-and-reconcile.md). A pass is a long run of short
 * synchronous steps (a found order parsed, its record looked up): given a turn of the event loop
 * after each, it still took nearly all of it, and checkouts beside back-to-back passes waited
 * behind order after order (their p50 at 200/s went from 2.3 to 11.8 ms in the scale run of issue
 * 17). So backfill works at most `share` of the time, all its passes together: their steps' time
 * is summed, and the pass whose step brings the sum to `restFromMs` rests `sum × (1 − share) / share`
 * ms (a timer, so every checkout waiting meanwhile goes first); passes running at once do not
 * multiply the share. At most `maxPasses` passes run at once in a process; more wait for one to end.
 */

export interface PaceOptions {
  /** The part of the time passes may work, 0 < share ≤ 1 (default 0.25: a quarter of one core at most). */
  share?: number;
  /** Passes running at once in this process (default 8: a merchant's five POS accounts at once, and more); more wait their turn. */
  maxPasses?: number;
  /** Work shorter than this goes on without resting (a turn of the event loop is still given). */
  restFromMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class Pace {
  readonly share: number;
  readonly maxPasses: number;
  readonly #restFromMs: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  #running = 0;
  readonly #waiting: (() => void)[] = [];
  /** Every pass's work since the last rest. */
  #worked = 0;

  constructor(options: PaceOptions = {}) {
    this.share = options.share ?? 0.25;
    if (!(this.share > 0 && this.share <= 1)) throw new Error(`backfill share must be in (0, 1], got ${this.share}`);
    this.maxPasses = options.maxPasses ?? 8;
    this.#restFromMs = options.restFromMs ?? 2;
    this.#now = options.now ?? (() => performance.now());
    this.#sleep = options.sleep ?? sleepMs;
  }

  /** Adds a step's time to the passes' work: answers how long to rest now (0: not yet). */
  worked(ms: number): number {
    this.#worked += ms;
    if (this.#worked < this.#restFromMs) return 0;
    const rest = (this.#worked * (1 - this.share)) / this.share;
    this.#worked = 0;
    return rest;
  }

  sleep(ms: number): Promise<void> {
    return this.#sleep(ms);
  }

  /** Passes running now, and waiting for a turn (for tests and the status). */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }

  /** Runs `pass` once fewer than `maxPasses` run; `pass` gets a clock of its own work to call `rest` on. */
  async run<T>(pass: (work: WorkClock) => Promise<T>): Promise<T> {
    if (this.#running >= this.maxPasses) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await pass(new WorkClock(this, this.#now));
    } finally {
      // The slot passes straight to the next waiting pass, if any.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

/** One pass's clock: the time of its steps, not of what ran between them, added to every pass's work since the last rest. */
export class WorkClock {
  #stepStart: number;
  /** Milliseconds this pass rested so far (for tests and logs). */
  rested = 0;

  constructor(
    private readonly pace: Pace,
    private readonly now: () => number,
  ) {
    this.#stepStart = now();
  }

  /**
   * A step begins now: what the pass waited for before it (the POS's next page, which can take
   * seconds) is not work, and would otherwise make it rest three times as long for nothing.
   */
  begin(): void {
    this.#stepStart = this.now();
  }

  /** Called between two steps of a pass: rests in proportion to the passes' work since the last rest, or gives a turn of the event loop. */
  async rest(): Promise<void> {
    const ms = this.pace.worked(this.now() - this.#stepStart);
    if (ms > 0) {
      this.rested += ms;
      await this.pace.sleep(ms);
    } else await turn();
    this.#stepStart = this.now();
  }
}
