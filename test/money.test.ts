import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { ValidationError } from '../src/kernel/errors.js';
import { CURRENCY_EXPONENTS, currencyExponent, isIsoCurrency } from '../src/kernel/currencies.js';
import {
  assertCurrency,
  centsEqualsMajor,
  centsToDecimalString,
  decimalToCents,
  decimalToString,
  divDecimalToCents,
  divRoundHalfAwayFromZero,
  exactDifference,
  formatCents,
  formatMajor,
  isWholeNumber,
  majorUnits,
  minorUnitsToCents,
  minorUnitsToDecimal,
  moneyInText,
  mulDecimal,
  nonNegativeCents,
  parseDecimal,
  proRataCents,
  toCents,
  type Decimal,
} from '../src/kernel/money.js';

const RUNS = 2000;

/** Asserts that `fn` throws a ValidationError whose only issue names `field`. */
function expectFieldError(fn: () => unknown, field: string, message?: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(ValidationError);
  const err = caught as ValidationError;
  expect(err.status).toBe(400);
  expect(err.issues).toHaveLength(1);
  expect(err.issues[0]?.field).toBe(field);
  if (message) expect(err.issues[0]?.message).toMatch(message);
}

// ---- independent BigInt references (digit-based, not the division the module uses) ----

/** Formats units / 10^scale as plain decimal text. */
function refText(units: bigint, scale: number): string {
  const neg = units < 0n;
  const digits = (neg ? -units : units).toString().padStart(scale + 1, '0');
  const body = scale === 0 ? digits : `${digits.slice(0, digits.length - scale)}.${digits.slice(digits.length - scale)}`;
  return (neg ? '-' : '') + body;
}

/** Cents of plain decimal text by reading digits: keep two decimals, bump the magnitude when the next digit is ≥ 5. */
function refCentsOfText(text: string): bigint {
  const neg = text.startsWith('-');
  const body = neg ? text.slice(1) : text;
  const [intPart = '0', frac = ''] = body.split('.');
  const padded = frac.padEnd(3, '0');
  let magnitude = BigInt(intPart + padded.slice(0, 2));
  if (padded.charCodeAt(2) >= '5'.charCodeAt(0)) magnitude += 1n;
  return neg ? -magnitude : magnitude;
}

/** Half away from zero as sign × floor((2|n| + d) / 2d), a different formulation from the module's. */
function refRound(n: bigint, d: bigint): bigint {
  if (d < 0n) {
    n = -n;
    d = -d;
  }
  const neg = n < 0n;
  const mag = ((neg ? -n : n) * 2n + d) / (2n * d);
  return neg ? -mag : mag;
}

describe('currencies', () => {
  it('knows the exponents of the currencies POS systems send', () => {
    expect(currencyExponent('USD')).toBe(2);
    expect(currencyExponent('EUR')).toBe(2);
    expect(currencyExponent('JPY')).toBe(0);
    expect(currencyExponent('KRW')).toBe(0);
    expect(currencyExponent('CLP')).toBe(0);
    expect(currencyExponent('VND')).toBe(0);
    expect(currencyExponent('ISK')).toBe(0);
    expect(currencyExponent('HUF')).toBe(2);
    for (const c of ['KWD', 'BHD', 'OMR', 'JOD', 'TND', 'LYD', 'IQD']) expect(currencyExponent(c)).toBe(3);
    expect(currencyExponent('CLF')).toBe(4);
    expect(currencyExponent('UYW')).toBe(4);
    expect(currencyExponent('XAF')).toBe(0);
    expect(currencyExponent('XOF')).toBe(0);
    expect(currencyExponent('XPF')).toBe(0);
    expect(currencyExponent('XCD')).toBe(2);
  });

  it('is the complete list (~170 money codes), every exponent one of 0, 2, 3, 4', () => {
    expect(CURRENCY_EXPONENTS.size).toBeGreaterThanOrEqual(165);
    for (const [code, exp] of CURRENCY_EXPONENTS) {
      expect(code).toMatch(/^[A-Z]{3}$/);
      expect([0, 2, 3, 4]).toContain(exp);
    }
  });

  it('refuses metals, bond units, testing codes, lowercase and non-codes', () => {
    for (const c of ['XAU', 'XAG', 'XPT', 'XPD', 'XTS', 'XXX', 'XBA', 'XBB', 'XBC', 'XBD', 'XSU', 'XUA', 'XDR']) {
      expect(isIsoCurrency(c)).toBe(false);
    }
    for (const c of ['usd', 'Usd', 'US', 'USDD', ' USD', 'ABC', 'HRK', '', 'constructor', '__proto__']) {
      expect(isIsoCurrency(c)).toBe(false);
      expect(currencyExponent(c)).toBeUndefined();
    }
  });

  it('assertCurrency returns the code or names the field', () => {
    expect(assertCurrency('USD', 'currency')).toBe('USD');
    for (const bad of ['usd', 'XAU', 'XXX', '', 42, null, undefined, ['USD']]) {
      expectFieldError(() => assertCurrency(bad, 'order.currency'), 'order.currency', /ISO 4217/);
    }
  });
});

