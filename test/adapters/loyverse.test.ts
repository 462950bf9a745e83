/**
 * Loyverse receipts → the neutral Check and refund intents, exactly (bridge-contract "Translation
 * rules"; pos-facts "Loyverse"). The real test event is translated as it is; the other receipts are
 * built from Loyverse's documented receipt shape.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { loyverseAdapter } from '../../adapters/loyverse/index.js';
import type { PosApi, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import { UnauthorizedError, ValidationError } from '../../src/kernel/errors.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { signature } from '../support/webhooks.js';
import { validationIssues } from '../support/validation.js';

const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const STORE = '5b1d4c1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e';
const FIXTURE_STORE = 'c3930770-950c-4f48-aa43-174e021f59ba';

const fixtureText = readFileSync(new URL('../fixtures/loyverse/receipts_update_webhook_pipedream_test_event.json', import.meta.url), 'utf8');
const fixture = () => JSON.parse(fixtureText) as { receipts: Record<string, unknown>[] } & Record<string, unknown>;

type Json = Record<string, unknown>;

function latte(overrides: Json = {}): Json {
  return {
    id: 'line-1',
    item_id: 'item-latte',
    variant_id: 'var-latte-l',
    item_name: 'Latte',
    variant_name: 'Large',
    sku: '1001',
    quantity: 2,
    price: 4.5,
    gross_total_money: 9,
    total_money: 8.1,
    cost: 1,
    cost_total: 2,
    line_note: null,
    total_discount: 0.9,
    line_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 0.81 }],
    line_discounts: [{ id: 'disc-1', type: 'FIXED_PERCENT', name: '10% off', percentage: 10, money_amount: 0.9 }],
    line_modifiers: [],
    ...overrides,
  };
}

function cake(overrides: Json = {}): Json {
  return {
    id: 'line-2',
    item_id: 'item-cake',
    variant_id: 'var-cake',
    item_name: 'Cake',
    variant_name: null,
    sku: '1002',
    quantity: 1,
    price: 3.25,
    gross_total_money: 3.25,
    total_money: 3.25,
    total_discount: 0,
    line_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 0.33 }],
    line_discounts: [],
    line_modifiers: [],
    ...overrides,
  };
}

/**
 * Lines 8.10 + 3.25 = 11.35 after discounts, ADDED tax 0.81 + 0.33 = 1.14, surcharge 1.00, tip 2.00:
 * the customer pays 15.49. Check.amount = 11.35 + 1.00 = 12.35.
 */
function sale(overrides: Json = {}): Json {
  return {
    receipt_number: '1-1001',
    note: null,
    receipt_type: 'SALE',
    refund_for: null,
    order: null,
    created_at: '2026-11-21T10:20:00.000Z',
    updated_at: '2026-11-21T10:20:00.000Z',
    source: 'point of sale',
    receipt_date: '2026-11-21T10:19:58.000Z',
    cancelled_at: null,
    total_money: 15.49,
    total_tax: 1.14,
    points_earned: 0,
    points_deducted: 0,
    points_balance: 0,
    customer_id: 'cust-1',
    total_discount: 0.9,
    employee_id: null,
    store_id: STORE,
    pos_device_id: 'pos-1',
    dining_option: null,
    total_discounts: [],
    total_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 1.14 }],
    tip: 2,
    surcharge: 1,
    line_items: [latte(), cake()],
    payments: [{ payment_type_id: 'pt-1', name: 'Card', type: 'NONINTEGRATEDCARD', money_amount: 15.49, paid_at: '2026-11-21T10:19:58.000Z', payment_details: null }],
    ...overrides,
  };
}

