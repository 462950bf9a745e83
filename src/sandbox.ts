/**
 * What sandbox adds to a bridge started with nothing configured (no LOYALTY_BASE_URL; never in
 * production), so that many merchants can be tried at once (docs/merchants.md):
 *
 * - a SECRETS_KEY, when none is set, generated once and kept in a private file (0600, in a 0700
 *   folder) beside the file ledger, so that the demo merchants' sealed secrets open again at the
 *   next start;
 * - two demo merchants, each installed at the in-process simulator (its own app token, API key,
 *   books, and what resolve-credentials answers: an account on every POS with its access token, a
 *   currency and a phone region) and created in the bridge from nothing but that app token, once: a
 *   later start finds them in the ledger and creates nothing;
 * - the simulator's fake POS APIs as the bridge's POS APIs, each demo merchant's POS accounts held
 *   there, so that webhooks carrying only ids (Square, Clover) or a customer's id (Loyverse) are
 *   completed from them as from the real POS (docs/pos-systems.md, "Signing a webhook by hand").
 *
 * - a fresh ledger at every start (prepareSandboxLedger), since the in-process simulator's books start
 *   empty at every start too: a ledger kept from an earlier run would hold accruals these books never
 *   saw, and every report would end with differences. SANDBOX_LEDGER=keep keeps it, said loudly.
 *
 * Their POS and admin tokens are issued anew at every start and printed in the banner, as the
 * sandbox's generated admin token is: nothing about them is fixed or public, tokens of an earlier
 * run stop working, and the ledger keeps only their hashes. Their POS API access tokens are fixed
 * and public (demoPosToken).
 */
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { FileLedgerStore } from './ledger/file-store.js';
import { LedgerLockedError, ProcessLock } from './ledger/process-lock.js';
import { makePrivate, PRIVATE_DIR, PRIVATE_FILE } from './ledger/private-files.js';
import type { MerchantAdmin, MerchantView } from './merchants/admin.js';
import { newSecretsKey, parseSecretsKey, SecretsKeyError } from './merchants/secrets.js';
import type { PosSettings } from './pos/contract.js';
import type { PosSettingDeclarations } from './pos/settings.js';
import { POS_API_BASE_PATHS, POS_NAMES, type PosName, type Simulator } from '../simulator/index.js';

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

/**
 * The POSes whose API sandbox points the bridge at the simulator's fake of (docs/simulator-pos-apis.md):
 * every vendor POS, each with a `<POS>_API_BASE_URL` the bridge completes webhooks from.
 */
export const SANDBOX_POS_APIS: readonly PosName[] = POS_NAMES;

/**
 * `pos` (Config.pos) with the API base URL of each of SANDBOX_POS_APIS at the simulator's fake, unless
 * the operator set that variable (`isSet`): a sandbox may be aimed at a POS's own test environment.
 * Answers the settings and, by POS, the address each was pointed at.
 */
export function withSandboxPosApis(
  pos: Readonly<Record<string, PosSettings>>,
  declarations: PosSettingDeclarations,
  simulatorUrl: string,
  isSet: (variable: string) => boolean,
): { pos: Record<string, PosSettings>; pointed: Partial<Record<PosName, string>> } {
  const next = { ...pos };
  const pointed: Partial<Record<PosName, string>> = {};
  for (const name of SANDBOX_POS_APIS) {
    const variable = declarations[name]?.apiBaseUrl?.variable;
    // A programming error, not a configuration one: the list names a POS that has no API address.
    if (!variable || !next[name]) throw new Error(`sandbox points ${name}'s API at the simulator, but ${name} declares no API base URL variable`);
    if (isSet(variable)) continue;
    pointed[name] = `${simulatorUrl}${POS_API_BASE_PATHS[name]}`;
    next[name] = { ...next[name], apiBaseUrl: pointed[name] };
  }
  return { pos: next, pointed };
}

/**
 * A demo merchant's access token at the fake API of `pos`. Fixed and public, like the sandbox's
 * webhook secret: the fakes hold only test data and listen on 127.0.0.1, and a fixed token is what
 * lets a merchant created at an earlier start (its token sealed in the ledger) read the fakes of a
 * later one, which start empty and are given the same accounts again.
 */
export function demoPosToken(merchantId: string, pos: string): string {
  return `sandbox-${pos}-token-${merchantId}`;
}

/**
 * A demo merchant's Toast loyalty key: what its fake restaurant's register sends in Authorization
 * (POST /__sim/pos/toast/accounts/<guid>/loyalty) and the bridge checks (pos.toast.loyaltyKey).
 * Fixed and public for the same reason as demoPosToken.
 */
