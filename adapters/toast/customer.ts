/**
 * The customer of a Toast order: `checks[].customer {phone, phoneCountryCode, email, firstName,
 * lastName}` and `checks[].appliedLoyaltyInfo.loyaltyIdentifier` (pos-facts "Customer
 * identification"). The order is one transaction, so it has one customer.
 */
import { hasContact, toE164, normalizeCustomer, type Customer } from '../../src/customer.js';
import { ValidationError } from '../../src/errors.js';
import type { LiveCheck } from './order.js';
import type { Check } from './schema.js';

/**
 * `loyaltyIdentifier` names an account of the loyalty program in `vendor`. Only an INTEGRATION
 * vendor (a partner program, as this loyalty service is to Toast) can hold this service's card
 * serial; TOAST, PUNCHH, PAYTRONIX… identifiers belong to other programs and would make the
 * loyalty service look for a card that is not its own, so they are not sent.
 */
function cardSerialOf(info: Check['appliedLoyaltyInfo']): string | undefined {
  if (!info?.loyaltyIdentifier?.trim()) return undefined;
  return info.vendor === undefined || info.vendor === null || info.vendor === 'INTEGRATION' ? info.loyaltyIdentifier.trim() : undefined;
}

/**
 * `phoneCountryCode` (the guest's international calling code) completes a national `phone`; a
 * value that is not a calling code (`1`, `+1`, `44`) is refused rather than guessed at. Without it
 * the number is read in DEFAULT_PHONE_REGION.
 */
function phoneOf(customer: NonNullable<Check['customer']>, region: string, path: string): string | undefined {
  const phone = customer.phone?.trim();
  if (!phone) return undefined;
  const code = customer.phoneCountryCode?.trim();
  if (!code || phone.startsWith('+')) return toE164(phone, region, `${path}.phone`);
  if (!/^\+?[0-9]{1,3}$/.test(code)) throw ValidationError.field(`${path}.phoneCountryCode`, 'must be an international calling code such as "1" or "+1"');
  return toE164(`+${code.replace(/^\+/, '')}${phone}`, region, `${path}.phone`);
}

const CONTACT_KEYS = ['phone', 'email', 'serialNumber'] as const;

/** Same guest: they share a contact value and contradict each other on none. */
function sameGuest(a: Customer, b: Customer): boolean {
  const shared = CONTACT_KEYS.filter((k) => a[k] && b[k]);
  return shared.length > 0 && shared.every((k) => a[k] === b[k]);
}

/**
 * A split order can carry a guest per check. The first check's guest with contact details takes
 * the order; a second, different guest is refused (the points of one guest's check would go to
 * another), so it fails loudly instead of crediting the wrong person.
 */
export function customerOf(live: LiveCheck[], region: string): Customer {
  let found: { customer: Customer; path: string } | undefined;
  for (const { check, path } of live) {
    const customerPath = `${path}.customer`;
    const raw = check.customer;
    const customer = normalizeCustomer(
      {
        phone: raw ? phoneOf(raw, region, customerPath) : undefined,
        email: raw?.email,
        firstName: raw?.firstName,
        lastName: raw?.lastName,
        cardSerial: cardSerialOf(check.appliedLoyaltyInfo),
      },
      region,
      customerPath,
    );
    if (!hasContact(customer)) continue;
    if (!found) {
      found = { customer, path: customerPath };
    } else if (sameGuest(found.customer, customer)) {
      found.customer = { ...customer, ...found.customer };
    } else {
      throw ValidationError.field(customerPath, `is a different guest than ${found.path}: the bridge accrues one order to one customer, and will not credit one guest with another's check`);
    }
  }
  return found?.customer ?? {};
}
