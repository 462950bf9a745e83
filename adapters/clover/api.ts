/**
 * What the bridge reads from Clover's REST API v3 (with CLOVER_ACCESS_TOKEN, at CLOVER_API_BASE_URL):
 * the order a webhook notification names, and the customer an order names only by id.
 *
 * Clover asks for at most three expansions per call (docs.clover.com "Use expandable fields"), and
 * translating an order needs six: the order is read twice, lines and discounts first, money and
 * people second, and the two reads are merged. The ids in the paths were checked to be 13-character
 * Clover ids (schema.ts), so nothing else can reach the path.
 */
import type { Customer } from '../../src/kernel/customer.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { AdapterContext, PosApi } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { contactOf } from './checkout.js';
import { CLOVER_ID, CloverCustomer } from './schema.js';

/** Lines with their discounts and modifiers, and the order-level discounts (the parts of the total). */
export const ORDER_LINES_EXPAND = 'lineItems.discounts,lineItems.modifications,discounts';
/** Payments (tax, tip, service charge), refunds and customers. */
export const ORDER_MONEY_EXPAND = 'payments,refunds,customers';
export const CUSTOMER_EXPAND = 'phoneNumbers,emailAddresses';

export function orderPath(merchantId: string, orderId: string): string {
  return `/v3/merchants/${merchantId}/orders/${orderId}`;
}

export function customerPath(merchantId: string, customerId: string): string {
  return `/v3/merchants/${merchantId}/customers/${customerId}`;
}

/**
 * The order as one object, with everything translation needs expanded. If the order changed between
 * the two reads (its `modifiedTime` differs) the reads are repeated once; an order still changing is
 * refused (dead letter, replayable) rather than translated from two different versions.
 */
export async function fetchOrder(api: PosApi, merchantId: string, orderId: string): Promise<unknown> {
  const path = orderPath(merchantId, orderId);
  for (let attempt = 0; attempt < 2; attempt++) {
    const lines = await api.get(path, { expand: ORDER_LINES_EXPAND });
    const money = await api.get(path, { expand: ORDER_MONEY_EXPAND });
    if (!isObject(lines) || !isObject(money)) return lines;
    if (lines.modifiedTime !== money.modifiedTime) continue;
    return { ...lines, payments: money.payments, refunds: money.refunds, customers: money.customers };
  }
  throw ValidationError.field('order.modifiedTime', `order ${orderId} kept changing while it was read; replay this delivery once it is settled`);
}

/** `customerRef` is "<merchant id>/<customer id>": Clover reads customers under their merchant. */
export async function fetchCloverCustomer(customerRef: string, api: PosApi, context: AdapterContext): Promise<Customer> {
  const [merchantId, customerId, ...rest] = customerRef.split('/');
  if (!merchantId || !customerId || rest.length > 0 || !CLOVER_ID.test(merchantId) || !CLOVER_ID.test(customerId)) {
    throw ValidationError.field('customerRef', 'must be "<merchant id>/<customer id>" (two 13-character Clover ids)');
  }
  const raw = await api.get(customerPath(merchantId, customerId), { expand: CUSTOMER_EXPAND });
  const body = isObject(raw) && isObject(raw.customer) && !('id' in raw) ? raw.customer : raw;
  return contactOf(parseWith(CloverCustomer, body, 'customer'), context.defaultPhoneRegion, 'customer');
}
