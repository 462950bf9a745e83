/**
 * Backfill over HTTP against the simulator's fake POS APIs, for each of the five POSes (README
 * "Backfill"): a lost webhook recovered (accrued exactly once at the loyalty simulator); the webhook
 * arriving afterwards changes nothing; paging across several pages; a 429 mid-window leaves the
 * watermark where it was and a later pass completes; late data inside the overlap window is found
 * by the next scheduled pass; an instance that stops mid-pass loses and doubles nothing once another
 * takes over; on PostgreSQL two instances never read one account at once, and a pass keeps its
 * lease through a page that takes longer than the lease. Also: refunds whose webhooks were lost, a
 * 429 without Retry-After (the back-off asserted through the injectable sleep), a Square seller of
 * 23 locations, and the found/passes metrics of every POS.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { startBridge, type Bridge, type BridgeOverrides } from '../../src/bridge.js';
import { emptyMemoryLedger, MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { createLogger, silentLogger } from '../../src/kernel/logger.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { deriveTransactionId } from '../../src/kernel/transaction-id.js';
import { BACKFILL_POSES, sale, settingsFor, type BackfillPos } from '../support/backfill-pos.js';
import { accruedOnce, ADMIN_TOKEN, eventually, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const HOUR = 3_600_000;
/** Two objects a page, so a handful of orders spans several pages; a 429 is tried twice, without waiting. */
const FAST: BridgeOverrides['backfill'] = { pageSize: 2, retry: { attempts: 2, baseMs: 1, maxMs: 1 }, sleep: async () => {} };
const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

interface Setup {
  h: Harness;
  account: { account: string; accessToken: string };
  settings: PosSettings;
  overrides: Partial<BridgeOverrides>;
}

/** A harness whose default merchant holds an account on the POS's fake API, with its token. */
async function setUp(p: BackfillPos, env: Record<string, string> = {}, extra: Partial<BridgeOverrides> = {}): Promise<Setup> {
  const h = await startHarness({ env: { BACKFILL_INTERVAL_MS: '0', BACKFILL_OVERLAP_MS: String(HOUR), ...env }, overrides: { startBackfill: false } });
  const account = p.addAccount(h.sim);
  const settings = { ...h.config.pos[p.pos]!, ...settingsFor(p, h.simServer.url, account) };
  const overrides: Partial<BridgeOverrides> = { posSettings: { [p.pos]: settings }, backfill: FAST, ...extra };
  await h.restart(overrides);
  return { h, account, settings, overrides };
}

