/**
 * The report's gathering, against the in-memory store and a scripted history: a record the worker
 * settles while the report reads is read again rather than reported; what looks missing in the
 * range's days is looked up in the card's own history before it is reported; an unexplained
 * reversal is traced to its older accrual. Nothing in the store changes.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import type { LedgerRecord } from '../../src/state/record.js';
import type { OperationsQuery } from '../../src/loyalty/contract.js';
import type { Operation } from '../../src/loyalty/contract.js';
import type { ActiveMerchant } from '../../src/merchants/registry.js';
import fc from 'fast-check';
import { ValidationError } from '../../src/kernel/errors.js';
import { csvField, EARLIEST_REPORT_DAY, parseRange, ReconcileReporter, reportCsv } from '../../src/reconcile/report.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

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
const reporter = (merchant: ActiveMerchant, nowMs = Date.parse(minutes(0))) => new ReconcileReporter({ settings: store, merchants: { get: async () => merchant }, store, posSource: noPos, clockSkewMs: 60_000, now: () => nowMs });

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
    const moving = new ReconcileReporter({ settings: store, merchants: { get: async () => merchant }, store, posSource: noPos, clockSkewMs: 60_000, now: () => Date.parse(minutes(0)), historyRead: { maxItemsPerPage: 4, overlap: 1 } });
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
  it('quotes a field with a comma, a quote, a line break or a formula character, doubles its quotes, ends lines with CRLF', () => {
    const csv = reportCsv({
      differences: [
        { kind: 'missing_in_ledger', transactionId: 'square:A-1', orderId: 'A1', why: 'one, two "three"\nfour', next: 'plain' },
        { kind: 'unclaimed_operation', operationId: 42, why: 'no comma here', next: 'x' },
      ],
    });
    expect(csv).toBe('kind,transactionId,orderId,operationId,why,next\r\nmissing_in_ledger,"square:A-1",A1,,"one, two ""three""\nfour",plain\r\nunclaimed_operation,,,42,no comma here,x\r\n');
  });

  it("keeps a field a spreadsheet would run as a formula as text (a leading ')", () => {
    const csv = reportCsv({ differences: [{ kind: 'missing_in_ledger', orderId: '=HYPERLINK("http://x")', why: '-1', next: '@sum' }] });
    expect(csv.split('\r\n')[1]).toBe(`missing_in_ledger,,"'=HYPERLINK(""http://x"")",,"'-1","'@sum"`);
  });
});

describe('csvField: hostile cells (docs/backfill-and-reconcile.md, CSV)', () => {
  it.each([
    ['a formula first', '=1+1', `"'=1+1"`],
    ['a plus first', '+1', `"'+1"`],
    ['a minus first', '-2+3', `"'-2+3"`],
    ['an at sign first', '@SUM(A1)', `"'@SUM(A1)"`],
    ['a tab first', '\t=1', `"'\t=1"`],
    ['a carriage return first', '\r=1', `"'\r=1"`],
    ['a formula after a semicolon (a ; locale splits the cell there)', 'x;=HYPERLINK("http://evil")', `"x;'=HYPERLINK(""http://evil"")"`],
    ['a formula after a comma', 'x,=1+1', `"x,'=1+1"`],
    ['a formula after a separator and spaces', 'x;  @cmd', `"x;  '@cmd"`],
    ['a formula after spaces', '  =1+1', `"  '=1+1"`],
    ['several', '=a;+b,-c;@d', `"'=a;'+b,'-c;'@d"`],
    ['a semicolon alone', 'a;b', '"a;b"'],
    ['a formula character inside', 'A-1001', '"A-1001"'],
    ['an equals sign inside', 'a=b', '"a=b"'],
    ['a quote', 'say "hi"', '"say ""hi"""'],
    ['a line feed', 'a\nb', '"a\nb"'],
    ['a formula after a line feed', 'a\n-1', `"a\n'-1"`],
    ['nothing to neutralise', 'plain text 42', 'plain text 42'],
  ])('%s: %j → %j', (_name, cell, written) => {
    expect(csvField(cell)).toBe(written);
  });

  it('numbers and absent cells', () => {
    expect(csvField(42)).toBe('42');
    expect(csvField(-5)).toBe(`"'-5"`);
    expect(csvField(undefined)).toBe('');
  });

  /** The cells a reader makes of one written cell, splitting at `separator` wherever it stands and ignoring quotes, as a `;` locale does with a `,` file. */
  const naiveCells = (written: string, separator: string) => written.split(separator).map((part) => part.replace(/^"/, ''));

  it('whatever a cell holds, no part of it a reader splits at ; , or a line feed, ignoring quotes, begins with a formula character, and RFC 4180 readers get it back', () => {
    const hostile = fc.array(fc.oneof(fc.constantFrom('=', '+', '-', '@', '\t', '\r', ';', ',', '"', ' ', '\n', 'cmd', '1', 'A'), fc.string({ maxLength: 3 })), { maxLength: 12 })
      .map((parts) => parts.join(''))
      // A ' of the cell's own would make what was added ambiguous to take back out below.
      .filter((cell) => !cell.includes("'"));
    fc.assert(
      fc.property(hostile, (cell) => {
        const written = csvField(cell);
        for (const separator of [';', ',', '\n']) {
          for (const part of naiveCells(written, separator)) expect(part.replace(/^ +/, '')).not.toMatch(/^[=+\-@\t\r]/);
        }
        const read = written.startsWith('"') ? written.slice(1, -1).replace(/""/g, '"') : written;
        // What was added: a ' before a formula character, at the start or after a separator and spaces.
        expect(read.replace(/(^ *|[;,\n] *)'(?=[=+\-@\t\r])/g, '$1')).toBe(cell);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('parseRange: what the loyalty history can serve, else a 400 naming the parameter', () => {
  const now = new Date('2026-11-27T08:00:00Z');
  /** The issue a range is refused with; undefined when it is accepted. */
  const refusal = (from: string, to: string) => {
    try {
      parseRange(from, to, now);
      return undefined;
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      return (error as ValidationError).issues[0];
    }
  };

  it.each([
    ['the year 9999', '9999-01-01', '9999-01-02', 'from', /must not be later than now/],
    ['a from after now', '2026-11-27T08:00:01Z', '2026-11-28', 'from', /must not be later than now/],
    ['before 2000', '1999-12-31', '2000-01-02', 'from', new RegExp(`must be ${EARLIEST_REPORT_DAY} or later`)],
    ['the year 0', '0000-01-01', '0000-01-02', 'from', /or later/],
    ['to before from', '2026-11-20', '2026-11-10', 'to', /must be after from/],
    ['to equal to from (date-times)', '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z', 'to', /must be after from/],
    ['a span over the maximum', '2026-09-01', '2026-11-01', 'to', /at most 32 days/],
    ['up to the year 9999', '2026-11-01', '9999-12-31', 'to', /at most 32 days/],
    ['not a day', '2026-02-30', '2026-03-01', 'from', /must be a day/],
  ])('%s → 400 naming %s', (_name, from, to, field, message) => {
    expect(refusal(from, to)).toEqual({ field, message: expect.stringMatching(message) });
  });

  it.each([
    ['today, whole', '2026-11-27', '2026-11-27'],
    ['a month up to the end of today', '2026-10-28', '2026-11-27'],
    ['from now to a future to', '2026-11-27T08:00:00Z', '2026-11-28T08:00:00Z'],
    ['the first day served', '2000-01-01', '2000-01-31'],
  ])('%s is a range', (_name, from, to) => {
    expect(refusal(from, to)).toBeUndefined();
  });
});