export function demoLoyaltyKey(merchantId: string): string {
  return `sandbox-toast-loyalty-key-${merchantId}`;
}

/**
 * Each fake POS: the credential naming a merchant's account on it (`<pos>.<field>`, the field of the
 * bridge's POS account, bridge-contract "Merchants"), and the fake's options for that account.
 */
const DEMO_POS: Readonly<Record<PosName, { field: string; options(account: string, accessToken: string, currency: string): unknown }>> = {
  square: { field: 'merchantId', options: (merchantId, accessToken, currency) => ({ merchantId, accessToken, currency }) },
  shopify: { field: 'shopDomain', options: (shop, accessToken, currency) => ({ shop, accessToken, currency }) },
  clover: { field: 'merchantId', options: (merchantId, accessToken, currency) => ({ merchantId, accessToken, currency }) },
  toast: { field: 'restaurantGuid', options: (restaurantGuid, accessToken, currency) => ({ restaurantGuid, accessToken, currency }) },
  loyverse: { field: 'merchantId', options: (merchantId, accessToken, currency) => ({ merchantId, accessToken, currency }) },
};

/** The demo merchants (docs/merchants.md): an account on every POS, each also held by the simulator's fake of that POS. */
export const DEMO_MERCHANTS = [
  {
    id: 'demo-bakery',
    name: 'Demo Bakery',
    currency: 'EUR',
    phoneRegion: 'DE',
    accounts: {
      square: 'DEMOBAKERYSQ1',
      shopify: 'demo-bakery.myshopify.com',
      clover: 'DEMOBAKERYCL1',
      toast: 'b0000000-0000-4000-8000-000000000001',
      loyverse: 'b0000000-0000-4000-8000-000000000002',
    },
  },
  {
    id: 'demo-cafe',
    name: 'Demo Cafe',
    currency: 'GBP',
    phoneRegion: 'GB',
    accounts: {
      square: 'DEMOCAFESQ001',
      shopify: 'demo-cafe.myshopify.com',
      clover: 'DEMOCAFECL001',
      toast: 'c0000000-0000-4000-8000-000000000001',
      loyverse: 'c0000000-0000-4000-8000-000000000002',
    },
  },
] as const satisfies readonly { id: string; name: string; currency: string; phoneRegion: string; accounts: Record<PosName, string> }[];

/** What resolve-credentials answers for a demo merchant: each POS account and its token, the currency and the phone region. */
export function demoCredentials(demo: (typeof DEMO_MERCHANTS)[number]): Record<string, string> {
  const credentials: Record<string, string> = {};
  for (const [pos, account] of Object.entries(demo.accounts) as [PosName, string][]) {
    credentials[`${pos}.${DEMO_POS[pos].field}`] = account;
    credentials[`${pos}.accessToken`] = demoPosToken(demo.id, pos);
  }
  return { ...credentials, currency: demo.currency, phoneRegion: demo.phoneRegion };
}

/**
 * Installs the demo merchants at the simulator (before it listens): at the loyalty service, where
 * their app tokens are the simulator's defaults for their ids, and at each fake POS, with their tokens.
 */
export function installDemoMerchants(sim: Simulator): void {
  for (const demo of DEMO_MERCHANTS) {
    sim.addMerchant({ id: demo.id, credentials: demoCredentials(demo) });
    installPosAccounts(sim, demo.id, demo.accounts, demo.currency);
  }
}

/** Opens `accounts` (by POS) at the simulator's fake POSes for `merchantId`, each with its public token (demoPosToken). */
export function installPosAccounts(sim: Simulator, merchantId: string, accounts: Readonly<Record<PosName, string>>, currency: string): void {
  for (const [pos, account] of Object.entries(accounts) as [PosName, string][]) {
    const options = DEMO_POS[pos].options(account, demoPosToken(merchantId, pos), currency) as Record<string, unknown>;
    // The fake restaurant's register calls the bridge with the key the merchant is given (ensureDemoMerchants).
    sim.pos.byName(pos)!.addAccount(pos === 'toast' ? { ...options, loyaltyKey: demoLoyaltyKey(merchantId) } : options);
  }
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
      // A merchant made at an earlier start is given any demo POS account or token it lacks (one
      // made before the fake POS APIs has only its Square and Shopify accounts); what it has stays.
      if (exists) await admin.refresh(demo.id);
      // Nothing but the app token (and the API key, for verification): the rest comes from resolve-credentials.
      const made = exists ? await admin.rotateTokens(demo.id) : await admin.create({ id: demo.id, name: demo.name, loyalty: { appToken: installed.appToken, apiKey: installed.apiKey } });
      // The key its fake Toast restaurant's register sends (a merchant's own choice, never a credential the loyalty service resolves).
      const merchant = made.merchant.pos.toast?.loyaltyKey ? made.merchant : await admin.update(demo.id, { pos: { toast: { loyaltyKey: demoLoyaltyKey(demo.id) } } });
      out.push({ id: demo.id, name: demo.name, created: !exists, posToken: made.posToken, adminToken: made.adminToken, merchant });
    } catch (error) {
      out.push({ id: demo.id, name: demo.name, created: false, problem: (error as Error).message });
    }
  }
  return out;
}

