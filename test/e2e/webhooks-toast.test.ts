/**
 * Toast end to end over HTTP: orders webhook deliveries signed like Toast (base64 HMAC-SHA256 of
 * body + timestamp) → the bridge → the loyalty simulator's books; and Toast orders posted to
 * /v1/checkouts/toast and /v1/refunds/toast.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { toastAdapter } from '../../adapters/toast/index.js';
import type { PosAdapter, PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, startHarness, type Harness, postJson } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const SECRET = 'toast-e2e-signing-secret';
const settings: PosSettings = { webhookSecret: SECRET, apiBaseUrl: '' };
/** Signed times must be recent: Toast deliveries outside a 20-minute window are refused as replays. */
const TIMESTAMP = String(Date.now());
const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const fixture = (): any => JSON.parse(readFileSync(new URL('../fixtures/toast/order_get_example_docs.json', import.meta.url), 'utf8'));

let h: Harness;
const start = (adapter: PosAdapter = toastAdapter) => ({ adapters: new Map([['toast', adapter]]), posSettings: { toast: settings } });
beforeEach(async () => {
  h = await startHarness({ overrides: start() });
});
afterEach(async () => {
  await h.close();
});

// Toast's documented shapes (orders API v2 `Order`, webhook "Message data schema").
const ORDER = 'e2e-order-1';
/** Each check is a sale of its own: the order's guid and its check's. */
const CHECK = 'e2e-check-1';
const TX = `toast:${ORDER}:${CHECK}`;

function order(o: { refund?: 'fries' | 'full'; voided?: boolean; open?: boolean } = {}) {
  const refundTx = (guid: string) => ({ guid, entityType: 'RefundTransaction' });
  return {
    guid: ORDER,
    entityType: 'Order',
    openedDate: '2026-11-21T10:00:00.000+0000',
    paidDate: o.open ? null : '2026-11-21T10:20:00.000+0000',
    closedDate: o.open ? null : '2026-11-21T10:21:00.000+0000',
    voided: o.voided ?? false,
    deleted: false,
    checks: [
      {
        guid: 'e2e-check-1',
        entityType: 'Check',
        amount: 25,
        taxAmount: 1.56,
        totalAmount: 26.56,
        paymentStatus: o.open ? 'OPEN' : 'CLOSED',
        voided: o.voided ?? false,
        deleted: false,
        customer: { entityType: 'Customer', firstName: 'Ann', lastName: 'Lee', phone: '555-000-1111', email: 'ann@b.test' },
        appliedLoyaltyInfo: null,
        appliedDiscounts: [],
        appliedServiceCharges: [],
        selections: [
          { guid: 'e2e-sel-1', item: { guid: 'item-burger' }, itemGroup: { guid: 'group-mains' }, displayName: 'Burger', quantity: 1, price: 15, tax: 0.94, voided: false, refundDetails: o.refund === 'full' ? { refundAmount: 15, taxRefundAmount: 0.94, refundTransaction: refundTx('rt-2') } : null },
          { guid: 'e2e-sel-2', item: { guid: 'item-fries' }, itemGroup: { guid: 'group-sides' }, displayName: 'Fries', quantity: 2, price: 10, tax: 0.62, voided: false, refundDetails: o.refund ? { refundAmount: 10, taxRefundAmount: 0.62, refundTransaction: refundTx('rt-1') } : null },
        ],
        payments: o.open
          ? []
          : [
              {
                guid: 'e2e-pay-1',
                amount: 26.56,
                tipAmount: 3,
                type: 'CREDIT',
                paymentStatus: o.voided ? 'VOIDED' : 'CAPTURED',
                refundStatus: o.refund === 'full' ? 'FULL' : o.refund ? 'PARTIAL' : 'NONE',
                refund: o.refund ? { refundAmount: o.refund === 'full' ? 26.56 : 10.62, tipRefundAmount: 0, refundDate: '2026-11-22T09:00:00.000+0000', refundTransaction: refundTx(o.refund === 'full' ? 'rt-2' : 'rt-1') } : null,
              },
            ],
      },
    ],
  };
}

const message = (eventGuid: string, body: unknown = order()) => ({
  timestamp: new Date().toISOString(),
  eventCategory: 'orders',
  eventType: 'order_updated',
  guid: eventGuid,
  details: { restaurantGuid: 'e2e-restaurant', order: body },
});

