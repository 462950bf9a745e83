/**
 * POS_TOKEN: when set, direct POS posts (`/v1/checkouts/*`, `/v1/refunds/*`) need it as a bearer
 * token, checked before the body is read; a missing or wrong one is a 401 that records and sends
 * nothing. Webhooks keep their own signatures and do not need it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../adapters/types.js';
import { checkout, startHarness, type Harness } from '../support/harness.js';
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
