/**
 * Clover orders, refunds and webhook notifications → the bridge's intents, exactly: every Clover
 * fixture (fixtures/pos/clover), then the documented shapes the fixtures do not cover.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { cloverAdapter } from '../../adapters/clover/index.js';
import { cloverBackfill } from '../../adapters/clover/backfill.js';
import { cloverVerificationCode, decideOrder } from '../../adapters/clover/webhook.js';
import type { PosApi, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import { UnauthorizedError, ValidationError } from '../../src/kernel/errors.js';
import { posApi } from '../../src/pos/api.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { signature } from '../support/webhooks.js';
import { validationIssues } from '../support/validation.js';

const FIXTURES = new URL('../fixtures/clover/', import.meta.url);
const fixture = (name: string): any => JSON.parse(readFileSync(fileURLToPath(new URL(name, FIXTURES)), 'utf8'));

const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const M = 'HFBW9FH45ZBH2';
const ORDER = 'ORDR0000000A1';

/** A paid Clover order in the API's shape, with one cash payment covering `total`. */
function order(overrides: Record<string, unknown> = {}, payment: Record<string, unknown> = {}): Record<string, unknown> {
  const base: Record<string, unknown> = {
    href: `https://sandbox.dev.clover.com/v3/merchants/${M}/orders/${ORDER}`,
    id: ORDER,
    currency: 'USD',
    total: 1080,
    state: 'locked',
    createdTime: 1700000000000,
    lineItems: { elements: [{ id: 'L1', item: { id: 'ITEM-LATTE' }, name: 'Latte', price: 500 }, { id: 'L2', item: { id: 'ITEM-LATTE' }, name: 'Latte', price: 500 }] },
    ...overrides,
  };
  return {
    ...base,
    payments: 'payments' in base ? base.payments : { elements: [{ id: 'PAY1', amount: base.total, taxAmount: 80, result: 'SUCCESS', createdTime: 1700000060000, ...payment }] },
  };
}

const checkout = (body: unknown, ctx = context) => cloverAdapter.parseCheckout(body, ctx);

describe('fixture order_expanded_lineItems_payments_sandbox.json (real sandbox order)', () => {
  const expanded = fixture('order_expanded_lineItems_payments_sandbox.json');
  const linesWithDiscounts = fixture('order_line_items_with_discounts_sandbox.json');

  it('as fetched there (discounts of the lines not expanded) is refused: its lines add up to 30500, its total is 22900', () => {
    expect(validationIssues(() => checkout(expanded))).toEqual([
      {
        field: 'total',
        message:
          "is 22900, but the order's parts add up to 30500 (lines 30500 − order discounts 0 + service charge 0 + tax 0, minor units): " +
          'fetch the order with expand=lineItems.discounts,lineItems.modifications,discounts,payments so every part is present',
      },
    ]);
  });

  it('with its lines as Clover returns them with discounts expanded, translates exactly: 22900 cents', () => {
    const intent = checkout({ ...expanded, lineItems: linesWithDiscounts });
    expect(intent).toEqual({
      orderId: '28QHBJ7FA1EB4',
      // The order's href names the merchant: order ids are unique only within one.
      scope: 'HFBW9FH45ZBH2',
      customer: {},
      check: {
        amount: 22900,
        currency: 'USD',
        externalTransactionId: '28QHBJ7FA1EB4',
        checkOpenedAt: '2017-02-20T21:34:09.000Z',
        checkClosedAt: '2017-02-20T21:34:31.000Z',
        // $1.00 off the frame (amount -100) and 25% off the sectional (7500).
        discountAmount: 7600,
        selections: [
          { id: '4D2M7EXEAHV74', displayName: '8"x10" Black Frame', quantity: 1, price: 500, totalPrice: 400 },
          { id: 'B4ZJHJK63KGZM', displayName: '2pc Sectional Brown faux leather w/ ottoman', quantity: 1, price: 30000, totalPrice: 22500 },
        ],
      },
    });
    expect(deriveTransactionId('clover', intent.orderId, intent.scope)).toBe('clover:HFBW9FH45ZBH2:28QHBJ7FA1EB4');
  });

  it('is accepted in the { "order": … } wrapper too', () => {
    expect(checkout({ order: { ...expanded, lineItems: linesWithDiscounts } }).check.amount).toBe(22900);
  });
});

