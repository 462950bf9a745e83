/**
 * A fake of Toast's orders API v2 (docs/simulator-pos-apis.md, "Toast"), mounted at
 * /toast/orders/v2/…. An account is a restaurant: its GUID, which every request names in
 * `Toast-Restaurant-External-ID`, and an access token (`Authorization: Bearer …`). A token that
 * Toast does not know is a 401; a known token for a restaurant it has no access to is a 403.
 *
 * Shapes as in test/fixtures/toast: GUIDs, money as JSON numbers in major units with no currency
 * on the order (the restaurant's), dates as "2019-02-24T13:48:44.206+0000". A refund stays on its
 * order: the refunded selections' `refundDetails` with one refund transaction's GUID, the payment's
 * `refundStatus` (PARTIAL, FULL) and `refund`, and a new `modifiedDate`.
 *
 * ordersBulk selects by `modifiedDate` from startDate (inclusive) to endDate (exclusive), or by
 * businessDate, and pages by `page` (from 1) and `pageSize` (1 to 100, default 100), answering a
 * JSON array with Link headers to the neighbouring pages.
 */
import { createHmac } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { PosFaultQueue } from './faults.js';
import { accountOf, Accounts, bearerToken, copy, faultGate, mountedBase, NotHeldError, pathParam, type FakePos, type PosContext, type PosErrors, type SignedDelivery } from './kit.js';
import { CustomerInput, majorNumber, OrderInput, parseTime, queryValue, RefundInput, RefundLedger, totalsOf, uuid, type OrderRequest, type RefundRequest } from './model.js';

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const ToastAccountOptions = z.strictObject({
  restaurantGuid: z.string().regex(GUID, 'must be a GUID').optional(),
  /** Toast issues tokens to a partner's client: the same token may serve several restaurants. */
  accessToken: z.string().trim().min(1).max(2000).optional(),
  /** The restaurant's currency: Toast orders state none. */
  currency: z.string().regex(/^[A-Z]{3}$/).default('USD'),
  /** The static key its loyalty integration was set up with: the Authorization of its register's calls (loyaltyCall). */
  loyaltyKey: z.string().trim().min(1).max(500).optional(),
});
export type ToastAccountOptions = z.input<typeof ToastAccountOptions>;

type Obj = Record<string, unknown>;

export interface ToastOrder {
  guid: string;
  modifiedDate: string;
  checks: Obj[];
  [field: string]: unknown;
}

interface Held {
  order: ToastOrder;
  modifiedMs: number;
  businessDate: number;
  input: OrderInput;
  ledger: RefundLedger;
  /** Minor units refunded so far, tax included: the payment's `refund.refundAmount`. */
  refundedWithTax: number;
}

class ToastAccount {
  readonly faults = new PosFaultQueue();
  readonly orders = new Map<string, Held>();

  constructor(
    readonly restaurantGuid: string,
    readonly accessToken: string,
    readonly currency: string,
    readonly loyaltyKey: string | undefined,
  ) {}

  describe() {
    return { restaurantGuid: this.restaurantGuid, accessToken: this.accessToken, currency: this.currency, ...(this.loyaltyKey ? { loyaltyKey: this.loyaltyKey } : {}), orders: this.orders.size, faults: this.faults.pending() };
  }
}

export type ToastAccountView = ReturnType<ToastAccount['describe']>;

/**
 * Toast's ErrorMessage: `{ status, code, message, messageKey, fieldName, link, requestId,
 * developerMessage, errors, canRetry }`. Toast documents `canRetry` (a string) and `messageKey` as
 * reserved for future use, so they are null here; whether to retry is Retry-After's to say.
 */
function toastError(res: Response, status: number, message: string, fieldName: string | null = null): void {
  res.status(status).json({ status, code: 0, message, messageKey: null, fieldName, link: null, requestId: uuid(), developerMessage: null, errors: [], canRetry: null });
}

