/**
 * Toast's own shapes, as zod schemas at the edge (orders API v2 `Order`, and the webhook message
 * `{timestamp, eventCategory, eventType, guid, details}`). Only the fields the bridge reads are
 * declared; everything else Toast sends is ignored.
 *
 * Money: Toast sends JSON numbers (doubles) in major units (`"amount": 1.06`) and no currency
 * (pos-facts "Money"). Each amount is read through its shortest decimal text by src/kernel/money.ts and
 * converted to integer cents there, so `19.99` is 1999 and never `19.99 * 100`.
 *
 * Nullability: Toast writes `null` for absent references and objects (`"refund": null`,
 * `"appliedLoyaltyInfo": null`, `"item": null` on gift cards and special requests), so optional
 * fields are `nullish`. Fields that are required only in some states (a selection's `price`
 * unless it is voided, a check's `amount` unless it is voided) are checked in checkout.ts where the
 * state is known.
 */
import { z } from 'zod';
import { nonNegativeCents, toCents } from '../../src/kernel/money.js';
import { issueFrom } from '../../src/kernel/validation.js';

/** Major units (JSON number, or decimal text) → cents; the ValidationError lands on the field's path. */
function centsOf(convert: (value: string | number) => number) {
  return z.union([z.number(), z.string()], { error: 'must be an amount in major units (a JSON number such as 1.06)' }).transform((value, ctx) => {
    try {
      return convert(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: issueFrom(error) });
      return z.NEVER;
    }
  });
}

/** Amounts that cannot be negative (prices, tax, tips, discounts, refunds). */
export const cents = centsOf((v) => nonNegativeCents(v, ''));
/** Service charges of category CASH_ROUNDING adjust a check down as well as up. */
export const signedCents = centsOf((v) => toCents(v, ''));

const guid = z.string({ error: 'must be a Toast GUID (a non-empty string)' }).trim().min(1, 'must not be empty').max(128, 'must be at most 128 characters');
const text = z.string().max(1024).nullish();
const date = z.string().max(64).nullish();
const flag = z.boolean().nullish();
/** `nullish` arrays read as empty. */
const list = <T extends z.ZodType>(item: T, max: number) =>
  z
    .array(item)
    .max(max)
    .nullish()
    .transform((v) => v ?? []);

const Reference = z.object({ guid: guid.nullish() }).nullish();

export const RefundTransaction = z.object({ guid: guid.nullish() }).nullish();

/** Per selection or service charge: what was refunded, tax apart (orders API `RefundDetails`). */
export const RefundDetails = z
  .object({
    refundAmount: cents.nullish(),
    taxRefundAmount: cents.nullish(),
    refundTransaction: RefundTransaction,
  })
  .nullish();
export type RefundDetails = z.infer<typeof RefundDetails>;

export const AppliedDiscount = z.object({
  name: text,
  discountAmount: cents.nullish(),
  nonTaxDiscountAmount: cents.nullish(),
  processingState: z.string().nullish(),
});

export const Selection = z.object({
  guid: guid.nullish(),
  item: Reference,
  itemGroup: Reference,
  displayName: text,
  /** A double: a counting number for discrete items, a decimal for items sold by weight. */
  quantity: z.union([z.number(), z.string()], { error: 'must be a number greater than 0' }).nullish(),
  /** Net line price: after item and check discounts, quantity and modifiers; tax excluded. */
  price: cents.nullish(),
  preDiscountPrice: cents.nullish(),
  tax: cents.nullish(),
  voided: flag,
  deferred: flag,
  appliedDiscounts: list(AppliedDiscount, 100),
  refundDetails: RefundDetails,
});
export type Selection = z.infer<typeof Selection>;

export const AppliedServiceCharge = z.object({
  guid: guid.nullish(),
  name: text,
  /** The final applied amount, tax excluded. */
  chargeAmount: signedCents.nullish(),
  gratuity: flag,
  serviceChargeCategory: z.string().nullish(),
  refundDetails: RefundDetails,
});
export type AppliedServiceCharge = z.infer<typeof AppliedServiceCharge>;

export const Refund = z
  .object({
    /** Tax included, tip excluded. */
    refundAmount: cents.nullish(),
    tipRefundAmount: cents.nullish(),
    refundDate: date,
    refundTransaction: RefundTransaction,
  })
  .nullish();

export const Payment = z.object({
  guid: guid.nullish(),
  amount: cents.nullish(),
  tipAmount: cents.nullish(),
  paymentStatus: z.string().nullish(),
  voidInfo: z.unknown().optional(),
  /** An unknown value is refused: it could hide a refund. */
  refundStatus: z.enum(['NONE', 'PARTIAL', 'FULL'], { error: 'must be NONE, PARTIAL or FULL' }).nullish(),
  refund: Refund,
});
export type Payment = z.infer<typeof Payment>;

export const Customer = z
  .object({
    guid: guid.nullish(),
    firstName: text,
    lastName: text,
    phone: text,
    phoneCountryCode: text,
    email: text,
  })
  .nullish();
export type Customer = z.infer<typeof Customer>;

export const AppliedLoyaltyInfo = z
  .object({
    loyaltyIdentifier: text,
    vendor: z.string().nullish(),
  })
  .nullish();

export const Check = z.object({
  guid: guid.nullish(),
  /** After discounts, service charges included; gratuity and tax excluded. */
  amount: cents.nullish(),
  taxAmount: cents.nullish(),
  totalAmount: cents.nullish(),
  /** An unknown value is refused: whether the check is paid decides whether to accrue. */
  paymentStatus: z.enum(['OPEN', 'PAID', 'CLOSED'], { error: 'must be OPEN, PAID or CLOSED' }).nullish(),
  paidDate: date,
  closedDate: date,
  voided: flag,
  deleted: flag,
  selections: list(Selection, 2000),
  appliedDiscounts: list(AppliedDiscount, 100),
  appliedServiceCharges: list(AppliedServiceCharge, 100),
  payments: list(Payment, 200),
  customer: Customer,
  appliedLoyaltyInfo: AppliedLoyaltyInfo,
});
export type Check = z.infer<typeof Check>;

export const Order = z.object({
  guid,
  openedDate: date,
  paidDate: date,
  closedDate: date,
  voided: flag,
  voidDate: date,
  deleted: flag,
  checks: z.array(Check, { error: 'is required: the Toast order with its checks' }).min(1, 'must hold at least one check').max(500),
});
export type Order = z.infer<typeof Order>;

/** The webhook message body every Toast event category shares (developer guide "Message data schema"). */
export const Envelope = z.object({
  guid: guid.nullish(),
  eventType: z.string().max(128).nullish(),
  eventCategory: z.string().max(128).nullish(),
  timestamp: z.string().max(64).nullish(),
  details: z.unknown().optional(),
});
export type Envelope = z.infer<typeof Envelope>;
