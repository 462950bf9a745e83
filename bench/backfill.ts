/**
 * Part F of the benchmark: backfill (docs/backfill-and-reconcile.md). One simulator (the loyalty service and the
 * fake Square API) and one bridge (file ledger), both child processes. ORDERS Square orders are
 * made in the fake Square account and posted to the bridge as checkouts, so the ledger holds every
 * one; then backfill passes (POST /v1/admin/backfill, the poller's default page size of 100) read
 * them all back: each is listed, parsed and found known. The figure is orders per second of such a
 * pass, and beside it the checkout path's latency at RATE/s, open loop, with no pass running and
 * with passes running back to back, alternating, medians of the rounds.
 */
import { bridgeEnv, BRIDGE_POST_HEADERS, keepAliveAgent, median, postJson, progress, roundMedians, runPhase, runRatePhase, startSimulatorAndBridge, type LoadOptions, type PartContext, type PhaseResult } from './lib.js';
import { checkoutPayload } from './records.js';
import { figureTable, fmt, phaseColumns, roundColumns, tableOf } from './table.js';

export interface BackfillPartOptions extends PartContext, LoadOptions {
  /** Square orders in the ledger that each pass reads back. */
  orders: number;
}

const SQUARE_MERCHANT = 'MLBENCHBACKF1';
const SQUARE_TOKEN = 'bench-square-token';
const SQUARE_LOCATION = 'LOCBENCHBACK1';

/** A round's open-loop checkouts, with no pass running or with passes running. */
type Labelled = PhaseResult & { label: string; round: number };

interface PassFigures {
  seconds: number;
  examined: number;
  known: number;
  new: number;
  pages: number;
}

