/**
 * POS bodies are read raw (webhook signatures are computed over the exact bytes): JSON only (415
 * otherwise), within the size limit (413), before a byte is parsed. Parsing is `src/json-body.ts`.
 */
import express, { type RequestHandler } from 'express';
import { UnsupportedMediaTypeError } from '../errors.js';

declare module 'express-serve-static-core' {
  interface Request {
    rawBody?: Buffer;
  }
}

export function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Rejects non-JSON content types before a byte of the body is read. */
export function requireJson(): RequestHandler {
  return (req, _res, next) => next(isJsonContentType(req.headers['content-type']) ? undefined : new UnsupportedMediaTypeError(req.headers['content-type']));
}

export function rawBody(limitBytes: number): RequestHandler {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  return (req, res, next) =>
    raw(req, res, (error?: unknown) => {
      if (error) return next(error);
      req.rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      next();
    });
}
