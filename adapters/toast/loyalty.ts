/**
 * Toast's loyalty integration API, the register's side (pos-facts "Toast's loyalty integration
 * API"; Toast's developer guide, "Transaction types", "Network failure and idempotence", and its
 * loyalty OpenAPI v1.1.0): when a cashier presses Rewards, Toast calls the loyalty provider
 * synchronously, one POST per transaction, and the bridge is that provider (POST /v1/toast/loyalty).
 * This file reads Toast's `LoyaltyTransaction` and writes its `LoyaltyTransactionResponse` (pure);
 * the core decides (src/core/register.ts).
 *
 * - Headers: `Toast-Restaurant-External-ID` (the restaurant: the merchant), `Authorization` (the
 *   static key the integration was set up with, the whole value), `Toast-Transaction-GUID` (the
 *   call's id: the same on Toast's retry), `Toast-Transaction-Type` (repeated in the body's
 *   `toastTransactionType`, which is what is read: a header that disagrees is refused).
 * - The account identifier Toast keeps on the check (`loyaltyIdentifier`) is the loyalty service's
 *   card serial: SEARCH answers one account per card, INQUIRE reads that card.
 * - ACCRUE's check is a Toast `Check` (the orders API's shape): its purchase is translated as every
 *   Toast check is (checkout.ts: amount without tax and tip, the selections), its sale the check's
 *   own transactionId `toast:<order>:<check>`, so the same check arriving by the orders webhook or
 *   backfill is the same sale. The card is the identifier's; without one, the sale earns nothing
 *   (recorded skipped).
 * - Answers: `ACCEPT` with 200, or one of Toast's `ERROR_*` values with 400 (404 with
 *   `ERROR_ACCOUNT_INVALID`: a search that finds no account, an inquire of an unknown identifier,
 *   as Toast's schema says); Toast's catch-all `ERROR` carries a `message` the cashier sees.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { maskEmail, maskPhone } from '../../src/kernel/mask.js';
import { toE164 } from '../../src/kernel/customer.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { AdapterContext, RegisterAccount, RegisterAnswer, RegisterCall, RegisterRefusalReason, RegisterSpec } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { checkSaleOf, type ReadOrder } from './checkout.js';
import { Check } from './schema.js';

export const TOAST_REGISTER_HEADERS = {
  account: 'toast-restaurant-external-id',
  key: 'authorization',
  callId: 'toast-transaction-guid',
  type: 'toast-transaction-type',
} as const;

const TYPES = ['LOYALTY_SEARCH', 'LOYALTY_INQUIRE', 'LOYALTY_REDEEM', 'LOYALTY_ACCRUE', 'LOYALTY_REVERSE', 'LOYALTY_TRANSFER'] as const;

const text = z.string().max(200).nullish();
const Redemptions = z.array(z.unknown()).max(100).nullish();

const Transaction = z.object({
  toastTransactionType: z.enum(TYPES, { error: `must be one of ${TYPES.join(', ')}` }),
  searchTransactionInformation: z.object({ searchCriteria: z.object({ firstName: text, lastName: text, email: text, phone: text }).nullish() }).nullish(),
  checkTransactionInformation: z
    .object({
      loyaltyIdentifier: text,
      orderGuid: text,
      check: z.unknown().optional(),
      redemptions: Redemptions,
    })
    .nullish(),
  reverseTransactionInformation: z.object({ loyaltyIdentifier: text, transactionId: text, redemptions: Redemptions }).nullish(),
  transferTransactionInformation: z.unknown().optional(),
});

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' && value.trim() ? value.trim() : undefined;
}

function required<T>(value: T | null | undefined, field: string, why: string): T {
  if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) throw ValidationError.field(field, why);
  return value;
}

/** A check's sale, as ACCRUE sends it: the order's guid beside the one check, the card the register attached. */
function accrueSale(info: NonNullable<z.infer<typeof Transaction>['checkTransactionInformation']>, context: AdapterContext) {
  const orderGuid = required(info.orderGuid, 'checkTransactionInformation.orderGuid', 'is required: the order the check belongs to').trim();
  const prefix = 'checkTransactionInformation';
  if (!isObject(info.check)) throw ValidationError.field(`${prefix}.check`, 'is required: the check whose purchase accrues');
  const check = parseWith(Check, info.check, `${prefix}.check`);
  const read: ReadOrder = { raw: { guid: orderGuid, checks: [info.check] }, order: { guid: orderGuid, checks: [check] }, prefix };
  const sale = checkSaleOf(read, { check, path: `${prefix}.check` }, context);
  // The card the cashier attached is the account that earns (Toast sends ACCRUE for every paid
  // check, with a null identifier when no guest was attached: then nothing earns).
  const identifier = info.loyaltyIdentifier?.trim();
  return { ...sale, customer: identifier ? { serialNumber: identifier } : {} };
}

