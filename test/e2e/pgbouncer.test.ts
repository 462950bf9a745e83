/**
 * The bridge behind PgBouncer in transaction mode (docs/postgresql-and-scale.md, "Connection
 * budgets"): every statement the ledger sends must work on whichever server connection PgBouncer
 * gives that transaction. Nothing may lean on a session (a session-level SET, a session advisory
 * lock, LISTEN, a named prepared statement): the bridge's locks are transaction-scoped and its
 * settings transaction-local. Two bridge processes, with their own pools of ten, share four server
 * connections; POS clients sell and refund at both, and deliver the same orders to both at once.
 * Each sale and refund is booked once, the database never sees more than the four connections, and
 * both bridges' workers take their due work through it.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, startBouncer, type Bouncer } from '../support/postgres.js';

const { url: base, describeIf } = await describeWithDatabase();
const POOL = 4;

describeIf('behind PgBouncer in transaction mode', () => {
  let sim: Simulator;
  let simServer: ListeningSimulator;
  let bouncer: Bouncer;
  let admin: pg.Client;
  const database = `bridge_pgbouncer_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  const bridges: BridgeProcess[] = [];

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const started = await startBouncer(base!, database, { mode: 'transaction', poolSize: POOL });
    if ('reason' in started) throw new Error(`PgBouncer is needed for this test (.ci/run installs it): ${started.reason}`);
    bouncer = started;
    sim = createSimulator();
    simServer = await sim.listen();
    const env = { LOYALTY_BASE_URL: simServer.url, LOYALTY_APP_TOKEN: sim.appToken, LOYALTY_API_KEY: sim.apiKey, LEDGER_URL: bouncer.url, LOG_LEVEL: 'error' };
    // The first applies the migrations through PgBouncer; the second starts on them.
    bridges.push(await spawnBridge(env));
    bridges.push(await spawnBridge(env));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill('SIGKILL')));
    bouncer?.stop();
    await simServer?.close();
    await admin?.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await admin?.end();
  });

  const deliver = async (bridge: BridgeProcess, path: string, body: unknown) => {
    const res = await fetch(`${bridge.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { status: string } };
  };

  it('books each sale and refund once through four server connections, the same order delivered to both bridges at once included', async () => {
    // The most server connections the database saw from PgBouncer while the POS clients ran.
    let most = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const { rows } = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [database]);
        most = Math.max(most, rows[0]!.n);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    const answers: { orderId: string; sale: number; refund?: number; twice?: number[] }[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async (_, client) => {
        for (let n = 0; n < 15; n++) {
          const orderId = `PB-${client}-${n}`;
          const body = checkout({ orderId, customer: { phone: `+1555730${String(client * 100 + n).padStart(4, '0')}` } });
          if (n % 5 === 4) {
            // The same order at both bridges at once (a POS retrying at another instance).
            const both = await Promise.all(bridges.map((b) => deliver(b, '/v1/checkouts/generic', body)));
            answers.push({ orderId, sale: both[0]!.status, twice: both.map((r) => r.status) });
            continue;
          }
          const bridge = bridges[(client + n) % 2]!;
          const sale = await deliver(bridge, '/v1/checkouts/generic', body);
          const answer: (typeof answers)[number] = { orderId, sale: sale.status };
          if (n % 3 === 0) answer.refund = (await deliver(bridges[(client + n + 1) % 2]!, '/v1/refunds/generic', { orderId, refundId: `${orderId}-R` })).status;
          answers.push(answer);
        }
      }),
    );
    watching = false;
    await watcher;

    // Every request was taken (recorded, and answered at once or in the background).
    expect(answers.filter((a) => ![200, 202].includes(a.sale) || (a.refund !== undefined && ![200, 202].includes(a.refund)) || (a.twice ?? []).some((s) => ![200, 202].includes(s)))).toEqual([]);
    // PgBouncer held the database to its pool: two bridges' twenty connections on four (the watcher reads from another database).
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(POOL);

    // Everything settles, through both workers where an answer was given in the background.
    const refunded = new Set(answers.filter((a) => a.refund !== undefined).map((a) => `generic:${a.orderId}`));
    const db = new pg.Client({ connectionString: bouncer.url });
    await db.connect();
    try {
      await eventually(
        async () => {
          const { rows } = await db.query<{ transaction_id: string; status: string }>('SELECT transaction_id, status FROM ledger_records');
          const status = new Map(rows.map((r) => [r.transaction_id, r.status]));
          return answers.map((a) => `generic:${a.orderId}`).filter((id) => status.get(id) !== (refunded.has(id) ? 'reversed' : 'accrued'));
        },
        (left) => left.length === 0,
        30_000,
        { what: 'every sale accrued and every refund reversed' },
      );
    } finally {
      await db.end();
    }
    const books = sim.books();
    expect(books.doubleAccruals).toEqual([]);
    expect(books.doubleReversals).toEqual([]);
    expect(answers.filter((a) => books.transactions[`generic:${a.orderId}`]?.accruals !== 1 || books.transactions[`generic:${a.orderId}`]!.reversals !== (refunded.has(`generic:${a.orderId}`) ? 1 : 0))).toEqual([]);
    expect(answers).toHaveLength(90);
    // Both processes are whole and ready.
    for (const bridge of bridges) expect(await fetch(`${bridge.url}/readyz`).then((r) => r.status)).toBe(200);
  }, 120_000);
});
