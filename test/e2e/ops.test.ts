/** Health, readiness, metrics, the OpenAPI document, request ids, and logs that leak nothing. */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness, postJson } from '../support/harness.js';

let h: Harness;
const logLines: string[] = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  h = await startHarness({ logger: createLogger('trace', sink) });
});
afterAll(async () => {
  await h.close();
});

describe('operations endpoints', () => {
  it('/healthz answers ok', async () => {
    const res = await request(h.bridge.url).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', instance: h.bridge.core.delivery.instanceId, version: expect.any(String) });
  });

  it('/readyz checks the ledger, and that the loyalty service takes the app token (test/e2e/readiness.test.ts: when it does not)', async () => {
    const res = await request(h.bridge.url).get('/readyz').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } });
  });

  it('/readyz without the admin token says ready or not and nothing else: no check, no merchant, no count (contract v1.5)', async () => {
    for (const authorization of [undefined, 'Bearer not-a-token', `Bearer ${ADMIN_TOKEN}x`]) {
      const res = await (authorization ? request(h.bridge.url).get('/readyz').set('authorization', authorization) : request(h.bridge.url).get('/readyz'));
      expect([res.status, res.body]).toEqual([200, { status: 'ready' }]);
    }
  });

  it('/metrics is Prometheus text with the bridge counters', async () => {
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'M-1' }));
    const res = await request(h.bridge.url).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.text).toMatch(/bridge_checkouts_total\{pos="generic",result="accrued",merchant="default"\} 1/);
    expect(res.text).toMatch(/bridge_upstream_calls_total\{operation="accrue",outcome="succeeded",merchant="default"\} 1/);
    expect(res.text).toMatch(/bridge_ledger_open_records{status="pending"} 0/);
  });

  it('/openapi.json describes the contract paths', async () => {
    const res = await request(h.bridge.url).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
    for (const path of ['/v1/checkouts/{pos}', '/v1/refunds/{pos}', '/v1/admin/transactions', '/v1/admin/reconcile', '/v1/admin/transactions/{transactionId}/resolve', '/healthz', '/readyz', '/metrics']) {
      expect(res.body.paths).toHaveProperty([path]);
    }
  });

  it('echoes a plain X-Request-Id and makes one up otherwise', async () => {
    expect((await request(h.bridge.url).get('/healthz').set('x-request-id', 'pos-req-42')).headers['x-request-id']).toBe('pos-req-42');
    expect((await request(h.bridge.url).get('/healthz').set('x-request-id', 'bad id\twith tab')).headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('unknown routes are a JSON 404', async () => {
    const res = await request(h.bridge.url).get('/nope');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});

describe('logs', () => {
  it('are JSON with a request id, and carry no phone, email or secret', async () => {
    const phone = '+15557654321';
    const email = 'secret.customer@example.test';
    await request(h.bridge.url)
      .post('/v1/checkouts/generic')
      .set('content-type', 'application/json')
      .set('x-request-id', 'trace-me-1')
      .send(JSON.stringify(checkout({ orderId: 'L-1', customer: { phone, email, firstName: 'Zed' } })));
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'L-2', customer: { phone, email } }));
    await request(h.bridge.url).get('/v1/admin/transactions/generic:L-1').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    await request(h.bridge.url).get('/v1/admin/transactions').set('authorization', 'Bearer wrong-token-guess');
    // L-2's call went unanswered: the worker's passes verify it and log what they did.
    await h.bridge.worker.passes(3);

    expect(logLines.length).toBeGreaterThan(5);
    const parsed = logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed.some((l) => (l.req as { id?: string } | undefined)?.id === 'trace-me-1')).toBe(true);
    const all = logLines.join('\n');
    for (const secret of [phone, '5557654321', email, 'Zed', ADMIN_TOKEN, 'wrong-token-guess', h.sim.appToken, h.sim.apiKey]) {
      expect(all).not.toContain(secret);
    }
  });
});
