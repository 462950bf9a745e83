/**
 * Shopify's own library as the oracle for the fake Shopify and the Shopify fixtures
 * (docs/simulator-pos-apis.md, "Shopify"): `@shopify/shopify-api`'s REST resource definitions of
 * `Order` and `Refund` for the Admin API version the bridge reads (adapters/shopify/backfill.ts,
 * SHOPIFY_API_VERSION) declare the fields a real answer carries. Every field the fake sends (an
 * orders.json page, an order, its refunds, one refund, and the orders/paid and refunds/create
 * webhook bodies) and every field of the Shopify fixtures the adapter reads must be one the resource
 * declares, save the few named below with where Shopify is seen sending them; and the fields a
 * refunded or edited order is read by (`current_*` and their `_set` twins, numeric
 * `tax_lines[].rate`, `refund_shipping_lines`, `refund_duties`) are there with Shopify's types.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { SHOPIFY_API_VERSION } from '../../adapters/shopify/backfill.js';
import { call, fakePosApis, TWO_LINES } from '../support/pos-http.js';

const SHOP = 'oracle-cafe.myshopify.com';
const TOKEN = 'shpat_oracle';

/** The library's resource source for this version: `public <field>: <type>;` lines, as generated from Shopify's API definitions. */
// The package's exports hide its files from resolution; its installed folder is read directly.
const libraryRoot = new URL('../../node_modules/@shopify/shopify-api/', import.meta.url).pathname;
function declared(resource: 'order' | 'refund'): Map<string, string> {
  const text = readFileSync(join(libraryRoot, 'rest', 'admin', SHOPIFY_API_VERSION, `${resource}.ts`), 'utf8');
  return new Map([...text.matchAll(/^\s+public (\w+): ([^;]+);$/gm)].map((m) => [m[1]!, m[2]!]));
}
const ORDER = declared('order');
const REFUND = declared('refund');

/**
 * Fields Shopify sends that the generated resource classes leave out, each with where it is seen.
 * `admin_graphql_api_id` is on every REST object (the real POS refund in
 * test/fixtures/shopify/refunds_create_pos_partial_CAD.json carries it); that refund also carries
 * `total_duties_set` and `return`. The 2016 order fixture (shopify_python_api) carries fields the
 * API has since dropped.
 */
const ORDER_UNDECLARED_SEEN = new Set(['admin_graphql_api_id']);
const REFUND_UNDECLARED_SEEN = new Set(['admin_graphql_api_id', 'total_duties_set', 'return']);
const ORDER_FIELDS_DROPPED_SINCE_2016 = new Set(['gateway', 'reference', 'source', 'total_price_usd', 'landing_site_ref', 'processing_method', 'checkout_id', 'payment_details']);

function undeclared(object: Record<string, unknown>, fields: Map<string, string>, seen: Set<string>): string[] {
  return Object.keys(object).filter((k) => !fields.has(k) && !seen.has(k));
}

const money = (v: unknown) => typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v);
const moneySet = (v: unknown) => {
  const s = v as { shop_money?: { amount?: unknown; currency_code?: unknown }; presentment_money?: { amount?: unknown; currency_code?: unknown } };
  return money(s?.shop_money?.amount) && typeof s.shop_money!.currency_code === 'string' && money(s?.presentment_money?.amount) && typeof s.presentment_money!.currency_code === 'string';
};

