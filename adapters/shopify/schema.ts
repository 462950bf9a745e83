/**
 * Shopify's own payloads, as much of them as the bridge reads (REST Admin API `Order` and
 * `Refund`, which are also the bodies of the `orders/*` and `refunds/create` webhooks). Objects are
 * loose: Shopify adds fields every quarter and old shapes (2016, no `*_set` fields) must still read.
 *
 * Money stays raw here (a decimal string such as "59.97", or a JSON number such as the refund
 * line's `subtotal: 143.97`): `checkout.ts` converts it to cents with the field's full path, after
 * comparing each amount with its `*_set.shop_money` twin where both are present.
 */
import { z } from 'zod';
import { isObject } from '../../src/kernel/validation.js';

/** A Shopify amount as sent: decimal text, or a JSON number read through its shortest text. */
export const Amount = z.union([z.string(), z.number()], { error: 'must be a decimal amount (string or number)' });
export type Amount = z.infer<typeof Amount>;

const MoneyBag = z.looseObject({
  amount: Amount,
  currency_code: z.string({ error: 'must be an ISO 4217 code' }).nullish(),
});

/** `*_set`: the same amount in the shop's currency and in the buyer's (presentment) currency. */
export const MoneySet = z.looseObject({ shop_money: MoneyBag, presentment_money: MoneyBag.nullish() });
export type MoneySet = z.infer<typeof MoneySet>;

/**
 * Shopify ids are 64-bit integers. A JSON number above 2^53 − 1 has already been changed by the
 * JSON parser (Shopify's own "send test notification" order id 820982911946154508 reads as
 * 820982911946154500), so it is refused rather than used as some other order's identity.
 */
export const ShopifyId = z
  .union([z.number(), z.string()], { error: 'must be a Shopify id (a whole number)' })
  .transform((value, ctx): string => {
    if (typeof value === 'number') {
      if (Number.isSafeInteger(value) && value > 0) return String(value);
      ctx.addIssue({
        code: 'custom',
        message: Number.isInteger(value) && value > 0 ? `${value} is above 2^53 − 1: as a JSON number it cannot be read exactly` : 'must be a positive whole number',
      });
      return z.NEVER;
    }
    if (/^[1-9][0-9]{0,19}$/.test(value)) return value;
    ctx.addIssue({ code: 'custom', message: 'must be a positive whole number' });
    return z.NEVER;
  });

const text = z.string().nullish();

export const DiscountAllocation = z.looseObject({ amount: Amount.nullish(), amount_set: MoneySet.nullish() });
export const TaxLine = z.looseObject({ price: Amount.nullish(), price_set: MoneySet.nullish(), title: text });

export const LineItem = z.looseObject({
  id: ShopifyId,
  variant_id: ShopifyId.nullish(),
  product_id: ShopifyId.nullish(),
  sku: text,
  title: text,
  name: text,
  quantity: z.number({ error: 'must be a whole number' }),
  /** What is left of the line after edits and refunds ("the line item's quantity, minus the removed quantity"). */
  current_quantity: z.number({ error: 'must be a whole number' }).nullish(),
  price: Amount,
  price_set: MoneySet.nullish(),
  discount_allocations: z.array(DiscountAllocation).nullish(),
  tax_lines: z.array(TaxLine).nullish(),
});
export type LineItem = z.infer<typeof LineItem>;

export const ShippingLine = z.looseObject({
  price: Amount.nullish(),
  price_set: MoneySet.nullish(),
  discounted_price: Amount.nullish(),
  discounted_price_set: MoneySet.nullish(),
  discount_allocations: z.array(DiscountAllocation).nullish(),
  tax_lines: z.array(TaxLine).nullish(),
});
export type ShippingLine = z.infer<typeof ShippingLine>;

export const Customer = z.looseObject({
  id: ShopifyId.nullish(),
  email: text,
  phone: text,
  first_name: text,
  last_name: text,
});

