/**
 * `npm run secrets:rotate -- --to <new key>` re-seals every merchant's secrets (app token, API key,
 * POS access tokens) from SECRETS_KEY to the new key, in the configured ledger (LEDGER_URL, or
 * `--url`; a file ledger or PostgreSQL). Then set SECRETS_KEY to the new key and start the bridge.
 * Token hashes are not secrets sealed with the key and stay as they are.
 *
 * Safe to run again, whatever stopped it: each merchant is re-sealed in one write (its own file,
 * renamed into place; or one PostgreSQL transaction, compare-and-set on its version), and a
 * merchant whose secrets are under the new key already is left alone. So a run cut short is
 * finished by running the same command again, and a run after SECRETS_KEY was already changed to the
 * new key does nothing. Before anything is written, every secret of every merchant is opened (with
 * SECRETS_KEY, or the new key for those done): a wrong SECRETS_KEY changes nothing.
 *
 * Stop the bridge first: a file ledger refuses two processes ("in use by process N"); bridges on
 * PostgreSQL that still run with the old key cannot open a merchant once it is re-sealed, and refuse
 * its requests until they are restarted with the new key.
 *
 * Sandbox (no SECRETS_KEY, the key in the private file beside the ledger): that file is used, and
 * holds the new key afterwards.
 *
 * Exit codes: 0 every merchant is under the new key; 1 failed (its line says whether anything was
 * re-sealed, which stays so: run it again); 2 a missing or bad argument or SECRETS_KEY. Keys are never printed, only their fingerprints.
 */
import { existsSync } from 'node:fs';
import { configuredValue } from '../src/config.js';
import { VersionConflictError } from '../src/kernel/errors.js';
import { FileLedgerStore } from '../src/ledger/file-store.js';
import { openStore } from '../src/ledger/open-store.js';
import { redactUrl } from '../src/ledger/pg-store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { sealedSecretsOf, type StoredMerchant } from '../src/state/merchant.js';
import type { SealedSecret } from '../src/state/merchant.js';
import { keyFingerprint, parseSecretsKey, SecretBox, SecretsKeyError } from '../src/merchants/secrets.js';
import { readSandboxKey, sandboxKeyPath, writeSandboxKey } from '../src/sandbox.js';
import { command, CommandError, describeError, isEntryPoint, parseOptions } from './cli.js';

const USAGE = 'usage: SECRETS_KEY=<current key> npm run secrets:rotate -- --to <new key> [--url <ledger>]   (new key: openssl rand -base64 32; ledger: LEDGER_URL)';
/** Attempts per merchant when a running bridge changes it meanwhile (PostgreSQL). */
const ATTEMPTS = 3;

export interface RotateOptions {
  /** `file:<path>` or `postgres://…`. */
  url: string;
  /** The current SECRETS_KEY (base64). */
  from: string;
  /** The new key (base64). */
  to: string;
  log?: (line: string) => void;
  clock?: () => Date;
}

export interface RotateResult {
  merchants: number;
  /** Merchants re-sealed by this run. */
  resealed: number;
  /** Merchants whose secrets were under the new key already (an earlier, interrupted run). */
  alreadyNew: number;
  /** Secrets re-sealed by this run. */
  secrets: number;
}

/** The merchant with every secret under `to`: those under `from` opened and sealed again, the hint kept. */
function resealed(m: StoredMerchant, from: SecretBox, to: SecretBox, now: string): { next: StoredMerchant; count: number } {
  let count = 0;
  const again = (s: SealedSecret): SealedSecret => {
    if (s.key === to.fingerprint) return s;
    count++;
    return to.seal(from.open(s));
  };
  const next: StoredMerchant = {
    ...m,
    version: m.version + 1,
    updatedAt: now,
    loyalty: { appToken: again(m.loyalty.appToken), ...(m.loyalty.apiKey ? { apiKey: again(m.loyalty.apiKey) } : {}) },
    pos: Object.fromEntries(Object.entries(m.pos).map(([pos, a]) => [pos, { ...a, ...(a.accessToken ? { accessToken: again(a.accessToken) } : {}), ...(a.registerKey ? { registerKey: again(a.registerKey) } : {}) }])),
  };
  return { next, count };
}

