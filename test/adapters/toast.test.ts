/**
 * Toast orders → the neutral Check, refunds and webhook actions, exactly. The fixture is Toast's
 * own example response of GET /orders/v2/orders/{guid} (developer guide); the other payloads are
 * built from the documented `Order` shape (orders API v2 data definitions).
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { toastAdapter } from '../../adapters/toast/index.js';
import type { AdapterContext, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import { UnauthorizedError } from '../../src/kernel/errors.js';
import { saleTransactionId } from '../../src/kernel/transaction-id.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { signature } from '../support/webhooks.js';
import { validationIssues } from '../support/validation.js';

const fixture = (): any => JSON.parse(readFileSync(new URL('../fixtures/toast/order_get_example_docs.json', import.meta.url), 'utf8'));
const FIXTURE_GUID = '017fdd94-4a30-4657-9475-b1a684758531';
const FIXTURE_CHECK = '9f42438a-a375-4983-9f80-c0dae5c33196';
/** Each check is a sale of its own; builds before kept the order whole under this id. */
const sale = (orderGuid: string, checkGuid: string) => ({ orderId: orderGuid, part: checkGuid, recordedAs: [`toast:${orderGuid}`] });
const context: AdapterContext = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const checkout = (body: unknown, ctx: AdapterContext = context) => toastAdapter.parseCheckout(body, ctx);
const refund = (body: unknown) => toastAdapter.parseRefund(body, context);
const classify = (body: unknown, headers: IncomingHttpHeaders = {}) => toastAdapter.webhook!.classify(body, headers);

/** What Toast puts in Toast-Signature, computed independently of the adapter. */
function hmacBase64(secret: string, text: string): string {
  return createHmac('sha256', secret).update(Buffer.from(text, 'utf8')).digest('base64');
}

/** The ValidationError `fn` throws, as field → message. */
const issuesOf = (fn: () => unknown): Record<string, string> => Object.fromEntries(validationIssues(fn).map((i) => [i.field, i.message]));

// ---------------------------------------------------------------- documented shapes

let seq = 0;
const guid = (name: string) => `${name}-${String(++seq).padStart(4, '0')}`;

function selection(o: Record<string, unknown> = {}) {
  return {
    guid: guid('sel'),
    entityType: 'MenuItemSelection',
    item: { guid: 'item-burger', entityType: 'MenuItem' },
    itemGroup: { guid: 'group-mains', entityType: 'MenuGroup' },
    displayName: 'Burger',
    quantity: 1,
    receiptLinePrice: 10,
    preDiscountPrice: 10,
    price: 10,
    tax: 0.63,
    voided: false,
    appliedDiscounts: [],
    modifiers: [],
    refundDetails: null,
    ...o,
  };
}

function payment(o: Record<string, unknown> = {}) {
  return {
    guid: guid('pay'),
    entityType: 'OrderPayment',
    amount: 10.63,
    tipAmount: 0,
    type: 'CREDIT',
    paymentStatus: 'CAPTURED',
    paidDate: '2026-11-21T10:20:00.000+0000',
    refundStatus: 'NONE',
    refund: null,
    voidInfo: null,
    ...o,
  };
}

function check(o: Record<string, unknown> = {}) {
  return {
    guid: guid('chk'),
    entityType: 'Check',
    amount: 10,
    taxAmount: 0.63,
    totalAmount: 10.63,
    paymentStatus: 'CLOSED',
    paidDate: '2026-11-21T10:20:00.000+0000',
    closedDate: '2026-11-21T10:21:00.000+0000',
    voided: false,
    deleted: false,
    selections: [selection()],
    appliedDiscounts: [],
    appliedServiceCharges: [],
    payments: [payment()],
    customer: { entityType: 'Customer', firstName: 'Ann', lastName: 'Lee', phone: '(555) 000-1111', email: 'Ann@B.test' },
    appliedLoyaltyInfo: null,
    ...o,
  };
}

function order(o: Record<string, unknown> = {}) {
  return {
    guid: 'order-0001',
    entityType: 'Order',
    openedDate: '2026-11-21T10:00:00.000+0000',
    paidDate: '2026-11-21T10:20:00.000+0000',
    closedDate: '2026-11-21T10:21:00.000+0000',
    voided: false,
    voidDate: null,
    deleted: false,
    checks: [check()],
    ...o,
  };
}

/** The orders webhook message (developer guide "Message data schema", "Orders webhook"). */
function message(body: unknown, o: Record<string, unknown> = {}) {
  return {
    timestamp: '2026-11-21T10:21:01.123Z',
    eventCategory: 'orders',
    eventType: 'order_updated',
    guid: 'event-0001',
    details: { restaurantGuid: 'rest-1', order: body },
    ...o,
  };
}

const refunded = (amount: number, transaction: string | null, tax = 0) => ({
  refundAmount: amount,
  taxRefundAmount: tax,
  refundTransaction: transaction ? { guid: transaction, entityType: 'RefundTransaction' } : null,
});

