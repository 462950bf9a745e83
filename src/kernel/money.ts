/**
 * Money: POS amounts → the loyalty service's integer cents, exactly.
 *
 * THE RULE. The loyalty service wants every Check money field as integer cents: "the decimal
 * amount × 100, exactly", for every currency (JPY ¥2 is 200, KWD 1.234 is 123.4). So an amount is
 * first read as an exact decimal (a bigint over a power of ten, never a binary float: `19.99 * 100`
 * is `1998.9999999999998`), multiplied by 100 exactly, and only then, if the result is not a whole
 * number of cents (KWD/BHD/CLF amounts, weighed goods, real Shopify text like
 * "130.64999999999998"), rounded ONCE by ROUND HALF AWAY FROM ZERO: 0.005 → 1, -0.005 → -1,
 * 0.0049 → 0. That rounding lives in one function, `divRoundHalfAwayFromZero`; every path to cents
 * (`decimalToCents`, `divDecimalToCents`, `minorUnitsToCents`, `proRataCents`) goes through it. Half away from
 * zero (not banker's rounding) because it is what a receipt shows and it is symmetric, so a refund
 * rounds to the exact negative of the sale it reverses. Results must be safe integers
 * (|cents| ≤ 2^53 − 1), else the amount is rejected as too large rather than sent imprecisely.
 *
 * INPUT FORMS accepted for a major-unit amount (`parseDecimal`, `toCents`):
 * - decimal strings: an optional `-`, one or more ASCII digits, optionally `.` and one or more
 *   digits, optionally an exponent `e`/`E` with optional sign: "12", "12.50", "-0.01", "007.5",
 *   "1e-7", "1.5E+21". At most 64 characters, exponent at most ±1000.
 * - JSON numbers (finite only), read through their shortest round-trip text `String(n)`: 19.99 is
 *   read as "19.99", 1e-7 as "1e-7", 1.5e21 as "1.5e+21".
 * Rejected (ValidationError naming the field, so the HTTP layer answers 400): "", whitespace
 * anywhere (" 1"), a leading "+" or "." (".5"), a trailing "." ("5."), grouping or a decimal comma
 * ("1,00"), hex ("0x10"), "1.2.3", NaN, Infinity, words, and anything not a string or number.
 * Those forms are accepted by no POS we serve; refusing them loudly beats guessing (see pos-facts).
 *
 * Minor-unit amounts (Square `Money.amount`, Clover cents) are integers read with the currency's
 * ISO 4217 exponent (`minorUnitsToCents`), see `currencies.ts`.
 */
import { ValidationError } from './errors.js';
import { currencyExponent, isIsoCurrency } from './currencies.js';

/** An exact decimal: value = units / 10^scale, scale a non-negative integer. */
export interface Decimal {
  readonly units: bigint;
  readonly scale: number;
}

/** Longest amount text accepted; real amounts are far shorter, and this bounds the bigint work. */
export const MAX_AMOUNT_TEXT_LENGTH = 64;
/** Largest |exponent| accepted in "1e-7"-style text (a double's text needs at most 324). */
const MAX_EXPONENT = 1000;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const DECIMAL_TEXT = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;
const INTEGER_TEXT = /^-?[0-9]+$/;

function pow10(n: number): bigint {
  return 10n ** BigInt(n);
}

/** Shows a rejected value in an error message without echoing a huge or odd payload. */
function show(input: unknown): string {
  if (typeof input === 'string') {
    return JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input);
  }
  if (typeof input === 'number' || typeof input === 'bigint' || typeof input === 'boolean') return String(input);
  if (input === null) return 'null';
  return Array.isArray(input) ? 'an array' : `a value of type ${typeof input}`;
}

/**
 * THE rounding function: n / d rounded half away from zero (d ≠ 0). Every conversion to cents
 * calls it exactly once; nothing else in the bridge rounds money.
 */
export function divRoundHalfAwayFromZero(n: bigint, d: bigint): bigint {
  if (d === 0n) throw new RangeError('division by zero');
  if (d < 0n) {
    n = -n;
    d = -d;
  }
  const negative = n < 0n;
  const magnitude = negative ? -n : n;
  const q = magnitude / d;
  const r = magnitude % d;
  const rounded = r * 2n >= d ? q + 1n : q;
  return negative ? -rounded : rounded;
}

