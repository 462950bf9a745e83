/**
 * The backfill poller (docs/backfill-and-reconcile.md): reads each merchant's POS accounts back from the POSes'
 * own APIs and feeds every order and refund it finds through the path webhooks take, so what a lost
 * webhook left out is recorded, and what is recorded already changes nothing.
 *
 * A pass reads the window [watermark − overlap, now) of one merchant's account on one POS. The
 * watermark moves to the window's end only after every page of the window was read and everything
 * found was handed to intake: a page that fails (after the listing's own retries of a 429 or 5xx)
 * or a found order the bridge could not record for a passing cause (the ledger, the POS API) leaves
 * it where it was, and the next pass reads that stretch again. The state (watermark, last pass,
 * next pass) is kept in the ledger store per merchant and POS, with the lease of the instance
 * running a pass (lease.ts: the rules of every lease): on PostgreSQL one instance at most reads an
 * account at a time, and one pass at most in this instance.
 */
import { BridgeError, ConflictError, echoed, NotFoundError, ValidationError } from '../kernel/errors.js';
import { withMerchant } from '../kernel/log-context.js';
import { maskContacts } from '../kernel/mask.js';
import { ledgerKey } from '../state/record.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import { backfillKey, type BackfillPassSummary, type BackfillState, type BackfillStateStore, type MerchantStore, type RecordStore, type StoreLifecycle } from '../ledger/store.js';
import { isHeld, LeaseKeeper, release, renew, renewalDue, standing, take, type Lease, type Renewal } from '../kernel/lease.js';
import type { Logger } from '../kernel/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { CheckoutIntent, PosAdapter, RefundIntent } from '../pos/contract.js';
import { PosApiError } from '../pos/api.js';
import type { Ingest, IngestMerchant } from '../core/ingest.js';
import { PeriodicLoop } from '../kernel/periodic.js';
import { MerchantSuspendedError } from '../core/ingest.js';
import { keptPayload, type Arrival } from '../core/arrival.js';
import { DEFAULT_LISTING_RETRY, listingSource, listPosChanges, type FoundItem, type ListingRetry } from './listing.js';
import { Pace, type WorkClock } from './pace.js';
import { isSuspended } from '../state/merchant.js';

/** What the history of a record backfill created says: its webhook never came. */
export const FOUND_BY_BACKFILL = 'found by backfill: its webhook never arrived';

export interface BackfillOptions {
  /** Scheduled passes every this long; 0: none (passes run on request only). */
  intervalMs: number;
  /** How far before the watermark each pass starts again (BACKFILL_OVERLAP_MS). */
  overlapMs: number;
  /** This instance, as named in the leases it takes. */
  owner: string;
  /** How long a lease holds without being renewed (renewed every third of it while the pass runs). Default 30 s. */
  leaseMs?: number;
  /** Objects per page asked of the POS (each POS caps it). Default 100. */
  pageSize?: number;
  posApiTimeoutMs?: number;
  retry?: ListingRetry;
  /** Waits between a page's tries (tests pass one that does not wait). */
  sleep?: (ms: number) => Promise<void>;
  /** How passes share the process with checkouts (pace.ts): at most a quarter of the time, eight passes at once, by default. */
  pace?: Pace;
}

/** The merchants the poller reads for: the merchant registry. */
export interface BackfillMerchants {
  get(id: string): Promise<IngestMerchant | undefined>;
  readonly default: IngestMerchant;
}

export interface PassRequest {
  merchantId: string;
  pos: string;
  /** Default: the watermark less the overlap (now less the overlap before the first pass). */
  since?: Date;
  /** Default: now. */
  until?: Date;
  by: BackfillPassSummary['by'];
  /** Called after each page with the pages read and the objects found so far (the CLI's progress line). */
  onProgress?: (progress: { pages: number; found: number }) => void;
}

export interface PassResult {
  merchantId: string;
  pos: string;
  since: string;
  until: string;
  examined: number;
  /** transactionIds recorded by this pass (each new sale's, and each refund's record). */
  new: string[];
  known: number;
  /** Found but not recorded: what the adapter or the ledger refused, by the POS's id, and why. */
  refused: { id: string; why: string }[];
  /** Unpaid sales listed and left alone (they accrue once paid). */
  unpaid: number;
  /** Pages read from the POS. */
  pages: number;
  /** The watermark after the pass. */
  watermark?: string;
}

