/**
 * A receipt names its customer only by `customer_id` (pos-facts: "Loyverse: customer_id only"), so
 * the contact details come from GET /v1.0/customers/{id} when LOYVERSE_ACCESS_TOKEN is set (the
 * core calls this only then; without it the checkout is recorded as skipped).
 * LOYVERSE_API_BASE_URL is the host (default https://api.loyverse.com), without `/v1.0`.
 */
import { normalizeCustomer, type Customer, type RawCustomer } from '../../src/kernel/customer.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { AdapterContext, PosApi } from '../../src/pos/contract.js';
import { parseWith } from '../../src/kernel/validation.js';
import { LoyverseCustomer } from './schema.js';

/**
 * The loyalty service's card serial is a dash-separated number ("11-123456-1", loyalty-service-api
 * "Card"). Loyverse's free-form `customer_code` is sent as the card serial only when it has that
 * shape (a merchant who keeps the loyalty card there); any other code would name no card.
 */
const CARD_SERIAL = /^[0-9]+(?:-[0-9]+)+$/;

export function customerPath(customerId: string): string {
  return `/v1.0/customers/${encodeURIComponent(customerId)}`;
}

/** `name` is one field in Loyverse: its first word is the first name, the rest the last name. */
function splitName(name: string | null | undefined): Pick<RawCustomer, 'firstName' | 'lastName'> {
  const words = name?.trim().split(/\s+/).filter(Boolean) ?? [];
  if (words.length === 0) return {};
  return { firstName: words[0], ...(words.length > 1 ? { lastName: words.slice(1).join(' ') } : {}) };
}

/** The customer object as Loyverse answers it → the bridge's Customer (E.164 phone, lower-case email). */
export function toCustomer(body: unknown, context: AdapterContext): Customer {
  const wrapped = body !== null && typeof body === 'object' && 'customer' in body && !('id' in body);
  const customer = parseWith(LoyverseCustomer, wrapped ? (body as { customer: unknown }).customer : body, wrapped ? 'customer' : '');
  const code = customer.customer_code?.trim();
  const raw: RawCustomer = {
    phone: customer.phone_number,
    email: customer.email,
    cardSerial: code && CARD_SERIAL.test(code) ? code : undefined,
    ...splitName(customer.name),
  };
  try {
    return normalizeCustomer(raw, context.defaultPhoneRegion, 'customer');
  } catch (error) {
    // A phone that cannot be written in E.164 does not hide an email or card serial that can be used;
    // with nothing else to go on, the error stands (400 / dead letter: fix the customer, replay).
    if (!(error instanceof ValidationError) || !error.issues.every((i) => i.field === 'customer.phone')) throw error;
    const rest = normalizeCustomer({ ...raw, phone: undefined }, context.defaultPhoneRegion, 'customer');
    if (!rest.email && !rest.serialNumber) throw error;
    return rest;
  }
}

export async function fetchLoyverseCustomer(customerId: string, api: PosApi, context: AdapterContext): Promise<Customer> {
  return toCustomer(await api.get(customerPath(customerId)), context);
}
