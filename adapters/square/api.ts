/**
 * The Square API paths the bridge reads (Square API reference: RetrieveOrder, RetrieveCustomer).
 * The core's PosApi adds the base URL (SQUARE_API_BASE_URL, https://connect.squareup.com by
 * default) and `Authorization: Bearer SQUARE_ACCESS_TOKEN`; both answers wrap their object
 * (`{ "order": … }`, `{ "customer": … }`), which the translators accept as they are.
 */
import type { PosApi } from '../../src/pos/contract.js';

export const orderPath = (orderId: string): string => `/v2/orders/${encodeURIComponent(orderId)}`;
export const customerPath = (customerId: string): string => `/v2/customers/${encodeURIComponent(customerId)}`;

export const retrieveOrder = (api: PosApi, orderId: string): Promise<unknown> => api.get(orderPath(orderId));
export const retrieveCustomer = (api: PosApi, customerId: string): Promise<unknown> => api.get(customerPath(customerId));
