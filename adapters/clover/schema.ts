/**
 * Clover's own shapes, as its REST API v3 returns them (docs.clover.com; the real sandbox order and
 * webhook bodies in fixtures/pos/clover; the field semantics of Clover's own `OrderCalc` in
 * clover-android-sdk). Objects are loose: Clover adds fields over time and the bridge must not refuse
 * an order for a field it does not use. Only the fields the translation relies on are validated,
 * and those strictly.
 *
 * Money is an integer (`long`) in the minor unit of the merchant's currency (2099 = $20.99, ¥2 = 2).
 * It stays an integer here (bigint), and becomes cents only in checkout.ts and refund.ts, through the
 * currency's ISO 4217 exponent. Anything that is not a safe integer is refused: a fraction of a minor
 * unit means we misread the field.
 */
import { z } from 'zod';

/**
 * Clover ids (merchants, orders, customers) are 13 characters of upper-case base-32 (pos-facts:
 * "13-character order id"; every id in the fixtures). Merchant, order and customer ids are put into
 * API paths and transaction ids, so they are held to exactly that: anything else fails loudly.
 */
export const CLOVER_ID = /^[0-9A-Z]{13}$/;
export const cloverId = z.string({ error: 'must be a 13-character Clover id' }).regex(CLOVER_ID, 'must be a 13-character Clover id (0-9, A-Z)');

/** Other ids (line items, items, refunds, payments) are only carried along, never put into a path. */
const looseId = z.string({ error: 'must be a non-empty string' }).trim().min(1, 'must not be empty').max(128, 'must be at most 128 characters');
const text = z.string().max(512).nullish();

/** An integer amount in the currency's minor unit, sign kept (Clover discounts are negative). */
export const minor = z
  .number({ error: 'must be an integer amount in the currency\'s minor unit (e.g. cents)' })
  .refine(Number.isSafeInteger, 'must be an integer amount in the currency\'s minor unit (e.g. cents), not a fraction')
  .transform((n) => BigInt(n));

/** Epoch milliseconds, as every Clover timestamp. */
const epochMs = z.number().refine(Number.isSafeInteger, 'must be epoch milliseconds (an integer)');

/** `{ "id": … }`, Clover's reference to another object. */
const ref = z.looseObject({ id: looseId });

/**
 * Expanded lists come as `{ "elements": [ … ] }` from the REST API (see the fixtures) and as plain
 * arrays in some documentation and SDK JSON; both are read the same way.
 */
export function list<T extends z.ZodType>(item: T, max = 1000) {
  return z
    .union([z.array(item).max(max), z.looseObject({ elements: z.array(item).max(max) })], {
      error: 'must be a list (an array, or { "elements": [ … ] } as the Clover API sends it)',
    })
    .transform((value) => (Array.isArray(value) ? value : value.elements) as z.infer<T>[]);
}

/**
 * A discount on a line or on the order. `amount` is negative (−100 = $1.00 off); `percentage` is a
 * whole percent (the fixture's "25% Off" is `25`; Clover's OrderCalc sums percentages and caps them
 * at 100). A positive amount would be a surcharge, not a discount: refused rather than guessed.
 */
export const CloverDiscount = z.looseObject({
  id: looseId.nullish(),
  name: text,
  amount: minor.refine((n) => n <= 0n, 'must be zero or negative (Clover discount amounts are negative: -100 is 1.00 off)').nullish(),
  percentage: z.number().int('must be a whole percent').min(0, 'must be between 0 and 100').max(100, 'must be between 0 and 100').nullish(),
});
export type CloverDiscount = z.infer<typeof CloverDiscount>;

export const CloverModification = z.looseObject({
  id: looseId.nullish(),
  name: text,
  amount: minor.nullish(),
});

export const CloverLineItem = z.looseObject({
  id: looseId,
  /** The inventory item the line was made from; custom-amount lines have none. */
  item: ref.nullish(),
  name: text,
  /** Unit price; for weighed items the price of one unit (`unitQty` 1000). */
  price: minor.refine((n) => n >= 0n, 'must not be negative'),
  /** Thousandths of a unit for items priced by quantity (2500 = 2.5 lb); absent for one unit. */
  unitQty: z.number().int('must be an integer (thousandths of a unit)').positive('must be greater than 0').max(1e12).nullish(),
  unitName: text,
  modifications: list(CloverModification, 100).nullish(),
  discounts: list(CloverDiscount, 100).nullish(),
  refunded: z.boolean().nullish(),
  exchanged: z.boolean().nullish(),
});
export type CloverLineItem = z.infer<typeof CloverLineItem>;

/**
 * A refund. `amount` is the total refunded *including tax and tip* (Clover Refund: "Total amount
 * refunded, including tax and tip"), with `taxAmount` and `tipAmount` its parts.
 */
