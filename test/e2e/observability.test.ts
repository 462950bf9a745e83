/**
 * What an on-call engineer reads (docs/observability.md): Prometheus's standard process metrics;
 * the bridge's gauges of open records by status, open dead letters by reason and the attention
 * queue; webhook outcomes per POS; the loyalty request latency histogram; a log line with its
 * reason for every refusal, 401 and 403 included, with no credential or contact detail in it; and
 * the dashboard and alert rules in ops/, every metric they name exported by /metrics.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { createLogger } from '../../src/kernel/logger.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, checkout, eventually, postJson, startHarness, type Harness } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

const shopifySettings: PosSettings = { webhookSecret: 'shpss_observability_secret_0123', apiBaseUrl: '' };
const PHONE = '+15559871234';
const EMAIL = 'hidden.customer@example.test';

let h: Harness;
const logLines: string[] = [];
const logs = () => logLines.map((l) => JSON.parse(l) as Record<string, any>);

beforeAll(async () => {
  h = await startHarness({
    withApiKey: false,
    logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
    overrides: { startWorker: false, defaultMetrics: true, posSettings: { shopify: shopifySettings }, secretsKey: randomBytes(32).toString('base64') },
  });
});
afterAll(async () => {
  await h.close();
});

/** A scrape once the ledger gauges have counted what the test just did: they are counted on a timer (METRICS_REFRESH_MS), never inside a scrape. */
const metrics = async () => {
  await h.bridge.readings.refresh();
  return (await request(h.bridge.url).get('/metrics')).text;
};
/** The value of one series, e.g. `bridge_dead_letters_open{reason="invalid_payload"}`; undefined when absent. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};
const webhook = (body: string, topic: string, eventId: string, sign: 'good' | 'bad' | 'none' = 'good') =>
  postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [
    ...(sign === 'none' ? [] : [sign === 'good' ? signature(shopifyAdapter, shopifySettings, body) : (['X-Shopify-Hmac-Sha256', 'bm90IGEgc2lnbmF0dXJl'] as [string, string])]),
    ['X-Shopify-Topic', topic],
    ['X-Shopify-Event-Id', eventId],
    ['X-Shopify-Shop-Domain', 'observability.myshopify.com'],
  ]);

describe('/metrics', () => {
  it("keeps Prometheus's standard process metric names, unprefixed; the bridge's own keep bridge_", async () => {
    const text = await metrics();
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_p99_seconds']) expect(text).toContain(`# TYPE ${name} `);
    expect(text).not.toMatch(/^# TYPE bridge_(process|nodejs)_/m);
    expect(text).toContain('# TYPE bridge_checkouts_total counter');
  });

  it('counts open records by every status that needs a person, and the attention queue by kind with the age of its oldest', async () => {
    h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'F-1' }));
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-1', customer: { phone: '+15550009999' } }));
    await postJson(h.bridge.url, '/v1/refunds/generic', { orderId: 'NEVER', refundId: 'R-1' });
    const text = await metrics();
    expect(sample(text, 'bridge_ledger_open_records{status="failed"}')).toBe(1);
    expect(sample(text, 'bridge_ledger_open_records{status="in_doubt"}')).toBe(1);
    expect(sample(text, 'bridge_ledger_open_records{status="reverse_failed"}')).toBe(1);
    expect(sample(text, 'bridge_ledger_open_records{status="partially_accrued"}')).toBe(0);
    expect(sample(text, 'bridge_attention_items{kind="in_doubt"}')).toBe(1);
    expect(sample(text, 'bridge_attention_items{kind="failed"}')).toBe(1);
    expect(sample(text, 'bridge_attention_oldest_age_seconds{kind="in_doubt"}')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'bridge_attention_oldest_age_seconds{kind="partially_accrued"}')).toBe(0);
    // The orphan closed by a person: no longer counted as needing one.
    expect((await request(h.bridge.url).post('/v1/admin/transactions/generic:NEVER/close').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ reason: 'refund of an order from before the program' })).status).toBe(200);
    const closed = await metrics();
    expect(sample(closed, 'bridge_ledger_open_records{status="reverse_failed"}')).toBe(0);
    expect(sample(closed, 'bridge_attention_items{kind="reverse_failed"}')).toBe(0);
  });

  it('measures each loyalty request by operation and outcome, 429s included', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', on: 'accrue', times: 1 });
    expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'R-1', customer: { phone: '+15550008888' } }))).body.status).toBe('accrued');
    const text = await metrics();
    expect(sample(text, 'bridge_upstream_request_duration_seconds_count{operation="accrue",outcome="rate_limited"}')).toBe(1);
    expect(sample(text, 'bridge_upstream_request_duration_seconds_count{operation="accrue",outcome="ok"}')).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'bridge_upstream_request_duration_seconds_bucket{le="+Inf",operation="accrue",outcome="ok"}')).toBe(sample(text, 'bridge_upstream_request_duration_seconds_count{operation="accrue",outcome="ok"}'));
  });

  it('counts webhook outcomes per POS: verified, ignored, dead_lettered, and refused by reason; open dead letters by reason', async () => {
    expect((await webhook('{"id": 1}', 'products/update', 'evt-1')).status).toBe(200);
    const dead = await webhook('{"id": 2}', 'orders/paid', 'evt-2');
    expect(dead.body.results[0].action).toBe('dead_lettered');
    expect((await webhook('{"id": 3}', 'orders/paid', 'evt-3', 'bad')).status).toBe(401);
    expect((await webhook('{"id": 3}', 'orders/paid', 'evt-4', 'none')).status).toBe(401);
    const text = await metrics();
    expect(sample(text, 'bridge_webhook_outcomes_total{pos="shopify",outcome="verified",reason=""}')).toBe(2);
    expect(sample(text, 'bridge_webhook_outcomes_total{pos="shopify",outcome="ignored",reason=""}')).toBe(1);
    expect(sample(text, 'bridge_webhook_outcomes_total{pos="shopify",outcome="dead_lettered",reason=""}')).toBe(1);
    expect(sample(text, 'bridge_webhook_outcomes_total{pos="shopify",outcome="refused",reason="signature_mismatch"}')).toBe(1);
    expect(sample(text, 'bridge_webhook_outcomes_total{pos="shopify",outcome="refused",reason="signature_missing"}')).toBe(1);
    // Refused before the signature is checked: a body over BODY_LIMIT_BYTES (1 MiB here), not JSON.
    expect((await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, `"${'x'.repeat(1_048_577)}"`, [['X-Shopify-Topic', 'orders/paid']])).status).toBe(413);
    expect((await request(h.bridge.url).post('/v1/webhooks/shopify').set('content-type', 'text/plain').send('hello')).status).toBe(415);
    const refusedUnread = await metrics();
    expect(sample(refusedUnread, 'bridge_webhook_outcomes_total{pos="shopify",outcome="refused",reason="payload_too_large"}')).toBe(1);
    expect(sample(refusedUnread, 'bridge_webhook_outcomes_total{pos="shopify",outcome="refused",reason="unsupported_media_type"}')).toBe(1);
    const letter = await h.bridge.store.getDeadLetter(dead.body.results[0].deadLetterId);
    expect(letter!.reasonCode).toEqual(expect.any(String));
    expect(sample(text, `bridge_dead_letters_open{reason="${letter!.reasonCode}"}`)).toBe(1);
    expect(sample(text, 'bridge_attention_items{kind="dead_letter"}')).toBe(1);
    expect(sample(text, 'bridge_attention_oldest_age_seconds{kind="dead_letter"}')).toBeGreaterThanOrEqual(0);
    // Dismissed, it is no longer open.
    await request(h.bridge.url).post(`/v1/admin/dead-letters/${letter!.id}/dismiss`).set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ reason: 'a test delivery' });
    const after = await metrics();
    expect(sample(after, `bridge_dead_letters_open{reason="${letter!.reasonCode}"}`)).toBeUndefined();
    expect(sample(after, 'bridge_attention_items{kind="dead_letter"}')).toBe(0);
    expect(sample(after, 'bridge_attention_oldest_age_seconds{kind="dead_letter"}')).toBe(0);
  });
});

describe('refusals in the log', () => {
  it('every 4xx line says why (code, reason, message), 401, 403, an unknown route, 413 and 415 included, with no token, phone or email', async () => {
    const wrongToken = 'Bearer wrong-token-guess-0123456789';
    await request(h.bridge.url).get('/v1/admin/transactions').set('x-request-id', 'refused-401').set('authorization', wrongToken);
    await request(h.bridge.url).get('/v1/admin/transactions').set('x-request-id', 'refused-401-none');
    await request(h.bridge.url).get('/v1/admin/transactions?status=lost').set('x-request-id', 'refused-400').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    await request(h.bridge.url)
      .post('/v1/checkouts/generic')
      .set('x-request-id', 'refused-400-payload')
      .set('content-type', 'application/json')
      .send(JSON.stringify(checkout({ orderId: 'B-1', customer: { phone: PHONE, email: EMAIL }, currency: 'NOPE' })));
    const line = (id: string) => eventually(logs, (all) => all.some((l) => l.req?.id === id && l.msg === 'request completed')).then((all) => all.find((l) => l.req?.id === id && l.msg === 'request completed')!);
    expect(await line('refused-401')).toMatchObject({ level: 40, res: { statusCode: 401 }, refusal: { code: 'unauthorized', reason: 'token_unknown', message: 'missing or invalid credentials' } });
    expect(await line('refused-401-none')).toMatchObject({ refusal: { code: 'unauthorized', reason: 'token_missing' } });
    expect(await line('refused-400')).toMatchObject({ res: { statusCode: 400 }, refusal: { code: 'invalid_payload', message: expect.stringContaining('unknown status "lost"') } });
    expect(await line('refused-400-payload')).toMatchObject({ res: { statusCode: 400 }, refusal: { code: 'invalid_payload', message: expect.stringContaining('currency') } });
    await request(h.bridge.url).post('/v1/refunds/generic').set('x-request-id', 'refused-404-order').set('content-type', 'application/json').send(JSON.stringify({ orderId: 'NOBODY-KNOWS', refundId: 'R-9' }));
    expect(await line('refused-404-order')).toMatchObject({ res: { statusCode: 404 }, refusal: { code: 'unknown_order', message: expect.stringContaining('generic:NOBODY-KNOWS') } });
    const shop = h.sim.addMerchant({ id: 'log-shop' });
    const created = await request(h.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id: 'log-shop', loyalty: { appToken: shop.appToken } });
    expect(created.status).toBe(201);
    await request(h.bridge.url).get('/v1/admin/merchants').set('x-request-id', 'refused-403').set('authorization', `Bearer ${created.body.adminToken}`);
    expect(await line('refused-403')).toMatchObject({ res: { statusCode: 403 }, refusal: { code: 'forbidden', message: expect.stringContaining('only the global ADMIN_TOKEN') } });
    // A route that does not exist, a body too large, a Content-Encoding the bridge does not read.
    await request(h.bridge.url).get('/v1/no-such-route').set('x-request-id', 'refused-404-route');
    expect(await line('refused-404-route')).toMatchObject({ level: 40, res: { statusCode: 404 }, refusal: { code: 'not_found', message: 'no route GET /v1/no-such-route' } });
    await request(h.bridge.url)
      .post('/v1/admin/transactions/bulk')
      .set('x-request-id', 'refused-413')
      .set('authorization', `Bearer ${ADMIN_TOKEN}`)
      .set('content-type', 'application/json')
      .send(JSON.stringify({ action: 'retry', reason: `${EMAIL} `.repeat(1000), ids: ['generic:F-1'] }));
    expect(await line('refused-413')).toMatchObject({ res: { statusCode: 413 }, refusal: { code: 'payload_too_large', message: expect.any(String) } });
    await request(h.bridge.url).post('/v1/checkouts/generic').set('x-request-id', 'refused-415').set('content-type', 'application/json').set('content-encoding', 'x-unknown').send('{}');
    expect(await line('refused-415')).toMatchObject({ res: { statusCode: 415 }, refusal: { code: 'unsupported_media_type', message: expect.stringContaining('Content-Encoding') } });
    // A phone or an email typed where an id goes: the line's path masks it, encoded or not.
    const pathLeaks = ['leak.path@example.com', '+15557770008', '0151-55577700'];
    await request(h.bridge.url).get(`/v1/admin/transactions/${pathLeaks[0]}`).set('x-request-id', 'path-email').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    await request(h.bridge.url).get(`/v1/admin/transactions/${encodeURIComponent(pathLeaks[1]!)}`).set('x-request-id', 'path-phone').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    await request(h.bridge.url).get(`/v1/admin/dead-letters/${pathLeaks[2]}`).set('x-request-id', 'path-national').set('authorization', `Bearer ${ADMIN_TOKEN}`);
    await request(h.bridge.url).post(`/v1/refunds/generic/${encodeURIComponent(pathLeaks[0]!)}`).set('x-request-id', 'path-unauthenticated').set('content-type', 'application/json').send('{}');
    expect(await line('path-email')).toMatchObject({ res: { statusCode: 404 }, req: { path: '/v1/admin/transactions/***@***' } });
    expect(await line('path-phone')).toMatchObject({ res: { statusCode: 404 }, req: { path: '/v1/admin/transactions/***' } });
    expect(await line('path-national')).toMatchObject({ res: { statusCode: 404 }, req: { path: '/v1/admin/dead-letters/***' } });
    expect(await line('path-unauthenticated')).toMatchObject({ req: { path: '/v1/refunds/generic/***@***' } });
    const everything = logLines.join('\n');
    for (const secret of [wrongToken.slice(7), ADMIN_TOKEN, created.body.adminToken, PHONE, EMAIL, shopifySettings.webhookSecret!, ...pathLeaks, '15557770008', 'leak.path%40']) expect(everything).not.toContain(secret);
  });
});

describe('ops/: the dashboard and the alert rules', () => {
  const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
  const HISTOGRAM_PARTS = /_(bucket|count|sum)$/;

  /** Metric names in PromQL: identifiers starting as the bridge's, Node's and the process's do. */
  const namesIn = (text: string) => new Set([...text.matchAll(/\b((?:bridge|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!));

  it('every metric the dashboard and the alerts name is exported by /metrics', async () => {
    const exported = new Set([...(await metrics()).matchAll(/^# TYPE (\S+) (\S+)/gm)].map((m) => m[1]!));
    const alerts = read('ops/alerts.yml');
    type Panel = { targets?: { expr: string }[]; panels?: Panel[] };
    const dashboard = JSON.parse(read('ops/grafana-dashboard.json')) as { panels: Panel[]; templating?: { list: { type: string; query?: unknown }[] } };
    // Every query of the dashboard: each panel's (rows' nested panels too) and each query variable's.
    const panelExprs = (panels: Panel[]): string[] => panels.flatMap((p) => [...(p.targets ?? []).map((t) => t.expr), ...panelExprs(p.panels ?? [])]);
    const variableQueries = (dashboard.templating?.list ?? []).filter((v) => v.type === 'query').map((v) => (typeof v.query === 'string' ? v.query : JSON.stringify(v.query)));
    expect(variableQueries).toEqual(['label_values(bridge_checkouts_total, job)']);
    const exprs = [...alerts.matchAll(/^\s*expr: (.+)$/gm)].map((m) => m[1]!).concat(panelExprs(dashboard.panels), variableQueries);
    expect(exprs.length).toBeGreaterThanOrEqual(19);
    const named = namesIn(exprs.join('\n'));
    expect(named.size).toBeGreaterThan(10);
    const missing = [...named].filter((name) => !exported.has(name) && !(HISTOGRAM_PARTS.test(name) && exported.has(name.replace(HISTOGRAM_PARTS, ''))));
    expect(missing).toEqual([]);
    // Every label a selector or a `by` names is one the metric carries (or Prometheus's job/instance).
    const text = await metrics();
    const labelsOf = (name: string) => new Set([...text.matchAll(new RegExp(`^${name}\\{([^}]*)\\}`, 'gm'))].flatMap((m) => [...m[1]!.matchAll(/(\w+)="/g)].map((l) => l[1]!)));
    const unknownLabels = exprs.flatMap((expr) =>
      [...expr.matchAll(/\b((?:bridge|process|nodejs)_[a-z0-9_]+)\{([^}]*)\}/g)].flatMap((m) =>
        [...m[2]!.matchAll(/(\w+)\s*(?:=~|!=|!~|=)/g)].map((l) => l[1]!).filter((label) => label !== 'job' && label !== 'instance' && !labelsOf(m[1]!).has(label)).map((label) => `${m[1]}{${label}}`),
      ),
    );
    expect(unknownLabels).toEqual([]);
  });

  it('the alerts cover in doubt over an hour, dead letters growing and the upstream 429 rate, each with an expression', () => {
    const alerts = read('ops/alerts.yml');
    const rules = alerts.split(/^\s*- alert: /m).slice(1);
    expect(rules.map((r) => r.split('\n')[0])).toEqual(expect.arrayContaining(['LoyaltyBridgeInDoubtOverAnHour', 'LoyaltyBridgeDeadLettersGrowing', 'LoyaltyBridgeUpstreamRateLimited']));
    for (const rule of rules) expect(rule).toMatch(/^\s*expr: \S/m);
    expect(alerts).toMatch(/bridge_attention_oldest_age_seconds\{kind=~"in_doubt\|ambiguous"\}\) > 3600/);
  });
});
