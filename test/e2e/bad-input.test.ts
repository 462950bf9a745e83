/**
 * Bad input: a clear 4xx naming the problem, no upstream call, and nothing already recorded lost or
 * changed. One accrued order is recorded first; after every bad request the ledger and the
 * simulator's books must be exactly as they were.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import request from 'supertest';
import { checkout, startHarness, type Harness, postJson } from '../support/harness.js';

let h: Harness;
let before: { count: number; record: unknown; books: unknown };

beforeAll(async () => {
  h = await startHarness({ env: { BODY_LIMIT_BYTES: '4096' } });
  const res = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout());
  expect(res.body.status).toBe('accrued');
  before = { count: await h.bridge.store.count(), record: await h.bridge.store.get('generic:A-1001'), books: h.sim.books() };
});
afterAll(async () => {
  await h.close();
});

async function expectNothingChanged() {
  expect(await h.bridge.store.count()).toBe(before.count);
  expect(await h.bridge.store.get('generic:A-1001')).toEqual(before.record);
  expect(h.sim.books()).toEqual(before.books);
}

/** Exact bytes and headers, which supertest would otherwise re-encode. */
function postRaw(path: string, body: Buffer, contentType: string | undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${h.bridge.url}${path}`, { method: 'POST', headers: { ...(contentType ? { 'content-type': contentType } : {}), 'content-length': body.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const send = (path: string, body: string, contentType = 'application/json') => request(h.bridge.url).post(path).set('content-type', contentType).send(body);

const badCheckouts: [string, unknown, string][] = [
  ['a missing orderId', checkout({ orderId: undefined }), 'orderId'],
  ['an empty orderId', checkout({ orderId: '' }), 'orderId'],
  ['orderId of the wrong type', checkout({ orderId: 1001 }), 'orderId'],
  ['a missing total', checkout({ total: undefined }), 'total'],
  ['a negative total', checkout({ total: '-5.00' }), 'total'],
  ['a non-numeric total', checkout({ total: 'twelve' }), 'total'],
  ['a total written with a comma', checkout({ total: '59,97' }), 'total'],
  ['a boolean tax', checkout({ tax: true }), 'tax'],
  ['a negative tip number', checkout({ tip: -1 }), 'tip'],
  ['an unknown currency', checkout({ currency: 'XYZ' }), 'currency'],
  ['a lower-case currency', checkout({ currency: 'usd' }), 'currency'],
  ['a zero quantity', checkout({ items: [{ id: 'a', quantity: 0, total: '1.00' }] }), 'items.0.quantity'],
  ['a negative quantity', checkout({ items: [{ id: 'a', quantity: -2, total: '1.00' }] }), 'items.0.quantity'],
  ['an item without total or unit price', checkout({ items: [{ id: 'a', quantity: 1 }] }), 'items.0.total'],
  ['a negative line total', checkout({ items: [{ id: 'a', quantity: 1, total: '-1.00' }] }), 'items.0.total'],
  ['an unknown field', checkout({ totl: '1.00' }), ''],
  ['an invalid phone', checkout({ customer: { phone: '12' } }), 'customer.phone'],
  ['an invalid email', checkout({ customer: { email: 'not-an-email' } }), 'customer.email'],
  ['a bad closedAt', checkout({ closedAt: 'yesterday' }), 'closedAt'],
  ['an array body', [checkout()], ''],
  ['a string body', 'hello', ''],
  ['null', null, ''],
];

describe('POST /v1/checkouts/generic with a bad payload', () => {
  it.each(badCheckouts)('%s → 400 naming the field', async (_name, body, field) => {
    const res = await send('/v1/checkouts/generic', JSON.stringify(body));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_payload');
    if (field) expect(res.body.error.issues.map((i: { field: string }) => i.field)).toContain(field);
    expect(res.body.error.message.length).toBeGreaterThan(0);
    await expectNothingChanged();
  });

  it('names every bad field at once', async () => {
    const res = await send('/v1/checkouts/generic', JSON.stringify(checkout({ orderId: '', total: 'x', currency: 'ABCD' })));
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((i: { field: string }) => i.field).sort()).toEqual(['currency', 'orderId', 'total'].sort());
    await expectNothingChanged();
  });

  it('says in words what is missing or wrong, not the validator text', async () => {
    const res = await send('/v1/checkouts/generic', JSON.stringify({ orderId: 1002, total: '1.00', colour: 'red' }));
    expect(res.status).toBe(400);
    // currency may be left out (the merchant's is taken): not among the problems.
    expect(res.body.error.message).toBe('orderId: must be a string, got a number; unknown field "colour"');
    expect(res.body.error.message).not.toMatch(/Invalid input|expected|received/);
    await expectNothingChanged();
  });

  it('malformed JSON → 400', async () => {
    const res = await send('/v1/checkouts/generic', '{"orderId": "A-1002",');
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/not valid JSON/);
    await expectNothingChanged();
  });

  it('an empty body → 400', async () => {
    const res = await send('/v1/checkouts/generic', '');
    expect(res.status).toBe(400);
    await expectNothingChanged();
  });

  it('bytes that are not UTF-8 → 400', async () => {
    const res = await postRaw('/v1/checkouts/generic', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'application/json');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).error.message).toMatch(/UTF-8/);
    await expectNothingChanged();
  });

  it('nesting deeper than the limit → 400', async () => {
    const res = await send('/v1/checkouts/generic', `${'['.repeat(100)}${']'.repeat(100)}`);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/nested deeper/);
    await expectNothingChanged();
  });

  it('an oversized body → 413', async () => {
    const res = await send('/v1/checkouts/generic', JSON.stringify(checkout({ note: 'x'.repeat(10_000) })));
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    await expectNothingChanged();
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'])('content-type %s → 415', async (type) => {
    const res = await send('/v1/checkouts/generic', JSON.stringify(checkout({ orderId: 'A-2000' })), type);
    expect(res.status).toBe(415);
    expect(res.body.error.code).toBe('unsupported_media_type');
    await expectNothingChanged();
  });

  it('no content-type → 415', async () => {
    const res = await postRaw('/v1/checkouts/generic', Buffer.from(JSON.stringify(checkout({ orderId: 'A-2001' }))), undefined);
    expect(res.status).toBe(415);
    await expectNothingChanged();
  });

  it.each(['/v1/checkouts/ncr', '/v1/refunds/ncr', '/v1/checkouts/GENERIC'])('unknown POS %s → 404', async (path) => {
    const res = await send(path, JSON.stringify(checkout({ orderId: 'A-3000' })));
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('unknown_pos');
    await expectNothingChanged();
  });
});

describe('POST /v1/refunds/generic with a bad payload', () => {
  it.each([
    ['a missing orderId', { refundId: 'R-1' }, 'orderId'],
    ['a partial refund without refundId', { orderId: 'A-1001', amount: '1.00' }, 'refundId'],
    ['a negative amount', { orderId: 'A-1001', refundId: 'R-1', amount: '-1.00' }, 'amount'],
    ['a fractional item quantity', { orderId: 'A-1001', refundId: 'R-1', items: [{ id: 'sku-1', quantity: 1.5, total: '1.00' }] }, 'items.0.quantity'],
    ['an unknown field', { orderId: 'A-1001', refund: 'all' }, ''],
  ])('%s → 400', async (_name, body, field) => {
    const res = await send('/v1/refunds/generic', JSON.stringify(body));
    expect(res.status).toBe(400);
    if (field) expect(res.body.error.issues.map((i: { field: string }) => i.field)).toContain(field);
    await expectNothingChanged();
  });

  it('malformed JSON → 400 and the accrued order stays accrued', async () => {
    const res = await send('/v1/refunds/generic', '{"orderId": ');
    expect(res.status).toBe(400);
    await expectNothingChanged();
  });
});
