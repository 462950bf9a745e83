/**
 * The report's gathering, against the in-memory store and a scripted history: a record the worker
 * settles while the report reads is read again rather than reported; what looks missing in the
 * range's days is looked up in the card's own history before it is reported; an unexplained
 * reversal is traced to its older accrual. Nothing in the store changes.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import type { LedgerRecord } from '../../src/ledger/record.js';
import type { OperationsQuery } from '../../src/loyalty/client.js';
import type { Operation } from '../../src/loyalty/contract.js';
import type { ActiveMerchant } from '../../src/merchants/registry.js';
import { ReconcileReporter, reportCsv } from '../../src/reconcile/report.js';
import { makeRecord, minutes } from '../ledger/store-contract.js';

const CARD = '11-100001-2';
const op = (id: number, at: string, purchaseSum = 59.97): Operation => ({ id, cardId: CARD, eventId: 24, purchaseSum, createdAt: at });
const range = { from: new Date(minutes(-60)), to: new Date(minutes(60)) };

/** A merchant whose history is `operations()` (filtered by card and day as the upstream does); `onRead` runs before each page. */
function merchantWith(operations: () => Operation[], onRead: (query: OperationsQuery) => Promise<void> = async () => {}): ActiveMerchant & { queries: OperationsQuery[] } {
  const queries: OperationsQuery[] = [];
  const client = {
    canVerify: true,
    async operationsPage(query: OperationsQuery, page: number, itemsPerPage: number) {
      queries.push(query);
      await onRead(query);
      const rows = operations().filter((o) => (!query.cardId || o.cardId === query.cardId) && (!query.startDate || o.createdAt.slice(0, 10) >= query.startDate) && (!query.endDate || o.createdAt.slice(0, 10) <= query.endDate));
      return { data: rows.slice((page - 1) * itemsPerPage, page * itemsPerPage), meta: { totalItems: rows.length, itemsPerPage, currentPage: page } };
    },
  };
  return { id: 'default', status: 'active', client, pos: {}, context: { defaultCurrency: 'USD', defaultPhoneRegion: 'US' }, queries } as unknown as ActiveMerchant & { queries: OperationsQuery[] };
}

let store: MemoryLedgerStore;
beforeEach(async () => {
  store = new MemoryLedgerStore();
  await store.init();
});

/** These merchants hold no POS account: the listing is never asked. */
const noPos = {
  list(): AsyncIterable<never> {
    throw new Error('no POS account, nothing to list');
  },
};

/** `nowMs`: the bridge's clock, by default an hour after the range began. */
const reporter = (merchant: ActiveMerchant, nowMs = Date.parse(minutes(0))) => new ReconcileReporter({ merchants: { get: async () => merchant }, store, posSource: noPos, clockSkewMs: 60_000, now: () => nowMs });

