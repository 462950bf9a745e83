/**
 * `npm run ledger:archive`: takes a month of settled history out of the PostgreSQL ledger in one
 * step. The records are partitioned by the month they were created in (migration 10); archiving a
 * month detaches its partition, which stays in the database as a table of its own
 * (`ledger_records_2026_08`) for `pg_dump -t` and `DROP TABLE`, or is dropped at once with
 * `--drop`. No row is deleted one by one, and the ledger keeps every archived record's key
 * (`ledger_keys`): a late redelivery of an archived order is answered `409 archived`, never accrued
 * again, and operation claims stay claimed.
 *
 *   npm run ledger:archive -- --list
 *   npm run ledger:archive -- --month 2026-08 [--drop] [--url postgres://…]
 *
 * A month is refused while any of its records has work left or needs a person (they are named), and
 * while it ended less than MIN_AGE_DAYS ago: a refund of an archived order could not be reversed.
 * The partition that held the ledger before migration 10 (`ledger_records_before_10`: everything
 * created before the month after the migration) is archived as a whole with `--month before_10`.
 *
 * Exit codes: 0 done (or listed); 2 a bad argument, LEDGER_URL missing or not postgres://; 3 the
 * month may not be archived (why is printed); 1 it failed.
 */
import pg from 'pg';
import { inTransaction, parsePgUrl, PostgresLedgerStore, redactUrl } from '../src/ledger/pg-store.js';
import { partitionName } from '../src/ledger/pg-migrations.js';
import { CommandError, describeError, hidePasswords, isEntryPoint, parseOptions } from './cli.js';
import { resolveLedgerUrl } from './migrate.js';

const USAGE = 'usage: npm run ledger:archive -- --list | --month YYYY-MM|before_10 [--drop]   [--url postgres://…]   (default: LEDGER_URL)';

/** A month must have ended this long ago: refunds come weeks after a sale, and an archived sale's refund cannot be reversed. */
export const MIN_AGE_DAYS = 60;

/** Records named when a month is refused for the records it still has at work. */
const NAMED = 10;

export interface PartitionInfo {
  name: string;
  /** The range it holds, as PostgreSQL states it. */
  bounds: string;
  /** Rows, as PostgreSQL last estimated them (an exact count would read the whole month). */
  estimatedRecords: number;
  bytes: number;
}

export interface ArchiveResult {
  partition: string;
  dropped: boolean;
  records: number;
}