const backfill = (bridge: Bridge, body: Record<string, unknown>) => request(bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`).send(body);
const status = async (bridge: Bridge, pos: string) => {
  const res = await request(bridge.url).get('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`);
  expect(res.status).toBe(200);
  return (res.body.items as { pos: string; watermark?: string; lastPass?: { error?: string; new: number }; running?: unknown }[]).find((i) => i.pos === pos);
};
const record = async (bridge: Bridge, transactionId: string) => {
  const res = await request(bridge.url).get(`/v1/admin/transactions/${encodeURIComponent(transactionId)}`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
  expect(res.status).toBe(200);
  return res.body as { status: string; version: number; updatedAt: string; remainderTransactionId?: string; history: { event: string }[] };
};
const history = async (bridge: Bridge, transactionId: string) => (await record(bridge, transactionId)).history.map((e) => e.event);
/** A counter's value in the Prometheus text for exactly these labels (in any order); 0 when the series is absent. */
function metricValue(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort().join(',');
  for (const line of text.split('\n')) {
    const match = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (match?.[1] === name && match[2]!.split(',').sort().join(',') === wanted) return Number(match[3]);
  }
  return 0;
}
describe.each(BACKFILL_POSES)('backfill: $pos', (p) => {
  let s: Setup | undefined;
  afterEach(async () => {
    await s?.h.close();
    s = undefined;
  });
  const addOrder = (phone: string, at: string) => p.orderId(s!.h.sim.pos[p.pos].addOrder(s!.account.account, sale(phone, at)));

  it('recovers an order whose webhook was lost: accrued once, its history says backfill found it; a second pass and the webhook arriving afterwards change nothing', async () => {
    s = await setUp(p);
    const { h } = s;
    const orderId = addOrder('+14155550201', ago(10));
    const first = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ merchantId: 'default', pos: p.pos, examined: 1, known: 0, refused: [], unpaid: 0 });
    expect(first.body.new).toHaveLength(1);
    const [transactionId] = first.body.new as string[];
    await accruedOnce(h.sim, [transactionId!]);
    expect((await history(h.bridge, transactionId!))[0]).toMatch(/found by backfill/);
    // Its origin says so, and the POS's object as the listing read it is kept as its payload.
    const found = await h.bridge.store.get(transactionId!);
    expect(found!.origin).toEqual({ via: 'backfill', receivedAt: expect.any(String), payload: true });
    const kept = await h.bridge.store.getPayload(transactionId!);
    expect(kept).toMatchObject({ pos: p.pos, bodyEncoding: 'utf8', headers: {} });
    expect(kept!.body).toContain(orderId);
    expect(first.body.watermark).toEqual(expect.any(String));

    const second = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(second.body).toMatchObject({ examined: 1, new: [], known: 1, refused: [] });
    // Settled before the webhook comes, so that "unchanged" below means the webhook changed nothing.
    await eventually(() => record(h.bridge, transactionId!), (r) => r.status === 'accrued');

    // The webhook finally arrives: recognised as the order recorded, nothing sent.
    const before = await record(h.bridge, transactionId!);
    const requests = h.sim.books().accrueRequests;
    const delivery = p.webhook(h.sim, s.account.account, orderId, s.settings);
    const res = await request(h.bridge.url).post(`/v1/webhooks/${p.pos}`).set(delivery.headers).send(delivery.body);
    // Answered as a repeat of the order recorded: its record, already accrued, and no dead letter.
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ pos: p.pos, results: [expect.objectContaining({ action: 'checkout', transactionId, status: 'accrued', duplicate: true })] });
    const letters = await request(h.bridge.url).get(`/v1/admin/dead-letters?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(letters.body.total).toBe(0);
    // The record is as backfill left it: not written again.
    const after = await record(h.bridge, transactionId!);
    expect({ version: after.version, updatedAt: after.updatedAt, history: after.history.length, status: after.status }).toEqual({ version: before.version, updatedAt: before.updatedAt, history: before.history.length, status: 'accrued' });
    // And the loyalty service's books hold the one accrual backfill made, nothing sent since.
    expect(h.sim.books().accrueRequests).toBe(requests);
    await accruedOnce(h.sim, [transactionId!]);
  });

  it('a sale and its partial refund found together: accrued, reversed once and the rest re-accrued; a second pass changes nothing', async () => {
    s = await setUp(p);
    const { h } = s;
    const orderId = addOrder('+14155550271', ago(10));
    h.sim.pos[p.pos].addRefund(s.account.account, { orderId, lines: [{ line: 0, quantity: 1 }], at: ago(5) });
    const first = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ examined: 2, known: 0, refused: [] });
    const [sale, ...others] = first.body.new as string[];
    expect(others.every((id) => id === sale)).toBe(true);
    await eventually(() => h.sim.books().transactions[sale!], (t) => t?.reversals === 1);
    // What the refund left is accrued once, under the remainder's own id.
    const remainder = (await eventually(() => record(h.bridge, sale!), (r) => r.remainderTransactionId !== undefined)).remainderTransactionId!;
    await accruedOnce(h.sim, [remainder]);
    const books = h.sim.books();
    expect(books.transactions[sale!]).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions[remainder]).toMatchObject({ accruals: 1, reversals: 0 });
    expect(books.doubleReversals).toEqual([]);
    await secondPassSendsNothing(books);
  });

  /** A sale whose webhook came: delivered, accrued once. Answers its order id and transactionId. */
  async function saleByWebhook(phone: string): Promise<{ orderId: string; transactionId: string }> {
    const orderId = addOrder(phone, ago(10));
    const delivery = p.webhook(s!.h.sim, s!.account.account, orderId, s!.settings);
    const res = await request(s!.h.bridge.url).post(`/v1/webhooks/${p.pos}`).set(delivery.headers).send(delivery.body);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([expect.objectContaining({ action: 'checkout', status: 'accrued' })]);
    const transactionId = res.body.results[0].transactionId as string;
    await accruedOnce(s!.h.sim, [transactionId]);
    return { orderId, transactionId };
  }

  /** The same window again: the sale and its refund known, and nothing sent to the loyalty service since `books`. */
  async function secondPassSendsNothing(books: ReturnType<Harness['sim']['books']>): Promise<void> {
    const again = await backfill(s!.h.bridge, { pos: p.pos, since: ago(60) });
    expect(again.body).toMatchObject({ examined: 2, new: [], known: 2, refused: [] });
    expect(s!.h.sim.books().reverseRequests).toBe(books.reverseRequests);
    expect(s!.h.sim.books().accrueRequests).toBe(books.accrueRequests);
  }

  it('a refund whose webhook was lost, of a sale accrued by its webhook: the next pass reverses it exactly once, its history says backfill found it; a second pass sends nothing', async () => {
    s = await setUp(p);
    const { h } = s;
    const { orderId, transactionId } = await saleByWebhook('+14155550281');
    // Refunded in the POS; its webhook never comes.
    h.sim.pos[p.pos].addRefund(s.account.account, { orderId, at: ago(5) });
    const pass = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(pass.status).toBe(200);
    expect(pass.body).toMatchObject({ examined: 2, known: 1, refused: [], new: [transactionId] });
    const reversed = await eventually(() => record(h.bridge, transactionId), (r) => r.status === 'reversed');
    expect(reversed.history.map((e) => e.event).some((e) => /refund/.test(e) && /found by backfill/.test(e))).toBe(true);
    await eventually(() => h.sim.books().transactions[transactionId], (t) => t?.reversals === 1);
    const books = h.sim.books();
    expect(books.transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 1, points: 0 });
    expect(books.doubleReversals).toEqual([]);
    await secondPassSendsNothing(books);
  });

  it('a partial refund whose webhook was lost, of a sale accrued by its webhook: the next pass reverses the sale once and accrues the remainder once; a second pass sends nothing', async () => {
    s = await setUp(p);
    const { h } = s;
    const { orderId, transactionId } = await saleByWebhook('+14155550282');
    const sold = h.sim.books().transactions[transactionId]!.amount;
    // One of three lattes (4.50 less its third of the 0.50 discount: 4.33) refunded in the POS; its webhook never comes.
    h.sim.pos[p.pos].addRefund(s.account.account, { orderId, lines: [{ line: 0, quantity: 1 }], at: ago(5) });
    const pass = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(pass.status).toBe(200);
    expect(pass.body).toMatchObject({ examined: 2, known: 1, refused: [], new: [transactionId] });
    const reduced = await eventually(() => record(h.bridge, transactionId), (r) => r.status === 'reversed' && r.remainderTransactionId !== undefined);
    const remainder = reduced.remainderTransactionId!;
    await accruedOnce(h.sim, [remainder]);
    await eventually(() => h.sim.books().transactions[transactionId], (t) => t?.reversals === 1);
    const books = h.sim.books();
    expect(books.transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.transactions[remainder]).toMatchObject({ accruals: 1, reversals: 0, amount: sold - 433 });
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
    await secondPassSendsNothing(books);
  });

  it('counts what each pass found in the metrics under its POS: new, known and unpaid orders, complete and failed passes', async () => {
    s = await setUp(p);
    const { h } = s;
    await saleByWebhook('+14155550291');
    addOrder('+14155550292', ago(8));
    // Loyverse has no unpaid receipts: a receipt is a payment.
    const unpaid = p.pos === 'loyverse' ? 0 : 1;
    if (unpaid) h.sim.pos[p.pos].addOrder(s.account.account, sale('+14155550293', ago(7), { open: true }));
    for (let i = 0; i < 2; i++) expect((await backfill(h.bridge, { pos: p.pos, since: ago(60) })).status).toBe(200);
    h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'server_error', on: 'list', times: 2 });
    expect((await backfill(h.bridge, { pos: p.pos, since: ago(60) })).status).toBe(502);

    const text = (await request(h.bridge.url).get('/metrics')).text;
    const found = (result: string) => metricValue(text, 'bridge_backfill_found_total', { pos: p.pos, result, merchant: 'default' });
    const passes = (outcome: string) => metricValue(text, 'bridge_backfill_passes_total', { pos: p.pos, outcome, merchant: 'default' });
    // The lost order is new once, then known; the sale its webhook brought is known on both passes.
    expect({ new: found('new'), known: found('known'), unpaid: found('unpaid') }).toEqual({ new: 1, known: 3, unpaid: 2 * unpaid });
    expect({ complete: passes('complete'), failed: passes('failed') }).toEqual({ complete: 2, failed: 1 });
  });

  it('pages through a window of several pages: every order once', async () => {
    s = await setUp(p);
    for (let i = 0; i < 5; i++) addOrder(`+1415555021${i}`, ago(20 - i));
    const res = await backfill(s.h.bridge, { pos: p.pos, since: ago(60) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ examined: 5, known: 0, refused: [] });
    expect(res.body.pages).toBeGreaterThanOrEqual(3);
    expect(new Set(res.body.new).size).toBe(5);
    await accruedOnce(s.h.sim, res.body.new as string[]);
  });

  it('a 429 mid-window (retried, then still refused) leaves the watermark where it was; a later pass completes the window', async () => {
    s = await setUp(p);
    const { h } = s;
    const empty = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    const watermark = empty.body.watermark as string;
    for (let i = 0; i < 5; i++) addOrder(`+1415555022${i}`, ago(20 - i));
    // The first pages are read; a later one is refused on every try.
    h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'rate_limit', on: 'list', after: 2, times: 2 });
    const failed = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(failed.status).toBe(502);
    expect(failed.body.error.code).toBe('pos_api_failed');
    const after = await status(h.bridge, p.pos);
    expect(after!.watermark).toBe(watermark);
    expect(after!.lastPass!.error).toMatch(/429/);

    const done = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(done.status).toBe(200);
    expect(done.body.examined).toBe(5);
    expect(done.body.new.length + done.body.known).toBe(5);
    expect(Date.parse(done.body.watermark)).toBeGreaterThan(Date.parse(watermark));
    const all = (await request(h.bridge.url).get(`/v1/admin/transactions?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as { transactionId: string }[];
    expect(all).toHaveLength(5);
    await accruedOnce(h.sim, all.map((r) => r.transactionId));
  });

  it("a 429 without Retry-After mid-window: each try waits the README's back-off (1, 2, 4 s), four tries in all; the watermark stays while the page keeps failing, and a later pass whose page passes on a retry completes the window", async () => {
    // The waits are recorded, not slept: the schedule is asserted without a timed test.
    const waits: number[] = [];
    s = await setUp(p, {}, { backfill: { pageSize: 2, sleep: async (ms) => void waits.push(ms) } });
    const { h } = s;
    const empty = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(empty.status).toBe(200);
    const watermark = empty.body.watermark as string;
    for (let i = 0; i < 5; i++) addOrder(`+1415555027${i}`, ago(20 - i));
    const rateLimit = (times: number) => h.sim.pos[p.pos].faults(s!.account.account).inject({ kind: 'rate_limit', on: 'list', after: 2, times, retryAfter: null });

    // Refused on every try: waits of 1, 2 and 4 s between the four, then the pass stops.
    rateLimit(4);
    const failed = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(failed.status).toBe(502);
    expect(failed.body.error.code).toBe('pos_api_failed');
    expect(waits).toEqual([1000, 2000, 4000]);
    expect(h.sim.pos[p.pos].faults(s.account.account).pending()).toBe(0);
    const after = await status(h.bridge, p.pos);
    expect(after!.watermark).toBe(watermark);
    expect(after!.lastPass!.error).toMatch(/429/);

    // Refused twice, then answered: the pass waits 1 and 2 s and reads the window to its end.
    waits.length = 0;
    rateLimit(2);
    const done = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(done.status).toBe(200);
    expect(waits).toEqual([1000, 2000]);
    expect(done.body.examined).toBe(5);
    expect(Date.parse(done.body.watermark)).toBeGreaterThan(Date.parse(watermark));
    expect((await status(h.bridge, p.pos))!.lastPass!.error).toBeUndefined();
    const all = (await request(h.bridge.url).get(`/v1/admin/transactions?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as { transactionId: string }[];
    expect(all).toHaveLength(5);
    await accruedOnce(h.sim, all.map((r) => r.transactionId));
  });

  it('scheduled passes start the overlap before the watermark: an order that turns up late inside it is found; one older than the overlap is not', async () => {
    s = await setUp(p, { BACKFILL_INTERVAL_MS: '50' }, { startBackfill: true });
    const { h } = s;
    await h.bridge.backfill.rounds(1);
    const watermark = (await eventually(() => status(h.bridge, p.pos), (row) => row?.watermark !== undefined))!.watermark!;
    // Modified 10 minutes before the watermark, listed by the POS only now (an offline sale synced late).
    addOrder('+14155550231', new Date(Date.parse(watermark) - 10 * 60_000).toISOString());
    addOrder('+14155550232', new Date(Date.parse(watermark) - 2 * HOUR).toISOString());
    const listed = async () => (await request(h.bridge.url).get(`/v1/admin/transactions?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as { transactionId: string }[];
    await eventually(listed, (items) => items.length > 0);
    // Two more passes over the same overlap: the older order stays out, the found one is not found again.
    await h.bridge.backfill.rounds(2);
    const records = await listed();
    expect(records).toHaveLength(1);
    const row = await status(h.bridge, p.pos);
    await accruedOnce(h.sim, [records[0]!.transactionId]);
    expect((await history(h.bridge, records[0]!.transactionId))[0]).toMatch(/found by backfill/);
    expect(Date.parse(row!.watermark!)).toBeGreaterThanOrEqual(Date.parse(watermark));
  });

  it("on one instance, a second pass of an account while one runs is refused (409 naming the instance); a lease this instance left behind (a pass whose last write failed) holds nothing back", async () => {
    s = await setUp(p);
    const { h } = s;
    for (let i = 0; i < 3; i++) addOrder(`+1415555025${i}`, ago(20 - i));
    h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'slow', on: 'list', after: 1, delayMs: 1000 });
    const first = backfill(h.bridge, { pos: p.pos, since: ago(60) }).then((r) => r);
    const row = await eventually(() => status(h.bridge, p.pos), (r) => r?.running !== undefined);
    const lease = row!.running as { owner: string; until: string };
    const second = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(second.status).toBe(409);
    expect(second.body.error.message).toContain(`(instance ${lease.owner}, held until`);
    expect((await first).status).toBe(200);

    // The same instance's lease left in the store, as a pass whose release failed leaves it: not
    // running (the instance knows its own passes), and the next pass takes it at once.
    await h.bridge.store.updateBackfillState('default', p.pos, (current) => ({ ...current!, lease: { owner: lease.owner, until: new Date(Date.now() + 60_000).toISOString() } }));
    expect((await status(h.bridge, p.pos))!.running).toBeUndefined();
    const next = await backfill(h.bridge, { pos: p.pos, since: ago(60) });
    expect(next.status).toBe(200);
    expect([next.body.examined, next.body.known]).toEqual([3, 3]);
  });

  it('an instance that stops mid-pass loses and doubles nothing: another on the same single-process ledger takes its lease over at once and reads the window again; the stopped one, should it wake, can no longer move anything', async () => {
    const state = emptyMemoryLedger();
    s = await setUp(p, {}, { store: new MemoryLedgerStore(state), startWorker: false });
    const { h } = s;
    for (let i = 0; i < 5; i++) addOrder(`+1415555024${i}`, ago(20 - i));
    // The first pages are read and recorded; a later one answers only after a long while.
    h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'slow', on: 'list', after: 2, delayMs: 1500 });
    const stalled = backfill(h.bridge, { pos: p.pos, since: ago(60) }).then((r) => r);
    await eventually(() => status(h.bridge, p.pos), (row) => row?.running !== undefined);

    // A new instance on the same ledger (the file ledger is one process's: the other is gone).
    const other = await startBridge(h.config, silentLogger, { ...s.overrides, loyaltyBaseUrl: h.simServer.url, loyaltyAppToken: h.sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, store: new MemoryLedgerStore(state), startBackfill: false });
    try {
      const taken = await backfill(other, { pos: p.pos, since: ago(60) });
      expect(taken.status).toBe(200);
      expect(taken.body.examined).toBe(5);
      expect(taken.body.new.length + taken.body.known).toBe(5);
      // The stalled instance's page comes back: it finds its lease gone and stops, writing nothing.
      const late = await stalled;
      expect(late.status).toBe(409);
      const after = (await status(other, p.pos))!;
      expect(after.watermark).toBe(taken.body.watermark);
      expect(after.lastPass!.error).toBeUndefined();
      const all = (await request(other.url).get(`/v1/admin/transactions?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as { transactionId: string }[];
      expect(all).toHaveLength(5);
      await accruedOnce(h.sim, all.map((r) => r.transactionId));
    } finally {
      await other.close();
    }
  });
});

describe('backfill: a Square seller with more than 10 locations', () => {
  const square = BACKFILL_POSES.find((p) => p.pos === 'square')!;
  /** 23 locations: searches of 10, 10 and 3. */
  const LOCATIONS = Array.from({ length: 23 }, (_, i) => `LOCMANY${String(i).padStart(2, '0')}`);
  const ORDERS_PER_LOCATION = 3;
  let s: Setup | undefined;
  afterAll(() => s?.h.close());

  it("finds every location's orders: each SearchOrders call names at most 10 locations, every location is searched once, and each search of 10 is paged to its end with the same locations", async () => {
    s = await setUp({
      ...square,
      addAccount: (sim) => {
        const a = sim.pos.square.addAccount({ merchantId: 'ML8QMANYLOCS1', locationIds: LOCATIONS });
        return { account: a.merchantId, accessToken: a.accessToken };
      },
    });
    const { h, account } = s;
    const expected: string[] = [];
    for (const [i, location] of LOCATIONS.entries()) {
      for (let k = 0; k < ORDERS_PER_LOCATION; k++) {
        const n = i * ORDERS_PER_LOCATION + k;
        const order = h.sim.pos.square.addOrder(account.account, sale(`+1415556${String(n).padStart(4, '0')}`, ago(40 - n / 10), { location }));
        expected.push(deriveTransactionId('square', order.id));
      }
    }
    const res = await backfill(h.bridge, { pos: 'square', since: ago(60) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ examined: expected.length, known: 0, refused: [], unpaid: 0 });
    expect([...(res.body.new as string[])].sort()).toEqual([...expected].sort());

    // What the fake Square received: searches, each a first page (no cursor) and the pages after it.
    const calls = h.sim.pos.square.searches(account.account);
    expect(calls.every((c) => c.status === 200 && c.locationIds.length >= 1 && c.locationIds.length <= 10)).toBe(true);
    const searches: { locationIds: string[]; pages: number; orders: number }[] = [];
    for (const call of calls) {
      if (!call.cursor) searches.push({ locationIds: call.locationIds, pages: 0, orders: 0 });
      const current = searches.at(-1)!;
      // A cursor's page names the very locations of its search's first page.
      expect(call.locationIds).toEqual(current.locationIds);
      current.pages++;
      current.orders += call.orders;
    }
    expect(searches.map((c) => c.locationIds.length)).toEqual([10, 10, 3]);
    expect(searches.flatMap((c) => c.locationIds).sort()).toEqual([...LOCATIONS].sort());
    // Two orders a page: each search read every order of its locations, over several pages.
    for (const search of searches) {
      expect(search.orders).toBe(search.locationIds.length * ORDERS_PER_LOCATION);
      expect(search.pages).toBeGreaterThanOrEqual(Math.ceil(search.orders / 2));
    }
    expect(res.body.pages).toBe(calls.length);
    await accruedOnce(h.sim, expected);
  });
});

const { url: pgBase, describeIf } = await describeWithDatabase();

describeIf('backfill: two instances on one PostgreSQL ledger', () => {
  describe.each(BACKFILL_POSES)('$pos', (p) => {
    let schema: Awaited<ReturnType<typeof freshSchema>>;
    let s: Setup;
    let other: Bridge;
    beforeAll(async () => {
      schema = await freshSchema(pgBase!, `backfill_${p.pos}`);
      s = await setUp(p, { LEDGER_URL: schema.url }, { store: new PostgresLedgerStore(schema.url) });
      other = await startBridge(s.h.config, silentLogger, { ...s.overrides, loyaltyBaseUrl: s.h.simServer.url, loyaltyAppToken: s.h.sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, store: new PostgresLedgerStore(schema.url), startBackfill: false });
    });
    afterAll(async () => {
      await other.close();
      await s.h.close();
      await schema.drop();
    });

    it('never read one account at once: of two passes asked together one runs and the other is refused (409); afterwards the other finds everything recorded', async () => {
      const { h } = s;
      for (let i = 0; i < 4; i++) p.orderId(h.sim.pos[p.pos].addOrder(s.account.account, sale(`+1415555025${i}`, ago(20 - i))));
      h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'slow', on: 'list', after: 1, delayMs: 300 });
      const [a, b] = await Promise.all([backfill(h.bridge, { pos: p.pos, since: ago(60) }), backfill(other, { pos: p.pos, since: ago(60) })]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      const ran = a.status === 200 ? a : b;
      expect(ran.body).toMatchObject({ examined: 4, known: 0 });
      const again = await backfill(a.status === 200 ? other : h.bridge, { pos: p.pos, since: ago(60) });
      expect(again.body).toMatchObject({ examined: 4, new: [], known: 4 });
      await accruedOnce(h.sim, ran.body.new as string[]);
    });

    it('scheduled rounds of two instances take turns: a lease is never granted while another instance holds one, and every order is recorded once', async () => {
      const { h } = s;
      const granted: string[] = [];
      const overlaps: string[] = [];
      let held: { owner: string; until: string } | undefined;
      // Sees every change of the account's state as it is written, under the store's own lock.
      class Observed extends PostgresLedgerStore {
        override updateBackfillState(merchantId: string, pos: string, change: Parameters<PostgresLedgerStore['updateBackfillState']>[2]) {
          return super.updateBackfillState(merchantId, pos, (current) => {
            const next = change(current);
            if (next && pos === p.pos) {
              const lease = next.lease;
              if (lease && current?.lease?.owner !== lease.owner) {
                if (held && held.owner !== lease.owner && Date.parse(held.until) > Date.now()) overlaps.push(`${lease.owner} while ${held.owner} held it`);
                granted.push(lease.owner);
              }
              held = lease;
            }
            return next;
          });
        }
      }
      for (let i = 0; i < 4; i++) h.sim.pos[p.pos].addOrder(s.account.account, sale(`+1415555026${i}`, ago(15 - i)));
      const config = { ...h.config, backfill: { intervalMs: 20, overlapMs: HOUR } };
      const start = () => startBridge(config, silentLogger, { ...s.overrides, loyaltyBaseUrl: h.simServer.url, loyaltyAppToken: h.sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, store: new Observed(schema.url) });
      const instances = await Promise.all([start(), start()]);
      try {
        await Promise.all(instances.map((b) => b.backfill.rounds(5)));
      } finally {
        await Promise.all(instances.map((b) => b.close()));
      }
      expect(overlaps).toEqual([]);
      // Rounds meet while a pass runs (the other instance's round leaves the account to it): a few passes in all.
      expect(granted.length).toBeGreaterThanOrEqual(2);
      const records = (await request(h.bridge.url).get(`/v1/admin/transactions?pos=${p.pos}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as { transactionId: string }[];
      // The four of the test before, and these four: each once.
      expect(records).toHaveLength(8);
      await accruedOnce(h.sim, records.map((r) => r.transactionId));
    });

    it('a pass whose page takes longer than its lease keeps the lease (renewed on a timer, not only per page): the other instance is refused meanwhile', async () => {
      const { h } = s;
      // A 2 s lease (renewed every 667 ms: over a second of slack for a busy CI machine), and a page that answers only after 6 s.
      const short = () => startBridge(h.config, silentLogger, { ...s.overrides, backfill: { ...FAST, leaseMs: 2000 }, loyaltyBaseUrl: h.simServer.url, loyaltyAppToken: h.sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, store: new PostgresLedgerStore(schema.url), startBackfill: false });
      const [a, b] = await Promise.all([short(), short()]);
      try {
        for (let i = 0; i < 4; i++) h.sim.pos[p.pos].addOrder(s.account.account, sale(`+1415555028${i}`, ago(10 - i)));
        h.sim.pos[p.pos].faults(s.account.account).inject({ kind: 'slow', on: 'list', after: 1, delayMs: 6000 });
        const pass = backfill(a, { pos: p.pos, since: ago(60) }).then((r) => r);
        const granted = (await eventually(() => status(b, p.pos), (row) => row?.running !== undefined))!.running as { owner: string; until: string };
        // Held past the 2 s it was granted for, while the slow page is waited for.
        await eventually(() => status(b, p.pos), (row) => {
          const held = row?.running as { owner: string; until: string } | undefined;
          return held?.owner === granted.owner && Date.parse(held.until) > Date.parse(granted.until) + 2000;
        });
        const refused = await backfill(b, { pos: p.pos, since: ago(60) });
        expect(refused.status).toBe(409);
        expect(refused.body.error.message).toContain(granted.owner);
        const done = await pass;
        expect(done.status).toBe(200);
        expect(done.body.refused).toEqual([]);
        expect((await status(b, p.pos))!.running).toBeUndefined();
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  });
});

