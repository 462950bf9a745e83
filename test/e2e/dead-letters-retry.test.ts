/**
 * Dead letters that retry themselves, end to end over HTTP: Square webhooks signed as Square signs
 * them, Square's API played by a local fake that fails for a while (503, 429, too slow to answer),
 * the loyalty simulator's books checked for exactly one accrual or reversal. A transient failure
 * is answered 202 with the dead letter's id and run again by the bridge on its back-off schedule;
 * a cause that needs a person is never run by itself; the runs are capped; and two bridge
 * instances on one PostgreSQL database never run one letter twice at once.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import request from 'supertest';
import { squareAdapter } from '../../adapters/square/index.js';
import { startBridge, type Bridge } from '../../src/bridge.js';
import { PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { startFakePosApi, type FakePosApi } from '../support/fake-pos-api.js';
import { ADMIN_TOKEN, eventually, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature } from '../support/webhooks.js';

const FIXTURES = new URL('../fixtures/square/', import.meta.url);
const fixture = (name: string): any => JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8'));
const usd = (amount: number) => ({ amount, currency: 'USD' });
const SELLER = '5S9MXCS9Y99KK';

/** Square's CreateOrderResponse example, completed, picked up by a customer with a phone: 6176 − 510 tax = 5666 cents. */
function sale(id = 'SALE-1') {
  const order = fixture('CreateOrderResponse_example.json').order;
  return { ...order, id, state: 'COMPLETED', version: 4, fulfillments: [{ type: 'PICKUP', pickup_details: { recipient: { display_name: 'Ann Lee', phone_number: '+15550001111' } } }] };
}

/** The return order of one "New York Steak (Larger)": 2264 with 187 tax → 2077 cents returned. */
function returnOrder(id = 'RET-1', source = 'SALE-1') {
  return {
    id,
    state: 'COMPLETED',
    returns: [{ source_order_id: source, return_line_items: [{ uid: 'r1', catalog_object_id: 'BEMYCSMIJL46OCDV4KYIKXIB', name: 'New York Steak', quantity: '1', total_money: usd(2264), total_tax_money: usd(187) }] }],
    return_amounts: { total_money: usd(2264), tax_money: usd(187), tip_money: usd(0) },
  };
}

function orderEvent(orderId: string, eventId: string, merchantId = SELLER) {
  return { merchant_id: merchantId, type: 'order.updated', event_id: eventId, created_at: new Date().toISOString(), data: { type: 'order_updated', id: orderId, object: { order_updated: { order_id: orderId, state: 'COMPLETED', version: 4 } } } };
}

/** Square's own refund.updated example, pointed at our return order, as if sent now. */
function refundEvent(eventId: string) {
  const event = fixture('webhook_refund_updated.json');
  event.event_id = eventId;
  event.merchant_id = SELLER;
  event.created_at = new Date().toISOString();
  Object.assign(event.data.object.refund, { order_id: 'RET-1', amount_money: usd(2264) });
  return event;
}

/** A unit of back-off (DEAD_LETTER_RETRY_BASE_MS): runs come 1, 2, 5, 10 … units after a failure. */
const UNIT = 150;

let fake: FakePosApi;
let h: Harness;
let settings: PosSettings;

