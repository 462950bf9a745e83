/**
 * The generic adapter: the bridge's own payload (bridge-contract "The generic payload") for POS
 * systems without an adapter. Money is major units as decimal text or JSON numbers; `total` is the
 * Check amount itself: after discounts, service charges included, tax and tip excluded.
 */
import { z } from 'zod';
import { normalizeCustomer } from '../../src/customer.js';
import { ValidationError } from '../../src/errors.js';
import { isIsoCurrency } from '../../src/currencies.js';
import { nonNegativeCents, parseDecimal, type Decimal } from '../../src/money.js';
import { nonZero } from '../../src/pos/check.js';
import { toSelection } from '../../src/selection.js';
import { hasControlCharacter } from '../../src/transaction-id.js';
import { issueFrom, parseWith } from '../../src/validation.js';
import type { AdapterContext, CheckoutIntent, PosAdapter, RefundIntent } from '../../src/pos/contract.js';

const id = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .refine((s) => !hasControlCharacter(s), 'must not contain control characters');

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

export const genericAdapter: PosAdapter = {
  name: 'generic',

  parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
    const order = parseWith(GenericCheckout, body);
    const selections = order.items.map((item, i) =>
      toSelection({ id: item.id, groupId: item.groupId, name: item.name, quantity: item.quantity, unitPrice: item.unitPrice, totalCents: item.total }, `items.${i}`),
    );
    return {
      orderId: order.orderId,
      scope: order.storeId,
      customer: normalizeCustomer(order.customer, context.defaultPhoneRegion),
      check: {
        amount: order.total,
        currency: order.currency,
        selections,
        externalTransactionId: order.orderId,
        ...(order.openedAt ? { checkOpenedAt: order.openedAt } : {}),
        ...(order.closedAt ? { checkClosedAt: order.closedAt } : {}),
        ...nonZero('taxAmount', order.tax),
        ...nonZero('discountAmount', order.discount),
        ...nonZero('tipAmount', order.tip),
        ...nonZero('serviceAmount', order.serviceCharge),
      },
    };
  },

  parseRefund(body: unknown): RefundIntent {
    const refund = parseWith(GenericRefund, body);
    return {
      orderId: refund.orderId,
      scope: refund.storeId,
      refundId: refund.refundId,
      amountCents: refund.amount,
      items: refund.items?.map((item) => ({ id: item.id, quantity: item.quantity, totalCents: item.total })),
    };
  },
};
