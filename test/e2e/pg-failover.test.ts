/**
 * A PostgreSQL failover under load loses nothing. A primary whose commits wait for a synchronous
 * standby; two bridge processes reach it through one address that moves (a TCP forwarder standing in
 * for a managed PostgreSQL's virtual IP); POS-like clients sell and refund at a steady rate, trying a
 * 5xx or a refused connection again. Mid-run the primary is SIGKILLed, the standby promoted and the
 * address moved to it. Then: both processes lived and are ready again without a restart; what the
 * POS was told was recorded is in the new primary and settles; the loyalty service booked each sale
 * and each refund exactly once; while the database was gone a POS was answered 503, never 500.
 * docs/postgresql-and-scale.md, "Failover".
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, startReplicatedCluster, type ReplicatedCluster } from '../support/postgres.js';
import { movableAddress, type MovableAddress } from '../support/tcp-forwarder.js';

const { describeIf } = await describeWithDatabase();

/** Sales acknowledged before the primary is killed: the outage falls mid-run. */
const SOLD_BEFORE_THE_KILL = 40;
/** How long the database is gone before the standby is promoted (a managed failover takes seconds to decide). */
const OUTAGE_MS = 1500;
/** How long the clients go on selling once the address has moved. */
const AFTER_PROMOTION_MS = 2500;

