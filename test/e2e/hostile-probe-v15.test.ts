/**
 * The smaller findings of the hostile probe of contract v1.5, over HTTP on both ledger stores, each
 * row a test that failed before its fix:
 * - a list cursor the bridge never issued was a 500 on PostgreSQL, and one holding
 *   `2026-01-01 (ann@example.com +15550001111)` (a lenient date parser skips the bracketed text)
 *   wrote that email and phone into the error log in clear; the file ledger answered 200;
 * - /readyz without a token named a merchant whose install was revoked, and how many merchants;
 * - the global admin took `localhost`, `127.0.0.1`, `a b` and `x/../y` as a Shopify shop, which
 *   backfill would then have called.
 * (`ledger:archive --month 0099-12` is test/ledger/ledger-archive.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, postJson, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

for (const store of STORES) {
  store.describe(`the v1.5 probe's smaller rows on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    const logLines: string[] = [];

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'probe_v15');
      h = await startHarness({
        env: schema ? { LEDGER_URL: schema.url } : {},
        logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
        overrides: { secretsKey: randomBytes(32).toString('base64'), startWorker: false },
      });
      for (const orderId of ['C-1', 'C-2', 'C-3']) expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId }))).status).toBeLessThan(300);
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

    it('a cursor the bridge never issued is a 400 invalid_cursor, and nothing of it reaches the log', async () => {
      const forged = [
        cursorOf(['2026-01-01 (ann@example.com +15550001111)', 'generic:C-1']),
        cursorOf(['2026-01-01', 'generic:C-1']),
        cursorOf(['2026-13-01T00:00:00.000Z', 'generic:C-1']),
        cursorOf(['2026-01-01T00:00:00.000Z', 'generic:C-1\u0000']),
        cursorOf(['2026-01-01T00:00:00.000Z']),
        cursorOf({ createdAt: '2026-01-01T00:00:00.000Z', key: 'x' }),
        cursorOf(['2026-01-01T00:00:00.000Z', 7]),
        'not base64 at all!',
        'A'.repeat(601),
        // Well formed, but never given by this bridge: unsigned, signed by no key of this ledger, a year PostgreSQL cannot hold.
        cursorOf(['2026-01-01T00:00:00.000Z', 'ann@example.com +15550001111']),
        `${cursorOf(['2026-01-01T00:00:00.000Z', 'generic:C-1'])}.${'A'.repeat(22)}`,
        `${cursorOf(['0000-01-01T00:00:00.000Z', 'generic:C-3'])}.${'B'.repeat(22)}`,
      ];
      for (const cursor of forged) {
        const res = await admin('get', `/v1/admin/transactions?cursor=${encodeURIComponent(cursor)}`);
        expect({ cursor, status: res.status, code: res.body.error?.code }).toEqual({ cursor, status: 400, code: 'invalid_cursor' });
        expect(JSON.stringify(res.body)).not.toMatch(/ann@example\.com|15550001111/);
      }
      const log = logLines.join('\n');
      expect(log).not.toMatch(/ann@example\.com|15550001111/);
      expect(log).not.toMatch(/"level":50/);
      // The cursor the bridge gives still pages; altered by one character it is refused.
      const first = await admin('get', '/v1/admin/transactions?limit=2');
      expect(first.body.nextCursor).toEqual(expect.any(String));
      const next = await admin('get', `/v1/admin/transactions?limit=2&cursor=${first.body.nextCursor}`);
      expect([next.status, next.body.items.length]).toEqual([200, 1]);
      const cursor = first.body.nextCursor as string;
      const altered = `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`;
      expect((await admin('get', `/v1/admin/transactions?limit=2&cursor=${altered}`)).body.error.code).toBe('invalid_cursor');
      // Another instance on the same ledger (here: the bridge started again) takes it: the key is the ledger's.
      await h.restart();
      const again = await admin('get', `/v1/admin/transactions?limit=2&cursor=${cursor}`);
      expect([again.status, again.body.items.length]).toEqual([200, 1]);
    });

    it('/readyz without the admin token says ready or not and nothing else; with it, which part and why', async () => {
      const bare = await request(h.bridge.url).get('/readyz');
      expect([bare.status, bare.body]).toEqual([200, { status: 'ready' }]);
      const detailed = await request(h.bridge.url).get('/readyz').set('authorization', `Bearer ${ADMIN_TOKEN}`);
      expect(detailed.body).toEqual({ status: 'ready', checks: { ledger: 'ok', upstream: expect.any(String) } });
    });

    it("a Shopify shop is its <name>.myshopify.com domain: anything else is a 400 naming the field, and no merchant is made", async () => {
      const installed = h.sim.addMerchant({ id: 'shaped', appToken: `app-shaped-${randomBytes(8).toString('hex')}` });
      for (const shopDomain of ['localhost', '127.0.0.1', 'a b', 'x/../y', 'evil.example.com', 'shop.myshopify.com.evil.test']) {
        const res = await admin('post', '/v1/admin/merchants').send({ id: 'shaped', loyalty: { appToken: installed.appToken }, pos: { shopify: { shopDomain } } });
        expect({ shopDomain, status: res.status, issues: res.body.error?.issues }).toEqual({ shopDomain, status: 400, issues: [{ field: 'pos.shopify.shopDomain', message: expect.stringContaining('myshopify.com') }] });
      }
      // A Toast restaurant, a Square merchant: ids as the POS writes them (no dots, slashes or spaces).
      for (const [pos, field] of [
        ['toast', 'restaurantGuid'],
        ['square', 'merchantId'],
      ] as const) {
        const res = await admin('post', '/v1/admin/merchants').send({ id: 'shaped', loyalty: { appToken: installed.appToken }, pos: { [pos]: { [field]: '../127.0.0.1' } } });
        expect({ pos, status: res.status, field: res.body.error?.issues?.[0]?.field }).toEqual({ pos, status: 400, field: `pos.${pos}.${field}` });
      }
      expect((await admin('get', '/v1/admin/merchants/shaped')).status).toBe(404);
      const good = await admin('post', '/v1/admin/merchants').send({ id: 'shaped', loyalty: { appToken: installed.appToken }, pos: { shopify: { shopDomain: 'shaped-shop.myshopify.com' } } });
      expect(good.status).toBe(201);
    });
  });
}