/** One of the two lattes returned: 4.05 after its share of the discount, 0.41 added tax. */
function refund(overrides: Json = {}): Json {
  return {
    ...sale(),
    receipt_number: '1-1003',
    receipt_type: 'REFUND',
    refund_for: '1-1001',
    created_at: '2026-11-21T11:00:00.000Z',
    updated_at: '2026-11-21T11:00:00.000Z',
    receipt_date: '2026-11-21T11:00:00.000Z',
    total_money: 4.46,
    total_tax: 0.41,
    total_discount: 0.45,
    tip: 0,
    surcharge: 0,
    total_taxes: [{ id: 'tax-1', type: 'ADDED', name: 'Sales tax', rate: 10, money_amount: 0.41 }],
    line_items: [latte({ id: 'line-9', quantity: 1, gross_total_money: 4.5, total_money: 4.05, total_discount: 0.45, line_taxes: [{ id: 'tax-1', type: 'ADDED', rate: 10, money_amount: 0.41 }] })],
    payments: [],
    ...overrides,
  };
}

const fields = (run: () => unknown) => validationIssues(run).map((i) => i.field);
const classify = (body: unknown): WebhookAction[] => loyverseAdapter.webhook!.classify(body, {});
const checkout = (body: unknown, ctx = context) => loyverseAdapter.parseCheckout(body, ctx);

describe('the real receipts.update test event (fixture)', () => {
  it('is one checkout action keyed by store, receipt number and updated_at', () => {
    const actions = classify(fixture());
    expect(actions).toEqual([
      { kind: 'checkout', key: `receipt:${FIXTURE_STORE}:1001@2024-03-23T20:18:53.000Z:checkout`, payload: fixture().receipts[0] },
    ]);
  });

  it('translates to a zero-amount checkout with no customer (so the core records it as skipped)', () => {
    const [action] = classify(fixture());
    const intent = checkout((action as { payload: unknown }).payload);
    expect(intent).toEqual({
      orderId: '1001',
      scope: FIXTURE_STORE,
      customer: {},
      check: {
        amount: 0,
        currency: 'USD',
        externalTransactionId: '1001',
        checkClosedAt: '2024-03-23T20:18:53.000Z',
        orderUpdatedAt: '2024-03-23T20:18:53.000Z',
        selections: [
          { id: '9de08ad3-8d6d-4b31-9b3e-fb2951803417', groupId: 'e90d11be-b087-4899-853d-a88546212450', displayName: 'name 2', quantity: 1, price: 0, totalPrice: 0 },
        ],
      },
    });
    expect(intent).not.toHaveProperty('customerRef');
    // Receipt numbers repeat across stores: the store is part of the transaction's identity.
    expect(deriveTransactionId('loyverse', intent.orderId, intent.scope)).toBe(`loyverse:${FIXTURE_STORE}:1001`);
  });

  it('the whole delivery posted as a payload is the same checkout (the { receipts: [one] } wrapper)', () => {
    expect(checkout(fixture())).toEqual(checkout(fixture().receipts[0]));
  });

  it('is not a refund', () => {
    expect(validationIssues(() => loyverseAdapter.parseRefund(fixture().receipts[0], context))).toEqual([
      { field: 'receipt_type', message: 'is SALE: only REFUND receipts, and SALE receipts with cancelled_at set, are refunds' },
    ]);
  });
});

