/**
 * A fake of Square's API for its sellers (docs/simulator-pos-apis.md, "Square"), mounted at
 * /square: RetrieveOrder, SearchOrders, RetrieveCustomer, GetPaymentRefund, with Square's own
 * shapes (Money `{amount, currency}` in minor units, RFC 3339 times with milliseconds, 27-character
 * order ids) as in test/fixtures/square. An account is a Square seller: its merchant id, locations
 * and access token (`Authorization: Bearer …`). A refund is what Square makes of one: a return order
 * (`returns[].source_order_id`, `return_line_items`, `return_amounts`) and a COMPLETED PaymentRefund
 * whose `order_id` names it.
 *
 * SearchOrders follows Square's documented rules: 1 to 10 location_ids of the seller; a
 * date_time_filter's field must be the sort_field; both ends of its time range are inclusive and an
 * absent end is the time of the first request; limit 1 to 1000 (default 500); the cursor answers
 * only for the query it was made for (the same location_ids and query on every page, or 400). Its
 * body is read as strictly as Square reads it: an unknown field, a wrong JSON type or an enum value
 * Square does not have is a 400 with one of Square's ErrorCodes, never a filter silently ignored.
 * test/oracles/square.test.ts parses every answer with Square's SDK's own schemas.
 */
import { createHmac } from 'node:crypto';
import express, { type Response } from 'express';
import { z } from 'zod';
import { unreachable } from '../../src/kernel/unreachable.js';
import { PosFaultQueue } from './faults.js';
import { accountOf, Accounts, bearerToken, canonicalJson, copy, faultGate, NotHeldError, pathParam, type FakePos, type PosContext, type PosErrors, type SignedDelivery } from './kit.js';
import {
  CustomerInput,
  decodeCursor,
  encodeCursor,
  OrderInput,
  parseTime,
  randomChars,
  RefundInput,
  RefundLedger,
  totalsOf,
  uuid,
  type OrderRequest,
  type RefundRequest,
} from './model.js';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const UPPER36 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
/** SearchOrders calls kept per seller for `searches()`. */
const SEARCHES_KEPT = 1000;
/** Square's seller and location ids: 13 upper-case letters and digits ("6SSW7HV8K2ST5", "D7AVYMEAPJ3A3"). */
const SQUARE_ACCOUNT_ID = /^[A-Z0-9]{1,32}$/;

export const SquareAccountOptions = z.strictObject({
  merchantId: z.string().regex(SQUARE_ACCOUNT_ID).optional(),
  accessToken: z.string().trim().min(1).max(200).optional(),
  locationIds: z.array(z.string().regex(SQUARE_ACCOUNT_ID)).min(1).max(300).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).default('USD'),
});
export type SquareAccountOptions = z.input<typeof SquareAccountOptions>;

/** Square `Money`. */
interface Money {
  amount: number;
  currency: string;
}

/** The fields of a Square Order the fake reads back; the rest is carried as built. */
export interface SquareOrder {
  id: string;
  location_id: string;
  state: 'OPEN' | 'COMPLETED' | 'CANCELED' | 'DRAFT';
  version: number;
  created_at: string;
  updated_at: string;
  closed_at?: string;
  [field: string]: unknown;
}

export interface SquarePaymentRefund {
  id: string;
  status: 'PENDING' | 'COMPLETED' | 'REJECTED' | 'FAILED';
  amount_money: Money;
  order_id: string;
  payment_id: string;
  location_id: string;
  created_at: string;
  updated_at: string;
  [field: string]: unknown;
}

export interface SquareCustomer {
  id: string;
  [field: string]: unknown;
}

interface Sale {
  input: OrderInput;
  ledger: RefundLedger;
  paymentId?: string;
}

class SquareAccount {
  readonly faults = new PosFaultQueue();
  readonly orders = new Map<string, SquareOrder>();
  /** Orders made from an OrderInput: what their refunds are measured against. */
  readonly sales = new Map<string, Sale>();
  readonly refunds = new Map<string, SquarePaymentRefund>();
  readonly customers = new Map<string, SquareCustomer>();
  /** The SearchOrders calls that passed authentication and the faults, oldest first, the last SEARCHES_KEPT of them (`searches()`). */
  readonly searches: SquareSearchCall[] = [];

  constructor(
    readonly merchantId: string,
    readonly accessToken: string,
    readonly locationIds: readonly string[],
    readonly currency: string,
  ) {}

  describe() {
    return { merchantId: this.merchantId, accessToken: this.accessToken, locationIds: [...this.locationIds], currency: this.currency, orders: this.orders.size, faults: this.faults.pending() };
  }
}

export type SquareAccountView = ReturnType<SquareAccount['describe']>;

