/**
 * Every rule of a dead letter's life, as pure functions, as transitions.ts holds a record's: kept,
 * kept again when the POS delivers it again, claimed for a run (an operator's replay or the bridge's
 * own), written after the run, dismissed. No I/O and no clock: the caller passes the time and
 * writes what comes back through the store's atomic `updateDeadLetter`. Ingest, the retry loop and
 * operator actions all decide from here, so a rule is written once.
 *
 * What the store must index to answer "due" and "held" (`deadLetterDueAtMs`, `deadLetterHeld`) and
 * the refusals an operator reads (`replayRefusal`, `dismissRefusal`) stay beside the store's types
 * (ledger/store.ts), which the stores use without the core.
 */
import type { FieldIssue } from '../errors.js';
import { deadLetterDueAtMs, deadLetterHeld, dismissRefusal, replayRefusal, type DeadLetter, type DeadLetterRetry } from '../ledger/store.js';

export interface DeadLetterRetryPolicy {
  /** The schedule's unit (DEAD_LETTER_RETRY_BASE_MS). */
  baseMs: number;
  /** Automatic runs at most (DEAD_LETTER_RETRY_MAX_ATTEMPTS); then the letter waits for an operator. */
  maxAttempts: number;
  /** How long a run holds its letter (IN_FLIGHT_LEASE_MS: longer than any run takes). */
  leaseMs: number;
}

/**
 * Automatic runs come this many units after the failure before them: 1, 2, 5, 10, 30, 60, 120,
 * 240 (with the default unit of a minute: after 1 min, then 2, 5, 10, 30 min, 1 h, 2 h, 4 h, so
 * about 8 hours in all). Past the last step, each further run waits as long as the last.
 */
export const RETRY_STEPS = [1, 2, 5, 10, 30, 60, 120, 240] as const;

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

/** Why a delivery is kept: its first cause, every field issue, and whether it passes by itself. */
export interface KeepCause {
  reason: string;
  reasonCode: string;
  issues: FieldIssue[];
  transient: boolean;
}

/** What a new letter holds besides its cause and times (the delivery as kept: ingest.ts). */
export type KeptDelivery = Pick<DeadLetter, 'id' | 'pos' | 'merchantId' | 'headers' | 'body' | 'bodyEncoding'>;

/**
 * A delivery the bridge cannot carry out now, kept (`existing` undefined) or kept again (the POS
 * delivered the same bytes again): a schedule already running is kept (a repeat does not push it
 * back); otherwise the new cause decides, and a run under way keeps its claim.
 */
export function keep(existing: DeadLetter | undefined, delivery: KeptDelivery, cause: KeepCause, policy: Pick<DeadLetterRetryPolicy, 'baseMs' | 'maxAttempts'>, nowMs: number): DeadLetter {
  const now = new Date(nowMs).toISOString();
  const issues = cause.issues.length ? { issues: cause.issues } : {};
  if (existing) {
    const { issues: _previous, ...rest } = existing;
    const held = existing.retry?.claim ? { claim: existing.retry.claim } : {};
    const retry = cause.transient && existing.retry?.nextAt ? existing.retry : { ...retryAfterFailure(policy, existing.retry, cause.transient, nowMs, false), ...held };
    return { ...rest, lastReceivedAt: now, deliveries: existing.deliveries + 1, reason: cause.reason, reasonCode: cause.reasonCode, ...issues, retry };
  }
  const { merchantId, ...kept } = delivery;
  return {
    ...kept,
    ...(merchantId ? { merchantId } : {}),
    receivedAt: now,
    lastReceivedAt: now,
    deliveries: 1,
    reason: cause.reason,
    reasonCode: cause.reasonCode,
    ...issues,
    replays: [],
    retry: retryAfterFailure(policy, undefined, cause.transient, nowMs, false),
  };
}

/** Who runs a letter: an operator's replay, or the bridge's own run of a letter due. */
export type RunBy = 'operator' | 'bridge';

