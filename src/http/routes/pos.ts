/** POS-facing endpoints: `/v1/checkouts/{pos}` and `/v1/refunds/{pos}`. */
import { Router, type RequestHandler } from 'express';
import type { AdapterContext, PosAdapter } from '../../../adapters/types.js';
import type { TransactionService } from '../../core/transactions.js';
import { NotFoundError } from '../../errors.js';
import { parseJsonBody, rawBody, requireJson } from '../body.js';
import { posAnswer } from '../views.js';

export function posRoutes(deps: { adapters: ReadonlyMap<string, PosAdapter>; service: TransactionService; context: AdapterContext; bodyLimitBytes: number }): Router {
  const router = Router();
  const adapterOf = (pos: string | undefined): PosAdapter => {
    const adapter = pos ? deps.adapters.get(pos) : undefined;
    if (!adapter) throw new NotFoundError(`unknown POS ${JSON.stringify(pos)}; known: ${[...deps.adapters.keys()].join(', ')}`, 'unknown_pos');
    return adapter;
  };
  // Unknown POS first (404 without reading the body), then content type (415), then size (413).
  const knownPos: RequestHandler = (req, _res, next) => {
    adapterOf(req.params.pos as string);
    next();
  };
  const body = [knownPos, requireJson(), rawBody(deps.bodyLimitBytes)];

  router.post('/v1/checkouts/:pos', ...body, async (req, res) => {
    const adapter = adapterOf(req.params.pos as string);
    const intent = adapter.parseCheckout(parseJsonBody(req.rawBody), deps.context);
    const answer = await deps.service.checkout(adapter.name, intent);
    res.status(answer.httpStatus).json(posAnswer(answer));
  });

  router.post('/v1/refunds/:pos', ...body, async (req, res) => {
    const adapter = adapterOf(req.params.pos as string);
    const intent = adapter.parseRefund(parseJsonBody(req.rawBody), deps.context);
    const answer = await deps.service.refund(adapter.name, intent);
    res.status(answer.httpStatus).json(posAnswer(answer));
  });

  return router;
}
