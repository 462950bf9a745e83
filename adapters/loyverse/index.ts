/**
 * The Loyverse adapter. Payloads are Loyverse receipts (bare, or in the API's `{ "receipts": [ … ] }`
 * wrapper); webhooks are `receipts.update` deliveries signed with `X-Loyverse-Signature`.
 *
 * - receipt.ts: the money (amount from the lines, checked against the receipt's totals);
 * - translate.ts: SALE → checkout, REFUND / cancelled SALE → refund, ids and scope;
 * - webhook.ts: signature scheme and the pure classification of a delivery;
 * - customer.ts: `customer_id` → contact details through GET /v1.0/customers/{id}.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { fetchLoyverseCustomer } from './customer.js';
import { parseLoyverseCheckout, parseLoyverseRefund } from './translate.js';
import { loyverseWebhook } from './webhook.js';

export const loyverseAdapter: PosAdapter = {
  name: 'loyverse',
  parseCheckout: parseLoyverseCheckout,
  parseRefund: (body) => parseLoyverseRefund(body),
  fetchCustomer: fetchLoyverseCustomer,
  webhook: loyverseWebhook,
};
