/**
 * Toast's variables (docs/configuration.md). Webhooks carry the whole order, so the API is read
 * only by backfill (ordersBulk), naming the restaurant in Toast-Restaurant-External-ID.
 */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const toastSettings: PosSettingsDeclaration = {
  webhookSecret: 'TOAST_SIGNING_SECRET',
  accessToken: 'TOAST_ACCESS_TOKEN',
  apiBaseUrl: { variable: 'TOAST_API_BASE_URL', default: 'https://ws-api.toasttab.com' },
  // Toast names the restaurant in each delivery's Toast-Restaurant-External-ID header.
  account: { field: 'restaurantGuid', variable: 'TOAST_RESTAURANT_GUID', accessToken: true },
  // The static key Toast's loyalty integration calls carry (POST /v1/toast/loyalty, Authorization).
  registerKey: { field: 'loyaltyKey', variable: 'TOAST_LOYALTY_KEY' },
};
