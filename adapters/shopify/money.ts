/**
 * Shopify money → cents. Shopify states most amounts twice: the plain field in the shop's
 * currency ("59.97", or a JSON number on refund lines: `subtotal: 143.97`) and its `*_set` twin
 * `{shop_money, presentment_money}`. Old payloads (before 2019) have only the plain field; a
 * stripped-down one might have only the set. Either is read; where both are present they must
 * agree to the cent, so a payload whose two statements disagree fails loudly instead of the bridge
 * picking one. Conversion and its single rounding rule are `src/money.ts`'s (real Shopify text
 * such as "130.64999999999998" becomes 13065): nothing here rounds.
 */
import { ValidationError } from '../../src/errors.js';
import { centsToDecimalString, nonNegativeCents, toCents } from '../../src/money.js';
import type { Amount, MoneySet } from './schema.js';

export interface MoneyOptions {
  /** Order adjustments are signed (a shipping refund is "-5.00"); everything else must be ≥ 0. */
  signed?: boolean;
  /** The shop currency the amount must be in, when it is known. */
  currency?: string;
}

/** Dotted path under an optional prefix (`order.` when the API's wrapper was sent). */
export function at(prefix: string, path: string): string {
  return prefix ? `${prefix}.${path}` : path;
}

/** The amount in the shop's currency, in cents, from `field` and/or `field_set`; undefined when neither is present. */
export function shopCents(plain: Amount | null | undefined, set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): number | undefined {
  const convert = options.signed ? toCents : nonNegativeCents;
  const fromPlain = plain === null || plain === undefined ? undefined : convert(plain, field);
  let fromSet: number | undefined;
  if (set) {
    const code = set.shop_money.currency_code;
    if (options.currency && code && code !== options.currency) {
      throw ValidationError.field(`${field}_set.shop_money.currency_code`, `is ${code}, but the order's currency is ${options.currency}`);
    }
    fromSet = convert(set.shop_money.amount, `${field}_set.shop_money.amount`);
  }
  if (fromPlain !== undefined && fromSet !== undefined && fromPlain !== fromSet) {
    throw ValidationError.field(
      `${field}_set.shop_money.amount`,
      `says ${centsToDecimalString(fromSet)} but ${field} says ${centsToDecimalString(fromPlain)}: the two shop-currency amounts must agree`,
    );
  }
  return fromPlain ?? fromSet;
}

/** Like `shopCents`, for amounts that must be present. */
export function requiredShopCents(plain: Amount | null | undefined, set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): number {
  const cents = shopCents(plain, set, field, options);
  if (cents === undefined) throw ValidationError.field(field, 'is required');
  return cents;
}

/** The buyer-currency twin of a `*_set`, when the payload states it. */
export function presentmentCents(set: MoneySet | null | undefined, field: string, options: MoneyOptions = {}): { currency: string; cents: number } | undefined {
  const bag = set?.presentment_money;
  if (!bag?.currency_code) return undefined;
  const convert = options.signed ? toCents : nonNegativeCents;
  return { currency: bag.currency_code, cents: convert(bag.amount, `${field}_set.presentment_money.amount`) };
}

export function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

export function show(cents: number): string {
  return centsToDecimalString(cents);
}
