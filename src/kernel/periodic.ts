/**
 * A background loop that runs one pass at a time, `delayMs()` after the last one ended: the dead
 * letters' retries and backfill's scheduled rounds. A pass never overlaps the next, and stop()
 * waits for the one under way, so what it writes is written before the ledger closes.
 */
export class PeriodicLoop {
  #timer?: NodeJS.Timeout;
  #pass?: Promise<unknown>;
  #stopped = true;
  #stopping = false;
  #passes = 0;
  #waiting: { until: number; done: () => void }[] = [];

  /** `pass` handles its own failures (a rejection is passed to `onError` and the loop goes on). */
  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly delayMs: () => number,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Set by stop(): a pass under way should start nothing more. */
  get stopping(): boolean {
    return this.#stopping;
  }

  start(): void {
    this.#stopped = false;
    this.#stopping = false;
    this.#schedule();
  }

  /** Stops scheduling and waits for the pass under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping = true;
    clearTimeout(this.#timer);
    await this.#pass;
  }

  /** Resolves once `count` more passes have finished (tests wait on this, not on sleeps). */
  passes(count = 1): Promise<void> {
    return new Promise((done) => this.#waiting.push({ until: this.#passes + count, done }));
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#pass = this.pass()
        .catch(this.onError)
        .finally(() => {
          this.#passes++;
          const done = this.#waiting.filter((w) => w.until <= this.#passes);
          this.#waiting = this.#waiting.filter((w) => w.until > this.#passes);
          for (const w of done) w.done();
          this.#schedule();
        });
    }, this.delayMs());
    this.#timer.unref();
  }
}
