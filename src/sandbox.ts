/**
 * What sandbox adds to a bridge started with nothing configured (no LOYALTY_BASE_URL; never in
 * production), so that many merchants can be tried at once (README "Many merchants"):
 *
 * - a SECRETS_KEY, when none is set, generated once and kept in a private file (0600, in a 0700
 *   folder) beside the file ledger, so that the demo merchants' sealed secrets open again at the
 *   next start;
 * - two demo merchants, each installed at the in-process simulator (its own app token, API key,
 *   books, and what resolve-credentials answers: a Square and a Shopify account, a currency and a
 *   phone region) and created in the bridge from nothing but that app token, once: a later start
 *   finds them in the ledger and creates nothing.
 *
 * Their POS and admin tokens are issued anew at every start and printed in the banner, as the
 * sandbox's generated admin token is: nothing about them is fixed or public, tokens of an earlier
 * run stop working, and the ledger keeps only their hashes.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { FileLedgerStore } from './ledger/file-store.js';
import { makePrivate, PRIVATE_DIR, PRIVATE_FILE } from './ledger/private-files.js';
import type { MerchantAdmin, MerchantView } from './merchants/admin.js';
import { newSecretsKey, parseSecretsKey, SecretsKeyError } from './merchants/secrets.js';
import type { Simulator } from './simulator/index.js';

export const SANDBOX_KEY_FILE = 'sandbox-secrets.key';

/** Where sandbox keeps its SECRETS_KEY: beside a file ledger; under ./data for a PostgreSQL one. */
export function sandboxKeyPath(ledgerUrl: string): string {
  if (ledgerUrl.startsWith('file:')) return join(dirname(FileLedgerStore.fromUrl(ledgerUrl).manifestPath), SANDBOX_KEY_FILE);
  return resolve('data', SANDBOX_KEY_FILE);
}

/** The key the file at `path` holds; undefined when there is no such file. Throws when it holds anything else. */
export async function readSandboxKey(path: string): Promise<string | undefined> {
  let text: string;
  try {
    text = (await readFile(path, 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    parseSecretsKey(text);
  } catch (error) {
    if (error instanceof SecretsKeyError) throw new SecretsKeyError(`${path} does not hold a secrets key: it ${error.message}`);
    throw error;
  }
  await makePrivate(path, PRIVATE_FILE);
  return text;
}

/**
 * Writes `key` to a new private file at `path`, or replaces the one there (`replace`), synced; the
 * folder is made private where it is created. A replacement is written beside and renamed into
 * place, so the file holds the old key or the new one, never half of one.
 */
export async function writeSandboxKey(path: string, key: string, replace = false): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: PRIVATE_DIR });
  const target = replace ? `${path}.new` : path;
  const handle = await open(target, replace ? 'w' : 'wx', PRIVATE_FILE);
  try {
    await handle.writeFile(`${key}\n`, 'utf8');
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await makePrivate(target, PRIVATE_FILE);
  if (replace) await rename(target, path);
}

/** The sandbox's SECRETS_KEY: the one its file holds, or a new one written there first (`created`). */
export async function sandboxSecretsKey(path: string): Promise<{ key: string; created: boolean }> {
  const existing = await readSandboxKey(path);
  if (existing) return { key: existing, created: false };
  const key = newSecretsKey();
  try {
    await writeSandboxKey(path, key);
  } catch (error) {
    // Another sandbox starting on the same folder wrote it first: use that one.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { key: (await readSandboxKey(path))!, created: false };
    throw error;
  }
  return { key, created: true };
}

/** The demo merchants, as the simulator answers resolve-credentials for them. */
export const DEMO_MERCHANTS = [
  {
    id: 'demo-bakery',
    name: 'Demo Bakery',
    credentials: { 'square.merchantId': 'DEMOBAKERYSQ1', 'shopify.shopDomain': 'demo-bakery.myshopify.com', currency: 'EUR', phoneRegion: 'DE' },
  },
  {
    id: 'demo-cafe',
    name: 'Demo Cafe',
    credentials: { 'square.merchantId': 'DEMOCAFESQ001', 'shopify.shopDomain': 'demo-cafe.myshopify.com', currency: 'GBP', phoneRegion: 'GB' },
  },
] as const;

/** Installs the demo merchants at the simulator (before it listens); their app tokens are the simulator's defaults for their ids. */
export function installDemoMerchants(sim: Simulator): void {
  for (const demo of DEMO_MERCHANTS) sim.addMerchant({ id: demo.id, credentials: demo.credentials });
}

export type DemoMerchant = { id: string; name: string; created: boolean } & ({ posToken: string; adminToken: string; merchant: MerchantView } | { problem: string });

/**
 * Creates each demo merchant in the bridge unless the ledger holds it already, and issues this
 * run's tokens for it. A demo merchant that cannot be made (say, another merchant took its Square
 * account) is reported, not fatal: the sandbox starts without it.
 */
export async function ensureDemoMerchants(admin: MerchantAdmin, sim: Simulator): Promise<DemoMerchant[]> {
  const out: DemoMerchant[] = [];
  for (const demo of DEMO_MERCHANTS) {
    const installed = sim.merchant(demo.id);
    try {
      const exists = await admin.get(demo.id).then(
        () => true,
        () => false,
      );
      // Nothing but the app token (and the API key, for verification): the rest comes from resolve-credentials.
      const made = exists ? await admin.rotateTokens(demo.id) : await admin.create({ id: demo.id, name: demo.name, loyalty: { appToken: installed.appToken, apiKey: installed.apiKey } });
      out.push({ id: demo.id, name: demo.name, created: !exists, posToken: made.posToken, adminToken: made.adminToken, merchant: made.merchant });
    } catch (error) {
      out.push({ id: demo.id, name: demo.name, created: false, problem: (error as Error).message });
    }
  }
  return out;
}
