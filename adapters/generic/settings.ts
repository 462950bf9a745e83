/** The generic payload is posted directly: no webhooks and no POS API, so no variables of its own. */
import type { PosSettingsDeclaration } from '../../src/pos/settings.js';

export const genericSettings: PosSettingsDeclaration = {};