async function start(env: Record<string, string> = {}, extra: Partial<PosSettings> = {}) {
  fake = await startFakePosApi();
  settings = { webhookSecret: 'sq-test-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: fake.url, accessToken: 'sq-access-token', ...extra };
  h = await startHarness({
    env: { DEAD_LETTER_RETRY_BASE_MS: String(UNIT), POS_API_TIMEOUT_MS: '300', ...env },
    overrides: { adapters: new Map([['square', squareAdapter]]), posSettings: { square: settings } },
  });
}

function deliver(event: unknown, bridge: Bridge = h.bridge) {
  const raw = JSON.stringify(event);
  return postRaw(`${bridge.url}/v1/webhooks/square`, raw, [signature(squareAdapter, settings, raw)]);
}

const admin = (method: 'get' | 'post', path: string, bridge: Bridge = h.bridge) => request(bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
const letter = async (id: string) => (await admin('get', `/v1/admin/dead-letters/${id}`)).body;
const at = (iso: string) => Date.parse(iso);

describe('dead letters with a transient cause', () => {
  beforeEach(() => start());
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('Square answers 503: the POS gets 202 with the deadLetterId; the bridge runs it again after the back-off; accrued exactly once', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    fake.queue('/v2/orders/SALE-1', { status: 503 });
    const sent = Date.now();
    const res = await deliver(orderEvent('SALE-1', 'EV-1'));

    // 2xx, not 502: the bridge keeps the delivery and owns its retry, so Square need not send it again.
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([
      { key: 'EV-1', action: 'dead_lettered', deadLetterId: expect.any(String), reason: 'square API GET /v2/orders/SALE-1 answered 503', retryAt: expect.any(String) },
    ]);
    const { deadLetterId, retryAt } = res.body.results[0];
    expect(at(retryAt) - sent).toBeGreaterThanOrEqual(UNIT);
    expect(h.sim.books().accrueRequests).toBe(0);
    expect((await letter(deadLetterId)).retry).toEqual({ transient: true, attempts: 0, nextAt: retryAt });
    expect((await admin('get', '/v1/admin/dead-letters?awaiting=bridge')).body.items.map((l: { id: string }) => l.id)).toEqual([deadLetterId]);

    const resolved = await eventually(() => letter(deadLetterId), (l) => Boolean(l.resolvedAt));
    expect(resolved.replays).toEqual([{ at: expect.any(String), by: 'bridge', outcome: 'processed: accrued', created: ['square:SALE-1'] }]);
    // Not before its time.
    expect(at(resolved.replays[0].at)).toBeGreaterThanOrEqual(at(retryAt));
    expect(resolved.retry).toEqual({ transient: true, attempts: 1 });
    const books = h.sim.books();
    expect(books.transactions['square:SALE-1']).toMatchObject({ accruals: 1, reversals: 0, amount: 5666 });
    expect(books.accrueRequests).toBe(1);
    expect((await admin('get', '/v1/admin/transactions/square:SALE-1')).body.status).toBe('accrued');
    expect((await admin('get', '/v1/admin/dead-letters?open=true')).body.total).toBe(0);

    // Square sends the event again anyway: a duplicate. And a resolved letter is never run again.
    expect((await deliver(orderEvent('SALE-1', 'EV-1'))).body.results).toEqual([{ key: 'EV-1', action: 'checkout', duplicate: true }]);
    await h.bridge.deadLetterRetrier.passes(3);
    expect(fake.count('/v2/orders/SALE-1')).toBe(2);
    expect(h.sim.books().accrueRequests).toBe(1);
    expect((await letter(deadLetterId)).replays).toHaveLength(1);
  });

  it('a refund whose return order times out, then meets 429 and 503: run on the schedule (1, 2, 5 units), reversed and the rest accrued once', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    expect((await deliver(orderEvent('SALE-1', 'EV-4'))).body.results[0]).toMatchObject({ status: 'accrued' });
    fake.answer('/v2/orders/RET-1', { order: returnOrder() });
    // Slower than POS_API_TIMEOUT_MS (300 ms), then two refusals that say "later".
    fake.queue('/v2/orders/RET-1', { delayMs: 1500, body: { order: returnOrder() } }, { status: 429 }, { status: 503 });

    const res = await deliver(refundEvent('EV-R1'));
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([{ key: 'EV-R1', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/^square API GET \/v2\/orders\/RET-1 failed: timeout/), retryAt: expect.any(String) }]);
    const { deadLetterId } = res.body.results[0];
    expect(h.sim.books().reverseRequests).toBe(0);

    const resolved = await eventually(() => letter(deadLetterId), (l) => Boolean(l.resolvedAt), 10_000);
    expect(resolved.replays).toEqual([
      { at: expect.any(String), by: 'bridge', outcome: 'failed: square API GET /v2/orders/RET-1 answered 429' },
      { at: expect.any(String), by: 'bridge', outcome: 'failed: square API GET /v2/orders/RET-1 answered 503' },
      { at: expect.any(String), by: 'bridge', outcome: 'processed: reversed', actedOn: ['square:SALE-1'] },
    ]);
    // Each run waits its step of the schedule after the failure before it.
    const runs = resolved.replays.map((r: { at: string }) => at(r.at));
    expect(runs[1] - runs[0]).toBeGreaterThanOrEqual(2 * UNIT);
    expect(runs[2] - runs[1]).toBeGreaterThanOrEqual(5 * UNIT);
    expect(resolved.retry).toEqual({ transient: true, attempts: 3 });
    expect(fake.count('/v2/orders/RET-1')).toBe(4);

    const books = h.sim.books();
    expect(books.transactions['square:SALE-1']).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    // 5666 − 2077 (one steak, tax excluded) remains, accrued once.
    expect(books.transactions['square:SALE-1~r1']).toMatchObject({ accruals: 1, reversals: 0, amount: 3589 });
    expect(books.reverseRequests).toBe(1);
    expect(books.doubleReversals).toEqual([]);
    expect(books.doubleAccruals).toEqual([]);
  });
});

