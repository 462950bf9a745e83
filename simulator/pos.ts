/**
 * The three point-of-sale operations (loyalty-service-api.md, "Point of sale (credential
 * X-App-Token)"). Bare bodies, no envelope. Each request belongs to the merchant whose app token it
 * carries. The order of refusals is part of the contract: a merchant's rate-limit storm (the front
 * proxy, before the service), then the body (Errors, rule 1: validated before the credential), then
 * the credential, then that merchant's scripted fault, then the write in that merchant's books.
 */
import express, { type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { AccrueRequest, Credential, ReverseRequest, type PosResponse } from '../src/loyalty/contract.js';
import type { Fault } from './faults.js';
import type { SimContext } from './context.js';
import type { Merchant } from './merchant.js';

type PosOperation = 'accrue' | 'reverse';

const ResolveCredentialsRequest = z.object({
  names: z.array(z.string()).optional(),
  credentials: z.array(Credential).min(1).optional(),
});

/** A "front proxy" page: contract, Errors: the 429 is not JSON and carries no Retry-After / X-RateLimit-*. */
const RATE_LIMIT_PAGE =
  '<html>\r\n<head><title>429 Too Many Requests</title></head>\r\n<body>\r\n<center><h1>429 Too Many Requests</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

export function rateLimitPage(res: Response): void {
  res.status(429).type('text/html').send(RATE_LIMIT_PAGE);
}

/** A server_error fault's answer: gateway statuses come from the front proxy as HTML; anything else from the app as JSON. */
export function serverErrorPage(res: Response, fault: Pick<Fault, 'status' | 'message'>): void {
  const status = fault.status ?? 503;
  const text = fault.message ?? (status === 503 ? 'Service Temporarily Unavailable' : 'Internal Server Error');
  if (status >= 502 && status <= 504) {
    res.status(status).type('text/html').send(`<html><head><title>${status} ${text}</title></head><body><h1>${status} ${text}</h1></body></html>`);
  } else {
    res.status(status).json({ message: text });
  }
}

const jsonBody = express.json({ limit: '1mb' });

/** Undecodable JSON is a 400 with {errors} (contract, Errors), not Express's default HTML page. */
const parseBody: RequestHandler = (req, res, next) => {
  jsonBody(req, res, (err?: unknown) => {
    if (err === undefined || err === null) return next();
    const status = (err as { status?: number }).status ?? 400;
    const detail = err instanceof Error ? err.message : 'invalid JSON';
    res.status(status >= 400 && status < 500 ? status : 400).json({ errors: [`body: could not be decoded (${detail})`] });
  });
};

function issueStrings(error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.join('.') : 'body';
    if (issue.code === 'invalid_type' && issue.message.endsWith('received undefined')) return `${field}: This value is required.`;
    if (issue.code === 'too_small' && issue.origin === 'string') return `${field}: This value should not be blank.`;
    return `${field}: ${issue.message}`;
  });
}

function isBlank(value: unknown): boolean {
  return typeof value !== 'string' || value.trim() === '';
}

function validate<T>(schema: z.ZodType<T>, body: unknown, extra: (raw: Record<string, unknown>) => string[]): T | string[] {
  const parsed = schema.safeParse(body);
  const errors = parsed.success ? [] : issueStrings(parsed.error);
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) errors.push(...extra(body as Record<string, unknown>));
  return errors.length > 0 || !parsed.success ? errors : parsed.data;
}

function blankTransactionId(raw: Record<string, unknown>): string[] {
  const id = raw.transactionId;
  return typeof id === 'string' && id.length > 0 && id.trim() === '' ? ['transactionId: This value should not be blank.'] : [];
}

/** Contract: "one of the three is needed to find or register the card, validated by the server". */
function accrueExtras(raw: Record<string, unknown>): string[] {
  const errors = blankTransactionId(raw);
  if (isBlank(raw.phone) && isBlank(raw.email) && isBlank(raw.serialNumber)) {
    errors.push('phone, email, serialNumber: one of them is required to find or register the card.');
  }
  return errors;
}