// ---------------------------------------------------------------- the fixture

describe('fixture order_get_example_docs.json (GET /orders/v2/orders/{guid})', () => {
  const expected = {
    ...sale(FIXTURE_GUID, FIXTURE_CHECK),
    customer: { phone: '+13335555555', email: 'jack@example.com', firstName: 'Jack', lastName: 'Jones' },
    check: {
      // check.amount 1.0 = selection price 1 (no service charge); tax 0.06 apart; tip 0 left out.
      amount: 100,
      currency: 'USD',
      selections: [{ id: 'a7b9ee4d-e41b-46ac-9ba4-d56dd7b2fb20', groupId: '46c963b8-a4c8-4cd0-9b7e-e1c431ed0b53', displayName: 'test', quantity: 1, price: 100, totalPrice: 100 }],
      externalTransactionId: FIXTURE_GUID,
      checkOpenedAt: '2019-02-24T13:48:44.206Z',
      checkClosedAt: '2019-02-25T11:05:00.024Z',
      taxAmount: 6,
    },
  };

  it('translates to the exact Check, customer and ids: the order guid (global: no scope) and its check guid', () => {
    const intent = checkout(fixture());
    expect(intent).toEqual(expected);
    expect(saleTransactionId('toast', intent)).toBe(`toast:${FIXTURE_GUID}:${FIXTURE_CHECK}`);
  });

  it('is read the same inside the API wrappers { order } and { orders: [ … ] }', () => {
    expect(checkout({ order: fixture() })).toEqual(expected);
    expect(checkout({ orders: [fixture()] })).toEqual(expected);
    expect(issuesOf(() => checkout({ orders: [fixture(), fixture()] }))).toEqual({ orders: 'must hold exactly one Toast order' });
  });

  it('takes the currency from DEFAULT_CURRENCY: Toast orders carry none', () => {
    expect(checkout(fixture(), { defaultCurrency: 'CAD', defaultPhoneRegion: 'US' }).check.currency).toBe('CAD');
  });

  it('as a refund: refused, it carries no refund', () => {
    expect(issuesOf(() => refund(fixture()))).toEqual({
      'checks.0.payments': 'carry no refund: no payment has refundStatus FULL, no selection or service charge has refundDetails, and the check is not voided',
    });
  });

  it('in an order_updated message: one checkout per check, keyed by the event guid and the check', () => {
    const actions = classify(message(fixture(), { guid: 'evt-fixture' }));
    expect(actions).toEqual([{ kind: 'checkout', key: `evt-fixture:checkout:${FIXTURE_CHECK}`, payload: { order: fixture(), checkGuid: FIXTURE_CHECK } }]);
    expect(checkout((actions[0] as { payload: unknown }).payload)).toEqual(expected);
  });

  it('refunded in full (payments[].refundStatus FULL): a full refund after the checkout', () => {
    const body = fixture();
    Object.assign(body.checks[0].payments[0], { refundStatus: 'FULL', refund: { refundAmount: 1.06, tipRefundAmount: 0, refundDate: '2019-02-26T09:00:00.000+0000', refundTransaction: { guid: 'rt-1' } } });
    expect(refund(body)).toEqual({ ...sale(FIXTURE_GUID, FIXTURE_CHECK), refundId: `full:${FIXTURE_GUID}:${FIXTURE_CHECK}`, partCents: 100 });
    expect(classify(message(body, { guid: 'evt-2' })).map((a) => [a.kind, a.key])).toEqual([
      ['checkout', `evt-2:checkout:${FIXTURE_CHECK}`],
      ['refund', `evt-2:refund:full:${FIXTURE_CHECK}`],
    ]);
    // The sale itself is unchanged by the refund (totalAmount "Not affected by refunds").
    expect(checkout(body)).toEqual(expected);
  });
});

// ---------------------------------------------------------------- checkouts

