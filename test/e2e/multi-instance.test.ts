/**
 * Three bridge processes on one PostgreSQL database and the simulator: the same orders and refunds
 * sent to all three at once, and one instance SIGKILLed while its call is in flight. The
 * simulator's books must show exactly one accrual and at most one reversal per transaction, and
 * every record must end settled (the dead instance's call taken over as in doubt after its lease,
 * then proven from the operations history).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: base, describeIf } = await describeWithDatabase();

describeIf('three instances on one PostgreSQL database', () => {
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let schema: { url: string; drop(): Promise<void> };
  let db: pg.Pool;
  let bridges: BridgeProcess[] = [];
  const instanceOf = new Map<string, BridgeProcess>();

  beforeAll(async () => {
    sim = createSimulator();
    simServer = await sim.listen();
    schema = await freshSchema(base!, 'multi');
    const env = {
      LOYALTY_BASE_URL: simServer.url,
      LOYALTY_APP_TOKEN: sim.appToken,
      LOYALTY_API_KEY: sim.apiKey,
      LEDGER_URL: schema.url,
      IN_FLIGHT_LEASE_MS: '3000',
    };
    // All three start at once: the migrations must be applied exactly once.
    bridges = await Promise.all([spawnBridge(env), spawnBridge(env), spawnBridge(env)]);
    for (const b of bridges) instanceOf.set(((await (await fetch(`${b.url}/healthz`)).json()) as { instance: string }).instance, b);
    db = new pg.Pool({ connectionString: base!, max: 2 });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    await db?.end();
    await simServer?.close();
    await schema?.drop();
  });

  const post = async (b: BridgeProcess, path: string, body: unknown) => {
    try {
      const res = await fetch(`${b.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { transactionId: string; status: string; repeat: boolean } };
    } catch {
      return undefined; // that instance is dead
    }
  };
  const toAll = (path: string, body: unknown) => Promise.all(bridges.map((b) => post(b, path, body)));
  const rows = async () => (await db.query<{ transaction_id: string; status: string; open: boolean; record: { inFlight?: { owner: string } } }>(`SELECT transaction_id, status, open, record FROM ${new URL(schema.url).searchParams.get('schema')}.ledger_records`)).rows;

  it('accrues each order once and reverses each refund once, through a SIGKILL mid-call', async () => {
    const orders = Array.from({ length: 20 }, (_, i) => `M-${i + 1}`);
    sim.faults.inject({ kind: 'rate_limit', times: 3, on: 'accrue' });
    sim.faults.inject({ kind: 'server_error', times: 2, on: 'accrue' });
    await Promise.all(orders.map((orderId, i) => toAll('/v1/checkouts/generic', checkout({ orderId, customer: { phone: `+1555300${String(i).padStart(4, '0')}` } }))));

    // Every order settled first: an accrue still under way (one answered 202 in doubt and sent again
    // after its history check, or held by the rate-limit pause) would take the slow fault meant for K-1.
    await eventually(rows, (rs) => orders.every((id) => rs.some((r) => r.transaction_id === `generic:${id}` && !r.open && !r.record.inFlight)), 30_000);
    // One more order whose accrue commits upstream and then hangs; the instance making it is killed.
    sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 60_000 });
    const slow = toAll('/v1/checkouts/generic', checkout({ orderId: 'K-1', customer: { phone: '+15553999999' } }));
    await eventually(() => sim.books(), (b) => (b.transactions['generic:K-1']?.accruals ?? 0) === 1);
    const holder = await eventually(rows, (rs) => rs.some((r) => r.transaction_id === 'generic:K-1' && r.record.inFlight));
    const owner = holder.find((r) => r.transaction_id === 'generic:K-1')!.record.inFlight!.owner;
    const victim = instanceOf.get(owner)!;
    expect(victim).toBeDefined();
    await victim.kill('SIGKILL');
    bridges = bridges.filter((b) => b !== victim);
    sim.faults.clear();
    await slow;

    // Refunds to every surviving instance at once: full ones and partial ones.
    await Promise.all([
      ...orders.slice(0, 5).map((orderId) => toAll('/v1/refunds/generic', { orderId, refundId: `${orderId}-R` })),
      ...orders.slice(5, 9).map((orderId) => toAll('/v1/refunds/generic', { orderId, refundId: `${orderId}-P`, amount: '9.97' })),
      toAll('/v1/refunds/generic', { orderId: 'K-1', refundId: 'K-1-R' }),
    ]);

    // Every record ends settled: the killed instance's call is taken over after its lease.
    const settled = await eventually(rows, (rs) => rs.length >= 21 + 4 && rs.every((r) => !r.open), 30_000);
    expect(settled.filter((r) => r.open)).toEqual([]);
    const statusOf = new Map(settled.map((r) => [r.transaction_id, r.status]));
    for (const orderId of orders.slice(0, 5)) expect(statusOf.get(`generic:${orderId}`)).toBe('reversed');
    for (const orderId of orders.slice(5, 9)) expect([statusOf.get(`generic:${orderId}`), statusOf.get(`generic:${orderId}~r1`)]).toEqual(['reversed', 'accrued']);
    for (const orderId of orders.slice(9)) expect(statusOf.get(`generic:${orderId}`)).toBe('accrued');
    expect(statusOf.get('generic:K-1')).toBe('reversed');

    const books = sim.books();
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
    for (const r of settled) {
      const book = books.transactions[r.transaction_id];
      expect({ id: r.transaction_id, accruals: book?.accruals }).toEqual({ id: r.transaction_id, accruals: 1 });
      expect(book!.reversals).toBeLessThanOrEqual(1);
    }
    const k = settled.find((r) => r.transaction_id === 'generic:K-1')!;
    expect(JSON.stringify(k.record)).toMatch(/left by bridge/);
  }, 90_000);
});
