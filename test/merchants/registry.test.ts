/**
 * The merchants a running bridge serves (registry.ts), through its public lookups only: the default
 * merchant built from the variables, created merchants read from the store with their secrets opened,
 * found by id, by the POS and admin tokens the bridge gave them, and by the POS account a webhook
 * names; suspended ones found as they are (the callers refuse them); what a missing merchant gives;
 * and the lookup cache (a change made elsewhere seen within CACHE_MS, one made here at once).
 *
 * How a registry is given its loyalty clients is the composition root's business: the registry is
 * built in one place, `registryOver`, and every test goes through it.
 */
import { describe, expect, it } from '@jest/globals';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { LoyaltyClient } from '../../src/loyalty/client.js';
import type { StoredMerchant } from '../../src/state/merchant.js';
import { CACHE_ENTRIES, CACHE_MS, MerchantRegistry, type ActiveMerchant } from '../../src/merchants/registry.js';
import { SecretBox, SecretsKeyError, tokenHash } from '../../src/merchants/secrets.js';
import type { PosSettings } from '../../src/pos/contract.js';
import type { PosSettingDeclarations } from '../../src/pos/settings.js';

const box = new SecretBox(Buffer.alloc(32, 5));
const declarations: PosSettingDeclarations = {
  square: { account: { field: 'merchantId', variable: 'SQUARE_MERCHANT_ID', accessToken: true } },
  shopify: { account: { field: 'shopDomain', variable: 'SHOPIFY_SHOP_DOMAIN', accessToken: true } },
};
/** The account SQUARE_MERCHANT_ID binds the default merchant to; nothing binds it on Shopify. */
const DEFAULT_SQUARE = 'DEFAULTSQ1';
/** The POS apps' settings from the variables: shared webhook secrets and addresses, the default merchant's account and token. */
const POS_SETTINGS: Record<string, PosSettings> = {
  square: { webhookSecret: 'square-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: 'https://square.example.test', account: DEFAULT_SQUARE, accessToken: 'default-square-token' },
  shopify: { webhookSecret: 'shopify-secret', apiBaseUrl: 'https://{shop}/admin/api/2024-10', accessTokenHeader: 'X-Shopify-Access-Token' },
};
const DEFAULTS = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const VARIABLES = { appToken: 'variables-app-token', apiKey: 'variables-api-key', posToken: 'variables-pos-token' };

interface Built {
  registry: MerchantRegistry;
  /** The credentials of every loyalty client the registry asked for, in order. */
  connected: { appToken: string; apiKey?: string }[];
  /** The registry's clock (ms), which only the test moves. */
  clock: { ms: number };
}

/**
 * The one place a registry is built. `box: null` is a bridge without SECRETS_KEY; `posToken: null`
 * one without POS_TOKEN.
 */
function registryOver(store: MemoryLedgerStore, options: { box?: SecretBox | null; posToken?: string | null } = {}): Built {
  const connected: Built['connected'] = [];
  const clock = { ms: Date.parse('2026-03-01T10:00:00Z') };
  const registry = new MerchantRegistry({
    store,
    ...(options.box === null ? {} : { box: options.box ?? box }),
    declarations,
    posSettings: POS_SETTINGS,
    connect: (credentials) => {
      connected.push(credentials);
      // Never called: these tests look at which credentials each merchant's client holds.
      return new LoyaltyClient({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 1000, retryBaseMs: 1, ...credentials });
    },
    defaults: DEFAULTS,
    defaultMerchant: { appToken: VARIABLES.appToken, apiKey: VARIABLES.apiKey, ...(options.posToken === null ? {} : { posToken: options.posToken ?? VARIABLES.posToken }) },
    logger: silentLogger,
    clock: () => clock.ms,
  });
  return { registry, connected, clock };
}

/** A created merchant as the admin stores it: secrets sealed under `sealer`, its tokens `pos_<id>` and `adm_<id>` hashed. */
function merchant(id: string, extra: Partial<StoredMerchant> & { accounts?: Record<string, { account?: string; accessToken?: string }> } = {}, sealer = box): StoredMerchant {
  const { accounts = {}, ...rest } = extra;
  return {
    id,
    version: 1,
    status: 'active',
    loyalty: { appToken: sealer.seal(`app-token-of-${id}`), apiKey: sealer.seal(`api-key-of-${id}`) },
    pos: Object.fromEntries(Object.entries(accounts).map(([pos, a]) => [pos, { ...(a.account ? { account: a.account } : {}), ...(a.accessToken ? { accessToken: sealer.seal(a.accessToken) } : {}) }])),
    tokens: { pos: tokenHash(`pos_${id}`), admin: tokenHash(`adm_${id}`) },
    createdAt: '2026-02-01T00:00:00.000Z',
    updatedAt: '2026-02-01T00:00:00.000Z',
    ...rest,
  };
}

async function storeWith(...merchants: StoredMerchant[]): Promise<MemoryLedgerStore> {
  const store = new MemoryLedgerStore();
  for (const m of merchants) await store.saveMerchant(m);
  return store;
}

/** What the tests compare of a served merchant: its client by the credentials it holds. */
const served = (m: ActiveMerchant | undefined) => m && { id: m.id, status: m.status, credentials: { appToken: m.client.options.appToken, apiKey: m.client.options.apiKey }, context: m.context, pos: m.pos };

describe('the default merchant', () => {
  it('is built from the variables: their app token and API key, the configured defaults, every POS setting as configured', async () => {
    const { registry, connected } = registryOver(new MemoryLedgerStore());
    expect(served(registry.default)).toEqual({ id: 'default', status: 'active', credentials: { appToken: VARIABLES.appToken, apiKey: VARIABLES.apiKey }, context: DEFAULTS, pos: POS_SETTINGS });
    expect(connected).toEqual([{ appToken: VARIABLES.appToken, apiKey: VARIABLES.apiKey }]);
    expect(await registry.get('default')).toBe(registry.default);
  });

  it('is not stored, so there is no stored document for it', async () => {
    const { registry } = registryOver(new MemoryLedgerStore());
    expect(await registry.stored('default')).toBeUndefined();
  });
});

describe('a created merchant', () => {
  it("is served with its own secrets opened, its own defaults, and the POS apps' shared settings with its own account, never the default merchant's", async () => {
    const store = await storeWith(merchant('corner', { currency: 'EUR', accounts: { square: { account: 'SQ-CORNER', accessToken: 'corner-square-token' } } }));
    const { registry, connected } = registryOver(store);
    expect(served(await registry.get('corner'))).toEqual({
      id: 'corner',
      status: 'active',
      credentials: { appToken: 'app-token-of-corner', apiKey: 'api-key-of-corner' },
      // Its currency; the configured phone region, since it has none of its own.
      context: { defaultCurrency: 'EUR', defaultPhoneRegion: 'US' },
      pos: {
        square: { webhookSecret: 'square-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: 'https://square.example.test', account: 'SQ-CORNER', accessToken: 'corner-square-token' },
        // No Shopify account of its own: the app's settings, no account, no token (not the default's either).
        shopify: { webhookSecret: 'shopify-secret', apiBaseUrl: 'https://{shop}/admin/api/2024-10', accessTokenHeader: 'X-Shopify-Access-Token' },
      },
    });
    expect(connected.at(-1)).toEqual({ appToken: 'app-token-of-corner', apiKey: 'api-key-of-corner' });
    expect((await registry.stored('corner'))!.tokens.pos).toBe(tokenHash('pos_corner'));
  });

  it("without an account on a POS, it never gets the default merchant's account or token there", async () => {
    const store = await storeWith(merchant('bare'));
    const square = (await registryOver(store).registry.get('bare'))!.pos.square!;
    expect(square).not.toHaveProperty('account');
    expect(square).not.toHaveProperty('accessToken');
  });

  it('without an API key, its client holds none', async () => {
    const { apiKey: _none, ...loyalty } = merchant('no-key').loyalty;
    const store = await storeWith(merchant('no-key', { loyalty }));
    expect(served(await registryOver(store).registry.get('no-key'))!.credentials).toEqual({ appToken: 'app-token-of-no-key', apiKey: undefined });
  });
});

describe('a missing merchant', () => {
  it('is undefined by every lookup, never the default merchant', async () => {
    const { registry } = registryOver(await storeWith(merchant('corner', { accounts: { shopify: { account: 'corner.myshopify.com' } } })));
    expect(await registry.get('nobody')).toBeUndefined();
    expect(await registry.stored('nobody')).toBeUndefined();
    expect(await registry.byPosToken('pos_nobody')).toBeUndefined();
    expect(await registry.byAdminToken('adm_nobody')).toBeUndefined();
    // A shop no merchant holds, on a POS the variables bind to no account, once merchants exist.
    expect(await registry.byAccount('shopify', 'stranger.myshopify.com')).toBeUndefined();
  });
});

describe('lookups by token', () => {
  it("POS_TOKEN is the default merchant's; a merchant's POS token is that merchant's; anything else is no one's", async () => {
    const { registry } = registryOver(await storeWith(merchant('corner'), merchant('bakery')));
    expect(await registry.byPosToken(VARIABLES.posToken)).toBe(registry.default);
    expect((await registry.byPosToken('pos_corner'))?.id).toBe('corner');
    expect((await registry.byPosToken('pos_bakery'))?.id).toBe('bakery');
    // A merchant's admin token is not a POS token, nor is a token that differs by a character or in case.
    for (const wrong of ['adm_corner', 'pos_corne', 'pos_cornerx', 'POS_CORNER', `${VARIABLES.posToken} `]) expect(await registry.byPosToken(wrong)).toBeUndefined();
  });

  it('without POS_TOKEN no token is the default merchant\'s', async () => {
    const { registry } = registryOver(new MemoryLedgerStore(), { posToken: null });
    expect(await registry.byPosToken(VARIABLES.posToken)).toBeUndefined();
    expect(await registry.byPosToken('')).toBeUndefined();
  });

  it("a merchant's admin token is that merchant's; its POS token and POS_TOKEN are no one's admin token", async () => {
    const { registry } = registryOver(await storeWith(merchant('corner')));
    expect((await registry.byAdminToken('adm_corner'))?.id).toBe('corner');
    expect(await registry.byAdminToken('pos_corner')).toBeUndefined();
    expect(await registry.byAdminToken(VARIABLES.posToken)).toBeUndefined();
  });
});

describe('lookups by POS account (webhooks)', () => {
  it('the created merchant holding the account, however the delivery writes it', async () => {
    const { registry } = registryOver(await storeWith(merchant('corner', { accounts: { square: { account: 'SQ-Corner' } } })));
    for (const written of ['SQ-Corner', 'sq-corner', '  SQ-CORNER ']) expect((await registry.byAccount('square', written))?.id).toBe('corner');
  });

  it('the default merchant for the account its variable binds it to, and no one for another account on that POS', async () => {
    const { registry } = registryOver(await storeWith(merchant('corner', { accounts: { square: { account: 'SQ-CORNER' } } })));
    expect(await registry.byAccount('square', DEFAULT_SQUARE.toLowerCase())).toBe(registry.default);
    expect(await registry.byAccount('square', 'SQ-SOMEONE-ELSE')).toBeUndefined();
    expect(await registry.byAccount('square', undefined)).toBeUndefined();
  });

  it('on a POS the variables bind to no account: the default merchant while no merchant is created (one business), no one once one is', async () => {
    const store = new MemoryLedgerStore();
    const { registry } = registryOver(store);
    expect(await registry.byAccount('shopify', 'any.myshopify.com')).toBe(registry.default);
    expect(await registry.byAccount('shopify', undefined)).toBe(registry.default);
    await store.saveMerchant(merchant('corner'));
    registry.forget();
    expect(await registry.anyCreated()).toBe(true);
    expect(await registry.byAccount('shopify', 'any.myshopify.com')).toBeUndefined();
  });

  it('onlyAccount names the one account configured on a POS across the bridge, and none when there are several or none', async () => {
    const store = await storeWith(merchant('corner', { accounts: { shopify: { account: 'corner.myshopify.com' } } }));
    const { registry } = registryOver(store);
    expect(await registry.onlyAccount('shopify')).toBe('corner.myshopify.com');
    // Square: the default merchant's variable alone.
    expect(await registry.onlyAccount('square')).toBe(DEFAULT_SQUARE);
    await store.saveMerchant(merchant('bakery', { accounts: { shopify: { account: 'bakery.myshopify.com' }, square: { account: 'SQ-BAKERY' } } }));
    registry.forget();
    expect(await registry.onlyAccount('shopify')).toBeUndefined();
    expect(await registry.onlyAccount('square')).toBeUndefined();
    expect(await registry.onlyAccount('clover')).toBeUndefined();
  });
});

describe('a suspended merchant', () => {
  it('is found as it is, suspended, by id, token and account: the callers refuse it (registry answers who it is, not whether to serve it)', async () => {
    const { registry } = registryOver(await storeWith(merchant('paused', { status: 'suspended', accounts: { square: { account: 'SQ-PAUSED' } } })));
    const lookups = [await registry.get('paused'), await registry.byPosToken('pos_paused'), await registry.byAdminToken('adm_paused'), await registry.byAccount('square', 'SQ-PAUSED')];
    expect(lookups.map((m) => [m?.id, m?.status])).toEqual(Array(4).fill(['paused', 'suspended']));
  });
});

describe('secrets that cannot be opened', () => {
  it('a stored merchant without SECRETS_KEY: the lookup fails naming the merchant and the variable', async () => {
    const { registry } = registryOver(await storeWith(merchant('corner')), { box: null });
    expect(registry.box).toBeUndefined();
    await expect(registry.get('corner')).rejects.toThrow('merchant corner is stored but SECRETS_KEY is not set: its secrets cannot be opened');
    // The default merchant needs no key.
    expect(await registry.get('default')).toBe(registry.default);
  });

  it('a merchant sealed under another SECRETS_KEY: the lookup fails with the key error, naming both fingerprints', async () => {
    const other = new SecretBox(Buffer.alloc(32, 6));
    const { registry } = registryOver(await storeWith(merchant('moved', {}, other)));
    await expect(registry.get('moved')).rejects.toThrow(SecretsKeyError);
    await expect(registry.get('moved')).rejects.toThrow(`fingerprint ${other.fingerprint}, this one is ${box.fingerprint}`);
  });
});

describe('the lookup cache', () => {
  it('a change made through another instance is seen once CACHE_MS have passed, not before', async () => {
    const store = await storeWith(merchant('corner'));
    const { registry, clock } = registryOver(store);
    expect((await registry.get('corner'))?.status).toBe('active');
    await store.saveMerchant({ ...(await store.getMerchant('corner'))!, version: 2, status: 'suspended' });
    clock.ms += CACHE_MS - 1;
    expect((await registry.get('corner'))?.status).toBe('active');
    clock.ms += 1;
    expect((await registry.get('corner'))?.status).toBe('suspended');
  });

  it('a token rotated elsewhere stops working within CACHE_MS; forget() makes a change made here seen at once', async () => {
    const store = await storeWith(merchant('corner'));
    const { registry, clock } = registryOver(store);
    expect((await registry.byPosToken('pos_corner'))?.id).toBe('corner');
    await store.saveMerchant({ ...(await store.getMerchant('corner'))!, version: 2, tokens: { pos: tokenHash('pos_new'), admin: tokenHash('adm_new') } });
    expect((await registry.byPosToken('pos_corner'))?.id).toBe('corner');
    clock.ms += CACHE_MS;
    expect(await registry.byPosToken('pos_corner')).toBeUndefined();
    expect((await registry.byPosToken('pos_new'))?.id).toBe('corner');

    await store.saveMerchant({ ...(await store.getMerchant('corner'))!, version: 3, tokens: { pos: tokenHash('pos_newer'), admin: tokenHash('adm_newer') } });
    registry.forget('corner');
    expect(await registry.byPosToken('pos_new')).toBeUndefined();
    expect((await registry.byPosToken('pos_newer'))?.id).toBe('corner');
  });

  it('the same stored version keeps the same client (its pool and state); a new version gets a new one', async () => {
    const store = await storeWith(merchant('corner'));
    const { registry, clock, connected } = registryOver(store);
    const first = (await registry.get('corner'))!.client;
    clock.ms += CACHE_MS;
    expect((await registry.get('corner'))!.client).toBe(first);
    await store.saveMerchant({ ...(await store.getMerchant('corner'))!, version: 2, loyalty: { appToken: box.seal('app-token-rotated') } });
    clock.ms += CACHE_MS;
    const second = (await registry.get('corner'))!.client;
    expect(second).not.toBe(first);
    expect(second.options.appToken).toBe('app-token-rotated');
    // The default merchant's, then one per version of corner's.
    expect(connected.map((c) => c.appToken)).toEqual([VARIABLES.appToken, 'app-token-of-corner', 'app-token-rotated']);
  });

  it(`keeps at most CACHE_ENTRIES (${CACHE_ENTRIES}) lookups of tokens that name no one`, async () => {
    const { registry } = registryOver(new MemoryLedgerStore());
    for (let i = 0; i <= CACHE_ENTRIES; i++) expect(await registry.byPosToken(`pos_guess_${i}`)).toBeUndefined();
    expect(registry.cacheSizes.byToken).toBe(CACHE_ENTRIES);
  });
});
