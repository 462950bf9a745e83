/** Clover's variables (docs/configuration.md). Merchants outside the US set their region's API address. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const cloverSettings: PosSettingsDeclaration = {
  webhookSecret: 'CLOVER_AUTH_CODE',
  accessToken: 'CLOVER_ACCESS_TOKEN',
  apiBaseUrl: { variable: 'CLOVER_API_BASE_URL', default: 'https://api.clover.com' },
  // Clover keys each delivery's notifications by merchant id (`merchants`), several per POST.
  account: { field: 'merchantId', variable: 'CLOVER_MERCHANT_ID', accessToken: true },
};
