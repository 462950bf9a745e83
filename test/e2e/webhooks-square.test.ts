/**
 * Square end to end over HTTP: webhooks signed the way Square signs them, the order and customer
 * fetched from a local fake of Square's API, the loyalty simulator's books checked for exactly one
 * accrue and one reverse per order, dead letters listed and replayed, and the bare Square objects
 * posted to /v1/checkouts/square and /v1/refunds/square.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import request from 'supertest';
import { squareAdapter } from '../../adapters/square/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { ADMIN_TOKEN, startHarness, type Harness, postJson } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const FIXTURES = new URL('../fixtures/square/', import.meta.url);
const fixture = (name: string): any => JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8'));
const usd = (amount: number) => ({ amount, currency: 'USD' });

/** Square's CreateOrderResponse example, completed, picked up by a customer with a phone: 6176 − 510 tax = 5666 cents. */
function sale(id = 'SALE-1', over: Record<string, unknown> = {}) {
  const order = fixture('CreateOrderResponse_example.json').order;
  return { ...order, id, state: 'COMPLETED', version: 4, fulfillments: [{ type: 'PICKUP', pickup_details: { recipient: { display_name: 'Ann Lee', phone_number: '+15550001111' } } }], ...over };
}

/** The return order Square creates for a refund of one "New York Steak (Larger)": 2264 with 187 tax → 2077 cents. */
function returnOrder(id = 'RET-1', source = 'SALE-1') {
  return {
    id,
    state: 'COMPLETED',
    returns: [{ source_order_id: source, return_line_items: [{ uid: 'r1', catalog_object_id: 'BEMYCSMIJL46OCDV4KYIKXIB', name: 'New York Steak', quantity: '1', total_money: usd(2264), total_tax_money: usd(187) }] }],
    return_amounts: { total_money: usd(2264), tax_money: usd(187), tip_money: usd(0) },
  };
}

function orderEvent(orderId: string, version: number, eventId: string, type: 'order.created' | 'order.updated' = 'order.updated') {
  const field = type === 'order.created' ? 'order_created' : 'order_updated';
  return { merchant_id: '5S9MXCS9Y99KK', type, event_id: eventId, created_at: new Date().toISOString(), data: { type: field, id: orderId, object: { [field]: { order_id: orderId, state: 'COMPLETED', version, location_id: 'FPYCBCHYMXFK1' } } } };
}

/** Square's refund.created / refund.updated examples, pointed at our return order. */
/** A documentation example as if created now: they date from 2020, and events created over 26 h ago are refused as replays. */
const recent = <T extends object>(event: T): T => ({ ...event, created_at: new Date().toISOString() });

function refundEvent(name: 'webhook_refund_created.json' | 'webhook_refund_updated.json', eventId?: string, over: Record<string, unknown> = {}) {
  const event = fixture(name);
  if (eventId) event.event_id = eventId;
  Object.assign(event.data.object.refund, { order_id: 'RET-1', amount_money: usd(2264) }, over);
  return recent(event);
}

let fake: FakePosApi;
let h: Harness;
let settings: PosSettings;

async function start(withToken = true) {
  fake = await startFakePosApi();
  settings = { webhookSecret: 'sq-test-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: fake.url, ...(withToken ? { accessToken: 'sq-access-token' } : {}) };
  h = await startHarness({ overrides: { adapters: new Map([['square', squareAdapter]]), posSettings: { square: settings } } });
}

/** Posts the exact bytes Square would, signed with the test signer unless other headers are given. */
function deliver(event: unknown, headers?: [string, string][]) {
  const raw = JSON.stringify(event);
  return postRaw(`${h.bridge.url}/v1/webhooks/square`, raw, headers ?? [signature(squareAdapter, settings, raw)]);
}

const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);
const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

