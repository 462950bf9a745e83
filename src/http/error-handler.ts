/**
 * The one place errors become HTTP answers. BridgeErrors keep their status, code and message;
 * body-parser errors map to 400/413/415; anything else is a 500 whose message is hidden.
 */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { BridgeError, NotFoundError, PayloadTooLargeError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';

export function notFoundHandler(): RequestHandler {
  return (req, _res, next) => next(new NotFoundError(`no route ${req.method} ${req.path}`));
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const known = toBridgeError(error);
    if (known.status >= 500) (req.log ?? logger).error({ err: error }, 'request failed');
    if (res.headersSent) return;
    res.status(known.status).json({
      error: { code: known.code, message: known.status >= 500 && !(error instanceof BridgeError) ? 'internal error' : known.message, ...(known.details ?? {}) },
      requestId: req.id,
    });
  };
}

function toBridgeError(error: unknown): BridgeError {
  if (error instanceof BridgeError) return error;
  const e = error as { type?: string; status?: number; limit?: number };
  if (e?.type === 'entity.too.large') return new PayloadTooLargeError(e.limit ?? 0);
  if (e?.type === 'entity.parse.failed') return ValidationError.field('', 'body is not valid JSON');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return new BridgeError('unsupported body encoding', 415, 'unsupported_media_type');
  if (e?.type === 'request.aborted') return new BridgeError('request aborted', 400, 'request_aborted');
  return new BridgeError('internal error', 500, 'internal');
}
