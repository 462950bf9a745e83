/** Every adapter the bridge serves, by the `{pos}` path segment. An unknown name is a 404. */
import { cloverAdapter } from './clover/index.js';
import { genericAdapter } from './generic/index.js';
import { loyverseAdapter } from './loyverse/index.js';
import { shopifyAdapter } from './shopify/index.js';
import { squareAdapter } from './square/index.js';
import { toastAdapter } from './toast/index.js';
import type { PosAdapter } from '../src/pos/contract.js';

export const adapters: ReadonlyMap<string, PosAdapter> = new Map(
  [genericAdapter, squareAdapter, shopifyAdapter, cloverAdapter, toastAdapter, loyverseAdapter].map((a) => [a.name, a]),
);