/** Parses text of the accepted grammar; `undefined` when it does not match. */
function parseDecimalText(text: string): Decimal | undefined {
  if (text.length === 0 || text.length > MAX_AMOUNT_TEXT_LENGTH) return undefined;
  const m = DECIMAL_TEXT.exec(text);
  if (!m) return undefined;
  const [, sign = '', intDigits = '', fracDigits = '', expText] = m;
  let exponent = 0;
  if (expText !== undefined) {
    exponent = Number(expText); // at most 64 chars of digits: finite, and checked right below
    if (!Number.isSafeInteger(exponent) || Math.abs(exponent) > MAX_EXPONENT) return undefined;
  }
  let units = BigInt(intDigits + fracDigits);
  if (sign === '-') units = -units;
  let scale = fracDigits.length - exponent;
  if (scale < 0) {
    units *= pow10(-scale);
    scale = 0;
  }
  return { units, scale };
}

function tryParseDecimal(input: unknown): Decimal | undefined {
  if (typeof input === 'number') {
    // String(n) is the shortest text that reads back as n: the amount the sender meant.
    return Number.isFinite(input) ? parseDecimalText(String(input)) : undefined;
  }
  if (typeof input === 'string') return parseDecimalText(input);
  return undefined;
}

/**
 * Reads a major-unit amount (decimal string or finite JSON number) as an exact Decimal.
 * Accepted forms are listed at the top of this file; anything else is a ValidationError on `field`.
 */
export function parseDecimal(input: string | number, field: string): Decimal {
  const d = tryParseDecimal(input);
  if (d) return d;
  if (typeof input === 'string' && input.length > MAX_AMOUNT_TEXT_LENGTH) {
    throw ValidationError.field(field, `must be a decimal amount of at most ${MAX_AMOUNT_TEXT_LENGTH} characters`);
  }
  if (typeof input === 'number') {
    throw ValidationError.field(field, `must be a finite number, got ${show(input)}`);
  }
  throw ValidationError.field(
    field,
    `must be a decimal amount such as "19.99" or 19.99 (digits, optional "-" and "."; no spaces, "+" or ","), got ${show(input)}`,
  );
}

function checkDecimal(d: Decimal): void {
  if (typeof d?.units !== 'bigint' || !Number.isSafeInteger(d.scale) || d.scale < 0) {
    throw new TypeError('not a Decimal: units must be a bigint and scale a non-negative integer');
  }
}

function centsToSafeNumber(cents: bigint, field: string): number {
  if (cents > MAX_SAFE || cents < -MAX_SAFE) {
    throw ValidationError.field(field, 'amount is too large to be sent exactly as integer cents');
  }
  return Number(cents);
}

/** d × 100, rounded half away from zero when not whole, as a safe integer (else ValidationError: too large). */
export function decimalToCents(d: Decimal, field: string): number {
  checkDecimal(d);
  return centsToSafeNumber(divRoundHalfAwayFromZero(d.units * 100n, pow10(d.scale)), field);
}

/** The common entry point for major-unit money: "19.99" or 19.99 → 1999. */
export function toCents(input: string | number, field: string): number {
  return decimalToCents(parseDecimal(input, field), field);
}

/**
 * Like `toCents` for amounts that must not be negative (tax, tip, discount, generic payload money).
 * The sign is judged on the amount as sent: "-0.001" is refused although it would round to 0;
 * "-0" and "-0.00" are zero and accepted.
 */
export function nonNegativeCents(input: string | number, field: string): number {
  const d = parseDecimal(input, field);
  if (d.units < 0n) throw ValidationError.field(field, `must not be negative, got ${show(input)}`);
  return decimalToCents(d, field);
}

/**
 * Integer minor units of `currency` as an exact Decimal in major units (JPY 2 → 2, USD 1999 → 19.99,
 * KWD 1234 → 1.234). `minor` may be a safe-integer number, integer text ("-100") or a bigint;
 * a fraction, an unsafe number (already imprecise) or an unknown currency is a ValidationError on `field`.
 */
export function minorUnitsToDecimal(minor: number | string | bigint, currency: string, field: string): Decimal {
  const exponent = isIsoCurrency(currency) ? currencyExponent(currency) : undefined;
  if (exponent === undefined) {
    throw ValidationError.field(field, `currency ${show(currency)} is not an ISO 4217 currency code, so its minor units cannot be converted`);
  }
  let units: bigint;
  if (typeof minor === 'bigint') {
    units = minor;
  } else if (typeof minor === 'number') {
    if (!Number.isSafeInteger(minor)) {
      throw ValidationError.field(field, `must be an integer amount in minor units (a safe integer), got ${show(minor)}`);
    }
    units = BigInt(minor);
  } else if (typeof minor === 'string' && minor.length <= MAX_AMOUNT_TEXT_LENGTH && INTEGER_TEXT.test(minor)) {
    units = BigInt(minor);
  } else {
    throw ValidationError.field(field, `must be an integer amount in minor units, got ${show(minor)}`);
  }
  return { units, scale: exponent };
}

