/**
 * Reading the operations history whole while it moves: the page windows overlap as promised, and
 * against the simulator over real HTTP (through the real loyalty client, its 429 back-off included)
 * every operation is found exactly once, whether the list holds still, moves less than the overlap
 * between two pages, or moves more (then later passes find what the first skipped).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { LoyaltyClient } from '../../src/loyalty/client.js';
import type { Operation } from '../../src/loyalty/contract.js';
import { pageWindow, readOperations } from '../../src/loyalty/history-reader.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';

describe('pageWindow', () => {
  it('starts at page 1 of the largest size', () => {
    expect(pageWindow(0, 50, 1000)).toEqual({ page: 1, itemsPerPage: 1000, offset: 0 });
  });

  it.each([
    [1000, 50, 1000],
    [1950, 50, 1000],
    [20, 5, 20],
    [37, 5, 20],
    [123_457, 50, 1000],
    [999_999, 50, 1000],
  ])('after %i rows (overlap %i, at most %i a page): starts at least the overlap before, reaches past, and is a page the upstream can serve', (readUpTo, overlap, max) => {
    const w = pageWindow(readUpTo, overlap, max);
    expect(w.itemsPerPage).toBeLessThanOrEqual(max);
    expect(w.itemsPerPage).toBeGreaterThanOrEqual(Math.ceil(max / 2));
    expect(w.offset).toBe((w.page - 1) * w.itemsPerPage);
    expect(w.offset + w.itemsPerPage).toBeGreaterThan(readUpTo);
    if (readUpTo >= overlap) expect(w.offset).toBeLessThanOrEqual(readUpTo - overlap);
  });
});

describe('readOperations over a list that moves (pure)', () => {
  /** 100 operations served in an order that turns by `shift` rows after every request, `moves` times. */
  function moving(shift: number, moves: number) {
    const rows = Array.from({ length: 100 }, (_, i) => ({ id: i + 1, cardId: 'c', eventId: 24, createdAt: '2026-11-24T10:00:00+00:00' }) as Operation);
    let rotation = 0;
    let requests = 0;
    return {
      async operationsPage(_query: object, page: number, itemsPerPage: number) {
        const by = rotation % rows.length;
        const order = [...rows.slice(by), ...rows.slice(0, by)];
        if (requests++ < moves) rotation += shift;
        return { data: order.slice((page - 1) * itemsPerPage, page * itemsPerPage), meta: { totalItems: rows.length } };
      },
    };
  }

  it('a list that holds still: two passes, the second confirms', async () => {
    const read = await readOperations(moving(0, 0), {}, { maxItemsPerPage: 20, overlap: 5 });
    expect(read.operations.map((o) => o.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(read).toMatchObject({ passes: 2, settled: true });
  });

  it('a list that one page holds: one request, settled (one answer cannot move between pages)', async () => {
    const read = await readOperations(moving(0, 0), {}, { maxItemsPerPage: 200 });
    expect(read.operations).toHaveLength(100);
    expect(read).toMatchObject({ passes: 1, requests: 1, settled: true });
  });

  it('moving less than the overlap between pages: nothing is skipped in the first pass', async () => {
    const foundAfter: number[] = [];
    const read = await readOperations(moving(4, 1000), {}, { maxItemsPerPage: 20, overlap: 5, onPage: (p) => (foundAfter[p.pass] = p.found) });
    expect(foundAfter[1]).toBe(100);
    expect(read.operations).toHaveLength(100);
    expect(read).toMatchObject({ passes: 2, settled: true });
  });

  it('a list that never stops changing (a new operation on every request): not settled after the last pass', async () => {
    // More than a page from the start: one page would be one answer, read at one moment.
    const rows: Operation[] = Array.from({ length: 30 }, (_, i) => ({ id: 30 - i, cardId: 'c', eventId: 24, createdAt: '2026-11-24T10:00:00+00:00' }) as Operation);
    const source = {
      async operationsPage(_query: object, page: number, itemsPerPage: number) {
        rows.unshift({ id: rows.length + 1, cardId: 'c', eventId: 24, createdAt: '2026-11-24T10:00:00+00:00' } as Operation);
        return { data: rows.slice((page - 1) * itemsPerPage, page * itemsPerPage), meta: { totalItems: rows.length } };
      },
    };
    const read = await readOperations(source, {}, { maxItemsPerPage: 20, overlap: 5, maxPasses: 3 });
    expect(read).toMatchObject({ passes: 3, settled: false });
  });
});

