/**
 * Customer identity for `accrue`: phone (E.164), email or card serial; one of them is needed to find
 * or register the card (upstream point-of-sale rules). National phone numbers are read in
 * DEFAULT_PHONE_REGION.
 */
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';
import { ValidationError } from './errors.js';
import type { Customer } from './ledger/record.js';

export interface RawCustomer {
  phone?: string | null;
  email?: string | null;
  cardSerial?: string | null;
  firstName?: string | null;
  lastName?: string | null;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function toE164(phone: string, region: string, field: string): string {
  const parsed = parsePhoneNumberFromString(phone.trim(), region as CountryCode);
  if (!parsed || !parsed.isPossible()) throw ValidationError.field(field, 'is not a phone number that can be written in E.164');
  return parsed.number;
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
