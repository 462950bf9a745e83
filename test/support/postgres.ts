/**
 * A real PostgreSQL for the tests: TEST_DATABASE_URL, else the local server at 127.0.0.1:5432
 * (user postgres, database test), else a throwaway cluster started here where PostgreSQL is
 * installed (initdb as the postgres user when running as root; `TEST_DATABASE_URL=throwaway`
 * forces this), else none, with the reason, so
 * the tests that need it are skipped with one line saying why. Each test file gets its own schema.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../scripts/bridge-process.js';

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

function throwawayCluster(): Promise<TestDatabase> | TestDatabase {
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort().reverse() : [];
  const bin = versions.map((v) => join('/usr/lib/postgresql', v, 'bin')).find((b) => existsSync(join(b, 'initdb')));
  if (!bin) return { source: 'no TEST_DATABASE_URL, no server at 127.0.0.1:5432, and PostgreSQL is not installed here' };
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
  const init = run('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  if (init.status !== 0) return { source: `could not initdb a throwaway cluster: ${String(init.stderr ?? init.error).slice(0, 200)}` };
  return freePort().then(async (port) => {
    const start = run('pg_ctl', ['-D', join(dir, 'data'), '-l', join(dir, 'server.log'), '-w', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start']);
    if (start.status !== 0) return { source: `could not start a throwaway cluster: ${String(start.stderr ?? start.error).slice(0, 200)}` };
    // Test workers can be ended without their exit handlers running: a detached watchdog stops the
    // cluster and removes it once this process is gone.
    const stop = `${asPostgres ? 'runuser -u postgres -- ' : ''}${join(bin, 'pg_ctl')} -D ${join(dir, 'data')} -m immediate stop`;
    spawn('sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${stop} >/dev/null 2>&1; rm -rf ${dir}`], { detached: true, stdio: 'ignore' }).unref();
    return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, source: `throwaway cluster on port ${port}` };
  });
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
