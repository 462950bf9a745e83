/**
 * The Clover adapter: Clover orders and refunds (REST API v3 shapes) and Clover webhook
 * notifications → the bridge's intents. The translation rules are in checkout.ts and refund.ts, the
 * API reads in api.ts, the webhook in webhook.ts, the shapes in schema.ts.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { cloverBackfill } from './backfill.js';
import { fetchCloverCustomer } from './api.js';
import { parseCloverCheckout } from './checkout.js';
import { parseCloverRefund } from './refund.js';
import { cloverWebhook } from './webhook.js';

export const cloverAdapter: PosAdapter = {
  name: 'clover',
  parseCheckout: parseCloverCheckout,
  parseRefund: parseCloverRefund,
  fetchCustomer: fetchCloverCustomer,
  webhook: cloverWebhook,
  backfill: cloverBackfill,
};
