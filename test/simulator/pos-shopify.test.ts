/**
 * The simulator's fake Shopify Admin API over real HTTP (docs/simulator-pos-apis.md, "Shopify"): one
 * path prefix per shop, orders.json paged by Link-header page_info, the open-only default status,
 * inclusive time filters, the Shopify adapter reading its orders and refunds.
 */
import { describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { call, fakePosApis, minutesAfter, links, TWO_LINES, US } from '../support/pos-http.js';

const SHOP = 'cafe-9.myshopify.com';
const TOKEN = 'shpat_cafe9';
const T0 = Date.parse('2026-03-01T15:00:00.000Z');
const at = minutesAfter(T0);

describe('fake Shopify API', () => {
  const base = () => `${apis.url}/shopify/${SHOP}/admin/api/2024-01`;
  const shopify = (pathOrUrl: string, headers: Record<string, string> = { 'x-shopify-access-token': TOKEN }) => call(pathOrUrl.startsWith('http') ? pathOrUrl : `${base()}${pathOrUrl}`, { headers });

  const apis = fakePosApis({
    now: () => new Date(T0),
    accounts: (sim) => {
      sim.pos.shopify.addAccount({ shop: SHOP, accessToken: TOKEN, currency: 'CAD' });
      sim.pos.shopify.addAccount({ shop: 'other.myshopify.com', accessToken: 'shpat_other' });
    },
  });
  const { sim } = apis;

  it('answers orders and their refunds as Shopify objects that the Shopify adapter translates to the expected Check', async () => {
    const order = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, tip: 100, customer: { email: 'ada@example.com', phone: '+14155550123', firstName: 'Ada' } });
    const got = await shopify(`/orders/${order.id}.json`);
    expect(got.status).toBe(200);
    expect(got.body.order).toMatchObject({
      id: order.id,
      currency: 'CAD',
      financial_status: 'paid',
      subtotal_price: '15.99',
      total_tax: '0.93',
      total_tip_received: '1.00',
      total_price: '17.92',
      subtotal_price_set: { shop_money: { amount: '15.99', currency_code: 'CAD' } },
      created_at: '2026-03-01T10:00:00-05:00',
    });
    expect(got.body.order.line_items[0]).toMatchObject({ quantity: 3, price: '4.50', discount_allocations: [{ amount: '0.50' }] });
    const checkout = shopifyAdapter.parseCheckout(got.body, US);
    expect(checkout.customer).toMatchObject({ email: 'ada@example.com', phone: '+14155550123' });
    expect(checkout.check).toMatchObject({ amount: 1599, currency: 'CAD', taxAmount: 93, discountAmount: 50, tipAmount: 100 });

    const refund = sim.pos.shopify.addRefund(SHOP, { orderId: String(order.id), lines: [{ line: 0, quantity: 1 }] });
    const refunds = await shopify(`/orders/${order.id}/refunds.json`);
    expect(refunds.body.refunds).toHaveLength(1);
    // Refund lines carry JSON numbers; the transaction a decimal string.
    expect(refunds.body.refunds[0].refund_line_items[0]).toMatchObject({ quantity: 1, subtotal: 4.33, total_tax: 0.23 });
    expect(refunds.body.refunds[0].transactions[0]).toMatchObject({ kind: 'refund', status: 'success', amount: '4.56' });
    expect(shopifyAdapter.parseRefund(refunds.body.refunds[0], US)).toEqual({
      orderId: String(order.id),
      refundId: String(refund.id),
      amountCents: 433,
      items: [{ id: String((got.body.order.line_items[0] as { variant_id: number }).variant_id), quantity: 1, totalCents: 433 }],
    });
    expect(shopifyAdapter.parseRefund((await shopify(`/orders/${order.id}/refunds/${refund.id}.json`)).body, US).amountCents).toBe(433);
    // The refund rides on its order and moves it.
    const after = (await shopify(`/orders/${order.id}.json`)).body.order;
    expect(after).toMatchObject({ financial_status: 'partially_refunded', refunds: [expect.objectContaining({ id: refund.id })] });
  });

  it('lists only open orders unless status=any: a paid POS sale is archived at once and hidden by the default', async () => {
    const sale = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES });
    const pending = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, open: true });
    const unarchived = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, archived: false });
    const ids = (r: { body: { orders: { id: number }[] } }) => r.body.orders.map((o) => o.id).sort();
    expect(ids(await shopify('/orders.json'))).toEqual([pending.id, unarchived.id].sort());
    expect(ids(await shopify('/orders.json?status=any'))).toEqual([sale.id, pending.id, unarchived.id].sort());
    expect(ids(await shopify('/orders.json?status=closed'))).toEqual([sale.id]);
    expect(ids(await shopify('/orders.json?status=any&financial_status=paid'))).toEqual([sale.id, unarchived.id].sort());
  });

  it('pages with page_info from the Link header; a request with page_info may carry only limit and fields', async () => {
    const made = [0, 1, 2, 3, 4].map((m) => sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, createdAt: at(m) }).id);
    const first = await shopify(`/orders.json?status=any&updated_at_min=${encodeURIComponent(at(0))}&order=updated_at%20asc&limit=2`);
    expect(first.body.orders.map((o: { id: number }) => o.id)).toEqual(made.slice(0, 2));
    const firstLinks = links(first.headers.get('link'));
    expect(Object.keys(firstLinks)).toEqual(['next']);
    expect(new URL(firstLinks.next!).searchParams.get('limit')).toBe('2');

    const seen = [...first.body.orders.map((o: { id: number }) => o.id)];
    let next: string | undefined = firstLinks.next;
    let page2Links: Record<string, string> = {};
    while (next) {
      const page = await shopify(next);
      expect(page.status).toBe(200);
      seen.push(...page.body.orders.map((o: { id: number }) => o.id));
      const l = links(page.headers.get('link'));
      if (Object.keys(page2Links).length === 0) page2Links = l;
      next = l.next;
    }
    expect(seen).toEqual(made);
    // A later page links back too.
    expect((await shopify(page2Links.previous!)).body.orders.map((o: { id: number }) => o.id)).toEqual(made.slice(0, 2));

    const pageInfo = new URL(firstLinks.next!).searchParams.get('page_info')!;
    const withStatus = await shopify(`/orders.json?page_info=${pageInfo}&status=any`);
    expect(withStatus.status).toBe(400);
    expect(withStatus.body.errors.status).toMatch(/^status cannot be passed when page_info is present/);
    expect((await shopify(`/orders.json?page_info=${pageInfo}&updated_at_min=${encodeURIComponent(at(0))}`)).status).toBe(400);
    // limit and fields may change from page to page.
    const narrowed = await shopify(`/orders.json?page_info=${pageInfo}&limit=3&fields=id,updated_at`);
    expect(narrowed.body.orders).toEqual(made.slice(2, 5).map((id, i) => ({ id, updated_at: `2026-03-01T10:0${i + 2}:00-05:00` })));
    expect((await shopify('/orders.json?page_info=garbage')).body).toEqual({ errors: { page_info: 'Invalid value.' } });
    expect((await shopify('/orders.json?limit=251')).status).toBe(400);
  });

  it('reads updated_at_min and updated_at_max as "at or after" and "at or before", in any offset', async () => {
    const early = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, createdAt: at(0) });
    const onMin = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, createdAt: at(1) });
    const onMax = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, createdAt: at(2) });
    const late = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, createdAt: at(3) });
    const ids = (r: { body: { orders: { id: number }[] } }) => r.body.orders.map((o) => o.id);
    // 15:01Z is 10:01 in the shop's -05:00 and 16:01 in +01:00: the same instants.
    const inclusive = await shopify(`/orders.json?status=any&order=updated_at%20asc&updated_at_min=${encodeURIComponent('2026-03-01T16:01:00+01:00')}&updated_at_max=${encodeURIComponent('2026-03-01T15:02:00Z')}`);
    expect(ids(inclusive)).toEqual([onMin.id, onMax.id]);
    expect(ids(inclusive)).not.toContain(early.id);
    expect(ids(inclusive)).not.toContain(late.id);
    // Without an offset a time is the shop's own.
    expect(ids(await shopify('/orders.json?status=any&order=updated_at%20asc&updated_at_min=2026-03-01T10:03:00'))).toEqual([late.id]);
    expect((await shopify('/orders.json?updated_at_min=last%20week')).status).toBe(400);
  });

  it('serves each shop under its own prefix, with its own X-Shopify-Access-Token: a bearer token, a wrong token or an unknown shop is refused', async () => {
    const order = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES });
    const bearer = await shopify(`/orders/${order.id}.json`, { authorization: `Bearer ${TOKEN}` });
    expect(bearer.status).toBe(401);
    expect(bearer.body.errors).toMatch(/Invalid API key or access token/);
    expect((await shopify(`/orders/${order.id}.json`, { 'x-shopify-access-token': 'shpat_other' })).status).toBe(401);
    expect((await call(`${apis.url}/shopify/nowhere.myshopify.com/admin/api/2024-01/orders.json`, { headers: { 'x-shopify-access-token': TOKEN } })).status).toBe(404);
    const otherShop = await call(`${apis.url}/shopify/other.myshopify.com/admin/api/2024-01/orders/${order.id}.json`, { headers: { 'x-shopify-access-token': 'shpat_other' } });
    expect(otherShop.status).toBe(404);
  });

  it('rate-limits with 429 and Retry-After: 2.0 as Shopify does, then answers; a 5xx in its shape', async () => {
    sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, archived: false });
    sim.pos.shopify.faults(SHOP).inject({ kind: 'rate_limit' });
    const limited = await shopify('/orders.json');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('2.0');
    expect(limited.body.errors).toMatch(/^Exceeded 2 calls per second/);
    expect((await shopify('/orders.json')).body.orders).toHaveLength(1);
    sim.pos.shopify.faults(SHOP).inject({ kind: 'rate_limit', retryAfter: null });
    expect((await shopify('/orders.json')).headers.get('retry-after')).toBeNull();
    sim.pos.shopify.faults(SHOP).inject({ kind: 'server_error', status: 502 });
    expect(await shopify('/orders.json')).toMatchObject({ status: 502, body: { errors: 'Internal Server Error' } });
  });
});
