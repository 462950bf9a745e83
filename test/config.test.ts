import { describe, expect, it } from '@jest/globals';
import { posSettingDeclarations } from '../adapters/index.js';
import { loadConfig as loadConfigOf } from '../src/config.js';

/** The configuration of this bridge: its own variables and those its adapters declare. */
const loadConfig = (env: Record<string, string>) => loadConfigOf(posSettingDeclarations, env);

const load = (env: Record<string, string>) => () => loadConfig(env);

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

  it('production refuses to start without the upstream and admin token, and never in sandbox', () => {
    expect(load({ NODE_ENV: 'production' })).toThrow(/LOYALTY_BASE_URL, LOYALTY_APP_TOKEN, ADMIN_TOKEN/);
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
});
