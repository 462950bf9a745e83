/**
 * The one place errors become HTTP answers. BridgeErrors keep their status, code and message.
 * Errors thrown by Express's router and body-parser carry their own status, http-errors style
 * (`status`/`statusCode`, and body-parser's `type`): a 4xx among them is the client's doing and is
 * answered as one, with a message of ours, since theirs can echo the request back (the router's
 * names the undecodable path segment) or speak zlib. Anything else is a 500 whose message is hidden.
 * Only those real failures are logged here, at error with the stack; the request log already has
 * one line for every answer.
 */
import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { BridgeError, echoed, LedgerUnreachableError, NotFoundError, OverloadedError, PayloadTooLargeError, UnauthorizedError, ValidationError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { isLedgerUnreachable } from '../ledger/pg-store.js';

/** Enough of a path to recognise it; a URL can be kilobytes of the caller's choosing. */
const MAX_PATH_ECHO = 100;

/** Content codings body-parser decompresses (zstd where Node has it); any other is refused (415) unread. */
const DECOMPRESSED = new Set(['gzip', 'deflate', 'br', 'zstd']);

export function notFoundHandler(): RequestHandler {
  return (req, _res, next) => {
    next(new NotFoundError(`no route ${req.method} ${echoed(req.path, MAX_PATH_ECHO)}`));
  };
}

/** `onLedgerUnreachable`: told of each request answered 503 ledger_unavailable (the metric `bridge_ledger_errors_total`). */
export function errorHandler(logger: Logger, onLedgerUnreachable: () => void = () => undefined): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const known = toBridgeError(error, req);
    if (known instanceof LedgerUnreachableError) onLedgerUnreachable();
    // A shed request is the bridge working as designed: counted in a metric, one request-log line.
    if (known.status >= 500 && !(error instanceof OverloadedError)) (req.log ?? logger).error({ err: error }, 'request failed');
    // The request log's line for this answer gives the reason of a refusal (request-log.ts): every
    // 4xx, and a request shed for load (503), which is a refusal too, with why (docs/observability.md).
    if (known.status < 500 || error instanceof OverloadedError) res.locals.refusal = { code: known.code, message: known.message, ...refusalReason(known, error) };
    if (res.headersSent) return;
    if (error instanceof OverloadedError) res.setHeader('Retry-After', String(error.retryAfterSeconds));
    if (known instanceof LedgerUnreachableError) res.setHeader('Retry-After', '1');
    res.status(known.status).json({
      error: { code: known.code, message: known.status >= 500 && !(error instanceof BridgeError) && !(known instanceof LedgerUnreachableError) ? 'internal error' : known.message, ...(known.details ?? {}) },
      requestId: req.id,
    });
  };
}

/** Which check refused (a 401's), or why a request was shed (`in_flight`); never the credential. */
function refusalReason(known: BridgeError, error: unknown): { reason?: string } {
  if (known instanceof UnauthorizedError && known.reason) return { reason: known.reason };
  if (error instanceof OverloadedError && typeof known.details?.reason === 'string') return { reason: known.details.reason };
  return {};
}

interface HttpError {
  type?: string;
  status?: unknown;
  statusCode?: unknown;
  limit?: number;
  errno?: unknown;
  code?: unknown;
}

/** Any error a request met, as the BridgeError it is answered with (a 500 for what is not the client's doing). */
export function toBridgeError(error: unknown, req: Request): BridgeError {
  if (error instanceof BridgeError) return error;
  const e = (typeof error === 'object' && error !== null ? error : {}) as HttpError;
  switch (e.type) {
    case 'entity.too.large':
      return new PayloadTooLargeError(e.limit ?? 0);
    case 'entity.parse.failed':
      return ValidationError.field('', 'body is not valid JSON');
    case 'encoding.unsupported':
      return new BridgeError('Content-Encoding must be identity, gzip, deflate or br', 415, 'unsupported_media_type');
    case 'charset.unsupported':
      return new BridgeError('unsupported body charset; send UTF-8', 415, 'unsupported_media_type');
    case 'request.aborted':
      return new BridgeError('request aborted', 400, 'request_aborted');
    case 'request.size.invalid':
      return new BridgeError('the body is not as long as its Content-Length says', 400, 'invalid_body');
  }
  // The ledger out of reach (a PostgreSQL failover, a connection cut): nothing more was done, and
  // asking again soon is what the client should do; a POS's retry of a recorded checkout is a repeat.
  if (isLedgerUnreachable(error)) return new LedgerUnreachableError();
  const status = clientErrorStatus(e);
  if (status === undefined) return new BridgeError('internal error', 500, 'internal');
  // The router could not decodeURIComponent a path parameter (a % not followed by two hex digits
  // of valid UTF-8). Its message quotes the segment: not echoed.
  if (error instanceof URIError) return new BridgeError('the request path is not valid percent-encoding (RFC 3986: % followed by two hex digits, UTF-8)', 400, 'invalid_path');
  // body-parser hands on zlib's own error (errno, code) with status 400: the body is not what its
  // Content-Encoding says.
  const coding = String(req.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (typeof e.errno === 'number' && typeof e.code === 'string' && DECOMPRESSED.has(coding)) {
    return new BridgeError(`the body could not be decompressed as its Content-Encoding (${coding}) says`, 400, 'invalid_body_encoding');
  }
  const text = STATUS_CODES[status] ?? 'Bad Request';
  return new BridgeError(text.toLowerCase(), status, text.toLowerCase().replace(/[^a-z0-9]+/g, '_'));
}

/** An http-errors style 4xx (`status` or `statusCode`); undefined for anything else. */
function clientErrorStatus(e: HttpError): number | undefined {
  const status = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  return status !== undefined && Number.isInteger(status) && status >= 400 && status < 500 ? status : undefined;
}
