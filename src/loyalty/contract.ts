/**
 * The loyalty service's point-of-sale and history shapes (loyalty-service-api.md, "Point-of-sale
 * objects", "Operation", "Card"), as zod schemas shared by the client and the simulator.
 * All Check money fields are integer cents: one hundred times the decimal amount.
 */
import { z } from 'zod';

const cents = z.number().int();

export const Selection = z.object({
  quantity: z.number().int().positive(),
  totalPrice: cents,
  id: z.string().optional(),
  groupId: z.string().optional(),
  displayName: z.string().optional(),
  price: cents.optional(),
});
export type Selection = z.infer<typeof Selection>;

export const Check = z.object({
  amount: cents,
  currency: z.string().regex(/^[A-Z]{3}$/),
  selections: z.array(Selection),
  externalTransactionId: z.string().optional(),
  checkOpenedAt: z.string().optional(),
  checkClosedAt: z.string().optional(),
  taxAmount: cents.optional(),
  discountAmount: cents.optional(),
  tipAmount: cents.optional(),
  serviceAmount: cents.optional(),
  totalTipReceived: z.string().optional(),
  orderUpdatedAt: z.string().optional(),
});
export type Check = z.infer<typeof Check>;

export const Credential = z.object({ name: z.string(), value: z.string() });
export type Credential = z.infer<typeof Credential>;

export const AccrueRequest = z.object({
  check: Check,
  transactionId: z.string().min(1),
  phone: z.string().optional(),
  email: z.string().optional(),
  serialNumber: z.string().optional(),
  firstName: z.string().optional(),
  lastName: z.string().optional(),
  credentials: z.array(Credential).min(1).optional(),
});
export type AccrueRequest = z.infer<typeof AccrueRequest>;

export const ReverseRequest = z.object({
  transactionId: z.string().min(1),
  credentials: z.array(Credential).min(1).optional(),
});
export type ReverseRequest = z.infer<typeof ReverseRequest>;

/** One per affected card. A 200 can carry `isSuccess: false` results: each must be inspected. */
export const AccrualResult = z.looseObject({
  installationId: z.number().int().optional(),
  templateId: z.number().int().optional(),
  companyId: z.number().int().optional(),
  isSuccess: z.boolean(),
  errorMessage: z.string().nullish(),
  cardType: z.number().int().optional(),
  serialNumber: z.string().nullish(),
  checkAmount: z.number().int().optional(),
  accrualAmount: z.number().int().optional(),
  accruedValue: z.number().int().optional(),
  operationId: z.number().int().nullish(),
  createdAt: z.string().nullish(),
  reversedAt: z.string().nullish(),
});
export type AccrualResult = z.infer<typeof AccrualResult>;

/** accrue and reverse answer with this bare body (no envelope). */
export const PosResponse = z.looseObject({
  transactionId: z.string(),
  results: z.array(AccrualResult),
});
export type PosResponse = z.infer<typeof PosResponse>;

/** 400/403 body of the point-of-sale group. */
export const PosErrorBody = z.looseObject({ errors: z.array(z.string()) });

export const Operation = z.looseObject({
  id: z.number().int(),
  cardId: z.string(),
  customerId: z.string().optional(),
  templateId: z.number().int().optional(),
  eventId: z.number().int(),
  eventName: z.string().optional(),
  amount: z.number().optional(),
  /** Account-currency units, not cents. */
  purchaseSum: z.number().nullish(),
  balance: z.number().optional(),
  source: z.string().optional(),
  createdAt: z.string(),
});
export type Operation = z.infer<typeof Operation>;

export const Card = z.looseObject({
  id: z.string(),
  templateId: z.number().int().optional(),
  customerId: z.string(),
});
export type Card = z.infer<typeof Card>;

/** A card with the customer it belongs to (GET /api/v2/cards/{id}: Card's `customer`, a CustomerOutput). */
export const CardWithOwner = Card.extend({
  customer: z.looseObject({ phone: z.string().nullish(), email: z.string().nullish() }).optional(),
});

/**
 * A card as a register shows it (Toast's SEARCH and INQUIRE, a lookup): its owner's names and its
 * balance object, whose `bonusBalance` is the points balance of a points card (upstream "Card").
 */
export const RegisterCardBody = Card.extend({
  customer: z.looseObject({ firstName: z.string().nullish(), surname: z.string().nullish(), phone: z.string().nullish(), email: z.string().nullish() }).optional(),
  balance: z.looseObject({ bonusBalance: z.number().nullish(), balance: z.number().nullish() }).optional(),
});

/** The standard envelope of one resource (`data` an object; no `meta`). */
export function envelopeOne<T extends z.ZodType>(item: T) {
  return z.looseObject({ code: z.number().int(), data: item });
}

export const PageMeta = z.object({
  totalItems: z.number().int(),
  itemsPerPage: z.number().int(),
  currentPage: z.number().int(),
});

export function envelopeList<T extends z.ZodType>(item: T) {
  return z.looseObject({ code: z.number().int(), data: z.array(item), meta: PageMeta });
}

/** Largest page the history endpoints accept (Limits: itemsPerPage maximum 1000). */
export const MAX_ITEMS_PER_PAGE = 1000;

/** Filters of GET /api/v2/operations (dates are Y-m-d, as the upstream takes them). */
export interface OperationsQuery {
  cardId?: string;
  startDate?: string;
  endDate?: string;
}
