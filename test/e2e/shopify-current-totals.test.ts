/**
 * Shopify's money after refunds and edits, end to end over HTTP against the simulator's fake
 * Shopify (docs/pos-systems.md, Shopify, "An order already refunded or edited"):
 * - backfill finding a partly refunded order records the sale as paid and the refund as a refund
 *   (accrue 1599, reverse it, re-accrue 1166), not an accrual of the current total alone;
 * - backfill finding an order edited before payment (a line removed, no refund) accrues the edited
 *   order (1300);
 * - the three-way report finds `pos_amount_differs` where the POS's current figure and its refunds
 *   disagree with what the ledger accrued less what it reversed, and nothing on a clean order.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { PosSettings } from '../../src/pos/contract.js';
import { BACKFILL_POSES, sale, settingsFor } from '../support/backfill-pos.js';
import { accruedOnce, ADMIN_TOKEN, eventually, startHarness, type Harness } from '../support/harness.js';

const HOUR = 3_600_000;
const p = BACKFILL_POSES.find((b) => b.pos === 'shopify')!;
const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

describe('Shopify orders after refunds and edits: backfill and the three-way report', () => {
  let h: Harness;
  let account: { account: string; accessToken: string };
  let settings: PosSettings;
  let phone = 0;
  const customer = () => `+1415555${String(7000 + ++phone)}`;

  beforeAll(async () => {
    h = await startHarness({ env: { BACKFILL_INTERVAL_MS: '0', BACKFILL_OVERLAP_MS: String(HOUR) }, overrides: { startBackfill: false } });
    account = p.addAccount(h.sim);
    settings = { ...h.config.pos.shopify!, ...settingsFor(p, h.simServer.url, account) };
    await h.restart({ posSettings: { shopify: settings }, backfill: { pageSize: 50, retry: { attempts: 2, baseMs: 1, maxMs: 1 }, sleep: async () => {} } });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
  });

  const admin = (req: request.Test) => req.set('authorization', `Bearer ${ADMIN_TOKEN}`);
  const backfill = (since: string) => admin(request(h.bridge.url).post('/v1/admin/backfill')).send({ pos: 'shopify', since });
  const record = async (transactionId: string) => (await admin(request(h.bridge.url).get(`/v1/admin/transactions/${encodeURIComponent(transactionId)}`))).body as { status: string; remainderTransactionId?: string };
  const report = () => admin(request(h.bridge.url).get(`/v1/admin/reports/reconcile?from=${encodeURIComponent(new Date(Date.now() - HOUR).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + HOUR).toISOString())}`));
  const shop = () => h.sim.pos.shopify;

  it('a partly refunded order found by backfill: accrued as paid (1599), reversed, 1166 re-accrued; the report finds no difference', async () => {
    const order = shop().addOrder(account.account, sale(customer(), ago(20)));
    shop().addRefund(account.account, { orderId: String(order.id), lines: [{ line: 0, quantity: 1 }], at: ago(10) });
    const listed = (await request(`${h.simServer.url}/shopify/${account.account}`).get(`/admin/api/2025-01/orders/${order.id}.json`).set('x-shopify-access-token', account.accessToken)).body.order;
    expect(listed).toMatchObject({ subtotal_price: '15.99', current_subtotal_price: '11.66', total_price: '17.92', current_total_price: '13.36' });

    const pass = await backfill(ago(60));
    expect(pass.status).toBe(200);
    expect(pass.body).toMatchObject({ examined: 2, refused: [] });
    const transactionId = `shopify:${order.id}`;
    const reduced = await eventually(() => record(transactionId), (r) => r.status === 'reversed' && r.remainderTransactionId !== undefined);
    const remainder = reduced.remainderTransactionId!;
    await accruedOnce(h.sim, [remainder]);
    await eventually(() => h.sim.books().transactions[transactionId], (t) => t?.reversals === 1);
    const books = h.sim.books();
    expect(books.transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 1, amount: 1599 });
    expect(books.transactions[remainder]).toMatchObject({ accruals: 1, reversals: 0, amount: 1166 });

    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body.differences.filter((d: { orderId?: string }) => d.orderId === String(order.id))).toEqual([]);
  });

  it('an order edited before payment (the muffin removed, no refund), found by backfill: the edited order is accrued, 1300', async () => {
    const order = shop().addOrder(account.account, sale(customer(), ago(20), { open: true }));
    shop().editOrder(account.account, { orderId: String(order.id), lines: [{ line: 1 }], at: ago(15) });
    shop().payOrder(account.account, String(order.id), ago(12));
    const pass = await backfill(ago(60));
    expect(pass.status).toBe(200);
    expect(pass.body.refused).toEqual([]);
    const transactionId = `shopify:${order.id}`;
    await accruedOnce(h.sim, [transactionId]);
    expect(h.sim.books().transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 0, amount: 1300 });
    const res = await report();
    expect(res.body.differences.filter((d: { orderId?: string }) => d.orderId === String(order.id))).toEqual([]);
  });

  it('pos_amount_differs: the ledger reversed a refund measured otherwise than the POS (two lattes, 8.66, where the POS refunded one, 4.33)', async () => {
    const order = shop().addOrder(account.account, sale(customer(), ago(5)));
    const delivery = shop().webhook(account.account, { topic: 'orders/paid', id: String(order.id), secret: settings.webhookSecret! });
    expect((await request(h.bridge.url).post('/v1/webhooks/shopify').set(delivery.headers).send(delivery.body)).status).toBe(200);
    const transactionId = `shopify:${order.id}`;
    await accruedOnce(h.sim, [transactionId]);
    const made = shop().addRefund(account.account, { orderId: String(order.id), lines: [{ line: 0, quantity: 1 }], at: ago(2) });
    // The refund as an integration posted it: the same refund id, but two units of the line.
    const posted = structuredClone(made) as unknown as { refund_line_items: Record<string, unknown>[]; transactions: { amount: string }[] };
    Object.assign(posted.refund_line_items[0]!, { quantity: 2, subtotal: 8.66, subtotal_set: { shop_money: { amount: '8.66', currency_code: 'USD' }, presentment_money: { amount: '8.66', currency_code: 'USD' } }, total_tax: 0.45, total_tax_set: { shop_money: { amount: '0.45', currency_code: 'USD' }, presentment_money: { amount: '0.45', currency_code: 'USD' } } });
    posted.transactions[0]!.amount = '9.11';
    const refunded = await request(h.bridge.url).post('/v1/refunds/shopify').set('content-type', 'application/json').send(JSON.stringify(posted));
    expect(refunded.body).toMatchObject({ status: 'reversed', remainder: { status: 'accrued' } });
    const remainder = (await record(transactionId)).remainderTransactionId!;
    await accruedOnce(h.sim, [remainder]);
    expect(h.sim.books().transactions[remainder]!.amount).toBe(733);

    const res = await report();
    expect(res.status).toBe(200);
    const mine = res.body.differences.filter((d: { orderId?: string }) => d.orderId === String(order.id));
    expect(mine).toEqual([expect.objectContaining({ kind: 'pos_amount_differs', transactionId })]);
    expect(mine[0].why).toContain('now stands at 11.66 after its refunds and edits');
    expect(mine[0].why).toContain('the ledger accrued 23.32 and reversed 15.99, 7.33 in all');
    expect(res.body.counts.pos_amount_differs).toBe(1);
  });
});