describe('checkout', () => {
  it('reads money through its decimal text, never float arithmetic', () => {
    const body = order({ checks: [check({ amount: 20.28, selections: [selection({ price: 19.99 }), selection({ item: { guid: 'item-mint' }, price: 0.29 })] })] });
    expect(checkout(body).check).toMatchObject({ amount: 2028, selections: [{ totalPrice: 1999 }, { totalPrice: 29 }] });
  });

  it('zero-decimal currency (JPY): ¥500 is 50000 cents of a unit', () => {
    const body = order({ checks: [check({ amount: 500, taxAmount: 50, selections: [selection({ price: 500, quantity: 1 })], payments: [payment({ amount: 550 })] })] });
    expect(checkout(body, { defaultCurrency: 'JPY', defaultPhoneRegion: 'JP' }).check).toMatchObject({
      amount: 50000,
      currency: 'JPY',
      taxAmount: 5000,
      selections: [{ quantity: 1, price: 50000, totalPrice: 50000 }],
    });
  });

  it('a weighed quantity (0.45 lb) is quantity 1 at the exact line total', () => {
    const body = order({ checks: [check({ amount: 4.05, selections: [selection({ item: { guid: 'item-salmon' }, displayName: 'Salmon (lb)', quantity: 0.45, receiptLinePrice: 8.99, price: 4.05 })] })] });
    expect(checkout(body).check.selections).toEqual([{ id: 'item-salmon', groupId: 'group-mains', displayName: 'Salmon (lb)', quantity: 1, price: 405, totalPrice: 405 }]);
  });

  it('a whole quantity keeps the line total; the unit price only where it divides exactly', () => {
    const body = order({
      checks: [check({ amount: 32.5, selections: [selection({ quantity: 3, price: 22.5 }), selection({ item: { guid: 'item-pie' }, quantity: 3, price: 10 })] })],
    });
    expect(checkout(body).check.selections).toEqual([
      { id: 'item-burger', groupId: 'group-mains', displayName: 'Burger', quantity: 3, price: 750, totalPrice: 2250 },
      { id: 'item-pie', groupId: 'group-mains', displayName: 'Burger', quantity: 3, totalPrice: 1000 },
    ]);
  });

  it('discounts: the lines are net of item and check discounts; the discounts are reported', () => {
    // Burger 10.00 − 2.00 item discount − 0.80 of a 10% check discount; fries 5.00 − 0.50.
    const body = order({
      checks: [
        check({
          amount: 11.7,
          appliedDiscounts: [{ name: '10% off', discountAmount: 1.3, nonTaxDiscountAmount: 1.3, discountType: 'PERCENT' }],
          selections: [
            selection({ preDiscountPrice: 10, price: 7.2, appliedDiscounts: [{ name: '$2 off', discountAmount: 2, nonTaxDiscountAmount: 2 }] }),
            selection({ item: { guid: 'item-fries' }, displayName: 'Fries', preDiscountPrice: 5, price: 4.5 }),
          ],
        }),
      ],
    });
    expect(checkout(body).check).toMatchObject({ amount: 1170, discountAmount: 330, selections: [{ totalPrice: 720 }, { totalPrice: 450 }] });
  });

  it('a voided loyalty reward discount is no longer a discount', () => {
    const body = order({ checks: [check({ appliedDiscounts: [{ discountAmount: 1, processingState: 'VOID' }] })] });
    expect(checkout(body).check).not.toHaveProperty('discountAmount');
  });

  it('tips and service charges: service charges are in the amount; tips and gratuity are not', () => {
    const charges = [
      { name: 'Delivery', chargeAmount: 2, gratuity: false, chargeType: 'FIXED' },
      { name: 'Large party 18%', chargeAmount: 3.6, gratuity: true, chargeType: 'PERCENT' },
    ];
    const base = { selections: [selection({ price: 20 })], appliedServiceCharges: charges, payments: [payment({ tipAmount: 1.5 }), payment({ tipAmount: 0.25, paymentStatus: 'VOIDED' })] };
    const expected = { amount: 2200, serviceAmount: 200, tipAmount: 510 };
    // Toast's amount "does not include gratuity": items 20 + delivery 2.
    expect(checkout(order({ checks: [check({ ...base, amount: 22 })] })).check).toMatchObject(expected);
    // Should Toast count the gratuity in its amount after all, it is taken out again.
    expect(checkout(order({ checks: [check({ ...base, amount: 25.6 })] })).check).toMatchObject(expected);
    // Any other total is a reading the bridge cannot confirm: refused, never sent as a guess.
    expect(issuesOf(() => checkout(order({ checks: [check({ ...base, amount: 23 })] })))).toEqual({
      'checks.0.amount': "is 23.00 but the check's selections (price) and service charges (chargeAmount) add up to 22.00 (25.60 with its gratuity): the bridge cannot tell which amount the loyalty service should see",
    });
  });

  it('voided selections and voided or deleted checks are left out', () => {
    const body = order({
      checks: [
        check({ amount: 10, selections: [selection(), selection({ item: { guid: 'item-x' }, price: 99, voided: true })] }),
        check({ amount: 50, voided: true, selections: [selection({ price: 50 })] }),
        check({ amount: 7, deleted: true, selections: [selection({ price: 7 })] }),
      ],
    });
    expect(checkout(body).check).toMatchObject({ amount: 1000, taxAmount: 63, selections: [{ id: 'item-burger', totalPrice: 1000 }] });
  });

  it('a split order is a sale per check: each posted by its guid, each with its own figures; bare, it must name one', () => {
    const first = check({ guid: 'chk-a' });
    const second = check({ guid: 'chk-b', amount: 5, taxAmount: 0.31, selections: [selection({ item: { guid: 'item-tea' }, price: 5 })], customer: null });
    const body = order({ checks: [first, second] });
    expect(checkout({ order: body, checkGuid: 'chk-a' })).toMatchObject({ ...sale('order-0001', 'chk-a'), check: { amount: 1000, taxAmount: 63, selections: [{ id: 'item-burger' }] } });
    expect(checkout({ order: body, checkGuid: 'chk-b' })).toMatchObject({ ...sale('order-0001', 'chk-b'), customer: {}, check: { amount: 500, taxAmount: 31, selections: [{ id: 'item-tea' }] } });
    expect(issuesOf(() => checkout(body))).toEqual({ checkGuid: 'is required: this order has 2 checks, each a sale of its own (loyalty belongs to the check); post each as { "order": …, "checkGuid": "…" }' });
    expect(issuesOf(() => checkout({ order: body, checkGuid: 'chk-z' }))).toEqual({ checkGuid: 'names no live check of this order; it has chk-a, chk-b' });
    // The webhook decides one sale per paid check.
    expect(classify(message(body, { guid: 'evt-split' })).map((a) => a.key)).toEqual(['evt-split:checkout:chk-a', 'evt-split:checkout:chk-b']);
    // A check without its guid cannot be told apart from the others.
    expect(issuesOf(() => classify(message(order({ checks: [check({ guid: null })] }))))).toEqual({ 'details.order.checks.0.guid': 'is required: loyalty belongs to the check, and a check is known by its guid' });
  });

  it('one check paid and another still open: the paid one is a sale now, the open one later', () => {
    const body = order({ closedDate: null, checks: [check({ guid: 'chk-paid' }), check({ guid: 'chk-open', paymentStatus: 'OPEN', closedDate: null, payments: [] })] });
    expect(classify(message(body, { guid: 'evt-half' })).map((a) => a.key)).toEqual(['evt-half:checkout:chk-paid']);
    expect(issuesOf(() => checkout({ order: body, checkGuid: 'chk-open' }))).toEqual({ 'order.checks.1.paymentStatus': 'is OPEN: the check is not paid yet' });
  });

  it('an open order is not a checkout yet', () => {
    expect(issuesOf(() => checkout(order({ closedDate: null, checks: [check({ paymentStatus: 'OPEN' })] })))).toEqual({ 'checks.0.paymentStatus': 'is OPEN: the check is not paid yet' });
    expect(issuesOf(() => checkout(order({ checks: [check({ paymentStatus: null, closedDate: null })] })))).toEqual({
      'checks.0.paymentStatus': 'is missing and the check has no closedDate: the check is not known to be paid',
    });
    // PAID: paid, tip not yet adjusted. Tips are not part of the amount, so it is a checkout.
    expect(checkout(order({ checks: [check({ paymentStatus: 'PAID' })] })).check.amount).toBe(1000);
  });

  it('voided and deleted orders are refused as checkouts', () => {
    expect(issuesOf(() => checkout(order({ voided: true })))).toEqual({ voided: 'the order is voided: post it to /v1/refunds/toast to reverse its accrual' });
    expect(issuesOf(() => checkout(order({ deleted: true })))).toEqual({
      deleted: 'is true: the order was deleted (its checks were combined into another order), so it is not a sale of its own',
    });
  });

  it('names each field it cannot read', () => {
    const body = order({ checks: [check({ amount: -1, paymentStatus: 'SETTLED', selections: [selection({ price: 'x' })], payments: [payment({ refundStatus: 'SOME' })] })] });
    expect(Object.keys(issuesOf(() => checkout(body))).sort()).toEqual(['checks.0.amount', 'checks.0.paymentStatus', 'checks.0.payments.0.refundStatus', 'checks.0.selections.0.price']);
    expect(issuesOf(() => checkout(order({ checks: [check({ selections: [selection({ quantity: 0 })] })] })))).toEqual({ 'checks.0.selections.0.quantity': 'must be greater than 0' });
    expect(issuesOf(() => checkout({ guid: 'o-1' }))).toEqual({ checks: 'is required: the Toast order with its checks' });
    expect(issuesOf(() => checkout(order({ openedDate: 'yesterday' })))).toEqual({ openedDate: 'must be an ISO 8601 date-time such as 2019-02-24T13:48:44.206+0000, got "yesterday"' });
  });
});

