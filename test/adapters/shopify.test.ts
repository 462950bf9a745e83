/**
 * Shopify orders, refunds and webhooks → the neutral intents, exactly: every fixture in
 * test/fixtures/shopify (copies of the shared POS fixtures, origins in test/fixtures/SOURCES.md)
 * and shapes built from Shopify's documented REST objects.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { AdapterContext, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import { UnauthorizedError } from '../../src/kernel/errors.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { signature } from '../support/webhooks.js';
import { validationIssues } from '../support/validation.js';

const context: AdapterContext = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const fixtureText = (name: string) => readFileSync(new URL(`../fixtures/shopify/${name}`, import.meta.url), 'utf8');
const fixture = (name: string) => JSON.parse(fixtureText(name)) as Record<string, any>;

const checkout = (body: unknown, ctx: AdapterContext = context) => shopifyAdapter.parseCheckout(body, ctx);
const refund = (body: unknown) => shopifyAdapter.parseRefund(body, context);

const set = (amount: string, currency = 'USD', presentment?: { amount: string; currency: string }) => ({
  shop_money: { amount, currency_code: currency },
  presentment_money: presentment ? { amount: presentment.amount, currency_code: presentment.currency } : { amount, currency_code: currency },
});

/** A paid web/POS order in the 2024 REST shape: taxes on top, an order discount allocated to a line, shipping. */
function modernOrder(overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    id: 5551234567890,
    admin_graphql_api_id: 'gid://shopify/Order/5551234567890',
    name: '#1042',
    currency: 'USD',
    presentment_currency: 'USD',
    financial_status: 'paid',
    cancelled_at: null,
    created_at: '2026-11-21T10:00:00-05:00',
    processed_at: '2026-11-21T10:20:00-05:00',
    updated_at: '2026-11-21T10:20:05-05:00',
    email: 'ann@example.com',
    contact_email: 'ann@example.com',
    phone: '+15550001111',
    customer: { id: 7001, email: 'ann@example.com', phone: '+15550001111', first_name: 'Ann', last_name: 'Lee' },
    taxes_included: false,
    line_items: [
      {
        id: 1001,
        variant_id: 2001,
        product_id: 3001,
        sku: 'LATTE-L',
        title: 'Latte',
        name: 'Latte - Large',
        quantity: 3,
        price: '4.50',
        price_set: set('4.50'),
        total_discount: '0.00',
        discount_allocations: [{ amount: '1.50', amount_set: set('1.50'), discount_application_index: 0 }],
        tax_lines: [{ title: 'Sales tax', rate: 0.08, price: '0.96', price_set: set('0.96') }],
      },
      {
        id: 1002,
        variant_id: 2002,
        product_id: 3002,
        sku: 'MUG',
        title: 'Mug',
        name: 'Mug',
        quantity: 1,
        price: '12.00',
        price_set: set('12.00'),
        total_discount: '0.00',
        discount_allocations: [],
        tax_lines: [{ title: 'Sales tax', rate: 0.08, price: '0.96', price_set: set('0.96') }],
      },
    ],
    shipping_lines: [{ title: 'Standard', price: '5.00', price_set: set('5.00'), discounted_price: '5.00', discounted_price_set: set('5.00'), discount_allocations: [], tax_lines: [] }],
    total_line_items_price: '25.50',
    total_discounts: '1.50',
    total_discounts_set: set('1.50'),
    subtotal_price: '24.00',
    subtotal_price_set: set('24.00'),
    total_tax: '1.92',
    total_tax_set: set('1.92'),
    total_tip_received: '0.00',
    total_price: '30.92',
    total_price_set: set('30.92'),
    ...overrides,
  };
}

/**
 * `modernOrder()`'s Check amount in cents, worked out from its lines: three lattes at 4.50 less the
 * 1.50 discount allocated to them, and one mug at 12.00. Tax (1.92) and shipping (5.00) are not
 * goods sold, so neither is in it: 1350 − 150 + 1200 = 2400, its subtotal_price.
 */
const MODERN_AMOUNT = 3 * 450 - 150 + 1 * 1200;

/** What `modernOrder()` must become. */
const modernSelections = [
  { id: '2001', groupId: '3001', displayName: 'Latte - Large', quantity: 3, price: 450, totalPrice: 1200 },
  { id: '2002', groupId: '3002', displayName: 'Mug', quantity: 1, price: 1200, totalPrice: 1200 },
];

/** Refund of one of the three discounted lattes: Shopify's subtotal is the discounted unit, tax on top. */
function modernRefund(overrides: Record<string, unknown> = {}): Record<string, any> {
  const order = modernOrder();
  return {
    id: 8801,
    order_id: 5551234567890,
    created_at: '2026-11-22T09:00:00-05:00',
    restock: true,
    refund_line_items: [
      { id: 9901, line_item_id: 1001, quantity: 1, restock_type: 'return', subtotal: 4.0, subtotal_set: set('4.00'), total_tax: 0.32, total_tax_set: set('0.32'), line_item: order.line_items[0] },
    ],
    transactions: [{ id: 7701, order_id: 5551234567890, amount: '4.32', kind: 'refund', status: 'success', currency: 'USD', gateway: 'shopify_payments' }],
    order_adjustments: [],
    ...overrides,
  };
}

