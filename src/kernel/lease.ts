/**
 * Leases: how one bridge instance holds something for a while so that the other instances on the
 * same ledger leave it alone. Every lease of the bridge follows the rules here:
 *
 * - a record the worker took (PostgreSQL `ledger_work.lease_owner` / `lease_until`: pg-store.ts
 *   says the same rule in SQL, as its `FOR UPDATE SKIP LOCKED` batches must);
 * - a call marked in flight (`LedgerRecord.inFlight`: its owner, and its start plus
 *   IN_FLIGHT_LEASE_MS: `leaseFrom`; core/delivery.ts `abandoned`);
 * - a dead letter a run claimed (`DeadLetterRetry.claim`: core/dead-letter-transitions.ts);
 * - a merchant's POS account a backfill pass reads (`BackfillState.lease`: backfill/poller.ts).
 *
 * A lease is its owner (an instance, by the id it names itself with) and the instant it ends.
 *
 *     THE RULE: a lease is free to its owner, and to anyone once it has run out (`until` ≤ now).
 *     Until then it keeps every other owner out.
 *
 * What follows from it:
 * - The stored lease says which instance holds the thing, not which of its tasks: an instance that
 *   works under a lease knows by itself, in memory, whether that work is still going, and never
 *   starts it twice (the worker's calls out, the poller's passes, ingest's runs of letters). A
 *   lease of its own with none of its work going was left by a step that could not give it back:
 *   its owner takes it again at once; others wait for it to run out.
 * - A lease that ran out was left by an instance that stopped (or that is far past any work's
 *   length): anyone takes it over. Work that can outlast its lease keeps it renewed (`LeaseKeeper`).
 * - Only the owner renews or gives it back. A renewal that finds another owner's lease, or none,
 *   has lost it: the work stops and writes nothing more, the thing is another's now.
 * - On a store one process holds (the file and memory ledgers), another owner's lease was left by a
 *   process that is gone (the ledger's lock says so): where that matters, `standing` drops it.
 *
 * Times are the caller's: `nowMs` is its clock's milliseconds, `until` ISO 8601, and nothing here
 * reads a clock (PostgreSQL's SQL reads the database's `now()`, and frees a lease one instant
 * later than `until`, which is the same rule to the millisecond). An `until` that is not a time
 * holds nothing. Pure, but for the keeper's timer, which is passed in.
 */

/** One instance's hold on one thing, until a moment. The shape every lease is stored in. */
export interface Lease {
  /** The instance holding it (as it names itself in every lease it takes). */
  owner: string;
  /** When it ends (ISO 8601): from then on it holds nothing. */
  until: string;
}

/** Whether the lease has run out by `nowMs` (an `until` that is not a time has). */
export function expired(lease: Lease, nowMs: number): boolean {
  return !(Date.parse(lease.until) > nowMs);
}

/**
 * Whether the lease keeps `asker` out at `nowMs`: it has not run out and is another owner's.
 * Without `asker`, whether it keeps anyone out who holds no lease (an operator's action).
 */
export function isHeld(lease: Lease | undefined, nowMs: number, asker?: string): lease is Lease {
  return lease !== undefined && !expired(lease, nowMs) && lease.owner !== asker;
}

/** The lease a marker stored as its start stands for: its owner's, from `since` for `leaseMs` (a `since` that is not a time: one that holds nothing). */
export function leaseFrom(owner: string, since: string, leaseMs: number): Lease {
  const untilMs = Date.parse(since) + leaseMs;
  return { owner, until: Number.isFinite(untilMs) ? new Date(untilMs).toISOString() : since };
}

/**
 * The lease as it stands for `asker`: on a store other instances share (`shared`), as stored; on a
 * store one process holds, another owner's lease was left by a process that is gone, and nothing
 * stands.
 */
export function standing(lease: Lease | undefined, asker: string, shared: boolean): Lease | undefined {
  return lease && (shared || lease.owner === asker) ? lease : undefined;
}

export type Taking = { taken: Lease } | { heldBy: Lease };

/** `owner` takes the lease at `nowMs` for `leaseMs`: the new lease, or the one it must wait behind. */
export function take(current: Lease | undefined, owner: string, nowMs: number, leaseMs: number): Taking {
  if (isHeld(current, nowMs, owner)) return { heldBy: current };
  return { taken: { owner, until: new Date(nowMs + leaseMs).toISOString() } };
}