function parse(body: unknown, headers: IncomingHttpHeaders, context: AdapterContext): RegisterCall {
  const id = required(header(headers, TOAST_REGISTER_HEADERS.callId), 'Toast-Transaction-GUID', 'is required: it is what a repeated call is recognised by');
  if (!isObject(body)) throw ValidationError.field('', 'must be a Toast LoyaltyTransaction (a JSON object)');
  const t = parseWith(Transaction, body);
  const type = header(headers, TOAST_REGISTER_HEADERS.type);
  if (type && type !== t.toastTransactionType) throw ValidationError.field('toastTransactionType', `is ${t.toastTransactionType} but the Toast-Transaction-Type header says ${type.slice(0, 40)}`);
  switch (t.toastTransactionType) {
    case 'LOYALTY_SEARCH': {
      const criteria = t.searchTransactionInformation?.searchCriteria ?? {};
      // The loyalty service finds customers by phone or email, never by name: a name alone finds nothing.
      const phone = criteria.phone?.trim() ? toE164(criteria.phone.trim(), context.defaultPhoneRegion, 'searchTransactionInformation.searchCriteria.phone') : undefined;
      const email = criteria.email?.trim() ? criteria.email.trim().toLowerCase() : undefined;
      return { id, kind: 'search', ...(phone ? { phone } : {}), ...(email ? { email } : {}) };
    }
    case 'LOYALTY_INQUIRE': {
      const info = required(t.checkTransactionInformation, 'checkTransactionInformation', 'is required for LOYALTY_INQUIRE');
      const identifier = required(info.loyaltyIdentifier, 'checkTransactionInformation.loyaltyIdentifier', 'is required: the account to inquire about').trim();
      return { id, kind: 'inquire', identifier, redemptions: info.redemptions ?? [] };
    }
    case 'LOYALTY_REDEEM': {
      const info = required(t.checkTransactionInformation, 'checkTransactionInformation', 'is required for LOYALTY_REDEEM');
      const identifier = info.loyaltyIdentifier?.trim();
      return { id, kind: 'redeem', ...(identifier ? { identifier } : {}), redemptions: info.redemptions ?? [] };
    }
    case 'LOYALTY_ACCRUE': {
      const info = required(t.checkTransactionInformation, 'checkTransactionInformation', 'is required for LOYALTY_ACCRUE');
      return { id, kind: 'accrue', sale: accrueSale(info, context), redemptions: info.redemptions ?? [] };
    }
    case 'LOYALTY_REVERSE': {
      const info = required(t.reverseTransactionInformation, 'reverseTransactionInformation', 'is required for LOYALTY_REVERSE');
      const reverses = required(info.transactionId, 'reverseTransactionInformation.transactionId', 'is required: the Toast-Transaction-GUID of the accrue or redeem to undo').trim();
      return { id, kind: 'reverse', reverses, redemptions: info.redemptions ?? [] };
    }
    case 'LOYALTY_TRANSFER':
      return { id, kind: 'unsupported', type: t.toastTransactionType };
    default: {
      const never: never = t.toastTransactionType;
      throw new Error(`unhandled Toast transaction type ${String(never)}`);
    }
  }
}

