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
 * `updateDeadLetter`) before running it and holds it for the lease; others leave it alone until
 * the run is written, or the lease ends (the instance stopped mid-run). A resolved letter is never
 * claimed, so never run again.
 */
import { withMerchant } from '../log-context.js';
import type { DeadLetter, DeadLetterRetry, LedgerStore } from '../ledger/store.js';
import { deadLetterDueAtMs, deadLetterHeld } from '../ledger/store.js';
import type { Logger } from '../logger.js';
import { PeriodicLoop } from './periodic.js';

/**
 * Automatic runs come this many units after the failure before them: 1, 2, 5, 10, 30, 60, 120,
 * 240 (with the default unit of a minute: after 1 min, then 2, 5, 10, 30 min, 1 h, 2 h, 4 h, so
 * about 8 hours in all). Past the last step, each further run waits as long as the last.
 */
export const RETRY_STEPS = [1, 2, 5, 10, 30, 60, 120, 240] as const;

export interface DeadLetterRetryPolicy {
  /** The schedule's unit (DEAD_LETTER_RETRY_BASE_MS). */
  baseMs: number;
  /** Automatic runs at most (DEAD_LETTER_RETRY_MAX_ATTEMPTS); then the letter waits for an operator. */
  maxAttempts: number;
  /** How long a run holds its letter (IN_FLIGHT_LEASE_MS: longer than any run takes). */
  leaseMs: number;
}

/** Milliseconds before the next run, once `attempts` runs have been made. */
export function retryDelayMs(policy: Pick<DeadLetterRetryPolicy, 'baseMs'>, attempts: number): number {
  return policy.baseMs * RETRY_STEPS[Math.min(attempts, RETRY_STEPS.length - 1)]!;
}

/**
 * The retry state after the letter failed (again) at `nowMs`. `ran`: an automatic run failed, and
 * counts; an operator's replay or the POS delivering it again does not. The next run is scheduled
 * only for a transient cause, while runs remain. The claim of the run that failed is given back.
 */
export function retryAfterFailure(policy: Pick<DeadLetterRetryPolicy, 'baseMs' | 'maxAttempts'>, previous: DeadLetterRetry | undefined, transient: boolean, nowMs: number, ran: boolean): DeadLetterRetry {
  const attempts = (previous?.attempts ?? 0) + (ran ? 1 : 0);
  const more = transient && attempts < policy.maxAttempts;
  return { transient, attempts, ...(more ? { nextAt: new Date(nowMs + retryDelayMs(policy, attempts)).toISOString() } : {}) };
}

/** Due for an automatic run by `nowMs`, and nobody holds it. */
export function isDueForRetry(letter: DeadLetter, nowMs: number): boolean {
  const due = deadLetterDueAtMs(letter);
  return due !== undefined && due <= nowMs && !deadLetterHeld(letter, nowMs);
}

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
    (error) => this.logger.error({ err: error }, 'dead-letter pass failed'),
  );

  constructor(
    private readonly store: LedgerStore,
    private readonly runner: DeadLetterRunner,
    private readonly options: { intervalMs: number },
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