describe('fixtures', () => {
  it('order_fixture_shopify_python_api (2016 shape) is refused: its three lines add up to 597.00 but its subtotal_price says 398.00', () => {
    expect(validationIssues(() => checkout(fixture('order_fixture_shopify_python_api.json')))).toEqual([
      { field: 'order.subtotal_price', message: 'is 398.00, but the line items after their discount allocations add up to 597.00: the bridge cannot tell which is the amount sold' },
    ]);
  });

  it('order_fixture_shopify_python_api with its subtotal made consistent translates exactly (no *_set fields, no phone on the order or customer)', () => {
    const body = fixture('order_fixture_shopify_python_api.json');
    body.order.subtotal_price = '597.00';
    // The fixture is `authorized` (not captured): an order accrues once paid.
    body.order.financial_status = 'paid';
    const intent = checkout(body);
    expect(intent).toEqual({
      orderId: '450789469',
      customer: { email: 'bob.norman@hostmail.com', firstName: 'Bob', lastName: 'Norman' },
      check: {
        amount: 59700,
        currency: 'USD',
        externalTransactionId: '450789469',
        checkOpenedAt: '2008-01-10T11:00:00-05:00',
        taxAmount: 1194,
        selections: [
          { id: '39072856', groupId: '632910392', displayName: 'IPod Nano - 8gb - green', quantity: 1, price: 19900, totalPrice: 19900 },
          { id: '49148385', groupId: '632910392', displayName: 'IPod Nano - 8gb - red', quantity: 1, price: 19900, totalPrice: 19900 },
          { id: '457924702', groupId: '632910392', displayName: 'IPod Nano - 8gb - black', quantity: 1, price: 19900, totalPrice: 19900 },
        ],
      },
    });
    expect(intent).not.toHaveProperty('scope');
    expect(deriveTransactionId('shopify', intent.orderId, intent.scope)).toBe('shopify:450789469');
  });

  it('refund_fixture_shopify_python_api (2016 shape) is refused: 209.00 refunded is neither the lines with tax on top nor with tax inside', () => {
    expect(validationIssues(() => refund(fixture('refund_fixture_shopify_python_api.json')))).toEqual([
      {
        field: 'refund.transactions',
        message:
          'return 209.00 USD, which matches neither the refunded lines with their tax on top (405.96) nor with the tax inside their subtotal (398.00): whether refund_line_items[].subtotal includes tax is not stated in a refund, so the bridge will not guess',
      },
    ]);
  });

  it('refund_fixture_shopify_python_api with consistent money: subtotal and tax worked out from the embedded whole lines, keyed like the order fixture\'s selections', () => {
    const onTop = fixture('refund_fixture_shopify_python_api.json');
    onTop.refund.transactions[0].amount = '405.96';
    expect(refund(onTop)).toEqual({
      orderId: '450789469',
      refundId: '509562969',
      amountCents: 39800,
      items: [
        { id: '457924702', quantity: 1, totalCents: 19900 },
        { id: '39072856', quantity: 1, totalCents: 19900 },
      ],
    });
    // Had the shop included tax in its prices, 398.00 would have been refunded: the tax comes out.
    const inside = fixture('refund_fixture_shopify_python_api.json');
    inside.refund.transactions[0].amount = '398.00';
    expect(refund(inside).items).toEqual([
      { id: '457924702', quantity: 1, totalCents: 19502 },
      { id: '39072856', quantity: 1, totalCents: 19502 },
    ]);
  });

  it('refunds_create_pos_partial_CAD: 4 units at 143.97 after the 15.99 discount, tax 17.28 on top of it (161.25 refunded)', () => {
    expect(refund(fixture('refunds_create_pos_partial_CAD.json'))).toEqual({
      orderId: '6022498320664',
      refundId: '975224602904',
      amountCents: 14397,
      items: [{ id: '24199708868672', quantity: 4, totalCents: 14397 }],
    });
  });

  it('refunds_create_pos_partial_CAD as a refunds/create webhook is a refund action keyed by the event id', () => {
    const body = fixture('refunds_create_pos_partial_CAD.json');
    expect(shopifyAdapter.webhook!.classify(body, { 'x-shopify-topic': 'refunds/create', 'x-shopify-event-id': '3c1f6e0a-8b1d-4a7e-9a55-0f5e3c2b1a00' })).toEqual([
      { kind: 'refund', key: 'event:3c1f6e0a-8b1d-4a7e-9a55-0f5e3c2b1a00', uniqueAcrossAccounts: true, payload: body },
    ]);
  });

  it('order_fixture_shopify_python_api as an orders/paid webhook is a checkout action (the wrapper is accepted)', () => {
    const body = fixture('order_fixture_shopify_python_api.json');
    expect(shopifyAdapter.webhook!.classify(body, { 'x-shopify-topic': 'orders/paid', 'x-shopify-webhook-id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043' })).toEqual([
      { kind: 'checkout', key: 'webhook:b54557e4-bdd9-4b37-8a5f-bf7d70bcd043', uniqueAcrossAccounts: true, payload: body },
    ]);
  });
});

