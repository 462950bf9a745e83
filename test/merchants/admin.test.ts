/**
 * Managing merchants (admin.ts) on its own: what a create or change may say (every refusal a 400
 * naming the field), what the loyalty service's `resolve-credentials` fills in and what it may not,
 * secrets sealed before they are stored and shown masked, the bridge's tokens shown once and kept as
 * hashes, and nothing stored when a create is refused. The loyalty service is a local server whose
 * answers each test scripts; the store is the in-memory one; the registry is reduced to the three
 * things the admin asks of it (the default merchant's accounts, SECRETS_KEY's box, forgetting).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { BridgeError, ConflictError, NotFoundError, ValidationError } from '../../src/kernel/errors.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { Credential } from '../../src/loyalty/contract.js';
import { MerchantAdmin, merchantSchemas } from '../../src/merchants/admin.js';
import type { StoredMerchant } from '../../src/state/merchant.js';
import type { MerchantRegistry } from '../../src/merchants/registry.js';
import { SecretBox, tokenHash } from '../../src/merchants/secrets.js';
import type { PosSettingDeclarations } from '../../src/pos/settings.js';
import { parseWith } from '../../src/kernel/validation.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';
import { validationIssues } from '../support/validation.js';

/** Two POSes that name merchants by an account (one with an access token, one without) and one that does not. */
const declarations: PosSettingDeclarations = {
  square: { account: { field: 'merchantId', variable: 'SQUARE_MERCHANT_ID', accessToken: true } },
  toast: { account: { field: 'restaurantGuid', variable: 'TOAST_RESTAURANT_GUID', accessToken: false } },
  generic: {},
};
const schemas = merchantSchemas(declarations);
const NOW = '2026-03-01T10:00:00.000Z';
const APP_TOKEN = 'install-app-token-0001';
const OTHER_APP_TOKEN = 'install-app-token-0002';
/** The account the variables bind the default merchant to (SQUARE_MERCHANT_ID). */
const DEFAULT_SQUARE = 'DEFAULTSQ1';

/** What the scripted loyalty service answers to resolve-credentials, by app token; any other token is refused (403). */
let installs: Map<string, Credential[] | 'unavailable'>;
let asked: string[];
let upstream: LocalServer;

beforeAll(async () => {
  upstream = await listenLocally((req, res) => {
    req.resume();
    req.on('end', () => {
      const token = String(req.headers['x-app-token']);
      if (req.url !== '/api/v2/marketplace/resolve-credentials') return res.writeHead(404).end();
      asked.push(token);
      const install = installs.get(token);
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (install === 'unavailable') return json(500, { message: 'down' });
      if (!install) return json(403, { errors: ['Invalid app token.'] });
      json(200, { credentials: install });
    });
  });
});
afterAll(() => upstream.close());
beforeEach(() => {
  installs = new Map([
    [APP_TOKEN, []],
    [OTHER_APP_TOKEN, []],
  ]);
  asked = [];
});

const box = new SecretBox(Buffer.alloc(32, 3));

/** An admin over a fresh store; `withKey: false` is a bridge without SECRETS_KEY. */
function setUp(options: { withKey?: boolean } = {}) {
  const store = new MemoryLedgerStore();
  const forgotten: (string | undefined)[] = [];
  const registry = {
    default: { pos: { square: { account: DEFAULT_SQUARE } } },
    box: options.withKey === false ? undefined : box,
    forget: (id?: string) => void forgotten.push(id),
  } as unknown as MerchantRegistry;
  const clientOptions = { baseUrl: upstream.url, timeoutMs: 2000, retryBaseMs: 1, sleep: async () => undefined };
  const admin = new MerchantAdmin(store, registry, declarations, clientOptions, silentLogger, () => new Date(NOW));
  return { admin, store, forgotten };
}

/** What `run` was refused with, as the error handler would answer it (fails when nothing was refused). */
async function refusal(run: () => Promise<unknown>): Promise<{ status: number; code: string; message: string; issues?: unknown }> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(BridgeError);
    const e = error as BridgeError;
    return { status: e.status, code: e.code, message: e.message, ...(e instanceof ValidationError ? { issues: e.issues } : {}) };
  }
  throw new Error('expected a refusal, but it went through');
}

