/**
 * The merchants a running bridge serves, ready to use: each with its loyalty client (its own app
 * token; its API key for history reads), made by the `connect` the composition root gives (the
 * registry holds merchants; it does not wire clients), its POS settings (its accounts and access tokens beside the
 * POS apps' webhook secrets, which are per app, from the variables) and its defaults. The `default`
 * merchant is built from the variables; created merchants are read from the ledger store and their
 * secrets opened with SECRETS_KEY.
 *
 * Lookups are cached for CACHE_MS: a change made through this bridge is seen at once (it clears the
 * cache), one made through another instance of a shared ledger within CACHE_MS (a rotated token keeps
 * working there that long at most). Checkouts look a merchant up by its POS token on every request,
 * so a cached lookup is a hash and a map read.
 */
import type { Logger } from '../kernel/logger.js';
import type { LoyaltyClient } from '../loyalty/client.js';
import type { MerchantStore } from '../ledger/store.js';
import type { AdapterContext, PosSettings } from '../pos/contract.js';
import type { PosSettingDeclarations } from '../pos/settings.js';
import { accountKey, DEFAULT_MERCHANT, type AmbiguityPolicy, type MerchantStatus, type StoredMerchant } from '../state/merchant.js';
import { SecretBox, tokenHash } from './secrets.js';

/** How long a merchant read from the store is used before it is read again. */
export const CACHE_MS = 2000;
/**
 * Entries each lookup cache keeps at most, the least recently looked up dropped first: its keys come
 * from requests (a mistyped or forged token, any shop domain a delivery names), so without a bound
 * the caches would grow with every distinct one ever seen, for as long as the process runs.
 */
export const CACHE_ENTRIES = 10_000;

export interface ActiveMerchant {
  id: string;
  status: MerchantStatus;
  ambiguity: AmbiguityPolicy;
  client: LoyaltyClient;
  context: AdapterContext;
  /** By POS name: the POS app's secrets and addresses, this merchant's account and access token. */
  pos: Record<string, PosSettings>;
}

export interface RegistryOptions {
  store: MerchantStore;
  /** Opens created merchants' secrets; absent where SECRETS_KEY is not set (no merchant can be stored then). */
  box?: SecretBox;
  declarations: PosSettingDeclarations;
  /** The POS apps' settings from the variables: every merchant's webhook secrets and API addresses; the default merchant's accounts and tokens. */
  posSettings: Record<string, PosSettings>;
  /** A merchant's loyalty client for its credentials (the composition root's: address, timeouts, shared pools). */
  connect(credentials: { appToken: string; apiKey?: string }): LoyaltyClient;
  defaults: AdapterContext;
  /** The default merchant: the install LOYALTY_APP_TOKEN names, POS_TOKEN's merchant. */
  defaultMerchant: { appToken: string; apiKey?: string; posToken?: string };
  /** AMBIGUITY_POLICY: the default merchant's, and any merchant's that sets none. */
  ambiguity?: AmbiguityPolicy;
  logger: Logger;
  clock?: () => number;
}

interface Cached<T> {
  value: T;
  atMs: number;
}

export class MerchantRegistry {
  readonly default: ActiveMerchant;
  readonly #byId = new Map<string, Cached<{ stored: StoredMerchant; active: ActiveMerchant } | undefined>>();
  readonly #idByToken = new Map<string, Cached<string | undefined>>();
  readonly #idByAccount = new Map<string, Cached<string | undefined>>();
  readonly #onlyAccount = new Map<string, Cached<string | undefined>>();
  #anyCreated?: Cached<boolean>;
  readonly #now: () => number;
  readonly #defaultPosTokenHash?: string;

  constructor(private readonly options: RegistryOptions) {
    this.#now = options.clock ?? Date.now;
    const { appToken, apiKey, posToken } = options.defaultMerchant;
    this.#defaultPosTokenHash = posToken ? tokenHash(posToken) : undefined;
    this.default = this.#activate(DEFAULT_MERCHANT, 'active', appToken, apiKey, options.defaults, options.posSettings, options.ambiguity ?? 'person');
  }

  get box(): SecretBox | undefined {
    return this.options.box;
  }