describe('checkout: Check.amount = subtotal after discounts, tax, tip and shipping excluded', () => {
  it('translates a modern order exactly: discounts allocated to lines, tax on top, shipping left out', () => {
    expect(checkout(modernOrder())).toEqual({
      orderId: '5551234567890',
      customer: { phone: '+15550001111', email: 'ann@example.com', firstName: 'Ann', lastName: 'Lee' },
      check: {
        amount: 2400,
        currency: 'USD',
        externalTransactionId: '5551234567890',
        checkOpenedAt: '2026-11-21T10:00:00-05:00',
        checkClosedAt: '2026-11-21T10:20:00-05:00',
        taxAmount: 192,
        discountAmount: 150,
        selections: modernSelections,
      },
    });
  });

  it('the API wrapper { order } gives the same intent, and its errors name order.<field>', () => {
    expect(checkout({ order: modernOrder() })).toEqual(checkout(modernOrder()));
    expect(validationIssues(() => checkout({ order: modernOrder({ subtotal_price: '24.01', subtotal_price_set: undefined }) }))[0]!.field).toBe('order.subtotal_price');
    expect(validationIssues(() => checkout(modernOrder({ subtotal_price: '24.01', subtotal_price_set: undefined })))[0]!.field).toBe('subtotal_price');
  });

  it('shipping never counts: a dearer shipping line leaves the amount as it is', () => {
    const order = modernOrder({ shipping_lines: [{ title: 'Express', price: '25.00', discounted_price: '25.00', tax_lines: [{ price: '2.00' }] }], total_tax: '3.92', total_tax_set: undefined, total_price: '52.92', total_price_set: undefined });
    expect(checkout(order).check).toMatchObject({ amount: 2400, taxAmount: 392 });
  });

  it('zero-decimal currency: ¥1,500 × 2 is 300000 (the decimal amount × 100), whether Shopify writes "1500" or "1500.00"', () => {
    for (const [unit, subtotal, tax] of [
      ['1500', '3000', '300'],
      ['1500.00', '3000.00', '300.00'],
    ] as const) {
      const order = modernOrder({
        currency: 'JPY',
        line_items: [{ id: 1, variant_id: 11, product_id: 21, name: 'Matcha', quantity: 2, price: unit, discount_allocations: [], tax_lines: [{ price: tax }] }],
        shipping_lines: [],
        subtotal_price: subtotal,
        subtotal_price_set: set(subtotal, 'JPY'),
        total_tax: tax,
        total_tax_set: set(tax, 'JPY'),
        total_price: undefined,
        total_price_set: undefined,
      });
      expect(checkout(order).check).toMatchObject({
        amount: 300000,
        currency: 'JPY',
        taxAmount: 30000,
        selections: [{ id: '11', groupId: '21', displayName: 'Matcha', quantity: 2, price: 150000, totalPrice: 300000 }],
      });
    }
  });

  it('real Shopify float text "130.64999999999998" is 13065 cents, rounded once, and agrees with its *_set "130.65"', () => {
    const order = modernOrder({
      line_items: [{ id: 1, variant_id: 11, name: 'Jacket', quantity: 1, price: '130.64999999999998', price_set: set('130.65'), discount_allocations: [], tax_lines: [] }],
      subtotal_price: '130.64999999999998',
      subtotal_price_set: set('130.65'),
      total_tax: '0.00',
      total_tax_set: set('0.00'),
    });
    expect(checkout(order).check).toMatchObject({ amount: 13065, selections: [{ id: '11', quantity: 1, price: 13065, totalPrice: 13065 }] });
    expect(checkout(order).check).not.toHaveProperty('taxAmount');
  });

  it('refund line subtotals given as JSON numbers are read through their decimal text (143.97 is 14397, not 14396.999…)', () => {
    const body = fixture('refunds_create_pos_partial_CAD.json');
    expect(typeof body.refund_line_items[0].subtotal).toBe('number');
    expect(refund(body).items![0]!.totalCents).toBe(14397);
  });

  it('fractional quantities do not exist in Shopify: one is refused, naming the line', () => {
    const order = modernOrder();
    order.line_items[0].quantity = 1.5;
    expect(validationIssues(() => checkout(order))).toEqual([{ field: 'line_items.0.quantity', message: 'must be a whole number of units (Shopify quantities are integers), got 1.5' }]);
  });

  it('a line with quantity 0 (removed) is left out and adds nothing', () => {
    const order = modernOrder();
    order.line_items.push({ id: 1009, variant_id: 2009, name: 'Removed', quantity: 0, price: '9.99', discount_allocations: [], tax_lines: [] });
    expect(checkout(order).check).toMatchObject({ amount: 2400, selections: modernSelections });
  });

  it('a line discount lowers that line\'s totalPrice, keeps its unit price, and is the discountAmount', () => {
    const order = modernOrder();
    order.line_items[1].discount_allocations = [{ amount: '2.00', amount_set: set('2.00') }];
    order.line_items[1].tax_lines = [{ price: '0.80' }];
    Object.assign(order, { subtotal_price: '22.00', subtotal_price_set: set('22.00'), total_tax: '1.76', total_tax_set: set('1.76') });
    expect(checkout(order).check).toMatchObject({
      amount: 2200,
      discountAmount: 350,
      selections: [modernSelections[0], { id: '2002', quantity: 1, price: 1200, totalPrice: 1000 }],
    });
  });

  it('taxes included in prices (EU): the tax inside each line comes out; unit prices, which contain tax, are left out', () => {
    const eur = (amount: string) => set(amount, 'EUR');
    const order = modernOrder({
      currency: 'EUR',
      taxes_included: true,
      line_items: [
        { id: 1, variant_id: 11, product_id: 21, name: 'Tee', quantity: 2, price: '11.90', price_set: eur('11.90'), discount_allocations: [], tax_lines: [{ title: 'MwSt', rate: 0.19, price: '3.80', price_set: eur('3.80') }] },
        { id: 2, variant_id: 12, product_id: 22, name: 'Hoodie', quantity: 1, price: '59.50', price_set: eur('59.50'), discount_allocations: [{ amount: '11.90', amount_set: eur('11.90') }], tax_lines: [{ title: 'MwSt', rate: 0.19, price: '7.60', price_set: eur('7.60') }] },
      ],
      shipping_lines: [{ title: 'DHL', price: '5.95', price_set: eur('5.95'), discounted_price: '5.95', tax_lines: [{ price: '0.95', price_set: eur('0.95') }] }],
      subtotal_price: '71.40',
      subtotal_price_set: eur('71.40'),
      total_tax: '12.35',
      total_tax_set: eur('12.35'),
      total_price: '77.35',
      total_price_set: eur('77.35'),
    });
    expect(checkout(order).check).toEqual({
      amount: 6000,
      currency: 'EUR',
      externalTransactionId: '5551234567890',
      checkOpenedAt: '2026-11-21T10:00:00-05:00',
      checkClosedAt: '2026-11-21T10:20:00-05:00',
      taxAmount: 1235,
      discountAmount: 1190,
      selections: [
        { id: '11', groupId: '21', displayName: 'Tee', quantity: 2, totalPrice: 2000 },
        { id: '12', groupId: '22', displayName: 'Hoodie', quantity: 1, totalPrice: 4000 },
      ],
    });
    // Tax lines that do not add up to total_tax leave the tax inside the lines unknown: refused.
    expect(validationIssues(() => checkout({ ...order, total_tax: '12.00', total_tax_set: eur('12.00') }))).toEqual([
      {
        field: 'total_tax',
        message:
          'is 12.00, but the tax lines of the line items (11.40) and shipping lines (0.95) add up to 12.35: with taxes included in prices the tax inside each line must be known exactly to take it out',
      },
    ]);
  });

  it('taxes_included missing while total_tax is not zero is refused (tax on top and tax inside give different amounts)', () => {
    expect(validationIssues(() => checkout(modernOrder({ taxes_included: undefined })))).toEqual([
      { field: 'taxes_included', message: 'is required when total_tax is not zero: without it the tax cannot be told apart from the prices' },
    ]);
  });

  it('a tip outside the subtotal is tipAmount and not part of the amount', () => {
    const check = checkout(modernOrder({ total_tip_received: '5.00', total_price: '35.92', total_price_set: set('35.92') })).check;
    expect(check).toMatchObject({ amount: 2400, tipAmount: 500, totalTipReceived: '5.00', taxAmount: 192 });
  });

  it('a tip that total_price does not show outside the subtotal (e.g. a tip line item) is refused, not accrued', () => {
    const order = modernOrder({ total_tip_received: '5.00', subtotal_price: '29.00', subtotal_price_set: set('29.00'), total_price: '35.92', total_price_set: set('35.92') });
    order.line_items.push({ id: 1003, variant_id: null, product_id: null, title: 'Tip', name: 'Tip', quantity: 1, price: '5.00', discount_allocations: [], tax_lines: [] });
    expect(validationIssues(() => checkout(order))).toEqual([
      {
        field: 'total_tip_received',
        message: 'is 5.00, but total_price 35.92 is not subtotal + shipping + tax + duties + fees + tip (40.92): the tip may be inside subtotal_price, so the amount without it is not known',
      },
    ]);
  });

  it('Shopify has no service charges: no serviceAmount; additional fees and duties are outside the subtotal and not accrued', () => {
    const check = checkout(
      modernOrder({ total_tip_received: '5.00', original_total_additional_fees_set: set('2.00'), original_total_duties_set: set('3.00'), total_price: '40.92', total_price_set: set('40.92') }),
    ).check;
    expect(check).toMatchObject({ amount: 2400, tipAmount: 500 });
    expect(check).not.toHaveProperty('serviceAmount');
  });

  it('money is the shop currency: a different presentment currency is not used', () => {
    const order = modernOrder({ presentment_currency: 'CAD', subtotal_price_set: set('24.00', 'USD', { amount: '32.40', currency: 'CAD' }) });
    expect(checkout(order).check).toMatchObject({ amount: 2400, currency: 'USD' });
  });

  it('an amount and its *_set twin that disagree, or a *_set in another shop currency, are refused', () => {
    expect(validationIssues(() => checkout(modernOrder({ subtotal_price_set: set('24.01') })))).toEqual([
      { field: 'subtotal_price_set.shop_money.amount', message: 'says 24.01 but subtotal_price says 24.00: the two shop-currency amounts must agree' },
    ]);
    expect(validationIssues(() => checkout(modernOrder({ subtotal_price_set: set('24.00', 'CAD') })))).toEqual([
      { field: 'subtotal_price_set.shop_money.currency_code', message: "is CAD, but the order's currency is USD" },
    ]);
  });

  it('currency comes from the payload; without one, DEFAULT_CURRENCY', () => {
    const order = modernOrder({ currency: undefined, subtotal_price_set: undefined, total_tax_set: undefined, total_price_set: undefined });
    for (const line of order.line_items) {
      delete line.price_set;
      for (const a of line.discount_allocations) delete a.amount_set;
      for (const t of line.tax_lines) delete t.price_set;
    }
    expect(checkout(order, { ...context, defaultCurrency: 'GBP' }).check.currency).toBe('GBP');
    expect(validationIssues(() => checkout(modernOrder({ currency: 'usd' })))).toEqual([{ field: 'currency', message: 'must be an ISO 4217 currency code in capitals such as "USD", got "usd"' }]);
  });

  it('order ids: a JSON number beyond 2^53 − 1 is refused (already changed by JSON parsing); the same id as text is exact', () => {
    // Shopify's "send test notification" order id; as a JS number it is already 820982911946154500.
    expect(validationIssues(() => checkout(modernOrder({ id: 820982911946154508 })))).toEqual([
      { field: 'id', message: '820982911946154500 is above 2^53 − 1: as a JSON number it cannot be read exactly' },
    ]);
    expect(checkout(modernOrder({ id: '820982911946154508' })).orderId).toBe('820982911946154508');
  });

  it('refuses a cancelled order, a missing subtotal and a negative price, naming the field', () => {
    expect(validationIssues(() => checkout(modernOrder({ cancelled_at: '2026-11-21T11:00:00-05:00' })))).toEqual([
      { field: 'cancelled_at', message: 'the order was cancelled: there is nothing to accrue' },
    ]);
    expect(validationIssues(() => checkout(modernOrder({ subtotal_price: null, subtotal_price_set: null })))).toEqual([{ field: 'subtotal_price', message: 'is required' }]);
    const negative = modernOrder();
    negative.line_items[1].price = '-12.00';
    expect(validationIssues(() => checkout(negative))).toEqual([{ field: 'line_items.1.price', message: 'must not be negative, got "-12.00"' }]);
    expect(validationIssues(() => checkout({ id: 1 })).map((i) => i.field)).toEqual(['line_items']);
  });
});

