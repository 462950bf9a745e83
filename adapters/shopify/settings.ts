/**
 * Shopify's variables (docs/configuration.md). Orders carry their customers, so the API is read
 * only by backfill: each shop at its own host (`{shop}`), with the token in Shopify's own header.
 */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const shopifySettings: PosSettingsDeclaration = {
  webhookSecret: 'SHOPIFY_WEBHOOK_SECRET',
  accessToken: 'SHOPIFY_ACCESS_TOKEN',
  apiBaseUrl: { variable: 'SHOPIFY_API_BASE_URL', default: 'https://{shop}' },
  // Shopify refuses a bearer token: the Admin API takes the token in X-Shopify-Access-Token.
  accessTokenHeader: 'X-Shopify-Access-Token',
  // Shopify names the shop in each delivery's X-Shopify-Shop-Domain header.
  // The shop's permanent myshopify.com domain, which is also its Admin API's host: nothing else is one.
  account: { field: 'shopDomain', variable: 'SHOPIFY_SHOP_DOMAIN', accessToken: true, shape: { pattern: /^[a-z0-9][a-z0-9-]{0,62}\.myshopify\.com$/i, says: "the shop's <name>.myshopify.com domain (e.g. demo-cafe.myshopify.com)" } },
};
