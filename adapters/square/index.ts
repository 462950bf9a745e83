/**
 * The Square adapter. Payloads: a Square `Order` (bare or `{ "order": … }`) for checkouts; for
 * refunds a return order, or a `PaymentRefund` together with the order its `order_id` names
 * (`{ "refund": …, "order": … }`, which is what the refund webhooks build after fetching that
 * order), or a `PaymentRefund` alone (its order read from Square with SQUARE_ACCESS_TOKEN, else
 * measured against the sale the ledger recorded). Webhooks: order.created / order.updated (fetched, then accrued when COMPLETED),
 * refund.created / refund.updated (acted on when COMPLETED); everything else is acknowledged.
 * Mapping rules and the Square facts they rest on are in checkout.ts, refund.ts and webhook.ts.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { squareBackfill } from './backfill.js';
import { fetchSquareCustomer, retrieveOrder } from './api.js';
import { checkoutFromOrder } from './checkout.js';
import { paymentRefundOrderId, refundFromSquare } from './refund.js';
import { squareWebhook } from './webhook.js';

export const squareAdapter: PosAdapter = {
  name: 'square',
  parseCheckout: (body, context) => checkoutFromOrder(body, context),
  parseRefund: (body) => refundFromSquare(body),
  fetchCustomer: fetchSquareCustomer,
  // A PaymentRefund posted without its order: with SQUARE_ACCESS_TOKEN the order is read, as the webhook does.
  refundFetch: (body) => {
    const named = paymentRefundOrderId(body);
    return named && { fetch: (api) => retrieveOrder(api, named.orderId), payload: (order) => ({ refund: named.refund, order }), reads: { kind: 'order', id: named.orderId } };
  },
  webhook: squareWebhook,
  backfill: squareBackfill,
};
