/**
 * A fake of Clover's REST API v3 for orders (docs/simulator-pos-apis.md, "Clover"), mounted at
 * /clover/v3/merchants/{mId}/…. An account is a Clover merchant: its 13-character id and an access
 * token for it (`Authorization: Bearer …`; a token for another merchant is a 401 like a wrong one).
 *
 * Shapes as in test/fixtures/clover: amounts are integers in the currency's minor unit (line
 * discounts negative), times are epoch milliseconds, ids 13 characters of upper-case base 32, one
 * line item per unit sold, the tax stated only on the payments. Collections (lineItems, payments,
 * refunds, customers, discounts, and nested ones such as lineItems.discounts) appear only when
 * `expand` asks for them, as `{ elements: [ … ] }`. A refund marks its line items `refunded` and
 * moves the order's `modifiedTime`.
 *
 * The order list pages by offset and limit (limit 1 to 1000, default 100) and filters with repeated
 * `filter=<field><op><value>` parameters; it answers `{ elements, href }`.
 */
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { PosFaultQueue } from './faults.js';
import { accountOf, Accounts, bearerToken, copy, faultGate, mountedBase, NotHeldError, pathParam, type FakePos, type PosContext, type PosErrors, type SignedDelivery } from './kit.js';
import { CustomerInput, OrderInput, parseTime, queryValue, randomChars, RefundInput, RefundLedger, totalsOf, unitNet, type OrderRequest, type RefundRequest } from './model.js';

/** The characters of Clover's ids: digits and upper-case letters without I, L, O, U (Crockford's base 32). */
const CLOVER_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CLOVER_ID = /^[0-9A-Z]{13}$/;
const cloverId = (): string => randomChars(CLOVER_ALPHABET, 13);
/** What real Clover objects name as their host; HTTP answers name the simulator's address instead. */
const CLOVER_HOST = 'https://api.clover.com';

export const CloverAccountOptions = z.strictObject({
  merchantId: z.string().regex(CLOVER_ID, 'must be a 13-character Clover id').optional(),
  accessToken: z.string().trim().min(1).max(200).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).default('USD'),
});
export type CloverAccountOptions = z.input<typeof CloverAccountOptions>;

type Obj = Record<string, unknown>;

/** An order as kept: the order's own fields, and its collections apart (shown as `expand` asks). */
interface Held {
  order: Obj & { id: string; modifiedTime: number; createdTime: number };
  lineItems: (Obj & { id: string; discounts?: Obj[]; refunded: boolean })[];
  payments: Obj[];
  refunds: Obj[];
  customers: string[];
  /** Per input line, the ids of its unit line items. */
  units: string[][];
  input: OrderInput;
  ledger: RefundLedger;
}

class CloverAccount {
  readonly faults = new PosFaultQueue();
  readonly orders = new Map<string, Held>();
  readonly customers = new Map<string, Obj & { id: string }>();

  constructor(
    readonly merchantId: string,
    readonly accessToken: string,
    readonly currency: string,
  ) {}

  describe() {
    return { merchantId: this.merchantId, accessToken: this.accessToken, currency: this.currency, orders: this.orders.size, faults: this.faults.pending() };
  }
}

export type CloverAccountView = ReturnType<CloverAccount['describe']>;

const CLOVER_ERRORS: PosErrors = {
  // Clover's per-second 429 names the limit hit (X-RateLimit-*) and no time; only its
  // concurrent-request 429 sends Retry-After (give `retryAfter` to the fault for that one).
  retryAfter: null,
  unauthorized: (res) => void res.status(401).json({ message: '401 Unauthorized' }),
  rateLimited: (res, retryAfter) => {
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter));
    else res.setHeader('X-RateLimit-tokenLimit', '16');
    res.status(429).json({ message: '429 Too Many Requests' });
  },
  serverError: (res, status) => void res.status(status).json({ message: status === 503 ? '503 Service Unavailable' : '500 Internal Server Error' }),
};

const FILTER_FIELDS = ['modifiedTime', 'createdTime', 'clientCreatedTime', 'state', 'paymentState', 'id'] as const;
const FILTER = /^\s*(\w+)\s*(>=|<=|!=|=|>|<)\s*(.+?)\s*$/;
const ORDER_BY = /^\s*(modifiedTime|createdTime|id)(?:\s+(ASC|DESC))?\s*$/i;

export class FakeClover implements FakePos {
  readonly name = 'clover' as const;
  readonly #accounts = new Accounts<CloverAccount>('Clover merchant');

