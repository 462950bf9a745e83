/**
 * Preloaded into the bridge process by bench/overload.ts (`node --import …/overload-probe.js
 * dist/src/main.js`): it changes nothing the bridge does, it only times where a request's time goes,
 * and writes the figures to BENCH_PROBE_OUT when the process exits.
 *
 * - before the handler: from the load generator's send instant (`x-bench-sent`, epoch ms: both
 *   processes read the same clock) to the server's `request` event: the accept queue, the socket
 *   buffers and every wait for a busy event loop;
 * - body: from the `request` event to the body's last byte;
 * - handler: from there to the answer's last byte (ledger, fsync, upstream call, answer budget);
 * - the journal's fdatasync calls (the group commit before each upstream call);
 * - each upstream request: waiting for a socket from the agent's pool, then for the answer;
 * - the in-process simulator's own `request` → answer time (sandbox: it shares the event loop);
 * - the event loop's delay (perf_hooks histogram).
 */
import fs from 'node:fs';
import http from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

const now = () => performance.timeOrigin + performance.now();
const out = process.env.BENCH_PROBE_OUT;

const figures = {
  /** Per bridge POS request: [beforeHandler, body, handler, status]. */
  requests: [] as [number, number, number, number][],
  simulator: [] as number[],
  fsync: [] as number[],
  /** Per upstream request: [socketWait, answer, connect (new sockets; NaN on a reused one)]. */
  upstream: [] as [number, number, number][],
  loopDelay: { p50: 0, p99: 0, max: 0 },
};

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (this: http.Server, event: string, ...args: unknown[]) {
  if (event === 'request') {
    const [req, res] = args as [http.IncomingMessage, http.ServerResponse];
    const arrived = now();
    if (req.url?.startsWith('/api/')) {
      res.once('finish', () => figures.simulator.push(now() - arrived));
    } else if (req.url?.startsWith('/v1/')) {
      const sent = Number(req.headers['x-bench-sent']);
      let bodyEnd = Number.NaN;
      req.once('end', () => (bodyEnd = now()));
      res.once('finish', () => {
        const done = now();
        const end = Number.isNaN(bodyEnd) ? arrived : bodyEnd;
        figures.requests.push([Number.isFinite(sent) ? arrived - sent : Number.NaN, end - arrived, done - end, res.statusCode]);
      });
    }
  }
  return (emit as (this: http.Server, ...a: unknown[]) => boolean).call(this, event, ...args);
} as typeof http.Server.prototype.emit;

// The journal imports fdatasync by name: patch the module, then re-sync the ESM named exports.
const fdatasync = fs.fdatasync;
fs.fdatasync = ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
  const t0 = now();
  fdatasync(fd, (error) => {
    figures.fsync.push(now() - t0);
    done(error);
  });
}) as typeof fs.fdatasync;
syncBuiltinESMExports();

// axios (node adapter, no redirects) calls http.request on the module object.
const request = http.request;
http.request = ((...args: unknown[]) => {
  const t0 = now();
  const req = (request as (...a: unknown[]) => http.ClientRequest)(...args);
  let socketAt = Number.NaN;
  let connect = Number.NaN;
  req.once('socket', (socket) => {
    socketAt = now();
    if (socket.connecting) socket.once('connect', () => (connect = now() - socketAt));
  });
  req.once('response', () => {
    const t = now();
    figures.upstream.push([(Number.isNaN(socketAt) ? t : socketAt) - t0, t - (Number.isNaN(socketAt) ? t0 : socketAt), connect]);
  });
  return req;
}) as typeof http.request;

process.on('exit', () => {
  loop.disable();
  figures.loopDelay = { p50: loop.percentile(50) / 1e6, p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 };
  if (out) fs.writeFileSync(out, JSON.stringify(figures));
});
