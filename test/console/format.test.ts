/**
 * The console's formatting of money, ages and contact details (src/console/js/dom.js): the page
 * shows integer cents as decimals without rounding, and masks customers' phone numbers and emails.
 */
import { describe, expect, it } from '@jest/globals';
// @ts-expect-error: the console's own ES module, plain JavaScript for the browser (no types).
import { age, LEDGER_STATUSES as CONSOLE_STATUSES, majorMoney, maskContact, money, POS_NAMES as CONSOLE_POS_NAMES, prose } from '../../src/console/js/dom.js';
// @ts-expect-error: the console's own ES module.
import { BULK_MAX as CONSOLE_BULK_MAX } from '../../src/console/js/views/search.js';
import { BULK_MAX } from '../../src/http/routes/admin.js';
import { POS_NAMES } from '../../src/pos/contract.js';
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

describe('majorMoney', () => {
  it("shows the loyalty history's decimal sums as money, rounded to the cent once", () => {
    expect(majorMoney(-8.4, 'USD')).toBe('−8.40 USD');
    expect(majorMoney(59.97, 'USD')).toBe('59.97 USD');
    expect(majorMoney(0.1 + 0.2, 'EUR')).toBe('0.30 EUR');
    expect(majorMoney(undefined, 'USD')).toBe('');
    expect(majorMoney(null, 'USD')).toBe('');
  });
});

describe('prose', () => {
  it("writes the API's counts of cents as money, with the record's currency or without one", () => {
    expect(prose('partial refund RP-1 of 1999 cents: the remaining 3998 cents as generic:P-1~r1', 'USD')).toEqual(['partial refund RP-1 of ', '19.99 USD', ': the remaining ', '39.98 USD', ' as generic:P-1~r1']);
    expect(prose('so 1101 cents of the 5666-cent Check, pro rata', 'USD')).toEqual(['so ', '11.01 USD', ' of the ', '56.66 USD', ' Check, pro rata']);
    expect(prose('1 cent', 'EUR')).toEqual(['0.01 EUR']);
    // The attention queue names no currency: the amounts alone, the one it is compared with too.
    expect(prose('delivered again with another amount (latest 999 cents, recorded 5997; 1 such deliveries in all)')).toEqual(['delivered again with another amount (latest ', '9.99', ', recorded ', '59.97', '; 1 such deliveries in all)']);
    // Anything else stays as it is: ids with digits, a count of records, a reversal in major units.
    expect(prose('operation 5 on card 21-100003-4, a reversal of -59.97, 3 records', 'USD')).toEqual(['operation 5 on card 21-100003-4, a reversal of -59.97, 3 records']);
    expect(prose(undefined)).toBe('');
    expect(prose('')).toEqual([]);
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

  it("refuses a bulk action over the bridge's own limit before asking to confirm it", () => {
    expect(CONSOLE_BULK_MAX).toBe(BULK_MAX);
  });
});