describe(`the fake Shopify against @shopify/shopify-api's REST Order and Refund (${SHOPIFY_API_VERSION})`, () => {
  const apis = fakePosApis({ accounts: (sim) => void sim.pos.shopify.addAccount({ shop: SHOP, accessToken: TOKEN }) });
  const get = (path: string) => call(`${apis.url}/shopify/${SHOP}/admin/api/${SHOPIFY_API_VERSION}${path}`, { headers: { 'x-shopify-access-token': TOKEN } });

  it('reads the resource definitions: the fields the review named are declared', () => {
    for (const f of ['current_total_price', 'current_subtotal_price', 'current_total_tax', 'current_total_discounts']) {
      expect(ORDER.get(f)).toBe('string | null');
      expect(ORDER.get(`${f}_set`)).toBe('{[key: string]: unknown} | null');
    }
    expect(REFUND.get('refund_shipping_lines')).toBe('{[key: string]: unknown}[] | null');
    expect(REFUND.get('refund_duties')).toBe('{[key: string]: unknown}[] | null');
  });

  it('every answer: orders.json pages, an order, its refunds, one refund, the webhooks: only declared fields, the current figures present and typed', async () => {
    const sim = apis.sim.pos.shopify;
    const a = sim.addOrder(SHOP, { lines: TWO_LINES, tip: 100, customer: { phone: '+14155550123' } });
    const b = sim.addOrder(SHOP, { lines: TWO_LINES, open: true });
    sim.editOrder(SHOP, { orderId: String(b.id), lines: [{ line: 1 }] });
    sim.payOrder(SHOP, String(b.id));
    const r = sim.addRefund(SHOP, { orderId: String(a.id), lines: [{ line: 0, quantity: 1 }] });
    sim.addOrder(SHOP, { lines: TWO_LINES });

    const orders: Record<string, any>[] = [];
    const refunds: Record<string, any>[] = [];
    let page = await get('/orders.json?status=any&limit=2');
    for (;;) {
      expect(page.status).toBe(200);
      orders.push(...page.body.orders);
      const next = /<([^>]+)>;\s*rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
      if (!next) break;
      page = await call(next, { headers: { 'x-shopify-access-token': TOKEN } });
    }
    expect(orders).toHaveLength(3);
    orders.push((await get(`/orders/${a.id}.json`)).body.order, (await get(`/orders/${b.id}.json`)).body.order);
    refunds.push(...(await get(`/orders/${a.id}/refunds.json`)).body.refunds, (await get(`/orders/${a.id}/refunds/${r.id}.json`)).body.refund);
    orders.push(JSON.parse(sim.webhook(SHOP, { topic: 'orders/paid', id: String(a.id), secret: 's' }).body));
    refunds.push(JSON.parse(sim.webhook(SHOP, { topic: 'refunds/create', id: String(r.id), secret: 's' }).body));
    for (const o of orders) refunds.push(...o.refunds);

    for (const o of orders) {
      expect(undeclared(o, ORDER, ORDER_UNDECLARED_SEEN)).toEqual([]);
      for (const f of ['current_total_price', 'current_subtotal_price', 'current_total_tax', 'current_total_discounts']) {
        expect(money(o[f])).toBe(true);
        expect(moneySet(o[`${f}_set`])).toBe(true);
        expect(o[`${f}_set`].shop_money.amount).toBe(o[f]);
      }
      for (const t of [...o.tax_lines, ...o.line_items.flatMap((l: { tax_lines: unknown[] }) => l.tax_lines)]) expect(typeof (t as { rate: unknown }).rate).toBe('number');
      for (const l of o.line_items) expect(Number.isInteger(l.current_quantity)).toBe(true);
    }
    expect(refunds.length).toBeGreaterThanOrEqual(4);
    for (const f of refunds) {
      expect(undeclared(f, REFUND, REFUND_UNDECLARED_SEEN)).toEqual([]);
      expect(f.refund_shipping_lines).toEqual([]);
      expect(f.refund_duties).toEqual([]);
    }
    // What the current figures say: a refund of 4.33 + 0.23 tax; an edit removing the 2.99 muffin (+ 0.25 tax).
    const byId = new Map(orders.map((o) => [o.id, o]));
    expect(byId.get(a.id)).toMatchObject({ total_price: '17.92', current_total_price: '13.36', current_subtotal_price: '11.66', current_total_tax: '0.70', current_total_discounts: '0.33' });
    expect(byId.get(b.id)).toMatchObject({ total_price: '16.92', current_total_price: '13.68', subtotal_price: '15.99', current_subtotal_price: '13.00', refunds: [] });
    expect(byId.get(b.id)!.line_items.map((l: { current_quantity: number }) => l.current_quantity)).toEqual([3, 0]);
  });
});

describe(`the Shopify fixtures against @shopify/shopify-api's REST Order and Refund (${SHOPIFY_API_VERSION})`, () => {
  const dir = new URL('../fixtures/shopify/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  it.each(files)('%s: only declared fields (or ones seen from Shopify, named)', (file) => {
    const json = JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Record<string, any>;
    if (!json) throw new Error(`${file} is empty`);
    const isRefund = 'refund' in json || 'refund_line_items' in json;
    const object = json.order ?? json.refund ?? json;
    if (isRefund) {
      expect(undeclared(object, REFUND, REFUND_UNDECLARED_SEEN)).toEqual([]);
    } else {
      expect(undeclared(object, ORDER, new Set([...ORDER_UNDECLARED_SEEN, ...(file.includes('python_api') ? ORDER_FIELDS_DROPPED_SINCE_2016 : [])]))).toEqual([]);
      for (const f of object.refunds ?? []) expect(undeclared(f, REFUND, REFUND_UNDECLARED_SEEN)).toEqual([]);
      for (const t of [...(object.tax_lines ?? []), ...object.line_items.flatMap((l: { tax_lines?: unknown[] }) => l.tax_lines ?? [])]) expect(typeof (t as { rate: unknown }).rate).toBe('number');
    }
  });
});