/**
 * One SearchOrders call as the fake received and answered it: the location ids as sent (whatever
 * their number), whether it carried a cursor (a page after the first), and the answer's status and
 * orders. What a test asserts a reader's calls by (at most 10 locations a call, each set paged).
 */
export interface SquareSearchCall {
  locationIds: string[];
  cursor: boolean;
  status: number;
  orders: number;
}

/** Square's error envelope: `{ errors: [{ category, code, detail, field? }] }`. */
function squareError(res: Response, status: number, category: string, code: string, detail: string, field?: string): void {
  res.status(status).json({ errors: [{ category, code, detail, ...(field ? { field } : {}) }] });
}

const badRequest = (res: Response, detail: string, field?: string, code = 'BAD_REQUEST') => squareError(res, 400, 'INVALID_REQUEST_ERROR', code, detail, field);

const SQUARE_ERRORS: PosErrors = {
  // Square documents no Retry-After on its 429s: clients back off on their own.
  retryAfter: null,
  unauthorized: (res, why) =>
    squareError(
      res,
      401,
      'AUTHENTICATION_ERROR',
      'UNAUTHORIZED',
      why === 'missing' ? 'Your request did not include an `Authorization` http header with an access token.' : 'This request could not be authorized.',
    ),
  rateLimited: (res, retryAfter) => {
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter));
    squareError(res, 429, 'RATE_LIMIT_ERROR', 'RATE_LIMITED', 'Too many requests, try again later.');
  },
  serverError: (res, status) =>
    status === 503
      ? squareError(res, 503, 'API_ERROR', 'SERVICE_UNAVAILABLE', 'Service unavailable, try again later.')
      : squareError(res, status, 'API_ERROR', 'INTERNAL_SERVER_ERROR', 'An internal error has occurred, and the API was unable to service your request.'),
};

const money = (amount: number, currency: string): Money => ({ amount, currency });
const iso = (ms: number): string => new Date(ms).toISOString();

const SORT_FIELDS = ['CREATED_AT', 'UPDATED_AT', 'CLOSED_AT'] as const;
type SortField = (typeof SORT_FIELDS)[number];
const FIELD_OF: Record<SortField, 'created_at' | 'updated_at' | 'closed_at'> = { CREATED_AT: 'created_at', UPDATED_AT: 'updated_at', CLOSED_AT: 'closed_at' };
const ORDER_STATES = ['OPEN', 'COMPLETED', 'CANCELED', 'DRAFT'] as const;

/**
 * The shape of a SearchOrders body, field by field as Square's API reference (and its SDK's
 * SearchOrdersRequest) declares it. Square refuses what it does not know: an unknown field (a
 * camelCase `dateTimeFilter`, a misspelt `location_id`), a value of the wrong JSON type, an enum
 * value it does not have, a required field left out. So the fake refuses them too, rather than
 * answering a filter it silently ignored (an unfiltered 200).
 */
type Shape =
  | { t: 'string' | 'integer' | 'boolean' }
  | { t: 'enum'; name: string; values: readonly string[] }
  | { t: 'array'; of: Shape }
  | { t: 'object'; fields: Record<string, Shape>; required?: readonly string[] };
const str: Shape = { t: 'string' };
const strings: Shape = { t: 'array', of: str };
const enumOf = (name: string, values: readonly string[]): Shape => ({ t: 'enum', name, values });
const TIME_RANGE: Shape = { t: 'object', fields: { start_at: str, end_at: str } };
const SEARCH_ORDERS_REQUEST: Shape = {
  t: 'object',
  fields: {
    location_ids: strings,
    cursor: str,
    limit: { t: 'integer' },
    return_entries: { t: 'boolean' },
    query: {
      t: 'object',
      fields: {
        filter: {
          t: 'object',
          fields: {
            state_filter: { t: 'object', fields: { states: { t: 'array', of: enumOf('OrderState', ORDER_STATES) } }, required: ['states'] },
            date_time_filter: { t: 'object', fields: { created_at: TIME_RANGE, updated_at: TIME_RANGE, closed_at: TIME_RANGE } },
            fulfillment_filter: {
              t: 'object',
              fields: {
                fulfillment_types: { t: 'array', of: enumOf('FulfillmentType', ['PICKUP', 'SHIPMENT', 'DELIVERY', 'IN_STORE']) },
                fulfillment_states: { t: 'array', of: enumOf('FulfillmentState', ['PROPOSED', 'RESERVED', 'PREPARED', 'COMPLETED', 'CANCELED', 'FAILED']) },
              },
            },
            source_filter: { t: 'object', fields: { source_names: strings } },
            customer_filter: { t: 'object', fields: { customer_ids: strings } },
          },
        },
        sort: { t: 'object', fields: { sort_field: enumOf('SearchOrdersSortField', SORT_FIELDS), sort_order: enumOf('SortOrder', ['DESC', 'ASC']) }, required: ['sort_field'] },
      },
    },
  },
};

