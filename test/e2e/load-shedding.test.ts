/**
 * Load shedding (security review, issue 9): with POS_MAX_IN_FLIGHT POS requests being handled,
 * another is answered 503 with Retry-After before its body is read: nothing recorded, nothing sent
 * upstream, and sent again once the bridge has room it is carried out as usual. Operations and admin
 * endpoints are never shed.
 *
 * One request is held in flight for as long as the test needs, without any timing: a Loyverse
 * receipt names only its customer, so the bridge fetches the customer from the Loyverse API (a local
 * server here) before recording anything, and that server answers only when the test lets it.
 */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { adapters } from '../../adapters/index.js';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, checkout, eventually, postJson, startHarness, type Harness } from '../support/harness.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';
import { postRaw, signature } from '../support/webhooks.js';

const STORE = 'store-7';
const HELD_TX = `loyverse:${STORE}:9-0001`;

/** A bare Loyverse sale of 5.00 whose customer is known only by id. */
const receipt = {
  receipt_number: '9-0001',
  receipt_type: 'SALE',
  created_at: '2026-11-21T10:20:00.000Z',
  updated_at: '2026-11-21T10:20:00.000Z',
  receipt_date: '2026-11-21T10:19:58.000Z',
  total_money: 5,
  total_tax: 0,
  total_discount: 0,
  tip: 0,
  surcharge: 0,
  customer_id: 'cust-held',
  store_id: STORE,
  line_items: [{ id: 'line-1', item_id: 'item-1', item_name: 'Tea', quantity: 1, price: 5, gross_total_money: 5, total_money: 5, total_discount: 0, line_taxes: [] }],
  payments: [{ payment_type_id: 'pt-1', name: 'Cash', money_amount: 5 }],
};

let h: Harness;
const logLines: string[] = [];
let loyverseApi: LocalServer;
/** Resolves when the bridge asks the Loyverse API for the customer; `release()` lets it answer. */
let customerAsked: Promise<void>;
let release: () => void;

beforeAll(async () => {
  let asked!: () => void;
  customerAsked = new Promise((resolve) => (asked = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  loyverseApi = await listenLocally((req: http.IncomingMessage, res: http.ServerResponse) => {
    asked();
    void released.then(() => {
      res.writeHead(req.url === '/v1.0/customers/cust-held' ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'cust-held', name: 'Held Customer', email: null, phone_number: '+15550009999' }));
    });
  });
  h = await startHarness({
    logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
    env: { POS_MAX_IN_FLIGHT: '1', POS_API_TIMEOUT_MS: '60000' },
    overrides: { adapters, posSettings: { loyverse: { webhookSecret: SANDBOX_WEBHOOK_SECRET, accessToken: 'lv-token', apiBaseUrl: loyverseApi.url } } },
  });
});
afterAll(async () => {
  release();
  await h.close();
  await loyverseApi.close();
});

const metrics = async () => (await request(h.bridge.url).get('/metrics')).text;

