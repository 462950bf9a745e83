/**
 * What a caller asks the fake POS APIs to hold, said once for every POS (docs/simulator-pos-apis.md,
 * "Control API"): an order as lines with unit prices, discounts and taxes in the currency's minor
 * units (integers: 450 is 4.50 USD and ¥450), a tip, a customer; a refund as lines and quantities of
 * such an order. Each POS's module writes these as that POS's own objects (Square Money, Shopify
 * decimal strings, Clover integer cents, Toast and Loyverse JSON numbers in major units).
 *
 * The arithmetic here is integer arithmetic on minor units, and the decimal text of an amount is
 * made from those integers, never by dividing a float: a fake that rounded differently from the POS
 * would hide the very mistakes the adapters are tested for.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { decimalToString, minorUnitsToDecimal } from '../../src/kernel/money.js';

const minor = z.number().int('must be an integer amount in minor units').nonnegative('must not be negative').max(1e12);
const isoTime = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time with Z or an offset' });

export const LineInput = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    /** Price of one unit, tax excluded, in minor units. */
    unitPrice: minor,
    /** Whole units; weighed goods are not modelled. */
    quantity: z.number().int().positive().max(1000).default(1),
    /** Taken off the line (unitPrice × quantity), minor units. */
    discount: minor.default(0),
    /** Added on top of the line after its discount, minor units. */
    tax: minor.default(0),
    sku: z.string().trim().min(1).max(64).optional(),
    /** The POS's catalogue id of what was sold (Square variation, Shopify variant, Clover item, Toast menu item, Loyverse variant). */
    itemId: z.string().trim().min(1).max(64).optional(),
  })
  .refine((l) => l.discount <= l.unitPrice * l.quantity, { message: 'discount must not exceed unitPrice × quantity', path: ['discount'] });
export type LineInput = z.infer<typeof LineInput>;

export const CustomerInput = z.strictObject({
  id: z.string().trim().min(1).max(64).optional(),
  firstName: z.string().trim().min(1).max(100).optional(),
  lastName: z.string().trim().min(1).max(100).optional(),
  phone: z.string().trim().min(1).max(40).optional(),
  email: z.string().trim().min(1).max(320).optional(),
  /** Loyverse `customer_code` (where a merchant may keep a loyalty card serial). */
  code: z.string().trim().min(1).max(64).optional(),
});
export type CustomerInput = z.infer<typeof CustomerInput>;

export const OrderInput = z.strictObject({
  /** The POS's id for it; default a new id in that POS's format. */
  id: z.string().trim().min(1).max(64).optional(),
  lines: z.array(LineInput).min(1).max(100),
  tip: minor.default(0),
  /** ISO 4217; default the account's. Toast and Loyverse orders state none (the account's is used for the amounts). */
  currency: z.string().regex(/^[A-Z]{3}$/).optional(),
  /** An existing customer's id, or a new customer made with the order. */
  customer: z.union([z.string().trim().min(1).max(64), CustomerInput]).optional(),
  createdAt: isoTime.optional(),
  /** Default createdAt: the time list filters and paging order by. */
  updatedAt: isoTime.optional(),
  /** Not paid yet (Square OPEN, Shopify pending, Clover open, Toast check OPEN); Loyverse receipts are always paid. */
  open: z.boolean().default(false),
  /** Square location id / Loyverse store id; default the account's first. */
  location: z.string().trim().min(1).max(64).optional(),
  /** Shopify only: archived (closed_at set), as Shopify POS does to its sales; default true for paid orders. */
  archived: z.boolean().optional(),
});
export type OrderInput = z.infer<typeof OrderInput>;
export type OrderRequest = z.input<typeof OrderInput>;

export const RefundInput = z.strictObject({
  orderId: z.string().trim().min(1).max(64),
  /** The POS's id for the refund; default a new one. */
  id: z.string().trim().min(1).max(64).optional(),
  /** Lines of the order (index into its `lines`) and units returned; default every unit not yet refunded. */
  lines: z
    .array(z.strictObject({ line: z.number().int().nonnegative(), quantity: z.number().int().positive().optional() }))
    .min(1)
    .optional(),
  at: isoTime.optional(),
});
export type RefundInput = z.infer<typeof RefundInput>;
export type RefundRequest = z.input<typeof RefundInput>;

/**
 * One refunded line, measured: units `firstUnit` … `firstUnit + quantity − 1` of the line; `net` is
 * after discount and before tax, `tax` the tax on them, both in minor units.
 */
export interface RefundedLine {
  line: number;
  firstUnit: number;
  quantity: number;
  net: number;
  tax: number;
}

/**
 * A line's discount and tax spread over its units (`shareOf`): what unit `unit` of the line costs
 * after its discount, and the tax on it. Clover writes one line item per unit with exactly these
 * shares; every POS measures a refund of some units as the sum of theirs, so a line refunded in
 * parts adds up to the whole line.
 */
