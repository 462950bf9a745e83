/**
 * A real PostgreSQL for the tests: TEST_DATABASE_URL, else the local server at 127.0.0.1:5432
 * (user postgres, database test), else a throwaway cluster started here where PostgreSQL is
 * installed (initdb as the postgres user when running as root; `TEST_DATABASE_URL=throwaway`
 * forces this), else none, with the reason, so
 * the tests that need it are skipped with one line saying why. Each test file gets its own schema.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../scripts/bridge-process.js';
import { eventually } from './eventually.js';

export interface TestDatabase {
  /** A postgres:// URL, or undefined when no PostgreSQL could be had. */
  url?: string;
  /** Where it came from, or why there is none. */
  source: string;
}

const LOCAL = 'postgres://postgres@127.0.0.1:5432/test';

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A PostgreSQL cluster of a test's own, in a temporary folder: started, crashed and started again at will. */
export interface Cluster {
  url: string;
  /** The cluster's own processes (postmaster first), as `ps` lists them. */
  pids(): number[];
  /** The pid of one of its background processes, by its title (`walwriter`, `checkpointer`, …). */
  pidOf(title: string): number | undefined;
  /** Every process of the cluster SIGKILLed at once: a database crash (what it had not flushed is lost). */
  crash(): Promise<void>;
  /** Starts it again on the same data (after a crash: its recovery replays what was flushed). */
  start(): Promise<void>;
  stop(): void;
  /** One statement on a connection of its own: its rows. */
  query(sql: string): Promise<Record<string, unknown>[]>;
}

function postgresBin(): string | undefined {
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort().reverse() : [];
  return versions.map((v) => join('/usr/lib/postgresql', v, 'bin')).find((b) => existsSync(join(b, 'initdb')));
}

/**
 * A new cluster (initdb as the postgres user when running as root), started with `settings`
 * (`-c name=value`); removed by a detached watchdog once this process is gone, as test workers can
 * be ended without their exit handlers running. Answers the reason instead when it cannot be had.
 */
export async function startCluster(settings: Record<string, string> = {}): Promise<Cluster | { reason: string }> {
  const bin = postgresBin();
  if (!bin) return { reason: 'PostgreSQL is not installed here' };
  const place = ownFolder(bin);
  const init = place.run('initdb', ['-D', place.data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  if (init.status !== 0) return { reason: `could not initdb a throwaway cluster: ${String(init.stderr ?? init.error).slice(0, 200)}` };
  return serve(place, settings);
}

/** A cluster that can fail over: `primary` and a streaming standby of it that the primary waits for (`synchronous_standby_names`). */
export interface ReplicatedCluster {
  primary: Cluster;
  standby: Cluster & {
    /** Makes the standby the primary (`pg_ctl promote`), waiting until it takes writes. */
    promote(): Promise<void>;
  };
}

/**
 * A primary whose every commit waits until its standby has flushed it (a synchronous standby, as a
 * managed PostgreSQL with high availability runs), and that standby, built by `pg_basebackup -R`
 * and streaming from it. Answers the reason instead when they cannot be had.
 */
export async function startReplicatedCluster(settings: Record<string, string> = {}): Promise<ReplicatedCluster | { reason: string }> {
  const bin = postgresBin();
  if (!bin) return { reason: 'PostgreSQL is not installed here' };
  const primary = await startCluster({ wal_level: 'replica', max_wal_senders: '4', synchronous_standby_names: 'standby1', ...settings });
  if ('reason' in primary) return primary;
  const place = ownFolder(bin);
  const port = new URL(primary.url).port;
  const copied = place.run('pg_basebackup', ['-h', '127.0.0.1', '-p', port, '-U', 'postgres', '-D', place.data, '-R', '-X', 'stream', '--no-sync']);
  if (copied.status !== 0) return { reason: `could not pg_basebackup a standby: ${String(copied.stderr ?? copied.error).slice(0, 200)}` };
  // The walreceiver names itself by cluster_name: the name the primary's synchronous_standby_names waits for.
  const standby = await serve(place, { ...settings, cluster_name: 'standby1' });
  if ('reason' in standby) return standby;
  await eventually(() => primary.query("SELECT count(*)::int AS n FROM pg_stat_replication WHERE application_name = 'standby1' AND sync_state = 'sync'").then((rows) => rows[0]!.n as number), (n) => n === 1, 20_000, { what: 'the standby streaming synchronously' });
  return {
    primary,
    standby: {
      ...standby,
      async promote() {
        const promoted = place.run('pg_ctl', ['-D', place.data, '-w', 'promote']);
        if (promoted.status !== 0) throw new Error(`could not promote the standby: ${String(promoted.stderr ?? promoted.error).slice(0, 300)}`);
        await eventually(() => standby.query('SELECT pg_is_in_recovery() AS standby').then((rows) => rows[0]!.standby as boolean), (inRecovery) => !inRecovery, 20_000, { what: 'the promoted standby out of recovery' });
      },
    },
  };
}

interface Folder {
  dir: string;
  data: string;
  run(cmd: string, args: string[]): ReturnType<typeof spawnSync>;
  asPostgres: boolean;
  bin: string;
}

/** A temporary folder a cluster's data lives in, owned by the postgres user when running as root (PostgreSQL refuses to run as root). */
function ownFolder(bin: string): Folder {
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'bridge-pg-'));
  if (asPostgres) {
    const { uid, gid } = { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) };
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
  }
  // stdio is not inherited by the server pg_ctl starts (it logs to a file), or spawnSync would wait for it.
  const run = (cmd: string, args: string[]) =>
    asPostgres
      ? spawnSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
      : spawnSync(join(bin, cmd), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  return { dir, data: join(dir, 'data'), run, asPostgres, bin };
}

