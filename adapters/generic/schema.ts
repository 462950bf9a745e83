/**
 * The generic payload (bridge-contract "The generic payload"), as zod schemas at the edge. Money is
 * major units as decimal text or JSON numbers, converted to cents here; `total` is the Check amount
 * itself: after discounts, service charges included, tax and tip excluded.
 */
import { z } from 'zod';
import { isIsoCurrency } from '../../src/kernel/currencies.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { nonNegativeCents, parseDecimal, type Decimal } from '../../src/kernel/money.js';
import { hasControlCharacter } from '../../src/kernel/transaction-id.js';
import { issueFrom } from '../../src/kernel/validation.js';

// Control characters are refused before trimming: an id ending in a newline is not quietly another order's id.
const id = z
  .string()
  .refine((s) => !hasControlCharacter(s), 'must not contain control characters')
  .trim()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters');

// The descriptions say what a client sends: /openapi.json documents these schemas on their input side.
const decimal = z
  .union([z.string(), z.number()], { error: 'must be a decimal amount (string or number)' })
  .meta({ description: 'Major units, as a decimal string such as "19.99" or a JSON number; converted to integer cents exactly. Not negative.' });

const amount = decimal.transform((value, ctx) => {
  try {
    return nonNegativeCents(value, '');
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: issueFrom(error) });
    return z.NEVER;
  }
});

const unitPrice = decimal.transform((value, ctx): Decimal => {
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
}, 'must be a number greater than 0').meta({ description: 'Greater than 0, as a number or decimal string; a fraction (weighed goods) becomes quantity 1 at the exact line total.' });

const timestamp = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time' });
const nullableText = z.string().max(256).nullish();

export const GenericCheckout = z
  .strictObject({
    orderId: id.meta({ description: "The POS's own order id: with storeId, the order's identity, from which the transactionId is derived." }),
    storeId: id.optional().meta({ description: "Part of the order's identity where order ids repeat across stores." }),
    currency: z
      .string({ error: 'must be an ISO 4217 code' })
      .refine(isIsoCurrency, 'must be an ISO 4217 code such as USD')
      .optional()
      .meta({ description: "ISO 4217 code in capitals, e.g. USD. Without it, the merchant's currency (DEFAULT_CURRENCY for the default merchant), as for every POS whose payload carries none." }),
    total: amount.meta({ description: 'The Check amount: after discounts, service charges included, tax and tip excluded. Major units, as a decimal string or a JSON number.' }),
    tax: amount.optional(),
    discount: amount.optional(),
    tip: amount.optional(),
    serviceCharge: amount.optional(),
    openedAt: timestamp.optional(),
    closedAt: timestamp.optional(),
    customer: z
      .strictObject({ phone: nullableText, email: nullableText, cardSerial: nullableText, firstName: nullableText, lastName: nullableText })
      .optional()
      .meta({ description: 'A phone (national numbers read in DEFAULT_PHONE_REGION), email or card serial finds or registers the card; with none of them the checkout is recorded as skipped.' }),
    items: z
      .array(
        z.strictObject({
          id: id.optional(),
          groupId: id.optional(),
          name: z.string().max(256).optional(),
          quantity,
          unitPrice: unitPrice.optional(),
          total: amount.optional().meta({ description: "The line's total after its own discounts, tax excluded; without it, unitPrice × quantity." }),
        }),
      )
      .max(1000)
      .default([]),
  })
  .meta({ description: 'A closed order from a POS without its own adapter.' });
export type GenericCheckout = z.infer<typeof GenericCheckout>;

export const GenericRefund = z
  .strictObject({
    orderId: id.meta({ description: 'The refunded order, as its checkout named it.' }),
    storeId: id.optional(),
    refundId: id.optional().meta({ description: 'Identifies the refund: the same refundId again changes nothing. Required for a partial refund, optional for a full one; echoed in the answer.' }),
    amount: amount.optional().meta({ description: 'A partial refund of this amount (major units, measured like total: tax and tip excluded).' }),
    items: z
      .array(z.strictObject({ id, quantity: z.number().int('must be a whole number').positive('must be greater than 0'), total: amount }))
      .min(1)
      .max(1000)
      .optional()
      .meta({ description: 'A partial refund of these lines, each taken off its item by id in quantity and total.' }),
  })
  .refine((r) => r.refundId !== undefined || (r.amount === undefined && r.items === undefined), {
    path: ['refundId'],
    message: 'is required for a partial refund (amount or items)',
  })
  .meta({ description: 'Without amount and items the whole order is reversed; with either, a partial refund: the accrual is reversed and what remains accrued again under a linked transactionId.' });
export type GenericRefund = z.infer<typeof GenericRefund>;