/** Integer minor units + the currency's ISO 4217 exponent → cents (JPY 2 → 200, USD 1999 → 1999, KWD 1234 → 123). */
export function minorUnitsToCents(minor: number | string | bigint, currency: string, field: string): number {
  return decimalToCents(minorUnitsToDecimal(minor, currency, field), field);
}

/** The exact product a × b (price × weighed quantity); round only when converting to cents. */
export function mulDecimal(a: Decimal, b: Decimal): Decimal {
  checkDecimal(a);
  checkDecimal(b);
  return { units: a.units * b.units, scale: a.scale + b.scale };
}

/**
 * d / divisor in cents, rounded once (Clover: price × unitQty / 1000, with unitQty in thousandths).
 * A zero divisor is a ValidationError on `field`.
 */
export function divDecimalToCents(d: Decimal, divisor: bigint, field: string): number {
  checkDecimal(d);
  if (divisor === 0n) throw ValidationError.field(field, 'cannot divide an amount by zero');
  return centsToSafeNumber(divRoundHalfAwayFromZero(d.units * 100n, pow10(d.scale) * divisor), field);
}

/**
 * `ofCents` × `partCents` / `wholeCents`, rounded once, half away from zero: the share of a Check
 * that a refund of `partCents` out of `wholeCents` paid stands for (a refund measured pro rata,
 * without the POS saying which part of it was tax or tip). Integers in, integer out; the product is
 * taken in bigint, so it is exact whatever the sizes. A zero or negative whole is a ValidationError.
 */
export function proRataCents(partCents: number, wholeCents: number, ofCents: number, field: string): number {
  for (const v of [partCents, wholeCents, ofCents]) if (!Number.isSafeInteger(v)) throw new RangeError(`cents must be safe integers, got ${String(v)}`);
  if (wholeCents <= 0) throw ValidationError.field(field, `cannot be measured against a total of ${wholeCents} cents`);
  return centsToSafeNumber(divRoundHalfAwayFromZero(BigInt(partCents) * BigInt(ofCents), BigInt(wholeCents)), field);
}

/** Exact text of a Decimal without exponent: {units: -5n, scale: 3} → "-0.005". */
export function decimalToString(d: Decimal): string {
  checkDecimal(d);
  const negative = d.units < 0n;
  const digits = (negative ? -d.units : d.units).toString().padStart(d.scale + 1, '0');
  const text = d.scale === 0 ? digits : `${digits.slice(0, -d.scale)}.${digits.slice(-d.scale)}`;
  return negative ? `-${text}` : text;
}

/** 1999 → "19.99", -5 → "-0.05", 0 → "0.00". `cents` must be a safe integer (else RangeError: a bug). */
export function centsToDecimalString(cents: number): string {
  if (!Number.isSafeInteger(cents)) throw new RangeError(`cents must be a safe integer, got ${String(cents)}`);
  return decimalToString({ units: BigInt(cents), scale: 2 });
}

// ------------------------------------------------------------------ money as a person reads it

/** The minus sign money is shown with (U+2212), as a receipt prints it, not a hyphen. */
const MINUS = '\u2212';

/**
 * An exact decimal in the currency's own decimals (ISO 4217 exponent: USD 2, JPY 0, KWD 3): padded to
 * them, or cut down to them only where nothing is lost (JPY 1.50 stays "1.50": what a weighed line
 * can leave), never rounded.
 */
function inCurrencyDecimals(d: Decimal, currency: string | undefined): string {
  const exponent = currency === undefined ? 2 : (currencyExponent(currency) ?? 2);
  if (d.scale <= exponent) return decimalToString({ units: d.units * pow10(exponent - d.scale), scale: exponent });
  const step = pow10(d.scale - exponent);
  return decimalToString(d.units % step === 0n ? { units: d.units / step, scale: exponent } : d);
}

/**
 * Cents (hundredths of a major unit whatever the currency: the loyalty service's unit) as the
 * currency's own major-unit text, exactly: USD 5997 → "59.97", JPY 50000 → "500", KWD 123 → "1.230".
 * A zero-decimal currency keeps the cents a weighed line can leave (JPY 150 → "1.50").
 */