describe('toCents: examples', () => {
  it.each<[string | number, number]>([
    [19.99, 1999],
    ['19.99', 1999],
    ['59.97', 5997],
    [143.97, 14397],
    ['130.64999999999998', 13065],
    [130.64999999999998, 13065],
    ['0.005', 1],
    ['-0.005', -1],
    ['0.0049', 0],
    ['-0.0049', 0],
    ['0.015', 2],
    ['-0.015', -2],
    ['1.005', 101],
    [1.005, 101], // String(1.005) is "1.005", though the double is a hair below it
    ['12', 1200],
    ['12.5', 1250],
    ['-0.01', -1],
    ['0', 0],
    ['-0', 0],
    [-0, 0],
    ['007.50', 750],
    ['2', 200],
    [1.0, 100],
    ['1e-7', 0],
    [1e-7, 0],
    ['1.5e2', 15000],
    ['1E+2', 10000],
    ['5e-3', 1],
    [5e-324, 0],
    ['90071992547409.91', Number.MAX_SAFE_INTEGER],
    ['-90071992547409.91', -Number.MAX_SAFE_INTEGER],
  ])('%p → %p cents', (input, cents) => {
    const got = toCents(input, 'total');
    expect(got).toBe(cents);
    expect(Object.is(got, -0)).toBe(false);
  });

  it('never multiplies floats: 19.99 * 100 would be 1998.9999999999998', () => {
    expect(19.99 * 100).not.toBe(1999);
    expect(toCents(19.99, 'x')).toBe(1999);
    expect(toCents(0.1 + 0.2, 'x')).toBe(30); // 0.30000000000000004 rounds to 30
  });

  it('rejects amounts whose cents are not safe integers', () => {
    for (const big of [1e21, '1e21', 1.5e21, '90071992547409.92', '-90071992547409.92', 1e300, '1e1000', 9007199254740992]) {
      expectFieldError(() => toCents(big, 'items.0.total'), 'items.0.total', /too large/);
    }
  });

  it('rejects everything that is not a decimal amount, naming the field', () => {
    const bad: unknown[] = [
      '', ' ', ' 1', '1 ', '1,00', '1.000,00', 'abc', '0x10', '0b1', '1.2.3', '.5', '5.', '+5', '-', '--1', '-.5',
      '1e', 'e5', '1e+', '1e1.5', '1e5000', '1_000', '١٢', 'NaN', 'Infinity', '-Infinity', '$5', '5$', '1/2',
      '9'.repeat(65), NaN, Infinity, -Infinity, null, undefined, true, {}, [], [1], 5n,
    ];
    for (const input of bad) {
      expectFieldError(() => toCents(input as string, 'tip'), 'tip');
      expectFieldError(() => parseDecimal(input as string, 'tip'), 'tip');
      expectFieldError(() => nonNegativeCents(input as string, 'tip'), 'tip');
    }
    expectFieldError(() => toCents('9'.repeat(65), 'tip'), 'tip', /at most 64 characters/);
    expect(toCents('1'.padStart(64, '0'), 'tip')).toBe(100);
  });

  it('nonNegativeCents refuses negatives with a clear message', () => {
    expect(nonNegativeCents('4.80', 'tax')).toBe(480);
    expect(nonNegativeCents(0, 'tax')).toBe(0);
    expect(nonNegativeCents('-0.00', 'tax')).toBe(0);
    expect(nonNegativeCents(-0, 'tax')).toBe(0);
    for (const neg of ['-0.01', -1, '-0.001', -1e-7]) {
      expectFieldError(() => nonNegativeCents(neg, 'discount'), 'discount', /must not be negative/);
    }
  });
});

