/**
 * The route table (src/http/route.ts) as both the router and the document read it: the routes
 * Express mounts from it are exactly the operations /openapi.json lists; what the document states
 * of an input is never more than its parser accepts (each precise form, tried on values generated
 * from the document's own patterns); and the HTTP layer imports no adapter.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import fc from 'fast-check';
import { GenericCheckout, GenericRefund } from '../../adapters/generic/schema.js';
import { CURRENCY_EXPONENTS, isIsoCurrency } from '../../src/kernel/currencies.js';
import { AMOUNT_TEXT, QUANTITY_TEXT } from '../../src/http/json-schema.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { route, type HttpDeps, type Route } from '../../src/http/route.js';
import { mountRoutes } from '../../src/http/router.js';
import { BulkBody, ListQuery, ReasonBody } from '../../src/http/routes/admin.js';
import { ReconcileReportQuery } from '../../src/http/routes/reports.js';
import { LEDGER_STATUSES } from '../../src/state/record.js';
import { CATALOGUE, documentOf, ROUTES } from './catalogue.js';

type Json = Record<string, any>;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const document = documentOf('0.0.0-test') as Json;
const components = document.components.schemas as Record<string, Json>;

/** What mounting reads of the app's dependencies (the middleware it builds); no handler runs here. */
const DEPS = { adminToken: 'admin-token-route-table-0123456789', tokens: { byAdminToken: async () => undefined, byPosToken: async () => undefined }, posAuth: { mode: 'open' }, bodyLimitBytes: 65_536 } as unknown as HttpDeps;

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every method and path the router serves, `:name` written `{name}`. */
function mounted(routes: readonly Route[]): string[] {
  const app = express();
  app.use(mountRoutes(routes, DEPS));
  const found: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) for (const method of Object.keys(layer.route.methods)) found.push(`${method.toUpperCase()} ${layer.route.path.replace(/:(\w+)/g, '{$1}')}`);
      else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return found.sort();
}

