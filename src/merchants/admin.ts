/**
 * Managing merchants (bridge-contract "Merchants": `/v1/admin/merchants`, global admin token only):
 * create one from its app token and what the request gives, filling in the rest from the loyalty
 * service's `resolve-credentials`; change it; give it new tokens; read its settings again. Secrets
 * are sealed before they are stored and shown masked only; the POS and admin tokens are shown once,
 * when made, and kept as hashes.
 */
import { z } from 'zod';
import { isIsoCurrency } from '../kernel/currencies.js';
import { BridgeError, ConflictError, NotFoundError, ValidationError } from '../kernel/errors.js';
import type { MerchantStore } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import { LoyaltyClient, type LoyaltyClientOptions } from '../loyalty/client.js';
import type { Credential } from '../loyalty/contract.js';
import { accountShapeOf, type PosSettingDeclarations } from '../pos/settings.js';
import { parseWith } from '../kernel/validation.js';
import { PHONE_REGIONS } from '../kernel/customer.js';
import { accountKey, accountKeysOf, AMBIGUITY_POLICIES, DEFAULT_MERCHANT, MERCHANT_ID, type AmbiguityPolicy, type PosAccount, type StoredMerchant } from '../state/merchant.js';
import type { MerchantRegistry } from './registry.js';
import { newToken, tokenHash, type SecretBox } from './secrets.js';

const secret = z.string().trim().min(1, 'must not be empty').max(4096, 'must be at most 4096 characters');
const text = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');
const currency = z.string().refine(isIsoCurrency, 'must be an ISO 4217 currency code such as EUR');
// An enum, not a check: the admin API's document then states every region it takes.
const region = z.enum(PHONE_REGIONS, { error: 'must be a two-letter region the phone rules know, such as DE, GB or US' });

/** Each POS's account as the contract names its fields (`square: { merchantId, accessToken }`, …). */
function posAccountSchemas(declarations: PosSettingDeclarations, partial: boolean) {
  return z.strictObject(
    Object.fromEntries(
      Object.entries(declarations).map(([pos, d]) => {
        const shape: Record<string, z.ZodType> = {};
        if (d.account) {
          const accountShape = accountShapeOf(d);
          // Stated in the document (its pattern); an empty one is said as such, not as a bad shape.
          shape[d.account.field] = z.string().trim().min(1, { message: 'must not be empty', abort: true }).max(200, 'must be at most 200 characters').regex(accountShape.pattern, `must be ${accountShape.says}`).optional();
        }
        if (d.account?.accessToken) shape.accessToken = secret.optional();
        // A key the restaurant's integration carries: one the operator chooses, so at least 24 characters (docs/pos-systems.md).
        if (d.registerKey) shape[d.registerKey.field] = secret.min(24, 'must be at least 24 characters: it is what lets a register read guests and accrue').optional();
        // In a PATCH, null removes the account from the merchant.
        const account = z.strictObject(shape);
        return [pos, partial ? account.nullable().optional() : account.optional()];
      }),
    ),
  );
}

/** merchant.ts AmbiguityPolicy: what settles an accrual the history leaves ambiguous. */
const ambiguity = z.enum(AMBIGUITY_POLICIES, 'must be person (the attention queue) or probe (the bridge asks the loyalty service by reversing the accrual, and accrues it again where it had happened)');

export function merchantSchemas(declarations: PosSettingDeclarations) {
  const create = z.strictObject({
    id: z.string().regex(MERCHANT_ID, 'must be lower-case letters, digits and dashes, starting with a letter or digit, at most 64'),
    name: text.optional(),
    loyalty: z.strictObject({ appToken: secret, apiKey: secret.optional() }),
    currency: currency.optional(),
    phoneRegion: region.optional(),
    ambiguity: ambiguity.optional(),
    pos: posAccountSchemas(declarations, false).optional(),
  });
  const update = z.strictObject({
    name: text.optional(),
    loyalty: z.strictObject({ appToken: secret.optional(), apiKey: secret.nullable().optional() }).optional(),
    currency: currency.nullable().optional(),
    phoneRegion: region.nullable().optional(),
    ambiguity: ambiguity.nullable().optional(),
    pos: posAccountSchemas(declarations, true).optional(),
    status: z.enum(['active', 'suspended']).optional(),
  });
  return { create, update };
}

/** A POS account's fields as the contract names them (built per POS at run time, so typed loosely here). */
type AccountFields = Record<string, string | undefined>;

interface CreateInput {
  id: string;
  name?: string;
  loyalty: { appToken: string; apiKey?: string };
  currency?: string;
  phoneRegion?: string;
  ambiguity?: AmbiguityPolicy;
  pos?: Record<string, AccountFields | undefined>;
}