describe('parseDecimal', () => {
  it('keeps the exact decimal', () => {
    expect(parseDecimal('12.50', 'f')).toEqual({ units: 1250n, scale: 2 });
    expect(parseDecimal('-0.01', 'f')).toEqual({ units: -1n, scale: 2 });
    expect(parseDecimal(19.99, 'f')).toEqual({ units: 1999n, scale: 2 });
    expect(parseDecimal(1e-7, 'f')).toEqual({ units: 1n, scale: 7 });
    expect(parseDecimal('1.5e+21', 'f')).toEqual({ units: 1500000000000000000000n, scale: 0 });
    expect(parseDecimal(1.5e21, 'f')).toEqual({ units: 1500000000000000000000n, scale: 0 });
    expect(parseDecimal('1.25e1', 'f')).toEqual({ units: 125n, scale: 1 });
  });

  it('decimalToString writes it back without exponent', () => {
    expect(decimalToString(parseDecimal('1e-7', 'f'))).toBe('0.0000001');
    expect(decimalToString(parseDecimal('-0.005', 'f'))).toBe('-0.005');
    expect(decimalToString(parseDecimal('42', 'f'))).toBe('42');
  });
});

describe('minorUnitsToCents: examples', () => {
  it.each<[number | string | bigint, string, number]>([
    [2, 'JPY', 200],
    ['2', 'JPY', 200],
    [2n, 'JPY', 200],
    [1999, 'USD', 1999],
    [-100, 'USD', -100], // Clover negative discount
    [1234, 'KWD', 123],
    [1235, 'KWD', 124],
    [-1235, 'KWD', -124],
    [1234, 'BHD', 123],
    [12345, 'CLF', 123],
    [12350, 'CLF', 124],
    [12349, 'CLF', 123],
    [5, 'CLF', 0],
    [50, 'UYW', 1],
    [0, 'EUR', 0],
    [5000, 'KRW', 500000],
  ])('%p %s → %p cents', (minor, currency, cents) => {
    expect(minorUnitsToCents(minor, currency, 'total_money.amount')).toBe(cents);
  });

  it('minorUnitsToDecimal is exact in major units', () => {
    expect(minorUnitsToDecimal(1234, 'KWD', 'f')).toEqual({ units: 1234n, scale: 3 });
    expect(decimalToString(minorUnitsToDecimal(1999, 'USD', 'f'))).toBe('19.99');
  });

  it('rejects non-integer minor units, unknown currencies and too-large results, naming the field', () => {
    const field = 'line_items.0.total_money.amount';
    for (const bad of [1.5, '1.5', '1e3', NaN, Infinity, 2 ** 53, '', ' 1', '+1', '0x10', null, undefined, {}, '1'.repeat(65)]) {
      expectFieldError(() => minorUnitsToCents(bad as number, 'USD', field), field, /integer amount in minor units/);
    }
    for (const cur of ['usd', 'XAU', 'XXX', 'ABC', '']) {
      expectFieldError(() => minorUnitsToCents(100, cur, field), field, /ISO 4217/);
    }
    expectFieldError(() => minorUnitsToCents(Number.MAX_SAFE_INTEGER, 'JPY', field), field, /too large/);
    expectFieldError(() => minorUnitsToCents(10n ** 30n, 'USD', field), field, /too large/);
  });
});

