/**
 * The simulator's fake Clover API over real HTTP (docs/simulator-pos-apis.md, "Clover"): orders
 * read by the Clover adapter's own two-read fetch, expansions, offset paging with filters, faults and
 * refusals in Clover's shapes.
 */
import { describe, expect, it } from '@jest/globals';
import { fetchOrder } from '../../adapters/clover/api.js';
import { cloverAdapter } from '../../adapters/clover/index.js';
import { posApi } from '../../src/pos/api.js';
import { call, fakePosApis, minutesAfter, TWO_LINES, US } from '../support/pos-http.js';

const MERCHANT = 'HFBW9FH45ZBH2';
const TOKEN = 'clover-token-1';
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = minutesAfter(T0);

describe('fake Clover API', () => {
  const clover = (path: string, token: string | null = TOKEN) => call(`${apis.url}/clover/v3/merchants/${MERCHANT}${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const api = () => posApi('clover', { apiBaseUrl: `${apis.url}/clover`, accessToken: TOKEN }, 2000)!;

  const apis = fakePosApis({
    now: () => new Date(T0),
    accounts: (sim) => {
      sim.pos.clover.addAccount({ merchantId: MERCHANT, accessToken: TOKEN });
      sim.pos.clover.addAccount({ merchantId: 'XYZVJT2ZRRRSC', accessToken: 'clover-token-2' });
    },
  });
  const { sim } = apis;

  it('answers orders that the Clover adapter fetches (its two expanded reads) and translates to the expected Check', async () => {
    const customer = sim.pos.clover.addCustomer(MERCHANT, { phone: '+14155550123', email: 'ada@example.com' });
    const order = sim.pos.clover.addOrder(MERCHANT, { lines: TWO_LINES, tip: 100, customer: customer.id as string });
    const fetched = await fetchOrder(api(), MERCHANT, order.id as string);
    expect(fetched).toMatchObject({ id: order.id, state: 'locked', total: 1692, currency: 'USD', href: `${apis.url}/clover/v3/merchants/${MERCHANT}/orders/${order.id}` });
    // One line item per unit; each unit's share of its line's discount, negative.
    const lineItems = (fetched as { lineItems: { elements: { price: number; discounts?: { elements: { amount: number }[] } }[] } }).lineItems.elements;
    expect(lineItems.map((l) => [l.price, l.discounts?.elements[0]?.amount ?? 0])).toEqual([
      [450, -17],
      [450, -17],
      [450, -16],
      [299, 0],
    ]);
    const checkout = cloverAdapter.parseCheckout(fetched, US);
    expect(checkout).toMatchObject({ orderId: order.id, scope: MERCHANT, customerRef: `${MERCHANT}/${customer.id as string}` });
    expect(checkout.check).toMatchObject({ amount: 1599, currency: 'USD', taxAmount: 93, discountAmount: 50, tipAmount: 100 });
    expect(checkout.check.selections.reduce((s, x) => s + x.totalPrice, 0)).toBe(1599);
    await expect(cloverAdapter.fetchCustomer!(checkout.customerRef!, api(), US)).resolves.toMatchObject({ phone: '+14155550123', email: 'ada@example.com' });

    const refund = sim.pos.clover.addRefund(MERCHANT, { orderId: order.id as string, lines: [{ line: 0, quantity: 1 }] });
    expect(refund).toMatchObject({ amount: 456, taxAmount: 23, tipAmount: 0 });
    const bare = await clover(`/refunds/${refund.id as string}`);
    expect(cloverAdapter.parseRefund(bare.body, US)).toEqual({ orderId: order.id, scope: MERCHANT, refundId: refund.id, amountCents: 433 });
    const withRefunds = await fetchOrder(api(), MERCHANT, order.id as string);
    expect(cloverAdapter.parseRefund({ order: withRefunds, refundId: refund.id }, US)).toMatchObject({ amountCents: 433 });
    // The refunded unit is marked so.
    expect((withRefunds as { lineItems: { elements: { refunded: boolean }[] } }).lineItems.elements.map((l) => l.refunded)).toEqual([true, false, false, false]);
    // Still the sale it was (a poller may meet it before the sale was recorded).
    expect(cloverAdapter.parseCheckout(withRefunds, US).check).toMatchObject({ amount: 1599, taxAmount: 93, tipAmount: 100 });

    // The rest back: together the refunds cover the payment, a full reversal.
    sim.pos.clover.addRefund(MERCHANT, { orderId: order.id as string });
    const full = await fetchOrder(api(), MERCHANT, order.id as string);
    expect(cloverAdapter.parseRefund(full, US)).not.toHaveProperty('amountCents');
  });

  it('shows collections only when expand asks for them, nested expansions included', async () => {
    const order = sim.pos.clover.addOrder(MERCHANT, { lines: TWO_LINES });
    const plain = await clover(`/orders/${order.id as string}`);
    expect(plain.body).not.toHaveProperty('lineItems');
    expect(plain.body).not.toHaveProperty('payments');
    const lines = await clover(`/orders/${order.id as string}?expand=lineItems`);
    expect(lines.body.lineItems.elements[0]).not.toHaveProperty('discounts');
    const nested = await clover(`/orders/${order.id as string}?expand=lineItems.discounts,payments`);
    expect(nested.body.lineItems.elements[0].discounts.elements[0].amount).toBe(-17);
    expect(nested.body.payments.elements[0]).toMatchObject({ amount: 1692, taxAmount: 93, result: 'SUCCESS' });
  });

  it('pages the order list by offset and limit, filtered with repeated filter parameters (>= inclusive, < exclusive)', async () => {
    const made = [0, 1, 2, 3, 4, 5].map((m) => sim.pos.clover.addOrder(MERCHANT, { lines: TWO_LINES, createdAt: at(m) }).id as string);
    const from = T0 + 60_000;
    const to = T0 + 5 * 60_000;
    const seen: string[] = [];
    for (let offset = 0; ; offset += 2) {
      const page = await clover(`/orders?filter=${encodeURIComponent(`modifiedTime>=${from}`)}&filter=${encodeURIComponent(`modifiedTime<${to}`)}&orderBy=${encodeURIComponent('modifiedTime ASC')}&expand=lineItems&offset=${offset}&limit=2`);
      expect(page.status).toBe(200);
      expect(page.body.href).toContain(`offset=${offset}`);
      seen.push(...page.body.elements.map((o: { id: string }) => o.id));
      if (page.body.elements.length > 0) expect(page.body.elements[0].lineItems.elements.length).toBe(4);
      if (page.body.elements.length < 2) break;
    }
    // Orders modified at minutes 1, 2, 3 and 4: the one at 0 is before, the one at 5 is at the exclusive end.
    expect(seen).toEqual(made.slice(1, 5));
    expect((await clover('/orders?limit=1001')).status).toBe(400);
    expect((await clover(`/orders?filter=${encodeURIComponent('colour=blue')}`)).body.message).toBe('Unknown filter field: colour');
    expect((await clover(`/orders?filter=${encodeURIComponent('modifiedTime>=yesterday')}`)).status).toBe(400);
  });

  it('refuses a malformed filter, orderBy, offset or limit with 400 in Clover\'s {message} shape', async () => {
    for (const query of [`filter=${encodeURIComponent('modifiedTime~1')}`, `filter=${encodeURIComponent('createdTime>=1.5')}`, `orderBy=${encodeURIComponent('total DESC')}`, 'offset=-1', 'limit=0', 'limit=ten']) {
      const answer = await clover(`/orders?${query}`);
      expect(answer.status).toBe(400);
      expect(Object.keys(answer.body)).toEqual(['message']);
    }
    expect(await clover('/orders/NOSUCHORDER00')).toEqual(expect.objectContaining({ status: 404, body: { message: 'Not Found' } }));
  });

  it('answers 401 for a missing token and for another merchant\'s token', async () => {
    const order = sim.pos.clover.addOrder(MERCHANT, { lines: TWO_LINES });
    expect(await clover(`/orders/${order.id as string}`, null)).toMatchObject({ status: 401, body: { message: '401 Unauthorized' } });
    expect((await clover(`/orders/${order.id as string}`, 'clover-token-2')).status).toBe(401);
    const other = await call(`${apis.url}/clover/v3/merchants/XYZVJT2ZRRRSC/orders/${order.id as string}`, { headers: { authorization: 'Bearer clover-token-2' } });
    expect(other.status).toBe(404);
  });

  it('rate-limits with 429 naming the token limit and no Retry-After, then answers; a concurrency-style 429 carries one', async () => {
    sim.pos.clover.addOrder(MERCHANT, { lines: TWO_LINES });
    sim.pos.clover.faults(MERCHANT).inject({ kind: 'rate_limit' });
    const limited = await clover('/orders');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBeNull();
    expect(limited.headers.get('x-ratelimit-tokenlimit')).toBe('16');
    expect((await clover('/orders')).body.elements).toHaveLength(1);
    sim.pos.clover.faults(MERCHANT).inject({ kind: 'rate_limit', retryAfter: 1 });
    expect((await clover('/orders')).headers.get('retry-after')).toBe('1');
    sim.pos.clover.faults(MERCHANT).inject({ kind: 'server_error' });
    expect(await clover('/orders')).toMatchObject({ status: 500, body: { message: '500 Internal Server Error' } });
  });
});
