/**
 * `npm start` with nothing configured, as a process (the built dist/src/main.js): a signed webhook
 * from every POS accrues at the loyalty simulator, and its refund reverses it, over real HTTP. The
 * sale is made in the simulator's fake POS (the demo merchant's account there, over its control
 * API), and the fake builds the delivery as that POS would send it, signed with the sandbox's
 * public secret (and, for Square, the notification URL the banner names). Square's and Clover's
 * deliveries carry only ids and Loyverse's receipts only a customer's id: the bridge completes them
 * from the fake POS APIs sandbox points it at, with the demo merchant's sealed access token.
 * Needs `npm run build` first (npm test does it).
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { DEMO_MERCHANTS, SANDBOX_POS_APIS } from '../../src/sandbox.js';
import { POS_API_BASE_PATHS } from '../../simulator/index.js';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN } from '../support/harness.js';
import { bannerOf, sandboxLedgerUrl, simulatorBooks, startSandbox, type Banner } from '../support/sandbox.js';
import { postRaw } from '../support/webhooks.js';

type Pos = 'square' | 'shopify' | 'clover' | 'toast' | 'loyverse';

/** 2 × 4.50 less 0.50 off the line: a Check of 8.50, whatever tax and tip the POS writes beside it. */
const LINES = [{ name: 'Latte', unitPrice: 450, quantity: 2, discount: 50, tax: 68 }];
const CHECK_CENTS = 850;

/**
 * What each POS's fake is asked to sign, for the sale and for its refund: the request body of
 * `/__sim/pos/<pos>/accounts/<id>/webhooks` (docs/simulator-pos-apis.md, "Webhooks").
 */
const DELIVERIES: Record<Pos, { sale(order: any, notificationUrl: string): unknown; refund(order: any, refund: any, notificationUrl: string): unknown }> = {
  square: {
    sale: (order, notificationUrl) => ({ event: 'order.updated', id: order.id, signatureKey: SANDBOX_WEBHOOK_SECRET, notificationUrl }),
    refund: (_order, made, notificationUrl) => ({ event: 'refund.updated', id: made.refund.id, signatureKey: SANDBOX_WEBHOOK_SECRET, notificationUrl }),
  },
  shopify: {
    sale: (order) => ({ topic: 'orders/paid', id: order.id, secret: SANDBOX_WEBHOOK_SECRET }),
    refund: (_order, made) => ({ topic: 'refunds/create', id: made.id, secret: SANDBOX_WEBHOOK_SECRET }),
  },
  clover: {
    sale: (order) => ({ type: 'CREATE', id: order.id, authCode: SANDBOX_WEBHOOK_SECRET }),
    refund: (order) => ({ type: 'UPDATE', id: order.id, authCode: SANDBOX_WEBHOOK_SECRET }),
  },
  toast: {
    sale: (order) => ({ id: order.guid, secret: SANDBOX_WEBHOOK_SECRET }),
    refund: (order) => ({ id: order.guid, secret: SANDBOX_WEBHOOK_SECRET }),
  },
  loyverse: {
    sale: (receipt) => ({ id: receipt.receipt_number, secret: SANDBOX_WEBHOOK_SECRET }),
    refund: (_receipt, refundReceipt) => ({ id: refundReceipt.receipt_number, secret: SANDBOX_WEBHOOK_SECRET }),
  },
};

/** How a refund of the whole order is asked of each fake: by the order's id in that POS. */
const orderIdOf: Record<Pos, (order: any) => string> = {
  square: (o) => o.id,
  shopify: (o) => String(o.id),
  clover: (o) => o.id,
  toast: (o) => o.guid,
  loyverse: (o) => o.receipt_number,
};

