/**
 * The console's formatting of money, ages and contact details (src/console/js/dom.js): the page
 * shows integer cents as decimals without rounding, and masks customers' phone numbers and emails.
 */
import { describe, expect, it } from '@jest/globals';
// @ts-expect-error: the console's own ES module, plain JavaScript for the browser (no types).
import { age, LEDGER_STATUSES as CONSOLE_STATUSES, maskContact, money, POS_NAMES as CONSOLE_POS_NAMES } from '../../src/console/js/dom.js';
import { POS_NAMES } from '../../src/http/openapi.js';
import { LEDGER_STATUSES } from '../../src/ledger/record.js';

describe('money', () => {
  it.each([
    [5997, 'USD', '59.97 USD'],
    [5, 'USD', '0.05 USD'],
    [100, 'JPY', '1.00 JPY'],
    [-1999, 'EUR', '−19.99 EUR'],
    [0, undefined, '0.00'],
    // Past what a double holds in cents after a division: computed on integers, exact.
    [900719925474099, 'USD', '9007199254740.99 USD'],
  ])('%p cents in %p is %p', (cents, currency, text) => {
    expect(money(cents, currency)).toBe(text);
  });

  it('shows nothing for what is not a whole number of cents', () => {
    expect(money(12.5, 'USD')).toBe('');
    expect(money(undefined, 'USD')).toBe('');
  });
});

describe('age', () => {
  const now = Date.parse('2026-11-24T12:00:00Z');
  it.each([
    ['2026-11-24T11:59:15Z', '45 s'],
    ['2026-11-24T08:48:00Z', '3 h 12 min'],
    ['2026-11-24T10:00:00Z', '2 h'],
    ['2026-11-22T08:00:00Z', '2 d 4 h'],
    ['2026-11-24T12:00:05Z', '0 s'],
  ])('since %p is %p', (since, text) => {
    expect(age(since, now)).toBe(text);
  });
});

describe('maskContact', () => {
  it('keeps the last four digits of a phone number and the domain of an email', () => {
    expect(maskContact('+15550003333', 'phone')).toBe('••••••3333');
    expect(maskContact('ann.lee@example.test', 'email')).toBe('••••••e@example.test');
    // At most half is shown: a one-letter name is not shown at all.
    expect(maskContact('a@b.test', 'email')).toBe('•@b.test');
    expect(maskContact('12', 'card')).toBe('•2');
  });
});

describe("the console's lists of names are the bridge's own", () => {
  // The page is plain JavaScript with no build step, so it cannot import these: a status or POS added
  // to the bridge and not to the page would silently never be searchable there.
  it('ledger statuses and POS names match the bridge', () => {
    expect(CONSOLE_STATUSES).toEqual([...LEDGER_STATUSES]);
    expect(CONSOLE_POS_NAMES).toEqual([...POS_NAMES]);
  });
});
