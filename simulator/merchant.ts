/**
 * The simulator's merchants. A merchant is one install of the point-of-sale app (its own
 * X-App-Token, whose resolve-credentials answers that merchant's own settings) on one account or
 * sub-account (its own X-API-Key, companyId, customers, cards, operations history). Loyalty contract,
 * Authentication 2: "the key resolves to exactly one account"; sub-accounts have their own keys and
 * data. So each merchant has separate books, numbering and fault queue, and nothing crosses between
 * them except the HTTP server they share.
 */
import type { Credential } from '../src/loyalty/contract.js';
import { FaultQueue } from './faults.js';
import { type Books, COMPANY_ID, DEFAULT_REVERSAL_ENTRY, Ledger, type ReversalEntry, serialPrefix } from './state.js';

export const DEFAULT_MERCHANT_ID = 'default';
/** The bridge's own rule for merchant ids (bridge-contract.md, Merchants); they also appear in /__sim paths. */
const MERCHANT_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

export interface MerchantOptions {
  /** `[a-z0-9][a-z0-9-]{0,63}`, unique in the simulator. */
  id: string;
  /** Default `sim-app-token-<id>`. Unique among every app token and API key of the simulator. */
  appToken?: string;
  /** Default `sim-api-key-<id>`. Unique among every app token and API key of the simulator. */
  apiKey?: string;
  /** The merchant's account; default the next unused integer (the default merchant's is 1). */
  companyId?: number;
  /** Default [1]. Every customer of this merchant gets one card per template. */
  templateIds?: number[];
  /**
   * What resolve-credentials answers besides companyId, locationId and templateId (which these may
   * override), e.g. `{ 'square.merchantId': 'ML8Q', currency: 'EUR', phoneRegion: 'DE' }`.
   */
  credentials?: readonly Credential[] | Record<string, string>;
}

export interface NewCustomerInput {
  phone?: string;
  email?: string;
  firstName?: string;
  surname?: string;
}

/** What tests and the control API see of a merchant. */
export interface SimMerchant {
  readonly id: string;
  readonly appToken: string;
  readonly apiKey: string;
  readonly companyId: number;
  readonly templateIds: readonly number[];
  /** What resolve-credentials answers with no names, in this order. */
  readonly credentials: readonly Credential[];
  readonly faults: FaultQueue;
  /** True after revoke(): the install is gone, its app token is refused (403) on all three point-of-sale operations. */
  readonly revoked: boolean;
  books(): Books;
  addCustomer(c: NewCustomerInput): { customerId: string; cardIds: string[] };
  /** Sets (string) or removes (null) credentials by name, so a test can change what resolve-credentials answers. */
  setCredentials(patch: Record<string, string | null>): void;
  revoke(): void;
  restore(): void;
  /** Back to as created: empty books, no faults, installed, the initial credentials. */
  reset(): void;
  /**
   * How a reversal is written in this account's operations history (the contract does not say):
   * default event 24 "Points earned" with the purchase taken back (a negative purchaseSum). Tests
   * set another shape (an event of its own, a positive sum) to hold the bridge to learning it.
   */
  reversalEntry: ReversalEntry;
}

function credentialList(input: MerchantOptions['credentials']): Credential[] {
  if (input === undefined) return [];
  const list = Array.isArray(input) ? input : Object.entries(input).map(([name, value]) => ({ name, value }));
  for (const c of list) {
    if (typeof c.name !== 'string' || c.name === '' || typeof c.value !== 'string') {
      throw new RangeError('credentials must be name/value strings with a non-empty name');
    }
  }
  return list.map((c) => ({ name: c.name, value: c.value }));
}

/** Route modules read `ledger` on every request: reset() swaps it. */
export class Merchant implements SimMerchant {
  readonly faults = new FaultQueue();
  ledger: Ledger;
  #revoked = false;
  #reversalEntry: ReversalEntry = DEFAULT_REVERSAL_ENTRY;
  readonly #initialCredentials: ReadonlyMap<string, string>;
  #credentials: Map<string, string>;

  constructor(
    readonly id: string,
    readonly appToken: string,
    readonly apiKey: string,
    readonly companyId: number,
    readonly templateIds: readonly number[],
    credentials: readonly Credential[],
    private readonly now: () => Date,
    private readonly firstOperationId = 1,
  ) {
    this.ledger = new Ledger(templateIds, now, companyId, firstOperationId);
    // A Map keeps the first position of a name and the last value given for it: extras override the base.
    const merged = new Map<string, string>([
      ['companyId', String(companyId)],
      ['locationId', '1'],
      ['templateId', String(templateIds[0])],
    ]);
    for (const c of credentials) merged.set(c.name, c.value);
    this.#initialCredentials = new Map(merged);
    this.#credentials = merged;
  }