export function majorUnits(cents: number, currency: string): string {
  if (!Number.isSafeInteger(cents)) throw new RangeError(`cents must be a safe integer, got ${String(cents)}`);
  return inCurrencyDecimals({ units: BigInt(cents), scale: 2 }, currency);
}

/** Major-unit text as a person reads it: the minus a receipt prints, and the code after it. */
function shown(text: string, currency: string | undefined): string {
  return `${text.startsWith('-') ? `${MINUS}${text.slice(1)}` : text}${currency ? ` ${currency}` : ''}`;
}

/**
 * Check cents (the decimal amount × 100 in every currency, THE RULE above) as the money they are:
 * 5997 USD → "59.97 USD", 50000 JPY → "500 JPY", 123 KWD → "1.230 KWD", -5 → "−0.05". The console
 * shows what this writes: the browser does no arithmetic on amounts.
 */
export function formatCents(cents: number, currency?: string): string {
  if (!Number.isSafeInteger(cents)) throw new RangeError(`cents must be a safe integer, got ${String(cents)}`);
  return shown(inCurrencyDecimals({ units: BigInt(cents), scale: 2 }, currency), currency);
}

/** A major-unit amount (the history's `purchaseSum`: 8.4 is 8.40 USD), read exactly from its text, as `formatCents` shows money; '' for what is not a finite amount. */
export function formatMajor(major: number | null | undefined, currency?: string): string {
  const d = major === null || major === undefined ? undefined : tryParseDecimal(major);
  return d ? shown(inCurrencyDecimals(d, currency), currency) : '';
}

/** "325 cents", "a 5666-cent Check", "recorded 5997" after "N cents, " in the bridge's own words. */
const CENTS_IN_TEXT = /(?<cents>-?\b\d{1,16})(?<unit> cents?\b|-cent\b)|(?<=\d cents, recorded )(?<recorded>\d{1,16})\b/g;

/**
 * The bridge's words (a history line, a why, an error) with every amount it wrote in cents shown as
 * the money it is in `currency` (`formatCents`): "refund of 325 cents" → "refund of 3.25 USD".
 * Ledger lines written long ago keep their cents; they are worded at the answer, once, here.
 */
export function moneyInText(text: string, currency?: string): string {
  return text.replace(CENTS_IN_TEXT, (whole, cents: string | undefined, _unit: string | undefined, recorded: string | undefined) => {
    const n = Number(cents ?? recorded);
    if (!Number.isSafeInteger(n)) return whole;
    // "a 5666-cent Check" reads "a 56.66 USD Check".
    return formatCents(n, currency);
  });
}

/**
 * `a - b` for two numbers the loyalty service wrote (a card's balance and an operation's points,
 * which may carry decimals), computed on their exact decimal text: 12.3 - 2.1 is 10.2, never
 * 10.200000000000001. Undefined for anything not a finite number.
 */
export function exactDifference(a: number, b: number): number | undefined {
  const x = tryParseDecimal(a);
  const y = tryParseDecimal(b);
  if (!x || !y) return undefined;
  const scale = Math.max(x.scale, y.scale);
  return Number(decimalToString({ units: x.units * pow10(scale - x.scale) - y.units * pow10(scale - y.scale), scale }));
}

/**
 * Whether a major-unit amount (e.g. an upstream operation's `purchaseSum` 19.99) is exactly
 * `cents` / 100, compared as decimals through the number's text, never by float arithmetic.
 * Anything unparsable, or cents that are not a safe integer, compares unequal.
 */
export function centsEqualsMajor(cents: number, major: number | string): boolean {
  if (!Number.isSafeInteger(cents)) return false;
  const d = tryParseDecimal(major);
  if (!d) return false;
  return BigInt(cents) * pow10(d.scale) === d.units * 100n;
}

/**
 * True when the value is an integer ("3", "3.000", 3, "-2", "1e3"); false for "1.70000", 2.5 and
 * anything unparsable. Sign is not judged here: callers check quantity > 0 themselves.
 */
export function isWholeNumber(input: string | number): boolean {
  const d = tryParseDecimal(input);
  return d !== undefined && d.units % pow10(d.scale) === 0n;
}

/** Returns `code` when it is an accepted ISO 4217 code (three uppercase letters, see currencies.ts). */
export function assertCurrency(code: unknown, field: string): string {
  if (typeof code === 'string' && isIsoCurrency(code)) return code;
  throw ValidationError.field(field, `must be an ISO 4217 currency code in capitals such as "USD", got ${show(code)}`);
}