describe('the create schema: every refusal names its field', () => {
  const valid = { id: 'corner-cafe', loyalty: { appToken: APP_TOKEN } };

  it('takes the least a merchant needs, and everything it may say', () => {
    expect(parseWith(schemas.create, valid)).toEqual(valid);
    const full = {
      id: 'c0rner-cafe-2',
      name: 'Corner Café',
      loyalty: { appToken: APP_TOKEN, apiKey: 'api-key-1' },
      currency: 'EUR',
      phoneRegion: 'DE',
      pos: { square: { merchantId: 'SQ1', accessToken: 'sq-token' }, toast: { restaurantGuid: 'guid-1' }, generic: {} },
    };
    expect(parseWith(schemas.create, full)).toEqual(full);
  });

  it('trims what it keeps', () => {
    expect(parseWith(schemas.create, { ...valid, name: '  Corner  ', loyalty: { appToken: `  ${APP_TOKEN}\n` } })).toEqual({ ...valid, name: 'Corner' });
  });

  it.each([
    ['an id with capitals', { ...valid, id: 'Corner' }, 'id', 'must be lower-case letters, digits and dashes, starting with a letter or digit, at most 64'],
    ['an id starting with a dash', { ...valid, id: '-corner' }, 'id', 'must be lower-case letters, digits and dashes, starting with a letter or digit, at most 64'],
    ['an id of 65 characters', { ...valid, id: 'a'.repeat(65) }, 'id', 'must be lower-case letters, digits and dashes, starting with a letter or digit, at most 64'],
    ['a blank name', { ...valid, name: '   ' }, 'name', 'must not be empty'],
    ['a name of 201 characters', { ...valid, name: 'n'.repeat(201) }, 'name', 'must be at most 200 characters'],
    ['an empty app token', { ...valid, loyalty: { appToken: ' ' } }, 'loyalty.appToken', 'must not be empty'],
    ['an app token of 4097 characters', { ...valid, loyalty: { appToken: 't'.repeat(4097) } }, 'loyalty.appToken', 'must be at most 4096 characters'],
    ['an empty API key', { ...valid, loyalty: { appToken: APP_TOKEN, apiKey: '' } }, 'loyalty.apiKey', 'must not be empty'],
    ['a currency that is not ISO 4217', { ...valid, currency: 'EURO' }, 'currency', 'must be an ISO 4217 currency code such as EUR'],
    ['a currency in lower case', { ...valid, currency: 'eur' }, 'currency', 'must be an ISO 4217 currency code such as EUR'],
    ['a region in lower case', { ...valid, phoneRegion: 'de' }, 'phoneRegion', 'must be a two-letter region the phone rules know, such as DE, GB or US'],
    ['a region the phone rules do not know', { ...valid, phoneRegion: 'XX' }, 'phoneRegion', 'must be a two-letter region the phone rules know, such as DE, GB or US'],
    ['an empty POS account', { ...valid, pos: { square: { merchantId: '' } } }, 'pos.square.merchantId', 'must not be empty'],
    ['an empty POS access token', { ...valid, pos: { square: { accessToken: ' ' } } }, 'pos.square.accessToken', 'must not be empty'],
  ])('refuses %s', (_name, body, field, message) => {
    expect(validationIssues(() => parseWith(schemas.create, body))).toEqual([{ field, message }]);
  });

  it('a missing id or app token is required', () => {
    expect(validationIssues(() => parseWith(schemas.create, { loyalty: {} }))).toEqual([
      { field: 'id', message: 'is required' },
      { field: 'loyalty.appToken', message: 'is required' },
    ]);
    expect(validationIssues(() => parseWith(schemas.create, { id: 'a' }))).toEqual([{ field: 'loyalty', message: 'is required' }]);
  });

  it('refuses fields it does not know, at every level, naming them', () => {
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, status: 'active' }))).toEqual([{ field: '', message: 'unknown field "status"' }]);
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, loyalty: { appToken: APP_TOKEN, apikey: 'x' } }))).toEqual([{ field: 'loyalty', message: 'unknown field "apikey"' }]);
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, pos: { clover: {} } }))).toEqual([{ field: 'pos', message: 'unknown field "clover"' }]);
    // Toast's accounts carry no access token here; a POS without accounts takes no field at all.
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, pos: { toast: { accessToken: 't' } } }))).toEqual([{ field: 'pos.toast', message: 'unknown field "accessToken"' }]);
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, pos: { generic: { account: 'x' } } }))).toEqual([{ field: 'pos.generic', message: 'unknown field "account"' }]);
  });

  it('a POS account cannot be null in a create (there is nothing to remove)', () => {
    expect(validationIssues(() => parseWith(schemas.create, { ...valid, pos: { square: null } })).map((i) => i.field)).toEqual(['pos.square']);
  });
});