const TOAST_ERRORS: PosErrors = {
  // Toast's 429 tells when to come back: Retry-After, and X-Toast-RateLimit-Reset (epoch seconds).
  retryAfter: 1,
  unauthorized: (res, why) => toastError(res, 401, why === 'missing' ? 'Authorization header is missing' : 'Access token is invalid or expired'),
  rateLimited: (res, retryAfter) => {
    if (retryAfter !== null) {
      res.setHeader('Retry-After', String(retryAfter));
      // The wall clock, not the simulator's: a client waits against its own clock.
      res.setHeader('X-Toast-RateLimit-Reset', String(Math.ceil(Date.now() / 1000 + retryAfter)));
    }
    toastError(res, 429, 'Rate limit exceeded');
  },
  serverError: (res, status) => toastError(res, status, status === 503 ? 'Service Unavailable' : 'Internal Server Error'),
};

/** "2019-02-24T13:48:44.206+0000", how Toast writes every date. */
function toastDate(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '+0000');
}

/** Toast's query dates: ISO 8601 with a fraction of a second allowed and an offset (+0000, +00:00 or Z). */
function parseToastDate(text: string): number | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)(Z|[+-]\d{2}:?\d{2})$/.exec(text);
  if (!m) return undefined;
  const zone = m[2] === 'Z' ? 'Z' : m[2]!.replace(/^([+-]\d{2}):?(\d{2})$/, '$1:$2');
  const ms = Date.parse(`${m[1]}${zone}`);
  return Number.isFinite(ms) ? ms : undefined;
}

function businessDateOf(ms: number): number {
  return Number(new Date(ms).toISOString().slice(0, 10).replaceAll('-', ''));
}

const ref = (entityType: string, guid: string = uuid()) => ({ guid, entityType, externalId: null });

export class FakeToast implements FakePos {
  readonly name = 'toast' as const;
  readonly #accounts = new Accounts<ToastAccount>('Toast restaurant');

  constructor(private readonly ctx: PosContext) {}

  addAccount(options: ToastAccountOptions = {}): ToastAccountView {
    const o = ToastAccountOptions.parse(options);
    const guid = (o.restaurantGuid ?? uuid()).toLowerCase();
    return this.#accounts.add(guid, new ToastAccount(guid, o.accessToken ?? `toast-token-${guid}`, o.currency, o.loyaltyKey)).describe();
  }

  accounts(): ToastAccountView[] {
    return this.#accounts.list().map((a) => a.describe());
  }

  faults(restaurantGuid: string): PosFaultQueue {
    return this.#accounts.get(restaurantGuid.toLowerCase()).faults;
  }

  reset(): void {
    this.#accounts.clear();
  }

  /** Toast's guest travels on its check; this makes the object a check would carry. */
  addCustomer(restaurantGuid: string, input: CustomerInput): Obj {
    this.#accounts.get(restaurantGuid.toLowerCase());
    return customerOf(CustomerInput.parse(input));
  }

