/**
 * Hostile input, property-based: malformed, oversized, deeply nested, wrongly typed and wrongly
 * encoded bodies and headers at every POS-facing endpoint of every adapter. Never a 5xx, never a
 * crash, never an upstream call, never a ledger change.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { adapters } from '../../adapters/index.js';
import { postRaw } from '../support/webhooks.js';
import { checkout, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
let baseline: { records: number; books: string };

beforeAll(async () => {
  h = await startHarness({ env: { BODY_LIMIT_BYTES: '65536' } });
  baseline = { records: await h.bridge.store.count(), books: JSON.stringify(h.sim.books()) };
});
afterAll(async () => {
  await h.close();
});

const poses = [...adapters.keys(), 'unknown-pos', '..', '%00'];
const paths = poses.flatMap((pos) => ['checkouts', 'refunds', 'webhooks'].map((kind) => `/v1/${kind}/${encodeURIComponent(pos)}`));

/** Bodies no POS sends: broken JSON, JSON of every shape, hostile nesting, random bytes. */
const hostileBody = fc.oneof(
  fc.json().map((j) => Buffer.from(j)),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify({ orderId: v, currency: v, total: v, items: [v], customer: v }))),
  fc.string().map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
  fc.integer({ min: 1, max: 5000 }).map((n) => Buffer.from(`${'['.repeat(n)}${']'.repeat(n)}`)),
  fc.integer({ min: 1, max: 3000 }).map((n) => Buffer.from(`${'{"a":'.repeat(n)}1${'}'.repeat(n)}`)),
  fc.constantFrom('', '{', '{"orderId":', 'null', '[]', '"x"', '1e999', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}').map((s) => Buffer.from(s)),
  fc.record({ total: fc.oneof(fc.double(), fc.string(), fc.constant('1e400'), fc.constant('-0.001'), fc.constant('NaN')) }).map((o) => Buffer.from(JSON.stringify(checkout({ orderId: `F-${Math.random()}`, customer: {}, ...o, currency: 'XXX' })))),
);

const hostileHeaders = fc.array(
  fc.tuple(
    fc.constantFrom('content-type', 'x-square-hmacsha256-signature', 'x-shopify-hmac-sha256', 'x-shopify-topic', 'x-clover-auth', 'toast-signature', 'x-loyverse-signature', 'x-request-id', 'x-custom'),
    fc.oneof(fc.string({ maxLength: 200 }).filter((s) => /^[\x20-\x7e]*$/.test(s)), fc.constantFrom('application/json', 'application/json; charset=utf-16', 'text/plain', 'application/xml', '', 'application/json, text/plain')),
  ),
  { maxLength: 6 },
);

async function unchanged() {
  expect(await h.bridge.store.count()).toBe(baseline.records);
  expect(JSON.stringify(h.sim.books())).toBe(baseline.books);
}

describe('hostile input at every POS-facing endpoint', () => {
  it('never answers 5xx, never calls upstream, never changes the ledger', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), hostileBody, hostileHeaders, async (path, body, headers) => {
        const hasType = headers.some(([name]) => name === 'content-type');
        const res = await postRaw(`${h.bridge.url}${path}`, body, hasType ? headers : [['content-type', 'application/json'], ...headers]);
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
      }),
      { numRuns: 400 },
    );
    await unchanged();
    expect((await fetch(`${h.bridge.url}/healthz`)).status).toBe(200);
  });

  it('refuses bodies over the limit with 413 and headers over Node’s limit with 431', async () => {
    for (const path of paths.slice(0, 3)) {
      expect((await postRaw(`${h.bridge.url}${path}`, Buffer.alloc(70_000, 0x20), [])).status).toBe(path.includes('unknown') ? 404 : 413);
    }
    const bigHeader = await postRaw(`${h.bridge.url}/v1/checkouts/generic`, '{}', [['x-big', 'a'.repeat(20_000)]]);
    expect(bigHeader.status).toBe(431);
    await unchanged();
  });

  it('answers wrong content types with 415 before reading the body', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths.filter((p) => !p.includes('unknown') && !p.includes('..') && !p.includes('%'))), fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data', 'application/x-www-form-urlencoded', 'image/png'), async (path, type) => {
        const res = await postRaw(`${h.bridge.url}${path}`, JSON.stringify(checkout()), [['content-type', type]]);
        expect(res.status).toBe(415);
      }),
      { numRuns: 50 },
    );
    await unchanged();
  });
});
