/**
 * Prometheus metrics, one registry per app instance (tests build several apps in one process). The
 * process metrics are prom-client's defaults under their standard names (process_cpu_seconds_total,
 * nodejs_heap_size_used_bytes, …), so stock dashboards work; the bridge's own carry `bridge_`.
 * docs/observability.md lists them; ops/grafana-dashboard.json and ops/alerts.yml use them.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PeriodicLoop } from '../kernel/periodic.js';

export interface Metrics {
  registry: Registry;
  checkouts: Counter<'pos' | 'result' | 'merchant'>;
  refunds: Counter<'pos' | 'result' | 'merchant'>;
  upstreamCalls: Counter<'operation' | 'outcome' | 'merchant'>;
  accrualsHeldBack: Counter<'merchant'>;
  /** Orders and refunds backfill found (src/backfill/poller.ts), by POS and what came of them: new (its webhook never arrived), known, refused, unpaid. */
  backfillFound: Counter<'pos' | 'result' | 'merchant'>;
  /** Backfill passes, by POS and outcome (complete: the watermark moved; failed: it stayed). */
  backfillPasses: Counter<'pos' | 'outcome' | 'merchant'>;
  /**
   * `{ merchant }` for the per-merchant counters above, or nothing when the label is off
   * (METRICS_MERCHANT_LABEL=off): each merchant is one series per label combination, bounded by the
   * merchants the bridge serves, and with thousands of them a scrape grows with them.
   */
  merchant(merchantId: string): { merchant?: string };
  httpDuration: Histogram<'route' | 'code'>;
  /** Records with work left, and settled ones a person must still look at, by status. */
  openRecords: Gauge<'status'>;
  /** Open dead letters by the code of their cause. */
  deadLetters: Gauge<'reason'>;
  /** Webhook deliveries (verified, or refused by reason) and the events of verified ones (processed, ignored, dead_lettered), by POS. */
  webhookOutcomes: Counter<'pos' | 'outcome' | 'reason'>;
  /** Each request to the loyalty service (retries included), by operation and outcome. */
  upstreamLatency: Histogram<'operation' | 'outcome'>;
  /** A register's calls (Toast's loyalty integration; `lookup` for POST /v1/lookup), by type and status (accepted, or why refused). */
  registerCalls: Counter<'pos' | 'type' | 'status'>;
  /** How long a register's reads took to answer (SEARCH, INQUIRE, lookup): Toast wants under 500 ms on average. */
  registerSeconds: Histogram<'pos' | 'type'>;
  /** The attention queue: items by kind, and the age of the oldest of each kind. */
  attentionItems: Gauge<'kind'>;
  attentionOldest: Gauge<'kind'>;
  /** POS requests answered 503 before their body was read (src/http/load-shedding.ts). */
  shed: Counter<'endpoint' | 'reason'>;
  /** Ledger operations that failed because the ledger could not be reached, by where they were (docs/observability.md). */
  ledgerErrors: Counter<'where'>;
  ledgerLastWrite: Gauge;
  posInFlight: Gauge;
}

/** A gauge set at each scrape from the latest ledger reading: one series per label value `read` answers (none: no reading yet). */
function labelledGauge<L extends string>(registry: Registry, name: string, help: string, label: L, read: () => Record<string, number> | undefined): Gauge<L> {
  return new Gauge({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      const values = read();
      if (!values) return;
      this.reset();
      for (const [value, n] of Object.entries(values)) this.set({ [label]: value } as Record<L, string>, n);
    },
  });
}

/** What the ledger's gauges show, counted at one time (`LedgerReadings`). */
export interface LedgerReading {
  /** When it was counted (epoch ms). */
  atMs: number;
  /** Records with work left by status, and the settled ones a person must still look at (failed, partially accrued, reverse_failed). */
  openRecords: Partial<Record<string, number>>;
  /** Open dead letters by the code of their cause. */
  openDeadLetters: Record<string, number>;
  /** The attention queue by kind: how many, and since when (epoch ms) the oldest has waited. */
  attention: { counts: Record<string, number>; oldestSinceMs: Partial<Record<string, number>> };
}

/**
 * The ledger's gauges, counted on a timer (METRICS_REFRESH_MS) and never inside a scrape: a scrape
 * answers from memory whatever the ledger holds, and a slow count delays the next reading, never a
 * scrape or a checkout. `bridge_ledger_reading_age_seconds` says how old the figures are.
 */