  /** A dine-in order of one check: CLOSED and paid by card (or OPEN and unpaid), tax beside the net line prices. */
  addOrder(restaurantGuid: string, request: OrderRequest): ToastOrder {
    const account = this.#accounts.get(restaurantGuid.toLowerCase());
    const input = OrderInput.parse(request);
    const guid = (input.id ?? uuid()).toLowerCase();
    if (!GUID.test(guid)) throw new RangeError('a Toast order id is a GUID');
    if (account.orders.has(guid)) throw new RangeError(`order ${guid} already exists`);
    if (typeof input.customer === 'string') throw new RangeError('a Toast guest travels on the check: give the customer itself, not an id');
    const currency = input.currency ?? account.currency;
    const major = (minor: number) => majorNumber(minor, currency);
    const created = parseTime(input.createdAt, this.ctx.now().getTime());
    const modified = parseTime(input.updatedAt, created);
    const totals = totalsOf(input);
    const paid = !input.open;
    const dining = ref('DiningOption', 'd527b5cf-96d2-41dc-92e6-8e9ca1ed36bd');
    const device = { id: '175785aa78a7c4dc' };

    const selections = input.lines.map((l) => ({
      ...ref('MenuItemSelection'),
      itemGroup: ref('MenuGroup'),
      item: ref('MenuItem', l.itemId ?? uuid()),
      deferred: false,
      quantity: l.quantity,
      receiptLinePrice: major(l.unitPrice),
      preDiscountPrice: major(l.unitPrice * l.quantity),
      // The net line price: after discounts, quantity included, tax excluded.
      price: major(l.unitPrice * l.quantity - l.discount),
      tax: major(l.tax),
      displayName: l.name,
      voidReason: null,
      optionGroup: null,
      appliedDiscounts: l.discount > 0 ? [{ ...ref('SelectionAppliedDiscount'), name: 'Discount', discountAmount: major(l.discount), nonTaxDiscountAmount: major(l.discount), discountType: 'FIXED', processingState: null, discount: { guid: uuid(), entityType: 'Discount' } }] : [],
      modifiers: [],
      seatNumber: -1,
      voidDate: null,
      fulfillmentStatus: 'SENT',
      optionGroupPricingMode: null,
      salesCategory: null,
      selectionType: 'NONE',
      voidBusinessDate: null,
      createdDate: toastDate(created),
      preModifier: null,
      modifiedDate: toastDate(modified),
      voided: false,
      diningOption: dining,
      refundDetails: null,
      appliedTaxes: l.tax > 0 ? [{ entityType: 'AppliedTaxRate', taxRate: { guid: 'd5b88c05-1348-42ef-b1d3-577a83d70a80', entityType: 'TaxRate' }, name: 'State Tax', rate: null, taxAmount: major(l.tax), type: 'PERCENT' }] : [],
    }));
    const payments = paid
      ? [
          {
            ...ref('OrderPayment'),
            originalProcessingFee: null,
            // Tax included, tip beside it.
            amount: major(totals.total),
            tipAmount: major(totals.tip),
            amountTendered: 0,
            cashDrawer: null,
            cardType: 'VISA',
            lastModifiedDevice: device,
            createdDevice: device,
            refundStatus: 'NONE',
            houseAccount: null,
            type: 'CREDIT',
            voidInfo: null,
            otherPayment: null,
            paidDate: toastDate(modified),
            cardEntryMode: 'SWIPED',
            paymentStatus: 'CAPTURED',
            paidBusinessDate: businessDateOf(modified),
            last4Digits: '1111',
            refund: null,
          },
        ]
      : [];
    const check = {
      ...ref('Check'),
      displayNumber: String(account.orders.size + 1),
      amount: major(totals.net),
      tabName: null,
      taxExempt: false,
      payments,
      appliedDiscounts: [],
      voidDate: null,
      openedDate: toastDate(created),
      totalAmount: major(totals.total),
      lastModifiedDevice: device,
      createdDevice: device,
      selections,
      voidBusinessDate: null,
      deleted: false,
      paidDate: paid ? toastDate(modified) : null,
      closedDate: paid ? toastDate(modified) : null,
      deletedDate: '1970-01-01T00:00:00.000+0000',
      modifiedDate: toastDate(modified),
      appliedLoyaltyInfo: null,
      voided: false,
      taxAmount: major(totals.tax),
      appliedServiceCharges: [],
      paymentStatus: paid ? 'CLOSED' : 'OPEN',
      customer: input.customer ? customerOf(input.customer) : null,
    };
    const order: ToastOrder = {
      ...ref('Order', guid),
      revenueCenter: ref('RevenueCenter', '9ab6a5cf-32e0-47ee-9fd3-c73507ef3c01'),
      server: null,
      lastModifiedDevice: device,
      createdDevice: device,
      deliveryInfo: null,
      serviceArea: null,
      curbsidePickupInfo: null,
      numberOfGuests: 1,
      diningOption: dining,
      source: 'In Store',
      voidDate: null,
      openedDate: toastDate(created),
      createdDate: toastDate(created),
      duration: 0,
      businessDate: businessDateOf(created),
      voidBusinessDate: null,
      checks: [check],
      deleted: false,
      paidDate: paid ? toastDate(modified) : null,
      closedDate: paid ? toastDate(modified) : null,
      deletedDate: '1970-01-01T00:00:00.000+0000',
      restaurantService: ref('RestaurantService', '9d57bbfc-c0e1-4bb0-9cec-ebcb186306bb'),
      modifiedDate: toastDate(modified),
      promisedDate: null,
      voided: false,
      estimatedFulfillmentDate: null,
      requiredPrepTime: 'PT0S',
      table: null,
    };
    account.orders.set(guid, { order, modifiedMs: modified, businessDate: businessDateOf(created), input, ledger: new RefundLedger(input.lines), refundedWithTax: 0 });
    return copy(order);
  }

