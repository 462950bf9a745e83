/**
 * Dead letters that pass by themselves. A webhook whose object the bridge could not fetch because
 * the POS API timed out, or answered 5xx or 429, is kept as a dead letter like any other, but the
 * bridge runs it again on its own, on the schedule below, until it goes through or the runs are
 * used up; then it waits for an operator's replay. Letters that need a person from the start
 * (missing configuration, an unknown or suspended merchant, a payload the bridge cannot translate)
 * are never run by the loop.
 *
 * The loop lives here, apart from the record worker (worker.ts): it reads only dead letters, and
 * the ledger records it causes are written by the same intake as every delivery, so that what a
 * letter accrues or reverses goes through the rules that make it happen once.
 *
 * Several instances on one PostgreSQL ledger: an instance claims a letter (the store's atomic
 * `updateDeadLetter`) before running it and holds it for the lease (`retry.claim`, a lease under
 * lease.ts' rules); others leave it alone until the run is written, or the lease ends (the
 * instance stopped mid-run). Within one instance, ingest keeps the loop and an operator's replay
 * from running one letter at once. A resolved letter is never claimed, so never run again.
 */
import { withMerchant } from '../kernel/log-context.js';
import type { DeadLetterStore } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import { PeriodicLoop } from '../kernel/periodic.js';

// The letter's rules (its schedule, when it is due, claims and runs) are dead-letter-transitions.ts'.

/** What the loop asks of ingest: run one due letter, claiming it first (false: it was not due, or another instance holds it). */
export interface DeadLetterRunner {
  retryDeadLetter(id: string): Promise<{ ran: boolean; resolved?: boolean }>;
}

/** Letters looked at per pass. A pass runs them one after another: they are few, and each can take a POS API timeout. */
const BATCH = 20;

export class DeadLetterRetrier {
  readonly #loop = new PeriodicLoop(
    () =>
      this.pass().then(({ ran, resolved }) => {
        if (ran) this.logger.info({ ran, resolved }, 'dead letters run again');
      }),
    () => this.options.intervalMs,
    (error) => {
      this.logger.error({ err: error }, 'dead-letter pass failed');
      this.options.onPassFailed?.(error);
    },
  );

  constructor(
    /** Only to find the letters due: each run goes through ingest, which claims and writes the letter. */
    private readonly store: Pick<DeadLetterStore, 'listDueDeadLetters'>,
    private readonly runner: DeadLetterRunner,
    /** `onPassFailed`: told of each pass that failed, as the worker's. */
    private readonly options: { intervalMs: number; onPassFailed?: (error: unknown) => void },
    private readonly logger: Logger,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  start(): void {
    this.#loop.start();
  }

  /** Stops scheduling and waits for the pass under way (its run is written before this resolves). */
  stop(): Promise<void> {
    return this.#loop.stop();
  }

  /** One pass: every letter due now, earliest first, up to a batch. Answers how many ran and how many of those went through. */
  async pass(): Promise<{ ran: number; resolved: number }> {
    const due = await this.store.listDueDeadLetters({ nowMs: this.clock().getTime(), limit: BATCH });
    let ran = 0;
    let resolved = 0;
    for (const letter of due) {
      if (this.#loop.stopping) break;
      try {
        // Its lines name the letter's merchant, when one is known (log-context.ts).
        const run = () => this.runner.retryDeadLetter(letter.id);
        const outcome = await (letter.merchantId ? withMerchant(letter.merchantId, run) : run());
        if (outcome.ran) ran++;
        if (outcome.resolved) resolved++;
      } catch (error) {
        this.logger.error({ err: error, deadLetterId: letter.id, merchantId: letter.merchantId }, 'automatic run of a dead letter failed');
      }
    }
    return { ran, resolved };
  }

  /** Resolves once `count` more scheduled passes have finished (tests wait on this, not on sleeps). */
  passes(count = 1): Promise<void> {
    return this.#loop.passes(count);
  }
}
