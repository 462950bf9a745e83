/**
 * /openapi.json as users read it: a real OpenAPI linter finds no error in it, it lists every route
 * Express serves (and no other), and real answers of every route validate against the schemas it
 * documents for their status, read back from the served document itself.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConfig, lintFromString, type NormalizedProblem } from '@redocly/openapi-core';
import type { Express } from 'express';
import request from 'supertest';
import { z } from 'zod';
import { adapters } from '../adapters/index.js';
import { shopifyAdapter } from '../adapters/shopify/index.js';
import { GenericCheckout, GenericRefund } from '../adapters/generic/schema.js';
import { COMPONENT_SCHEMAS } from '../src/http/openapi.js';
import { POS_NAMES, VENDOR_POS_NAMES } from '../src/pos/contract.js';
import type { PosSettings } from '../src/pos/contract.js';
import { parseWith } from '../src/kernel/validation.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from './support/harness.js';
import { postRaw, signature } from './support/webhooks.js';
import { documentOf } from './http/catalogue.js';

type Json = Record<string, any>;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/**
 * Warnings of Redocly's recommended ruleset accepted, each for a reason; any other warning fails
 * like an error does.
 * - info-license: the bridge is a private package (package.json "private": true) with no licence
 *   to name; inventing one would tell readers something untrue.
 */
const ACCEPTED_WARNINGS = new Set(['info-license']);

async function lint(document: object): Promise<NormalizedProblem[]> {
  const config = await createConfig({ extends: ['recommended'] });
  return lintFromString({ source: JSON.stringify(document, null, 2), absoluteRef: 'openapi.json', config });
}