describeIf('a PostgreSQL failover under load', () => {
  let cluster: ReplicatedCluster;
  let address: MovableAddress;
  let sim: Simulator;
  let simServer: ListeningSimulator;
  const bridges: BridgeProcess[] = [];

  beforeAll(async () => {
    const started = await startReplicatedCluster();
    if ('reason' in started) throw new Error(`a replicated cluster of the test's own is needed: ${started.reason}`);
    cluster = started;
    address = await movableAddress(Number(new URL(cluster.primary.url).port));
    sim = createSimulator();
    simServer = await sim.listen();
    const env = {
      LOYALTY_BASE_URL: simServer.url,
      LOYALTY_APP_TOKEN: sim.appToken,
      LOYALTY_API_KEY: sim.apiKey,
      LEDGER_URL: `postgres://postgres@127.0.0.1:${address.port}/postgres`,
      LOG_LEVEL: 'error',
    };
    // The first creates the schema; the second starts on it.
    bridges.push(await spawnBridge(env));
    bridges.push(await spawnBridge(env));
  }, 90_000);

  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    await address?.close();
    await simServer?.close();
    cluster?.standby.stop();
    cluster?.primary.stop();
  });

  /** Every answer a POS saw, by when it came relative to the outage. */
  const answers: { status: number; phase: 'before' | 'outage' | 'after' }[] = [];
  let phase: 'before' | 'outage' | 'after' = 'before';

  /** One sample of `/metrics` (series written as exported, labels included); 0 when the series is not there yet. */
  const metric = async (bridge: BridgeProcess, series: string): Promise<number> => {
    const text = await fetch(`${bridge.url}/metrics`).then((r) => r.text());
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line ? Number(line.slice(series.length + 1)) : 0;
  };

  /** A POS delivering one request: a refused connection or a 5xx is tried again, as POSes do, for up to a minute. */
  const deliver = async (bridge: BridgeProcess, path: string, body: unknown): Promise<number> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const status = await fetch(`${bridge.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) }).then(
        (r) => r.status,
        () => 0,
      );
      answers.push({ status, phase });
      if ((status !== 0 && status < 500) || Date.now() > deadline) return status;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('loses nothing, doubles nothing, and both bridges serve again on the promoted standby without a restart', async () => {
    const sold: { orderId: string; status: number; refunded?: number }[] = [];
    let selling = true;
    // 4 POS clients, each selling one order after another (every fourth refunded at once) at alternate bridges.
    const clients = Promise.all(
      Array.from({ length: 4 }, async (_, client) => {
        for (let n = 0; selling; n++) {
          const orderId = `FO-${client}-${n}`;
          const bridge = bridges[(client + n) % 2]!;
          // A customer of its own: two unsettled sales of one customer and amount would hold each other back.
          const sale: (typeof sold)[number] = { orderId, status: await deliver(bridge, '/v1/checkouts/generic', checkout({ orderId, customer: { phone: `+1555720${String(client * 1000 + n).padStart(4, '0')}` } })) };
          sold.push(sale);
          if (n % 4 === 0 && (sale.status === 200 || sale.status === 202)) sale.refunded = await deliver(bridge, '/v1/refunds/generic', { orderId, refundId: `${orderId}-R` });
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );

    await eventually(() => sold.length, (n) => n >= SOLD_BEFORE_THE_KILL, 30_000, { what: `${SOLD_BEFORE_THE_KILL} sales before the kill` });
    phase = 'outage';
    await cluster.primary.crash();
    const crashedAt = Date.now();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    // The background passes meet the outage too, and count it (an instance no POS calls shows it): waited for before the promotion.
    for (const bridge of bridges) {
      await eventually(() => metric(bridge, 'bridge_ledger_errors_total{where="worker"}'), (n) => n > 0, 15_000, { what: `${bridge.url}'s worker counting the outage`, context: bridge.output });
      // No write went through since the crash (one answered as it came may be stamped a moment after).
      expect(await metric(bridge, 'bridge_ledger_last_write_timestamp_seconds')).toBeLessThan(crashedAt / 1000 + 0.5);
    }
    await cluster.standby.promote();
    address.moveTo(Number(new URL(cluster.standby.url).port));
    const promotedAt = Date.now();
    phase = 'after';
    await new Promise((r) => setTimeout(r, AFTER_PROMOTION_MS));
    selling = false;
    await clients;

    // Both processes lived through it.
    expect(bridges.map((b) => ({ exitCode: b.child.exitCode, signal: b.child.signalCode, crash: b.output().match(/Unhandled 'error' event[^]{0,1500}/)?.[0] }))).toEqual([
      { exitCode: null, signal: null, crash: undefined },
      { exitCode: null, signal: null, crash: undefined },
    ]);
    // Both ready on the new primary within 60 s of the promotion, without a restart.
    for (const bridge of bridges) {
      await eventually(() => fetch(`${bridge.url}/readyz`).then((r) => r.status), (s) => s === 200, Math.max(1000, 60_000 - (Date.now() - promotedAt)), { what: `${bridge.url} ready on the promoted standby`, context: bridge.output });
    }
    // The outage shows in the metrics: requests answered 503 for want of the ledger.
    const ledgerErrors = await Promise.all(bridges.map((b) => metric(b, 'bridge_ledger_errors_total{where="request"}')));
    expect(ledgerErrors.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    // Writes went through before the crash and again after the promotion, on each bridge: the time of the last good write says so.
    for (const bridge of bridges) expect(await metric(bridge, 'bridge_ledger_last_write_timestamp_seconds')).toBeGreaterThan(promotedAt / 1000);
    // The outage reached the POS as 503 (try again), never as a 500 or a dropped connection.
    expect([...new Set(answers.map((a) => a.status))].filter((s) => ![200, 202, 503].includes(s))).toEqual([]);
    expect(answers.some((a) => a.phase === 'outage' && a.status === 503)).toBe(true);
    // Every request ended acknowledged: the POS's retries carried each through the failover.
    expect(sold.filter((s) => ![200, 202].includes(s.status) || (s.refunded !== undefined && ![200, 202].includes(s.refunded)))).toEqual([]);

    // What the POS was told was recorded is in the new primary, and settles there: nothing stays pending.
    const refunded = new Set(sold.filter((s) => s.refunded !== undefined).map((s) => `generic:${s.orderId}`));
    const unsettled = async () => {
      const rows = await cluster.standby.query('SELECT transaction_id, record->>\'status\' AS status FROM ledger_records');
      const status = new Map(rows.map((r) => [r.transaction_id as string, r.status as string]));
      return sold.map((s) => `generic:${s.orderId}`).filter((id) => status.get(id) !== (refunded.has(id) ? 'reversed' : 'accrued')).map((id) => `${id}: ${status.get(id) ?? 'no record'}`);
    };
    await eventually(unsettled, (left) => left.length === 0, 30_000, { what: 'every acknowledged sale and refund settled in the new primary, well within the in-flight lease' });
    // The loyalty service booked each sale once and each refund once.
    const books = sim.books();
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
    expect(sold.filter((s) => books.transactions[`generic:${s.orderId}`]?.accruals !== 1 || books.transactions[`generic:${s.orderId}`]!.reversals !== (refunded.has(`generic:${s.orderId}`) ? 1 : 0))).toEqual([]);
    expect(sold.length).toBeGreaterThan(SOLD_BEFORE_THE_KILL);

    // A call whose outcome the failover took back (its commit was asynchronous, by design) left its
    // in-flight marker, which survived; its own bridge took it over at once (not after the 120 s
    // lease) and settled it from the history, never sending it again.
    const takenOver = (await cluster.standby.query("SELECT record->'history' AS history FROM ledger_records")).flatMap((r) => (r.history as { event: string }[]).map((e) => e.event)).filter((e) => e.startsWith('found mid-'));
    expect(takenOver.filter((e) => !/marked by this bridge .* with no call of its out/.test(e))).toEqual([]);
  }, 240_000);
});