/** A run's hold on its letter: no other run (another instance's, an operator's) starts meanwhile. */
export type RunClaim = NonNullable<DeadLetterRetry['claim']>;

export type ClaimResult =
  | { kind: 'claimed'; letter: DeadLetter }
  /** No such letter. */
  | { kind: 'missing' }
  /** Resolved, dismissed, or held by another run: `why` is what an operator's replay answers (409). */
  | { kind: 'refused'; why: string }
  /** The bridge's own run of a letter that is not due (a person's, or not yet). */
  | { kind: 'not_due'; why: string };

/** Claims `letter` for a run by `by` at `nowMs`, holding it until `claim.until`. */
export function claimForRun(letter: DeadLetter | undefined, by: RunBy, claim: RunClaim, nowMs: number): ClaimResult {
  if (!letter) return { kind: 'missing' };
  const why = replayRefusal(letter, nowMs);
  if (why) return { kind: 'refused', why };
  if (by === 'bridge' && !isDueForRetry(letter, nowMs)) return { kind: 'not_due', why: `dead letter ${letter.id} is not due for an automatic run` };
  return { kind: 'claimed', letter: { ...letter, retry: { ...(letter.retry ?? { transient: false, attempts: 0 }), claim } } };
}

/**
 * What a run came to: it went through, or it failed again and why; `created`, either way, the
 * checkouts it recorded (each names the letter as its origin).
 */
export type RunResult = { kind: 'processed'; outcome: string; created: string[] } | { kind: 'failed'; reason: string; issues?: FieldIssue[]; transient: boolean; created: string[] };

/**
 * The letter once the run `claim` made at `at` is written: resolved when it went through, else its
 * new cause and schedule (an automatic run's failure counts against the runs left). The claim is
 * given back only if still the run's own: a run that outlived its lease may have been taken over.
 */
export function afterRun(letter: DeadLetter, by: RunBy, claim: RunClaim, at: string, result: RunResult, policy: Pick<DeadLetterRetryPolicy, 'baseMs' | 'maxAttempts'>, doneMs: number): DeadLetter {
  const ours = letter.retry?.claim?.owner === claim.owner && letter.retry.claim.until === claim.until;
  const stillHeld = !ours && letter.retry?.claim ? { claim: letter.retry.claim } : {};
  const ran = by === 'bridge';
  const created = result.created.length ? { created: result.created } : {};
  if (result.kind === 'processed') {
    const replays = [...letter.replays, { at, by, outcome: `processed: ${result.outcome}`, ...created }];
    return { ...letter, resolvedAt: at, replays, retry: { transient: letter.retry?.transient ?? false, attempts: (letter.retry?.attempts ?? 0) + (ran ? 1 : 0), ...stillHeld } };
  }
  const replays = [...letter.replays, { at, by, outcome: `failed: ${result.reason}`, ...created }];
  const { issues: _previous, ...rest } = letter;
  return {
    ...rest,
    reason: result.reason,
    ...(result.issues?.length ? { issues: result.issues } : {}),
    replays,
    retry: { ...retryAfterFailure(policy, letter.retry, result.transient, doneMs, ran), ...stillHeld },
  };
}

export type DismissResult = { kind: 'dismissed'; letter: DeadLetter } | { kind: 'missing' } | { kind: 'refused'; why: string };

/** An operator closes the letter without running it: kept whole, resolved and dismissed with who and why, never run again. */
export function dismiss(letter: DeadLetter | undefined, act: { actor: string; reason: string }, nowMs: number): DismissResult {
  if (!letter) return { kind: 'missing' };
  const why = dismissRefusal(letter, nowMs);
  if (why) return { kind: 'refused', why };
  const at = new Date(nowMs).toISOString();
  return {
    kind: 'dismissed',
    letter: { ...letter, resolvedAt: at, dismissed: { at, actor: act.actor, reason: act.reason.slice(0, 500) }, ...(letter.retry ? { retry: { ...letter.retry, nextAt: undefined, claim: undefined } } : {}) },
  };
}
