/**
 * The bridge reading a POS's own API, from a hostile probe (issue 19), over HTTP:
 * - row 7: Shopify backfill follows a `Link: <…>; rel="next"` only on the configured API origin,
 *   and the POS API client follows no redirect: a second local server stands where the access token
 *   would leak, and receives nothing; the same client reading for other POSes (Square's order read
 *   for a direct refund, Square's backfill paging) follows no redirect either, and sends its bearer
 *   token only where it is configured;
 * - row 13: a direct Square refund naming an order the merchant's Square account does not have
 *   (another seller's, at the simulator's fake Square, which answers 404) is a 422 naming the order,
 *   which the POS does not retry, as is a direct checkout naming another seller's customer; the bridge's own token refused stays a 502; a webhook naming such
 *   an order is kept as a dead letter that waits for a person.
 */
import type http from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { squareAdapter } from '../../adapters/square/index.js';
import { SHOPIFY_API_VERSION } from '../../adapters/shopify/backfill.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, postJson, startHarness, type Harness } from '../support/harness.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';
import { postRaw, signature } from '../support/webhooks.js';

const SHOP = 'hostile-probe.myshopify.com';
const SHOPIFY_TOKEN = 'shpat_hostile_probe_token_0123456789';
const ORDERS_PATH = `/admin/api/${SHOPIFY_API_VERSION}/orders.json`;

/** The bridge and the local servers of the test running: closed after each. */
let h: Harness | undefined;
const servers: LocalServer[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const server of servers.splice(0)) await server.close();
});

/** A local server (closed after the test) that records every request it gets (path and the Shopify token it carried; method, Authorization and body where any). */
async function recordingServer(
  answer: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void,
): Promise<LocalServer & { seen: { path: string; token?: string; method?: string; authorization?: string; body?: string }[] }> {
  const seen: { path: string; token?: string; method?: string; authorization?: string; body?: string }[] = [];
  const server = await listenLocally((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const token = req.headers['x-shopify-access-token'];
      const authorization = req.headers.authorization;
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ path: req.url ?? '', ...(typeof token === 'string' ? { token } : {}), method: req.method, ...(authorization ? { authorization } : {}), ...(body ? { body } : {}) });
      answer(req, res, body);
    });
  });
  servers.push(server);
  return Object.assign(server, { seen });
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe('row 7: the Shopify access token goes to the configured API origin only', () => {

  /** A bridge whose default merchant reads its shop at `shopify` (the configured SHOPIFY_API_BASE_URL). */
  async function bridgeReading(shopify: LocalServer): Promise<Harness> {
    const harness = await startHarness({ env: { BACKFILL_INTERVAL_MS: '0' }, overrides: { startBackfill: false, startWorker: false } });
    const settings: PosSettings = { ...harness.config.pos.shopify!, apiBaseUrl: shopify.url, accessToken: SHOPIFY_TOKEN, accessTokenHeader: 'X-Shopify-Access-Token', account: SHOP };
    await harness.restart({ posSettings: { shopify: settings }, startBackfill: false, startWorker: false, backfill: { pageSize: 2, retry: { attempts: 1, baseMs: 1, maxMs: 1 }, sleep: async () => {} } });
    return harness;
  }
  const backfill = (harness: Harness) =>
    request(harness.bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ pos: 'shopify', since: new Date(Date.now() - 3_600_000).toISOString() });

  it('a next link on the configured origin is followed, with the token', async () => {
    const shopify = await recordingServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.searchParams.get('page_info') === 'p2') return json(res, 200, { orders: [] });
      json(res, 200, { orders: [] }, { link: `<${shopify.url}${ORDERS_PATH}?limit=2&page_info=p2>; rel="next"` });
    });
    h = await bridgeReading(shopify);
    const res = await backfill(h);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ pages: 2, examined: 0 });
    expect(shopify.seen.map((s) => s.token)).toEqual([SHOPIFY_TOKEN, SHOPIFY_TOKEN]);
    expect(shopify.seen[1]!.path).toBe(`${ORDERS_PATH}?limit=2&page_info=p2`);
  });

  it.each([
    ['a whole URL', (leak: LocalServer) => `${leak.url}${ORDERS_PATH}?page_info=p2`],
    ['a scheme-relative URL', (leak: LocalServer) => `${leak.url.replace(/^http:/, '')}${ORDERS_PATH}?page_info=p2`],
  ])('a next link to another origin (%s) fails the pass naming that origin, and nothing is sent there', async (_name, link) => {
    const leak = await recordingServer((_req, res) => json(res, 200, { orders: [] }));
    const shopify = await recordingServer((_req, res) => json(res, 200, { orders: [] }, { link: `<${link(leak)}>; rel="next"` }));
    h = await bridgeReading(shopify);
    const res = await backfill(h);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('pos_api_failed');
    expect(res.body.error.message).toContain(`points at "${leak.url}", not at the configured API origin ${shopify.url}: not followed`);
    expect(shopify.seen).toHaveLength(1);
    expect(leak.seen).toEqual([]);
    const status = await request(h.bridge.url).get('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(status.body.items.find((i: { pos: string }) => i.pos === 'shopify').lastPass.error).toContain(leak.url);
  });

  it('a redirect is not followed: the pass fails naming the status and where it pointed, and nothing is sent there', async () => {
    const leak = await recordingServer((_req, res) => json(res, 200, { orders: [] }));
    const shopify = await recordingServer((_req, res) => json(res, 302, {}, { location: `${leak.url}${ORDERS_PATH}?stolen=1` }));
    h = await bridgeReading(shopify);
    const res = await backfill(h);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'pos_api_failed', message: expect.stringContaining(`answered 302, a redirect to "${leak.url}": not followed`) });
    expect(shopify.seen).toHaveLength(1);
    expect(leak.seen).toEqual([]);
  });
});