describe('checkout: only a paid order accrues (financial_status)', () => {
  it.each(['pending', 'authorized', 'partially_paid', 'voided', 'expired'])('%s is refused, naming financial_status', (status) => {
    expect(validationIssues(() => checkout(modernOrder({ financial_status: status })))).toEqual([
      { field: 'financial_status', message: `is "${status}": the order is not paid, so nothing accrues until it is (paid, partially_refunded, refunded)` },
    ]);
  });

  it.each(['paid', 'partially_refunded', 'refunded'])('%s accrues (a refunded order was paid; its refunds are their own)', (status) => {
    // The whole order, not what is left of it after refunds: those are reversed on their own.
    expect(checkout(modernOrder({ financial_status: status })).check).toMatchObject({ amount: MODERN_AMOUNT, selections: modernSelections });
  });

  it('an order without the field (posted directly, built by hand) is read as before', () => {
    const { financial_status: _status, ...order } = modernOrder();
    expect(checkout(order).check).toMatchObject({ amount: MODERN_AMOUNT, selections: modernSelections });
  });
});

describe('checkout: customer', () => {
  it('the order\'s own phone and email come first, then the customer\'s; names from the customer', () => {
    const order = modernOrder({ phone: '', email: null, contact_email: null, customer: { id: 7001, email: 'Ann.Lee@Example.com', phone: '+15550003333', first_name: ' Ann ', last_name: 'Lee' } });
    expect(checkout(order).customer).toEqual({ phone: '+15550003333', email: 'ann.lee@example.com', firstName: 'Ann', lastName: 'Lee' });
    expect(checkout(modernOrder({ email: null, contact_email: 'buyer@example.com' })).customer.email).toBe('buyer@example.com');
  });

  it('national numbers become E.164 in DEFAULT_PHONE_REGION', () => {
    expect(checkout(modernOrder({ phone: '(555) 000-2222' })).customer.phone).toBe('+15550002222');
    expect(checkout(modernOrder({ phone: '030 1234567' }), { ...context, defaultPhoneRegion: 'DE' }).customer.phone).toBe('+49301234567');
  });

  it('without phone or email there is no contact (the core records the checkout as skipped); address phones are not used', () => {
    const order = modernOrder({ phone: null, email: null, contact_email: null, customer: { id: 7001, first_name: 'Ann', last_name: null }, billing_address: { phone: '555-625-1199' } });
    const intent = checkout(order);
    expect(intent.customer).toEqual({ firstName: 'Ann' });
    expect(intent).not.toHaveProperty('customerRef');
  });

  it('a contact detail that is not one is refused, naming where it came from', () => {
    expect(validationIssues(() => checkout(modernOrder({ phone: '12' })))).toEqual([{ field: 'phone', message: 'is not a phone number that can be written in E.164' }]);
    expect(validationIssues(() => checkout(modernOrder({ email: null, contact_email: null, customer: { email: 'not-an-email' } })))).toEqual([
      { field: 'customer.email', message: 'is not an email address' },
    ]);
  });
});

