/**
 * A merchant: one business on the bridge (bridge-contract "Merchants"). Its install of the loyalty
 * service's point-of-sale app (an app token; optionally the API key of its account, for history
 * verification), its defaults for payloads that carry none, its accounts on each POS, and the two
 * credentials the bridge gives it (a POS token for direct posts, an admin token for its own records).
 * Stored with every secret sealed and the bridge's tokens hashed (`secrets.ts`).
 *
 * The `default` merchant is not stored: it is built from the variables (LOYALTY_APP_TOKEN, POS_TOKEN,
 * each POS's variables), so a deployment with no merchant created works as it always did.
 */

/**
 * The merchant of every record written before merchants existed, and of the one built from the
 * variables. Its records' ledger keys are bare transactionIds (state/record.ts `ledgerKey`).
 *
 * This module is the merchant's shape and imports nothing: the ledger stores and indexes merchants
 * by it, and everything above reads it, without the ledger depending on how merchants are served.
 */
export const DEFAULT_MERCHANT = 'default';

/** `id` never changes: it is in every ledger key of the merchant's records. */
export const MERCHANT_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

export type MerchantStatus = 'active' | 'suspended';

/**
 * A suspended merchant's orders are neither recorded from direct posts (403) nor sent upstream; its
 * webhooks are kept as dead letters and its records wait as they are, still read in the history.
 * Decided here once: ingest, backfill and delivery ask this.
 */
export function isSuspended(merchant: { status: MerchantStatus }): boolean {
  return merchant.status === 'suspended';
}

/** An encrypted secret as stored (`secrets.ts` seals and opens it): the key it was sealed with is named by a fingerprint, never kept. */
export interface SealedSecret {
  alg: 'aes-256-gcm';
  /** First 16 hex characters of SHA-256(key): which SECRETS_KEY sealed it (rotation, a wrong key). */
  key: string;
  iv: string;
  tag: string;
  data: string;
  /** What may be shown of it (`mask`): its last four characters. */
  hint: string;
}

/** A merchant's account on one POS: its id there (the POS names the merchant by it in webhooks) and its API token. */
export interface PosAccount {
  /** Square/Clover/Loyverse `merchantId`, Shopify `shopDomain`, Toast `restaurantGuid` (the field each adapter declares). */
  account?: string;
  accessToken?: SealedSecret;
  /** The key its register's loyalty calls carry (Toast's `loyaltyKey`: the field each adapter declares). */
  registerKey?: SealedSecret;
}

/**
 * What settles an accrual in doubt that the operations history leaves ambiguous (docs/how-it-works.md,
 * "Asking the service"): `person`, the attention queue; `probe`, the bridge asks the service by
 * reversing it and accrues it again where it had happened (a reversal and an accrual then show in
 * the customer's history).
 */
export const AMBIGUITY_POLICIES = ['person', 'probe'] as const;
export type AmbiguityPolicy = (typeof AMBIGUITY_POLICIES)[number];

export interface StoredMerchant {
  id: string;
  /** Incremented by every write; stores compare-and-set on it. */
  version: number;
  name?: string;
  status: MerchantStatus;
  loyalty: { appToken: SealedSecret; apiKey?: SealedSecret };
  currency?: string;
  phoneRegion?: string;
  /** Unset: the bridge's AMBIGUITY_POLICY. */
  ambiguity?: AmbiguityPolicy;
  /** By POS name (`square`, `shopify`, …). */
  pos: Record<string, PosAccount>;
  /** SHA-256 of the POS token and of the admin token (`tokenHash`). */
  tokens: { pos: string; admin: string };
  createdAt: string;
  updatedAt: string;
  /** When `resolve-credentials` was last read for it. */
  resolvedAt?: string;
}

/** A POS account's identity within the bridge: one merchant at most may hold it. */
export function accountKey(pos: string, account: string): string {
  return `${pos}:${account.trim().toLowerCase()}`;
}

/** Every POS account a merchant holds, as `accountKey`s. */
export function accountKeysOf(merchant: Pick<StoredMerchant, 'pos'>): string[] {
  return Object.entries(merchant.pos).flatMap(([pos, a]) => (a.account ? [accountKey(pos, a.account)] : []));
}

/**
 * Every secret a merchant holds sealed, and where: the list `npm run secrets:rotate` re-seals and
 * start-up checks SECRETS_KEY against (one list, so a sealed field added later is in both).
 */
export function sealedSecretsOf(m: Pick<StoredMerchant, 'loyalty' | 'pos'>): { where: string; sealed: SealedSecret }[] {
  return [
    { where: 'loyalty.appToken', sealed: m.loyalty.appToken },
    ...(m.loyalty.apiKey ? [{ where: 'loyalty.apiKey', sealed: m.loyalty.apiKey }] : []),
    ...Object.entries(m.pos).flatMap(([pos, a]) => (a.accessToken ? [{ where: `pos.${pos}.accessToken`, sealed: a.accessToken }] : [])),
    ...Object.entries(m.pos).flatMap(([pos, a]) => (a.registerKey ? [{ where: `pos.${pos}.registerKey`, sealed: a.registerKey }] : [])),
  ];
}
