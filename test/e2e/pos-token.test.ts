/**
 * Direct POS posts (`/v1/checkouts/*`, `/v1/refunds/*`) need `Authorization: Bearer POS_TOKEN`,
 * checked before the body is read; a missing or wrong one is a 401 with a Bearer challenge that
 * records and sends nothing. Outside sandbox they are closed unless a token is set or the
 * deployment opted out (POS_AUTH=off). Open or not, a credential that names no merchant (a mistyped
 * token, a merchant's admin token) is a 401 (contract v1.4); only a request with no Authorization
 * at all is the default merchant's where the mode is open. Webhooks keep their own signatures and
 * do not need it.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const POS_TOKEN = 'pos-token-0123456789abcdef';
const shopify: PosSettings = { webhookSecret: 'shpss_e2e_secret_0123456789', apiBaseUrl: '' };
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { POS_TOKEN }, overrides: { posSettings: { shopify } } });
});
afterAll(async () => {
  await h.close();
});

const post = (path: string, body: unknown, authorization?: string) => {
  const req = request(h.bridge.url).post(path).set('content-type', 'application/json');
  return (authorization ? req.set('authorization', authorization) : req).send(JSON.stringify(body));
};

describe('POS_TOKEN', () => {
  it.each([
    ['missing', undefined],
    ['wrong', 'Bearer pos-token-0123456789abcdeX'],
    ['not a bearer', POS_TOKEN],
    ['empty', 'Bearer '],
  ])('a checkout or refund with the token %s is a 401 that records and sends nothing', async (_name, authorization) => {
    for (const [path, body] of [
      ['/v1/checkouts/generic', checkout()],
      ['/v1/refunds/generic', { orderId: 'A-1001' }],
      ['/v1/checkouts/no-such-pos', checkout()],
    ] as const) {
      const res = await post(path, body, authorization);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
    }
    expect(await h.bridge.store.count()).toBe(0);
    expect(h.sim.books().accrueRequests + h.sim.books().reverseRequests).toBe(0);
  });

  it('a refusal carries a Bearer challenge (RFC 6750)', async () => {
    const res = await post('/v1/refunds/generic', { orderId: 'A-1001' });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="/);
  });

  it.each(['bearer', 'BEARER', 'Bearer  '])('the scheme is case-insensitive: %j', async (scheme) => {
    const res = await post('/v1/checkouts/generic', checkout({ orderId: `S-${scheme.trim()}` }), `${scheme} ${POS_TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'accrued' });
  });

  it('with the token, a checkout accrues and its refund reverses', async () => {
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'T-1' }), `Bearer ${POS_TOKEN}`)).body).toMatchObject({ status: 'accrued' });
    expect((await post('/v1/refunds/generic', { orderId: 'T-1' }, `Bearer ${POS_TOKEN}`)).body).toMatchObject({ status: 'reversed' });
  });

  it('webhooks do not need it: their signature is their authentication', async () => {
    const body = JSON.stringify({ id: 1 });
    const res = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [signature(shopifyAdapter, shopify, body), ['X-Shopify-Topic', 'orders/cancelled'], ['X-Shopify-Event-Id', 'evt-1']]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ action: 'ignored' });
  });
});

describe('outside sandbox, secure by default', () => {
  const upstream = { LOYALTY_BASE_URL: 'http://127.0.0.1:9', LOYALTY_APP_TOKEN: 'app-token' };

  it('without POS_TOKEN every direct post is refused, records nothing and says why; webhooks still work', async () => {
    const closed = await startHarness({ env: upstream, overrides: { posSettings: { shopify } } });
    try {
      for (const [path, body] of [
        ['/v1/checkouts/generic', checkout({ orderId: 'C-1' })],
        ['/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' }],
      ] as const) {
        const res = await request(closed.bridge.url).post(path).set('content-type', 'application/json').set('authorization', 'Bearer anything-at-all-0123456789').send(JSON.stringify(body));
        expect(res.status).toBe(401);
        expect(res.body.error.message).toMatch(/POS_TOKEN/);
        expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
      }
      expect(await closed.bridge.store.count()).toBe(0);
      expect(closed.sim.books().accrueRequests + closed.sim.books().reverseRequests).toBe(0);
      const body = JSON.stringify({ id: 2 });
      const hook = await postRaw(`${closed.bridge.url}/v1/webhooks/shopify`, body, [signature(shopifyAdapter, shopify, body), ['X-Shopify-Topic', 'orders/cancelled'], ['X-Shopify-Event-Id', 'evt-2']]);
      expect(hook.status).toBe(200);
    } finally {
      await closed.close();
    }
  });

  it('POS_AUTH=off opens them deliberately', async () => {
    const open = await startHarness({ env: { ...upstream, POS_AUTH: 'off' } });
    try {
      const res = await request(open.bridge.url).post('/v1/checkouts/generic').set('content-type', 'application/json').send(JSON.stringify(checkout({ orderId: 'O-1' })));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'accrued' });
    } finally {
      await open.close();
    }
  });

  it('the admin API answers a wrong token with the same challenge and takes any case of the scheme', async () => {
    const wrong = await request(h.bridge.url).get('/v1/admin/transactions').set('authorization', 'Bearer wrong-token-0123456789');
    expect(wrong.status).toBe(401);
    expect(wrong.headers['www-authenticate']).toMatch(/^Bearer realm="/);
    const lower = await request(h.bridge.url).get('/v1/admin/transactions').set('authorization', `bearer ${ADMIN_TOKEN}`);
    expect(lower.status).toBe(200);
  });
});

describe('open modes: a credential that names no merchant is still a 401 (contract v1.4)', () => {
  const MODES: { mode: string; env: Record<string, string>; because: string }[] = [
    { mode: 'sandbox', env: {}, because: 'sandbox' },
    { mode: 'POS_AUTH=off', env: { LOYALTY_BASE_URL: 'http://127.0.0.1:9', LOYALTY_APP_TOKEN: 'app-token', POS_AUTH: 'off' }, because: 'POS_AUTH=off' },
  ];

  it.each(MODES)('$mode: a mistyped token, a merchant\'s admin token or the global one, or a header that is not Bearer, is a 401 with a Bearer challenge that records and sends nothing; no header at all is the default merchant\'s, and a merchant\'s POS token its own', async ({ env, because }) => {
    const open = await startHarness({ env, overrides: { secretsKey: randomBytes(32).toString('base64'), startWorker: false } });
    try {
      expect(open.config.posAuth).toEqual({ mode: 'open', because });
      const installed = open.sim.addMerchant({ id: 'open-shop', appToken: `app-open-shop-${randomBytes(8).toString('hex')}` });
      const created = await request(open.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id: 'open-shop', loyalty: { appToken: installed.appToken } });
      expect(created.status).toBe(201);
      const { posToken, adminToken } = created.body as { posToken: string; adminToken: string };
      const send = (path: string, body: unknown, authorization?: string) => {
        const req = request(open.bridge.url).post(path).set('content-type', 'application/json');
        return (authorization === undefined ? req : req.set('authorization', authorization)).send(JSON.stringify(body));
      };

      for (const authorization of [`Bearer ${posToken.slice(0, -1)}X`, `Bearer ${adminToken}`, `Bearer ${ADMIN_TOKEN}`, `Basic ${posToken}`, posToken, 'Bearer ', '']) {
        for (const [path, body] of [
          ['/v1/checkouts/generic', checkout({ orderId: 'W-1' })],
          ['/v1/refunds/generic', { orderId: 'W-1', refundId: 'R-1' }],
        ] as const) {
          const res = await send(path, body, authorization);
          expect({ authorization, status: res.status }).toEqual({ authorization, status: 401 });
          expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
          expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="/);
        }
      }
      expect(await open.bridge.store.count()).toBe(0);
      expect(open.sim.books().accrueRequests + open.sim.books().reverseRequests).toBe(0);
      expect(installed.books().accrueRequests).toBe(0);

      const anonymous = await send('/v1/checkouts/generic', checkout({ orderId: 'W-2' }));
      expect(anonymous.status).toBe(200);
      expect(anonymous.body).toMatchObject({ transactionId: 'generic:W-2', status: 'accrued' });
      expect(open.sim.books().transactions['generic:W-2']).toMatchObject({ accruals: 1 });
      const own = await send('/v1/checkouts/generic', checkout({ orderId: 'W-3' }), `Bearer ${posToken}`);
      expect(own.status).toBe(200);
      expect(installed.books().transactions['generic:W-3']).toMatchObject({ accruals: 1 });
      expect(open.sim.books().transactions['generic:W-3']).toBeUndefined();
    } finally {
      await open.close();
    }
  });
});
