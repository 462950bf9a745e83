/**
 * The customer search index (GET /v1/admin/transactions?customer=): each record is indexed under a
 * keyed hash of each of its customer's identifiers (phone, email, card serial), never the
 * identifiers themselves (a search by merchant filters the records found by their merchant), so an operator finds a customer's records by looking a hash up
 * rather than by reading personal data in clear across the ledger. The key is the ledger's own
 * (made once, kept with the ledger): hashes of one ledger mean nothing to another, and a list of
 * phone numbers cannot be hashed ahead of time to read the index.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { toE164, type Customer } from '../kernel/customer.js';

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

/**
 * What an operator typed into the customer search, as the identifiers it could be: `phone:…`,
 * `email:…` or `card:…` as said; text with an @ an email; otherwise a card serial as typed and,
 * when it reads as a phone number in `region` (the merchant's, for numbers without a country
 * code), that phone in E.164. A card serial is dash-separated digits, as a phone may be written:
 * both are asked for. Empty when it can be none.
 */
export function searchIdentities(text: string, region: string): string[] {
  const typed = text.trim();
  const explicit = /^(phone|email|card):(.*)$/i.exec(typed);
  const kind = explicit?.[1]!.toLowerCase();
  const value = (explicit ? explicit[2]! : typed).trim();
  if (!value) return [];
  if (kind === 'email' || (!kind && value.includes('@'))) return identitiesOf({ email: value });
  const asPhone = kind === 'card' ? undefined : phoneOf(value, region);
  const asCard = kind === 'phone' || value.startsWith('+') || !CARD_SERIAL.test(value) ? undefined : value;
  return [...identitiesOf({ phone: asPhone }), ...identitiesOf({ serialNumber: asCard })];
}

/**
 * What a card serial can look like: the loyalty service's card id is a dash-separated serial
 * (`11-100001-2`); letters are let through for services that use them, but it holds a digit and no
 * space, so that text which is no identifier at all (`hello`) is refused rather than searched.
 * Written without lookarounds, so that the HTTP layer can state it in /openapi.json as it is.
 */
export const CARD_SERIAL_PATTERN = '[A-Za-z0-9-]{0,32}[0-9][A-Za-z0-9-]{0,32}';
const CARD_SERIAL = new RegExp(`^${CARD_SERIAL_PATTERN}$`);

/** The identifiers of a contact the loyalty service gave (a card's owner): its phone read in `region`, its email. */
export function contactIdentities(contact: { phone?: string; email?: string }, region: string): string[] {
  return identitiesOf({ phone: contact.phone ? phoneOf(contact.phone, region) : undefined, email: contact.email });
}

function phoneOf(text: string, region: string): string | undefined {
  try {
    return toE164(text, region, 'customer');
  } catch {
    return undefined;
  }
}
