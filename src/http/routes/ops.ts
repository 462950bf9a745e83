/** Operations endpoints: liveness, readiness, metrics, the OpenAPI document. */
import { Router, type Express } from 'express';
import type { LedgerStore } from '../../ledger/store.js';
import type { UpstreamReadiness } from '../../merchants/upstream-check.js';
import type { Metrics } from '../../metrics.js';
import { openApiDocument } from '../openapi.js';
import type { Health, Readiness } from '../schemas.js';

/** The app.locals key of the upstream credential check (setUpstreamReadiness). */
const UPSTREAM_READINESS = 'upstreamReadiness';

/**
 * Gives `/readyz` the bridge's check of the loyalty service's credentials (src/merchants/upstream-check.ts).
 * Set by the composition root once the check exists (src/bridge.ts), beside the app's other
 * dependencies; an app without one (a test's) answers `upstream` from configuration alone.
 */
export function setUpstreamReadiness(app: Express, readiness: () => UpstreamReadiness): void {
  app.locals[UPSTREAM_READINESS] = readiness;
}

export function opsRoutes(deps: { store: LedgerStore; metrics: Metrics; upstreamConfigured: boolean; version: string; instanceId: string }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    // The instance id appears in ledger records a call is in flight for: it tells operators (and the
    // multi-instance tests) which instance holds a call.
    res.json({ status: 'ok', instance: deps.instanceId, version: deps.version } satisfies Health);
  });
  router.get('/readyz', async (req, res) => {
    // What the last credential checks found, read from memory: a probe never waits for the loyalty
    // service, and asking often never asks it more often (the check paces its own rounds).
    const upstream = deps.upstreamConfigured ? ((req.app.locals[UPSTREAM_READINESS] as (() => UpstreamReadiness) | undefined)?.() ?? { ready: true, upstream: 'ok' }) : { ready: false, upstream: 'not configured' };
    const checks = { ledger: 'ok', upstream: upstream.upstream };
    try {
      await deps.store.ping();
    } catch (error) {
      // Unreachable (a database) or unable to write (a full disk): either way no checkout succeeds here.
      checks.ledger = `failing: ${(error as Error).message}`;
    }
    const ready = checks.ledger === 'ok' && upstream.ready;
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks } satisfies Readiness);
  });
  router.get('/metrics', async (_req, res) => {
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument(deps.version));
  });
  return router;
}
