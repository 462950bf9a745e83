/**
 * The Toast adapter: Toast orders API v2 `Order` objects (bare, or wrapped as `{ "order": … }` or
 * `{ "orders": [ … ] }`, with `checkGuid` naming one check of a split order) and the orders webhook
 * (`order_updated`, `channel_order_updated`).
 *
 * Identity. Loyalty belongs to the check, not to the order (pos-facts "Toast's loyalty integration
 * API"): each check is a sale of its own, transactionId `toast:<order guid>:<check guid>` (both
 * GUIDs, unique across restaurants: no scope), its orderId the order's guid. Builds before kept the
 * order whole, `toast:<order guid>`: a check of an order recorded then is found there
 * (`recordedAs`), never accrued again, and its void takes back its own share of that record.
 *
 * When to accrue. Toast sends the whole order on every change (a new order is an update too), so
 * each check's state decides: a `PAID` or `CLOSED` check is a checkout, an open one waits, a
 * voided one that had been paid is a full refund of its sale; a deleted order (its checks were
 * combined into another order) is ignored. The core records one accrual per transactionId, so the
 * many updates of a paid check accrue once.
 *
 * Refunds stay on the order (pos-facts "Order identity and refunds"): `payments[].refundStatus`
 * NONE/PARTIAL/FULL and `refundDetails` on each refunded selection or service charge, each check's
 * its own. See `refund.ts` for how they are measured and identified.
 *
 * Money is major units in JSON numbers, read through their decimal text (schema.ts); the order has
 * no currency, so the Check takes DEFAULT_CURRENCY.
 */
import type { PosAdapter } from '../../src/pos/contract.js';
import { toastBackfill } from './backfill.js';
import { parseCheckout } from './checkout.js';
import { toastRegister } from './loyalty.js';
import { parseRefund } from './refund.js';
import { toastWebhook } from './webhook.js';

export const toastAdapter: PosAdapter = {
  name: 'toast',
  parseCheckout,
  parseRefund,
  webhook: toastWebhook,
  backfill: toastBackfill,
  register: toastRegister,
};