describe('SALE receipt → checkout', () => {
  it('amount = lines after discounts + surcharge, tax and tip excluded; every part in cents', () => {
    const intent = checkout(sale());
    expect(intent).toEqual({
      orderId: '1-1001',
      scope: STORE,
      customer: {},
      customerRef: 'cust-1',
      check: {
        amount: 1235,
        currency: 'USD',
        externalTransactionId: '1-1001',
        checkClosedAt: '2026-11-21T10:19:58.000Z',
        orderUpdatedAt: '2026-11-21T10:20:00.000Z',
        taxAmount: 114,
        discountAmount: 90,
        tipAmount: 200,
        serviceAmount: 100,
        selections: [
          { id: 'var-latte-l', groupId: 'item-latte', displayName: 'Latte (Large)', quantity: 2, price: 450, totalPrice: 810 },
          { id: 'var-cake', groupId: 'item-cake', displayName: 'Cake', quantity: 1, price: 325, totalPrice: 325 },
        ],
      },
    });
  });

  it('gives the same amount whether total_money counts the tip or not (that fact is unconfirmed)', () => {
    expect(checkout(sale({ total_money: 13.49 })).check).toMatchObject({ amount: 1235, tipAmount: 200 });
  });

  it('INCLUDED tax is inside the prices: taken out of the amount and the line, and no tax-inclusive unit price is sent', () => {
    const vat = sale({
      total_money: 12,
      total_tax: 2,
      total_discount: 0,
      tip: 0,
      surcharge: 0,
      line_items: [cake({ quantity: 1, price: 12, gross_total_money: 12, total_money: 12, line_taxes: [{ id: 'vat', type: 'INCLUDED', name: 'VAT', rate: 20, money_amount: 2 }] })],
    });
    const { check } = checkout(vat);
    expect(check).toMatchObject({ amount: 1000, taxAmount: 200 });
    expect(check).not.toHaveProperty('tipAmount');
    expect(check).not.toHaveProperty('discountAmount');
    expect(check).not.toHaveProperty('serviceAmount');
    expect(check.selections).toEqual([{ id: 'var-cake', groupId: 'item-cake', displayName: 'Cake', quantity: 1, totalPrice: 1000 }]);
  });

  it('INCLUDED and ADDED taxes on one receipt', () => {
    const mixed = sale({
      total_money: 11.33, // lines 11.00 (the 1.00 included tax is inside) + 0.33 added tax
      total_tax: 1.33,
      total_discount: 0,
      tip: 0,
      surcharge: 0,
      line_items: [cake({ total_money: 3.25 }), latte({ quantity: 1, price: 7.75, gross_total_money: 7.75, total_money: 7.75, total_discount: 0, line_taxes: [{ type: 'INCLUDED', money_amount: 1 }] })],
    });
    expect(checkout(mixed).check).toMatchObject({ amount: 1000, taxAmount: 133, selections: [{ totalPrice: 325, price: 325 }, { totalPrice: 675, quantity: 1 }] });
  });

  it('zero-decimal currencies: ¥1500 is 150000 cents ("Japan has no decimals")', () => {
    const yen = sale({
      total_money: 1500,
      total_tax: 0,
      total_discount: 0,
      tip: 0,
      surcharge: 0,
      line_items: [cake({ quantity: 3, price: 500, gross_total_money: 1500, total_money: 1500, line_taxes: [] })],
    });
    expect(checkout(yen, { ...context, defaultCurrency: 'JPY' }).check).toMatchObject({
      amount: 150000,
      currency: 'JPY',
      selections: [{ id: 'var-cake', quantity: 3, price: 50000, totalPrice: 150000 }],
    });
  });

  it('a fractional quantity (weighed goods) becomes quantity 1 at the exact line total', () => {
    const weighed = sale({
      total_money: 9.81,
      total_tax: 0,
      total_discount: 0,
      tip: 0,
      surcharge: 0,
      line_items: [cake({ item_name: 'Cheese', quantity: 0.755, price: 12.99, gross_total_money: 9.81, total_money: 9.81, line_taxes: [] })],
    });
    expect(checkout(weighed).check.selections).toEqual([{ id: 'var-cake', groupId: 'item-cake', displayName: 'Cheese', quantity: 1, price: 981, totalPrice: 981 }]);
  });

  it('reads JSON numbers as decimals, never float arithmetic (0.1 + 0.2 is 30 cents)', () => {
    const tiny = sale({
      total_money: 0.3,
      total_tax: 0,
      total_discount: 0,
      tip: 0,
      surcharge: 0,
      line_items: [cake({ quantity: 1, price: 0.1, total_money: 0.1, line_taxes: [] }), cake({ id: 'l2', quantity: 1, price: 0.2, total_money: 0.2, line_taxes: [] })],
    });
    expect(checkout(tiny).check.amount).toBe(30);
  });

  it('three-decimal amounts round once, half away from zero', () => {
    const kwd = sale({ total_money: 1.235, total_tax: 0, total_discount: 0, tip: 0, surcharge: 0, line_items: [cake({ price: 1.235, total_money: 1.235, line_taxes: [] })] });
    expect(checkout(kwd, { ...context, defaultCurrency: 'KWD' }).check).toMatchObject({ amount: 124, selections: [{ price: 124, totalPrice: 124 }] });
  });

  it('a receipt without customer_id has no customerRef', () => {
    expect(checkout(sale({ customer_id: null }))).not.toHaveProperty('customerRef');
  });

  it('refuses totals that do not add up (e.g. a receipt discount missing from the line totals) rather than guess', () => {
    const issues = validationIssues(() => checkout(sale({ total_discount: 1.9, total_money: 14.49 })));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.field).toBe('total_money');
    expect(issues[0]!.message).toContain('= 12.35');
  });

  it('refuses a surcharge that is already inside the line totals', () => {
    expect(fields(() => checkout(sale({ total_money: 14.49 })))).toEqual(['total_money']);
  });

  it('refuses a non-zero tax whose type does not say whether the price contains it', () => {
    const untyped = sale({ line_items: [latte({ line_taxes: [{ id: 'tax-1', money_amount: 0.81 }] }), cake()] });
    expect(validationIssues(() => checkout(untyped))).toEqual([
      { field: 'line_items.0.line_taxes.0.type', message: 'must be "INCLUDED" or "ADDED" for a non-zero tax, got null: the bridge must know whether the price contains it' },
    ]);
  });

  it('refuses negative money and bad fields in a sale, naming each field', () => {
    expect(fields(() => checkout(sale({ line_items: [latte({ total_money: -8.1 }), cake()] })))).toEqual(['line_items.0.total_money']);
    expect(fields(() => checkout(sale({ store_id: undefined, receipt_type: 'VOID', total_money: 'ten' }))).sort()).toEqual(['receipt_type', 'store_id', 'total_money']);
    expect(fields(() => checkout(sale({ line_items: [latte({ quantity: 0 })], total_money: 2.1 })))).toEqual(['line_items.0.quantity']);
  });

  it('refuses refund receipts and cancelled sales', () => {
    expect(fields(() => checkout(refund()))).toEqual(['receipt_type']);
    expect(fields(() => checkout(sale({ cancelled_at: '2026-11-21T12:00:00.000Z' })))).toEqual(['cancelled_at']);
  });

  it('accepts the { receipts: [one] } wrapper and names fields inside it; refuses a batch', () => {
    expect(checkout({ receipts: [sale()] })).toEqual(checkout(sale()));
    expect(fields(() => checkout({ receipts: [sale({ tip: -1 })] }))).toEqual(['receipts.0.tip']);
    expect(fields(() => checkout({ receipts: [sale(), sale({ receipt_number: '1-1002' })] }))).toEqual(['receipts']);
  });
});