export class LedgerReadings {
  #latest?: LedgerReading;
  readonly #loop: PeriodicLoop;

  constructor(
    private readonly read: () => Promise<LedgerReading>,
    intervalMs: number,
    onError: (error: unknown) => void,
  ) {
    this.#loop = new PeriodicLoop(() => this.refresh(), () => intervalMs, onError);
  }

  get latest(): LedgerReading | undefined {
    return this.#latest;
  }

  /** Counts now (the bridge does once before it listens, then on its timer; tests call it after a change). */
  async refresh(): Promise<void> {
    this.#latest = await this.read();
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }
}

export function createMetrics(readings: Pick<LedgerReadings, 'latest'> | undefined, withDefaults = true, merchantLabel = true): Metrics {
  const registry = new Registry();
  if (withDefaults) collectDefaultMetrics({ register: registry });
  const latest = () => readings?.latest;
  new Gauge({
    name: 'bridge_ledger_reading_age_seconds',
    help: 'How long ago the ledger gauges (open records, dead letters, attention) were counted: they are counted every METRICS_REFRESH_MS, not at each scrape.',
    registers: [registry],
    collect() {
      const reading = latest();
      if (reading) this.set(Math.max(0, (Date.now() - reading.atMs) / 1000));
    },
  });
  return {
    registry,
    checkouts: new Counter({ name: 'bridge_checkouts_total', help: 'Checkouts received, by POS and resulting status (repeat = already recorded; repeat_changed = already recorded, delivered again with another amount).', labelNames: ['pos', 'result', 'merchant'], registers: [registry] }),
    refunds: new Counter({ name: 'bridge_refunds_total', help: 'Refunds received, by POS and resulting status.', labelNames: ['pos', 'result', 'merchant'], registers: [registry] }),
    upstreamCalls: new Counter({ name: 'bridge_upstream_calls_total', help: 'Rounds of calls to the loyalty service, by operation and classified outcome.', labelNames: ['operation', 'outcome', 'merchant'], registers: [registry] }),
    accrualsHeldBack: new Counter({
      name: 'bridge_accruals_held_back_total',
      help: 'Times an accrual waited behind an unsettled accrual of the same customer and amount (sent together, the history could not tell them apart).',
      labelNames: ['merchant'],
      registers: [registry],
    }),
    backfillFound: new Counter({
      name: 'bridge_backfill_found_total',
      help: 'Orders and refunds backfill read back from a POS, by POS and result: new (recorded by backfill: its webhook never arrived), known (recorded already), refused (not recorded: see the pass), unpaid (an unpaid sale, left alone).',
      labelNames: ['pos', 'result', 'merchant'],
      registers: [registry],
    }),
    backfillPasses: new Counter({ name: 'bridge_backfill_passes_total', help: 'Backfill passes, by POS and outcome (complete: the watermark moved; failed: it stayed where it was).', labelNames: ['pos', 'outcome', 'merchant'], registers: [registry] }),
    httpDuration: new Histogram({ name: 'bridge_http_request_duration_seconds', help: 'Time to answer HTTP requests.', labelNames: ['route', 'code'], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5], registers: [registry] }),
    ledgerErrors: new Counter({
      name: 'bridge_ledger_errors_total',
      help: 'Ledger operations that failed because the ledger could not be reached (a PostgreSQL failover, a connection cut, the database down), by where: request (answered 503 ledger_unavailable), gauges (the timed count of the ledger gauges, which goes on when no request comes), worker (a pass of the worker that delivers due records), dead_letters (a pass of the dead-letter retrier).',
      labelNames: ['where'],
      registers: [registry],
    }),
    ledgerLastWrite: new Gauge({
      name: 'bridge_ledger_last_write_timestamp_seconds',
      help: 'When this instance last wrote a ledger record (a sale or refund recorded, an outcome written), as Unix time; 0: none since it started. time() minus it is how long writes have not gone through: during an outage it grows while POS requests are answered 503.',
      registers: [registry],
    }),
    shed: new Counter({ name: 'bridge_pos_requests_shed_total', help: 'POS requests answered 503 with Retry-After before their body was read (nothing recorded), by endpoint (checkouts, refunds, webhooks) and reason (in_flight: POS_MAX_IN_FLIGHT requests were being handled).', labelNames: ['endpoint', 'reason'], registers: [registry] }),
    merchant: (merchantId) => (merchantLabel ? { merchant: merchantId } : {}),
    posInFlight: new Gauge({ name: 'bridge_pos_requests_in_flight', help: 'POS requests being handled now (body read, not yet answered); more than POS_MAX_IN_FLIGHT are shed.', registers: [registry] }),
    openRecords: labelledGauge(registry, 'bridge_ledger_open_records', 'Ledger records by status: those with work left (pending, in_doubt, reversal_pending), and settled ones a person must still look at (failed, partially_accrued, reverse_failed, neither closed nor acknowledged).', 'status', () => {
      const reading = latest();
      if (!reading) return undefined;
      // Every status a person may have to act on is always present, 0 included, so alerts and panels see the series.
      const always = Object.fromEntries(['pending', 'in_doubt', 'reversal_pending', 'failed', 'partially_accrued', 'reverse_failed'].map((status) => [status, 0]));
      return { ...always, ...reading.openRecords } as Record<string, number>;
    }),
    deadLetters: labelledGauge(registry, 'bridge_dead_letters_open', 'Open dead letters (neither carried out by a replay nor dismissed), by the code of their cause: unknown_merchant, merchant_suspended, invalid_payload, pos_api_failed, pos_api_not_configured, …; unclassified for letters kept before codes.', 'reason', () => latest()?.openDeadLetters),
    webhookOutcomes: new Counter({
      name: 'bridge_webhook_outcomes_total',
      help: 'Webhook deliveries by POS: verified (authentic), or refused (reason: signature_missing, signature_mismatch, not_configured, signed_header_missing, signed_time_invalid, replay_window, payload_too_large, unsupported_media_type, …); and each event of a verified delivery: processed, ignored or dead_lettered.',
      labelNames: ['pos', 'outcome', 'reason'],
      registers: [registry],
    }),
    attentionItems: labelledGauge(registry, 'bridge_attention_items', 'What needs a person (GET /v1/admin/attention), by kind: in_doubt, ambiguous, held, failed, partially_accrued, reverse_failed, changed_repeats, dead_letter.', 'kind', () => latest()?.attention.counts),
    attentionOldest: labelledGauge(registry, 'bridge_attention_oldest_age_seconds', 'How long the oldest item of each kind has needed a person (0 when there is none): in_doubt over 3600 is the alert "in doubt older than an hour".', 'kind', () => {
      const read = latest()?.attention;
      if (!read) return undefined;
      const nowMs = Date.now();
      return Object.fromEntries(Object.keys(read.counts).map((kind) => [kind, read.oldestSinceMs[kind] === undefined ? 0 : Math.max(0, (nowMs - read.oldestSinceMs[kind]!) / 1000)]));
    }),
    registerCalls: new Counter({
      name: 'bridge_register_calls_total',
      help: "A register's calls while the sale is open (Toast's loyalty integration; pos lookup for POST /v1/lookup), by type (search, inquire, redeem, accrue, reverse, unsupported, lookup) and status (accepted, found, not_found, or why refused: key, account, input, no_card, unknown_call, unsupported, unavailable; a lookup the loyalty service did not answer: rate_limited, timeout, unavailable, no_api_key).",
      labelNames: ['pos', 'type', 'status'],
      registers: [registry],
    }),
    registerSeconds: registerReadSeconds(registry),
    upstreamLatency: new Histogram({
      name: 'bridge_upstream_request_duration_seconds',
      help: 'Each request to the loyalty service, retries included, by operation (accrue, reverse, resolve_credentials, operations, cards) and outcome (ok, refused, rate_limited, server_error, timeout, network).',
      labelNames: ['operation', 'outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}

/**
 * The register's read times, its series there from the start (Toast's SEARCH and INQUIRE, the
 * lookup) so that a dashboard and the INQUIRE alert (ops/alerts.yml) see 0, not nothing, before the
 * first call.
 */
function registerReadSeconds(registry: Registry): Histogram<'pos' | 'type'> {
  const histogram = new Histogram({
    name: 'bridge_register_read_duration_seconds',
    help: "Time to answer a register's reads (search, inquire, lookup), cache hits included: Toast wants under 0.5 s on average and takes 5 s as a timeout.",
    labelNames: ['pos', 'type'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  for (const labels of [{ pos: 'toast', type: 'search' }, { pos: 'toast', type: 'inquire' }, { pos: 'lookup', type: 'lookup' }]) histogram.zero(labels);
  return histogram;
}
