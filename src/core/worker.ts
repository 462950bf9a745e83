/**
 * The background worker: delivers open ledger records on their schedule (the next accrue or reverse
 * round, in-doubt verification), a few at a time. An operator's reconcile is the same pass with
 * `force`, run now, reporting what it examined, fixed and left open, and why.
 */
import { withMerchant } from '../log-context.js';
import type { Logger } from '../logger.js';
import type { LedgerStore } from '../ledger/store.js';
import { FINAL_STATUSES, keyOf, merchantOf, type LedgerRecord, type LedgerStatus } from '../ledger/record.js';
import type { DeliveryService, StepReport } from './delivery.js';

export interface ReconcileReport {
  startedAt: string;
  finishedAt: string;
  examined: number;
  /** False when the time budget ended the pass before every open record was examined: call again. */
  complete: boolean;
  fixed: { transactionId: string; merchantId: string; from: LedgerStatus; to: LedgerStatus; why: string }[];
  open: { transactionId: string; merchantId: string; status: LedgerStatus; why: string }[];
}

const BATCH = 500;

export class Worker {
  #timer?: NodeJS.Timeout;
  #tick?: Promise<unknown>;
  #stopped = true;
  /** Scheduled passes finished so far, and who waits for a count of them. */
  #passes = 0;
  #waiting: { until: number; done: () => void }[] = [];

  constructor(
    private readonly store: LedgerStore,
    private readonly service: DeliveryService,
    private readonly options: { intervalMs: number; concurrency: number; leaseMs: number; idleMs: number },
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  /** Stops scheduling and waits for the pass and deliveries under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick;
    await this.service.drain();
  }

  /**
   * One pass. Scheduled: the records due now, earliest first, a batch at a time. `force` (an
   * operator's reconcile): every open record, due or not, those only an operator can move included,
   * so that the report says why each is still open; it pages through them all, or as many as
   * `budgetMs` allows (an operator's HTTP request must end well inside the server's timeout; the
   * records left are examined by the next call or the worker's own passes).
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
      for (let page = await this.store.listOpen(BATCH, claim, undefined, merchantId); page.length > 0; page = await this.store.listOpen(BATCH, claim, page.at(-1), merchantId)) {
        const done = await this.#advanceAll(page, true, deadline);
        reports.push(...done);
        if (done.length < page.length) {
          complete = false;
          break;
        }
      }
    } else {
      reports.push(...(await this.#advanceAll(await this.store.listDue(await this.service.dueQuery(BATCH, claim)), false, deadline)));
    }
    const report: ReconcileReport = { startedAt, finishedAt: new Date().toISOString(), examined: reports.length, complete, fixed: [], open: [] };
    for (const r of reports) {
      if (FINAL_STATUSES.has(r.after)) report.fixed.push({ transactionId: r.transactionId, merchantId: r.merchantId, from: r.before, to: r.after, why: r.note });
      else report.open.push({ transactionId: r.transactionId, merchantId: r.merchantId, status: r.after, why: r.note });
    }
    return report;
  }

  /**
   * Advances each record once, `concurrency` at a time, starting none after `deadline`; one report
   * per record examined, errors included.
   */
  async #advanceAll(records: LedgerRecord[], force: boolean, deadline: number): Promise<StepReport[]> {
    const reports: StepReport[] = [];
    const queue = [...records];
    const next = () => (Date.now() < deadline ? queue.shift() : undefined);
    const lanes = Array.from({ length: Math.min(this.options.concurrency, queue.length) }, async () => {
      for (let record = next(); record; record = next()) {
        try {
          // Its lines name its merchant, as a request's do (log-context.ts).
          reports.push(await withMerchant(merchantOf(record), () => this.service.advance(keyOf(record), force)));
        } catch (error) {
          reports.push({ key: keyOf(record), transactionId: record.transactionId, merchantId: merchantOf(record), before: record.status, after: record.status, action: 'none', note: `error: ${(error as Error).message}` });
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
    return new Promise((done) => this.#waiting.push({ until: this.#passes + count, done }));
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#tick = this.reconcile(false)
        .then((report) => {
          if (report.fixed.length) this.logger.info({ examined: report.examined, settled: report.fixed.length, open: report.open.length }, 'worker pass');
        })
        .catch((error: unknown) => this.logger.error({ err: error }, 'worker pass failed'))
        .finally(() => {
          this.#passes++;
          const done = this.#waiting.filter((w) => w.until <= this.#passes);
          this.#waiting = this.#waiting.filter((w) => w.until > this.#passes);
          for (const w of done) w.done();
          this.#schedule();
        });
    }, this.options.intervalMs);
    this.#timer.unref();
  }
}