interface TimeRange {
  start_at?: string;
  end_at?: string;
}
/** A SearchOrders body that has passed SEARCH_ORDERS_REQUEST (its nulls dropped as absent). */
interface SearchOrdersRequest {
  location_ids?: string[];
  cursor?: string;
  limit?: number;
  return_entries?: boolean;
  query?: {
    filter?: {
      state_filter?: { states: (typeof ORDER_STATES)[number][] };
      date_time_filter?: { created_at?: TimeRange; updated_at?: TimeRange; closed_at?: TimeRange };
      fulfillment_filter?: { fulfillment_types?: string[]; fulfillment_states?: string[] };
      source_filter?: { source_names?: string[] };
      customer_filter?: { customer_ids?: string[] };
    };
    sort?: { sort_field: SortField; sort_order?: 'ASC' | 'DESC' };
  };
}

/** One refusal, as one entry of Square's `errors`: an ErrorCode of Square's and the field it concerns. */
interface Refusal {
  code: string;
  detail: string;
  field: string;
}

/**
 * `value` checked against `shape`: the value with its nulls dropped (Square reads a null optional
 * field as absent), or the first refusal. A field is named by its dotted path (`query.sort.sort_field`,
 * `location_ids[2]`).
 */
function conform(value: unknown, shape: Shape, field: string): { ok: unknown } | { refusal: Refusal } {
  const refuse = (code: string, detail: string, at = field) => ({ refusal: { code, detail, field: at } });
  const type = Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
  switch (shape.t) {
    case 'string':
      return typeof value === 'string' ? { ok: value } : refuse('EXPECTED_STRING', `Expected a string value, got ${type}.`);
    case 'boolean':
      return typeof value === 'boolean' ? { ok: value } : refuse('EXPECTED_BOOLEAN', `Expected a boolean value, got ${type}.`);
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value) ? { ok: value } : refuse('EXPECTED_INTEGER', `Expected an integer value, got ${typeof value === 'number' ? value : type}.`);
    case 'enum':
      if (typeof value !== 'string') return refuse('EXPECTED_STRING', `Expected a string value, got ${type}.`);
      return shape.values.includes(value) ? { ok: value } : refuse('INVALID_ENUM_VALUE', `\`${value}\` is not a valid enum value for \`${shape.name}\`.`);
    case 'array': {
      if (!Array.isArray(value)) return refuse('EXPECTED_ARRAY', `Expected an array, got ${type}.`);
      const out: unknown[] = [];
      for (const [i, item] of value.entries()) {
        const r = conform(item, shape.of, `${field}[${i}]`);
        if ('refusal' in r) return r;
        out.push(r.ok);
      }
      return { ok: out };
    }
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return refuse('EXPECTED_OBJECT', `Expected an object, got ${type}.`);
      const out: Record<string, unknown> = {};
      const path = (key: string) => (field === '' ? key : `${field}.${key}`);
      for (const [key, item] of Object.entries(value)) {
        const inner = Object.hasOwn(shape.fields, key) ? shape.fields[key] : undefined;
        if (inner === undefined) return refuse('BAD_REQUEST', `The field named \`${key}\` is unrecognized.`, path(key));
        if (item === null) continue;
        const r = conform(item, inner, path(key));
        if ('refusal' in r) return r;
        out[key] = r.ok;
      }
      const missing = shape.required?.find((key) => out[key] === undefined);
      if (missing !== undefined) return refuse('MISSING_REQUIRED_PARAMETER', `Field must be set.`, path(missing));
      return { ok: out };
    }
    default:
      return unreachable(shape);
  }
}

/** What a cursor carries: the query it answers, the end of an open time range, and where the last page stopped. */
const SearchCursor = z.object({ q: z.string(), end: z.number().nullable(), after: z.tuple([z.number(), z.string()]) });

export class FakeSquare implements FakePos {
  readonly name = 'square' as const;
  readonly #accounts = new Accounts<SquareAccount>('Square merchant');

  constructor(private readonly ctx: PosContext) {}

