/** Square's variables (docs/configuration.md). */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const squareSettings: PosSettingsDeclaration = {
  webhookSecret: 'SQUARE_SIGNATURE_KEY',
  // In sandbox, the bridge's own Square webhook route on this machine.
  notificationUrl: { variable: 'SQUARE_NOTIFICATION_URL', sandboxDefault: (port) => `http://localhost:${port}/v1/webhooks/square` },
  accessToken: 'SQUARE_ACCESS_TOKEN',
  apiBaseUrl: { variable: 'SQUARE_API_BASE_URL', default: 'https://connect.squareup.com' },
  // Square names the seller in every event's `merchant_id`.
  account: { field: 'merchantId', variable: 'SQUARE_MERCHANT_ID', accessToken: true },
  // Square signs the notification URL followed by the body: without the URL no signature can match.
  check: (settings, sandbox) =>
    !sandbox && settings.webhookSecret && !settings.notificationUrl ? 'SQUARE_NOTIFICATION_URL is required with SQUARE_SIGNATURE_KEY (Square signs that URL followed by the body)' : undefined,
};
