/**
 * Shopify end to end over HTTP: webhooks signed the way Shopify signs them (base64 HMAC-SHA256 of
 * the raw body) → the simulator's books show the exact accrue and reverse, once each; bad
 * signatures record nothing; untranslatable authentic deliveries become replayable dead letters;
 * the bare Shopify objects posted to /v1/checkouts|refunds/shopify do the same.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, startHarness, type Harness, postJson } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const settings: PosSettings = { webhookSecret: 'shpss_e2e_secret_0123456789', apiBaseUrl: '' };
const fixtureText = (name: string) => readFileSync(new URL(`../fixtures/shopify/${name}`, import.meta.url), 'utf8');

const cad = (amount: string) => ({ shop_money: { amount, currency_code: 'CAD' }, presentment_money: { amount, currency_code: 'CAD' } });

/**
 * The Shopify POS order that refunds_create_pos_partial_CAD.json partly refunds: its refunded line
 * (4 × 39.99 less a 15.99 discount, GST 5 % + RST 7 % on top) and a second line that stays sold.
 */
const cadOrder = {
  id: 6022498320664,
  name: '#194467',
  currency: 'CAD',
  financial_status: 'paid',
  source_name: 'pos',
  taxes_included: false,
  created_at: '2024-09-09T12:29:40-05:00',
  processed_at: '2024-09-09T12:30:24-05:00',
  email: 'pat.doe@example.com',
  phone: null,
  customer: { id: 9001, email: 'pat.doe@example.com', phone: '+12045550123', first_name: 'Pat', last_name: 'Doe' },
  line_items: [
    {
      id: 15075349889304,
      variant_id: 24199708868672,
      product_id: 2621168156736,
      sku: 'PRC35120',
      title: 'Dazzle Pristiva Premium Salt (18.1kg) (P/N: PRC35120)',
      name: 'Dazzle Pristiva Premium Salt (18.1kg) (P/N: PRC35120)',
      quantity: 4,
      price: '39.99',
      price_set: cad('39.99'),
      discount_allocations: [{ amount: '15.99', amount_set: cad('15.99'), discount_application_index: 0 }],
      tax_lines: [
        { title: 'GST', rate: 0.05, price: '7.20', price_set: cad('7.20') },
        { title: 'RST', rate: 0.07, price: '10.08', price_set: cad('10.08') },
      ],
    },
    {
      id: 15075349922072,
      variant_id: 24199708901440,
      product_id: 2621168189504,
      sku: 'FLT-200',
      title: 'Softener filter',
      name: 'Softener filter',
      quantity: 3,
      price: '29.99',
      price_set: cad('29.99'),
      discount_allocations: [],
      tax_lines: [
        { title: 'GST', rate: 0.05, price: '4.50', price_set: cad('4.50') },
        { title: 'RST', rate: 0.07, price: '6.30', price_set: cad('6.30') },
      ],
    },
  ],
  shipping_lines: [],
  total_discounts: '15.99',
  subtotal_price: '233.94',
  subtotal_price_set: cad('233.94'),
  total_tax: '28.08',
  total_tax_set: cad('28.08'),
  total_tip_received: '0.00',
  total_price: '262.02',
  total_price_set: cad('262.02'),
};
const ORDER_TX = 'shopify:6022498320664';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ overrides: { adapters: new Map([['shopify', shopifyAdapter]]), posSettings: { shopify: settings } } });
});
afterEach(async () => {
  await h.close();
});

