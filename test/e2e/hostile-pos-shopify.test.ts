/**
 * Shopify deliveries from a hostile probe (issue 19), over HTTP, on both ledger stores: two merchants
 * whose shops installed the same app (one webhook secret), so a genuine delivery for shop A can be
 * re-posted byte for byte, HMAC and all, naming shop B (or the default merchant's own shop) in
 * `X-Shopify-Shop-Domain`, which the HMAC does not cover. A delivery already taken is a duplicate for every merchant (contract v1.4);
 * Shopify's header names without `X-` are read as well (and two different values under both names
 * are refused); an empty body with a valid HMAC is kept and the answer says "empty body"; a 12 KB
 * shop domain is echoed nowhere whole.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { DEFAULT_MERCHANT } from '../../src/state/merchant.js';
import { ledgerKey } from '../../src/state/record.js';
import type { PosSettings } from '../../src/pos/contract.js';
import type { SimMerchant } from '../../simulator/index.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature, paidShopifyOrder } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const shopify: PosSettings = { webhookSecret: 'shpss_hostile_secret_0123456789', apiBaseUrl: '' };
const SHOP_A = 'shop-a.myshopify.com';
const SHOP_B = 'shop-b.myshopify.com';
/** The default merchant's own shop (its SHOPIFY_SHOP_DOMAIN): a delivery naming it is the default merchant's. */
const SHOP_DEFAULT = 'shop-default.myshopify.com';

/** What a copy of a delivery first taken for another shop is answered: a duplicate naming no merchant (contract v1.5). */
const TAKEN_ELSEWHERE = 'first taken for another account: a copy naming another is a duplicate';