describe('proRataCents: a share of a Check, rounded once', () => {
  it('measures a refund of part of what was paid on the Check, half away from zero', () => {
    // 1200 paid back of 6176 paid (5666 Check + 510 tax): 1200 × 5666 / 6176 = 1100.9067… → 1101.
    expect(proRataCents(1200, 6176, 5666, 'refund')).toBe(1101);
    // Exactly half a cent rounds away from zero: 1 × 5 / 2 = 2.5 → 3.
    expect(proRataCents(1, 2, 5, 'refund')).toBe(3);
    expect(proRataCents(6176, 6176, 5666, 'refund')).toBe(5666);
    expect(proRataCents(0, 6176, 5666, 'refund')).toBe(0);
  });

  it('is exact for large amounts (a bigint product) and refuses a total of zero', () => {
    expect(proRataCents(2 ** 52, 2 ** 53 - 1, 2 ** 53 - 1, 'refund')).toBe(2 ** 52);
    expectFieldError(() => proRataCents(1, 0, 5, 'refund'), 'refund', /total of 0 cents/);
  });

  it('agrees with a BigInt reference on random amounts', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), fc.integer({ min: 1, max: 10_000_000 }), fc.integer({ min: 0, max: 10_000_000 }), (part, whole, of) => {
        const n = BigInt(part) * BigInt(of) * 2n + BigInt(whole);
        expect(proRataCents(part, whole, of, 'x')).toBe(Number(n / (2n * BigInt(whole))));
      }),
    );
  });
});

describe('mulDecimal / divDecimalToCents: examples', () => {
  it('prices weighed goods exactly and rounds once', () => {
    // Square: 1.70000 kg at 3.99 = 6.783 → 678
    const line = mulDecimal(parseDecimal('3.99', 'p'), parseDecimal('1.70000', 'q'));
    expect(decimalToString(line)).toBe('6.7830000');
    expect(decimalToCents(line, 'total')).toBe(678);
    // Clover: price 199 cents × unitQty 2500 / 1000 = 497.5 cents → 498
    const cloverPrice = minorUnitsToDecimal(199, 'USD', 'price');
    expect(divDecimalToCents(mulDecimal(cloverPrice, { units: 2500n, scale: 0 }), 1000n, 'price')).toBe(498);
    expect(divDecimalToCents({ units: -4975n, scale: 3 }, 1n, 'price')).toBe(-498);
    expect(divDecimalToCents({ units: 1n, scale: 0 }, 3n, 'x')).toBe(33);
    expect(divDecimalToCents({ units: 2n, scale: 0 }, 3n, 'x')).toBe(67);
    expect(divDecimalToCents({ units: 1n, scale: 0 }, -3n, 'x')).toBe(-33);
  });

  it('rejects division by zero and too-large results, naming the field', () => {
    expectFieldError(() => divDecimalToCents({ units: 1n, scale: 0 }, 0n, 'unitQty'), 'unitQty', /zero/);
    expectFieldError(() => divDecimalToCents({ units: 10n ** 20n, scale: 0 }, 1n, 'unitQty'), 'unitQty', /too large/);
  });
});

describe('the one rounding function', () => {
  it.each<[bigint, bigint, bigint]>([
    [5n, 10n, 1n],
    [-5n, 10n, -1n],
    [4n, 10n, 0n],
    [-4n, 10n, 0n],
    [15n, 10n, 2n],
    [-15n, 10n, -2n],
    [25n, 10n, 3n],
    [5n, -10n, -1n],
    [0n, 7n, 0n],
  ])('%p / %p → %p', (n, d, q) => {
    expect(divRoundHalfAwayFromZero(n, d)).toBe(q);
  });
});

