/**
 * Requests refused by Express's router or body-parser before any route code runs (security review,
 * issue 9): a 4xx in the one error envelope, saying what is wrong without echoing the request, no
 * stack logged, nothing recorded or sent upstream.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { postRaw, sendRaw, signature } from '../support/webhooks.js';

let h: Harness;
const logLines: Record<string, unknown>[] = [];
let before: { count: number; books: string };

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  h = await startHarness({ logger: createLogger('info', sink) });
  before = { count: await h.bridge.store.count(), books: JSON.stringify(h.sim.books()) };
});
afterAll(async () => {
  await h.close();
});

/** Exact path bytes and headers: supertest and fetch would normalise the path or the encoding. */
async function rawRequest(method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | string) {
  const res = await sendRaw(method, h.bridge.url, path, body, Object.entries(headers));
  return { ...res, json: res.body };
}

async function expectNothingRecordedOrLogged(from: number) {
  expect(await h.bridge.store.count()).toBe(before.count);
  expect(JSON.stringify(h.sim.books())).toBe(before.books);
  const lines = logLines.slice(from);
  expect(lines.length).toBeGreaterThan(0); // the request log saw the request
  expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
  expect(lines.filter((l) => JSON.stringify(l).includes('"stack"'))).toEqual([]);
}

const json = { 'content-type': 'application/json' };
const body = JSON.stringify(checkout({ orderId: 'E-1' }));

describe('bad percent-encoding in a path parameter', () => {
  it.each([
    ['POST', '/v1/checkouts/%zz', json],
    ['POST', '/v1/refunds/%E0%A4%A', json],
    ['POST', '/v1/webhooks/%ff', json],
    ['GET', '/v1/admin/transactions/%ff', { authorization: `Bearer ${ADMIN_TOKEN}` }],
    ['POST', '/v1/admin/transactions/%zz/retry', { authorization: `Bearer ${ADMIN_TOKEN}` }],
  ])('%s %s → 400 invalid_path, nothing echoed', async (method, path, headers) => {
    const from = logLines.length;
    const res = await rawRequest(method, path, headers, method === 'POST' ? body : undefined);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('invalid_path');
    expect(res.json.error.message).toMatch(/percent-encoding/);
    expect(res.text).not.toMatch(/%zz|%ff|%E0/i);
    expect(res.json.requestId).toEqual(expect.any(String));
    await expectNothingRecordedOrLogged(from);
  });

  it('an admin path with bad encoding and no token is still 401: the token is checked first', async () => {
    const res = await rawRequest('GET', '/v1/admin/transactions/%ff');
    expect(res.status).toBe(401);
  });
});

describe('a Content-Encoding the body does not have', () => {
  it.each(['gzip', 'deflate', 'br', 'GZIP'])('Content-Encoding: %s on a plain JSON body → 400 invalid_body_encoding', async (coding) => {
    for (const path of ['/v1/checkouts/generic', '/v1/refunds/generic', '/v1/webhooks/shopify']) {
      const from = logLines.length;
      const res = await rawRequest('POST', path, { ...json, 'content-encoding': coding }, body);
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe('invalid_body_encoding');
      expect(res.json.error.message).toContain(coding.toLowerCase());
      await expectNothingRecordedOrLogged(from);
    }
  });

  it('an admin body that is not what its Content-Encoding says → 400', async () => {
    const from = logLines.length;
    const res = await rawRequest('POST', '/v1/admin/transactions/generic:none/reverse', { ...json, 'content-encoding': 'gzip', authorization: `Bearer ${ADMIN_TOKEN}` }, '{}');
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('invalid_body_encoding');
    await expectNothingRecordedOrLogged(from);
  });

  it('an unknown Content-Encoding → 415, without echoing it', async () => {
    const from = logLines.length;
    const res = await rawRequest('POST', '/v1/checkouts/generic', { ...json, 'content-encoding': 'x-evil-<script>' }, body);
    expect(res.status).toBe(415);
    expect(res.text).not.toContain('evil');
    await expectNothingRecordedOrLogged(from);
  });
});

describe('an unknown route', () => {
  it('names at most the first 100 characters of the path', async () => {
    const res = await rawRequest('GET', `/v1/${'x'.repeat(5000)}`);
    expect(res.status).toBe(404);
    expect(res.json.error.message.length).toBeLessThan(140);
  });
});

