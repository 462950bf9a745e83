/** Operations endpoints: liveness, readiness, metrics, the OpenAPI document. */
import { Router } from 'express';
import type { LedgerStore } from '../../ledger/store.js';
import type { UpstreamReadiness } from '../../merchants/upstream-check.js';
import type { Metrics } from '../../metrics.js';
import { openApiDocument } from '../openapi.js';
import type { Health, Readiness } from '../schemas.js';

/** `upstreamReadiness`: what the last checks of the loyalty service's credentials found (src/merchants/upstream-check.ts). */
export function opsRoutes(deps: { store: LedgerStore; metrics: Metrics; upstreamReadiness: () => UpstreamReadiness; version: string; instanceId: string }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    // The instance id appears in ledger records a call is in flight for: it tells operators (and the
    // multi-instance tests) which instance holds a call.
    res.json({ status: 'ok', instance: deps.instanceId, version: deps.version } satisfies Health);
  });
  router.get('/readyz', async (_req, res) => {
    // What the last credential checks found, read from memory: a probe never waits for the loyalty
    // service, and asking often never asks it more often (the check paces its own rounds).
    const upstream = deps.upstreamReadiness();
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