describe('formatting and comparison', () => {
  it('centsToDecimalString', () => {
    expect(centsToDecimalString(1999)).toBe('19.99');
    expect(centsToDecimalString(-5)).toBe('-0.05');
    expect(centsToDecimalString(0)).toBe('0.00');
    expect(centsToDecimalString(-0)).toBe('0.00');
    expect(centsToDecimalString(100)).toBe('1.00');
    expect(centsToDecimalString(-123456)).toBe('-1234.56');
    expect(() => centsToDecimalString(1.5)).toThrow(RangeError);
    expect(() => centsToDecimalString(2 ** 53)).toThrow(RangeError);
  });

  it('centsEqualsMajor compares decimals, not floats', () => {
    expect(centsEqualsMajor(1999, 19.99)).toBe(true);
    expect(centsEqualsMajor(1998, 19.99)).toBe(false);
    expect(centsEqualsMajor(30, 0.3)).toBe(true);
    expect(centsEqualsMajor(30, 0.1 + 0.2)).toBe(false);
    expect(centsEqualsMajor(0, 0)).toBe(true);
    expect(centsEqualsMajor(0, -0)).toBe(true);
    expect(centsEqualsMajor(-5, -0.05)).toBe(true);
    expect(centsEqualsMajor(100, 1)).toBe(true);
    expect(centsEqualsMajor(13065, 130.64999999999998)).toBe(false);
    expect(centsEqualsMajor(1999, '19.990')).toBe(true);
    expect(centsEqualsMajor(1999, NaN)).toBe(false);
    expect(centsEqualsMajor(1.5, 0.015)).toBe(false);
  });

  it('isWholeNumber', () => {
    for (const yes of ['3', '3.000', 3, 3.0, '0', '-2', '1e3', '1.5e1', 1e21]) expect(isWholeNumber(yes)).toBe(true);
    for (const no of ['1.70000', 2.5, '0.001', '1e-7', '', 'abc', NaN, Infinity, ' 3']) expect(isWholeNumber(no)).toBe(false);
  });
});