describe("row 7: another POS's reads (Square) follow no redirect, and its token goes to the configured origin only", () => {
  const SQUARE_TOKEN = 'sq-hostile-probe-token-0123456789';

  /** A bridge whose default merchant holds Square seller A, its SQUARE_API_BASE_URL `square` (a server the test scripts). */
  async function bridgeReadingSquare(square: LocalServer) {
    h = await startHarness({ env: { BACKFILL_INTERVAL_MS: '0' }, overrides: { startBackfill: false, startWorker: false } });
    const a = h.sim.pos.square.addAccount({ merchantId: 'HOSTILESELLA7', locationIds: ['HOSTILELOCA07'] });
    const settings: PosSettings = { ...h.config.pos.square!, apiBaseUrl: square.url, accessToken: SQUARE_TOKEN, account: a.merchantId };
    await h.restart({ posSettings: { square: settings }, startBackfill: false, startWorker: false, backfill: { pageSize: 2, retry: { attempts: 1, baseMs: 1, maxMs: 1 }, sleep: async () => {} } });
    return { harness: h, a };
  }

  it('a direct Square refund whose order read is answered 302 to another origin: 502 naming it, nothing sent there, nothing recorded', async () => {
    const leak = await recordingServer((_req, res) => json(res, 200, { order: {} }));
    const square = await recordingServer((req, res) => json(res, 302, {}, { location: `${leak.url}${req.url ?? '/'}` }));
    const { harness, a } = await bridgeReadingSquare(square);
    // A genuine refund of seller A (made at the simulator's fake Square); its order is read at `square`.
    const sale = harness.sim.pos.square.addOrder(a.merchantId, { lines: [{ name: 'Latte', unitPrice: 450, quantity: 2 }], customer: { phone: '+14155550177' } });
    const { refund } = harness.sim.pos.square.addRefund(a.merchantId, { orderId: sale.id });

    const res = await postJson(harness.bridge.url, '/v1/refunds/square', refund);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'pos_api_failed', message: expect.stringContaining(`answered 302, a redirect to "${leak.url}": not followed`) });
    expect(square.seen).toEqual([{ path: `/v2/orders/${refund.order_id}`, method: 'GET', authorization: `Bearer ${SQUARE_TOKEN}` }]);
    expect(leak.seen).toEqual([]);
    expect(await harness.bridge.store.count()).toBe(0);
    expect(harness.sim.books().reverseRequests).toBe(0);
  });

  it("Square backfill's second page (POST, its cursor) answered 307 to another origin: the pass fails naming it, and neither the token nor the body is sent there", async () => {
    const leak = await recordingServer((_req, res) => json(res, 200, { orders: [] }));
    const square = await recordingServer((req, res, body) => {
      if (req.url === '/v2/locations') return json(res, 200, { locations: [{ id: 'HOSTILELOCA07' }] });
      if ((JSON.parse(body || '{}') as { cursor?: string }).cursor === 'page-2') return json(res, 307, {}, { location: `${leak.url}/v2/orders/search` });
      json(res, 200, { orders: [], cursor: 'page-2' });
    });
    const { harness } = await bridgeReadingSquare(square);

    const res = await request(harness.bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ pos: 'square', since: new Date(Date.now() - 3_600_000).toISOString() });
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'pos_api_failed', message: expect.stringContaining(`POST /v2/orders/search answered 307, a redirect to "${leak.url}": not followed`) });
    expect(square.seen.map((s) => [s.method, s.path, s.authorization])).toEqual([
      ['GET', '/v2/locations', `Bearer ${SQUARE_TOKEN}`],
      ['POST', '/v2/orders/search', `Bearer ${SQUARE_TOKEN}`],
      ['POST', '/v2/orders/search', `Bearer ${SQUARE_TOKEN}`],
    ]);
    expect(JSON.parse(square.seen[2]!.body!)).toMatchObject({ cursor: 'page-2', location_ids: ['HOSTILELOCA07'] });
    expect(leak.seen).toEqual([]);
    const status = await request(harness.bridge.url).get('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(status.body.items.find((i: { pos: string }) => i.pos === 'square').lastPass.error).toContain(leak.url);
  });
});