describe('customer', () => {
  const withCustomer = (c: Record<string, unknown>) => order({ checks: [check(c)] });

  it('phone (E.164 in DEFAULT_PHONE_REGION), email, names', () => {
    expect(checkout(order()).customer).toEqual({ phone: '+15550001111', email: 'ann@b.test', firstName: 'Ann', lastName: 'Lee' });
  });

  it('phoneCountryCode completes a national number', () => {
    expect(checkout(withCustomer({ customer: { phone: '7911 123456', phoneCountryCode: '44', email: '' } })).customer).toEqual({ phone: '+447911123456' });
    expect(issuesOf(() => checkout(withCustomer({ customer: { phone: '7911 123456', phoneCountryCode: 'UK' } })))).toEqual({
      'checks.0.customer.phoneCountryCode': 'must be an international calling code such as "1" or "+1"',
    });
  });

  it('appliedLoyaltyInfo.loyaltyIdentifier is the card serial when it belongs to a partner program', () => {
    expect(checkout(withCustomer({ customer: null, appliedLoyaltyInfo: { loyaltyIdentifier: '11-123456-1', vendor: 'INTEGRATION' } })).customer).toEqual({ serialNumber: '11-123456-1' });
    // Toast's own (or another vendor's) loyalty account is not a card of this loyalty service.
    expect(checkout(withCustomer({ customer: null, appliedLoyaltyInfo: { loyaltyIdentifier: '5555', vendor: 'TOAST' } })).customer).toEqual({});
  });

  it('a customer with only its Toast guid (loyalty checks) has no contact: the checkout is skipped', () => {
    expect(checkout(withCustomer({ customer: { guid: 'guest-1', firstName: null, lastName: null, phone: null, email: null } })).customer).toEqual({});
  });

  it("split checks: each check's guest is its own, so two guests at one table each earn their own check's points", () => {
    const two = order({ checks: [check({ guid: 'chk-ann' }), check({ guid: 'chk-bob', customer: { phone: '555-000-2222', email: 'bob@b.test' }, appliedLoyaltyInfo: { loyaltyIdentifier: '11-1-1', vendor: 'INTEGRATION' } })] });
    expect(checkout({ order: two, checkGuid: 'chk-ann' }).customer).toEqual({ phone: '+15550001111', email: 'ann@b.test', firstName: 'Ann', lastName: 'Lee' });
    expect(checkout({ order: two, checkGuid: 'chk-bob' }).customer).toEqual({ phone: '+15550002222', email: 'bob@b.test', serialNumber: '11-1-1' });
  });
});

