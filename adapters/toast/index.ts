/**
 * The Toast adapter: Toast orders API v2 `Order` objects (bare, or wrapped as `{ "order": … }` or
 * `{ "orders": [ … ] }`) and the orders webhook (`order_updated`, `channel_order_updated`).
 *
 * Identity. `Order.guid` is a GUID, unique across restaurants, so it is the orderId with no scope:
 * transactionId `toast:<order guid>`.
 *
 * When to accrue. Toast sends the whole order on every change (a new order is an update too), so
 * the order's state decides: an order all of whose live checks are `PAID` or `CLOSED` is a
 * checkout; an open order is acknowledged and ignored; a deleted order (its checks were combined
 * into another order) is ignored; a voided order that had payments is a full refund. The core
 * records one accrual per transactionId, so the many updates of a paid order accrue once.
 *
 * Refunds stay on the order (pos-facts "Order identity and refunds"): `payments[].refundStatus`
 * NONE/PARTIAL/FULL and `refundDetails` on each refunded selection or service charge. See
 * `refund.ts` for how they are measured and identified.
 *
 * Money is major units in JSON numbers, read through their decimal text (schema.ts); the order has
 * no currency, so the Check takes DEFAULT_CURRENCY.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { toastBackfill } from './backfill.js';
import { parseCheckout } from './checkout.js';
import { parseRefund } from './refund.js';
import { toastWebhook } from './webhook.js';

export const toastAdapter: PosAdapter = {
  name: 'toast',
  parseCheckout,
  parseRefund,
  webhook: toastWebhook,
  backfill: toastBackfill,
};
