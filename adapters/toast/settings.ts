/** Toast's variables (README "Configuration"): webhooks carry the whole order, so there is no API to read. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const toastSettings: PosSettingsDeclaration = {
  webhookSecret: 'TOAST_SIGNING_SECRET',
};