// ---------------------------------------------------------------- refunds

/** A paid order of a burger (8.00 net) and fries (4.50), then refunds applied to it. */
function refundable(o: { burger?: unknown; fries?: unknown; charge?: unknown; status?: string; refund?: unknown } = {}) {
  return order({
    guid: 'order-r',
    checks: [
      check({
        guid: 'chk-r',
        amount: 12.5 + (o.charge ? 2 : 0),
        selections: [
          selection({ item: { guid: 'item-burger' }, price: 8, refundDetails: o.burger ?? null }),
          selection({ item: { guid: 'item-fries' }, displayName: 'Fries', price: 4.5, refundDetails: o.fries ?? null }),
        ],
        appliedServiceCharges: o.charge ? [{ name: 'Delivery', chargeAmount: 2, gratuity: false, refundDetails: o.charge }] : [],
        payments: [payment({ amount: 13.28, refundStatus: o.status ?? 'PARTIAL', refund: o.refund ?? { refundAmount: 4.78, tipRefundAmount: 0, refundDate: '2026-11-22T09:00:00.000+0000', refundTransaction: { guid: 'rt-1' } } })],
      }),
    ],
  });
}

describe('refund', () => {
  it('partial: one refund transaction, measured without tax, naming the line it took back whole', () => {
    const body = refundable({ fries: refunded(4.5, 'rt-1', 0.28) });
    expect(refund(body)).toEqual({ ...sale('order-r', 'chk-r'), refundId: 'rt-1', amountCents: 450, items: [{ id: 'item-fries', quantity: 1, totalCents: 450 }] });
    expect(classify(message(body, { guid: 'evt-r1' }))).toEqual([
      { kind: 'checkout', key: 'evt-r1:checkout:chk-r', payload: { order: body, checkGuid: 'chk-r' } },
      { kind: 'refund', key: 'evt-r1:refund:rt-1:chk-r', payload: { order: body, checkGuid: 'chk-r', refundTransactionGuid: 'rt-1' } },
    ]);
  });

  it('partial: part of a line, and a refunded service charge, are an amount only', () => {
    expect(refund(refundable({ burger: refunded(3, 'rt-1', 0.19) }))).toEqual({ ...sale('order-r', 'chk-r'), refundId: 'rt-1', amountCents: 300 });
    expect(refund(refundable({ fries: refunded(4.5, 'rt-1'), charge: refunded(2, 'rt-1') }))).toEqual({ ...sale('order-r', 'chk-r'), refundId: 'rt-1', amountCents: 650 });
  });

  it('two refund transactions on one order: one refund action each; posted bare it must name one', () => {
    const body = refundable({ burger: refunded(8, 'rt-2', 0.5), fries: refunded(4.5, 'rt-1', 0.28) });
    expect(classify(message(body, { guid: 'evt-r2' })).map((a) => a.key)).toEqual(['evt-r2:checkout:chk-r', 'evt-r2:refund:rt-2:chk-r', 'evt-r2:refund:rt-1:chk-r']);
    expect(issuesOf(() => refund(body))).toEqual({
      refundTransactionGuid: 'is required: this check carries 2 refunds (rt-2, rt-1); post each as { "order": …, "checkGuid": "…", "refundTransactionGuid": "…" }',
    });
    expect(refund({ order: body, refundTransactionGuid: 'rt-2' })).toEqual({ ...sale('order-r', 'chk-r'), refundId: 'rt-2', amountCents: 800, items: [{ id: 'item-burger', quantity: 1, totalCents: 800 }] });
    expect(issuesOf(() => refund({ order: body, refundTransactionGuid: 'rt-9' }))).toEqual({ refundTransactionGuid: 'names no refund transaction of this check; it has rt-2, rt-1' });
  });

  it('refund details without their refund transaction are refused: a later refund would count them twice', () => {
    const body = refundable({ fries: refunded(4.5, null) });
    const expected = {
      'checks.0.selections.1.refundDetails.refundTransaction.guid':
        'is missing: without the refund transaction the bridge cannot tell this refund from later ones on the same order, and could count it twice',
    };
    expect(issuesOf(() => refund(body))).toEqual(expected);
    expect(issuesOf(() => classify(message(body)))).toEqual({ 'details.order.checks.0.selections.1.refundDetails.refundTransaction.guid': expected['checks.0.selections.1.refundDetails.refundTransaction.guid'] });
  });

  it('a refunded payment without refund details is refused: its amount includes tax', () => {
    expect(issuesOf(() => refund(refundable()))).toEqual({
      'checks.0.payments.0.refundStatus': "is PARTIAL but no selection or service charge carries refundDetails: the payment's refundAmount includes tax, and the bridge measures refunds without tax",
    });
  });

  it('a refund of the tip only takes back no purchase', () => {
    const body = refundable({ refund: { refundAmount: 0, tipRefundAmount: 2, refundDate: '2026-11-22T09:00:00.000+0000' } });
    expect(classify(message(body, { guid: 'evt-tip' })).map((a) => a.kind)).toEqual(['checkout']);
    expect(Object.keys(issuesOf(() => refund(body)))).toEqual(['checks.0.payments']);
  });

  it('a refund of tax or gratuity only is acknowledged and takes back nothing', () => {
    const body = refundable({ fries: refunded(0, 'rt-tax', 0.28) });
    expect(classify(message(body)).map((a) => a.kind)).toEqual(['checkout']);
    expect(issuesOf(() => refund(body))).toEqual({ 'checks.0.selections': 'the refund returns only tax or gratuity: no purchase amount to take back' });
    expect(issuesOf(() => refund({ order: body, refundTransactionGuid: 'rt-tax' }))).toEqual({ 'order.checks': 'refund transaction rt-tax returns only tax or gratuity: no purchase amount to take back' });
  });

  it('every payment refunded in full: a full refund, whatever the lines say', () => {
    const body = refundable({ status: 'FULL', fries: refunded(4.5, 'rt-1', 0.28), burger: refunded(8, 'rt-2', 0.5) });
    expect(refund(body)).toEqual({ ...sale('order-r', 'chk-r'), refundId: 'full:order-r:chk-r', partCents: 1250 });
    expect(classify(message(body, { guid: 'evt-f' })).map((a) => a.key)).toEqual(['evt-f:checkout:chk-r', 'evt-f:refund:full:chk-r']);
  });

  it('a voided order that was paid reverses in full; one voided before payment is ignored', () => {
    const paid = order({ guid: 'order-v', voided: true, voidDate: '2026-11-21T11:00:00.000+0000', checks: [check({ guid: 'chk-v', voided: true, payments: [payment({ paymentStatus: 'VOIDED' })] })] });
    expect(refund(paid)).toEqual({ ...sale('order-v', 'chk-v'), refundId: 'void:order-v:chk-v', partCents: 1000 });
    expect(classify(message(paid, { guid: 'evt-v' }))).toEqual([{ kind: 'refund', key: 'evt-v:refund:void:chk-v', payload: { order: paid, checkGuid: 'chk-v' } }]);
    // One check voided after payment while the order stands: that check's sale alone is reversed.
    const one = order({ checks: [check({ guid: 'chk-stays' }), check({ guid: 'chk-gone', voided: true })] });
    expect(classify(message(one, { guid: 'evt-one' })).map((a) => a.key)).toEqual(['evt-one:checkout:chk-stays', 'evt-one:refund:void:chk-gone']);
    const unpaid = order({ guid: 'order-u', voided: true, paidDate: null, closedDate: null, checks: [check({ voided: true, paymentStatus: 'OPEN', payments: [] })] });
    expect(classify(message(unpaid, { guid: 'evt-u' }))).toEqual([{ kind: 'ignored', key: 'evt-u', reason: 'order order-u was voided before it was paid: nothing was accrued' }]);
  });
});

