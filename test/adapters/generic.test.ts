/** The generic payload → the neutral Check, exactly (bridge-contract "The generic payload", "Translation rules"). */
import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { genericAdapter } from '../../adapters/generic/index.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { checkout } from '../support/harness.js';
import { validationIssues } from '../support/validation.js';

const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const parse = (overrides: Record<string, unknown>) => genericAdapter.parseCheckout(checkout(overrides), context);

describe('generic checkout', () => {
  it('translates the contract example exactly', () => {
    const intent = parse({});
    expect(intent.orderId).toBe('A-1001');
    expect(intent.customer).toEqual({ phone: '+15550001111', email: 'a@b.test', firstName: 'Ann', lastName: 'Lee' });
    expect(intent.check).toMatchObject({ amount: 5997, currency: 'USD', taxAmount: 480, tipAmount: 500 });
    expect(intent.check).not.toHaveProperty('discountAmount');
    expect(intent.check).not.toHaveProperty('serviceAmount');
  });

  it('reads JSON numbers through their decimal text, never float arithmetic', () => {
    expect(parse({ total: 19.99, items: [] }).check.amount).toBe(1999);
    expect(parse({ total: 0.29, items: [] }).check.amount).toBe(29);
    expect(parse({ total: '130.64999999999998', items: [] }).check.amount).toBe(13065);
  });

  it('carries discount and service charge as non-negative cents', () => {
    expect(parse({ discount: '2.50', serviceCharge: 3 }).check).toMatchObject({ discountAmount: 250, serviceAmount: 300 });
  });

  it('zero-decimal currencies are still cents: ¥500 is 50000', () => {
    expect(parse({ currency: 'JPY', total: '500', tax: '0', tip: '0', items: [{ id: 'r', quantity: 1, total: 500 }] }).check).toMatchObject({ amount: 50000, currency: 'JPY', selections: [{ totalPrice: 50000, quantity: 1 }] });
  });

  it('a fractional quantity becomes quantity 1 at the exact line total', () => {
    const { selections } = parse({ items: [{ id: 'apples', name: 'Apples', quantity: '1.70000', unitPrice: '2.99' }] }).check;
    // 1.7 × 2.99 = 5.083 → 508 cents, rounded once, half away from zero.
    expect(selections).toEqual([{ id: 'apples', displayName: 'Apples', quantity: 1, price: 508, totalPrice: 508 }]);
  });

  it('a whole quantity keeps the unit price; a missing line total is unit price × quantity', () => {
    expect(parse({ items: [{ id: 'a', quantity: '3.000', unitPrice: '1.10' }] }).check.selections).toEqual([{ id: 'a', quantity: 3, price: 110, totalPrice: 330 }]);
  });

  it('national phone numbers become E.164 in DEFAULT_PHONE_REGION; blanks count as absent', () => {
    expect(parse({ customer: { phone: '(555) 000-1111', email: ' ' } }).customer).toEqual({ phone: '+15550001111' });
    expect(genericAdapter.parseCheckout(checkout({ customer: { phone: '030 1234567' } }), { ...context, defaultPhoneRegion: 'DE' }).customer.phone).toBe('+49301234567');
  });

  it("a payload without a currency takes the merchant's (DEFAULT_CURRENCY for the default merchant); one that names it keeps its own", () => {
    const { currency: _currency, ...noCurrency } = checkout() as Record<string, unknown>;
    expect(genericAdapter.parseCheckout(noCurrency, { ...context, defaultCurrency: 'CAD' }).check.currency).toBe('CAD');
    expect(genericAdapter.parseCheckout(checkout({ currency: 'EUR' }), { ...context, defaultCurrency: 'CAD' }).check.currency).toBe('EUR');
  });

  it('throws ValidationError naming each bad field', () => {
    const issues = validationIssues(() => parse({ total: '-1', currency: 'US', items: [{ quantity: 0, total: 'x' }] }));
    expect(issues.map((i) => i.field).sort()).toEqual(['currency', 'items.0.quantity', 'items.0.total', 'total']);
  });
});