  /** A merchant by id, the default one included; undefined when there is no such merchant. */
  async get(id: string): Promise<ActiveMerchant | undefined> {
    if (id === DEFAULT_MERCHANT) return this.default;
    return (await this.#load(id))?.active;
  }

  /** The stored document (created merchants only), as read through the cache. */
  async stored(id: string): Promise<StoredMerchant | undefined> {
    return (await this.#load(id))?.stored;
  }

  /** The merchant a direct POS post's bearer token belongs to. POS_TOKEN is the default merchant's. */
  async byPosToken(token: string): Promise<ActiveMerchant | undefined> {
    const hash = tokenHash(token);
    if (hash === this.#defaultPosTokenHash) return this.default;
    const id = await this.#cached(this.#idByToken, `pos:${hash}`, async () => (await this.options.store.findMerchantByToken('pos', hash))?.id);
    return id ? this.get(id) : undefined;
  }

  /** The merchant an admin token belongs to (ADMIN_TOKEN, the global one, is not a merchant's). */
  async byAdminToken(token: string): Promise<ActiveMerchant | undefined> {
    const id = await this.#cached(this.#idByToken, `admin:${tokenHash(token)}`, async () => (await this.options.store.findMerchantByToken('admin', tokenHash(token)))?.id);
    return id ? this.get(id) : undefined;
  }

  /**
   * The merchant a webhook delivery belongs to, by the account the POS names in it: the created
   * merchant that holds the account; else the default merchant when the variables bind it to that
   * account, or bind it to none on this POS while no merchant has been created (a single-merchant
   * deployment, as before merchants existed). Undefined: no merchant is known for it.
   */
  async byAccount(pos: string, account: string | undefined): Promise<ActiveMerchant | undefined> {
    if (account) {
      const key = accountKey(pos, account);
      const id = await this.#cached(this.#idByAccount, key, async () => (await this.options.store.findMerchantByAccount(key))?.id);
      if (id) return this.get(id);
    }
    const bound = this.default.pos[pos]?.account;
    if (bound) return account && accountKey(pos, bound) === accountKey(pos, account) ? this.default : undefined;
    return (await this.anyCreated()) ? undefined : this.default;
  }

  /**
   * The one account configured on this POS across the bridge (the default merchant's variable, e.g.
   * CLOVER_MERCHANT_ID, and every created merchant's), or undefined when there is none or there are
   * several. Merchants are few, and the answer is cached like every lookup here.
   */
  async onlyAccount(pos: string): Promise<string | undefined> {
    return this.#cached(this.#onlyAccount, pos, async () => {
      const found = new Map<string, string>();
      const add = (account: string | undefined) => account && found.set(accountKey(pos, account), account);
      add(this.default.pos[pos]?.account);
      for (let offset = 0; found.size < 2; offset += 100) {
        const { items } = await this.options.store.listMerchants({ offset, limit: 100 });
        for (const merchant of items) add(merchant.pos[pos]?.account);
        if (items.length < 100) break;
      }
      return found.size === 1 ? [...found.values()][0] : undefined;
    });
  }

  async anyCreated(): Promise<boolean> {
    const cached = this.#anyCreated;
    if (cached && this.#now() - cached.atMs < CACHE_MS) return cached.value;
    const value = (await this.options.store.listMerchants({ offset: 0, limit: 1 })).total > 0;
    this.#anyCreated = { value, atMs: this.#now() };
    return value;
  }

  /** After a change made here: the next lookups read the store. */
  forget(id?: string): void {
    if (id) this.#byId.delete(id);
    else this.#byId.clear();
    this.#idByToken.clear();
    this.#idByAccount.clear();
    this.#onlyAccount.clear();
    this.#anyCreated = undefined;
  }

  async #load(id: string): Promise<{ stored: StoredMerchant; active: ActiveMerchant } | undefined> {
    return this.#cached(this.#byId, id, async () => {
      const stored = await this.options.store.getMerchant(id);
      if (!stored) return undefined;
      const previous = this.#byId.get(id)?.value;
      // The same version: the same client (its pool and retry state), only the cache time renewed.
      if (previous && previous.stored.version === stored.version) return previous;
      return { stored, active: this.#fromStored(stored) };
    });
  }

  #fromStored(stored: StoredMerchant): ActiveMerchant {
    const box = this.options.box;
    if (!box) throw new Error(`merchant ${stored.id} is stored but SECRETS_KEY is not set: its secrets cannot be opened`);
    const context = { defaultCurrency: stored.currency ?? this.options.defaults.defaultCurrency, defaultPhoneRegion: stored.phoneRegion ?? this.options.defaults.defaultPhoneRegion };
    const pos = Object.fromEntries(
      Object.entries(this.options.posSettings).map(([name, app]) => {
        const account = stored.pos[name];
        // The POS app's webhook secret and addresses; the merchant's own account and token, never the default merchant's.
        const { accessToken: _defaultToken, account: _defaultAccount, registerKey: _defaultKey, ...shared } = app;
        return [
          name,
          {
            ...shared,
            ...(account?.account ? { account: account.account } : {}),
            ...(account?.accessToken ? { accessToken: box.open(account.accessToken) } : {}),
            ...(account?.registerKey ? { registerKey: box.open(account.registerKey) } : {}),
          },
        ];
      }),
    );
    return this.#activate(stored.id, stored.status, box.open(stored.loyalty.appToken), stored.loyalty.apiKey && box.open(stored.loyalty.apiKey), context, pos, stored.ambiguity ?? this.options.ambiguity ?? 'person');
  }

  #activate(id: string, status: MerchantStatus, appToken: string, apiKey: string | undefined, context: AdapterContext, pos: Record<string, PosSettings>, ambiguity: AmbiguityPolicy): ActiveMerchant {
    return { id, status, ambiguity, client: this.options.connect({ appToken, apiKey }), context, pos };
  }

  async #cached<T>(cache: Map<string, Cached<T>>, key: string, read: () => Promise<T>): Promise<T> {
    const hit = cache.get(key);
    if (hit && this.#now() - hit.atMs < CACHE_MS) {
      // Looked up again: last to be dropped (a Map iterates in insertion order).
      cache.delete(key);
      cache.set(key, hit);
      return hit.value;
    }
    const value = await read();
    cache.delete(key);
    cache.set(key, { value, atMs: this.#now() });
    if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
    return value;
  }

  /** How many lookups each cache holds now (tests hold them to CACHE_ENTRIES). */
  get cacheSizes(): { byId: number; byToken: number; byAccount: number } {
    return { byId: this.#byId.size, byToken: this.#idByToken.size, byAccount: this.#idByAccount.size };
  }
}
