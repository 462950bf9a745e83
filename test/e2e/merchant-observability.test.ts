/**
 * Logs and metrics with many merchants: every line written for a request, or for a record the
 * worker advances, names its merchant; the per-merchant counters carry a `merchant` label unless
 * METRICS_MERCHANT_LABEL=off drops it.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness } from '../support/harness.js';

type Line = Record<string, unknown> & { msg?: string; merchantId?: string; requestId?: string; req?: { id?: string }; transactionId?: string };

function capturingLogger() {
  const lines: Line[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) {
        raw.push(text);
        lines.push(JSON.parse(text) as Line);
      }
      done();
    },
  });
  return { logger: createLogger('info', sink), lines, raw };
}

async function createMerchant(h: Harness, id: string) {
  const installed = h.sim.addMerchant({ id });
  const res = await request(h.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id, loyalty: { appToken: installed.appToken, apiKey: installed.apiKey } });
  expect(res.status).toBe(201);
  return { installed, posToken: res.body.posToken as string, adminToken: res.body.adminToken as string };
}

describe('with the merchant label (the default)', () => {
  let h: Harness;
  const log = capturingLogger();
  let shop: Awaited<ReturnType<typeof createMerchant>>;

  beforeAll(async () => {
    h = await startHarness({ logger: log.logger, overrides: { secretsKey: randomBytes(32).toString('base64') } });
    shop = await createMerchant(h, 'shop-a');
  });
  afterAll(async () => {
    await h.close();
  });

  it("names the merchant on every line of a request, the request's own included", async () => {
    const res = await request(h.bridge.url)
      .post('/v1/checkouts/generic')
      .set('authorization', `Bearer ${shop.posToken}`)
      .set('x-request-id', 'req-shop-a-1')
      .send(checkout({ orderId: 'OBS-1' }));
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('accrued');
    const mine = await eventually(
      () => log.lines.filter((l) => l.requestId === 'req-shop-a-1' || l.req?.id === 'req-shop-a-1'),
      (lines) => lines.some((l) => l.msg === 'request completed'),
    );
    expect(mine.map((l) => l.msg)).toEqual(expect.arrayContaining(['checkout recorded', 'loyalty service call finished', 'request completed']));
    for (const line of mine) expect(line.merchantId).toBe('shop-a');
    // The default merchant's requests say so too.
    await request(h.bridge.url).post('/v1/checkouts/generic').set('x-request-id', 'req-default-1').send(checkout({ orderId: 'OBS-1' }));
    const theirs = await eventually(
      () => log.lines.filter((l) => l.requestId === 'req-default-1' || l.req?.id === 'req-default-1'),
      (lines) => lines.some((l) => l.msg === 'request completed'),
    );
    for (const line of theirs) expect(line.merchantId).toBe('default');
  });

  it("names it on the worker's lines for the merchant's records", async () => {
    // Refused long enough that the checkout is left to the worker.
    shop.installed.faults.inject({ kind: 'rate_limit', on: 'accrue', times: 1000 });
    const res = await request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${shop.posToken}`).send(checkout({ orderId: 'OBS-2' }));
    expect(res.status).toBe(202);
    shop.installed.faults.clear();
    const own = (path: string) => request(h.bridge.url).get(path).set('authorization', `Bearer ${shop.adminToken}`);
    await eventually(
      async () => (await own('/v1/admin/transactions/generic:OBS-2')).body.status,
      (status) => status === 'accrued',
    );
    const background = log.lines.filter((l) => l.transactionId === 'generic:OBS-2' && l.msg === 'loyalty service call finished' && l.requestId === undefined);
    expect(background.length).toBeGreaterThan(0);
    for (const line of background) expect(line.merchantId).toBe('shop-a');
  });

  it('counts per merchant, and logs none of its secrets', async () => {
    const metrics = await request(h.bridge.url).get('/metrics');
    expect(metrics.text).toMatch(/bridge_checkouts_total\{pos="generic",result="accrued",merchant="shop-a"\} 1\n/);
    expect(metrics.text).toMatch(/bridge_checkouts_total\{pos="generic",result="accrued",merchant="default"\} 1\n/);
    expect(metrics.text).toMatch(/bridge_upstream_calls_total\{operation="accrue",outcome="succeeded",merchant="shop-a"\} 2\n/);
    for (const secret of [shop.installed.appToken, shop.installed.apiKey, shop.posToken, shop.adminToken]) {
      expect(log.raw.filter((line) => line.includes(secret))).toEqual([]);
    }
  });
});

describe('METRICS_MERCHANT_LABEL=off', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ env: { METRICS_MERCHANT_LABEL: 'off' }, overrides: { secretsKey: randomBytes(32).toString('base64') } });
  });
  afterAll(async () => {
    await h.close();
  });

  it('counts every merchant in one series', async () => {
    const shop = await createMerchant(h, 'shop-b');
    await request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${shop.posToken}`).send(checkout({ orderId: 'OBS-3' }));
    await request(h.bridge.url).post('/v1/checkouts/generic').send(checkout({ orderId: 'OBS-3' }));
    const metrics = await request(h.bridge.url).get('/metrics');
    expect(metrics.text).toMatch(/bridge_checkouts_total\{pos="generic",result="accrued"\} 2\n/);
    expect(metrics.text).not.toMatch(/merchant="/);
  });

  it('refuses anything but on or off, naming the variable', async () => {
    const { testConfig } = await import('../support/harness.js');
    expect(() => testConfig({ METRICS_MERCHANT_LABEL: 'yes' })).toThrow(/METRICS_MERCHANT_LABEL.*must be on or off/);
  });
});