export type Renewal = { renewed: Lease } | { lost: Lease | undefined };

/**
 * `owner` keeps its lease for `leaseMs` more from `nowMs`: renewed while it is still its own (run
 * out or not: nobody took it meanwhile); lost once another owner holds it (`lost`: that lease) or
 * nobody does (it was taken and given back meanwhile).
 */
export function renew(current: Lease | undefined, owner: string, nowMs: number, leaseMs: number): Renewal {
  if (current?.owner !== owner) return { lost: current };
  return { renewed: { owner, until: new Date(nowMs + leaseMs).toISOString() } };
}

/** Whether a renewal is worth a write: half of the lease's `leaseMs` or more is used. */
export function renewalDue(lease: Lease, nowMs: number, leaseMs: number): boolean {
  return !(Date.parse(lease.until) - nowMs > leaseMs / 2);
}

/** What stays once `owner` gives its lease back: nothing when it was `owner`'s, else the lease as it was (only the owner releases). */
export function release(current: Lease | undefined, owner: string): Lease | undefined {
  return current?.owner === owner ? undefined : current;
}

/**
 * Runs `tick` every `ms` until the function it answers is called. `tick` answers a promise that
 * never rejects (tests that drive the ticks wait on it).
 */
export type Repeat = (ms: number, tick: () => Promise<void>) => () => void;

/** `setInterval`, not keeping the process alive: work under way does not keep a stopping process up. */
export const repeatOnTimer: Repeat = (ms, tick) => {
  const timer = setInterval(() => void tick(), ms);
  timer.unref();
  return () => clearInterval(timer);
};

export interface LeaseKeeperOptions {
  /** The lease's length: it is renewed every third of it. */
  leaseMs: number;
  /**
   * Renews the lease where it is stored, in one step no other writer comes between (the store's
   * atomic update, applying `renew`), and answers what that found.
   */
  renew: () => Promise<Renewal>;
  /** A renewal that failed (the store could not be written): the next one is tried at the next tick. */
  onError?: (error: unknown) => void;
  /** The timer (tests pass one they drive). Default: `repeatOnTimer`. */
  repeat?: Repeat;
}

/**
 * Keeps a lease for work that can outlast it (a backfill pass: one page can take minutes),
 * renewing it every third of its length for as long as the work runs, so that the lease can be
 * short and an instance that dies mid-work holds the thing for one lease at most. `lost` once a
 * renewal found the lease another's (or nobody's: it ran out while the store could not be written,
 * and was taken meanwhile); the renewals end then, and the work must stop at its next step.
 * A tick while a renewal is under way is skipped; `stop()` ends the renewals, waiting for one
 * under way.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #cancel: () => void;
  #lost: { holder: Lease | undefined } | undefined;
  #stopped = false;
  #renewing: Promise<void> | undefined;
  #renewals = 0;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#cancel = (options.repeat ?? repeatOnTimer)(options.leaseMs / 3, () => this.#tick());
  }

  /** Set once a renewal found the lease no longer its owner's: `holder`, the lease found instead (none: nobody held it). */
  get lost(): { readonly holder: Lease | undefined } | undefined {
    return this.#lost;
  }

  /** Renewals written so far. */
  get renewals(): number {
    return this.#renewals;
  }

  #tick(): Promise<void> {
    if (this.#stopped || this.#lost) return Promise.resolve();
    if (this.#renewing) return this.#renewing;
    const renewing = this.#options
      .renew()
      .then(
        (outcome) => {
          if ('lost' in outcome) {
            this.#lost = { holder: outcome.lost };
            this.#cancel();
          } else this.#renewals++;
        },
        (error: unknown) => {
          try {
            this.#options.onError?.(error);
          } catch {
            // A report that failed changes nothing: the next tick tries again.
          }
        },
      )
      .finally(() => {
        if (this.#renewing === renewing) this.#renewing = undefined;
      });
    this.#renewing = renewing;
    return renewing;
  }

  /** Ends the renewals; resolves once the one under way, if any, is done. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancel();
    await this.#renewing;
  }
}
