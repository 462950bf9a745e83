/**
 * Bearer-token checks (auth.ts) in a small express app with the bridge's own error handler, so
 * each refusal is seen as a client sees it: 401 with the `unauthorized` code and a `Bearer`
 * challenge for a missing or wrong token, 403 `forbidden` for a merchant's admin token on the
 * operator's routes. Which check refused (the reason the request log gets, never the client) is read
 * from what the error handler leaves for the request log.
 *
 * Tokens are compared as SHA-256 digests with timingSafeEqual, so the time taken does not depend
 * on how much of a token is right: that takes a clock to measure and is not measured here. What is
 * tested is that only the exact token passes (a prefix, an extension, another case do not), and that
 * every global token is honoured wherever it stands in ADMIN_TOKENS.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeEach, describe, expect, it } from '@jest/globals';
import express, { type RequestHandler } from 'express';
import request from 'supertest';
import type { PosAuthConfig } from '../../src/config.js';
import { adminAuth, bearerToken, posAuth, requireGlobalAdmin, type TokenDirectory } from '../../src/http/auth.js';
import { errorHandler } from '../../src/http/error-handler.js';
import { silentLogger } from '../../src/kernel/logger.js';

const ADMIN_TOKEN = 'global-admin-token-0123456789';
const NAMED = [
  { name: 'alice', token: 'alice-admin-token-0123456789' },
  { name: 'bob', token: 'bob-admin-token-0123456789' },
];
const POS_TOKEN = 'variables-pos-token-0123';

/** The merchant registry's answers: corner's two tokens, and POS_TOKEN for the default merchant (the registry knows it by its hash). */
let directoryAsked: string[];
const directory: TokenDirectory = {
  byPosToken: async (token) => {
    directoryAsked.push(`pos:${token}`);
    return token === 'pos_corner' ? { id: 'corner' } : token === POS_TOKEN ? { id: 'default' } : undefined;
  },
  byAdminToken: async (token) => {
    directoryAsked.push(`admin:${token}`);
    if (token === 'adm_broken') throw new Error('the ledger is unreachable');
    return token === 'adm_corner' ? { id: 'corner' } : undefined;
  },
};

/** What the error handler left for the request log of each refused request: its code, message and the check that refused. */
let refusals: unknown[];

beforeEach(() => {
  directoryAsked = [];
  refusals = [];
});

/** `guards` in front of a route that answers who the request was taken to come from. */
function appWith(...guards: RequestHandler[]): express.Express {
  const app = express();
  app.use((_req, res, next) => {
    res.on('finish', () => {
      if (res.locals.refusal) refusals.push(res.locals.refusal);
    });
    next();
  });
  app.all('/guarded', ...guards, (req, res) => res.json({ admin: req.adminPrincipal ?? null, pos: req.posPrincipal ?? null }));
  app.use(errorHandler(silentLogger));
  return app;
}

const admin = () => appWith(adminAuth({ token: ADMIN_TOKEN, named: NAMED }, directory));
const operatorOnly = () => appWith(adminAuth({ token: ADMIN_TOKEN, named: NAMED }, directory), requireGlobalAdmin());
const pos = (config: PosAuthConfig) => appWith(posAuth(config, directory));
const get = (app: express.Express, authorization?: string) => {
  const req = request(app).get('/guarded');
  return authorization === undefined ? req : req.set('authorization', authorization);
};

const ADMIN_401 = { error: { code: 'unauthorized', message: 'missing or invalid credentials' } };
const POS_401 = { error: { code: 'unauthorized', message: "missing or invalid credentials: direct POS posts need a merchant's POS token (or POS_TOKEN, the default merchant's)" } };