/** Posts the exact bytes with the headers Toast sends, signed with `secret`. */
function deliver(body: unknown, secret = SECRET) {
  const raw = JSON.stringify(body);
  const signed = signature(toastAdapter, { ...settings, webhookSecret: secret }, raw, { 'Toast-Timestamp': TIMESTAMP });
  return postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [signed, ['Toast-Timestamp', TIMESTAMP], ['Toast-Event-Type', 'order_updated'], ['Toast-Restaurant-External-ID', 'e2e-restaurant']]);
}

const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

describe('Toast orders webhook', () => {
  it('a paid order accrues its exact amount once; the same delivery and later updates accrue nothing more', async () => {
    const res = await deliver(message('evt-1'));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ pos: 'toast', results: [{ key: 'evt-1:checkout:e2e-check-1', action: 'checkout', transactionId: TX, status: 'accrued' }] });
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, reversals: 0, amount: 2500 });
    expect((await h.bridge.store.get(TX))!.accrual.check).toEqual({
      amount: 2500,
      currency: 'USD',
      externalTransactionId: ORDER,
      checkOpenedAt: '2026-11-21T10:00:00.000Z',
      checkClosedAt: '2026-11-21T10:21:00.000Z',
      taxAmount: 156,
      tipAmount: 300,
      selections: [
        { id: 'item-burger', groupId: 'group-mains', displayName: 'Burger', quantity: 1, price: 1500, totalPrice: 1500 },
        { id: 'item-fries', groupId: 'group-sides', displayName: 'Fries', quantity: 2, price: 500, totalPrice: 1000 },
      ],
    });

    const again = await deliver(message('evt-1'));
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ key: 'evt-1:checkout:e2e-check-1', action: 'checkout', duplicate: true }]);
    const later = await deliver(message('evt-2'));
    expect(later.status).toBe(200);
    expect(later.body.results).toEqual([{ key: 'evt-2:checkout:e2e-check-1', action: 'checkout', transactionId: TX, status: 'accrued', duplicate: true }]);
    expect(h.sim.books().accrueRequests).toBe(1);
    expect(h.sim.books().doubleAccruals).toEqual([]);
  });

  it('an open order is acknowledged and nothing is recorded', async () => {
    const res = await deliver(message('evt-open', order({ open: true })));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: 'evt-open', action: 'ignored', reason: `order ${ORDER} is not paid yet (details.order.checks.0.paymentStatus is OPEN: the check is not paid yet)` }]);
    expect(await h.bridge.store.get(TX)).toBeUndefined();
    expect(h.sim.books().accrueRequests).toBe(0);
  });

  it('a partial refund reverses once and re-accrues the remainder; a full refund then reverses the remainder', async () => {
    await deliver(message('evt-1'));
    const partial = await deliver(message('evt-2', order({ refund: 'fries' })));
    expect(partial.status).toBe(200);
    expect(partial.body.results).toEqual([
      { key: 'evt-2:checkout:e2e-check-1', action: 'checkout', transactionId: TX, status: 'accrued', duplicate: true },
      { key: 'evt-2:refund:rt-1:e2e-check-1', action: 'refund', transactionId: TX, status: 'reversed' },
    ]);
    let books = h.sim.books();
    expect(books.transactions[TX]).toMatchObject({ accruals: 1, reversals: 1 });
    // 25.00 less the fries' 10.00 (tax 0.62 not counted): 15.00, the burger alone.
    expect(books.transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 1500 });
    expect((await h.bridge.store.get(`${TX}~r1`))!.accrual.check!.selections).toEqual([{ id: 'item-burger', groupId: 'group-mains', displayName: 'Burger', quantity: 1, price: 1500, totalPrice: 1500 }]);

    // Toast retries the same event, and later events still carry rt-1: nothing changes.
    await deliver(message('evt-2', order({ refund: 'fries' })));
    const later = await deliver(message('evt-3', order({ refund: 'fries' })));
    expect(later.body.results[1]).toMatchObject({ key: 'evt-3:refund:rt-1:e2e-check-1', action: 'refund', duplicate: true });
    books = h.sim.books();
    expect(books.reverseRequests).toBe(1);
    expect(books.accrueRequests).toBe(2);

    const full = await deliver(message('evt-4', order({ refund: 'full' })));
    expect(full.status).toBe(200);
    expect(full.body.results[1]).toEqual({ key: 'evt-4:refund:full:e2e-check-1', action: 'refund', transactionId: `${TX}~r1`, status: 'reversed' });
    books = h.sim.books();
    expect(books.transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.reverseRequests).toBe(2);
    expect(books.doubleReversals).toEqual([]);
  });

  it('a refund seen before its checkout: the original accrues first, then the refund applies', async () => {
    const res = await deliver(message('evt-late', order({ refund: 'fries' })));
    expect(res.body.results.map((r: { status: string }) => r.status)).toEqual(['accrued', 'reversed']);
    expect(h.sim.books().transactions[`${TX}~r1`]).toMatchObject({ accruals: 1, amount: 1500 });
  });

  it('a paid order voided afterwards is reversed once', async () => {
    await deliver(message('evt-1'));
    const voided = await deliver(message('evt-void', order({ voided: true })));
    expect(voided.status).toBe(200);
    expect(voided.body.results).toEqual([{ key: 'evt-void:refund:void:e2e-check-1', action: 'refund', transactionId: TX, status: 'reversed' }]);
    await deliver(message('evt-void', order({ voided: true })));
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(h.sim.books().reverseRequests).toBe(1);
  });

  it("an order an earlier build kept whole (toast:<order>) is that record's: its check accrues nothing more, and its void reverses it once", async () => {
    // What a build before per-check sales recorded: the whole order under the order's guid.
    const { part: _part, recordedAs: _recordedAs, ...whole } = toastAdapter.parseCheckout(order(), context);
    expect((await h.bridge.core.intake.checkout('toast', whole)).record).toMatchObject({ transactionId: `toast:${ORDER}`, status: 'accrued' });
    const again = await deliver(message('evt-after-upgrade'));
    expect(again.body.results).toEqual([{ key: 'evt-after-upgrade:checkout:e2e-check-1', action: 'checkout', transactionId: `toast:${ORDER}`, status: 'accrued', duplicate: true }]);
    expect(await h.bridge.store.get(TX)).toBeUndefined();
    const voided = await deliver(message('evt-void-after', order({ voided: true })));
    expect(voided.body.results).toEqual([{ key: 'evt-void-after:refund:void:e2e-check-1', action: 'refund', transactionId: `toast:${ORDER}`, status: 'reversed' }]);
    expect(h.sim.books().transactions[`toast:${ORDER}`]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(h.sim.books().accrueRequests).toBe(1);
  });

  it("a check voided alone in an order an earlier build kept whole takes back that check's share, not the other check's", async () => {
    const two = order();
    const second = structuredClone(two.checks[0]!);
    Object.assign(second, { guid: 'e2e-check-2', amount: 7, taxAmount: 0.44, totalAmount: 7.44, selections: [{ ...second.selections[0], guid: 'e2e-sel-3', item: { guid: 'item-tea' }, displayName: 'Tea', price: 7, tax: 0.44 }], payments: [{ ...second.payments[0], guid: 'e2e-pay-2', amount: 7.44, tipAmount: 0 }] });
    two.checks.push(second);
    // The whole order as one record, as builds before kept it: 25.00 + 7.00.
    const first = toastAdapter.parseCheckout({ order: two, checkGuid: CHECK }, context);
    const tea = toastAdapter.parseCheckout({ order: two, checkGuid: 'e2e-check-2' }, context);
    const whole = { orderId: ORDER, customer: first.customer, check: { ...first.check, amount: first.check.amount + tea.check.amount, selections: [...first.check.selections, ...tea.check.selections] } };
    expect((await h.bridge.core.intake.checkout('toast', whole)).record).toMatchObject({ transactionId: `toast:${ORDER}`, status: 'accrued' });
    // The tea's check alone is voided: 7.00 of the 32.00 comes back; the rest stays accrued.
    Object.assign(two.checks[1]!, { voided: true });
    const res = await deliver(message('evt-tea-void', two));
    expect(res.body.results).toEqual([
      { key: `evt-tea-void:checkout:${CHECK}`, action: 'checkout', transactionId: `toast:${ORDER}`, status: 'accrued', duplicate: true },
      expect.objectContaining({ key: 'evt-tea-void:refund:void:e2e-check-2', action: 'refund', transactionId: `toast:${ORDER}`, status: 'reversed' }),
    ]);
    expect(h.sim.books().transactions[`toast:${ORDER}~r1`]).toMatchObject({ accruals: 1, amount: 2500 });
  });

  it('a wrong or missing signature is refused with 401 and nothing is recorded', async () => {
    const wrong = await deliver(message('evt-1'), 'not-the-secret');
    expect(wrong.status).toBe(401);
    const raw = JSON.stringify(message('evt-1'));
    const unsigned = await postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [['Toast-Timestamp', TIMESTAMP]]);
    expect(unsigned.status).toBe(401);
    // Signed over another timestamp than the one sent.
    const signed = signature(toastAdapter, settings, raw, { 'Toast-Timestamp': TIMESTAMP });
    const replayed = await postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [signed, ['Toast-Timestamp', '1763720999999']]);
    expect(replayed.status).toBe(401);
    // Signed right, but in 2001: a captured delivery replayed long after, refused.
    const old = '1000000000000';
    const stale = await postRaw(`${h.bridge.url}/v1/webhooks/toast`, raw, [signature(toastAdapter, settings, raw, { 'Toast-Timestamp': old }), ['Toast-Timestamp', old]]);
    expect(stale.status).toBe(401);
    expect(stale.body.error.message).toMatch(/outside the 20 min replay window/);
    expect(await h.bridge.store.get(TX)).toBeUndefined();
    expect(h.sim.books().accrueRequests).toBe(0);
    expect((await admin('get', '/v1/admin/dead-letters')).body.total).toBe(0);
  });

  it('an authentic delivery that cannot be translated is a dead letter (202 naming it), listed, and replayable once fixed', async () => {
    // The order named by its guid only: the bridge does not fetch orders from Toast's API.
    const idOnly = message('evt-id-only', { guid: ORDER, entityType: 'Order' });
    const res = await deliver(idOnly);
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', deadLetterId: expect.any(String), issues: [expect.objectContaining({ field: 'details.order.checks' })] })]);
    const id = res.body.results[0].deadLetterId as string;
    expect(typeof id).toBe('string');

    const list = await admin('get', '/v1/admin/dead-letters');
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([expect.objectContaining({ id, pos: 'toast', deliveries: 1 })]);
    expect((await admin('get', `/v1/admin/dead-letters/${id}?unmask=true`)).body.body).toBe(JSON.stringify(idOnly));
    expect(h.sim.books().accrueRequests).toBe(0);

    const still = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(still.status).toBe(422);

    // The operator's fix (here: an adapter that is given the full order) lets the replay through.
    const fixed: PosAdapter = {
      ...toastAdapter,
      webhook: { ...toastAdapter.webhook!, classify: (body, headers) => toastAdapter.webhook!.classify({ ...(body as object), details: { order: order() } }, headers) },
    };
    await h.restart(start(fixed));
    const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([{ key: 'evt-id-only:checkout:e2e-check-1', action: 'checkout', transactionId: TX, status: 'accrued' }]);
    expect(replay.body.deadLetter.resolvedAt).toEqual(expect.any(String));
    expect(h.sim.books().transactions[TX]).toMatchObject({ accruals: 1, amount: 2500 });
  });
});