describe('the update schema', () => {
  it('takes nothing at all, and null to remove what may be removed', () => {
    expect(parseWith(schemas.update, {})).toEqual({});
    const removals = { loyalty: { apiKey: null }, currency: null, phoneRegion: null, pos: { square: null } };
    expect(parseWith(schemas.update, removals)).toEqual(removals);
  });

  it('changes the status to active or suspended only; the id never', () => {
    expect(parseWith(schemas.update, { status: 'suspended' })).toEqual({ status: 'suspended' });
    expect(validationIssues(() => parseWith(schemas.update, { status: 'deleted' }))).toEqual([{ field: 'status', message: 'must be one of "active", "suspended"' }]);
    expect(validationIssues(() => parseWith(schemas.update, { id: 'other' }))).toEqual([{ field: '', message: 'unknown field "id"' }]);
  });

  it('an app token cannot be removed, nor a name', () => {
    expect(validationIssues(() => parseWith(schemas.update, { loyalty: { appToken: null } })).map((i) => i.field)).toEqual(['loyalty.appToken']);
    expect(validationIssues(() => parseWith(schemas.update, { name: null })).map((i) => i.field)).toEqual(['name']);
  });
});

describe('MerchantAdmin.create', () => {
  it('stores the merchant with its secrets sealed and its tokens hashed; shows the tokens once and the secrets masked', async () => {
    const { admin, store, forgotten } = setUp();
    const created = await admin.create({
      id: 'corner-cafe',
      name: 'Corner Café',
      loyalty: { appToken: APP_TOKEN, apiKey: 'account-api-key-7777' },
      pos: { square: { merchantId: 'SQ-CORNER', accessToken: 'square-access-token-9999' } },
    });
    expect(created.posToken).toMatch(/^pos_[A-Za-z0-9_-]{43}$/);
    expect(created.adminToken).toMatch(/^adm_[A-Za-z0-9_-]{43}$/);
    expect(created.merchant).toEqual({
      id: 'corner-cafe',
      name: 'Corner Café',
      status: 'active',
      loyalty: { appToken: '…0001', apiKey: '…7777' },
      pos: { square: { merchantId: 'SQ-CORNER', accessToken: '…9999' } },
      createdAt: NOW,
      updatedAt: NOW,
      resolvedAt: NOW,
    });
    const stored = (await store.getMerchant('corner-cafe'))!;
    expect(stored).toMatchObject({ id: 'corner-cafe', version: 1, status: 'active', tokens: { pos: tokenHash(created.posToken), admin: tokenHash(created.adminToken) } });
    expect([box.open(stored.loyalty.appToken), box.open(stored.loyalty.apiKey!), box.open(stored.pos.square!.accessToken!)]).toEqual([APP_TOKEN, 'account-api-key-7777', 'square-access-token-9999']);
    expect(stored.pos.square!.account).toBe('SQ-CORNER');
    // Nothing a copy of the ledger would show in clear.
    const text = JSON.stringify(stored);
    for (const secret of [APP_TOKEN, 'account-api-key-7777', 'square-access-token-9999', created.posToken, created.adminToken]) expect(text).not.toContain(secret);
    // The install was asked once, with the app token given; the registry reads the merchant afresh.
    expect(asked).toEqual([APP_TOKEN]);
    expect(forgotten).toEqual(['corner-cafe']);
  });

  it('fills in what the request leaves out from resolve-credentials; what the request gives wins', async () => {
    installs.set(APP_TOKEN, [
      { name: 'currency', value: 'EUR' },
      { name: 'phoneRegion', value: 'DE' },
      { name: 'square.merchantId', value: 'SQ-FROM-INSTALL' },
      { name: 'square.accessToken', value: 'install-square-token-1234' },
      { name: 'toast.restaurantGuid', value: 'guid-from-install' },
      { name: 'companyId', value: '42' },
    ]);
    const { admin } = setUp();
    const filled = await admin.create({ id: 'filled', loyalty: { appToken: APP_TOKEN } });
    expect(filled.merchant).toMatchObject({ currency: 'EUR', phoneRegion: 'DE', pos: { square: { merchantId: 'SQ-FROM-INSTALL', accessToken: '…1234' }, toast: { restaurantGuid: 'guid-from-install' } } });

    const given = await setUp().admin.create({ id: 'given', loyalty: { appToken: APP_TOKEN }, currency: 'GBP', phoneRegion: 'GB', pos: { square: { merchantId: 'SQ-GIVEN' } } });
    expect(given.merchant).toMatchObject({ currency: 'GBP', phoneRegion: 'GB', pos: { square: { merchantId: 'SQ-GIVEN', accessToken: '…1234' } } });
  });

  it('ignores a value from resolve-credentials that would not pass as given, and blank ones', async () => {
    installs.set(APP_TOKEN, [
      { name: 'currency', value: 'euro' },
      { name: 'phoneRegion', value: 'Germany' },
      { name: 'square.merchantId', value: '   ' },
    ]);
    const { merchant } = await setUp().admin.create({ id: 'plain', loyalty: { appToken: APP_TOKEN } });
    expect(merchant).not.toHaveProperty('currency');
    expect(merchant).not.toHaveProperty('phoneRegion');
    expect(merchant.pos).toEqual({});
  });

  it('refuses the id "default", naming the field, before asking the loyalty service', async () => {
    const { admin, store } = setUp();
    expect(await refusal(() => admin.create({ id: 'default', loyalty: { appToken: APP_TOKEN } }))).toEqual({
      status: 400,
      code: 'invalid_payload',
      message: 'id: "default" is the merchant built from the variables; choose another id',
      issues: [{ field: 'id', message: '"default" is the merchant built from the variables; choose another id' }],
    });
    expect(asked).toEqual([]);
    expect((await store.listMerchants({ offset: 0, limit: 10 })).total).toBe(0);
  });

  it('an app token the loyalty service refuses is a 400 naming loyalty.appToken, and nothing is stored', async () => {
    const { admin, store } = setUp();
    expect(await refusal(() => admin.create({ id: 'stranger', loyalty: { appToken: 'not-an-install-token' } }))).toEqual({
      status: 400,
      code: 'invalid_payload',
      message: 'loyalty.appToken: the loyalty service refused this app token (HTTP 403: Invalid app token.): it is not an install of the point-of-sale app',
      issues: [{ field: 'loyalty.appToken', message: 'the loyalty service refused this app token (HTTP 403: Invalid app token.): it is not an install of the point-of-sale app' }],
    });
    expect(await store.getMerchant('stranger')).toBeUndefined();
  });

  it('a loyalty service that cannot answer is a 502 to try again, and nothing is stored', async () => {
    installs.set(APP_TOKEN, 'unavailable');
    const { admin, store } = setUp();
    expect(await refusal(() => admin.create({ id: 'later', loyalty: { appToken: APP_TOKEN } }))).toEqual({
      status: 502,
      code: 'upstream_unavailable',
      message: "could not read the merchant's settings from the loyalty service: resolve-credentials answered HTTP 500, retries spent; try again",
    });
    // A 5xx is retried as every call is: three requests in the round.
    expect(asked).toEqual([APP_TOKEN, APP_TOKEN, APP_TOKEN]);
    expect(await store.getMerchant('later')).toBeUndefined();
  });

  it('without SECRETS_KEY nothing can be stored: 409 secrets_key_missing', async () => {
    const { admin, store } = setUp({ withKey: false });
    expect(await refusal(() => admin.create({ id: 'keyless', loyalty: { appToken: APP_TOKEN } }))).toEqual({
      status: 409,
      code: 'secrets_key_missing',
      message: "SECRETS_KEY is not set: a merchant's secrets cannot be stored",
    });
    expect(await store.getMerchant('keyless')).toBeUndefined();
  });

  it("refuses the default merchant's POS account (its variable binds it), however it is written", async () => {
    const { admin, store } = setUp();
    const taken = await refusal(() => admin.create({ id: 'thief', loyalty: { appToken: APP_TOKEN }, pos: { square: { merchantId: ' defaultsq1 ' } } }));
    expect(taken).toEqual({ status: 409, code: 'conflict', message: 'POS account square:defaultsq1 belongs to merchant default (SQUARE_MERCHANT_ID)' });
    expect(await store.getMerchant('thief')).toBeUndefined();
  });

  it('a malformed body is refused before anything else is looked at', async () => {
    const { admin } = setUp({ withKey: false });
    const refused = await refusal(() => admin.create({ id: 'x', loyalty: { appToken: '' }, extra: 1 }));
    expect(refused).toMatchObject({ status: 400, code: 'invalid_payload' });
    expect(refused.issues).toEqual([
      { field: 'loyalty.appToken', message: 'must not be empty' },
      { field: '', message: 'unknown field "extra"' },
    ]);
    expect(asked).toEqual([]);
  });
});

