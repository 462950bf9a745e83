/** Prometheus metrics, one registry per app instance (tests build several apps in one process). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

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
  openRecords: Gauge;
  /** POS requests answered 503 before their body was read (src/http/load-shedding.ts). */
  shed: Counter<'endpoint' | 'reason'>;
  posInFlight: Gauge;
}

const NO_LABEL = Object.freeze({});

export function createMetrics(openRecords: () => Promise<number>, withDefaults = true, merchantLabel = true): Metrics {
  const registry = new Registry();
  const labels = new Map<string, { merchant: string }>();
  if (withDefaults) collectDefaultMetrics({ register: registry, prefix: 'bridge_' });
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
    shed: new Counter({ name: 'bridge_pos_requests_shed_total', help: 'POS requests answered 503 with Retry-After before their body was read (nothing recorded), by endpoint (checkouts, refunds, webhooks) and reason (in_flight: POS_MAX_IN_FLIGHT requests were being handled).', labelNames: ['endpoint', 'reason'], registers: [registry] }),
    merchant(merchantId) {
      if (!merchantLabel) return NO_LABEL;
      let label = labels.get(merchantId);
      if (!label) labels.set(merchantId, (label = Object.freeze({ merchant: merchantId })));
      return label;
    },
    posInFlight: new Gauge({ name: 'bridge_pos_requests_in_flight', help: 'POS requests being handled now (body read, not yet answered); more than POS_MAX_IN_FLIGHT are shed.', registers: [registry] }),
    openRecords: new Gauge({
      name: 'bridge_ledger_open_records',
      help: 'Ledger records with work left (pending, in doubt, reversal pending).',
      registers: [registry],
      async collect() {
        this.set(await openRecords());
      },
    }),
  };
}