/** A delivery as Shopify sends it: the exact bytes, the HMAC of them, the topic and the event id. */
function deliver(body: string, topic: string, eventId: string, extra: [string, string][] = []) {
  return postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [
    signature(shopifyAdapter, settings, body),
    ['X-Shopify-Topic', topic],
    ['X-Shopify-Event-Id', eventId],
    ['X-Shopify-Webhook-Id', `w-${eventId}`],
    ['X-Shopify-Shop-Domain', 'salt-shop.myshopify.com'],
    ['X-Shopify-API-Version', '2024-07'],
    ...extra,
  ]);
}
const admin = (path: string) => request(h.bridge.url).get(path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

describe('Shopify webhooks', () => {
  it('orders/paid accrues the exact amount once; the same delivery again calls nothing', async () => {
    const body = JSON.stringify(cadOrder);
    const first = await deliver(body, 'orders/paid', 'evt-paid-1');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ pos: 'shopify', results: [{ key: 'event:evt-paid-1', action: 'checkout', transactionId: ORDER_TX, status: 'accrued' }] });
    expect(h.sim.books().transactions[ORDER_TX]).toMatchObject({ accruals: 1, reversals: 0, amount: 23394 });
    const record = await h.bridge.store.get(ORDER_TX);
    expect(record!.accrual.check).toMatchObject({
      amount: 23394,
      currency: 'CAD',
      taxAmount: 2808,
      discountAmount: 1599,
      selections: [
        { id: '24199708868672', groupId: '2621168156736', quantity: 4, price: 3999, totalPrice: 14397 },
        { id: '24199708901440', groupId: '2621168189504', quantity: 3, price: 2999, totalPrice: 8997 },
      ],
    });
    expect(record!.accrual.customer).toEqual({ phone: '+12045550123', email: 'pat.doe@example.com', firstName: 'Pat', lastName: 'Doe' });

    const again = await deliver(body, 'orders/paid', 'evt-paid-1');
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ key: 'event:evt-paid-1', action: 'checkout', duplicate: true }]);
    // orders/create of the same paid order (another event) is a repeat of the order: no new accrue.
    const created = await deliver(body, 'orders/create', 'evt-create-1');
    expect(created.body.results[0]).toMatchObject({ action: 'checkout', transactionId: ORDER_TX, status: 'accrued', duplicate: true });
    expect(h.sim.books().accrueRequests).toBe(1);
    expect(h.sim.books().doubleAccruals).toEqual([]);
  });

  it('refunds/create (the real CAD POS refund) reverses once and accrues what remains', async () => {
    await deliver(JSON.stringify(cadOrder), 'orders/paid', 'evt-paid-2');
    const refundBody = fixtureText('refunds_create_pos_partial_CAD.json');
    const res = await deliver(refundBody, 'refunds/create', 'evt-refund-1');
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: 'event:evt-refund-1', action: 'refund', transactionId: ORDER_TX, status: 'reversed' }]);
    const books = h.sim.books();
    expect(books.transactions[ORDER_TX]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${ORDER_TX}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 8997 });
    const remainder = await h.bridge.store.get(`${ORDER_TX}~r1`);
    expect(remainder!.accrual.check!.selections).toEqual([{ id: '24199708901440', groupId: '2621168189504', displayName: 'Softener filter', quantity: 3, price: 2999, totalPrice: 8997 }]);

    const again = await deliver(refundBody, 'refunds/create', 'evt-refund-1');
    expect(again.body.results).toEqual([{ key: 'event:evt-refund-1', action: 'refund', duplicate: true }]);
    // Retried by Shopify under another event id, the refund id still changes nothing.
    const retried = await deliver(refundBody, 'refunds/create', 'evt-refund-1b');
    expect(retried.body.results[0]).toMatchObject({ action: 'refund', duplicate: true });
    expect(h.sim.books().reverseRequests).toBe(1);
    expect(h.sim.books().accrueRequests).toBe(2);
    expect(h.sim.books().doubleReversals).toEqual([]);
  });

  it('a wrong, missing or repeated signature is 401 and records nothing', async () => {
    const body = JSON.stringify(cadOrder);
    const [name] = signature(shopifyAdapter, settings, body);
    const [, wrong] = signature(shopifyAdapter, { ...settings, webhookSecret: 'not-the-secret' }, body);
    const [, good] = signature(shopifyAdapter, settings, body);
    const url = `${h.bridge.url}/v1/webhooks/shopify`;
    const topic: [string, string] = ['X-Shopify-Topic', 'orders/paid'];
    for (const headers of [[[name, wrong], topic], [topic], [[name, ''], topic], [[name, good], [name, good], topic]] as [string, string][][]) {
      const res = await postRaw(url, body, headers);
      expect(res.status).toBe(401);
    }
    // Signed, then altered in transit: one byte off is a different body.
    const tampered = await postRaw(url, body.replace('233.94', '933.94'), [[name, good], topic]);
    expect(tampered.status).toBe(401);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect((await h.bridge.store.list({ offset: 0, limit: 10 })).total).toBe(0);
    expect((await admin('/v1/admin/dead-letters')).body.total).toBe(0);
  });

  it('an untranslatable authentic delivery is a dead letter answered 202 (so Shopify neither retries nor disables the subscription), listed and replayable', async () => {
    // Shopify's own 2016 order fixture: its lines add up to 597.00, its subtotal_price says 398.00.
    const body = fixtureText('order_fixture_shopify_python_api.json');
    const res = await deliver(body, 'orders/paid', 'evt-bad-1');
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([
      expect.objectContaining({
        action: 'dead_lettered',
        issues: [{ field: 'order.subtotal_price', message: 'is 398.00, but the line items after their discount allocations add up to 597.00: the bridge cannot tell which is the amount sold' }],
      }),
    ]);
    const id = res.body.results[0].deadLetterId as string;
    expect(id).toEqual(expect.any(String));

    // Shopify retries the same payload: still one dead letter, with the deliveries counted.
    expect((await deliver(body, 'orders/paid', 'evt-bad-1')).body.results[0].deadLetterId).toBe(id);
    const list = await admin('/v1/admin/dead-letters');
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(1);
    // The list is summaries; the detail (unmasked, as an operator asks for it) has the delivery kept whole.
    expect(list.body.items[0]).toMatchObject({ id, pos: 'shopify', deliveries: 2 });
    expect(list.body.items[0].body).toBeUndefined();
    const detail = await admin(`/v1/admin/dead-letters/${id}?unmask=true`);
    expect(detail.body).toMatchObject({ id, body, masked: false });
    expect(detail.body.headers['x-shopify-topic']).toBe('orders/paid');

    const replay = await request(h.bridge.url).post(`/v1/admin/dead-letters/${id}/replay`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(replay.status).toBe(422);
    expect(replay.body.error.message).toMatch(/order\.subtotal_price: is 398\.00/);
    expect(replay.body.deadLetter.replays).toHaveLength(1);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect((await h.bridge.store.list({ offset: 0, limit: 10 })).total).toBe(0);
  });

  it('topics the bridge does not act on, and shipping-only refunds, are acknowledged with the reason and change nothing', async () => {
    const cancelled = await deliver(JSON.stringify(cadOrder), 'orders/cancelled', 'evt-cancel-1');
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.results).toEqual([{ key: 'event:evt-cancel-1', action: 'ignored', reason: 'a cancellation itself changes nothing: money given back arrives as refunds/create' }]);
    const shippingOnly = JSON.stringify({ id: 1, order_id: cadOrder.id, refund_line_items: [], order_adjustments: [{ kind: 'shipping_refund', amount: '-9.00', tax_amount: '0.00' }], transactions: [{ amount: '9.00', kind: 'refund', status: 'success', currency: 'CAD' }] });
    const ignored = await deliver(shippingOnly, 'refunds/create', 'evt-ship-1');
    expect(ignored.status).toBe(200);
    expect(ignored.body.results[0]).toMatchObject({ action: 'ignored', reason: 'the refund returns only shipping, which is not part of the accrued amount: nothing to reverse' });
    expect(h.sim.books().accrueRequests + h.sim.books().reverseRequests).toBe(0);
    expect((await h.bridge.store.list({ offset: 0, limit: 10 })).total).toBe(0);
  });
});

