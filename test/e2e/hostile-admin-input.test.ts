/**
 * Hostile input on both ledger stores (the file ledger and PostgreSQL), over HTTP (issue 19, rows 5,
 * 6, 10, 11 and 13; docs/security.md, "Hostile input"): the same 4xx on every store, naming the field
 * or parameter, and nothing recorded, acted on or audited.
 * - A lone surrogate (`"\ud800"`) in a POS body or an admin body is a 400 naming its path (it was a
 *   500 "invalid input syntax for type json" on PostgreSQL, recorded on the file ledger); NUL in an
 *   admin body too. An authentic webhook holding one is kept as a dead letter naming the field.
 * - NUL, other control characters or bytes that are not UTF-8 in an admin query value are a 400
 *   naming the parameter, and in a path id a 404 (NUL was a 500 on PostgreSQL).
 * - Admin bodies: a key given twice is a 400 naming it, a Content-Type other than JSON a 415 naming
 *   application/json, and the action does not run; a POST that needs no body still works without one.
 * - Errors cut what they repeat of the input at 200 characters, and a 404 names the transactionId as
 *   the client gave it, never the ledger's internal key (`shop-a/…`).
 * - A three-way report for a range the loyalty history cannot serve (the year 9999, before 2000, to
 *   before from, longer than the maximum) is a 400 naming the parameter, not a 502.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, sendRaw, signature } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

const POS_TOKEN = 'pos-token-hostile-admin-0123456789';
const SHOPIFY = { webhookSecret: SANDBOX_WEBHOOK_SECRET, apiBaseUrl: '' };
const LONG_ID = `generic:${'x'.repeat(15_000)}`;

interface Issue {
  field: string;
  message: string;
}

for (const store of STORES) {
  store.describe(`hostile admin and body input on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let shop: { adminToken: string; posToken: string };

    const as = (token: string) => (method: string, path: string, body?: string, headers: [string, string][] = []) => sendRaw(method, h.bridge.url, path, body, [['authorization', `Bearer ${token}`], ...headers]);
    const admin = as(ADMIN_TOKEN);
    const pos = (path: string, body: unknown, token = POS_TOKEN) => postRaw(`${h.bridge.url}${path}`, JSON.stringify(body), [['authorization', `Bearer ${token}`]]);
    /** Everything a refused request could have changed: the records, the audit trail, the dead letters, the loyalty service's books. */
    const snapshot = async () => ({
      records: await h.bridge.store.count(),
      audit: JSON.stringify((await admin('GET', '/v1/admin/audit?limit=500')).body.items),
      letters: (await admin('GET', '/v1/admin/dead-letters?limit=500')).body.total as number,
      failed: await h.bridge.store.get('generic:HF-1'),
      books: JSON.stringify(h.sim.books()),
    });
    const expectIssue = (res: { status: number; body: any }, field: string, message: string | RegExp) => {
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_payload');
      expect(res.body.error.issues).toEqual([{ field, message: typeof message === 'string' ? message : expect.stringMatching(message) }]);
    };

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'hostile_admin');
      h = await startHarness({
        env: { POS_TOKEN, ...(schema ? { LEDGER_URL: schema.url } : {}) },
        overrides: { startWorker: false, posSettings: { shopify: SHOPIFY }, secretsKey: randomBytes(32).toString('base64') },
      });
      const installed = h.sim.addMerchant({ id: 'shop-a' });
      const created = await admin('POST', '/v1/admin/merchants', JSON.stringify({ id: 'shop-a', loyalty: { appToken: installed.appToken } }));
      expect(created.status).toBe(201);
      shop = { adminToken: created.body.adminToken, posToken: created.body.posToken };
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'H-1' }))).body.status).toBe('accrued');
      // A record an operator can act on (acknowledge, retry): the loyalty service refused it.
      h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
      expect((await pos('/v1/checkouts/generic', checkout({ orderId: 'HF-1' }))).body.status).toBe('failed');
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    describe('lone surrogates and NUL in bodies (row 5)', () => {
      it.each([
        ['orderId', () => checkout({ orderId: 'S-\ud800' }), 'orderId'],
        ['an item name', () => checkout({ orderId: 'S-2', items: [{ id: 'a', name: 'Latte \udc00', quantity: 1, total: '59.97' }] }), 'items.0.name'],
        ["the customer's name", () => checkout({ orderId: 'S-3', customer: { phone: '+15550001111', firstName: 'A\ud83d' } }), 'customer.firstName'],
        ['a key', () => ({ ...checkout({ orderId: 'S-4' }), 'note\ud800': 'x' }), 'note\\ud800'],
      ])('a checkout with a lone surrogate in %s → 400 naming it, nothing recorded or sent', async (_name, body, field) => {
        const before = await snapshot();
        const res = await pos('/v1/checkouts/generic', body());
        expectIssue(res, field, /^(\(a key\) )?must not contain a lone UTF-16 surrogate/);
        expect(await snapshot()).toEqual(before);
      });

      it('a refund with a lone surrogate in its refundId → 400 naming it, nothing reversed', async () => {
        const before = await snapshot();
        expectIssue(await pos('/v1/refunds/generic', { orderId: 'H-1', refundId: 'R-\udfff' }), 'refundId', /lone UTF-16 surrogate/);
        expect(await snapshot()).toEqual(before);
        expect((await h.bridge.store.get('generic:H-1'))!.status).toBe('accrued');
      });

      it('a surrogate pair (an emoji) is text like any other: recorded alike on every store', async () => {
        const res = await pos('/v1/checkouts/generic', checkout({ orderId: 'S-5', items: [{ id: 'a', name: 'Latte 😀', quantity: 3, unitPrice: '19.99', total: '59.97' }] }));
        expect(res.status).toBe(200);
        expect(res.body.status).toBe('accrued');
      });

      it('an authentic webhook with a lone surrogate is kept as a dead letter naming the field, nothing accrued', async () => {
        const books = JSON.stringify(h.sim.books());
        const text = JSON.stringify({ id: 91001, financial_status: 'paid', currency: 'USD', total_price: '10.00', line_items: [{ id: 1, name: 'Bread\ud800', quantity: 1, price: '10.00' }] });
        const res = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, text, [signature(shopifyAdapter, SHOPIFY, text), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', `evt-surrogate-${store.name}`]]);
        expect(res.status).toBe(202);
        expect(res.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', issues: [{ field: 'line_items.0.name', message: expect.stringContaining('lone UTF-16 surrogate') }] })]);
        const letter = await admin('GET', `/v1/admin/dead-letters/${res.body.results[0].deadLetterId}`);
        expect(letter.status).toBe(200);
        expect(letter.body.issues).toEqual([{ field: 'line_items.0.name', message: expect.stringContaining('lone UTF-16 surrogate') }]);
        expect(JSON.stringify(h.sim.books())).toBe(books);
      });

      it.each([
        ['a reason with a lone surrogate', '/v1/admin/transactions/generic:HF-1/acknowledge', { reason: 'x\ud800' }, 'reason'],
        ['a reason with NUL', '/v1/admin/transactions/generic:HF-1/acknowledge', { reason: 'x\u0000y' }, 'reason'],
        ['a bulk id with NUL', '/v1/admin/transactions/bulk', { action: 'acknowledge', ids: ['generic:HF-1', 'generic:\u0000'], reason: 'r' }, 'ids.1'],
        ['a bulk id with a lone surrogate', '/v1/admin/transactions/bulk', { action: 'acknowledge', ids: ['generic:\udbff'], reason: 'r' }, 'ids.0'],
        ['a merchant name with NUL', '/v1/admin/merchants', { id: 'shop-z', name: 'Z\u0000', loyalty: { appToken: 'x' } }, 'name'],
        ['a reason with a C1 control', '/v1/admin/transactions/generic:HF-1/acknowledge', { reason: 'a\u0085b' }, 'reason'],
        ['a reason with an escape (ESC) and CSI', '/v1/admin/transactions/generic:HF-1/acknowledge', { reason: 'x\u001b[31m\u009b2J' }, 'reason'],
      ])('an admin body with %s → 400 naming it, nothing done', async (_name, path, body, field) => {
        const before = await snapshot();
        expectIssue(await admin('POST', path, JSON.stringify(body)), field, 'must not contain a control character (NUL, C0 but tab and line breaks, DEL, C1) or a lone UTF-16 surrogate (\\ud800-\\udfff)');
        expect(await snapshot()).toEqual(before);
      });
    });

    describe('NUL, control characters and bytes that are not UTF-8 in admin queries and ids (row 6)', () => {
      it.each([
        ['/v1/admin/transactions?orderId=%00x', 'orderId', 'must not contain control characters'],
        ['/v1/admin/transactions?refundId=%00', 'refundId', 'must not contain control characters'],
        ['/v1/admin/transactions?pos=%00', 'pos', 'must not contain control characters'],
        ['/v1/admin/transactions?customer=a%00b', 'customer', 'must not contain control characters'],
        ['/v1/admin/transactions?status=accrued%1b', 'status', 'must not contain control characters'],
        ['/v1/admin/transactions?pos=%C2%85', 'pos', 'must not contain control characters'],
        ['/v1/admin/transactions?orderId=%ED%A0%80', 'orderId', 'is not valid percent-encoding of UTF-8 text'],
        ['/v1/admin/transactions?orderId=%ff', 'orderId', 'is not valid percent-encoding of UTF-8 text'],
        ['/v1/admin/transactions?orderId=%zz', 'orderId', 'is not valid percent-encoding of UTF-8 text'],
        ['/v1/admin/dead-letters?pos=%00', 'pos', 'must not contain control characters'],
        ['/v1/admin/audit?actor=%00', 'actor', 'must not contain control characters'],
        ['/v1/admin/attention?merchantId=%00', 'merchantId', 'must not contain control characters'],
        ['/v1/admin/backfill?merchantId=%00', 'merchantId', 'must not contain control characters'],
        [`/v1/admin/reports/reconcile?from=%00&to=${new Date().toISOString().slice(0, 10)}`, 'from', 'must not contain control characters'],
        ['/v1/admin/transactions/generic:H-1?merchantId=%00', 'merchantId', 'must not contain control characters'],
      ])('GET %s → 400 naming the parameter', async (path, field, message) => {
        expectIssue(await admin('GET', path), field, message);
      });

      it('a parameter name that is not UTF-8 or holds a control character → 400', async () => {
        for (const path of ['/v1/admin/transactions?%ff=1', '/v1/admin/transactions?a%00=1']) {
          const res = await admin('GET', path);
          expect(res.status).toBe(400);
          expect(res.body.error.issues[0].message).toMatch(/query parameter name/);
        }
      });

      it.each([
        ['GET', '/v1/admin/transactions/a%00b'],
        ['GET', '/v1/admin/transactions/a%00b/payload'],
        ['GET', '/v1/admin/transactions/a%00b/evidence'],
        ['POST', '/v1/admin/transactions/a%00b/retry'],
        ['POST', '/v1/admin/transactions/a%00b/reverse'],
        ['GET', '/v1/admin/dead-letters/a%00b'],
        ['POST', '/v1/admin/dead-letters/a%00b/replay'],
        ['GET', '/v1/admin/merchants/shop-a%00'],
        ['GET', '/v1/admin/transactions/generic:H-1%7f'],
        ['GET', '/v1/admin/transactions/generic:H-1%c2%9b'],
      ])('%s %s → 404, nothing done', async (method, path) => {
        const before = await snapshot();
        const res = await admin(method, path);
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('not_found');
        expect(await snapshot()).toEqual(before);
      });

      it('the same ids without the control character are found: only the hostile ones are refused', async () => {
        expect((await admin('GET', '/v1/admin/transactions/generic:H-1')).status).toBe(200);
        expect((await admin('GET', '/v1/admin/transactions?orderId=H-')).body.total).toBeGreaterThan(0);
        expect((await admin('GET', `/v1/admin/transactions?customer=${encodeURIComponent('(555) 000-1111')}&merchantId=default`)).status).toBe(200);
      });

      it('without a token, a hostile query or path is still a 401: the token is checked first', async () => {
        expect((await sendRaw('GET', h.bridge.url, '/v1/admin/transactions?pos=%00', undefined)).status).toBe(401);
        expect((await sendRaw('GET', h.bridge.url, '/v1/admin/transactions/a%00b', undefined)).status).toBe(401);
      });
    });

    describe('admin bodies: repeated keys and content types (row 10)', () => {
      it('a reason given twice → 400 naming it; the record is not acknowledged, nothing audited', async () => {
        const before = await snapshot();
        const res = await admin('POST', '/v1/admin/transactions/generic:HF-1/acknowledge', '{"reason":"x","reason":"y"}');
        expectIssue(res, 'reason', 'appears more than once');
        expect(await snapshot()).toEqual(before);
      });

      it.each([
        ['/v1/admin/transactions/bulk', '{"action":"acknowledge","ids":["generic:HF-1"],"reason":"a","action":"retry"}', 'action'],
        ['/v1/admin/transactions/generic:HF-1/resolve', '{"outcome":"accrued","outcome":"not_accrued"}', 'outcome'],
        ['/v1/admin/backfill', '{"pos":"square","since":"2026-01-01T00:00:00Z","pos":"shopify"}', 'pos'],
        ['/v1/admin/merchants', '{"id":"shop-b","loyalty":{"appToken":"a","appToken":"b"}}', 'loyalty.appToken'],
      ])('POST %s with a key twice → 400 naming it', async (path, body, field) => {
        const before = await snapshot();
        expectIssue(await admin('POST', path, body), field, 'appears more than once');
        expect(await snapshot()).toEqual(before);
      });

      it.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'text/json'])('Content-Type %s on an action with a body → 415 naming application/json; the action does not run', async (type) => {
        const before = await snapshot();
        for (const [path, body] of [
          ['/v1/admin/transactions/generic:HF-1/acknowledge', '{"reason":"settled by phone"}'],
          ['/v1/admin/transactions/generic:HF-1/retry', 'reason=again'],
          ['/v1/admin/transactions/bulk', '{"action":"acknowledge","ids":["generic:HF-1"],"reason":"r"}'],
          ['/v1/admin/reconcile', '{}'],
        ] as const) {
          const res = await admin('POST', path, body, [['content-type', type]]);
          expect(res.status).toBe(415);
          expect(res.body.error).toEqual({ code: 'unsupported_media_type', message: expect.stringContaining('content-type must be application/json') });
        }
        expect(await snapshot()).toEqual(before);
      });

      it('a body with no Content-Type at all → 415: the reason is never dropped', async () => {
        const before = await snapshot();
        const body = Buffer.from('{"reason":"r"}');
        const url = new URL(`${h.bridge.url}/v1/admin/transactions/generic:HF-1/acknowledge`);
        // sendRaw would add a JSON Content-Type: this request has none.
        const res = await new Promise<{ status: number }>((resolve, reject) => {
          const req = http.request({ hostname: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-length': body.length } }, (answer) => {
            answer.resume();
            answer.on('end', () => resolve({ status: answer.statusCode! }));
          });
          req.on('error', reject);
          req.end(body);
        });
        expect(res.status).toBe(415);
        expect(await snapshot()).toEqual(before);
      });

      it('a 415 repeats at most 200 characters of the Content-Type', async () => {
        const res = await admin('POST', '/v1/admin/transactions/generic:HF-1/acknowledge', '{"reason":"r"}', [['content-type', `text/${'p'.repeat(5000)}`]]);
        expect(res.status).toBe(415);
        expect(res.body.error.message.length).toBeLessThan(300);
      });

      it('actions that need no body work without one (no body, no Content-Type); those that need a reason say so', async () => {
        expect((await admin('POST', '/v1/admin/reconcile?budgetMs=1000')).status).toBe(200);
        expect((await admin('POST', '/v1/admin/merchants/shop-a/refresh')).status).toBe(200);
        const close = await admin('POST', '/v1/admin/transactions/generic:HF-1/close');
        expectIssue(close, 'reason', 'is required');
        // The refusal cleared: the retry goes through without a body and accrues.
        h.sim.faults.clear();
        const retry = await admin('POST', '/v1/admin/transactions/generic:HF-1/retry');
        expect(retry.status).toBe(200);
        expect(retry.body.status).toBe('accrued');
        const reverse = await admin('POST', '/v1/admin/transactions/generic:HF-1/reverse', '');
        expect(reverse.status).toBe(200);
        expect(reverse.body.status).toBe('reversed');
        const trail = (await admin('GET', '/v1/admin/audit?limit=20')).body.items as { action: string; target: string; reason?: string }[];
        expect(trail.filter((e) => e.target === 'generic:HF-1').map((e) => e.action)).toEqual(['reverse', 'retry']);
      });
    });

    describe('what errors repeat of the input (row 11)', () => {
      const merchant = () => as(shop.adminToken);

      it.each([
        ['GET', '/v1/admin/transactions/{id}', undefined],
        ['GET', '/v1/admin/transactions/{id}/payload', undefined],
        ['GET', '/v1/admin/transactions/{id}/evidence', undefined],
        ['POST', '/v1/admin/transactions/{id}/retry', undefined],
        ['POST', '/v1/admin/transactions/{id}/reverse', undefined],
        ['POST', '/v1/admin/transactions/{id}/resolve', '{"outcome":"accrued"}'],
        ['POST', '/v1/admin/transactions/{id}/close', '{"reason":"r"}'],
        ['POST', '/v1/admin/transactions/{id}/acknowledge', '{"reason":"r"}'],
        ['GET', '/v1/admin/dead-letters/{id}', undefined],
        ['POST', '/v1/admin/dead-letters/{id}/dismiss', '{"reason":"r"}'],
      ])("a merchant's %s %s with a 15,000-character id → a short 404 naming the id as given, never the ledger key", async (method, path, body) => {
        const res = await merchant()(method, path.replace('{id}', LONG_ID), body);
        expect(res.status).toBe(404);
        expect(res.text.length).toBeLessThan(500);
        expect(res.body.error.message).toMatch(/^no (ledger record|dead letter) generic:x{190,}…$/);
        expect(res.text).not.toContain('shop-a/');
      });

      it('a 404 for a short id names it whole, as the client gave it', async () => {
        const res = await merchant()('POST', '/v1/admin/transactions/generic:NOPE-1/retry');
        expect(res.status).toBe(404);
        expect(res.body.error.message).toBe('no ledger record generic:NOPE-1');
      });

      it('a merchant id no merchant can have is a short 404', async () => {
        const res = await admin('GET', `/v1/admin/merchants/${'M'.repeat(15_000)}`);
        expect(res.status).toBe(404);
        expect(res.text.length).toBeLessThan(500);
      });

      it('a bulk action names each id it refused, cut at 200 characters', async () => {
        const id = `generic:${'y'.repeat(290)}`;
        const res = await merchant()('POST', '/v1/admin/transactions/bulk', JSON.stringify({ action: 'retry', ids: [id], reason: 'r' }));
        expect(res.status).toBe(200);
        expect(res.body.refused).toEqual([{ id, why: expect.stringMatching(/^no ledger record generic:y+…$/) }]);
        expect(res.body.refused[0].why.length).toBeLessThanOrEqual('no ledger record '.length + 200);
      });
    });

    describe("a masked dead letter shows no customer's contact (row 9)", () => {
      it('phone-like keys, national phone formats and emails with (at) are masked; dates, amounts and ids are kept; unmasking shows them', async () => {
        const order = {
          id: 91002,
          financial_status: 'paid',
          currency: 'USD',
          created_at: '2026-11-21T10:00:00+01:00',
          total_price: '59.97',
          note: 'call 0151-12345678 or (415) 555-0123, or write ANN(at)example.com',
          customer: { id: 9, first_name: 'Ann', mobile: '015199998888', phone: '+15550001111', email: 'ann@example.com' },
          line_items: [{ id: 1, sku: 'SKU-1', name: 'Latte', quantity: 3, price: '19.99' }],
        };
        // A key given twice: the delivery is kept as a dead letter, byte for byte.
        const text = JSON.stringify(order).replace('"total_price":', '"total_price":"1.00","total_price":');
        const res = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, text, [signature(shopifyAdapter, SHOPIFY, text), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', `evt-mask-${store.name}`]]);
        expect(res.body.results[0].action).toBe('dead_lettered');
        const id = res.body.results[0].deadLetterId as string;

        const masked = await admin('GET', `/v1/admin/dead-letters/${id}`);
        expect(masked.body.masked).toBe(true);
        for (const contact of ['015199998888', '0151-12345678', '555-0123', '5550001111', 'ANN(at)', 'ann@']) expect(masked.body.body).not.toContain(contact);
        expect(JSON.parse(masked.body.body)).toMatchObject({
          id: 91002,
          created_at: '2026-11-21T10:00:00+01:00',
          total_price: '59.97',
          note: 'call *** or ***, or write ***@***',
          customer: { first_name: 'Ann', mobile: '***', phone: '***', email: '***' },
          line_items: [{ sku: 'SKU-1', name: 'Latte', price: '19.99' }],
        });

        const clear = await admin('GET', `/v1/admin/dead-letters/${id}?unmask=true`);
        expect(clear.body.body).toBe(text);
      });
    });

    describe('a report for a range the loyalty history cannot serve (row 13)', () => {
      const today = () => new Date().toISOString().slice(0, 10);
      const days = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);

      it.each([
        ['the year 9999', 'from=9999-01-01&to=9999-01-02', 'from', /must not be later than now/],
        ['from tomorrow', () => `from=${days(1)}&to=${days(2)}`, 'from', /must not be later than now/],
        ['from before 2000', 'from=1999-12-31&to=2000-01-02', 'from', /must be 2000-01-01 or later/],
        ['the year 0', 'from=0000-01-01&to=0000-01-02', 'from', /must be 2000-01-01 or later/],
        ['to before from', () => `from=${today()}&to=${days(-3)}`, 'to', /must be after from/],
        ['a span over the maximum', () => `from=${days(-60)}&to=${today()}`, 'to', /at most 32 days/],
        ['a span up to the year 9999', () => `from=${today()}&to=9999-12-31`, 'to', /at most 32 days/],
      ])('%s → 400 naming the parameter, the loyalty service not asked', async (_name, query, field, message) => {
        const audit = JSON.stringify((await admin('GET', '/v1/admin/audit?limit=500')).body.items);
        const res = await admin('GET', `/v1/admin/reports/reconcile?${typeof query === 'function' ? query() : query}`);
        expectIssue(res, field, message);
        expect(JSON.stringify((await admin('GET', '/v1/admin/audit?limit=500')).body.items)).toBe(audit);
      });

      it('a range up to the end of today is a report', async () => {
        const res = await admin('GET', `/v1/admin/reports/reconcile?from=${days(-1)}&to=${today()}`);
        expect(res.status).toBe(200);
        expect(res.body.merchantId).toBe('default');
      });
    });
  });
}