  /**
   * A refund transaction on a paid order: each refunded selection gets `refundDetails` naming it, the
   * payment becomes PARTIAL (FULL once every unit is refunded). Toast keeps one `refundDetails` per
   * selection, so a selection already refunded in part is not refunded again here. Returns the order
   * with the transaction's GUID, the shape the Toast adapter reads one refund from.
   */
  addRefund(restaurantGuid: string, request: RefundRequest): { order: ToastOrder; refundTransactionGuid: string } {
    const account = this.#accounts.get(restaurantGuid.toLowerCase());
    const input = RefundInput.parse(request);
    const held = account.orders.get(input.orderId.toLowerCase());
    if (!held) throw new NotHeldError(`no order ${input.orderId}`);
    const check = held.order.checks[0] as { selections: Obj[]; payments: Obj[]; modifiedDate: string };
    const payment = check.payments[0];
    if (!payment) throw new RangeError(`order ${input.orderId} is not paid: there is nothing to refund`);
    for (const line of input.lines ?? []) {
      if (check.selections[line.line]?.refundDetails) throw new RangeError(`selection ${line.line} was refunded before: Toast keeps one refundDetails per selection`);
    }
    const refunded = held.ledger.take(input.lines);
    const currency = held.input.currency ?? account.currency;
    const major = (minor: number) => majorNumber(minor, currency);
    const atMs = parseTime(input.at, this.ctx.now().getTime());
    const transaction = (input.id ?? uuid()).toLowerCase();
    for (const r of refunded) {
      check.selections[r.line]!.refundDetails = { refundAmount: major(r.net), taxRefundAmount: major(r.tax), refundTransaction: { guid: transaction, entityType: 'RefundTransaction' } };
    }
    held.refundedWithTax += refunded.reduce((s, r) => s + r.net + r.tax, 0);
    payment.refundStatus = held.ledger.complete ? 'FULL' : 'PARTIAL';
    payment.refund = { refundAmount: major(held.refundedWithTax), tipRefundAmount: 0, refundDate: toastDate(atMs), refundBusinessDate: businessDateOf(atMs), refundTransaction: { guid: transaction, entityType: 'RefundTransaction' } };
    held.modifiedMs = Math.max(held.modifiedMs, atMs);
    held.order.modifiedDate = toastDate(held.modifiedMs);
    check.modifiedDate = held.order.modifiedDate;
    return { order: copy(held.order), refundTransactionGuid: transaction };
  }

  touchOrder(restaurantGuid: string, orderId: string, at?: string): ToastOrder {
    const held = this.#accounts.get(restaurantGuid.toLowerCase()).orders.get(orderId.toLowerCase());
    if (!held) throw new NotHeldError(`no order ${orderId}`);
    held.modifiedMs = parseTime(at, this.ctx.now().getTime());
    held.order.modifiedDate = toastDate(held.modifiedMs);
    return copy(held.order);
  }

