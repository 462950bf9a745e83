/**
 * Every adapter the bridge serves, by the `{pos}` path segment (an unknown name is a 404), with the
 * settings each reads from configuration. Only the composition root (and tests and scripts) import
 * this list.
 */
import type { PosAdapter } from '../src/pos/contract.js';
import type { PosSettingDeclarations, PosSettingsDeclaration } from '../src/pos/settings.js';
import { cloverAdapter } from './clover/index.js';
import { cloverSettings } from './clover/settings.js';
import { genericAdapter } from './generic/index.js';
import { genericSettings } from './generic/settings.js';
import { loyverseAdapter } from './loyverse/index.js';
import { loyverseSettings } from './loyverse/settings.js';
import { shopifyAdapter } from './shopify/index.js';
import { shopifySettings } from './shopify/settings.js';
import { squareAdapter } from './square/index.js';
import { squareSettings } from './square/settings.js';
import { toastAdapter } from './toast/index.js';
import { toastSettings } from './toast/settings.js';

const registered: readonly (readonly [PosAdapter, PosSettingsDeclaration])[] = [
  [genericAdapter, genericSettings],
  [squareAdapter, squareSettings],
  [shopifyAdapter, shopifySettings],
  [cloverAdapter, cloverSettings],
  [toastAdapter, toastSettings],
  [loyverseAdapter, loyverseSettings],
];

export const adapters: ReadonlyMap<string, PosAdapter> = new Map(registered.map(([adapter]) => [adapter.name, adapter]));

/** For `loadConfig`: the variables each POS reads. */
export const posSettingDeclarations: PosSettingDeclarations = Object.fromEntries(registered.map(([adapter, settings]) => [adapter.name, settings]));
