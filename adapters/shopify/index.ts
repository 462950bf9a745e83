/**
 * The Shopify adapter: Shopify orders and refunds (REST Admin API objects, also the bodies of the
 * `orders/paid`, `orders/create` and `refunds/create` webhooks) → the bridge's neutral intents.
 *
 * - Identity: Shopify order ids are global (one id space for every shop), so no `scope`; the
 *   transactionId is `shopify:<order id>`.
 * - Amount: `checkout.ts` (subtotal after discounts, tax taken out where prices include it, tip and
 *   shipping outside it, every part cross-checked).
 * - Refunds: `refund.ts` (itemized, tax-excluded, measured like the amount).
 * - Webhooks: `webhook.ts` (HMAC-SHA256 of the raw body in base64; topic header; event-id dedupe).
 * - Customers: contact details travel in the order, so there is nothing to fetch and no
 *   `fetchCustomer` (an order whose buyer left no phone or email is recorded as `skipped`).
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { shopifyBackfill } from './backfill.js';
import { translateOrder } from './checkout.js';
import { translateRefund } from './refund.js';
import { shopifyWebhook } from './webhook.js';

export const shopifyAdapter: PosAdapter = {
  name: 'shopify',
  parseCheckout: (body, context) => translateOrder(body, context),
  parseRefund: (body) => translateRefund(body),
  webhook: shopifyWebhook,
  backfill: shopifyBackfill,
};
