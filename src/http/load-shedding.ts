/**
 * Load shedding on the POS-facing endpoints (`POST /v1/checkouts|refunds|webhooks/*`). A POS is
 * promised an answer within 2 s (bridge-contract); an overloaded bridge answered late instead
 * (security review, issue 9). When POS_MAX_IN_FLIGHT POS requests are already being handled, another
 * is answered at once with `503` and `Retry-After`, before a byte of its body is read: nothing is
 * recorded or sent upstream, so sending it again is safe. A request once admitted is never shed: from
 * then on it may be recorded, and it gets its real answer.
 *
 * Why a cap on requests being handled: every one of them waits in the same queues (the upstream
 * agent's 64 sockets, the ledger's group commit before each call, the event loop), so the time each
 * takes grows with their number (scripts/bench-overload.ts measures where it goes). A request counts
 * from its body's last byte to its answer: one still sending its body holds only its own socket (the
 * server's request timeout cuts it off), so slow senders cannot take the slots real POS requests need.
 * The cap is soft by the requests admitted in one turn of the event loop, whose bodies are read next.
 * Operations (`/healthz`, `/readyz`, `/metrics`) and `/v1/admin/*` are never shed.
 */
import type { RequestHandler } from 'express';
import { OverloadedError } from '../kernel/errors.js';
import type { Metrics } from '../core/metrics.js';

/** What a shed POS is told: a burst has usually passed a second later. */
export const RETRY_AFTER_SECONDS = 1;
/** The POS-facing mount points; the segment after /v1/ names the endpoint in the metric. */
export const SHED_PATHS = ['/v1/checkouts', '/v1/refunds', '/v1/webhooks'];

export function loadShedding(options: { maxInFlight: number; metrics: Metrics }): RequestHandler {
  let inFlight = 0;
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    if (inFlight >= options.maxInFlight) {
      options.metrics.shed.inc({ endpoint: req.baseUrl.slice('/v1/'.length), reason: 'in_flight' });
      return next(new OverloadedError(`overloaded: ${options.maxInFlight} POS requests are being handled; nothing was recorded, send it again in ${RETRY_AFTER_SECONDS} s`, RETRY_AFTER_SECONDS, 'in_flight'));
    }
    // The body's last byte is read before any route code runs; a request answered before that
    // (refused unread) never counts.
    let state: 'reading' | 'handling' | 'done' = 'reading';
    req.once('end', () => {
      if (state !== 'reading') return;
      state = 'handling';
      inFlight++;
      options.metrics.posInFlight.inc();
    });
    res.once('close', () => {
      if (state === 'handling') {
        inFlight--;
        options.metrics.posInFlight.dec();
      }
      state = 'done';
    });
    next();
  };
}
