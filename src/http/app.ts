/** The Express app: request ids and logging, the routes, and the one error handler. */
import express from 'express';
import type { BackfillPoller } from '../backfill/poller.js';
import type { NamedAdminToken, PosAuthConfig } from '../config.js';
import type { Ingest } from '../core/ingest.js';
import type { OperatorActions } from '../core/operator.js';
import type { Worker } from '../core/worker.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Logger } from '../logger.js';
import type { MerchantAdmin } from '../merchants/admin.js';
import type { Metrics } from '../metrics.js';
import type { ReconcileReporter } from '../reconcile/report.js';
import type { TokenDirectory } from './auth.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { loadShedding, SHED_PATHS } from './load-shedding.js';
import { requestLog } from './request-log.js';
import { adminRoutes } from './routes/admin.js';
import { backfillRoutes } from './routes/backfill.js';
import { consoleRoutes } from './routes/console.js';
import { opsRoutes } from './routes/ops.js';
import { posRoutes } from './routes/pos.js';
import { reportRoutes } from './routes/reports.js';
import type { UpstreamReadiness } from '../merchants/upstream-check.js';

export interface AppDeps {
  ingest: Ingest;
  operator: OperatorActions;
  /** This bridge instance's id (in-flight markers name it). */
  instanceId: string;
  worker: Worker;
  store: LedgerStore;
  logger: Logger;
  metrics: Metrics;
  adminToken: string;
  /** ADMIN_TOKENS: named operators with global tokens. */
  namedAdminTokens?: readonly NamedAdminToken[];
  posAuth: PosAuthConfig;
  /** Managing merchants (`/v1/admin/merchants`). */
  merchants: MerchantAdmin;
  /** Which merchant a POS or admin token belongs to (the merchant registry). */
  tokens: TokenDirectory;
  /** The three-way reconcile report (`/v1/admin/reports/reconcile`). */
  reporter: ReconcileReporter;
  bodyLimitBytes: number;
  /** POS requests handled at once before more are shed (POS_MAX_IN_FLIGHT). */
  posMaxInFlight: number;
  /** What the last checks of the loyalty service's credentials found: `/readyz`'s upstream (src/merchants/upstream-check.ts). */
  upstreamReadiness: () => UpstreamReadiness;
  version: string;
  /** Backfill on request and its state (`/v1/admin/backfill`), with the schedule's settings it reports. */
  backfill: { poller: BackfillPoller; intervalMs: number; overlapMs: number };
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: answers to POSTs are never revalidated, and hashing every body cost ~1% of a checkout.
  app.disable('etag');
  app.set('query parser', 'simple');
  app.use(requestLog(deps.logger));
  app.use((req, res, next) => {
    const end = deps.metrics.httpDuration.startTimer();
    res.on('finish', () => end({ route: req.route?.path ?? 'unmatched', code: String(res.statusCode) }));
    next();
  });
  app.use(opsRoutes(deps));
  // Before the POS routes read a byte of the body (and before POS_TOKEN: cheaper to refuse first).
  app.use(SHED_PATHS, loadShedding({ maxInFlight: deps.posMaxInFlight, metrics: deps.metrics }));
  app.use(posRoutes({ ingest: deps.ingest, bodyLimitBytes: deps.bodyLimitBytes, posAuth: deps.posAuth, tokens: deps.tokens, metrics: deps.metrics }));
  app.use(reportRoutes(deps));
  app.use(backfillRoutes({ adminToken: deps.adminToken, namedAdminTokens: deps.namedAdminTokens, tokens: deps.tokens, backfill: deps.backfill.poller, intervalMs: deps.backfill.intervalMs, overlapMs: deps.backfill.overlapMs }));
  app.use(adminRoutes(deps));
  app.use(consoleRoutes());
  app.use(notFoundHandler());
  app.use(errorHandler(deps.logger));
  return app;
}
