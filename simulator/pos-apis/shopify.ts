/**
 * A fake of Shopify's REST Admin API for orders (docs/simulator-pos-apis.md, "Shopify"), mounted at
 * /shopify/{shop}/admin/api/{version}/…: one path prefix per shop domain, so a base URL of
 * `http://HOST:PORT/shopify/{shop}` stands where Shopify's is `https://{shop}`. An account is a shop:
 * its domain and its Admin API access token (`X-Shopify-Access-Token`; a bearer token is refused).
 *
 * Shapes as in test/fixtures/shopify: integer ids, money as decimal strings with `*_set` twins
 * (refund line `subtotal` and `total_tax` as JSON numbers), times to the second in the shop's UTC
 * offset. Refunds ride on their order (`order.refunds[]`) and change its `financial_status` and
 * `updated_at`.
 *
 * orders.json pages with Link-header cursors as Shopify does: `page_info` comes only from a Link
 * header, and a request that carries it may carry only `limit` and `fields` besides (400
 * otherwise); the filters travel inside it. Without `status=any` only open orders are listed
 * (Shopify's default is `open`), and a paid POS sale is archived (closed) at once, so it is not.
 */
import { createHmac } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { PosFaultQueue } from './faults.js';
import { accountOf, Accounts, copy, faultGate, mountedBase, NotHeldError, pathParam, type FakePos, type PosContext, type PosErrors, type SignedDelivery } from './kit.js';
import {
  CustomerInput,
  decimalText,
  decodeCursor,
  encodeCursor,
  majorNumber,
  OrderInput,
  parseTime,
  queryValue,
  RefundInput,
  RefundLedger,
  totalsOf,
  uuid,
  type OrderRequest,
  type RefundedLine,
  type RefundRequest,
} from './model.js';

/** A shop's permanent domain, as Shopify names it in X-Shopify-Shop-Domain. */
const SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)+$/;

export const ShopifyAccountOptions = z.strictObject({
  shop: z.string().regex(SHOP_DOMAIN, 'must be a shop domain such as cafe-9.myshopify.com'),
  accessToken: z.string().trim().min(1).max(200).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).default('USD'),
  /** The shop's UTC offset: Shopify writes every time in the shop's time zone. */
  utcOffset: z.string().regex(/^[+-]\d{2}:\d{2}$/).default('-05:00'),
});
export type ShopifyAccountOptions = z.input<typeof ShopifyAccountOptions>;

export interface ShopifyOrder {
  id: number;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  cancelled_at: string | null;
  financial_status: string;
  refunds: ShopifyRefund[];
  [field: string]: unknown;
}

export interface ShopifyRefund {
  id: number;
  order_id: number;
  [field: string]: unknown;
}

interface Held {
  order: ShopifyOrder;
  input: OrderInput;
  ledger: RefundLedger;
  /** Units taken off each line, by refunds and edits (what `current_quantity` subtracts). */
  gone: number[];
  /** What refunds and edits took off, minor units: after discount and before tax, the tax, the discount. */
  off: { net: number; tax: number; discount: number };
  /** Times at whole seconds, as Shopify keeps them. */
  createdMs: number;
  updatedMs: number;
  processedMs: number;
  saleTransactionId: number;
}

class ShopifyAccount {
  readonly faults = new PosFaultQueue();
  readonly orders = new Map<number, Held>();

  constructor(
    readonly shop: string,
    readonly accessToken: string,
    readonly currency: string,
    readonly utcOffset: string,
  ) {}

  describe() {
    return { shop: this.shop, accessToken: this.accessToken, currency: this.currency, utcOffset: this.utcOffset, orders: this.orders.size, faults: this.faults.pending() };
  }
}

export type ShopifyAccountView = ReturnType<ShopifyAccount['describe']>;