describe('REFUND receipt → refund', () => {
  it('a partial refund is measured like Check.amount (tax and tip excluded) and names its lines', () => {
    expect(loyverseAdapter.parseRefund(refund(), context)).toEqual({
      orderId: '1-1001',
      scope: STORE,
      refundId: '1-1003',
      amountCents: 405,
      items: [{ id: 'var-latte-l', quantity: 1, totalCents: 405 }],
    });
  });

  it('reads a refund written with negative numbers the same way', () => {
    const negative = refund({
      total_money: -4.46,
      total_tax: -0.41,
      total_discount: -0.45,
      line_items: [latte({ id: 'line-9', quantity: -1, price: 4.5, gross_total_money: -4.5, total_money: -4.05, total_discount: -0.45, line_taxes: [{ type: 'ADDED', money_amount: -0.41 }] })],
    });
    expect(loyverseAdapter.parseRefund(negative, context)).toEqual(loyverseAdapter.parseRefund(refund(), context));
  });

  it('a refund of everything is the same measure (the core reverses in full when it covers all that remains)', () => {
    const all = refund({ total_money: 15.49, total_tax: 1.14, total_discount: 0.9, tip: 2, surcharge: 1, line_items: [latte(), cake()] });
    expect(loyverseAdapter.parseRefund(all, context)).toEqual({
      orderId: '1-1001',
      scope: STORE,
      refundId: '1-1003',
      amountCents: 1235,
      items: [
        { id: 'var-latte-l', quantity: 2, totalCents: 810 },
        { id: 'var-cake', quantity: 1, totalCents: 325 },
      ],
    });
  });

  it('lines that cannot be matched by item (a weighed part) make it an amount-only refund', () => {
    const weighed = refund({ total_money: 2.6, total_tax: 0, total_discount: 0, line_items: [cake({ quantity: 0.2, price: 12.99, total_money: 2.6, line_taxes: [] })] });
    expect(loyverseAdapter.parseRefund(weighed, context)).toEqual({ orderId: '1-1001', scope: STORE, refundId: '1-1003', amountCents: 260 });
  });

  it('a cancelled SALE reverses the whole sale', () => {
    expect(loyverseAdapter.parseRefund(sale({ cancelled_at: '2026-11-21T12:00:00.000Z' }), context)).toEqual({
      orderId: '1-1001',
      scope: STORE,
      refundId: 'cancelled:1-1001',
    });
  });

  it('refuses a refund that names no original, and a cancelled refund', () => {
    expect(validationIssues(() => loyverseAdapter.parseRefund(refund({ refund_for: null }), context))).toEqual([
      { field: 'refund_for', message: 'is required: a refund receipt must name the receipt it refunds' },
    ]);
    expect(fields(() => loyverseAdapter.parseRefund(refund({ cancelled_at: '2026-11-21T12:00:00.000Z' }), context))).toEqual(['cancelled_at']);
  });

  it('refuses refund totals that do not add up', () => {
    expect(fields(() => loyverseAdapter.parseRefund(refund({ total_money: 5 }), context))).toEqual(['total_money']);
  });
});