export function unitNet(line: LineInput, unit: number): number {
  return line.unitPrice - shareOf(line.discount, line.quantity, unit);
}

export function unitTax(line: LineInput, unit: number): number {
  return shareOf(line.tax, line.quantity, unit);
}

/** What one order has had refunded so far: units are refunded in order, first to last, per line. */
export class RefundLedger {
  readonly #units: number[];

  constructor(private readonly lines: readonly LineInput[]) {
    this.#units = lines.map(() => 0);
  }

  /** Measures a refund of `request` (every unit left when undefined) and books it; RangeError when it asks for more than is left. */
  take(request: RefundInput['lines']): RefundedLine[] {
    const wanted = request ?? this.lines.map((l, i) => ({ line: i, quantity: l.quantity - this.#units[i]! })).filter((r) => r.quantity > 0);
    if (wanted.length === 0) throw new RangeError('everything in this order was refunded already');
    const seen = new Set<number>();
    const out = wanted.map(({ line, quantity }): RefundedLine => {
      const sold = this.lines[line];
      if (sold === undefined) throw new RangeError(`the order has no line ${line}`);
      if (seen.has(line)) throw new RangeError(`line ${line} is named twice`);
      seen.add(line);
      const firstUnit = this.#units[line]!;
      const left = sold.quantity - firstUnit;
      const units = quantity ?? left;
      if (units < 1 || units > left) throw new RangeError(`line ${line} has ${left} of ${sold.quantity} units left to refund, not ${units}`);
      let net = 0;
      let tax = 0;
      for (let u = firstUnit; u < firstUnit + units; u++) {
        net += unitNet(sold, u);
        tax += unitTax(sold, u);
      }
      return { line, firstUnit, quantity: units, net, tax };
    });
    for (const r of out) this.#units[r.line]! += r.quantity;
    return out;
  }

  /** True when every unit of every line has been refunded. */
  get complete(): boolean {
    return this.lines.every((l, i) => this.#units[i] === l.quantity);
  }
}

/** A line after its discount, before tax, minor units. */
export function lineNetOf(line: LineInput): number {
  return line.unitPrice * line.quantity - line.discount;
}

export interface OrderTotals {
  /** Σ lines after discounts, tax excluded: what the loyalty Check's amount is made from. */
  net: number;
  discount: number;
  tax: number;
  tip: number;
  /** What the buyer paid before the tip: net + tax. */
  total: number;
}

export function totalsOf(order: OrderInput): OrderTotals {
  const net = order.lines.reduce((s, l) => s + lineNetOf(l), 0);
  const discount = order.lines.reduce((s, l) => s + l.discount, 0);
  const tax = order.lines.reduce((s, l) => s + l.tax, 0);
  return { net, discount, tax, tip: order.tip, total: net + tax };
}

/** `total` split over `parts` units: the first `total % parts` units carry one more minor unit. */
export function shareOf(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

/** Minor units as decimal text with the currency's exponent: 450 USD → "4.50", 450 JPY → "450", -5 USD → "-0.05". */
export function decimalText(minorUnits: number, currency: string): string {
  if (!Number.isSafeInteger(minorUnits)) throw new RangeError(`${minorUnits} is not a whole number of minor units`);
  return decimalToString(minorUnitsToDecimal(minorUnits, currency, 'amount'));
}

/**
 * Minor units as a JSON number in major units (Toast, Loyverse, Shopify refund lines): parsed from
 * the decimal text, so 1999 USD is the double nearest 19.99 and JSON writes it "19.99".
 */
export function majorNumber(minorUnits: number, currency: string): number {
  return Number(decimalText(minorUnits, currency));
}

export function parseTime(text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) throw new RangeError(`${text} is not a date-time`);
  return ms;
}

/** `length` characters drawn uniformly from `alphabet` (at most 256 characters). */
export function randomChars(alphabet: string, length: number): string {
  const out: string[] = [];
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // Rejection sampling keeps every character equally likely.
      if (byte < 256 - (256 % alphabet.length)) out.push(alphabet[byte % alphabet.length]!);
      if (out.length === length) break;
    }
  }
  return out.join('');
}

export const uuid = (): string => randomUUID();

/** An opaque cursor: base64url JSON, as the POSes' own cursors are opaque strings. */
export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

export function decodeCursor<T>(text: string, schema: z.ZodType<T>): T | undefined {
  try {
    const parsed = schema.safeParse(JSON.parse(Buffer.from(text, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A single query parameter's value: undefined when absent, an array when repeated (Express's parser). */
export function queryValue(query: unknown, name: string): string | string[] | undefined {
  const value = (query as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  return String(value);
}