  addAccount(options: SquareAccountOptions = {}): SquareAccountView {
    const o = SquareAccountOptions.parse(options);
    const merchantId = o.merchantId ?? randomChars(UPPER36, 13);
    const accessToken = o.accessToken ?? `sq-token-${merchantId}`;
    if (this.#accounts.byToken(accessToken)) throw new RangeError('accessToken is already used by another Square merchant');
    const locations = o.locationIds ?? [randomChars(UPPER36, 13)];
    for (const other of this.#accounts.list()) {
      const taken = locations.find((l) => other.locationIds.includes(l));
      if (taken) throw new RangeError(`location ${taken} belongs to Square merchant ${other.merchantId}`);
    }
    return this.#accounts.add(merchantId, new SquareAccount(merchantId, accessToken, locations, o.currency)).describe();
  }

  accounts(): SquareAccountView[] {
    return this.#accounts.list().map((a) => a.describe());
  }

  faults(merchantId: string): PosFaultQueue {
    return this.#accounts.get(merchantId).faults;
  }

  /** The seller's SearchOrders calls so far, oldest first (copies). */
  searches(merchantId: string): SquareSearchCall[] {
    return copy(this.#accounts.get(merchantId).searches);
  }

  reset(): void {
    this.#accounts.clear();
  }

  addCustomer(merchantId: string, input: CustomerInput): SquareCustomer {
    return copy(this.#newCustomer(this.#accounts.get(merchantId), CustomerInput.parse(input)));
  }

  /** The seller deletes a customer: its orders still name it, and GET /v2/customers/{id} answers 404. */
  removeCustomer(merchantId: string, customerId: string): void {
    if (!this.#accounts.get(merchantId).customers.delete(customerId)) throw new NotHeldError(`no customer ${customerId}`);
  }

  #newCustomer(account: SquareAccount, c: CustomerInput): SquareCustomer {
    const id = c.id ?? randomChars(UPPER36, 26);
    if (account.customers.has(id)) throw new RangeError(`customer ${id} already exists`);
    const at = iso(this.ctx.now().getTime());
    const customer: SquareCustomer = {
      id,
      created_at: at,
      updated_at: at,
      ...(c.firstName ? { given_name: c.firstName } : {}),
      ...(c.lastName ? { family_name: c.lastName } : {}),
      ...(c.email ? { email_address: c.email } : {}),
      ...(c.phone ? { phone_number: c.phone } : {}),
      preferences: { email_unsubscribed: false },
      creation_source: 'THIRD_PARTY',
      version: 0,
    };
    account.customers.set(id, customer);
    return customer;
  }

  /** A sale: COMPLETED with a card tender (or OPEN and unpaid), lines with additive tax, as Square computes its totals. */
  addOrder(merchantId: string, request: OrderRequest): SquareOrder {
    const account = this.#accounts.get(merchantId);
    const input = OrderInput.parse(request);
    const location = input.location ?? account.locationIds[0]!;
    if (!account.locationIds.includes(location)) throw new RangeError(`location ${location} is not one of merchant ${merchantId}'s`);
    const id = input.id ?? randomChars(BASE62, 27);
    if (account.orders.has(id)) throw new RangeError(`order ${id} already exists`);
    const currency = input.currency ?? account.currency;
    const m = (amount: number) => money(amount, currency);
    const created = parseTime(input.createdAt, this.ctx.now().getTime());
    const updated = parseTime(input.updatedAt, created);
    const customerId = this.#customerIdOf(account, input.customer);
    const totals = totalsOf(input);

    const discounts: unknown[] = [];
    const lineItems = input.lines.map((l) => {
      const gross = l.unitPrice * l.quantity;
      const uid = randomChars(BASE62, 22);
      let appliedDiscounts: unknown[] | undefined;
      if (l.discount > 0) {
        const discountUid = randomChars(BASE62, 22);
        discounts.push({ uid: discountUid, name: `${l.name} discount`, type: 'FIXED_AMOUNT', amount_money: m(l.discount), applied_money: m(l.discount), scope: 'LINE_ITEM' });
        appliedDiscounts = [{ uid: randomChars(BASE62, 22), discount_uid: discountUid, applied_money: m(l.discount) }];
      }
      return {
        uid,
        name: l.name,
        quantity: String(l.quantity),
        ...(l.itemId ? { catalog_object_id: l.itemId } : {}),
        item_type: 'ITEM',
        ...(appliedDiscounts ? { applied_discounts: appliedDiscounts } : {}),
        ...(l.tax > 0 ? { applied_taxes: [{ uid: randomChars(BASE62, 22), tax_uid: 'sales-tax', applied_money: m(l.tax) }] } : {}),
        base_price_money: m(l.unitPrice),
        variation_total_price_money: m(gross),
        gross_sales_money: m(gross),
        total_tax_money: m(l.tax),
        total_discount_money: m(l.discount),
        // Square's line total is after the line's discounts, with its additive tax.
        total_money: m(gross - l.discount + l.tax),
        total_service_charge_money: m(0),
      };
    });
    const paid = !input.open;
    const paymentId = paid ? randomChars(BASE62, 29) : undefined;
    const order: SquareOrder = {
      id,
      location_id: location,
      line_items: lineItems,
      ...(discounts.length > 0 ? { discounts } : {}),
      ...(totals.tax > 0 ? { taxes: [{ uid: 'sales-tax', name: 'Sales Tax', type: 'ADDITIVE', scope: 'LINE_ITEM', applied_money: m(totals.tax) }] } : {}),
      ...(customerId ? { customer_id: customerId } : {}),
      created_at: iso(created),
      updated_at: iso(updated),
      ...(paid ? { closed_at: iso(updated) } : {}),
      state: paid ? 'COMPLETED' : 'OPEN',
      version: paid ? 4 : 1,
      ...(paymentId
        ? {
            tenders: [
              {
                id: paymentId,
                location_id: location,
                transaction_id: id,
                created_at: iso(updated),
                // A tender's amount includes its tip.
                amount_money: m(totals.total + totals.tip),
                ...(totals.tip > 0 ? { tip_money: m(totals.tip) } : {}),
                ...(customerId ? { customer_id: customerId } : {}),
                type: 'CARD',
                card_details: { status: 'CAPTURED', card: { card_brand: 'VISA', last_4: '1111' }, entry_method: 'KEYED' },
                payment_id: paymentId,
              },
            ],
          }
        : {}),
      total_money: m(totals.total + totals.tip),
      total_tax_money: m(totals.tax),
      total_discount_money: m(totals.discount),
      total_tip_money: m(totals.tip),
      total_service_charge_money: m(0),
      net_amounts: {
        total_money: m(totals.total + totals.tip),
        tax_money: m(totals.tax),
        discount_money: m(totals.discount),
        tip_money: m(totals.tip),
        service_charge_money: m(0),
      },
      source: { name: 'Loyalty bridge simulator' },
    };
    account.orders.set(id, order);
    account.sales.set(id, { input, ledger: new RefundLedger(input.lines), ...(paymentId ? { paymentId } : {}) });
    return copy(order);
  }

  #customerIdOf(account: SquareAccount, customer: OrderInput['customer']): string | undefined {
    if (customer === undefined) return undefined;
    if (typeof customer === 'string') {
      if (!account.customers.has(customer)) throw new NotHeldError(`no customer ${customer}`);
      return customer;
    }
    return this.#newCustomer(account, customer).id;
  }

  /**
   * A refund of a COMPLETED sale: the return order Square creates for it and the PaymentRefund whose
   * `order_id` names that return order. The sale gets a new version naming the refund.
   */
  addRefund(merchantId: string, request: RefundRequest): { refund: SquarePaymentRefund; order: SquareOrder } {
    const account = this.#accounts.get(merchantId);
    const input = RefundInput.parse(request);
    const sale = account.orders.get(input.orderId);
    const measured = account.sales.get(input.orderId);
    if (!sale || !measured) throw new NotHeldError(`no sale ${input.orderId}`);
    if (sale.state !== 'COMPLETED' || !measured.paymentId) throw new RangeError(`order ${input.orderId} is ${sale.state}: only a COMPLETED sale is refunded`);
    const refunded = measured.ledger.take(input.lines);
    const currency = measured.input.currency ?? account.currency;
    const m = (amount: number) => money(amount, currency);
    const at = iso(parseTime(input.at, this.ctx.now().getTime()));
    const saleLines = sale.line_items as { uid: string }[];

    const returnLines = refunded.map((r) => {
      const l = measured.input.lines[r.line]!;
      const gross = l.unitPrice * r.quantity;
      return {
        uid: randomChars(BASE62, 22),
        source_line_item_uid: saleLines[r.line]!.uid,
        name: l.name,
        quantity: String(r.quantity),
        ...(l.itemId ? { catalog_object_id: l.itemId } : {}),
        item_type: 'ITEM',
        base_price_money: m(l.unitPrice),
        variation_total_price_money: m(gross),
        gross_return_money: m(gross),
        total_tax_money: m(r.tax),
        total_discount_money: m(gross - r.net),
        total_money: m(r.net + r.tax),
      };
    });
    const net = refunded.reduce((s, r) => s + r.net, 0);
    const tax = refunded.reduce((s, r) => s + r.tax, 0);
    const returnOrderId = randomChars(BASE62, 27);
    const refundId = input.id ?? `${measured.paymentId}_${randomChars(BASE62, 44)}`;
    if (account.refunds.has(refundId)) throw new RangeError(`refund ${refundId} already exists`);
    const returnOrder: SquareOrder = {
      id: returnOrderId,
      location_id: sale.location_id,
      returns: [{ uid: randomChars(BASE62, 22), source_order_id: sale.id, return_line_items: returnLines }],
      return_amounts: { total_money: m(net + tax), tax_money: m(tax), discount_money: m(returnLines.reduce((s, l) => s + l.total_discount_money.amount, 0)), tip_money: m(0), service_charge_money: m(0) },
      net_amounts: { total_money: m(0), tax_money: m(0), discount_money: m(0), tip_money: m(0), service_charge_money: m(0) },
      created_at: at,
      updated_at: at,
      closed_at: at,
      state: 'COMPLETED',
      version: 1,
      total_money: m(0),
      total_tax_money: m(0),
      total_discount_money: m(0),
      total_tip_money: m(0),
      total_service_charge_money: m(0),
    };
    const refund: SquarePaymentRefund = {
      id: refundId,
      status: 'COMPLETED',
      amount_money: m(net + tax),
      payment_id: measured.paymentId,
      order_id: returnOrderId,
      location_id: sale.location_id,
      reason: 'Returned goods',
      created_at: at,
      updated_at: at,
    };
    account.orders.set(returnOrderId, returnOrder);
    account.refunds.set(refundId, refund);
    // The sale itself changes too: a new version that lists the refund. An Order's `refunds[]` are
    // Square's legacy `Refund` objects, whose status is PENDING, APPROVED, REJECTED or FAILED (no
    // COMPLETED: that is the PaymentRefund's word); a completed refund is APPROVED there.
    const listed = (sale.refunds as unknown[] | undefined) ?? [];
    sale.refunds = [...listed, { id: refundId, location_id: sale.location_id, transaction_id: sale.id, tender_id: measured.paymentId, created_at: at, reason: 'Returned goods', amount_money: m(net + tax), status: 'APPROVED' }];
    sale.version += 1;
    sale.updated_at = at;
    return { refund: copy(refund), order: copy(returnOrder) };
  }

  touchOrder(merchantId: string, orderId: string, at?: string): SquareOrder {
    const order = this.#accounts.get(merchantId).orders.get(orderId);
    if (!order) throw new NotHeldError(`no order ${orderId}`);
    order.updated_at = iso(parseTime(at, this.ctx.now().getTime()));
    order.version += 1;
    return copy(order);
  }

  /**
   * Square's notification for an order (`order.created`, `order.updated`: ids and state only) or a
   * refund (`refund.created`, `refund.updated`: the PaymentRefund), signed as Square signs it:
   * base64(HMAC-SHA256(signature key, notification URL + body)).
   */
  webhook(merchantId: string, request: SquareWebhookRequest): SignedDelivery {
    const account = this.#accounts.get(merchantId);
    const r = SquareWebhookRequest.parse(request);
    const now = this.ctx.now().toISOString();
    let data: unknown;
    if (r.event === 'order.created' || r.event === 'order.updated') {
      const order = account.orders.get(r.id);
      if (!order) throw new NotHeldError(`no order ${r.id}`);
      const kind = r.event === 'order.created' ? 'order_created' : 'order_updated';
      data = {
        type: kind,
        id: order.id,
        object: {
          [kind]: {
            created_at: order.created_at,
            location_id: order.location_id,
            order_id: order.id,
            state: order.state,
            ...(kind === 'order_updated' ? { updated_at: order.updated_at } : {}),
            version: order.version,
          },
        },
      };
    } else {
      const refund = account.refunds.get(r.id);
      if (!refund) throw new NotHeldError(`no refund ${r.id}`);
      data = { type: 'refund', id: refund.id, object: { refund: copy(refund) } };
    }
    const body = JSON.stringify({ merchant_id: account.merchantId, type: r.event, event_id: uuid(), created_at: now, data });
    return { headers: { 'content-type': 'application/json', 'x-square-hmacsha256-signature': signSquareNotification(r.signatureKey, r.notificationUrl, body) }, body };
  }

  router(): express.Router {
    const router = express.Router();
    router.use((req, res, next) => {
      const token = bearerToken(req);
      const account = this.#accounts.byToken(token);
      if (!account) return void SQUARE_ERRORS.unauthorized(res, token === undefined ? 'missing' : 'wrong');
      res.locals.posAccount = account;
      next();
    });
    const notFound = (res: Response, what: string, id: string) => squareError(res, 404, 'INVALID_REQUEST_ERROR', 'NOT_FOUND', `Could not find ${what} with id \`${id}\`.`);

    router.get('/v2/orders/:id', faultGate(this.ctx, SQUARE_ERRORS, 'get'), (req, res) => {
      const order = accountOf<SquareAccount>(res).orders.get(pathParam(req, 'id'));
      if (!order) return void notFound(res, 'order', pathParam(req, 'id'));
      res.json({ order });
    });
    router.get('/v2/customers/:id', faultGate(this.ctx, SQUARE_ERRORS, 'get'), (req, res) => {
      const customer = accountOf<SquareAccount>(res).customers.get(pathParam(req, 'id'));
      if (!customer) return void notFound(res, 'customer', pathParam(req, 'id'));
      res.json({ customer });
    });
    router.get('/v2/refunds/:id', faultGate(this.ctx, SQUARE_ERRORS, 'get'), (req, res) => {
      const refund = accountOf<SquareAccount>(res).refunds.get(pathParam(req, 'id'));
      if (!refund) return void notFound(res, 'refund', pathParam(req, 'id'));
      res.json({ refund });
    });
    // ListLocations: a seller's locations, which SearchOrders must name (backfill reads them first).
    router.get('/v2/locations', faultGate(this.ctx, SQUARE_ERRORS, 'get'), (_req, res) => {
      const account = accountOf<SquareAccount>(res);
      res.json({ locations: account.locationIds.map((id) => ({ id, merchant_id: account.merchantId, status: 'ACTIVE', currency: account.currency })) });
    });
    router.post('/v2/orders/search', faultGate(this.ctx, SQUARE_ERRORS, 'list'), jsonBody, (req, res) => {
      const account = accountOf<SquareAccount>(res);
      const orders = this.#search(req.body, account, res) ?? 0;
      const body = (req.body ?? {}) as { location_ids?: unknown; cursor?: unknown };
      // Answered synchronously: the status is set by now.
      account.searches.push({ locationIds: Array.isArray(body.location_ids) ? body.location_ids.map(String) : [], cursor: body.cursor !== undefined, status: res.statusCode, orders });
      // The sandbox's simulator runs for days under scheduled passes: the log is bounded.
      if (account.searches.length > SEARCHES_KEPT) account.searches.shift();
    });
    router.use((req, res) => squareError(res, 404, 'INVALID_REQUEST_ERROR', 'NOT_FOUND', `API endpoint for URL path \`${req.path}\` and HTTP method \`${req.method}\` is not found.`));
    return router;
  }

  /** Answers a SearchOrders call; returns how many orders it answered (undefined when refused). */
  #search(body: unknown, account: SquareAccount, res: Response): number | undefined {
    const conformed = conform(body ?? {}, SEARCH_ORDERS_REQUEST, '');
    if ('refusal' in conformed) {
      const { code, detail, field } = conformed.refusal;
      return void badRequest(res, detail, field || undefined, code);
    }
    const request = conformed.ok as SearchOrdersRequest;
    const locations = request.location_ids ?? [];
    if (locations.length === 0) return void badRequest(res, 'At least one location_id must be provided.', 'location_ids');
    if (locations.length > 10) return void badRequest(res, 'Cannot provide more than 10 location_ids.', 'location_ids');
    const foreign = locations.find((l) => !account.locationIds.includes(l));
    if (foreign) return void squareError(res, 403, 'AUTHENTICATION_ERROR', 'FORBIDDEN', `Merchant \`${account.merchantId}\` does not have access to location \`${foreign}\`.`, 'location_ids');
    const limit = request.limit ?? 500;
    if (limit < 1 || limit > 1000) return void badRequest(res, `Invalid limit: ${limit}. Must be between 1 and 1000.`, 'limit', 'INVALID_VALUE');

    const sortField: SortField = request.query?.sort?.sort_field ?? 'CREATED_AT';
    const descending = (request.query?.sort?.sort_order ?? 'DESC') === 'DESC';
    const dateFilter = request.query?.filter?.date_time_filter;
    const ranges = (['created_at', 'updated_at', 'closed_at'] as const).filter((f) => dateFilter?.[f] !== undefined);
    if (ranges.length > 1) return void badRequest(res, 'Only one of created_at, updated_at and closed_at may be filtered on.', 'query.filter.date_time_filter');
    const rangeField = ranges[0];
    if (rangeField !== undefined && rangeField !== FIELD_OF[sortField]) {
      return void badRequest(res, `A date_time_filter on ${rangeField} requires query.sort.sort_field ${rangeField.toUpperCase()}, not ${sortField}.`, 'query.sort.sort_field');
    }
    const range = rangeField ? dateFilter![rangeField]! : undefined;
    for (const end of ['start_at', 'end_at'] as const) {
      const text = range?.[end];
      if (text !== undefined && rfc3339(text) === undefined) {
        return void badRequest(res, `Invalid RFC 3339 timestamp: ${text}`, `query.filter.date_time_filter.${rangeField}.${end}`, 'INVALID_TIME');
      }
    }
    const start = rfc3339(range?.start_at);
    const givenEnd = rfc3339(range?.end_at);

    // The cursor belongs to one query: the location ids and query of the first page, exactly.
    const query = canonicalJson({ location_ids: locations, query: request.query ?? null });
    let after: [number, string] | undefined;
    let openEnd: number | null = range && givenEnd === undefined ? this.ctx.now().getTime() : null;
    if (request.cursor !== undefined) {
      const cursor = decodeCursor(request.cursor, SearchCursor);
      if (!cursor) return void badRequest(res, 'Invalid cursor.', 'cursor', 'INVALID_CURSOR');
      if (cursor.q !== query) return void badRequest(res, 'The query and location_ids must be the same as in the request that returned this cursor.', 'cursor', 'INVALID_CURSOR');
      after = cursor.after;
      openEnd = cursor.end;
    }
    const end = givenEnd ?? openEnd ?? undefined;

    const field = FIELD_OF[sortField];
    const filter = request.query?.filter;
    const states = filter?.state_filter?.states;
    const customers = filter?.customer_filter?.customer_ids;
    const sources = filter?.source_filter?.source_names;
    const fulfillment = filter?.fulfillment_filter;
    const fulfilled = (o: SquareOrder): boolean => {
      const types = fulfillment?.fulfillment_types ?? [];
      const wanted = fulfillment?.fulfillment_states ?? [];
      if (types.length === 0 && wanted.length === 0) return true;
      // Only orders with a fulfillment of those types and states match (the fake's orders have none).
      const list = (o.fulfillments as { type?: string; state?: string }[] | undefined) ?? [];
      return list.some((f) => (types.length === 0 || types.includes(f.type ?? '')) && (wanted.length === 0 || wanted.includes(f.state ?? '')));
    };
    const matches = (o: SquareOrder): boolean =>
      locations.includes(o.location_id) &&
      (states === undefined || states.includes(o.state)) &&
      (customers === undefined || customers.length === 0 || customers.includes(o.customer_id as string)) &&
      (sources === undefined || sources.length === 0 || sources.includes((o.source as { name?: string } | undefined)?.name ?? '')) &&
      fulfilled(o);
    const keyOf = (o: SquareOrder): number | undefined => (o[field] === undefined ? undefined : Date.parse(o[field] as string));
    const compare = (a: [number, string], b: [number, string]) => (a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)) * (descending ? -1 : 1);
    const matching = [...account.orders.values()]
      .filter(matches)
      .map((o) => ({ o, key: [keyOf(o), o.id] as [number | undefined, string] }))
      // Orders without the sort field's time (an open order has no closed_at) are left out of a sort by it.
      .filter((e): e is { o: SquareOrder; key: [number, string] } => e.key[0] !== undefined)
      // Both ends of a Square TimeRange are inclusive.
      .filter(({ key }) => (start === undefined || key[0] >= start) && (end === undefined || key[0] <= end))
      .sort((a, b) => compare(a.key, b.key))
      .filter(({ key }) => after === undefined || compare(key, after) > 0);
    const page = matching.slice(0, limit);
    const more = matching.length > limit;
    const last = page.at(-1);
    const answer: Record<string, unknown> = {};
    // Square leaves empty lists out of its answers: no match is `{}`.
    if (page.length > 0) {
      answer[request.return_entries ? 'order_entries' : 'orders'] = page.map(({ o }) => (request.return_entries ? { order_id: o.id, version: o.version, location_id: o.location_id } : o));
    }
    if (more && last) answer.cursor = encodeCursor({ q: query, end: openEnd, after: last.key });
    res.json(answer);
    return page.length;
  }
}