export const Order = z.looseObject({
  id: ShopifyId,
  currency: text,
  financial_status: text,
  cancelled_at: text,
  created_at: text,
  processed_at: text,
  email: text,
  contact_email: text,
  phone: text,
  customer: Customer.nullish(),
  taxes_included: z.boolean({ error: 'must be true or false' }).nullish(),
  line_items: z.array(LineItem, { error: 'must be the list of the order\'s line items' }),
  shipping_lines: z.array(ShippingLine).nullish(),
  subtotal_price: Amount.nullish(),
  subtotal_price_set: MoneySet.nullish(),
  total_price: Amount.nullish(),
  total_price_set: MoneySet.nullish(),
  total_tax: Amount.nullish(),
  total_tax_set: MoneySet.nullish(),
  total_tip_received: Amount.nullish(),
  original_total_duties_set: MoneySet.nullish(),
  original_total_additional_fees_set: MoneySet.nullish(),
  // The order as it stands after edits, returns and refunds (the plain fields above keep what was sold).
  current_subtotal_price: Amount.nullish(),
  current_subtotal_price_set: MoneySet.nullish(),
  current_total_price: Amount.nullish(),
  current_total_price_set: MoneySet.nullish(),
  current_total_tax: Amount.nullish(),
  current_total_tax_set: MoneySet.nullish(),
  /** The order's refunds as it carries them (REST and the orders/* webhooks): what its current figures subtract besides edits. */
  refunds: z.array(z.lazy(() => OrderRefund)).nullish(),
});
export type Order = z.infer<typeof Order>;

/** The order line a refund line points at, as embedded in the refund (every field may be absent). */
export const RefundedLineItem = z.looseObject({
  id: ShopifyId.nullish(),
  variant_id: ShopifyId.nullish(),
  quantity: z.number().nullish(),
  price: Amount.nullish(),
  price_set: MoneySet.nullish(),
  discount_allocations: z.array(DiscountAllocation).nullish(),
  total_discount: Amount.nullish(),
  tax_lines: z.array(TaxLine).nullish(),
});
export type RefundedLineItem = z.infer<typeof RefundedLineItem>;

export const RefundLineItem = z.looseObject({
  line_item_id: ShopifyId,
  quantity: z.number({ error: 'must be a whole number' }),
  subtotal: Amount.nullish(),
  subtotal_set: MoneySet.nullish(),
  total_tax: Amount.nullish(),
  total_tax_set: MoneySet.nullish(),
  line_item: RefundedLineItem.nullish(),
});
export type RefundLineItem = z.infer<typeof RefundLineItem>;

export const Transaction = z.looseObject({
  amount: Amount,
  kind: z.string({ error: 'must be the transaction kind' }),
  status: text,
  currency: text,
});
export type Transaction = z.infer<typeof Transaction>;

export const OrderAdjustment = z.looseObject({
  kind: text,
  amount: Amount.nullish(),
  amount_set: MoneySet.nullish(),
  tax_amount: Amount.nullish(),
  tax_amount_set: MoneySet.nullish(),
});
export type OrderAdjustment = z.infer<typeof OrderAdjustment>;

/** A refund as its order carries it: only what tells a refund from an edit (its lines' units and subtotals). */
export const OrderRefund = z.looseObject({
  id: ShopifyId.nullish(),
  refund_line_items: z
    .array(
      z.looseObject({
        line_item_id: ShopifyId.nullish(),
        quantity: z.number({ error: 'must be a whole number' }).nullish(),
        subtotal: Amount.nullish(),
        subtotal_set: MoneySet.nullish(),
        total_tax: Amount.nullish(),
        total_tax_set: MoneySet.nullish(),
      }),
    )
    .nullish(),
});
export type OrderRefund = z.infer<typeof OrderRefund>;

export const Refund = z.looseObject({
  id: ShopifyId,
  order_id: ShopifyId,
  refund_line_items: z.array(RefundLineItem).nullish(),
  transactions: z.array(Transaction).nullish(),
  order_adjustments: z.array(OrderAdjustment).nullish(),
  total_duties_set: MoneySet.nullish(),
});
export type Refund = z.infer<typeof Refund>;

/**
 * The REST API answers `{ "order": {…} }` / `{ "refund": {…} }`; webhooks deliver the bare object.
 * Both are accepted (bridge-contract "Translation rules"). A bare order or refund has an `id` and
 * no such key, so the two cannot be confused. Returns the object and the path prefix for errors.
 */
export function unwrap(body: unknown, wrapper: 'order' | 'refund'): { value: unknown; prefix: string } {
  if (isObject(body) && !('id' in body) && isObject(body[wrapper])) return { value: body[wrapper], prefix: wrapper };
  return { value: body, prefix: '' };
}