/** The month partitions of the records, oldest first. */
export async function listPartitions(pool: pg.Pool): Promise<PartitionInfo[]> {
  const { rows } = await pool.query<{ name: string; bounds: string; estimate: number; bytes: string }>(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bounds, greatest(c.reltuples, 0)::bigint AS estimate, pg_total_relation_size(c.oid) AS bytes
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'ledger_records'::regclass
      ORDER BY c.relname = 'ledger_records_before_10' DESC, c.relname`,
  );
  return rows.map((r) => ({ name: r.name, bounds: r.bounds, estimatedRecords: Number(r.estimate), bytes: Number(r.bytes) }));
}

/** The partition a `--month` names: `YYYY-MM`, or `before_10`. Throws CommandError (exit 2) otherwise. */
export function partitionOf(month: string): { name: string; endsMs?: number } {
  if (month === 'before_10') return { name: 'ledger_records_before_10' };
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(month);
  if (!m) throw new CommandError(`--month must be YYYY-MM (e.g. 2026-08) or before_10, got ${JSON.stringify(month.slice(0, 40))}`, 2);
  const startMs = Date.UTC(Number(m[1]), Number(m[2]) - 1, 1);
  return { name: partitionName(startMs), endsMs: Date.UTC(Number(m[1]), Number(m[2]), 1) };
}

/**
 * Detaches (and with `drop`, drops) the month's partition, in one transaction that first locks it,
 * then checks that none of its records has work left or needs a person: a record written meanwhile
 * waits for the lock, and the check sees it.
 */
export async function archiveMonth(pool: pg.Pool, options: { month: string; drop: boolean; nowMs?: number }): Promise<ArchiveResult> {
  const { name, endsMs } = partitionOf(options.month);
  const nowMs = options.nowMs ?? Date.now();
  return inTransaction(pool, async (client) => {
    const exists = await client.query<{ bounds: string }>(
      "SELECT pg_get_expr(c.relpartbound, c.oid) AS bounds FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'ledger_records'::regclass AND c.relname = $1",
      [name],
    );
    if (!exists.rows[0]) throw new CommandError(`there is no partition ${name} of the ledger's records (npm run ledger:archive -- --list shows them)`, 3);
    // The first partition's end: what it holds is everything created before it.
    const until = endsMs ?? Date.parse(/TO \('([^']+)'\)/.exec(exists.rows[0].bounds)?.[1] ?? '');
    if (Number.isNaN(until) || nowMs - until < MIN_AGE_DAYS * 24 * 3600 * 1000) {
      throw new CommandError(`${name} ends ${Number.isNaN(until) ? 'at an unknown time' : new Date(until).toISOString()}: a month is archived once it ended at least ${MIN_AGE_DAYS} days ago (a refund of an archived sale could not be reversed)`, 3);
    }
    await client.query(`LOCK TABLE ${name} IN ACCESS EXCLUSIVE MODE`);
    const busy = await client.query<{ transaction_id: string; why: string }>(
      `SELECT w.transaction_id, 'has work left (' || w.status || ')' AS why FROM ledger_work w JOIN ${name} r ON r.created_at = w.created_at AND r.transaction_id = w.transaction_id
       UNION ALL
       SELECT a.transaction_id, 'needs a person (' || a.kind || ')' FROM ledger_attention a JOIN ${name} r ON r.created_at = a.created_at AND r.transaction_id = a.transaction_id
       LIMIT ${NAMED + 1}`,
    );
    if (busy.rows.length) {
      const named = busy.rows.slice(0, NAMED).map((r) => `${r.transaction_id} ${r.why}`);
      throw new CommandError(`${name} still has records at work or waiting for a person: ${named.join('; ')}${busy.rows.length > NAMED ? '; …' : ''}. Settle, close or acknowledge them first`, 3);
    }
    const records = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${name}`)).rows[0]!.n);
    await client.query(`ALTER TABLE ledger_records DETACH PARTITION ${name}`);
    if (options.drop) await client.query(`DROP TABLE ${name}`);
    return { partition: name, dropped: options.drop, records };
  });
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The command: answers the exit code. */
export async function main(argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    log(USAGE);
    return 0;
  }
  let url: string | undefined;
  let store: PostgresLedgerStore | undefined;
  try {
    const options = parseOptions(argv, ['url', 'month'], ['list', 'drop']);
    if (options.has('list') === options.has('month')) throw new CommandError(`give --list or --month\n${USAGE}`, 2);
    const urlArgs = options.has('url') ? ['--url', options.get('url')!] : [];
    url = resolveLedgerUrl(urlArgs, env);
    const { schema } = parsePgUrl(url);
    store = new PostgresLedgerStore(url, { poolSize: 1 });
    // Brings the schema up to date first: the partitions exist from migration 10 on.
    await store.init();
    log(`PostgreSQL ledger ${redactUrl(url)}${schema ? ` (schema ${schema})` : ''}`);
    if (options.has('list')) {
      for (const p of await listPartitions(store.pool)) log(`${p.name}  ${p.bounds}  ~${p.estimatedRecords} records  ${mb(p.bytes)}`);
      return 0;
    }
    const result = await archiveMonth(store.pool, { month: options.get('month')!, drop: options.has('drop') });
    log(
      result.dropped
        ? `archived ${result.partition}: ${result.records} records detached and dropped; their keys stay, so a redelivery of one is answered 409 archived`
        : `archived ${result.partition}: ${result.records} records detached; the table ${result.partition} stands alone: pg_dump -t ${schema ? `${schema}.` : ''}${result.partition} …, then DROP TABLE ${result.partition}`,
    );
    return 0;
  } catch (error) {
    const code = error instanceof CommandError ? error.exitCode : 1;
    const message = hidePasswords(describeError(error), ...(url ? [url] : []), ...(env.LEDGER_URL ? [env.LEDGER_URL] : []));
    process.stderr.write(`ledger:archive: ${code === 1 ? 'failed: ' : ''}${message}\n`);
    return code;
  } finally {
    await store?.close().catch(() => undefined);
  }
}

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