describe('MerchantAdmin: changes, tokens, refresh', () => {
  async function created(extra: Record<string, unknown> = {}) {
    const env = setUp();
    const made = await env.admin.create({ id: 'corner', loyalty: { appToken: APP_TOKEN, apiKey: 'account-api-key-7777' }, pos: { square: { merchantId: 'SQ-CORNER', accessToken: 'square-access-token-9999' } }, ...extra });
    env.forgotten.length = 0;
    asked.length = 0;
    return { ...env, made };
  }

  it('update changes what it names, removes what is null, and keeps the rest, one version on', async () => {
    const { admin, store, forgotten } = await created({ currency: 'USD' });
    const view = await admin.update('corner', { name: 'Corner 2', loyalty: { apiKey: null }, currency: null, phoneRegion: 'FR', pos: { square: null, toast: { restaurantGuid: 'guid-1' } }, status: 'suspended' });
    expect(view).toEqual({ id: 'corner', name: 'Corner 2', status: 'suspended', loyalty: { appToken: '…0001' }, phoneRegion: 'FR', pos: { toast: { restaurantGuid: 'guid-1' } }, createdAt: NOW, updatedAt: NOW, resolvedAt: NOW });
    const stored = (await store.getMerchant('corner'))!;
    expect(stored.version).toBe(2);
    expect(stored.loyalty.apiKey).toBeUndefined();
    expect(box.open(stored.loyalty.appToken)).toBe(APP_TOKEN);
    // Nothing changed the app token: the loyalty service was not asked.
    expect(asked).toEqual([]);
    expect(forgotten).toEqual(['corner']);
  });

  it('a new app token is checked with the loyalty service first: refused, nothing changes', async () => {
    const { admin, store } = await created();
    const before = await store.getMerchant('corner');
    expect(await refusal(() => admin.update('corner', { loyalty: { appToken: 'not-an-install-token' } }))).toMatchObject({ status: 400, issues: [{ field: 'loyalty.appToken', message: expect.stringContaining('HTTP 403') }] });
    expect(await store.getMerchant('corner')).toEqual(before);
    const view = await admin.update('corner', { loyalty: { appToken: OTHER_APP_TOKEN } });
    expect(view.loyalty.appToken).toBe('…0002');
    expect(asked).toEqual(['not-an-install-token', OTHER_APP_TOKEN]);
  });

  it("update refuses a body that is not one, naming the field, and a merchant that does not exist (404), the default one too", async () => {
    const { admin } = await created();
    expect(await refusal(() => admin.update('corner', { currency: 'usd' }))).toMatchObject({ status: 400, issues: [{ field: 'currency', message: 'must be an ISO 4217 currency code such as EUR' }] });
    expect(await refusal(() => admin.update('nobody', {}))).toEqual({ status: 404, code: 'not_found', message: 'no merchant nobody' });
    expect(await refusal(() => admin.get('default'))).toEqual({ status: 404, code: 'not_found', message: 'the default merchant is built from the variables and is not managed here' });
  });

  it("taking the default merchant's account in a change is refused; an account the merchant held already is not", async () => {
    const { admin, store } = await created();
    const refused = await refusal(() => admin.update('corner', { pos: { square: { merchantId: DEFAULT_SQUARE } } }));
    expect(refused).toEqual({ status: 409, code: 'conflict', message: `POS account square:${DEFAULT_SQUARE.toLowerCase()} belongs to merchant default (SQUARE_MERCHANT_ID)` });
    expect((await store.getMerchant('corner'))!.pos.square!.account).toBe('SQ-CORNER');
    // A merchant that held the account before the variable named it can still be changed (suspended here).
    const holder: StoredMerchant = { ...(await store.getMerchant('corner'))!, id: 'holder', version: 1, pos: { square: { account: DEFAULT_SQUARE } }, tokens: { pos: 'p', admin: 'a' } };
    await store.saveMerchant(holder);
    expect((await admin.update('holder', { status: 'suspended' })).status).toBe('suspended');
  });

  it('rotateTokens gives two new tokens; only their hashes are kept, the old ones replaced', async () => {
    const { admin, store, made } = await created();
    const rotated = await admin.rotateTokens('corner');
    expect([rotated.posToken, rotated.adminToken]).not.toContain(made.posToken);
    expect(rotated.posToken).toMatch(/^pos_/);
    expect(rotated.adminToken).toMatch(/^adm_/);
    const stored = (await store.getMerchant('corner'))!;
    expect(stored.tokens).toEqual({ pos: tokenHash(rotated.posToken), admin: tokenHash(rotated.adminToken) });
    expect(stored.version).toBe(2);
    expect(rotated.merchant).not.toHaveProperty('tokens');
  });

  it("refresh fills only what the merchant lacks from resolve-credentials; what it has stays", async () => {
    const { admin } = await created();
    installs.set(APP_TOKEN, [
      { name: 'currency', value: 'EUR' },
      { name: 'square.merchantId', value: 'SQ-OTHER' },
      { name: 'square.accessToken', value: 'other-square-token-5555' },
      { name: 'toast.restaurantGuid', value: 'guid-new' },
    ]);
    const view = await admin.refresh('corner');
    expect(view).toMatchObject({ currency: 'EUR', pos: { square: { merchantId: 'SQ-CORNER', accessToken: '…9999' }, toast: { restaurantGuid: 'guid-new' } } });
    expect(asked).toEqual([APP_TOKEN]);
  });

  it('view never shows a secret or a token hash', async () => {
    const { admin, store, made } = await created();
    const text = JSON.stringify(admin.view((await store.getMerchant('corner'))!));
    for (const hidden of [APP_TOKEN, 'account-api-key-7777', 'square-access-token-9999', tokenHash(made.posToken), tokenHash(made.adminToken)]) expect(text).not.toContain(hidden);
  });
});

describe('the errors the admin answers with', () => {
  it('are the bridge errors the error handler maps (the classes the routes rely on)', async () => {
    const { admin } = setUp();
    await expect(admin.get('nobody')).rejects.toBeInstanceOf(NotFoundError);
    await expect(admin.create({ id: 'thief', loyalty: { appToken: APP_TOKEN }, pos: { square: { merchantId: DEFAULT_SQUARE } } })).rejects.toBeInstanceOf(ConflictError);
    await expect(admin.create({})).rejects.toBeInstanceOf(ValidationError);
  });
});