async function serve(place: Folder, settings: Record<string, string>): Promise<Cluster | { reason: string }> {
  const { dir, data, run, asPostgres, bin } = place;
  const port = await freePort();
  const options = [`-p ${port}`, `-k ${dir}`, '-c listen_addresses=127.0.0.1', ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
  const start = async () => {
    const started = run('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-o', options, 'start']);
    if (started.status !== 0) throw new Error(`could not start the cluster: ${String(started.stderr ?? started.error).slice(0, 300)}`);
  };
  try {
    await start();
  } catch (error) {
    return { reason: (error as Error).message };
  }
  const stop = `${asPostgres ? 'runuser -u postgres -- ' : ''}${join(bin, 'pg_ctl')} -D ${data} -m immediate stop`;
  spawn('sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${stop} >/dev/null 2>&1; rm -rf ${dir}`], { detached: true, stdio: 'ignore' }).unref();
  const postmasterPid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = (parent: number) =>
    execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(parent)])
      .toString()
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => ({ pid: Number(l.split(/\s+/)[0]), title: l.slice(l.indexOf(' ') + 1) }));
  const pids = () => {
    const main = postmasterPid();
    return [main, ...children(main).map((c) => c.pid)];
  };
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    pids,
    pidOf: (title: string) => children(postmasterPid()).find((c) => c.title.includes(title))?.pid,
    async crash() {
      const pidsNow = pids();
      for (const pid of pidsNow) process.kill(pid, 'SIGKILL');
      // Gone when no pid answers any more.
      await eventually(() => pidsNow.filter(alive), (left) => left.length === 0, 5000, { what: "the cluster's processes to end on SIGKILL (the value: those still alive)" });
    },
    start,
    stop: () => void run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']),
    async query(sql: string) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(sql)).rows as Record<string, unknown>[];
      } finally {
        await client.end();
      }
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function throwawayCluster(): Promise<TestDatabase> {
  const cluster = await startCluster({ fsync: 'off' });
  return 'reason' in cluster ? { source: cluster.reason } : { url: cluster.url, source: `throwaway cluster at ${cluster.url}` };
}

