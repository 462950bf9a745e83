/**
 * The few, small aggregates that the memory and file stores hold whole in memory (merchants and
 * backfill states; test/ledger/contracts/ holds all three stores to the same answers), with the
 * rules both keep written once: a merchant is saved only at the next version and only while no other
 * merchant holds one of its POS accounts or token hashes; merchants list oldest first; backfill
 * states list by merchant, then POS. The file store writes its files between `check` and `put`;
 * PostgreSQL keeps the same rules in its tables' constraints.
 *
 * Everything goes in and out as a copy, as a store on disk would: a caller that changes what it was
 * given changes nothing held.
 */
import { ConflictError, VersionConflictError } from '../kernel/errors.js';
import { accountKeysOf, type StoredMerchant } from '../state/merchant.js';
import { backfillKey, type BackfillState } from './store.js';

const copy = <T>(value: T): T => structuredClone(value);

export class MerchantTable {
  /** `byId` may be a map that outlives this table (the memory store's state, kept across a "restart"). */
  constructor(private readonly byId: Map<string, StoredMerchant> = new Map()) {}

  /** Throws, and nothing may be saved, unless `next` is the merchant's next version and holds nothing another merchant holds. */
  checkSave(next: StoredMerchant): void {
    const current = this.byId.get(next.id);
    if (next.version === 1 && current) throw new ConflictError(`merchant ${next.id} exists`);
    if (next.version !== 1 && current?.version !== next.version - 1) throw new VersionConflictError(`merchant ${next.id}`, next.version - 1, current?.version);
    const accounts = accountKeysOf(next);
    for (const other of this.byId.values()) {
      if (other.id === next.id) continue;
      const taken = accountKeysOf(other).find((a) => accounts.includes(a));
      if (taken) throw new ConflictError(`POS account ${taken} belongs to merchant ${other.id}`);
      if ([other.tokens.pos, other.tokens.admin].some((t) => t === next.tokens.pos || t === next.tokens.admin)) throw new ConflictError('token already in use');
    }
  }

  /** Holds `merchant` as it is (after `checkSave`, or as read back from where it was kept). */
  put(merchant: StoredMerchant): void {
    this.byId.set(merchant.id, copy(merchant));
  }

  clear(): void {
    this.byId.clear();
  }

  get size(): number {
    return this.byId.size;
  }

  get(id: string): StoredMerchant | undefined {
    const merchant = this.byId.get(id);
    return merchant && copy(merchant);
  }

  /** Oldest first (createdAt, then id). */
  list(query: { offset: number; limit: number }): { items: StoredMerchant[]; total: number } {
    const all = [...this.byId.values()].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.id < b.id ? -1 : 1));
    return { items: all.slice(query.offset, query.offset + query.limit).map(copy), total: all.length };
  }

  byToken(kind: 'pos' | 'admin', hash: string): StoredMerchant | undefined {
    for (const merchant of this.byId.values()) if (merchant.tokens[kind] === hash) return copy(merchant);
    return undefined;
  }

  byAccount(accountKey: string): StoredMerchant | undefined {
    for (const merchant of this.byId.values()) if (accountKeysOf(merchant).includes(accountKey)) return copy(merchant);
    return undefined;
  }
}

export class BackfillStateTable {
  /** By `backfillKey`; `byKey` may outlive this table, as `MerchantTable`'s may. */
  constructor(private readonly byKey: Map<string, BackfillState> = new Map()) {}

  get(merchantId: string, pos: string): BackfillState | undefined {
    const state = this.byKey.get(backfillKey(merchantId, pos));
    return state && copy(state);
  }

  /**
   * What `change` makes of the state held now (given a copy), scoped to this merchant and POS;
   * undefined when it answers undefined (nothing to write). Nothing is held until `put`.
   */
  next(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): BackfillState | undefined {
    const next = change(this.get(merchantId, pos));
    return next && { ...copy(next), merchantId, pos };
  }

  /** Every state held, `state` in place of the one it replaces: what a store that writes them all at once writes. */
  allWith(state: BackfillState): BackfillState[] {
    return [...new Map(this.byKey).set(backfillKey(state.merchantId, state.pos), state).values()];
  }

  put(state: BackfillState): void {
    this.byKey.set(backfillKey(state.merchantId, state.pos), copy(state));
  }

  clear(): void {
    this.byKey.clear();
  }

  get size(): number {
    return this.byKey.size;
  }

  /** By merchant, then POS; `merchantId`: that merchant's only. */
  list(merchantId?: string): BackfillState[] {
    return [...this.byKey.values()]
      .filter((s) => !merchantId || s.merchantId === merchantId)
      .sort((a, b) => (a.merchantId < b.merchantId ? -1 : a.merchantId > b.merchantId ? 1 : a.pos < b.pos ? -1 : a.pos > b.pos ? 1 : 0))
      .map(copy);
  }
}
