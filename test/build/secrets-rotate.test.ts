/**
 * `npm run secrets:rotate -- --to <new key>` as an operator runs it (a process, on the built
 * dist/scripts/secrets-rotate.js), on a file ledger and on PostgreSQL: every merchant's secrets end
 * up sealed with the new key and open to what they were, tokens untouched; a bridge then serves the
 * merchants with the new key and refuses to start with the old one (one line); a run again, or after
 * an interruption, finishes what is left; a wrong SECRETS_KEY changes nothing; the sandbox's key file
 * follows the rotation. Needs `npm run build` first (npm test does it).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import request from 'supertest';
import { startBridge, type Bridge } from '../../src/bridge.js';
import { ConfigError } from '../../src/config.js';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { openStore } from '../../src/ledger/open-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { sealedSecretsOf, type SealedSecret, type StoredMerchant } from '../../src/state/merchant.js';
import { keyFingerprint, parseSecretsKey, SecretBox } from '../../src/merchants/secrets.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { ADMIN_TOKEN, checkout, testConfig } from '../support/harness.js';
import { filesText, tablesText } from '../support/ledger-text.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const newKey = () => randomBytes(32).toString('base64');
const fingerprint = (key: string) => keyFingerprint(parseSecretsKey(key));

/**
 * Where the built script is run from: an empty folder, as an operator's shell anywhere would be. Not
 * the checkout, whose ./data may hold a sandbox's key from an earlier `npm start` (which the command
 * then uses for a ledger that is not a file's, and "SECRETS_KEY is not set" is not what it answers).
 */
const shellDir = mkdtempSync(join(tmpdir(), 'secrets-rotate-shell-'));
afterAll(() => rmSync(shellDir, { recursive: true, force: true }));

