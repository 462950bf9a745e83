/**
 * A fake of Loyverse's API v1.0 for receipts and customers (docs/simulator-pos-apis.md,
 * "Loyverse"), mounted at /loyverse/v1.0/…. An account is a Loyverse merchant: its id, its stores
 * and an access token (`Authorization: Bearer …`), which alone says whose data a request reads.
 *
 * Shapes as in test/fixtures/loyverse: money as JSON numbers in major units with no currency on the
 * receipt, UUIDs, times as "2024-03-23T20:18:53.000Z". A sale is a SALE receipt; a refund is a
 * receipt of its own (`receipt_type: "REFUND"`, `refund_for` the sale's number) with the refunded
 * lines, its amounts written as positive numbers (the sign Loyverse uses is unconfirmed; the
 * adapter reads magnitudes).
 *
 * GET /v1.0/receipts filters on created_at and updated_at (both ends inclusive here: Loyverse does
 * not say) and pages with `limit` (1 to 250, default 10) and an opaque `cursor`, answering
 * `{ receipts, cursor }` with no cursor on the last page, newest receipt first.
 */
import { createHmac } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { PosFaultQueue } from './faults.js';
import { accountOf, Accounts, bearerToken, canonicalJson, copy, faultGate, NotHeldError, pathParam, type FakePos, type PosContext, type PosErrors, type SignedDelivery } from './kit.js';
import { CustomerInput, decodeCursor, encodeCursor, majorNumber, OrderInput, parseTime, queryValue, RefundInput, RefundLedger, totalsOf, uuid, type OrderRequest, type RefundRequest } from './model.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const LoyverseAccountOptions = z.strictObject({
  merchantId: z.string().regex(UUID, 'must be a UUID').optional(),
  accessToken: z.string().trim().min(1).max(200).optional(),
  storeIds: z.array(z.string().regex(UUID, 'must be a UUID')).min(1).max(100).optional(),
  /** The stores' currency: Loyverse receipts state none. */
  currency: z.string().regex(/^[A-Z]{3}$/).default('USD'),
});
export type LoyverseAccountOptions = z.input<typeof LoyverseAccountOptions>;

type Obj = Record<string, unknown>;

export interface LoyverseReceipt {
  receipt_number: string;
  receipt_type: 'SALE' | 'REFUND';
  store_id: string;
  created_at: string;
  updated_at: string;
  [field: string]: unknown;
}

interface Held {
  receipt: LoyverseReceipt;
  createdMs: number;
  updatedMs: number;
  /** Sales only: what their refunds are measured against. */
  sale?: { input: OrderInput; ledger: RefundLedger };
}

class LoyverseAccount {
  readonly faults = new PosFaultQueue();
  readonly receipts = new Map<string, Held>();
  readonly customers = new Map<string, Obj & { id: string }>();
  #next = 1001;

  constructor(
    readonly merchantId: string,
    readonly accessToken: string,
    readonly storeIds: readonly string[],
    readonly currency: string,
  ) {}

  /** "1-1001": the POS device's number, then the receipt's. */
  nextNumber(): string {
    return `1-${this.#next++}`;
  }

  describe() {
    return { merchantId: this.merchantId, accessToken: this.accessToken, storeIds: [...this.storeIds], currency: this.currency, receipts: this.receipts.size, faults: this.faults.pending() };
  }
}

export type LoyverseAccountView = ReturnType<LoyverseAccount['describe']>;

/** Loyverse's error body: `{ errors: [{ code, details, field? }] }`. */
function loyverseError(res: Response, status: number, code: string, details: string, field?: string): void {
  res.status(status).json({ errors: [{ code, details, ...(field ? { field } : {}) }] });
}

const LOYVERSE_ERRORS: PosErrors = {
  // Whether Loyverse sends Retry-After is not documented; the fake sends none unless asked to.
  retryAfter: null,
  unauthorized: (res) => loyverseError(res, 401, 'UNAUTHORIZED', 'The access token is missing, invalid or expired'),
  rateLimited: (res, retryAfter) => {
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter));
    loyverseError(res, 429, 'RATE_LIMITED', 'Too many requests');
  },
  serverError: (res, status) => loyverseError(res, status, 'INTERNAL_SERVER_ERROR', 'Internal server error'),
};