  constructor(private readonly ctx: PosContext) {}

  addAccount(options: CloverAccountOptions = {}): CloverAccountView {
    const o = CloverAccountOptions.parse(options);
    const merchantId = o.merchantId ?? cloverId();
    return this.#accounts.add(merchantId, new CloverAccount(merchantId, o.accessToken ?? `clover-token-${merchantId}`, o.currency)).describe();
  }

  accounts(): CloverAccountView[] {
    return this.#accounts.list().map((a) => a.describe());
  }

  faults(merchantId: string): PosFaultQueue {
    return this.#accounts.get(merchantId).faults;
  }

  reset(): void {
    this.#accounts.clear();
  }

  /** A customer, with every expansion, as GET …/customers/{id}?expand=emailAddresses,phoneNumbers answers it. */
  addCustomer(merchantId: string, input: CustomerInput): Obj {
    const account = this.#accounts.get(merchantId);
    const customer = this.#newCustomer(account, CustomerInput.parse(input));
    return customerView(customer, new Set(['emailAddresses', 'phoneNumbers']), CLOVER_HOST, merchantId);
  }

  #newCustomer(account: CloverAccount, c: CustomerInput): Obj & { id: string } {
    const id = c.id ?? cloverId();
    if (!CLOVER_ID.test(id)) throw new RangeError('a Clover customer id is 13 characters of 0-9 and A-Z');
    if (account.customers.has(id)) throw new RangeError(`customer ${id} already exists`);
    const ref = { id };
    const customer = {
      id,
      ...(c.firstName ? { firstName: c.firstName } : {}),
      ...(c.lastName ? { lastName: c.lastName } : {}),
      marketingAllowed: false,
      customerSince: this.ctx.now().getTime(),
      emailAddresses: c.email ? [{ id: cloverId(), emailAddress: c.email, primaryEmail: true, customer: ref }] : [],
      phoneNumbers: c.phone ? [{ id: cloverId(), phoneNumber: c.phone, customer: ref }] : [],
    };
    account.customers.set(id, customer);
    return customer;
  }

  /**
   * A sale: paid and locked (or `open: true`), one line item per unit, each unit's share of its line's
   * discount as a negative line discount, and one card payment stating the tax and tip.
   */
  addOrder(merchantId: string, request: OrderRequest): Obj {
    const account = this.#accounts.get(merchantId);
    const input = OrderInput.parse(request);
    const id = input.id ?? cloverId();
    if (!CLOVER_ID.test(id)) throw new RangeError('a Clover order id is 13 characters of 0-9 and A-Z');
    if (account.orders.has(id)) throw new RangeError(`order ${id} already exists`);
    const created = parseTime(input.createdAt, this.ctx.now().getTime());
    const modified = parseTime(input.updatedAt, created);
    const totals = totalsOf(input);
    const paid = !input.open;
    const customers = input.customer === undefined ? [] : [typeof input.customer === 'string' ? this.#existingCustomer(account, input.customer) : this.#newCustomer(account, input.customer).id];

    const units: string[][] = [];
    const lineItems = input.lines.flatMap((l, i) => {
      units.push([]);
      return Array.from({ length: l.quantity }, (_, u) => {
        const lineId = cloverId();
        units[i]!.push(lineId);
        const off = l.unitPrice - unitNet(l, u);
        return {
          id: lineId,
          orderRef: { id },
          ...(l.itemId ? { item: { id: l.itemId } } : {}),
          name: l.name,
          alternateName: '',
          price: l.unitPrice,
          printed: false,
          createdTime: created,
          orderClientCreatedTime: created,
          exchanged: false,
          refunded: false,
          isRevenue: true,
          ...(off > 0 ? { discounts: [{ id: cloverId(), lineItemRef: { id: lineId }, name: 'Discount', amount: -off }] } : {}),
        };
      });
    });
    const payments = paid
      ? [
          {
            id: cloverId(),
            order: { id },
            device: { id: 'fce9a508-424d-961c-d0e1-476273c1f4f3' },
            tender: { id: cloverId(), labelKey: 'com.clover.tender.credit_card', label: 'Credit Card' },
            // A Clover payment's amount includes tax and leaves the tip beside it.
            amount: totals.total,
            taxAmount: totals.tax,
            tipAmount: totals.tip,
            cashbackAmount: 0,
            employee: { id: 'DFLTEMPLOYEE' },
            createdTime: modified,
            clientCreatedTime: modified,
            modifiedTime: modified,
            offline: false,
            result: 'SUCCESS',
          },
        ]
      : [];
    const order = {
      id,
      currency: input.currency ?? account.currency,
      employee: { id: 'DFLTEMPLOYEE' },
      // After discounts, tax included, tip excluded.
      total: totals.total,
      taxRemoved: false,
      isVat: false,
      state: paid ? 'locked' : 'open',
      paymentState: paid ? 'PAID' : 'OPEN',
      manualTransaction: false,
      groupLineItems: true,
      testMode: false,
      ...(paid ? { payType: 'FULL' } : {}),
      createdTime: created,
      clientCreatedTime: created,
      modifiedTime: modified,
      device: { id: 'fce9a508-424d-961c-d0e1-476273c1f4f3' },
    };
    const held: Held = { order, lineItems, payments, refunds: [], customers, units, input, ledger: new RefundLedger(input.lines) };
    account.orders.set(id, held);
    return orderView(held, account, ALL_EXPANSIONS, CLOVER_HOST);
  }

  #existingCustomer(account: CloverAccount, id: string): string {
    if (!account.customers.has(id)) throw new NotHeldError(`no customer ${id}`);
    return id;
  }

  /**
   * A refund of some units: their line items become `refunded`, and the refund states its amount with
   * the tax inside it (`taxAmount`), against the order's payment. Returns the Refund object.
   */
  addRefund(merchantId: string, request: RefundRequest): Obj {
    const account = this.#accounts.get(merchantId);
    const input = RefundInput.parse(request);
    const held = account.orders.get(input.orderId);
    if (!held) throw new NotHeldError(`no order ${input.orderId}`);
    const payment = held.payments[0];
    if (!payment) throw new RangeError(`order ${input.orderId} is not paid: there is nothing to refund`);
    const refunded = held.ledger.take(input.lines);
    const at = parseTime(input.at, this.ctx.now().getTime());
    const refundedIds = refunded.flatMap((r) => held.units[r.line]!.slice(r.firstUnit, r.firstUnit + r.quantity));
    for (const line of held.lineItems) if (refundedIds.includes(line.id)) line.refunded = true;
    const net = refunded.reduce((s, r) => s + r.net, 0);
    const tax = refunded.reduce((s, r) => s + r.tax, 0);
    const id = input.id ?? cloverId();
    if (held.refunds.some((r) => r.id === id)) throw new RangeError(`refund ${id} already exists`);
    const refund = {
      id,
      orderRef: { id: held.order.id },
      device: { id: 'fce9a508-424d-961c-d0e1-476273c1f4f3' },
      // "Total amount refunded, including tax and tip", with its tax and tip beside it.
      amount: net + tax,
      taxAmount: tax,
      tipAmount: 0,
      createdTime: at,
      clientCreatedTime: at,
      payment: { id: payment.id },
      employee: { id: 'DFLTEMPLOYEE' },
      lineItems: { elements: refundedIds.map((lineId) => ({ id: lineId })) },
      voided: false,
    };
    held.refunds.push(refund);
    held.order.modifiedTime = Math.max(held.order.modifiedTime, at);
    return refundView(refund, CLOVER_HOST, merchantId);
  }

  touchOrder(merchantId: string, orderId: string, at?: string): Obj {
    const account = this.#accounts.get(merchantId);
    const held = account.orders.get(orderId);
    if (!held) throw new NotHeldError(`no order ${orderId}`);
    held.order.modifiedTime = parseTime(at, this.ctx.now().getTime());
    return orderView(held, account, ALL_EXPANSIONS, CLOVER_HOST);
  }

  /**
   * A notification as Clover sends one: ids only, keyed by merchant, authenticated by the app's
   * static auth code in `X-Clover-Auth`.
   */
  webhook(merchantId: string, request: CloverWebhookRequest): SignedDelivery {
    const account = this.#accounts.get(merchantId);
    const r = CloverWebhookRequest.parse(request);
    if (r.type !== 'DELETE' && !account.orders.has(r.id)) throw new NotHeldError(`no order ${r.id}`);
    const body = JSON.stringify({ appId: r.appId, merchants: { [account.merchantId]: [{ objectId: `O:${r.id}`, type: r.type, ts: this.ctx.now().getTime() }] } });
    return { headers: { 'content-type': 'application/json', 'x-clover-auth': r.authCode }, body };
  }

  router(): express.Router {
    const router = express.Router();
    // Hrefs in answers point at the simulator: its address and this POS's prefix.
    router.use((req, res, next) => {
      res.locals.cloverRoot = mountedBase(req);
      next();
    });
    const merchant = express.Router({ mergeParams: true });
    router.use('/v3/merchants/:mId', merchant);
    merchant.use((req, res, next) => {
      const account = this.#accounts.find(pathParam(req, 'mId'));
      const token = bearerToken(req);
      // A token is for one merchant: another merchant's is refused like a wrong one.
      if (!account || !token || token !== account.accessToken) return void CLOVER_ERRORS.unauthorized(res, token ? 'wrong' : 'missing');
      res.locals.posAccount = account;
      next();
    });
    merchant.get('/orders', faultGate(this.ctx, CLOVER_ERRORS, 'list'), (req, res) => this.#list(req, res));
    merchant.get('/orders/:orderId', faultGate(this.ctx, CLOVER_ERRORS, 'get'), (req, res) => {
      const account = accountOf<CloverAccount>(res);
      const held = account.orders.get(pathParam(req, 'orderId'));
      if (!held) return void res.status(404).json({ message: 'Not Found' });
      res.json(orderView(held, account, expansions(req), rootOf(res)));
    });
    merchant.get('/refunds/:refundId', faultGate(this.ctx, CLOVER_ERRORS, 'get'), (req, res) => {
      const account = accountOf<CloverAccount>(res);
      const refund = [...account.orders.values()].flatMap((h) => h.refunds).find((r) => r.id === pathParam(req, 'refundId'));
      if (!refund) return void res.status(404).json({ message: 'Not Found' });
      res.json(refundView(refund, rootOf(res), account.merchantId));
    });
    merchant.get('/customers/:customerId', faultGate(this.ctx, CLOVER_ERRORS, 'get'), (req, res) => {
      const account = accountOf<CloverAccount>(res);
      const customer = account.customers.get(pathParam(req, 'customerId'));
      if (!customer) return void res.status(404).json({ message: 'Not Found' });
      res.json(customerView(customer, expansions(req), rootOf(res), account.merchantId));
    });
    router.use((_req, res) => void res.status(404).json({ message: 'Not Found' }));
    return router;
  }

  #list(req: Request, res: Response): void {
    const account = accountOf<CloverAccount>(res);
    const offset = numberParam(req, 'offset', 0);
    const limit = numberParam(req, 'limit', 100);
    if (offset === undefined || offset < 0) return void res.status(400).json({ message: 'offset must be a whole number >= 0' });
    if (limit === undefined || limit < 1 || limit > 1000) return void res.status(400).json({ message: 'limit must be a whole number from 1 to 1000' });
    const raw = queryValue(req.query, 'filter');
    const filters: ((h: Held) => boolean)[] = [];
    for (const text of raw === undefined ? [] : ([] as string[]).concat(raw)) {
      const parsed = parseFilter(text);
      if (typeof parsed === 'string') return void res.status(400).json({ message: parsed });
      filters.push(parsed);
    }
    const orderByText = queryValue(req.query, 'orderBy');
    const orderBy = ORDER_BY.exec(typeof orderByText === 'string' ? orderByText : 'createdTime DESC');
    if (!orderBy) return void res.status(400).json({ message: 'orderBy must be modifiedTime, createdTime or id, then ASC or DESC' });
    const field = orderBy[1] as 'modifiedTime' | 'createdTime' | 'id';
    const sign = (orderBy[2] ?? 'ASC').toUpperCase() === 'DESC' ? -1 : 1;
    const keyOf = (h: Held) => (field === 'id' ? 0 : (h.order[field] as number));
    const matching = [...account.orders.values()]
      .filter((h) => filters.every((f) => f(h)))
      .sort((a, b) => ((keyOf(a) - keyOf(b)) || (a.order.id < b.order.id ? -1 : a.order.id > b.order.id ? 1 : 0)) * sign);
    const base = rootOf(res);
    const expand = expansions(req);
    // Offset paging over the list as it is now: an order that changes between two pages moves.
    res.json({
      elements: matching.slice(offset, offset + limit).map((h) => orderView(h, account, expand, base)),
      href: `${req.protocol}://${req.get('host') ?? 'localhost'}${req.originalUrl}`,
    });
  }
}

