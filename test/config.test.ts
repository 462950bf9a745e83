import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { posSettingDeclarations } from '../adapters/index.js';
import { loadConfig as loadConfigOf } from '../src/config.js';

/** The configuration of this bridge: its own variables and those its adapters declare. */
const loadConfig = (env: Record<string, string>) => loadConfigOf(posSettingDeclarations, env);

const load = (env: Record<string, string>) => () => loadConfig(env);

/** The message loadConfig refuses `env` with. */
const refusal = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${JSON.stringify(env)} was accepted`);
};

const production = { NODE_ENV: 'production', LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't', ADMIN_TOKEN: 'a'.repeat(32) };

describe('configuration', () => {
  it('defaults to sandbox with the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      sandbox: true,
      port: 8080,
      ledgerUrl: 'file:./data/ledger.json',
      logLevel: 'info',
      defaultCurrency: 'USD',
      defaultPhoneRegion: 'US',
      loyalty: { timeoutMs: 10000, retryBaseMs: 1000 },
    });
  });

  it('environment variables win over config files', () => {
    const config = loadConfig({ PORT: '9000', LOYALTY_BASE_URL: 'https://loyalty.example.test/', LOYALTY_APP_TOKEN: 't', LOYALTY_TIMEOUT_MS: '2500' });
    expect(config).toMatchObject({ sandbox: false, port: 9000, loyalty: { baseUrl: 'https://loyalty.example.test', appToken: 't', timeoutMs: 2500 } });
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT/],
    [{ LOYALTY_TIMEOUT_MS: '-1' }, /LOYALTY_TIMEOUT_MS/],
    [{ LOYALTY_BASE_URL: 'not a url' }, /LOYALTY_BASE_URL/],
    [{ LEDGER_URL: 'mysql://x' }, /LEDGER_URL/],
    [{ DEFAULT_CURRENCY: 'EURO' }, /DEFAULT_CURRENCY/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ ADMIN_TOKEN: 'short' }, /ADMIN_TOKEN/],
    [{ POS_TOKEN: 'short' }, /POS_TOKEN/],
    [{ LOYALTY_BASE_URL: 'https://loyalty.example.test' }, /LOYALTY_APP_TOKEN/],
    [{ POS_AUTH: 'none' }, /POS_AUTH/],
    [{ POS_AUTH: 'off', POS_TOKEN: 'p'.repeat(20) }, /POS_AUTH=off and POS_TOKEN/],
    [{ SQUARE_API_BASE_URL: 'not a url' }, /SQUARE_API_BASE_URL/],
    [{ SHOPIFY_WEBHOOK_SECRET: ' ' }, /SHOPIFY_WEBHOOK_SECRET/],
    [{ LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't', SQUARE_SIGNATURE_KEY: 'k' }, /SQUARE_NOTIFICATION_URL is required with SQUARE_SIGNATURE_KEY/],
  ])('fails fast naming the variable: %o', (env, name) => {
    expect(load(env)).toThrow(name);
  });

  it('ADMIN_TOKENS names operators, each with a token of their own; a wrong entry is named by position and name, never by its token', () => {
    expect(loadConfig({}).namedAdminTokens).toEqual([]);
    expect(loadConfig({ ADMIN_TOKENS: ' alice=alice-token-0123456789 , bob.smith=bob-token-0123456789abc' }).namedAdminTokens).toEqual([
      { name: 'alice', token: 'alice-token-0123456789' },
      { name: 'bob.smith', token: 'bob-token-0123456789abc' },
    ]);
    expect(load({ ADMIN_TOKENS: 'alice=short-secret' })).toThrow('invalid configuration: ADMIN_TOKENS entry 1 (alice) has a token shorter than 16 characters');
    expect(load({ ADMIN_TOKENS: 'admin=admin-token-0123456789' })).toThrow(/ADMIN_TOKENS entry 1 \(admin\) has a name that is not allowed/);
    expect(load({ ADMIN_TOKENS: 'merchant:x=admin-token-0123456789' })).toThrow(/ADMIN_TOKENS entry 1 has a name that is not allowed/);
    expect(load({ ADMIN_TOKENS: 'alice=same-token-0123456789,bob=same-token-0123456789' })).toThrow(/entry 2 \(bob\) repeats a token/);
    expect(load({ ADMIN_TOKENS: 'alice=one-token-0123456789,alice=two-token-0123456789' })).toThrow(/entry 2 \(alice\) repeats a name/);
    expect(load({ ADMIN_TOKENS: 'just-a-token-0123456789' })).toThrow(/entry 1 must be name=token/);
    // The message never quotes a token.
    expect(load({ ADMIN_TOKENS: 'alice=short-secret' })).toThrow(/^(?![\s\S]*short-secret)/);
  });

  it('an ADMIN_TOKENS token that is also ADMIN_TOKEN, POS_TOKEN or another entry\'s is refused at start, naming the variable and the entry, never the token', () => {
    const adminToken = 'the-admin-token-0123456789';
    const posToken = 'the-pos-token-0123456789';
    // With ADMIN_TOKEN's token the operator would be recorded as `admin`: refused, in sandbox and in production alike.
    expect(refusal({ ADMIN_TOKEN: adminToken, ADMIN_TOKENS: `alice=alice-token-0123456789,bob=${adminToken}` })).toBe(
      "invalid configuration: ADMIN_TOKENS entry 2 (bob) reuses ADMIN_TOKEN's token; give each operator a token of their own, used nowhere else",
    );
    expect(refusal({ ...production, POS_TOKEN: posToken, ADMIN_TOKEN: adminToken, ADMIN_TOKENS: `alice=${adminToken}` })).toBe(
      "invalid configuration: ADMIN_TOKENS entry 1 (alice) reuses ADMIN_TOKEN's token; give each operator a token of their own, used nowhere else",
    );
    // Spaces around an entry's token are not part of it, so they do not hide the reuse.
    expect(refusal({ ADMIN_TOKEN: adminToken, ADMIN_TOKENS: `alice= ${adminToken} ` })).toMatch(/ADMIN_TOKENS entry 1 \(alice\) reuses ADMIN_TOKEN's token/);
    // A POS's credential must not open the admin API.
    expect(refusal({ POS_TOKEN: posToken, ADMIN_TOKENS: `alice=${posToken}` })).toBe(
      "invalid configuration: ADMIN_TOKENS entry 1 (alice) reuses POS_TOKEN's token; give each operator a token of their own, used nowhere else",
    );
    // Two entries with one token.
    expect(refusal({ ADMIN_TOKENS: 'alice=shared-token-0123456789,bob=shared-token-0123456789' })).toBe('invalid configuration: ADMIN_TOKENS entry 2 (bob) repeats a token');
    // Listed with every other problem at once.
    const several = refusal({ ADMIN_TOKEN: adminToken, POS_TOKEN: posToken, ADMIN_TOKENS: `alice=${adminToken},bob=${posToken}`, PORT: 'eighty' });
    expect(several.split('\n')).toEqual([
      'invalid configuration (3 problems):',
      '  - PORT must be a port number from 0 to 65535, e.g. 8080 (got "eighty")',
      "  - ADMIN_TOKENS entry 1 (alice) reuses ADMIN_TOKEN's token; give each operator a token of their own, used nowhere else",
      "  - ADMIN_TOKENS entry 2 (bob) reuses POS_TOKEN's token; give each operator a token of their own, used nowhere else",
    ]);
    for (const message of [several, refusal({ ADMIN_TOKENS: 'alice=shared-token-0123456789,bob=shared-token-0123456789' })]) {
      for (const secret of [adminToken, posToken, 'shared-token-0123456789']) expect(message).not.toContain(secret);
    }
    // Tokens of their own are accepted.
    expect(loadConfig({ ADMIN_TOKEN: adminToken, POS_TOKEN: posToken, ADMIN_TOKENS: 'alice=alice-token-0123456789' }).namedAdminTokens).toEqual([{ name: 'alice', token: 'alice-token-0123456789' }]);
  });

  it('production refuses to start without the upstream and admin token, and never in sandbox', () => {
    expect(load({ NODE_ENV: 'production' })).toThrow(/LOYALTY_BASE_URL, LOYALTY_APP_TOKEN, ADMIN_TOKEN, POS_TOKEN/);
    expect(load({ NODE_ENV: 'production', LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't' })).toThrow(/ADMIN_TOKEN/);
    expect(loadConfig({ ...production, POS_TOKEN: 'p'.repeat(32) }).sandbox).toBe(false);
  });

  it('production refuses to start without POS_TOKEN unless the deployment opts out with POS_AUTH=off', () => {
    expect(load(production)).toThrow(/NODE_ENV=production needs POS_TOKEN/);
    expect(loadConfig({ ...production, POS_AUTH: 'off' }).posAuth).toEqual({ mode: 'open', because: 'POS_AUTH=off' });
    expect(loadConfig({ ...production, POS_TOKEN: 'p'.repeat(32) }).posAuth).toEqual({ mode: 'token', token: 'p'.repeat(32) });
  });

  it('direct POS posts are open only in sandbox or by choice; outside sandbox an unset POS_TOKEN closes them', () => {
    expect(loadConfig({}).posAuth).toEqual({ mode: 'open', because: 'sandbox' });
    expect(loadConfig({ POS_TOKEN: 'p'.repeat(20) }).posAuth).toEqual({ mode: 'token', token: 'p'.repeat(20) });
    expect(loadConfig({ LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't' }).posAuth).toEqual({ mode: 'token' });
  });

  it('sandbox listens on 127.0.0.1 (its webhook secret is public), elsewhere on every interface; HOST wins', () => {
    const real = { LOYALTY_BASE_URL: 'https://loyalty.example.test', LOYALTY_APP_TOKEN: 't' };
    expect(loadConfig({}).host).toBe('127.0.0.1');
    expect(loadConfig(real).host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
    expect(loadConfig({ ...real, HOST: '10.0.0.5' }).host).toBe('10.0.0.5');
    expect(loadConfig({ HOST: '::1' }).host).toBe('::1');
    expect(loadConfig({ HOST: 'localhost' }).host).toBe('localhost');
    expect(loadConfig({ HOST: '' }).host).toBe('127.0.0.1');
    expect(load({ HOST: 'http://0.0.0.0' })).toThrow(/HOST/);
    expect(load({ HOST: '0.0.0.0:8080' })).toThrow(/HOST/);
  });

  it('backfill: scheduled passes off outside sandbox unless BACKFILL_INTERVAL_MS says, every minute in sandbox; a 72 h overlap', () => {
    const outside = { LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't' };
    expect(loadConfig(outside).backfill).toEqual({ intervalMs: 0, overlapMs: 72 * 3_600_000 });
    expect(loadConfig({}).backfill).toEqual({ intervalMs: 60_000, overlapMs: 72 * 3_600_000 });
    expect(loadConfig({ BACKFILL_INTERVAL_MS: '0' }).backfill.intervalMs).toBe(0);
    expect(loadConfig({ ...outside, BACKFILL_INTERVAL_MS: '300000', BACKFILL_OVERLAP_MS: '3600000' }).backfill).toEqual({ intervalMs: 300_000, overlapMs: 3_600_000 });
    expect(() => loadConfig({ ...outside, BACKFILL_INTERVAL_MS: '-1' })).toThrow(/BACKFILL_INTERVAL_MS/);
    expect(() => loadConfig({ ...outside, BACKFILL_OVERLAP_MS: 'a day' })).toThrow(/BACKFILL_OVERLAP_MS/);
  });

  it('POS settings come from the variables each adapter declares, with their defaults', () => {
    expect(loadConfig({ PORT: '9000' }).pos).toEqual({
      generic: { apiBaseUrl: '' },
      square: { webhookSecret: 'sandbox-webhook-secret', notificationUrl: 'http://localhost:9000/v1/webhooks/square', apiBaseUrl: 'https://connect.squareup.com' },
      shopify: { webhookSecret: 'sandbox-webhook-secret', apiBaseUrl: 'https://{shop}', accessTokenHeader: 'X-Shopify-Access-Token' },
      clover: { webhookSecret: 'sandbox-webhook-secret', apiBaseUrl: 'https://api.clover.com' },
      toast: { webhookSecret: 'sandbox-webhook-secret', apiBaseUrl: 'https://ws-api.toasttab.com' },
      loyverse: { webhookSecret: 'sandbox-webhook-secret', apiBaseUrl: 'https://api.loyverse.com' },
    });
    const outside = { LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't' };
    expect(loadConfig({ ...outside, CLOVER_AUTH_CODE: 'c', CLOVER_ACCESS_TOKEN: 'a', CLOVER_API_BASE_URL: 'https://eu.clover.test/' }).pos.clover).toEqual({
      webhookSecret: 'c',
      accessToken: 'a',
      apiBaseUrl: 'https://eu.clover.test',
    });
    expect(loadConfig(outside).pos.toast).toEqual({ apiBaseUrl: 'https://ws-api.toasttab.com' });
    // {shop} stands for the shop domain (backfill puts each merchant's in); the rest must be a URL.
    expect(loadConfig({ ...outside, SHOPIFY_API_BASE_URL: 'http://127.0.0.1:9/shopify/{shop}' }).pos.shopify!.apiBaseUrl).toBe('http://127.0.0.1:9/shopify/{shop}');
    expect(() => loadConfig({ ...outside, SHOPIFY_API_BASE_URL: '{shop}' })).toThrow(/SHOPIFY_API_BASE_URL/);
  });

  it('NODE_ENV=production with nothing set names all four variables it needs, in one message, each with why', () => {
    const message = refusal({ NODE_ENV: 'production' });
    expect(message).toBe(
      'invalid configuration: NODE_ENV=production needs LOYALTY_BASE_URL, LOYALTY_APP_TOKEN, ADMIN_TOKEN, POS_TOKEN: sandbox never starts in production; ' +
        'the admin API needs a token of at least 16 characters; without POS_TOKEN anyone who can reach /v1/checkouts and /v1/refunds could accrue or reverse points ' +
        '(set POS_AUTH=off only where those paths are reachable from a private network alone)',
    );
    // POS_AUTH=off is the one way to go without POS_TOKEN; the other three stay named.
    expect(refusal({ NODE_ENV: 'production', POS_AUTH: 'off' })).toMatch(/needs LOYALTY_BASE_URL, LOYALTY_APP_TOKEN, ADMIN_TOKEN: /);
    expect(refusal({ ...production })).toMatch(/needs POS_TOKEN: without POS_TOKEN/);
  });

  it('lists every bad or missing variable at once, one line each, the bridge\'s own first, then the POS variables, then the rules across them', () => {
    const message = refusal({ NODE_ENV: 'production', LOYALTY_TIMEOUT_MS: '10s', PORT: 'eighty', ADMIN_TOKEN: 'short', SQUARE_API_BASE_URL: 'nope', BRIDGE_FAILPOINTS: 'call:before-send' });
    expect(message.split('\n')).toEqual([
      'invalid configuration (6 problems):',
      '  - PORT must be a port number from 0 to 65535, e.g. 8080 (got "eighty")',
      '  - LOYALTY_TIMEOUT_MS must be a whole number of milliseconds, e.g. 10000 (got "10s": 10s is 10000 milliseconds)',
      '  - ADMIN_TOKEN must be at least 16 characters',
      '  - SQUARE_API_BASE_URL must be an http(s) URL ({shop} may stand for the shop domain) (got "nope")',
      expect.stringMatching(/^ {2}- NODE_ENV=production needs LOYALTY_BASE_URL, LOYALTY_APP_TOKEN, POS_TOKEN: sandbox never starts in production; without POS_TOKEN/),
      '  - BRIDGE_FAILPOINTS is for crash tests and is refused in production',
    ]);
  });

  it.each([
    ['LOYALTY_TIMEOUT_MS', '10s', 'must be a whole number of milliseconds, e.g. 10000 (got "10s": 10s is 10000 milliseconds)'],
    ['LOYALTY_TIMEOUT_MS', '0', 'must be at least 1 millisecond, e.g. 10000 (got 0)'],
    ['LOYALTY_RETRY_BASE_MS', '1.5', 'must be a whole number of milliseconds, e.g. 1000 (got "1.5")'],
    ['BACKFILL_INTERVAL_MS', '5min', 'must be a whole number of milliseconds, e.g. 60000 (a minute; 0: off) (got "5min": 5min is 300000 milliseconds)'],
    ['BACKFILL_OVERLAP_MS', '72h', 'must be a whole number of milliseconds, e.g. 259200000 (72 hours) (got "72h": 72h is 259200000 milliseconds)'],
    ['ANSWER_BUDGET_MS', '2500', 'must be at most 1900 milliseconds: it must leave room to answer a POS within 2 s (got 2500)'],
    ['METRICS_REFRESH_MS', '50', 'must be at least 100 milliseconds, e.g. 10000 (got 50)'],
    ['BODY_LIMIT_BYTES', '1mb', 'must be a whole number of bytes, e.g. 1048576 (1 MiB) (got "1mb")'],
    ['WORKER_CONCURRENCY', 'many', 'must be a whole number of records at once, e.g. 8 (got "many")'],
    ['DEAD_LETTER_RETRY_MAX_ATTEMPTS', '99', 'must be at most 20 runs (got 99)'],
    ['PORT', '70000', 'must be at most 65535 (got 70000)'],
    ['SANDBOX_SIMULATOR_PORT', 'auto', 'must be a port number from 0 to 65535, e.g. 4010 (got "auto")'],
  ])('a number names its unit and an example: %s=%s', (variable, value, message) => {
    expect(refusal({ [variable]: value })).toBe(`invalid configuration: ${variable} ${message}`);
  });

  it.each([
    ['PARTIAL_REFUND_POLICY', 'reaccrue-all', 'must be one of reaccrue, full_only (got "reaccrue-all")'],
    ['LOG_LEVEL', 'loud', 'must be one of fatal, error, warn, info, debug, trace, silent (got "loud")'],
    ['POS_AUTH', 'none', 'must be token or off (got "none")'],
    ['DEFAULT_PHONE_REGION', 'XX', 'must be a two-letter region the phone rules know, such as US, GB or DE (got "XX")'],
    ['DEFAULT_PHONE_REGION', 'us', 'must be a two-letter region the phone rules know, such as US, GB or DE (got "us")'],
    ['DEFAULT_CURRENCY', 'XYZ', 'must be an ISO 4217 currency code such as USD (got "XYZ")'],
    ['HOST', 'local host', 'must be an IP address or a host name, e.g. 127.0.0.1 or 0.0.0.0 (got "local host")'],
    ['LEDGER_URL', 'mysql://bridge:s3cret@db/loyalty', 'must be file:<path> or postgres://… (got "mysql://bridge:***@db/loyalty")'],
    ['SQUARE_NOTIFICATION_URL', 'not a url', 'must be an http(s) URL (got "not a url")'],
    ['SQUARE_API_BASE_URL', 'ftp://connect.squareup.com', 'must be an http(s) URL ({shop} may stand for the shop domain) (got "ftp://connect.squareup.com")'],
  ])('a refused word is echoed, and a region is one the phone rules know: %s=%s', (variable, value, message) => {
    expect(refusal({ [variable]: value })).toBe(`invalid configuration: ${variable} ${message}`);
  });

  it('numbers are read as the digits they are: no NaN, no exponent, no silent rounding', () => {
    expect(loadConfig({ LOYALTY_TIMEOUT_MS: ' 2500 ' }).loyalty.timeoutMs).toBe(2500);
    expect(refusal({ LOYALTY_TIMEOUT_MS: '1e4' })).toMatch(/LOYALTY_TIMEOUT_MS must be a whole number of milliseconds, e.g. 10000 \(got "1e4"\)/);
    expect(refusal({ LOYALTY_TIMEOUT_MS: 'NaN' })).toBe('invalid configuration: LOYALTY_TIMEOUT_MS must be a whole number of milliseconds, e.g. 10000 (got "NaN")');
  });

  it('LOYALTY_BASE_URL is the address before /api/v2/: a URL that is not one, or that ends in /api/v2, is named with what to write', () => {
    expect(refusal({ LOYALTY_BASE_URL: 'loyalty.example.test', LOYALTY_APP_TOKEN: 't' })).toBe(
      'invalid configuration: LOYALTY_BASE_URL must be the loyalty service\'s http(s) address, before /api/v2/, e.g. https://loyalty.example.com (got "loyalty.example.test")',
    );
    expect(refusal({ LOYALTY_BASE_URL: 'https://loyalty.example.test/api/v2/', LOYALTY_APP_TOKEN: 't' })).toBe(
      'invalid configuration: LOYALTY_BASE_URL must be the address before /api/v2/ (the bridge adds /api/v2/ itself): leave /api/v2 out (got "https://loyalty.example.test/api/v2/")',
    );
    expect(loadConfig({ LOYALTY_BASE_URL: 'https://gateway.example.test/loyalty/', LOYALTY_APP_TOKEN: 't' }).loyalty.baseUrl).toBe('https://gateway.example.test/loyalty');
  });

  it('production refuses a chosen token that is a placeholder or shorter than 24 characters, and an issued credential that is a placeholder, naming each and never its value', () => {
    const base = { ...production, ADMIN_TOKEN: 'a'.repeat(32), POS_TOKEN: 'p'.repeat(32) };
    expect(loadConfig(base).nodeEnv).toBe('production');
    expect(refusal({ ...base, ADMIN_TOKEN: 'changeme-changeme-changeme' })).toBe('invalid configuration: ADMIN_TOKEN is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)');
    expect(refusal({ ...base, ADMIN_TOKEN: 'your-admin-token-here-0123' })).toBe('invalid configuration: ADMIN_TOKEN is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)');
    expect(refusal({ ...base, POS_TOKEN: 'pos-token-of-20chars' })).toBe('invalid configuration: POS_TOKEN must be at least 24 characters in production (it has 20): set it to a long random value (e.g. openssl rand -base64 32)');
    expect(refusal({ ...base, ADMIN_TOKENS: `alice=${'k'.repeat(30)},bob=REPLACE_ME_bobs_token_here` })).toBe('invalid configuration: ADMIN_TOKENS entry 2 (bob) is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)');
    expect(refusal({ ...base, SQUARE_ACCESS_TOKEN: 'change-me' })).toBe('invalid configuration: SQUARE_ACCESS_TOKEN is a placeholder (as docs/production.env.example ships it): set it to the value issued for this bridge');
    // The default merchant's Toast register key is chosen, as the tokens are: at least 24 everywhere, no placeholder in production.
    expect(refusal({ ...base, TOAST_LOYALTY_KEY: 'change-me-toast-loyalty-key' })).toBe('invalid configuration: TOAST_LOYALTY_KEY is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)');
    expect(refusal({ ...base, TOAST_LOYALTY_KEY: 'k'.repeat(20) })).toBe('invalid configuration: TOAST_LOYALTY_KEY must be at least 24 characters: it is what lets a register read guests and accrue');
    expect(loadConfig({ ...base, TOAST_LOYALTY_KEY: ` ${'k'.repeat(30)} ` }).pos.toast!.registerKey).toBe('k'.repeat(30));
    // Issued credentials are taken as issued, however short; outside production nothing of this applies.
    expect(loadConfig({ ...base, LOYALTY_APP_TOKEN: 'short' }).nodeEnv).toBe('production');
    expect(loadConfig({ LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 't', ADMIN_TOKEN: 'change-me-admin-token' }).nodeEnv).not.toBe('production');
    for (const value of ['changeme-changeme-changeme', 'pos-token-of-20chars', 'REPLACE_ME_bobs_token_here']) {
      expect(refusal({ ...base, ADMIN_TOKEN: value })).not.toContain(value);
    }
  });

  it('a secret never appears in a refusal', () => {
    const message = refusal({ NODE_ENV: 'production', LOYALTY_BASE_URL: 'https://l.example.test', LOYALTY_APP_TOKEN: 'app-token-secret-1', ADMIN_TOKEN: 'adm-secret', POS_TOKEN: 'pos-secret', LOYALTY_TIMEOUT_MS: 'x' });
    expect(message).toMatch(/ADMIN_TOKEN must be at least 16 characters/);
    for (const secret of ['app-token-secret-1', 'adm-secret', 'pos-secret']) expect(message).not.toContain(secret);
  });

  it('docs/production.env.example, copied as shipped, is refused for its placeholders, naming each; with them replaced it starts a production bridge; every variable it names is one the bridge reads, and it is shell-safe', () => {
    const text = readFileSync('docs/production.env.example', 'utf8');
    const set = Object.fromEntries([...text.matchAll(/^([A-Z_]+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
    expect(set).toMatchObject({ NODE_ENV: 'production', LOYALTY_BASE_URL: expect.any(String), LOYALTY_APP_TOKEN: expect.any(String), ADMIN_TOKEN: expect.any(String), POS_TOKEN: expect.any(String) });
    expect(refusal(set).split('\n')).toEqual([
      'invalid configuration (4 problems):',
      '  - ADMIN_TOKEN is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)',
      '  - POS_TOKEN is a placeholder (as docs/production.env.example ships it): set it to a long random value (e.g. openssl rand -base64 32)',
      '  - LOYALTY_API_KEY is a placeholder (as docs/production.env.example ships it): set it to the value issued for this bridge',
      '  - LOYALTY_APP_TOKEN is a placeholder (as docs/production.env.example ships it): set it to the value issued for this bridge',
    ]);
    /** The example with every change-me value replaced, as its first lines ask. */
    let n = 0;
    const replaced = (env: Record<string, string>) => Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replace(/change-me[-a-z0-9]*/g, () => `r4nd0m${++n}-0123456789abcdefghijkl`)]));
    const config = loadConfig(replaced(set));
    expect(config).toMatchObject({ sandbox: false, nodeEnv: 'production', posAuth: { mode: 'token' }, ledgerUrl: 'file:/data/ledger.json' });
    // Uncommented, the commented-out lines are accepted too (a SECRETS_KEY and the POS variables).
    const all = Object.fromEntries([...text.matchAll(/^#? ?([A-Z_]+)=(\S*)$/gm)].map((m) => [m[1]!, m[2]!]));
    const known = new Set([...Object.keys(all)].filter((name) => name !== 'SECRETS_KEY' && name !== 'LEDGER_URL'));
    expect(loadConfig({ ...replaced(all), LEDGER_URL: set.LEDGER_URL!, SECRETS_KEY: Buffer.alloc(32, 7).toString('base64') }).pos.square).toMatchObject({ notificationUrl: 'https://bridge.example.com/v1/webhooks/square' });
    // A name the bridge does not read would be a silent typo: each is named in docs/configuration.md's table.
    const table = readFileSync('docs/configuration.md', 'utf8');
    for (const name of known) expect([name, table.includes(`\`${name}\``)]).toEqual([name, true]);
    // `. ./bridge.env` in a shell must read it: no value holds a space, <, >, $, quote or backquote.
    for (const [name, value] of Object.entries(all)) expect([name, /[\s<>$'"`;&|]/.test(value)]).toEqual([name, false]);
  });
});
