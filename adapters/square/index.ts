/**
 * The Square adapter. Payloads: a Square `Order` (bare or `{ "order": … }`) for checkouts; for
 * refunds a return order, or a `PaymentRefund` together with the order its `order_id` names
 * (`{ "refund": …, "order": … }`, which is what the refund webhooks build after fetching that
 * order). Webhooks: order.created / order.updated (fetched, then accrued when COMPLETED),
 * refund.created / refund.updated (acted on when COMPLETED); everything else is acknowledged.
 * Mapping rules and the Square facts they rest on are in translate.ts and webhook.ts.
 */
import type { AdapterContext, CheckoutIntent, PosAdapter, PosApi, RefundIntent } from '../../src/pos/contract.js';
import type { Customer } from '../../src/customer.js';
import { retrieveCustomer } from './api.js';
import { checkoutFromOrder, customerFromSquare, refundFromSquare } from './translate.js';
import { squareWebhook } from './webhook.js';

export const squareAdapter: PosAdapter = {
  name: 'square',

  parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
    return checkoutFromOrder(body, context);
  },

  parseRefund(body: unknown): RefundIntent {
    return refundFromSquare(body);
  },

  /** Orders carry only `customer_id`; the phone and email live on the Customer (GET /v2/customers/{id}). */
  async fetchCustomer(customerRef: string, api: PosApi, context: AdapterContext): Promise<Customer> {
    return customerFromSquare(await retrieveCustomer(api, customerRef), context.defaultPhoneRegion);
  },

  webhook: squareWebhook,
};