describe('readOperations against the simulator, over HTTP', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let client: LoyaltyClient;
  const OPERATIONS = 60;

  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
    client = new LoyaltyClient({ baseUrl: server.url, appToken: sim.appToken, apiKey: sim.apiKey, timeoutMs: 2000, retryBaseMs: 5 });
    for (let i = 0; i < OPERATIONS; i++) {
      const res = await fetch(`${server.url}/api/v2/marketplace/accrue`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-app-token': sim.appToken },
        body: JSON.stringify({ transactionId: `T-${i}`, phone: `+1555000${String(i).padStart(4, '0')}`, check: { amount: 1000 + i, currency: 'USD', selections: [] } }),
      });
      expect(res.status).toBe(200);
    }
  });
  beforeEach(() => sim.faults.clear());
  afterAll(async () => {
    await server.close();
  });

  const today = new Date().toISOString().slice(0, 10);
  const query = { startDate: today, endDate: today };
  const ids = (ops: Operation[]) => ops.map((o) => o.id).sort((a, b) => a - b);
  const every = Array.from({ length: OPERATIONS }, (_, i) => i + 1);

  it('a list that holds still: every operation once', async () => {
    const read = await readOperations(client, query, { maxItemsPerPage: 20, overlap: 5 });
    expect(ids(read.operations)).toEqual(every);
    expect(read).toMatchObject({ passes: 2, settled: true });
  });

  it('a list that moves between pages (simulator fault history_moves): a reader without overlap skips rows, this one finds every operation once', async () => {
    // The fault bites: one pass of plain pages misses rows.
    sim.faults.inject({ kind: 'history_moves', on: 'history', times: 3, shift: 12 });
    const naive: Operation[] = [];
    for (let page = 1; page <= 3; page++) naive.push(...(await client.operationsPage(query, page, 20)).data);
    expect(new Set(ids(naive)).size).toBeLessThan(OPERATIONS);

    sim.faults.clear();
    sim.faults.inject({ kind: 'history_moves', on: 'history', times: 4, shift: 12 });
    const read = await readOperations(client, query, { maxItemsPerPage: 20, overlap: 5 });
    expect(ids(read.operations)).toEqual(every);
    expect(read.settled).toBe(true);
    expect(read.passes).toBeGreaterThanOrEqual(3);
  });

  it('moving by less than the overlap: found whole in the first pass, confirmed by the second', async () => {
    sim.faults.inject({ kind: 'history_moves', on: 'history', times: 100, shift: 4 });
    const read = await readOperations(client, query, { maxItemsPerPage: 20, overlap: 5 });
    expect(ids(read.operations)).toEqual(every);
    expect(read).toMatchObject({ passes: 2, settled: true });
  });

  it('429s (the front proxy page, no Retry-After) are backed off by the loyalty client; the read completes', async () => {
    sim.faults.inject({ kind: 'rate_limit', on: 'history', times: 3 });
    const read = await readOperations(client, query, { maxItemsPerPage: 20, overlap: 5 });
    expect(ids(read.operations)).toEqual(every);
    expect(sim.faults.pending()).toBe(0);
  });

  it('429s past the back-off fail the read, saying so', async () => {
    sim.faults.inject({ kind: 'rate_limit', on: 'history', times: 5 });
    await expect(readOperations(client, query, { maxItemsPerPage: 20 })).rejects.toThrow('GET /api/v2/operations answered 429, retries spent');
  });

  it('history faults never hit a point-of-sale call, nor accrue faults a history read', async () => {
    sim.faults.inject({ kind: 'rate_limit', on: 'history' });
    const accrue = await client.accrue({ transactionId: 'T-X', phone: '+15550009999', check: { amount: 100, currency: 'USD', selections: [] } });
    expect(accrue.outcome.kind).toBe('succeeded');
    expect(sim.faults.pending()).toBe(1);
    sim.faults.clear();
    sim.faults.inject({ kind: 'rate_limit', on: 'any' });
    await client.operationsPage(query, 1, 10);
    expect(sim.faults.pending()).toBe(1);
  });
});

describe("the history verifier's read of one card (LoyaltyClient.listOperations)", () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let client: LoyaltyClient;
  let cardId: string;
  /** More than one page of 1000: the only case in which the list can move under the reader. */
  const OPERATIONS = 1010;
  const today = new Date().toISOString().slice(0, 10);

  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
    client = new LoyaltyClient({ baseUrl: server.url, appToken: sim.appToken, apiKey: sim.apiKey, timeoutMs: 5000, retryBaseMs: 5 });
    for (let i = 0; i < OPERATIONS; i += 100) {
      const reports = await Promise.all(
        Array.from({ length: Math.min(100, OPERATIONS - i) }, (_, j) =>
          client.accrue({ transactionId: `V-${i + j}`, phone: '+15550007777', check: { amount: 100 + i + j, currency: 'USD', selections: [] } }),
        ),
      );
      expect(reports.every((r) => r.outcome.kind === 'succeeded')).toBe(true);
    }
    const cards = await client.findCards({ phone: '+15550007777' });
    expect(cards.length).toBeGreaterThan(0);
    cardId = cards[0]!.id;
  }, 60_000);
  afterAll(async () => {
    await server.close();
  });

  it('a card whose operations move between page requests: a plain page-by-page read skips some, listOperations finds every one once', async () => {
    const query = { cardId, startDate: today, endDate: today };
    sim.faults.clear();
    sim.faults.inject({ kind: 'history_moves', on: 'history', times: 2, shift: 30 });
    const plain = [...(await client.operationsPage(query, 1, 1000)).data, ...(await client.operationsPage(query, 2, 1000)).data];
    expect(new Set(plain.map((o) => o.id)).size).toBeLessThan(OPERATIONS);

    sim.faults.clear();
    sim.faults.inject({ kind: 'history_moves', on: 'history', times: 3, shift: 30 });
    const read = await client.listOperations(cardId, today, today);
    expect(read).toHaveLength(OPERATIONS);
    expect(new Set(read.map((o) => o.id)).size).toBe(OPERATIONS);
    expect(read.every((o) => o.cardId === cardId)).toBe(true);
  });

  it('a card of one page: its operations as the page gives them', async () => {
    sim.faults.clear();
    const other = await client.accrue({ transactionId: 'V-one', phone: '+15550007778', check: { amount: 500, currency: 'USD', selections: [] } });
    expect(other.outcome.kind).toBe('succeeded');
    const [card] = await client.findCards({ phone: '+15550007778' });
    const ops = await client.listOperations(card!.id, today, today);
    expect(ops.map((o) => o.purchaseSum)).toEqual([5]); // purchaseSum is in currency units
  });
});