  get credentials(): readonly Credential[] {
    return Array.from(this.#credentials, ([name, value]) => ({ name, value }));
  }

  get revoked(): boolean {
    return this.#revoked;
  }

  books(): Books {
    return this.ledger.books();
  }

  addCustomer(c: NewCustomerInput): { customerId: string; cardIds: string[] } {
    const customer = this.ledger.addCustomer(c);
    return { customerId: customer.id, cardIds: customer.cards.map((card) => card.serial) };
  }

  setCredentials(patch: Record<string, string | null>): void {
    for (const [name, value] of Object.entries(patch)) {
      if (value === null) this.#credentials.delete(name);
      else this.#credentials.set(name, value);
    }
  }

  revoke(): void {
    this.#revoked = true;
  }

  restore(): void {
    this.#revoked = false;
  }

  get reversalEntry(): ReversalEntry {
    return this.#reversalEntry;
  }

  set reversalEntry(entry: ReversalEntry) {
    this.#reversalEntry = entry;
    this.ledger.reversalEntry = entry;
  }

  reset(): void {
    this.ledger = new Ledger(this.templateIds, this.now, this.companyId, this.firstOperationId);
    this.#reversalEntry = DEFAULT_REVERSAL_ENTRY;
    this.faults.clear();
    this.#revoked = false;
    this.#credentials = new Map(this.#initialCredentials);
  }
}

/** Every merchant of one simulator, found by id, app token or API key. */
export class Merchants {
  readonly #byId = new Map<string, Merchant>();
  readonly #byAppToken = new Map<string, Merchant>();
  readonly #byApiKey = new Map<string, Merchant>();
  readonly #serialPrefixes = new Set<string>();
  readonly #companyIds = new Set<number>();

  constructor(
    private readonly now: () => Date,
    /** Every merchant's history numbers its operations from here. */
    private readonly firstOperationId = 1,
  ) {}

  add(opts: MerchantOptions): Merchant {
    const { id } = opts;
    if (typeof id !== 'string' || !MERCHANT_ID.test(id)) throw new RangeError(`merchant id must match ${MERCHANT_ID.source}`);
    if (this.#byId.has(id)) throw new RangeError(`merchant ${id} already exists`);
    const appToken = opts.appToken ?? `sim-app-token-${id}`;
    const apiKey = opts.apiKey ?? `sim-api-key-${id}`;
    // One credential must name one merchant and one kind (app token or API key): routing and the
    // contract's "API key refused (403) on the point-of-sale group" depend on it.
    for (const [what, value] of [['appToken', appToken], ['apiKey', apiKey]] as const) {
      if (typeof value !== 'string' || value.trim() === '') throw new RangeError(`${what} must be a non-empty string`);
      if (this.isAppToken(value) || this.isApiKey(value)) throw new RangeError(`${what} is already used by another merchant`);
    }
    if (appToken === apiKey) throw new RangeError('appToken and apiKey must differ');
    const templateIds = [...(opts.templateIds ?? [1])];
    if (templateIds.length === 0) throw new RangeError('templateIds must not be empty');
    if (templateIds.some((t) => !Number.isSafeInteger(t) || t < 1)) throw new RangeError('templateIds must be positive integers');
    const companyId = opts.companyId ?? this.#nextCompanyId(templateIds);
    if (!Number.isSafeInteger(companyId) || companyId < 1) throw new RangeError('companyId must be a positive integer');
    if (this.#companyIds.has(companyId)) throw new RangeError(`companyId ${companyId} is already used by another merchant`);
    // Serials start with companyId then templateId; refusing a prefix another merchant has keeps
    // every serial of the simulator unique and readable as "whose card" (company 1 template 12 and
    // company 11 template 2 would both print 112).
    const prefixes = templateIds.map((t) => serialPrefix(companyId, t));
    if (new Set(prefixes).size !== prefixes.length) throw new RangeError('templateIds must not repeat');
    const clash = prefixes.find((p) => this.#serialPrefixes.has(p));
    if (clash !== undefined) throw new RangeError(`card serials of companyId ${companyId} would start with ${clash}, as another merchant's do`);

    const merchant = new Merchant(id, appToken, apiKey, companyId, templateIds, credentialList(opts.credentials), this.now, this.firstOperationId);
    this.#byId.set(id, merchant);
    this.#byAppToken.set(appToken, merchant);
    this.#byApiKey.set(apiKey, merchant);
    for (const p of prefixes) this.#serialPrefixes.add(p);
    this.#companyIds.add(companyId);
    return merchant;
  }

  get(id: string): Merchant | undefined {
    return this.#byId.get(id);
  }

  /** The default merchant: the one createSimulator() made from its own options. */
  get default(): Merchant {
    return this.#byId.get(DEFAULT_MERCHANT_ID)!;
  }

  list(): Merchant[] {
    return [...this.#byId.values()];
  }

  byAppToken(token: string | undefined): Merchant | undefined {
    return token === undefined ? undefined : this.#byAppToken.get(token);
  }

  byApiKey(key: string | undefined): Merchant | undefined {
    return key === undefined ? undefined : this.#byApiKey.get(key);
  }

  isAppToken(value: string): boolean {
    return this.#byAppToken.has(value);
  }

  isApiKey(value: string): boolean {
    return this.#byApiKey.has(value);
  }

  #nextCompanyId(templateIds: readonly number[]): number {
    let next = COMPANY_ID;
    while (this.#companyIds.has(next) || templateIds.some((t) => this.#serialPrefixes.has(serialPrefix(next, t)))) next += 1;
    return next;
  }
}