export function posRouter(ctx: SimContext): express.Router {
  const router = express.Router();

  /**
   * Routes by X-App-Token: each install of the app has its own token (contract, Point of sale).
   * Missing, unknown or revoked tokens, and API keys (Authentication 5: "not interchangeable"), are
   * 403 {errors} (Errors: "X-App-Token header missing" and "token invalid").
   */
  function authorise(req: Request, res: Response): Merchant | undefined {
    const token = req.get('x-app-token');
    const merchant = ctx.merchants.byAppToken(token);
    if (merchant !== undefined && !merchant.revoked) return merchant;
    const message =
      token === undefined || token === ''
        ? 'X-App-Token header is required.'
        : merchant !== undefined
          ? 'Invalid app token: the app was uninstalled.'
          : ctx.merchants.isApiKey(token)
            ? 'An API key is not accepted here; use X-App-Token.'
            : 'Invalid app token.';
    res.status(403).json({ errors: [message] });
    return undefined;
  }

  /**
   * Books count every request, refused ones included, on the merchant its token names; a request
   * that names none (no token, an unknown one, an API key) is counted by the default merchant, as
   * when the simulator had only that one.
   */
  function count(operation: PosOperation): RequestHandler {
    return (req, _res, next) => {
      const ledger = (ctx.merchants.byAppToken(req.get('x-app-token')) ?? ctx.merchants.default).ledger;
      if (operation === 'accrue') ledger.accrueRequests += 1;
      else ledger.reverseRequests += 1;
      next();
    };
  }

  /**
   * A merchant's rate-limit storm (FaultQueue.rateLimitAll). The 429 comes from the front proxy
   * (contract, Errors), which answers before the service reads the body or checks the install, so
   * it precedes validation here, for all three operations, and consumes no queued fault.
   */
  const stormed: RequestHandler = (req, res, next) => {
    if (ctx.merchants.byAppToken(req.get('x-app-token'))?.faults.rateLimitAll) return void rateLimitPage(res);
    next();
  };

  /**
   * Applies the fault (if any) around `commit`. `commit(failFirst)` performs the write and returns
   * the answer; it is never called for faults that model "nothing reached the books".
   */
  function answer(
    req: Request,
    res: Response,
    fault: Fault | undefined,
    commit: (failFirst?: string) => { status: number; body: unknown },
  ): void {
    if (fault === undefined) {
      const out = commit();
      res.status(out.status).json(out.body);
      return;
    }
    switch (fault.kind) {
      case 'rate_limit':
        rateLimitPage(res);
        return;
      case 'server_error':
        serverErrorPage(res, fault);
        return;
      case 'drop_before_commit':
        req.socket.destroy();
        return;
      case 'drop_after_commit':
        commit();
        req.socket.destroy();
        return;
      case 'slow_after_commit': {
        const out = commit();
        ctx.later(fault.delayMs ?? 5000, () => {
          if (!res.headersSent && !req.socket.destroyed) res.status(out.status).json(out.body);
        });
        return;
      }
      case 'result_failure': {
        const out = commit(fault.message ?? 'Card is blocked');
        res.status(out.status).json(out.body);
        return;
      }
      case 'history_moves':
      case 'slow':
        throw new Error(`${fault.kind} is a fault of reads, never taken for a call (faults.ts)`);
      default: {
        const unknown: never = fault.kind;
        throw new Error(`unhandled fault ${String(unknown)}`);
      }
    }
  }

  // A merchant's transactionIds are its own: the same id sent with two app tokens is two transactions.
  router.post('/accrue', count('accrue'), stormed, parseBody, (req, res) => {
    const request = validate(AccrueRequest, req.body, accrueExtras);
    if (Array.isArray(request)) return void res.status(400).json({ errors: request });
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    answer(req, res, merchant.faults.take('accrue'), (failFirst) => ({
      status: 200,
      body: merchant.ledger.accrue(request, failFirst) satisfies PosResponse,
    }));
  });

  router.post('/reverse', count('reverse'), stormed, parseBody, (req, res) => {
    const request = validate(ReverseRequest, req.body, blankTransactionId);
    if (Array.isArray(request)) return void res.status(400).json({ errors: request });
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    answer(req, res, merchant.faults.take('reverse'), (failFirst) => {
      const out = merchant.ledger.reverse(request.transactionId, failFirst);
      return out.ok ? { status: 200, body: out.body } : { status: 400, body: { errors: out.errors } };
    });
  });

  /** Queued faults model failed writes, so this read-only operation never consumes one (a storm still hits it). */
  router.post('/resolve-credentials', stormed, parseBody, (req, res) => {
    const request = validate(ResolveCredentialsRequest, req.body, () => []);
    if (Array.isArray(request)) return void res.status(400).json({ errors: request });
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    const all = merchant.credentials;
    const names = request.names ?? [];
    // Contract: "if empty or omitted ... all of the merchant's credentials are returned".
    res.json({ credentials: names.length === 0 ? all : all.filter((c) => names.includes(c.name)) });
  });

  return router;
}