describe('POST /v1/checkouts/toast and /v1/refunds/toast with bare Toast orders', () => {
  it('the documented example order accrues 1.00 and its full refund reverses it once', async () => {
    const guid = '017fdd94-4a30-4657-9475-b1a684758531';
    const check = '9f42438a-a375-4983-9f80-c0dae5c33196';
    const tx = `toast:${guid}:${check}`;
    const res = await post('/v1/checkouts/toast', fixture());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: tx, status: 'accrued' });
    expect(h.sim.books().transactions[tx]).toMatchObject({ accruals: 1, amount: 100 });

    const refunded = fixture();
    Object.assign(refunded.checks[0].payments[0], { refundStatus: 'FULL', refund: { refundAmount: 1.06, tipRefundAmount: 0, refundDate: '2019-02-26T09:00:00.000+0000' } });
    const reversal = await post('/v1/refunds/toast', { order: refunded });
    expect(reversal.status).toBe(200);
    expect(reversal.body).toMatchObject({ transactionId: tx, status: 'reversed', refundId: `full:${guid}:${check}` });
    expect((await post('/v1/refunds/toast', refunded)).body).toMatchObject({ status: 'reversed', repeat: true });
    expect(h.sim.books().transactions[tx]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
  });

  it('a partial refund is posted as { order, refundTransactionGuid }', async () => {
    await post('/v1/checkouts/toast', order());
    const res = await post('/v1/refunds/toast', { order: order({ refund: 'fries' }), refundTransactionGuid: 'rt-1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: TX, status: 'reversed', refundId: 'rt-1', remainder: { transactionId: `${TX}~r1`, status: 'accrued' } });
    expect(h.sim.books().transactions[`${TX}~r1`]).toMatchObject({ amount: 1500 });
  });

  it('an order that is not paid yet is a 400 naming the field', async () => {
    const res = await post('/v1/checkouts/toast', order({ open: true }));
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ field: 'checks.0.paymentStatus', message: 'is OPEN: the check is not paid yet' }]);
  });
});