const documented = (doc: Json) => Object.entries(doc.paths as Json).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`)).sort();

describe('one table, mounted and documented', () => {
  it('the router serves exactly the operations the document lists', () => {
    expect(mounted(ROUTES)).toEqual(documented(document));
    expect(documented(document)).toHaveLength(ROUTES.length);
  });

  it('a route added to the table is both served and documented; one declared twice is refused', () => {
    const extra = route({ method: 'get', path: '/v1/admin/extra', operationId: 'extra', tag: 'Operators', summary: 'x', access: 'admin', answers: { 200: { description: 'x' } }, handle: () => undefined });
    const table = [...ROUTES, extra];
    expect(mounted(table)).toContain('GET /v1/admin/extra');
    expect(documented(openApiDocument(table, '0') as Json)).toContain('GET /v1/admin/extra');
    expect(() => openApiDocument([...ROUTES, ROUTES[0]!], '0')).toThrow(/declared twice/);
  });

  it("admin access is the /v1/admin routes' and theirs only: its checks are mounted on that prefix", () => {
    const outside = route({ method: 'get', path: '/v1/extra', operationId: 'extra', tag: 'Operators', summary: 'x', access: 'admin', answers: {}, handle: () => undefined });
    const open = route({ method: 'get', path: '/v1/admin/extra', operationId: 'extra', tag: 'Operators', summary: 'x', access: 'none', answers: {}, handle: () => undefined });
    expect(() => mountRoutes([outside], DEPS)).toThrow(/admin access/);
    expect(() => mountRoutes([open], DEPS)).toThrow(/admin access/);
  });

  it('each operation has its own operationId, and its path parameters and query are exactly what the route reads', () => {
    const ids = ROUTES.map((r) => r.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const r of ROUTES) {
      const parameters = (document.paths[r.path][r.method].parameters ?? []) as Json[];
      expect(parameters.filter((p) => p.in === 'path').map((p) => p.name)).toEqual([...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]));
      const query = r.query ? Object.keys((r.query as unknown as { shape: object }).shape) : [];
      expect(parameters.filter((p) => p.in === 'query').map((p) => p.name)).toEqual(query);
    }
  });

  it('the POS names are the catalogue’s: every POS on checkouts and refunds, those with webhooks on webhooks, those with a listing API for backfill', () => {
    const posOf = (path: string) => document.paths[path].post.parameters.find((p: Json) => p.name === 'pos').schema.enum;
    expect(posOf('/v1/checkouts/{pos}')).toEqual(CATALOGUE.names);
    expect(posOf('/v1/refunds/{pos}')).toEqual(CATALOGUE.names);
    expect(posOf('/v1/webhooks/{pos}')).toEqual(CATALOGUE.webhookNames);
    expect(components.BackfillRequest!.properties.pos.enum).toEqual(CATALOGUE.listingNames);
    expect(CATALOGUE.listingNames).not.toContain('generic');
  });
});

describe('the document states no more than the parsers accept', () => {
  const checkout = (fields: Record<string, unknown>) => GenericCheckout.safeParse({ orderId: 'A-1', currency: 'USD', total: '1', ...fields }).success;
  const runs = { numRuns: 300, seed: 4217 };

  it('money: every text of its pattern and every number within its bounds is an amount the generic payload takes', () => {
    const { total } = components.GenericCheckout!.properties;
    expect(total).toMatchObject({ type: ['string', 'number'], pattern: AMOUNT_TEXT, minimum: 0 });
    fc.assert(fc.property(fc.stringMatching(new RegExp(AMOUNT_TEXT)).filter((t) => t.length <= total.maxLength), (text) => checkout({ total: text, tax: text })), runs);
    fc.assert(fc.property(fc.double({ min: 0, max: total.exclusiveMaximum, maxExcluded: true, noNaN: true }), (n) => checkout({ total: n })), runs);
    expect(GenericRefund.safeParse({ orderId: 'A-1', refundId: 'R-1', amount: '9999999999999.99' }).success).toBe(true);
    // And what it refuses is outside them.
    for (const refused of ['-1', '1,00', ' 1', '0x10', '']) expect(new RegExp(AMOUNT_TEXT).test(refused)).toBe(false);
  });

  it('quantities: every text of the pattern and every number within the bounds is one a line takes', () => {
    const { quantity } = components.GenericCheckout!.properties.items.items.properties;
    expect(quantity).toMatchObject({ pattern: QUANTITY_TEXT, exclusiveMinimum: 0 });
    const line = (q: unknown) => checkout({ items: [{ quantity: q, total: '1.00' }] });
    fc.assert(fc.property(fc.stringMatching(new RegExp(QUANTITY_TEXT)), line), runs);
    fc.assert(fc.property(fc.double({ min: 0, minExcluded: true, max: quantity.exclusiveMaximum, maxExcluded: true, noNaN: true }), line), runs);
    for (const refused of ['0', '0.0', '-1', '']) expect(new RegExp(QUANTITY_TEXT).test(refused)).toBe(false);
  });

  it('currency: the Currency enum is exactly the codes the parser takes', () => {
    expect(components.GenericCheckout!.properties.currency.$ref).toBe('#/components/schemas/Currency');
    expect(components.MerchantCreate!.properties.currency.$ref).toBe('#/components/schemas/Currency');
    const letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
    const accepted = [...letters].flatMap((a) => [...letters].flatMap((b) => [...letters].map((c) => `${a}${b}${c}`))).filter(isIsoCurrency);
    expect(components.Currency!.enum).toEqual(accepted);
    expect(accepted).toEqual([...CURRENCY_EXPONENTS.keys()]);
    expect(checkout({ currency: 'usd' })).toBe(false);
  });

  it('statuses: every comma-separated list of the pattern is a status filter the list and bulk take', () => {
    const pattern = new RegExp(document.paths['/v1/admin/transactions'].get.parameters.find((p: Json) => p.name === 'status').schema.pattern);
    expect(components.BulkBody!.properties.filter.properties.status.pattern).toBe(pattern.source);
    fc.assert(fc.property(fc.stringMatching(pattern), (status) => ListQuery.safeParse({ status }).success && BulkBody.safeParse({ action: 'retry', reason: 'r', filter: { status } }).success), runs);
    for (const status of LEDGER_STATUSES) expect(pattern.test(status)).toBe(true);
    expect(pattern.test('lost')).toBe(false);
  });

  it('dates: a day or a date-time as the document states them is a bound the list, the bulk filter and the report take', () => {
    const from = document.paths['/v1/admin/transactions'].get.parameters.find((p: Json) => p.name === 'from').schema;
    expect(from.anyOf.map((s: Json) => s.format)).toEqual(['date', 'date-time']);
    const dateTime = new RegExp(from.anyOf[1].pattern);
    const reportFrom = document.paths['/v1/admin/reports/reconcile'].get.parameters.find((p: Json) => p.name === 'from').schema;
    const reportDateTime = new RegExp(reportFrom.anyOf[1].pattern);
    const offsets = fc.constantFrom('Z', '+02:00', '-05:30', '+00:00', '+14:00');
    const texts = fc.tuple(fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T00:00:00Z'), noInvalidDate: true }), offsets).map(([d, offset]) => `${d.toISOString().slice(0, offset === 'Z' ? 24 : 19)}${offset === 'Z' ? '' : offset}`);
    fc.assert(
      fc.property(texts, (text) => {
        expect(dateTime.test(text)).toBe(true);
        expect(reportDateTime.test(text)).toBe(true);
        expect(ListQuery.safeParse({ from: text, to: text.slice(0, 10) }).success).toBe(true);
        expect(ReconcileReportQuery.safeParse({ from: text, to: text.slice(0, 10) }).success).toBe(true);
      }),
      runs,
    );
    // What the parsers refuse, the patterns do too: a lower-case t or z, no offset, no seconds.
    for (const text of ['2026-01-01t10:00:00Z', '2026-01-01T10:00:00z', '2026-01-01T10:00:00', '2026-01-01T10:00Z']) {
      expect(dateTime.test(text)).toBe(ListQuery.safeParse({ from: text }).success);
    }
  });

  it('trimmed text: what the pattern allows is never blank once trimmed', () => {
    const reason = components.ReasonBody!.properties.reason;
    fc.assert(fc.property(fc.stringMatching(new RegExp(reason.pattern)).filter((t) => t.length <= reason.maxLength), (text) => ReasonBody.safeParse({ reason: text }).success), runs);
    expect(new RegExp(reason.pattern).test('   ')).toBe(false);
  });

  it('bulk: ids or filter, one of the two, and resolve with an outcome, as the document states and the parser checks', () => {
    const body = components.BulkBody!;
    expect(body.oneOf).toEqual([{ required: ['ids'] }, { required: ['filter'] }]);
    expect(body.properties.ids.maxItems).toBe(100);
    const ok = (b: Json) => BulkBody.safeParse({ action: 'retry', reason: 'r', ...b }).success;
    expect(ok({ ids: ['a'] })).toBe(true);
    expect(ok({ filter: {} })).toBe(true);
    expect(ok({ ids: ['a'], filter: {} })).toBe(false);
    expect(ok({})).toBe(false);
    expect(ok({ action: 'resolve', ids: ['a'] })).toBe(false);
    expect(ok({ action: 'resolve', outcome: 'accrued', ids: ['a'] })).toBe(true);
  });

  it('the merchant the variables build cannot be created: its id is refused as parsed, and the document says so', () => {
    expect(components.MerchantCreate!.properties.id.not).toEqual({ const: 'default' });
  });
});

describe('layers', () => {
  it('the HTTP layer imports no adapter: the composition root hands it what it needs (PosCatalogue)', () => {
    const root = new URL('../../src/http/', import.meta.url).pathname;
    const files = (dir: string): string[] => readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? files(join(dir, name)) : name.endsWith('.ts') ? [join(dir, name)] : []));
    const importing = files(root).filter((file) => /from '(\.\.\/)+adapters\//.test(readFileSync(file, 'utf8')));
    expect(importing).toEqual([]);
  });
});
