/**
 * listPosChanges over real HTTP against the simulator's fake POS APIs, for each POS: every sale and
 * refund in the window is found once per listing, across several pages, as the adapter parses it
 * (with the transactionId the ledger keys it by); an unpaid sale is listed unpaid and not parsed;
 * nothing outside the window is listed; a 429 is waited out; a merchant without an account is 422.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { adapters } from '../../adapters/index.js';
import { ORDER_LINES_EXPAND } from '../../adapters/clover/api.js';
import { cloverBackfill } from '../../adapters/clover/backfill.js';
import type { PosListingApi, PosRequest } from '../../src/pos/contract.js';
import { listPosChanges, type FoundItem, type ListingMerchant } from '../../src/backfill/index.js';
import { BackfillNotPossibleError } from '../../src/backfill/listing.js';
import { PosApiError } from '../../src/pos/api.js';
import { saleTransactionId } from '../../src/kernel/transaction-id.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { BACKFILL_POSES, sale, settingsFor } from '../support/backfill-pos.js';
import { US } from '../support/pos-http.js';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();

describe.each(BACKFILL_POSES)('listPosChanges: $pos', (p) => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let merchant: ListingMerchant;
  let account: { account: string; accessToken: string };
  const waits: number[] = [];
  const list = async (since: string, until: string, pageSize = 2): Promise<FoundItem[]> => {
    const found: FoundItem[] = [];
    const sleep = async (ms: number) => void waits.push(ms);
    for await (const item of listPosChanges({ adapters, merchant, pos: p.pos, window: { since: new Date(since), until: new Date(until) }, pageSize, sleep })) found.push(item);
    return found;
  };

  beforeAll(async () => {
    sim = createSimulator({ now: () => new Date(T0 + 3_600_000) });
    server = await sim.listen();
  });
  afterAll(() => server.close());
  beforeEach(() => {
    sim.pos.reset();
    waits.length = 0;
    account = p.addAccount(sim);
    merchant = { id: 'default', context: US, pos: { [p.pos]: settingsFor(p, server.url, account) } };
  });

  it('finds every paid sale in the window across several pages, parsed, with its transactionId; none outside it', async () => {
    const fake = sim.pos[p.pos];
    const inside = [1, 2, 3, 4, 5].map((m) => p.orderId(fake.addOrder(account.account, sale(`+1415555010${m}`, at(m)))));
    fake.addOrder(account.account, sale('+14155550109', at(20)));
    const found = await list(at(0), at(10));
    const sales = found.filter((f) => f.kind === 'checkout');
    expect(sales.map((f) => f.orderId).sort()).toEqual([...inside].sort());
    for (const f of sales) {
      expect(f).toMatchObject({ pos: p.pos, paid: true, intent: { orderId: f.orderId, check: { amount: 1599, currency: 'USD' } } });
      expect(f.refused).toBeUndefined();
      const intent = f.intent as { orderId: string; scope?: string; part?: string };
      expect(f.transactionId).toBe(saleTransactionId(p.pos, intent));
      expect(Date.parse(f.updatedAt)).toBeGreaterThanOrEqual(T0);
    }
  });

  it('finds a refund as the adapter parses it, keyed to its sale', async () => {
    const fake = sim.pos[p.pos];
    const order = fake.addOrder(account.account, sale('+14155550111', at(1)));
    fake.addRefund(account.account, { orderId: p.orderId(order), lines: [{ line: 0, quantity: 1 }], at: at(2) });
    const found = await list(at(0), at(10));
    const saleItem = found.find((f) => f.kind === 'checkout' && f.orderId === p.orderId(order));
    const refunds = found.filter((f) => f.kind === 'refund');
    expect(saleItem).toMatchObject({ paid: true, intent: { check: { amount: 1599 } } });
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ paid: true, transactionId: saleItem!.transactionId });
    expect(refunds[0]!.refused).toBeUndefined();
    expect((refunds[0]!.intent as { amountCents?: number }).amountCents).toBeGreaterThan(0);
  });

  // Loyverse receipts are paid by being receipts: it has no unpaid sale to list.
  (p.pos === 'loyverse' ? it.skip : it)('lists an unpaid sale as unpaid, without parsing it', async () => {
    const fake = sim.pos[p.pos];
    fake.addOrder(account.account, sale('+14155550112', at(1), { open: true }));
    const found = await list(at(0), at(10));
    expect(found.filter((f) => f.kind === 'checkout')).toEqual([expect.objectContaining({ paid: false })]);
    expect(found[0]!.intent).toBeUndefined();
  });

  it('asks again after a 429 (waiting as the POS says, or backing off), and throws once the retries are used up', async () => {
    const fake = sim.pos[p.pos];
    fake.addOrder(account.account, sale('+14155550113', at(1)));
    fake.faults(account.account).inject({ kind: 'rate_limit', times: 1, on: 'list' });
    expect((await list(at(0), at(10))).filter((f) => f.kind === 'checkout')).toHaveLength(1);
    expect(waits).toHaveLength(1);
    fake.faults(account.account).inject({ kind: 'rate_limit', times: 10, on: 'list', retryAfter: null });
    await expect(list(at(0), at(10))).rejects.toThrow(PosApiError);
  });

  it('refuses (422) a merchant without an account on the POS', async () => {
    merchant = { id: 'm1', context: US, pos: {} };
    await expect(list(at(0), at(10))).rejects.toThrow(BackfillNotPossibleError);
  });
});

describe('Clover: at most three expansions a call', () => {
  it('lists a page with the lines, then the same page with the money, and merges them; an order that changed between the reads is read whole', async () => {
    const sent: PosRequest[] = [];
    const order = (id: string, modifiedTime: number, extra: Record<string, unknown>) => ({ id, modifiedTime, ...extra });
    const api: PosListingApi = {
      get: async (path, query) => {
        sent.push({ method: 'GET', path, ...(query ? { query } : {}) });
        return order('ORDERB0000002', 2, query?.expand === ORDER_LINES_EXPAND ? { lineItems: { elements: ['B lines, read again'] } } : { payments: { elements: ['B paid, read again'] } });
      },
      request: async (request) => {
        sent.push(request);
        const lines = request.query!.expand === ORDER_LINES_EXPAND;
        return {
          headers: {},
          data: {
            elements: lines
              ? [order('ORDERA0000001', 1, { lineItems: { elements: ['A lines'] } }), order('ORDERB0000002', 1, { lineItems: { elements: ['B lines'] } })]
              : [order('ORDERA0000001', 1, { payments: { elements: ['A paid'] } }), order('ORDERB0000002', 2, { payments: { elements: ['B paid'] } })],
          },
        };
      },
    };
    const [first] = cloverBackfill.listings({ since: new Date(T0), until: new Date(T0 + 60_000) }, 'MERCHANT00001', 100, undefined);
    const page = await cloverBackfill.completePage!(api, await api.request(first!), first!);
    for (const r of sent) expect(String(r.query?.expand ?? '').split(',').length).toBeLessThanOrEqual(3);
    expect((page.data as { elements: unknown[] }).elements).toEqual([
      { id: 'ORDERA0000001', modifiedTime: 1, lineItems: { elements: ['A lines'] }, payments: { elements: ['A paid'] }, refunds: undefined, customers: undefined },
      // Changed between the two reads: fetchOrder's own two reads of it, merged.
      expect.objectContaining({ id: 'ORDERB0000002', lineItems: { elements: ['B lines, read again'] }, payments: { elements: ['B paid, read again'] } }),
    ]);
  });
});
