/**
 * The fake POS APIs driven over HTTP under /__sim/pos (docs/simulator-pos-apis.md, "Control API"),
 * as a bridge process or a sandbox driver that only sees the simulator's URL would, on the same
 * port as the loyalty service.
 */
import { describe, expect, it } from '@jest/globals';
import { adapters } from '../../adapters/index.js';
import { call, fakePosApis, TWO_LINES, US, verifyDelivery } from '../support/pos-http.js';

describe('fake POS control API over HTTP', () => {
  const control = (path: string, body?: unknown, method?: string) => call(`${apis.url}/__sim/pos${path}`, { body, ...(method ? { method } : {}) });

  const apis = fakePosApis();
  const { sim } = apis;

  it('creates accounts, orders, refunds and customers that the POS API then serves, beside the loyalty service', async () => {
    const account = await control('/square/accounts', { merchantId: 'ML8QMERCHANT1', accessToken: 'sq-1', locationIds: ['LOC1'] });
    expect(account).toMatchObject({ status: 201, body: { merchantId: 'ML8QMERCHANT1', accessToken: 'sq-1', locationIds: ['LOC1'] } });
    expect((await control('/square/accounts')).body.accounts).toHaveLength(1);
    const customer = await control('/square/accounts/ML8QMERCHANT1/customers', { email: 'ada@example.com' });
    expect(customer.status).toBe(201);
    const order = await control('/square/accounts/ML8QMERCHANT1/orders', { lines: TWO_LINES, customer: customer.body.id });
    expect(order.status).toBe(201);
    const served = await call(`${apis.url}/square/v2/orders/${order.body.id}`, { headers: { authorization: 'Bearer sq-1' } });
    expect(adapters.get('square')!.parseCheckout(served.body, US)).toMatchObject({ customerRef: customer.body.id, check: { amount: 1599 } });
    const refund = await control('/square/accounts/ML8QMERCHANT1/refunds', { orderId: order.body.id, lines: [{ line: 1 }] });
    expect(refund.status).toBe(201);
    expect(adapters.get('square')!.parseRefund(refund.body, US)).toMatchObject({ amountCents: 299 });
    const touched = await control(`/square/accounts/ML8QMERCHANT1/orders/${order.body.id}/touch`, { at: '2026-04-01T00:00:00.000Z' });
    expect(touched.body.updated_at).toBe('2026-04-01T00:00:00.000Z');

    // A shop domain in the path, as in the API's own prefix.
    expect((await control('/shopify/accounts', { shop: 'cafe-9.myshopify.com', accessToken: 'shpat_1' })).status).toBe(201);
    expect((await control('/shopify/accounts/cafe-9.myshopify.com/orders', { lines: TWO_LINES, archived: false })).status).toBe(201);
    const listed = await call(`${apis.url}/shopify/cafe-9.myshopify.com/admin/api/2024-01/orders.json`, { headers: { 'x-shopify-access-token': 'shpat_1' } });
    expect(listed.body.orders).toHaveLength(1);

    // The loyalty service answers on the same port as before.
    expect((await call(`${apis.url}/api/v2/marketplace/accrue`, { body: {} })).status).toBe(400);
  });

  it('injects and clears faults, and builds signed webhook deliveries', async () => {
    const { body: account } = await control('/loyverse/accounts', { accessToken: 'lv-1' });
    const receipts = () => call(`${apis.url}/loyverse/v1.0/receipts`, { headers: { authorization: 'Bearer lv-1' } });
    expect(await control(`/loyverse/accounts/${account.merchantId}/faults`, { kind: 'rate_limit', times: 2, retryAfter: 5 })).toMatchObject({ status: 201, body: { pending: 2 } });
    const limited = await receipts();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('5');
    expect((await control(`/loyverse/accounts/${account.merchantId}/faults`)).body).toEqual({ pending: 1 });
    expect((await control(`/loyverse/accounts/${account.merchantId}/faults`, undefined, 'DELETE')).body).toEqual({ pending: 0 });
    expect((await receipts()).status).toBe(200);
    // `after`: that many matching requests go through first (a 429 on a listing's third page).
    await control(`/loyverse/accounts/${account.merchantId}/faults`, { kind: 'rate_limit', on: 'list', after: 2, retryAfter: null });
    expect([(await receipts()).status, (await receipts()).status, (await receipts()).status, (await receipts()).status]).toEqual([200, 200, 429, 200]);

    const sale = await control(`/loyverse/accounts/${account.merchantId}/orders`, { lines: TWO_LINES });
    const delivery = await control(`/loyverse/accounts/${account.merchantId}/webhooks`, { id: sale.body.receipt_number, secret: 's3cret' });
    expect(delivery.status).toBe(200);
    expect(() => verifyDelivery(adapters.get('loyverse')!.webhook!.signature, { webhookSecret: 's3cret', apiBaseUrl: '' }, delivery.body)).not.toThrow();
  });

  it('answers 400 for a body of the wrong shape, 404 for what it does not hold, 409 for a clash', async () => {
    expect((await control('/nowhere/accounts')).status).toBe(404);
    expect((await control('/clover/accounts/HFBW9FH45ZBH2/orders', { lines: TWO_LINES })).status).toBe(404);
    expect((await control('/clover/accounts', { merchantId: 'too-short' })).status).toBe(400);
    expect((await control('/clover/accounts', { merchantId: 'HFBW9FH45ZBH2' })).status).toBe(201);
    expect((await control('/clover/accounts', { merchantId: 'HFBW9FH45ZBH2' })).status).toBe(409);
    const bad = await control('/clover/accounts/HFBW9FH45ZBH2/orders', { lines: [{ name: 'Latte', unitPrice: 4.5 }] });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatch(/^lines\.0\.unitPrice: /);
    const order = await control('/clover/accounts/HFBW9FH45ZBH2/orders', { lines: TWO_LINES });
    expect((await control('/clover/accounts/HFBW9FH45ZBH2/refunds', { orderId: order.body.id })).status).toBe(201);
    const again = await control('/clover/accounts/HFBW9FH45ZBH2/refunds', { orderId: order.body.id });
    expect(again).toMatchObject({ status: 409, body: { errors: ['everything in this order was refunded already'] } });
    expect((await control('/clover/accounts/HFBW9FH45ZBH2/faults', { kind: 'meltdown' })).status).toBe(400);
    expect((await control('/reset', {})).body).toEqual({ ok: true });
    expect((await control('/clover/accounts')).body.accounts).toEqual([]);
  });
});