const describeProblem = (p: NormalizedProblem) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`;

describe('the document, linted (Redocly, recommended rules)', () => {
  it('has no error, and no warning but those accepted', async () => {
    const problems = await lint(documentOf('1.2.3'));
    const failing = problems.filter((p) => p.severity === 'error' || !ACCEPTED_WARNINGS.has(p.ruleId));
    expect(failing.map(describeProblem)).toEqual([]);
  });

  it('the linter does fail a broken document (the check above can fail)', async () => {
    const broken = structuredClone(documentOf('1.2.3')) as Json;
    delete broken.paths['/v1/refunds/{pos}'].post.parameters;
    broken.paths['/healthz'].get.security = [{ nobody: [] }];
    const errors = (await lint(broken)).filter((p) => p.severity === 'error').map((p) => p.ruleId);
    expect(errors).toEqual(expect.arrayContaining(['path-parameters-defined', 'security-defined']));
  });
});

describe('the document, complete', () => {
  const document = documentOf('1.2.3') as Json;
  const operations = Object.entries(document.paths as Json).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ method, path, operation: item[method] as Json })),
  );

  it('is OpenAPI 3.1 with servers, both bearer schemes and tags', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers.length).toBeGreaterThan(0);
    expect(document.components.securitySchemes).toEqual({
      adminToken: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      posToken: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    expect(document.tags.length).toBeGreaterThan(0);
  });

  it('names the POS systems the bridge registers, and those with webhooks', () => {
    expect([...POS_NAMES].sort()).toEqual([...adapters.keys()].sort());
    expect([...VENDOR_POS_NAMES].sort()).toEqual([...adapters.values()].filter((a) => a.webhook).map((a) => a.name).sort());
  });

  it.each(operations.map((o) => [`${o.method.toUpperCase()} ${o.path}`, o.path, o.operation] as const))('%s: operationId, tag, security, a 2xx, a 4xx and 408', (_name, path, operation) => {
    expect(operation.operationId).toMatch(/^[a-zA-Z]+$/);
    expect(operation.tags).toHaveLength(1);
    expect(Array.isArray(operation.security)).toBe(true);
    const statuses = Object.keys(operation.responses);
    expect(statuses.some((s) => s.startsWith('2'))).toBe(true);
    expect(statuses.some((s) => s.startsWith('4'))).toBe(true);
    expect(statuses).toContain('408');
    if (path.startsWith('/v1/admin/')) {
      expect(operation.security).toEqual([{ adminToken: [] }]);
      expect(statuses).toEqual(expect.arrayContaining(['401', '413', '415']));
    }
    if (/^\/v1\/(checkouts|refunds|webhooks)\//.test(path)) expect(statuses).toEqual(expect.arrayContaining(['400', '404', '413', '415', '503']));
    if (/^\/v1\/(checkouts|refunds)\//.test(path)) expect(operation.security).toEqual([{ posToken: [] }]);
  });

  it("the examples are payloads the generic schemas accept, as the routes parse them", () => {
    const examples = (path: string) => Object.values(document.paths[path].post.requestBody.content['application/json'].examples as Record<string, { value: unknown }>);
    expect(examples('/v1/checkouts/{pos}').length).toBeGreaterThan(0);
    expect(examples('/v1/refunds/{pos}').length).toBeGreaterThan(0);
    for (const { value } of examples('/v1/checkouts/{pos}')) expect(() => parseWith(GenericCheckout, value)).not.toThrow();
    for (const { value } of examples('/v1/refunds/{pos}')) expect(() => parseWith(GenericRefund, value)).not.toThrow();
  });

  it('partial refunds: amount and items in the generic refund', () => {
    expect(Object.keys(document.components.schemas.GenericRefund.properties)).toEqual(expect.arrayContaining(['refundId', 'amount', 'items']));
  });

  it('shows the generic payload as a client sends it: money as text or a number, not the cents it becomes', () => {
    const { total, items } = document.components.schemas.GenericCheckout.properties;
    expect(total.type).toEqual(['string', 'number']);
    expect(items.items.properties.quantity.type).toEqual(['string', 'number']);
  });
});

// ---------------------------------------------------------------------------------------------
// Express's routes against the document, and real answers against the schemas it documents.

const shopifySettings: PosSettings = { webhookSecret: 'shpss_openapi_secret_0123456789', apiBaseUrl: '' };
const RESTAURANT = 'a0000000-0000-4000-8000-0000000000aa';
const TOAST_KEY = 'toast-openapi-loyalty-key-0123456789';
const toastSettings: PosSettings = { webhookSecret: 'toast-openapi-secret', apiBaseUrl: '', account: RESTAURANT, registerKey: TOAST_KEY };
const POS_TOKEN = 'pos-token-openapi-0123456789';
let h: Harness;
let served: Json;

beforeAll(async () => {
  h = await startHarness({ env: { POS_TOKEN, BODY_LIMIT_BYTES: '65536' }, overrides: { posSettings: { shopify: shopifySettings, toast: toastSettings }, secretsKey: randomBytes(32).toString('base64') } });
  served = (await request(h.bridge.url).get('/openapi.json')).body as Json;
});
afterAll(async () => {
  await h.close();
});

interface RouteLayer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: RouteLayer[] };
}

/** Every method and path Express routes, `:name` written `{name}` as OpenAPI writes it. */
function expressRoutes(app: Express): string[] {
  const found: string[] = [];
  const walk = (stack: RouteLayer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods)) found.push(`${method.toUpperCase()} ${layer.route.path.replace(/:(\w+)/g, '{$1}')}`);
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack);
      }
    }
  };
  walk((app as unknown as { router: { stack: RouteLayer[] } }).router.stack);
  return found.sort();
}

describe('the routes Express serves', () => {
  it('are exactly the operations documented', () => {
    const app = h.bridge.server.listeners('request')[0] as Express;
    const documented = Object.entries(served.paths as Json).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`));
    expect(expressRoutes(app)).toEqual(documented.sort());
  });
});

/** A $ref into the served document's components, as `z.fromJSONSchema` reads refs: from `$defs`. */
function withDefs(schema: Json): Json {
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? v.replace('#/components/schemas/', '#/$defs/') : rewrite(v)]));
    }
    return value;
  };
  return { ...(rewrite(schema) as Json), $defs: rewrite(served.components.schemas) };
}

function documentedResponse(method: string, path: string, status: number): Json {
  const operation = served.paths[path]?.[method];
  expect(operation).toBeDefined();
  const response = operation.responses[String(status)];
  if (!response) throw new Error(`${method.toUpperCase()} ${path} answered ${status}, which the document does not list`);
  return response.$ref ? served.components.responses[response.$ref.split('/').pop()] : response;
}

const sampled = new Set<string>();