let found: Promise<TestDatabase> | undefined;

export function testDatabase(): Promise<TestDatabase> {
  found ??= (async () => {
    // TEST_DATABASE_URL=throwaway skips the local server: how the fallback itself is exercised.
    if (process.env.TEST_DATABASE_URL === 'throwaway') return throwawayCluster();
    if (process.env.TEST_DATABASE_URL) return { url: process.env.TEST_DATABASE_URL, source: 'TEST_DATABASE_URL' };
    if (await reachable(LOCAL)) return { url: LOCAL, source: 'the local server at 127.0.0.1:5432' };
    return throwawayCluster();
  })();
  return found;
}

/** A URL naming a new, empty schema of its own (`?schema=`), and how to drop it afterwards. */
export async function freshSchema(base: string, label: string): Promise<{ url: string; drop(): Promise<void> }> {
  const schema = `t_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase().slice(0, 20)}_${process.pid}_${Math.floor(Math.random() * 1e9)}`;
  const url = new URL(base);
  url.searchParams.set('schema', schema);
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
}

/**
 * `describe` when a database is at hand. Otherwise skipped with the reason printed once, on a
 * developer's machine; with `CI=true` the file fails instead: CI must prove the PostgreSQL store.
 */
export async function describeWithDatabase(): Promise<{ url?: string; describeIf: typeof import('@jest/globals').describe }> {
  const { describe } = await import('@jest/globals');
  const db = await testDatabase();
  if (!db.url && process.env.CI === 'true') throw new Error(`CI=true and no PostgreSQL could be found or started for the tests: ${db.source}`);
  if (!db.url) process.stderr.write(`PostgreSQL tests skipped: ${db.source}\n`);
  return { url: db.url, describeIf: db.url ? describe : (describe.skip as unknown as typeof describe) };
}

/** A PgBouncer of a test's own in front of a PostgreSQL server: `url` reaches `database` through it. */
export interface Bouncer {
  url: string;
  /** The server connections PgBouncer may open to the database (its pool for the one user). */
  poolSize: number;
  stop(): void;
}

/**
 * Starts PgBouncer (Debian's `pgbouncer`, run as the postgres user when running as root: it refuses
 * root) in `mode` on a free port, passing `database` on to the server of `base`, with a pool of
 * `poolSize` server connections. Answers the reason instead when it cannot be had.
 */
export async function startBouncer(base: string, database: string, options: { mode: 'transaction' | 'session'; poolSize: number }): Promise<Bouncer | { reason: string }> {
  const bin = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((b) => existsSync(b));
  if (!bin) return { reason: "PgBouncer is not installed here (Debian's package pgbouncer)" };
  const server = new URL(base);
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'bridge-pgbouncer-'));
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${server.hostname} port=${server.port || 5432} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${options.mode}`,
      `default_pool_size = ${options.poolSize}`,
      'reserve_pool_size = 0',
      'max_client_conn = 500',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
    ].join('\n'),
  );
  if (asPostgres) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  const started = asPostgres ? spawnSync('runuser', ['-u', 'postgres', '--', bin, '-d', join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] }) : spawnSync(bin, ['-d', join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (started.status !== 0) return { reason: `could not start PgBouncer: ${String(started.stderr ?? started.error).slice(0, 300)}` };
  const url = `postgres://postgres@127.0.0.1:${port}/${database}`;
  const pid = () => Number(readFileSync(join(dir, 'pgbouncer.pid'), 'utf8').trim());
  await eventually(() => reachable(url), (ok) => ok, 10_000, { what: 'PgBouncer taking connections' });
  // Stopped with the tests' process, however it ends.
  spawn('sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill ${pid()} 2>/dev/null; rm -rf ${dir}`], { detached: true, stdio: 'ignore' }).unref();
  return {
    url,
    poolSize: options.poolSize,
    stop: () => {
      try {
        process.kill(pid(), 'SIGTERM');
      } catch {
        // gone already
      }
    },
  };
}
