/**
 * The generic adapter: the bridge's own payload (bridge-contract "The generic payload") for POS
 * systems without an adapter, posted to /v1/checkouts/generic and /v1/refunds/generic (no webhooks).
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { parseGenericCheckout } from './checkout.js';
import { parseGenericRefund } from './refund.js';

export const genericAdapter: PosAdapter = {
  name: 'generic',
  parseCheckout: parseGenericCheckout,
  parseRefund: (body) => parseGenericRefund(body),
};