  /**
   * An orders webhook message (`order_updated`): the order in `details.order`, signed as the Toast
   * adapter verifies it (`Toast-Signature` = base64(HMAC-SHA256(secret, body + the body's timestamp)),
   * the body's own `timestamp`, as no Toast-Timestamp header is sent).
   */
  webhook(restaurantGuid: string, request: ToastWebhookRequest): SignedDelivery {
    const account = this.#accounts.get(restaurantGuid.toLowerCase());
    const r = ToastWebhookRequest.parse(request);
    const held = account.orders.get(r.id.toLowerCase());
    if (!held) throw new NotHeldError(`no order ${r.id}`);
    const timestamp = this.ctx.now().toISOString();
    const body = JSON.stringify({ timestamp, eventCategory: 'orders', eventType: r.event, guid: uuid(), details: { restaurantGuid: account.restaurantGuid, order: held.order } });
    return {
      headers: {
        'content-type': 'application/json',
        'toast-signature': createHmac('sha256', r.secret).update(body + timestamp, 'utf8').digest('base64'),
        'toast-restaurant-external-id': account.restaurantGuid,
        'toast-event-type': r.event,
      },
      body,
    };
  }

  /**
   * One call of the restaurant's register to its loyalty provider (Toast's loyalty integration API,
   * docs/simulator-pos-apis.md "Toast's register"), as Toast sends it: the headers and the body to
   * POST to the provider's path (the bridge's /v1/toast/loyalty). A cashier's Rewards flow is
   * SEARCH by phone, INQUIRE of the account picked (which attaches it to the check:
   * `appliedLoyaltyInfo`, so the orders webhook carries it too), REDEEM and ACCRUE once paid, REVERSE
   * on a void. ACCRUE and INQUIRE carry a held order's check (the first, or `checkGuid`). Each call
   * has a new Toast-Transaction-GUID unless `guid` repeats one, as Toast does when it retries.
   */
  loyaltyCall(restaurantGuid: string, request: ToastLoyaltyRequest): SignedDelivery & { guid: string } {
    const account = this.#accounts.get(restaurantGuid.toLowerCase());
    const r = ToastLoyaltyRequest.parse(request);
    const key = r.key ?? account.loyaltyKey;
    if (!key) throw new RangeError(`restaurant ${account.restaurantGuid} has no loyaltyKey: give one to the account or to this call (key)`);
    const guid = (r.guid ?? uuid()).toLowerCase();
    const type = `LOYALTY_${r.type}`;
    const checkInformation = () => {
      if (!r.orderId) throw new RangeError(`${type} carries a check: name its order (orderId)`);
      const held = account.orders.get(r.orderId.toLowerCase());
      if (!held) throw new NotHeldError(`no order ${r.orderId}`);
      const check = (r.checkGuid ? held.order.checks.find((c) => c.guid === r.checkGuid!.toLowerCase()) : held.order.checks[0]) as Obj | undefined;
      if (!check) throw new NotHeldError(`order ${r.orderId} has no check ${r.checkGuid}`);
      // The account the cashier picked is kept on the check, as Toast does once INQUIRE accepts it.
      if (r.identifier && r.type === 'INQUIRE') check.appliedLoyaltyInfo = { guid: uuid(), entityType: 'AppliedLoyaltyInfo', loyaltyIdentifier: r.identifier, maskedLoyaltyIdentifier: null, vendor: 'INTEGRATION', accrualFamilyGuid: null, accrualText: null };
      const identifier = r.identifier ?? ((check.appliedLoyaltyInfo as Obj | null)?.loyaltyIdentifier as string | undefined) ?? null;
      return { loyaltyIdentifier: identifier, orderGuid: held.order.guid, check: copy(check), redemptions: r.redemptions };
    };
    let body: Obj;
    switch (r.type) {
      case 'SEARCH':
        body = { toastTransactionType: type, searchTransactionInformation: { searchCriteria: { firstName: null, lastName: null, email: r.email ?? null, phone: r.phone ?? null } } };
        break;
      case 'INQUIRE':
      case 'REDEEM':
      case 'ACCRUE':
        body = { toastTransactionType: type, checkTransactionInformation: checkInformation() };
        break;
      case 'REVERSE':
        if (!r.reverses) throw new RangeError('REVERSE names the Toast-Transaction-GUID of the call it undoes (reverses)');
        body = { toastTransactionType: type, reverseTransactionInformation: { loyaltyIdentifier: r.identifier ?? null, transactionId: r.reverses, redemptions: r.redemptions } };
        break;
      case 'TRANSFER':
        body = { toastTransactionType: type, transferTransactionInformation: { fromLoyaltyIdentifier: r.identifier ?? null, toLoyaltyIdentifier: null } };
        break;
      default: {
        const never: never = r.type;
        throw new Error(`unhandled Toast loyalty call ${String(never)}`);
      }
    }
    return {
      guid,
      headers: {
        'content-type': 'application/json',
        authorization: key,
        'toast-restaurant-external-id': account.restaurantGuid,
        'toast-transaction-guid': guid,
        'toast-transaction-type': type,
      },
      body: JSON.stringify(body),
    };
  }