const SHOPIFY_ERRORS: PosErrors = {
  // Shopify's REST 429 says when to come back: "Retry-After: 2.0" (seconds, as a decimal).
  retryAfter: 2,
  unauthorized: (res) => void res.status(401).json({ errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' }),
  rateLimited: (res, retryAfter) => {
    if (retryAfter !== null) res.setHeader('Retry-After', retryAfter.toFixed(1));
    res.setHeader('X-Shopify-Shop-Api-Call-Limit', '40/40');
    res.status(429).json({ errors: 'Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service.' });
  },
  serverError: (res, status) => void res.status(status).json({ errors: status === 503 ? 'Unavailable Shop' : 'Internal Server Error' }),
};

/** `{ errors: { field: "message" } }`, Shopify's 400 for a parameter. */
function paramError(res: Response, field: string, message: string): void {
  res.status(400).json({ errors: { [field]: message } });
}

const SORT_FIELDS = ['created_at', 'updated_at', 'processed_at', 'id'] as const;
type SortField = (typeof SORT_FIELDS)[number];
const STATUSES = ['open', 'closed', 'cancelled', 'any'] as const;

/** What a page_info carries: the first request's filters and order, and the edge of the page it follows or precedes. */
const PageInfo = z.object({
  f: z.object({
    status: z.enum(STATUSES),
    financial_status: z.string().optional(),
    since_id: z.number().optional(),
    ids: z.array(z.number()).optional(),
    created_at_min: z.number().optional(),
    created_at_max: z.number().optional(),
    updated_at_min: z.number().optional(),
    updated_at_max: z.number().optional(),
    processed_at_min: z.number().optional(),
    processed_at_max: z.number().optional(),
  }),
  o: z.tuple([z.enum(SORT_FIELDS), z.enum(['asc', 'desc'])]),
  after: z.tuple([z.number(), z.number()]).optional(),
  before: z.tuple([z.number(), z.number()]).optional(),
});
type PageInfo = z.infer<typeof PageInfo>;
type Filters = PageInfo['f'];

const TIME_FILTERS = ['created_at_min', 'created_at_max', 'updated_at_min', 'updated_at_max', 'processed_at_min', 'processed_at_max'] as const;
/** Parameters a request carrying page_info may still send (Shopify, "Make paginated requests to the REST Admin API"). */
const WITH_PAGE_INFO = new Set(['page_info', 'limit', 'fields']);

export class FakeShopify implements FakePos {
  readonly name = 'shopify' as const;
  readonly #accounts = new Accounts<ShopifyAccount>('Shopify shop');
  /**
   * Shopify ids are one increasing 64-bit space; these stay below 2^53 so JSON numbers carry them
   * exactly. reset() keeps counting, so a long-lived bridge ledger never meets an id twice.
   */
  #nextId = 5_310_000_000_001;

  constructor(private readonly ctx: PosContext) {}

  #id(): number {
    return this.#nextId++;
  }

  addAccount(options: ShopifyAccountOptions): ShopifyAccountView {
    const o = ShopifyAccountOptions.parse(options);
    const token = o.accessToken ?? `shpat_${o.shop.replace(/[^a-z0-9]/g, '')}`;
    return this.#accounts.add(o.shop, new ShopifyAccount(o.shop, token, o.currency, o.utcOffset)).describe();
  }

  accounts(): ShopifyAccountView[] {
    return this.#accounts.list().map((a) => a.describe());
  }

  faults(shop: string): PosFaultQueue {
    return this.#accounts.get(shop).faults;
  }

  reset(): void {
    this.#accounts.clear();
  }

  /** Shopify's customer travels inside its orders; this makes the object an order would carry. */
  addCustomer(shop: string, input: CustomerInput): Record<string, unknown> {
    this.#accounts.get(shop);
    return this.#customer(CustomerInput.parse(input));
  }

  #customer(c: CustomerInput): Record<string, unknown> {
    const id = c.id === undefined ? this.#id() : shopifyIdOf(c.id, 'customer.id');
    return { id, email: c.email ?? null, phone: c.phone ?? null, first_name: c.firstName ?? null, last_name: c.lastName ?? null, state: 'disabled', verified_email: Boolean(c.email), currency: null };
  }

  /** A POS sale: paid and archived at once (or `open: true` for a pending one), taxes on top of prices. */
  addOrder(shop: string, request: OrderRequest): ShopifyOrder {
    const account = this.#accounts.get(shop);
    const input = OrderInput.parse(request);
    const id = input.id === undefined ? this.#id() : shopifyIdOf(input.id, 'id');
    if (account.orders.has(id)) throw new RangeError(`order ${id} already exists`);
    const currency = input.currency ?? account.currency;
    const text = (minor: number) => decimalText(minor, currency);
    const set = (minor: number) => ({ shop_money: { amount: text(minor), currency_code: currency }, presentment_money: { amount: text(minor), currency_code: currency } });
    const createdMs = wholeSeconds(parseTime(input.createdAt, this.ctx.now().getTime()));
    const updatedMs = wholeSeconds(parseTime(input.updatedAt, createdMs));
    const at = (ms: number) => shopTime(ms, account.utcOffset);
    const totals = totalsOf(input);
    const paid = !input.open;
    if (input.archived && !paid) throw new RangeError('an open (unpaid) order is not archived');
    const archived = input.archived ?? paid;
    const customer = input.customer === undefined ? null : typeof input.customer === 'string' ? this.#customer({ id: input.customer }) : this.#customer(input.customer);

    const discountApplications: unknown[] = [];
    const lineItems = input.lines.map((l) => {
      const lineId = this.#id();
      let allocations: unknown[] = [];
      if (l.discount > 0) {
        allocations = [{ amount: text(l.discount), amount_set: set(l.discount), discount_application_index: discountApplications.length }];
        discountApplications.push({ target_type: 'line_item', type: 'manual', value: text(l.discount), value_type: 'fixed_amount', allocation_method: 'one', target_selection: 'explicit', title: 'Discount', description: 'Discount' });
      }
      return {
        id: lineId,
        admin_graphql_api_id: `gid://shopify/LineItem/${lineId}`,
        variant_id: l.itemId === undefined ? this.#id() : shopifyIdOf(l.itemId, 'lines.itemId'),
        product_id: this.#id(),
        title: l.name,
        name: l.name,
        variant_title: null,
        sku: l.sku ?? null,
        vendor: null,
        quantity: l.quantity,
        current_quantity: l.quantity,
        fulfillable_quantity: 0,
        fulfillment_status: null,
        requires_shipping: false,
        taxable: l.tax > 0,
        gift_card: false,
        grams: 0,
        price: text(l.unitPrice),
        price_set: set(l.unitPrice),
        total_discount: '0.00',
        total_discount_set: set(0),
        discount_allocations: allocations,
        tax_lines: l.tax > 0 ? [{ title: 'Sales Tax', price: text(l.tax), price_set: set(l.tax), rate: taxRate(l.tax, l.unitPrice * l.quantity - l.discount), channel_liable: false }] : [],
        duties: [],
        properties: [],
      };
    });
    const saleTransactionId = this.#id();
    const order: ShopifyOrder = {
      id,
      admin_graphql_api_id: `gid://shopify/Order/${id}`,
      name: `#${1000 + account.orders.size + 1}`,
      order_number: 1000 + account.orders.size + 1,
      number: account.orders.size + 1,
      confirmed: true,
      test: false,
      source_name: 'pos',
      created_at: at(createdMs),
      updated_at: at(updatedMs),
      processed_at: at(createdMs),
      closed_at: archived ? at(updatedMs) : null,
      cancelled_at: null,
      cancel_reason: null,
      currency,
      presentment_currency: currency,
      email: customer?.email ?? '',
      phone: customer?.phone ?? null,
      customer,
      financial_status: paid ? 'paid' : 'pending',
      fulfillment_status: null,
      taxes_included: false,
      tax_lines: totals.tax > 0 ? [{ title: 'Sales Tax', price: text(totals.tax), price_set: set(totals.tax), rate: taxRate(totals.tax, totals.net), channel_liable: false }] : [],
      total_line_items_price: text(totals.net + totals.discount),
      total_line_items_price_set: set(totals.net + totals.discount),
      total_discounts: text(totals.discount),
      total_discounts_set: set(totals.discount),
      subtotal_price: text(totals.net),
      subtotal_price_set: set(totals.net),
      total_tax: text(totals.tax),
      total_tax_set: set(totals.tax),
      total_tip_received: text(totals.tip),
      total_price: text(totals.total + totals.tip),
      total_price_set: set(totals.total + totals.tip),
      total_outstanding: paid ? text(0) : text(totals.total + totals.tip),
      // What the order stands at after refunds and edits (Shopify: "reflects order edits, returns,
      // and refunds"); the plain fields above keep what was sold. Moved by addRefund and editOrder.
      current_subtotal_price: text(totals.net),
      current_subtotal_price_set: set(totals.net),
      current_total_discounts: text(totals.discount),
      current_total_discounts_set: set(totals.discount),
      current_total_tax: text(totals.tax),
      current_total_tax_set: set(totals.tax),
      current_total_price: text(totals.total + totals.tip),
      current_total_price_set: set(totals.total + totals.tip),
      discount_applications: discountApplications,
      line_items: lineItems,
      shipping_lines: [],
      refunds: [],
      tags: '',
    };
    account.orders.set(id, { order, input, ledger: new RefundLedger(input.lines), gone: input.lines.map(() => 0), off: { net: 0, tax: 0, discount: 0 }, createdMs, updatedMs, processedMs: createdMs, saleTransactionId });
    return copy(order);
  }

  /**
   * A refund of a paid order's units, itemized as Shopify's are: lines with `subtotal` (tax excluded,
   * taxes being on top) and `total_tax` as JSON numbers, and one `refund` transaction of both.
   */
  addRefund(shop: string, request: RefundRequest): ShopifyRefund {
    const account = this.#accounts.get(shop);
    const input = RefundInput.parse(request);
    const held = account.orders.get(shopifyIdOf(input.orderId, 'orderId'));
    if (!held) throw new NotHeldError(`no order ${input.orderId}`);
    if (held.order.financial_status === 'pending') throw new RangeError(`order ${input.orderId} is not paid: there is nothing to refund`);
    const refunded = held.ledger.take(input.lines);
    const currency = held.order.currency as string;
    const set = (minor: number) => ({ shop_money: { amount: decimalText(minor, currency), currency_code: currency }, presentment_money: { amount: decimalText(minor, currency), currency_code: currency } });
    const atMs = wholeSeconds(parseTime(input.at, this.ctx.now().getTime()));
    const at = shopTime(atMs, account.utcOffset);
    const id = input.id === undefined ? this.#id() : shopifyIdOf(input.id, 'id');
    if (held.order.refunds.some((r) => r.id === id)) throw new RangeError(`refund ${id} already exists`);
    const lines = held.order.line_items as Record<string, unknown>[];
    const total = refunded.reduce((s, r) => s + r.net + r.tax, 0);
    const refund: ShopifyRefund = {
      id,
      order_id: held.order.id,
      admin_graphql_api_id: `gid://shopify/Refund/${id}`,
      created_at: at,
      processed_at: at,
      note: null,
      restock: true,
      user_id: null,
      duties: [],
      total_duties_set: set(0),
      order_adjustments: [],
      // POS refunds give back no shipping and no duties: both lists are sent, empty, as Shopify does.
      refund_shipping_lines: [],
      refund_duties: [],
      refund_line_items: refunded.map((r) => ({
        id: this.#id(),
        line_item_id: lines[r.line]!.id,
        location_id: null,
        quantity: r.quantity,
        restock_type: 'return',
        // JSON numbers here, decimal strings everywhere else: as Shopify sends them.
        subtotal: majorNumber(r.net, currency),
        subtotal_set: set(r.net),
        total_tax: majorNumber(r.tax, currency),
        total_tax_set: set(r.tax),
        line_item: copy(lines[r.line]),
      })),
      transactions: [
        {
          id: this.#id(),
          order_id: held.order.id,
          kind: 'refund',
          gateway: 'cash',
          status: 'success',
          message: null,
          created_at: at,
          processed_at: at,
          test: false,
          authorization: null,
          parent_id: held.saleTransactionId,
          source_name: 'pos',
          amount: decimalText(total, currency),
          currency,
        },
      ],
    };
    held.order.refunds.push(refund);
    held.order.financial_status = held.ledger.complete ? 'refunded' : 'partially_refunded';
    takeOff(held, refunded, currency);
    held.updatedMs = Math.max(held.updatedMs, atMs);
    held.order.updated_at = shopTime(held.updatedMs, account.utcOffset);
    return copy(refund);
  }

  /**
   * An order edit (Shopify's order editing) that removes units: no refund and no money moved. The
   * plain totals and each line's `quantity` keep what was ordered; `current_*` and the lines'
   * `current_quantity` drop, and a pending order owes less (`total_outstanding`). The units removed
   * are measured as a refund of them would be (their shares of the line's discount and tax).
   */
  editOrder(shop: string, request: ShopifyEditRequest): ShopifyOrder {
    const account = this.#accounts.get(shop);
    const input = ShopifyEditInput.parse(request);
    const held = account.orders.get(shopifyIdOf(input.orderId, 'orderId'));
    if (!held) throw new NotHeldError(`no order ${input.orderId}`);
    const removed = held.ledger.take(input.lines);
    const currency = held.order.currency as string;
    takeOff(held, removed, currency);
    if (held.order.financial_status === 'pending') held.order.total_outstanding = held.order.current_total_price;
    held.updatedMs = Math.max(held.updatedMs, wholeSeconds(parseTime(input.at, this.ctx.now().getTime())));
    held.order.updated_at = shopTime(held.updatedMs, account.utcOffset);
    return copy(held.order);
  }

  /** A pending order paid (its payment captured): `paid`, nothing outstanding, archived as a POS sale is. */
  payOrder(shop: string, orderId: string, at?: string): ShopifyOrder {
    const account = this.#accounts.get(shop);
    const held = account.orders.get(shopifyIdOf(orderId, 'orderId'));
    if (!held) throw new NotHeldError(`no order ${orderId}`);
    if (held.order.financial_status !== 'pending') throw new RangeError(`order ${orderId} is ${held.order.financial_status}, not pending`);
    held.updatedMs = Math.max(held.updatedMs, wholeSeconds(parseTime(at, this.ctx.now().getTime())));
    held.order.financial_status = 'paid';
    held.order.total_outstanding = decimalText(0, held.order.currency as string);
    held.order.updated_at = shopTime(held.updatedMs, account.utcOffset);
    held.order.closed_at = held.input.archived === false ? null : held.order.updated_at;
    return copy(held.order);
  }

  touchOrder(shop: string, orderId: string, at?: string): ShopifyOrder {
    const account = this.#accounts.get(shop);
    const held = account.orders.get(shopifyIdOf(orderId, 'orderId'));
    if (!held) throw new NotHeldError(`no order ${orderId}`);
    held.updatedMs = wholeSeconds(parseTime(at, this.ctx.now().getTime()));
    held.order.updated_at = shopTime(held.updatedMs, account.utcOffset);
    return copy(held.order);
  }

  /**
   * A webhook as Shopify sends it: the bare order (orders/*) or refund (refunds/create) as the body,
   * the topic and shop in headers, `X-Shopify-Hmac-Sha256` = base64(HMAC-SHA256(secret, body)).
   */
  webhook(shop: string, request: ShopifyWebhookRequest): SignedDelivery {
    const account = this.#accounts.get(shop);
    const r = ShopifyWebhookRequest.parse(request);
    let object: unknown;
    if (r.topic === 'refunds/create') {
      const refundId = shopifyIdOf(r.id, 'id');
      object = [...account.orders.values()].flatMap((h) => h.order.refunds).find((f) => f.id === refundId);
      if (!object) throw new NotHeldError(`no refund ${r.id}`);
    } else {
      object = account.orders.get(shopifyIdOf(r.id, 'id'))?.order;
      if (!object) throw new NotHeldError(`no order ${r.id}`);
    }
    const body = JSON.stringify(object);
    return {
      headers: {
        'content-type': 'application/json',
        'x-shopify-topic': r.topic,
        'x-shopify-hmac-sha256': signShopifyDelivery(r.secret, body),
        'x-shopify-shop-domain': account.shop,
        'x-shopify-api-version': r.apiVersion,
        'x-shopify-webhook-id': uuid(),
        'x-shopify-event-id': uuid(),
        'x-shopify-triggered-at': this.ctx.now().toISOString(),
      },
      body,
    };
  }

  router(): express.Router {
    const router = express.Router();
    const shopRouter = express.Router({ mergeParams: true });
    router.use('/:shop', shopRouter);

    shopRouter.use((req, res, next) => {
      const account = this.#accounts.find(pathParam(req, 'shop'));
      // An unknown shop domain is a host Shopify does not serve.
      if (!account) return void res.status(404).json({ errors: 'Not Found' });
      const token = req.get('x-shopify-access-token');
      if (!token || token !== account.accessToken) return void SHOPIFY_ERRORS.unauthorized(res, token ? 'wrong' : 'missing');
      res.locals.posAccount = account;
      next();
    });
    shopRouter.use('/admin/api/:version', (req, res, next) => {
      if (!/^(\d{4}-\d{2}|unstable)$/.test(pathParam(req, 'version'))) return void res.status(404).json({ errors: 'Not Found' });
      next();
    });
    shopRouter.get('/admin/api/:version/orders.json', faultGate(this.ctx, SHOPIFY_ERRORS, 'list'), (req, res) => this.#list(req, res));
    shopRouter.get('/admin/api/:version/orders/:file', faultGate(this.ctx, SHOPIFY_ERRORS, 'get'), (req, res) => {
      const held = this.#heldIn(res, /^(\d+)\.json$/.exec(pathParam(req, 'file'))?.[1]);
      if (!held) return void res.status(404).json({ errors: 'Not Found' });
      res.json({ order: pick(held.order, fieldsOf(req)) });
    });
    shopRouter.get('/admin/api/:version/orders/:id/refunds.json', faultGate(this.ctx, SHOPIFY_ERRORS, 'get'), (req, res) => {
      const held = this.#heldIn(res, pathParam(req, 'id'));
      if (!held) return void res.status(404).json({ errors: 'Not Found' });
      res.json({ refunds: held.order.refunds });
    });
    shopRouter.get('/admin/api/:version/orders/:id/refunds/:file', faultGate(this.ctx, SHOPIFY_ERRORS, 'get'), (req, res) => {
      const refundId = /^(\d+)\.json$/.exec(pathParam(req, 'file'))?.[1];
      const refund = this.#heldIn(res, pathParam(req, 'id'))?.order.refunds.find((r) => String(r.id) === refundId);
      if (!refund) return void res.status(404).json({ errors: 'Not Found' });
      res.json({ refund });
    });
    shopRouter.use((_req, res) => void res.status(404).json({ errors: 'Not Found' }));
    return router;
  }

  #heldIn(res: Response, id: string | undefined): Held | undefined {
    return id && /^\d+$/.test(id) ? accountOf<ShopifyAccount>(res).orders.get(Number(id)) : undefined;
  }

  #list(req: Request, res: Response): void {
    const account = accountOf<ShopifyAccount>(res);
    const limitText = single(req, 'limit');
    const limit = limitText === undefined ? 50 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 250) return void paramError(res, 'limit', 'must be an integer between 1 and 250');

    let info: PageInfo;
    const pageInfo = single(req, 'page_info');
    if (pageInfo !== undefined) {
      // "A request that includes the page_info parameter can't include any other parameters except for limit and fields."
      const extra = Object.keys(req.query as object).find((k) => !WITH_PAGE_INFO.has(k));
      if (extra) return void paramError(res, extra, `${extra} cannot be passed when page_info is present. See https://shopify.dev/api/usage/pagination-rest for more information.`);
      const decoded = decodeCursor(pageInfo, PageInfo);
      if (!decoded) return void paramError(res, 'page_info', 'Invalid value.');
      info = decoded;
    } else {
      const first = this.#firstPage(req, res, account);
      if (!first) return;
      info = first;
    }

    const [field, direction] = info.o;
    const keyOf = (h: Held): [number, number] => [field === 'id' ? h.order.id : field === 'created_at' ? h.createdMs : field === 'updated_at' ? h.updatedMs : h.processedMs, h.order.id];
    const sign = direction === 'asc' ? 1 : -1;
    const compare = (a: [number, number], b: [number, number]) => (a[0] - b[0] || a[1] - b[1]) * sign;
    const all = [...account.orders.values()]
      .filter((h) => matches(h, info.f))
      .map((h) => ({ h, key: keyOf(h) }))
      .sort((a, b) => compare(a.key, b.key));
    let page: typeof all;
    if (info.before) {
      const earlier = all.filter((e) => compare(e.key, info.before!) < 0);
      page = earlier.slice(Math.max(0, earlier.length - limit));
    } else {
      const later = info.after ? all.filter((e) => compare(e.key, info.after!) > 0) : all;
      page = later.slice(0, limit);
    }
    const first = page[0];
    const last = page.at(-1);
    const links: string[] = [];
    const url = (edge: { after?: [number, number]; before?: [number, number] }) => {
      const fields = single(req, 'fields');
      const params = new URLSearchParams({ limit: String(limit), ...(fields ? { fields } : {}), page_info: encodeCursor({ f: info.f, o: info.o, ...edge }) });
      return `${mountedBase(req)}${req.path}?${params.toString()}`;
    };
    // Shopify links a previous page only from a page reached through page_info.
    if (pageInfo !== undefined && first && all.some((e) => compare(e.key, first.key) < 0)) links.push(`<${url({ before: first.key })}>; rel="previous"`);
    if (last && all.some((e) => compare(e.key, last.key) > 0)) links.push(`<${url({ after: last.key })}>; rel="next"`);
    if (links.length > 0) res.setHeader('Link', links.join(', '));
    const fields = fieldsOf(req);
    res.json({ orders: page.map(({ h }) => pick(h.order, fields)) });
  }

  /** The filters and order of a first page, from its query; undefined after answering 400. */
  #firstPage(req: Request, res: Response, account: ShopifyAccount): PageInfo | undefined {
    const status = single(req, 'status') ?? 'open';
    if (!(STATUSES as readonly string[]).includes(status)) return void paramError(res, 'status', `must be one of ${STATUSES.join(', ')}`);
    const f: Filters = { status: status as Filters['status'] };
    for (const name of TIME_FILTERS) {
      const text = single(req, name);
      if (text === undefined) continue;
      const ms = shopTimeParam(text, account.utcOffset);
      if (ms === undefined) return void paramError(res, name, 'must be an ISO 8601 date-time such as 2014-04-25T16:15:47-04:00');
      f[name] = ms;
    }
    const financial = single(req, 'financial_status');
    if (financial !== undefined && financial !== 'any') f.financial_status = financial;
    const sinceId = single(req, 'since_id');
    if (sinceId !== undefined) {
      if (!/^\d+$/.test(sinceId)) return void paramError(res, 'since_id', 'must be an order id');
      f.since_id = Number(sinceId);
    }
    const ids = single(req, 'ids');
    if (ids !== undefined) {
      if (!/^\d+(,\d+)*$/.test(ids)) return void paramError(res, 'ids', 'must be order ids separated by commas');
      f.ids = ids.split(',').map(Number);
    }
    const orderText = single(req, 'order') ?? 'created_at desc';
    const match = /^\s*(created_at|updated_at|processed_at|id)\s+(asc|desc)\s*$/i.exec(orderText);
    if (!match) return void paramError(res, 'order', `must be a field (${SORT_FIELDS.join(', ')}) and asc or desc, e.g. "updated_at asc"`);
    return { f, o: [match[1]!.toLowerCase() as SortField, match[2]!.toLowerCase() as 'asc' | 'desc'] };
  }
}

