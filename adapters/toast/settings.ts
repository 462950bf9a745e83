/** Toast's variables (README "Configuration"): webhooks carry the whole order, so there is no API to read. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const toastSettings: PosSettingsDeclaration = {
  webhookSecret: 'TOAST_SIGNING_SECRET',
  // Toast names the restaurant in each delivery's Toast-Restaurant-External-ID header.
  account: { field: 'restaurantGuid', variable: 'TOAST_RESTAURANT_GUID', accessToken: false },
};
