/**
 * Every rule of a dead letter's life, as pure functions, as transitions.ts holds a record's: kept
 * (for which cause, and whether it passes by itself), kept again when the POS delivers it again,
 * claimed for a run (an operator's replay or the bridge's own), written after the run, dismissed.
 * No I/O and no clock: the caller passes the time and writes what comes back through the store's
 * atomic `updateDeadLetter`. Ingest, the retry loop and operator actions all decide from here, so
 * a rule is written once.
 *
 * A run's claim (`retry.claim`) is a lease, and follows lease.ts' rules: it keeps other instances
 * out until it runs out; this instance knows by itself whether its own run of the letter is still
 * going (`RunClaimant.underWay`).
 *
 * Still in ledger/store.ts: `deadLetterDueAtMs`, which every store indexes letters by, so it must
 * stay below the core.
 */
import { backoffMs } from '../kernel/backoff.js';
import { BridgeError, ValidationError, type FieldIssue } from '../kernel/errors.js';
import { deadLetterDueAtMs, type DeadLetter, type DeadLetterRetry } from '../ledger/store.js';
import { isHeld, release, take, type Lease } from '../kernel/lease.js';
import { PosApiError } from '../pos/api.js';

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
  // The next run is the (attempts + 1)-th: the first comes one step after the failure that made the letter.
  return backoffMs(RETRY_STEPS, policy.baseMs, attempts + 1);
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

/** Due for an automatic run by `nowMs`, and no run's claim holds it (a live claim, anyone's: the due time the stores index waits it out). */
export function isDueForRetry(letter: DeadLetter, nowMs: number): boolean {
  const due = deadLetterDueAtMs(letter);
  return due !== undefined && due <= nowMs && !isHeld(letter.retry?.claim, nowMs);
}

/** A cause that may pass by itself: the POS API timed out, or answered 5xx or 429. */
export function passesByItself(error: BridgeError): boolean {
  return error instanceof PosApiError && error.transient;
}

/**
 * Why a part of a delivery is kept, from its failures (at least one): the first one's code, every
 * message in one line of bounded length, the field issues (20 at most). One transient failure is
 * enough to run the part again: what went through is skipped then, and once only failures a person
 * must fix are left, the letter waits for one.
 */