export const ShopifyWebhookRequest = z.strictObject({
  topic: z.enum(['orders/create', 'orders/paid', 'orders/updated', 'refunds/create']),
  /** The order's id, or the refund's for refunds/create. */
  id: z.union([z.string(), z.number()]).transform(String),
  /** The app's client secret, which Shopify signs webhooks with. */
  secret: z.string().min(1),
  apiVersion: z.string().default('2024-01'),
});
export type ShopifyWebhookRequest = z.input<typeof ShopifyWebhookRequest>;

/**
 * Shopify's webhook signature: `X-Shopify-Hmac-Sha256` = base64(HMAC-SHA256(the app's secret, the
 * body)), the body as UTF-8 (docs/pos-systems.md, "Signing a webhook by hand"). Exported so tests can
 * sign bodies of their own as the fake signs its deliveries (test/oracles/shopify-signature.test.ts
 * checks it against Shopify's library).
 */
export function signShopifyDelivery(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('base64');
}

/** An order edit that removes units: lines of the order (index into its `lines`) and how many units go. */
export const ShopifyEditInput = z.strictObject({
  orderId: z.string().trim().min(1).max(64),
  lines: z.array(z.strictObject({ line: z.number().int().nonnegative(), quantity: z.number().int().positive().optional() })).min(1),
  at: z.iso.datetime({ offset: true }).optional(),
});
export type ShopifyEditRequest = z.input<typeof ShopifyEditInput>;

