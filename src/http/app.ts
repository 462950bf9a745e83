/** The Express app: request ids and logging, the routes, and the one error handler. */
import { randomUUID } from 'node:crypto';
import express from 'express';
import { pinoHttp } from 'pino-http';
import type { Ingest } from '../core/ingest.js';
import type { TransactionService } from '../core/transactions.js';
import type { Worker } from '../core/worker.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { adminRoutes } from './routes/admin.js';
import { opsRoutes } from './routes/ops.js';
import { posRoutes } from './routes/pos.js';

export interface AppDeps {
  ingest: Ingest;
  service: TransactionService;
  worker: Worker;
  store: LedgerStore;
  logger: Logger;
  metrics: Metrics;
  adminToken: string;
  bodyLimitBytes: number;
  upstreamConfigured: boolean;
  version: string;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(
    pinoHttp({
      logger: deps.logger,
      // A POS's own request id is kept when it is plain, so one id follows a checkout end to end.
      genReqId: (req, res) => {
        const given = req.headers['x-request-id'];
        const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
        res.setHeader('X-Request-Id', id);
        return id;
      },
      // Only method, path and status: bodies and query strings can carry customer contact details.
      serializers: {
        req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, path: req.url.split('?')[0] }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
    }),
  );
  app.use((req, res, next) => {
    const end = deps.metrics.httpDuration.startTimer();
    res.on('finish', () => end({ route: req.route?.path ?? 'unmatched', code: String(res.statusCode) }));
    next();
  });
  app.use(opsRoutes(deps));
  app.use(posRoutes({ ingest: deps.ingest, bodyLimitBytes: deps.bodyLimitBytes }));
  app.use(adminRoutes(deps));
  app.use(notFoundHandler());
  app.use(errorHandler(deps.logger));
  return app;
}
