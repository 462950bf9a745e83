/** Operations endpoints: liveness, readiness, metrics, the OpenAPI document. Open to anyone. */
import { bearerToken, globalAdminOf } from '../auth.js';
import { route, type HttpDeps, type Route } from '../route.js';
import { Health, Readiness } from '../schemas.js';

/** The global admin tokens' matcher, made once per app (hashing the tokens once). */
const matchers = new WeakMap<HttpDeps, (given: string | undefined) => string | undefined>();
function globalAdmin(deps: HttpDeps): (given: string | undefined) => string | undefined {
  let matcher = matchers.get(deps);
  if (!matcher) matchers.set(deps, (matcher = globalAdminOf({ token: deps.adminToken, named: deps.namedAdminTokens })));
  return matcher;
}

export const opsRoutes: readonly Route[] = [
  route({
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    tag: 'Operations',
    summary: 'Alive',
    description: 'The process answers; names this instance and its version.',
    access: 'none',
    answers: { 200: { description: 'Alive.', json: Health } },
    handle({ res, deps }) {
      // The instance id appears in ledger records a call is in flight for: it tells operators (and the
      // multi-instance tests) which instance holds a call.
      res.json({ status: 'ok', instance: deps.instanceId, version: deps.version } satisfies Health);
    },
  }),
  route({
    method: 'get',
    path: '/readyz',
    operationId: 'getReadiness',
    tag: 'Operations',
    summary: 'Ready to take checkouts',
    description:
      "The ledger is reachable and can write, and the upstream is configured. Without a token it says ready or not ready, and nothing else (no merchant, no count); with the bridge's admin token (ADMIN_TOKEN or one of ADMIN_TOKENS) checks says which part and why.",
    access: 'none',
    answers: {
      200: { description: 'Ready.', json: Readiness },
      503: { description: 'Not ready: with the admin token, checks says which and why.', json: Readiness },
    },
    async handle({ req, res, deps }) {
      // What the last credential checks found, read from memory: a probe never waits for the loyalty
      // service, and asking often never asks it more often (the check paces its own rounds).
      const upstream = deps.upstreamReadiness();
      // register: said only when a merchant's register cannot read (the answer of a bridge without one stays as it was).
      const checks = { ledger: 'ok', upstream: upstream.upstream, ...(upstream.register !== 'ok' ? { register: upstream.register } : {}) };
      try {
        await deps.store.ping();
      } catch (error) {
        // Unreachable (a database) or unable to write (a full disk): either way no checkout succeeds here.
        checks.ledger = `failing: ${(error as Error).message}`;
      }
      const ready = checks.ledger === 'ok' && upstream.ready;
      // The details name merchants whose install was revoked, and how many merchants there are:
      // an operator's, not every prober's (contract v1.5).
      const detailed = globalAdmin(deps)(bearerToken(req.headers.authorization)) !== undefined;
      res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', ...(detailed ? { checks } : {}) } satisfies Readiness);
    },
  }),
  route({
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    tag: 'Operations',
    summary: 'Prometheus metrics',
    description: 'Counts and timings, no customer data; keep it off the internet if counts are private.',
    access: 'none',
    answers: { 200: { description: 'Prometheus text exposition.', media: { 'text/plain': { jsonSchema: { type: 'string' } } } } },
    async handle({ res, deps }) {
      res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
    },
  }),
  route({
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApi',
    tag: 'Operations',
    summary: 'This document',
    description: 'The interface as OpenAPI 3.1.',
    access: 'none',
    answers: { 200: { description: 'This document.', json: { jsonSchema: { type: 'object' } } } },
    handle({ res, deps }) {
      res.json(deps.openApi());
    },
  }),
];