/** Shopify's `tax_lines[].rate`: the rate as a number (0.0725 for 7.25 %), here the tax over what it is on, to 4 places. */
function taxRate(tax: number, on: number): number {
  return on > 0 ? Math.round((tax * 10_000) / on) / 10_000 : 0;
}

/**
 * Units refunded or removed by an edit come off `current_*` and the lines' `current_quantity`:
 * Shopify's current figures reflect "order edits, returns, and refunds"; the plain ones do not.
 */
function takeOff(held: Held, taken: readonly RefundedLine[], currency: string): void {
  const order = held.order;
  const lines = order.line_items as Record<string, unknown>[];
  for (const r of taken) {
    const sold = held.input.lines[r.line]!;
    held.gone[r.line]! += r.quantity;
    held.off.net += r.net;
    held.off.tax += r.tax;
    held.off.discount += sold.unitPrice * r.quantity - r.net;
    lines[r.line]!.current_quantity = sold.quantity - held.gone[r.line]!;
  }
  const totals = totalsOf(held.input);
  const write = (field: string, minor: number) => {
    order[field] = decimalText(minor, currency);
    order[`${field}_set`] = { shop_money: { amount: decimalText(minor, currency), currency_code: currency }, presentment_money: { amount: decimalText(minor, currency), currency_code: currency } };
  };
  write('current_subtotal_price', totals.net - held.off.net);
  write('current_total_discounts', totals.discount - held.off.discount);
  write('current_total_tax', totals.tax - held.off.tax);
  write('current_total_price', totals.total + totals.tip - held.off.net - held.off.tax);
}