  router(): express.Router {
    const router = express.Router();
    router.use((req, res, next) => {
      const token = bearerToken(req);
      const known = this.#accounts.list().some((a) => a.accessToken === token);
      if (!token || !known) return void TOAST_ERRORS.unauthorized(res, token ? 'wrong' : 'missing');
      const restaurant = req.get('toast-restaurant-external-id');
      if (!restaurant) return void toastError(res, 400, 'Toast-Restaurant-External-ID header is required', 'Toast-Restaurant-External-ID');
      const account = this.#accounts.find(restaurant.toLowerCase());
      if (!account || account.accessToken !== token) return void toastError(res, 403, `Access to restaurant ${restaurant} is not allowed`);
      res.locals.posAccount = account;
      next();
    });
    router.get('/orders/v2/ordersBulk', faultGate(this.ctx, TOAST_ERRORS, 'list'), (req, res) => this.#bulk(req, res));
    router.get('/orders/v2/orders/:guid', faultGate(this.ctx, TOAST_ERRORS, 'get'), (req, res) => {
      const held = accountOf<ToastAccount>(res).orders.get(pathParam(req, 'guid').toLowerCase());
      if (!held) return void toastError(res, 404, `Order ${pathParam(req, 'guid')} not found`);
      res.json(held.order);
    });
    router.use((req, res) => toastError(res, 404, `No route for ${req.method} ${req.path}`));
    return router;
  }

  #bulk(req: Request, res: Response): void {
    const account = accountOf<ToastAccount>(res);
    const text = (name: string) => {
      const value = queryValue(req.query, name);
      return Array.isArray(value) ? value.at(-1) : value;
    };
    // Only the parameters Toast documents for ordersBulk; anything else is refused (the fake's choice:
    // Toast does not say), so a misspelt filter is not silently a listing of everything.
    const unknown = Object.keys(req.query).find((name) => !BULK_PARAMETERS.includes(name));
    if (unknown !== undefined) return void toastError(res, 400, `Unknown query parameter: ${unknown}`, unknown);
    const page = text('page') === undefined ? 1 : Number(text('page'));
    const pageSize = text('pageSize') === undefined ? 100 : Number(text('pageSize'));
    if (!Number.isInteger(page) || page < 1) return void toastError(res, 400, 'page must be a whole number >= 1', 'page');
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) return void toastError(res, 400, 'pageSize must be a whole number from 1 to 100', 'pageSize');
    let select: (h: Held) => boolean;
    const businessDate = text('businessDate');
    if (businessDate !== undefined && (text('startDate') !== undefined || text('endDate') !== undefined)) {
      // Toast documents the two as alternatives: one or the other.
      return void toastError(res, 400, 'Specify either startDate and endDate, or businessDate', 'businessDate');
    }
    if (businessDate !== undefined) {
      if (!/^\d{8}$/.test(businessDate)) return void toastError(res, 400, 'businessDate must be yyyymmdd', 'businessDate');
      select = (h) => h.businessDate === Number(businessDate);
    } else {
      const startText = text('startDate');
      const endText = text('endDate');
      if (startText === undefined || endText === undefined) return void toastError(res, 400, 'startDate and endDate (or businessDate) are required', startText === undefined ? 'startDate' : 'endDate');
      const start = parseToastDate(startText);
      const end = parseToastDate(endText);
      // An unencoded "+" of "+0000" reaches a server as a space: such a date is refused, as by Toast.
      if (start === undefined) return void toastError(res, 400, `startDate is not an ISO 8601 date-time such as 2016-01-01T14:13:12.000+0400 (URL-encoded): ${startText}`, 'startDate');
      if (end === undefined) return void toastError(res, 400, `endDate is not an ISO 8601 date-time such as 2016-01-01T14:13:12.000+0400 (URL-encoded): ${endText}`, 'endDate');
      if (end <= start) return void toastError(res, 400, 'endDate must be later than startDate', 'endDate');
      // startDate inclusive, endDate exclusive, on the order's modifiedDate.
      select = (h) => h.modifiedMs >= start && h.modifiedMs < end;
    }
    const all = [...account.orders.values()].filter(select).sort((a, b) => a.modifiedMs - b.modifiedMs || (a.order.guid < b.order.guid ? -1 : 1));
    const from = (page - 1) * pageSize;
    const link = (p: number, rel: string) => {
      const params = new URLSearchParams(req.query as Record<string, string>);
      params.set('page', String(p));
      params.set('pageSize', String(pageSize));
      return `<${mountedBase(req)}${req.path}?${params.toString()}>; rel="${rel}"`;
    };
    const links = [link(1, 'first'), link(page, 'self')];
    if (page > 1) links.push(link(page - 1, 'prev'));
    if (all.length > from + pageSize) links.push(link(page + 1, 'next'));
    res.setHeader('Link', links.join(', '));
    res.json(all.slice(from, from + pageSize).map((h) => h.order));
  }
}