describe('fixture order_line_items_with_discounts_sandbox.json (a line-item list, not an order)', () => {
  it('is refused as a checkout: it has no order id', () => {
    expect(validationIssues(() => checkout(fixture('order_line_items_with_discounts_sandbox.json'))).map((i) => i.field)).toEqual(['id']);
  });
});

describe('webhook fixtures', () => {
  let fake: FakePosApi;
  let api: PosApi;
  beforeAll(async () => {
    fake = await startFakePosApi();
    api = posApi('clover', { accessToken: 'clover-token', apiBaseUrl: fake.url }, 2000)!;
  });
  afterAll(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  const classify = (body: unknown) => cloverAdapter.webhook!.classify(body, {});
  const fetchAndDecide = async (action: WebhookAction) => {
    if (action.kind !== 'fetch') throw new Error(`expected a fetch, got ${action.kind}`);
    const decided = action.decide(await action.fetch(api));
    if (Array.isArray(decided)) throw new Error(`expected one action, got ${decided.length}`);
    return decided;
  };

  it('webhook_notification_docs_sample.json: one fetch per order notification, keyed by (merchant, objectId, type, ts)', async () => {
    const actions = classify(fixture('webhook_notification_docs_sample.json'));
    expect(actions.map((a) => [a.kind, a.key])).toEqual([
      ['fetch', 'XYZVJT2ZRRRSC/O:GHIVJT2ABCRSC/CREATE/1537970958000'],
      ['fetch', 'XYZVJT2ZRRRSC/O:ABCVJTABCRRSC/UPDATE/1536156558000'],
    ]);
    const path = '/v3/merchants/XYZVJT2ZRRRSC/orders/GHIVJT2ABCRSC';
    fake.answer(path, order({ id: 'GHIVJT2ABCRSC', href: undefined }));
    const decided = await fetchAndDecide(actions[0]!);
    // Two reads (Clover asks for at most three expansions a call), with the access token.
    expect(fake.requests).toEqual([
      { path, query: { expand: 'lineItems.discounts,lineItems.modifications,discounts' }, authorization: 'Bearer clover-token' },
      { path, query: { expand: 'payments,refunds,customers' }, authorization: 'Bearer clover-token' },
    ]);
    expect(decided.kind).toBe('checkout');
    // The notification's merchant scopes the fetched order.
    const intent = checkout((decided as { payload: unknown }).payload);
    expect(intent).toMatchObject({ orderId: 'GHIVJT2ABCRSC', scope: 'XYZVJT2ZRRRSC', check: { amount: 1000, taxAmount: 80 } });
  });

  it('webhook_notifications_captured_jtrp.json, open order: fetched, then ignored until it is paid', async () => {
    const { open_order_trait } = fixture('webhook_notifications_captured_jtrp.json');
    const actions = classify(open_order_trait);
    expect(actions.map((a) => [a.kind, a.key])).toEqual([
      ['fetch', 'HFBW9FH45ZBH2/O:RM0ZB8RSHYG58/UPDATE/1487455480383'],
      ['fetch', 'HFBW9FH45ZBH2/O:RM0ZB8RSHYG58/UPDATE/1487455480998'],
    ]);
    fake.answer('/v3/merchants/HFBW9FH45ZBH2/orders/RM0ZB8RSHYG58', order({ id: 'RM0ZB8RSHYG58', state: 'open', payments: { elements: [] } }));
    expect(await fetchAndDecide(actions[0]!)).toEqual({
      kind: 'ignored',
      key: 'HFBW9FH45ZBH2/O:RM0ZB8RSHYG58/UPDATE/1487455480383',
      reason: 'order RM0ZB8RSHYG58 is "open": it accrues once paid (state "locked")',
    });
  });

  it('webhook_notifications_captured_jtrp.json, locked order: every notification fetches, each decides checkout', async () => {
    const { locked_order_trait } = fixture('webhook_notifications_captured_jtrp.json');
    const actions = classify(locked_order_trait);
    expect(actions.map((a) => [a.kind, a.key])).toEqual([
      ['fetch', 'HFBW9FH45ZBH2/O:KJHCCYXHV3ZDY/UPDATE/1487450237666'],
      ['fetch', 'HFBW9FH45ZBH2/O:KJHCCYXHV3ZDY/UPDATE/1487450237814'],
      ['fetch', 'HFBW9FH45ZBH2/O:KJHCCYXHV3ZDY/UPDATE/1487450237990'],
      ['fetch', 'HFBW9FH45ZBH2/O:RM0ZB8RSHYG58/CREATE/1487450238770'],
    ]);
    fake.answer('/v3/merchants/HFBW9FH45ZBH2/orders/KJHCCYXHV3ZDY', order({ id: 'KJHCCYXHV3ZDY', href: undefined }));
    for (const action of actions.slice(0, 3)) {
      const decided = await fetchAndDecide(action);
      expect(decided).toMatchObject({ kind: 'checkout', key: action.key });
      // The same order each time: one transaction id, so the core accrues it once.
      expect(checkout((decided as { payload: unknown }).payload)).toMatchObject({ orderId: 'KJHCCYXHV3ZDY', scope: 'HFBW9FH45ZBH2' });
    }
  });

  it('a repeated delivery gives the same dedupe keys; a later change of the same order does not', () => {
    const body = fixture('webhook_notification_docs_sample.json');
    expect(classify(body).map((a) => a.key)).toEqual(classify(JSON.parse(JSON.stringify(body))).map((a) => a.key));
    const later = { ...body, merchants: { XYZVJT2ZRRRSC: [{ objectId: 'O:GHIVJT2ABCRSC', type: 'UPDATE', ts: 1537970999000 }] } };
    expect(classify(later)[0]!.key).not.toBe(classify(body)[0]!.key);
  });
});

describe('webhook classification', () => {
  const classify = (body: unknown) => cloverAdapter.webhook!.classify(body, {});
  const one = (objectId: string, type = 'UPDATE') => ({ appId: 'APP', merchants: { [M]: [{ objectId, type, ts: 1 }] } });

  it('non-order objects, deleted orders and unknown types are acknowledged and ignored', () => {
    expect(classify(one('P:PAYMENT00000A'))).toEqual([{ kind: 'ignored', key: `${M}/P:PAYMENT00000A/UPDATE/1`, reason: 'payment notifications are not orders: nothing to accrue or reverse' }]);
    expect(classify(one('C:CUSTOMER0000A'))[0]).toMatchObject({ kind: 'ignored', reason: 'customer notifications are not orders: nothing to accrue or reverse' });
    expect(classify(one('ZZ:X'))[0]).toMatchObject({ kind: 'ignored', reason: '"ZZ:" notifications are not orders: nothing to accrue or reverse' });
    expect(classify(one(`O:${ORDER}`, 'DELETE'))[0]).toMatchObject({ kind: 'ignored', reason: `order ${ORDER} was deleted: nothing to accrue or reverse` });
    expect(classify(one(`O:${ORDER}`, 'ARCHIVE'))[0]).toMatchObject({ kind: 'ignored', reason: 'order notification type "ARCHIVE" is not one Clover documents (CREATE, UPDATE, DELETE)' });
  });

  it("Clover's URL verification POST is acknowledged, never acted on", () => {
    const body = { verificationCode: 'ce7643c1-83ea-4218-abe6-da876c9c7a0a' };
    expect(classify(body)).toEqual([
      { kind: 'ignored', key: 'verification:ce7643c1-83ea-4218-abe6-da876c9c7a0a', reason: 'Clover webhook URL verification: enter the code ce7643c1-83ea-4218-abe6-da876c9c7a0a in the Clover developer dashboard' },
    ]);
    expect(cloverVerificationCode(body)).toBe('ce7643c1-83ea-4218-abe6-da876c9c7a0a');
    expect(cloverVerificationCode({ verificationCode: 'x', merchants: {} })).toBeUndefined();
  });

  it('refuses what it cannot read, naming the field', () => {
    expect(validationIssues(() => classify({ merchants: { 'not-a-merchant': [] } })).map((i) => i.field)).toEqual(['merchants.not-a-merchant']);
    expect(validationIssues(() => classify({ appId: 'A' })).map((i) => i.field)).toEqual(['merchants']);
    expect(validationIssues(() => classify(one('O:../../x')))).toEqual([{ field: `merchants.${M}.0.objectId`, message: 'must be "O:" and a 13-character Clover order id' }]);
  });

  it('a fetched order that is not the notified one is refused', () => {
    expect(validationIssues(() => decideOrder(order({ id: 'OTHER00000000' }), M, ORDER, 'k'))).toEqual([{ field: 'order.id', message: `is OTHER00000000, but the notification named order ${ORDER}` }]);
    expect(validationIssues(() => decideOrder(order({ merchant: { id: 'MERCHANT0000B' }, href: undefined }), M, ORDER, 'k'))[0]!.field).toBe('order.merchant.id');
  });

  it('a paid order whose payment is still pending waits for the next update', () => {
    expect(decideOrder(order({}, { result: 'PENDING' }), M, ORDER, 'k')).toEqual({ kind: 'ignored', key: 'k', reason: `payment PAY1 of order ${ORDER} is PENDING: waiting for the update that settles it` });
  });

  it('an order with refunds decides refund; a refund of only tax and tip is ignored', () => {
    const refunded = order({ refunds: { elements: [{ id: 'R1', orderRef: { id: ORDER }, amount: 540, taxAmount: 40, createdTime: 2 }] } });
    expect(decideOrder(refunded, M, ORDER, 'k')).toMatchObject({ kind: 'refund', key: 'k', payload: { order: { id: ORDER, merchant: { id: M } }, refundId: 'R1' } });
    const tipOnly = order({ refunds: { elements: [{ id: 'R2', orderRef: { id: ORDER }, amount: 300, taxAmount: 0, tipAmount: 300 }] } });
    expect(decideOrder(tipOnly, M, ORDER, 'k')).toEqual({ kind: 'ignored', key: 'k', reason: `refund R2 of order ${ORDER} gives back only tax and tip: no purchase amount to reverse` });
  });

  it('backfill lists an order whose only refund gave back tip as a paid sale (its points are owed), and a paid order without refunds too', () => {
    const tipOnly = order({ refunds: { elements: [{ id: 'R2', orderRef: { id: ORDER }, amount: 300, taxAmount: 0, tipAmount: 300 }] } });
    const request = { method: 'GET' as const, path: `/v3/merchants/${M}/orders`, query: { offset: '0', limit: '100' } };
    for (const listedOrder of [tipOnly, order({})]) {
      const { found } = cloverBackfill.page({ status: 200, data: { elements: [listedOrder] }, headers: {} } as never, request);
      expect(found).toEqual([expect.objectContaining({ kind: 'checkout', orderId: ORDER, paid: true })]);
    }
  });
});

describe('several refunds in one fetched order', () => {
  const twoPartials = order({
    refunds: { elements: [{ id: 'R-NEW', orderRef: { id: ORDER }, amount: 540, taxAmount: 40, createdTime: 2 }, { id: 'R-OLD', orderRef: { id: ORDER }, amount: 108, taxAmount: 8, createdTime: 1 }] },
  });

  it('partial: one action per refund, oldest first, each carried out by its own id', () => {
    const actions = decideOrder(twoPartials, M, ORDER, 'k') as WebhookAction[];
    expect(actions.map((a) => [a.kind, a.key])).toEqual([
      ['refund', 'R-OLD'],
      ['refund', 'R-NEW'],
    ]);
    const intents = actions.map((a) => cloverAdapter.parseRefund((a as { payload: unknown }).payload, context));
    expect(intents).toEqual([
      { orderId: ORDER, scope: M, refundId: 'R-OLD', amountCents: 100 },
      { orderId: ORDER, scope: M, refundId: 'R-NEW', amountCents: 500 },
    ]);
  });

  it('fully refunded: one full reversal by the latest refund', () => {
    const refund = (id: string, createdTime: number) => ({ id, orderRef: { id: ORDER }, amount: 540, taxAmount: 40, createdTime });
    const full = order({}, { refunds: { elements: [refund('R1', 1), refund('R2', 2)] } });
    const action = decideOrder(full, M, ORDER, 'k') as WebhookAction;
    expect(action).toMatchObject({ kind: 'refund', key: 'k' });
    expect(cloverAdapter.parseRefund((action as { payload: unknown }).payload, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'R2:full' });
  });

  it('an order posted with refundId acts on that refund; an unknown id is refused, naming it', () => {
    expect(cloverAdapter.parseRefund({ order: twoPartials, refundId: 'R-OLD' }, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'R-OLD', amountCents: 100 });
    expect(validationIssues(() => cloverAdapter.parseRefund({ order: twoPartials, refundId: 'R-NONE' }, context))).toEqual([{ field: 'refundId', message: `names no refund of order ${ORDER} (it has R-NEW, R-OLD)` }]);
    expect(validationIssues(() => cloverAdapter.parseRefund({ order: twoPartials, refundId: 7 }, context))).toEqual([{ field: 'refundId', message: "must be the id of one of the order's refunds" }]);
  });
});

describe('webhook signature (static X-Clover-Auth code)', () => {
  const settings: PosSettings = { webhookSecret: 'clover-auth-code-0307e264', apiBaseUrl: '' };
  const raw = Buffer.from(JSON.stringify(fixture('webhook_notification_docs_sample.json')));
  const verify = (rawHeaders: string[]) => () =>
    verifySignature(cloverAdapter.webhook!.signature, settings, raw, Object.fromEntries(Array.from({ length: rawHeaders.length / 2 }, (_, i) => [rawHeaders[2 * i]!.toLowerCase(), rawHeaders[2 * i + 1]!])), rawHeaders);

  it('accepts the configured auth code, as the test signer sends it', () => {
    const [name, value] = signature(cloverAdapter, settings, raw);
    expect([name, value]).toEqual(['X-Clover-Auth', 'clover-auth-code-0307e264']);
    expect(verify([name, value])).not.toThrow();
  });

  it.each([
    ['missing', [] as string[]],
    ['empty', ['X-Clover-Auth', '']],
    ['repeated', ['X-Clover-Auth', 'clover-auth-code-0307e264', 'x-clover-auth', 'clover-auth-code-0307e264']],
    ['wrong', ['X-Clover-Auth', 'clover-auth-code-0307e265']],
  ])('refuses an auth code that is %s', (_name, rawHeaders) => {
    expect(verify(rawHeaders)).toThrow(UnauthorizedError);
  });
});

describe('Clover checkout: documented shapes', () => {
  it('amount excludes the tax stated on the payments; identical one-unit lines become one selection', () => {
    expect(checkout(order()).check).toEqual({
      amount: 1000,
      currency: 'USD',
      externalTransactionId: ORDER,
      checkOpenedAt: '2023-11-14T22:13:20.000Z',
      checkClosedAt: '2023-11-14T22:14:20.000Z',
      taxAmount: 80,
      selections: [{ id: 'ITEM-LATTE', displayName: 'Latte', quantity: 2, price: 500, totalPrice: 1000 }],
    });
  });

  it('zero-decimal currency: ¥500 is 50000 cents-of-a-unit', () => {
    const yen = order({ currency: 'JPY', total: 540, lineItems: [{ id: 'L1', item: { id: 'RAMEN' }, name: 'Ramen', price: 500 }] }, { taxAmount: 40 });
    expect(checkout(yen).check).toMatchObject({ amount: 50000, currency: 'JPY', taxAmount: 4000, selections: [{ id: 'RAMEN', quantity: 1, price: 50000, totalPrice: 50000 }] });
  });

  it('an order without currency is read in DEFAULT_CURRENCY', () => {
    const yen = order({ currency: undefined, total: 500, lineItems: [{ id: 'L1', name: 'Ramen', price: 500 }] }, { taxAmount: 0 });
    expect(checkout(yen, { ...context, defaultCurrency: 'JPY' }).check).toMatchObject({ amount: 50000, currency: 'JPY', selections: [{ id: 'L1', totalPrice: 50000 }] });
  });

  it('weighed goods: unitQty thousandths; fractional → quantity 1 at the exact line total, rounded once', () => {
    // 3.99 a lb × 2.5 lb = 9.975 → 9.98; 2.000 lb is a whole quantity and keeps its unit price.
    const weighed = order({
      total: 1796,
      lineItems: [
        { id: 'L1', item: { id: 'APPLES' }, name: 'Apples', price: 399, unitQty: 2500, unitName: 'lb' },
        { id: 'L2', item: { id: 'PEARS' }, name: 'Pears', price: 399, unitQty: 2000, unitName: 'lb' },
      ],
    }, { taxAmount: 0 });
    expect(checkout(weighed).check).toMatchObject({
      amount: 1796,
      selections: [
        { id: 'APPLES', displayName: 'Apples', quantity: 1, price: 998, totalPrice: 998 },
        { id: 'PEARS', displayName: 'Pears', quantity: 2, price: 399, totalPrice: 798 },
      ],
    });
  });

  it('discounts: negative amounts, whole percentages rounded half up once, line first then order level', () => {
    const discounted = order({
      // Line: 50 − 25% (12.5 → 13) = 37; line: 1000 + modifier 150 − 1.00 = 1050; lines 1087;
      // order: −10% (108.7 → 109) − 0.50 = 928.
      total: 928,
      lineItems: [
        { id: 'L1', item: { id: 'MINT' }, name: 'Mint', price: 50, discounts: [{ name: '25% off', percentage: 25 }] },
        { id: 'L2', item: { id: 'CAKE' }, name: 'Cake', price: 1000, modifications: { elements: [{ name: 'Cream', amount: 150 }] }, discounts: { elements: [{ name: '$1 off', amount: -100 }] } },
      ],
      discounts: { elements: [{ name: '10% off', percentage: 10 }, { name: '50c off', amount: -50 }] },
    }, { taxAmount: 0 });
    expect(checkout(discounted).check).toMatchObject({
      amount: 928,
      discountAmount: 13 + 100 + 109 + 50,
      selections: [
        { id: 'MINT', quantity: 1, price: 50, totalPrice: 37 },
        { id: 'CAKE', quantity: 1, price: 1000, totalPrice: 1050 },
      ],
    });
  });

  it('tips are outside the total; service charges are inside the amount (stated on the payment, or from the rate)', () => {
    const served = order({ total: 1260 }, { taxAmount: 80, tipAmount: 300, serviceCharge: { amount: 180 } });
    expect(checkout(served).check).toMatchObject({ amount: 1180, taxAmount: 80, tipAmount: 300, serviceAmount: 180 });
    // 18% in ten-thousandths of a percent point (Clover percentageDecimal 180000) of the lines' 1000.
    const fromRate = order({ total: 1260, serviceCharge: { name: 'Large party', percentageDecimal: 180000 } }, { taxAmount: 80, tipAmount: 300 });
    expect(checkout(fromRate).check).toMatchObject({ amount: 1180, serviceAmount: 180, tipAmount: 300 });
  });

  it('a refunded line is still part of the sale (Clover keeps it in the total); exchanged lines are left out (and must be out of the total too)', () => {
    const lines = { elements: [{ id: 'L1', item: { id: 'A' }, name: 'A', price: 500 }, { id: 'L2', item: { id: 'B' }, name: 'B', price: 700, refunded: true }, { id: 'L3', item: { id: 'C' }, name: 'C', price: 900, exchanged: true }] };
    expect(checkout(order({ total: 1200, lineItems: lines }, { taxAmount: 0 })).check).toMatchObject({
      amount: 1200,
      selections: [
        { id: 'A', displayName: 'A', quantity: 1, price: 500, totalPrice: 500 },
        { id: 'B', displayName: 'B', quantity: 1, price: 700, totalPrice: 700 },
      ],
    });
  });

  it('split payments add up; failed and voided ones are not counted', () => {
    const split = order({
      payments: [
        { id: 'P1', amount: 600, taxAmount: 44, tipAmount: 100, result: 'SUCCESS' },
        { id: 'P2', amount: 1080, taxAmount: 80, result: 'FAIL' },
        { id: 'P3', amount: 480, taxAmount: 36, result: 'SUCCESS' },
      ],
    });
    expect(checkout(split).check).toMatchObject({ amount: 1000, taxAmount: 80, tipAmount: 100 });
  });

  it('customer: expanded phone and email (primary first) become E.164 and lower case', () => {
    const withCustomer = order({
      customers: { elements: [{ id: 'CUST000000001', firstName: 'Ann', lastName: 'Lee', phoneNumbers: { elements: [{ phoneNumber: '(555) 000-1111' }] }, emailAddresses: { elements: [{ emailAddress: 'old@b.test' }, { emailAddress: 'Ann@B.test', primaryEmail: true }] } }] },
    });
    const intent = checkout(withCustomer);
    expect(intent.customer).toEqual({ phone: '+15550001111', email: 'ann@b.test', firstName: 'Ann', lastName: 'Lee' });
    expect(intent.customerRef).toBeUndefined();
  });

  it('customer: only an id → customerRef "<merchant>/<customer>" for the core to fetch', () => {
    const intent = checkout(order({ customers: [{ id: 'CUST000000001' }] }));
    expect(intent).toMatchObject({ customer: {}, customerRef: `${M}/CUST000000001` });
  });

  it('a paymentState PAID order counts as paid', () => {
    expect(checkout(order({ state: 'open', paymentState: 'PAID' })).check.amount).toBe(1000);
  });

  it.each([
    ['an open order', order({ state: 'open' }), 'state', 'is "open": only paid Clover orders (state "locked") accrue'],
    ['a bare order naming no merchant', order({ href: undefined }), 'merchant.id', expect.stringContaining('is required: Clover order ids are unique only within a merchant')],
    ['merchant and href disagreeing', order({ merchant: { id: 'MERCHANT0000B' } }), 'merchant.id', `is MERCHANT0000B, but the order's href names merchant ${M}`],
    ['no payments expanded', order({ payments: null }), 'payments', expect.stringContaining('are required: the tax inside order.total is stated only on the payments')],
    ['a payment without taxAmount', order({}, { taxAmount: undefined }), 'payments.0.taxAmount', 'is required: it is the tax inside order.total'],
    ['a pending payment', order({}, { result: 'PENDING' }), 'payments.0.result', 'is PENDING: the payment is not settled yet'],
    ['a payment short of the total', order({}, { amount: 1000 }), 'payments', "pay 1000 of the order's total 1080 (minor units): only a fully paid order accrues"],
    ['VAT in the prices', order({ isVat: true }), 'isVat', expect.stringContaining('VAT-inclusive Clover orders are not supported')],
    ['a positive discount amount', order({ discounts: [{ amount: 100 }] }), 'discounts.0.amount', expect.stringContaining('must be zero or negative')],
    ['a fractional amount', order({ total: 10.5 }, { amount: 1080 }), 'total', expect.stringContaining('not a fraction')],
    ['an unknown currency', order({ currency: 'usd' }), 'currency', expect.stringContaining('ISO 4217')],
    ['an order id that is not Clover\'s', order({ id: '../x' }), 'id', 'must be a 13-character Clover id (0-9, A-Z)'],
    ['lines not expanded', order({ lineItems: undefined }), 'lineItems', expect.stringContaining('are required')],
  ])('refuses %s, naming the field', (_name, body, field, message) => {
    expect(validationIssues(() => checkout(body))).toEqual([{ field, message }]);
  });
});

describe('Clover refunds', () => {
  const refund = (overrides: Record<string, unknown> = {}) => ({ id: 'REFUND1', orderRef: { id: ORDER }, merchant: { id: M }, amount: 540, taxAmount: 40, createdTime: 1700000100000, ...overrides });

  it('a bare refund is partial by its amount without tax and tip (the core reverses in full when nothing remains)', () => {
    expect(cloverAdapter.parseRefund(refund({ tipAmount: 100, amount: 640 }), context)).toEqual({ orderId: ORDER, scope: M, refundId: 'REFUND1', amountCents: 500 });
    expect(cloverAdapter.parseRefund({ refund: refund() }, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'REFUND1', amountCents: 500 });
  });

  it("a bare refund naming no merchant is in the posting merchant's Clover account (context.posAccount), upper-cased; one that names its merchant keeps it", () => {
    const bare = refund({ merchant: undefined });
    expect(cloverAdapter.parseRefund(bare, { ...context, posAccount: M.toLowerCase() })).toEqual({ orderId: ORDER, scope: M, refundId: 'REFUND1', amountCents: 500 });
    expect(cloverAdapter.parseRefund(refund({ merchant: { id: 'MERCHANT0000B' } }), { ...context, posAccount: M }).scope).toBe('MERCHANT0000B');
    expect(validationIssues(() => cloverAdapter.parseRefund(bare, { ...context, posAccount: 'not-a-clover-id' }))).toEqual([
      { field: 'merchant.id', message: expect.stringContaining('is not a 13-character Clover merchant id') },
    ]);
    expect(validationIssues(() => cloverAdapter.parseRefund(bare, context))[0]!.message).toContain('CLOVER_MERCHANT_ID');
  });

  it('a bare refund is read in DEFAULT_CURRENCY (a Clover refund carries none)', () => {
    expect(cloverAdapter.parseRefund(refund({ amount: 500, taxAmount: 0 }), { ...context, defaultCurrency: 'JPY' }).amountCents).toBe(50000);
  });

  it('an order with its refunds: the latest refund, partial while something remains paid', () => {
    const partial = order({ refunds: { elements: [refund({ id: 'R-OLD', amount: 108, taxAmount: 8, createdTime: 1 }), refund({ id: 'R-NEW', amount: 540, taxAmount: 40, createdTime: 2 })] } });
    expect(cloverAdapter.parseRefund(partial, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'R-NEW', amountCents: 500 });
  });

  it('an order with its refunds: full once they give back all that was paid (also inside payments[].refunds)', () => {
    const full = order({}, { refunds: { elements: [refund({ id: 'R1', amount: 540, createdTime: 1 }), refund({ id: 'R2', amount: 540, createdTime: 2 })] } });
    // The full reversal's own id: R2 may have been applied as a partial refund already.
    expect(cloverAdapter.parseRefund(full, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'R2:full' });
    expect(cloverAdapter.parseRefund({ order: full }, context)).toEqual({ orderId: ORDER, scope: M, refundId: 'R2:full' });
  });

  it.each([
    ['no taxAmount', refund({ taxAmount: undefined }), 'taxAmount', expect.stringContaining('is required: a Clover refund amount includes tax')],
    ['no order', refund({ orderRef: undefined }), 'orderRef.id', 'is required: it names the refunded order'],
    ['no merchant', refund({ merchant: undefined }), 'merchant.id', expect.stringContaining('is required')],
    ['only tax and tip', refund({ amount: 140, taxAmount: 40, tipAmount: 100 }), 'amount', 'gives back only tax and tip: there is no purchase amount to reverse'],
    ['tax above the amount', refund({ amount: 10, taxAmount: 40 }), 'amount', 'is less than the tax and tip it includes (10 < 40 + 0)'],
    ['an order without refunds', order(), 'refunds', 'are empty: this order has not been refunded'],
    ['several refunds without times', order({ refunds: [refund({ id: 'A', createdTime: undefined }), refund({ id: 'B', createdTime: undefined })] }), 'refunds', expect.stringContaining('which one is new cannot be told')],
  ])('refuses a refund with %s, naming the field', (_name, body, field, message) => {
    expect(validationIssues(() => cloverAdapter.parseRefund(body, context))).toEqual([{ field, message }]);
  });
});

describe('fetchCustomer', () => {
  let fake: FakePosApi;
  beforeAll(async () => {
    fake = await startFakePosApi();
  });
  afterAll(async () => {
    await fake.close();
  });

  it('reads the customer under its merchant with phones and emails expanded', async () => {
    fake.answer(`/v3/merchants/${M}/customers/CUST000000001`, { id: 'CUST000000001', firstName: 'Bo', phoneNumbers: { elements: [{ phoneNumber: '555-000-2222' }] }, emailAddresses: { elements: [] } });
    const api = posApi('clover', { accessToken: 'tok', apiBaseUrl: fake.url }, 2000)!;
    await expect(cloverAdapter.fetchCustomer!(`${M}/CUST000000001`, api, context)).resolves.toEqual({ phone: '+15550002222', firstName: 'Bo' });
    expect(fake.requests.at(-1)).toEqual({ path: `/v3/merchants/${M}/customers/CUST000000001`, query: { expand: 'phoneNumbers,emailAddresses' }, authorization: 'Bearer tok' });
  });

  it('refuses a ref that is not "<merchant>/<customer>"', async () => {
    const api = posApi('clover', { accessToken: 'tok', apiBaseUrl: fake.url }, 2000)!;
    await expect(cloverAdapter.fetchCustomer!('CUST000000001', api, context)).rejects.toThrow(ValidationError);
    await expect(cloverAdapter.fetchCustomer!(`${M}/../../x`, api, context)).rejects.toThrow(ValidationError);
  });
});