describe('with POS_MAX_IN_FLIGHT=1 and one POS request held in flight', () => {
  let held: Promise<request.Response>;

  beforeAll(async () => {
    held = postJson(h.bridge.url, '/v1/checkouts/loyverse', receipt).then((r) => r);
    await customerAsked;
    // The held checkout is inside the handler, waiting for its customer: counted, not yet recorded.
    expect(await h.bridge.store.get(HELD_TX)).toBeUndefined();
    expect(await metrics()).toMatch(/^bridge_pos_requests_in_flight 1$/m);
  });

  it.each([
    ['a checkout', '/v1/checkouts/generic', checkout({ orderId: 'SHED-1' })],
    ['a refund', '/v1/refunds/generic', { orderId: 'SHED-1', refundId: 'R-1' }],
  ])('%s is answered 503 with Retry-After, and nothing is recorded or sent', async (_name, path, body) => {
    const res = await postJson(h.bridge.url, path, body);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    // The request log says why it was refused, as for a 4xx (docs/observability.md).
    const line = await eventually(
      () => logLines.map((l) => JSON.parse(l) as Record<string, any>).find((l) => l.req?.id === res.headers['x-request-id'] && l.msg === 'request completed'),
      (found) => found !== undefined,
    );
    expect(line).toMatchObject({ level: 40, res: { statusCode: 503 }, refusal: { code: 'overloaded', reason: 'in_flight', message: expect.stringContaining('nothing was recorded') } });
    expect(res.body).toEqual({ error: { code: 'overloaded', message: expect.stringMatching(/nothing was recorded/), reason: 'in_flight', retryAfterSeconds: 1 }, requestId: expect.any(String) });
    expect(await h.bridge.store.get('generic:SHED-1')).toBeUndefined();
    expect(await h.bridge.store.count()).toBe(0);
    expect(h.sim.books().accrueRequests + h.sim.books().reverseRequests).toBe(0);
  });

  it('an authentic webhook is answered 503 too, and kept nowhere (the POS redelivers)', async () => {
    const body = JSON.stringify({ merchant_id: 'm-1', type: 'receipts.update', created_at: '2026-11-21T11:00:01.000Z', receipts: [{ ...receipt, receipt_number: '9-0002' }] });
    const settings = { webhookSecret: SANDBOX_WEBHOOK_SECRET, apiBaseUrl: '' };
    const res = await postRaw(`${h.bridge.url}/v1/webhooks/loyverse`, body, [signature(adapters.get('loyverse')!, settings, body)]);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('overloaded');
    expect((await h.bridge.store.listDeadLetters({ offset: 0, limit: 10 })).total).toBe(0);
    expect(await h.bridge.store.count()).toBe(0);
  });

  it('operations and admin endpoints are still answered', async () => {
    expect((await request(h.bridge.url).get('/healthz')).status).toBe(200);
    expect((await request(h.bridge.url).get('/readyz')).status).toBe(200);
    expect((await request(h.bridge.url).get('/v1/admin/transactions').set('authorization', `Bearer ${ADMIN_TOKEN}`)).status).toBe(200);
    const text = await metrics();
    expect(text).toMatch(/^bridge_pos_requests_shed_total\{endpoint="checkouts",reason="in_flight"\} 1$/m);
    expect(text).toMatch(/^bridge_pos_requests_shed_total\{endpoint="refunds",reason="in_flight"\} 1$/m);
    expect(text).toMatch(/^bridge_pos_requests_shed_total\{endpoint="webhooks",reason="in_flight"\} 1$/m);
  });

  it('once the held request is answered, the shed checkout sent again is carried out once', async () => {
    release();
    const first = await held;
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ transactionId: HELD_TX, status: 'accrued' });
    expect(await metrics()).toMatch(/^bridge_pos_requests_in_flight 0$/m);

    const again = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'SHED-1' }));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ transactionId: 'generic:SHED-1', status: 'accrued', repeat: false });
    expect(h.sim.books().transactions['generic:SHED-1']).toMatchObject({ accruals: 1 });
  });
});

describe('what does not take a slot (POS_MAX_IN_FLIGHT=1)', () => {
  /** Opens a raw connection and sends a POS request's headers and the first `sent` bytes of its body. */
  function partialPost(sent: number): Promise<net.Socket> {
    const body = JSON.stringify(checkout({ orderId: 'SLOW-1' }));
    const { port } = new URL(h.bridge.url);
    return new Promise((resolve) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(`POST /v1/checkouts/generic HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, sent)}`, () => resolve(socket));
      });
      socket.on('error', () => undefined);
    });
  }

  it('a client still sending its body does not hold the slot', async () => {
    const slow = await partialPost(10);
    try {
      const res = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'FAST-1' }));
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('accrued');
    } finally {
      slow.destroy();
    }
  });

  it('requests refused unread, and a client that gave up mid-body, leave the slot free', async () => {
    expect((await request(h.bridge.url).post('/v1/checkouts/generic').set('content-type', 'text/plain').send('x')).status).toBe(415);
    expect((await postJson(h.bridge.url, '/v1/checkouts/ncr', checkout())).status).toBe(404);
    const gone = await partialPost(20);
    gone.destroy();
    const res = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'FAST-2' }));
    expect(res.status).toBe(200);
    expect(await metrics()).toMatch(/^bridge_pos_requests_in_flight 0$/m);
  });
});