describe('a body that fails everywhere (error echo)', () => {
  it('an 869 kB body of unknown keys → 400 of a few kB naming a few keys and counting the rest', async () => {
    const huge: Record<string, unknown> = checkout({ orderId: 'E-2' });
    for (let i = 0, size = JSON.stringify(huge).length; size < 869_000; i++, size += `,"unknown-key-${i}":1`.length) huge[`unknown-key-${i}`] = 1;
    const sent = JSON.stringify(huge);
    const unknown = Object.keys(huge).length - Object.keys(checkout()).length;
    const from = logLines.length;
    const res = await rawRequest('POST', '/v1/checkouts/generic', json, sent);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('invalid_payload');
    expect(res.text.length).toBeLessThan(4_000);
    expect(res.json.error.message).toContain('"unknown-key-0"');
    expect(res.json.error.message).toContain(`and ${unknown - 5} more`);
    await expectNothingRecordedOrLogged(from);
  });

  it('thousands of bad fields → the first 20 issues, each bounded, and a count of the rest', async () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({ id: `sku-${i}`, quantity: 'x'.repeat(1000), total: true }));
    const from = logLines.length;
    const res = await rawRequest('POST', '/v1/checkouts/generic', json, JSON.stringify(checkout({ orderId: 'E-3', items })));
    expect(res.status).toBe(400);
    const issues = res.json.error.issues as { field: string; message: string }[];
    expect(issues).toHaveLength(21);
    expect(issues[0]!.field).toBe('items.0.quantity');
    expect(issues[20]).toEqual({ field: '', message: expect.stringMatching(/^and \d+ more issues not listed$/) });
    for (const issue of issues) expect(issue.message.length + issue.field.length).toBeLessThanOrEqual(400);
    expect(res.text.length).toBeLessThan(10_000);
    await expectNothingRecordedOrLogged(from);
  });
});

describe('duplicate keys in a POS body', () => {
  /** The checkout body's text with `key` given twice at the first place it appears. */
  const twice = (text: string, member: string, earlier: string) => text.replace(member, `${earlier},${member}`);
  const base = JSON.stringify(checkout({ orderId: 'D-1' }));

  it.each([
    ['a top-level amount', twice(base, '"total":"59.97"', '"total":"1"'), 'total'],
    ['the same key written with an escape', twice(base, '"total":"59.97"', '"\\u0074otal":"1"'), 'total'],
    ['a nested field', twice(base, '"phone":"+15550001111"', '"phone":"+15550002222"'), 'customer.phone'],
    ['a field of the second line', JSON.stringify(checkout({ orderId: 'D-1', items: [{ id: 'a', quantity: 1, total: '1.00' }, { id: 'b', quantity: 1, total: '2.00' }] })).replace('"total":"2.00"', '"total":"0.01","total":"2.00"'), 'items.1.total'],
  ])('a checkout with %s twice → 400 naming its path, nothing recorded', async (_name, text, field) => {
    const from = logLines.length;
    const res = await rawRequest('POST', '/v1/checkouts/generic', json, text);
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: 'invalid_payload', message: `${field}: appears more than once`, issues: [{ field, message: 'appears more than once' }] });
    expect(await h.bridge.store.get('generic:D-1')).toBeUndefined();
    await expectNothingRecordedOrLogged(from);
  });

  it('a refund with refundId twice → 400', async () => {
    const res = await rawRequest('POST', '/v1/refunds/generic', json, '{"orderId":"D-2","refundId":"R-1","refundId":"R-2"}');
    expect(res.status).toBe(400);
    expect(res.json.error.message).toBe('refundId: appears more than once');
  });

  it('the same key in different objects, and duplicate-looking text inside strings, are fine', async () => {
    const text = JSON.stringify(checkout({ orderId: 'D-3', items: [{ id: 'a', name: '{"total":"1","total":"2"} \" \\', quantity: 1, total: '59.97' }] }));
    const res = await rawRequest('POST', '/v1/checkouts/generic', json, text);
    expect(res.status).toBe(200);
    expect(res.json.status).toBe('accrued');
    before = { count: await h.bridge.store.count(), books: JSON.stringify(h.sim.books()) };
  });

  it('an authentic webhook with a duplicate key is kept as a dead letter, nothing accrued', async () => {
    const order = JSON.stringify({ id: 77001, financial_status: 'paid', currency: 'USD', subtotal_price: '1000.00', line_items: [] });
    const text = order.replace('"subtotal_price":', '"subtotal_price":"1.00","subtotal_price":');
    const settings = { webhookSecret: SANDBOX_WEBHOOK_SECRET, apiBaseUrl: '' };
    const res = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, text, [signature(shopifyAdapter, settings, text), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', 'evt-dup-1']]);
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([{ key: 'delivery', action: 'dead_lettered', deadLetterId: expect.any(String), reason: 'subtotal_price: appears more than once', issues: [{ field: 'subtotal_price', message: 'appears more than once' }] }]);
    const letter = await h.bridge.store.getDeadLetter(res.body.results[0].deadLetterId);
    expect(letter).toMatchObject({ pos: 'shopify', body: text, issues: [{ field: 'subtotal_price', message: 'appears more than once' }] });
    expect(JSON.stringify(h.sim.books())).toBe(before.books);
  });
});
