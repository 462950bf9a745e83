/** Every adapter the bridge serves, by the `{pos}` path segment. An unknown name is a 404. */
import { genericAdapter } from './generic/index.js';
import type { PosAdapter } from './types.js';

export const adapters: ReadonlyMap<string, PosAdapter> = new Map([genericAdapter].map((a) => [a.name, a]));

export type { PosAdapter, CheckoutIntent, RefundIntent, AdapterContext } from './types.js';
