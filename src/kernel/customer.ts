/**
 * Customer identity for `accrue`: phone (E.164), email or card serial; one of them is needed to find
 * or register the card (upstream point-of-sale rules). National phone numbers are read in
 * DEFAULT_PHONE_REGION.
 */
import { getCountries, parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';
import { ValidationError } from './errors.js';

/**
 * Whether the phone rules know this region (libphonenumber's list): a shape check alone would let
 * `XX` through, and then no phone of that merchant or deployment would read at all.
 */
export function isPhoneRegion(value: string): boolean {
  return (PHONE_REGIONS as readonly string[]).includes(value);
}

/** The regions the phone rules know (libphonenumber's list), for schemas that state them (the admin API's document). */
export const PHONE_REGIONS = getCountries() as [CountryCode, ...CountryCode[]];

/** Who the points go to, as the loyalty service's `accrue` takes it (E.164 phone, lower-case email). */
export interface Customer {
  phone?: string;
  email?: string;
  serialNumber?: string;
  firstName?: string;
  lastName?: string;
}

/** Whether the loyalty service can find or register a card for this customer: a phone, an email or a card serial. */
export function hasContact(customer: Customer | undefined): boolean {
  return Boolean(customer && (customer.phone || customer.email || customer.serialNumber));
}

export interface RawCustomer {
  phone?: string | null;
  email?: string | null;
  cardSerial?: string | null;
  firstName?: string | null;
  lastName?: string | null;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Regular customers come back every day: their parsed numbers are remembered (bounded). */
const e164Cache = new Map<string, string | null>();
const E164_CACHE_SIZE = 10_000;

export function toE164(phone: string, region: string, field: string): string {
  const key = `${region}\u0000${phone.trim()}`;
  let number = e164Cache.get(key);
  if (number === undefined) {
    const parsed = parsePhoneNumberFromString(phone.trim(), region as CountryCode);
    number = parsed && parsed.isPossible() ? parsed.number : null;
    if (e164Cache.size >= E164_CACHE_SIZE) e164Cache.delete(e164Cache.keys().next().value!);
    e164Cache.set(key, number);
  }
  if (number === null) throw ValidationError.field(field, 'is not a phone number that can be written in E.164');
  return number;
}

/** Blank values count as absent: POS payloads often carry `""` for unknown contact details. */
export function normalizeCustomer(raw: RawCustomer | undefined | null, region: string, fieldPrefix = 'customer'): Customer {
  if (!raw) return {};
  const customer: Customer = {};
  const phone = raw.phone?.trim();
  const email = raw.email?.trim();
  const serial = raw.cardSerial?.trim();
  if (phone) customer.phone = toE164(phone, region, `${fieldPrefix}.phone`);
  if (email) {
    if (!EMAIL.test(email)) throw ValidationError.field(`${fieldPrefix}.email`, 'is not an email address');
    customer.email = email.toLowerCase();
  }
  if (serial) customer.serialNumber = serial;
  if (raw.firstName?.trim()) customer.firstName = raw.firstName.trim();
  if (raw.lastName?.trim()) customer.lastName = raw.lastName.trim();
  return customer;
}
