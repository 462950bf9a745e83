/** A sandbox bridge as a process, and the banner it prints once its demo merchants are ready (src/main.ts), read back. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnBridge, type BridgeProcess } from './bridge-process.js';
import { eventually } from './eventually.js';

export interface Banner {
  text: string;
  /** The simulator's URL: the loyalty service and the fake POS APIs. */
  simulator: string;
  /** The URL Square signs in front of the body, as the banner states it. */
  squareNotificationUrl: string | undefined;
  demos: Record<string, { created: boolean; summary: string; posToken: string; adminToken: string }>;
}

/** Waits for the whole banner (it is printed once the demo merchants are ready) and reads it. */
export async function bannerOf(bridge: BridgeProcess): Promise<Banner> {
  const text = await eventually(
    () => bridge.output(),
    (o) => /secrets key: .*\n=+\n/.test(o),
    20_000,
  );
  const demos: Banner['demos'] = {};
  for (const m of text.matchAll(/^ {3}(demo-[a-z-]+)( \(created now\))?: (.*)\n {5}POS token: {3}(\S+)\n {5}admin token: (\S+)\n/gm)) {
    demos[m[1]!] = { created: Boolean(m[2]), summary: m[3]!, posToken: m[4]!, adminToken: m[5]! };
  }
  return { text, simulator: /simulator: +(\S+)/.exec(text)![1]!, squareNotificationUrl: /Square signs (\S+) \+ the body/.exec(text)?.[1], demos };
}

/**
 * `npm start` with nothing configured (no LOYALTY_BASE_URL: sandbox) on a file ledger in a new
 * temporary folder `dir`, once its banner is printed. The caller kills the bridge and removes `dir`.
 */
export async function startSandbox(folderPrefix: string, env: Record<string, string> = {}): Promise<{ dir: string; bridge: BridgeProcess; banner: Banner }> {
  const dir = mkdtempSync(join(tmpdir(), folderPrefix));
  const bridge = await spawnBridge({ LEDGER_URL: sandboxLedgerUrl(dir), LOG_LEVEL: 'info', ...env });
  return { dir, bridge, banner: await bannerOf(bridge) };
}

/** The ledger startSandbox gives the sandbox in `dir`, for a restart on it. */
export function sandboxLedgerUrl(dir: string): string {
  return `file:${join(dir, 'data', 'ledger.json')}`;
}

/** A merchant's books at the sandbox's simulator. */
export async function simulatorBooks(banner: Banner, merchantId: string): Promise<any> {
  return (await fetch(`${banner.simulator}/__sim/merchants/${merchantId}/books`)).json();
}
