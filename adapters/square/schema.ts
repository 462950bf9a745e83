/**
 * Square's own shapes, as far as the bridge reads them (Square API reference: Order, OrderLineItem,
 * OrderServiceCharge, OrderReturn, PaymentRefund, Customer, webhook event envelope). Objects are
 * loose: Square adds fields over time and the bridge ignores what it does not read. Optional
 * fields are `nullish` because Square and its SDKs send both absent and `null` for "not set".
 */
import { z } from 'zod';

const text = z.string().max(1024, 'must be at most 1024 characters');
const id = z.string({ error: 'must be a Square id (a string)' }).trim().min(1, 'must not be empty').max(255, 'must be at most 255 characters');

/**
 * Square `Money`: `amount` is an integer in the currency's smallest unit (USD 1999 = $19.99,
 * JPY 2 = ¥2), `currency` an ISO 4217 code. Both are required wherever the bridge reads a Money:
 * a half-stated amount is not something to guess about. The currency is checked against the
 * order's where it is used (checkout.ts, refund.ts), so one message names the mismatch.
 */
export const Money = z.looseObject({
  amount: z
    .number({ error: 'must be an integer amount in minor units' })
    .refine(Number.isSafeInteger, 'must be an integer amount in minor units (a safe integer)'),
  currency: z.string({ error: 'must be an ISO 4217 currency code' }),
});
export type Money = z.infer<typeof Money>;

const Recipient = z.looseObject({
  customer_id: text.nullish(),
  display_name: text.nullish(),
  email_address: text.nullish(),
  phone_number: text.nullish(),
});
export type Recipient = z.infer<typeof Recipient>;

const withRecipient = z.looseObject({ recipient: Recipient.nullish() }).nullish();

const Fulfillment = z.looseObject({
  type: text.nullish(),
  state: text.nullish(),
  pickup_details: withRecipient,
  delivery_details: withRecipient,
  shipment_details: withRecipient,
});

/** Line quantities are decimal strings: "3", "1.70000" for weighed goods (pos-facts). */
const quantity = z.string({ error: 'must be a decimal string such as "2" or "1.70000"' });

export const LineItem = z.looseObject({
  uid: text.nullish(),
  name: text.nullish(),
  variation_name: text.nullish(),
  catalog_object_id: text.nullish(),
  item_type: text.nullish(),
  quantity,
  base_price_money: Money.nullish(),
  /** The line's total: after its discounts, with its additive tax (and any apportioned service charge). */
  total_money: Money,
  total_tax_money: Money.nullish(),
  total_discount_money: Money.nullish(),
  applied_service_charges: z.array(z.looseObject({ service_charge_uid: text.nullish() })).nullish(),
});
export type LineItem = z.infer<typeof LineItem>;

export const ServiceCharge = z.looseObject({
  uid: text.nullish(),
  name: text.nullish(),
  /** applied_money plus the charge's additive tax (an inclusive tax is already inside applied_money). */
  total_money: Money,
  total_tax_money: Money.nullish(),
  treatment_type: text.nullish(),
});
export type ServiceCharge = z.infer<typeof ServiceCharge>;

const RoundingAdjustment = z.looseObject({ amount_money: Money.nullish() }).nullish();

export const ReturnLineItem = z.looseObject({
  uid: text.nullish(),
  source_line_item_uid: text.nullish(),
  name: text.nullish(),
  variation_name: text.nullish(),
  catalog_object_id: text.nullish(),
  quantity,
  base_price_money: Money.nullish(),
  total_money: Money,
  total_tax_money: Money.nullish(),
});
export type ReturnLineItem = z.infer<typeof ReturnLineItem>;

const OrderReturn = z.looseObject({
  uid: text.nullish(),
  source_order_id: id.nullish(),
  return_line_items: z.array(ReturnLineItem).max(1000).nullish(),
  return_service_charges: z.array(ServiceCharge).max(1000).nullish(),
  rounding_adjustment: RoundingAdjustment,
});
export type OrderReturn = z.infer<typeof OrderReturn>;

const MoneyAmounts = z.looseObject({
  total_money: Money.nullish(),
  tax_money: Money.nullish(),
  discount_money: Money.nullish(),
  tip_money: Money.nullish(),
  service_charge_money: Money.nullish(),
});

/** Square `Order` (also the sale side of a return order, which carries `returns[]`). */
export const Order = z.looseObject({
  id: id.nullish(),
  location_id: text.nullish(),
  version: z.number().int().nullish(),
  state: text.nullish(),
  customer_id: text.nullish(),
  created_at: text.nullish(),
  updated_at: text.nullish(),
  closed_at: text.nullish(),
  line_items: z.array(LineItem).max(1000).nullish(),
  service_charges: z.array(ServiceCharge).max(1000).nullish(),
  fulfillments: z.array(Fulfillment).max(100).nullish(),
  tenders: z.array(z.looseObject({ customer_id: text.nullish() })).max(100).nullish(),
  returns: z.array(OrderReturn).max(100).nullish(),
  return_amounts: MoneyAmounts.nullish(),
  rounding_adjustment: RoundingAdjustment,
  total_money: Money.nullish(),
  total_tax_money: Money.nullish(),
  total_discount_money: Money.nullish(),
  total_tip_money: Money.nullish(),
  total_service_charge_money: Money.nullish(),
});
export type Order = z.infer<typeof Order>;

/** Square `PaymentRefund`. `order_id` names the order Square created for the refund (a return order). */
export const PaymentRefund = z.looseObject({
  id,
  status: z.string({ error: 'must be a PaymentRefund status such as "COMPLETED"' }),
  amount_money: Money,
  order_id: id.nullish(),
  payment_id: text.nullish(),
  location_id: text.nullish(),
  unlinked: z.boolean().nullish(),
});
export type PaymentRefund = z.infer<typeof PaymentRefund>;

/** Square `Customer` (GET /v2/customers/{id} answers `{ customer: … }`). */
export const Customer = z.looseObject({
  id: text.nullish(),
  given_name: text.nullish(),
  family_name: text.nullish(),
  email_address: text.nullish(),
  phone_number: text.nullish(),
});
export type Customer = z.infer<typeof Customer>;

/** The webhook envelope every Square event shares: `type`, `event_id`, `data.{type,id,object}`. */
export const SquareEvent = z.looseObject({
  type: z.string({ error: 'must be the Square event type, e.g. "order.updated"' }).min(1, 'must not be empty'),
  event_id: id,
  merchant_id: text.nullish(),
  created_at: text.nullish(),
  data: z.looseObject({ type: text.nullish(), id: text.nullish(), object: z.record(z.string(), z.unknown()).nullish() }).nullish(),
});
export type SquareEvent = z.infer<typeof SquareEvent>;

/** `data.object.order_created` / `order_updated`: ids and state only, never the order itself. */
export const OrderNotice = z.looseObject({
  order_id: id,
  state: text.nullish(),
  version: z.number().int().nullish(),
  location_id: text.nullish(),
});
export type OrderNotice = z.infer<typeof OrderNotice>;