describe("row 13: a direct Square post naming another seller's order", () => {
  /**
   * The default merchant holds Square seller A at the simulator's fake Square; seller B sold and
   * refunded an order there. Answers B's PaymentRefund (its order_id: B's return order).
   */
  async function setUp(token: (a: { accessToken: string }) => string = (a) => a.accessToken) {
    h = await startHarness({ overrides: { startWorker: false } });
    const a = h.sim.pos.square.addAccount({ merchantId: 'HOSTILESELLA1', locationIds: ['HOSTILELOCA01'] });
    const b = h.sim.pos.square.addAccount({ merchantId: 'HOSTILESELLB1', locationIds: ['HOSTILELOCB01'] });
    const settings: PosSettings = {
      ...h.config.pos.square!,
      webhookSecret: 'sq-hostile-signature-key',
      notificationUrl: 'https://bridge.example.test/v1/webhooks/square',
      apiBaseUrl: `${h.simServer.url}/square`,
      accessToken: token(a),
      account: a.merchantId,
    };
    await h.restart({ posSettings: { square: settings }, startWorker: false });
    const sale = h.sim.pos.square.addOrder(b.merchantId, { lines: [{ name: 'Latte', unitPrice: 450, quantity: 2 }], customer: { phone: '+14155550199' } });
    const { refund } = h.sim.pos.square.addRefund(b.merchantId, { orderId: sale.id });
    return { sale, refund, settings, a, b };
  }

  it("is a 422 naming the order (Square answered 404), not a 502 the POS retries for ever; nothing is recorded", async () => {
    const { refund } = await setUp();
    const res = await postJson(h!.bridge.url, '/v1/refunds/square', refund);
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'pos_object_not_found', message: expect.stringContaining(`has no order "${refund.order_id}" for this merchant's account (it answered 404)`) });
    expect(await h!.bridge.store.count()).toBe(0);
    expect(h!.sim.books().reverseRequests).toBe(0);
  });

  it("a direct checkout of another seller's order, its customer named by id only, is a 422 naming the customer (Square answered 404); nothing is recorded", async () => {
    const { sale } = await setUp();
    expect(sale.customer_id).toEqual(expect.any(String));
    const res = await postJson(h!.bridge.url, '/v1/checkouts/square', sale);
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'pos_object_not_found', message: expect.stringContaining(`has no customer "${sale.customer_id}" for this merchant's account (it answered 404)`) });
    expect(await h!.bridge.store.count()).toBe(0);
    expect(h!.sim.books().accrueRequests).toBe(0);
  });

  it("the bridge's own token refused (401) stays a 502: an operator fixes the token and the POS's retry passes", async () => {
    const { refund } = await setUp(() => 'sq-token-mistyped-by-the-operator');
    const res = await postJson(h!.bridge.url, '/v1/refunds/square', refund);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'pos_api_failed', message: expect.stringContaining('answered 401') });
    expect(await h!.bridge.store.count()).toBe(0);
  });

  it("a webhook for seller A naming such an order is kept as a dead letter that waits for a person (202, no automatic retry)", async () => {
    const { refund, settings, a } = await setUp();
    const event = { merchant_id: a.merchantId, type: 'refund.updated', event_id: 'hostile-ev-1', created_at: new Date().toISOString(), data: { type: 'refund', id: refund.id, object: { refund } } };
    const raw = JSON.stringify(event);
    const res = await postRaw(`${h!.bridge.url}/v1/webhooks/square`, raw, [signature(squareAdapter, settings, raw)]);
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([expect.objectContaining({ key: 'hostile-ev-1', action: 'dead_lettered', reason: expect.stringContaining(`/v2/orders/${refund.order_id} answered 404`) })]);
    expect(res.body.results[0].retryAt).toBeUndefined();
    expect(await h!.bridge.store.count()).toBe(0);
  });
});