describe('refund: itemized, measured like Check.amount (tax excluded)', () => {
  it('one of three discounted lattes: its discounted subtotal, keyed by the variant like the checkout selection', () => {
    expect(refund(modernRefund())).toEqual({ orderId: '5551234567890', refundId: '8801', amountCents: 400, items: [{ id: '2001', quantity: 1, totalCents: 400 }] });
    expect(refund({ refund: modernRefund() })).toEqual(refund(modernRefund()));
  });

  it('shipping refunded alongside (a negative shipping_refund adjustment) is not part of the measure', () => {
    const r = modernRefund({ order_adjustments: [{ id: 1, kind: 'shipping_refund', amount: '-5.00', amount_set: set('-5.00'), tax_amount: '-0.00', tax_amount_set: set('-0.00') }] });
    r.transactions[0].amount = '9.32';
    expect(refund(r).items).toEqual([{ id: '2001', quantity: 1, totalCents: 400 }]);
  });

  it('a refund of less money than calculated (a refund_discrepancy) still takes the items off', () => {
    const r = modernRefund({ order_adjustments: [{ id: 1, kind: 'refund_discrepancy', amount: '0.32', tax_amount: '0.00' }] });
    r.transactions[0].amount = '4.00';
    expect(refund(r).items).toEqual([{ id: '2001', quantity: 1, totalCents: 400 }]);
  });

  it('taxes-included shop: the money refunded shows the subtotal contains the tax, which comes out', () => {
    const eur = (amount: string) => set(amount, 'EUR');
    const line = { id: 1, variant_id: 11, quantity: 2, price: '11.90', discount_allocations: [], tax_lines: [{ price: '3.80' }] };
    const r = modernRefund({
      refund_line_items: [{ line_item_id: 1, quantity: 1, subtotal: 11.9, subtotal_set: eur('11.90'), total_tax: 1.9, total_tax_set: eur('1.90'), line_item: line }],
      transactions: [{ amount: '11.90', kind: 'refund', status: 'success', currency: 'EUR' }],
    });
    expect(refund(r).items).toEqual([{ id: '11', quantity: 1, totalCents: 1000 }]);
    r.transactions[0].amount = '7.77';
    expect(validationIssues(() => refund(r))).toEqual([
      {
        field: 'transactions',
        message:
          'return 7.77 EUR, which matches neither the refunded lines with their tax on top (13.80) nor with the tax inside their subtotal (11.90): whether refund_line_items[].subtotal includes tax is not stated in a refund, so the bridge will not guess',
      },
    ]);
  });

  it('untaxed lines need no check: the subtotal is the measure whatever the money did', () => {
    const r = modernRefund({ transactions: [] });
    r.refund_line_items[0].total_tax = 0;
    r.refund_line_items[0].total_tax_set = set('0.00');
    expect(refund(r).items).toEqual([{ id: '2001', quantity: 1, totalCents: 400 }]);
  });

  it('money refunded in the buyer\'s currency is compared in that currency; the measure stays in the shop\'s', () => {
    const r = modernRefund({ transactions: [{ amount: '5.83', kind: 'refund', status: 'success', currency: 'CAD' }, { amount: '5.83', kind: 'refund', status: 'failure', currency: 'CAD' }] });
    r.refund_line_items[0].subtotal_set = set('4.00', 'USD', { amount: '5.40', currency: 'CAD' });
    r.refund_line_items[0].total_tax_set = set('0.32', 'USD', { amount: '0.43', currency: 'CAD' });
    expect(refund(r).items).toEqual([{ id: '2001', quantity: 1, totalCents: 400 }]);
  });

  it('a custom line without a variant is keyed line:<line item id> on both sides', () => {
    const order = modernOrder();
    order.line_items[1].variant_id = null;
    order.line_items[1].product_id = null;
    expect(checkout(order).check.selections[1]).toEqual({ id: 'line:1002', displayName: 'Mug', quantity: 1, price: 1200, totalPrice: 1200 });
    const r = modernRefund({ refund_line_items: [{ line_item_id: 1002, quantity: 1, subtotal: '12.00', total_tax: '0.96', line_item: order.line_items[1] }], transactions: [{ amount: '12.96', kind: 'refund', status: 'success' }] });
    expect(refund(r).items).toEqual([{ id: 'line:1002', quantity: 1, totalCents: 1200 }]);
  });

  it('a refund of no items is refused by parseRefund with the reason (the webhook acknowledges the harmless ones)', () => {
    const shippingOnly = modernRefund({ refund_line_items: [], order_adjustments: [{ kind: 'shipping_refund', amount: '-5.00', tax_amount: '-0.00' }], transactions: [{ amount: '5.00', kind: 'refund', status: 'success', currency: 'USD' }] });
    expect(validationIssues(() => refund(shippingOnly))).toEqual([
      { field: 'refund_line_items', message: 'the refund returns only shipping, which is not part of the accrued amount: nothing to reverse' },
    ]);
    const amountOnly = modernRefund({ refund_line_items: [], order_adjustments: [{ kind: 'refund_discrepancy', amount: '-10.00', tax_amount: '0.00' }], transactions: [{ amount: '10.00', kind: 'refund', status: 'success', currency: 'USD' }] });
    expect(validationIssues(() => refund(amountOnly))).toEqual([
      {
        field: 'refund_line_items',
        message: 'names no refunded items but returns 10.00 USD that is not only shipping: an amount-only refund cannot be measured without its tax; reverse this order by hand',
      },
    ]);
  });

  it('refuses refund lines it cannot key or measure, naming the field', () => {
    const noLine = modernRefund();
    delete noLine.refund_line_items[0].line_item;
    expect(validationIssues(() => refund(noLine))).toEqual([
      { field: 'refund_line_items.0.line_item', message: 'is required: its variant_id names the selection the refunded units were accrued under' },
    ]);
    const tooMany = modernRefund();
    tooMany.refund_line_items[0].quantity = 4;
    expect(validationIssues(() => refund(tooMany))).toEqual([{ field: 'refund_line_items.0.quantity', message: 'refunds 4 units of a line that sold 3' }]);
    const partOfDiscounted = modernRefund();
    delete partOfDiscounted.refund_line_items[0].subtotal;
    delete partOfDiscounted.refund_line_items[0].subtotal_set;
    expect(validationIssues(() => refund(partOfDiscounted))).toEqual([
      { field: 'refund_line_items.0.subtotal', message: 'is required when part of a discounted line is refunded: how Shopify split the discount is not in the payload' },
    ]);
  });
});