interface UpdateInput {
  name?: string;
  loyalty?: { appToken?: string; apiKey?: string | null };
  currency?: string | null;
  phoneRegion?: string | null;
  ambiguity?: AmbiguityPolicy | null;
  pos?: Record<string, AccountFields | null | undefined>;
  status?: 'active' | 'suspended';
}

/** A merchant as the API shows it: every secret masked (`…k3Pz`), the tokens never. */
export interface MerchantView {
  id: string;
  name?: string;
  status: StoredMerchant['status'];
  loyalty: { appToken: string; apiKey?: string };
  currency?: string;
  phoneRegion?: string;
  ambiguity?: AmbiguityPolicy;
  pos: Record<string, Record<string, string>>;
  createdAt: string;
  updatedAt: string;
  resolvedAt?: string;
}

export class MerchantAdmin {
  readonly #schemas: ReturnType<typeof merchantSchemas>;

  constructor(
    private readonly store: MerchantStore,
    private readonly registry: MerchantRegistry,
    private readonly declarations: PosSettingDeclarations,
    private readonly clientOptions: Omit<LoyaltyClientOptions, 'appToken' | 'apiKey'>,
    private readonly logger: Logger,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.#schemas = merchantSchemas(declarations);
  }

  /** 201's body: the merchant, and its two tokens shown this once. */
  async create(body: unknown): Promise<{ merchant: MerchantView; posToken: string; adminToken: string }> {
    const input = parseWith(this.#schemas.create, body) as CreateInput;
    if (input.id === DEFAULT_MERCHANT) throw ValidationError.field('id', `"${DEFAULT_MERCHANT}" is the merchant built from the variables; choose another id`);
    const box = this.#box();
    const now = this.clock().toISOString();
    const resolved = await this.#resolve(input.loyalty.appToken);
    const filled = fillFromCredentials(input, resolved, this.declarations);
    const tokens = { pos: newToken('pos'), admin: newToken('adm') };
    const merchant: StoredMerchant = {
      id: input.id,
      version: 1,
      ...(input.name ? { name: input.name } : {}),
      status: 'active',
      loyalty: { appToken: box.seal(input.loyalty.appToken), ...(input.loyalty.apiKey ? { apiKey: box.seal(input.loyalty.apiKey) } : {}) },
      ...(filled.currency ? { currency: filled.currency } : {}),
      ...(filled.phoneRegion ? { phoneRegion: filled.phoneRegion } : {}),
      ...(input.ambiguity ? { ambiguity: input.ambiguity } : {}),
      pos: this.#sealAccounts(filled.pos, {}),
      tokens: { pos: tokenHash(tokens.pos), admin: tokenHash(tokens.admin) },
      createdAt: now,
      updatedAt: now,
      resolvedAt: now,
    };
    await this.#save(merchant);
    this.logger.info({ merchantId: merchant.id, accounts: accountKeysOf(merchant) }, 'merchant created');
    return { merchant: this.view(merchant), posToken: tokens.pos, adminToken: tokens.admin };
  }

  async get(id: string): Promise<MerchantView> {
    return this.view(await this.#require(id));
  }

  async list(offset: number, limit: number): Promise<{ items: MerchantView[]; total: number }> {
    const { items, total } = await this.store.listMerchants({ offset, limit });
    return { items: items.map((m) => this.view(m)), total };
  }

  async update(id: string, body: unknown): Promise<MerchantView> {
    const input = parseWith(this.#schemas.update, body) as UpdateInput;
    const current = await this.#require(id);
    const box = this.#box();
    // A new app token is an install of the point-of-sale app, or nothing is changed.
    if (input.loyalty?.appToken) await this.#resolve(input.loyalty.appToken);
    const next: StoredMerchant = { ...current, version: current.version + 1, updatedAt: this.clock().toISOString() };
    if (input.name !== undefined) next.name = input.name;
    if (input.status) next.status = input.status;
    if (input.loyalty?.appToken) next.loyalty = { ...next.loyalty, appToken: box.seal(input.loyalty.appToken) };
    if (input.loyalty?.apiKey === null) next.loyalty = { appToken: next.loyalty.appToken };
    else if (input.loyalty?.apiKey) next.loyalty = { ...next.loyalty, apiKey: box.seal(input.loyalty.apiKey) };
    if (input.currency !== undefined) next.currency = input.currency ?? undefined;
    if (input.phoneRegion !== undefined) next.phoneRegion = input.phoneRegion ?? undefined;
    if (input.ambiguity !== undefined) next.ambiguity = input.ambiguity ?? undefined;
    if (input.pos) next.pos = this.#sealAccounts(input.pos, current.pos);
    await this.#save(next, current);
    this.logger.info({ merchantId: id, status: next.status }, 'merchant changed');
    return this.view(next);
  }

  /** New POS and admin tokens; the old ones stop working (at once here, within the registry's cache time elsewhere). */
  async rotateTokens(id: string): Promise<{ merchant: MerchantView; posToken: string; adminToken: string }> {
    const current = await this.#require(id);
    const tokens = { pos: newToken('pos'), admin: newToken('adm') };
    const next = { ...current, version: current.version + 1, updatedAt: this.clock().toISOString(), tokens: { pos: tokenHash(tokens.pos), admin: tokenHash(tokens.admin) } };
    await this.#save(next, current);
    this.logger.info({ merchantId: id }, 'merchant tokens replaced');
    return { merchant: this.view(next), posToken: tokens.pos, adminToken: tokens.admin };
  }

  /** Reads the merchant's settings again from the loyalty service; they fill in what the merchant's own settings leave unset. */
  async refresh(id: string): Promise<MerchantView> {
    const current = await this.#require(id);
    const box = this.#box();
    const credentials = await this.#resolve(box.open(current.loyalty.appToken));
    const filled = fillFromCredentials({ currency: current.currency, phoneRegion: current.phoneRegion, pos: {} }, credentials, this.declarations);
    const next: StoredMerchant = { ...current, version: current.version + 1, updatedAt: this.clock().toISOString(), resolvedAt: this.clock().toISOString() };
    if (filled.currency) next.currency = filled.currency;
    if (filled.phoneRegion) next.phoneRegion = filled.phoneRegion;
    // Only what the merchant lacks: an account or token it has was given on purpose.
    const missing = Object.fromEntries(
      Object.entries(filled.pos).flatMap(([pos, given]) => {
        const have = current.pos[pos];
        const field = this.declarations[pos]?.account?.field;
        const add: Record<string, string> = {};
        if (field && given[field] && !have?.account) add[field] = given[field]!;
        if (given.accessToken && !have?.accessToken) add.accessToken = given.accessToken;
        return Object.keys(add).length ? [[pos, add]] : [];
      }),
    );
    next.pos = this.#sealAccounts(missing, current.pos);
    await this.#save(next, current);
    return this.view(next);
  }

  view(m: StoredMerchant): MerchantView {
    return {
      id: m.id,
      ...(m.name ? { name: m.name } : {}),
      status: m.status,
      loyalty: { appToken: m.loyalty.appToken.hint, ...(m.loyalty.apiKey ? { apiKey: m.loyalty.apiKey.hint } : {}) },
      ...(m.currency ? { currency: m.currency } : {}),
      ...(m.phoneRegion ? { phoneRegion: m.phoneRegion } : {}),
      ...(m.ambiguity ? { ambiguity: m.ambiguity } : {}),
      pos: Object.fromEntries(
        Object.entries(m.pos).map(([pos, a]) => {
          const field = this.declarations[pos]?.account?.field ?? 'account';
          const keyField = this.declarations[pos]?.registerKey?.field;
          return [pos, { ...(a.account ? { [field]: a.account } : {}), ...(a.accessToken ? { accessToken: a.accessToken.hint } : {}), ...(a.registerKey && keyField ? { [keyField]: a.registerKey.hint } : {}) }];
        }),
      ),
      createdAt: m.createdAt,
      updatedAt: m.updatedAt,
      ...(m.resolvedAt ? { resolvedAt: m.resolvedAt } : {}),
    };
  }

  /** `given` by POS in the contract's field names; null removes an account; the rest of `current` stays. */
  #sealAccounts(given: Record<string, Record<string, string | undefined> | null | undefined>, current: Record<string, PosAccount>): Record<string, PosAccount> {
    const box = this.#box();
    const next = { ...current };
    for (const [pos, fields] of Object.entries(given)) {
      if (fields === undefined) continue;
      if (fields === null) {
        delete next[pos];
        continue;
      }
      const field = this.declarations[pos]?.account?.field;
      const keyField = this.declarations[pos]?.registerKey?.field;
      const account = field ? fields[field] : undefined;
      const registerKey = keyField ? fields[keyField] : undefined;
      next[pos] = {
        ...next[pos],
        ...(account ? { account } : {}),
        ...(fields.accessToken ? { accessToken: box.seal(fields.accessToken) } : {}),
        ...(registerKey ? { registerKey: box.seal(registerKey) } : {}),
      };
    }
    return next;
  }

  /** `previous`: the merchant as stored before this change (none when it is created). */
  async #save(merchant: StoredMerchant, previous?: StoredMerchant): Promise<void> {
    // The default merchant is not stored, so the store cannot see the accounts its variables bind it
    // to: a created merchant given one would take the default merchant's webhooks from it. Only an
    // account being added is refused, so a merchant that held it before the variable was set can
    // still be changed (suspended, given another account).
    const had = new Set(previous ? accountKeysOf(previous) : []);
    for (const [pos, declaration] of Object.entries(this.declarations)) {
      const bound = this.registry.default.pos[pos]?.account;
      const held = merchant.pos[pos]?.account;
      if (bound && held && accountKey(pos, bound) === accountKey(pos, held) && !had.has(accountKey(pos, held))) {
        throw new ConflictError(`POS account ${accountKey(pos, held)} belongs to merchant ${DEFAULT_MERCHANT} (${declaration.account?.variable ?? pos})`);
      }
    }
    try {
      await this.store.saveMerchant(merchant);
    } finally {
      this.registry.forget(merchant.id);
    }
  }

  async #require(id: string): Promise<StoredMerchant> {
    const merchant = await this.store.getMerchant(id);
    if (!merchant) throw new NotFoundError(id === DEFAULT_MERCHANT ? 'the default merchant is built from the variables and is not managed here' : `no merchant ${id}`);
    return merchant;
  }