// ---------------------------------------------------------------- webhooks

describe('webhook classify', () => {
  it('an open order is acknowledged and ignored', () => {
    const body = order({ closedDate: null, checks: [check({ paymentStatus: 'OPEN', payments: [] })] });
    expect(classify(message(body, { guid: 'evt-open' }))).toEqual([{ kind: 'ignored', key: 'evt-open', reason: 'order order-0001 is not paid yet (details.order.checks.0.paymentStatus is OPEN: the check is not paid yet)' }]);
  });

  it('a deleted order is ignored', () => {
    expect(classify(message(order({ deleted: true }), { guid: 'evt-d' }))).toEqual([
      { kind: 'ignored', key: 'evt-d', reason: 'order order-0001 was deleted (its checks were combined into another order)' },
    ]);
    // Every check combined into another order: that order carries the sale now.
    expect(classify(message(order({ checks: [check({ deleted: true })] }), { guid: 'evt-d2' })).map((a) => a.kind)).toEqual(['ignored']);
  });

  it('channel_order_updated is an order update too', () => {
    expect(classify(message(order(), { eventType: 'channel_order_updated', guid: 'evt-c' })).map((a) => a.kind)).toEqual(['checkout']);
  });

  it('unknown and other event types are acknowledged and ignored', () => {
    expect(classify({ timestamp: 't', eventCategory: 'stock', eventType: 'low_quantity', guid: 'evt-s', details: {} })).toEqual([
      { kind: 'ignored', key: 'evt-s', reason: 'Toast low_quantity events carry no sale' },
    ]);
    expect(classify({ eventType: 'loyalty_magic', guid: 'evt-x' })).toEqual([{ kind: 'ignored', key: 'evt-x', reason: 'Toast event type loyalty_magic is not one the bridge acts on' }]);
  });

  it('the event type comes from the body, else from the Toast-Event-Type header', () => {
    const body = message(order(), { guid: 'evt-h' }) as Record<string, unknown>;
    delete body.eventType;
    expect(classify(body, { 'toast-event-type': 'order_updated' }).map((a) => a.kind)).toEqual(['checkout']);
    // The body is signed and the header is not: the body wins.
    expect(classify(message(order(), { eventType: 'partner_added' }), { 'toast-event-type': 'order_updated' }).map((a) => a.kind)).toEqual(['ignored']);
    expect(issuesOf(() => classify(body))).toEqual({ eventType: 'is missing, and so is the Toast-Event-Type header' });
  });

  it('the order may be details itself, or JSON text in details.order', () => {
    expect(classify({ ...message(null), details: order() }).map((a) => a.kind)).toEqual(['checkout']);
    expect(classify({ ...message(null), details: { order: JSON.stringify(order()) } }).map((a) => a.kind)).toEqual(['checkout']);
  });

  it('an order named by its guid only cannot be translated (the bridge does not fetch Toast orders)', () => {
    expect(issuesOf(() => classify(message({ guid: 'order-9', entityType: 'Order' })))).toEqual({
      'details.order.checks': 'is missing: this delivery names order "order-9" without its content, and the bridge does not fetch orders from the Toast API',
    });
    expect(issuesOf(() => classify({ ...message(null), details: { restaurantGuid: 'r' } }))).toEqual({ 'details.order': 'is missing: an order_updated message carries the order in details.order' });
    expect(issuesOf(() => classify({ ...message(order()), guid: undefined }))).toEqual({ guid: 'is required: it is the event id repeated deliveries are recognised by' });
  });

  it('a repeated delivery gives the same actions under the same keys; another event of the order, other keys', () => {
    const body = refundable({ fries: refunded(4.5, 'rt-1', 0.28) });
    const first = classify(message(body, { guid: 'evt-same' }));
    expect(classify(message(body, { guid: 'evt-same' }))).toEqual(first);
    const keys = (actions: WebhookAction[]) => actions.map((a) => a.key);
    expect(keys(classify(message(body, { guid: 'evt-later' })))).toEqual(['evt-later:checkout:chk-r', 'evt-later:refund:rt-1:chk-r']);
    // The refund itself keeps its identity across events: the core changes nothing the second time.
    expect(refund((classify(message(body, { guid: 'evt-later' }))[1] as { payload: unknown }).payload).refundId).toBe('rt-1');
  });
});