describe('backfill meets an order whose customer the POS no longer has', () => {
  const square = BACKFILL_POSES.find((p) => p.pos === 'square')!;
  let s: Setup | undefined;
  afterEach(async () => {
    await s?.h.close();
    s = undefined;
  });

  it('that order is refused with why, the orders beside it are recorded and accrued, and the watermark moves (the next pass is not stuck on it)', async () => {
    s = await setUp(square);
    const { h, account } = s;
    const customer = h.sim.pos.square.addCustomer(account.account, { firstName: 'Gone', phone: '+14155550291' });
    const orphaned = square.orderId(h.sim.pos.square.addOrder(account.account, { ...sale('+14155550291', ago(20)), customer: customer.id }));
    const beside = square.orderId(h.sim.pos.square.addOrder(account.account, sale('+14155550292', ago(10))));
    h.sim.pos.square.removeCustomer(account.account, customer.id);
    const pass = await backfill(h.bridge, { pos: 'square', since: ago(60) });
    expect(pass.status).toBe(200);
    expect(pass.body.refused).toEqual([expect.objectContaining({ id: expect.stringContaining(orphaned), why: expect.stringContaining('404') })]);
    expect(pass.body.new).toHaveLength(1);
    expect(pass.body.new[0]).toContain(beside);
    await accruedOnce(h.sim, pass.body.new);
    expect((await status(h.bridge, 'square'))!.watermark).toBeDefined();
  });
});