/** Toast's status for each refusal, with the HTTP status its guide gives it. */
const REFUSALS: Readonly<Record<RegisterRefusalReason, { status: number; transactionStatus: string }>> = {
  // Toast's API documents 200, 400 and 500 only: a wrong key is a 400 too.
  key: { status: 400, transactionStatus: 'ERROR_INVALID_TOKEN' },
  account: { status: 400, transactionStatus: 'ERROR_INVALID_RESTAURANT' },
  input: { status: 400, transactionStatus: 'ERROR_INVALID_INPUT_PROPERTIES' },
  no_card: { status: 404, transactionStatus: 'ERROR_ACCOUNT_INVALID' },
  unknown_call: { status: 400, transactionStatus: 'ERROR_TRANSACTION_DOES_NOT_EXIST' },
  cannot_reverse: { status: 400, transactionStatus: 'ERROR_TRANSACTION_CANNOT_BE_REVERSED' },
  unsupported: { status: 400, transactionStatus: 'ERROR_INVALID_TOAST_TRANSACTION_TYPE' },
  // Toast's catch-all: its `message` is shown to the restaurant's employee.
  unavailable: { status: 400, transactionStatus: 'ERROR' },
};

/** What a redemption is rejected with: the loyalty service has no reward a register can redeem. */
const NOTHING_TO_REDEEM = 'This loyalty program has no rewards to redeem at the register: the points stay on the card.';

/**
 * Toast's AccountInfo. Contacts are shown masked: the register found the guest by one of them, and
 * the other is not the register's to read in full.
 */
function accountInfo(account: RegisterAccount): Record<string, unknown> {
  const { customer } = account;
  return {
    identifier: account.serialNumber,
    ...(customer.firstName ? { firstName: customer.firstName } : {}),
    ...(customer.surname ? { lastName: customer.surname } : {}),
    ...(customer.phone ? { phone: maskPhone(customer.phone) } : {}),
    ...(customer.email ? { email: maskEmail(customer.email) } : {}),
    ...(account.pointsBalance !== undefined ? { pointsBalance: account.pointsBalance } : {}),
  };
}

function rejectedOf(redemptions: readonly unknown[]): unknown[] {
  return redemptions.map((redemption) => ({ redemption, message: NOTHING_TO_REDEEM }));
}

function answer(a: RegisterAnswer): { status: number; body: unknown } {
  switch (a.kind) {
    case 'accounts':
      return { status: 200, body: { transactionStatus: 'ACCEPT', searchResponse: { accounts: a.accounts.map(accountInfo) } } };
    case 'account':
      return {
        status: 200,
        body: {
          transactionStatus: 'ACCEPT',
          checkResponse: { accountInfo: accountInfo(a.account), ...(a.account.pointsBalance !== undefined ? { pointsBalance: a.account.pointsBalance } : {}), offers: [], rejectedRedemptions: rejectedOf(a.rejected), appliedRedemptions: [] },
        },
      };
    case 'accepted':
      return { status: 200, body: { transactionStatus: 'ACCEPT', ...(a.rejected.length ? { checkResponse: { rejectedRedemptions: rejectedOf(a.rejected), appliedRedemptions: [] } } : {}) } };
    case 'refused': {
      const refusal = REFUSALS[a.reason];
      return { status: refusal.status, body: { transactionStatus: refusal.transactionStatus, message: a.message } };
    }
    default: {
      const never: never = a;
      throw new Error(`unhandled register answer ${JSON.stringify(never)}`);
    }
  }
}

export const toastRegister: RegisterSpec = {
  accountHeader: TOAST_REGISTER_HEADERS.account,
  keyHeader: TOAST_REGISTER_HEADERS.key,
  callIdHeader: TOAST_REGISTER_HEADERS.callId,
  parse,
  answer,
};