function matches(h: Held, f: Filters): boolean {
  const o = h.order;
  const statusOk =
    f.status === 'any' ||
    (f.status === 'open' && o.closed_at === null && o.cancelled_at === null) ||
    (f.status === 'closed' && o.closed_at !== null) ||
    (f.status === 'cancelled' && o.cancelled_at !== null);
  // Shopify's *_min and *_max are "at or after" and "at or before": both inclusive.
  const within = (ms: number, min?: number, max?: number) => (min === undefined || ms >= min) && (max === undefined || ms <= max);
  return (
    statusOk &&
    (f.financial_status === undefined || o.financial_status === f.financial_status) &&
    (f.since_id === undefined || o.id > f.since_id) &&
    (f.ids === undefined || f.ids.includes(o.id)) &&
    within(h.createdMs, f.created_at_min, f.created_at_max) &&
    within(h.updatedMs, f.updated_at_min, f.updated_at_max) &&
    within(h.processedMs, f.processed_at_min, f.processed_at_max)
  );
}

function single(req: Request, name: string): string | undefined {
  const value = queryValue(req.query, name);
  return Array.isArray(value) ? value.at(-1) : value;
}

function fieldsOf(req: Request): string[] | undefined {
  const fields = single(req, 'fields');
  return fields ? fields.split(',').map((f) => f.trim()).filter(Boolean) : undefined;
}

