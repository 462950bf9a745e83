/**
 * One captured delivery, one merchant (contract v1.5), over HTTP on both ledger stores. A POS app's
 * webhook secret is every merchant's, so a delivery signed for one merchant can be re-posted byte
 * for byte naming another in a header the signature does not cover. Each row here was seen in a
 * hostile probe before the rule:
 * - a signed Toast message whose body does not name its restaurant accrued for three merchants,
 *   one per `Toast-Restaurant-External-ID` it was posted with;
 * - on the file ledger, a Shopify delivery re-posted naming another shop after a restart with the
 *   clock 8 days ahead (past the 7 days webhook ids are kept) accrued again;
 * - a delivery dead-lettered for a suspended merchant, re-posted naming another shop, accrued there;
 *   replaying the letter then answered "duplicate" and marked it processed with no record behind it.
 * Where the signed body names the account, a header naming another is refused.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { toastAdapter } from '../../adapters/toast/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import type { SimMerchant } from '../../simulator/index.js';
import { ledgerKey } from '../../src/state/record.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { paidShopifyOrder, postRaw, signature } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const shopify: PosSettings = { webhookSecret: 'shpss_one_delivery_secret_0123', apiBaseUrl: '' };
const toast: PosSettings = { webhookSecret: 'toast-one-delivery-secret', apiBaseUrl: '' };
const TAKEN_ELSEWHERE = 'first taken for another account: a copy naming another is a duplicate';

const toastOrder = (guid: string) => ({
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
      customer: { entityType: 'Customer', firstName: 'Ann', lastName: 'Lee', phone: '+15550001111', email: null },
      appliedLoyaltyInfo: null,
      appliedDiscounts: [],
      appliedServiceCharges: [],
      selections: [{ guid: `${guid}-sel`, item: { guid: 'item-burger' }, itemGroup: { guid: 'group-mains' }, displayName: 'Burger', quantity: 1, price: 15, tax: 0.94, voided: false, refundDetails: null }],
      payments: [{ guid: `${guid}-pay`, amount: 15.94, tipAmount: 0, type: 'CREDIT', paymentStatus: 'CAPTURED', refundStatus: 'NONE', refund: null }],
    },
  ],
});

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`one captured delivery, one merchant, on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    const sims: Record<string, SimMerchant> = {};

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'one_delivery');
      h = await startHarness({
        env: schema ? { LEDGER_URL: schema.url } : {},
        overrides: { posSettings: { shopify, toast }, secretsKey: randomBytes(32).toString('base64'), startWorker: false },
      });
      for (const id of ['m-a', 'm-b', 'm-c']) {
        const installed = h.sim.addMerchant({ id, appToken: `app-${id}-${randomBytes(8).toString('hex')}` });
        const res = await admin('post', '/v1/admin/merchants').send({ id, loyalty: { appToken: installed.appToken }, pos: { shopify: { shopDomain: `${id}.myshopify.com` }, toast: { restaurantGuid: `restaurant-${id}` } } });
        expect(res.status).toBe(201);
        sims[id] = h.sim.merchant(id);
      }
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post' | 'patch', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    const accruals = (merchant: string, transactionId: string) => sims[merchant]!.books().transactions[transactionId]?.accruals ?? 0;

    /** Exactly these bytes, signed as Toast signs them, naming `restaurant` in the unsigned header. */
    const deliverToast = (raw: string, restaurant: string) => {
      const timestamp = String(Date.now());
      return postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [
        signature(toastAdapter, toast, raw, { 'Toast-Timestamp': timestamp }),
        ['Toast-Timestamp', timestamp],
        ['Toast-Event-Type', 'order_updated'],
        ['Toast-Restaurant-External-ID', restaurant],
      ]);
    };
    const toastMessage = (eventGuid: string, order: unknown, restaurantGuid?: string) =>
      JSON.stringify({ timestamp: new Date().toISOString(), eventCategory: 'orders', eventType: 'order_updated', guid: eventGuid, details: { ...(restaurantGuid ? { restaurantGuid } : {}), order } });
    /** Exactly these bytes, signed as Shopify signs them, naming `shop` in X-Shopify-Shop-Domain. */
    const deliverShopify = (raw: string, shop: string, eventId: string) =>
      postRaw(`${h.bridge.url}/v1/webhooks/shopify`, raw, [signature(shopifyAdapter, shopify, raw), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', eventId], ['X-Shopify-Shop-Domain', shop]]);

    it("Toast: a signed message naming no restaurant in its body, re-posted with the header naming two other restaurants, accrues once, for the first", async () => {
      const raw = toastMessage('evt-bind-1', toastOrder('order-bind-1'));
      const first = await deliverToast(raw, 'restaurant-m-a');
      expect(first.status).toBe(200);
      expect(first.body.results).toEqual([{ key: 'evt-bind-1:checkout:order-bind-1-check', action: 'checkout', transactionId: 'toast:order-bind-1:order-bind-1-check', status: 'accrued', merchantId: 'm-a' }]);
      for (const other of ['restaurant-m-b', 'restaurant-m-c']) {
        const copy = await deliverToast(raw, other);
        expect(copy.status).toBe(200);
        expect(copy.body.results).toEqual([{ key: 'evt-bind-1:checkout:order-bind-1-check', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      }
      // The first restaurant's own redelivery is its duplicate as ever.
      expect((await deliverToast(raw, 'restaurant-m-a')).body.results).toEqual([{ key: 'evt-bind-1:checkout:order-bind-1-check', action: 'checkout', duplicate: true, merchantId: 'm-a' }]);
      expect([accruals('m-a', 'toast:order-bind-1:order-bind-1-check'), accruals('m-b', 'toast:order-bind-1:order-bind-1-check'), accruals('m-c', 'toast:order-bind-1:order-bind-1-check')]).toEqual([1, 0, 0]);
      expect(await h.bridge.store.get(ledgerKey('m-b', 'toast:order-bind-1:order-bind-1-check'))).toBeUndefined();
      expect(await h.bridge.store.get(ledgerKey('m-c', 'toast:order-bind-1:order-bind-1-check'))).toBeUndefined();
      expect((await admin('get', '/v1/admin/dead-letters?merchantId=m-b')).body.total).toBe(0);
    });

    it('Toast: a signed body naming its restaurant, posted with a header naming another, is refused (400 account_mismatch) and nothing is kept', async () => {
      const raw = toastMessage('evt-mismatch-1', toastOrder('order-mismatch-1'), 'restaurant-m-a');
      const res = await deliverToast(raw, 'restaurant-m-b');
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'account_mismatch', message: expect.stringContaining('"restaurant-m-a"') });
      // The same bytes with the header agreeing are taken as usual.
      const agreeing = await deliverToast(raw, 'restaurant-m-a');
      expect(agreeing.body.results).toEqual([{ key: 'evt-mismatch-1:checkout:order-mismatch-1-check', action: 'checkout', transactionId: 'toast:order-mismatch-1:order-mismatch-1-check', status: 'accrued', merchantId: 'm-a' }]);
      expect([accruals('m-a', 'toast:order-mismatch-1:order-mismatch-1-check'), accruals('m-b', 'toast:order-mismatch-1:order-mismatch-1-check')]).toEqual([1, 0]);
      expect((await admin('get', '/v1/admin/dead-letters')).body.items.filter((l: { pos: string }) => l.pos === 'toast')).toEqual([]);
    });

    it('Shopify: after a restart with the clock 8 days ahead, the same bytes naming another shop under a new event id are still a duplicate', async () => {
      const raw = JSON.stringify(paidShopifyOrder(9101));
      const first = await deliverShopify(raw, 'm-a.myshopify.com', 'e0e0e0e0-9101-4e6a-9c1b-000000000001');
      expect(first.body.results).toEqual([{ key: 'event:e0e0e0e0-9101-4e6a-9c1b-000000000001', action: 'checkout', transactionId: 'shopify:9101', status: 'accrued', merchantId: 'm-a' }]);
      // Webhook event ids are kept 7 days; a binding for good. Only Date moves: timers run as ever.
      jest.useFakeTimers({ now: Date.now() + 8 * 24 * 3600_000, doNotFake: ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
      try {
        await h.restart();
        const copy = await deliverShopify(raw, 'm-b.myshopify.com', 'e0e0e0e0-9101-4e6a-9c1b-0000000000bb');
        expect(copy.status).toBe(200);
        expect(copy.body.results).toEqual([{ key: 'event:e0e0e0e0-9101-4e6a-9c1b-0000000000bb', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      } finally {
        jest.useRealTimers();
      }
      expect([accruals('m-a', 'shopify:9101'), accruals('m-b', 'shopify:9101')]).toEqual([1, 0]);
      expect(await h.bridge.store.get(ledgerKey('m-b', 'shopify:9101'))).toBeUndefined();
    });

    it("a dead letter's delivery re-posted naming another shop is a duplicate; the letter's replay acts for its own merchant, with the record behind it", async () => {
      expect((await admin('patch', '/v1/admin/merchants/m-c').send({ status: 'suspended' })).status).toBe(200);
      const raw = JSON.stringify(paidShopifyOrder(9201));
      const kept = await deliverShopify(raw, 'm-c.myshopify.com', 'e0e0e0e0-9201-4e6a-9c1b-000000000001');
      expect(kept.status).toBe(202);
      expect(kept.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', merchantId: 'm-c', reason: expect.stringMatching(/suspended/) })]);
      const letterId = kept.body.results[0].deadLetterId as string;

      // While the letter waits: the same bytes naming shop B, under the same or a new event id.
      for (const eventId of ['e0e0e0e0-9201-4e6a-9c1b-000000000001', 'e0e0e0e0-9201-4e6a-9c1b-0000000000bb']) {
        const copy = await deliverShopify(raw, 'm-b.myshopify.com', eventId);
        expect(copy.status).toBe(200);
        expect(copy.body.results).toEqual([{ key: `event:${eventId}`, action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      }
      expect(accruals('m-b', 'shopify:9201')).toBe(0);
      expect(await h.bridge.store.get(ledgerKey('m-b', 'shopify:9201'))).toBeUndefined();

      // Active again, the letter's replay accrues in its own merchant's books, and names the record.
      expect((await admin('patch', '/v1/admin/merchants/m-c').send({ status: 'active' })).status).toBe(200);
      const replay = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`);
      expect([replay.status, replay.body.error]).toEqual([200, undefined]);
      expect(replay.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'shopify:9201', status: 'accrued', merchantId: 'm-c' })]);
      expect(replay.body.deadLetter).toMatchObject({ resolvedAt: expect.any(String), replays: [expect.objectContaining({ outcome: 'processed: accrued', created: ['shopify:9201'] })] });
      expect(accruals('m-c', 'shopify:9201')).toBe(1);
      expect(await h.bridge.store.get(ledgerKey('m-c', 'shopify:9201'))).toMatchObject({ status: 'accrued' });
    });

    it("a letter whose event id another merchant's ledger remembered is run against its own ledger: processed only with its own record", async () => {
      expect((await admin('patch', '/v1/admin/merchants/m-c').send({ status: 'suspended' })).status).toBe(200);
      const raw = JSON.stringify(paidShopifyOrder(9301));
      const kept = await deliverShopify(raw, 'm-c.myshopify.com', 'e0e0e0e0-9301-4e6a-9c1b-000000000001');
      const letterId = kept.body.results[0].deadLetterId as string;
      // As a build before the binding left it: the event id (issued once across shops) remembered bare by another merchant.
      expect(await h.bridge.store.rememberWebhookEvent('shopify', 'event:e0e0e0e0-9301-4e6a-9c1b-000000000001')).toBe(true);
      expect((await admin('patch', '/v1/admin/merchants/m-c').send({ status: 'active' })).status).toBe(200);
      const replay = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`);
      expect([replay.status, replay.body.error]).toEqual([200, undefined]);
      expect(replay.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: 'shopify:9301', status: 'accrued', merchantId: 'm-c' })]);
      expect(accruals('m-c', 'shopify:9301')).toBe(1);
      // Replayed again: the ledger's repeat, with the record it found, and nothing sent.
      const again = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`);
      expect([again.status, again.body.error?.code]).toEqual([409, 'conflict']);
      expect(sims['m-c']!.books().accrueRequests).toBeGreaterThan(0);
      expect(accruals('m-c', 'shopify:9301')).toBe(1);
    });

    it('a letter whose signed bytes were first taken for another account fails its run, naming why, and is not marked processed', async () => {
      const raw = JSON.stringify(paidShopifyOrder(9401));
      // Taken for shop B first.
      const first = await deliverShopify(raw, 'm-b.myshopify.com', 'e0e0e0e0-9401-4e6a-9c1b-0000000000bb');
      expect(first.body.results).toEqual([expect.objectContaining({ transactionId: 'shopify:9401', status: 'accrued', merchantId: 'm-b' })]);
      // A letter of m-c holding the same bytes, as a build before the binding kept it (a copy naming
      // shop C while m-c was suspended): nothing a live delivery can make now.
      const letterId = 'legacy-letter-9401';
      const at = new Date().toISOString();
      await h.bridge.store.updateDeadLetter(letterId, () => ({
        id: letterId,
        pos: 'shopify',
        merchantId: 'm-c',
        receivedAt: at,
        lastReceivedAt: at,
        deliveries: 1,
        reason: 'merchant m-c is suspended: nothing is recorded or sent for it until it is active again',
        reasonCode: 'merchant_suspended',
        headers: { 'x-shopify-topic': 'orders/paid', 'x-shopify-shop-domain': 'm-c.myshopify.com', 'x-shopify-event-id': 'e0e0e0e0-9401-4e6a-9c1b-0000000000cc' },
        body: raw,
        bodyEncoding: 'utf8',
        replays: [],
        retry: { transient: false, attempts: 0 },
      }));
      const replay = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`);
      expect(replay.status).toBe(422);
      expect(replay.body.error).toMatchObject({ code: 'replay_failed', message: expect.stringMatching(/first taken for another account/) });
      expect(replay.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', deadLetterId: letterId, reason: expect.stringMatching(/first taken for another account/) })]);
      const letter = (await admin('get', `/v1/admin/dead-letters/${letterId}`)).body;
      expect(letter.resolvedAt).toBeUndefined();
      expect(letter.replays).toEqual([expect.objectContaining({ by: 'operator', outcome: expect.stringMatching(/^failed: .*first taken for another account/) })]);
      expect([accruals('m-b', 'shopify:9401'), accruals('m-c', 'shopify:9401')]).toEqual([1, 0]);
      expect(await h.bridge.store.get(ledgerKey('m-c', 'shopify:9401'))).toBeUndefined();
    });
  });
}
