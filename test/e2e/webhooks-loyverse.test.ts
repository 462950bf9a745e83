/**
 * Loyverse end to end over HTTP: `receipts.update` deliveries signed like Loyverse (HMAC-SHA1 of the
 * raw body in X-Loyverse-Signature) → the simulator's books; the customer fetched from a local fake
 * of the Loyverse API; dead letters; and the bare receipts on /v1/checkouts and /v1/refunds.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { genericAdapter } from '../../adapters/generic/index.js';
import { loyverseAdapter } from '../../adapters/loyverse/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, startHarness, type Harness, postJson } from '../support/harness.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { postRaw, signature } from '../support/webhooks.js';

const STORE = '5b1d4c1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e';
const TX = `loyverse:${STORE}:1-1001`;
const fixtureText = readFileSync(new URL('../fixtures/loyverse/receipts_update_webhook_pipedream_test_event.json', import.meta.url), 'utf8');

type Json = Record<string, unknown>;

const latte = (overrides: Json = {}): Json => ({
  id: 'line-1',
  item_id: 'item-latte',
  variant_id: 'var-latte-l',
  item_name: 'Latte',
  variant_name: 'Large',
  quantity: 2,
  price: 4.5,
  gross_total_money: 9,
  total_money: 8.1,
  total_discount: 0.9,
  line_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 0.81 }],
  ...overrides,
});
const cake = (overrides: Json = {}): Json => ({
  id: 'line-2',
  item_id: 'item-cake',
  variant_id: 'var-cake',
  item_name: 'Cake',
  quantity: 1,
  price: 3.25,
  gross_total_money: 3.25,
  total_money: 3.25,
  total_discount: 0,
  line_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 0.33 }],
  ...overrides,
});
/** Check.amount 12.35: lines 11.35 after discounts + surcharge 1.00; tax 1.14 and tip 2.00 excluded. */
const sale = (overrides: Json = {}): Json => ({
  receipt_number: '1-1001',
  receipt_type: 'SALE',
  refund_for: null,
  created_at: '2026-11-21T10:20:00.000Z',
  updated_at: '2026-11-21T10:20:00.000Z',
  receipt_date: '2026-11-21T10:19:58.000Z',
  cancelled_at: null,
  total_money: 15.49,
  total_tax: 1.14,
  total_discount: 0.9,
  tip: 2,
  surcharge: 1,
  customer_id: 'cust-1',
  store_id: STORE,
  line_items: [latte(), cake()],
  payments: [{ payment_type_id: 'pt-1', name: 'Card', money_amount: 15.49 }],
  ...overrides,
});
/** One latte back: 4.05 (tax 0.41 excluded). */
const refund = (overrides: Json = {}): Json => ({
  ...sale(),
  receipt_number: '1-1003',
  receipt_type: 'REFUND',
  refund_for: '1-1001',
  updated_at: '2026-11-21T11:00:00.000Z',
  total_money: 4.46,
  total_tax: 0.41,
  total_discount: 0.45,
  tip: 0,
  surcharge: 0,
  line_items: [latte({ id: 'line-9', quantity: 1, total_money: 4.05, total_discount: 0.45, line_taxes: [{ type: 'ADDED', money_amount: 0.41 }] })],
  ...overrides,
});
const delivery = (receipts: Json[], type = 'receipts.update') => ({ merchant_id: 'merchant-1', type, created_at: '2026-11-21T11:00:01.000Z', receipts });

const SECRET = 'lv-e2e-webhook-secret';
let h: Harness;
let fake: FakePosApi;
let settings: PosSettings;

beforeEach(async () => {
  fake = await startFakePosApi();
  fake.answer('/v1.0/customers/cust-1', { id: 'cust-1', name: 'Ann Lee', email: 'ann@example.test', phone_number: '+1 555 000 1111', customer_code: null });
  settings = { webhookSecret: SECRET, accessToken: 'lv-access-token', apiBaseUrl: fake.url };
  h = await startHarness({ overrides: { adapters: new Map([['generic', genericAdapter], ['loyverse', loyverseAdapter]]), posSettings: { loyverse: settings } } });
});
afterEach(async () => {
  await h.close();
  await fake.close();
});