/**
 * Square's notification signature: base64(HMAC-SHA256(signature key, notification URL + body)),
 * the URL and body as UTF-8 (docs/pos-systems.md, "Signing a webhook by hand"). Exported so tests
 * can sign bodies of their own as the fake signs its deliveries (test/oracles/square-signature.test.ts
 * checks it against Square's SDK).
 */
export function signSquareNotification(signatureKey: string, notificationUrl: string, body: string): string {
  return createHmac('sha256', signatureKey).update(notificationUrl + body, 'utf8').digest('base64');
}

export const SquareWebhookRequest = z.strictObject({
  event: z.enum(['order.created', 'order.updated', 'refund.created', 'refund.updated']),
  /** The order's id, or the PaymentRefund's. */
  id: z.string().min(1),
  signatureKey: z.string().min(1),
  /** The URL Square is configured to notify: it is signed with the body. */
  notificationUrl: z.string().min(1),
});
export type SquareWebhookRequest = z.input<typeof SquareWebhookRequest>;

/** An RFC 3339 date-time with Z or an offset, as epoch milliseconds; undefined when absent or not one. */
function rfc3339(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

const parseJson = express.json({ limit: '1mb' });

/** Undecodable JSON is Square's 400, not Express's HTML page. */
const jsonBody: express.RequestHandler = (req, res, next) => {
  parseJson(req, res, (err?: unknown) => {
    if (err === undefined || err === null) return next();
    // BAD_REQUEST: INVALID_BODY is no code of Square's (the SDK's ErrorCode lists every one).
    badRequest(res, `Invalid JSON: ${err instanceof Error ? err.message : 'could not be decoded'}`, undefined, 'BAD_REQUEST');
  });
};
