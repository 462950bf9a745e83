/**
 * The background worker: delivers open ledger records on their schedule (the next accrue or reverse
 * round, in-doubt verification), a few at a time. An operator's reconcile is the same pass with
 * `force`, run now, reporting what it examined, fixed and left open, and why.
 *
 * Merchants share it fairly (docs/how-it-works.md, "One merchant's trouble stays its own"): a scheduled pass takes
 * at most BATCH due records, at most PER_MERCHANT of one merchant, the merchants taking turns
 * (`listDue`); one merchant's records get at most half the lanes while another's wait in the pass;
 * a merchant the loyalty service is rate-limiting is left out until its pause ends or one of its
 * calls is answered (`RateLimitPauses`). A pass that took a full share of someone's work, and moved something, is
 * followed by the next at once, so a lone merchant's backlog drains as fast as lanes allow.
 */
import { attentionOf, SETTLED_ATTENTION_STATUSES } from '../state/attention.js';
import { withMerchant } from '../kernel/log-context.js';
import type { Logger } from '../kernel/logger.js';
import type { RecordStore } from '../ledger/store.js';
import { FINAL_STATUSES, keyOf, merchantOf, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import type { DeliveryService, StepReport } from './delivery.js';
import { PeriodicLoop } from '../kernel/periodic.js';

export interface ReconcileReport {
  startedAt: string;
  finishedAt: string;
  examined: number;
  /** False when the time budget ended the pass before every open record was examined: call again. */
  complete: boolean;
  fixed: { transactionId: string; merchantId: string; from: LedgerStatus; to: LedgerStatus; why: string }[];
  /** `settled`: the bridge will do nothing more with it (a refusal, a reversal refused): only a person moves it. */
  open: { transactionId: string; merchantId: string; status: LedgerStatus; why: string; settled?: true }[];
}

/** Records one scheduled pass takes at most. */
const BATCH = 500;
/**
 * Records of one merchant one scheduled pass takes at most. A pass ends when its last record is
 * done, and work that falls due meanwhile waits for the next one, so no merchant may make a pass
 * long: 50 records of a healthy merchant take well under a second on the default 8 lanes; of one
 * whose calls fail slowly (5xx: 3 requests over 3 units a record), 50 / 8 such rounds one after
 * another (50 / 4 while others' records wait, on half the lanes). And ten merchants with backlogs
 * share one batch of 500.
 */
export const PER_MERCHANT = 50;

/** Attention kinds of records no pass moves (each named as its status): the bridge has settled them, a person has not. */
const SETTLED_BUT_OPEN: ReadonlySet<string> = new Set(SETTLED_ATTENTION_STATUSES);

export class Worker {
  /** The last scheduled pass took a full share of someone's due work and moved something: the next one runs at once. */
  #moreDue = false;
  readonly #loop = new PeriodicLoop(
    () =>
      this.reconcile(false).then((report) => {
        if (report.fixed.length) this.logger.info({ examined: report.examined, settled: report.fixed.length, open: report.open.length }, 'worker pass');
      }),
    () => (this.#moreDue ? 0 : this.options.intervalMs),
    (error) => {
      this.logger.error({ err: error }, 'worker pass failed');
      this.options.onPassFailed?.(error);
    },
  );

  constructor(
    private readonly store: RecordStore,
    private readonly service: DeliveryService,
    /** `onPassFailed`: told of each scheduled pass that failed (the composition root counts the ledger's outages from it). */
    private readonly options: { intervalMs: number; concurrency: number; leaseMs: number; idleMs: number; onPassFailed?: (error: unknown) => void },
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.#loop.start();
  }

  /** Stops scheduling and waits for the pass and deliveries under way. */
  async stop(): Promise<void> {
    await this.#loop.stop();
    await this.service.drain();
  }

  /**
   * One pass. Scheduled: the records due now, earliest first, the merchants taking turns, a batch
   * at a time. `force` (an operator's reconcile): every open record, due or not, those only an
   * operator can move included, so that the report says why each is still open; it pages through
   * them all, or as many as `budgetMs` allows (an operator's HTTP request must end well inside the
   * server's timeout; the records left are examined by the next call or the worker's own passes).
   */
  async reconcile(force = true, budgetMs = Number.POSITIVE_INFINITY, merchantId?: string): Promise<ReconcileReport> {
    const startedAt = new Date().toISOString();
    const deadline = Date.now() + budgetMs;
    // A scheduled pass leaves records another instance wrote within the answer budget: that instance is
    // most likely delivering them inline. An operator's reconcile (force) takes everything now.
    const claim = { owner: this.service.instanceId, leaseMs: this.options.leaseMs, idleMs: force ? 0 : this.options.idleMs };
    const reports: StepReport[] = [];
    let complete = true;
    if (force) {
      // `merchantId`: a merchant's admin reconciles its own records only.
      for (let page = await this.store.listOpen({ limit: BATCH, claim, merchantId }); page.length > 0; page = await this.store.listOpen({ limit: BATCH, claim, after: page.at(-1), merchantId })) {
        const done = await this.#advanceAll(page, true, deadline);
        reports.push(...done);
        if (done.length < page.length) {
          complete = false;
          break;
        }
      }
    } else {
      const due = await this.store.listDue(await this.service.dueQuery(BATCH, PER_MERCHANT, claim));
      reports.push(...(await this.#advanceAll(due, false, deadline)));
      this.#moreDue = (due.length >= BATCH || fullShare(due)) && reports.some((r) => r.action !== 'none');
    }
    const report: ReconcileReport = { startedAt, finishedAt: new Date().toISOString(), examined: reports.length, complete, fixed: [], open: [] };
    for (const r of reports) {
      if (FINAL_STATUSES.has(r.after)) report.fixed.push({ transactionId: r.transactionId, merchantId: r.merchantId, from: r.before, to: r.after, why: r.note });
      else report.open.push({ transactionId: r.transactionId, merchantId: r.merchantId, status: r.after, why: r.note });
    }
    if (force) await this.#addSettledButOpen(report, merchantId);
    return report;
  }

  /**
   * An operator's reconcile also lists, as open, the records the bridge has settled but a person
   * must still look at (attention.ts): failed, partially accrued, reverse_failed (not closed). No
   * pass moves them, so the report would otherwise never name them.
   */
  async #addSettledButOpen(report: ReconcileReport, merchantId: string | undefined): Promise<void> {
    const listed = new Set(report.open.map((o) => `${o.merchantId}/${o.transactionId}`));
    // The attention index, a page at a time: it holds what needs a person, never the whole ledger.
    for (let page = await this.store.listAttention({ merchantId, limit: BATCH }); page.length > 0; page = await this.store.listAttention({ merchantId, limit: BATCH, after: page.at(-1)!.entry })) {
      for (const { entry, record } of page) {
        const item = attentionOf(record).find((i) => i.kind === entry.kind);
        const key = `${entry.merchantId}/${record.transactionId}`;
        if (!item || !SETTLED_BUT_OPEN.has(item.kind) || listed.has(key)) continue;
        listed.add(key);
        report.open.push({ transactionId: item.transactionId!, merchantId: item.merchantId, status: item.status!, why: item.why, settled: true });
      }
    }
  }

  /**
   * Advances each record once, `concurrency` at a time, in the order given, starting none after
   * `deadline`; one report per record examined, errors included. One merchant's records take at
   * most half the lanes while another merchant's records wait: a merchant whose calls are slow
   * cannot hold every lane. A scheduled pass drops the records of a merchant that became
   * rate-limited during it (they would meet the same 429s); an operator's reconcile sends them.
   */
  async #advanceAll(records: LedgerRecord[], force: boolean, deadline: number): Promise<StepReport[]> {
    const reports: StepReport[] = [];
    const queue = [...records];
    const busy = new Map<string, number>();
    const share = Math.max(1, Math.ceil(this.options.concurrency / 2));
    const next = (): LedgerRecord | undefined => {
      if (Date.now() >= deadline) return undefined;
      if (!force) for (let i = queue.length - 1; i >= 0; i--) if (this.service.isRateLimited(merchantOf(queue[i]!))) queue.splice(i, 1);
      const turn = queue.findIndex((r) => (busy.get(merchantOf(r)) ?? 0) < share);
      return queue.splice(Math.max(turn, 0), 1)[0];
    };
    const lanes = Array.from({ length: Math.min(this.options.concurrency, queue.length) }, async () => {
      for (let record = next(); record; record = next()) {
        const merchant = merchantOf(record);
        busy.set(merchant, (busy.get(merchant) ?? 0) + 1);
        try {
          // Its lines name its merchant, as a request's do (log-context.ts).
          reports.push(await withMerchant(merchantOf(record), () => this.service.advance(keyOf(record), force)));
        } catch (error) {
          reports.push({ key: keyOf(record), transactionId: record.transactionId, merchantId: merchant, before: record.status, after: record.status, action: 'none', note: `error: ${(error as Error).message}` });
        } finally {
          busy.set(merchant, busy.get(merchant)! - 1);
        }
      }
    });
    await Promise.all(lanes);
    return reports;
  }

  /**
   * Resolves once `count` more scheduled passes have finished: by then, everything that was due
   * when it was called has been taken up (a test waits for this instead of sleeping and hoping).
   */
  passes(count = 1): Promise<void> {
    return this.#loop.passes(count);
  }
}

/** Some merchant's share of the batch is full: more of its work may be due. */
function fullShare(due: readonly LedgerRecord[]): boolean {
  const counts = new Map<string, number>();
  for (const record of due) counts.set(merchantOf(record), (counts.get(merchantOf(record)) ?? 0) + 1);
  return [...counts.values()].some((n) => n >= PER_MERCHANT);
}
