/**
 * The customer search index (GET /v1/admin/transactions?customer=): each record is indexed under a
 * keyed hash of each of its customer's identifiers (phone, email, card serial), never the
 * identifiers themselves (a search by merchant filters the records found by their merchant), so an operator finds a customer's records by looking a hash up
 * rather than by reading personal data in clear across the ledger. The key is the ledger's own
 * (made once, kept with the ledger): hashes of one ledger mean nothing to another, and a list of
 * phone numbers cannot be hashed ahead of time to read the index.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Customer } from '../customer.js';

/** The setting under which a store keeps its search key. */
export const CUSTOMER_SEARCH_KEY = 'customer_search_key';

/** A new search key (base64url of 32 random bytes). */
export function newSearchKey(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The identifiers of a customer as the ledger compares them: `phone:<E.164>`, `email:<lower case>`,
 * `card:<serial>`. The accrual keys (record.ts) and the customer search index both read them here.
 */
export function identitiesOf(customer: Customer | undefined): string[] {
  if (!customer) return [];
  return [
    customer.phone?.trim() && `phone:${customer.phone.trim()}`,
    customer.email?.trim() && `email:${customer.email.trim().toLowerCase()}`,
    customer.serialNumber?.trim() && `card:${customer.serialNumber.trim()}`,
  ].filter((x): x is string => Boolean(x));
}

/** The index entry of one identifier (`identitiesOf`'s form). */
export function customerHash(key: string, identity: string): string {
  return createHmac('sha256', key).update(identity).digest('base64url').slice(0, 22);
}

/** Every index entry of a record: one per identifier of its customer (none without one). */
export function customerHashesOf(customer: Customer | undefined, key: string): string[] {
  return identitiesOf(customer).map((identity) => customerHash(key, identity));
}