/**
 * The answer against what the document says of its status: its media type, its schema (rebuilt
 * from the served JSON, so the document itself is tested), and no field the document does not name
 * (the zod schema it was generated from keeps only documented fields).
 */
function expectDocumented(method: 'get' | 'post' | 'patch', path: string, res: { status: number; headers: Json; body: unknown; text: string }): void {
  sampled.add(`${method} ${path} ${res.status}`);
  const response = documentedResponse(method, path, res.status);
  if (!response.content) return expect(res.text ?? '').toBe('');
  const [mediaType] = String(res.headers['content-type']).split(';');
  expect(Object.keys(response.content)).toContain(mediaType);
  const schema = response.content[mediaType!].schema as Json;
  if (mediaType !== 'application/json') return expect(typeof res.text).toBe('string');
  const parsed = z.fromJSONSchema(withDefs(schema) as never).safeParse(res.body);
  if (!parsed.success) throw new Error(`${method.toUpperCase()} ${path} ${res.status}: ${z.prettifyError(parsed.error)}\n${JSON.stringify(res.body).slice(0, 1000)}`);
  const names = (schema.anyOf ?? [schema]).map((s: Json) => s.$ref?.split('/').pop()).filter(Boolean) as (keyof typeof COMPONENT_SCHEMAS)[];
  if (names.length === 0) return;
  // An answer or an error: the envelope is the one with `error` as an object.
  const name = names.length === 1 ? names[0]! : names.find((n) => (n === 'Error') === (typeof (res.body as Json).error === 'object'))!;
  expect(COMPONENT_SCHEMAS[name].parse(res.body)).toEqual(res.body);
}

const REPORT = '/v1/admin/reports/reconcile';
const today = () => new Date().toISOString().slice(0, 10);
const admin = (method: 'get' | 'post' | 'patch', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const pos = (path: string, body: unknown, contentType = 'application/json') =>
  request(h.bridge.url).post(path).set('authorization', `Bearer ${POS_TOKEN}`).set('content-type', contentType).send(typeof body === 'string' ? body : JSON.stringify(body));
const webhook = (body: string, topic: string, eventId: string, sign = true) =>
  postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [
    sign ? signature(shopifyAdapter, shopifySettings, body) : ['X-Shopify-Hmac-Sha256', 'bm90IGEgc2lnbmF0dXJl'],
    ['X-Shopify-Topic', topic],
    ['X-Shopify-Event-Id', eventId],
    ['X-Shopify-Shop-Domain', 'openapi-shop.myshopify.com'],
  ]);