export function keepCause(errors: readonly BridgeError[]): KeepCause {
  const text = errors.map((e) => e.message).join('; ');
  return {
    reason: text.length > 2000 ? `${text.slice(0, 2000)}…` : text,
    reasonCode: errors[0]!.code,
    issues: errors.flatMap((e) => (e instanceof ValidationError ? e.issues : [])).slice(0, 20),
    transient: errors.some(passesByItself),
  };
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

/** A run's hold on its letter, a lease (lease.ts): no other run (another instance's, an operator's) starts meanwhile. */
export type RunClaim = Lease;

/** Who asks to run a letter: this instance, for how long its run holds the letter, and whether a run of it by this instance is still going. */
export interface RunClaimant {
  owner: string;
  leaseMs: number;
  /** This instance runs the letter now (its claim does not keep it out: lease.ts), so it does not run it again. */
  underWay?: boolean;
}

export type ClaimResult =
  | { kind: 'claimed'; letter: DeadLetter }
  /** No such letter. */
  | { kind: 'missing' }
  /** Resolved, dismissed, or held by another run: `why` is what an operator's replay answers (409). */
  | { kind: 'refused'; why: string }
  /** The bridge's own run of a letter that is not due (a person's, or not yet). */
  | { kind: 'not_due'; why: string };

/**
 * Claims `letter` for a run by `by` at `nowMs`, holding it for `claimant.leaseMs` (lease.ts `take`):
 * refused once resolved, while this instance runs it already, and while another instance's run
 * holds it; the bridge's own run only once it is due.
 */
export function claimForRun(letter: DeadLetter | undefined, by: RunBy, claimant: RunClaimant, nowMs: number): ClaimResult {
  if (!letter) return { kind: 'missing' };
  if (letter.resolvedAt) return { kind: 'refused', why: replayRefusal(letter, nowMs)! };
  const beingRun = `dead letter ${letter.id} is being run now (by ${claimant.owner}); ask again once that run is written`;
  if (claimant.underWay) return { kind: 'refused', why: replayRefusal(letter, nowMs) ?? beingRun };
  const taking = take(letter.retry?.claim, claimant.owner, nowMs, claimant.leaseMs);
  if ('heldBy' in taking) return { kind: 'refused', why: replayRefusal(letter, nowMs) ?? beingRun };
  if (by === 'bridge' && !isDueForRetry(letter, nowMs)) return { kind: 'not_due', why: `dead letter ${letter.id} is not due for an automatic run` };
  return { kind: 'claimed', letter: { ...letter, retry: { ...(letter.retry ?? { transient: false, attempts: 0 }), claim: taking.taken } } };
}

/**
 * What a run came to: it went through, or it failed again and why; `created`, either way, the
 * checkouts it recorded (each names the letter as its origin); `actedOn`, the records that existed
 * and that it acted on or matched (a refund reversing its order, a repeat of a recorded checkout).
 */
export type RunResult = ({ kind: 'processed'; outcome: string } | { kind: 'failed'; reason: string; issues?: FieldIssue[]; transient: boolean }) & { created: string[]; actedOn?: string[] };

/**
 * The letter once the run `claim` made at `at` is written: resolved when it went through, else its
 * new cause and schedule (an automatic run's failure counts against the runs left). The claim is
 * given back only by its owner (lease.ts `release`): a run that outlived its lease may have been
 * taken over, and that run's claim stays.
 */
export function afterRun(letter: DeadLetter, by: RunBy, claim: RunClaim, at: string, result: RunResult, policy: Pick<DeadLetterRetryPolicy, 'baseMs' | 'maxAttempts'>, doneMs: number): DeadLetter {
  const kept = release(letter.retry?.claim, claim.owner);
  const stillHeld = kept ? { claim: kept } : {};
  const ran = by === 'bridge';
  const records = { ...(result.created.length ? { created: result.created } : {}), ...(result.actedOn?.length ? { actedOn: result.actedOn } : {}) };
  if (result.kind === 'processed') {
    const replays = [...letter.replays, { at, by, outcome: `processed: ${result.outcome}`, ...records }];
    return { ...letter, resolvedAt: at, replays, retry: { transient: letter.retry?.transient ?? false, attempts: (letter.retry?.attempts ?? 0) + (ran ? 1 : 0), ...stillHeld } };
  }
  const replays = [...letter.replays, { at, by, outcome: `failed: ${result.reason}`, ...records }];
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

/** True while a run holds the letter (its claim has not run out by `nowMs`): operators hold no lease, so anyone's counts. */
export function deadLetterHeld(letter: Pick<DeadLetter, 'retry'>, nowMs: number): boolean {
  return isHeld(letter.retry?.claim, nowMs);
}

/**
 * Why an operator may not replay the letter now: the `409` a replay answers, word for word (also
 * what its detail's `actions.replay` says). Undefined when it may.
 */
export function replayRefusal(letter: Pick<DeadLetter, 'id' | 'resolvedAt' | 'retry'>, nowMs: number): string | undefined {
  if (letter.resolvedAt) return `dead letter ${letter.id} was resolved at ${letter.resolvedAt}: there is nothing to run again`;
  if (deadLetterHeld(letter, nowMs)) return `dead letter ${letter.id} is being run now (by ${letter.retry!.claim!.owner}, held until ${letter.retry!.claim!.until}); ask again once that run is written`;
  return undefined;
}

/** Why an operator may not dismiss the letter now: the `409` a dismissal answers, word for word. Undefined when they may. */
export function dismissRefusal(letter: Pick<DeadLetter, 'id' | 'resolvedAt' | 'retry' | 'dismissed'>, nowMs: number): string | undefined {
  if (letter.dismissed) return `dead letter ${letter.id} was dismissed by ${letter.dismissed.actor} at ${letter.dismissed.at}`;
  if (letter.resolvedAt) return `dead letter ${letter.id} was resolved at ${letter.resolvedAt}: a replay carried it out`;
  if (deadLetterHeld(letter, nowMs)) return `dead letter ${letter.id} is being run now; dismiss it once that run is written, if it is still open`;
  return undefined;
}