/** Exactly these bytes (pretty-printed, as a reminder that the signature covers the raw body). */
function deliver(body: unknown, opts: { encoding?: 'base64' | 'hex'; headers?: [string, string][] } = {}) {
  const raw = typeof body === 'string' ? body : JSON.stringify(body, null, 2);
  const headers = opts.headers ?? [signature(loyverseAdapter, settings, raw, {}, opts.encoding)];
  return postRaw(`${h.bridge.url}/v1/webhooks/loyverse`, raw, headers);
}
const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);
const admin = (path: string) => request(h.bridge.url).get(path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

describe('receipts.update → accrue', () => {
  it('accrues the exact amount once, with the customer fetched from the Loyverse API; a repeat changes nothing', async () => {
    const body = delivery([sale()]);
    const res = await deliver(body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      pos: 'loyverse',
      results: [{ key: `receipt:${STORE}:1-1001@2026-11-21T10:20:00.000Z:checkout`, action: 'checkout', transactionId: TX, status: 'accrued' }],
    });
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, reversals: 0, amount: 1235 });
    expect(fake.requests).toEqual([{ path: '/v1.0/customers/cust-1', query: {}, authorization: 'Bearer lv-access-token' }]);
    const record = await h.bridge.store.get(TX);
    expect(record!.accrual.customer).toEqual({ phone: '+15550001111', email: 'ann@example.test', firstName: 'Ann', lastName: 'Lee' });
    expect(record!.accrual.check).toMatchObject({ amount: 1235, currency: 'USD', taxAmount: 114, tipAmount: 200, discountAmount: 90, serviceAmount: 100 });

    const again = await deliver(body);
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ key: `receipt:${STORE}:1-1001@2026-11-21T10:20:00.000Z:checkout`, action: 'checkout', duplicate: true }]);
    // A later version of the same receipt is a new delivery, but the same order: recorded, not re-sent.
    const updated = await deliver(delivery([sale({ updated_at: '2026-11-21T10:30:00.000Z' })]));
    expect(updated.body.results[0]).toMatchObject({ transactionId: TX, status: 'accrued', duplicate: true });
    expect(h.sim.books().accrueRequests).toBe(1);
    expect(h.sim.books().doubleAccruals).toEqual([]);
  });

  it('accepts the HMAC written in hex as well as base64', async () => {
    const res = await deliver(delivery([sale()]), { encoding: 'hex' });
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: 'accrued' });
  });

  it('the real test event (zero amount, no customer) is recorded as skipped and calls nothing', async () => {
    const res = await deliver(fixtureText);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { key: 'receipt:c3930770-950c-4f48-aa43-174e021f59ba:1001@2024-03-23T20:18:53.000Z:checkout', action: 'checkout', transactionId: 'loyverse:c3930770-950c-4f48-aa43-174e021f59ba:1001', status: 'skipped' },
    ]);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect(fake.requests).toEqual([]);
  });

  it('without LOYVERSE_ACCESS_TOKEN a receipt that names only customer_id is skipped', async () => {
    settings = { webhookSecret: SECRET, apiBaseUrl: fake.url };
    await h.restart({ posSettings: { loyverse: settings } });
    const res = await deliver(delivery([sale()]));
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ transactionId: TX, status: 'skipped' });
    expect(fake.requests).toEqual([]);
    expect(h.sim.books().accrueRequests).toBe(0);
  });

  it('other event types are acknowledged and ignored', async () => {
    const res = await deliver({ merchant_id: 'merchant-1', type: 'customers.update', created_at: '2026-11-21T11:00:01.000Z', customers: [{ id: 'cust-1' }] });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: 'event:merchant-1:customers.update@2026-11-21T11:00:01.000Z', action: 'ignored', reason: 'customers.update carries no sale or refund' }]);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});

describe('refund receipts → reverse', () => {
  it('a partial refund reverses once and re-accrues the remainder; a cancellation then reverses what remains', async () => {
    await deliver(delivery([sale()]));
    const res = await deliver(delivery([refund()]));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: `receipt:${STORE}:1-1003@2026-11-21T11:00:00.000Z:refund`, action: 'refund', transactionId: TX, status: 'reversed' }]);
    const remainder = await h.bridge.store.get(`${TX}~r1`);
    expect(remainder!.accrual.check).toMatchObject({
      amount: 830,
      selections: [
        { id: 'var-latte-l', quantity: 1, totalPrice: 405 },
        { id: 'var-cake', quantity: 1, totalPrice: 325 },
      ],
    });
    let books = h.sim.books();
    expect(books.transactions[TX]).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 830 });

    const again = await deliver(delivery([refund()]));
    expect(again.body.results[0]).toMatchObject({ action: 'refund', duplicate: true });
    expect(h.sim.books().reverseRequests).toBe(1);

    const cancel = await deliver(delivery([sale({ cancelled_at: '2026-11-21T12:00:00.000Z', updated_at: '2026-11-21T12:00:00.000Z' })]));
    expect(cancel.status).toBe(200);
    expect(cancel.body.results[0]).toMatchObject({ action: 'refund', transactionId: `${TX}~r1`, status: 'reversed' });
    books = h.sim.books();
    expect(books.transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.reverseRequests).toBe(2);
    expect(books.doubleReversals).toEqual([]);
  });

  it('a sale and its refund in one batch: the sale is recorded first, whatever the order in the delivery', async () => {
    const res = await deliver(delivery([refund(), sale()]));
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: { action: string; status: string }) => [r.action, r.status])).toEqual([
      ['checkout', 'accrued'],
      ['refund', 'reversed'],
    ]);
    expect(h.sim.books().transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, amount: 830 });
  });
});

