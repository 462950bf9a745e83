/** What the route modules share; built once per simulator by index.ts. */
import type { Merchants } from './merchant.js';

export interface SimContext {
  readonly now: () => Date;
  /** Every request is routed to one of them by its credential: X-App-Token or X-API-Key. */
  readonly merchants: Merchants;
  /** A timer that close() can cancel, so a slow fault never keeps the process (or jest) alive. */
  later(ms: number, fn: () => void): void;
}
