/**
 * Part M of the benchmark: what serving many merchants costs a checkout. One simulator and one
 * bridge (file ledger, SECRETS_KEY set), both child processes; MERCHANTS merchants installed in the
 * simulator and created in the bridge through POST /v1/admin/merchants (each read from the loyalty
 * service with resolve-credentials, its secrets sealed). Then, alternating, the same checkouts posted
 * with one merchant's POS token, and spread over every merchant's token (request i: merchant
 * i mod MERCHANTS), so each request is attributed, looked up and delivered with that merchant's own
 * app token. The figure is the bridge's CPU per checkout with many merchants over with one (and
 * throughput one over many), medians of the rounds.
 */
import { randomBytes } from 'node:crypto';
import { CACHE_MS } from '../src/merchants/registry.js';
import { cpuMsOf, createMerchants, keepAliveAgent, median, progress, roundMedians, runPhase, startSimulatorAndBridge, type CreatedMerchant, type LoadOptions, type PartContext, type PhaseResult } from './lib.js';
import { checkoutPayload } from './records.js';
import { figureTable, fmt, phaseColumns, roundColumns, tableOf, times } from './table.js';

export interface MerchantsPartOptions extends PartContext, LoadOptions {
  merchants: number;
}

type Created = CreatedMerchant;

export async function merchantsPart(o: MerchantsPartOptions): Promise<void> {
  progress(`many merchants: starting a simulator and a bridge for ${o.merchants} merchants`);
  const { sim, simUrl, bridge, bridgeUrl } = await startSimulatorAndBridge(o, 'merchants', (simUrl) => ({
    LOYALTY_BASE_URL: simUrl,
    LOYALTY_APP_TOKEN: o.appToken,
    LOYALTY_API_KEY: o.apiKey,
    ADMIN_TOKEN: o.adminToken,
    POS_AUTH: 'token',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'silent',
  }));
  try {
    const ids = Array.from({ length: o.merchants }, (_, i) => `bench-m${i}`);
    const setUpStarted = performance.now();
    const created = await createMerchants(simUrl, bridgeUrl, o.adminToken, ids);
    progress(`many merchants: ${created.length} created in ${fmt((performance.now() - setUpStarted) / 1000, 1)} s`);

    const agent = keepAliveAgent(o.concurrency);
    const headers = (m: Created) => ({ accept: 'application/json', authorization: `Bearer ${m.posToken}` });
    const oneHeaders = headers(created[0]!);
    const manyHeaders = created.map(headers);
    const spec = (kind: 'one' | 'many', tag: string, count: number) => ({
      name: kind,
      baseUrl: bridgeUrl,
      path: '/v1/checkouts/generic',
      headers: oneHeaders,
      ...(kind === 'many' ? { headersOf: Array.from({ length: count }, (_, i) => manyHeaders[i % manyHeaders.length]!) } : {}),
      bodies: Array.from({ length: count }, (_, i) => JSON.stringify(checkoutPayload(`M-${o.runId}-${kind}-${tag}-${i}`, i))),
      concurrency: o.concurrency,
      agent,
      accept: (status: number, body: string) => status === 200 && body.includes('"status":"accrued"'),
    });
    for (const kind of ['one', 'many'] as const) {
      progress(`many merchants: warm-up ${o.warmup} ${kind}`);
      await runPhase(spec(kind, 'warm', Math.max(o.warmup, kind === 'many' ? o.merchants : 0)));
    }
    type Measured = PhaseResult & { kind: 'one' | 'many'; round: number; cpu: number };
    const phases: Measured[] = [];
    for (let round = 1; round <= o.rounds; round++) {
      for (const kind of ['one', 'many'] as const) {
        o.gc?.();
        await new Promise((r) => setTimeout(r, 200));
        progress(`many merchants: round ${round}/${o.rounds}, ${o.requests} checkouts, ${kind === 'one' ? 'one merchant' : `${o.merchants} merchants`}`);
        const cpu0 = cpuMsOf(bridge.process.pid) ?? Number.NaN;
        const result = await runPhase(spec(kind, `r${round}`, o.requests));
        const cpu1 = cpuMsOf(bridge.process.pid) ?? Number.NaN;
        phases.push({ ...result, kind, round, cpu: (cpu1 - cpu0) / result.requests });
        if (result.unexpected || result.errors) progress(`many merchants ${kind} round ${round}: ${result.unexpected} unexpected, ${result.errors} errors; first: ${result.firstProblem}`);
      }
    }
    agent.destroy();

    const of = (kind: 'one' | 'many') => {
      const ps = phases.filter((p) => p.kind === kind);
      return { ...roundMedians(ps), cpu: median(ps.map((p) => p.cpu)) };
    };
    const one = of('one');
    const many = of('many');
    const cpuRatio = many.cpu / one.cpu;
    const secondsBetween = o.merchants / many.throughput;
    o.out(`M. Many merchants: ${o.merchants} merchants on one bridge (file ledger), ${o.requests} checkouts per phase, concurrency ${o.concurrency}`);
    o.out(`   one = every checkout with one merchant's POS token; many = request i with merchant i mod ${o.merchants}'s, so each is attributed,`);
    o.out("   looked up and accrued with that merchant's own app token. CPU is the bridge process's.");
    o.out(`   A merchant's lookups are cached ${CACHE_MS / 1000} s; at this rate each merchant is seen every ${fmt(secondsBetween, 1)} s in the many phase.`);
    o.out();
    o.out(tableOf(phases, [...roundColumns<Measured>((p) => p.kind), ...phaseColumns<Measured>('req/s', 'p50', 'p99', 'not-200-ok'), ['bridge cpu ms/req', (p) => fmt(p.cpu)]]));
    o.out();
    o.out(
      figureTable([
        [`per-checkout cost, ${o.merchants} merchants / one (bridge CPU per checkout, medians)`, times(cpuRatio), '≤ 1.1×', cpuRatio <= 1.1],
        ['  throughput one / many', times(one.throughput / many.throughput)],
        ['  p50 latency many / one', times(many.latency.p50 / one.latency.p50)],
      ]),
    );
    o.out();
  } finally {
    await Promise.all([bridge.stop(), sim.stop()]);
  }
}