/** The query parameters Toast documents for GET /ordersBulk. */
const BULK_PARAMETERS = ['startDate', 'endDate', 'businessDate', 'page', 'pageSize'];

export const ToastWebhookRequest = z.strictObject({
  event: z.enum(['order_updated']).default('order_updated'),
  /** The order's GUID. */
  id: z.string().min(1),
  /** The webhook subscription's signing secret. */
  secret: z.string().min(1),
});
export type ToastWebhookRequest = z.input<typeof ToastWebhookRequest>;

export const ToastLoyaltyRequest = z.strictObject({
  type: z.enum(['SEARCH', 'INQUIRE', 'REDEEM', 'ACCRUE', 'REVERSE', 'TRANSFER']),
  /** SEARCH: the guest's phone or email, as the cashier keyed it. */
  phone: z.string().min(1).optional(),
  email: z.string().min(1).optional(),
  /** The account (card serial) picked from SEARCH: INQUIRE attaches it to the check. */
  identifier: z.string().min(1).optional(),
  /** INQUIRE, REDEEM, ACCRUE: the held order whose check it carries, and which check (default the first). */
  orderId: z.string().min(1).optional(),
  checkGuid: z.string().min(1).optional(),
  /** REVERSE: the Toast-Transaction-GUID of the accrue or redeem to undo. */
  reverses: z.string().min(1).optional(),
  /** This call's Toast-Transaction-GUID: a repeat of an earlier one (Toast's retry); a new one when absent. */
  guid: z.string().min(1).optional(),
  /** The Authorization to send (the account's loyaltyKey when absent). */
  key: z.string().min(1).optional(),
  redemptions: z.array(z.unknown()).default([]),
});
export type ToastLoyaltyRequest = z.input<typeof ToastLoyaltyRequest>;

function customerOf(c: CustomerInput): Obj {
  return { guid: c.id ?? uuid(), entityType: 'Customer', firstName: c.firstName ?? null, lastName: c.lastName ?? null, phone: c.phone ?? null, email: c.email ?? null };
}