describe('gathering the sides', () => {
  it('a record settled while the report reads is read again: its operation is its own, not unclaimed', async () => {
    const pending = makeRecord('generic:W-1', { accrual: 'pending' });
    await store.insert(pending);
    let settled = false;
    const merchant = merchantWith(
      () => [op(5, minutes(1))],
      async () => {
        if (settled) return;
        settled = true;
        // The worker's accrue comes back while the history is being read.
        await store.update({ ...pending, version: 2, status: 'accrued', accrual: { ...pending.accrual, state: 'accrued', operationIds: [5] } });
      },
    );
    const report = await reporter(merchant).report('default', range);
    expect(report.differences).toEqual([]);
    expect(report.examined).toEqual({ pos: 0, ledger: 1, history: 1 });
  });

  it('a card read again whose list never holds still: the difference is reported, and the report says it is not complete', async () => {
    await store.insert(makeRecord('generic:M-1', { accrual: 'accrued', operationIds: [7] }));
    // Visits on the card (no purchase sum): a new one appears at every card read, so no pass settles.
    const visits: Operation[] = Array.from({ length: 6 }, (_, i) => ({ id: 100 + i, cardId: CARD, eventId: 1, createdAt: minutes(i) }) as Operation);
    const merchant = merchantWith(
      () => visits,
      async (query) => {
        if (query.cardId) visits.unshift({ id: 100 + visits.length, cardId: CARD, eventId: 1, createdAt: minutes(2) } as Operation);
      },
    );
    const moving = new ReconcileReporter({ merchants: { get: async () => merchant }, store, posSource: noPos, clockSkewMs: 60_000, now: () => Date.parse(minutes(0)), historyRead: { maxItemsPerPage: 4, overlap: 1 } });
    const report = await moving.report('default', range);
    expect(report.differences.map((d) => [d.kind, d.transactionId])).toEqual([['not_in_history', 'generic:M-1']]);
    expect(merchant.queries.some((q) => q.cardId === CARD)).toBe(true);
    expect(report.history.settled).toBe(true);
    expect(report.complete).toBe(false);
  });

  it("an accrual whose operation lies outside the range's days is found in its card's history, not reported", async () => {
    const record = makeRecord('generic:L-1', { accrual: 'accrued', operationIds: [7] });
    await store.insert(record);
    // Booked four days after the record (a retry much later): outside the days read for the range.
    const late = op(7, new Date(Date.parse(minutes(0)) + 4 * 86_400_000).toISOString());
    const merchant = merchantWith(() => [late]);
    const report = await reporter(merchant, Date.parse(late.createdAt) + 3_600_000).report('default', range);
    expect(report.differences).toEqual([]);
    // The card's history read again: one page holds it, so one request.
    expect(merchant.queries.filter((q) => q.cardId === CARD)).toHaveLength(1);
  });

  it('a reversal in the range of an accrual from months ago: traced on the card to its record', async () => {
    const old = makeRecord('generic:OLD-1', { accrual: 'accrued', operationIds: [1], at: -90 * 24 * 60 });
    const reversed: LedgerRecord = { ...old, status: 'reversed', reversal: { ...old.reversal, state: 'reversed', refundIds: ['R-1'], requestedAt: minutes(-1) } };
    await store.insert(reversed);
    const merchant = merchantWith(() => [op(1, minutes(-90 * 24 * 60)), op(2, minutes(1), -59.97)]);
    const before = await store.list({ offset: 0, limit: 10 });
    const report = await reporter(merchant).report('default', range);
    expect(report.differences).toEqual([]);
    expect(merchant.queries.some((q) => q.cardId === CARD && q.startDate! <= minutes(-90 * 24 * 60).slice(0, 10))).toBe(true);
    expect(await store.list({ offset: 0, limit: 10 })).toEqual(before);
  });

  it('what the second look cannot find either is reported', async () => {
    await store.insert(makeRecord('generic:G-1', { accrual: 'accrued', operationIds: [9] }));
    const report = await reporter(merchantWith(() => [])).report('default', range);
    expect(report.differences.map((d) => [d.kind, d.transactionId])).toEqual([['not_in_history', 'generic:G-1']]);
  });
});

describe('reportCsv (RFC 4180)', () => {
  it('quotes a field with a comma, a quote or a line break, doubles its quotes, ends lines with CRLF', () => {
    const csv = reportCsv({
      differences: [
        { kind: 'missing_in_ledger', transactionId: 'square:A-1', orderId: 'A-1', why: 'one, two "three"\nfour', next: 'plain' },
        { kind: 'unclaimed_operation', operationId: 42, why: 'no comma here', next: 'x' },
      ],
    });
    expect(csv).toBe('kind,transactionId,orderId,operationId,why,next\r\nmissing_in_ledger,square:A-1,A-1,,"one, two ""three""\nfour",plain\r\nunclaimed_operation,,,42,no comma here,x\r\n');
  });

  it("keeps a field a spreadsheet would run as a formula as text (a leading ')", () => {
    const csv = reportCsv({ differences: [{ kind: 'missing_in_ledger', orderId: '=HYPERLINK("http://x")', why: '-1', next: '@sum' }] });
    expect(csv.split('\r\n')[1]).toBe(`missing_in_ledger,,"'=HYPERLINK(""http://x"")",,'-1,'@sum`);
  });
});