describe('bearerToken', () => {
  it('takes the token of a Bearer header, the scheme in any case, around spaces or tabs', () => {
    for (const header of [`Bearer ${ADMIN_TOKEN}`, `bearer ${ADMIN_TOKEN}`, `BEARER\t${ADMIN_TOKEN}`, `Bearer   ${ADMIN_TOKEN} \t`]) expect(bearerToken(header)).toBe(ADMIN_TOKEN);
  });

  it('takes nothing from a missing header, another scheme, no token or two', () => {
    for (const header of [undefined, '', 'Bearer', 'Bearer ', `Basic ${ADMIN_TOKEN}`, `Token ${ADMIN_TOKEN}`, `Bearer ${ADMIN_TOKEN} extra`, ` Bearer ${ADMIN_TOKEN}`, ADMIN_TOKEN]) expect(bearerToken(header)).toBeUndefined();
  });
});

describe('adminAuth', () => {
  it('ADMIN_TOKEN is the operator, actor "admin", without asking the merchants', async () => {
    const res = await get(admin(), `Bearer ${ADMIN_TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ admin: { scope: 'global', actor: 'admin' }, pos: null });
    expect(directoryAsked).toEqual([]);
  });

  it('each ADMIN_TOKENS token is the operator too, named as its actor, wherever it stands in the list', async () => {
    for (const { name, token } of NAMED) {
      const res = await get(admin(), `Bearer ${token}`);
      expect([res.status, res.body.admin]).toEqual([200, { scope: 'global', actor: name }]);
    }
    expect(directoryAsked).toEqual([]);
  });

  it("a merchant's admin token is that merchant's admin, actor merchant:<id>", async () => {
    const res = await get(admin(), 'Bearer adm_corner');
    expect(res.status).toBe(200);
    expect(res.body.admin).toEqual({ scope: 'merchant', merchantId: 'corner', actor: 'merchant:corner' });
    expect(directoryAsked).toEqual(['admin:adm_corner']);
  });

  it('no token, or a header that is not Bearer: 401 with the challenge, the reason token_missing, nothing asked of the merchants', async () => {
    for (const header of [undefined, `Basic ${ADMIN_TOKEN}`, 'Bearer']) {
      const res = await get(admin(), header);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="loyalty-bridge admin"');
      expect(res.body).toEqual(ADMIN_401);
    }
    expect(refusals).toEqual(Array(3).fill({ code: 'unauthorized', message: 'missing or invalid credentials', reason: 'token_missing' }));
    expect(directoryAsked).toEqual([]);
  });

  it('only the exact token passes: a prefix, an extension, another case, a POS token are 401 token_unknown, and the answer never repeats the token', async () => {
    const wrong = [ADMIN_TOKEN.slice(0, -1), `${ADMIN_TOKEN}x`, ADMIN_TOKEN.toUpperCase(), `${NAMED[0]!.token}0`, 'adm_corne', 'pos_corner', POS_TOKEN];
    for (const token of wrong) {
      const res = await get(admin(), `Bearer ${token}`);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="loyalty-bridge admin"');
      expect(res.body).toEqual(ADMIN_401);
      expect(res.text).not.toContain(token);
    }
    expect(refusals).toEqual(Array(wrong.length).fill({ code: 'unauthorized', message: 'missing or invalid credentials', reason: 'token_unknown' }));
    // Not a global token: each was asked of the merchants, and named no one.
    expect(directoryAsked).toEqual(wrong.map((t) => `admin:${t}`));
  });

  it('a directory that fails is a 500, not a pass and not a 401', async () => {
    const res = await get(admin(), 'Bearer adm_broken');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: { code: 'internal', message: 'internal error' } });
  });

  it('without ADMIN_TOKENS, ADMIN_TOKEN alone is the operator', async () => {
    const app = appWith(adminAuth({ token: ADMIN_TOKEN }, directory));
    expect((await get(app, `Bearer ${ADMIN_TOKEN}`)).body.admin).toEqual({ scope: 'global', actor: 'admin' });
    expect((await get(app, `Bearer ${NAMED[0]!.token}`)).status).toBe(401);
  });
});

describe('requireGlobalAdmin (managing merchants)', () => {
  it('lets the operator through, by ADMIN_TOKEN or a named token', async () => {
    expect((await get(operatorOnly(), `Bearer ${ADMIN_TOKEN}`)).status).toBe(200);
    expect((await get(operatorOnly(), `Bearer ${NAMED[1]!.token}`)).body.admin).toEqual({ scope: 'global', actor: 'bob' });
  });

  it("refuses a merchant's admin token with 403 forbidden (the token is good, the right is not there)", async () => {
    const res = await get(operatorOnly(), 'Bearer adm_corner');
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toBeUndefined();
    expect(res.body).toEqual({ error: { code: 'forbidden', message: 'only the global ADMIN_TOKEN manages merchants' } });
  });

  it('alone, with nobody authenticated before it, refuses too', async () => {
    const res = await get(appWith(requireGlobalAdmin()));
    expect([res.status, res.body.error.code]).toEqual([403, 'forbidden']);
  });
});

describe('posAuth, a token required', () => {
  const required: PosAuthConfig = { mode: 'token', token: POS_TOKEN };

  it("a merchant's POS token is that merchant's; POS_TOKEN the default merchant's", async () => {
    expect((await get(pos(required), 'Bearer pos_corner')).body.pos).toEqual({ merchantId: 'corner' });
    expect((await get(pos(required), `bearer ${POS_TOKEN}`)).body.pos).toEqual({ merchantId: 'default' });
  });

  it.each([
    ['no Authorization header', 'token_missing', undefined],
    ['a header that is not Bearer', 'token_malformed', `Basic ${POS_TOKEN}`],
    ['an empty Bearer', 'token_malformed', 'Bearer '],
    ['a token that names no merchant', 'token_unknown', `Bearer ${POS_TOKEN}x`],
    ["a merchant's admin token", 'token_unknown', 'Bearer adm_corner'],
  ])('%s: 401 with the challenge, the reason %s', async (_name, reason, header) => {
    const res = await get(pos(required), header);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="loyalty-bridge pos"');
    expect(res.body).toEqual(POS_401);
    expect(refusals).toEqual([{ ...POS_401.error, reason }]);
  });

  it('decides from the headers alone: the 401 comes while the body is still to be sent', async () => {
    const app = pos(required);
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const req = http.request({ host: '127.0.0.1', port, path: '/guarded', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '100000' } });
      req.on('error', () => undefined);
      // Headers only: the body announced is never sent, so an answer can only come from a check made without it.
      req.flushHeaders();
      const res = await new Promise<http.IncomingMessage>((resolve) => req.once('response', resolve));
      res.resume();
      expect(res.statusCode).toBe(401);
      req.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('posAuth, open (sandbox, POS_AUTH=off)', () => {
  const open: PosAuthConfig = { mode: 'open', because: 'POS_AUTH=off' };

  it('a request with no Authorization at all is the default merchant\'s, without asking the merchants', async () => {
    const res = await get(pos(open));
    expect([res.status, res.body.pos]).toEqual([200, { merchantId: 'default' }]);
    expect(directoryAsked).toEqual([]);
  });

  it("a merchant's POS token is still that merchant's", async () => {
    expect((await get(pos(open), 'Bearer pos_corner')).body.pos).toEqual({ merchantId: 'corner' });
  });

  it('a credential that names no merchant is a 401 all the same, never the default merchant (contract v1.4)', async () => {
    for (const [header, reason] of [
      ['Bearer mistyped', 'token_unknown'],
      ['Bearer adm_corner', 'token_unknown'],
      ['Basic dXNlcjpwYXNz', 'token_malformed'],
      ['', 'token_malformed'],
    ] as const) {
      const res = await get(pos(open), header);
      expect([res.status, res.body]).toEqual([401, POS_401]);
      expect(refusals.at(-1)).toEqual({ ...POS_401.error, reason });
    }
  });
});