describe('authenticity', () => {
  it('a wrong, missing, empty or repeated signature is a 401 and nothing is recorded', async () => {
    const raw = JSON.stringify(delivery([sale()]));
    const good = signature(loyverseAdapter, settings, raw);
    const forged = signature(loyverseAdapter, { ...settings, webhookSecret: 'guessed' }, raw);
    for (const headers of [[forged], [], [['X-Loyverse-Signature', ''] as [string, string]], [good, good]]) {
      const res = await deliver(raw, { headers });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    expect(h.sim.books().accrueRequests).toBe(0);
    expect(fake.requests).toEqual([]);
    expect((await admin('/v1/admin/transactions')).body.total).toBe(0);
    expect((await admin('/v1/admin/dead-letters')).body.total).toBe(0);
  });
});

describe('dead letters', () => {
  it('an untranslatable receipt: 202 naming its deadLetterId, listed, replay still refused; the good receipt of the batch is accrued once', async () => {
    const bad = sale({ receipt_number: '1-0999', total_money: 99 });
    const res = await deliver(delivery([bad, sale()]));
    expect(res.status).toBe(202);
    const dead = res.body.results.find((r: { action: string }) => r.action === 'dead_lettered');
    expect(dead).toMatchObject({ deadLetterId: expect.any(String), issues: [{ field: 'total_money' }] });
    expect(dead.reason).toContain(`receipt 1-0999 of store ${STORE}: total_money: 99 less total_tax 1.14`);
    const id = dead.deadLetterId as string;
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, amount: 1235 });

    const list = await admin('/v1/admin/dead-letters');
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 1, items: [{ id, pos: 'loyverse', deliveries: 1 }] });

    const replay = await request(h.bridge.url).post(`/v1/admin/dead-letters/${id}/replay`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(replay.status).toBe(422);
    expect(replay.body.error).toMatchObject({ code: 'replay_failed', message: expect.stringContaining('total_money') });
    expect(h.sim.books().accrueRequests).toBe(1);
  });

  it('a customer whose phone cannot be read: dead letter; fixed in Loyverse, the replay accrues', async () => {
    fake.answer('/v1.0/customers/cust-1', { id: 'cust-1', name: 'Ann', email: null, phone_number: '12' });
    const res = await deliver(delivery([sale()]));
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', issues: [expect.objectContaining({ field: 'customer.phone' })] })]);
    expect(h.sim.books().accrueRequests).toBe(0);

    fake.answer('/v1.0/customers/cust-1', { id: 'cust-1', name: 'Ann', email: null, phone_number: '(555) 000-1111' });
    const replay = await request(h.bridge.url).post(`/v1/admin/dead-letters/${res.body.results[0].deadLetterId}/replay`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([expect.objectContaining({ transactionId: TX, status: 'accrued' })]);
    expect(replay.body.deadLetter.resolvedAt).toEqual(expect.any(String));
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, amount: 1235 });
  });
});

describe('/v1/checkouts/loyverse and /v1/refunds/loyverse with bare receipts', () => {
  it('checkout, partial refund, repeat, then the cancelled sale reverses the rest', async () => {
    const res = await post('/v1/checkouts/loyverse', sale());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: TX, status: 'accrued', orderId: '1-1001', repeat: false });
    expect(res.body.results[0]).toMatchObject({ isSuccess: true, checkAmount: 1235 });

    const partial = await post('/v1/refunds/loyverse', refund());
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ transactionId: TX, status: 'reversed', refundId: '1-1003', remainder: { transactionId: `${TX}~r1`, status: 'accrued' } });
    expect((await post('/v1/refunds/loyverse', refund())).body).toMatchObject({ repeat: true, refundId: '1-1003' });

    const cancelled = await post('/v1/refunds/loyverse', { receipts: [sale({ cancelled_at: '2026-11-21T12:00:00.000Z' })] });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ transactionId: `${TX}~r1`, status: 'reversed', refundId: 'cancelled:1-1001' });
    const books = h.sim.books();
    expect(books.transactions[TX]).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, reversals: 1, amount: 830 });
  });

  it('a bad receipt is a 400 naming the field, and the ledger is unchanged', async () => {
    const res = await post('/v1/checkouts/loyverse', sale({ line_items: [latte({ line_taxes: [{ money_amount: 0.81 }] }), cake()] }));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_payload', issues: [{ field: 'line_items.0.line_taxes.0.type' }] });
    expect((await post('/v1/refunds/loyverse', sale())).status).toBe(400);
    expect((await admin('/v1/admin/transactions')).body.total).toBe(0);
  });
});