describe('webhook classification', () => {
  const envelope = (receipts: unknown[], type = 'receipts.update') => ({ merchant_id: 'merchant-1', type, created_at: '2026-11-21T11:00:01.000Z', receipts });

  it('one action per receipt: sales first, then refunds and cancellations; a cancelled refund is ignored with its reason', () => {
    const cancelledSale = sale({ receipt_number: '1-1002', cancelled_at: '2026-11-21T12:00:00.000Z', updated_at: '2026-11-21T12:00:00.000Z' });
    const cancelledRefund = refund({ receipt_number: '1-1004', cancelled_at: '2026-11-21T12:00:00.000Z' });
    const actions = classify(envelope([refund(), cancelledRefund, sale(), cancelledSale]));
    expect(actions.map((a) => [a.kind, a.key])).toEqual([
      ['checkout', `receipt:${STORE}:1-1001@2026-11-21T10:20:00.000Z:checkout`],
      ['refund', `receipt:${STORE}:1-1003@2026-11-21T11:00:00.000Z:refund`],
      ['refund', `receipt:${STORE}:1-1002@2026-11-21T12:00:00.000Z:refund`],
      ['ignored', `receipt:${STORE}:1-1004@2026-11-21T11:00:00.000Z:ignored`],
    ]);
    expect(actions[3]).toMatchObject({ reason: expect.stringContaining('refund receipt 1-1004 was cancelled') });
    expect((actions[1] as { payload: unknown }).payload).toEqual(refund());
  });

  it('a repeated delivery gives the same keys; a new version or a cancellation gives new ones', () => {
    const body = envelope([sale()]);
    expect(classify(body).map((a) => a.key)).toEqual(classify(JSON.parse(JSON.stringify(body))).map((a) => a.key));
    const [first] = classify(body);
    const [updated] = classify(envelope([sale({ updated_at: '2026-11-21T10:25:00.000Z' })]));
    // Even if cancelling did not move updated_at, the cancellation is not a repeat of the sale.
    const [cancelled] = classify(envelope([sale({ cancelled_at: '2026-11-21T12:00:00.000Z' })]));
    expect(new Set([first!.key, updated!.key, cancelled!.key]).size).toBe(3);
    // Another store's receipt 1-1001 is another receipt.
    expect(classify(envelope([sale({ store_id: 'other-store' })]))[0]!.key).not.toBe(first!.key);
  });

  it('a receipt that cannot be translated goes last, so it holds back none of the others', () => {
    const bad = sale({ receipt_number: '1-0999', total_money: 99 });
    const actions = classify(envelope([bad, sale(), refund()]));
    expect(actions.map((a) => a.key.split(':')[2])).toEqual(['1-1001@2026-11-21T10', '1-1003@2026-11-21T11', '1-0999@2026-11-21T10']);
    expect(() => checkout((actions[2] as { payload: unknown }).payload)).toThrow(ValidationError);
  });

  it('other event types are acknowledged and ignored', () => {
    for (const type of ['customers.update', 'items.update', 'inventory_levels.update', 'shifts.create']) {
      expect(classify({ merchant_id: 'm', type, created_at: 't', customers: [{ id: 'c' }] })).toEqual([
        { kind: 'ignored', key: `event:m:${type}@t`, reason: `${type} carries no sale or refund` },
      ]);
    }
    expect(classify({ merchant_id: 'm', type: 'receipts.delete', created_at: 't' })).toEqual([
      { kind: 'ignored', key: 'event:m:receipts.delete@t', reason: 'event type "receipts.delete" is not one the bridge acts on' },
    ]);
    expect(classify(envelope([]))).toEqual([{ kind: 'ignored', key: 'event:merchant-1:receipts.update@2026-11-21T11:00:01.000Z', reason: 'receipts.update without receipts' }]);
  });

  it('refuses a delivery it cannot route, naming the field', () => {
    expect(fields(() => classify({ merchant_id: 'm', receipts: [] }))).toEqual(['type']);
    expect(fields(() => classify({ type: 'receipts.update', receipts: {} }))).toEqual(['receipts']);
    expect(fields(() => classify(envelope([sale({ receipt_type: 'VOID' })])))).toEqual(['receipts.0.receipt_type']);
    expect(fields(() => classify(envelope([sale(), sale({ store_id: '' })])))).toEqual(['receipts.1.store_id']);
  });
});