describe('dead letters that need a person', () => {
  beforeEach(() => start({}, { account: SELLER }));
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('Square answers 404 or 401, or the seller is no merchant of this bridge: 202, kept, and never run by the bridge', async () => {
    fake.answer('/v2/orders/AUTH-1', { errors: [{ code: 'UNAUTHORIZED' }] }, 401);
    const gone = await deliver(orderEvent('GONE-1', 'EV-G'));
    const unauthorized = await deliver(orderEvent('AUTH-1', 'EV-A'));
    const stranger = await deliver(orderEvent('SALE-9', 'EV-S', 'SOMEONE-ELSE'));
    for (const res of [gone, unauthorized, stranger]) {
      expect(res.status).toBe(202);
      expect(res.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', deadLetterId: expect.any(String) })]);
      expect(res.body.results[0].retryAt).toBeUndefined();
    }
    expect(gone.body.results[0].reason).toBe('square API GET /v2/orders/GONE-1 answered 404');
    expect(unauthorized.body.results[0].reason).toBe('square API GET /v2/orders/AUTH-1 answered 401');
    expect(stranger.body.results[0].reason).toMatch(/^no merchant has the square account "SOMEONE-ELSE"/);

    // The loop runs several times: none of them is run, nothing more is fetched.
    await h.bridge.deadLetterRetrier.passes(4);
    expect(fake.count('/v2/orders/GONE-1')).toBe(1);
    expect(fake.count('/v2/orders/AUTH-1')).toBe(1);
    const waiting = await admin('get', '/v1/admin/dead-letters?awaiting=operator');
    expect(waiting.body.total).toBe(3);
    for (const l of waiting.body.items) expect(l).toMatchObject({ replays: [], retry: { transient: false, attempts: 0 } });
    expect((await admin('get', '/v1/admin/dead-letters?awaiting=bridge')).body.total).toBe(0);
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});

describe('a dead letter for no merchant', () => {
  beforeEach(() => start({}, { account: SELLER }));
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('waits for a person; once the merchant is created, the replay finds it by the account the delivery names and accrues in its books', async () => {
    await h.restart({ secretsKey: randomBytes(32).toString('base64') });
    const res = await deliver(orderEvent('SALE-9', 'EV-S', 'ML-NEW-SELLER'));
    expect(res.status).toBe(202);
    const { deadLetterId } = res.body.results[0];
    expect((await letter(deadLetterId)).retry).toEqual({ transient: false, attempts: 0 });

    const install = h.sim.addMerchant({ id: 'new-seller' });
    const created = await admin('post', '/v1/admin/merchants').send({ id: 'new-seller', loyalty: { appToken: install.appToken }, pos: { square: { merchantId: 'ML-NEW-SELLER', accessToken: 'sq-access-token' } } });
    expect(created.status).toBe(201);
    fake.answer('/v2/orders/SALE-9', { order: sale('SALE-9') });
    const replay = await admin('post', `/v1/admin/dead-letters/${deadLetterId}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([{ key: 'EV-S', action: 'checkout', merchantId: 'new-seller', transactionId: 'square:SALE-9', status: 'accrued' }]);
    expect(install.books().transactions['square:SALE-9']).toMatchObject({ accruals: 1, amount: 5666 });
    expect(h.sim.books().accrueRequests).toBe(0);
  });
});

describe('the automatic runs are capped', () => {
  beforeEach(() => start({ DEAD_LETTER_RETRY_BASE_MS: '40', DEAD_LETTER_RETRY_MAX_ATTEMPTS: '2' }));
  afterEach(async () => {
    await h.close();
    await fake.close();
  });

  it('Square keeps failing: two automatic runs, then the letter waits for an operator, whose replay accrues it once', async () => {
    fake.answer('/v2/orders/SALE-1', { errors: [{ code: 'SERVICE_UNAVAILABLE' }] }, 503);
    const res = await deliver(orderEvent('SALE-1', 'EV-1'));
    expect(res.status).toBe(202);
    const { deadLetterId } = res.body.results[0];

    const exhausted = await eventually(() => letter(deadLetterId), (l) => l.retry.attempts === 2);
    expect(exhausted.retry).toEqual({ transient: true, attempts: 2 });
    expect(exhausted.replays.map((r: { by: string; outcome: string }) => [r.by, r.outcome])).toEqual([
      ['bridge', 'failed: square API GET /v2/orders/SALE-1 answered 503'],
      ['bridge', 'failed: square API GET /v2/orders/SALE-1 answered 503'],
    ]);
    await h.bridge.deadLetterRetrier.passes(4);
    expect(fake.count('/v2/orders/SALE-1')).toBe(3);
    expect((await admin('get', '/v1/admin/dead-letters?awaiting=operator')).body.items.map((l: { id: string }) => l.id)).toEqual([deadLetterId]);

    // Square is back; the operator replays it.
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    const replay = await admin('post', `/v1/admin/dead-letters/${deadLetterId}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.results).toEqual([{ key: 'EV-1', action: 'checkout', transactionId: 'square:SALE-1', status: 'accrued' }]);
    expect(replay.body.deadLetter.replays.at(-1)).toMatchObject({ by: 'operator', outcome: 'processed: accrued' });
    expect(h.sim.books().transactions['square:SALE-1']).toMatchObject({ accruals: 1, amount: 5666 });
    expect(h.sim.books().accrueRequests).toBe(1);
  });
});

const { url: base, describeIf } = await describeWithDatabase();

describeIf('two bridge instances on one PostgreSQL database', () => {
  let schema: { url: string; drop(): Promise<void> };
  let other: Bridge;
  /**
   * Both instances' clock, which only the test moves: to run a letter when it is due, the test sets
   * it to the letter's due time rather than sleeping until then, and a claim holds for as long as
   * the test leaves the clock inside its lease.
   */
  let nowMs: number;
  const clock = () => new Date(nowMs);

  beforeEach(async () => {
    nowMs = Date.now();
    schema = await freshSchema(base!, 'deadletters');
    fake = await startFakePosApi();
    settings = { webhookSecret: 'sq-test-signature-key', notificationUrl: 'https://bridge.example.test/v1/webhooks/square', apiBaseUrl: fake.url, accessToken: 'sq-access-token' };
    const shared = { adapters: new Map([['square', squareAdapter]]), posSettings: { square: settings }, startDeadLetterRetrier: false, clock };
    h = await startHarness({ env: { DEAD_LETTER_RETRY_BASE_MS: '50', LEDGER_URL: schema.url }, overrides: { ...shared, store: new PostgresLedgerStore(schema.url) } });
    other = await startBridge(h.config, silentLogger, {
      ...shared,
      store: new PostgresLedgerStore(schema.url),
      loyaltyBaseUrl: h.simServer.url,
      loyaltyAppToken: h.sim.appToken,
      loyaltyApiKey: h.sim.apiKey,
      adminToken: ADMIN_TOKEN,
      defaultMetrics: false,
    });
  });
  afterEach(async () => {
    await other.close();
    await h.close();
    await fake.close();
    await schema.drop();
  });

  it('both see the letter due at once: exactly one runs it each time, an operator replay meanwhile waits (409), and it is accrued once', async () => {
    fake.answer('/v2/orders/SALE-1', { order: sale() });
    // The delivery fails; so does the first run, slowly (it holds the letter for 400 ms).
    fake.queue('/v2/orders/SALE-1', { status: 503 }, { status: 503, delayMs: 400 });
    const res = await deliver(orderEvent('SALE-1', 'EV-1'));
    expect(res.status).toBe(202);
    const { deadLetterId, retryAt } = res.body.results[0];
    // Due one unit (DEAD_LETTER_RETRY_BASE_MS, 50) after it was kept.
    expect(at(retryAt)).toBe(nowMs + 50);

    // The clock is moved to the letter's due time, then both instances look for due letters at the same moment.
    const bothPass = async () => {
      nowMs = at((await letter(deadLetterId)).retry.nextAt);
      return Promise.all([h.bridge.deadLetterRetrier.pass(), other.deadLetterRetrier.pass()]);
    };
    const first = bothPass();
    // While one instance runs it, an operator's replay on either instance is told to wait.
    const held = await eventually(() => letter(deadLetterId), (l) => Boolean(l.retry.claim));
    const replay = await admin('post', `/v1/admin/dead-letters/${deadLetterId}/replay`, other);
    expect(replay.status).toBe(409);
    expect(replay.body.error.message).toContain(`being run now (by ${held.retry.claim.owner}`);
    const ranFirst = await first;
    expect(ranFirst.map((p) => p.ran).reduce((a, b) => a + b)).toBe(1);
    expect(ranFirst.map((p) => p.resolved).reduce((a, b) => a + b)).toBe(0);
    // The failed run is followed by the schedule's second step, two units after it.
    expect(at((await letter(deadLetterId)).retry.nextAt)).toBe(nowMs + 2 * 50);

    const ranSecond = await bothPass();
    expect(ranSecond.map((p) => p.ran).reduce((a, b) => a + b)).toBe(1);
    expect(ranSecond.map((p) => p.resolved).reduce((a, b) => a + b)).toBe(1);

    const resolved = await letter(deadLetterId);
    expect(resolved.replays.map((r: { by: string; outcome: string }) => [r.by, r.outcome])).toEqual([
      ['bridge', 'failed: square API GET /v2/orders/SALE-1 answered 503'],
      ['bridge', 'processed: accrued'],
    ]);
    expect(resolved.retry).toEqual({ transient: true, attempts: 2 });
    // Once resolved, neither instance runs it again.
    expect((await Promise.all([h.bridge.deadLetterRetrier.pass(), other.deadLetterRetrier.pass()])).map((p) => p.ran)).toEqual([0, 0]);
    expect(fake.count('/v2/orders/SALE-1')).toBe(3);
    expect(h.sim.books().transactions['square:SALE-1']).toMatchObject({ accruals: 1, amount: 5666 });
    expect(h.sim.books().accrueRequests).toBe(1);
  });
});