const iso = (ms: number): string => new Date(ms).toISOString();

const LIST_FILTERS = ['created_at_min', 'created_at_max', 'updated_at_min', 'updated_at_max', 'store_id', 'receipt_numbers', 'order', 'source'] as const;
/** Documented by Loyverse for GET /receipts but not modelled here: refused rather than ignored. */
const UNMODELLED_PARAMETERS = ['since_receipt_number', 'before_receipt_number'];
const ReceiptsCursor = z.object({ q: z.string(), after: z.tuple([z.number(), z.string()]) });

export class FakeLoyverse implements FakePos {
  readonly name = 'loyverse' as const;
  readonly #accounts = new Accounts<LoyverseAccount>('Loyverse merchant');

  constructor(private readonly ctx: PosContext) {}

  addAccount(options: LoyverseAccountOptions = {}): LoyverseAccountView {
    const o = LoyverseAccountOptions.parse(options);
    const merchantId = (o.merchantId ?? uuid()).toLowerCase();
    const token = o.accessToken ?? `loyverse-token-${merchantId}`;
    if (this.#accounts.byToken(token)) throw new RangeError('accessToken is already used by another Loyverse merchant');
    return this.#accounts.add(merchantId, new LoyverseAccount(merchantId, token, o.storeIds ?? [uuid()], o.currency)).describe();
  }

  accounts(): LoyverseAccountView[] {
    return this.#accounts.list().map((a) => a.describe());
  }

  faults(merchantId: string): PosFaultQueue {
    return this.#accounts.get(merchantId.toLowerCase()).faults;
  }

  reset(): void {
    this.#accounts.clear();
  }

  addCustomer(merchantId: string, input: CustomerInput): Obj {
    return copy(this.#newCustomer(this.#accounts.get(merchantId.toLowerCase()), CustomerInput.parse(input)));
  }

  #newCustomer(account: LoyverseAccount, c: CustomerInput): Obj & { id: string } {
    const id = c.id ?? uuid();
    if (account.customers.has(id)) throw new RangeError(`customer ${id} already exists`);
    const at = iso(this.ctx.now().getTime());
    const name = [c.firstName, c.lastName].filter(Boolean).join(' ');
    const customer = {
      id,
      name: name || null,
      email: c.email ?? null,
      phone_number: c.phone ?? null,
      address: null,
      city: null,
      region: null,
      postal_code: null,
      country_code: null,
      note: null,
      customer_code: c.code ?? null,
      first_visit: null,
      last_visit: null,
      total_visits: 0,
      total_spent: 0,
      total_points: 0,
      permanent_deletion_at: null,
      created_at: at,
      updated_at: at,
      deleted_at: null,
    };
    account.customers.set(id, customer);
    return customer;
  }

  /** A SALE receipt, paid in cash, taxes ADDED on top of the line totals, the tip beside the total. */
  addOrder(merchantId: string, request: OrderRequest): LoyverseReceipt {
    const account = this.#accounts.get(merchantId.toLowerCase());
    const input = OrderInput.parse(request);
    if (input.open) throw new RangeError('a Loyverse receipt is always paid: there are no open receipts');
    const store = this.#store(account, input.location);
    const number = input.id ?? account.nextNumber();
    if (account.receipts.has(number)) throw new RangeError(`receipt ${number} already exists`);
    const created = parseTime(input.createdAt, this.ctx.now().getTime());
    const updated = parseTime(input.updatedAt, created);
    const customerId = input.customer === undefined ? null : typeof input.customer === 'string' ? this.#existingCustomer(account, input.customer) : this.#newCustomer(account, input.customer).id;
    const currency = input.currency ?? account.currency;
    const totals = totalsOf(input);
    const lines = input.lines.map((l) => lineItem(l.name, l.itemId, l.sku, l.quantity, l.unitPrice, l.unitPrice * l.quantity - l.discount, l.tax, currency));
    const receipt = this.#receipt('SALE', number, null, store, customerId, created, updated, lines, totals.net, totals.tax, totals.discount, totals.tip, currency);
    account.receipts.set(number, { receipt, createdMs: created, updatedMs: updated, sale: { input, ledger: new RefundLedger(input.lines) } });
    return copy(receipt);
  }

  #store(account: LoyverseAccount, store: string | undefined): string {
    if (store !== undefined && !account.storeIds.includes(store)) throw new RangeError(`store ${store} is not one of merchant ${account.merchantId}'s`);
    return store ?? account.storeIds[0]!;
  }

