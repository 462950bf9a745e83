/**
 * Request bodies, read raw: JSON only (415 otherwise), within the size limit (413), before a byte is
 * parsed; parsing is `src/kernel/json-body.ts`. POS bodies are read raw because webhook signatures are
 * computed over the exact bytes; admin bodies go through the same parser, so both refuse a key
 * given twice. `adminInput` also checks what an admin request carries besides its body: its query
 * values and path segments.
 */
import express, { type Request, type RequestHandler } from 'express';
import { echoed, NotFoundError, UnsupportedMediaTypeError, ValidationError } from '../kernel/errors.js';
import { parseJsonBody } from '../kernel/json-body.js';

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

/**
 * A JSON body parsed into `req.body` the way POS bodies are (a key given twice is a 400 naming it):
 * for a POS-token route that reads a body of its own rather than a POS's payload (`/v1/lookup`).
 * Non-JSON is a 415 before a byte is read; an empty body is no body.
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  const raw = rawBody(limitBytes);
  return [
    requireJson(),
    (req, res, next) =>
      raw(req, res, (error?: unknown) => {
        if (error) return next(error);
        try {
          req.body = req.rawBody!.length === 0 ? undefined : parseJsonBody(req.rawBody!, { refuseControls: true });
        } catch (parseError) {
          return next(parseError);
        }
        next();
      }),
  ];
}

/** An admin body's size limit: a reason, a bulk action's ids, a merchant. */
export const ADMIN_BODY_LIMIT_BYTES = 16 * 1024;

/**
 * C0 controls, DEL and C1 controls: no id the bridge keeps holds one (adapters refuse them in POS
 * ids, dead-letter and merchant ids are the bridge's own), and PostgreSQL text cannot hold NUL.
 * A regular expression's class: /openapi.json states it too, on every free text of an admin query.
 */
export const CONTROL_CLASS = '\\u0000-\\u001F\\u007F-\\u009F';
const CONTROL_CHARACTER = new RegExp(`[${CONTROL_CLASS}]`);

/** Requests whose admin input was checked already: checked once, however often it is mounted on a request's path. */
const checkedRequests = new WeakSet<Request>();

/**
 * Every /v1/admin request's input, checked once, after its token and before any route reads it
 * (docs/security.md, "Hostile input"). The same answer on every store: before this, NUL in a query
 * value or an id was a 500 on PostgreSQL and an empty answer on the file ledger.
 * - Query values: valid percent-encoded UTF-8 (Node's parser would make a bad byte U+FFFD and go
 *   on), and no control character: 400 naming the parameter.
 * - Path segments: no control character: 404, as no record, dead letter or merchant has such an id.
 * - The body, when there is one: JSON only (415 naming application/json: a text/plain body used to be
 *   dropped and the action ran without its reason), at most ADMIN_BODY_LIMIT_BYTES (413), and parsed
 *   as POS bodies are (a key given twice, a lone surrogate: 400 naming where), and without control characters but tab and line breaks (NUL, C0, DEL, C1: 400 naming where). No body (no
 *   Content-Length, or 0) is no body: `req.body` is undefined and the route says what it needs.
 */
export function adminInput(): RequestHandler {
  const raw = rawBody(ADMIN_BODY_LIMIT_BYTES);
  return (req, res, next) => {
    if (checkedRequests.has(req)) return next();
    checkedRequests.add(req);
    try {
      checkQuery(req.originalUrl);
      checkPath(req.originalUrl);
    } catch (error) {
      return next(error);
    }
    if (!hasBody(req)) {
      req.body = undefined;
      return next();
    }
    if (!isJsonContentType(req.headers['content-type'])) return next(new UnsupportedMediaTypeError(req.headers['content-type']));
    raw(req, res, (error?: unknown) => {
      if (error) return next(error);
      try {
        req.body = req.rawBody!.length === 0 ? undefined : parseJsonBody(req.rawBody, { refuseControls: true });
      } catch (parseError) {
        return next(parseError);
      }
      next();
    });
  };
}

/** A body is coming: chunked, or a Content-Length above 0. */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** Each `name=value` of the URL's query, decoded strictly; a ValidationError names the first bad one. */
function checkQuery(url: string): void {
  const start = url.indexOf('?');
  if (start < 0) return;
  for (const pair of url.slice(start + 1).split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const name = decodeStrictly(equals < 0 ? pair : pair.slice(0, equals));
    if (name === undefined || CONTROL_CHARACTER.test(name)) throw ValidationError.field('', 'a query parameter name is not valid percent-encoded UTF-8 text, or holds a control character');
    const value = equals < 0 ? '' : decodeStrictly(pair.slice(equals + 1));
    if (value === undefined) throw ValidationError.field(echoed(name), 'is not valid percent-encoding of UTF-8 text');
    if (CONTROL_CHARACTER.test(value)) throw ValidationError.field(echoed(name), 'must not contain control characters');
  }
}

/** A query part as `application/x-www-form-urlencoded` (+ is a space), or undefined when it is not valid percent-encoded UTF-8. */
function decodeStrictly(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** Refuses a path with a control character in any segment (404: nothing has such an id). */
function checkPath(url: string): void {
  const end = url.indexOf('?');
  const path = end < 0 ? url : url.slice(0, end);
  if (!path.includes('%')) return;
  for (const segment of path.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      continue; // not valid percent-encoding: the router answers that (400 invalid_path)
    }
    if (CONTROL_CHARACTER.test(decoded)) throw new NotFoundError('no record, dead letter or merchant has an id with a control character, as this path does');
  }
}