async function allMerchants(store: LedgerStore): Promise<StoredMerchant[]> {
  const all: StoredMerchant[] = [];
  for (let offset = 0; ; offset += 100) {
    const { items, total } = await store.listMerchants({ offset, limit: 100 });
    all.push(...items);
    if (all.length >= total || items.length === 0) return all;
  }
}

/**
 * Opens every secret with the key its fingerprint names (`from` or `to`); answers the problems, one
 * line each (a secret under another key, or one that key does not open).
 */
function check(merchants: StoredMerchant[], from: SecretBox, to: SecretBox): string[] {
  const problems: string[] = [];
  for (const m of merchants) {
    for (const { where, sealed } of sealedSecretsOf(m)) {
      const box = sealed.key === from.fingerprint ? from : sealed.key === to.fingerprint ? to : undefined;
      if (!box) {
        problems.push(`merchant ${m.id}: ${where} is sealed with key ${sealed.key}, neither SECRETS_KEY (${from.fingerprint}) nor the new key (${to.fingerprint})`);
        continue;
      }
      try {
        box.open(sealed);
      } catch (error) {
        problems.push(`merchant ${m.id}: ${where} does not open with the key that sealed it (${sealed.key}): ${describeError(error)}`);
      }
    }
  }
  return problems;
}

/** Re-seals each merchant in its own write, counting into `result` as it goes (so a stop knows how far it got). */
async function resealAll(store: LedgerStore, merchants: StoredMerchant[], from: SecretBox, to: SecretBox, clock: () => Date, log: (line: string) => void, result: RotateResult): Promise<void> {
  for (const first of merchants) {
    let current = first;
    for (let attempt = 1; ; attempt++) {
      const { next, count } = resealed(current, from, to, clock().toISOString());
      if (count === 0) {
        result.alreadyNew++;
        break;
      }
      try {
        await store.saveMerchant(next);
        result.resealed++;
        result.secrets += count;
        log(`merchant ${current.id}: ${count} secret(s) re-sealed`);
        break;
      } catch (error) {
        // A bridge on the same PostgreSQL ledger changed it meanwhile: read it again and re-seal that.
        if (!(error instanceof VersionConflictError) || attempt >= ATTEMPTS) throw error;
        const fresh = await store.getMerchant(current.id);
        if (!fresh) break;
        const again = check([fresh], from, to);
        if (again.length) throw new CommandError(`merchant ${current.id} changed meanwhile and cannot be opened now: ${again[0]}`);
        current = fresh;
      }
    }
  }
}