describe('properties', () => {
  const centsArb = fc.integer({ min: -1e13, max: 1e13 });

  it('(a) cents → decimal text → cents is the identity, as text and as a JSON number', () => {
    fc.assert(
      fc.property(centsArb, (c) => {
        const text = centsToDecimalString(c);
        expect(text).toMatch(/^-?[0-9]+\.[0-9]{2}$/);
        expect(toCents(text, 'f')).toBe(c);
        expect(nonNegativeCents(text.replace('-', ''), 'f')).toBe(Math.abs(c));
        const n = Number(text);
        // The number's shortest text denotes the same decimal (always so up to 15 significant digits).
        expect(centsEqualsMajor(c, String(n))).toBe(true);
        expect(toCents(n, 'f')).toBe(c);
        expect(centsEqualsMajor(c, n)).toBe(true);
        expect(centsEqualsMajor(c + 1, n)).toBe(false);
      }),
      { numRuns: RUNS },
    );
  });

  it('(a′) near the safe-integer limit, numbers are used only when their shortest text round-trips', () => {
    fc.assert(
      fc.property(fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), (c) => {
        const text = centsToDecimalString(c);
        expect(toCents(text, 'f')).toBe(c);
        const n = Number(text);
        if (centsEqualsMajor(c, String(n))) expect(toCents(n, 'f')).toBe(c);
      }),
      { numRuns: RUNS },
    );
  });

  it('(b) digit strings with 3–6 decimals round half away from zero like the BigInt reference', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(10n ** 18n), max: 10n ** 18n }),
        fc.integer({ min: 3, max: 6 }),
        fc.constantFrom('', '0', '5', '50', '49', '51', '500'),
        (units, scale, tail) => {
          // Appending digits steers many cases onto or next to the exact half.
          const text = refText(units, scale) + (units === 0n || tail === '' ? '' : tail);
          const expected = refCentsOfText(text);
          if (expected > BigInt(Number.MAX_SAFE_INTEGER) || expected < -BigInt(Number.MAX_SAFE_INTEGER)) {
            expectFieldError(() => toCents(text, 'f'), 'f', /too large/);
          } else {
            expect(toCents(text, 'f')).toBe(Number(expected));
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('(b′) JSON numbers convert like the plain text of their shortest representation', () => {
    fc.assert(
      fc.property(fc.double({ min: -1e12, max: 1e12, noNaN: true }), (n) => {
        const plain = decimalToString(parseDecimal(n, 'f')); // exponent form expanded
        const expected = refCentsOfText(plain);
        expect(toCents(n, 'f')).toBe(Number(expected));
        expect(Number(plain) === n).toBe(true); // the expanded text is the same number (-0 included)
      }),
      { numRuns: RUNS },
    );
  });

  it('(c) minorUnitsToCents matches the BigInt reference for every currency and every input form', () => {
    const codes = [...CURRENCY_EXPONENTS.keys()];
    fc.assert(
      fc.property(
        fc.constantFrom(...codes),
        fc.bigInt({ min: -(10n ** 15n), max: 10n ** 15n }),
        fc.constantFrom('number', 'string', 'bigint'),
        (currency, minor, form) => {
          const exp = currencyExponent(currency)!;
          const expected = exp <= 2 ? minor * 10n ** BigInt(2 - exp) : refCentsOfText(refText(minor, exp));
          const input = form === 'bigint' ? minor : form === 'string' ? minor.toString() : Number(minor);
          if (expected > BigInt(Number.MAX_SAFE_INTEGER) || expected < -BigInt(Number.MAX_SAFE_INTEGER)) {
            expectFieldError(() => minorUnitsToCents(input, currency, 'amt'), 'amt', /too large/);
          } else {
            expect(minorUnitsToCents(input, currency, 'amt')).toBe(Number(expected));
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('(c′) every exponent present in the list (0, 2, 3, 4) on small amounts, where halves are frequent', () => {
    const byExponent = new Map<number, string>();
    for (const [code, exp] of CURRENCY_EXPONENTS) if (!byExponent.has(exp)) byExponent.set(exp, code);
    expect([...byExponent.keys()].sort()).toEqual([0, 2, 3, 4]);
    fc.assert(
      fc.property(fc.constantFrom(...byExponent.entries()), fc.integer({ min: -20000, max: 20000 }), ([exp, code], minor) => {
        const expected = refRound(BigInt(minor) * 100n, 10n ** BigInt(exp));
        expect(minorUnitsToCents(minor, code, 'amt')).toBe(Number(expected));
      }),
      { numRuns: RUNS },
    );
  });

  it('(d) mulDecimal and divDecimalToCents match the BigInt reference', () => {
    // |a × b × 100| stays below 2^53 even at scale 0, so every case is representable
    const decimalArb = (bound: bigint, maxScale: number): fc.Arbitrary<Decimal> =>
      fc.record({ units: fc.bigInt({ min: -bound, max: bound }), scale: fc.integer({ min: 0, max: maxScale }) });
    fc.assert(
      fc.property(decimalArb(10n ** 6n, 4), decimalArb(10n ** 7n, 5), fc.bigInt({ min: 1n, max: 100000n }), fc.boolean(), (a, b, divisor, negDiv) => {
        const product = mulDecimal(a, b);
        // the product's text equals the reference product of the two texts, computed digit-wise
        const expectedProductText = refText(a.units * b.units, a.scale + b.scale);
        expect(decimalToString(product)).toBe(expectedProductText);
        expect(decimalToCents(product, 'f')).toBe(Number(refCentsOfText(expectedProductText)));
        const d = negDiv ? -divisor : divisor;
        const expected = refRound(product.units * 100n, 10n ** BigInt(product.scale) * d);
        expect(divDecimalToCents(product, d, 'f')).toBe(Number(expected));
      }),
      { numRuns: RUNS },
    );
  });

  it('(d′) Clover weighed lines: price cents × unitQty / 1000', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1e7, max: 1e7 }), fc.integer({ min: 1, max: 1e6 }), (priceCents, unitQty) => {
        const price = minorUnitsToDecimal(priceCents, 'USD', 'price');
        const got = divDecimalToCents(mulDecimal(price, { units: BigInt(unitQty), scale: 0 }), 1000n, 'price');
        expect(got).toBe(Number(refRound(BigInt(priceCents) * BigInt(unitQty), 1000n)));
      }),
      { numRuns: RUNS },
    );
  });

  it('(e) cents of line totals with ≤ 2 decimals sum to the cents of their decimal sum', () => {
    const lineArb = fc.record({
      cents: fc.integer({ min: -1e9, max: 1e9 }),
      form: fc.constantFrom('text', 'short-text', 'number'),
    });
    fc.assert(
      fc.property(fc.array(lineArb, { minLength: 1, maxLength: 30 }), (lines) => {
        let sumOfCents = 0;
        let exactSum = 0n;
        for (const { cents, form } of lines) {
          const text = centsToDecimalString(cents);
          const input = form === 'number' ? Number(text) : form === 'short-text' ? text.replace(/\.?0+$/, '') || '0' : text;
          sumOfCents += toCents(input, 'items.total');
          exactSum += BigInt(cents);
        }
        expect(sumOfCents).toBe(toCents(refText(exactSum, 2), 'total'));
        expect(sumOfCents).toBe(Number(exactSum));
      }),
      { numRuns: RUNS },
    );
  });

  it('rejection always names the field, whatever the garbage', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.constantFrom('total', 'items.3.price', 'refund.amount'), (s, field) => {
        let result: number | undefined;
        try {
          result = toCents(s, field);
        } catch (e) {
          expect(e).toBeInstanceOf(ValidationError);
          expect((e as ValidationError).issues[0]?.field).toBe(field);
          return;
        }
        expect(Number.isSafeInteger(result)).toBe(true);
        expect(s).toMatch(/^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$/);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('money as a person reads it (formatCents, formatMajor, moneyInText)', () => {
  it('shows Check cents by the currency\'s exponent, rounding nothing away', () => {
    expect(formatCents(5997, 'USD')).toBe('59.97 USD');
    expect(formatCents(-5, 'USD')).toBe('\u22120.05 USD');
    expect(formatCents(0, 'EUR')).toBe('0.00 EUR');
    // The Check is the decimal × 100 in every currency: ¥500 is 50000.
    expect(formatCents(50000, 'JPY')).toBe('500 JPY');
    expect(formatCents(12345, 'JPY')).toBe('123.45 JPY');
    expect(formatCents(123, 'KWD')).toBe('1.230 KWD');
    expect(formatCents(5997)).toBe('59.97');
    expect(() => formatCents(0.5, 'USD')).toThrow(RangeError);
  });

  it('shows a major-unit amount from its exact text, never through float arithmetic', () => {
    expect(formatMajor(8.4, 'USD')).toBe('8.40 USD');
    expect(formatMajor(-59.97, 'USD')).toBe('\u221259.97 USD');
    expect(formatMajor(0.1 + 0.2, 'USD')).toBe('0.30000000000000004 USD');
    expect(formatMajor(1.234, 'KWD')).toBe('1.234 KWD');
    expect(formatMajor(null, 'USD')).toBe('');
    expect(formatMajor(Number.NaN, 'USD')).toBe('');
  });

  it('words the amounts the bridge wrote in cents inside its own text, and nothing else', () => {
    expect(moneyInText('partial refund R-1 of 325 cents: reverse this accrual', 'USD')).toBe('partial refund R-1 of 3.25 USD: reverse this accrual');
    expect(moneyInText('so 1200 cents of the 5666-cent Check, pro rata', 'USD')).toBe('so 12.00 USD of the 56.66 USD Check, pro rata');
    expect(moneyInText('latest 999 cents, recorded 5997; 2 such deliveries', 'USD')).toBe('latest 9.99 USD, recorded 59.97 USD; 2 such deliveries');
    expect(moneyInText('operation 12 on card 11-100001-2 at 2026-11-24T09:12:00.000Z', 'USD')).toBe('operation 12 on card 11-100001-2 at 2026-11-24T09:12:00.000Z');
    expect(moneyInText('1 cent', 'JPY')).toBe('0.01 JPY');
  });
});

describe('exactDifference', () => {
  it('subtracts the loyalty service\'s numbers on their decimal text, as a person would', () => {
    expect(exactDifference(12.3, 2.1)).toBe(10.2);
    expect(12.3 - 2.1).not.toBe(10.2);
    expect(exactDifference(51, -8)).toBe(59);
    expect(exactDifference(0.3, 0.1)).toBe(0.2);
    expect(exactDifference(Number.NaN, 1)).toBeUndefined();
  });
});

describe('majorUnits', () => {
  it.each([
    [5997, 'USD', '59.97'],
    [0, 'USD', '0.00'],
    [-5, 'EUR', '-0.05'],
    [50000, 'JPY', '500'],
    [150, 'JPY', '1.50'],
    [123, 'KWD', '1.230'],
    [12345, 'CLF', '123.4500'],
  ])('%i cents of %s is %s', (cents, currency, text) => {
    expect(majorUnits(cents, currency)).toBe(text);
  });

  it('is exact beyond what a float holds', () => {
    expect(majorUnits(Number.MAX_SAFE_INTEGER, 'USD')).toBe('90071992547409.91');
  });
});
