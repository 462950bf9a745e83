/** The child-process bridge of scripts/bridge-process.ts, with the tests' admin token. */
import { spawnBridge as spawn, type BridgeProcess } from '../../scripts/bridge-process.js';
import { ADMIN_TOKEN } from './harness.js';

export type { BridgeProcess };
export { freePort, POS_POST_HEADERS } from '../../scripts/bridge-process.js';

export function spawnBridge(env: Record<string, string>, port?: number): Promise<BridgeProcess> {
  return spawn({ ADMIN_TOKEN, ...env }, port);
}