/** A paid Shopify order: 1000 cents. */
const order = (id: number) => paidShopifyOrder(id);

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`hostile Shopify deliveries on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let a: SimMerchant;
    let b: SimMerchant;

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'hostile_shopify');
      h = await startHarness({ env: schema ? { LEDGER_URL: schema.url } : {}, overrides: { posSettings: { shopify: { ...shopify, account: SHOP_DEFAULT } }, secretsKey: randomBytes(32).toString('base64'), startWorker: false } });
      for (const [id, shop] of [
        ['shop-a', SHOP_A],
        ['shop-b', SHOP_B],
      ] as const) {
        const installed = h.sim.addMerchant({ id, appToken: `app-${id}-${randomBytes(8).toString('hex')}` });
        const res = await admin('post', '/v1/admin/merchants').send({ id, loyalty: { appToken: installed.appToken }, pos: { shopify: { shopDomain: shop } } });
        expect(res.status).toBe(201);
      }
      a = h.sim.merchant('shop-a');
      b = h.sim.merchant('shop-b');
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    /** Exactly these bytes, signed as Shopify signs them (the bridge's test signer), with these other headers. */
    const deliver = (raw: string, headers: [string, string][]) => postRaw(`${h.bridge.url}/v1/webhooks/shopify`, raw, [signature(shopifyAdapter, shopify, raw), ...headers]);
    const ofShop = (shop: string, eventId: string): [string, string][] => [
      ['X-Shopify-Topic', 'orders/paid'],
      ['X-Shopify-Event-Id', eventId],
      ['X-Shopify-Webhook-Id', `w-${eventId}`],
      ['X-Shopify-Shop-Domain', shop],
    ];
    const accruals = (m: SimMerchant, orderId: number) => m.books().transactions[`shopify:${orderId}`]?.accruals ?? 0;
    const openLetters = async () => (await admin('get', '/v1/admin/dead-letters')).body.items as { id: string; reason: string }[];

    it("row 1: shop A's delivery re-posted with the same bytes and HMAC naming shop B is a duplicate: accrued once, in A's books only", async () => {
      const raw = JSON.stringify(order(7001));
      const first = await deliver(raw, ofShop(SHOP_A, 'b2f3c1d0-7001-4e6a-9c1b-000000000001'));
      expect(first.status).toBe(200);
      expect(first.body.results).toEqual([{ key: 'event:b2f3c1d0-7001-4e6a-9c1b-000000000001', action: 'checkout', transactionId: 'shopify:7001', status: 'accrued', merchantId: 'shop-a' }]);

      const copy = await deliver(raw, ofShop(SHOP_B, 'b2f3c1d0-7001-4e6a-9c1b-000000000001'));
      expect(copy.status).toBe(200);
      expect(copy.body.results).toEqual([{ key: 'event:b2f3c1d0-7001-4e6a-9c1b-000000000001', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      expect(accruals(a, 7001)).toBe(1);
      expect(accruals(b, 7001)).toBe(0);
      expect(a.books().doubleAccruals).toEqual([]);
      expect(b.books().accrueRequests).toBe(0);
      expect(await h.bridge.store.get(ledgerKey('shop-b', 'shopify:7001'))).toBeUndefined();
      expect(await h.bridge.store.get(ledgerKey('shop-a', 'shopify:7001'))).toMatchObject({ status: 'accrued' });
    });

    it("row 1: shop A's delivery re-posted naming the default merchant's shop (same event id, another, or none) is a duplicate: nothing accrued for the default merchant", async () => {
      const raw = JSON.stringify(order(7051));
      const defaultBefore = h.sim.books().accrueRequests;
      const first = await deliver(raw, ofShop(SHOP_A, 'b2f3c1d0-7051-4e6a-9c1b-000000000051'));
      expect(first.status).toBe(200);
      expect(first.body.results).toEqual([{ key: 'event:b2f3c1d0-7051-4e6a-9c1b-000000000051', action: 'checkout', transactionId: 'shopify:7051', status: 'accrued', merchantId: 'shop-a' }]);

      // No merchant is named: none of the others holds a record of it.
      const sameId = await deliver(raw, ofShop(SHOP_DEFAULT, 'b2f3c1d0-7051-4e6a-9c1b-000000000051'));
      expect(sameId.status).toBe(200);
      expect(sameId.body.results).toEqual([{ key: 'event:b2f3c1d0-7051-4e6a-9c1b-000000000051', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      const otherId = await deliver(raw, ofShop(SHOP_DEFAULT, 'deadbeef-7051-4e6a-9c1b-0000000000de'));
      expect(otherId.status).toBe(200);
      expect(otherId.body.results).toEqual([{ key: 'event:deadbeef-7051-4e6a-9c1b-0000000000de', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      const noId = await deliver(raw, [
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Shop-Domain', SHOP_DEFAULT],
      ]);
      expect(noId.status).toBe(200);
      expect(noId.body.results).toEqual([{ key: 'orders/paid:7051', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);

      expect(accruals(a, 7051)).toBe(1);
      expect(a.books().doubleAccruals).toEqual([]);
      expect(h.sim.books().transactions['shopify:7051']).toBeUndefined();
      expect(h.sim.books().accrueRequests).toBe(defaultBefore);
      expect(await h.bridge.store.get(ledgerKey(DEFAULT_MERCHANT, 'shopify:7051'))).toBeUndefined();
      expect(await h.bridge.store.get(ledgerKey('shop-a', 'shopify:7051'))).toMatchObject({ status: 'accrued' });
    });

    it("row 1: the default merchant's own delivery re-posted naming shop A is a duplicate: accrued once, in the default merchant's books only", async () => {
      const raw = JSON.stringify(order(7052));
      const first = await deliver(raw, ofShop(SHOP_DEFAULT, 'b2f3c1d0-7052-4e6a-9c1b-000000000052'));
      expect(first.status).toBe(200);
      expect(first.body.results).toEqual([{ key: 'event:b2f3c1d0-7052-4e6a-9c1b-000000000052', action: 'checkout', transactionId: 'shopify:7052', status: 'accrued' }]);

      const sameId = await deliver(raw, ofShop(SHOP_A, 'b2f3c1d0-7052-4e6a-9c1b-000000000052'));
      expect(sameId.body.results).toEqual([{ key: 'event:b2f3c1d0-7052-4e6a-9c1b-000000000052', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      const otherId = await deliver(raw, ofShop(SHOP_A, 'deadbeef-7052-4e6a-9c1b-0000000000aa'));
      expect(otherId.body.results).toEqual([{ key: 'event:deadbeef-7052-4e6a-9c1b-0000000000aa', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);

      expect(h.sim.books().transactions['shopify:7052']?.accruals).toBe(1);
      expect(h.sim.books().doubleAccruals).toEqual([]);
      expect(accruals(a, 7052)).toBe(0);
      expect(await h.bridge.store.get(ledgerKey('shop-a', 'shopify:7052'))).toBeUndefined();
      expect(await h.bridge.store.get(ledgerKey(DEFAULT_MERCHANT, 'shopify:7052'))).toMatchObject({ status: 'accrued' });
    });

    it("row 1: an event a merchant remembered before the rule (under its own prefix) is still that merchant's duplicate", async () => {
      // What an earlier build remembered for shop A: the key under A's prefix.
      expect(await h.bridge.store.rememberWebhookEvent('shopify', 'shop-a/event:a1b2c3d4-7010-4e6a-9c1b-000000000010')).toBe(true);
      const res = await deliver(JSON.stringify(order(7010)), ofShop(SHOP_A, 'a1b2c3d4-7010-4e6a-9c1b-000000000010'));
      expect(res.status).toBe(200);
      expect(res.body.results).toEqual([{ key: 'event:a1b2c3d4-7010-4e6a-9c1b-000000000010', action: 'checkout', duplicate: true, merchantId: 'shop-a' }]);
      expect(accruals(a, 7010)).toBe(0);
    });

    it('row 1: an older delivery carrying only X-Shopify-Webhook-Id is a duplicate for every merchant as well, and two copies posted at once are one accrual', async () => {
      const raw = JSON.stringify(order(7002));
      const onlyWebhookId = (shop: string): [string, string][] => [
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Webhook-Id', 'c0ffee00-7002-4e6a-9c1b-000000000002'],
        ['X-Shopify-Shop-Domain', shop],
      ];
      const [toA, toB] = await Promise.all([deliver(raw, onlyWebhookId(SHOP_A)), deliver(raw, onlyWebhookId(SHOP_B))]);
      const results = [toA.body.results[0], toB.body.results[0]];
      expect(results.filter((r) => r.status === 'accrued' && !r.duplicate)).toHaveLength(1);
      expect(results.filter((r) => r.duplicate === true && r.transactionId === undefined)).toHaveLength(1);
      expect(accruals(a, 7002) + accruals(b, 7002)).toBe(1);
    });

    it("row 1: the signed bytes re-posted naming shop B under another event id, or none (neither is signed), are still a duplicate", async () => {
      const raw = JSON.stringify(order(7041));
      expect((await deliver(raw, ofShop(SHOP_A, 'd00dfeed-7041-4e6a-9c1b-000000000004'))).body.results).toEqual([
        { key: 'event:d00dfeed-7041-4e6a-9c1b-000000000004', action: 'checkout', transactionId: 'shopify:7041', status: 'accrued', merchantId: 'shop-a' },
      ]);
      const newId = await deliver(raw, ofShop(SHOP_B, 'deadbeef-7041-4e6a-9c1b-00000000000b'));
      expect(newId.body.results).toEqual([{ key: 'event:deadbeef-7041-4e6a-9c1b-00000000000b', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      const noId = await deliver(raw, [
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Shop-Domain', SHOP_B],
      ]);
      expect(noId.body.results).toEqual([{ key: 'orders/paid:7041', action: 'checkout', duplicate: true, reason: TAKEN_ELSEWHERE }]);
      expect(accruals(a, 7041)).toBe(1);
      expect(accruals(b, 7041)).toBe(0);
      expect(await h.bridge.store.get(ledgerKey('shop-b', 'shopify:7041'))).toBeUndefined();
    });

    it("row 1: without Shopify's ids, the key built from the topic and order id still makes the shop's own redelivery a duplicate", async () => {
      const raw = JSON.stringify(order(7003));
      const bare = (shop: string): [string, string][] => [
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Shop-Domain', shop],
      ];
      expect((await deliver(raw, bare(SHOP_A))).body.results).toEqual([{ key: 'orders/paid:7003', action: 'checkout', transactionId: 'shopify:7003', status: 'accrued', merchantId: 'shop-a' }]);
      expect((await deliver(raw, bare(SHOP_A))).body.results).toEqual([{ key: 'orders/paid:7003', action: 'checkout', duplicate: true, merchantId: 'shop-a' }]);
      expect(accruals(a, 7003)).toBe(1);
    });

    it("row 2: Shopify's header names without X- are read as the X- ones: attributed by shopify-shop-domain, deduplicated on shopify-event-id", async () => {
      const raw = JSON.stringify(order(7004));
      const [, hmac] = signature(shopifyAdapter, shopify, raw);
      const unprefixed: [string, string][] = [
        ['shopify-hmac-sha256', hmac],
        ['shopify-topic', 'orders/paid'],
        ['shopify-event-id', 'd00dfeed-7004-4e6a-9c1b-000000000004'],
        ['shopify-webhook-id', 'w-7004'],
        ['shopify-shop-domain', SHOP_A],
      ];
      const url = `${h.bridge.url}/v1/webhooks/shopify`;
      const first = await postRaw(url, raw, unprefixed);
      expect(first.status).toBe(200);
      expect(first.body.results).toEqual([{ key: 'event:d00dfeed-7004-4e6a-9c1b-000000000004', action: 'checkout', transactionId: 'shopify:7004', status: 'accrued', merchantId: 'shop-a' }]);
      // The same delivery under the X- names, and under both names with equal values: one event.
      const prefixed = await deliver(raw, ofShop(SHOP_A, 'd00dfeed-7004-4e6a-9c1b-000000000004'));
      expect(prefixed.body.results).toEqual([{ key: 'event:d00dfeed-7004-4e6a-9c1b-000000000004', action: 'checkout', duplicate: true, merchantId: 'shop-a' }]);
      const both = await postRaw(url, raw, [...unprefixed, ['X-Shopify-Hmac-Sha256', hmac], ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Shop-Domain', SHOP_A]]);
      expect(both.status).toBe(200);
      expect(both.body.results).toEqual([{ key: 'event:d00dfeed-7004-4e6a-9c1b-000000000004', action: 'checkout', duplicate: true, merchantId: 'shop-a' }]);
      expect(accruals(a, 7004)).toBe(1);
    });

    it('row 2: both names with different values are a 400 naming the header, and nothing is recorded or kept', async () => {
      const raw = JSON.stringify(order(7005));
      const [, hmac] = signature(shopifyAdapter, shopify, raw);
      const [, otherHmac] = signature(shopifyAdapter, shopify, JSON.stringify(order(7006)));
      const url = `${h.bridge.url}/v1/webhooks/shopify`;
      const lettersBefore = (await openLetters()).length;
      for (const [conflict, header] of [
        [[['X-Shopify-Hmac-Sha256', hmac], ['shopify-hmac-sha256', otherHmac], ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Shop-Domain', SHOP_A]], 'x-shopify-hmac-sha256'],
        [[['X-Shopify-Hmac-Sha256', hmac], ['X-Shopify-Topic', 'orders/paid'], ['shopify-topic', 'orders/cancelled'], ['X-Shopify-Shop-Domain', SHOP_A]], 'x-shopify-topic'],
        [[['X-Shopify-Hmac-Sha256', hmac], ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Shop-Domain', SHOP_A], ['shopify-shop-domain', SHOP_B]], 'x-shopify-shop-domain'],
        [[['X-Shopify-Hmac-Sha256', hmac], ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', 'e-1'], ['shopify-event-id', 'e-2'], ['X-Shopify-Shop-Domain', SHOP_A]], 'x-shopify-event-id'],
      ] as [[string, string][], string][]) {
        const res = await postRaw(url, raw, conflict);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_payload', issues: [{ field: header, message: expect.stringMatching(/^is also sent as shopify-/) }] });
      }
      expect(accruals(a, 7005) + accruals(b, 7005)).toBe(0);
      expect(await h.bridge.store.get(ledgerKey('shop-a', 'shopify:7005'))).toBeUndefined();
      expect(await openLetters()).toHaveLength(lettersBefore);
    });

    it('an empty body with a valid HMAC is kept as a dead letter, and the answer says "empty body"', async () => {
      const accrued = a.books().accrueRequests + b.books().accrueRequests;
      const res = await deliver('', [
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Event-Id', 'e-empty-1'],
        ['X-Shopify-Shop-Domain', SHOP_A],
      ]);
      expect(res.status).toBe(202);
      expect(res.body.results).toEqual([expect.objectContaining({ key: 'delivery', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/^empty body: /) })]);
      const letter = (await openLetters()).find((l) => l.id === res.body.results[0].deadLetterId);
      expect(letter?.reason).toMatch(/^empty body: /);
      expect(a.books().accrueRequests + b.books().accrueRequests).toBe(accrued);
    });

    it('row 11: a 12 KB shop domain is echoed nowhere whole: not in the answer, the dead letter or the attention queue', async () => {
      const hugeShop = `${'x'.repeat(12 * 1024)}.myshopify.com`;
      const raw = JSON.stringify(order(7007));
      const res = await deliver(raw, ofShop(hugeShop, 'e-huge-1'));
      expect(res.status).toBe(202);
      expect(res.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', reason: expect.stringMatching(/^no merchant has the shopify account "x+…"$/) })]);
      expect(res.text.length).toBeLessThan(1000);
      expect(res.text).not.toContain('x'.repeat(201));

      const letterId = res.body.results[0].deadLetterId as string;
      const letter = await admin('get', `/v1/admin/dead-letters/${letterId}?unmask=true`);
      expect(letter.status).toBe(200);
      expect(letter.body.reason.length).toBeLessThan(500);
      expect(letter.text).not.toContain('x'.repeat(201));
      const attention = await admin('get', '/v1/admin/attention');
      expect(attention.status).toBe(200);
      expect(attention.text).toContain(letterId);
      expect(attention.text).not.toContain('x'.repeat(201));
      expect(a.books().transactions['shopify:7007']).toBeUndefined();
      expect(b.books().transactions['shopify:7007']).toBeUndefined();
    });
  });
}
