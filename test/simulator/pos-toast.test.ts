/**
 * The simulator's fake Toast orders API over real HTTP (docs/simulator-pos-apis.md, "Toast"): the
 * restaurant named by header, ordersBulk paged by page and pageSize over [startDate, endDate),
 * refunds on the order, faults and refusals in Toast's shape.
 */
import { describe, expect, it } from '@jest/globals';
import { toastAdapter } from '../../adapters/toast/index.js';
import { call, fakePosApis, minutesAfter, links, TWO_LINES, US } from '../support/pos-http.js';

const RESTAURANT = '4f6c2d1e-8a3b-4c5d-9e7f-0a1b2c3d4e5f';
const OTHER = '9d57bbfc-c0e1-4bb0-9cec-ebcb186306bb';
const TOKEN = 'toast-token-1';
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = minutesAfter(T0);
/** Toast's own date format, URL-encoded ("+" must be %2B). */
const toastDate = (minutes: number) => encodeURIComponent(new Date(T0 + minutes * 60_000).toISOString().replace('Z', '+0000'));

describe('fake Toast API', () => {
  const toast = (pathOrUrl: string, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}`, 'toast-restaurant-external-id': RESTAURANT }) =>
    call(pathOrUrl.startsWith('http') ? pathOrUrl : `${apis.url}/toast${pathOrUrl}`, { headers });

  const apis = fakePosApis({
    now: () => new Date(T0),
    accounts: (sim) => {
      sim.pos.toast.addAccount({ restaurantGuid: RESTAURANT, accessToken: TOKEN });
      sim.pos.toast.addAccount({ restaurantGuid: OTHER, accessToken: 'toast-token-2' });
    },
  });
  const { sim } = apis;

  it('answers orders as Toast objects that the Toast adapter translates to the expected Check, and refunds on the order', async () => {
    const order = sim.pos.toast.addOrder(RESTAURANT, { lines: TWO_LINES, tip: 100, customer: { firstName: 'Jack', phone: '+14155550123', email: 'jack@example.com' } });
    const got = await toast(`/orders/v2/orders/${order.guid}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ guid: order.guid, entityType: 'Order', modifiedDate: '2026-03-01T10:00:00.000+0000' });
    expect(got.body.checks[0]).toMatchObject({ amount: 15.99, taxAmount: 0.93, totalAmount: 16.92, paymentStatus: 'CLOSED', payments: [{ amount: 16.92, tipAmount: 1, refundStatus: 'NONE' }] });
    expect(got.body.checks[0].selections[0]).toMatchObject({ quantity: 3, price: 13, preDiscountPrice: 13.5, receiptLinePrice: 4.5, tax: 0.68 });
    const checkout = toastAdapter.parseCheckout(got.body, US);
    expect(checkout.customer).toMatchObject({ phone: '+14155550123', email: 'jack@example.com' });
    expect(checkout.check).toMatchObject({ amount: 1599, currency: 'USD', taxAmount: 93, discountAmount: 50, tipAmount: 100 });

    const { refundTransactionGuid } = sim.pos.toast.addRefund(RESTAURANT, { orderId: order.guid, lines: [{ line: 0, quantity: 1 }] });
    const refunded = (await toast(`/orders/v2/orders/${order.guid}`)).body;
    expect(refunded.checks[0].selections[0].refundDetails).toEqual({ refundAmount: 4.33, taxRefundAmount: 0.23, refundTransaction: { guid: refundTransactionGuid, entityType: 'RefundTransaction' } });
    expect(refunded.checks[0].payments[0]).toMatchObject({ refundStatus: 'PARTIAL', refund: { refundAmount: 4.56 } });
    // The check's sale: its own transactionId (the order's and the check's guids), the whole order's id of builds before beside it.
    const sale = { orderId: order.guid, part: refunded.checks[0].guid, recordedAs: [`toast:${order.guid}`] };
    expect(toastAdapter.parseRefund(refunded, US)).toEqual({ ...sale, refundId: refundTransactionGuid, amountCents: 433 });
    // A second transaction on the other selection: each is told apart by its GUID; together they are everything.
    const second = sim.pos.toast.addRefund(RESTAURANT, { orderId: order.guid, lines: [{ line: 1 }] });
    expect(toastAdapter.parseRefund(second, US)).toEqual({ ...sale, refundId: second.refundTransactionGuid, amountCents: 299, items: [{ id: expect.any(String), quantity: 1, totalCents: 299 }] });
    expect(() => sim.pos.toast.addRefund(RESTAURANT, { orderId: order.guid, lines: [{ line: 0, quantity: 1 }] })).toThrow(/one refundDetails per selection/);
  });

  it('pages ordersBulk by page and pageSize over modifiedDate, startDate inclusive and endDate exclusive', async () => {
    const made = [0, 1, 2, 3, 4, 5].map((m) => sim.pos.toast.addOrder(RESTAURANT, { lines: TWO_LINES, createdAt: at(m) }).guid);
    const seen: string[] = [];
    let next: string | undefined = `/orders/v2/ordersBulk?startDate=${toastDate(1)}&endDate=${toastDate(5)}&pageSize=2&page=1`;
    let pages = 0;
    while (next) {
      const page = await toast(next);
      expect(page.status).toBe(200);
      expect(Array.isArray(page.body)).toBe(true);
      seen.push(...page.body.map((o: { guid: string }) => o.guid));
      next = links(page.headers.get('link')).next;
      pages += 1;
    }
    expect(pages).toBe(2);
    // Modified at minutes 1 to 4: the one at 0 is before the start, the one at 5 is at the (exclusive) end.
    expect(seen).toEqual(made.slice(1, 5));
    const beyond = await toast(`/orders/v2/ordersBulk?startDate=${toastDate(1)}&endDate=${toastDate(5)}&pageSize=2&page=3`);
    expect(beyond.body).toEqual([]);
    expect(links(beyond.headers.get('link')).prev).toContain('page=2');
    const businessDay = await toast('/orders/v2/ordersBulk?businessDate=20260301');
    expect(businessDay.body).toHaveLength(6);
  });

  it('refuses a date whose "+" was not URL-encoded, a page size over 100 and an end before the start', async () => {
    const unencoded = await toast(`/orders/v2/ordersBulk?startDate=2026-03-01T10:00:00.000+0000&endDate=${toastDate(5)}`);
    expect(unencoded.status).toBe(400);
    expect(unencoded.body).toMatchObject({ status: 400, fieldName: 'startDate' });
    expect((await toast(`/orders/v2/ordersBulk?startDate=${toastDate(0)}&endDate=${toastDate(5)}&pageSize=101`)).status).toBe(400);
    expect((await toast(`/orders/v2/ordersBulk?startDate=${toastDate(5)}&endDate=${toastDate(0)}`)).status).toBe(400);
  });

  it('refuses, in Toast\'s ErrorMessage shape, a query parameter ordersBulk does not document and businessDate beside a date range', async () => {
    const unknown = await toast(`/orders/v2/ordersBulk?startDate=${toastDate(0)}&endDate=${toastDate(5)}&modifiedSince=${toastDate(0)}`);
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ status: 400, code: 0, message: 'Unknown query parameter: modifiedSince', messageKey: null, fieldName: 'modifiedSince', link: null, requestId: expect.any(String), developerMessage: null, errors: [], canRetry: null });
    const both = await toast(`/orders/v2/ordersBulk?businessDate=20260301&startDate=${toastDate(0)}&endDate=${toastDate(5)}`);
    expect(both).toMatchObject({ status: 400, body: { status: 400, fieldName: 'businessDate' } });
    expect((await toast('/orders/v2/ordersBulk?businessDate=2026-03-01')).body).toMatchObject({ status: 400, fieldName: 'businessDate' });
    expect((await toast(`/orders/v2/ordersBulk?startDate=${toastDate(0)}`)).body).toMatchObject({ status: 400, fieldName: 'endDate' });
    expect((await toast('/orders/v2/ordersBulk?businessDate=20260301&page=0')).body).toMatchObject({ status: 400, fieldName: 'page' });
  });

  it('needs a known token (401) for the restaurant named in Toast-Restaurant-External-ID (400 without, 403 for one it may not read)', async () => {
    const order = sim.pos.toast.addOrder(RESTAURANT, { lines: TWO_LINES });
    expect((await toast(`/orders/v2/orders/${order.guid}`, { 'toast-restaurant-external-id': RESTAURANT })).status).toBe(401);
    expect((await toast(`/orders/v2/orders/${order.guid}`, { authorization: 'Bearer nope', 'toast-restaurant-external-id': RESTAURANT })).body).toMatchObject({ status: 401 });
    expect((await toast(`/orders/v2/orders/${order.guid}`, { authorization: `Bearer ${TOKEN}` })).status).toBe(400);
    expect((await toast(`/orders/v2/orders/${order.guid}`, { authorization: `Bearer ${TOKEN}`, 'toast-restaurant-external-id': OTHER })).status).toBe(403);
    expect((await toast(`/orders/v2/orders/${order.guid}`, { authorization: 'Bearer toast-token-2', 'toast-restaurant-external-id': OTHER })).status).toBe(404);
  });

  it('rate-limits with 429 and Retry-After, then answers; without the header when asked', async () => {
    sim.pos.toast.addOrder(RESTAURANT, { lines: TWO_LINES });
    const bulk = `/orders/v2/ordersBulk?startDate=${toastDate(-1)}&endDate=${toastDate(1)}`;
    sim.pos.toast.faults(RESTAURANT).inject({ kind: 'rate_limit', on: 'list' });
    const limited = await toast(bulk);
    expect(limited).toMatchObject({ status: 429, body: { status: 429, canRetry: null } });
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.headers.get('x-toast-ratelimit-reset')).toMatch(/^\d+$/);
    expect((await toast(bulk)).body).toHaveLength(1);
    sim.pos.toast.faults(RESTAURANT).inject({ kind: 'rate_limit', retryAfter: null });
    expect((await toast(bulk)).headers.get('retry-after')).toBeNull();
  });
});