export const CloverWebhookRequest = z.strictObject({
  type: z.enum(['CREATE', 'UPDATE', 'DELETE']).default('UPDATE'),
  /** The order's id. */
  id: z.string().regex(CLOVER_ID),
  /** The app's Clover Auth Code, sent as it is in X-Clover-Auth. */
  authCode: z.string().min(1),
  appId: z.string().regex(CLOVER_ID).default('DRKVJT2ZRRRSC'),
});
export type CloverWebhookRequest = z.input<typeof CloverWebhookRequest>;

const ALL_EXPANSIONS = new Set(['lineItems', 'lineItems.discounts', 'lineItems.modifications', 'payments', 'refunds', 'customers', 'discounts']);

/** `expand=a,b.c` as a set; a nested expansion (lineItems.discounts) expands its parent too. */
function expansions(req: Request): Set<string> {
  const raw = queryValue(req.query, 'expand');
  const names = ([] as string[]).concat(raw ?? []).flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
  const out = new Set<string>();
  for (const name of names) {
    out.add(name);
    const dot = name.indexOf('.');
    if (dot > 0) out.add(name.slice(0, dot));
  }
  return out;
}

function rootOf(res: Response): string {
  return res.locals.cloverRoot as string;
}

const elements = (list: unknown[]) => ({ elements: list });

