/**
 * The three-way report over HTTP against the simulator's fake POS APIs (each of the five POSes) and
 * the loyalty simulator: the POS side is read by the backfill's own listing. One difference of each
 * kind is planted as it happens at a till, and each is found exactly once; a clean range gives none;
 * an operations history that moves between pages while the report reads it still gives every
 * operation once. File ledger for every POS; PostgreSQL for one (the ledger reads are the store's).
 *
 * How the ledger is fed: the POS's own objects, as the listing gives them (what a webhook or
 * backfill would carry), posted to /v1/checkouts/<pos> and /v1/refunds/<pos>.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { adapters } from '../../adapters/index.js';
import { listPosChanges, type FoundItem } from '../../src/backfill/index.js';
import { BACKFILL_POSES, sale, settingsFor, type BackfillPos } from '../support/backfill-pos.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase } = await describeWithDatabase();

/** Where each POS's object holds its own id. */
const ID_FIELD: Record<BackfillPos['pos'], string> = { square: 'id', shopify: 'id', clover: 'id', toast: 'guid', loyverse: 'receipt_number' };
const HOUR = 3_600_000;

const CASES = [...BACKFILL_POSES.map((p) => ({ p, store: 'file' })), ...(pgBase ? [{ p: BACKFILL_POSES.find((b) => b.pos === 'clover')!, store: 'PostgreSQL' }] : [])];

