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
 *   npm run ledger:archive -- --month 2026-08[,2026-09…] [--drop] [--url postgres://…]
 *
 * A month is refused while any of its records has work left or needs a person (they are named),
 * while a partial refund's chain runs from it into a month that stays (archive them together), and
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
import { CommandError, isEntryPoint, parseOptions, runCommand } from './cli.js';
import { resolveLedgerUrl } from './migrate.js';

const USAGE = 'usage: npm run ledger:archive -- --list | --month YYYY-MM|before_10[,YYYY-MM…] [--drop]   [--url postgres://…]   (default: LEDGER_URL)';

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
  // A year before 2000 is a typo (the bridge kept no record then), and Date.UTC reads 0000–0099 as
  // 1900–1999: 0099-12 named 1999-12, a month of nobody's records.
  if (!m || Number(m[1]) < 2000) throw new CommandError(`--month must be YYYY-MM with a year of 2000 or later (e.g. 2026-08), or before_10, got ${JSON.stringify(month.slice(0, 40))}`, 2);
  const startMs = Date.UTC(Number(m[1]), Number(m[2]) - 1, 1);
  return { name: partitionName(startMs), endsMs: Date.UTC(Number(m[1]), Number(m[2]), 1) };
}

/**
 * The payload partitions that go with a records partition: the month's, or for `before_10` (whose
 * end is its bound) every payload month that ends by then. The payload months are made with the
 * records' (ledger_ensure_partitions), so none straddles a records partition's end.
 */
async function payloadPartitionsOf(client: pg.PoolClient, name: string, endsMs: number | undefined): Promise<string[]> {
  if (endsMs !== undefined) {
    const found = await client.query<{ name: string }>("SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'ledger_payloads'::regclass AND c.relname = $1", [name]);
    return found.rows.map((r) => r.name);
  }
  const found = await client.query<{ name: string }>(
    `SELECT p.relname AS name FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid, pg_class f
      WHERE i.inhparent = 'ledger_payloads'::regclass AND f.oid = 'ledger_records_before_10'::regclass
        AND (regexp_match(pg_get_expr(p.relpartbound, p.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz
            <= (regexp_match(pg_get_expr(f.relpartbound, f.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz`,
  );
  return found.rows.map((r) => r.name);
}

/** The links of a partial refund's chain (record.ts parentTransactionId, remainderTransactionId) from records of `partition`, as ledger keys. */
const LINKS_OF = (partition: string, since?: string) => `
  SELECT r.transaction_id, CASE WHEN r.merchant_id = 'default' THEN l.linked ELSE r.merchant_id || '/' || l.linked END AS linked
    FROM ${partition} r
   CROSS JOIN LATERAL (VALUES (r.record ->> 'remainderTransactionId'), (r.record ->> 'parentTransactionId')) AS l(linked)
   WHERE l.linked IS NOT NULL${since ? ` AND r.created_at >= ${since}` : ''}`;

/**
 * Detaches (and with `drop`, drops) the months' partitions. Refused while one of their records has
 * work left or needs a person, or belongs to a partial refund's chain whose other records are in a
 * month that stays (a later refund of that order walks the chain: with half of it archived it would
 * find nothing to reverse); such months go together, `--month 2026-08,2026-09`.
 *
 * The checks read first, taking no lock (a month's scan takes a while); then, in one short
 * transaction, the partitioned table and the months are locked (the table first, as every query
 * takes them, so none waits in a cycle), what may have changed since is checked again (open and
 * attention rows; remainders created since the first look), and the months are detached.
 */