  #existingCustomer(account: LoyverseAccount, id: string): string {
    if (!account.customers.has(id)) throw new NotHeldError(`no customer ${id}`);
    return id;
  }

  #receipt(
    type: 'SALE' | 'REFUND',
    number: string,
    refundFor: string | null,
    store: string,
    customerId: string | null,
    created: number,
    updated: number,
    lines: Obj[],
    net: number,
    tax: number,
    discount: number,
    tip: number,
    currency: string,
  ): LoyverseReceipt {
    const major = (minor: number) => majorNumber(minor, currency);
    return {
      receipt_number: number,
      note: null,
      receipt_type: type,
      refund_for: refundFor,
      order: null,
      created_at: iso(created),
      updated_at: iso(updated),
      source: 'point of sale',
      receipt_date: iso(created),
      cancelled_at: null,
      // Lines after discounts with their ADDED taxes; the tip is beside it.
      total_money: major(net + tax),
      total_tax: major(tax),
      points_earned: 0,
      points_deducted: 0,
      points_balance: 0,
      customer_id: customerId,
      total_discount: major(discount),
      employee_id: null,
      store_id: store,
      pos_device_id: null,
      dining_option: null,
      total_discounts: discount > 0 ? [{ id: 'b4c4ed1b-5a0f-4c9f-9a49-0b0f2a6bd9a1', type: 'FIXED_AMOUNT', name: 'Discount', money_amount: major(discount) }] : [],
      total_taxes: tax > 0 ? [{ id: 'e0b2c3b8-84cd-4bb0-9a63-0a2ee3b7c5a2', type: 'ADDED', name: 'Tax', rate: null, money_amount: major(tax) }] : [],
      tip: major(tip),
      surcharge: 0,
      line_items: lines,
      payments: [{ payment_type_id: '958a8756-9914-433d-8abb-0c571824c5e0', name: 'Cash', type: 'CASH', money_amount: major(net + tax + tip), paid_at: iso(created), payment_details: null }],
    };
  }

  /** A REFUND receipt of some units of a sale, naming it in `refund_for`. */
  addRefund(merchantId: string, request: RefundRequest): LoyverseReceipt {
    const account = this.#accounts.get(merchantId.toLowerCase());
    const input = RefundInput.parse(request);
    const held = account.receipts.get(input.orderId);
    if (!held?.sale) throw new NotHeldError(`no sale receipt ${input.orderId}`);
    const refunded = held.sale.ledger.take(input.lines);
    const currency = held.sale.input.currency ?? account.currency;
    const at = parseTime(input.at, this.ctx.now().getTime());
    const number = input.id ?? account.nextNumber();
    if (account.receipts.has(number)) throw new RangeError(`receipt ${number} already exists`);
    const saleLines = held.receipt.line_items as Obj[];
    const lines = refunded.map((r) => {
      const l = held.sale!.input.lines[r.line]!;
      return { ...lineItem(l.name, l.itemId, l.sku, r.quantity, l.unitPrice, r.net, r.tax, currency), item_id: saleLines[r.line]!.item_id, variant_id: saleLines[r.line]!.variant_id };
    });
    const net = refunded.reduce((s, r) => s + r.net, 0);
    const tax = refunded.reduce((s, r) => s + r.tax, 0);
    const discount = refunded.reduce((s, r) => s + held.sale!.input.lines[r.line]!.unitPrice * r.quantity - r.net, 0);
    const receipt = this.#receipt('REFUND', number, held.receipt.receipt_number, held.receipt.store_id, held.receipt.customer_id as string | null, at, at, lines, net, tax, discount, 0, currency);
    account.receipts.set(number, { receipt, createdMs: at, updatedMs: at });
    return copy(receipt);
  }

  touchOrder(merchantId: string, receiptNumber: string, at?: string): LoyverseReceipt {
    const held = this.#accounts.get(merchantId.toLowerCase()).receipts.get(receiptNumber);
    if (!held) throw new NotHeldError(`no receipt ${receiptNumber}`);
    held.updatedMs = parseTime(at, this.ctx.now().getTime());
    held.receipt.updated_at = iso(held.updatedMs);
    return copy(held.receipt);
  }

  /** A `receipts.update` delivery of one receipt, `X-Loyverse-Signature` = HMAC-SHA1(secret, body) (encoding unconfirmed: hex by default). */
  webhook(merchantId: string, request: LoyverseWebhookRequest): SignedDelivery {
    const account = this.#accounts.get(merchantId.toLowerCase());
    const r = LoyverseWebhookRequest.parse(request);
    const held = account.receipts.get(r.id);
    if (!held) throw new NotHeldError(`no receipt ${r.id}`);
    const body = JSON.stringify({ merchant_id: account.merchantId, type: 'receipts.update', created_at: this.ctx.now().toISOString(), receipts: [held.receipt] });
    return { headers: { 'content-type': 'application/json', 'x-loyverse-signature': createHmac('sha1', r.secret).update(body, 'utf8').digest(r.encoding) }, body };
  }

  router(): express.Router {
    const router = express.Router();
    router.use((req, res, next) => {
      const token = bearerToken(req);
      const account = this.#accounts.byToken(token);
      if (!account) return void LOYVERSE_ERRORS.unauthorized(res, token ? 'wrong' : 'missing');
      res.locals.posAccount = account;
      next();
    });
    router.get('/v1.0/receipts', faultGate(this.ctx, LOYVERSE_ERRORS, 'list'), (req, res) => this.#list(req, res));
    router.get('/v1.0/receipts/:number', faultGate(this.ctx, LOYVERSE_ERRORS, 'get'), (req, res) => {
      const held = accountOf<LoyverseAccount>(res).receipts.get(pathParam(req, 'number'));
      if (!held) return void loyverseError(res, 404, 'NOT_FOUND', `Receipt ${pathParam(req, 'number')} not found`);
      res.json(held.receipt);
    });
    router.get('/v1.0/customers/:id', faultGate(this.ctx, LOYVERSE_ERRORS, 'get'), (req, res) => {
      const customer = accountOf<LoyverseAccount>(res).customers.get(pathParam(req, 'id'));
      if (!customer) return void loyverseError(res, 404, 'NOT_FOUND', `Customer ${pathParam(req, 'id')} not found`);
      res.json(customer);
    });
    router.use((req, res) => loyverseError(res, 404, 'NOT_FOUND', `No route for ${req.method} ${req.path}`));
    return router;
  }

  #list(req: Request, res: Response): void {
    const account = accountOf<LoyverseAccount>(res);
    const one = (name: string) => {
      const value = queryValue(req.query, name);
      return Array.isArray(value) ? value.at(-1) : value;
    };
    for (const name of Object.keys(req.query)) {
      if (UNMODELLED_PARAMETERS.includes(name)) return void loyverseError(res, 400, 'INVALID_VALUE', `${name} is not supported by this fake`, name);
      // Parameters Loyverse does not document are refused (the fake's choice: Loyverse does not say).
      if (name !== 'limit' && name !== 'cursor' && !(LIST_FILTERS as readonly string[]).includes(name)) return void loyverseError(res, 400, 'INVALID_VALUE', `Unknown query parameter: ${name}`, name);
    }
    const limit = one('limit') === undefined ? 10 : Number(one('limit'));
    if (!Number.isInteger(limit) || limit < 1 || limit > 250) return void loyverseError(res, 400, 'INVALID_VALUE', 'limit must be a whole number from 1 to 250', 'limit');
    const given: Partial<Record<(typeof LIST_FILTERS)[number], string>> = {};
    for (const name of LIST_FILTERS) {
      const value = one(name);
      if (value !== undefined) given[name] = value;
    }
    const bounds: Partial<Record<'created_at_min' | 'created_at_max' | 'updated_at_min' | 'updated_at_max', number>> = {};
    for (const name of ['created_at_min', 'created_at_max', 'updated_at_min', 'updated_at_max'] as const) {
      const text = given[name];
      if (text === undefined) continue;
      const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(text) ? Date.parse(text) : NaN;
      if (!Number.isFinite(ms)) return void loyverseError(res, 400, 'INVALID_VALUE', `${name} must be an ISO 8601 date-time such as 2024-03-23T20:18:53.000Z`, name);
      bounds[name] = ms;
    }
    // A cursor continues the query it came from: the same filters again, or none, may come with it.
    const query = canonicalJson(given);
    let after: [number, string] | undefined;
    const cursorText = one('cursor');
    let effective = given;
    if (cursorText !== undefined) {
      const cursor = decodeCursor(cursorText, ReceiptsCursor);
      if (!cursor) return void loyverseError(res, 400, 'INVALID_VALUE', 'cursor is not valid', 'cursor');
      if (Object.keys(given).length > 0 && cursor.q !== query) return void loyverseError(res, 400, 'INVALID_VALUE', 'cursor belongs to a request with other filters', 'cursor');
      effective = JSON.parse(cursor.q) as typeof given;
      after = cursor.after;
      for (const name of ['created_at_min', 'created_at_max', 'updated_at_min', 'updated_at_max'] as const) {
        if (effective[name] !== undefined) bounds[name] = Date.parse(effective[name]!);
      }
    }
    const numbers = effective.receipt_numbers?.split(',').map((n) => n.trim());
    const within = (ms: number, min?: number, max?: number) => (min === undefined || ms >= min) && (max === undefined || ms <= max);
    // Newest first; the receipt number breaks ties.
    const key = (h: Held): [number, string] => [h.createdMs, h.receipt.receipt_number];
    const before = (a: [number, string], b: [number, string]) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
    const matching = [...account.receipts.values()]
      .filter(
        (h) =>
          (effective.store_id === undefined || h.receipt.store_id === effective.store_id) &&
          (numbers === undefined || numbers.includes(h.receipt.receipt_number)) &&
          (effective.order === undefined || h.receipt.order === effective.order) &&
          (effective.source === undefined || h.receipt.source === effective.source) &&
          within(h.createdMs, bounds.created_at_min, bounds.created_at_max) &&
          within(h.updatedMs, bounds.updated_at_min, bounds.updated_at_max),
      )
      .sort((a, b) => (before(key(a), key(b)) ? -1 : before(key(b), key(a)) ? 1 : 0))
      .filter((h) => after === undefined || before(after, key(h)));
    const page = matching.slice(0, limit);
    const last = page.at(-1);
    res.json({ receipts: page.map((h) => h.receipt), ...(matching.length > limit && last ? { cursor: encodeCursor({ q: canonicalJson(effective), after: key(last) }) } : {}) });
  }
}

