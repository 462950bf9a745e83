/** What the route modules share; built once per simulator by index.ts. */
import type { Credential } from '../loyalty/contract.js';
import type { FaultQueue } from './faults.js';
import type { Ledger } from './state.js';

export interface SimContext {
  readonly appToken: string;
  readonly apiKey: string;
  readonly now: () => Date;
  readonly faults: FaultQueue;
  /** Swapped by reset(), so routes must read it through the context on every request. */
  ledger: Ledger;
  readonly credentials: readonly Credential[];
  /** A timer that close() can cancel, so a slow fault never keeps the process (or jest) alive. */
  later(ms: number, fn: () => void): void;
}