export async function archiveMonths(pool: pg.Pool, options: { months: readonly string[]; drop: boolean; nowMs?: number }): Promise<ArchiveResult[]> {
  const nowMs = options.nowMs ?? Date.now();
  const parts = options.months.map((month) => partitionOf(month));
  const names = parts.map((p) => p.name);
  for (const { name, endsMs } of parts) {
    const exists = await pool.query<{ bounds: string }>(
      "SELECT pg_get_expr(c.relpartbound, c.oid) AS bounds FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'ledger_records'::regclass AND c.relname = $1",
      [name],
    );
    if (!exists.rows[0]) throw new CommandError(`there is no partition ${name} of the ledger's records (npm run ledger:archive -- --list shows them)`, 3);
    // The first partition's end: what it holds is everything created before it.
    const until = endsMs ?? Date.parse(/TO \('([^']+)'\)/.exec(exists.rows[0].bounds)?.[1] ?? '');
    if (Number.isNaN(until) || nowMs - until < MIN_AGE_DAYS * 24 * 3600 * 1000) {
      throw new CommandError(`${name} ends ${Number.isNaN(until) ? 'at an unknown time' : new Date(until).toISOString()}: a month is archived once it ended at least ${MIN_AGE_DAYS} days ago (a refund of an archived sale could not be reversed)`, 3);
    }
  }
  const busy = async (db: pg.Pool | pg.PoolClient, name: string) => {
    const found = await db.query<{ transaction_id: string; why: string }>(
      `SELECT w.transaction_id, 'has work left (' || w.status || ')' AS why FROM ledger_work w JOIN ${name} r ON r.created_at = w.created_at AND r.transaction_id = w.transaction_id
       UNION ALL
       SELECT a.transaction_id, 'needs a person (' || a.kind || ')' FROM ledger_attention a JOIN ${name} r ON r.created_at = a.created_at AND r.transaction_id = a.transaction_id
       LIMIT ${NAMED + 1}`,
    );
    if (found.rows.length) {
      const named = found.rows.slice(0, NAMED).map((r) => `${r.transaction_id} ${r.why}`);
      throw new CommandError(`${name} still has records at work or waiting for a person: ${named.join('; ')}${found.rows.length > NAMED ? '; …' : ''}. Settle, close or acknowledge them first`, 3);
    }
  };
  /** Links from `from` to a record in a month that stays (from the months' records), or into the months (from records made since the first look). */
  const brokenChains = async (db: pg.Pool | pg.PoolClient, from: string, direction: 'out of the months' | 'into the months' = 'out of the months') => {
    const found = await db.query<{ transaction_id: string; linked: string; partition: string }>(
      `SELECT l.transaction_id, l.linked, x.tableoid::regclass::text AS partition FROM (${from}) l
         JOIN ledger_keys k ON k.transaction_id = l.linked
         JOIN ledger_records x ON x.created_at = k.created_at AND x.transaction_id = k.transaction_id
        WHERE ${direction === 'out of the months' ? 'x.tableoid::regclass::text <> ALL ($1::text[])' : 'x.tableoid::regclass::text = ANY ($1::text[])'}
        LIMIT ${NAMED + 1}`,
      [names],
    );
    if (found.rows.length) {
      const named = found.rows.slice(0, NAMED).map((r) => `${r.transaction_id} → ${r.linked} (in ${r.partition})`);
      throw new CommandError(
        `${names.join(', ')} ${names.length === 1 ? 'holds' : 'hold'} part of a partial refund's chain whose other records are in a month that stays: ${named.join('; ')}${found.rows.length > NAMED ? '; …' : ''}. Archive those months together (--month a,b)`,
        3,
      );
    }
  };
  const firstLook = (await pool.query<{ at: Date }>('SELECT now() AS at')).rows[0]!.at;
  const counts = new Map<string, number>();
  for (const name of names) {
    await busy(pool, name);
    await brokenChains(pool, LINKS_OF(name));
    counts.set(name, Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${name}`)).rows[0]!.n));
  }
  return inTransaction(pool, async (client) => {
    await client.query('LOCK TABLE ONLY ledger_records IN ACCESS EXCLUSIVE MODE');
    await client.query(`LOCK TABLE ONLY ${names.join(', ')} IN ACCESS EXCLUSIVE MODE`);
    for (const name of names) await busy(client, name);
    // A partial refund since the first look made its remainder in a month that stays: it links back.
    await brokenChains(client, LINKS_OF('ledger_records', `'${firstLook.toISOString()}'::timestamptz`), 'into the months');
    for (const name of names) {
      await client.query(`ALTER TABLE ledger_records DETACH PARTITION ${name}`);
      if (options.drop) await client.query(`DROP TABLE ${name}`);
      // The payloads its records were created from (migration 11) go with them: same months, same name but the table's.
      const payloads = name.replace(/^ledger_records_/, 'ledger_payloads_');
      for (const part of await payloadPartitionsOf(client, payloads, parts.find((p) => p.name === name)!.endsMs)) {
        await client.query(`ALTER TABLE ledger_payloads DETACH PARTITION ${part}`);
        if (options.drop) await client.query(`DROP TABLE ${part}`);
      }
    }
    return names.map((name) => ({ partition: name, dropped: options.drop, records: counts.get(name)! }));
  });
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The command: answers the exit code. */
export function main(argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  return runCommand(
    {
      name: 'ledger:archive',
      opensLedger: true,
      usage: USAGE,
      log,
      hiddenVariables: ['LEDGER_URL'],
      async run({ hideUrl }) {
        const options = parseOptions(argv, ['url', 'month'], ['list', 'drop']);
        if (options.has('list') === options.has('month')) throw new CommandError(`give --list or --month\n${USAGE}`, 2);
        const urlArgs = options.has('url') ? ['--url', options.get('url')!] : [];
        const url = resolveLedgerUrl(urlArgs, env, 'npm run ledger:archive', 'a file: ledger has no monthly partitions to archive');
        hideUrl(url);
        const { schema } = parsePgUrl(url);
        const store = new PostgresLedgerStore(url, { poolSize: 1 });
        try {
          // Brings the schema up to date first: the partitions exist from migration 10 on.
          await store.init();
          log(`PostgreSQL ledger ${redactUrl(url)}${schema ? ` (schema ${schema})` : ''}`);
          if (options.has('list')) {
            for (const p of await listPartitions(store.pool)) log(`${p.name}  ${p.bounds}  ~${p.estimatedRecords} records  ${mb(p.bytes)}`);
            return;
          }
          const months = options.get('month')!.split(',').map((m) => m.trim());
          for (const result of await archiveMonths(store.pool, { months, drop: options.has('drop') })) {
            log(
              result.dropped
                ? `archived ${result.partition}: ${result.records} records detached and dropped; their keys stay, so a redelivery of one is answered 409 archived`
                : `archived ${result.partition}: ${result.records} records detached; the table ${result.partition} stands alone: pg_dump -t ${schema ? `${schema}.` : ''}${result.partition} …, then DROP TABLE ${result.partition}`,
            );
          }
        } finally {
          await store.close().catch(() => undefined);
        }
      },
    },
    argv,
    env,
  );
}

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