function orderView(held: Held, account: CloverAccount, expand: Set<string>, base: string): Obj {
  const mId = account.merchantId;
  const view: Obj = { href: `${base}/v3/merchants/${mId}/orders/${held.order.id}`, ...copy(held.order) };
  if (expand.has('lineItems')) {
    view.lineItems = elements(
      held.lineItems.map(({ discounts, ...line }) => ({
        ...copy(line),
        ...(expand.has('lineItems.discounts') && discounts ? { discounts: elements(copy(discounts)) } : {}),
      })),
    );
  }
  if (expand.has('discounts')) view.discounts = elements([]);
  if (expand.has('payments')) view.payments = elements(held.payments.map((p) => ({ ...copy(p), ...(expand.has('payments.refunds') ? { refunds: elements(held.refunds.filter((r) => (r.payment as Obj).id === p.id).map((r) => refundView(r, base, mId))) } : {}) })));
  if (expand.has('refunds')) view.refunds = elements(held.refunds.map((r) => refundView(r, base, mId)));
  if (expand.has('customers')) {
    const nested = new Set([...expand].filter((e) => e.startsWith('customers.')).map((e) => e.slice('customers.'.length)));
    view.customers = elements(held.customers.map((id) => customerView(account.customers.get(id)!, nested, base, mId)));
  }
  return view;
}

