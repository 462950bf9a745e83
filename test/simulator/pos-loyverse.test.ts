/**
 * The simulator's fake Loyverse API over real HTTP (docs/simulator-pos-apis.md, "Loyverse"):
 * receipts and refund receipts read by the Loyverse adapter, customers read by its own fetch, the
 * receipts list paged by cursor, faults and refusals.
 */
import { describe, expect, it } from '@jest/globals';
import { loyverseAdapter } from '../../adapters/loyverse/index.js';
import { posApi } from '../../src/pos/api.js';
import { call, fakePosApis, minutesAfter, TWO_LINES, US } from '../support/pos-http.js';

const MERCHANT = '7e2daef3-48ad-4aba-b226-2d180f564f31';
const STORE = 'c3930770-950c-4f48-aa43-174e021f59ba';
const TOKEN = 'loyverse-token-1';
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = minutesAfter(T0);

describe('fake Loyverse API', () => {
  const loyverse = (path: string, token: string | null = TOKEN) => call(`${apis.url}/loyverse${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const numbers = (r: { body: { receipts: { receipt_number: string }[] } }) => r.body.receipts.map((x) => x.receipt_number);

  const apis = fakePosApis({
    now: () => new Date(T0),
    accounts: (sim) => {
      sim.pos.loyverse.addAccount({ merchantId: MERCHANT, accessToken: TOKEN, storeIds: [STORE] });
      sim.pos.loyverse.addAccount({ accessToken: 'loyverse-token-2' });
    },
  });
  const { sim } = apis;

  it('answers receipts that the Loyverse adapter translates to the expected Check, refund receipts naming their sale, and customers', async () => {
    const sale = sim.pos.loyverse.addOrder(MERCHANT, { lines: TWO_LINES, tip: 100, customer: { firstName: 'Ada', lastName: 'Lovelace', phone: '+14155550123', code: '11-123456-1' } });
    const got = await loyverse(`/v1.0/receipts/${sale.receipt_number}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ receipt_number: '1-1001', receipt_type: 'SALE', store_id: STORE, total_money: 16.92, total_tax: 0.93, tip: 1, total_discount: 0.5, created_at: '2026-03-01T10:00:00.000Z' });
    expect(got.body.line_items[0]).toMatchObject({ quantity: 3, price: 4.5, gross_total_money: 13.5, total_money: 13, line_taxes: [{ type: 'ADDED', money_amount: 0.68 }] });
    const checkout = loyverseAdapter.parseCheckout(got.body, US);
    expect(checkout).toMatchObject({ orderId: '1-1001', scope: STORE });
    expect(checkout.check).toMatchObject({ amount: 1599, currency: 'USD', taxAmount: 93, discountAmount: 50, tipAmount: 100 });
    const api = posApi('loyverse', { apiBaseUrl: `${apis.url}/loyverse`, accessToken: TOKEN }, 2000)!;
    await expect(loyverseAdapter.fetchCustomer!(checkout.customerRef!, api, US)).resolves.toEqual({ phone: '+14155550123', serialNumber: '11-123456-1', firstName: 'Ada', lastName: 'Lovelace' });

    const refund = sim.pos.loyverse.addRefund(MERCHANT, { orderId: sale.receipt_number, lines: [{ line: 0, quantity: 1 }] });
    const fetched = await loyverse(`/v1.0/receipts/${refund.receipt_number}`);
    expect(fetched.body).toMatchObject({ receipt_type: 'REFUND', refund_for: '1-1001', total_money: 4.56, total_tax: 0.23 });
    expect(loyverseAdapter.parseRefund(fetched.body, US)).toEqual({
      orderId: '1-1001',
      scope: STORE,
      refundId: '1-1002',
      amountCents: 433,
      items: [{ id: (got.body.line_items[0] as { variant_id: string }).variant_id, quantity: 1, totalCents: 433 }],
    });
  });

  it('pages receipts newest first with a cursor; the cursor continues its own filters, alone or with the same ones again', async () => {
    const made = [0, 1, 2, 3, 4].map((m) => sim.pos.loyverse.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(m) }).receipt_number);
    const filter = `updated_at_min=${encodeURIComponent(at(1))}&updated_at_max=${encodeURIComponent(at(3))}`;
    const first = await loyverse(`/v1.0/receipts?${filter}&limit=2`);
    expect(numbers(first)).toEqual([made[3], made[2]]);
    expect(first.body.cursor).toEqual(expect.any(String));
    // Both bounds inclusive: minutes 3, 2 and 1.
    const alone = await loyverse(`/v1.0/receipts?cursor=${first.body.cursor}&limit=2`);
    expect(numbers(alone)).toEqual([made[1]]);
    expect(alone.body).not.toHaveProperty('cursor');
    const again = await loyverse(`/v1.0/receipts?${filter}&cursor=${first.body.cursor}&limit=2`);
    expect(numbers(again)).toEqual([made[1]]);
    const changed = await loyverse(`/v1.0/receipts?updated_at_min=${encodeURIComponent(at(0))}&cursor=${first.body.cursor}`);
    expect(changed.status).toBe(400);
    expect(changed.body.errors[0]).toMatchObject({ code: 'INVALID_VALUE', field: 'cursor' });
    expect((await loyverse('/v1.0/receipts?limit=251')).status).toBe(400);
    expect((await loyverse('/v1.0/receipts?created_at_min=yesterday')).status).toBe(400);
    // No filters, default limit 10: all five.
    expect(numbers(await loyverse('/v1.0/receipts'))).toEqual([...made].reverse());
  });

  it('filters by order and source; refuses, as {errors:[{code, details, field}]}, a parameter it does not know and the ones it does not model', async () => {
    const sale = sim.pos.loyverse.addOrder(MERCHANT, { lines: TWO_LINES });
    expect(numbers(await loyverse('/v1.0/receipts?source=point%20of%20sale'))).toEqual([sale.receipt_number]);
    expect(numbers(await loyverse('/v1.0/receipts?source=Pipedream'))).toEqual([]);
    expect(numbers(await loyverse('/v1.0/receipts?order=T-1'))).toEqual([]);
    const unknown = await loyverse('/v1.0/receipts?updated_since=2026-03-01T00:00:00Z');
    expect(unknown).toMatchObject({ status: 400, body: { errors: [{ code: 'INVALID_VALUE', field: 'updated_since', details: expect.any(String) }] } });
    expect(unknown.body.errors).toHaveLength(1);
    expect(await loyverse('/v1.0/receipts?since_receipt_number=1-1000')).toMatchObject({ status: 400, body: { errors: [{ code: 'INVALID_VALUE', field: 'since_receipt_number' }] } });
    expect(await loyverse('/v1.0/receipts?limit=ten')).toMatchObject({ status: 400, body: { errors: [{ code: 'INVALID_VALUE', field: 'limit' }] } });
    expect(await loyverse('/v1.0/receipts?updated_at_min=2026-03-01')).toMatchObject({ status: 400, body: { errors: [{ code: 'INVALID_VALUE', field: 'updated_at_min' }] } });
    expect(await loyverse('/v1.0/receipts?cursor=garbage')).toMatchObject({ status: 400, body: { errors: [{ code: 'INVALID_VALUE', field: 'cursor' }] } });
  });

  it('answers 401 without a valid token; a token reads only its own merchant\'s receipts', async () => {
    const sale = sim.pos.loyverse.addOrder(MERCHANT, { lines: TWO_LINES });
    expect(await loyverse(`/v1.0/receipts/${sale.receipt_number}`, null)).toMatchObject({ status: 401, body: { errors: [{ code: 'UNAUTHORIZED' }] } });
    expect((await loyverse(`/v1.0/receipts/${sale.receipt_number}`, 'nope')).status).toBe(401);
    expect((await loyverse(`/v1.0/receipts/${sale.receipt_number}`, 'loyverse-token-2')).status).toBe(404);
  });

  it('rate-limits with 429 (no Retry-After unless asked), then answers; a slow answer comes late but whole', async () => {
    sim.pos.loyverse.addOrder(MERCHANT, { lines: TWO_LINES });
    sim.pos.loyverse.faults(MERCHANT).inject({ kind: 'rate_limit' });
    const limited = await loyverse('/v1.0/receipts');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBeNull();
    expect(numbers(await loyverse('/v1.0/receipts'))).toHaveLength(1);
    sim.pos.loyverse.faults(MERCHANT).inject({ kind: 'slow', delayMs: 300 });
    const started = Date.now();
    const slow = await loyverse('/v1.0/receipts');
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(numbers(slow)).toHaveLength(1);
  });
});
