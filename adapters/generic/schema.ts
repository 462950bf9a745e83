/**
 * The generic payload (bridge-contract "The generic payload"), as zod schemas at the edge. Money is
 * major units as decimal text or JSON numbers, converted to cents here; `total` is the Check amount
 * itself: after discounts, service charges included, tax and tip excluded.
 */
import { z } from 'zod';
import { isIsoCurrency } from '../../src/currencies.js';
import { ValidationError } from '../../src/errors.js';
import { nonNegativeCents, parseDecimal, type Decimal } from '../../src/money.js';
import { hasControlCharacter } from '../../src/transaction-id.js';
import { issueFrom } from '../../src/validation.js';

// Control characters are refused before trimming: an id ending in a newline is not quietly another order's id.
const id = z
  .string()
  .refine((s) => !hasControlCharacter(s), 'must not contain control characters')
  .trim()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters');

const amount = z.union([z.string(), z.number()], { error: 'must be a decimal amount (string or number)' }).transform((value, ctx) => {
  try {
    return nonNegativeCents(value, '');
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: issueFrom(error) });
    return z.NEVER;
  }
});

const unitPrice = z.union([z.string(), z.number()], { error: 'must be a decimal amount (string or number)' }).transform((value, ctx): Decimal => {
  try {
    const d = parseDecimal(value, '');
    if (d.units < 0n) throw ValidationError.field('', 'must not be negative');
    return d;
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: issueFrom(error) });
    return z.NEVER;
  }
});

const quantity = z.union([z.string(), z.number()], { error: 'must be a number greater than 0' }).refine((q) => {
  try {
    return parseDecimal(q, '').units > 0n;
  } catch {
    return false;
  }
}, 'must be a number greater than 0');

const timestamp = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time' });
const nullableText = z.string().max(256).nullish();

export const GenericCheckout = z.strictObject({
  orderId: id,
  storeId: id.optional(),
  currency: z.string({ error: 'must be an ISO 4217 code' }).refine(isIsoCurrency, 'must be an ISO 4217 code such as USD'),
  total: amount,
  tax: amount.optional(),
  discount: amount.optional(),
  tip: amount.optional(),
  serviceCharge: amount.optional(),
  openedAt: timestamp.optional(),
  closedAt: timestamp.optional(),
  customer: z
    .strictObject({ phone: nullableText, email: nullableText, cardSerial: nullableText, firstName: nullableText, lastName: nullableText })
    .optional(),
  items: z
    .array(
      z.strictObject({
        id: id.optional(),
        groupId: id.optional(),
        name: z.string().max(256).optional(),
        quantity,
        unitPrice: unitPrice.optional(),
        total: amount.optional(),
      }),
    )
    .max(1000)
    .default([]),
});
export type GenericCheckout = z.infer<typeof GenericCheckout>;

export const GenericRefund = z
  .strictObject({
    orderId: id,
    storeId: id.optional(),
    refundId: id.optional(),
    amount: amount.optional(),
    items: z.array(z.strictObject({ id, quantity: z.number().int('must be a whole number').positive('must be greater than 0'), total: amount })).min(1).max(1000).optional(),
  })
  .refine((r) => r.refundId !== undefined || (r.amount === undefined && r.items === undefined), {
    path: ['refundId'],
    message: 'is required for a partial refund (amount or items)',
  });
export type GenericRefund = z.infer<typeof GenericRefund>;
