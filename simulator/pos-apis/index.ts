/**
 * Fake POS APIs on the simulator's own HTTP server (docs/simulator-pos-apis.md): each POS under a
 * path prefix of its own, so one process serves the loyalty service and every POS a bridge reads
 * from. A POS API base URL of the bridge is the simulator's URL plus the prefix, e.g.
 * SQUARE_API_BASE_URL=http://127.0.0.1:PORT/square, and for Shopify, whose shops are told apart by
 * their domain, SHOPIFY_API_BASE_URL=http://127.0.0.1:PORT/shopify/{shop}.
 */
import type express from 'express';
import { FakeClover } from './clover.js';
import type { FakePos, PosContext, PosName } from './kit.js';
import { FakeLoyverse } from './loyverse.js';
import { FakeShopify } from './shopify.js';
import { FakeSquare } from './square.js';
import { FakeToast } from './toast.js';

export { PosFaultQueue, POS_FAULT_KINDS, POS_FAULT_TARGETS } from './faults.js';
export type { PosFaultKind, PosFaultSpec, PosFaultTarget } from './faults.js';
export { NotHeldError, POS_NAMES } from './kit.js';
export type { FakePos, PosName, SignedDelivery } from './kit.js';
export type { CustomerInput, LineInput, OrderRequest, RefundRequest } from './model.js';
export { FakeSquare } from './square.js';
export type { SquareAccountOptions, SquareAccountView, SquareCustomer, SquareOrder, SquarePaymentRefund, SquareSearchCall, SquareWebhookRequest } from './square.js';
export { FakeShopify } from './shopify.js';
export type { ShopifyAccountOptions, ShopifyAccountView, ShopifyOrder, ShopifyRefund, ShopifyWebhookRequest } from './shopify.js';
export { FakeClover } from './clover.js';
export type { CloverAccountOptions, CloverAccountView, CloverWebhookRequest } from './clover.js';
export { FakeToast } from './toast.js';
export type { ToastAccountOptions, ToastAccountView, ToastOrder, ToastWebhookRequest } from './toast.js';
export { FakeLoyverse } from './loyverse.js';
export type { LoyverseAccountOptions, LoyverseAccountView, LoyverseReceipt, LoyverseWebhookRequest } from './loyverse.js';

/** Where each POS's API is mounted on the simulator. */
export const POS_PREFIXES: Readonly<Record<PosName, string>> = {
  square: '/square',
  shopify: '/shopify',
  clover: '/clover',
  toast: '/toast',
  loyverse: '/loyverse',
};

/**
 * What follows the simulator's URL in each POS's API base URL (`<POS>_API_BASE_URL`): the prefix, and
 * for Shopify the shop, which the bridge puts in place of `{shop}` as it does in `https://{shop}`.
 */
export const POS_API_BASE_PATHS: Readonly<Record<PosName, string>> = {
  square: POS_PREFIXES.square,
  shopify: `${POS_PREFIXES.shopify}/{shop}`,
  clover: POS_PREFIXES.clover,
  toast: POS_PREFIXES.toast,
  loyverse: POS_PREFIXES.loyverse,
};

export class FakePosApis {
  readonly square: FakeSquare;
  readonly shopify: FakeShopify;
  readonly clover: FakeClover;
  readonly toast: FakeToast;
  readonly loyverse: FakeLoyverse;

  constructor(ctx: PosContext) {
    this.square = new FakeSquare(ctx);
    this.shopify = new FakeShopify(ctx);
    this.clover = new FakeClover(ctx);
    this.toast = new FakeToast(ctx);
    this.loyverse = new FakeLoyverse(ctx);
  }

  all(): FakePos[] {
    return [this.square, this.shopify, this.clover, this.toast, this.loyverse];
  }

  byName(name: string): FakePos | undefined {
    return this.all().find((p) => p.name === name);
  }

  /** Every POS back to no accounts. */
  reset(): void {
    for (const pos of this.all()) pos.reset();
  }

  mount(app: express.Express): void {
    for (const pos of this.all()) app.use(POS_PREFIXES[pos.name], pos.router());
  }
}
