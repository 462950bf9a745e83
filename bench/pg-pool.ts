/**
 * Part D's pool probe (bench/pg.ts): does the pool make checkouts wait for a connection? An
 * in-process bridge on the benchmark's schema, at pool sizes side by side.
 */
import { posSettingDeclarations } from '../adapters/index.js';
import { startBridge as startInProcessBridge } from '../src/bridge.js';
import { loadConfig } from '../src/config.js';
import { PostgresLedgerStore } from '../src/ledger/pg-store.js';
import { silentLogger } from '../src/kernel/logger.js';
import { bridgeEnv, BRIDGE_POST_HEADERS, keepAliveAgent, runPhase, type PhaseResult } from './lib.js';

export interface PoolProbe {
  poolSize: number;
  result: PhaseResult;
  /** Share of samples with requests waiting for a connection, and the mean and largest number waiting. */
  waitingShare: number;
  waitingMean: number;
  waitingMax: number;
  checkedOutMean: number;
}

/**
 * Does the pool make checkouts wait for a connection? A bridge in this process (startBridge with a
 * PostgresLedgerStore of the given pool size, no worker) takes the same closed-loop load, while
 * pg.Pool's own counters are sampled every 5 ms: waitingCount = queries queued for a connection,
 * totalCount − idleCount = connections checked out (including ones whose answer waits for the
 * event loop, which pg_stat_activity shows as idle). The load generator shares this process, so
 * its req/s are for comparing pool sizes with each other, not with the bridge processes above.
 */
export async function poolProbe(o: {
  simUrl: string;
  ledgerUrl: string;
  appToken: string;
  apiKey: string;
  adminToken: string;
  poolSize: number;
  bodies: string[];
  concurrency: number;
  accept: (status: number, body: string) => boolean;
}): Promise<PoolProbe> {
  const config = loadConfig(posSettingDeclarations, { ...bridgeEnv(o, o.simUrl), PORT: '0', LEDGER_URL: o.ledgerUrl });
  const store = new PostgresLedgerStore(o.ledgerUrl, { poolSize: o.poolSize });
  const bridge = await startInProcessBridge(config, silentLogger, { store, defaultMetrics: false, startWorker: false });
  const agent = keepAliveAgent(o.concurrency);
  let samples = 0;
  let waitingSamples = 0;
  let waitingSum = 0;
  let waitingMax = 0;
  let checkedOut = 0;
  const timer = setInterval(() => {
    const { waitingCount, totalCount, idleCount } = store.pool;
    samples++;
    if (waitingCount > 0) waitingSamples++;
    waitingSum += waitingCount;
    waitingMax = Math.max(waitingMax, waitingCount);
    checkedOut += totalCount - idleCount;
  }, 5);
  try {
    const warm = Math.min(300, Math.floor(o.bodies.length / 4));
    await runPhase({ name: 'pool-warm', baseUrl: bridge.url, path: '/v1/checkouts/generic', headers: BRIDGE_POST_HEADERS, bodies: o.bodies.slice(0, warm), concurrency: o.concurrency, agent, accept: o.accept });
    samples = waitingSamples = waitingSum = waitingMax = checkedOut = 0;
    const result = await runPhase({ name: `pool-${o.poolSize}`, baseUrl: bridge.url, path: '/v1/checkouts/generic', headers: BRIDGE_POST_HEADERS, bodies: o.bodies.slice(warm), concurrency: o.concurrency, agent, accept: o.accept });
    const n = samples || 1;
    return { poolSize: o.poolSize, result, waitingShare: waitingSamples / n, waitingMean: waitingSum / n, waitingMax, checkedOutMean: checkedOut / n };
  } finally {
    clearInterval(timer);
    agent.destroy();
    await bridge.close();
  }
}