export const LoyverseWebhookRequest = z.strictObject({
  /** The receipt's number. */
  id: z.string().min(1),
  secret: z.string().min(1),
  encoding: z.enum(['hex', 'base64']).default('hex'),
});
export type LoyverseWebhookRequest = z.input<typeof LoyverseWebhookRequest>;

/** A receipt line: `total_money` after its discount, tax ADDED beside it. */
function lineItem(name: string, itemId: string | undefined, sku: string | undefined, quantity: number, unitPrice: number, net: number, tax: number, currency: string): Obj {
  const major = (minor: number) => majorNumber(minor, currency);
  const gross = unitPrice * quantity;
  return {
    id: uuid(),
    item_id: uuid(),
    variant_id: itemId ?? uuid(),
    item_name: name,
    variant_name: null,
    sku: sku ?? null,
    quantity,
    price: major(unitPrice),
    gross_total_money: major(gross),
    total_money: major(net),
    cost: 0,
    cost_total: 0,
    line_note: null,
    line_taxes: tax > 0 ? [{ id: 'e0b2c3b8-84cd-4bb0-9a63-0a2ee3b7c5a2', type: 'ADDED', name: 'Tax', rate: null, money_amount: major(tax) }] : [],
    total_discount: major(gross - net),
    line_discounts: gross > net ? [{ id: 'b4c4ed1b-5a0f-4c9f-9a49-0b0f2a6bd9a1', type: 'FIXED_AMOUNT', name: 'Discount', money_amount: major(gross - net) }] : [],
    line_modifiers: [],
  };
}