/**
 * What sandbox did with its ledger at this start (the banner says it):
 * - `new`: there was none; this one is marked as sandbox's, to be emptied at its next start;
 * - `emptied`: sandbox's own ledger of an earlier run, emptied (the simulator's books are empty too);
 * - `kept`: left as it is, with `why` (SANDBOX_LEDGER=keep; PostgreSQL, which sandbox never empties;
 *   a file ledger sandbox did not make, which may be a real one; or one in use by another process).
 *   Its records then name accruals the new simulator never booked: `warning` says what that does.
 */
export type SandboxLedger = { action: 'new' | 'emptied' } | { action: 'kept'; why: string; warning: boolean };

/** The file beside a file ledger that says sandbox made it (so that sandbox may empty it), for a manifest path. */
export function sandboxLedgerMarker(manifestPath: string): string {
  return join(dirname(manifestPath), `${basename(manifestPath, extname(manifestPath))}.sandbox.json`);
}

/**
 * Makes the ledger match the simulator's empty books, or says why not. Only a file ledger sandbox
 * made itself (its marker beside it) is ever emptied: a ledger it did not make could be a real one
 * that a missing LOYALTY_BASE_URL sent into sandbox, and nothing of it is touched. Emptying takes
 * the ledger's lock first, so a ledger another process holds is left alone (its start-up then
 * refuses, as it always did). What it removes is every file of the ledger: the manifest and each
 * file named after it (`ledger.json*`, `ledger.journal/`, `ledger.index.sqlite*`, `ledger.merchants/`,
 * …), never the sandbox's key file or anything else in the folder.
 */
export async function prepareSandboxLedger(ledgerUrl: string, keep: boolean, options: { lockWaitMs?: number } = {}): Promise<SandboxLedger> {
  if (!ledgerUrl.startsWith('file:')) return { action: 'kept', why: 'a PostgreSQL ledger, which sandbox never empties', warning: true };
  const manifest = FileLedgerStore.fromUrl(ledgerUrl).manifestPath;
  const marker = sandboxLedgerMarker(manifest);
  const exists = async (path: string) => stat(path).then(() => true, () => false);
  if (!(await exists(manifest))) {
    await mkdir(dirname(manifest), { recursive: true, mode: PRIVATE_DIR });
    await writeMarker(marker);
    return { action: 'new' };
  }
  if (keep) return { action: 'kept', why: 'SANDBOX_LEDGER=keep', warning: true };
  if (!(await exists(marker))) return { action: 'kept', why: 'it was not made by sandbox (or by a build before sandbox emptied its ledger), so it is left as it is', warning: true };
  // `lockWaitMs`: a sandbox bridge stopped just before this start may still hold it while it finishes its work.
  const lock = new ProcessLock(`${manifest}.lock`, { waitForOwnerMs: options.lockWaitMs });
  try {
    await lock.acquire();
  } catch (error) {
    // Another bridge runs on it (a second sandbox of this clone): the start cannot go on, and waiting again would not help.
    if (error instanceof LedgerLockedError) throw error;
    return { action: 'kept', why: (error as Error).message, warning: false };
  }
  try {
    const folder = dirname(manifest);
    const stem = basename(manifest, extname(manifest));
    const own = (name: string) => name === basename(manifest) || name.startsWith(`${stem}.`);
    for (const name of (await readdir(folder)).filter(own)) {
      if (name === basename(lock.path)) continue;
      await rm(join(folder, name), { recursive: true, force: true });
    }
    await writeMarker(marker);
  } finally {
    await lock.release();
  }
  return { action: 'emptied' };
}

async function writeMarker(path: string): Promise<void> {
  const handle = await open(path, 'w', PRIVATE_FILE);
  try {
    await handle.writeFile(`${JSON.stringify({ madeBy: 'sandbox', note: 'npm start without LOYALTY_BASE_URL empties this ledger at every start (its simulator starts empty too); SANDBOX_LEDGER=keep keeps it' })}\n`);
  } finally {
    await handle.close();
  }
}
