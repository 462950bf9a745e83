/**
 * The five POSes as backfill tests drive them through the simulator's fake POS APIs: one account
 * each, its settings as the bridge would hold them, and one way to write a sale, refund it and
 * name its ids, whatever the POS's own objects look like.
 */
import type { PosSettings } from '../../src/pos/contract.js';
import type { SignedDelivery, Simulator } from '../../simulator/index.js';
import type { OrderRequest } from '../../simulator/pos-apis/model.js';
import { TWO_LINES } from './pos-http.js';

export interface BackfillPos {
  pos: 'square' | 'shopify' | 'clover' | 'toast' | 'loyverse';
  /** Creates the account in the fake; answers its account id and token. */
  addAccount(sim: Simulator): { account: string; accessToken: string };
  /** The POS API's address as the bridge is configured with it. */
  baseUrl(simUrl: string): string;
  /** The POS's own id of an object it answered (order, receipt). */
  orderId(order: unknown): string;
  /** The signed webhook the POS would send for this order, as the bridge's settings (secret, Square's URL) verify it. */
  webhook(sim: Simulator, account: string, orderId: string, settings: PosSettings): SignedDelivery;
}

const field = (object: unknown, name: string) => String((object as Record<string, unknown>)[name]);

export const BACKFILL_POSES: BackfillPos[] = [
  {
    pos: 'square',
    addAccount: (sim) => {
      const a = sim.pos.square.addAccount({ merchantId: 'ML8QBACKFILL1', locationIds: ['LOCBACKFILL01'] });
      return { account: a.merchantId, accessToken: a.accessToken };
    },
    baseUrl: (url) => `${url}/square`,
    orderId: (o) => field(o, 'id'),
    webhook: (sim, account, id, s) => sim.pos.square.webhook(account, { event: 'order.updated', id, signatureKey: s.webhookSecret!, notificationUrl: s.notificationUrl! }),
  },
  {
    pos: 'shopify',
    addAccount: (sim) => {
      const a = sim.pos.shopify.addAccount({ shop: 'backfill-cafe.myshopify.com' });
      return { account: a.shop, accessToken: a.accessToken };
    },
    baseUrl: (url) => `${url}/shopify/{shop}`,
    orderId: (o) => field(o, 'id'),
    webhook: (sim, account, id, s) => sim.pos.shopify.webhook(account, { topic: 'orders/paid', id, secret: s.webhookSecret! }),
  },
  {
    pos: 'clover',
    addAccount: (sim) => {
      const a = sim.pos.clover.addAccount({ merchantId: 'BACKFILLCLOV1' });
      return { account: a.merchantId, accessToken: a.accessToken };
    },
    baseUrl: (url) => `${url}/clover`,
    orderId: (o) => field(o, 'id'),
    webhook: (sim, account, id, s) => sim.pos.clover.webhook(account, { type: 'UPDATE', id, authCode: s.webhookSecret! }),
  },
  {
    pos: 'toast',
    addAccount: (sim) => {
      const a = sim.pos.toast.addAccount({ restaurantGuid: '0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9' });
      return { account: a.restaurantGuid, accessToken: a.accessToken };
    },
    baseUrl: (url) => `${url}/toast`,
    orderId: (o) => field(o, 'guid'),
    webhook: (sim, account, id, s) => sim.pos.toast.webhook(account, { id, secret: s.webhookSecret! }),
  },
  {
    pos: 'loyverse',
    addAccount: (sim) => {
      const a = sim.pos.loyverse.addAccount({ merchantId: '6f1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b' });
      return { account: a.merchantId, accessToken: a.accessToken };
    },
    baseUrl: (url) => `${url}/loyverse`,
    orderId: (o) => field(o, 'receipt_number'),
    webhook: (sim, account, id, s) => sim.pos.loyverse.webhook(account, { id, secret: s.webhookSecret! }),
  },
];

/** The variables that give the default merchant this account (a bridge process's environment). */
export function envFor(p: BackfillPos, simUrl: string, account: { account: string; accessToken: string }): Record<string, string> {
  const prefix = p.pos.toUpperCase();
  const accountVariable = { square: 'SQUARE_MERCHANT_ID', shopify: 'SHOPIFY_SHOP_DOMAIN', clover: 'CLOVER_MERCHANT_ID', toast: 'TOAST_RESTAURANT_GUID', loyverse: 'LOYVERSE_MERCHANT_ID' }[p.pos];
  return { [`${prefix}_API_BASE_URL`]: p.baseUrl(simUrl), [`${prefix}_ACCESS_TOKEN`]: account.accessToken, [accountVariable]: account.account };
}

/** The settings the bridge holds for the account (its address, token and account id). */
export function settingsFor(p: BackfillPos, simUrl: string, account: { account: string; accessToken: string }): PosSettings {
  return { apiBaseUrl: p.baseUrl(simUrl), accessToken: account.accessToken, account: account.account, ...(p.pos === 'shopify' ? { accessTokenHeader: 'X-Shopify-Access-Token' } : {}) };
}

/** One paid sale with a customer who can be accrued, modified at `at`. */
export function sale(phone: string, at: string, extra: Partial<OrderRequest> = {}): OrderRequest {
  return { lines: TWO_LINES, tip: 100, customer: { firstName: 'Ada', phone }, createdAt: at, updatedAt: at, ...extra };
}
