/**
 * Loyverse's own shapes, as the API and webhooks send them (developer.loyverse.com, Receipts and
 * Customers; the real `receipts.update` test event in fixtures/pos/loyverse). Objects are loose:
 * Loyverse adds fields over time and the bridge must not refuse a receipt for a field it does not
 * use. Only the fields the translation relies on are validated, and those strictly.
 *
 * Money is a JSON number in major units ("Japan has no decimals", pos-facts): each amount is read
 * here as an exact Decimal through `parseDecimal` (the number's shortest text, never float math).
 * Signs are judged later, in checkout.ts, because a refund receipt's amounts are magnitudes.
 */
import { z } from 'zod';
import { parseDecimal, type Decimal } from '../../src/kernel/money.js';
import { issueFrom } from '../../src/kernel/validation.js';

const ZERO: Decimal = { units: 0n, scale: 0 };

const id = z.string({ error: 'must be a non-empty string' }).trim().min(1, 'must not be empty').max(128, 'must be at most 128 characters');
const optionalText = z.string().max(512).nullish();
const timestamp = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time' }).nullish();

/** A major-unit amount (JSON number, or decimal text) as an exact Decimal, sign kept. */
export const money = z.union([z.number(), z.string()], { error: 'must be an amount (a JSON number in major units)' }).transform((value, ctx): Decimal => {
  try {
    return parseDecimal(value, '');
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: issueFrom(error) });
    return z.NEVER;
  }
});

/** Absent and null mean zero for the optional totals (tip, surcharge, discounts, taxes). */
const moneyOrZero = money.nullish().transform((d) => d ?? ZERO);

/** Quantity stays text: `toSelection` applies the one quantity rule (fractional → 1 at the line total). */
const quantity = z.union([z.number(), z.string()], { error: 'must be a number greater than 0' }).transform((value, ctx): Decimal => {
  try {
    return parseDecimal(value, '');
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: issueFrom(error) });
    return z.NEVER;
  }
});

/** A tax applied to a line or to the receipt. `type` says whether the price contains it. */
export const LoyverseTax = z.looseObject({
  id: z.string().nullish(),
  type: z.string().nullish(),
  name: optionalText,
  money_amount: moneyOrZero,
});
export type LoyverseTax = z.infer<typeof LoyverseTax>;

export const LoyverseLineItem = z.looseObject({
  id: z.string().nullish(),
  item_id: z.string().max(128).nullish(),
  variant_id: z.string().max(128).nullish(),
  item_name: optionalText,
  variant_name: optionalText,
  sku: optionalText,
  quantity,
  /** Unit price as listed (before discounts; tax-inclusive where the tax is INCLUDED). */
  price: money.nullish(),
  gross_total_money: money.nullish(),
  /** The line after its discounts. */
  total_money: money,
  total_discount: moneyOrZero,
  line_taxes: z.array(LoyverseTax).max(100).nullish().transform((t) => t ?? []),
});
export type LoyverseLineItem = z.infer<typeof LoyverseLineItem>;

export const RECEIPT_TYPES = ['SALE', 'REFUND'] as const;
export type ReceiptType = (typeof RECEIPT_TYPES)[number];
const receiptType = z.enum(RECEIPT_TYPES, { error: 'must be "SALE" or "REFUND"' });

/** The identity of a receipt: what a webhook delivery needs to route and deduplicate it. */
export const LoyverseReceiptIdentity = z.looseObject({
  receipt_number: id,
  receipt_type: receiptType,
  refund_for: z.string().max(128).nullish(),
  /** Receipt numbers repeat across stores and accounts; the store's UUID makes them unique. */
  store_id: id,
  created_at: timestamp,
  updated_at: timestamp,
  cancelled_at: timestamp,
});
export type LoyverseReceiptIdentity = z.infer<typeof LoyverseReceiptIdentity>;

export const LoyverseReceipt = LoyverseReceiptIdentity.extend({
  receipt_date: timestamp,
  total_money: money,
  total_tax: moneyOrZero,
  total_discount: moneyOrZero,
  tip: moneyOrZero,
  surcharge: moneyOrZero,
  customer_id: z.string().max(128).nullish(),
  line_items: z.array(LoyverseLineItem, { error: 'must be an array of line items' }).max(1000),
});
export type LoyverseReceipt = z.infer<typeof LoyverseReceipt>;

/** The webhook delivery: `{ merchant_id, type, created_at, receipts: [...] }` (batched). */
export const LoyverseWebhookEnvelope = z.looseObject({
  merchant_id: z.string().max(128).nullish(),
  type: z.string({ error: 'must be the event type, e.g. "receipts.update"' }).min(1, 'must not be empty').max(128),
  created_at: z.string().max(64).nullish(),
});

/** GET /v1.0/customers/{id}: the customer, bare (a `{ customer }` wrapper is accepted too). */
export const LoyverseCustomer = z.looseObject({
  id: z.string().nullish(),
  name: optionalText,
  email: optionalText,
  phone_number: optionalText,
  customer_code: optionalText,
});
export type LoyverseCustomer = z.infer<typeof LoyverseCustomer>;