describe('sandbox: signed webhooks from every POS accrue and reverse, completed from the fake POS APIs', () => {
  let dir: string;
  let bridge: BridgeProcess;
  let banner: Banner;

  const sim = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${banner.simulator}${path}`, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const json = (await res.json()) as any;
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json)}`);
    return json;
  };
  const books = (merchantId: string) => simulatorBooks(banner, merchantId);
  /** Posts the fake's delivery byte for byte, with its headers, to the bridge's webhook route. */
  const deliver = async (pos: Pos, delivery: { headers: Record<string, string>; body: string }) => postRaw(`${bridge.url}/v1/webhooks/${pos}`, delivery.body, Object.entries(delivery.headers));

  beforeAll(async () => {
    ({ dir, bridge, banner } = await startSandbox('bridge-sandbox-pos-'));
  }, 30_000);
  afterAll(async () => {
    await bridge?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('the banner names the fake POS APIs and the URL Square signs; the demo merchants hold their POS accounts and sealed tokens', async () => {
    expect(banner.squareNotificationUrl).toBe(`http://localhost:${bridge.port}/v1/webhooks/square`);
    // Every POS: each has an API base URL variable (SANDBOX_POS_APIS).
    expect(SANDBOX_POS_APIS).toEqual(expect.arrayContaining(['square', 'clover', 'loyverse']));
    expect(banner.text).toContain(`POS APIs:   ${SANDBOX_POS_APIS.map((pos) => `${banner.simulator}${POS_API_BASE_PATHS[pos]}`).join(', ')} (the simulator's fakes)`);
    const merchant = (await (await fetch(`${bridge.url}/v1/admin/merchants/demo-bakery`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
    // The API shows a token's hint only: the merchant holds it sealed, as every POS secret.
    expect(merchant.pos).toMatchObject({
      square: { merchantId: 'DEMOBAKERYSQ1', accessToken: expect.stringMatching(/^…/) },
      clover: { merchantId: 'DEMOBAKERYCL1', accessToken: expect.stringMatching(/^…/) },
      loyverse: { merchantId: 'b0000000-0000-4000-8000-000000000002', accessToken: expect.stringMatching(/^…/) },
    });
    expect(JSON.stringify(merchant)).not.toContain('sandbox-square-token-demo-bakery');
    // Sealed in the ledger too: the merchant's file holds no token in the clear.
    const stored = readFileSync(join(dir, 'data', 'ledger.merchants', 'demo-bakery.json'), 'utf8');
    expect(stored).toContain('DEMOBAKERYCL1');
    expect(stored).not.toMatch(/sandbox-[a-z]+-token-/);
    // The fakes hold the same accounts, with the tokens the banner documents.
    const squareAccounts = (await sim('GET', '/__sim/pos/square/accounts')).accounts;
    expect(squareAccounts).toEqual(expect.arrayContaining([expect.objectContaining({ merchantId: 'DEMOBAKERYSQ1', accessToken: 'sandbox-square-token-demo-bakery' })]));
    expect(banner.text).toContain("POS API tokens (public, at the simulator's fake POSes): sandbox-<pos>-token-demo-bakery");
    // Printed for the person at the terminal, never logged.
    const logs = bridge.output().split('\n').filter((l) => l.startsWith('{'));
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.filter((l) => /sandbox-[a-z]+-token-/.test(l))).toEqual([]);
  }, 30_000);

  const cases: [Pos, (typeof DEMO_MERCHANTS)[number]['id'], string][] = [
    ['square', 'demo-bakery', 'fetches the order and its customer from the fake Square API'],
    ['shopify', 'demo-cafe', 'carries the whole order'],
    ['clover', 'demo-bakery', 'fetches the order from the fake Clover API'],
    ['toast', 'demo-cafe', 'carries the whole order'],
    ['loyverse', 'demo-bakery', "fetches the receipt's customer from the fake Loyverse API"],
  ];
  it.each(cases)('%s: a sale in %s\'s fake POS account, delivered signed, accrues once; its refund reverses it (the delivery %s)', async (pos, merchantId) => {
    const demo = DEMO_MERCHANTS.find((d) => d.id === merchantId)!;
    const account = demo.accounts[pos];
    const notificationUrl = banner.squareNotificationUrl!;
    const phone = merchantId === 'demo-bakery' ? '+493012345678' : '+442079460018';
    const order = await sim('POST', `/__sim/pos/${pos}/accounts/${account}/orders`, { lines: LINES, tip: 100, customer: { firstName: 'Ada', phone, email: `ada-${pos}@example.test` } });

    const sale = await deliver(pos, await sim('POST', `/__sim/pos/${pos}/accounts/${account}/webhooks`, DELIVERIES[pos].sale(order, notificationUrl)));
    expect([sale.status, sale.body.results]).toEqual([200, [expect.objectContaining({ action: 'checkout', status: 'accrued', merchantId })]]);
    const transactionId: string = sale.body.results[0].transactionId;
    expect(transactionId.startsWith(`${pos}:`)).toBe(true);
    expect((await books(merchantId)).transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 0, amount: CHECK_CENTS });
    // Only the merchant whose POS account the delivery names.
    const other = DEMO_MERCHANTS.find((d) => d.id !== merchantId)!;
    expect((await books(other.id)).transactions[transactionId]).toBeUndefined();

    // The same sale delivered again (a new delivery of it) changes nothing.
    const again = await deliver(pos, await sim('POST', `/__sim/pos/${pos}/accounts/${account}/webhooks`, DELIVERIES[pos].sale(order, notificationUrl)));
    expect(again.status).toBe(200);
    expect(again.body.results.every((r: any) => r.action !== 'dead_lettered')).toBe(true);
    expect((await books(merchantId)).transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 0 });

    const refund = await sim('POST', `/__sim/pos/${pos}/accounts/${account}/refunds`, { orderId: orderIdOf[pos](order) });
    const reversed = await deliver(pos, await sim('POST', `/__sim/pos/${pos}/accounts/${account}/webhooks`, DELIVERIES[pos].refund(order, refund, notificationUrl)));
    expect(reversed.status).toBe(200);
    expect(reversed.body.results).toEqual(expect.arrayContaining([expect.objectContaining({ action: 'refund', transactionId, status: 'reversed', merchantId })]));
    expect((await books(merchantId)).transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    // Nothing of it waits as a dead letter.
    const letters = (await (await fetch(`${bridge.url}/v1/admin/dead-letters?merchantId=${merchantId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
    expect(letters.items.filter((l: any) => l.pos === pos)).toEqual([]);
  }, 30_000);

  it('a restart: a POS API variable that is set is left alone; a demo merchant lacking a POS account gets it back; tokens sealed at the first start read the new fakes', async () => {
    const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
    // As a ledger from before the fake POS APIs: demo-bakery without its Clover account.
    const patched = await fetch(`${bridge.url}/v1/admin/merchants/demo-bakery`, { method: 'PATCH', headers: adminHeaders, body: JSON.stringify({ pos: { clover: null } }) });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as any).pos.clover).toBeUndefined();
    expect(await bridge.kill('SIGTERM')).toBe(0);

    // Nothing listens on port 9: a Square API set there is refused, and the bridge must use it all the same.
    // The ledger kept (SANDBOX_LEDGER=keep): the merchant made at the first start is what is restarted on.
    bridge = await spawnBridge({ LEDGER_URL: sandboxLedgerUrl(dir), LOG_LEVEL: 'info', SQUARE_API_BASE_URL: 'http://127.0.0.1:9', SANDBOX_LEDGER: 'keep' });
    banner = await bannerOf(bridge);
    expect(banner.demos['demo-bakery']).toMatchObject({ created: false });
    const pointed = SANDBOX_POS_APIS.filter((pos) => pos !== 'square').map((pos) => `${banner.simulator}${POS_API_BASE_PATHS[pos]}`);
    expect(banner.text).toContain(`POS APIs:   ${pointed.join(', ')} (the simulator's fakes)`);
    const merchant = (await (await fetch(`${bridge.url}/v1/admin/merchants/demo-bakery`, { headers: adminHeaders })).json()) as any;
    expect(merchant.pos.clover).toEqual({ merchantId: 'DEMOBAKERYCL1', accessToken: expect.stringMatching(/^…/) });

    const sale = async (pos: Pos, merchantId: string, request: (order: any) => unknown) => {
      const account = DEMO_MERCHANTS.find((d) => d.id === merchantId)!.accounts[pos];
      const order = await sim('POST', `/__sim/pos/${pos}/accounts/${account}/orders`, { lines: LINES, customer: { phone: '+442079460018' } });
      return deliver(pos, await sim('POST', `/__sim/pos/${pos}/accounts/${account}/webhooks`, request(order)));
    };
    // demo-bakery's Clover account, given back at this start, and demo-cafe's, sealed at the first.
    for (const merchantId of ['demo-bakery', 'demo-cafe']) {
      const answer = await sale('clover', merchantId, (order) => DELIVERIES.clover.sale(order, ''));
      expect(answer.body.results).toEqual([expect.objectContaining({ action: 'checkout', status: 'accrued', merchantId })]);
    }
    // Square's API is where SQUARE_API_BASE_URL says: unreachable, so the delivery waits as a dead letter.
    const square = await sale('square', 'demo-cafe', (order) => DELIVERIES.square.sale(order, banner.squareNotificationUrl!));
    expect(square.body.results).toEqual([expect.objectContaining({ action: 'dead_lettered', merchantId: 'demo-cafe' })]);
    expect(square.body.results[0].reason).toContain('square API GET /v2/orders/');
  }, 60_000);
});
