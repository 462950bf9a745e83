/**
 * Merchants the loyalty service is rate-limiting. Its rate limit is per app token, so once a round
 * of calls for a merchant has ended in 429s (its retries spent: five requests over 1 + 2 + 4 + 8
 * units), that merchant's other records would meet the same. The worker then holds the merchant's
 * due work for a pause instead of spending its lanes, and the merchant's quota, on calls certain to
 * be refused; other merchants' work goes ahead meanwhile.
 *
 * The pause follows the schedule a record's own rounds follow (30, 60, 120 … units,
 * `roundPauseMs`), growing while storms follow one another, and ends at once when a call for the
 * merchant is answered (one of its checkouts went through: the storm is over). While it is paused,
 * one of its checkouts (or refunds) at a time is still tried as it arrives, a probe: the first to
 * go through lifts the pause. The others are recorded and answered `202` at once, without a call:
 * each would otherwise hold one of the POS requests the bridge handles at once (POS_MAX_IN_FLIGHT,
 * shared by every merchant) for the whole answer budget, and a storm's checkouts would crowd out
 * every other merchant's. Kept in memory, per process: another instance learns of a storm from its
 * own calls.
 */
import type { CallReport } from '../loyalty/client.js';
import { roundPauseMs, type TransitionOptions } from './transitions.js';

/** A new checkout or refund: delivered now, delivered now as the held merchant's probe, or left to the worker. */
export type InlineDelivery = 'now' | 'probe' | 'later';

export class RateLimitPauses {
  readonly #merchants = new Map<string, { untilMs: number; storms: number; probeUntilMs?: number }>();

  constructor(private readonly options: Pick<TransitionOptions, 'retryBaseMs'>) {}

  /**
   * What a round of calls for this merchant ended in: a 429 storm pauses it, an answer ends its
   * pause. Answers when a pause begins: until when.
   */
  note(merchantId: string, report: CallReport, nowMs: number): number | undefined {
    const { kind } = report.outcome;
    if (kind === 'retryable' && report.attempts.at(-1)?.response?.status === 429) return this.#rateLimited(merchantId, nowMs);
    if (kind === 'succeeded' || kind === 'results_failed' || kind === 'refused') this.#merchants.delete(merchantId);
    return undefined;
  }

  /**
   * Whether a new checkout or refund of this merchant may call now: always when it is not paused;
   * while it is, when no other probe is out. A probe is given back (`probeDone`) when its answer
   * budget is over; one never given back lapses after `probeMs`.
   */
  mayProbe(merchantId: string, nowMs: number, probeMs: number): InlineDelivery {
    const pause = this.#merchants.get(merchantId);
    if (!pause || pause.untilMs <= nowMs) return 'now';
    if ((pause.probeUntilMs ?? 0) > nowMs) return 'later';
    pause.probeUntilMs = nowMs + probeMs;
    return 'probe';
  }

  /** The probe's answer is given (its call may still be out): the next checkout may probe. */
  probeDone(merchantId: string): void {
    const pause = this.#merchants.get(merchantId);
    if (pause) pause.probeUntilMs = undefined;
  }

  isPaused(merchantId: string, nowMs: number): boolean {
    return (this.#merchants.get(merchantId)?.untilMs ?? 0) > nowMs;
  }

  /** The merchants paused at `nowMs`. */
  paused(nowMs: number): string[] {
    return [...this.#merchants].filter(([, pause]) => pause.untilMs > nowMs).map(([id]) => id);
  }

  #rateLimited(merchantId: string, nowMs: number): number | undefined {
    const current = this.#merchants.get(merchantId);
    // Rounds already out when the pause began end in 429s too: they do not lengthen it.
    if (current && current.untilMs > nowMs) {
      // A probe that met the storm again: the next checkout may probe.
      current.probeUntilMs = undefined;
      return undefined;
    }
    const storms = (current?.storms ?? 0) + 1;
    const untilMs = nowMs + roundPauseMs(storms, this.options);
    this.#merchants.set(merchantId, { untilMs, storms });
    return untilMs;
  }
}
