/**
 * Finding a record and where it came from, over HTTP on both ledger stores (the file ledger and
 * PostgreSQL): the start of an order or refund id in any case, a customer by phone (with or
 * without its country code), email or card serial (audited, never the contact in clear); each
 * record's origin (a direct post with its request id, a webhook with its event key, a dead letter's
 * replay, a partial refund's remainder) and the payload it was created from, masked unless
 * unmasked (audited); reconcile runs and reports in the audit trail. See docs/operators.md.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature, paidShopifyOrder } from '../support/webhooks.js';

const POS_TOKEN = 'pos-token-finding-0123456789';
const shopifySettings: PosSettings = { webhookSecret: 'shpss_finding_secret_0123456789', apiBaseUrl: '', account: 'main.myshopify.com' };

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

const shopifyOrder = (id: number, phone: string) => paidShopifyOrder(id, { currency: 'USD', phone });

for (const store of STORES) {
  store.describe(`finding records on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let postRequestId: string;
    let letterId: string;

    const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    const pos = (body: unknown, path = '/v1/checkouts/generic') => request(h.bridge.url).post(path).set('content-type', 'application/json').set('authorization', `Bearer ${POS_TOKEN}`).send(JSON.stringify(body));
    const ids = (res: { body: { items: { transactionId: string }[] } }) => res.body.items.map((i) => i.transactionId).sort();
    const deliverShopify = (order: unknown, shop: string, eventId: string) => {
      const raw = JSON.stringify(order);
      return postRaw(`${h.bridge.url}/v1/webhooks/shopify`, raw, [signature(shopifyAdapter, shopifySettings, raw), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', eventId], ['X-Shopify-Shop-Domain', shop]]);
    };
    const audit = async (action: string) => (await admin('get', '/v1/admin/audit?limit=100')).body.items.filter((e: { action: string }) => e.action === action);

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'finding');
      h = await startHarness({
        env: { POS_TOKEN, DEFAULT_PHONE_REGION: 'US', ...(schema ? { LEDGER_URL: schema.url } : {}) },
        overrides: { startWorker: false, posSettings: { shopify: shopifySettings }, secretsKey: randomBytes(32).toString('base64') },
      });
      const direct = await pos(checkout({ orderId: 'SqOrd-1001', customer: { phone: '+15550001111', email: 'Ann@Example.test', firstName: 'Ann' } })).set('x-request-id', 'req-finding-0001');
      expect([direct.status, direct.body.status, direct.headers['x-request-id']]).toEqual([200, 'accrued', 'req-finding-0001']);
      postRequestId = direct.headers['x-request-id'] as string;
      expect((await pos(checkout({ orderId: 'sqord-1002', customer: { cardSerial: '11-100001-2' } }))).body.status).toBe('accrued');
      expect((await pos(checkout({ orderId: 'OTHER-1', customer: { phone: '+15550002222' } }))).body.status).toBe('accrued');
      expect((await pos({ orderId: 'SqOrd-1001', refundId: 'Ref-77', amount: '9.97' }, '/v1/refunds/generic')).body.remainder).toEqual({ transactionId: 'generic:SqOrd-1001~r1', status: 'accrued' });

      const hook = await deliverShopify(shopifyOrder(5001, '+15550003333'), 'main.myshopify.com', 'evt-finding-1');
      expect(hook.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'shopify:5001', status: 'accrued' })]);
      // A shop no merchant has yet: kept as a dead letter, replayed once its merchant exists.
      const kept = await deliverShopify(shopifyOrder(5002, '+15550004444'), 'later.myshopify.com', 'evt-finding-2');
      expect(kept.body.results[0].action).toBe('dead_lettered');
      letterId = kept.body.results[0].deadLetterId;
      const later = h.sim.addMerchant({ id: 'later' });
      expect((await admin('post', '/v1/admin/merchants').send({ id: 'later', loyalty: { appToken: later.appToken }, pos: { shopify: { shopDomain: 'later.myshopify.com' } } })).status).toBe(201);
      const replay = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`).send({ reason: 'its merchant exists now' });
      expect(replay.status).toBe(200);
      expect(replay.body.results[0]).toMatchObject({ action: 'checkout', transactionId: 'shopify:5002', merchantId: 'later', status: 'accrued' });
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    it('finds order and refund ids by their start, A-Z in any case; a remainder comes with its order', async () => {
      expect(ids(await admin('get', '/v1/admin/transactions?orderId=SQORD-'))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1', 'generic:sqord-1002']);
      expect(ids(await admin('get', '/v1/admin/transactions?orderId=sqord-1001'))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1']);
      expect(ids(await admin('get', '/v1/admin/transactions?refundId=ref-7'))).toEqual(['generic:SqOrd-1001']);
      expect((await admin('get', '/v1/admin/transactions?orderId=sq%25')).body.total).toBe(0);
    });

    it("finds a customer's records by phone with or without its country code, email in any case, or card serial; audited without the contact", async () => {
      const D = '&merchantId=default';
      expect(ids(await admin('get', `/v1/admin/transactions?customer=%2B15550001111${D}`))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1']);
      // Read in the merchant's phone region (US here): the national form finds the same.
      expect(ids(await admin('get', `/v1/admin/transactions?customer=${encodeURIComponent('(555) 000-1111')}${D}`))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1']);
      expect(ids(await admin('get', `/v1/admin/transactions?customer=ANN%40example.TEST${D}`))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1']);
      // A card serial finds the records the POS named by it, and those of its owner's phone and email as
      // the loyalty service knows them: 11-100001-2 is the card the service issued to Ann for SqOrd-1001.
      const annsCard = (await h.bridge.store.get('generic:SqOrd-1001'))!.accrual.results.map((r) => r.serialNumber);
      expect(annsCard).toEqual(['11-100001-2']);
      expect(ids(await admin('get', `/v1/admin/transactions?customer=11-100001-2${D}`))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1', 'generic:sqord-1002']);
      expect(ids(await admin('get', `/v1/admin/transactions?customer=card%3A11-100001-2${D}`))).toEqual(['generic:SqOrd-1001', 'generic:SqOrd-1001~r1', 'generic:sqord-1002']);
      // A card the service does not know finds what the POS named by it: nothing here.
      expect(ids(await admin('get', `/v1/admin/transactions?customer=99-999999-9${D}`))).toEqual([]);
      // Where the service cannot be asked (a merchant without an API key), only what the POS sent is searched, and the audit says so.
      expect(ids(await admin('get', '/v1/admin/transactions?customer=11-100001-2&merchantId=later'))).toEqual([]);
      // Asking whose card it is labels the upstream metric with a fixed name: no serial (nor a phone typed
      // where one goes) becomes a label of /metrics, which is served without a token.
      expect((await admin('get', `/v1/admin/transactions?customer=${encodeURIComponent('555-000-1111')}${D}`)).status).toBe(200);
      const metrics = (await request(h.bridge.url).get('/metrics')).text;
      expect(metrics).toMatch(/bridge_upstream_request_duration_seconds_count\{[^}]*operation="card"/);
      for (const value of ['11_100001_2', '11-100001-2', '99_999999_9', '555_000_1111', '555-000-1111']) expect(metrics).not.toContain(value);
      // Text that is no identifier at all is refused, not searched.
      for (const text of ['hello', 'hello world', 'card:hello']) {
        const none = await admin('get', `/v1/admin/transactions?customer=${encodeURIComponent(text)}${D}`);
        expect([text, none.status, none.body.error?.issues?.[0]?.field]).toEqual([text, 400, 'customer']);
      }
      // Scoped to one merchant: its own records only, and the bridge's operator must name it.
      expect(ids(await admin('get', `/v1/admin/transactions?customer=%2B15550004444${D}`))).toEqual([]);
      expect(ids(await admin('get', '/v1/admin/transactions?customer=%2B15550004444&merchantId=later'))).toEqual(['shopify:5002']);
      expect(ids(await admin('get', `/v1/admin/transactions?customer=%2B15550009999${D}`))).toEqual([]);
      const unscoped = await admin('get', '/v1/admin/transactions?customer=%2B15550004444');
      expect(unscoped.status).toBe(400);
      expect(unscoped.body.error.issues).toEqual([expect.objectContaining({ field: 'merchantId', message: expect.stringContaining('is required with customer') })]);

      const refused = await admin('get', `/v1/admin/transactions?customer=%20%20${D}`);
      expect(refused.status).toBe(400);
      expect(refused.body.error.issues[0].field).toBe('customer');

      const searches = await audit('search customer');
      expect(searches.length).toBeGreaterThanOrEqual(7);
      // Each search names the kinds it was searched as, masked but told apart: a phone, two card serials, an email.
      expect(searches).toContainEqual(expect.objectContaining({ actor: 'admin', target: 'customer phone …1111', merchantId: 'default', outcome: '2 records' }));
      expect(searches).toContainEqual(expect.objectContaining({ target: 'customer email a…@example.test', outcome: '2 records' }));
      expect(searches).toContainEqual(expect.objectContaining({ target: 'customer card …001-2', merchantId: 'default', outcome: "3 records, and the card owner's" }));
      expect(searches).toContainEqual(expect.objectContaining({ target: 'customer card …001-2', merchantId: 'later', outcome: "0 records (the card's owner could not be asked)" }));
      expect(searches).toContainEqual(expect.objectContaining({ target: 'customer card …999-9', merchantId: 'default', outcome: '0 records' }));
      const trail = JSON.stringify(searches);
      for (const contact of ['15550001111', 'ANN@', 'ann@']) expect(trail).not.toContain(contact);
    });

    it("says where each record came from: a direct post's request id, a webhook's event key, a replay's dead letter, a remainder's partial refund", async () => {
      const direct = (await admin('get', '/v1/admin/transactions/generic:SqOrd-1001')).body;
      expect(direct.origin).toEqual({ via: 'pos', receivedAt: expect.any(String), requestId: postRequestId, payload: true });
      const hooked = (await admin('get', '/v1/admin/transactions/shopify:5001')).body;
      expect(hooked.origin).toEqual({ via: 'webhook', receivedAt: expect.any(String), requestId: expect.any(String), webhookKey: 'event:evt-finding-1', payload: true });
      const replayed = (await admin('get', '/v1/admin/transactions/shopify:5002?merchantId=later')).body;
      expect(replayed.origin).toEqual({ via: 'replay', receivedAt: expect.any(String), deadLetterId: letterId, webhookKey: 'event:evt-finding-2', payload: true });
      const remainder = (await admin('get', '/v1/admin/transactions/generic:SqOrd-1001~r1')).body;
      expect(remainder.origin).toEqual({ via: 'remainder', receivedAt: remainder.createdAt, payload: false });
      // The letter's replay names what it recorded.
      const letter = (await admin('get', `/v1/admin/dead-letters/${letterId}`)).body;
      expect(letter.replays.at(-1)).toMatchObject({ by: 'operator', created: ['shopify:5002'] });
    });

    it('shows the payload a record was created from, masked unless unmasked (audited); none for a remainder, 404 naming why', async () => {
      const masked = await admin('get', '/v1/admin/transactions/generic:SqOrd-1001/payload');
      expect(masked.status).toBe(200);
      expect(masked.body).toMatchObject({ pos: 'generic', bodyEncoding: 'utf8', masked: true, headers: { 'content-type': 'application/json' } });
      expect(masked.body.headers.authorization).toBeUndefined();
      expect(JSON.parse(masked.body.body)).toMatchObject({ orderId: 'SqOrd-1001', customer: { phone: '***', email: '***', firstName: 'Ann' } });
      expect(masked.body.body).not.toContain('5550001111');

      const clear = await admin('get', '/v1/admin/transactions/generic:SqOrd-1001/payload?unmask=true');
      expect(clear.body.masked).toBe(false);
      expect(JSON.parse(clear.body.body)).toEqual(checkout({ orderId: 'SqOrd-1001', customer: { phone: '+15550001111', email: 'Ann@Example.test', firstName: 'Ann' } }));
      expect(await audit('unmask payload')).toEqual([expect.objectContaining({ actor: 'admin', target: 'generic:SqOrd-1001', merchantId: 'default' })]);

      // A webhook's payload is the delivery as signed; its signature header is not kept.
      const hooked = (await admin('get', '/v1/admin/transactions/shopify:5001/payload?unmask=true')).body;
      expect(JSON.parse(hooked.body)).toEqual(shopifyOrder(5001, '+15550003333'));
      expect(hooked.headers).toMatchObject({ 'x-shopify-topic': 'orders/paid', 'x-shopify-event-id': 'evt-finding-1' });
      expect(Object.keys(hooked.headers).some((name) => /hmac|signature/i.test(name))).toBe(false);

      const none = await admin('get', '/v1/admin/transactions/generic:SqOrd-1001~r1/payload');
      expect([none.status, none.body.error.message]).toEqual([404, expect.stringMatching(/a remainder comes from no delivery/)]);
      expect((await admin('get', '/v1/admin/transactions/generic:NOPE/payload')).status).toBe(404);
    });

    it('keeps each reconcile run and three-way report in the audit trail: who, whose, what came of it', async () => {
      expect((await admin('post', '/v1/admin/reconcile?merchantId=later')).status).toBe(200);
      expect(await audit('reconcile')).toContainEqual(expect.objectContaining({ actor: 'admin', target: 'later', merchantId: 'later', outcome: expect.stringMatching(/^\d+ examined, 0 fixed, 0 open$/) }));
      const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
      expect((await admin('get', `/v1/admin/reports/reconcile?from=${day(0)}&to=${day(1)}`)).status).toBe(200);
      expect(await audit('report')).toContainEqual(expect.objectContaining({ actor: 'admin', merchantId: 'default', target: expect.stringMatching(/^reconcile \d{4}-/) }));
    });
  });
}
