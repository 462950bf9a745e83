/**
 * Overload: many POS connections at once against one sandbox bridge, and where the time goes.
 * `npm run build && node dist/bench/overload.js [--connections=200] [--seconds=10] [--warmup=2]
 *  [--keep-alive=false]
 *  [--sim=sandbox|process] [--env=NAME=value,NAME=value]`
 *
 * The bridge runs as its own process (`dist/src/main.js`), in sandbox (the simulator in the same
 * process, as `npm start` runs it) or with the simulator as a separate process (`--sim=process`),
 * with bench/overload-probe.ts preloaded to time each phase of each request. The load generator
 * (this process) opens `connections` keep-alive connections at once and on each posts checkouts back
 * to back for `seconds`: closed loop, as POS terminals waiting for their answer do. Every answer's
 * latency counts from the instant its request was handed to the socket (connection set-up
 * included for each connection's first request). A POS is promised an answer within 2 s.
 *
 * Figures only; nothing fails. `--env` passes variables to the bridge (e.g. a shedding setting).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cleanupSync, freePort, installCleanup, progress, startChild, startSimulator, summarize, tempDir, waitForHttp, type Summary } from './lib.js';
import { checkoutPayload } from './records.js';
import { fmt, table } from './table.js';

const here = dirname(fileURLToPath(import.meta.url)); // dist/bench
const projectRoot = resolve(here, '..', '..');
const PROMISE_MS = 2000;

function option(name: string, fallback: string): string {
  const arg = process.argv.slice(2).find((a) => a.startsWith(`--${name}=`));
  return arg ? arg.slice(name.length + 3) : fallback;
}
const opts = {
  connections: Number(option('connections', '200')),
  seconds: Number(option('seconds', '10')),
  warmup: Number(option('warmup', '2')),
  keepAlive: option('keep-alive', 'true') !== 'false',
  sim: option('sim', 'sandbox'),
  env: Object.fromEntries(
    option('env', '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ) as Record<string, string>,
};
if (!['sandbox', 'process'].includes(opts.sim)) throw new Error('--sim must be sandbox or process');

const nowMs = () => performance.timeOrigin + performance.now();
const out = (line = '') => process.stdout.write(`${line}\n`);

interface Probe {
  requests: [number, number, number, number][];
  simulator: number[];
  fsync: number[];
  upstream: [number, number, number][];
  loopDelay: { p50: number; p99: number; max: number };
}

interface Sample {
  latency: number;
  status: number;
  first: boolean;
  error?: string;
}

function post(agent: http.Agent, url: URL, body: string): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((done, fail) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: '/v1/checkouts/generic',
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-bench-sent': String(nowMs()) },
      },
      (res) => {
        res.resume();
        res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers }));
        res.on('error', fail);
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

async function load(url: URL, connections: number, seconds: number, tag: string): Promise<{ samples: Sample[]; seconds: number; loop: Summary & { raw: number } }> {
  const agent = new http.Agent({ keepAlive: opts.keepAlive, maxSockets: connections, maxFreeSockets: connections });
  const samples: Sample[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const started = performance.now();
  const end = started + seconds * 1000;
  let n = 0;
  const worker = async (w: number) => {
    let first = true;
    while (performance.now() < end) {
      const body = JSON.stringify(checkoutPayload(`O-${tag}-${w}-${n++}`, n));
      const t0 = performance.now();
      try {
        const res = await post(agent, url, body);
        samples.push({ latency: performance.now() - t0, status: res.status, first });
        // A POS told to come back later does so after Retry-After; here the connection just waits that long.
        if (res.status === 503) await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? 1) * 1000));
      } catch (error) {
        samples.push({ latency: performance.now() - t0, status: 0, first, error: (error as Error).message });
      }
      first = false;
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, w) => worker(w)));
  const elapsed = (performance.now() - started) / 1000;
  loopDelay.disable();
  agent.destroy();
  const loop = { count: 0, mean: loopDelay.mean / 1e6, p50: loopDelay.percentile(50) / 1e6, p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6, raw: 0 };
  return { samples, seconds: elapsed, loop };
}

async function main(): Promise<void> {
  installCleanup();
  const dir = tempDir('bench-overload-');
  const port = await freePort();
  const probeOut = join(dir, 'probe.json');
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    PORT: String(port),
    LEDGER_URL: `file:${join(dir, 'ledger.json')}`,
    LOG_LEVEL: 'silent',
    ADMIN_TOKEN: 'bench-admin-token-0123456789',
    BENCH_PROBE_OUT: probeOut,
    ...opts.env,
  };
  delete env.LOYALTY_BASE_URL;
  let sim: ReturnType<typeof startChild> | undefined;
  if (opts.sim === 'process') {
    const simulator = await startSimulator({ here, distDir: join(projectRoot, 'dist'), projectRoot });
    sim = simulator.child;
    env.LOYALTY_BASE_URL = simulator.url;
    env.LOYALTY_APP_TOKEN = 'sim-app-token';
    env.LOYALTY_API_KEY = 'sim-api-key';
  }
  const bridge = startChild(process.execPath, [...(process.env.BENCH_EXTRA_IMPORT ? ['--import', process.env.BENCH_EXTRA_IMPORT] : []), '--import', pathToFileURL(join(here, 'overload-probe.js')).href, join(projectRoot, 'dist', 'src', 'main.js')], { cwd: dir, env });
  const base = `http://127.0.0.1:${port}`;
  await waitForHttp(`${base}/readyz`, bridge);
  const url = new URL(base);
  progress(`bridge ${base} (pid ${bridge.process.pid}, simulator ${opts.sim === 'sandbox' ? 'in the same process' : 'separate process'}${Object.keys(opts.env).length ? `, ${JSON.stringify(opts.env)}` : ''}); warm-up: 16 connections for ${opts.warmup} s`);
  if (opts.warmup > 0) await load(url, 16, opts.warmup, 'warm');
  progress(`measured: ${opts.connections} connections opened at once, ${opts.seconds} s`);
  const run = await load(url, opts.connections, opts.seconds, 'm');
  await bridge.stop(15_000);
  if (process.env.BENCH_EXTRA_IMPORT) process.stderr.write(bridge.stderr());
  await sim?.stop();
  let probe: Probe | undefined;
  try {
    probe = JSON.parse(readFileSync(probeOut, 'utf8')) as Probe;
  } catch {
    progress('the probe wrote nothing (the bridge did not exit cleanly)');
  }

  const all = run.samples;
  const byStatus = new Map<string, number>();
  for (const s of all) byStatus.set(s.error ? `error (${s.error.slice(0, 40)})` : String(s.status), (byStatus.get(s.error ? `error (${s.error.slice(0, 40)})` : String(s.status)) ?? 0) + 1);
  const answered = all.filter((s) => !s.error);
  const row = (name: string, values: number[]): string[] => {
    const s = summarize(values);
    return [name, String(s.count), fmt(s.p50), fmt(s.p99), fmt(s.max), String(values.filter((v) => v > PROMISE_MS).length)];
  };
  out(`bench-overload: ${opts.connections} ${opts.keepAlive ? 'keep-alive connections' : 'clients, a new connection per request'}, ${opts.seconds} s closed loop, POST /v1/checkouts/generic; simulator ${opts.sim === 'sandbox' ? 'in the bridge process (sandbox)' : 'in its own process'}`);
  out(`machine: ${os.cpus().length} cpus, load average ${os.loadavg().map((l) => fmt(l, 2)).join(' ')}; bridge env ${JSON.stringify(opts.env)}`);
  out(`answers: ${answered.length} in ${fmt(run.seconds, 1)} s (${fmt(answered.length / run.seconds, 0)}/s); by status: ${[...byStatus].map(([k, v]) => `${k}: ${v}`).join(', ')}`);
  out();
  out('client-side latency, ms (from handing the request to the socket to the last byte of the answer)');
  out(
    table([
      ['answers', 'n', 'p50', 'p99', 'max', `> ${PROMISE_MS} ms`],
      row('all', answered.map((s) => s.latency)),
      row('first on its connection', answered.filter((s) => s.first).map((s) => s.latency)),
      row('later on the connection', answered.filter((s) => !s.first).map((s) => s.latency)),
      ...['200', '202', '503'].filter((k) => byStatus.has(k)).map((k) => row(`status ${k}`, answered.filter((s) => String(s.status) === k).map((s) => s.latency))),
    ]),
  );
  out(`load generator's own event-loop delay: p50 ${fmt(run.loop.p50)} ms, p99 ${fmt(run.loop.p99)} ms, max ${fmt(run.loop.max)} ms`);
  if (probe) {
    const req = probe.requests;
    out();
    out('inside the bridge process (overload-probe), ms');
    out(
      table([
        ['phase', 'n', 'p50', 'p99', 'max', `> ${PROMISE_MS} ms`],
        row('sent → request event (accept queue, event loop)', req.map((r) => r[0]).filter(Number.isFinite)),
        row('request event → body read', req.map((r) => r[1])),
        row('body read → answer sent (ledger, upstream, budget)', req.map((r) => r[2])),
        row('  of answers 200', req.filter((r) => r[3] === 200).map((r) => r[2])),
        row('  of answers 202', req.filter((r) => r[3] === 202).map((r) => r[2])),
        row('fdatasync (group commit before a call)', probe.fsync),
        row('upstream: wait for a pooled socket', probe.upstream.map((u) => u[0])),
        row('upstream: socket → answer', probe.upstream.map((u) => u[1])),
        row('  of which TCP connect (new sockets)', probe.upstream.map((u) => u[2]).filter(Number.isFinite)),
        row('simulator: its request → answer', probe.simulator),
      ]),
    );
    out(`bridge event-loop delay (whole run): p50 ${fmt(probe.loopDelay.p50)} ms, p99 ${fmt(probe.loopDelay.p99)} ms, max ${fmt(probe.loopDelay.max)} ms`);
  }
}

main().then(
  () => {
    cleanupSync();
    process.exit(0);
  },
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    cleanupSync();
    process.exit(1);
  },
);
