/**
 * Bearer-token checks: `/v1/admin/*` and direct POS posts (`/v1/checkouts/*`, `/v1/refunds/*`).
 * Both answer a missing or wrong credential with the same 401 and a `WWW-Authenticate: Bearer`
 * challenge (RFC 6750), before a byte of the body is read. A token names who is asking: a
 * merchant (its POS token or its admin token; POS_TOKEN is the default merchant's), or, for
 * ADMIN_TOKEN, the operator of the whole bridge.
 */
import type { RequestHandler, Response } from 'express';
import type { PosAuthConfig } from '../config.js';
import { BridgeError, UnauthorizedError } from '../kernel/errors.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import { nameMerchant } from '../kernel/log-context.js';
import { secretMatcher } from '../kernel/constant-time.js';

/** Who a direct POS post comes from. */
export interface PosPrincipal {
  merchantId: string;
}

/** Who an admin request comes from: the bridge's operator (ADMIN_TOKEN), or one merchant's admin. */
export type AdminPrincipal = { scope: 'global'; actor: string } | { scope: 'merchant'; merchantId: string; actor: string };

/** Turns a presented token into the merchant it belongs to (the merchant registry). */
export interface TokenDirectory {
  byPosToken(token: string): Promise<{ id: string } | undefined>;
  byAdminToken(token: string): Promise<{ id: string } | undefined>;
}

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by `posAuth` on direct POS posts. */
    posPrincipal?: PosPrincipal;
    /** Set by `adminAuth` on `/v1/admin/*`. */
    adminPrincipal?: AdminPrincipal;
  }
}

/**
 * The token of an `Authorization: Bearer <token>` header. The scheme name is case-insensitive
 * (RFC 9110 §11.1), so `bearer` and `BEARER` are the same scheme; the token itself is exact.
 */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return match?.[1];
}

function challenge(res: Response, realm: string): void {
  res.setHeader('WWW-Authenticate', `Bearer realm="${realm}"`);
}

/**
 * `/v1/admin/*`: ADMIN_TOKEN is the bridge's operator (actor `admin`), who sees every merchant; so
 * is each named token of ADMIN_TOKENS (actor: its name), so that two people are told apart in the
 * history and the audit trail. A merchant's admin token (actor `merchant:<id>`) sees that merchant
 * only (the routes scope every read and action to it).
 */
/** The bridge's global admin tokens (ADMIN_TOKEN, each of ADMIN_TOKENS). */
export interface GlobalAdminTokens {
  token: string;
  named?: readonly { name: string; token: string }[];
}

/**
 * The actor a bearer token is among the global admin tokens (`admin`, or its ADMIN_TOKENS name),
 * undefined for any other. Every token is compared, whichever matches: the time taken does not tell
 * which one did. Also what `/readyz` asks before it names anything but ready or not.
 */
export function globalAdminOf(globalTokens: GlobalAdminTokens): (given: string | undefined) => string | undefined {
  const matchers = [{ actor: 'admin', matches: secretMatcher(globalTokens.token) }, ...(globalTokens.named ?? []).map((t) => ({ actor: t.name, matches: secretMatcher(t.token) }))];
  return (given) => (given === undefined ? undefined : matchers.map((m) => (m.matches(given) ? m.actor : undefined)).find((actor) => actor !== undefined));
}

export function adminAuth(globalTokens: GlobalAdminTokens, merchants: Pick<TokenDirectory, 'byAdminToken'>): RequestHandler {
  const globalAdmin = globalAdminOf(globalTokens);
  return (req, res, next) => {
    const given = bearerToken(req.headers.authorization);
    const refuse = (reason: string) => {
      challenge(res, 'loyalty-bridge admin');
      next(new UnauthorizedError(undefined, reason));
    };
    if (given === undefined) return refuse('token_missing');
    const global = globalAdmin(given);
    if (global) {
      req.adminPrincipal = { scope: 'global', actor: global };
      return next();
    }
    merchants.byAdminToken(given).then((merchant) => {
      if (!merchant) return refuse('token_unknown');
      req.adminPrincipal = { scope: 'merchant', merchantId: merchant.id, actor: `merchant:${merchant.id}` };
      nameMerchant(merchant.id);
      next();
    }, next);
  };
}

/** Routes only the bridge's operator may use (managing merchants): 403 for a merchant's admin token. */
export function requireGlobalAdmin(): RequestHandler {
  return (req, _res, next) => next(req.adminPrincipal?.scope === 'global' ? undefined : new BridgeError('only the global ADMIN_TOKEN manages merchants', 403, 'forbidden'));
}

/**
 * Direct POS posts. With a credential required (token mode): a merchant's POS token, or POS_TOKEN for
 * the default merchant; anything else is a 401, so an unset POS_TOKEN never opens the endpoints that
 * reverse customers' points. Open (sandbox, or POS_AUTH=off behind a private network): a request
 * with no `Authorization` header at all is the default merchant's. In every mode, a credential that
 * names no merchant (a mistyped token, a merchant's admin token, a header that is not `Bearer`) is a
 * 401 (contract v1.4): taken as the default merchant's, another merchant's customers would get its
 * points.
 */
export function posAuth(config: PosAuthConfig, tokens: Pick<TokenDirectory, 'byPosToken'>): RequestHandler {
  return (req, res, next) => {
    const refuse = (reason: string) => {
      challenge(res, 'loyalty-bridge pos');
      next(new UnauthorizedError('missing or invalid credentials: direct POS posts need a merchant\'s POS token (or POS_TOKEN, the default merchant\'s)', reason));
    };
    if (req.headers.authorization === undefined) {
      if (config.mode === 'open') {
        req.posPrincipal = { merchantId: DEFAULT_MERCHANT };
        nameMerchant(DEFAULT_MERCHANT);
        return next();
      }
      return refuse('token_missing');
    }
    const given = bearerToken(req.headers.authorization);
    if (given === undefined) return refuse('token_malformed');
    tokens.byPosToken(given).then((merchant) => {
      if (!merchant) return refuse('token_unknown');
      req.posPrincipal = { merchantId: merchant.id };
      nameMerchant(merchant.id);
      next();
    }, next);
  };
}
