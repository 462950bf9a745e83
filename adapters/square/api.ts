/**
 * The Square API paths the bridge reads (Square API reference: RetrieveOrder, RetrieveCustomer).
 * The core's PosApi adds the base URL (SQUARE_API_BASE_URL, https://connect.squareup.com by
 * default) and `Authorization: Bearer SQUARE_ACCESS_TOKEN`; both answers wrap their object
 * (`{ "order": … }`, `{ "customer": … }`), which the translators accept as they are.
 */
import type { Customer } from '../../src/kernel/customer.js';
import type { AdapterContext, PosApi } from '../../src/pos/contract.js';
import { customerFromSquare } from './checkout.js';

export const orderPath = (orderId: string): string => `/v2/orders/${encodeURIComponent(orderId)}`;
export const customerPath = (customerId: string): string => `/v2/customers/${encodeURIComponent(customerId)}`;

export const retrieveOrder = (api: PosApi, orderId: string): Promise<unknown> => api.get(orderPath(orderId));
export const retrieveCustomer = (api: PosApi, customerId: string): Promise<unknown> => api.get(customerPath(customerId));

/** Orders carry only `customer_id`; the phone and email live on the Customer (GET /v2/customers/{id}). */
export async function fetchSquareCustomer(customerRef: string, api: PosApi, context: AdapterContext): Promise<Customer> {
  return customerFromSquare(await retrieveCustomer(api, customerRef), context.defaultPhoneRegion);
}
