/**
 * One customer's accruals of one amount, sent to two bridge instances on one PostgreSQL database:
 * "is another accrual of this customer and amount unsettled" is decided by the database (the
 * accrual-key table, in the same transaction as the in-flight marker), not by either process. Each
 * transactionId is booked exactly once, and every record that says accrued claimed its own operations.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import type { LedgerRecord } from '../../src/state/record.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: base, describeIf } = await describeWithDatabase();

describeIf('two instances, one customer, one amount', () => {
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let schema: { url: string; drop(): Promise<void> };
  let db: pg.Pool;
  let bridges: BridgeProcess[] = [];

  beforeAll(async () => {
    sim = createSimulator();
    simServer = await sim.listen();
    schema = await freshSchema(base!, 'ambiguity');
    const env = { LOYALTY_BASE_URL: simServer.url, LOYALTY_APP_TOKEN: sim.appToken, LOYALTY_API_KEY: sim.apiKey, LEDGER_URL: schema.url, IN_FLIGHT_LEASE_MS: '3000' };
    bridges = await Promise.all([spawnBridge(env), spawnBridge(env)]);
    db = new pg.Pool({ connectionString: base!, max: 2 });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    await db?.end();
    await simServer?.close();
    await schema?.drop();
  });

  const post = async (b: BridgeProcess, body: unknown) => {
    const res = await fetch(`${b.url}/v1/checkouts/generic`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { transactionId: string; status: string } };
  };
  const records = async (): Promise<LedgerRecord[]> => (await db.query<{ record: LedgerRecord }>(`SELECT record FROM ${new URL(schema.url).searchParams.get('schema')}.ledger_records`)).rows.map((r) => r.record);

  function expectBooksAgree(settled: LedgerRecord[]) {
    const books = sim.books();
    expect(books.doubleAccruals).toEqual([]);
    for (const r of settled) {
      expect([r.transactionId, r.status, books.transactions[r.transactionId]?.accruals]).toEqual([r.transactionId, 'accrued', 1]);
      for (const op of r.accrual.operationIds) expect(books.transactions[r.transactionId]!.operationIds).toContain(op);
    }
  }

  it('the first reset before commit on one instance, the second on the other waits behind it; each is booked once', async () => {
    sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 1200 });
    const phone = '+15550003333';
    expect((await post(bridges[0]!, checkout({ orderId: 'P-1', customer: { phone } }))).body.status).toBe('in_doubt');
    const second = await post(bridges[1]!, checkout({ orderId: 'P-2', customer: { phone } }));
    expect(second.body.status).toBe('pending');
    expect(sim.books().accrueRequests).toBe(1);
    const settled = await eventually(records, (rs) => rs.filter((r) => r.orderId.startsWith('P-')).every((r) => r.status === 'accrued'), 20_000);
    expectBooksAgree(settled.filter((r) => r.orderId.startsWith('P-')));
    expect(settled.find((r) => r.orderId === 'P-2')!.history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^waits behind generic:P-1/));
  }, 30_000);

  it('twelve orders of one customer and amount sent to both instances at once: one at a time upstream, each booked once', async () => {
    const phone = '+15550006666';
    // Each call takes a while upstream, so the orders overlap unless the database holds them back.
    sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 100, times: 12 });
    const orders = Array.from({ length: 12 }, (_, i) => `Q-${i + 1}`);
    const answers = await Promise.all(orders.map((orderId, i) => post(bridges[i % 2]!, checkout({ orderId, customer: { phone } }))));
    for (const a of answers) expect([200, 202]).toContain(a.status);
    const settled = await eventually(records, (rs) => orders.every((o) => rs.find((r) => r.orderId === o)?.status === 'accrued'), 30_000);
    const mine = settled.filter((r) => r.orderId.startsWith('Q-'));
    expectBooksAgree(mine);
    // Sent one after another: no two calls' in-flight periods overlapped. Each record's last accrue
    // (answered, or on a loaded machine timed out and then settled from the history: the next one
    // waited behind it all the same).
    const periods = mine
      .map((r) => r.attempts.filter((a) => a.operation === 'accrue').map((a) => [Date.parse(a.startedAt), Date.parse(a.finishedAt)] as const).at(-1)!)
      .sort((x, y) => x[0] - y[0]);
    expect(periods).toHaveLength(12);
    for (let i = 1; i < periods.length; i++) expect(periods[i]![0]).toBeGreaterThanOrEqual(periods[i - 1]![1]);
    expect(mine.filter((r) => r.history.some((e) => e.event.startsWith('waits behind'))).length).toBeGreaterThan(0);
  }, 60_000);
});