export async function backfillPart(o: BackfillPartOptions): Promise<void> {
  progress(`backfill: starting a simulator and a bridge; ${o.orders} Square orders`);
  const { sim, simUrl, bridge, bridgeUrl } = await startSimulatorAndBridge(o, 'backfill', (simUrl) => ({
    ...bridgeEnv(o, simUrl),
    SQUARE_API_BASE_URL: `${simUrl}/square`,
    SQUARE_ACCESS_TOKEN: SQUARE_TOKEN,
    SQUARE_MERCHANT_ID: SQUARE_MERCHANT,
    BACKFILL_INTERVAL_MS: '0',
  }));
  try {
    const made = await postJson(`${simUrl}/__sim/pos/square/accounts`, { merchantId: SQUARE_MERCHANT, accessToken: SQUARE_TOKEN, locationIds: [SQUARE_LOCATION] });
    if (made.status !== 201) throw new Error(`simulator refused the Square account: HTTP ${made.status} ${JSON.stringify(made.body)}`);
    const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const orders: string[] = [];
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = next++; i < o.orders; i = next++) {
          const at = new Date(Date.now() - 3_600_000 + i).toISOString();
          const order = await postJson(`${simUrl}/__sim/pos/square/accounts/${SQUARE_MERCHANT}/orders`, {
            lines: [{ name: 'Latte', unitPrice: 450, quantity: 2, tax: 40 }],
            customer: { phone: `+1415${String(5_000_000 + i).padStart(7, '0')}` },
            createdAt: at,
          });
          if (order.status !== 201) throw new Error(`simulator refused order ${i}: HTTP ${order.status} ${JSON.stringify(order.body)}`);
          orders[i] = JSON.stringify(order.body);
        }
      }),
    );
    progress(`backfill: ${o.orders} orders made in the fake Square API in ${fmt((performance.now() - started) / 1000, 1)} s; posting them to the bridge`);
    const agent = keepAliveAgent(o.concurrency);
    const recorded = await runPhase({
      name: 'record',
      baseUrl: bridgeUrl,
      path: '/v1/checkouts/square',
      headers: BRIDGE_POST_HEADERS,
      bodies: orders,
      concurrency: o.concurrency,
      agent,
      accept: (status) => status === 200,
    });
    if (recorded.unexpected || recorded.errors) throw new Error(`${recorded.unexpected + recorded.errors} orders were not recorded; first: ${recorded.firstProblem}`);

    const pass = async (): Promise<PassFigures> => {
      const t0 = performance.now();
      const res = await postJson(`${bridgeUrl}/v1/admin/backfill`, { pos: 'square', since }, { authorization: `Bearer ${o.adminToken}` });
      if (res.status !== 200) throw new Error(`backfill pass answered HTTP ${res.status} ${JSON.stringify(res.body)}`);
      return { seconds: (performance.now() - t0) / 1000, examined: res.body.examined, known: res.body.known, new: res.body.new.length, pages: res.body.pages };
    };
    progress('backfill: warm-up pass');
    await pass();
    const passes: PassFigures[] = [];
    const rateAgent = keepAliveAgent(64);
    const spec = (tag: string) => ({
      name: tag,
      baseUrl: bridgeUrl,
      path: '/v1/checkouts/generic',
      headers: BRIDGE_POST_HEADERS,
      bodies: Array.from({ length: o.rate * 5 }, (_, i) => JSON.stringify(checkoutPayload(`F-${o.runId}-${tag}-${i}`, i))),
      agent: rateAgent,
      rate: o.rate,
      accept: (status: number, body: string) => status === 200 && body.includes('"status":"accrued"'),
    });
    progress(`backfill: warm-up, checkouts at ${o.rate}/s for 5 s`);
    await runRatePhase(spec('warm'));
    const rounds: { alone: PhaseResult; beside: PhaseResult }[] = [];
    for (let round = 1; round <= o.rounds; round++) {
      o.gc?.();
      progress(`backfill round ${round}/${o.rounds}: one pass over ${o.orders} known orders, alone`);
      passes.push(await pass());
      progress(`backfill round ${round}/${o.rounds}: checkouts at ${o.rate}/s for 5 s, no pass running`);
      const alone = await runRatePhase(spec(`alone${round}`));
      progress(`backfill round ${round}/${o.rounds}: checkouts at ${o.rate}/s for 5 s, passes running back to back`);
      let running = true;
      const besidePasses: PassFigures[] = [];
      const loop = (async () => {
        while (running) besidePasses.push(await pass());
      })();
      const beside = await runRatePhase(spec(`beside${round}`));
      running = false;
      await loop;
      rounds.push({ alone, beside });
      progress(`backfill round ${round}: ${besidePasses.length} passes ran beside the checkouts`);
    }
    agent.destroy();
    rateAgent.destroy();

    const rate = median(passes.map((p) => p.examined / p.seconds));
    const alone = roundMedians(rounds.map((r) => r.alone));
    const beside = roundMedians(rounds.map((r) => r.beside));
    o.out(`F. Backfill: a pass over ${o.orders} Square orders already in the ledger (file ledger, fake Square API in the simulator, pages of 100)`);
    o.out('   each order listed (POST /v2/orders/search), parsed by the Square adapter and found known; then checkouts at');
    o.out(`   ${o.rate}/s, open loop, 5 s, with no pass running and with passes running back to back.`);
    o.out();
    o.out(
      tableOf(
        passes.map((p, i) => ({ ...p, n: i + 1 })),
        [
          ['pass', (p) => String(p.n)],
          ['seconds', (p) => fmt(p.seconds, 2)],
          ['examined', (p) => String(p.examined)],
          ['known', (p) => String(p.known)],
          ['new', (p) => String(p.new)],
          ['pages', (p) => String(p.pages)],
          ['orders/s', (p) => fmt(p.examined / p.seconds, 0)],
        ],
      ),
    );
    o.out();
    o.out(
      tableOf(
        rounds.flatMap((r, i) => [
          { ...r.alone, label: 'no pass', round: i + 1 },
          { ...r.beside, label: 'passes running', round: i + 1 },
        ]),
        [...roundColumns<Labelled>((r) => r.label, `checkouts at ${o.rate}/s`), ...phaseColumns<Labelled>('p50', 'p99', 'max', 'not-200-ok')],
      ),
    );
    o.out();
    o.out(
      figureTable(
        [
          [`backfill pass over ${o.orders} known orders`, `${fmt(rate, 0)} orders/s`],
          [`checkout p99 at ${o.rate}/s, no pass / passes running`, `${fmt(alone.latency.p99)} / ${fmt(beside.latency.p99)} ms`],
          [`checkout p50 at ${o.rate}/s, no pass / passes running`, `${fmt(alone.latency.p50)} / ${fmt(beside.latency.p50)} ms`],
          ['checkouts not answered 200 accrued', String(alone.unexpected + alone.errors + beside.unexpected + beside.errors)],
        ],
        { figure: 'figure (medians of the rounds)' },
      ),
    );
    o.out();
  } finally {
    await Promise.all([bridge.stop(), sim.stop()]);
  }
}