describe('webhooks', () => {
  const settings: PosSettings = { webhookSecret: 'shpss_0123456789abcdef', apiBaseUrl: '' };
  const scheme = shopifyAdapter.webhook!.signature;
  const raw = Buffer.from(JSON.stringify(modernOrder()));
  const classify = (body: unknown, headers: IncomingHttpHeaders): WebhookAction[] => shopifyAdapter.webhook!.classify(body, headers);
  const verify = (rawHeaders: string[], bytes: Buffer = raw) =>
    verifySignature(scheme, settings, bytes, Object.fromEntries(rawHeaders.flatMap((v, i) => (i % 2 === 0 ? [[v.toLowerCase(), rawHeaders[i + 1]]] : []))), rawHeaders);

  it('is described as data: base64 HMAC-SHA256 of the raw body in X-Shopify-Hmac-Sha256', () => {
    expect(scheme).toMatchObject({ kind: 'hmac', header: 'x-shopify-hmac-sha256', algorithm: 'sha256', encodings: ['base64'] });
    const [name, value] = signature(shopifyAdapter, settings, raw);
    expect(name).toBe('x-shopify-hmac-sha256');
    expect(value).toBe(createHmac('sha256', settings.webhookSecret!).update(raw).digest('base64'));
  });

  it('accepts the test signer\'s signature and refuses a wrong, missing, empty or repeated one', () => {
    const [, good] = signature(shopifyAdapter, settings, raw);
    expect(() => verify(['X-Shopify-Hmac-Sha256', good, 'X-Shopify-Topic', 'orders/paid'])).not.toThrow();
    const [, other] = signature(shopifyAdapter, { ...settings, webhookSecret: 'another-secret' }, raw);
    expect(() => verify(['X-Shopify-Hmac-Sha256', other])).toThrow(UnauthorizedError);
    expect(() => verify(['X-Shopify-Hmac-Sha256', good], Buffer.from(raw.toString('utf8').replace('24.00', '24.01')))).toThrow(UnauthorizedError);
    expect(() => verify(['X-Shopify-Hmac-Sha256', createHmac('sha256', settings.webhookSecret!).update(raw).digest('hex')])).toThrow(UnauthorizedError);
    expect(() => verify(['X-Shopify-Topic', 'orders/paid'])).toThrow(/missing, empty or repeated/);
    expect(() => verify(['X-Shopify-Hmac-Sha256', ''])).toThrow(/missing, empty or repeated/);
    expect(() => verify(['X-Shopify-Hmac-Sha256', good, 'x-shopify-hmac-sha256', good])).toThrow(/missing, empty or repeated/);
  });

  it('orders/paid is a checkout keyed by X-Shopify-Event-Id; a repeated delivery has the same key', () => {
    const headers = { 'x-shopify-topic': 'orders/paid', 'x-shopify-event-id': 'e-1', 'x-shopify-webhook-id': 'w-1' };
    const first = classify(modernOrder(), headers);
    expect(first).toEqual([{ kind: 'checkout', key: 'event:e-1', uniqueAcrossAccounts: true, payload: modernOrder() }]);
    expect(classify(modernOrder(), { ...headers, 'x-shopify-triggered-at': 'later' })[0]!.key).toBe(first[0]!.key);
  });

  it('without X-Shopify-Event-Id the key is X-Shopify-Webhook-Id, else the topic and the object\'s id', () => {
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/paid', 'x-shopify-webhook-id': 'w-1' })[0]!.key).toBe('webhook:w-1');
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/paid' })[0]!.key).toBe('orders/paid:5551234567890');
    expect(classify(modernRefund(), { 'x-shopify-topic': 'refunds/create' })[0]).toMatchObject({ kind: 'refund', key: 'refunds/create:8801' });
  });

  it("keys from Shopify's event and webhook ids are unique across shops; a key built from the topic and object id is the shop's own", () => {
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/paid', 'x-shopify-event-id': 'e-1' })[0]!.uniqueAcrossAccounts).toBe(true);
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/paid', 'x-shopify-webhook-id': 'w-1' })[0]!.uniqueAcrossAccounts).toBe(true);
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/paid' })[0]!.uniqueAcrossAccounts).toBeUndefined();
    expect(classify(modernRefund(), { 'x-shopify-topic': 'refunds/create' })[0]!.uniqueAcrossAccounts).toBeUndefined();
  });

  it('orders/create acts only when already paid', () => {
    expect(classify(modernOrder(), { 'x-shopify-topic': 'orders/create', 'x-shopify-event-id': 'e-2' })).toEqual([{ kind: 'checkout', key: 'event:e-2', uniqueAcrossAccounts: true, payload: modernOrder() }]);
    expect(classify(modernOrder({ financial_status: 'pending' }), { 'x-shopify-topic': 'orders/create', 'x-shopify-event-id': 'e-3' })).toEqual([
      { kind: 'ignored', key: 'event:e-3', uniqueAcrossAccounts: true, reason: 'orders/create with financial_status "pending": accrued when orders/paid arrives' },
    ]);
  });

  it('a refund of nothing or of shipping only is acknowledged and ignored; an amount-only refund goes on (to be refused loudly)', () => {
    const headers = { 'x-shopify-topic': 'refunds/create', 'x-shopify-event-id': 'e-4' };
    const shippingOnly = modernRefund({ refund_line_items: [], order_adjustments: [{ kind: 'shipping_refund', amount: '-5.00', tax_amount: '-0.40' }], transactions: [{ amount: '5.40', kind: 'refund', status: 'success' }] });
    expect(classify(shippingOnly, headers)).toEqual([{ kind: 'ignored', key: 'event:e-4', uniqueAcrossAccounts: true, reason: 'the refund returns only shipping, which is not part of the accrued amount: nothing to reverse' }]);
    expect(classify(modernRefund({ refund_line_items: [], transactions: [] }), headers)).toEqual([
      { kind: 'ignored', key: 'event:e-4', uniqueAcrossAccounts: true, reason: 'the refund returns no items and no money: nothing to reverse' },
    ]);
    const amountOnly = modernRefund({ refund_line_items: [], transactions: [{ amount: '10.00', kind: 'refund', status: 'success' }] });
    expect(classify(amountOnly, headers)).toEqual([{ kind: 'refund', key: 'event:e-4', uniqueAcrossAccounts: true, payload: amountOnly }]);
  });

  it('other topics are acknowledged and ignored, with the reason', () => {
    const reasons = (topic: string) => classify(modernOrder(), { 'x-shopify-topic': topic, 'x-shopify-event-id': 'e-5' });
    expect(reasons('orders/cancelled')).toEqual([{ kind: 'ignored', key: 'event:e-5', uniqueAcrossAccounts: true, reason: 'a cancellation itself changes nothing: money given back arrives as refunds/create' }]);
    expect(reasons('orders/updated')[0]).toMatchObject({ kind: 'ignored', reason: 'orders/updated: the accrual is the order as paid (orders/paid); later changes are not re-accrued, refunds arrive as refunds/create' });
    expect(reasons('orders/fulfilled')[0]).toMatchObject({ kind: 'ignored', reason: 'orders/fulfilled: fulfilment does not change what was paid' });
    expect(reasons('products/update')).toEqual([{ kind: 'ignored', key: 'event:e-5', uniqueAcrossAccounts: true, reason: 'topic products/update is not one the bridge acts on' }]);
  });

  it('an authentic delivery without one readable topic or event id is refused (it becomes a dead letter)', () => {
    expect(validationIssues(() => classify(modernOrder(), {}))).toEqual([{ field: 'x-shopify-topic', message: 'is missing: without the topic the delivery cannot be understood' }]);
    expect(validationIssues(() => classify(modernOrder(), { 'x-shopify-topic': 'orders/paid, orders/paid' }))).toEqual([{ field: 'x-shopify-topic', message: 'is not one topic: "orders/paid, orders/paid"' }]);
    expect(validationIssues(() => classify(modernOrder(), { 'x-shopify-topic': 'orders/paid', 'x-shopify-event-id': 'e-1, e-1' }))).toEqual([
      { field: 'x-shopify-event-id', message: 'is not one event id (repeated, or not an id): "e-1, e-1"' },
    ]);
  });
});

