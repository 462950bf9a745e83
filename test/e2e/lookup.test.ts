/**
 * POST /v1/lookup end to end over HTTP, on both ledger stores: a register of any POS (a Shopify POS
 * tile, a Clover app) finds its merchant's guest by phone, email or card serial, with the
 * merchant's POS token, through the same cache and budget as Toast's INQUIRE. The contact travels
 * in the body, never in the URL or a log line.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { LookupAnswer } from '../../src/http/schemas.js';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const POS_TOKEN = 'lookup-e2e-pos-token-0123456789';
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`the guest lookup, on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let otherToken = '';
    let keylessToken = '';
    const lines: string[] = [];

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'lookup');
      const logger = createLogger('debug', { write: (line: string) => void lines.push(line) });
      h = await startHarness({
        env: { ...(schema ? { LEDGER_URL: schema.url } : {}), POS_TOKEN, REGISTER_BUDGET_MS: '400' },
        overrides: { secretsKey: randomBytes(32).toString('base64') },
        logger,
      });
      const other = h.sim.addMerchant({ id: 'm-other', appToken: `app-${randomBytes(6).toString('hex')}`, apiKey: `key-${randomBytes(6).toString('hex')}` });
      const made = await admin('post', '/v1/admin/merchants').send({ id: 'm-other', loyalty: { appToken: other.appToken, apiKey: other.apiKey } });
      expect(made.status).toBe(201);
      otherToken = made.body.posToken;
      const keyless = h.sim.addMerchant({ id: 'm-nokey', appToken: `app-${randomBytes(6).toString('hex')}` });
      const madeKeyless = await admin('post', '/v1/admin/merchants').send({ id: 'm-nokey', loyalty: { appToken: keyless.appToken } });
      expect(madeKeyless.status).toBe(201);
      keylessToken = madeKeyless.body.posToken;
    }, 30_000);

    afterEach(() => h.sim.faults.clear());
    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    const lookup = (body: unknown, token = POS_TOKEN) => request(h.bridge.url).post('/v1/lookup').set('authorization', `Bearer ${token}`).set('content-type', 'application/json').send(JSON.stringify(body));
    const phoneOf = () => `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;

    it('finds a guest by phone, by national digits, by email and by card serial, with the points of each card', async () => {
      const phone = phoneOf();
      const email = `ann.${randomBytes(3).toString('hex')}@example.com`;
      const { cardIds } = h.sim.addCustomer({ phone, email, firstName: 'Ann', surname: 'Lee' });
      for (const body of [{ phone }, { phone: phone.slice(2) }, { email: email.toUpperCase() }, { cardSerial: cardIds[0] }]) {
        const res = await lookup(body);
        expect(res.status).toBe(200);
        expect(LookupAnswer.parse(res.body)).toEqual({ cards: [{ serialNumber: cardIds[0], templateId: expect.any(Number), pointsBalance: 0, balance: expect.objectContaining({ bonusBalance: 0 }), customer: { firstName: 'Ann', surname: 'Lee' } }] });
      }
      // An accrual the bridge makes to the card is seen at once, not after the cache's life.
      const sale = await request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${POS_TOKEN}`).set('content-type', 'application/json').send(JSON.stringify(checkout({ orderId: `L-${randomBytes(4).toString('hex')}`, customer: { cardSerial: cardIds[0] }, total: '42.00', items: undefined })));
      expect(sale.status).toBe(200);
      expect((await lookup({ phone })).body.cards[0].pointsBalance).toBe(42);
      // The contact went in the body and out of every log line.
      expect(lines.join('\n')).not.toContain(phone);
      expect(lines.join('\n')).not.toContain(email);
    });

    it('404 when the service knows no such guest or card; a merchant sees its own guests only', async () => {
      const phone = phoneOf();
      expect((await lookup({ phone })).status).toBe(404);
      expect((await lookup({ cardSerial: '99-999999-9' })).body).toMatchObject({ error: { code: 'not_found' } });
      h.sim.addCustomer({ phone });
      // Nobody found is not cached: the guest who just signed up is found.
      expect((await lookup({ phone })).status).toBe(200);
      expect((await lookup({ phone }, otherToken)).status).toBe(404);
    });

    it('names the problem of a body that does not name exactly one guest, and takes the contact only in the body', async () => {
      for (const [body, field] of [
        [{}, ''],
        [{ phone: phoneOf(), email: 'a@b.test' }, ''],
        [{ email: 'not-an-email' }, 'email'],
        [{ cardSerial: 'no serial here' }, 'cardSerial'],
        [{ phone: phoneOf(), extra: 1 }, ''],
      ] as const) {
        const res = await lookup(body);
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_payload');
        expect(res.body.error.issues.map((i: { field: string }) => i.field)).toContain(field);
      }
      const text = await request(h.bridge.url).post('/v1/lookup').set('authorization', `Bearer ${POS_TOKEN}`).set('content-type', 'text/plain').send('+15550001111');
      expect(text.status).toBe(415);
      // There is no GET: a contact is never a URL.
      expect((await request(h.bridge.url).get('/v1/lookup?phone=%2B15550001111').set('authorization', `Bearer ${POS_TOKEN}`)).status).toBe(404);
    });

    it('needs a POS token (401), and the merchant\'s API key (409 naming loyalty.apiKey)', async () => {
      expect((await lookup({ phone: phoneOf() }, 'not-a-token-0123456789')).status).toBe(401);
      const keyless = await lookup({ phone: phoneOf() }, keylessToken);
      expect(keyless.status).toBe(409);
      expect(keyless.body.error).toMatchObject({ code: 'api_key_missing', field: 'loyalty.apiKey' });
    });

    it('answers 503 within the budget when the loyalty service is slow or rate-limits, and the next read is answered; the metrics count and time each', async () => {
      const metric = async (series: string): Promise<number> => {
        const text = (await admin('get', '/metrics')).text;
        const line = text.split('\n').find((l) => l.startsWith(`${series} `));
        return line ? Number(line.slice(series.length + 1)) : 0;
      };
      const timed = 'bridge_register_read_duration_seconds_count{pos="lookup",type="lookup"}';
      const [timedBefore, timeoutsBefore, limitedBefore] = [await metric(timed), await metric('bridge_register_calls_total{pos="lookup",type="lookup",status="timeout"}'), await metric('bridge_register_calls_total{pos="lookup",type="lookup",status="rate_limited"}')];
      const phone = phoneOf();
      h.sim.addCustomer({ phone });
      h.sim.faults.inject({ kind: 'slow', on: 'cards', delayMs: 10_000 });
      const started = Date.now();
      const slow = await lookup({ phone });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(slow.status).toBe(503);
      expect(slow.body.error.code).toBe('upstream_unavailable');
      h.sim.faults.inject({ kind: 'rate_limit', on: 'cards' });
      expect((await lookup({ phone })).status).toBe(503);
      await eventually(
        () => h.sim.faults.pending(),
        (n) => n === 0,
        2000,
        { what: 'the rate limit used' },
      );
      expect((await lookup({ phone })).status).toBe(200);
      // Three lookups answered, two of them refused for the upstream: each timed, each refusal counted by why.
      expect(await metric(timed)).toBe(timedBefore + 3);
      expect(await metric('bridge_register_calls_total{pos="lookup",type="lookup",status="timeout"}')).toBe(timeoutsBefore + 1);
      expect(await metric('bridge_register_calls_total{pos="lookup",type="lookup",status="rate_limited"}')).toBe(limitedBefore + 1);
    });
  });
}