describe('X-Loyverse-Signature (HMAC-SHA1 of the raw body)', () => {
  const settings: PosSettings = { webhookSecret: 'lv-webhook-secret', apiBaseUrl: '' };
  const body = Buffer.from(fixtureText, 'utf8');
  const verify = (rawHeaders: string[], raw = body, s = settings) => {
    const headers: IncomingHttpHeaders = {};
    for (let i = 0; i < rawHeaders.length; i += 2) headers[rawHeaders[i]!.toLowerCase()] = rawHeaders[i + 1];
    verifySignature(loyverseAdapter.webhook!.signature, s, raw, headers, rawHeaders);
  };

  it('the test signer signs like Loyverse: base64 of HMAC-SHA1 over the exact bytes', () => {
    const expected = createHmac('sha1', settings.webhookSecret!).update(body).digest('base64');
    expect(signature(loyverseAdapter, settings, body)).toEqual(['X-Loyverse-Signature', expected]);
  });

  it('accepts the HMAC in base64 or in hex (which one Loyverse sends is unconfirmed)', () => {
    expect(() => verify([...signature(loyverseAdapter, settings, body)])).not.toThrow();
    expect(() => verify([...signature(loyverseAdapter, settings, body, {}, 'hex')])).not.toThrow();
    expect(() => verify(['x-loyverse-signature', signature(loyverseAdapter, settings, body, {}, 'hex')[1].toUpperCase()])).toThrow(UnauthorizedError);
  });

  it('rejects a wrong signature, another secret, or a changed body', () => {
    expect(() => verify(['X-Loyverse-Signature', 'bm90IHRoZSBzaWduYXR1cmU='])).toThrow('webhook signature does not match');
    expect(() => verify([...signature(loyverseAdapter, { ...settings, webhookSecret: 'other' }, body)])).toThrow(UnauthorizedError);
    const changed = Buffer.from(fixtureText.replace('"total_money": 0', '"total_money": 1'), 'utf8');
    expect(() => verify([...signature(loyverseAdapter, settings, body)], changed)).toThrow(UnauthorizedError);
  });

  it('rejects a missing, empty or repeated signature header', () => {
    const good = signature(loyverseAdapter, settings, body);
    expect(() => verify([])).toThrow('X-Loyverse-Signature is missing, empty or repeated');
    expect(() => verify(['X-Loyverse-Signature', ''])).toThrow('X-Loyverse-Signature is missing, empty or repeated');
    expect(() => verify([...good, ...good])).toThrow('X-Loyverse-Signature is missing, empty or repeated');
  });

  it('refuses everything when no secret is configured', () => {
    expect(() => verify([...signature(loyverseAdapter, settings, body)], body, { apiBaseUrl: '' })).toThrow('not configured');
  });
});

