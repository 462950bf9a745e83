/** What a partial refund leaves, and a refusal that speaks the POS's major units, not cents. */
import { describe, expect, it } from '@jest/globals';
import { remainderAfterRefund, RefundExceedsRemainderError } from '../../src/core/remainder.js';
import type { Check } from '../../src/loyalty/contract.js';

const check = (currency: string, amount: number): Check => ({ amount, currency, selections: [{ id: 'sku-1', quantity: 3, price: amount / 3, totalPrice: amount }] });

function refusal(run: () => unknown): RefundExceedsRemainderError {
  try {
    run();
  } catch (error) {
    if (error instanceof RefundExceedsRemainderError) return error;
    throw error;
  }
  throw new Error('expected a RefundExceedsRemainderError');
}

describe('refunding more than remains', () => {
  it('an amount: the message and details in the order currency major units, cents kept for programs', () => {
    const error = refusal(() => remainderAfterRefund(check('USD', 5997), { amountCents: 7000 }));
    expect(error.status).toBe(409);
    expect(error.message).toBe('refund of 70.00 USD is more than the 59.97 USD that remains of this order');
    expect(error.details).toEqual({ remainingCents: 5997, remaining: '59.97', refunded: '70.00', currency: 'USD' });
  });

  it('earlier partial refunds count against what remains', () => {
    expect(refusal(() => remainderAfterRefund(check('JPY', 50000), { amountCents: 40000 }, 20000)).message).toBe('refund of 400 JPY is more than the 300 JPY that remains of this order');
  });

  it('refunded lines: the line named in major units', () => {
    const twoLines: Check = { ...check('EUR', 3000), amount: 4000, selections: [...check('EUR', 3000).selections, { id: 'sku-2', quantity: 1, totalPrice: 1000 }] };
    const error = refusal(() => remainderAfterRefund(twoLines, { items: [{ id: 'sku-1', quantity: 4, totalCents: 3500 }] }));
    expect(error.message).toBe('items.0: refunds 4 × sku-1 for 35.00 EUR, but 3 for 30.00 EUR remain');
    expect(error.details).toEqual({ remainingCents: 3000, remaining: '30.00', refunded: '35.00', currency: 'EUR' });
    expect(refusal(() => remainderAfterRefund(check('EUR', 3000), { items: [{ id: 'tea', quantity: 1, totalCents: 100 }] })).details).toEqual({ remainingCents: 0, remaining: '0.00', currency: 'EUR' });
  });
});
