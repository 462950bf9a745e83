/**
 * Bearer-token checks: `/v1/admin/*` (ADMIN_TOKEN) and direct POS posts (`/v1/checkouts/*`,
 * `/v1/refunds/*`). Both answer a missing or wrong credential with the same 401 and a
 * `WWW-Authenticate: Bearer` challenge (RFC 6750), before a byte of the body is read.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { PosAuthConfig } from '../config.js';
import { UnauthorizedError } from '../errors.js';

/** Who a direct POS post comes from. One merchant (`default`) today; a merchant per token later. */
export interface PosPrincipal {
  merchantId: string;
}

/**
 * Turns a presented bearer token into the principal it belongs to. The single-merchant bridge has
 * one token; per-merchant tokens will look the token's hash up in the ledger store instead,
 * behind this same interface, so the route and the 401 stay as they are.
 */
export interface PosCredentials {
  authenticate(token: string): Promise<PosPrincipal | undefined>;
}

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by `posAuth` on direct POS posts. */
    posPrincipal?: PosPrincipal;
  }
}

const DEFAULT_MERCHANT: PosPrincipal = { merchantId: 'default' };

/**
 * The token of an `Authorization: Bearer <token>` header. The scheme name is case-insensitive
 * (RFC 9110 §11.1), so `bearer` and `BEARER` are the same scheme; the token itself is exact.
 */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return match?.[1];
}

/** Digest comparison: the same time whatever the given token's length or content. */
function tokenMatcher(expectedToken: string): (given: string) => boolean {
  const expected = createHash('sha256').update(expectedToken).digest();
  return (given) => timingSafeEqual(createHash('sha256').update(given).digest(), expected);
}

function challenge(res: Response, realm: string): void {
  res.setHeader('WWW-Authenticate', `Bearer realm="${realm}"`);
}

export function bearerAuth(expectedToken: string): RequestHandler {
  const matches = tokenMatcher(expectedToken);
  return (req, res, next) => {
    const given = bearerToken(req.headers.authorization);
    if (given !== undefined && matches(given)) return next();
    challenge(res, 'loyalty-bridge admin');
    next(new UnauthorizedError());
  };
}

/** POS_TOKEN as the one credential of the `default` merchant. */
export function singleTokenCredentials(token: string): PosCredentials {
  const matches = tokenMatcher(token);
  return { authenticate: async (given) => (matches(given) ? DEFAULT_MERCHANT : undefined) };
}

/**
 * Direct POS posts: a credential unless the deployment runs open (sandbox, or POS_AUTH=off behind
 * a private network). With token mode and no token configured, every direct post is refused: an
 * unset variable must never open the endpoints that reverse customers' points.
 */
export function posAuth(config: PosAuthConfig, credentials: PosCredentials | undefined = config.mode === 'token' && config.token ? singleTokenCredentials(config.token) : undefined): RequestHandler {
  if (config.mode === 'open') {
    return (req, _res, next) => {
      req.posPrincipal = DEFAULT_MERCHANT;
      next();
    };
  }
  return (req, res, next) => {
    const given = bearerToken(req.headers.authorization);
    const refuse = (message?: string) => {
      challenge(res, 'loyalty-bridge pos');
      next(new UnauthorizedError(message));
    };
    if (!credentials) return refuse('direct POS posts need a credential, and none is configured on this bridge (POS_TOKEN)');
    if (given === undefined) return refuse();
    credentials.authenticate(given).then((principal) => {
      if (!principal) return refuse();
      req.posPrincipal = principal;
      next();
    }, next);
  };
}