describe('real answers validate against the documented schema of their status', () => {
  it('POS: checkouts and refunds', async () => {
    const C = '/v1/checkouts/{pos}';
    const R = '/v1/refunds/{pos}';
    expectDocumented('post', C, await pos('/v1/checkouts/generic', checkout({ orderId: 'O-1' })));
    expectDocumented('post', C, await pos('/v1/checkouts/generic', checkout({ orderId: 'O-1' })));
    expectDocumented('post', C, await pos('/v1/checkouts/generic', checkout({ orderId: 'O-SKIP', customer: {} })));
    // Another customer: an unsettled accrual holds back those of the same customer and amount.
    h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 2500 });
    const slow = await pos('/v1/checkouts/generic', checkout({ orderId: 'O-SLOW', customer: { phone: '+15550002222' } }));
    expect(slow.status).toBe(202);
    expectDocumented('post', C, slow);
    expectDocumented('post', C, await pos('/v1/checkouts/generic', { orderId: 1 }));
    expectDocumented('post', C, await pos('/v1/checkouts/nope', checkout()));
    expectDocumented('post', C, await pos('/v1/checkouts/generic', 'x'.repeat(70_000)));
    expectDocumented('post', C, await pos('/v1/checkouts/generic', 'orderId=1', 'application/x-www-form-urlencoded'));
    expectDocumented('post', C, await request(h.bridge.url).post('/v1/checkouts/generic').set('content-type', 'application/json').send(JSON.stringify(checkout())));

    await pos('/v1/checkouts/generic', checkout({ orderId: 'O-2' }));
    const partial = await pos('/v1/refunds/generic', { orderId: 'O-2', refundId: 'R-1', amount: '9.97' });
    expect(partial.body.remainder).toBeDefined();
    expectDocumented('post', R, partial);
    const over = await pos('/v1/refunds/generic', { orderId: 'O-2', refundId: 'R-2', amount: '100.00' });
    expect(over.status).toBe(409);
    expectDocumented('post', R, over);
    expectDocumented('post', R, await pos('/v1/refunds/generic', { orderId: 'O-1', refundId: 'R-1' }));
    expectDocumented('post', R, await pos('/v1/refunds/generic', { orderId: 'NEVER', refundId: 'R-1', amount: '1.00' }));
    const unknown = await pos('/v1/refunds/generic', { orderId: 'NEVER-SEEN', refundId: 'R-1' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.transactionId).toBe('generic:NEVER-SEEN');
    expectDocumented('post', R, unknown);
    expectDocumented('post', R, await pos('/v1/refunds/generic', { orderId: 'O-1', amount: '1' }));
  });

  it('webhooks, and the dead letters they leave', async () => {
    const W = '/v1/webhooks/{pos}';
    expectDocumented('post', W, await webhook('{"id": 1}', 'products/update', 'evt-1'));
    expectDocumented('post', W, await webhook('{"id": 1}', 'products/update', 'evt-2', false));
    expectDocumented('post', W, await postRaw(`${h.bridge.url}/v1/webhooks/generic`, '{}', []));
    const dead = await webhook('{"id": 2}', 'orders/paid', 'evt-3');
    expect(dead.status).toBe(202);
    expect(dead.body.results[0].action).toBe('dead_lettered');
    expectDocumented('post', W, dead);
    const id = dead.body.results[0].deadLetterId as string;

    expectDocumented('get', '/v1/admin/dead-letters', await admin('get', '/v1/admin/dead-letters?open=true'));
    expectDocumented('get', '/v1/admin/dead-letters', await admin('get', '/v1/admin/dead-letters?open=maybe'));
    expectDocumented('get', '/v1/admin/dead-letters', await admin('get', '/v1/admin/dead-letters?awaiting=operator'));
    expectDocumented('get', '/v1/admin/dead-letters/{id}', await admin('get', `/v1/admin/dead-letters/${id}`));
    expectDocumented('get', '/v1/admin/dead-letters/{id}', await admin('get', '/v1/admin/dead-letters/nope'));
    const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(replay.status).toBe(422);
    expectDocumented('post', '/v1/admin/dead-letters/{id}/replay', replay);
    expectDocumented('post', '/v1/admin/dead-letters/{id}/replay', await admin('post', '/v1/admin/dead-letters/nope/replay'));
    // Another instance is running it: the replay waits its turn (409).
    await h.bridge.store.updateDeadLetter(id, (l) => ({ ...l!, retry: { transient: true, attempts: 1, claim: { owner: 'other-instance', until: new Date(Date.now() + 60_000).toISOString() } } }));
    const held = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(held.status).toBe(409);
    expectDocumented('post', '/v1/admin/dead-letters/{id}/replay', held);
  });

  it('admin: records and the operator actions', async () => {
    await pos('/v1/checkouts/generic', checkout({ orderId: 'A-1' }));
    const T = '/v1/admin/transactions/{transactionId}';
    expectDocumented('get', '/v1/admin/transactions', await request(h.bridge.url).get('/v1/admin/transactions'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?limit=500'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?status=lost'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/generic:A-1'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/generic:O-2'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/generic:O-2~r1'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/nope'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/%E0%A4%A'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?customer=%2B15550001111&orderId=a-&merchantId=default'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?customer=%2B15550001111'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?customer=%20&merchantId=default'));
    expectDocumented('get', `${T}/evidence`, await admin('get', '/v1/admin/transactions/generic:A-1/evidence'));
    expectDocumented('get', `${T}/evidence`, await admin('get', '/v1/admin/transactions/nope/evidence'));
    expectDocumented('get', `${T}/evidence`, await admin('get', '/v1/admin/transactions/generic:A-1/evidence?merchantId=-bad'));
    expectDocumented('get', `${T}/payload`, await admin('get', '/v1/admin/transactions/generic:A-1/payload'));
    expectDocumented('get', `${T}/payload`, await admin('get', '/v1/admin/transactions/generic:A-1/payload?unmask=true'));
    expectDocumented('get', `${T}/payload`, await admin('get', '/v1/admin/transactions/generic:O-2~r1/payload'));
    expectDocumented('get', `${T}/payload`, await admin('get', '/v1/admin/transactions/generic:A-1/payload?unmask=maybe'));
    expectDocumented('post', `${T}/retry`, await admin('post', '/v1/admin/transactions/generic:A-1/retry'));
    // Nothing to ask about (409), and a record the ledger lacks (404).
    expectDocumented('post', `${T}/ask`, await admin('post', '/v1/admin/transactions/generic:A-1/ask').send({ reason: 'test' }));
    expectDocumented('post', `${T}/ask`, await admin('post', '/v1/admin/transactions/nope/ask'));
    expectDocumented('post', `${T}/resolve`, await admin('post', '/v1/admin/transactions/generic:A-1/resolve').send({ outcome: 'accrued' }));
    expectDocumented('post', `${T}/resolve`, await admin('post', '/v1/admin/transactions/generic:A-1/resolve').send({ outcome: 'maybe' }));
    expectDocumented('post', `${T}/reverse`, await admin('post', '/v1/admin/transactions/generic:A-1/reverse').send({ reason: 'test' }));
    expectDocumented('post', `${T}/reverse`, await admin('post', '/v1/admin/transactions/generic:A-1/reverse').set('content-type', 'application/json').send('x'.repeat(20_000)));
    expectDocumented('post', '/v1/admin/reconcile', await admin('post', '/v1/admin/reconcile?budgetMs=5000'));
    expectDocumented('post', '/v1/admin/reconcile', await admin('post', '/v1/admin/reconcile?budgetMs=soon'));
    const report = await admin('get', `${REPORT}?from=${today()}&to=${today()}`);
    expect(report.status).toBe(200);
    expectDocumented('get', REPORT, report);
    const csv = await admin('get', `${REPORT}?from=${today()}&to=${today()}`).set('accept', 'text/csv');
    expect(csv.text.split('\r\n')[0]).toBe('kind,transactionId,orderId,operationId,why,next');
    expectDocumented('get', REPORT, csv);
    expectDocumented('get', REPORT, await admin('get', `${REPORT}?from=${today()}`));
    expectDocumented('get', REPORT, await admin('get', `${REPORT}?from=${today()}&to=${today()}&merchantId=nobody`));
  });

  it('operators: who am I, the attention queue, search, close, acknowledge, dismiss, bulk and the audit trail', async () => {
    const T = '/v1/admin/transactions/{transactionId}';
    expectDocumented('get', '/v1/admin/whoami', await admin('get', '/v1/admin/whoami'));
    expectDocumented('get', '/v1/admin/whoami', await request(h.bridge.url).get('/v1/admin/whoami'));
    const orphan = await pos('/v1/refunds/generic', { orderId: 'ORPHAN-1', refundId: 'R-9' });
    expect(orphan.status).toBe(404);
    await pos('/v1/checkouts/generic', checkout({ orderId: 'CR-1' }));
    await pos('/v1/checkouts/generic', checkout({ orderId: 'CR-1', total: '9.99', items: [{ id: 'sku-1', quantity: 1, unitPrice: '9.99', total: '9.99' }] }));
    const queue = await admin('get', '/v1/admin/attention?limit=5');
    expect(queue.body.counts.reverse_failed).toBeGreaterThanOrEqual(1);
    expect(queue.body.counts.changed_repeats).toBeGreaterThanOrEqual(1);
    expectDocumented('get', '/v1/admin/attention', queue);
    expectDocumented('get', '/v1/admin/attention', await admin('get', '/v1/admin/attention?limit=0'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?status=reverse_failed,failed&orderId=ORPHAN-1&refundId=R-9&from=2020-01-01&to=2099-12-31'));
    expectDocumented('get', '/v1/admin/transactions', await admin('get', '/v1/admin/transactions?status=failed,lost'));
    expectDocumented('get', T, await admin('get', '/v1/admin/transactions/generic:ORPHAN-1'));
    expectDocumented('post', `${T}/close`, await admin('post', '/v1/admin/transactions/generic:ORPHAN-1/close').send({}));
    expectDocumented('post', `${T}/close`, await admin('post', '/v1/admin/transactions/generic:ORPHAN-1/close').send({ reason: 'order from before the loyalty program' }));
    expectDocumented('post', `${T}/close`, await admin('post', '/v1/admin/transactions/generic:ORPHAN-1/close').send({ reason: 'again' }));
    expectDocumented('post', `${T}/close`, await admin('post', '/v1/admin/transactions/nope/close').send({ reason: 'x' }));
    expectDocumented('post', `${T}/acknowledge`, await admin('post', '/v1/admin/transactions/generic:CR-1/acknowledge').send({ reason: 'customer paid the difference' }));
    expectDocumented('post', `${T}/acknowledge`, await admin('post', '/v1/admin/transactions/generic:CR-1/acknowledge').send({ reason: 'again' }));
    expectDocumented('post', `${T}/acknowledge`, await admin('post', '/v1/admin/transactions/generic:CR-1/acknowledge').send({}));
    expectDocumented('post', `${T}/acknowledge`, await admin('post', '/v1/admin/transactions/nope/acknowledge').send({ reason: 'x' }));
    const B = '/v1/admin/transactions/bulk';
    const bulk = await admin('post', B).send({ action: 'retry', ids: ['generic:CR-1', 'nope'], reason: 'test' });
    expect(bulk.body.refused).toHaveLength(2);
    expectDocumented('post', B, bulk);
    const unseen = await admin('post', B).send({ action: 'retry', filter: { status: 'failed' }, reason: 'test' });
    expect([unseen.status, unseen.body.error.code]).toEqual([409, 'count_mismatch']);
    expectDocumented('post', B, unseen);
    const preview = await admin('post', `${B}/preview`).send({ action: 'retry', filter: { status: 'failed' } });
    expect(preview.status).toBe(200);
    expectDocumented('post', `${B}/preview`, preview);
    expectDocumented('post', `${B}/preview`, await admin('post', `${B}/preview`).send({ action: 'retry' }));
    expectDocumented('post', B, await admin('post', B).send({ action: 'retry', filter: { status: 'failed' }, expectCount: preview.body.matched, reason: 'test' }));
    expectDocumented('post', B, await admin('post', B).send({ action: 'retry', ids: ['generic:CR-1'] }));
    expectDocumented('post', B, await admin('post', B).send({ action: 'retry', ids: ['generic:CR-1'], reason: 'x', merchantId: 'Bad' }));
    const dead = await webhook('{"id": 9, "email": "a@b.test"}', 'orders/paid', 'evt-9');
    const id = dead.body.results[0].deadLetterId as string;
    expectDocumented('get', '/v1/admin/dead-letters/{id}', await admin('get', `/v1/admin/dead-letters/${id}?unmask=true`));
    expectDocumented('get', '/v1/admin/dead-letters/{id}', await admin('get', `/v1/admin/dead-letters/${id}?unmask=yes`));
    const D = '/v1/admin/dead-letters/{id}/dismiss';
    expectDocumented('post', D, await admin('post', `/v1/admin/dead-letters/${id}/dismiss`).send({}));
    expectDocumented('post', D, await admin('post', `/v1/admin/dead-letters/${id}/dismiss`).send({ reason: 'test order' }));
    expectDocumented('post', D, await admin('post', `/v1/admin/dead-letters/${id}/dismiss`).send({ reason: 'again' }));
    expectDocumented('post', D, await admin('post', '/v1/admin/dead-letters/nope/dismiss').send({ reason: 'x' }));
    expectDocumented('post', D, await admin('post', '/v1/admin/dead-letters/%E0%A4%A/dismiss').send({ reason: 'x' }));
    const audit = await admin('get', '/v1/admin/audit?actor=admin&from=2020-01-01');
    expect(audit.body.items.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['close', 'acknowledge', 'dismiss', 'unmask']));
    expectDocumented('get', '/v1/admin/audit', audit);
    expectDocumented('get', '/v1/admin/audit', await admin('get', '/v1/admin/audit?from=yesterday'));
  });

  it('backfill: a pass on request and the accounts it reads', async () => {
    const B = '/v1/admin/backfill';
    expectDocumented('post', B, await admin('post', B).send({ pos: 'square', since: '2026-11-21T10:00:00Z' }));
    expectDocumented('post', B, await admin('post', B).send({ pos: 'loyverse', since: 'yesterday' }));
    expectDocumented('get', B, await admin('get', `${B}?merchantId=Not An Id`));
    // A Loyverse account on the simulator's fake API: a real pass, and the account it leaves behind.
    const { merchantId, accessToken } = h.sim.pos.loyverse.addAccount({});
    h.sim.pos.loyverse.addOrder(merchantId, { lines: [{ name: 'Latte', unitPrice: 450 }], customer: { phone: '+14155550123' } });
    await h.restart({ posSettings: { shopify: shopifySettings, loyverse: { apiBaseUrl: `${h.simServer.url}/loyverse`, accessToken, account: merchantId } } });
    const ran = await admin('post', B).send({ pos: 'loyverse', since: new Date(Date.now() - 3_600_000).toISOString() });
    expect(ran.body).toMatchObject({ examined: 1, refused: [] });
    expectDocumented('post', B, ran);
    expectDocumented('get', B, await admin('get', B));
  });

  it('merchants: managed by the global token alone', async () => {
    const M = '/v1/admin/merchants';
    const shop = h.sim.addMerchant({ id: 'openapi-shop', credentials: { currency: 'EUR', phoneRegion: 'DE', 'square.merchantId': 'MLOPENAPI' } });
    const created = await admin('post', M).send({ id: 'openapi-shop', name: 'Open API Shop', loyalty: { appToken: shop.appToken } });
    expect(created.status).toBe(201);
    expect(created.body.merchant.pos.square).toEqual({ merchantId: 'MLOPENAPI' });
    expectDocumented('post', M, created);
    expectDocumented('post', M, await admin('post', M).send({ id: 'openapi-shop', loyalty: { appToken: shop.appToken } }));
    expectDocumented('post', M, await admin('post', M).send({ id: 'Not An Id', loyalty: {} }));
    expectDocumented('post', M, await admin('post', M).send({ id: 'not-installed', loyalty: { appToken: 'no-such-install' } }));
    const own = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${created.body.adminToken}`);
    const forbidden = await own('get', M);
    expect(forbidden.status).toBe(403);
    expectDocumented('get', M, forbidden);
    expectDocumented('get', M, await admin('get', `${M}?limit=10`));
    expectDocumented('get', M, await admin('get', `${M}?limit=0`));
    expectDocumented('get', `${M}/{merchantId}`, await admin('get', `${M}/openapi-shop`));
    expectDocumented('get', `${M}/{merchantId}`, await admin('get', `${M}/default`));
    expectDocumented('patch', `${M}/{merchantId}`, await admin('patch', `${M}/openapi-shop`).send({ name: 'Renamed', phoneRegion: null }));
    expectDocumented('patch', `${M}/{merchantId}`, await admin('patch', `${M}/openapi-shop`).send({ status: 'closed' }));
    expectDocumented('patch', `${M}/{merchantId}`, await admin('patch', `${M}/nobody`).send({ name: 'x' }));
    const rotated = await admin('post', `${M}/openapi-shop/tokens`);
    expect(rotated.body.adminToken).not.toBe(created.body.adminToken);
    expectDocumented('post', `${M}/{merchantId}/tokens`, rotated);
    expectDocumented('post', `${M}/{merchantId}/tokens`, await admin('post', `${M}/nobody/tokens`));
    expectDocumented('post', `${M}/{merchantId}/refresh`, await admin('post', `${M}/openapi-shop/refresh`));
    shop.faults.rateLimitAll = true;
    const unavailable = await admin('post', `${M}/openapi-shop/refresh`);
    shop.faults.rateLimitAll = false;
    expect(unavailable.status).toBe(502);
    expectDocumented('post', `${M}/{merchantId}/refresh`, unavailable);
    // No loyalty API key: its history cannot be read, so no three-way report.
    expectDocumented('get', REPORT, await request(h.bridge.url).get(`${REPORT}?from=${today()}&to=${today()}`).set('authorization', `Bearer ${created.body.adminToken}`));
    // Its own records only, through its own token; and a suspended merchant's posts are refused.
    expectDocumented('post', '/v1/admin/reconcile', await request(h.bridge.url).post('/v1/admin/reconcile').set('authorization', `Bearer ${rotated.body.adminToken}`));
    expectDocumented('get', '/v1/admin/transactions/{transactionId}', await admin('get', '/v1/admin/transactions/generic:A-1?merchantId=Bad'));
    await admin('patch', `${M}/openapi-shop`).send({ status: 'suspended' });
    const suspended = await request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${rotated.body.posToken}`).send(checkout({ orderId: 'S-1' }));
    expect(suspended.status).toBe(403);
    expectDocumented('post', '/v1/checkouts/{pos}', suspended);
  });

  it("the register: Toast's loyalty integration and the guest lookup", async () => {
    const phone = '+15550007070';
    const { cardIds } = h.sim.addCustomer({ phone, firstName: 'Ann' });
    const toast = (body: unknown, headers: [string, string][] = [['authorization', TOAST_KEY]]) =>
      postRaw(`${h.bridge.url}/v1/toast/loyalty`, JSON.stringify(body), [['toast-restaurant-external-id', RESTAURANT], ['toast-transaction-guid', randomBytes(8).toString('hex')], ...headers]);
    const T = '/v1/toast/loyalty';
    expectDocumented('post', T, await toast({ toastTransactionType: 'LOYALTY_SEARCH', searchTransactionInformation: { searchCriteria: { phone } } }));
    expectDocumented('post', T, await toast({ toastTransactionType: 'LOYALTY_INQUIRE', checkTransactionInformation: { loyaltyIdentifier: cardIds[0], redemptions: [{ identifier: 'R-1' }] } }));
    expectDocumented('post', T, await toast({ toastTransactionType: 'LOYALTY_SEARCH', searchTransactionInformation: { searchCriteria: { phone: '+15550007071' } } }));
    expectDocumented('post', T, await toast({ toastTransactionType: 'LOYALTY_SEARCH' }, [['authorization', 'not-the-key']]));
    expectDocumented('post', T, await toast({ toastTransactionType: 'LOYALTY_NOPE' }));
    const L = '/v1/lookup';
    expectDocumented('post', L, await pos(L, { phone }));
    expectDocumented('post', L, await pos(L, { cardSerial: '99-999999-9' }));
    expectDocumented('post', L, await pos(L, { phone, email: 'a@b.test' }));
  });

  it('operations', async () => {
    expectDocumented('get', '/healthz', await request(h.bridge.url).get('/healthz'));
    expectDocumented('get', '/readyz', await request(h.bridge.url).get('/readyz'));
    expectDocumented('get', '/metrics', await request(h.bridge.url).get('/metrics'));
    expectDocumented('get', '/openapi.json', await request(h.bridge.url).get('/openapi.json'));
  });

  it('the schemas read back from the document do refuse what it forbids (the checks above can fail)', () => {
    const answer = z.fromJSONSchema(withDefs({ $ref: '#/components/schemas/Answer' }) as never);
    const good = { transactionId: 'generic:A-1', status: 'accrued', pos: 'generic', orderId: 'A-1', repeat: false };
    expect(answer.safeParse(good).success).toBe(true);
    expect(answer.safeParse({ ...good, status: 'lost' }).success).toBe(false);
    expect(answer.safeParse({ ...good, repeat: undefined }).success).toBe(false);
    expect(answer.safeParse({ ...good, results: [{ isSuccess: 'yes' }] }).success).toBe(false);
    // A field the document does not name is caught by the zod schema it was generated from.
    expect(COMPONENT_SCHEMAS.Answer.parse({ ...good, surprise: 1 })).not.toEqual({ ...good, surprise: 1 });
  });

  it('every operation was sampled, and every kind of refusal', () => {
    for (const [path, item] of Object.entries(served.paths as Json)) {
      for (const method of METHODS.filter((m) => item[m])) expect([...sampled].some((s) => s.startsWith(`${method} ${path} `))).toBe(true);
    }
    const statuses = new Set([...sampled].map((s) => s.split(' ')[2]));
    expect([...statuses].sort()).toEqual(expect.arrayContaining(['200', '202', '400', '401', '404', '409', '413', '415', '422']));
  });
});