export const CloverRefund = z.looseObject({
  id: looseId,
  href: z.string().max(2048).nullish(),
  orderRef: z.looseObject({ id: cloverId, href: z.string().max(2048).nullish() }).nullish(),
  merchant: z.looseObject({ id: cloverId }).nullish(),
  amount: minor.refine((n) => n >= 0n, 'must not be negative'),
  taxAmount: minor.refine((n) => n >= 0n, 'must not be negative').nullish(),
  tipAmount: minor.refine((n) => n >= 0n, 'must not be negative').nullish(),
  createdTime: epochMs.nullish(),
  payment: ref.nullish(),
  lineItems: list(ref).nullish(),
});
export type CloverRefund = z.infer<typeof CloverRefund>;

/**
 * A payment. `amount` includes tax and excludes the tip (the fixture: amount = order total, no tip);
 * `taxAmount` is the tax inside it, `tipAmount` the tip on top, `serviceCharge.amount` the service
 * charge inside it.
 */
export const CloverPayment = z.looseObject({
  id: looseId,
  amount: minor,
  taxAmount: minor.refine((n) => n >= 0n, 'must not be negative').nullish(),
  tipAmount: minor.refine((n) => n >= 0n, 'must not be negative').nullish(),
  serviceCharge: z.looseObject({ amount: minor.refine((n) => n >= 0n, 'must not be negative').nullish() }).nullish(),
  result: z.string().max(64).nullish(),
  createdTime: epochMs.nullish(),
  refunds: list(CloverRefund).nullish(),
});
export type CloverPayment = z.infer<typeof CloverPayment>;

const phone = z.looseObject({ phoneNumber: z.string().max(64).nullish() });
const email = z.looseObject({ emailAddress: z.string().max(320).nullish(), primaryEmail: z.boolean().nullish() });

export const CloverCustomer = z.looseObject({
  id: cloverId.nullish(),
  firstName: text,
  lastName: text,
  phoneNumbers: list(phone, 100).nullish(),
  emailAddresses: list(email, 100).nullish(),
});
export type CloverCustomer = z.infer<typeof CloverCustomer>;

/**
 * The service charge set on the order (legacy single charge): `percentageDecimal` in ten-thousandths
 * of a percent point (1.5 % = 15000, Clover's SERVICE_CHARGE_DIVISOR 10000), or `percentage` whole.
 */
export const CloverServiceCharge = z.looseObject({
  id: looseId.nullish(),
  name: text,
  percentage: z.number().int().min(0).max(100).nullish(),
  percentageDecimal: z.number().int().min(0).max(1_000_000).nullish(),
});

export const CloverOrder = z.looseObject({
  id: cloverId,
  href: z.string().max(2048).nullish(),
  merchant: z.looseObject({ id: cloverId }).nullish(),
  currency: z.string().nullish(),
  /** Total of the order in minor units: after discounts, service charge and tax included, tip excluded. */
  total: minor.nullish(),
  state: z.string().max(64).nullish(),
  paymentState: z.string().max(64).nullish(),
  isVat: z.boolean().nullish(),
  taxRemoved: z.boolean().nullish(),
  createdTime: epochMs.nullish(),
  modifiedTime: epochMs.nullish(),
  lineItems: list(CloverLineItem).nullish(),
  discounts: list(CloverDiscount, 100).nullish(),
  serviceCharge: CloverServiceCharge.nullish(),
  payments: list(CloverPayment, 100).nullish(),
  refunds: list(CloverRefund).nullish(),
  customers: list(CloverCustomer, 100).nullish(),
});
export type CloverOrder = z.infer<typeof CloverOrder>;

export const NOTIFICATION_TYPES = ['CREATE', 'UPDATE', 'DELETE'] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

/** One change in a webhook delivery: `objectId` is "<type letter>:<id>" ("O:" for orders). */
export const CloverNotification = z.looseObject({
  objectId: z.string({ error: 'must be "<type>:<id>"' }).regex(/^[A-Z]{1,4}:[^\s]{1,64}$/, 'must be "<type>:<id>" such as "O:GHIVJT2ABCRSC"'),
  type: z.string({ error: 'must be CREATE, UPDATE or DELETE' }).min(1).max(32),
  ts: epochMs,
});
export type CloverNotification = z.infer<typeof CloverNotification>;

/** A webhook delivery: changes grouped by merchant (docs.clover.com "Use webhooks", message format). */
export const CloverWebhookBody = z.looseObject({
  appId: z.string().max(64).nullish(),
  merchants: z.record(cloverId, z.array(CloverNotification).max(1000)),
});

/**
 * The body of Clover's webhook URL verification: `{ "verificationCode": "<uuid>" }`. It arrives
 * unsigned and its code is shown to the operator, so only a code shaped like Clover's (letters,
 * digits and dashes, bounded) is taken: nothing an attacker sends can reach the log as other text.
 */
export const CloverVerification = z.strictObject({ verificationCode: z.string().regex(/^[A-Za-z0-9-]{1,64}$/) });
