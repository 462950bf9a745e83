/**
 * A PostgreSQL that stays up but cuts the bridge's connections (a network blip, a PgBouncer
 * restart, an idle timeout, a failover's first second) must never end the bridge. Two bridge
 * processes share one schema while checkouts arrive at both; every 150 ms every connection the two
 * hold is terminated by the server (`pg_terminate_backend`), checked out or idle, mid-transaction
 * or not. Afterwards both processes are alive and serving, every checkout either was acknowledged
 * and is accrued once or was answered 5xx (and accrued once when the POS retried it), and nothing
 * was accrued twice.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: base, describeIf } = await describeWithDatabase();

describeIf("PostgreSQL cutting the bridge's connections under load", () => {
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let schema: { url: string; drop(): Promise<void> };
  let admin: pg.Client;
  const bridges: BridgeProcess[] = [];
  /** The bridges' connections are told apart from every other test's by this application name. */
  const applicationName = `cut_${process.pid}_${Math.floor(Math.random() * 1e6)}`;

  beforeAll(async () => {
    sim = createSimulator();
    simServer = await sim.listen();
    schema = await freshSchema(base!, 'connections_cut');
    const url = new URL(schema.url);
    url.searchParams.set('application_name', applicationName);
    const env = { LOYALTY_BASE_URL: simServer.url, LOYALTY_APP_TOKEN: sim.appToken, LOYALTY_API_KEY: sim.apiKey, LEDGER_URL: url.toString(), LOG_LEVEL: 'error' };
    // The first creates the schema; the second starts on it.
    bridges.push(await spawnBridge(env));
    bridges.push(await spawnBridge(env));
    admin = new pg.Client({ connectionString: base });
    await admin.connect();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    await admin?.end();
    await simServer?.close();
    await schema?.drop();
  });

  /** Terminates every connection the bridges hold now; answers how many. */
  const cut = async (): Promise<number> =>
    (await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [applicationName])).rowCount ?? 0;

  /** A POS posting a checkout: a 5xx or a refused connection is tried again, as POSes do, up to 40 times. */
  let customers = 0;
  /** Every answer a POS saw while connections were cut: a refusal is a 503 to try again, never a 500. */
  const seen: number[] = [];
  const sell = async (bridge: BridgeProcess, orderId: string): Promise<{ status: number; tries: number }> => {
    // A customer of its own: two unsettled sales of one customer and amount would hold each other back.
    const phone = `+1555710${String(customers++).padStart(4, '0')}`;
    for (let tries = 1; ; tries++) {
      const status = await fetch(`${bridge.url}/v1/checkouts/generic`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(checkout({ orderId, customer: { phone } })) }).then(
        (r) => r.status,
        () => 0,
      );
      seen.push(status);
      if ((status !== 0 && status < 500) || tries >= 40) return { status, tries };
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it('ends neither process: both serve afterwards, every sale the POS saw acknowledged is accrued once, none twice', async () => {
    let cutting = true;
    let cuts = 0;
    let terminated = 0;
    const cutter = (async () => {
      while (cutting) {
        terminated += await cut();
        cuts++;
        await new Promise((r) => setTimeout(r, 150));
      }
    })();
    // 8 POS clients, each selling one order after another at alternate bridges, for about 4 s and
    // until the cutter has cut 16 times (a loaded machine makes each cut slower: the sales go on through them).
    const sold: { orderId: string; status: number }[] = [];
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 8 }, async (_, client) => {
        for (let n = 0; Date.now() - started < 4000 || cuts < 16; n++) {
          const orderId = `CUT-${client}-${n}`;
          sold.push({ orderId, ...(await sell(bridges[(client + n) % 2]!, orderId)) });
        }
      }),
    );
    cutting = false;
    await cutter;
    expect(cuts).toBeGreaterThan(15);
    // The cuts reached the bridges' connections, checked out ones included (a worker's claim is a transaction).
    // Both processes lived through it (without the guard on checked-out clients, pg's "Unhandled 'error' event" ended them).
    expect(bridges.map((b) => ({ exitCode: b.child.exitCode, signal: b.child.signalCode, crash: b.output().match(/Unhandled 'error' event[^]{0,1500}/)?.[0] }))).toEqual([
      { exitCode: null, signal: null, crash: undefined },
      { exitCode: null, signal: null, crash: undefined },
    ]);
    expect(terminated).toBeGreaterThan(15);

    // Both are ready again without a restart, and take a sale at once.
    for (const bridge of bridges) {
      await eventually(() => fetch(`${bridge.url}/readyz`).then((r) => r.status), (s) => s === 200, 20_000, { what: `${bridge.url} ready again`, context: bridge.output });
      const after = await sell(bridge, `AFTER-${bridge.port}`);
      expect(after).toEqual({ status: 200, tries: 1 });
    }

    // What a POS was answered while its bridge's connections were cut: accrued, recorded, or 503 try again.
    expect([...new Set(seen)].filter((status) => ![200, 202, 503].includes(status))).toEqual([]);
    // Every sale ended acknowledged (the POS's retries saw a 200 or 202); none was refused for good.
    expect(sold.filter((s) => s.status !== 200 && s.status !== 202)).toEqual([]);
    // Each of the 8 clients sold at least once through the cuts.
    expect(sold.length).toBeGreaterThanOrEqual(8);
    // Each acknowledged sale is accrued, exactly once, whichever bridge finished it.
    await eventually(
      () => sold.filter((s) => sim.books().transactions[`generic:${s.orderId}`]?.accruals !== 1).map((s) => s.orderId),
      (missing) => missing.length === 0,
      30_000,
      { what: 'every acknowledged sale accrued once' },
    );
    expect(sim.books().doubleAccruals).toEqual([]);
  }, 90_000);
});
