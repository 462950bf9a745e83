/** The Express app: request ids and logging, the routes, and the one error handler. */
import express from 'express';
import type { BackfillPoller } from '../backfill/poller.js';
import type { NamedAdminToken, PosAuthConfig } from '../config.js';
import type { Ingest } from '../core/ingest.js';
import type { OperatorActions } from '../core/operator.js';
import type { RegisterService } from '../core/register.js';
import type { Worker } from '../core/worker.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Logger } from '../logger.js';
import type { MerchantAdmin } from '../merchants/admin.js';
import type { Metrics } from '../metrics.js';
import type { ReconcileReporter } from '../reconcile/report.js';
import type { TokenDirectory } from './auth.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { loadShedding, SHED_PATHS } from './load-shedding.js';
import { openApiDocument } from './openapi.js';
import { requestLog } from './request-log.js';
import { mountRoutes } from './router.js';
import { CONSOLE_DIR, consoleRoutes, consoleVocabulary } from './routes/console.js';
import { routeTable } from './table.js';
import type { UpstreamReadiness } from '../merchants/upstream-check.js';
import type { PosCatalogue } from '../pos/contract.js';

export interface AppDeps {
  ingest: Ingest;
  operator: OperatorActions;
  /** What a register asks while the sale is open (`/v1/toast/loyalty`, `/v1/lookup`). */
  register: RegisterService;
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
  /** The POSes the bridge registers, as the routes and the document need them (the composition root's adapters). */
  catalogue: PosCatalogue;
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
  // Before the POS routes read a byte of the body (and before POS_TOKEN: cheaper to refuse first).
  app.use(SHED_PATHS, loadShedding({ maxInFlight: deps.posMaxInFlight, metrics: deps.metrics }));
  // One table both mounts every route and documents it (/openapi.json).
  const routes = routeTable(deps.catalogue);
  app.use(mountRoutes(routes, { ...deps, openApi: () => openApiDocument(routes, deps.version) }));
  app.use(consoleRoutes(CONSOLE_DIR, consoleVocabulary(deps.catalogue)));
  app.use(notFoundHandler());
  app.use(errorHandler(deps.logger, () => deps.metrics.ledgerErrors.inc({ where: 'request' })));
  return app;
}
