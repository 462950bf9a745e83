/**
 * Many merchants on one bridge, end to end over HTTP, on both ledger stores (the JSON-file ledger and
 * PostgreSQL): each merchant's checkouts, refunds and webhooks land in its own books at the loyalty
 * simulator (one install, one app token, one set of books each), its admin token sees its own data
 * only, a suspended or unknown merchant's deliveries become dead letters and nothing goes upstream,
 * rotated tokens stop at once, onboarding needs nothing but the app token, per-merchant defaults fill
 * what payloads leave out, and no secret is ever in clear in the ledger's files, its tables or the logs.
 * See docs/merchants.md.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { squareAdapter } from '../../adapters/square/index.js';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { cloverAdapter } from '../../adapters/clover/index.js';
import { toastAdapter } from '../../adapters/toast/index.js';
import { loyverseAdapter } from '../../adapters/loyverse/index.js';
import { createLogger } from '../../src/kernel/logger.js';
import type { PosSettings } from '../../src/pos/contract.js';
import type { SimMerchant } from '../../simulator/index.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { filesText, tablesText } from '../support/ledger-text.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature, paidShopifyOrder } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

/** A secret no other text of the test can contain by chance. */
const fresh = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;

/** The default merchant's POS token (POS_TOKEN): direct posts need a token, so a wrong one is a 401, never the default merchant. */
const POS_TOKEN = 'default-pos-token-0123456789';
const DEFAULT_SQUARE_TOKEN = fresh('sq-default-token');
const SQUARE_FIXTURE = JSON.parse(readFileSync(new URL('../fixtures/square/CreateOrderResponse_example.json', import.meta.url), 'utf8')).order;

// ---------------------------------------------------------------------------------------- payloads
/** Square's example order, completed and picked up by a customer with a phone: 6176 − 510 tax = 5666 cents. */
const squareOrder = (id: string) => ({ ...SQUARE_FIXTURE, id, state: 'COMPLETED', version: 4, fulfillments: [{ type: 'PICKUP', pickup_details: { recipient: { display_name: 'Ann Lee', phone_number: '+15550001111' } } }] });
const squareEvent = (account: string, orderId: string, eventId: string) => ({
  merchant_id: account,
  type: 'order.updated',
  event_id: eventId,
  created_at: new Date().toISOString(),
  data: { type: 'order_updated', id: orderId, object: { order_updated: { order_id: orderId, state: 'COMPLETED', version: 4, location_id: 'L1' } } },
});

/** A paid Shopify order: 1000 cents. */
const shopifyOrder = (id: number) => paidShopifyOrder(id);

/** A paid Clover order of merchant `m`: two lattes at 5.00, 0.80 tax, 1.00 tip: 1000 cents. */
const cloverOrder = (m: string, id: string) => ({
  href: `https://api.clover.com/v3/merchants/${m}/orders/${id}`,
  id,
  currency: 'USD',
  total: 1080,
  state: 'locked',
  createdTime: 1700000000000,
  modifiedTime: 1700000060000,
  lineItems: { elements: [{ id: 'L1', item: { id: 'LATTE00000001' }, name: 'Latte', price: 500 }, { id: 'L2', item: { id: 'LATTE00000001' }, name: 'Latte', price: 500 }] },
  payments: { elements: [{ id: 'PAY1', amount: 1080, taxAmount: 80, tipAmount: 100, result: 'SUCCESS', createdTime: 1700000060000 }] },
  customers: { elements: [{ id: 'CUST000000001', firstName: 'Ann', phoneNumbers: { elements: [{ phoneNumber: '+1 555 000 1111' }] } }] },
});

/** A paid Toast order (no currency: Toast orders carry none): one burger at 15.00 with 0.94 tax: 1500 cents. */
const toastOrder = (guid: string, phone = '+15550001111') => ({
  guid,
  entityType: 'Order',
  openedDate: '2026-11-21T10:00:00.000+0000',
  paidDate: '2026-11-21T10:20:00.000+0000',
  closedDate: '2026-11-21T10:21:00.000+0000',
  voided: false,
  deleted: false,
  checks: [
    {
      guid: `${guid}-check`,
      entityType: 'Check',
      amount: 15,
      taxAmount: 0.94,
      totalAmount: 15.94,
      paymentStatus: 'CLOSED',
      voided: false,
      deleted: false,
      customer: { entityType: 'Customer', firstName: 'Ann', lastName: 'Lee', phone, email: null },
      appliedLoyaltyInfo: null,
      appliedDiscounts: [],
      appliedServiceCharges: [],
      selections: [{ guid: `${guid}-sel`, item: { guid: 'item-burger' }, itemGroup: { guid: 'group-mains' }, displayName: 'Burger', quantity: 1, price: 15, tax: 0.94, voided: false, refundDetails: null }],
      payments: [{ guid: `${guid}-pay`, amount: 15.94, tipAmount: 0, type: 'CREDIT', paymentStatus: 'CAPTURED', refundStatus: 'NONE', refund: null }],
    },
  ],
});

/** A Loyverse sale of store `store`, its customer named by id only (fetched from the Loyverse API): 3.25 → 325 cents. */
const loyverseSale = (store: string, receipt: string) => ({
  receipt_number: receipt,
  receipt_type: 'SALE',
  refund_for: null,
  created_at: '2026-11-21T10:20:00.000Z',
  updated_at: '2026-11-21T10:20:00.000Z',
  receipt_date: '2026-11-21T10:19:58.000Z',
  cancelled_at: null,
  total_money: 3.25,
  total_tax: 0,
  total_discount: 0,
  tip: 0,
  surcharge: 0,
  customer_id: 'cust-1',
  store_id: store,
  line_items: [{ id: 'line-1', item_id: 'item-cake', variant_id: 'var-cake', item_name: 'Cake', quantity: 1, price: 3.25, gross_total_money: 3.25, total_money: 3.25, total_discount: 0, line_taxes: [] }],
  payments: [{ payment_type_id: 'pt-1', name: 'Card', money_amount: 3.25 }],
});