describe('generic refund', () => {
  it('a full refund needs only the order id', () => {
    expect(genericAdapter.parseRefund({ orderId: 'A-1001' }, context)).toEqual({ orderId: 'A-1001' });
  });

  it('a partial refund carries its cents and lines', () => {
    expect(genericAdapter.parseRefund({ orderId: 'A-1001', refundId: 'R-1', amount: '19.99', items: [{ id: 'sku-1', quantity: 1, total: 19.99 }] }, context)).toEqual({
      orderId: 'A-1001',
      refundId: 'R-1',
      amountCents: 1999,
      items: [{ id: 'sku-1', quantity: 1, totalCents: 1999 }],
    });
  });
});

describe('transaction ids', () => {
  it('are derived from the POS ids only, readable when plain', () => {
    expect(deriveTransactionId('generic', 'A-1001')).toBe('generic:A-1001');
    expect(deriveTransactionId('generic', 'A-1001', 'store-7')).toBe('generic:store-7:A-1001');
    expect(deriveTransactionId('generic', 'A-1001')).toBe(deriveTransactionId('generic', 'A-1001'));
  });

  it('hash ids with other characters, keeping the POS visible and never colliding with plain ids', () => {
    const id = deriveTransactionId('generic', 'order #1/ü');
    expect(id).toMatch(/^generic:~[0-9a-f]{32}$/);
    expect(deriveTransactionId('generic', 'order #2/ü')).not.toBe(id);
    expect(deriveTransactionId('square', 'order #1/ü')).not.toBe(id.replace('generic', 'square'));
  });

  it('keeps the ids of recorded orders as they were (the encoding did not change)', () => {
    expect(deriveTransactionId('generic', 'order #1/ü')).toBe('generic:~' + createHash('sha256').update('generic\u0000order #1/ü').digest('hex').slice(0, 32));
    expect(deriveTransactionId('generic', 'c', 'store 7')).toBe('generic:~' + createHash('sha256').update('generic\u0000store 7\u0000c').digest('hex').slice(0, 32));
  });

  it('refuse control characters, so that no two orders share an id', () => {
    expect(() => deriveTransactionId('generic', 'store 7\u0000c')).toThrow(/orderId: must not contain control characters/);
    expect(() => deriveTransactionId('generic', 'c', 'store\u001f7')).toThrow(/scope: must not contain control characters/);
    for (const bad of ['\u0000', '\u0007', '\u007f', '\u0085']) expect(() => deriveTransactionId('generic', `A${bad}1`)).toThrow(ValidationError);
  });

  it('never give two different (POS, scope, order) an equal id', () => {
    const part = fc.string({ unit: fc.constantFrom('a', 'b', ' ', ':', '~', '\u0000', 'ü', '-', '7'), minLength: 1, maxLength: 6 });
    const triple = fc.tuple(fc.constantFrom('generic', 'square'), fc.option(part, { nil: undefined }), part);
    const idOf = ([pos, scope, order]: [string, string | undefined, string]) => {
      try {
        return deriveTransactionId(pos, order, scope);
      } catch (error) {
        if (error instanceof ValidationError) return undefined;
        throw error;
      }
    };
    fc.assert(
      fc.property(triple, triple, (a, b) => {
        const [ia, ib] = [idOf(a), idOf(b)];
        if (ia === undefined || ib === undefined) return;
        if (JSON.stringify(a) !== JSON.stringify(b)) expect(ia).not.toBe(ib);
        else expect(ia).toBe(ib);
      }),
      { numRuns: 3000 },
    );
  });

  it('the generic payload names the field holding a control character', () => {
    expect(validationIssues(() => genericAdapter.parseCheckout({ orderId: 'c', storeId: 'store\u00007', currency: 'USD', total: '1' }, context))).toContainEqual({ field: 'storeId', message: 'must not contain control characters' });
    expect(validationIssues(() => genericAdapter.parseRefund({ orderId: 'c', refundId: 'R\u00001' }, context))).toContainEqual({ field: 'refundId', message: 'must not contain control characters' });
  });
});
