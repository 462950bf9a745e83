/**
 * The PostgreSQL store commits an accrue's outcome without waiting for the WAL flush where the
 * merchant's history can be read (store.ts UpdateOptions, core/delivery.ts): a database crash can
 * take that write back, and the bridge must then settle the record from the operations history,
 * never send the accrue again. Proven here with a real crash: a cluster of the test's own, its WAL
 * writer stopped so nothing flushes the outcome by chance, every process SIGKILLed, then started
 * again. A reversal's outcome, which would leave a person to decide, is written durably and survives.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, startCluster, type Cluster } from '../support/postgres.js';

const { describeIf } = await describeWithDatabase();

describeIf('PostgreSQL crash after an accrue outcome committed without waiting for the flush', () => {
  let cluster: Cluster;
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let bridge: BridgeProcess | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    // The checkpointer and background writer must not flush the WAL by chance either.
    const started = await startCluster({ checkpoint_timeout: '1h', wal_writer_delay: '10s', fsync: 'on' });
    if ('reason' in started) throw new Error(`a cluster of the test's own is needed: ${started.reason}`);
    cluster = started;
    sim = createSimulator();
    simServer = await sim.listen();
    env = { LOYALTY_BASE_URL: simServer.url, LOYALTY_APP_TOKEN: sim.appToken, LOYALTY_API_KEY: sim.apiKey, LEDGER_URL: cluster.url, IN_FLIGHT_LEASE_MS: '3000' };
  }, 60_000);

  afterAll(async () => {
    await bridge?.kill('SIGKILL');
    await simServer?.close();
    cluster?.stop();
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${bridge!.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { status: string } };
  };
  const setting = async (name: string): Promise<string | undefined> => {
    const db = new pg.Client({ connectionString: cluster.url });
    await db.connect();
    try {
      return (await db.query<{ value: string }>('SELECT value FROM ledger_settings WHERE name = $1', [name])).rows[0]?.value;
    } finally {
      await db.end();
    }
  };
  const stored = async (transactionId: string): Promise<LedgerRecord | undefined> => {
    const db = new pg.Client({ connectionString: cluster.url });
    await db.connect();
    try {
      return (await db.query<{ record: LedgerRecord }>('SELECT record FROM ledger_records WHERE transaction_id = $1', [transactionId])).rows[0]?.record;
    } finally {
      await db.end();
    }
  };

  it('loses the outcome, keeps the durable in-flight marker, and settles it from the history: one accrual, never two', async () => {
    bridge = await spawnBridge(env);
    // A sale and its refund: the reversal's outcome is committed durably (and flushes all before it).
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'KEPT-1', customer: { phone: '+15557000001' } }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'KEPT-1', refundId: 'R-1' })).body.status).toBe('reversed');
    // After the answer, the bridge reads the reversal's history entry and keeps its shape (a durable
    // write, which would flush what the WAL holds): waited for, so that nothing flushes after this point.
    const shape = await eventually(() => setting('reversal_shape/default'), (value) => value !== undefined, 10_000);
    expect(JSON.parse(shape!)).toMatchObject({ eventId: 24, sign: -1, learnedFrom: 'generic:KEPT-1' });

    // From here nothing flushes the WAL: what commits without waiting for it stays in memory.
    const walWriter = cluster.pidOf('walwriter');
    expect(walWriter).toBeDefined();
    process.kill(walWriter!, 'SIGSTOP');
    const answered = await post('/v1/checkouts/generic', checkout({ orderId: 'LOST-1', customer: { phone: '+15557000002' } }));
    expect(answered).toEqual({ status: 200, body: expect.objectContaining({ status: 'accrued' }) });
    expect(sim.books().transactions['generic:LOST-1']?.accruals).toBe(1);

    // The database crashes; the bridge goes with it (a new one starts on the recovered database).
    await bridge.kill('SIGKILL');
    bridge = undefined;
    await cluster.crash();
    await cluster.start();

    // The durable writes survived; the outcome committed without the flush did not: the marker is back.
    expect((await stored('generic:KEPT-1'))!.status).toBe('reversed');
    const lost = (await stored('generic:LOST-1'))!;
    expect(lost.status).toBe('pending');
    expect(lost.inFlight).toMatchObject({ operation: 'accrue' });
    expect(lost.accrual.operationIds).toEqual([]);

    // A new instance takes the call over once its lease ran out, in doubt, and finds the operation.
    bridge = await spawnBridge(env);
    const settled = await eventually(
      () => stored('generic:LOST-1'),
      (r) => r?.status === 'accrued',
      20_000,
    );
    expect(settled!.accrual.settledBy).toBe('history');
    expect(settled!.accrual.operationIds).toHaveLength(1);
    expect(settled!.history.map((h) => h.event).join(' | ')).toMatch(/found mid-accrue left by bridge .*: it may have reached the loyalty service \| operations history shows operation \d+ on card .*: accrued$/);
    const books = sim.books();
    expect(books.transactions['generic:LOST-1']).toMatchObject({ accruals: 1, reversals: 0 });
    expect(books.transactions['generic:KEPT-1']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(books.doubleAccruals).toEqual([]);
  }, 60_000);
});