// ------------------------------------------------------------------------------------------- suite
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`many merchants on the ${store.name} ledger`, () => {
    let h: Harness;
    let fake: FakePosApi;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    /** Every line the bridge logged, from its start to the end of the suite. */
    const logLines: string[] = [];
    /** Every secret and token that must never be found in clear. */
    const secrets = new Set<string>();
    let posSettings: Record<string, PosSettings>;

    beforeAll(async () => {
      fake = await startFakePosApi();
      fake.answer('/v1.0/customers/cust-1', { id: 'cust-1', name: 'Ann Lee', email: 'ann@example.test', phone_number: '+1 555 000 1111', customer_code: null });
      posSettings = {
        // The default merchant bound to its Square account (SQUARE_MERCHANT_ID, SQUARE_ACCESS_TOKEN), as a single-merchant deployment that created merchants beside it.
        square: { webhookSecret: 'sq-signature-key-merchants', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: fake.url, account: 'SQ-DEFAULT', accessToken: DEFAULT_SQUARE_TOKEN },
        shopify: { webhookSecret: 'shpss_merchants_secret_0123', apiBaseUrl: '' },
        clover: { webhookSecret: 'clover-auth-code-merchants', apiBaseUrl: fake.url },
        toast: { webhookSecret: 'toast-signing-secret-merchants', apiBaseUrl: '' },
        loyverse: { webhookSecret: 'lv-webhook-secret-merchants', apiBaseUrl: fake.url },
      };
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'merchants');
      const secretsKey = randomBytes(32).toString('base64');
      secrets.add(secretsKey).add(DEFAULT_SQUARE_TOKEN);
      h = await startHarness({
        env: { POS_TOKEN, DEFAULT_CURRENCY: 'CAD', DEFAULT_PHONE_REGION: 'GB', ...(schema ? { LEDGER_URL: schema.url } : {}) },
        // The whole suite's logs, at every level, to search for secrets at the end.
        logger: createLogger('trace', { write: (line: string) => void logLines.push(line) }),
        overrides: { posSettings, secretsKey, startWorker: false },
      });
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await fake?.close();
      await schema?.drop();
    });

    // ------------------------------------------------------------------------------------ helpers
    const admin = (method: 'get' | 'post' | 'patch', path: string, token = ADMIN_TOKEN) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${token}`);
    const pos = (path: string, body: unknown, token: string) => request(h.bridge.url).post(path).set('content-type', 'application/json').set('authorization', `Bearer ${token}`).send(JSON.stringify(body));

    interface Created {
      id: string;
      sim: SimMerchant;
      posToken: string;
      adminToken: string;
      body: any;
    }

    /**
     * A merchant installed at the simulator (its own app token, API key, books) and created in the
     * bridge with `extra` (POS accounts, defaults); its secrets and tokens are remembered for the search.
     */
    async function createMerchant(id: string, extra: Record<string, unknown> = {}, credentials?: Record<string, string>): Promise<Created> {
      const appToken = fresh(`app-${id}`);
      const apiKey = fresh(`key-${id}`);
      const sim = h.sim.addMerchant({ id, appToken, apiKey, ...(credentials ? { credentials } : {}) });
      secrets.add(appToken).add(apiKey);
      for (const account of Object.values((extra.pos ?? {}) as Record<string, { accessToken?: string }>)) if (account.accessToken) secrets.add(account.accessToken);
      const res = await admin('post', '/v1/admin/merchants').send({ id, loyalty: { appToken, apiKey }, ...extra });
      expect(res.status).toBe(201);
      expect(res.body.merchant).toMatchObject({ id, status: 'active', loyalty: { appToken: `…${appToken.slice(-4)}`, apiKey: `…${apiKey.slice(-4)}` } });
      secrets.add(res.body.posToken).add(res.body.adminToken);
      return { id, sim, posToken: res.body.posToken, adminToken: res.body.adminToken, body: res.body };
    }

    const deliverSquare = (event: unknown) => {
      const raw = JSON.stringify(event);
      return postRaw(`${h.bridge.url}/v1/webhooks/square`, raw, [signature(squareAdapter, posSettings.square!, raw)]);
    };
    const deliverShopify = (order: unknown, shop: string, eventId: string) => {
      const raw = JSON.stringify(order);
      return postRaw(`${h.bridge.url}/v1/webhooks/shopify`, raw, [signature(shopifyAdapter, posSettings.shopify!, raw), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', eventId], ['X-Shopify-Shop-Domain', shop]]);
    };
    const deliverClover = (merchants: Record<string, string>, ts: number) => {
      const raw = JSON.stringify({ appId: 'APP0000000001', merchants: Object.fromEntries(Object.entries(merchants).map(([m, order]) => [m, [{ objectId: `O:${order}`, type: 'UPDATE', ts }]])) });
      return postRaw(`${h.bridge.url}/v1/webhooks/clover`, raw, [signature(cloverAdapter, posSettings.clover!, raw)]);
    };
    const deliverToast = (restaurant: string, eventGuid: string, order: unknown) => {
      const timestamp = String(Date.now());
      const raw = JSON.stringify({ timestamp: new Date().toISOString(), eventCategory: 'orders', eventType: 'order_updated', guid: eventGuid, details: { restaurantGuid: restaurant, order } });
      return postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [
        signature(toastAdapter, posSettings.toast!, raw, { 'Toast-Timestamp': timestamp }),
        ['Toast-Timestamp', timestamp],
        ['Toast-Event-Type', 'order_updated'],
        ['Toast-Restaurant-External-ID', restaurant],
      ]);
    };
    const deliverLoyverse = (account: string, receipts: unknown[]) => {
      const raw = JSON.stringify({ merchant_id: account, type: 'receipts.update', created_at: '2026-11-21T11:00:01.000Z', receipts });
      return postRaw(`${h.bridge.url}/v1/webhooks/loyverse`, raw, [signature(loyverseAdapter, posSettings.loyverse!, raw)]);
    };
    /** What the fake POS API was asked for `path`, with which credential. */
    const fetchedWith = (path: string) => fake.requests.filter((r) => r.path === path).map((r) => r.authorization);

    // -------------------------------------------------------------------------------------- tests
    it('two merchants (and the default one) send the same order ids: each accrues in its own books, and a refund reverses only its own', async () => {
      const a = await createMerchant('same-a');
      const b = await createMerchant('same-b');
      for (const token of [a.posToken, b.posToken, POS_TOKEN]) {
        const res = await pos('/v1/checkouts/generic', checkout({ orderId: 'A-1001' }), token);
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'accrued', repeat: false });
      }
      // A different amount for B's order: its books hold B's amount, not A's.
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'A-1002', total: '10.00', items: [] }), b.posToken)).body).toMatchObject({ status: 'accrued' });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'A-1002' }), a.posToken)).body).toMatchObject({ status: 'accrued' });
      for (const m of [a.sim, b.sim, h.sim.merchant('default')]) {
        expect(m.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 0, amount: 5997 });
        expect(m.books()).toMatchObject({ doubleAccruals: [], doubleReversals: [] });
      }
      expect(a.sim.books().transactions['generic:A-1002']).toMatchObject({ accruals: 1, amount: 5997 });
      expect(b.sim.books().transactions['generic:A-1002']).toMatchObject({ accruals: 1, amount: 1000 });

      // B's refund of A-1001: B's books only.
      const refund = await pos('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' }, b.posToken);
      expect(refund.status).toBe(200);
      expect(refund.body).toMatchObject({ transactionId: 'generic:A-1001', status: 'reversed' });
      expect(b.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
      expect(a.sim.books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(h.sim.merchant('default').books().transactions['generic:A-1001']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(a.sim.books().reverseRequests).toBe(0);

      // Each merchant's record, under the same transactionId, in admin answers with its merchantId.
      for (const m of [a, b]) {
        const detail = await admin('get', `/v1/admin/transactions/generic:A-1001?merchantId=${m.id}`);
        expect(detail.status).toBe(200);
        expect(detail.body).toMatchObject({ transactionId: 'generic:A-1001', merchantId: m.id, status: m === b ? 'reversed' : 'accrued' });
      }
      expect((await admin('get', '/v1/admin/transactions/generic:A-1001')).body).toMatchObject({ merchantId: 'default', status: 'accrued' });
    });

    it('webhooks are attributed by the account each POS names: Square, Shopify, Clover (one delivery split between two merchants), Toast, Loyverse', async () => {
      const accessTokens = { a: { square: fresh('sq-tok-a'), clover: fresh('cl-tok-a'), loyverse: fresh('lv-tok-a') }, b: { square: fresh('sq-tok-b'), clover: fresh('cl-tok-b'), loyverse: fresh('lv-tok-b') } };
      const accounts = (k: 'a' | 'b') => ({
        square: { merchantId: `SQ-${k.toUpperCase()}`, accessToken: accessTokens[k].square },
        shopify: { shopDomain: `shop-${k}.myshopify.com` },
        clover: { merchantId: `CLOVERMERCH${k.toUpperCase().repeat(2)}`, accessToken: accessTokens[k].clover },
        toast: { restaurantGuid: `toast-restaurant-${k}` },
        loyverse: { merchantId: `lv-merchant-${k}`, accessToken: accessTokens[k].loyverse },
      });
      const a = await createMerchant('hooks-a', { pos: accounts('a') });
      const b = await createMerchant('hooks-b', { pos: accounts('b') });
      expect(a.body.merchant.pos.square).toEqual({ merchantId: 'SQ-A', accessToken: `…${accessTokens.a.square.slice(-4)}` });

      // Square: the order is fetched with the merchant's own access token.
      fake.answer('/v2/orders/SQ-ORDER-A', { order: squareOrder('SQ-ORDER-A') });
      fake.answer('/v2/orders/SQ-ORDER-B', { order: squareOrder('SQ-ORDER-B') });
      const sqA = await deliverSquare(squareEvent('SQ-A', 'SQ-ORDER-A', 'EV-A'));
      const sqB = await deliverSquare(squareEvent('SQ-B', 'SQ-ORDER-B', 'EV-B'));
      expect([sqA.status, sqB.status]).toEqual([200, 200]);
      expect(sqA.body.results).toEqual([{ key: 'EV-A', action: 'checkout', transactionId: 'square:SQ-ORDER-A', status: 'accrued', merchantId: 'hooks-a' }]);
      expect(sqB.body.results).toEqual([{ key: 'EV-B', action: 'checkout', transactionId: 'square:SQ-ORDER-B', status: 'accrued', merchantId: 'hooks-b' }]);
      expect(fetchedWith('/v2/orders/SQ-ORDER-A')).toEqual([`Bearer ${accessTokens.a.square}`]);
      expect(fetchedWith('/v2/orders/SQ-ORDER-B')).toEqual([`Bearer ${accessTokens.b.square}`]);
      expect(a.sim.books().transactions['square:SQ-ORDER-A']).toMatchObject({ accruals: 1, amount: 5666 });
      expect(b.sim.books().transactions['square:SQ-ORDER-B']).toMatchObject({ accruals: 1, amount: 5666 });
      expect(a.sim.books().transactions['square:SQ-ORDER-B']).toBeUndefined();
      // The same event id from both merchants: each is its own (dedupe keys are per merchant).
      fake.answer('/v2/orders/SQ-ORDER-A2', { order: squareOrder('SQ-ORDER-A2') });
      fake.answer('/v2/orders/SQ-ORDER-B2', { order: squareOrder('SQ-ORDER-B2') });
      expect((await deliverSquare(squareEvent('SQ-A', 'SQ-ORDER-A2', 'EV-SAME'))).body.results[0]).toMatchObject({ status: 'accrued', merchantId: 'hooks-a' });
      expect((await deliverSquare(squareEvent('SQ-B', 'SQ-ORDER-B2', 'EV-SAME'))).body.results[0]).toMatchObject({ status: 'accrued', merchantId: 'hooks-b' });
      expect(b.sim.books().transactions['square:SQ-ORDER-B2']).toMatchObject({ accruals: 1 });

      // Shopify: an order id in two shops' ledgers, by X-Shopify-Shop-Domain (any case). (Shopify's
      // ids are global, so two shops' orders differ; its event ids are global too, so each delivery
      // has its own: a copy of one shop's delivery naming another is a duplicate, hostile-pos-shopify.test.ts.)
      const shA = await deliverShopify(shopifyOrder(5001), 'shop-a.myshopify.com', 'sh-evt-1');
      const shB = await deliverShopify({ ...shopifyOrder(5001), name: '#B-5001' }, 'SHOP-B.myshopify.com', 'sh-evt-2');
      expect([shA.status, shB.status]).toEqual([200, 200]);
      expect(shA.body.results).toEqual([{ key: 'event:sh-evt-1', action: 'checkout', transactionId: 'shopify:5001', status: 'accrued', merchantId: 'hooks-a' }]);
      expect(shB.body.results).toEqual([{ key: 'event:sh-evt-2', action: 'checkout', transactionId: 'shopify:5001', status: 'accrued', merchantId: 'hooks-b' }]);
      for (const m of [a, b]) expect(m.sim.books().transactions['shopify:5001']).toMatchObject({ accruals: 1, amount: 1000 });

      // Clover: one delivery naming both merchants is split, each part fetched with its merchant's token.
      fake.answer('/v3/merchants/CLOVERMERCHAA/orders/CLORDERA00001', cloverOrder('CLOVERMERCHAA', 'CLORDERA00001'));
      fake.answer('/v3/merchants/CLOVERMERCHBB/orders/CLORDERB00001', cloverOrder('CLOVERMERCHBB', 'CLORDERB00001'));
      const cl = await deliverClover({ CLOVERMERCHAA: 'CLORDERA00001', CLOVERMERCHBB: 'CLORDERB00001' }, 1);
      expect(cl.status).toBe(200);
      expect(cl.body.results).toEqual(
        expect.arrayContaining([
          { key: 'CLOVERMERCHAA/O:CLORDERA00001/UPDATE/1', action: 'checkout', transactionId: 'clover:CLOVERMERCHAA:CLORDERA00001', status: 'accrued', merchantId: 'hooks-a' },
          { key: 'CLOVERMERCHBB/O:CLORDERB00001/UPDATE/1', action: 'checkout', transactionId: 'clover:CLOVERMERCHBB:CLORDERB00001', status: 'accrued', merchantId: 'hooks-b' },
        ]),
      );
      expect(cl.body.results).toHaveLength(2);
      // Clover asks for at most three expansions a call: the order is read in two calls, each with its merchant's token.
      expect(new Set(fetchedWith('/v3/merchants/CLOVERMERCHAA/orders/CLORDERA00001'))).toEqual(new Set([`Bearer ${accessTokens.a.clover}`]));
      expect(new Set(fetchedWith('/v3/merchants/CLOVERMERCHBB/orders/CLORDERB00001'))).toEqual(new Set([`Bearer ${accessTokens.b.clover}`]));
      expect(a.sim.books().transactions['clover:CLOVERMERCHAA:CLORDERA00001']).toMatchObject({ accruals: 1, amount: 1000 });
      expect(b.sim.books().transactions['clover:CLOVERMERCHBB:CLORDERB00001']).toMatchObject({ accruals: 1, amount: 1000 });
      expect(a.sim.books().transactions['clover:CLOVERMERCHBB:CLORDERB00001']).toBeUndefined();

      // Toast: by Toast-Restaurant-External-ID; the same order guid at two restaurants.
      const toA = await deliverToast('toast-restaurant-a', 'toast-evt-1', toastOrder('toast-order-1'));
      const toB = await deliverToast('toast-restaurant-b', 'toast-evt-1', toastOrder('toast-order-1'));
      expect([toA.status, toB.status]).toEqual([200, 200]);
      expect(toA.body.results).toEqual([{ key: 'toast-evt-1:checkout:toast-order-1-check', action: 'checkout', transactionId: 'toast:toast-order-1:toast-order-1-check', status: 'accrued', merchantId: 'hooks-a' }]);
      expect(toB.body.results).toEqual([{ key: 'toast-evt-1:checkout:toast-order-1-check', action: 'checkout', transactionId: 'toast:toast-order-1:toast-order-1-check', status: 'accrued', merchantId: 'hooks-b' }]);
      for (const m of [a, b]) expect(m.sim.books().transactions['toast:toast-order-1:toast-order-1-check']).toMatchObject({ accruals: 1, amount: 1500 });

      // Loyverse: by the body's merchant_id; the customer fetched with the merchant's token.
      const lvA = await deliverLoyverse('lv-merchant-a', [loyverseSale('store-a', '1-1001')]);
      const lvB = await deliverLoyverse('lv-merchant-b', [loyverseSale('store-b', '1-1001')]);
      expect([lvA.status, lvB.status]).toEqual([200, 200]);
      expect(lvA.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'loyverse:store-a:1-1001', status: 'accrued', merchantId: 'hooks-a' })]);
      expect(lvB.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'loyverse:store-b:1-1001', status: 'accrued', merchantId: 'hooks-b' })]);
      expect(fetchedWith('/v1.0/customers/cust-1')).toEqual([`Bearer ${accessTokens.a.loyverse}`, `Bearer ${accessTokens.b.loyverse}`]);
      expect(a.sim.books().transactions['loyverse:store-a:1-1001']).toMatchObject({ accruals: 1, amount: 325 });
      expect(b.sim.books().transactions['loyverse:store-b:1-1001']).toMatchObject({ accruals: 1, amount: 325 });

      for (const m of [a, b]) expect(m.sim.books()).toMatchObject({ doubleAccruals: [], doubleReversals: [] });
      // Nothing of theirs reached the default merchant's books.
      expect(Object.keys(h.sim.merchant('default').books().transactions).filter((t) => !t.startsWith('generic:'))).toEqual([]);
    });

    it("isolation: merchant B's admin token sees B's records, dead letters and reconcile only; A's record is a 404; the global token narrows with ?merchantId=", async () => {
      const a = await createMerchant('iso-a', { pos: { shopify: { shopDomain: 'iso-a.myshopify.com' } } });
      const b = await createMerchant('iso-b', { pos: { shopify: { shopDomain: 'iso-b.myshopify.com' } } });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ISO-A-1' }), a.posToken)).body).toMatchObject({ status: 'accrued' });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ISO-B-1' }), b.posToken)).body).toMatchObject({ status: 'accrued' });
      // An open record each: the answer is lost after the loyalty service committed (in doubt).
      a.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
      b.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ISO-A-2', customer: { phone: '+15550002222' } }), a.posToken)).body).toMatchObject({ status: 'in_doubt' });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ISO-B-2', customer: { phone: '+15550002222' } }), b.posToken)).body).toMatchObject({ status: 'in_doubt' });
      // A dead letter each: an authentic Shopify delivery that cannot be translated.
      const broken = (shop: string, id: number) => deliverShopify({ ...shopifyOrder(id), subtotal_price: 'twelve' }, shop, `broken-${id}`);
      const letterA = await broken('iso-a.myshopify.com', 7001);
      const letterB = await broken('iso-b.myshopify.com', 7002);
      // Kept and answered 2xx, so that Shopify does not deliver it again and again.
      expect([letterA.status, letterB.status]).toEqual([202, 202]);
      expect([letterA.body.results[0].action, letterB.body.results[0].action]).toEqual(['dead_lettered', 'dead_lettered']);
      const letterAId = letterA.body.results[0].deadLetterId;
      const letterBId = letterB.body.results[0].deadLetterId;
      expect(typeof letterAId).toBe('string');
      expect(typeof letterBId).toBe('string');

      // B's token on A's record: 404 for reading and for every action, as if it did not exist.
      for (const [method, path, body] of [
        ['get', '/v1/admin/transactions/generic:ISO-A-1', undefined],
        ['get', '/v1/admin/transactions/generic:ISO-A-1?merchantId=iso-a', undefined],
        ['post', '/v1/admin/transactions/generic:ISO-A-1/retry', {}],
        ['post', '/v1/admin/transactions/generic:ISO-A-1/reverse', { reason: 'not mine' }],
        ['post', '/v1/admin/transactions/generic:ISO-A-2/resolve', { outcome: 'accrued' }],
        ['get', `/v1/admin/dead-letters/${letterAId}`, undefined],
        ['post', `/v1/admin/dead-letters/${letterAId}/replay`, {}],
      ] as const) {
        const req = admin(method, path, b.adminToken);
        const res = await (body ? req.send(body) : req);
        expect([path, res.status]).toEqual([path, 404]);
      }
      // Nothing happened to A's records.
      expect(a.sim.books().transactions['generic:ISO-A-1']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(a.sim.books().reverseRequests).toBe(0);
      expect((await admin('get', '/v1/admin/transactions/generic:ISO-A-2?merchantId=iso-a')).body).toMatchObject({ status: 'in_doubt' });
      // B's own record, through B's token.
      expect((await admin('get', '/v1/admin/transactions/generic:ISO-B-1', b.adminToken)).body).toMatchObject({ merchantId: 'iso-b', status: 'accrued' });

      // Lists: B's only.
      const listB = await admin('get', '/v1/admin/transactions', b.adminToken);
      expect(listB.status).toBe(200);
      expect(listB.body.items.map((r: any) => r.orderId).sort()).toEqual(['ISO-B-1', 'ISO-B-2']);
      expect(listB.body.items.every((r: any) => r.merchantId === 'iso-b')).toBe(true);
      expect(listB.body.total).toBe(2);
      // Asking for A's with B's token: nothing of A's.
      expect((await admin('get', '/v1/admin/transactions?merchantId=iso-a', b.adminToken)).status).toBe(404);
      const lettersB = await admin('get', '/v1/admin/dead-letters', b.adminToken);
      expect(lettersB.body).toMatchObject({ total: 1, items: [{ id: letterBId, merchantId: 'iso-b' }] });

      // Reconcile with B's token examines B's open record only; A's stays in doubt.
      const report = await admin('post', '/v1/admin/reconcile', b.adminToken);
      expect(report.status).toBe(200);
      expect(report.body.examined).toBe(1);
      const touched = [...report.body.fixed, ...report.body.open].map((e: any) => e.transactionId);
      expect(touched).toEqual(['generic:ISO-B-2']);
      expect((await admin('get', '/v1/admin/transactions/generic:ISO-A-2?merchantId=iso-a')).body).toMatchObject({ status: 'in_doubt' });

      // The global token sees all and narrows with ?merchantId=.
      const listA = await admin('get', '/v1/admin/transactions?merchantId=iso-a');
      expect(listA.body.items.map((r: any) => r.orderId).sort()).toEqual(['ISO-A-1', 'ISO-A-2']);
      expect((await admin('get', '/v1/admin/transactions?limit=500')).body.items.map((r: any) => r.merchantId)).toEqual(expect.arrayContaining(['iso-a', 'iso-b', 'default']));
      expect((await admin('get', '/v1/admin/dead-letters?merchantId=iso-a')).body).toMatchObject({ total: 1, items: [{ id: letterAId, merchantId: 'iso-a' }] });
      expect((await admin('get', '/v1/admin/transactions/generic:ISO-A-1?merchantId=iso-a')).body).toMatchObject({ merchantId: 'iso-a', status: 'accrued' });
      expect((await admin('get', '/v1/admin/transactions/generic:ISO-A-1')).status).toBe(404); // the default merchant's, by default
      const reconcileA = await admin('post', '/v1/admin/reconcile?merchantId=iso-a');
      expect([...reconcileA.body.fixed, ...reconcileA.body.open].map((e: any) => e.transactionId)).toEqual(['generic:ISO-A-2']);
      // A merchant's admin token does not manage merchants.
      expect((await admin('get', '/v1/admin/merchants', b.adminToken)).status).toBe(403);
      expect((await admin('post', `/v1/admin/merchants/${a.id}/tokens`, b.adminToken)).status).toBe(403);
    });

    it('a suspended merchant: its POS posts are 403 merchant_suspended, its webhooks dead letters (2xx), nothing sent upstream; active again, it works', async () => {
      const m = await createMerchant('paused', { pos: { shopify: { shopDomain: 'paused.myshopify.com' }, toast: { restaurantGuid: 'toast-paused' } } });
      // Before: one order accrued, one left pending (the loyalty service answered 429 five times).
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'P-0' }), m.posToken)).body).toMatchObject({ status: 'accrued' });
      m.sim.faults.inject({ kind: 'rate_limit', on: 'accrue', times: 5 });
      const pending = await pos('/v1/checkouts/generic', checkout({ orderId: 'P-PEND', customer: { phone: '+15550003333' } }), m.posToken);
      expect([pending.status, pending.body.status]).toEqual([202, 'pending']);
      const sentBefore = m.sim.books();
      expect([sentBefore.accrueRequests, sentBefore.reverseRequests]).toEqual([6, 0]);
      const suspend = await admin('patch', `/v1/admin/merchants/${m.id}`).send({ status: 'suspended' });
      expect(suspend.status).toBe(200);
      expect(suspend.body).toMatchObject({ id: m.id, status: 'suspended' });

      const post = await pos('/v1/checkouts/generic', checkout({ orderId: 'P-1' }), m.posToken);
      expect(post.status).toBe(403);
      expect(post.body.error.code).toBe('merchant_suspended');
      expect((await pos('/v1/refunds/generic', { orderId: 'P-1', refundId: 'R-1' }, m.posToken)).status).toBe(403);

      const hook = await deliverShopify(shopifyOrder(8001), 'paused.myshopify.com', 'paused-evt-1');
      expect(hook.status).toBeGreaterThanOrEqual(200);
      expect(hook.status).toBeLessThan(300);
      expect(hook.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', merchantId: 'paused', deadLetterId: expect.any(String), reason: expect.stringMatching(/suspended/) })]);
      const toast = await deliverToast('toast-paused', 'paused-toast-1', toastOrder('paused-order'));
      expect(toast.status).toBe(202);
      expect(toast.body.results[0]).toMatchObject({ action: 'dead_lettered', merchantId: 'paused' });

      // Its open work waits, and an operator's reversal is recorded but not sent.
      const reconcile = await admin('post', '/v1/admin/reconcile?merchantId=paused');
      expect(reconcile.body.open).toEqual([expect.objectContaining({ transactionId: 'generic:P-PEND', status: 'pending', why: expect.stringMatching(/suspended/) })]);
      const reverse = await admin('post', '/v1/admin/transactions/generic:P-0/reverse?merchantId=paused').send({ reason: 'while suspended' });
      expect([reverse.status, reverse.body.status]).toEqual([202, 'reversal_pending']);
      expect(m.sim.books()).toMatchObject({ accrueRequests: 6, reverseRequests: 0 });
      expect((await admin('get', '/v1/admin/transactions?merchantId=paused')).body.total).toBe(2);
      const letters = await admin('get', '/v1/admin/dead-letters?merchantId=paused');
      expect(letters.body.total).toBe(2);
      expect(letters.body.items.every((l: any) => /suspended/.test(l.reason))).toBe(true);

      // Active again: posts work, and the dead letter replays into its books.
      expect((await admin('patch', `/v1/admin/merchants/${m.id}`).send({ status: 'active' })).body.status).toBe('active');
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'P-1' }), m.posToken)).body).toMatchObject({ status: 'accrued' });
      const replay = await admin('post', `/v1/admin/dead-letters/${hook.body.results[0].deadLetterId}/replay`);
      expect(replay.status).toBe(200);
      expect(replay.body.results[0]).toMatchObject({ action: 'checkout', status: 'accrued', merchantId: 'paused' });
      expect(m.sim.books().transactions['shopify:8001']).toMatchObject({ accruals: 1 });
      expect(m.sim.books().transactions['generic:P-1']).toMatchObject({ accruals: 1 });
      const resumed = await admin('post', '/v1/admin/reconcile?merchantId=paused');
      expect(resumed.body.fixed).toEqual(
        expect.arrayContaining([expect.objectContaining({ transactionId: 'generic:P-PEND', to: 'accrued' }), expect.objectContaining({ transactionId: 'generic:P-0', to: 'reversed' })]),
      );
      expect(m.sim.books().transactions['generic:P-PEND']).toMatchObject({ accruals: 1 });
      expect(m.sim.books().transactions['generic:P-0']).toMatchObject({ accruals: 1, reversals: 1 });
      expect(m.sim.books()).toMatchObject({ doubleAccruals: [], doubleReversals: [] });
    });

    it('a webhook for an account no merchant holds is kept as a dead letter without a merchant, answered 2xx, and sends nothing', async () => {
      await createMerchant('unknown-neighbour');
      const before = h.sim.merchants().map((m) => m.books().accrueRequests);
      const res = await deliverShopify(shopifyOrder(9001), 'nobody.myshopify.com', 'nobody-evt-1');
      expect(res.status).toBe(202);
      expect(res.body.results).toEqual([{ key: 'nobody.myshopify.com', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/no merchant has the shopify account "nobody.myshopify.com"/) }]);
      const clover = await deliverClover({ NOBODYCLOVER1: 'NOBODYORDER01' }, 1);
      expect(clover.status).toBe(202);
      expect(clover.body.results[0]).toMatchObject({ action: 'dead_lettered', reason: expect.stringMatching(/NOBODYCLOVER1/) });
      expect(h.sim.merchants().map((m) => m.books().accrueRequests)).toEqual(before);
      const letter = await admin('get', `/v1/admin/dead-letters/${res.body.results[0].deadLetterId}`);
      expect(letter.status).toBe(200);
      expect(letter.body.merchantId).toBeUndefined();
      expect(letter.body.reason).toMatch(/no merchant has the shopify account/);
      // The same delivery again is the same letter, counted.
      const again = await deliverShopify(shopifyOrder(9001), 'nobody.myshopify.com', 'nobody-evt-1');
      expect(again.body.results[0].deadLetterId).toBe(res.body.results[0].deadLetterId);
      expect((await admin('get', `/v1/admin/dead-letters/${res.body.results[0].deadLetterId}`)).body.deliveries).toBe(2);
    });

    it("an unknown merchant's dead letter replays to the merchant created for its account afterwards; before that, a replay fails and leaves it open", async () => {
      // Once any merchant is created, an account none holds names no merchant (the default one is bound to none here).
      await createMerchant('late-neighbour');
      const delivered = await deliverShopify(shopifyOrder(9201), 'late.myshopify.com', 'late-evt-1');
      expect(delivered.status).toBe(202);
      const id = delivered.body.results[0].deadLetterId as string;
      const early = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
      expect(early.status).toBe(422);
      expect(early.body.error.message).toMatch(/no merchant has the shopify account "late.myshopify.com"/);
      const letter = (await admin('get', `/v1/admin/dead-letters/${id}`)).body;
      expect(letter).toMatchObject({ deliveries: 1, replays: [{ outcome: expect.stringMatching(/^failed: no merchant has/) }] });
      expect(letter.resolvedAt).toBeUndefined();
      expect((await admin('get', '/v1/admin/dead-letters?open=true&pos=shopify&limit=500')).body.items.map((l: any) => l.id)).toContain(id);

      // The merchant is onboarded with that shop: the replay is attributed to it by the delivery's shop domain.
      const m = await createMerchant('late', { pos: { shopify: { shopDomain: 'late.myshopify.com' } } });
      const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
      expect(replay.status).toBe(200);
      expect(replay.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'shopify:9201', status: 'accrued', merchantId: 'late' })]);
      expect(replay.body.deadLetter.resolvedAt).toEqual(expect.any(String));
      expect(m.sim.books().transactions['shopify:9201']).toMatchObject({ accruals: 1, amount: 1000 });
      expect(h.sim.merchant('default').books().transactions['shopify:9201']).toBeUndefined();
    });

    it("a suspended merchant's dead letter replayed while it is suspended: the replay fails, the letter stays open, nothing is sent", async () => {
      const m = await createMerchant('paused-replay', { pos: { shopify: { shopDomain: 'paused-replay.myshopify.com' } } });
      await admin('patch', `/v1/admin/merchants/${m.id}`).send({ status: 'suspended' });
      const delivered = await deliverShopify(shopifyOrder(9301), 'paused-replay.myshopify.com', 'paused-replay-evt');
      const id = delivered.body.results[0].deadLetterId as string;
      const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
      expect(replay.status).toBe(422);
      expect(replay.body.error.message).toMatch(/suspended/);
      const letter = (await admin('get', `/v1/admin/dead-letters/${id}`)).body;
      expect(letter).toMatchObject({ merchantId: 'paused-replay', deliveries: 1 });
      expect(letter.resolvedAt).toBeUndefined();
      expect(m.sim.books().accrueRequests).toBe(0);
    });

    it("the default merchant bound to its accounts by the variables keeps its webhooks beside created merchants, and its accounts cannot be taken (409)", async () => {
      await createMerchant('beside-default', { pos: { square: { merchantId: 'SQ-BESIDE' } } });
      fake.answer('/v2/orders/SQ-DEFAULT-1', { order: squareOrder('SQ-DEFAULT-1') });
      // Square names the account in any case; the variable's value matches it whatever its case.
      const res = await deliverSquare(squareEvent('sq-default', 'SQ-DEFAULT-1', 'EV-DEFAULT-1'));
      expect(res.status).toBe(200);
      expect(res.body.results).toEqual([{ key: 'EV-DEFAULT-1', action: 'checkout', transactionId: 'square:SQ-DEFAULT-1', status: 'accrued' }]);
      expect(fetchedWith('/v2/orders/SQ-DEFAULT-1')).toEqual([`Bearer ${DEFAULT_SQUARE_TOKEN}`]);
      expect(h.sim.merchant('default').books().transactions['square:SQ-DEFAULT-1']).toMatchObject({ accruals: 1, amount: 5666 });
      expect((await admin('get', '/v1/admin/transactions/square:SQ-DEFAULT-1')).body).toMatchObject({ merchantId: 'default' });

      // The default merchant's account belongs to it: another merchant cannot be created or changed to hold it.
      const appToken = fresh('app-thief');
      secrets.add(appToken);
      h.sim.addMerchant({ id: 'thief', appToken });
      const taken = await admin('post', '/v1/admin/merchants').send({ id: 'thief', loyalty: { appToken }, pos: { square: { merchantId: 'SQ-DEFAULT' } } });
      expect(taken.status).toBe(409);
      expect(taken.body.error.message).toBe('POS account square:sq-default belongs to merchant default (SQUARE_MERCHANT_ID)');
      expect((await admin('get', '/v1/admin/merchants/thief')).status).toBe(404);
      const moved = await admin('patch', '/v1/admin/merchants/beside-default').send({ pos: { square: { merchantId: 'sq-default' } } });
      expect(moved.status).toBe(409);
      expect((await admin('get', '/v1/admin/merchants/beside-default')).body.pos.square).toEqual({ merchantId: 'SQ-BESIDE' });
      // Nor through resolve-credentials.
      const viaService = fresh('app-thief-2');
      secrets.add(viaService);
      h.sim.addMerchant({ id: 'thief-2', appToken: viaService, credentials: { 'square.merchantId': 'SQ-DEFAULT' } });
      expect((await admin('post', '/v1/admin/merchants').send({ id: 'thief-2', loyalty: { appToken: viaService } })).status).toBe(409);
    });

    it('token rotation: the old POS and admin tokens are refused (401) at once, the new ones work', async () => {
      const m = await createMerchant('rotating');
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ROT-1' }), m.posToken)).status).toBe(200);
      expect((await admin('get', '/v1/admin/transactions', m.adminToken)).status).toBe(200);
      const rotated = await admin('post', `/v1/admin/merchants/${m.id}/tokens`);
      expect(rotated.status).toBe(200);
      secrets.add(rotated.body.posToken).add(rotated.body.adminToken);
      expect(rotated.body.posToken).not.toBe(m.posToken);
      expect(rotated.body.adminToken).not.toBe(m.adminToken);

      const oldPos = await pos('/v1/checkouts/generic', checkout({ orderId: 'ROT-2' }), m.posToken);
      expect(oldPos.status).toBe(401);
      expect(oldPos.headers['www-authenticate']).toMatch(/^Bearer /);
      expect((await pos('/v1/refunds/generic', { orderId: 'ROT-1', refundId: 'R-1' }, m.posToken)).status).toBe(401);
      expect((await admin('get', '/v1/admin/transactions', m.adminToken)).status).toBe(401);
      expect(m.sim.books().accrueRequests).toBe(1);

      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'ROT-2' }), rotated.body.posToken)).body).toMatchObject({ status: 'accrued' });
      const list = await admin('get', '/v1/admin/transactions', rotated.body.adminToken);
      expect(list.status).toBe(200);
      expect(list.body.items.map((r: any) => r.orderId).sort()).toEqual(['ROT-1', 'ROT-2']);
      expect(m.sim.books().transactions['generic:ROT-2']).toMatchObject({ accruals: 1 });
    });

    it('onboarding with nothing but the app token: POS accounts, access token, currency and phone region come from resolve-credentials, and its webhooks are attributed to it', async () => {
      const squareToken = fresh('sq-onboard-token');
      const m = await createMerchant('onboard', {}, { 'square.merchantId': 'SQ-ONBOARD', 'square.accessToken': squareToken, 'toast.restaurantGuid': 'toast-onboard', currency: 'EUR', phoneRegion: 'DE', 'unknown.thing': 'ignored' });
      secrets.add(squareToken);
      expect(m.body.merchant).toMatchObject({
        id: 'onboard',
        currency: 'EUR',
        phoneRegion: 'DE',
        pos: { square: { merchantId: 'SQ-ONBOARD', accessToken: `…${squareToken.slice(-4)}` }, toast: { restaurantGuid: 'toast-onboard' } },
        resolvedAt: expect.any(String),
      });
      expect(JSON.stringify(m.body)).not.toContain(squareToken);
      expect((await admin('get', '/v1/admin/merchants/onboard')).body).toEqual(m.body.merchant);

      fake.answer('/v2/orders/SQ-ONBOARD-1', { order: squareOrder('SQ-ONBOARD-1') });
      const hook = await deliverSquare(squareEvent('SQ-ONBOARD', 'SQ-ONBOARD-1', 'EV-ONBOARD-1'));
      expect(hook.status).toBe(200);
      expect(hook.body.results).toEqual([{ key: 'EV-ONBOARD-1', action: 'checkout', transactionId: 'square:SQ-ONBOARD-1', status: 'accrued', merchantId: 'onboard' }]);
      expect(fetchedWith('/v2/orders/SQ-ONBOARD-1')).toEqual([`Bearer ${squareToken}`]);
      expect(m.sim.books().transactions['square:SQ-ONBOARD-1']).toMatchObject({ accruals: 1, amount: 5666 });

      // What the request gives wins over what the loyalty service says; refresh fills only what is missing.
      const given = await createMerchant('onboard-given', { currency: 'GBP', pos: { square: { merchantId: 'SQ-GIVEN' } } }, { 'square.merchantId': 'SQ-FROM-SERVICE', currency: 'EUR', 'shopify.shopDomain': 'given.myshopify.com' });
      expect(given.body.merchant).toMatchObject({ currency: 'GBP', pos: { square: { merchantId: 'SQ-GIVEN' }, shopify: { shopDomain: 'given.myshopify.com' } } });
      given.sim.setCredentials({ 'toast.restaurantGuid': 'toast-given', phoneRegion: 'FR' });
      const refreshed = await admin('post', '/v1/admin/merchants/onboard-given/refresh');
      expect(refreshed.status).toBe(200);
      expect(refreshed.body).toMatchObject({ currency: 'GBP', phoneRegion: 'FR', pos: { square: { merchantId: 'SQ-GIVEN' }, toast: { restaurantGuid: 'toast-given' } } });
    });

    it('a phone region the phone rules do not know (XX) is a 400 naming phoneRegion, and nothing is stored', async () => {
      const res = await admin('post', '/v1/admin/merchants').send({ id: 'region-xx', loyalty: { appToken: fresh('app-region') }, phoneRegion: 'XX' });
      expect(res.status).toBe(400);
      expect(res.body.error.issues).toEqual([expect.objectContaining({ field: 'phoneRegion', message: expect.stringMatching(/region the phone rules know/) })]);
      expect((await admin('get', '/v1/admin/merchants/region-xx')).status).toBe(404);
    });

    it('onboarding refused: a revoked or unknown app token is a 400 naming loyalty.appToken, and nothing is stored', async () => {
      const revokedToken = fresh('app-revoked');
      h.sim.addMerchant({ id: 'revoked', appToken: revokedToken, credentials: { 'square.merchantId': 'SQ-REVOKED' } }).revoke();
      secrets.add(revokedToken);
      const unknownToken = fresh('app-never-installed');
      secrets.add(unknownToken);
      const before = (await admin('get', '/v1/admin/merchants?limit=500')).body.total;
      for (const [id, appToken] of [['revoked', revokedToken], ['never-installed', unknownToken]] as const) {
        const res = await admin('post', '/v1/admin/merchants').send({ id, loyalty: { appToken }, pos: { shopify: { shopDomain: `${id}.myshopify.com` } } });
        expect(res.status).toBe(400);
        expect(res.body.error.issues).toEqual([expect.objectContaining({ field: 'loyalty.appToken', message: expect.stringMatching(/refused this app token/) })]);
        expect(JSON.stringify(res.body)).not.toContain(appToken);
        expect((await admin('get', `/v1/admin/merchants/${id}`)).status).toBe(404);
      }
      expect((await admin('get', '/v1/admin/merchants?limit=500')).body.total).toBe(before);
      // Nothing stored: the accounts it named are free, and a webhook for one is an unknown merchant's.
      const hook = await deliverShopify(shopifyOrder(9101), 'revoked.myshopify.com', 'revoked-evt');
      expect(hook.body.results[0]).toMatchObject({ action: 'dead_lettered' });
      expect(hook.body.results[0].merchantId).toBeUndefined();
      expect(h.sim.merchant('revoked').books().accrueRequests).toBe(0);
    });

    it("per-merchant defaults (currency, phone region) fill payloads that carry none; the default merchant's come from the variables, as do a merchant's unset ones", async () => {
      const de = await createMerchant('defaults-de', { currency: 'EUR', phoneRegion: 'DE' });
      const plain = await createMerchant('defaults-none');
      // Toast orders carry no currency; the phones are national numbers.
      const berlin = await pos('/v1/checkouts/toast', toastOrder('def-order-1', '030 12345678'), de.posToken);
      expect(berlin.status).toBe(200);
      expect(berlin.body).toMatchObject({ status: 'accrued' });
      const london = await pos('/v1/checkouts/toast', toastOrder('def-order-1', '020 7946 0018'), POS_TOKEN);
      expect(london.body).toMatchObject({ status: 'accrued' });
      const fallback = await pos('/v1/checkouts/toast', toastOrder('def-order-1', '020 7946 0019'), plain.posToken);
      expect(fallback.body).toMatchObject({ status: 'accrued' });

      const detail = async (merchantId: string) => (await admin('get', `/v1/admin/transactions/toast:def-order-1:def-order-1-check?merchantId=${merchantId}&unmask=true`)).body;
      expect(await detail('defaults-de')).toMatchObject({ check: { currency: 'EUR', amount: 1500 }, customer: { phone: '+493012345678' } });
      expect(await detail('default')).toMatchObject({ check: { currency: 'CAD' }, customer: { phone: '+442079460018' } });
      expect(await detail('defaults-none')).toMatchObject({ check: { currency: 'CAD' }, customer: { phone: '+442079460019' } });
      // What each merchant's loyalty account was sent.
      const sent = (m: SimMerchant) => m.books().transactions['toast:def-order-1:def-order-1-check'];
      expect(sent(de.sim)).toMatchObject({ accruals: 1, amount: 1500 });
      expect(sent(plain.sim)).toMatchObject({ accruals: 1, amount: 1500 });
      expect(sent(h.sim.merchant('default'))).toMatchObject({ accruals: 1, amount: 1500 });
      // A payload's own currency wins over the merchant's.
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'DEF-USD' }), de.posToken)).body).toMatchObject({ status: 'accrued' });
      expect((await admin('get', '/v1/admin/transactions/generic:DEF-USD?merchantId=defaults-de')).body.check.currency).toBe('USD');
      // A generic payload without one takes the merchant's, as Toast's does (it was "currency: is required").
      const { currency: _none, ...noCurrency } = checkout({ orderId: 'DEF-NONE' }) as Record<string, unknown>;
      expect((await pos('/v1/checkouts/generic', noCurrency, de.posToken)).body).toMatchObject({ status: 'accrued' });
      expect((await admin('get', '/v1/admin/transactions/generic:DEF-NONE?merchantId=defaults-de')).body.check.currency).toBe('EUR');
    });

    it('secrets are never in clear: not in any file of the ledger, any row of any table, any answer after creation, nor any log line', async () => {
      // More of every kind, and a rotation of each (tokens, app token, API key, access tokens).
      const tokens = { square: fresh('sq-secret-access'), shopify: fresh('shp-secret-access'), clover: fresh('cl-secret-access'), loyverse: fresh('lv-secret-access') };
      const m = await createMerchant('secretive', {
        pos: {
          square: { merchantId: 'SQ-SECRETIVE', accessToken: tokens.square },
          shopify: { shopDomain: 'secretive.myshopify.com', accessToken: tokens.shopify },
          clover: { merchantId: 'CLOVERSECRET1', accessToken: tokens.clover },
          loyverse: { merchantId: 'lv-secretive', accessToken: tokens.loyverse },
        },
      });
      const rotated = await admin('post', `/v1/admin/merchants/${m.id}/tokens`);
      secrets.add(rotated.body.posToken).add(rotated.body.adminToken);
      const newAppToken = fresh('app-secretive-2');
      const newApiKey = fresh('key-secretive-2');
      const newSquareToken = fresh('sq-secret-access-2');
      secrets.add(newAppToken).add(newApiKey).add(newSquareToken);
      // The new app token must be an install the loyalty service knows.
      h.sim.addMerchant({ id: 'secretive-reinstalled', appToken: newAppToken, apiKey: newApiKey });
      const patched = await admin('patch', `/v1/admin/merchants/${m.id}`).send({ loyalty: { appToken: newAppToken, apiKey: newApiKey }, pos: { square: { accessToken: newSquareToken } } });
      expect(patched.status).toBe(200);
      expect(patched.body.loyalty).toEqual({ appToken: `…${newAppToken.slice(-4)}`, apiKey: `…${newApiKey.slice(-4)}` });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'SECRET-1' }), rotated.body.posToken)).body).toMatchObject({ status: 'accrued' });
      expect(h.sim.merchant('secretive-reinstalled').books().transactions['generic:SECRET-1']).toMatchObject({ accruals: 1 });

      // Every answer about merchants, after creation: masked.
      const answers = [
        await admin('get', '/v1/admin/merchants?limit=500'),
        ...(await Promise.all([...new Set(h.sim.merchants().map((s) => s.id))].map((id) => admin('get', `/v1/admin/merchants/${id}`)))),
      ].map((r) => r.text);
      const allSecrets = [...secrets];
      expect(allSecrets.length).toBeGreaterThan(40);
      const found = (texts: string[]) => allSecrets.filter((s) => texts.some((t) => t.includes(s)));
      expect(found(answers)).toEqual([]);

      // The ledger itself: every file under its folder, or every row of every table.
      const stored = schema ? await tablesText(schema.url) : filesText(h.dir);
      if (schema) expect(stored.sources).toEqual(expect.arrayContaining(['ledger_merchants', 'ledger_merchant_accounts', 'ledger_records', 'ledger_dead_letters']));
      else expect(stored.sources.some((f) => f.endsWith(join('ledger.merchants', 'secretive.json')))).toBe(true);
      // What is stored in clear is there: the search would see a secret.
      expect(stored.texts.join('\n')).toContain('SQ-SECRETIVE');
      expect(found(stored.texts)).toEqual([]);

      // The logs of the whole suite, at every level.
      expect(logLines.length).toBeGreaterThan(100);
      expect(logLines.join('')).toContain('merchant created');
      expect(found(logLines)).toEqual([]);
    });
  });
}