// ---------------------------------------------------------------- signatures

describe('webhook signature: base64(HMAC-SHA256(secret, body + timestamp))', () => {
  const settings: PosSettings = { webhookSecret: 'toast-secret', apiBaseUrl: '' };
  const scheme = toastAdapter.webhook!.signature;
  const raw = JSON.stringify(message(fixture(), { guid: 'evt-sig' }));
  const TS = '1763720461123';

  /** Verifies like the core: `headers` lowercased and folded as Node does, `rawHeaders` as sent; at TS unless `now` says otherwise. */
  function verify(pairs: [string, string][], body: string = raw, now = new Date(Number(TS))) {
    const headers: IncomingHttpHeaders = {};
    for (const [k, v] of pairs) {
      const key = k.toLowerCase();
      headers[key] = headers[key] === undefined ? v : `${headers[key]}, ${v}`;
    }
    verifySignature(scheme, settings, Buffer.from(body), headers, pairs.flat(), now);
  }
  /** `timestamp` null: signed the way a message without a Toast-Timestamp header is. */
  const signed = (body = raw, timestamp: string | null = TS) => signature(toastAdapter, settings, body, timestamp === null ? {} : { 'Toast-Timestamp': timestamp });

  it('accepts a message signed over body + Toast-Timestamp', () => {
    expect(() => verify([signed(), ['Toast-Timestamp', TS]])).not.toThrow();
  });

  it('without a Toast-Timestamp header, accepts one signed over body + the body\'s own timestamp', () => {
    expect(() => verify([signed(raw, null)], raw, new Date('2026-11-21T10:21:01.123Z'))).not.toThrow();
    const [, value] = signed(raw, null);
    const expected = hmacBase64('toast-secret', raw + '2026-11-21T10:21:01.123Z');
    expect(value).toBe(expected);
  });

  it('refuses a wrong signature', () => {
    expect(() => verify([['Toast-Signature', hmacBase64('other-secret', raw + TS)], ['Toast-Timestamp', TS]])).toThrow(UnauthorizedError);
    expect(() => verify([signed(raw, '1763720461124'), ['Toast-Timestamp', TS]])).toThrow('webhook signature does not match');
    expect(() => verify([signed(), ['Toast-Timestamp', TS]], raw.replace('"amount":1', '"amount":2'))).toThrow('webhook signature does not match');
    // Hex is not what Toast sends.
    expect(() => verify([['Toast-Signature', Buffer.from(signed()[1], 'base64').toString('hex')], ['Toast-Timestamp', TS]])).toThrow(UnauthorizedError);
  });

  it('refuses a missing, empty or repeated Toast-Signature header', () => {
    expect(() => verify([['Toast-Timestamp', TS]])).toThrow('webhook signature header Toast-Signature is missing, empty or repeated');
    expect(() => verify([['Toast-Signature', ''], ['Toast-Timestamp', TS]])).toThrow('webhook signature header Toast-Signature is missing, empty or repeated');
    expect(() => verify([signed(), signed(), ['Toast-Timestamp', TS]])).toThrow('webhook signature header Toast-Signature is missing, empty or repeated');
  });

  it('refuses when the timestamp is missing, empty or repeated', () => {
    const noTimestamp = JSON.stringify({ ...message(fixture()), timestamp: undefined });
    expect(() => verify([['Toast-Signature', hmacBase64('toast-secret', noTimestamp)]], noTimestamp)).toThrow('webhook is missing a header its signature covers');
    expect(() => verify([signed(), ['Toast-Timestamp', '']])).toThrow('webhook is missing a header its signature covers');
    expect(() => verify([signed(), ['Toast-Timestamp', TS], ['Toast-Timestamp', TS]])).toThrow('webhook signature does not match');
  });

  it('refuses a signed time outside the 20-minute replay window, in either direction (Toast retries for ~15 minutes)', () => {
    const at = (minutes: number) => new Date(Number(TS) + minutes * 60_000);
    expect(() => verify([signed(), ['Toast-Timestamp', TS]], raw, at(19))).not.toThrow();
    expect(() => verify([signed(), ['Toast-Timestamp', TS]], raw, at(-19))).not.toThrow();
    expect(() => verify([signed(), ['Toast-Timestamp', TS]], raw, at(21))).toThrow(/signed 21 min ago, outside the 20 min replay window/);
    expect(() => verify([signed(), ['Toast-Timestamp', TS]], raw, at(-21))).toThrow(/signed 21 min ahead/);
    // A delivery signed in 2001, as the review sent one, is refused whichever timestamp it uses.
    const old = '2001-09-09T01:46:40.000Z';
    expect(() => verify([signed(raw, old), ['Toast-Timestamp', old]])).toThrow(/replay window/);
    const oldBody = JSON.stringify({ ...message(fixture()), timestamp: old });
    expect(() => verify([signed(oldBody, null)], oldBody)).toThrow(/replay window/);
    // A signed value that is no time at all is refused too.
    expect(() => verify([signed(raw, 'yesterday'), ['Toast-Timestamp', 'yesterday']])).toThrow(/not a date-time/);
  });

  it('refuses everything when no secret is configured', () => {
    expect(() => verifySignature(scheme, { apiBaseUrl: '' }, Buffer.from(raw), { 'toast-timestamp': TS }, [...signed(), 'Toast-Timestamp', TS])).toThrow(UnauthorizedError);
  });
});