/** The rotation itself; throws CommandError for what stops it. */
export async function rotateSecrets(options: RotateOptions): Promise<RotateResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const clock = options.clock ?? (() => new Date());
  const from = new SecretBox(parseSecretsKey(options.from));
  const to = new SecretBox(parseSecretsKey(options.to));
  if (from.fingerprint === to.fingerprint) throw new CommandError('--to is SECRETS_KEY itself: give the new key', 2);
  const store = openStore(options.url);
  try {
    try {
      await store.init();
    } catch (error) {
      const owner = /in use by process (\d+)/.exec(describeError(error))?.[1];
      if (owner) throw new CommandError(`the ledger ${redactUrl(options.url)} is in use by process ${owner}: stop the bridge first, then run this again`);
      throw error;
    }
    const merchants = await allMerchants(store);
    log(`ledger ${redactUrl(options.url)}: ${merchants.length} merchant(s); re-sealing from SECRETS_KEY (key ${from.fingerprint}) to the new key (key ${to.fingerprint})`);
    const problems = check(merchants, from, to);
    if (problems.length) {
      throw new CommandError(`nothing was changed: ${problems.length} secret(s) cannot be opened: ${problems.slice(0, 20).join('; ')}${problems.length > 20 ? `; and ${problems.length - 20} more` : ''}. Is SECRETS_KEY the key the bridge runs with?`);
    }
    const result: RotateResult = { merchants: merchants.length, resealed: 0, alreadyNew: 0, secrets: 0 };
    try {
      await resealAll(store, merchants, from, to, clock, log, result);
    } catch (error) {
      // What the operator must know of a stop: whether anything was written, and so what running it again does.
      const said = error instanceof CommandError ? error.message : `failed: ${describeError(error)}`;
      const exitCode = error instanceof CommandError ? error.exitCode : 1;
      if (result.resealed === 0) throw new CommandError(`${said}; nothing was changed`, exitCode);
      throw new CommandError(`${said}; ${result.resealed} merchant(s) re-sealed before it stopped stay so: run the same command again to finish`, exitCode);
    }
    // Read back: every secret under the new key, and opening with it.
    const after = await allMerchants(store);
    const left = after.flatMap((m) => sealedSecretsOf(m).filter(({ sealed }) => sealed.key !== to.fingerprint).map(({ where }) => `merchant ${m.id}: ${where}`));
    if (left.length) throw new CommandError(`${left.length} secret(s) are not under the new key after re-sealing (was a merchant created meanwhile with SECRETS_KEY?): ${left.slice(0, 5).join('; ')}; run this again`);
    for (const m of after) for (const { sealed } of sealedSecretsOf(m)) to.open(sealed);
    log(`${result.resealed} merchant(s) re-sealed (${result.secrets} secret(s)), ${result.alreadyNew} already under the new key: every merchant's secrets are under key ${to.fingerprint}`);
    return result;
  } finally {
    await store.close().catch(() => undefined);
  }
}

/** The command: answers the exit code. */
export const main = command({
  name: 'secrets:rotate',
  opensLedger: true,
  usage: USAGE,
  // Never a key, even one given where an argument was expected.
  secrets: (argv, env) => [...argv.map((a) => a.replace(/^--[a-z-]+=/, '')), env.SECRETS_KEY ?? ''].filter((value) => value.length >= 16 && !value.startsWith('--')),
  async run({ argv, env, hideUrl }) {
    const options = parseOptions(argv, ['to', 'url']);
    const to = options.get('to');
    if (!to) throw new CommandError(`--to is required: the new key (openssl rand -base64 32)\n${USAGE}`, 2);
    try {
      parseSecretsKey(to);
    } catch (error) {
      if (error instanceof SecretsKeyError) throw new CommandError(`--to ${error.message}`, 2);
      throw error;
    }
    const url = options.get('url') ?? configuredValue('LEDGER_URL', env);
    if (url) hideUrl(url);
    if (!url || !/^(file:.+|postgres(ql)?:\/\/.+)$/.test(url)) throw new CommandError(`LEDGER_URL (or --url) must be file:<path> or postgres://…${url ? `, not ${redactUrl(url)}` : ''}`, 2);
    // SECRETS_KEY, else the sandbox's own key file beside the ledger (replaced with the new key at the end).
    let from = env.SECRETS_KEY?.trim() || undefined;
    const sandboxFile = from ? undefined : sandboxKeyPath(url);
    if (sandboxFile && existsSync(sandboxFile)) from = await readSandboxKey(sandboxFile);
    if (!from) throw new CommandError('SECRETS_KEY is not set: it must be the key the merchants are sealed with now', 2);
    try {
      parseSecretsKey(from);
    } catch (error) {
      if (error instanceof SecretsKeyError) throw new CommandError(`SECRETS_KEY ${error.message}`, 2);
      throw error;
    }
    if (url.startsWith('file:') && !existsSync(FileLedgerStore.fromUrl(url).manifestPath)) throw new CommandError(`there is no ledger at ${FileLedgerStore.fromUrl(url).manifestPath}`, 2);
    await rotateSecrets({ url, from, to });
    if (sandboxFile && existsSync(sandboxFile)) {
      await writeSandboxKey(sandboxFile, to, true);
      process.stdout.write(`sandbox: ${sandboxFile} now holds the new key (key ${keyFingerprint(parseSecretsKey(to))})\n`);
    } else {
      process.stdout.write('now set SECRETS_KEY to the new key, and start the bridge(s) with it\n');
    }
  },
});

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