  #box(): SecretBox {
    const box = this.registry.box;
    if (!box) throw new BridgeError("SECRETS_KEY is not set: a merchant's secrets cannot be stored", 409, 'secrets_key_missing');
    return box;
  }

  /** The install's settings; a refusal (403) refuses the merchant: 400 naming the app token, nothing stored. */
  async #resolve(appToken: string): Promise<Credential[]> {
    const answer = await new LoyaltyClient({ ...this.clientOptions, appToken }).resolveCredentials();
    switch (answer.kind) {
      case 'resolved':
        return answer.credentials;
      case 'refused':
        throw ValidationError.field('loyalty.appToken', `the loyalty service refused this app token (HTTP ${answer.status}: ${answer.errors.join('; ').slice(0, 200)}): it is not an install of the point-of-sale app`);
      case 'failed':
        throw new BridgeError(`could not read the merchant's settings from the loyalty service: ${answer.reason}; try again`, 502, 'upstream_unavailable');
      default: {
        const unreachable: never = answer;
        return unreachable;
      }
    }
  }
}

/**
 * Credentials named `<pos>.<field>` (`square.merchantId`, `square.accessToken`, …), `currency` and
 * `phoneRegion` fill in what the request did not give; what the request gives wins. Names the
 * bridge does not know (`companyId`, …) are ignored; a value that would not pass as given is ignored too.
 */
