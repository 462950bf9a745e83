/**
 * The Loyverse adapter. Payloads are Loyverse receipts (bare, or in the API's `{ "receipts": [ … ] }`
 * wrapper); webhooks are `receipts.update` deliveries signed with `X-Loyverse-Signature`.
 *
 * - checkout.ts: a SALE → checkout, ids and scope, and the money (amount from the lines, checked
 *   against the receipt's totals);
 * - refund.ts: REFUND / cancelled SALE → refund;
 * - webhook.ts: signature scheme and the pure classification of a delivery;
 * - api.ts: `customer_id` → contact details through GET /v1.0/customers/{id}.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { loyverseBackfill } from './backfill.js';
import { fetchLoyverseCustomer } from './api.js';
import { parseLoyverseCheckout } from './checkout.js';
import { parseLoyverseRefund } from './refund.js';
import { loyverseWebhook } from './webhook.js';

export const loyverseAdapter: PosAdapter = {
  name: 'loyverse',
  parseCheckout: parseLoyverseCheckout,
  parseRefund: (body) => parseLoyverseRefund(body),
  fetchCustomer: fetchLoyverseCustomer,
  webhook: loyverseWebhook,
  backfill: loyverseBackfill,
};
