/**
 * Clover end to end over HTTP: a notification signed like Clover (static X-Clover-Auth) → the bridge
 * fetches the order from a fake Clover API → the simulator's books show the accrue once; refunds,
 * repeats, a wrong auth code, a dead letter and its replay; and the bare-object endpoints.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { cloverAdapter } from '../../adapters/clover/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { ADMIN_TOKEN, startHarness, type Harness, postJson } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const FIXTURES = new URL('../fixtures/clover/', import.meta.url);
const fixture = (name: string): any => JSON.parse(readFileSync(fileURLToPath(new URL(name, FIXTURES)), 'utf8'));

const M = 'HFBW9FH45ZBH2';
const O = 'KJHCCYXHV3ZDY';
const TID = `clover:${M}:${O}`;
const ORDER_PATH = `/v3/merchants/${M}/orders/${O}`;

let fake: FakePosApi;
let h: Harness;
let settings: PosSettings;

beforeEach(async () => {
  fake = await startFakePosApi();
  settings = { webhookSecret: 'clover-auth-code-0307e264', accessToken: 'clover-token', apiBaseUrl: fake.url };
  h = await startHarness({ overrides: { adapters: new Map([['clover', cloverAdapter]]), posSettings: { clover: settings } } });
});
afterEach(async () => {
  await h.close();
  await fake.close();
});

const customer = { id: 'CUST000000001', firstName: 'Ann', phoneNumbers: { elements: [{ phoneNumber: '+1 555 000 1111' }] } };

/** A paid order as the Clover API returns it: two $5.00 lattes, $0.80 tax, a $1.00 tip. */
function paidOrder(extra: Record<string, unknown> = {}) {
  return {
    href: `https://api.clover.com/v3/merchants/${M}/orders/${O}`,
    id: O,
    currency: 'USD',
    total: 1080,
    state: 'locked',
    createdTime: 1700000000000,
    modifiedTime: 1700000060000,
    lineItems: { elements: [{ id: 'L1', item: { id: 'LATTE00000001' }, name: 'Latte', price: 500 }, { id: 'L2', item: { id: 'LATTE00000001' }, name: 'Latte', price: 500 }] },
    payments: { elements: [{ id: 'PAY1', amount: 1080, taxAmount: 80, tipAmount: 100, result: 'SUCCESS', createdTime: 1700000060000 }] },
    customers: { elements: [customer] },
    ...extra,
  };
}

const notification = (ts: number, type = 'UPDATE') => JSON.stringify({ appId: 'APP0000000001', merchants: { [M]: [{ objectId: `O:${O}`, type, ts }] } });
const deliver = (body: string, headers: [string, string][] = [signature(cloverAdapter, settings, body)]) => postRaw(`${h.bridge.url}/v1/webhooks/clover`, body, headers);
const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

