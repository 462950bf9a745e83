/** Loyverse's variables (docs/configuration.md); the API address is the host, without `/v1.0`. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const loyverseSettings: PosSettingsDeclaration = {
  webhookSecret: 'LOYVERSE_WEBHOOK_SECRET',
  accessToken: 'LOYVERSE_ACCESS_TOKEN',
  apiBaseUrl: { variable: 'LOYVERSE_API_BASE_URL', default: 'https://api.loyverse.com' },
  // Loyverse names the merchant in each delivery's `merchant_id`.
  account: { field: 'merchantId', variable: 'LOYVERSE_MERCHANT_ID', accessToken: true },
};