/** One row of GET /v1/admin/backfill: a merchant's POS account and its backfill. */
export type BackfillStatus = Pick<BackfillState, 'merchantId' | 'pos' | 'account' | 'watermark' | 'lastPass' | 'nextPassAt'> & {
  /** The instance running a pass now, and until when (absent when none is). */
  running?: BackfillState['lease'];
};

/**
 * What an instance that died mid-pass keeps its account for, at most (docs/backfill-and-reconcile.md, "Several
 * instances"): renewed every 10 s by a live pass, so 20 s of slack for a slow ledger write.
 */
const DEFAULT_LEASE_MS = 30_000;
/** Merchants read per page when a scheduled pass walks them all. */
const MERCHANT_PAGE = 100;

/** 409: another pass of this account is under way (here or on another instance). */
export class BackfillRunningError extends ConflictError {
  constructor(merchantId: string, pos: string, lease: Lease) {
    super(`a backfill pass of merchant ${merchantId}'s ${pos} account is running (instance ${lease.owner}, held until ${lease.until}); ask again once it is done`, { merchantId, pos });
  }
}

export class BackfillPoller {
  readonly #pace: Pace;
  /**
   * The accounts (`backfillKey`) a pass of this instance is reading now. The lease says which
   * instance reads an account; this, whether this instance's pass still does (lease.ts).
   */
  readonly #passes = new Set<string>();
  /** Rounds are looked for often enough that each account's pass starts within a minute of its nextPassAt. */
  readonly #loop = new PeriodicLoop(
    () => this.round(),
    () => Math.min(this.options.intervalMs, 60_000),
    (error) => this.logger.error({ err: error }, 'backfill round failed'),
  );

  constructor(
    private readonly adapters: ReadonlyMap<string, PosAdapter>,
    /**
     * The backfill states it leases and moves, the merchants it visits and a record read to report a
     * found order's status; every order and refund it finds goes in through ingest.
     */
    private readonly store: BackfillStateStore & Pick<RecordStore, 'get'> & Pick<MerchantStore, 'listMerchants'> & Pick<StoreLifecycle, 'sharedByInstances'>,
    private readonly ingest: Ingest,
    private readonly merchants: BackfillMerchants,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly options: BackfillOptions,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.#pace = options.pace ?? new Pace();
  }

  get scheduled(): boolean {
    return this.options.intervalMs > 0;
  }

  /** The POSes backfill can read (those whose adapter lists orders). */
  get poses(): string[] {
    return [...this.adapters.values()].filter((a) => a.backfill).map((a) => a.name);
  }

  /**
   * One pass of one merchant's account on one POS. Refused: 404 for an unknown merchant, 403 for a
   * suspended one, 422 when it has no account or token on the POS, 409 while another pass of the
   * account runs. A page that still fails after its retries is a 502 (PosApiError): nothing moved.
   */
  async runPass(request: PassRequest): Promise<PassResult> {
    const merchant = await this.merchants.get(request.merchantId);
    if (!merchant) throw new NotFoundError(`no merchant ${echoed(request.merchantId)}`, 'unknown_merchant');
    if (isSuspended(merchant)) throw new MerchantSuspendedError(merchant.id);
    return withMerchant(merchant.id, () => this.#pace.run((work) => this.#pass(merchant, request, work)));
  }

  async #pass(merchant: IngestMerchant, request: PassRequest, work: WorkClock): Promise<PassResult> {
    const { adapter, account } = listingSource({ adapters: this.adapters, merchant, pos: request.pos });
    // One pass of an account at a time here too: this instance's lease does not keep its own passes out.
    const key = backfillKey(merchant.id, request.pos);
    if (this.#passes.has(key)) throw new BackfillRunningError(merchant.id, request.pos, await this.#ownLease(merchant.id, request.pos));
    this.#passes.add(key);
    try {
      return await this.#leasedPass(merchant, request, work, adapter, account);
    } finally {
      this.#passes.delete(key);
    }
  }

  /** The lease a pass of this instance holds (as stored; as it will be stored, while that pass is still taking it). */
  async #ownLease(merchantId: string, pos: string): Promise<Lease> {
    const stored = (await this.store.getBackfillState(merchantId, pos))?.lease;
    return stored ?? { owner: this.options.owner, until: new Date(this.clock().getTime() + this.#leaseMs).toISOString() };
  }

  async #leasedPass(merchant: IngestMerchant, request: PassRequest, work: WorkClock, adapter: PosAdapter, account: string): Promise<PassResult> {
    const { pos } = request;
    const startedAt = this.clock();
    const state = await this.#lease(merchant.id, pos, account);
    // A watermark never moves past now (docs/backfill-and-reconcile.md), whoever asks (the CLI
    // too): a window is read up to now at most, and a watermark an earlier build stored in the
    // future (an until of 2099 taken as it was) counts as now, so passes read the present again.
    const until = request.until && request.until.getTime() < startedAt.getTime() ? request.until : startedAt;
    const watermark = notPast(state.watermark, startedAt);
    const since = request.since ?? new Date((watermark ? Date.parse(watermark) : until.getTime()) - this.options.overlapMs);
    if (until.getTime() <= since.getTime()) {
      await this.#release(merchant.id, pos);
      throw ValidationError.field('until', `must be after since (${since.toISOString()})`);
    }
    const result: PassResult = { merchantId: merchant.id, pos, since: since.toISOString(), until: until.toISOString(), examined: 0, new: [], known: 0, refused: [], unpaid: 0, pages: 0 };
    // A scheduled pass that finds nothing new is routine: its lines are debug, so a round of every
    // merchant's accounts each interval does not fill the log; what it recorded is always info.
    const routine = request.by === 'scheduled';
    this.logger[routine ? 'debug' : 'info']({ pos, account, since: result.since, until: result.until, by: request.by }, 'backfill pass started');
    const keeper = new LeaseKeeper({
      leaseMs: this.#leaseMs,
      renew: () => this.#renew(merchant.id, pos, true),
      onError: (error) => this.logger.warn({ pos, err: error }, 'backfill lease not renewed (the ledger store failed): trying again'),
    });
    // Still ours before anything is taken: a pass that lost its lease stops there.
    const ours = async (renewal?: Promise<Renewal>) => {
      const outcome = renewal && (await renewal);
      const lost = outcome && 'lost' in outcome ? { holder: outcome.lost } : keeper.lost;
      if (lost) throw new BackfillRunningError(merchant.id, pos, lost.holder ?? { owner: 'nobody', until: this.clock().toISOString() });
    };
    try {
      // Refunds after every sale of the window: a partial refund needs the sale it reduces recorded.
      const refunds: FoundItem[] = [];
      const seen = new Set<string>();
      let pages = 0;
      let renewedAt = 0;
      for await (const item of listPosChanges({
        adapters: this.adapters,
        merchant,
        pos,
        window: { since, until },
        pageSize: this.options.pageSize,
        timeoutMs: this.options.posApiTimeoutMs,
        retry: this.options.retry ?? DEFAULT_LISTING_RETRY,
        sleep: this.options.sleep,
        onPage: (read, found) => {
          pages = read;
          result.pages = read;
          request.onProgress?.({ pages: read, found });
        },
      })) {
        // Waiting for the listing's page is not the pass's work (pace.ts): the step starts here.
        work.begin();
        // Inclusive bounds and overlapping listings can list one object twice: it counts once.
        const key = `${item.kind}\u0000${item.orderId}\u0000${item.refundId ?? ''}`;
        if (seen.has(key)) continue;
        seen.add(key);
        await ours();
        if (pages > renewedAt) {
          renewedAt = pages;
          await ours(this.#renew(merchant.id, pos));
        }
        if (item.kind === 'refund') refunds.push(item);
        else await this.#take(adapter, merchant, item, result);
        // A known order is a parse and a ledger read: without rests between them, a pass would hold
        // up every checkout meanwhile (pace.ts).
        await work.rest();
      }
      if (refunds.length > 0) await ours(this.#renew(merchant.id, pos));
      for (const item of refunds) {
        await ours();
        await this.#take(adapter, merchant, item, result);
        await work.rest();
      }
    } catch (error) {
      await keeper.stop();
      await this.#finish(merchant.id, pos, result, startedAt, request.by, error);
      throw error;
    }
    await keeper.stop();
    return this.#finish(merchant.id, pos, result, startedAt, request.by);
  }

  /** What a record a found object creates keeps: found by backfill, and the POS's object as listed. */
  #arrival(item: FoundItem): Arrival {
    const receivedAt = this.clock().toISOString();
    return { via: 'backfill', receivedAt, note: FOUND_BY_BACKFILL, payload: keptPayload(item.pos, Buffer.from(JSON.stringify(item.payload ?? null)), receivedAt) };
  }

  /** One found object through intake, counted. A cause that may pass by itself ends the pass (the watermark stays). */
  async #take(adapter: PosAdapter, merchant: IngestMerchant, item: FoundItem, result: PassResult): Promise<void> {
    result.examined++;
    const id = item.refundId ? `${item.orderId}/${item.refundId}` : item.orderId;
    const count = (outcome: 'new' | 'known' | 'refused' | 'unpaid') => this.metrics.backfillFound.inc({ pos: item.pos, result: outcome, ...this.metrics.merchant(merchant.id) });
    if (!item.paid) {
      result.unpaid++;
      return count('unpaid');
    }
    if (!item.intent || item.refused) {
      result.refused.push({ id, why: item.refused ?? 'not read' });
      this.logger.warn({ pos: item.pos, orderId: item.orderId, refundId: item.refundId, why: maskContacts(item.refused ?? '') }, 'backfill found an order the adapter cannot translate');
      return count('refused');
    }
    try {
      if (item.kind === 'checkout') {
        // Recorded already (its webhook came): nothing to do, and no write.
        if (await this.store.get(ledgerKey(merchant.id, item.transactionId!))) {
          result.known++;
          return count('known');
        }
        const answer = await this.ingest.checkoutIntent(adapter, item.intent as CheckoutIntent, merchant, this.#arrival(item));
        if (answer.repeat) result.known++;
        else result.new.push(answer.record.transactionId);
        return count(answer.repeat ? 'known' : 'new');
      }
      const answer = await this.ingest.refundIntent(adapter, item.intent as RefundIntent, merchant, this.#arrival(item));
      if (answer.repeat) result.known++;
      else result.new.push(answer.record.transactionId);
      return count(answer.repeat ? 'known' : 'new');
    } catch (error) {
      // What a person must look at (a refund of more than remains, an order whose customer the POS
      // no longer has: its look-up answered 404): reported, and the pass goes on. Anything else that
      // failed (the POS's API down, a token refused) would fail every order alike: the pass stops.
      const customerGone = error instanceof PosApiError && error.posStatus === 404;
      if (!customerGone && (!(error instanceof BridgeError) || error.status >= 500)) throw error;
      result.refused.push({ id, why: error.message });
      this.logger.warn({ pos: item.pos, orderId: item.orderId, refundId: item.refundId, code: error.code }, 'backfill found an order the bridge cannot record');
      return count('refused');
    }
  }

  /** Takes the account's lease for this instance: 409 while another instance's holds (lease.ts `take`). */
  async #lease(merchantId: string, pos: string, account: string): Promise<BackfillState> {
    const nowMs = this.clock().getTime();
    let held: Lease | undefined;
    const state = await this.store.updateBackfillState(merchantId, pos, (current) => {
      const taking = take(this.#standing(current?.lease), this.options.owner, nowMs, this.#leaseMs);
      if ('heldBy' in taking) {
        held = taking.heldBy;
        return undefined;
      }
      // Another account on the POS: its watermark says nothing of this one.
      const base: BackfillState = current && current.account === account ? current : { merchantId, pos, account };
      return { ...base, lease: taking.taken };
    });
    if (held) throw new BackfillRunningError(merchantId, pos, held);
    return state!;
  }

  /**
   * The account's lease as it stands for this instance (lease.ts `standing`). On a store one process
   * holds (the file ledger), another instance's lease was left by a process that is gone (it stopped
   * mid-pass): taken over at once, as records left in flight are, rather than waiting for it to run out.
   */
  #standing(lease: Lease | undefined): Lease | undefined {
    return standing(lease, this.options.owner, this.store.sharedByInstances === true);
  }

  /**
   * Renews the pass's lease (lease.ts `renew`), answering `lost` once another instance took it (it
   * ran out while the store could not be written). A page renews only once half of it is used
   * (usually no write), the keeper's timer every third of it (`always`).
   */
  async #renew(merchantId: string, pos: string, always = false): Promise<Renewal> {
    const nowMs = this.clock().getTime();
    let renewal: Renewal | undefined;
    await this.store.updateBackfillState(merchantId, pos, (current) => {
      renewal = renew(current?.lease, this.options.owner, nowMs, this.#leaseMs);
      if ('lost' in renewal || (!always && !renewalDue(current!.lease!, nowMs, this.#leaseMs))) return undefined;
      return { ...current!, lease: renewal.renewed };
    });
    return renewal!;
  }

  async #release(merchantId: string, pos: string): Promise<void> {
    await this.store.updateBackfillState(merchantId, pos, (current) => {
      const kept = release(current?.lease, this.options.owner);
      return current && kept !== current.lease ? { ...current, lease: kept } : undefined;
    });
  }

  /**
   * Writes the pass's outcome and gives the lease back. Complete: the watermark moves to the
   * window's end when the window started at or before it (a window after it would leave the stretch
   * between them unread), never back. Failed: it stays.
   */
  async #finish(merchantId: string, pos: string, result: PassResult, startedAt: Date, by: BackfillPassSummary['by'], error?: unknown): Promise<PassResult> {
    const finishedAt = this.clock();
    const summary: BackfillPassSummary = {
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      since: result.since,
      until: result.until,
      by,
      examined: result.examined,
      new: result.new.length,
      known: result.known,
      refused: result.refused.length,
      unpaid: result.unpaid,
      ...(error ? { error: error instanceof Error ? error.message : String(error) } : {}),
    };
    // A pass whose lease another instance took writes nothing: the state is that instance's now.
    const lost = error instanceof BackfillRunningError;
    const stored = await this.store.updateBackfillState(merchantId, pos, (current) => {
      if (!current || lost) return undefined;
      const kept = notPast(current.watermark, startedAt);
      const watermark = error ? kept : advanced(kept, result.since, result.until);
      return {
        ...current,
        ...(watermark ? { watermark } : {}),
        lastPass: summary,
        ...(this.scheduled ? { nextPassAt: new Date(finishedAt.getTime() + this.options.intervalMs).toISOString() } : {}),
        lease: release(current.lease, this.options.owner),
      };
    });
    this.metrics.backfillPasses.inc({ pos, outcome: error ? 'failed' : 'complete', ...this.metrics.merchant(merchantId) });
    const fields = { pos, since: result.since, until: result.until, examined: result.examined, new: result.new.length, known: result.known, refused: result.refused.length, unpaid: result.unpaid, watermark: stored?.watermark };
    if (error) this.logger.warn({ ...fields, err: error }, 'backfill pass stopped before the end of its window: the watermark did not move');
    else if (result.new.length) this.logger.info(fields, 'backfill pass recorded orders whose webhooks never arrived');
    else this.logger[by === 'scheduled' ? 'debug' : 'info'](fields, 'backfill pass complete');
    return { ...result, ...(stored?.watermark ? { watermark: stored.watermark } : {}) };
  }

  get #leaseMs(): number {
    return this.options.leaseMs ?? DEFAULT_LEASE_MS;
  }

  /** Every merchant's POS accounts backfill can read, with their state (GET /v1/admin/backfill). `merchantId`: that merchant's only. */
  async status(merchantId?: string): Promise<BackfillStatus[]> {
    const states = new Map((await this.store.listBackfillStates(merchantId)).map((s) => [`${s.merchantId}/${s.pos}`, s]));
    const rows: BackfillStatus[] = [];
    const nowMs = this.clock().getTime();
    for await (const merchant of this.#merchants(merchantId)) {
      for (const pos of this.poses) {
        const account = merchant.pos[pos]?.account;
        if (!account || !merchant.pos[pos]?.accessToken) continue;
        const state = states.get(`${merchant.id}/${pos}`);
        const current = state?.account === account ? state : undefined;
        const running = this.#running(current, nowMs);
        rows.push({
          merchantId: merchant.id,
          pos,
          account,
          ...(current?.watermark ? { watermark: current.watermark } : {}),
          ...(current?.lastPass ? { lastPass: current.lastPass } : {}),
          ...(this.scheduled && merchant.status === 'active' ? { nextPassAt: current?.nextPassAt ?? new Date(nowMs).toISOString() } : {}),
          ...(running ? { running } : {}),
        });
      }
    }
    return rows;
  }

  /** The lease of the pass reading the account now: this instance's while its pass runs, another's while it holds (lease.ts). */
  #running(state: BackfillState | undefined, nowMs: number): Lease | undefined {
    const lease = state?.lease;
    if (!lease) return undefined;
    if (lease.owner === this.options.owner) return this.#passes.has(backfillKey(state.merchantId, state.pos)) ? lease : undefined;
    return isHeld(this.#standing(lease), nowMs, this.options.owner) ? lease : undefined;
  }

  /** The merchants to read: the default one and every created one (or the one named). */
  async *#merchants(only?: string): AsyncGenerator<IngestMerchant> {
    if (only) {
      const merchant = await this.merchants.get(only);
      if (merchant) yield merchant;
      return;
    }
    yield this.merchants.default;
    for (let offset = 0; ; offset += MERCHANT_PAGE) {
      const { items } = await this.store.listMerchants({ offset, limit: MERCHANT_PAGE });
      for (const stored of items) {
        if (stored.id === DEFAULT_MERCHANT) continue;
        const merchant = await this.merchants.get(stored.id).catch((error: unknown) => {
          this.logger.error({ merchantId: stored.id, err: error }, 'merchant could not be loaded for backfill');
          return undefined;
        });
        if (merchant) yield merchant;
      }
      if (items.length < MERCHANT_PAGE) return;
    }
  }

  /**
   * The scheduled round: every active merchant's accounts whose next pass is due, one after another.
   * An account another instance is reading is left to it; one pass failing does not stop the round.
   */
  async round(): Promise<{ passes: number; failed: number }> {
    let passes = 0;
    let failed = 0;
    const rows = await this.status();
    // After status(): an account never read shows its next pass as due now, status()'s now.
    const nowMs = this.clock().getTime();
    for (const row of rows) {
      if (this.#loop.stopping) break;
      if (row.running || (row.nextPassAt && Date.parse(row.nextPassAt) > nowMs)) continue;
      try {
        await this.runPass({ merchantId: row.merchantId, pos: row.pos, by: 'scheduled' });
        passes++;
      } catch (error) {
        if (error instanceof BackfillRunningError || error instanceof MerchantSuspendedError) continue;
        failed++;
        // Logged by the pass with its merchant (a failure before it started is logged here).
        if (!(error instanceof PosApiError)) this.logger.error({ err: error, merchantId: row.merchantId, pos: row.pos }, 'scheduled backfill pass failed');
      }
    }
    return { passes, failed };
  }

  start(): void {
    if (this.scheduled) this.#loop.start();
  }

  /** Stops scheduling and waits for the round under way (its pass in progress is written before this resolves). */
  stop(): Promise<void> {
    return this.#loop.stop();
  }

  /** Resolves once `count` more scheduled rounds have finished (tests wait on this, not on sleeps). */
  rounds(count = 1): Promise<void> {
    return this.#loop.passes(count);
  }
}

/** A stored watermark, or `now` when it lies after now (stored by a build that took an until in the future). */
function notPast(watermark: string | undefined, now: Date): string | undefined {
  return watermark && Date.parse(watermark) > now.getTime() ? now.toISOString() : watermark;
}

/**
 * The watermark after a complete pass of [since, until): `until` when the window started at or
 * before the watermark (or there was none), so nothing between them was left unread; never earlier
 * than it was.
 */
export function advanced(watermark: string | undefined, since: string, until: string): string | undefined {
  if (!watermark) return until;
  if (Date.parse(since) > Date.parse(watermark)) return watermark;
  return Date.parse(until) > Date.parse(watermark) ? until : watermark;
}