describe('Clover webhooks', () => {
  it('a notification of a paid order fetches it and accrues the amount without tax and tip, once however often it comes', async () => {
    fake.answer(ORDER_PATH, paidOrder());
    const first = await deliver(notification(1));
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ pos: 'clover', results: [{ key: `${M}/O:${O}/UPDATE/1`, action: 'checkout', transactionId: TID, status: 'accrued' }] });
    expect(h.sim.books().transactions[TID]).toMatchObject({ accruals: 1, reversals: 0, amount: 1000 });
    const record = await h.bridge.store.get(TID);
    expect(record!.accrual.check).toMatchObject({ amount: 1000, taxAmount: 80, tipAmount: 100, selections: [{ id: 'LATTE00000001', quantity: 2, price: 500, totalPrice: 1000 }] });
    expect(record!.accrual.customer).toMatchObject({ phone: '+15550001111' });

    // The same delivery again: recognised by its key, nothing fetched, nothing sent.
    const fetchesBefore = fake.requests.length;
    const again = await deliver(notification(1));
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ key: `${M}/O:${O}/UPDATE/1`, action: 'checkout', duplicate: true }]);
    expect(fake.requests.length).toBe(fetchesBefore);

    // Another notification of the same order: fetched, but the order is already recorded.
    const later = await deliver(notification(2));
    expect(later.body.results).toEqual([{ key: `${M}/O:${O}/UPDATE/2`, action: 'checkout', transactionId: TID, status: 'accrued', duplicate: true }]);
    expect(h.sim.books().accrueRequests).toBe(1);
    expect(h.sim.books().doubleAccruals).toEqual([]);
  });

  it('a customer named only by id is fetched from the Clover API before accruing', async () => {
    fake.answer(ORDER_PATH, paidOrder({ customers: { elements: [{ id: 'CUST000000001' }] } }));
    fake.answer(`/v3/merchants/${M}/customers/CUST000000001`, customer);
    const res = await deliver(notification(1));
    expect(res.body.results[0]).toMatchObject({ status: 'accrued' });
    expect(fake.requests.some((r) => r.path === `/v3/merchants/${M}/customers/CUST000000001`)).toBe(true);
    expect((await h.bridge.store.get(TID))!.accrual.customer).toMatchObject({ phone: '+15550001111', firstName: 'Ann' });
  });

  it('an open order is acknowledged and ignored; it accrues on the update that locks it', async () => {
    fake.answer(ORDER_PATH, paidOrder({ state: 'open', payments: { elements: [] } }));
    const open = await deliver(notification(1, 'CREATE'));
    expect(open.status).toBe(200);
    expect(open.body.results).toEqual([{ key: `${M}/O:${O}/CREATE/1`, action: 'ignored', reason: `order ${O} is "open": it accrues once paid (state "locked")` }]);
    expect(h.sim.books().accrueRequests).toBe(0);
    fake.answer(ORDER_PATH, paidOrder());
    expect((await deliver(notification(2))).body.results[0]).toMatchObject({ action: 'checkout', status: 'accrued' });
  });

  it('a refund reverses once: a partial one reverses and re-accrues the remainder, without tax', async () => {
    fake.answer(ORDER_PATH, paidOrder());
    await deliver(notification(1));
    // One latte refunded: $5.40 with $0.40 tax.
    fake.answer(ORDER_PATH, paidOrder({ refunds: { elements: [{ id: 'REFUND1', orderRef: { id: O }, amount: 540, taxAmount: 40, createdTime: 1700000100000 }] } }));
    const res = await deliver(notification(3));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([{ key: `${M}/O:${O}/UPDATE/3`, action: 'refund', transactionId: TID, status: 'reversed' }]);
    const books = h.sim.books();
    expect(books.transactions[TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${TID}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 500 });
    // The refund seen again (another notification of the order): no second reverse.
    const again = await deliver(notification(4));
    expect(again.body.results[0]).toMatchObject({ action: 'refund', duplicate: true });
    expect(h.sim.books().reverseRequests).toBe(1);
    expect(h.sim.books().doubleReversals).toEqual([]);
  });

  it('two partial refunds new in one fetch are both applied, oldest first; seen again, neither repeats', async () => {
    fake.answer(ORDER_PATH, paidOrder());
    await deliver(notification(1));
    // $2.16 (with $0.16 tax) then $3.24 (with $0.24 tax): the first notification of them was lost.
    const refunds = [
      { id: 'REFUND2', orderRef: { id: O }, amount: 324, taxAmount: 24, createdTime: 1700000200000 },
      { id: 'REFUND1', orderRef: { id: O }, amount: 216, taxAmount: 16, createdTime: 1700000100000 },
    ];
    fake.answer(ORDER_PATH, paidOrder({ refunds: { elements: refunds } }));
    const res = await deliver(notification(5));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { key: `${M}/O:${O}/UPDATE/5/REFUND1`, action: 'refund', transactionId: TID, status: 'reversed' },
      { key: `${M}/O:${O}/UPDATE/5/REFUND2`, action: 'refund', transactionId: `${TID}~r1`, status: 'reversed' },
    ]);
    const books = h.sim.books();
    expect(books.transactions[TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${TID}~r1`]).toMatchObject({ accruals: 1, reversals: 1, amount: 800 });
    expect(books.transactions[`${TID}~r2`]).toMatchObject({ accruals: 1, reversals: 0, amount: 500 });

    const again = await deliver(notification(6));
    expect(again.body.results.map((r: { duplicate?: boolean }) => r.duplicate)).toEqual([true, true]);
    expect(h.sim.books()).toMatchObject({ reverseRequests: 2, doubleAccruals: [], doubleReversals: [] });
  });

  it('a fetch that missed an earlier refund applies the latest as partial; the fetch showing both reverses the rest', async () => {
    fake.answer(ORDER_PATH, paidOrder());
    await deliver(notification(1));
    const older = { id: 'REFUND1', orderRef: { id: O }, amount: 540, taxAmount: 40, createdTime: 1700000100000 };
    const newer = { id: 'REFUND2', orderRef: { id: O }, amount: 540, taxAmount: 40, createdTime: 1700000200000 };
    fake.answer(ORDER_PATH, paidOrder({ refunds: { elements: [newer] } }));
    expect((await deliver(notification(5))).body.results[0]).toMatchObject({ action: 'refund', status: 'reversed' });
    fake.answer(ORDER_PATH, paidOrder({ refunds: { elements: [older, newer] } }));
    expect((await deliver(notification(6))).body.results).toEqual([{ key: `${M}/O:${O}/UPDATE/6`, action: 'refund', transactionId: `${TID}~r1`, status: 'reversed' }]);
    const books = h.sim.books();
    expect(books.transactions[TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${TID}~r1`]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books).toMatchObject({ doubleAccruals: [], doubleReversals: [] });
  });

  it('a full refund reverses the whole accrual once', async () => {
    fake.answer(ORDER_PATH, paidOrder());
    await deliver(notification(1));
    fake.answer(ORDER_PATH, paidOrder({ refunds: { elements: [{ id: 'REFUND1', orderRef: { id: O }, amount: 1180, taxAmount: 80, tipAmount: 100, createdTime: 1700000100000 }] } }));
    expect((await deliver(notification(3))).body.results[0]).toMatchObject({ action: 'refund', transactionId: TID, status: 'reversed' });
    expect((await deliver(notification(4))).body.results[0]).toMatchObject({ duplicate: true });
    expect(h.sim.books().transactions[TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(h.sim.books().transactions[`${TID}~r1`]).toBeUndefined();
    expect(h.sim.books().reverseRequests).toBe(1);
  });

  it.each([
    ['wrong', [['X-Clover-Auth', 'clover-auth-code-0307e265']]],
    ['missing', []],
    ['empty', [['X-Clover-Auth', '']]],
    ['repeated', [['X-Clover-Auth', 'clover-auth-code-0307e264'], ['X-Clover-Auth', 'clover-auth-code-0307e264']]],
  ] as [string, [string, string][]][])('an auth code that is %s is refused with 401 and nothing is recorded', async (_name, headers) => {
    fake.answer(ORDER_PATH, paidOrder());
    const res = await deliver(notification(1), headers);
    expect(res.status).toBe(401);
    expect(fake.requests).toEqual([]);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect(await h.bridge.store.get(TID)).toBeUndefined();
    expect((await admin('get', '/v1/admin/dead-letters')).body.total).toBe(0);
  });

  it('an authentic delivery that cannot be translated is a dead letter: 202 naming it, listed and replayable', async () => {
    // The real sandbox order, read without its lines' discounts: its parts do not add up to its total.
    const sandbox = fixture('order_expanded_lineItems_payments_sandbox.json');
    const path = `/v3/merchants/${M}/orders/${sandbox.id}`;
    fake.answer(path, { ...sandbox, customers: { elements: [customer] } });
    const body = JSON.stringify({ appId: 'APP0000000001', merchants: { [M]: [{ objectId: `O:${sandbox.id}`, type: 'UPDATE', ts: 1487626471000 }] } });
    const res = await deliver(body);
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([
      {
        key: `${M}/O:${sandbox.id}/UPDATE/1487626471000`,
        action: 'dead_lettered',
        deadLetterId: expect.any(String),
        reason: expect.stringContaining('total'),
        issues: [{ field: 'total', message: expect.stringContaining('is 22900, but the order\'s parts add up to 30500') }],
      },
    ]);
    const { deadLetterId } = res.body.results[0];
    expect(deadLetterId).toEqual(expect.any(String));
    expect(h.sim.books().accrueRequests).toBe(0);

    const list = await admin('get', '/v1/admin/dead-letters');
    expect(list.status).toBe(200);
    expect(list.body.items.map((l: { id: string; pos: string }) => [l.id, l.pos])).toEqual([[deadLetterId, 'clover']]);

    // Clover now answers with the lines' discounts expanded: the replay fetches again and accrues.
    fake.answer(path, { ...sandbox, lineItems: fixture('order_line_items_with_discounts_sandbox.json'), customers: { elements: [customer] } });
    const replay = await admin('post', `/v1/admin/dead-letters/${deadLetterId}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([{ key: `${M}/O:${sandbox.id}/UPDATE/1487626471000`, action: 'checkout', transactionId: `clover:${M}:${sandbox.id}`, status: 'accrued' }]);
    expect(h.sim.books().transactions[`clover:${M}:${sandbox.id}`]).toMatchObject({ accruals: 1, amount: 22900 });
  });

  it("Clover's URL verification POST is refused unsigned once CLOVER_AUTH_CODE is set, and acknowledged signed", async () => {
    const body = JSON.stringify({ verificationCode: 'ce7643c1-83ea-4218-abe6-da876c9c7a0a' });
    expect((await deliver(body, [])).status).toBe(401);
    const signed = await deliver(body);
    expect(signed.status).toBe(200);
    expect(signed.body.results).toEqual([{ key: 'verification:ce7643c1-83ea-4218-abe6-da876c9c7a0a', action: 'ignored', reason: expect.stringContaining('ce7643c1-83ea-4218-abe6-da876c9c7a0a') }]);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect(fake.requests).toEqual([]);
    expect((await admin('get', '/v1/admin/dead-letters')).body.total).toBe(0);
  });

  it('dead letters never keep the auth code: not in the API, not on disk, and scrubbed from letters an earlier build kept', async () => {
    const sandbox = fixture('order_expanded_lineItems_payments_sandbox.json');
    fake.answer(`/v3/merchants/${M}/orders/${sandbox.id}`, { ...sandbox, customers: { elements: [customer] } });
    const body = JSON.stringify({ appId: 'APP0000000001', merchants: { [M]: [{ objectId: `O:${sandbox.id}`, type: 'UPDATE', ts: 1487626471000 }] } });
    const res = await deliver(body, [signature(cloverAdapter, settings, body), ['X-Request-Id', 'req-1'], ['X-Api-Key', 'some-key-0123'], ['Cookie', 'session=abc']]);
    const { deadLetterId } = res.body.results[0];
    const letter = (await admin('get', `/v1/admin/dead-letters/${deadLetterId}`)).body;
    expect(letter.headers).toMatchObject({ 'x-request-id': 'req-1', 'content-type': 'application/json' });
    expect(Object.keys(letter.headers).filter((k) => /auth|key|cookie/i.test(k))).toEqual([]);
    const onDisk = readdirSync(join(h.dir, 'ledger.dead-letters')).map((f) => readFileSync(join(h.dir, 'ledger.dead-letters', f), 'utf8')).join('\n');
    expect(onDisk).toContain(deadLetterId);
    expect(onDisk).not.toContain(settings.webhookSecret);

    // A letter as an earlier build kept it, with the auth code: the next start-up removes it.
    const old = (await h.bridge.store.getDeadLetter(deadLetterId))!;
    await h.bridge.store.saveDeadLetter({ ...old, id: 'old-letter', headers: { ...old.headers, 'x-clover-auth': settings.webhookSecret! } });
    await h.restart();
    expect((await h.bridge.store.getDeadLetter('old-letter'))!.headers).toEqual(old.headers);
    expect(readFileSync(join(h.dir, 'ledger.dead-letters', 'old-letter.json'), 'utf8')).not.toContain(settings.webhookSecret);
  });
});

describe('Clover URL verification before the auth code exists', () => {
  it('is let through unsigned while CLOVER_AUTH_CODE is unset, records nothing, and takes only a code shaped like Clover\'s', async () => {
    await h.close();
    h = await startHarness({ overrides: { adapters: new Map([['clover', cloverAdapter]]), posSettings: { clover: { ...settings, webhookSecret: undefined } } } });
    const body = JSON.stringify({ verificationCode: 'ce7643c1-83ea-4218-abe6-da876c9c7a0a' });
    const unsigned = await deliver(body, []);
    expect(unsigned.status).toBe(200);
    expect(unsigned.body.results).toEqual([{ key: 'handshake', action: 'ignored', reason: 'set-up handshake acknowledged' }]);
    // Anything else unsigned, even with a code in it, is refused.
    expect((await deliver(JSON.stringify({ verificationCode: 'x', merchants: {} }), [])).status).toBe(401);
    expect((await deliver(JSON.stringify({ verificationCode: 'enter this: \u001b[31mhttp://evil.test' }), [])).status).toBe(401);
    expect((await deliver(JSON.stringify({ verificationCode: 'a'.repeat(65) }), [])).status).toBe(401);
    expect((await deliver(JSON.stringify({ appId: 'A', merchants: { [M]: [{ objectId: 'O:ABCDEFGHJKMNP', type: 'UPDATE', ts: 1 }] } }), [])).status).toBe(401);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect(await h.bridge.store.count()).toBe(0);
    expect((await admin('get', '/v1/admin/dead-letters')).body.total).toBe(0);
  });
});

describe('Clover bare objects', () => {
  const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

  it('POST /v1/checkouts/clover with the order, then /v1/refunds/clover with the refund', async () => {
    const res = await post('/v1/checkouts/clover', paidOrder());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transactionId: TID, status: 'accrued' });
    expect(h.sim.books().transactions[TID]).toMatchObject({ accruals: 1, amount: 1000 });

    const refund = { id: 'REFUND1', orderRef: { id: O }, merchant: { id: M }, amount: 540, taxAmount: 40 };
    const refunded = await post('/v1/refunds/clover', refund);
    expect(refunded.status).toBe(200);
    expect(refunded.body).toMatchObject({ transactionId: TID, status: 'reversed', refundId: 'REFUND1', remainder: { transactionId: `${TID}~r1`, status: 'accrued' } });
    expect(h.sim.books().transactions[`${TID}~r1`]).toMatchObject({ accruals: 1, amount: 500 });
    // The same refund again changes nothing.
    expect((await post('/v1/refunds/clover', { refund })).body).toMatchObject({ refundId: 'REFUND1', repeat: true });
    expect(h.sim.books().reverseRequests).toBe(1);
  });

  it('an untranslatable order is a 400 naming the field', async () => {
    const res = await post('/v1/checkouts/clover', paidOrder({ state: 'open' }));
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ field: 'state', message: 'is "open": only paid Clover orders (state "locked") accrue' }]);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});

describe('Clover refunds that name no merchant', () => {
  const post = (path: string, body: unknown, token?: string) => {
    const req = postJson(h.bridge.url, path, body);
    return token ? req.set('authorization', `Bearer ${token}`) : req;
  };
  /** Clover's own sandbox order (its lines read with their discounts), with a customer: 22900 cents, no tax, under merchant HFBW9FH45ZBH2. */
  const sandbox = () => ({ ...fixture('order_expanded_lineItems_payments_sandbox.json'), lineItems: fixture('order_line_items_with_discounts_sandbox.json'), customers: { elements: [customer] } });
  const SANDBOX_TID = `clover:${M}:28QHBJ7FA1EB4`;
  /** A bare Clover refund of the sandbox order, as a POS integration may post it: no merchant, no href. */
  const bareRefund = (id: string, amount: number) => ({ id, orderRef: { id: '28QHBJ7FA1EB4' }, amount, taxAmount: 0 });

  it('without a Clover account bound or configured: refused (400) naming merchant.id and how to bind one', async () => {
    expect((await post('/v1/checkouts/clover', sandbox())).body).toMatchObject({ transactionId: SANDBOX_TID, status: 'accrued' });
    const res = await post('/v1/refunds/clover', bareRefund('REFUND0000001', 5000));
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ field: 'merchant.id', message: expect.stringContaining('bind this merchant to its Clover account (CLOVER_MERCHANT_ID, or the merchant\'s pos.clover.merchantId)') }]);
    expect(h.sim.books().reverseRequests).toBe(0);
  });

  it("CLOVER_MERCHANT_ID (the default merchant's binding) names it: the sandbox order reversed and its remainder accrued with the right cents; the rest reverses in full", async () => {
    await h.restart({ posSettings: { clover: { ...settings, account: M } } });
    expect((await post('/v1/checkouts/clover', sandbox())).body).toMatchObject({ transactionId: SANDBOX_TID, status: 'accrued' });
    expect(h.sim.books().transactions[SANDBOX_TID]).toMatchObject({ accruals: 1, amount: 22900 });

    const partial = await post('/v1/refunds/clover', bareRefund('REFUND0000001', 5000));
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ transactionId: SANDBOX_TID, status: 'reversed', refundId: 'REFUND0000001', remainder: { transactionId: `${SANDBOX_TID}~r1`, status: 'accrued' } });
    let books = h.sim.books();
    expect(books.transactions[SANDBOX_TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${SANDBOX_TID}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 17900 });

    // The rest, as { "refund": … }: nothing remains, so the remainder is reversed and nothing more accrued.
    const rest = await post('/v1/refunds/clover', { refund: bareRefund('REFUND0000002', 17900) });
    expect(rest.status).toBe(200);
    expect(rest.body).toMatchObject({ transactionId: `${SANDBOX_TID}~r1`, status: 'reversed', refundId: 'REFUND0000002' });
    expect(rest.body.remainder).toBeUndefined();
    books = h.sim.books();
    expect(books.transactions[`${SANDBOX_TID}~r1`]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.transactions[`${SANDBOX_TID}~r2`]).toBeUndefined();
    expect(books.doubleReversals).toEqual([]);
  });

  it("a created merchant's pos.clover.merchantId names it, for that merchant's own posts; with it the only Clover account configured, it names it for the default merchant's too", async () => {
    await h.restart({ secretsKey: randomBytes(32).toString('base64') });
    const install = h.sim.addMerchant({ id: 'cafe-7' });
    const created = await admin('post', '/v1/admin/merchants').send({ id: 'cafe-7', loyalty: { appToken: install.appToken }, pos: { clover: { merchantId: M } } });
    expect(created.status).toBe(201);
    const token = created.body.posToken as string;

    expect((await post('/v1/checkouts/clover', paidOrder(), token)).body).toMatchObject({ transactionId: TID, status: 'accrued' });
    const refund = await post('/v1/refunds/clover', { id: 'REFUND0000003', orderRef: { id: O }, amount: 540, taxAmount: 40 }, token);
    expect(refund.status).toBe(200);
    expect(refund.body).toMatchObject({ transactionId: TID, status: 'reversed', remainder: { transactionId: `${TID}~r1`, status: 'accrued' } });
    // The merchant's own loyalty account: 1000 accrued, reversed, 500 re-accrued.
    expect(install.books().transactions[TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(install.books().transactions[`${TID}~r1`]).toMatchObject({ accruals: 1, amount: 500 });

    // The default merchant binds no Clover account; cafe-7's is the only one configured: it names the scope
    // of the default merchant's refund too, which finds the default merchant's own record (never cafe-7's).
    expect((await post('/v1/checkouts/clover', sandbox())).body).toMatchObject({ transactionId: SANDBOX_TID, status: 'accrued' });
    const theirs = await post('/v1/refunds/clover', bareRefund('REFUND0000004', 22900));
    expect(theirs.status).toBe(200);
    expect(theirs.body).toMatchObject({ transactionId: SANDBOX_TID, status: 'reversed' });
    expect(h.sim.books().transactions[SANDBOX_TID]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(install.books().transactions[SANDBOX_TID]).toBeUndefined();

    // A second Clover account configured: no longer the only one, so a refund naming no merchant is refused again.
    const other = h.sim.addMerchant({ id: 'deli-9' });
    expect((await admin('post', '/v1/admin/merchants').send({ id: 'deli-9', loyalty: { appToken: other.appToken }, pos: { clover: { merchantId: 'XK2000000000A' } } })).status).toBe(201);
    expect((await post('/v1/checkouts/clover', sandbox())).body).toMatchObject({ repeat: true });
    const refused = await post('/v1/refunds/clover', bareRefund('REFUND0000005', 100));
    expect(refused.status).toBe(400);
    expect(refused.body.error.issues[0].field).toBe('merchant.id');
  });
});