function fillFromCredentials(
  input: { currency?: string | null; phoneRegion?: string | null; pos?: Record<string, Record<string, string | undefined> | undefined> },
  credentials: Credential[],
  declarations: PosSettingDeclarations,
): { currency?: string; phoneRegion?: string; pos: Record<string, Record<string, string | undefined>> } {
  const value = (name: string) => credentials.find((c) => c.name === name)?.value?.trim() || undefined;
  const fromCurrency = value('currency');
  const fromRegion = value('phoneRegion');
  const pos: Record<string, Record<string, string | undefined>> = {};
  for (const [name, d] of Object.entries(declarations)) {
    if (!d.account) continue;
    const given = input.pos?.[name] ?? {};
    // What the loyalty service's credentials name is taken only in the POS's own shape (a body's is checked by its schema).
    const named = value(`${name}.${d.account.field}`);
    const account = given[d.account.field] ?? (named && accountShapeOf(d).pattern.test(named) ? named : undefined);
    const accessToken = d.account.accessToken ? (given.accessToken ?? value(`${name}.accessToken`)) : undefined;
    // A register's key is the merchant's own choice, given in the body: never one of the credentials.
    const registerKey = d.registerKey ? given[d.registerKey.field] : undefined;
    if (account || accessToken || registerKey || input.pos?.[name]) {
      pos[name] = { ...(account ? { [d.account.field]: account } : {}), ...(accessToken ? { accessToken } : {}), ...(registerKey && d.registerKey ? { [d.registerKey.field]: registerKey } : {}) };
    }
  }
  return {
    currency: input.currency ?? (fromCurrency && isIsoCurrency(fromCurrency) ? fromCurrency : undefined),
    phoneRegion: input.phoneRegion ?? (fromRegion && /^[A-Z]{2}$/.test(fromRegion) ? fromRegion : undefined),
    pos,
  };
}
