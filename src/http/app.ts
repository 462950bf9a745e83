/** The Express app: request ids and logging, the routes, and the one error handler. */
import express from 'express';
import type { AppDeps } from './deps.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { loadShedding, SHED_PATHS } from './load-shedding.js';
import { openApiDocument } from './openapi.js';
import { requestLog } from './request-log.js';
import { mountRoutes } from './router.js';
import { CONSOLE_DIR, consoleRoutes, consoleVocabulary } from './routes/console.js';
import { routeTable } from './table.js';

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