describe('Square webhooks', () => {
  beforeEach(() => start());
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('order.updated COMPLETED: fetches the order with the access token and accrues it once, whatever repeats', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    const res = await deliver(orderEvent('SALE-1', 4, 'EV-4'));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: 'EV-4', action: 'checkout', transactionId: 'square:SALE-1', status: 'accrued' }]);
    expect(fake.requests).toEqual([{ path: '/v2/orders/SALE-1', query: {}, authorization: 'Bearer sq-access-token' }]);
    expect(h.sim.books().transactions['square:SALE-1']).toMatchObject({ accruals: 1, reversals: 0, amount: 5666 });
    const record = await h.bridge.store.get('square:SALE-1');
    expect(record!.accrual.customer).toEqual({ phone: '+15550001111' });
    expect(record!.accrual.check).toMatchObject({ amount: 5666, currency: 'USD', taxAmount: 510, discountAmount: 433, externalTransactionId: 'SALE-1' });

    // The same delivery again (Square retries for 24 h): acknowledged, nothing fetched or accrued.
    const again = await deliver(orderEvent('SALE-1', 4, 'EV-4'));
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ key: 'EV-4', action: 'checkout', duplicate: true }]);
    // A later version of the same order (order.updated fires per version): same transactionId, no second accrue.
    const v5 = await deliver(orderEvent('SALE-1', 5, 'EV-5'));
    expect(v5.status).toBe(200);
    expect(v5.body.results).toEqual([{ key: 'EV-5', action: 'checkout', transactionId: 'square:SALE-1', status: 'accrued', duplicate: true }]);
    const books = h.sim.books();
    expect(books.accrueRequests).toBe(1);
    expect(books.doubleAccruals).toEqual([]);
    expect(fake.requests).toHaveLength(2);
  });

  it('an OPEN order.created is acknowledged without calling Square', async () => {
    const res = await deliver(recent(fixture('webhook_order_created.json')));
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ action: 'ignored', reason: expect.stringMatching(/is OPEN \(version 1\)/) });
    expect(fake.requests).toEqual([]);
    expect(await h.bridge.store.count()).toBe(0);
  });

  it('refunds: PENDING waits; COMPLETED reverses what the return order returned, once, and re-accrues the rest', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    fake.answer('/v2/orders/RET-1', { order: returnOrder() });
    await deliver(orderEvent('SALE-1', 4, 'EV-4'));

    // Square's two examples share one event_id: the PENDING one is acknowledged but not remembered, so the COMPLETED one still acts.
    const pending = await deliver(refundEvent('webhook_refund_created.json'));
    expect(pending.status).toBe(200);
    expect(pending.body.results[0]).toMatchObject({ action: 'ignored', reason: expect.stringMatching(/is PENDING: waits for COMPLETED/) });
    expect(h.sim.books().reverseRequests).toBe(0);

    const done = await deliver(refundEvent('webhook_refund_updated.json'));
    expect(done.status).toBe(200);
    expect(done.body.results).toEqual([{ key: 'bc316346-6691-4243-88ed-6d651a0d0c47', action: 'refund', transactionId: 'square:SALE-1', status: 'reversed' }]);
    expect(fake.requests.map((r) => r.path)).toEqual(['/v2/orders/SALE-1', '/v2/orders/RET-1']);
    let books = h.sim.books();
    expect(books.transactions['square:SALE-1']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    // 5666 − 2077 (one steak, tax excluded) remains.
    expect(books.transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 3589 });

    // Redelivered; a second PaymentRefund of the same return (split tender); the return order's own order.updated.
    expect((await deliver(refundEvent('webhook_refund_updated.json'))).body.results[0]).toMatchObject({ duplicate: true });
    const second = await deliver(refundEvent('webhook_refund_updated.json', 'EV-R3', { id: 'OTHER-TENDER-REFUND', amount_money: usd(1000) }));
    expect(second.status).toBe(200);
    expect(second.body.results[0]).toMatchObject({ action: 'refund', duplicate: true, transactionId: 'square:SALE-1' });
    const own = await deliver(orderEvent('RET-1', 1, 'EV-R4', 'order.created'));
    expect(own.body.results[0]).toMatchObject({ action: 'ignored', reason: expect.stringMatching(/is a return order/) });
    books = h.sim.books();
    expect(books.reverseRequests).toBe(1);
    expect(books.accrueRequests).toBe(2);
    expect(books.doubleReversals).toEqual([]);
  });

  it('an authentic event created three days ago is refused as a replay (Square retries for 24 h) and records nothing', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    const old = { ...orderEvent('SALE-1', 4, 'EV-OLD'), created_at: new Date(Date.now() - 3 * 24 * 3600_000).toISOString() };
    const res = await deliver(old);
    expect(res.status).toBe(401);
    expect(res.body.error.message).toMatch(/replay window/);
    expect(await h.bridge.store.count()).toBe(0);
    expect(fake.requests).toEqual([]);
  });

  it('a wrong, missing, empty or repeated signature is 401 and records nothing', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    const event = orderEvent('SALE-1', 4, 'EV-4');
    const raw = JSON.stringify(event);
    const [header, good] = signature(squareAdapter, settings, raw);
    const wrong = signature(squareAdapter, { ...settings, webhookSecret: 'not-the-key' }, raw)[1];
    for (const headers of [[[header, wrong]], [], [[header, '']], [[header, good], [header, good]]] as [string, string][][]) {
      const res = await deliver(event, headers);
      expect(res.status).toBe(401);
    }
    expect(await h.bridge.store.count()).toBe(0);
    expect(fake.requests).toEqual([]);
    expect(h.sim.books().accrueRequests).toBe(0);
    // The same bytes correctly signed are accepted: only the signature was wrong.
    expect((await deliver(event, [[header, good]])).status).toBe(200);
  });

  it('an authentic delivery that cannot be translated is a dead letter: 202 naming it, listed, replayable once fixed', async () => {
    // Square's answer claims a 300 tip that is not inside its total: the bridge refuses to guess.
    fake.answer('/v2/orders/SALE-2', { order: sale('SALE-2', { total_tip_money: usd(300) }) });
    const res = await deliver(orderEvent('SALE-2', 4, 'EV-9'));
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([
      { key: 'EV-9', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringContaining('does not add up'), issues: [{ field: 'order.total_money', message: expect.stringMatching(/^does not add up/) }] },
    ]);
    const { deadLetterId } = res.body.results[0];
    expect(deadLetterId).toEqual(expect.any(String));
    expect(h.sim.books().accrueRequests).toBe(0);

    const list = await admin('get', '/v1/admin/dead-letters');
    expect(list.status).toBe(200);
    // Square answered, with figures that do not add up: a person must look; the bridge does not retry it.
    expect(list.body.items).toEqual([expect.objectContaining({ id: deadLetterId, pos: 'square', deliveries: 1, retry: { transient: false, attempts: 0 } })]);

    // The order is corrected in Square; the operator replays the kept delivery.
    fake.answer('/v2/orders/SALE-2', { order: sale('SALE-2') });
    const replay = await admin('post', `/v1/admin/dead-letters/${deadLetterId}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([{ key: 'EV-9', action: 'checkout', transactionId: 'square:SALE-2', status: 'accrued' }]);
    expect(replay.body.deadLetter.resolvedAt).toEqual(expect.any(String));
    expect(h.sim.books().transactions['square:SALE-2']).toMatchObject({ accruals: 1, amount: 5666 });
  });

  it('an order with only customer_id: the customer is fetched from Square (GET /v2/customers/{id})', async () => {
    fake.answer('/v2/orders/SALE-3', { order: sale('SALE-3', { fulfillments: undefined, customer_id: 'CUST-1' }) });
    fake.answer('/v2/customers/CUST-1', { customer: { id: 'CUST-1', given_name: 'Bo', phone_number: '(555) 000-2222', email_address: 'Bo@Example.test' } });
    const res = await deliver(orderEvent('SALE-3', 4, 'EV-11'));
    expect(res.body.results[0]).toMatchObject({ status: 'accrued' });
    expect((await h.bridge.store.get('square:SALE-3'))!.accrual.customer).toEqual({ phone: '+15550002222', email: 'bo@example.test', firstName: 'Bo' });
    expect(fake.requests.map((r) => r.path)).toEqual(['/v2/orders/SALE-3', '/v2/customers/CUST-1']);
  });
});

describe('Square payloads posted directly', () => {
  beforeEach(() => start());
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('POST /v1/checkouts/square with a bare Order (and again wrapped) accrues once', async () => {
    const res = await post('/v1/checkouts/square', fixture('PayOrderResponse_example.json').order);
    expect(res.status).toBe(200);
    // No phone, email or customer id in Square's PayOrder example: recorded as skipped.
    expect(res.body).toMatchObject({ transactionId: 'square:lgwOlEityYPJtcuvKTVKT1pA986YY', status: 'skipped' });

    const first = await post('/v1/checkouts/square', sale());
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ transactionId: 'square:SALE-1', status: 'accrued', repeat: false });
    const wrapped = await post('/v1/checkouts/square', { order: sale() });
    expect(wrapped.body).toMatchObject({ transactionId: 'square:SALE-1', status: 'accrued', repeat: true });
    expect(h.sim.books().transactions['square:SALE-1']).toMatchObject({ accruals: 1, amount: 5666 });
  });

  it('an OPEN order posted as a checkout is a 400 naming state', async () => {
    const res = await post('/v1/checkouts/square', fixture('RetrieveOrderResponse_example.json'));
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ field: 'order.state', message: expect.stringMatching(/^is "OPEN"/) }]);
  });

  it('POST /v1/refunds/square with a bare return order reverses the returned part; a PaymentRefund with its sale order in full reverses all', async () => {
    await post('/v1/checkouts/square', sale());
    const partial = await post('/v1/refunds/square', returnOrder());
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ transactionId: 'square:SALE-1', status: 'reversed', refundId: 'RET-1', remainder: { transactionId: 'square:SALE-1~r1', status: 'accrued' } });
    expect(h.sim.books().transactions['square:SALE-1~r1']).toMatchObject({ amount: 3589 });

    await post('/v1/checkouts/square', sale('SALE-4'));
    const full = await post('/v1/refunds/square', { refund: { id: 'PR-9', status: 'COMPLETED', amount_money: usd(6176), order_id: 'SALE-4' }, order: sale('SALE-4') });
    expect(full.status).toBe(200);
    expect(full.body).toMatchObject({ transactionId: 'square:SALE-4', status: 'reversed', refundId: 'PR-9' });
    expect(h.sim.books().transactions['square:SALE-4']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
  });

  it('a bare PaymentRefund with SQUARE_ACCESS_TOKEN set: its return order is read from Square and measures it exactly', async () => {
    fake.answer('/v2/orders/RET-1', { order: returnOrder() });
    await post('/v1/checkouts/square', sale());
    const res = await post('/v1/refunds/square', refundEvent('webhook_refund_updated.json', 'x').data.object.refund);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'square:SALE-1', status: 'reversed', refundId: 'RET-1', remainder: { transactionId: 'square:SALE-1~r1', status: 'accrued' } });
    expect(fake.requests).toEqual([{ path: '/v2/orders/RET-1', query: {}, authorization: 'Bearer sq-access-token' }]);
    expect(h.sim.books().transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, amount: 3589 });
  });

  it("a bare PaymentRefund whose return order Square cannot give now: 502, nothing recorded, the sender posts it again", async () => {
    fake.answer('/v2/orders/RET-1', { errors: [{ code: 'SERVICE_UNAVAILABLE' }] }, 503);
    await post('/v1/checkouts/square', sale());
    const res = await post('/v1/refunds/square', refundEvent('webhook_refund_updated.json', 'x').data.object.refund);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'pos_api_failed', message: 'square API GET /v2/orders/RET-1 answered 503' });
    expect(h.sim.books().reverseRequests).toBe(0);
    expect((await h.bridge.store.get('square:SALE-1'))!.status).toBe('accrued');
  });
});

describe('Square webhooks without SQUARE_ACCESS_TOKEN', () => {
  beforeEach(() => start(false));
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  /** Square's own PaymentRefund example (refund.updated), naming the recorded sale and giving back `amount` cents. */
  const paymentRefund = (id: string, orderId: string, amount: number) => ({ ...fixture('webhook_refund_updated.json').data.object.refund, id, order_id: orderId, amount_money: usd(amount) });
  const historyOf = async (transactionId: string) => (await admin('get', `/v1/admin/transactions/${transactionId}`)).body.history.map((e: { event: string }) => e.event).join('\n');

  it('a bare PaymentRefund of all that was paid (Check + tax + tip as recorded) is a full refund, decided from the ledger', async () => {
    // The sale with a 3.00 tip: 6476 paid = 5666 Check + 510 tax + 300 tip.
    expect((await post('/v1/checkouts/square', sale('SALE-T', { total_money: usd(6476), total_tip_money: usd(300) }))).body).toMatchObject({ status: 'accrued' });
    expect((await h.bridge.store.get('square:SALE-T'))!.accrual.check).toMatchObject({ amount: 5666, taxAmount: 510, tipAmount: 300 });

    const res = await post('/v1/refunds/square', paymentRefund('PR-FULL', 'SALE-T', 6476));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'square:SALE-T', status: 'reversed', refundId: 'PR-FULL' });
    expect(res.body.remainder).toBeUndefined();
    expect(h.sim.books().transactions['square:SALE-T']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(await historyOf('square:SALE-T')).toMatch(/measured without the return order: 64\.76 USD given back of the 64\.76 USD paid \(Check 56\.66 USD, tax 5\.10 USD, tip 3\.00 USD as recorded\), all of it: a full refund/);
    expect(fake.requests).toEqual([]);
  });

  it('a partial one is measured pro rata on the recorded Check, tax excluded, noted on the record; the rest of the payment reverses what remains', async () => {
    await post('/v1/checkouts/square', sale());
    // 12.00 of the 61.76 paid: 1200 × 5666 / 6176 = 1100.9… → 1101 cents of the Check; 4565 remain.
    const res = await post('/v1/refunds/square', paymentRefund('PR-1', 'SALE-1', 1200));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: 'square:SALE-1', status: 'reversed', refundId: 'PR-1', remainder: { transactionId: 'square:SALE-1~r1', status: 'accrued' } });
    let books = h.sim.books();
    expect(books.transactions['square:SALE-1']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 4565 });
    expect(await historyOf('square:SALE-1')).toMatch(
      /measured without the return order: 12\.00 USD given back of the 61\.76 USD paid \(Check 56\.66 USD, tax 5\.10 USD, tip 0\.00 USD as recorded\), so 11\.01 USD of the 56\.66 USD Check, pro rata, rounded half away from zero/,
    );
    // Square sends it again: the same refund, nothing sent.
    expect((await post('/v1/refunds/square', paymentRefund('PR-1', 'SALE-1', 1200))).body).toMatchObject({ refundId: 'PR-1', repeat: true });

    // The rest of the payment, 49.76: 4976 × 5666 / 6176 = 4565.09… → 4565, all that remains: reversed, nothing left to accrue.
    const rest = await post('/v1/refunds/square', paymentRefund('PR-2', 'SALE-1', 4976));
    expect(rest.status).toBe(200);
    expect(rest.body).toMatchObject({ transactionId: 'square:SALE-1~r1', status: 'reversed', refundId: 'PR-2' });
    expect(rest.body.remainder).toBeUndefined();
    books = h.sim.books();
    expect(books.transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions['square:SALE-1~r2']).toBeUndefined();
    expect(books.reverseRequests).toBe(2);
    expect(books.doubleReversals).toEqual([]);
    expect(fake.requests).toEqual([]);
  });

  it('the refund.updated webhook (Square\'s fixture, naming the recorded sale) is measured the same way', async () => {
    await post('/v1/checkouts/square', sale());
    const res = await deliver(refundEvent('webhook_refund_updated.json', 'EV-R1', { order_id: 'SALE-1', amount_money: usd(1000) }));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: 'EV-R1', action: 'refund', transactionId: 'square:SALE-1', status: 'reversed' }]);
    // 1000 × 5666 / 6176 = 917.4… → 917; 4749 remain.
    expect(h.sim.books().transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, amount: 4749 });
    expect(await historyOf('square:SALE-1')).toContain('measured without the return order');
    expect(fake.requests).toEqual([]);
  });

  it('a PaymentRefund naming an order the ledger never saw (the return order Square made) cannot be measured: 404 to a post, a dead letter for a person from a webhook', async () => {
    await post('/v1/checkouts/square', sale());
    const direct = await post('/v1/refunds/square', paymentRefund('PR-R', 'RET-1', 2264));
    expect(direct.status).toBe(404);
    expect(direct.body.error).toMatchObject({ code: 'unknown_order', message: expect.stringMatching(/^no order RET-1 in the ledger to measure this refund against: .*Set SQUARE_ACCESS_TOKEN/) });

    const res = await deliver(refundEvent('webhook_refund_updated.json', 'EV-R2'));
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([{ key: 'EV-R2', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/^no order RET-1 in the ledger/) }]);
    expect((await admin('get', `/v1/admin/dead-letters/${res.body.results[0].deadLetterId}`)).body.retry).toEqual({ transient: false, attempts: 0 });
    expect(h.sim.books().reverseRequests).toBe(0);
  });

  it('a refund of more than was paid is refused (409), nothing sent', async () => {
    await post('/v1/checkouts/square', sale());
    const res = await post('/v1/refunds/square', paymentRefund('PR-X', 'SALE-1', 6177));
    expect(res.status).toBe(409);
    expect(res.body.error.message).toBe('refund of 61.77 USD is more than the 61.76 USD paid for order SALE-1 (its Check, tax and tip as recorded)');
    expect(h.sim.books().reverseRequests).toBe(0);
  });

  it('an id-only order event cannot be fetched: kept as a dead letter for a person (202), naming the variable', async () => {
    const res = await deliver(orderEvent('SALE-1', 4, 'EV-4'));
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([{ key: 'EV-4', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/^SQUARE_ACCESS_TOKEN is not set/) }]);
    // Missing configuration needs a person: no automatic run is scheduled.
    const letter = (await admin('get', `/v1/admin/dead-letters/${res.body.results[0].deadLetterId}`)).body;
    expect(letter.retry).toEqual({ transient: false, attempts: 0 });
    expect(fake.requests).toEqual([]);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});
