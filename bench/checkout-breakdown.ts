/**
 * Diagnostic part of the benchmark: what one checkout does to the ledger and where its time goes.
 * A bridge runs in this process (startBridge, file ledger wrapped in a counting store, no worker)
 * against the benchmark's simulator; checkouts go one at a time, next to direct accrue calls one at
 * a time, so the difference is the bridge's own work per checkout without queueing.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { posSettingDeclarations } from '../adapters/index.js';
import { startBridge } from '../src/bridge.js';
import { loadConfig } from '../src/config.js';
import { FileLedgerStore } from '../src/ledger/file-store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { silentLogger } from '../src/kernel/logger.js';
import { bridgeEnv, BRIDGE_POST_HEADERS, keepAliveAgent, removeDir, runPhase, tempDir, type PhaseSpec } from './lib.js';
import { accrueBodyFor, checkoutPayload } from './records.js';
import { fmt, phaseColumns, table, tableOf } from './table.js';

/**
 * Wraps a LedgerStore so every method call is counted and timed by name. A Proxy rather than a
 * class, so the wrapper keeps up with the interface as it grows.
 */
function countingStore(inner: LedgerStore) {
  const calls = new Map<string, { n: number; ms: number }>();
  const skip = new Set(['init', 'close']);
  const store = new Proxy(inner, {
    get(target, prop) {
      // Getters run on the store itself: its private fields are not reachable through the proxy.
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function' || typeof prop !== 'string' || skip.has(prop)) return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        const t0 = performance.now();
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          const c = calls.get(prop) ?? { n: 0, ms: 0 };
          c.n++;
          c.ms += performance.now() - t0;
          calls.set(prop, c);
        }
      };
    },
  });
  return { store, calls, reset: () => calls.clear() };
}

export interface SerialOptions {
  simUrl: string;
  appToken: string;
  apiKey: string;
  requests: number;
  runId: string;
  /** Another ledger than a fresh file ledger (part D: a PostgreSQL store); `ledgerUrl` is what the config names. */
  store?: () => LedgerStore;
  ledgerUrl?: string;
  /** First line of the output, when not part C's. */
  title?: string;
}

export async function serialDiagnostic(o: SerialOptions): Promise<string> {
  const dir = o.store ? undefined : tempDir('bench-serial-');
  const ledgerPath = dir ? join(dir, 'ledger.json') : undefined;
  const config = loadConfig(posSettingDeclarations, {
    ...bridgeEnv({ appToken: o.appToken, apiKey: o.apiKey, adminToken: 'bench-admin-token-0123456789' }, o.simUrl),
    PORT: '0',
    LEDGER_URL: ledgerPath ? `file:${ledgerPath}` : o.ledgerUrl!,
  });
  const counting = countingStore(o.store ? o.store() : new FileLedgerStore(ledgerPath!));
  const bridge = await startBridge(config, silentLogger, { store: counting.store, defaultMetrics: false, startWorker: false });
  const agents = { direct: keepAliveAgent(1), bridge: keepAliveAgent(1) };
  try {
    const spec = (kind: 'direct' | 'bridge', tag: string, count: number): PhaseSpec => ({
      name: kind,
      baseUrl: kind === 'direct' ? o.simUrl : bridge.url,
      path: kind === 'direct' ? '/api/v2/marketplace/accrue' : '/v1/checkouts/generic',
      headers: kind === 'direct' ? { accept: 'application/json', 'x-app-token': o.appToken } : BRIDGE_POST_HEADERS,
      bodies: Array.from({ length: count }, (_, i) => {
        const payload = checkoutPayload(`S${kind[0]}-${o.runId}-${tag}-${i}`, i);
        return JSON.stringify(kind === 'bridge' ? payload : accrueBodyFor(payload));
      }),
      concurrency: 1,
      agent: agents[kind],
      accept: (status, body) => status === 200 && (kind === 'direct' || (JSON.parse(body) as { status?: string }).status === 'accrued'),
    });
    const warm = Math.min(50, o.requests);
    await runPhase(spec('direct', 'warm', warm));
    await runPhase(spec('bridge', 'warm', warm));
    const direct = await runPhase(spec('direct', 'm', o.requests));
    counting.reset();
    const viaBridge = await runPhase(spec('bridge', 'm', o.requests));
    const calls = [...counting.calls.entries()];

    const n = o.requests;
    const storeMs = calls.reduce((sum, [, c]) => sum + c.ms, 0) / n;
    const rows = calls.map(([op, c]) => [op, fmt(c.n / n, 2), fmt((c.ms * 1000) / c.n, 0), fmt((c.ms * 1000) / n, 0)]);
    rows.push(['(all)', fmt(calls.reduce((s, [, c]) => s + c.n, 0) / n, 2), '', fmt(storeMs * 1000, 0)]);
    const rest = viaBridge.latency.mean - direct.latency.mean - storeMs;
    const lines = [
      o.title ?? `C. Where one checkout's time goes (diagnostic: bridge in the benchmark process with a counting file store, no worker; ${n} checkouts one at a time)`,
      '',
      table([['ledger call', 'calls/checkout', 'mean µs/call', 'µs/checkout'], ...rows]),
      '',
      tableOf(
        [
          { ...direct, name: 'direct accrue' },
          { ...viaBridge, name: 'bridge checkout' },
        ],
        [['one at a time', (r) => r.name], ...phaseColumns('p50', 'mean', 'p99', 'not-200-ok')],
      ),
      '',
      `   bridge mean − direct mean = ${fmt(viaBridge.latency.mean - direct.latency.mean)} ms, of which ledger calls ${fmt(storeMs)} ms and the rest (HTTP in/out, parsing, validation, axios, logging) ${fmt(rest)} ms`,
    ];
    if (viaBridge.firstProblem) lines.push(`   first unexpected bridge answer: ${viaBridge.firstProblem}`);
    return lines.join('\n');
  } finally {
    for (const agent of Object.values(agents)) agent.destroy();
    await bridge.close();
    if (dir) await removeDir(dir);
  }
}