describe('checkout: an order already refunded or edited (current_*; docs/pos-systems.md, Shopify)', () => {
  // 3 × 4.50 less 0.50 (tax 0.68) and 1 × 2.99 (tax 0.25): 15.99 after discounts, 0.93 tax, 1.00 tip.
  const fields = (issues: { field: string }[]) => issues.map((i) => i.field);

  it('partly refunded (one latte, 4.33): the sale is what was paid, 1599; the refund comes as a refund of 433; the current figure 1166 rides along for reconcile', () => {
    const order = fixture('orders_paid_partially_refunded_current.json');
    expect(order).toMatchObject({ financial_status: 'partially_refunded', subtotal_price: '15.99', current_subtotal_price: '11.66', total_price: '17.92', current_total_price: '13.36' });
    const intent = checkout(order);
    expect(intent.check).toMatchObject({ amount: 1599, taxAmount: 93, discountAmount: 50, tipAmount: 100 });
    expect(intent.check.selections.map((s) => [s.id, s.quantity, s.totalPrice])).toEqual([
      ['44300000001', 3, 1300],
      ['44300000002', 1, 299],
    ]);
    expect((intent as { currentAmountCents?: number }).currentAmountCents).toBe(1166);
    expect(refund(order.refunds[0]).amountCents).toBe(433);
    // current_total_price = total_price − refunded (4.33 + 0.23 tax): 17.92 − 4.56 = 13.36.
    expect(1792 - 456).toBe(1336);
  });

  it('edited before payment (the muffin removed, no refund): the sale is the edited order, 1300, tax 0.68', () => {
    const order = fixture('orders_paid_edited_before_payment.json');
    expect(order).toMatchObject({ financial_status: 'paid', refunds: [], subtotal_price: '15.99', current_subtotal_price: '13.00', current_total_price: '14.68', current_total_tax: '0.68' });
    expect(order.line_items.map((l: { quantity: number; current_quantity: number }) => [l.quantity, l.current_quantity])).toEqual([
      [3, 3],
      [1, 0],
    ]);
    const intent = checkout(order);
    expect(intent.check).toMatchObject({ amount: 1300, taxAmount: 68, discountAmount: 50, tipAmount: 100 });
    expect(intent.check.selections.map((s) => [s.id, s.quantity, s.totalPrice])).toEqual([['44300000001', 3, 1300]]);
    expect((intent as { currentAmountCents?: number }).currentAmountCents).toBe(1300);
  });

  it('edited and refunded: the edit is the sale (1300), the refund of one latte stays a refund (433)', () => {
    const order = fixture('orders_paid_edited_before_payment.json');
    const partly = fixture('orders_paid_partially_refunded_current.json');
    // The latte refund of the other fixture, on this order: its line ids are this order's.
    const r = structuredClone(partly.refunds[0]);
    r.refund_line_items[0].line_item_id = order.line_items[0].id;
    r.refund_line_items[0].line_item = { ...order.line_items[0] };
    const both: Record<string, any> = { ...order, financial_status: 'partially_refunded', refunds: [r], current_subtotal_price: '8.67', current_subtotal_price_set: set('8.67'), current_total_tax: '0.45', current_total_tax_set: set('0.45') };
    both.line_items = [{ ...order.line_items[0], current_quantity: 2 }, order.line_items[1]];
    const intent = checkout(both);
    expect(intent.check).toMatchObject({ amount: 1300, taxAmount: 68 });
    expect((intent as { currentAmountCents?: number }).currentAmountCents).toBe(867);
  });

  it('refused rather than guessed: a changed order without its refunds, an edit that added, refunds above the difference, a discounted line cut in part', () => {
    const edited = fixture('orders_paid_edited_before_payment.json');
    const { refunds: _dropped, ...noRefunds } = edited;
    expect(fields(validationIssues(() => checkout(noRefunds)))).toEqual(['refunds']);
    expect(fields(validationIssues(() => checkout({ ...edited, current_subtotal_price: '16.99', current_subtotal_price_set: set('16.99') })))).toEqual(['current_subtotal_price']);
    const partly = fixture('orders_paid_partially_refunded_current.json');
    expect(fields(validationIssues(() => checkout({ ...partly, current_subtotal_price: '12.66', current_subtotal_price_set: set('12.66') })))).toEqual(['refunds']);
    // One latte removed by an edit (no refund): how the 0.50 discount was split is not in the payload.
    const cut = { ...edited, current_subtotal_price: '11.66', current_subtotal_price_set: set('11.66'), line_items: [{ ...edited.line_items[0], current_quantity: 2 }, { ...edited.line_items[1], current_quantity: 1 }] };
    expect(fields(validationIssues(() => checkout(cut)))).toEqual(['line_items.0.current_quantity']);
    // The current figure and the lines disagree.
    const wrong = { ...edited, current_subtotal_price: '13.01', current_subtotal_price_set: set('13.01') };
    expect(fields(validationIssues(() => checkout(wrong)))).toEqual(['current_subtotal_price']);
    // Wrapped as the REST API answers it, the path names the wrapper.
    expect(fields(validationIssues(() => checkout({ order: noRefunds })))).toEqual(['order.refunds']);
  });

  it('an undiscounted line cut in part by an edit: 1 of 2 muffins kept, 15.99 + 2.99 sold, 15.99 kept', () => {
    const edited = fixture('orders_paid_edited_before_payment.json');
    const muffins = { ...edited.line_items[1], quantity: 2, current_quantity: 1 };
    const order = { ...edited, subtotal_price: '18.98', subtotal_price_set: set('18.98'), total_line_items_price: '19.48', current_subtotal_price: '15.99', current_subtotal_price_set: set('15.99'), total_price: '20.91', total_price_set: set('20.91'), line_items: [edited.line_items[0], muffins] };
    const intent = checkout(order);
    expect(intent.check.amount).toBe(1599);
    expect(intent.check.selections.map((s) => [s.id, s.quantity, s.totalPrice])).toEqual([
      ['44300000001', 3, 1300],
      ['44300000002', 1, 299],
    ]);
  });
});