describe('backfill for created merchants: who may ask for whose pass', () => {
  let h: Harness;
  let shop: { adminToken: string; account: string; accessToken: string };
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Record<string, unknown>);
      done();
    },
  });
  beforeAll(async () => {
    h = await startHarness({ logger: createLogger('info', sink), env: { BACKFILL_INTERVAL_MS: '0' }, overrides: { startBackfill: false, backfill: FAST, secretsKey: randomBytes(32).toString('base64') } });
    const installed = h.sim.addMerchant({ id: 'shop-a' });
    const account = h.sim.pos.loyverse.addAccount({});
    await h.restart({ posSettings: { loyverse: { ...h.config.pos.loyverse!, apiBaseUrl: `${h.simServer.url}/loyverse` } } });
    const res = await request(h.bridge.url)
      .post('/v1/admin/merchants')
      .set('authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ id: 'shop-a', loyalty: { appToken: installed.appToken }, pos: { loyverse: { merchantId: account.merchantId, accessToken: account.accessToken } } });
    expect(res.status).toBe(201);
    shop = { adminToken: res.body.adminToken as string, account: account.merchantId, accessToken: account.accessToken };
    h.sim.pos.loyverse.addOrder(account.merchantId, sale('+14155550261', ago(5)));
  });
  afterAll(() => h.close());
  const as = (token: string) => ({
    post: (body: Record<string, unknown>) => request(h.bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${token}`).send(body),
    get: (query = '') => request(h.bridge.url).get(`/v1/admin/backfill${query}`).set('authorization', `Bearer ${token}`),
  });

  it("a merchant's admin token runs and sees its own merchant's passes only; the global token names the merchant", async () => {
    const own = await as(shop.adminToken).post({ pos: 'loyverse', since: ago(60) });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ merchantId: 'shop-a', examined: 1 });
    expect(own.body.new).toHaveLength(1);
    expect((await as(shop.adminToken).post({ merchantId: 'default', pos: 'loyverse', since: ago(60) })).status).toBe(404);
    const rows = (await as(shop.adminToken).get()).body.items as { merchantId: string; account: string }[];
    expect(rows).toEqual([expect.objectContaining({ merchantId: 'shop-a', pos: 'loyverse', account: shop.account })]);
    expect((await as(shop.adminToken).get('?merchantId=default')).status).toBe(404);
    const global = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'loyverse', since: ago(60) });
    expect(global.body).toMatchObject({ merchantId: 'shop-a', new: [], known: 1 });
    const lacking = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'square', since: ago(60) });
    expect(lacking.status).toBe(422);

    // Each pass asked for is in the audit trail: who, whose, which window, and what came of it (a refused one too).
    const trail = (await request(h.bridge.url).get('/v1/admin/audit?limit=100').set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items.filter((e: { action: string }) => e.action === 'backfill');
    const window = (pos: string) => expect.stringMatching(new RegExp(`^backfill ${pos} \\d{4}-\\d\\d-\\d\\dT[^ ]+\\.\\.\\d{4}-`));
    expect(trail).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ actor: 'merchant:shop-a', merchantId: 'shop-a', target: window('loyverse'), outcome: '1 examined, 1 new, 0 known, 0 refused' }),
        expect.objectContaining({ actor: 'admin', merchantId: 'shop-a', target: window('loyverse'), outcome: '1 examined, 0 new, 1 known, 0 refused' }),
        expect.objectContaining({ actor: 'admin', merchantId: 'shop-a', target: window('square'), outcome: 'failed: backfill_not_possible' }),
      ]),
    );
  });

  it('refuses clearly: an unknown POS or a bad time is 400 naming the field, an account the merchant lacks is 422, no token is 401', async () => {
    const unknown = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'abacus', since: ago(60) });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.error)).toContain('pos');
    const badTime = await as(ADMIN_TOKEN).post({ pos: 'loyverse', since: 'last week' });
    expect(badTime.status).toBe(400);
    expect(JSON.stringify(badTime.body.error)).toContain('since');
    const backwards = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'loyverse', since: ago(10), until: ago(20) });
    expect(backwards.status).toBe(400);
    expect(JSON.stringify(backwards.body.error)).toContain('until');
    const noAccount = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'square', since: ago(60) });
    expect(noAccount.status).toBe(422);
    expect(noAccount.body.error.code).toBe('backfill_not_possible');
    expect((await request(h.bridge.url).post('/v1/admin/backfill').send({ pos: 'loyverse', since: ago(60) })).status).toBe(401);
  });

  it("logs each pass naming the merchant, and never the POS's access token or a customer's phone", async () => {
    const passes = lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('backfill pass'));
    expect(passes.length).toBeGreaterThan(0);
    expect(passes.filter((l) => l.pos === 'loyverse').every((l) => l.merchantId === 'shop-a')).toBe(true);
    const text = JSON.stringify(lines);
    expect(text).not.toContain(shop.accessToken);
    expect(text).not.toContain('4155550261');
  });

  it('counts what it found per POS and merchant in the metrics', async () => {
    const metrics = (await request(h.bridge.url).get('/metrics')).text;
    expect(metrics).toMatch(/bridge_backfill_found_total\{pos="loyverse",result="new",merchant="shop-a"\} 1/);
    expect(metrics).toMatch(/bridge_backfill_found_total\{pos="loyverse",result="known",merchant="shop-a"\} 1/);
    expect(metrics).toMatch(/bridge_backfill_passes_total\{pos="loyverse",outcome="complete",merchant="shop-a"\} 2/);
  });

  // A watermark never moves past now (docs/backfill-and-reconcile.md): an until of 2099 used to
  // become the watermark, and scheduled passes never read the present again (issue 19, row 4).
  const watermarkOf = async () => (await h.bridge.store.listBackfillStates('shop-a')).find((s) => s.pos === 'loyverse')?.watermark;

  it('an until or since later than now is a 400 naming it, and the watermark stays where it was', async () => {
    const before = await watermarkOf();
    expect(before).toEqual(expect.any(String));
    const future = await as(ADMIN_TOKEN).post({ merchantId: 'shop-a', pos: 'loyverse', since: ago(60), until: '2099-01-01T00:00:00Z' });
    expect(future.status).toBe(400);
    expect(future.body.error.issues).toEqual([{ field: 'until', message: expect.stringMatching(/^must not be later than now/) }]);
    const early = await as(shop.adminToken).post({ pos: 'loyverse', since: '2099-01-01T00:00:00Z' });
    expect(early.status).toBe(400);
    expect(early.body.error.issues).toEqual([{ field: 'since', message: expect.stringMatching(/^must not be later than now/) }]);
    expect(await watermarkOf()).toBe(before);
    const row = (await as(ADMIN_TOKEN).get('?merchantId=shop-a')).body.items[0] as { watermark: string; lastPass: { until: string } };
    expect(row.watermark).toBe(before);
    expect(Date.parse(row.lastPass.until)).toBeLessThanOrEqual(Date.now());
  });

  it('a pass asked for a window past now (as the CLI may ask) reads up to now: its until and the watermark are not later than now', async () => {
    const asked = Date.now();
    const result = await h.bridge.backfill.runPass({ merchantId: 'shop-a', pos: 'loyverse', since: new Date(Date.parse(ago(60))), until: new Date('2099-01-01T00:00:00Z'), by: 'request' });
    const done = Date.now();
    expect(Date.parse(result.until)).toBeGreaterThanOrEqual(asked);
    expect(Date.parse(result.until)).toBeLessThanOrEqual(done);
    expect(Date.parse(result.watermark!)).toBeLessThanOrEqual(done);
    expect(Date.parse((await watermarkOf())!)).toBeLessThanOrEqual(done);
  });

  it('a watermark an earlier build stored past now counts as now: the next pass reads the present, and the watermark comes back to now', async () => {
    await h.bridge.store.updateBackfillState('shop-a', 'loyverse', (current) => ({ ...current!, watermark: '2099-01-01T00:00:00.000Z' }));
    const late = h.sim.pos.loyverse.addOrder(shop.account, sale('+14155550262', ago(2)));
    const asked = Date.now();
    const result = await h.bridge.backfill.runPass({ merchantId: 'shop-a', pos: 'loyverse', by: 'scheduled' });
    const done = Date.now();
    expect(Date.parse(result.until)).toBeGreaterThanOrEqual(asked);
    expect(Date.parse(result.until)).toBeLessThanOrEqual(done);
    expect(result.new).toEqual([expect.stringContaining(late.receipt_number)]);
    const watermark = Date.parse((await watermarkOf())!);
    expect(watermark).toBeGreaterThanOrEqual(asked);
    expect(watermark).toBeLessThanOrEqual(done);
  });
});
