/** POS-facing endpoints: `/v1/checkouts/{pos}`, `/v1/refunds/{pos}`, `/v1/webhooks/{pos}`. */
import { Router, type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import { keptPayload, type Arrival } from '../../core/arrival.js';
import { UnauthorizedError } from '../../errors.js';
import { toBridgeError } from '../error-handler.js';
import type { Metrics } from '../../metrics.js';
import type { Ingest, IngestMerchant } from '../../core/ingest.js';
import type { PosAuthConfig } from '../../config.js';
import { parseJsonBody } from '../../json-body.js';
import { posAuth, type TokenDirectory } from '../auth.js';
import { rawBody, requireJson } from '../body.js';
import type { WebhookAnswer } from '../schemas.js';
import { sendAnswer } from '../views.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** The merchant a direct post is for (its token's), active. */
    posMerchant?: IngestMerchant;
  }
}

export function posRoutes(deps: { ingest: Ingest; bodyLimitBytes: number; posAuth: PosAuthConfig; tokens: Pick<TokenDirectory, 'byPosToken'>; metrics: Pick<Metrics, 'webhookOutcomes'> }): Router {
  const router = Router();
  // Unknown POS first (404 without reading the body), then content type (415), then size (413).
  const knownPos: RequestHandler = (req, _res, next) => {
    deps.ingest.adapter(req.params.pos as string);
    next();
  };
  const body = [knownPos, requireJson(), rawBody(deps.bodyLimitBytes)];
  // A suspended merchant's posts are refused (403) before the body is read: nothing is recorded for it.
  const activeMerchant: RequestHandler = (req, _res, next) => {
    deps.ingest.merchant(req.posPrincipal!.merchantId).then((merchant) => {
      req.posMerchant = merchant;
      next();
    }, next);
  };
  // Direct posts carry no signature: their credential is checked before anything else, even the POS name.
  const direct = [posAuth(deps.posAuth, deps.tokens), activeMerchant, ...body];

  /** What a record this request creates keeps of it: the request's id and the body as it came. */
  const arrival = (req: Request, via: 'pos' | 'webhook'): Arrival => {
    const receivedAt = new Date().toISOString();
    const pos = req.params.pos as string;
    return { via, receivedAt, requestId: req.id, ...(via === 'pos' ? { payload: keptPayload(pos, req.rawBody ?? Buffer.alloc(0), receivedAt, req.headers) } : {}) };
  };

  router.post('/v1/checkouts/:pos', ...direct, async (req, res) => {
    const answer = await deps.ingest.checkout(deps.ingest.adapter(req.params.pos as string), parseJsonBody(req.rawBody), req.posMerchant!, true, arrival(req, 'pos'));
    sendAnswer(res, answer);
  });

  router.post('/v1/refunds/:pos', ...direct, async (req, res) => {
    const answer = await deps.ingest.refund(deps.ingest.adapter(req.params.pos as string), parseJsonBody(req.rawBody), req.posMerchant!, true, arrival(req, 'pos'));
    sendAnswer(res, answer);
  });

  // The signature is computed over these exact bytes, so nothing may parse or re-encode them first;
  // each part of the delivery is attributed to the merchant it names.
  /** A known POS's name, or `unknown`: a label's values stay the POS systems the bridge has. */
  const posLabel = (pos: string) => {
    try {
      return deps.ingest.adapter(pos).name;
    } catch {
      return 'unknown';
    }
  };

  router.post('/v1/webhooks/:pos', ...body, async (req, res) => {
    // The payload each record keeps is the delivery's (or its part's, in a batch): ingest makes it.
    const outcome = await deps.ingest.webhook(req.params.pos as string, req.rawBody ?? Buffer.alloc(0), req.headers, req.rawHeaders, undefined, arrival(req, 'webhook'));
    const pos = outcome.pos;
    const handshake = outcome.results.length === 1 && outcome.results[0]!.key === 'handshake';
    if (!handshake) deps.metrics.webhookOutcomes.inc({ pos, outcome: 'verified', reason: '' });
    for (const result of outcome.results) {
      const counted = result.action === 'checkout' || result.action === 'refund' ? 'processed' : result.action;
      deps.metrics.webhookOutcomes.inc({ pos, outcome: counted, reason: '' });
    }
    res.status(outcome.inProgress ? 202 : 200).json({ pos: outcome.pos, results: outcome.results } satisfies WebhookAnswer);
  });

  // A delivery refused before anything of it was carried out (bad signature, too large, not JSON): counted by reason, then answered by the error handler.
  router.use('/v1/webhooks/:pos', ((error, req, _res, next) => {
    // Body-parser's own errors (a body over BODY_LIMIT_BYTES) as the answer will name them.
    const known = toBridgeError(error, req);
    if (known.status < 500) {
      const reason = known instanceof UnauthorizedError && known.reason ? known.reason : known.code;
      deps.metrics.webhookOutcomes.inc({ pos: posLabel(req.params.pos as string), outcome: 'refused', reason });
    }
    next(error);
  }) as ErrorRequestHandler);

  return router;
}
