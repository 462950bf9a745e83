/** Shopify's variables (README "Configuration"): orders carry their customers, so there is no API to read. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const shopifySettings: PosSettingsDeclaration = {
  webhookSecret: 'SHOPIFY_WEBHOOK_SECRET',
  // Shopify names the shop in each delivery's X-Shopify-Shop-Domain header.
  account: { field: 'shopDomain', variable: 'SHOPIFY_SHOP_DOMAIN', accessToken: true },
};
