/**
 * What the bridges' PostgreSQL backends do during a phase of part D (bench/pg.ts): pg_stat_activity
 * sampled every 50 ms, its rows matched to the bridge processes by the local ports of their pool
 * connections (/proc), so that a phase tells whether requests queued for a connection.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type pg from 'pg';
import { fmt } from './table.js';

/**
 * Local TCP ports of `pid`'s connections to `serverPort` (Linux /proc): a bridge's pool
 * connections, which pg_stat_activity shows as client_port. Empty where /proc cannot tell.
 */
function pgPortsOf(pid: number | undefined, serverPort: number): Set<number> {
  const ports = new Set<number>();
  if (pid === undefined) return ports;
  try {
    const inodes = new Set<string>();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {
        /* closed meanwhile */
      }
    }
    for (const file of ['tcp', 'tcp6']) {
      let text: string;
      try {
        text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
      } catch {
        continue;
      }
      for (const line of text.split('\n').slice(1)) {
        const f = line.trim().split(/\s+/);
        if (f.length < 10 || !inodes.has(f[9]!)) continue;
        const local = parseInt(f[1]!.split(':')[1]!, 16);
        const remote = parseInt(f[2]!.split(':')[1]!, 16);
        if (remote === serverPort) ports.add(local);
      }
    }
  } catch {
    /* not Linux, or the process is gone */
  }
  return ports;
}

export interface BackendSummary {
  samples: number;
  /** Mean per sample over the bridges' connections. */
  open: number;
  busy: number;
  /** What the busy ones were doing: `running` (no wait event) or wait_event_type:wait_event; share of busy backend-samples. */
  doing: [string, number][];
  /** Share of samples in which some instance had every connection of a full pool (10) busy. */
  poolFull: number;
  /** Other clients of the server (not these bridges, not the benchmark's own connection): busy backends per sample. */
  othersBusy: number;
}

/**
 * Samples pg_stat_activity every `everyMs` for the backends of the given bridge processes, until
 * stopped: how many connections each pool holds, how many are busy and on what they wait. If the
 * pools are rarely full, requests did not queue for a connection.
 */
export function sampleBackends(admin: pg.Client, pids: (number | undefined)[], serverPort: number, poolSize: number, everyMs = 50): { stop(): Promise<BackendSummary> } {
  let samples = 0;
  let open = 0;
  let busy = 0;
  let poolFull = 0;
  let othersBusy = 0;
  const doing = new Map<string, number>();
  let stopped = false;
  const loop = (async () => {
    let ports = pids.map((pid) => pgPortsOf(pid, serverPort));
    let lastPorts = Date.now();
    while (!stopped) {
      if (Date.now() - lastPorts > 1000) {
        ports = pids.map((pid) => pgPortsOf(pid, serverPort));
        lastPorts = Date.now();
      }
      const all = new Set(ports.flatMap((p) => [...p]));
      try {
        const { rows } = await admin.query<{ client_port: number; state: string | null; wait_event_type: string | null; wait_event: string | null }>(
          "SELECT client_port, state, wait_event_type, wait_event FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        );
        samples++;
        othersBusy += rows.filter((r) => !all.has(r.client_port) && r.state !== 'idle').length;
        rows.splice(0, rows.length, ...rows.filter((r) => all.has(r.client_port)));
        open += rows.length;
        const busyPerInstance = ports.map(() => 0);
        const openPerInstance = ports.map(() => 0);
        for (const r of rows) {
          const k = ports.findIndex((p) => p.has(r.client_port));
          if (k >= 0) openPerInstance[k]!++;
          if (r.state === 'idle') continue;
          busy++;
          if (k >= 0) busyPerInstance[k]!++;
          const what = r.state === 'active' ? (r.wait_event ? `${r.wait_event_type}:${r.wait_event}` : 'running') : (r.state ?? 'unknown');
          doing.set(what, (doing.get(what) ?? 0) + 1);
        }
        if (busyPerInstance.some((b, k) => b >= poolSize && openPerInstance[k]! >= poolSize)) poolFull++;
      } catch {
        /* a failed sample is just skipped */
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const n = samples || 1;
      const busyTotal = busy || 1;
      return {
        samples,
        open: open / n,
        busy: busy / n,
        doing: [...doing].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, v / busyTotal] as [string, number]),
        poolFull: poolFull / n,
        othersBusy: othersBusy / n,
      };
    },
  };
}

export function describeBackends(b: BackendSummary): string {
  const top = b.doing.slice(0, 4).map(([k, share]) => `${k} ${fmt(share * 100, 0)}%`).join(', ');
  return `${fmt(b.open, 1)} connections open, ${fmt(b.busy, 2)} busy on average (${top || 'never busy'}); some pool full in ${fmt(b.poolFull * 100, 0)}% of ${b.samples} samples; other clients' busy backends ${fmt(b.othersBusy, 2)}`;
}
