/**
 * A request id on every request and response, and one JSON log line per finished request:
 * method, path (contact details in it masked), status and time, never the body or query (they can carry customer contact details).
 * A 4xx line (and a 503 of load shedding) says why it was refused (`refusal`: the error code and message the client got, contact
 * details masked; a 401 says which check failed without echoing any credential), so an on-call
 * engineer can tell a wrong token from a bad payload from the log alone.
 * A POS's own plain `X-Request-Id` is kept, so one id follows a checkout end to end. Written for
 * the hot path: nothing is allocated for logging when the level would drop the line.
 */
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import { echoed } from '../kernel/errors.js';
import { logContext, withLogContext } from '../kernel/log-context.js';
import type { Logger } from '../kernel/logger.js';
import { maskContacts } from '../kernel/mask.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

interface Refusal {
  code: string;
  message: string;
  reason?: string;
}

/** What a log line keeps of a refusal: the code, the reason, and the message cut short and masked. */
function refusalOf(refusal: Refusal): Refusal {
  const message = refusal.message.length > 300 ? `${refusal.message.slice(0, 300)}…` : refusal.message;
  // A message can repeat a path as sent (`no route POST /v1/refunds/generic/ann%40example.com`): read decoded, so an encoded contact is masked too.
  return { code: refusal.code, message: maskContacts(decoded(message)), ...(refusal.reason ? { reason: refusal.reason } : {}) };
}

/**
 * The path as a log line keeps it: each segment that holds a phone number or an email (a person
 * typing one where an id goes: `/v1/admin/transactions/ann@example.com`, `%2B15550001111`) masked
 * after decoding, the others as sent; then cut as every echo of input is (errors.ts `echoed`), so a
 * 15,000-character id is not a 15 KB line. Read only for a line that is written.
 */
export function pathForLog(path: string): string {
  const segments = path.slice(0, MAX_PATH_READ).split('/');
  // A segment the read limit cut may hold a contact cut too (no longer its shape): not kept.
  if (path.length > MAX_PATH_READ && segments.length > 1) segments[segments.length - 1] = '…';
  for (let i = 0; i < segments.length; i++) {
    const text = decoded(segments[i]!);
    const masked = maskContacts(text);
    if (masked !== text) segments[i] = masked;
  }
  return echoed(segments.join('/'));
}

/**
 * Percent-encoding undone run by run, each run of `%XX` escapes on its own: one bad escape
 * (`ann%40example.com%`, or an escape a message cut in two) leaves only itself undecoded, not the
 * whole text, so a contact beside it is still read and masked.
 */
function decoded(text: string): string {
  if (!text.includes('%')) return text;
  return text.replace(ESCAPE_RUN, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

const ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;

/** What of a path is read for masking: far more than a log line keeps of it. */
const MAX_PATH_READ = 2_000;

declare module 'express-serve-static-core' {
  interface Request {
    id: string;
    log: Logger;
  }
}

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    req.log = logger;
    res.setHeader('X-Request-Id', req.id);
    if (logger.isLevelEnabled('info')) {
      const started = process.hrtime.bigint();
      res.once('finish', () => {
        // 503 is load shed or the ledger out of reach, said once by the error handler or counted in
        // a metric: at error it would flood the log exactly when the bridge is busiest.
        const level = res.statusCode >= 500 && res.statusCode !== 503 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info';
        // 'finish' fires outside the request's context: the merchant is read from the one captured.
        logger[level](
          {
            ...(context?.merchantId ? { merchantId: context.merchantId } : {}),
            req: { id: req.id, method: req.method, path: pathForLog(req.path) },
            res: { statusCode: res.statusCode },
            // Set for a 4xx, and for a 503 of load shedding (error-handler.ts).
            ...(res.locals.refusal ? { refusal: refusalOf(res.locals.refusal as Refusal) } : {}),
            responseTime: Number(process.hrtime.bigint() - started) / 1e6,
          },
          'request completed',
        );
      });
    }
    // Everything the request does below runs in its log context: its lines name it and its merchant.
    let context: ReturnType<typeof logContext>;
    withLogContext({ requestId: req.id }, () => {
      context = logContext();
      next();
    });
  };
}