/** The command as an operator types it, or the built script itself (`direct`), with only these variables. */
function rotate(args: string[], env: Record<string, string>, how: 'npm' | 'direct' = 'direct'): { status: number | null; stdout: string; stderr: string } {
  const clean = { PATH: process.env.PATH!, HOME: process.env.HOME ?? tmpdir(), ...env };
  const result =
    how === 'npm'
      ? spawnSync('npm', ['run', '--silent', 'secrets:rotate', '--', ...args], { cwd: process.cwd(), env: clean, encoding: 'utf8', timeout: 120_000 })
      : spawnSync(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'secrets-rotate.js'), ...args], { cwd: shellDir, env: clean, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Every sealed secret, by the product's own list (so a sealed field added later is held to rotation too). */
function sealedOf(m: StoredMerchant): SealedSecret[] {
  return sealedSecretsOf(m).map((s) => s.sealed);
}

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`npm run secrets:rotate on the ${store.name} ledger`, () => {
    const K1 = newKey();
    const K2 = newKey();
    const K3 = newKey();
    let dir: string;
    let ledgerUrl: string;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let sim: Simulator;
    let simServer: ListeningSimulator;
    /** What each merchant's secrets are in clear, to check they survive re-sealing. */
    const clear = new Map<string, string[]>();
    const posTokens = new Map<string, string>();

    const start = (secretsKey: string): Promise<Bridge> =>
      startBridge(testConfig({ ...(schema ? { LEDGER_URL: schema.url } : {}) }, dir), silentLogger, {
        loyaltyBaseUrl: simServer.url,
        loyaltyAppToken: sim.appToken,
        adminToken: ADMIN_TOKEN,
        defaultMetrics: false,
        secretsKey,
      });
    /** The merchants as stored, read without a bridge. */
    const stored = async (): Promise<StoredMerchant[]> => {
      const s = openStore(ledgerUrl);
      await s.init();
      try {
        return (await s.listMerchants({ offset: 0, limit: 100 })).items;
      } finally {
        await s.close();
      }
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'secrets-rotate-'));
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'rotate');
      ledgerUrl = schema?.url ?? `file:${join(dir, 'ledger.json')}`;
      sim = createSimulator();
      simServer = await sim.listen();
      const bridge = await start(K1);
      try {
        const merchants = [
          { id: 'rot-a', apiKey: true, pos: { square: { merchantId: 'SQ-ROT-A', accessToken: `sq-access-${randomBytes(8).toString('hex')}` }, clover: { merchantId: 'CLOVERROTAAAA', accessToken: `cl-access-${randomBytes(8).toString('hex')}` }, toast: { restaurantGuid: 'a0b1c2d3-0000-4000-8000-00000000707a', loyaltyKey: `toast-loyalty-${randomBytes(12).toString('hex')}` } } },
          { id: 'rot-b', apiKey: false, pos: { shopify: { shopDomain: 'rot-b.myshopify.com' } } },
        ];
        for (const m of merchants) {
          const installed = sim.addMerchant({ id: m.id, appToken: `app-${m.id}-${randomBytes(8).toString('hex')}` });
          const res = await request(bridge.url)
            .post('/v1/admin/merchants')
            .set('authorization', `Bearer ${ADMIN_TOKEN}`)
            .send({ id: m.id, loyalty: { appToken: installed.appToken, ...(m.apiKey ? { apiKey: installed.apiKey } : {}) }, pos: m.pos });
          expect(res.status).toBe(201);
          posTokens.set(m.id, res.body.posToken);
          clear.set(m.id, [installed.appToken, ...(m.apiKey ? [installed.apiKey] : []), ...Object.values(m.pos).flatMap((a) => [...('accessToken' in a ? [a.accessToken] : []), ...('loyaltyKey' in a ? [a.loyaltyKey] : [])])]);
        }
      } finally {
        await bridge.close();
      }
    }, 30_000);

    afterAll(async () => {
      await simServer?.close();
      await schema?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('re-seals every secret with the new key, leaves tokens and masks as they were, and never prints a key', async () => {
      const before = await stored();
      expect(before.flatMap(sealedOf).every((s) => s.key === fingerprint(K1))).toBe(true);
      const run = rotate(['--to', K2], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K1 }, 'npm');
      expect([run.status, run.stderr]).toEqual([0, expect.any(String)]);
      expect(run.stdout).toContain(`re-sealing from SECRETS_KEY (key ${fingerprint(K1)}) to the new key (key ${fingerprint(K2)})`);
      expect(run.stdout).toMatch(/merchant rot-a: 5 secret\(s\) re-sealed/);
      expect(run.stdout).toMatch(/merchant rot-b: 1 secret\(s\) re-sealed/);
      expect(run.stdout).toMatch(/2 merchant\(s\) re-sealed \(6 secret\(s\)\), 0 already under the new key/);
      expect(run.stdout).toContain('now set SECRETS_KEY to the new key');
      for (const key of [K1, K2]) expect(run.stdout + run.stderr).not.toContain(key);

      const after = await stored();
      const box = new SecretBox(parseSecretsKey(K2));
      for (const m of after) {
        const was = before.find((b) => b.id === m.id)!;
        expect(m.version).toBe(was.version + 1);
        expect(m.tokens).toEqual(was.tokens);
        expect(sealedOf(m).every((s) => s.key === fingerprint(K2))).toBe(true);
        expect(sealedOf(m).map((s) => s.hint).sort()).toEqual(sealedOf(was).map((s) => s.hint).sort());
        // (PostgreSQL's jsonb keeps an object's keys in its own order: compared as sets.)
        expect(sealedOf(m).map((s) => box.open(s)).sort()).toEqual([...clear.get(m.id)!].sort());
      }
    }, 60_000);

    it('after re-sealing, no secret is in clear in the ledger, nor in what the command printed', async () => {
      const stored = schema ? await tablesText(schema.url) : filesText(dir);
      expect(stored.texts.join('\n')).toContain('SQ-ROT-A');
      const secrets = [...clear.values()].flat();
      expect(secrets).toHaveLength(6);
      expect(secrets.filter((x) => stored.texts.some((t) => t.includes(x)))).toEqual([]);
      const run = rotate(['--to', K2], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K1 });
      expect(secrets.filter((x) => (run.stdout + run.stderr).includes(x))).toEqual([]);
    });

    it('run again, it finds every merchant done and changes nothing', async () => {
      const before = await stored();
      const run = rotate(['--to', K2], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K1 });
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(/0 merchant\(s\) re-sealed \(0 secret\(s\)\), 2 already under the new key/);
      expect(await stored()).toEqual(before);
    });

    it('a bridge with the old key refuses to start, naming the merchants; with the new key it serves them (their POS tokens unchanged)', async () => {
      await expect(start(K1)).rejects.toThrow(ConfigError);
      await expect(start(K1)).rejects.toThrow(new RegExp(`SECRETS_KEY \\(key ${fingerprint(K1)}\\) does not open the secrets of merchant\\(s\\) rot-a \\(key ${fingerprint(K2)}\\), rot-b`));
      const bridge = await start(K2);
      try {
        for (const id of ['rot-a', 'rot-b']) {
          const res = await request(bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${posTokens.get(id)}`).set('content-type', 'application/json').send(JSON.stringify(checkout({ orderId: `ROT-${id}` })));
          expect([id, res.status, res.body.status]).toEqual([id, 200, 'accrued']);
          // Accrued with the merchant's own app token, opened with the new key: in its own books.
          expect(sim.merchant(id).books().transactions[`generic:ROT-${id}`]).toMatchObject({ accruals: 1 });
        }
      } finally {
        await bridge.close();
      }
    });

    it('a wrong SECRETS_KEY changes nothing and says which secrets it cannot open', async () => {
      const before = await stored();
      const run = rotate(['--to', newKey()], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K1 });
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/^secrets:rotate: nothing was changed: 6 secret\(s\) cannot be opened: merchant rot-a: loyalty.appToken is sealed with key [0-9a-f]{16}, neither SECRETS_KEY/);
      // One line: nothing was re-sealed, so nothing is said to stay.
      expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(await stored()).toEqual(before);
    });

    it('a run cut short is finished by the same command: merchants already under the new key are skipped', async () => {
      // As a run from K2 to K3 leaves the ledger when it stops after its first merchant.
      const s = openStore(ledgerUrl);
      await s.init();
      try {
        const a = (await s.getMerchant('rot-a'))!;
        const [from, to] = [new SecretBox(parseSecretsKey(K2)), new SecretBox(parseSecretsKey(K3))];
        const again = (x: SealedSecret) => to.seal(from.open(x));
        await s.saveMerchant({
          ...a,
          version: a.version + 1,
          loyalty: { appToken: again(a.loyalty.appToken), apiKey: again(a.loyalty.apiKey!) },
          pos: Object.fromEntries(Object.entries(a.pos).map(([pos, acc]) => [pos, { ...acc, ...(acc.accessToken ? { accessToken: again(acc.accessToken) } : {}), ...(acc.registerKey ? { registerKey: again(acc.registerKey) } : {}) }])),
        });
      } finally {
        await s.close();
      }
      const run = rotate(['--to', K3], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K2 });
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(/merchant rot-b: 1 secret\(s\) re-sealed/);
      expect(run.stdout).not.toMatch(/merchant rot-a:/);
      expect(run.stdout).toMatch(/1 merchant\(s\) re-sealed \(1 secret\(s\)\), 1 already under the new key/);
      const box = new SecretBox(parseSecretsKey(K3));
      for (const m of await stored()) expect(sealedOf(m).map((x) => box.open(x)).sort()).toEqual([...clear.get(m.id)!].sort());
    });

    it('refuses, with exit code 2 and no change, a missing or bad --to, the current key as --to, and a missing SECRETS_KEY', () => {
      const env = { LEDGER_URL: ledgerUrl, SECRETS_KEY: K3 };
      for (const [args, e, message] of [
        [[], env, /--to is required/],
        [['--to', 'short'], env, /--to must be 32 random bytes in base64/],
        [['--to', K3], env, /--to is SECRETS_KEY itself/],
        [['--to', newKey()], { LEDGER_URL: ledgerUrl }, /SECRETS_KEY is not set/],
        [['--to', newKey(), '--bogus'], env, /unknown argument "--bogus"/],
      ] as const) {
        const run = rotate([...args], e);
        expect([run.status, run.stderr]).toEqual([2, expect.stringMatching(message)]);
        expect(run.stderr).not.toContain(K3);
      }
    });

    if (store.name === 'file') {
      it('refuses a file ledger a bridge holds: stop the bridge first', async () => {
        const bridge = await start(K3);
        try {
          const run = rotate(['--to', newKey()], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K3 });
          expect(run.status).toBe(1);
          expect(run.stderr).toMatch(/is in use by process \d+: stop the bridge first/);
        } finally {
          await bridge.close();
        }
      });

      it("sandbox: with no SECRETS_KEY, the key file beside the ledger is used and then holds the new key", async () => {
        const keyFile = join(dir, 'sandbox-secrets.key');
        writeFileSync(keyFile, `${K3}\n`, { mode: 0o600 });
        const K4 = newKey();
        const run = rotate(['--to', K4], { LEDGER_URL: ledgerUrl });
        expect([run.status, run.stderr]).toEqual([0, '']);
        expect(run.stdout).toContain(`sandbox: ${keyFile} now holds the new key (key ${fingerprint(K4)})`);
        expect(readFileSync(keyFile, 'utf8').trim()).toBe(K4);
        expect(statSync(keyFile).mode & 0o777).toBe(0o600);
        expect((await stored()).flatMap(sealedOf).every((s) => s.key === fingerprint(K4))).toBe(true);
        expect(FileLedgerStore.fromUrl(ledgerUrl).manifestPath).toBe(join(dir, 'ledger.json'));
      });
    }

    if (store.name === 'PostgreSQL') {
      it('a run stopped after some merchants says how many it re-sealed, which stay so, and the same command then finishes', async () => {
        // The database refuses rot-b's write (rot-a is re-sealed first): the stop a lost connection makes mid-run.
        const url = new URL(ledgerUrl);
        const schemaName = url.searchParams.get('schema')!;
        url.searchParams.delete('schema');
        const db = new pg.Client({ connectionString: url.toString() });
        await db.connect();
        try {
          await db.query(`CREATE FUNCTION ${schemaName}.refuse_rot_b() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.id = 'rot-b' THEN RAISE EXCEPTION 'the test refuses rot-b'; END IF; RETURN NEW; END $$`);
          await db.query(`CREATE TRIGGER refuse_rot_b BEFORE UPDATE ON ${schemaName}.ledger_merchants FOR EACH ROW EXECUTE FUNCTION ${schemaName}.refuse_rot_b()`);
          const K5 = newKey();
          const stopped = rotate(['--to', K5], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K3 });
          expect(stopped.status).toBe(1);
          expect(stopped.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^secrets:rotate: failed: .*the test refuses rot-b.*; 1 merchant\(s\) re-sealed before it stopped stay so: run the same command again to finish$/)]);
          expect(stopped.stdout).toMatch(/merchant rot-a: 5 secret\(s\) re-sealed/);
          const keys = new Map((await stored()).map((m) => [m.id, new Set(sealedOf(m).map((x) => x.key))]));
          expect(keys).toEqual(new Map([['rot-a', new Set([fingerprint(K5)])], ['rot-b', new Set([fingerprint(K3)])]]));

          await db.query(`DROP TRIGGER refuse_rot_b ON ${schemaName}.ledger_merchants`);
          const finished = rotate(['--to', K5], { LEDGER_URL: ledgerUrl, SECRETS_KEY: K3 });
          expect([finished.status, finished.stderr]).toEqual([0, '']);
          expect(finished.stdout).toMatch(/1 merchant\(s\) re-sealed \(1 secret\(s\)\), 1 already under the new key/);
          const box = new SecretBox(parseSecretsKey(K5));
          for (const m of await stored()) expect(sealedOf(m).map((x) => box.open(x)).sort()).toEqual([...clear.get(m.id)!].sort());
        } finally {
          await db.end();
        }
      });
    }
  });
}
