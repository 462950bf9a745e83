import { describe, expect, it } from '@jest/globals';
import { loadConfig } from '../src/config.js';

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
  ])('fails fast naming the variable: %o', (env, name) => {
    expect(load(env)).toThrow(name);
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
});
