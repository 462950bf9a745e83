/**
 * Square → the neutral intents, exactly: every Square fixture in test/fixtures/square
 * (Square's own API examples), then orders built from Square's documented shapes for what the
 * fixtures do not show (JPY, weighed goods, tips, service charges, returns, signatures).
 */
import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { PosApi, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import { squareAdapter } from '../../adapters/square/index.js';
import { UnauthorizedError } from '../../src/kernel/errors.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { signature } from '../support/webhooks.js';
import { validationIssues } from '../support/validation.js';

const FIXTURES = new URL('../fixtures/square/', import.meta.url);
const fixture = (name: string): any => JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8'));
const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const checkout = (body: unknown) => squareAdapter.parseCheckout(body, context);
const refund = (body: unknown) => squareAdapter.parseRefund(body, context);
const classify = (body: unknown) => squareAdapter.webhook!.classify(body, {});

function completed(name: string): any {
  const body = fixture(name);
  body.order.state = 'COMPLETED';
  return body;
}

/** A PosApi answering from a map, recording what was asked. */
function fakeApi(answers: Record<string, unknown>): PosApi & { paths: string[] } {
  const paths: string[] = [];
  return {
    paths,
    async get(path) {
      paths.push(path);
      if (!(path in answers)) throw new Error(`no answer for ${path}`);
      return answers[path];
    },
  };
}

const usd = (amount: number) => ({ amount, currency: 'USD' });
const line = (over: Record<string, unknown> = {}) => ({ uid: 'l1', name: 'Latte', quantity: '1', base_price_money: usd(1000), total_money: usd(1000), total_tax_money: usd(0), ...over });
const order = (over: Record<string, unknown> = {}) => ({
  id: 'ORDER-1',
  state: 'COMPLETED',
  version: 3,
  created_at: '2026-11-21T10:00:00Z',
  closed_at: '2026-11-21T10:20:00Z',
  line_items: [line()],
  total_money: usd(1000),
  total_tax_money: usd(0),
  total_discount_money: usd(0),
  total_tip_money: usd(0),
  total_service_charge_money: usd(0),
  ...over,
});

describe('Square fixtures: orders', () => {
  it('CreateOrderResponse: tax and discounts come off exactly (6176 − 510 tax = 5666), lines tax-excluded', () => {
    const intent = checkout(completed('CreateOrderResponse_example.json'));
    expect(intent).toEqual({
      orderId: 'CAISENgvlJ6jLWAzERDzjyHVybY',
      customer: {},
      check: {
        amount: 5666,
        currency: 'USD',
        externalTransactionId: 'CAISENgvlJ6jLWAzERDzjyHVybY',
        checkOpenedAt: '2020-01-17T20:47:53.293Z',
        taxAmount: 510,
        discountAmount: 433,
        selections: [
          // 1648 total − 136 tax; an ad-hoc line has no catalog id.
          { displayName: 'New York Strip Steak', quantity: 1, price: 1599, totalPrice: 1512 },
          // 4528 − 374: modifiers and discounts are inside the line total, the unit price is the base price.
          { id: 'BEMYCSMIJL46OCDV4KYIKXIB', displayName: 'New York Steak (Larger)', quantity: 2, price: 2200, totalPrice: 4154 },
        ],
      },
    });
    expect(deriveTransactionId('square', intent.orderId, intent.scope)).toBe('square:CAISENgvlJ6jLWAzERDzjyHVybY');
  });

  it('CreateOrderResponse as Square answers it (OPEN) is refused: only COMPLETED orders accrue', () => {
    expect(validationIssues(() => checkout(fixture('CreateOrderResponse_example.json')))).toEqual([
      { field: 'order.state', message: 'is "OPEN": only COMPLETED Square orders are sales that accrue (OPEN, DRAFT and CANCELED ones are not)' },
    ]);
  });

  it('PayOrderResponse (COMPLETED, two tenders, no customer): 2000 cents, no tax/tip fields, closed time', () => {
    expect(checkout(fixture('PayOrderResponse_example.json'))).toEqual({
      orderId: 'lgwOlEityYPJtcuvKTVKT1pA986YY',
      customer: {},
      check: {
        amount: 2000,
        currency: 'USD',
        externalTransactionId: 'lgwOlEityYPJtcuvKTVKT1pA986YY',
        checkOpenedAt: '2019-08-06T02:47:35.693Z',
        checkClosedAt: '2019-08-06T02:47:37.140Z',
        selections: [
          { displayName: 'Item 1', quantity: 1, price: 500, totalPrice: 500 },
          { displayName: 'Item 2', quantity: 2, price: 750, totalPrice: 1500 },
        ],
      },
    });
  });

  it('the bare PayOrder Order is accepted as well as the { order } wrapper', () => {
    const wrapped = fixture('PayOrderResponse_example.json');
    expect(checkout(wrapped.order)).toEqual(checkout(wrapped));
  });

  it('RetrieveOrderResponse: a 50% order discount spread over the lines (550 of 1100)', () => {
    expect(validationIssues(() => checkout(fixture('RetrieveOrderResponse_example.json')))[0]!.field).toBe('order.state');
    expect(checkout(completed('RetrieveOrderResponse_example.json')).check).toEqual({
      amount: 550,
      currency: 'USD',
      externalTransactionId: 'CAISENgvlJ6jLWAzERDzjyHVybY',
      checkOpenedAt: '2020-05-18T16:30:49.614Z',
      discountAmount: 550,
      selections: [
        { displayName: 'Item 1', quantity: 1, price: 500, totalPrice: 250 },
        { displayName: 'Item 2', quantity: 2, price: 300, totalPrice: 300 },
      ],
    });
  });

  it('CalculateOrderResponse has no order id (a preview): refused naming order.id', () => {
    expect(validationIssues(() => checkout(completed('CalculateOrderResponse_example.json')))).toEqual([
      { field: 'order.id', message: 'is required: the Square order id identifies the transaction' },
    ]);
    const withId = completed('CalculateOrderResponse_example.json');
    withId.order.id = 'CALC-1';
    expect(checkout(withId).check).toMatchObject({ amount: 550, discountAmount: 550 });
  });
});

describe('Square fixtures: webhooks', () => {
  it('order.created (OPEN, version 1) is acknowledged and ignored without calling Square', () => {
    expect(classify(fixture('webhook_order_created.json'))).toEqual([
      {
        kind: 'ignored',
        key: '116038d3-2948-439f-8679-fc86dbf80f69',
        reason: 'order eA3vssLHKJrv9H0IdJCM3gNqfdcZY is OPEN (version 1): only COMPLETED orders accrue; the update that completes it is acted on',
      },
    ]);
  });

  it('order.updated (OPEN, version 2) likewise', () => {
    expect(classify(fixture('webhook_order_updated.json'))).toEqual([
      {
        kind: 'ignored',
        key: '4b8e5c91-9f17-4cf1-900a-4a0629f81add',
        reason: 'order eA3vssLHKJrv9H0IdJCM3gNqfdcZY is OPEN (version 2): only COMPLETED orders accrue; the update that completes it is acted on',
      },
    ]);
  });

  it('order.updated COMPLETED: fetches GET /v2/orders/{id}, then a COMPLETED order is a checkout under the same key', async () => {
    const body = fixture('webhook_order_updated.json');
    body.data.object.order_updated.state = 'COMPLETED';
    const [action] = classify(body) as [Extract<WebhookAction, { kind: 'fetch' }>];
    expect(action).toMatchObject({ kind: 'fetch', key: '4b8e5c91-9f17-4cf1-900a-4a0629f81add' });
    const fetched = { order: order({ id: 'eA3vssLHKJrv9H0IdJCM3gNqfdcZY' }) };
    const api = fakeApi({ '/v2/orders/eA3vssLHKJrv9H0IdJCM3gNqfdcZY': fetched });
    const answer = await action.fetch(api);
    expect(api.paths).toEqual(['/v2/orders/eA3vssLHKJrv9H0IdJCM3gNqfdcZY']);
    const next = action.decide(answer);
    expect(next).toEqual({ kind: 'checkout', key: '4b8e5c91-9f17-4cf1-900a-4a0629f81add', payload: fetched });
    expect(checkout((next as { payload: unknown }).payload).check.amount).toBe(1000);
  });

  it('payment.updated is acknowledged and ignored', () => {
    expect(classify(fixture('webhook_payment_updated.json'))).toEqual([
      { kind: 'ignored', key: '6a8f5f28-54a1-4eb0-a98a-3111513fd4fc', reason: 'payment.updated: payments are not what accrues; the COMPLETED order is (order.created / order.updated)' },
    ]);
  });

  it('refund.created (PENDING) waits for COMPLETED', () => {
    expect(classify(fixture('webhook_refund_created.json'))).toEqual([
      {
        kind: 'ignored',
        key: 'bc316346-6691-4243-88ed-6d651a0d0c47',
        reason: 'refund KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P is PENDING: waits for COMPLETED (a later refund.updated)',
      },
    ]);
  });

  it('refund.updated (COMPLETED): fetches the refund’s (return) order and reverses what it returned, tax excluded', async () => {
    const body = fixture('webhook_refund_updated.json');
    const [action] = classify(body) as [Extract<WebhookAction, { kind: 'fetch' }>];
    expect(action).toMatchObject({ kind: 'fetch', key: 'bc316346-6691-4243-88ed-6d651a0d0c47' });
    // The refund's amount_money (1000) includes 80 of tax: the return order says so line by line.
    const returnOrder = {
      id: 'haOyDuHiqtAXMk0d8pDKXpL7Jg4F',
      state: 'COMPLETED',
      returns: [{ source_order_id: 'SALE-1', return_line_items: [{ uid: 'r1', source_line_item_uid: 'l1', catalog_object_id: 'LATTE', name: 'Latte', quantity: '1', total_money: usd(1000), total_tax_money: usd(80) }] }],
      return_amounts: { total_money: usd(1000), tax_money: usd(80), tip_money: usd(0), discount_money: usd(0), service_charge_money: usd(0) },
    };
    const api = fakeApi({ '/v2/orders/haOyDuHiqtAXMk0d8pDKXpL7Jg4F': { order: returnOrder } });
    const next = action.decide(await action.fetch(api));
    expect(next).toEqual({ kind: 'refund', key: 'bc316346-6691-4243-88ed-6d651a0d0c47', payload: { refund: body.data.object.refund, order: { order: returnOrder } } });
    expect(refund((next as { payload: unknown }).payload)).toEqual({
      orderId: 'SALE-1',
      refundId: 'haOyDuHiqtAXMk0d8pDKXpL7Jg4F',
      amountCents: 920,
      items: [{ id: 'LATTE', quantity: 1, totalCents: 920 }],
    });
  });

  it('refund.updated fixture whose order is the sale itself (no returns[]): exact only when it is the whole total or the order has no tax and tip', () => {
    const refundObject = fixture('webhook_refund_updated.json').data.object.refund;
    const untaxed = order({ id: 'haOyDuHiqtAXMk0d8pDKXpL7Jg4F' });
    expect(refund({ refund: refundObject, order: untaxed })).toEqual({
      orderId: 'haOyDuHiqtAXMk0d8pDKXpL7Jg4F',
      refundId: 'KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P',
    });
    // 1000 of a 1080 order with 80 of tax and no returned items: the tax share is not stated, so it is refused.
    const taxed = order({ id: 'haOyDuHiqtAXMk0d8pDKXpL7Jg4F', line_items: [line({ total_money: usd(1080), total_tax_money: usd(80) })], total_money: usd(1080), total_tax_money: usd(80) });
    expect(validationIssues(() => refund({ refund: refundObject, order: taxed }))).toEqual([
      {
        field: 'refund.amount_money',
        message:
          'refunds 1000 USD minor units of an order of 1080 USD minor units with 80 USD minor units tax and 0 USD minor units tip, and names no returned items: how much of it is tax or tip is not stated, so it cannot be measured exactly; refund the items through a return order, or post the tax-excluded amount to /v1/refunds/generic',
      },
    ]);
  });

  it('the PENDING refund.created payload, posted as a refund, is refused until COMPLETED', () => {
    expect(validationIssues(() => refund({ refund: fixture('webhook_refund_created.json').data.object.refund, order: order() }))).toEqual([
      { field: 'refund.status', message: 'is "PENDING": a Square refund is acted on once its status is COMPLETED' },
    ]);
  });

  it.each([
    ['webhook_loyalty_account_updated.json', '3ca83966-230e-4a61-8484-22ea749ea765', 'loyalty.account.updated'],
    ['webhook_loyalty_event_created.json', 'f151e2c6-9340-4cca-9d37-1bcd1c2d6a0d', 'loyalty.event.created'],
  ])('%s is acknowledged and ignored', (name, key, type) => {
    expect(classify(fixture(name))).toEqual([{ kind: 'ignored', key, reason: `${type}: Square Loyalty's own events; the bridge accrues from COMPLETED orders` }]);
  });
});

describe('Square money and lines', () => {
  it('JPY is zero-decimal: amount 2 is ¥2 = 200 cents', () => {
    const yen = (amount: number) => ({ amount, currency: 'JPY' });
    const intent = checkout(order({ line_items: [line({ base_price_money: yen(2), total_money: yen(2), total_tax_money: yen(0) })], total_money: yen(2), total_tax_money: yen(0), total_discount_money: yen(0), total_tip_money: yen(0), total_service_charge_money: yen(0) }));
    expect(intent.check).toMatchObject({ amount: 200, currency: 'JPY', selections: [{ quantity: 1, price: 200, totalPrice: 200 }] });
  });

  it('JPY with 10% tax added: ¥2200 − ¥200 tax = 200000 cents', () => {
    const yen = (amount: number) => ({ amount, currency: 'JPY' });
    const intent = checkout(order({ line_items: [line({ quantity: '2', base_price_money: yen(1000), total_money: yen(2200), total_tax_money: yen(200) })], total_money: yen(2200), total_tax_money: yen(200), total_discount_money: null, total_tip_money: null, total_service_charge_money: null }));
    expect(intent.check).toMatchObject({ amount: 200000, taxAmount: 20000, selections: [{ quantity: 2, price: 100000, totalPrice: 200000 }] });
  });

  it('three-decimal currencies round once, half away from zero: KWD 1.235 → 123.5 → 124 cents', () => {
    const kwd = (amount: number) => ({ amount, currency: 'KWD' });
    const intent = checkout(order({ line_items: [line({ base_price_money: kwd(1235), total_money: kwd(1235), total_tax_money: null })], total_money: kwd(1235), total_tax_money: null, total_discount_money: null, total_tip_money: null, total_service_charge_money: null }));
    expect(intent.check).toMatchObject({ amount: 124, currency: 'KWD', selections: [{ quantity: 1, price: 124, totalPrice: 124 }] });
  });

  it('a weighed line ("1.70000" kg) becomes quantity 1 at the exact line total', () => {
    const weighed = line({ catalog_object_id: 'APPLES', name: 'Apples', variation_name: 'per kg', quantity: '1.70000', base_price_money: usd(399), total_money: usd(678) });
    expect(checkout(order({ line_items: [weighed], total_money: usd(678) })).check.selections).toEqual([{ id: 'APPLES', displayName: 'Apples (per kg)', quantity: 1, price: 678, totalPrice: 678 }]);
  });

  it('tips and taxed service charges: amount = total − tax − tip, service charges included', () => {
    // Line 1000 + 80 tax; service charge 200 + 16 tax; tip 300. Square's total: 1080 + 216 + 300 = 1596.
    const intent = checkout(
      order({
        line_items: [line({ total_money: usd(1080), total_tax_money: usd(80) })],
        service_charges: [{ uid: 'sc1', name: 'Delivery fee', total_money: usd(216), total_tax_money: usd(16), treatment_type: 'LINE_ITEM_TREATMENT' }],
        total_money: usd(1596),
        total_tax_money: usd(96),
        total_tip_money: usd(300),
        total_service_charge_money: usd(200),
      }),
    );
    expect(intent.check).toMatchObject({ amount: 1200, taxAmount: 96, tipAmount: 300, serviceAmount: 200, selections: [{ quantity: 1, price: 1000, totalPrice: 1000 }] });
    expect(intent.check).not.toHaveProperty('discountAmount');
  });

  it('an apportioned service charge is inside its lines’ totals and not counted twice', () => {
    // Square's GST example shape: inclusive tax, a 24 charge apportioned onto the line (1500 + 24).
    const aud = (amount: number) => ({ amount, currency: 'AUD' });
    const intent = checkout(
      order({
        line_items: [line({ base_price_money: aud(1500), total_money: aud(1524), total_tax_money: aud(139), applied_service_charges: [{ service_charge_uid: 'sc1' }] })],
        service_charges: [{ uid: 'sc1', total_money: aud(24), total_tax_money: aud(0), treatment_type: 'APPORTIONED_TREATMENT' }],
        total_money: aud(1524),
        total_tax_money: aud(139),
        total_discount_money: aud(0),
        total_tip_money: aud(0),
        total_service_charge_money: aud(24),
      }),
    );
    expect(intent.check).toMatchObject({ amount: 1385, currency: 'AUD', taxAmount: 139, serviceAmount: 24, selections: [{ price: 1500, totalPrice: 1385 }] });
  });

  it('a cash rounding adjustment is part of what was paid', () => {
    const cad = (amount: number) => ({ amount, currency: 'CAD' });
    const intent = checkout(order({ line_items: [line({ base_price_money: cad(1002), total_money: cad(1002), total_tax_money: null })], rounding_adjustment: { amount_money: cad(-2) }, total_money: cad(1000), total_tax_money: null, total_discount_money: null, total_tip_money: null, total_service_charge_money: null }));
    expect(intent.check).toMatchObject({ amount: 1000, currency: 'CAD', selections: [{ totalPrice: 1002 }] });
  });

  it('figures that do not add up are refused, never guessed (e.g. a tip that is not inside total_money)', () => {
    expect(validationIssues(() => checkout(order({ total_money: usd(1000), total_tip_money: usd(300) })))).toEqual([
      {
        field: 'total_money',
        message:
          'does not add up: total_money − total_tax_money − total_tip_money = 700 USD minor units, but the line items (tax excluded) 1000 USD minor units + service charges (tax excluded) 0 USD minor units + rounding 0 USD minor units = 1000 USD minor units; refusing to guess which figure is right',
      },
    ]);
  });

  it('names each bad field: a mixed currency, a fractional minor amount, a zero quantity, a missing total', () => {
    expect(validationIssues(() => checkout(order({ line_items: [line({ total_money: { amount: 1000, currency: 'EUR' } })] })))).toEqual([{ field: 'line_items.0.total_money.currency', message: 'is "EUR" but the order is in USD' }]);
    expect(validationIssues(() => checkout(order({ total_money: { amount: 10.5, currency: 'USD' } })))[0]).toMatchObject({ field: 'total_money.amount' });
    expect(validationIssues(() => checkout(order({ line_items: [line({ quantity: '0' })] })))).toEqual([{ field: 'line_items.0.quantity', message: 'must be greater than 0' }]);
    expect(validationIssues(() => checkout(order({ total_money: undefined })))).toEqual([{ field: 'total_money', message: 'is required: a completed Square order states its total' }]);
    expect(validationIssues(() => checkout(order({ total_money: { amount: 1000, currency: 'usd' } })))[0]).toMatchObject({ field: 'total_money.currency' });
  });

  it('return orders and exchanges are not checkouts', () => {
    const returns = [{ source_order_id: 'ORDER-0', return_line_items: [line()] }];
    expect(validationIssues(() => checkout(order({ returns, line_items: [] })))[0]!.message).toMatch(/^this is a return order/);
    expect(validationIssues(() => checkout(order({ returns })))[0]!.message).toMatch(/^this order is an exchange/);
  });
});

describe('Square customers', () => {
  it('a fulfillment recipient’s phone and email (Square’s pickup example) identify the customer', () => {
    const pickup = { type: 'PICKUP', pickup_details: { recipient: { display_name: 'Amelia Earhart', email_address: 'Amelia.Earhart@example.com', phone_number: '1-212-555-4240' } } };
    expect(checkout(order({ fulfillments: [pickup], customer_id: 'CUST-1' }))).toMatchObject({ customer: { phone: '+12125554240', email: 'amelia.earhart@example.com' } });
    expect(checkout(order({ fulfillments: [pickup] }))).not.toHaveProperty('customerRef');
  });

  it('delivery and shipment recipients count too; an unusable phone is dropped when the email identifies the customer', () => {
    const delivery = { delivery_details: { recipient: { phone_number: 'n/a', email_address: 'x@y.test' } } };
    expect(checkout(order({ fulfillments: [{ shipment_details: { recipient: { display_name: 'no contact' } } }, delivery] })).customer).toEqual({ email: 'x@y.test' });
    expect(validationIssues(() => checkout(order({ fulfillments: [{ delivery_details: { recipient: { phone_number: 'n/a' } } }] })))).toEqual([
      { field: 'fulfillments.0.delivery_details.recipient.phone', message: 'is not a phone number that can be written in E.164' },
    ]);
  });

  it('only a customer_id: handed to the core as customerRef (order, then recipient, then tender)', () => {
    expect(checkout(order({ customer_id: 'CUST-1' }))).toMatchObject({ customer: {}, customerRef: 'CUST-1' });
    expect(checkout(order({ fulfillments: [{ pickup_details: { recipient: { customer_id: 'CUST-2' } } }] }))).toMatchObject({ customerRef: 'CUST-2' });
    expect(checkout(order({ tenders: [{ customer_id: 'CUST-3' }] }))).toMatchObject({ customerRef: 'CUST-3' });
  });

  it('fetchCustomer reads GET /v2/customers/{id}: phone_number, email_address, names', async () => {
    const api = fakeApi({ '/v2/customers/CUST%2F1': { customer: { id: 'CUST/1', given_name: 'Ann', family_name: 'Lee', phone_number: '(555) 000-1111', email_address: 'Ann@B.test' } } });
    expect(await squareAdapter.fetchCustomer!('CUST/1', api, context)).toEqual({ phone: '+15550001111', email: 'ann@b.test', firstName: 'Ann', lastName: 'Lee' });
    expect(api.paths).toEqual(['/v2/customers/CUST%2F1']);
  });
});

describe('Square refunds', () => {
  const returnOrder = (over: Record<string, unknown> = {}) => ({
    id: 'RETURN-1',
    state: 'COMPLETED',
    returns: [
      {
        source_order_id: 'CAISENgvlJ6jLWAzERDzjyHVybY',
        // One of the two "New York Steak (Larger)" of CreateOrderResponse: 2264 with 187 tax.
        return_line_items: [{ uid: 'r1', source_line_item_uid: 'v8ZuEXpOJpb0bazLuvrLDB', catalog_object_id: 'BEMYCSMIJL46OCDV4KYIKXIB', name: 'New York Steak', quantity: '1', total_money: usd(2264), total_tax_money: usd(187) }],
      },
    ],
    return_amounts: { total_money: usd(2264), tax_money: usd(187), discount_money: usd(173), tip_money: usd(0), service_charge_money: usd(0) },
    ...over,
  });

  it('a return order is a partial refund of its source order, tax excluded, itemized by catalog id', () => {
    const expected = { orderId: 'CAISENgvlJ6jLWAzERDzjyHVybY', refundId: 'RETURN-1', amountCents: 2077, items: [{ id: 'BEMYCSMIJL46OCDV4KYIKXIB', quantity: 1, totalCents: 2077 }] };
    expect(refund(returnOrder())).toEqual(expected);
    expect(refund({ order: returnOrder() })).toEqual(expected);
    // Its PaymentRefund (amount incl. tax) with the return order gives the same refund, so both are one refund to the core.
    expect(refund({ refund: { id: 'PR-1', status: 'COMPLETED', amount_money: usd(2264), order_id: 'RETURN-1', payment_id: 'P-1' }, order: { order: returnOrder() } })).toEqual(expected);
  });

  it('returned lines without a catalog id or with a weighed quantity are measured by amount only', () => {
    const ret = returnOrder();
    ret.returns[0]!.return_line_items.push({ uid: 'r2', source_line_item_uid: 'x', catalog_object_id: undefined as never, name: 'Custom', quantity: '1', total_money: usd(100), total_tax_money: usd(0) });
    ret.return_amounts.total_money = usd(2364);
    expect(refund(ret)).toEqual({ orderId: 'CAISENgvlJ6jLWAzERDzjyHVybY', refundId: 'RETURN-1', amountCents: 2177 });
  });

  it('returned service charges count, returned tips do not', () => {
    const ret = returnOrder({ return_amounts: { total_money: usd(2264 + 108 + 50), tax_money: usd(187 + 8), tip_money: usd(50) } });
    (ret.returns[0] as Record<string, unknown>).return_service_charges = [{ uid: 's', total_money: usd(108), total_tax_money: usd(8) }];
    expect(refund(ret)).toMatchObject({ amountCents: 2077 + 100 });
  });

  it('return figures that do not add up are refused', () => {
    expect(validationIssues(() => refund(returnOrder({ return_amounts: { total_money: usd(2264), tax_money: usd(0) } })))).toEqual([
      {
        field: 'return_amounts',
        message: 'do not add up: total − tax − tip = 2264 USD minor units, but the returned lines and service charges (tax excluded) come to 2077 USD minor units; refusing to guess which figure is right',
      },
    ]);
  });

  it('a PaymentRefund alone states only the money given back (tax and tip included): the core measures it against the ledger', () => {
    const paymentRefund = { id: 'PR-1', status: 'COMPLETED', amount_money: usd(1000), order_id: 'ORDER-1' };
    for (const body of [paymentRefund, { refund: paymentRefund }]) {
      expect(refund(body)).toEqual({ orderId: 'ORDER-1', refundId: 'PR-1', paidBack: { cents: 1000, currency: 'USD', note: 'measured without the return order', unknownOrder: expect.stringContaining('SQUARE_ACCESS_TOKEN') } });
    }
    // Minor units through the currency's exponent: ¥500 is 50000 cents.
    expect(refund({ ...paymentRefund, amount_money: { amount: 500, currency: 'JPY' } }).paidBack).toMatchObject({ cents: 50000, currency: 'JPY' });
  });

  it('a PaymentRefund alone must name its order and give money back', () => {
    const paymentRefund = { id: 'PR-1', status: 'COMPLETED', amount_money: usd(1000), order_id: 'ORDER-1' };
    expect(validationIssues(() => refund({ ...paymentRefund, order_id: undefined }))).toEqual([{ field: 'order_id', message: 'is required: it names the order the refund belongs to' }]);
    expect(validationIssues(() => refund({ refund: { ...paymentRefund, amount_money: usd(0) } }))).toEqual([{ field: 'refund.amount_money.amount', message: 'must be greater than 0, got 0' }]);
    expect(validationIssues(() => refund({ ...paymentRefund, status: 'PENDING' }))[0]!.field).toBe('status');
  });

  it('with the access token, a PaymentRefund alone asks for its order to be read (refundFetch); one with its order or not COMPLETED does not', async () => {
    const paymentRefund = { id: 'PR-1', status: 'COMPLETED', amount_money: usd(1000), order_id: 'RET-1' };
    const needs = squareAdapter.refundFetch!({ refund: paymentRefund })!;
    const paths: string[] = [];
    const fetched = await needs.fetch({ get: async (path) => (paths.push(path), { order: { id: 'RET-1' } }) });
    expect(paths).toEqual(['/v2/orders/RET-1']);
    expect(needs.payload(fetched)).toEqual({ refund: paymentRefund, order: { order: { id: 'RET-1' } } });
    expect(squareAdapter.refundFetch!(paymentRefund)).toBeDefined();
    expect(squareAdapter.refundFetch!({ refund: paymentRefund, order: order() })).toBeUndefined();
    expect(squareAdapter.refundFetch!({ ...paymentRefund, status: 'PENDING' })).toBeUndefined();
    expect(squareAdapter.refundFetch!(returnOrder())).toBeUndefined();
  });

  it('a PaymentRefund of an untaxed, untipped order is exact as it is', () => {
    expect(refund({ refund: { id: 'PR-2', status: 'COMPLETED', amount_money: usd(400), order_id: 'ORDER-1' }, order: order() })).toEqual({ orderId: 'ORDER-1', refundId: 'PR-2', amountCents: 400 });
  });

  it('a PaymentRefund must belong to the order given with it, in its currency, and not exceed it', () => {
    expect(validationIssues(() => refund({ refund: { id: 'PR-3', status: 'COMPLETED', amount_money: usd(400), order_id: 'OTHER' }, order: order() }))).toEqual([
      { field: 'order.id', message: 'is "ORDER-1" but the refund\'s order_id is "OTHER"' },
    ]);
    expect(validationIssues(() => refund({ refund: { id: 'PR-3', status: 'COMPLETED', amount_money: { amount: 400, currency: 'EUR' }, order_id: 'ORDER-1' }, order: order() }))[0]!.field).toBe('refund.amount_money.currency');
    expect(validationIssues(() => refund({ refund: { id: 'PR-3', status: 'COMPLETED', amount_money: usd(1001), order_id: 'ORDER-1' }, order: order() }))[0]!.field).toBe('refund.amount_money.amount');
  });

  it('a sale order posted as a refund is refused: only return orders are refunds', () => {
    expect(validationIssues(() => refund(order()))[0]).toMatchObject({ field: 'returns' });
    expect(validationIssues(() => refund(returnOrder({ state: 'OPEN' })))[0]).toMatchObject({ field: 'state' });
    expect(validationIssues(() => refund(returnOrder({ line_items: [line()] })))[0]).toMatchObject({ field: 'line_items' });
  });
});

describe('Square webhook classification', () => {
  const event = (type: string, object: Record<string, unknown>, eventId = 'EV-1') => ({ merchant_id: 'M', type, event_id: eventId, created_at: '2026-11-21T10:20:00Z', data: { type: type.split('.')[0], id: 'X', object } });

  it('a repeated delivery keeps its dedupe key (event_id); each order version has its own', () => {
    const v3 = event('order.updated', { order_updated: { order_id: 'O-1', state: 'COMPLETED', version: 3 } }, 'EV-3');
    expect(classify(v3)[0]!.key).toBe('EV-3');
    expect(classify(structuredClone(v3))[0]!.key).toBe('EV-3');
    expect(classify(event('order.updated', { order_updated: { order_id: 'O-1', state: 'COMPLETED', version: 4 } }, 'EV-4'))[0]!.key).toBe('EV-4');
  });

  it('an order that is no longer COMPLETED, a return order, or another order than named: decided after the fetch', () => {
    const [action] = classify(event('order.created', { order_created: { order_id: 'ORDER-1' } })) as [Extract<WebhookAction, { kind: 'fetch' }>];
    expect(action.kind).toBe('fetch');
    expect(action.decide({ order: order({ state: 'OPEN' }) })).toEqual({ kind: 'ignored', key: 'EV-1', reason: 'order ORDER-1 is OPEN: only COMPLETED orders accrue' });
    expect(action.decide(order({ returns: [{ source_order_id: 'S' }], line_items: [] }))).toMatchObject({ kind: 'ignored', reason: expect.stringMatching(/is a return order: it is reversed through its PaymentRefund/) });
    expect(validationIssues(() => action.decide({ order: order({ id: 'ORDER-2' }) }))).toEqual([{ field: 'order.id', message: 'is "ORDER-2" but the webhook named order "ORDER-1"' }]);
  });

  it('refunds: REJECTED and FAILED are ignored, unlinked ones too, an unknown status is refused', () => {
    const r = (over: Record<string, unknown>) => event('refund.updated', { refund: { id: 'PR-1', status: 'COMPLETED', amount_money: usd(100), order_id: 'RET-1', ...over } });
    expect(classify(r({ status: 'REJECTED' }))).toEqual([{ kind: 'ignored', key: 'EV-1', reason: 'refund PR-1 is REJECTED: no money went back, nothing to reverse' }]);
    expect(classify(r({ status: 'FAILED' }))[0]).toMatchObject({ kind: 'ignored' });
    expect(classify(r({ order_id: undefined, unlinked: true }))[0]).toMatchObject({ kind: 'ignored', reason: expect.stringMatching(/unlinked/) });
    expect(validationIssues(() => classify(r({ order_id: undefined })))[0]!.field).toBe('data.object.refund.order_id');
    expect(validationIssues(() => classify(r({ status: 'APPROVED' })))[0]!.field).toBe('data.object.refund.status');
  });

  it('unknown event types are acknowledged and ignored; a body that is not a Square event is refused', () => {
    expect(classify(event('customer.created', {}))).toEqual([{ kind: 'ignored', key: 'EV-1', reason: 'customer.created is not a Square event the bridge acts on' }]);
    expect(classify(event('order.fulfillment.updated', {}))[0]).toMatchObject({ kind: 'ignored' });
    expect(validationIssues(() => classify({ type: 'order.updated' }))[0]!.field).toBe('event_id');
    expect(validationIssues(() => classify(event('order.updated', {})))[0]!.field).toBe('data.object.order_updated');
    expect(validationIssues(() => classify([]))[0]!.field).toBe('');
  });
});

describe('Square webhook signature', () => {
  const settings: PosSettings = { webhookSecret: 'sq-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: '' };
  const body = Buffer.from(JSON.stringify(fixture('webhook_order_updated.json')));
  /** The fixture's event was created at 2020-04-16T23:14:26.359Z; verified an hour later unless `now` says otherwise. */
  const created = Date.parse('2020-04-16T23:14:26.359Z');
  const verify = (rawHeaders: string[], s: PosSettings = settings, raw: Buffer = body, now = new Date(created + 3600_000)) =>
    verifySignature(squareAdapter.webhook!.signature, s, raw, Object.fromEntries(rawHeaders.reduce<[string, string][]>((acc, v, i, all) => (i % 2 ? acc : [...acc, [v.toLowerCase(), all[i + 1]!]]), [])), rawHeaders, now);
  const [header, good] = signature(squareAdapter, settings, body);

  it('is base64 HMAC-SHA256 of notification URL + raw body, in x-square-hmacsha256-signature', () => {
    expect(header).toBe('x-square-hmacsha256-signature');
    expect(good).toBe(createHmac('sha256', 'sq-signature-key').update(settings.notificationUrl + body.toString('utf8')).digest('base64'));
    expect(() => verify([header, good])).not.toThrow();
  });

  const cases: [string, { rawHeaders: string[]; s?: PosSettings; raw?: Buffer }][] = [
    ['a wrong signature', { rawHeaders: [header, signature(squareAdapter, { ...settings, webhookSecret: 'other' }, body)[1]] }],
    ['a signature of the body alone (no URL)', { rawHeaders: [header, createHmac('sha256', 'sq-signature-key').update(body).digest('base64')] }],
    ['the right HMAC in hex instead of base64', { rawHeaders: [header, createHmac('sha256', 'sq-signature-key').update(settings.notificationUrl + body.toString('utf8')).digest('hex')] }],
    ['a signature for another notification URL', { rawHeaders: [header, signature(squareAdapter, { ...settings, notificationUrl: 'https://elsewhere.test/hook' }, body)[1]] }],
    ['a missing header', { rawHeaders: [] }],
    ['an empty header', { rawHeaders: [header, ''] }],
    ['a repeated header', { rawHeaders: [header, good, header, good] }],
    ['a changed body', { rawHeaders: [header, good], raw: Buffer.from(body.toString('utf8').replace('OPEN', 'COMPLETED')) }],
    ['no configured notification URL', { rawHeaders: [header, good], s: { ...settings, notificationUrl: undefined } }],
    ['no configured signature key', { rawHeaders: [header, good], s: { ...settings, webhookSecret: undefined } }],
  ];
  it('refuses an event created more than 26 h ago (Square retries for up to 24 h): a replay', () => {
    expect(() => verify([header, good], settings, body, new Date(created + 25 * 3600_000))).not.toThrow();
    expect(() => verify([header, good], settings, body, new Date(created + 27 * 3600_000))).toThrow(/signed 1620 min ago, outside the 1560 min replay window/);
    expect(() => verify([header, good], settings, body, new Date())).toThrow(/replay window/);
  });

  it.each(cases)('refuses %s with 401', (_name, { rawHeaders, s, raw }) => {
    expect(() => verify(rawHeaders, s ?? settings, raw ?? body)).toThrow(UnauthorizedError);
  });
});