function pick(order: ShopifyOrder, fields: string[] | undefined): Record<string, unknown> {
  return fields ? Object.fromEntries(fields.filter((f) => f in order).map((f) => [f, order[f]])) : order;
}

/** Shopify ids are whole numbers; the fake keeps them below 2^53 so that JSON numbers carry them exactly. */
function shopifyIdOf(text: string, field: string): number {
  if (!/^[1-9]\d{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) throw new RangeError(`${field} must be a Shopify id (a whole number below 2^53), got ${text}`);
  return Number(text);
}

function wholeSeconds(ms: number): number {
  return Math.floor(ms / 1000) * 1000;
}

/** "2024-03-05T10:00:00-05:00": the shop's local time to the second, with its offset. */
function shopTime(ms: number, offset: string): string {
  const sign = offset.startsWith('-') ? -1 : 1;
  const minutes = sign * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6)));
  return `${new Date(ms + minutes * 60_000).toISOString().slice(0, 19)}${offset}`;
}

/** A time filter as Shopify reads one: ISO 8601, in the shop's time zone when it names none. */
function shopTimeParam(text: string, offset: string): number | undefined {
  const m = /^(\d{4}-\d{2}-\d{2})(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(text.trim());
  if (!m) return undefined;
  const zone = m[3] === undefined ? offset : m[3] === 'Z' ? 'Z' : m[3].replace(/^([+-]\d{2}):?(\d{2})$/, '$1:$2');
  const ms = Date.parse(`${m[1]}${m[2] ?? 'T00:00:00'}${zone}`);
  return Number.isFinite(ms) ? ms : undefined;
}