describe.each(CASES)('the three-way report, $p.pos, $store ledger', ({ p, store }) => {
  let h: Harness;
  let schema: { url: string; drop(): Promise<void> } | undefined;
  let account: { account: string; accessToken: string };
  let phone = 0;
  const customer = () => `+1415555${String(++phone).padStart(4, '0')}`;
  const fake = () => h.sim.pos[p.pos];
  const now = () => new Date().toISOString();

  beforeAll(async () => {
    if (store === 'PostgreSQL') schema = await freshSchema(pgBase!, `recon_pos_${p.pos}`);
    // Pages of at most 10 operations overlapping by 2, so that a few dozen operations span several pages.
    h = await startHarness({ env: schema ? { LEDGER_URL: schema.url } : {}, overrides: { startWorker: false, reconcileHistoryRead: { maxItemsPerPage: 10, overlap: 2 } } });
    account = p.addAccount(h.sim);
    // The bridge's default merchant holds the account (its <POS> variables), pointed at the fake.
    await h.restart({ posSettings: { [p.pos]: settingsFor(p, h.simServer.url, account) } });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await schema?.drop();
  });

  const merchant = () => ({ id: 'default', context: { defaultCurrency: 'USD', defaultPhoneRegion: 'US' }, pos: { [p.pos]: settingsFor(p, h.simServer.url, account) } });
  /** What the POS lists for a window, as the bridge would read it. */
  async function listed(since: number, until: number): Promise<FoundItem[]> {
    const found: FoundItem[] = [];
    for await (const item of listPosChanges({ adapters, merchant: merchant(), pos: p.pos, window: { since: new Date(since), until: new Date(until) } })) found.push(item);
    return found;
  }
  /** The POS's object for `orderId` (the sale, or its refund), as a webhook would carry it. */
  async function payloadOf(orderId: string, kind: 'checkout' | 'refund', around = Date.now()): Promise<unknown> {
    const item = (await listed(around - HOUR, around + HOUR)).find((f) => f.orderId === orderId && f.kind === kind);
    expect(item).toBeDefined();
    return item!.payload;
  }
  const post = (path: string, payload: unknown) => request(h.bridge.url).post(path).set('content-type', 'application/json').send(JSON.stringify(payload));
  /** A sale's payload posted as another order's: its id replaced, and for Toast (a sale per check) its check's too. */
  async function postedAs(payload: Record<string, unknown>, orderId: string): Promise<Record<string, unknown>> {
    if (p.pos !== 'toast') return { ...payload, [ID_FIELD[p.pos]]: orderId };
    const target = (await payloadOf(orderId, 'checkout')) as { checkGuid: string };
    const { order, checkGuid } = payload as { order: { checks: { guid: string }[] }; checkGuid: string };
    return { order: { ...order, guid: orderId, checks: order.checks.map((c) => (c.guid === checkGuid ? { ...c, guid: target.checkGuid } : c)) }, checkGuid: target.checkGuid };
  }
  const addSale = (at = now(), extra = {}) => p.orderId(fake().addOrder(account.account, sale(customer(), at, extra)));
  const report = () =>
    request(h.bridge.url)
      .get(`/v1/admin/reports/reconcile?from=${encodeURIComponent(new Date(Date.now() - HOUR).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + HOUR).toISOString())}`)
      .set('authorization', `Bearer ${ADMIN_TOKEN}`);

  it('a clean range: sales accrued, one refunded and reversed, one refunded in part: no difference', async () => {
    const a = addSale();
    expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(a, 'checkout'))).body.status).toBe('accrued');
    const b = addSale();
    expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(b, 'checkout'))).body.status).toBe('accrued');
    fake().addRefund(account.account, { orderId: b, at: now() });
    const refunded = await post(`/v1/refunds/${p.pos}`, await payloadOf(b, 'refund'));
    expect(refunded.body.status).toBe('reversed');

    // A partial refund: the accrual reversed whole, what remains accrued again (README, Partial refunds).
    const c = addSale();
    expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(c, 'checkout'))).body.status).toBe('accrued');
    fake().addRefund(account.account, { orderId: c, lines: [{ line: 0, quantity: 1 }], at: now() });
    const partial = await post(`/v1/refunds/${p.pos}`, await payloadOf(c, 'refund'));
    expect(partial.body).toMatchObject({ status: 'reversed', remainder: { status: 'accrued' } });

    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body.differences).toEqual([]);
    expect(res.body).toMatchObject({ complete: true, sources: [{ pos: p.pos, read: true }] });
    // Accrued A, B, C; reversed B, C; accrued C's remainder.
    expect(res.body.examined.history).toBe(6);
  });

  it('one difference of each kind, each found exactly once, while the history moves between pages', async () => {
    // Sales that agree everywhere, so that the history spans several pages.
    for (let i = 0; i < 27; i++) expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(addSale(), 'checkout'))).body.status).toBe('accrued');
    // missing_in_ledger: a paid sale whose webhook never came.
    const missing = addSale();
    // not_in_history: the accrue was lost on the way (in doubt), then an operator resolved it as accrued.
    const unbooked = addSale();
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(unbooked, 'checkout'))).body.status).toBe('in_doubt');
    const transactionOf = async (orderId: string) => (await listed(Date.now() - HOUR, Date.now() + HOUR)).find((f) => f.orderId === orderId && f.kind === 'checkout')!.transactionId!;
    const unbookedId = await transactionOf(unbooked);
    const resolved = await request(h.bridge.url).post(`/v1/admin/transactions/${encodeURIComponent(unbookedId)}/resolve`).set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ outcome: 'accrued' });
    expect(resolved.body.status).toBe('accrued');
    // unclaimed_operation: points booked at the loyalty service outside the bridge.
    const outside = await fetch(`${h.simServer.url}/api/v2/marketplace/accrue`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-app-token': h.sim.appToken },
      body: JSON.stringify({ transactionId: 'booked-by-hand', phone: customer(), check: { amount: 1234, currency: 'USD', selections: [] } }),
    });
    const outsideOperation = ((await outside.json()) as { results: { operationId: number }[] }).results[0]!.operationId;
    // amount_mismatch: the ledger recorded the check at one total (a Bagel, 2.99); the POS now shows
    // it reopened at another (15.99). The earlier version is an order of three days ago, outside the
    // range, posted under the reopened order's id.
    const reopened = addSale();
    const earlier = addSale(new Date(Date.now() - 72 * HOUR).toISOString(), { lines: [{ name: 'Bagel', unitPrice: 299 }] });
    const earlierPayload = (await payloadOf(earlier, 'checkout', Date.now() - 72 * HOUR)) as Record<string, unknown>;
    expect((await post(`/v1/checkouts/${p.pos}`, await postedAs(earlierPayload, reopened))).body.status).toBe('accrued');
    // refund_not_reversed: a refund at the till whose webhook never came.
    const refundedAtTill = addSale();
    expect((await post(`/v1/checkouts/${p.pos}`, await payloadOf(refundedAtTill, 'checkout'))).body.status).toBe('accrued');
    fake().addRefund(account.account, { orderId: refundedAtTill, at: now() });

    const operations = (await (await fetch(`${h.simServer.url}/api/v2/operations?itemsPerPage=1000`, { headers: { 'x-api-key': h.sim.apiKey } })).json()) as { meta: { totalItems: number } };
    expect(operations.meta.totalItems).toBeGreaterThanOrEqual(3 * 10);
    // The list turns by 4 rows on each of the next 3 reads: more than the overlap of 2, so the first
    // pass skips rows, which the next pass finds; the one after finds nothing new.
    h.sim.faults.inject({ kind: 'history_moves', on: 'history', times: 3, shift: 4 });
    const res = await report();
    h.sim.faults.clear();
    expect(res.status).toBe(200);
    const found = res.body.differences.map((d: { kind: string; transactionId?: string; orderId?: string; operationId?: number }) => [d.kind, d.operationId ?? d.orderId]);
    expect(found).toEqual(
      expect.arrayContaining([
        ['missing_in_ledger', missing],
        ['not_in_history', unbooked],
        ['unclaimed_operation', outsideOperation],
        ['amount_mismatch', reopened],
        ['refund_not_reversed', refundedAtTill],
      ]),
    );
    expect(found).toHaveLength(5);
    expect(res.body.complete).toBe(true);
    expect(res.body.examined.history).toBe(operations.meta.totalItems);
    expect(res.body.history).toMatchObject({ settled: true, passes: 3 });
    expect(res.body.differences.find((d: { kind: string }) => d.kind === 'amount_mismatch').why).toContain('now totals 15.99 but the ledger recorded 2.99');
  });
});