describe('Shopify objects posted directly', () => {
  it('POST /v1/checkouts/shopify (bare order) accrues; the API wrapper { order } is the same order; POST /v1/refunds/shopify (bare refund) reverses the refunded part', async () => {
    const res = await post('/v1/checkouts/shopify', cadOrder);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: ORDER_TX, status: 'accrued', repeat: false, orderId: '6022498320664' });
    expect(res.body.results[0]).toMatchObject({ isSuccess: true, checkAmount: 23394 });
    const wrapped = await post('/v1/checkouts/shopify', { order: cadOrder });
    expect(wrapped.body).toMatchObject({ transactionId: ORDER_TX, repeat: true });

    const refund = await post('/v1/refunds/shopify', JSON.parse(fixtureText('refunds_create_pos_partial_CAD.json')));
    expect(refund.status).toBe(200);
    expect(refund.body).toMatchObject({ transactionId: ORDER_TX, status: 'reversed', refundId: '975224602904', remainder: { transactionId: `${ORDER_TX}~r1`, status: 'accrued' } });
    const books = h.sim.books();
    expect(books.transactions[ORDER_TX]).toMatchObject({ accruals: 1, reversals: 1, amount: 23394 });
    expect(books.transactions[`${ORDER_TX}~r1`]).toMatchObject({ accruals: 1, amount: 8997 });
    expect(books.accrueRequests).toBe(2);
    expect(books.reverseRequests).toBe(1);
  });

  it('a bad Shopify object posted directly is a 400 naming the field, and nothing is recorded', async () => {
    const res = await post('/v1/checkouts/shopify', { ...cadOrder, subtotal_price: '233.95', subtotal_price_set: undefined });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ field: 'subtotal_price', message: 'is 233.95, but the line items after their discount allocations add up to 233.94: the bridge cannot tell which is the amount sold' }]);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});