describe('fetchCustomer: customer_id → GET /v1.0/customers/{id}', () => {
  const api = (answer: unknown) => {
    const paths: string[] = [];
    const posApi: PosApi = {
      async get(path) {
        paths.push(path);
        return answer;
      },
    };
    return { posApi, paths };
  };
  const customer = (overrides: Json = {}) => ({
    id: 'cust-1',
    name: 'Ann Marie Lee',
    email: 'Ann@Example.TEST',
    phone_number: '(212) 555-0123',
    customer_code: '11-123456-1',
    total_points: 10,
    ...overrides,
  });

  it('reads phone (E.164 in DEFAULT_PHONE_REGION), email, a card-serial-shaped customer_code and the name', async () => {
    const { posApi, paths } = api(customer());
    expect(await loyverseAdapter.fetchCustomer!('cust/1', posApi, context)).toEqual({
      phone: '+12125550123',
      email: 'ann@example.test',
      serialNumber: '11-123456-1',
      firstName: 'Ann',
      lastName: 'Marie Lee',
    });
    expect(paths).toEqual(['/v1.0/customers/cust%2F1']);
  });

  it('a customer_code that is not a card serial is not sent as one; a { customer } wrapper is accepted', async () => {
    const { posApi } = api({ customer: customer({ customer_code: 'VIP-GOLD', phone_number: null, name: 'Ann' }) });
    expect(await loyverseAdapter.fetchCustomer!('cust-1', posApi, context)).toEqual({ email: 'ann@example.test', firstName: 'Ann' });
  });

  it('an unreadable phone is dropped when an email remains, and refused when nothing else does', async () => {
    expect(await loyverseAdapter.fetchCustomer!('cust-1', api(customer({ phone_number: '12', customer_code: null })).posApi, context)).toEqual({
      email: 'ann@example.test',
      firstName: 'Ann',
      lastName: 'Marie Lee',
    });
    await expect(loyverseAdapter.fetchCustomer!('cust-1', api(customer({ phone_number: '12', email: null, customer_code: null })).posApi, context)).rejects.toMatchObject({
      issues: [{ field: 'customer.phone', message: 'is not a phone number that can be written in E.164' }],
    });
  });
});