function refundView(refund: Obj, base: string, merchantId: string): Obj {
  const orderId = (refund.orderRef as { id: string }).id;
  return { href: `${base}/v3/merchants/${merchantId}/refunds/${String(refund.id)}`, ...copy(refund), orderRef: { id: orderId, href: `${base}/v3/merchants/${merchantId}/orders/${orderId}` } };
}

function customerView(customer: Obj & { id: string }, expand: Set<string>, base: string, merchantId: string): Obj {
  const { emailAddresses, phoneNumbers, ...rest } = copy(customer);
  return {
    href: `${base}/v3/merchants/${merchantId}/customers/${customer.id}`,
    ...rest,
    ...(expand.has('emailAddresses') ? { emailAddresses: elements(emailAddresses as unknown[]) } : {}),
    ...(expand.has('phoneNumbers') ? { phoneNumbers: elements(phoneNumbers as unknown[]) } : {}),
  };
}

function numberParam(req: Request, name: string, fallback: number): number | undefined {
  const value = queryValue(req.query, name);
  if (value === undefined) return fallback;
  return typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : undefined;
}

/** `modifiedTime>=1487626449000` and the like → a predicate, or what is wrong with it. */
function parseFilter(text: string): ((h: Held) => boolean) | string {
  const m = FILTER.exec(text);
  if (!m) return `Invalid filter: ${text}`;
  const [, field, op, value] = m as unknown as [string, string, string, string];
  if (!(FILTER_FIELDS as readonly string[]).includes(field)) return `Unknown filter field: ${field}`;
  const numeric = field.endsWith('Time');
  if (numeric && !/^\d+$/.test(value)) return `Filter ${field} needs epoch milliseconds, got ${value}`;
  const wanted: number | string = numeric ? Number(value) : value;
  return (h) => {
    const actual = h.order[field] as number | string | undefined;
    if (actual === undefined) return false;
    switch (op) {
      case '=':
        return actual === wanted;
      case '!=':
        return actual !== wanted;
      case '>':
        return actual > wanted;
      case '>=':
        return actual >= wanted;
      case '<':
        return actual < wanted;
      default:
        return actual <= wanted;
    }
  };
}
