/**
 * The PostgreSQL ledger, for several bridge instances on one database (`LEDGER_URL=postgres://…`).
 * Exactly-once across instances rests on the database, not on any process: the primary key makes
 * a transactionId insert once, `ledger_update` is a compare-and-set on `version` (an instance that
 * lost the race gets VersionConflictError and makes no call), operation claims are a primary key,
 * and workers take due records with `FOR UPDATE SKIP LOCKED` under a lease, so instances share the
 * background work instead of all looking at the same records.
 *
 * `?schema=name` in the URL puts the tables in that schema (tests give each file its own).
 */
import pg from 'pg';
import { AccrualKeyHeldError, ArchivedRecordError, ConflictError, VersionConflictError } from '../kernel/errors.js';
import { WriteBatch } from './pg-batch.js';
import { accrualKeyColumns, attentionColumn, dueColumns, MIGRATIONS } from './pg-migrations.js';
import { accountKeysOf, type StoredMerchant } from '../state/merchant.js';
import { claimedOperationIds, isOpen, keyOf, merchantOf, transactionIdOf, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import { attentionEntriesOf, UNCLASSIFIED, type AttentionInput, type AttentionKind } from '../state/attention.js';
import { CUSTOMER_SEARCH_KEY, customerHash, customerHashesOf } from '../state/customer-index.js';
import {
  derivedKey,
  attentionCountsOf,
  backfillKey,
  CUSTOMER_SEARCH_DEPTH,
  deadLetterDueAtMs,
  FOLD_CASE_SQL,
  foldCase,
  likeLiteral,
  LIST_COUNT_CAP,
  pageOf,
  PREFIX_MATCH_CAP,
  tooManyPrefixMatches,
  statusesOf,
  type AttentionCounts,
  type AttentionEntry,
  type AttentionQuery,
  type AuditEntry,
  type AuditQuery,
  type BackfillState,
  type DeadLetter,
  type DeadLetterCounts,
  type DeadLetterQuery,
  type DueQuery,
  type InsertOptions,
  type KeptPayload,
  type LedgerStore,
  type ListQuery,
  type OpenClaim,
  type OpenQuery,
  type Page,
  type UpdateOptions,
} from './store.js';

const MIGRATION_LOCK = 0x4c42_4d49; // 'LBMI': one advisory lock id for every instance of the bridge
/** 'LBDL': the class of the advisory locks that make each dead letter's read-change-write one step (`updateDeadLetter`). */
const DEAD_LETTER_LOCK = 0x4c42_444c;
/** 'LBBF': the class of the advisory locks that make each backfill state's read-change-write one step (`updateBackfillState`). */
const BACKFILL_LOCK = 0x4c42_4246;
/** The month partitions from last month to three months ahead (migration 10): made at start-up and every day after, those missing only. */
const ENSURE_PARTITIONS = "SELECT ledger_ensure_partitions(now() - interval '1 month', now() + interval '4 months')";
const CLAIM_LOCK = 0x4c42_434c; // 'LBCL': held by an instance's worker while it claims due records
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** Records per transaction in `importRecords`. */
const IMPORT_BATCH = 500;

export interface PgConnection {
  connectionString: string;
  schema?: string;
}

/** Splits our own `schema` parameter off a postgres:// URL; pg keeps the rest. */
/**
 * Whether an error is PostgreSQL out of reach (a connection cut, refused, timed out, a server
 * shutting down or not taking connections yet), not a statement it refused: what a request that
 * met it answers with a 503 to try again (error-handler.ts), never a 500. SQLSTATE class 08
 * (connection exception), 57P01–57P03 (shut down, crashed, cannot connect now), 53300 (too many
 * connections); the socket's own errors; and pg's and pg-pool's messages for a cut or a timeout.
 */
export function isLedgerUnreachable(error: unknown): boolean {
  const e = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (/^08/.test(code) || ['57P01', '57P02', '57P03', '53300'].includes(code)) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /^Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated due to connection timeout/.test(message);
}

/** How long one new connection to PostgreSQL may take before the attempt fails. */
export const PG_CONNECT_TIMEOUT_MS = 5000;

export function parsePgUrl(url: string): PgConnection {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema') ?? undefined;
  parsed.searchParams.delete('schema');
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) throw new Error(`LEDGER_URL schema ${JSON.stringify(schema)} must be a plain lower-case identifier`);
  return { connectionString: parsed.toString(), schema };
}

/**
 * JSON text for a jsonb parameter. PostgreSQL's jsonb cannot hold the NUL character, which a POS
 * payload or an upstream error body may contain: it becomes U+FFFD, in text kept for people to
 * read (dead-letter bodies that must replay byte for byte are kept in base64 when they contain one).
 */
export function jsonb(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' && v.includes('\u0000') ? v.replaceAll('\u0000', '\uFFFD') : v));
}

/**
 * The record a row of ledger_keys, ledger_work or ledger_attention (`alias`) names, read by its
 * primary key (created_at, transaction_id) in its month's partition: as a LATERAL subquery that
 * the planner may not flatten into a join (OFFSET 0), it is run once per row with the row's values,
 * so only that month's partition is probed (run-time partition pruning), whatever the planner
 * thinks of the tables' sizes.
 */
const RECORD_OF = (alias: string) => `(SELECT record FROM ledger_records WHERE created_at = ${alias}.created_at AND transaction_id = ${alias}.transaction_id OFFSET 0)`;

/**
 * Whether the record of work row `alias` carries no call marked in flight (`inFlight`) by another
 * instance whose lease on it still stands (lease.ts: its start plus the lease, the claim's `leaseMs`).
 * Such a record is its caller's: another instance that leased its work row would only hold the
 * caller out of it, so that a call whose outcome was lost (a failover took back its asynchronous
 * commit) waited for the lease to run out instead of being settled by its live owner at once.
 */
const NOT_IN_FLIGHT_ELSEWHERE = (alias: string, owner: string, leaseMs: string) =>
  // The record read by its key per row, as RECORD_OF does (OFFSET 0: not flattened into a join,
  // so the due walk keeps its index scan and stops at the cap).
  `NOT EXISTS (SELECT 1 FROM (SELECT record FROM ledger_records WHERE created_at = ${alias}.created_at AND transaction_id = ${alias}.transaction_id OFFSET 0) f
                WHERE f.record->'inFlight'->>'owner' <> ${owner}
                  AND (f.record->'inFlight'->>'startedAt')::timestamptz > now() - make_interval(secs => ${leaseMs}::double precision / 1000))`;

/** A LIKE pattern matching what starts with `prefix` folded (store.ts foldCase), its %, _ and \\ taken literally. */
function likePrefix(prefix: string): string {
  return `${likeLiteral(foldCase(safeText(prefix)))}%`;
}

/** Text for a column: NUL, which PostgreSQL text cannot hold, as U+FFFD (as `jsonb` does in JSON). */
function safeText(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD');
}

/** One insert as `ledger_insert` and `ledger_insert_batch` take it (pg-batch.ts). */
interface InsertWrite {
  id: string;
  merchant: string;
  pos: string;
  orderId: string;
  status: string;
  open: boolean;
  createdAt: string;
  updatedAt: string;
  record: LedgerRecord;
  dueAt: string;
  needsVerifier: boolean;
  keys: string[];
  unsettled: number | null;
  ops: number[];
  refundIds: string[];
  attention: { kind: string; since: string }[];
  /** The record's customer search entries (customer-index.ts), written once with it. */
  customers: string[];
  /** The POS payload it was created from (store.ts KeptPayload), when one was kept. */
  payload?: KeptPayload;
}

/** One compare-and-set as `ledger_update` and `ledger_update_batch` take it. */
interface UpdateWrite extends Omit<InsertWrite, 'pos' | 'orderId' | 'customers' | 'payload'> {
  expected: number;
}

/** A write's refusal by the database: LB001 (an operation another record claims) or LB002 (an accrual key another holds, the holder in `detail`). */
interface Refusal {
  code?: string | null;
  message?: string | null;
  detail?: string | null;
}

type InsertOutcome = { created: boolean; stored: LedgerRecord | null } & Refusal;
type UpdateOutcome = { ok: boolean } & Refusal;

/** The columns and side rows of a record, computed once by the bridge's own rules (record.ts, attention.ts). */
function writeOf(record: LedgerRecord): Omit<InsertWrite, 'pos' | 'orderId' | 'status' | 'createdAt' | 'updatedAt' | 'customers' | 'payload'> {
  const due = dueColumns(record);
  const { keys, unsettledAmount } = accrualKeyColumns(record);
  return {
    id: keyOf(record),
    merchant: merchantOf(record),
    open: isOpen(record),
    record,
    dueAt: due.dueAt,
    needsVerifier: due.needsVerifier,
    keys,
    unsettled: unsettledAmount,
    ops: claimedOperationIds(record),
    refundIds: record.reversal.refundIds,
    attention: JSON.parse(attentionColumn(record)) as InsertWrite['attention'],
  };
}

function insertWrite(record: LedgerRecord, searchKey: string, payload: KeptPayload | undefined): InsertWrite {
  return {
    ...writeOf(record),
    pos: record.pos,
    orderId: safeText(record.orderId),
    status: record.status,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    customers: customerHashesOf(record.accrual.customer, searchKey),
    ...(payload ? { payload } : {}),
  };
}

function updateWrite(next: LedgerRecord): UpdateWrite {
  return { ...writeOf(next), status: next.status, createdAt: next.createdAt, updatedAt: next.updatedAt, expected: next.version - 1 };
}

/** A statement's refusal (LB001, LB002) as an outcome to answer; anything else is thrown as it is. */
function refusedAs(error: unknown): never | (InsertOutcome & UpdateOutcome) {
  const e = error as { code?: string; message?: string; detail?: string };
  if (e.code === 'LB001' || e.code === 'LB002') return { created: false, stored: null, ok: false, code: e.code, message: e.message, detail: e.detail };
  throw error;
}

/** The error a refused write is, as the store interface names it. */
function refusal(outcome: Refusal, record: LedgerRecord): Error {
  if (outcome.code === 'LB002' && outcome.detail) return new AccrualKeyHeldError(record.transactionId, transactionIdOf(outcome.detail));
  return new ConflictError(outcome.message ?? 'the ledger refused the write');
}


/**
 * `listDue` in SQL (store.ts for what it answers; due-turns.ts says the same for the other stores),
 * over the work table (migration 10: open records only). Merchants with work the bridge can do by
 * itself are walked one to the next through ledger_work_merchant_due (a loose index scan: one probe
 * each, however many records each has; merchants whose open records all wait for a person are not
 * in that index); for each, its earliest due records up to the cap, numbered (its turns); then turn
 * by turn, earliest due first, up to the limit. With a claim, the records another live instance
 * leased, or that were written within `idleMs`, are not candidates, nor those whose call another
 * live instance has in flight (`NOT_IN_FLIGHT_ELSEWHERE`), and those chosen are locked
 * (SKIP LOCKED: a row being written is left for the next pass), checked again and leased to the
 * owner. The records themselves are read by their primary key, in their month's partition.
 *
 * The lease test (`lease_until IS NULL OR lease_until < now() OR lease_owner = owner`) is the rule
 * of src/kernel/lease.ts, which owns it, said in SQL because the batch is chosen and locked in one
 * statement; here the database's clock says when a lease ran out. A change to the rule is made
 * there first, then here and in `#select`.
 */
export function dueSql(query: DueQuery): { text: string; values: unknown[] } {
  const values: unknown[] = [new Date(query.nowMs).toISOString()];
  const cap = `$${values.push(Math.min(query.perMerchant ?? query.limit, query.limit))}`;
  const limit = `$${values.push(query.limit)}`;
  const skip = `$${values.push(query.skipMerchants ?? [])}::text[]`;
  const { claim } = query;
  const owner = claim && `$${values.push(claim.owner)}`;
  const leaseMs = claim && `$${values.push(claim.leaseMs)}`;
  const idleMs = claim && `$${values.push(claim.idleMs ?? 0)}`;
  // `due_at < 'infinity'` as the index predicate says it, so the planner can use it.
  const due = (w: string) =>
    `${w}.due_at < 'infinity' AND ${w}.due_at <= $1::timestamptz${query.canVerify ? '' : ` AND NOT ${w}.due_needs_verifier`}` +
    (claim ? ` AND (${w}.lease_until IS NULL OR ${w}.lease_until < now() OR ${w}.lease_owner = ${owner}) AND ${w}.updated_at < now() - make_interval(secs => ${idleMs}::double precision / 1000) AND ${NOT_IN_FLIGHT_ELSEWHERE(w, owner!, leaseMs!)}` : '');
  const chosen = `
    WITH RECURSIVE merchants AS (
      (SELECT merchant_id FROM ledger_work WHERE due_at < 'infinity' ORDER BY merchant_id LIMIT 1)
      UNION ALL
      SELECT (SELECT o.merchant_id FROM ledger_work o WHERE o.due_at < 'infinity' AND o.merchant_id > m.merchant_id ORDER BY o.merchant_id LIMIT 1)
        FROM merchants m WHERE m.merchant_id IS NOT NULL
    ), chosen AS (
      SELECT t.transaction_id, t.turn, t.due_at, t.created_at
        FROM merchants m
        CROSS JOIN LATERAL (
          SELECT f.*, row_number() OVER (ORDER BY f.due_at, f.created_at, f.transaction_id) AS turn
            FROM (SELECT w.transaction_id, w.due_at, w.created_at FROM ledger_work w
                   WHERE w.merchant_id = m.merchant_id AND ${due('w')}
                   ORDER BY w.due_at, w.created_at, w.transaction_id LIMIT ${cap}) f
        ) t
       WHERE m.merchant_id IS NOT NULL AND m.merchant_id <> ALL (${skip})
       ORDER BY t.turn, t.due_at, t.created_at, t.transaction_id
       LIMIT ${limit}
    )`;
  const order = 'ORDER BY chosen.turn, chosen.due_at, chosen.created_at, chosen.transaction_id';
  const records = (from: string) => `SELECT r.record FROM ${from} CROSS JOIN LATERAL ${RECORD_OF('chosen')} r ${order}`;
  if (!claim) return { text: `${chosen} ${records('chosen')}`, values };
  return {
    text: `${chosen}, claimed AS (
      UPDATE ledger_work w SET lease_owner = ${owner}, lease_until = now() + make_interval(secs => ${leaseMs}::double precision / 1000)
       WHERE w.transaction_id IN (SELECT l.transaction_id FROM ledger_work l WHERE l.transaction_id IN (SELECT transaction_id FROM chosen) AND ${due('l')} FOR UPDATE SKIP LOCKED)
      RETURNING w.transaction_id
    )
    ${records('claimed JOIN chosen USING (transaction_id)')}`,
    values,
  };
}

export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/**
 * Runs `work` in one transaction on one pooled connection: committed when it returns, rolled back
 * when it throws. pg-pool takes its own error listener off a client while the client is checked out,
 * so a connection the server cuts now (a failover, a PgBouncer restart, an idle timeout) would emit
 * an `error` nobody listens to, and that ends the process: the listener here takes it while the
 * client is out. The query under way then fails with the cut, the transaction is rolled back by the
 * server, and the broken connection is discarded instead of going back to the pool.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken ??= error;
  };
  // Taken with a callback, not the promise: the listener must be on before anything more is read
  // from the socket. The server's "terminating connection" can arrive in the same packet as the
  // ready message that handed the client out, and a promise's continuation runs only after the
  // parser has emitted it (seen: a new client cut right after connecting ended the process).
  const client = await new Promise<pg.PoolClient>((resolve, reject) =>
    pool.connect((error, taken) => {
      if (error || !taken) return reject(error ?? new Error('the pool handed out no connection'));
      taken.on('error', onError);
      resolve(taken);
    }),
  );
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackFailed: Error) => {
      // A ROLLBACK that cannot be sent means the connection is gone: never hand it out again.
      broken ??= rollbackFailed;
    });
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

export function migrate(pool: pg.Pool, schema?: string): Promise<number[]> {
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    if (schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query('CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await client.query<{ version: number }>('SELECT version FROM ledger_schema_migrations')).rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await m.backfill?.(client);
      await client.query('INSERT INTO ledger_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    const newest = Math.max(0, ...done);
    if (newest > MIGRATIONS.at(-1)!.version) throw new Error(`the database's ledger schema is at version ${newest}; this build knows up to ${MIGRATIONS.at(-1)!.version}`);
    return applied;
  });
}

export class PostgresLedgerStore implements LedgerStore {
  readonly kind = 'postgres';
  readonly sharedByInstances = true;
  readonly pool: pg.Pool;
  readonly #schema?: string;
  #partitionTimer?: NodeJS.Timeout;
  readonly #inserts = new WriteBatch<InsertWrite, InsertOutcome>(
    async (writes) => (await this.pool.query<InsertOutcome>('SELECT created, stored, code, message, detail FROM ledger_insert_batch($1)', [jsonb(writes)])).rows,
    (write) => this.#insertOne(write),
  );
  readonly #updates = this.#updateBatch(true);
  /** Writes whose loss in a database crash is re-verified (store.ts UpdateOptions): committed without waiting for the WAL flush, in batches of their own. */
  readonly #asyncUpdates = this.#updateBatch(false);

  #updateBatch(synchronous: boolean): WriteBatch<UpdateWrite, UpdateOutcome> {
    return new WriteBatch<UpdateWrite, UpdateOutcome>(
      async (writes) => (await this.pool.query<UpdateOutcome>('SELECT ok, code, message, detail FROM ledger_update_batch($1, $2)', [jsonb(writes), synchronous])).rows,
      (write) => this.#updateOne(write, synchronous),
    );
  }

  /** Writes sent in batches and alone so far (the benchmark prints them). */
  get batchStats(): Record<'inserts' | 'updates' | 'asyncUpdates', WriteBatch<unknown, unknown>['stats']> {
    return { inserts: this.#inserts.stats, updates: this.#updates.stats, asyncUpdates: this.#asyncUpdates.stats };
  }

  constructor(url: string, options: { poolSize?: number } = {}) {
    const { connectionString, schema } = parsePgUrl(url);
    this.#schema = schema;
    this.pool = new pg.Pool({
      connectionString,
      max: options.poolSize ?? 10,
      // An address that drops packets silently (a failover moving it) is not waited on for ever:
      // the connect fails, the request that needed it answers 503 or 202, and the next one tries again.
      connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
      keepAlive: true,
      // What an operator sees in pg_stat_activity, unless LEDGER_URL names its own application_name.
      fallback_application_name: 'loyalty-bridge',
      ...(schema ? { options: `-c search_path=${schema}` } : {}),
    });
    // An idle client that loses its connection must not crash the process; the next query reconnects.
    // (A checked-out one is guarded by whoever holds it: pool.query does, and so does inTransaction.)
    this.pool.on('error', () => undefined);
  }

  /** The ledger's customer search key (migration 11 makes it; customer-index.ts). */
  #searchKey?: string;

  get #key(): string {
    if (!this.#searchKey) throw new Error('the PostgreSQL ledger is used before init()');
    return this.#searchKey;
  }

  keyFor(purpose: string): Buffer {
    return derivedKey(this.#key, purpose);
  }

  /** The migrations the last `init` applied (none: the schema was up to date). */
  migrationsApplied: number[] = [];

  /** Brings the schema up to date, makes the months' partitions, loads the search key. */
  async init(): Promise<void> {
    this.migrationsApplied = await migrate(this.pool, this.#schema);
    this.#searchKey = (await this.pool.query<{ value: string }>('SELECT value FROM ledger_settings WHERE name = $1', [CUSTOMER_SEARCH_KEY])).rows[0]?.value;
    if (!this.#searchKey) throw new Error(`the ledger has no ${CUSTOMER_SEARCH_KEY} in ledger_settings (migration 11 makes it): it was deleted; customers could no longer be found`);
    await inTransaction(this.pool, async (client) => {
      // The month partitions from last month to a year ahead (each start-up makes what is missing;
      // the default partition takes anything beyond), under the migration lock: instances starting
      // at once make each partition once.
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query(ENSURE_PARTITIONS);
    });
    // And every day after: a bridge that runs for months never writes to a month with no partition.
    this.#partitionTimer = setInterval(() => void this.pool.query(ENSURE_PARTITIONS).catch(() => undefined), 24 * 3600 * 1000);
    this.#partitionTimer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.#partitionTimer);
    await this.pool.end();
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  /**
   * `transaction_id` holds the ledger key (`keyOf`), and `merchant_id` whose it is. A key is found in
   * ledger_keys, which says in which month's partition its record is (one probe there).
   */
  async get(key: string): Promise<LedgerRecord | undefined> {
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `SELECT r.record FROM ledger_keys k CROSS JOIN LATERAL ${RECORD_OF('k')} r WHERE k.transaction_id = $1`,
      [key],
    );
    return rows[0]?.record;
  }

  /**
   * One statement (`ledger_insert`): the key, the record, its work row, claims, accrual keys and
   * attention entries, committed together; with other checkouts' inserts when they come at once
   * (pg-batch.ts).
   */
  async insert(record: LedgerRecord, options: InsertOptions = {}): Promise<{ record: LedgerRecord; created: boolean }> {
    if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version}`);
    const outcome = await this.#inserts.add(insertWrite(record, this.#key, options.payload));
    if (outcome.code) throw refusal(outcome, record);
    if (outcome.created) return { record, created: true };
    if (!outcome.stored) throw new ArchivedRecordError(record.transactionId);
    return { record: outcome.stored, created: false };
  }

  /** Through the record's key, which names the month its payload's partition holds. */
  async getPayload(key: string): Promise<KeptPayload | undefined> {
    const { rows } = await this.pool.query<{ payload: KeptPayload }>(
      'SELECT p.payload FROM ledger_keys k JOIN ledger_payloads p ON p.created_at = k.created_at AND p.transaction_id = k.transaction_id WHERE k.transaction_id = $1',
      [key],
    );
    return rows[0]?.payload;
  }

  /** An insert as its own statement; a record of a month no partition holds yet makes that month first. */
  async #insertOne(w: InsertWrite): Promise<InsertOutcome> {
    const insert = () =>
      this.pool.query<InsertOutcome>('SELECT created, stored FROM ledger_insert($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)', [
        w.id,
        w.merchant,
        w.pos,
        w.orderId,
        w.status,
        w.open,
        w.createdAt,
        w.updatedAt,
        jsonb(w.record),
        w.dueAt,
        w.needsVerifier,
        w.keys,
        w.unsettled,
        w.ops,
        w.refundIds.length ? w.refundIds : null,
        JSON.stringify(w.attention),
        w.customers,
        w.payload ? jsonb(w.payload) : null,
      ]);
    try {
      return (
        await insert().catch(async (error: unknown) => {
          // No partition holds the record's month (one created months back or ahead, or the daily
          // ensure has not run): the statement wrote nothing; the month is made, and it runs once more.
          if ((error as { code?: string }).code !== '23514' || !/no partition/.test((error as Error).message)) throw error;
          await this.pool.query("SELECT ledger_ensure_partitions($1, $1::timestamptz + interval '1 millisecond')", [w.createdAt]);
          return insert();
        })
      ).rows[0]!;
    } catch (error) {
      return refusedAs(error);
    }
  }

  /**
   * One statement (`ledger_update`): the compare-and-set, work row, claims, keys and attention
   * entries together; with other records' updates of the same kind when they come at once.
   */
  async update(next: LedgerRecord, options: UpdateOptions = {}): Promise<LedgerRecord> {
    const write = updateWrite(next);
    const outcome = await (options.synchronous === false ? this.#asyncUpdates : this.#updates).add(write);
    if (outcome.code) throw refusal(outcome, next);
    if (outcome.ok) return next;
    const current = await this.get(keyOf(next));
    throw new VersionConflictError(keyOf(next), next.version - 1, current?.version);
  }

  async #updateOne(w: UpdateWrite, synchronous: boolean): Promise<UpdateOutcome> {
    try {
      const { rows } = await this.pool.query<{ ok: boolean }>('SELECT ledger_update($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) AS ok', [
        w.id,
        w.createdAt,
        w.expected,
        w.status,
        w.open,
        w.updatedAt,
        jsonb(w.record),
        w.ops,
        w.dueAt,
        w.needsVerifier,
        w.keys,
        w.unsettled,
        w.merchant,
        w.refundIds.length ? w.refundIds : null,
        JSON.stringify(w.attention),
        synchronous,
      ]);
      return { ok: rows[0]!.ok };
    } catch (error) {
      return refusedAs(error);
    }
  }

  /**
   * Newest first, by keyset or offset. The total counts at most LIST_COUNT_CAP + 1 matches (a
   * `LIMIT` under the count): a filter matching millions costs what the cap allows, not what it
   * matches. By order id, through ledger_keys (the few records of that order, wherever they are).
   */
  async list(query: ListQuery): Promise<Page<LedgerRecord>> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.merchantId) where.push(`r.merchant_id = $${params.push(query.merchantId)}`);
    const statuses = statusesOf(query);
    if (statuses) where.push(`r.status = ANY ($${params.push([...statuses])}::text[])`);
    if (query.pos) where.push(`r.pos = $${params.push(query.pos)}`);
    await this.#refuseWidePrefixes(query);
    if (query.orderId) {
      // By prefix, A-Z folded, through ledger_keys' index of the folded order id (migration 11); the
      // key's creation time leads the join to the record's partition and primary key.
      where.push(`(r.created_at, r.transaction_id) IN (SELECT k.created_at, k.transaction_id FROM ledger_keys k WHERE ${FOLD_CASE_SQL('k.order_id')} LIKE $${params.push(likePrefix(query.orderId))})`);
    }
    if (query.refundId) {
      where.push(`(r.created_at, r.transaction_id) IN (SELECT f.created_at, f.transaction_id FROM ledger_refund_ids f WHERE f.refund_id LIKE $${params.push(likePrefix(query.refundId))})`);
    }
    if (query.customer) {
      // Each identifier's newest CUSTOMER_SEARCH_DEPTH, through ledger_customers_newest: what the customer holds beyond is not read.
      const hashes = query.customer.map((identity) => customerHash(this.#key, identity));
      where.push(
        `(r.created_at, r.transaction_id) IN (SELECT c.created_at, c.transaction_id FROM unnest($${params.push(hashes)}::text[]) h (hash)
           CROSS JOIN LATERAL (SELECT n.created_at, n.transaction_id FROM ledger_customers n WHERE n.hash = h.hash ORDER BY n.created_at DESC, n.transaction_id DESC LIMIT ${CUSTOMER_SEARCH_DEPTH}) c)`,
      );
    }
    if (query.from) where.push(`r.created_at >= $${params.push(query.from)}`);
    if (query.to) where.push(`r.created_at <= $${params.push(query.to)}`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const counted = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ledger_records r ${filter} LIMIT ${LIST_COUNT_CAP + 1}) m`, params)).rows[0]!.n);
    const after = query.after ? [`(r.created_at, r.transaction_id) < ($${params.push(query.after.createdAt)}::timestamptz, $${params.push(query.after.key)}::text)`] : [];
    const pageWhere = [...where, ...after];
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `SELECT r.record FROM ledger_records r ${pageWhere.length ? `WHERE ${pageWhere.join(' AND ')}` : ''} ORDER BY r.created_at DESC, r.transaction_id DESC LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`,
      params,
    );
    return pageOf(
      rows.map((r) => r.record),
      counted,
    );
  }

  /** Through ledger_attention (migration 10), oldest first; each entry with its record, the attempt log left in the database. */
  /** An order or refund id prefix matching more than PREFIX_MATCH_CAP keys is refused: counted in its index, stopping past the cap. */
  async #refuseWidePrefixes(query: ListQuery): Promise<void> {
    const searches = [
      ['orderId', query.orderId, `SELECT 1 FROM ledger_keys k WHERE ${FOLD_CASE_SQL('k.order_id')} LIKE $1`],
      ['refundId', query.refundId, 'SELECT 1 FROM ledger_refund_ids f WHERE f.refund_id LIKE $1'],
    ] as const;
    for (const [field, prefix, matches] of searches) {
      if (!prefix) continue;
      const { rows } = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM (${matches} LIMIT ${PREFIX_MATCH_CAP + 1}) m`, [likePrefix(prefix)]);
      if (Number(rows[0]!.n) > PREFIX_MATCH_CAP) throw tooManyPrefixMatches(field, prefix);
    }
  }

  async listAttention(query: AttentionQuery): Promise<{ entry: AttentionEntry; record: AttentionInput }[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.merchantId) where.push(`a.merchant_id = $${params.push(query.merchantId)}`);
    if (query.after) where.push(`(a.since, a.transaction_id, a.kind) > ($${params.push(query.after.since)}::timestamptz, $${params.push(query.after.key)}::text, $${params.push(query.after.kind)}::text)`);
    const { rows } = await this.pool.query<{ transaction_id: string; kind: AttentionKind; merchant_id: string; since: Date; record: AttentionInput }>(
      `SELECT a.transaction_id, a.kind, a.merchant_id, a.since, r.record - 'attempts' AS record
         FROM ledger_attention a CROSS JOIN LATERAL ${RECORD_OF('a')} r
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY a.since, a.transaction_id, a.kind LIMIT $${params.push(query.limit)}`,
      params,
    );
    return rows.map((r) => ({ entry: { key: r.transaction_id, merchantId: r.merchant_id, kind: r.kind, since: r.since.toISOString() }, record: r.record }));
  }

  /** Counted in ledger_attention alone: what needs a person, never the records. */
  async countAttention(merchantId?: string): Promise<AttentionCounts> {
    const params = merchantId ? [merchantId] : [];
    const filter = merchantId ? 'WHERE merchant_id = $1' : '';
    const { rows } = await this.pool.query<{ kind: AttentionKind; merchant_id: string; n: string; oldest: Date }>(
      `SELECT kind, merchant_id, count(*) AS n, min(since) AS oldest FROM ledger_attention ${filter} GROUP BY kind, merchant_id`,
      params,
    );
    return attentionCountsOf(rows.map((r) => ({ kind: r.kind, merchantId: r.merchant_id, count: Number(r.n), oldestSince: r.oldest.toISOString() })));
  }

  async appendAudit(entry: AuditEntry): Promise<void> {
    await this.pool.query('INSERT INTO ledger_audit (at, actor, merchant_id, entry) VALUES ($1, $2, $3, $4)', [entry.at, entry.actor, entry.merchantId ?? null, jsonb(entry)]);
  }

  async listAudit(query: AuditQuery): Promise<Page<AuditEntry>> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.merchantId) where.push(`merchant_id = $${params.push(query.merchantId)}`);
    // The actor filter matches a prefix (`merchant:` finds every merchant's token), its LIKE wildcards taken literally.
    if (query.actor) where.push(`actor LIKE $${params.push(`${likeLiteral(safeText(query.actor))}%`)}`);
    if (query.from) where.push(`at >= $${params.push(query.from)}`);
    if (query.to) where.push(`at <= $${params.push(query.to)}`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const counted = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ledger_audit ${filter} LIMIT ${LIST_COUNT_CAP + 1}) m`, params)).rows[0]!.n);
    const { rows } = await this.pool.query<{ entry: AuditEntry }>(
      `SELECT entry FROM ledger_audit ${filter} ORDER BY at DESC, id DESC LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`,
      params,
    );
    return pageOf(
      rows.map((r) => r.entry),
      counted,
    );
  }

  /**
   * Bulk import (`npm run ledger:copy`): stores records as they are, with their own versions, which
   * insert/update would refuse. A record is written when absent or when the stored version is older,
   * and skipped otherwise, so a re-run resumes. Each batch of IMPORT_BATCH is one transaction with
   * its key, work row, operation claims, accrual keys and attention entries; a claim another
   * transaction holds fails that batch with ConflictError.
   */
  async importRecords(records: LedgerRecord[]): Promise<{ imported: number; skipped: number }> {
    let imported = 0;
    for (let i = 0; i < records.length; i += IMPORT_BATCH) {
      // One statement may not touch a row twice: within a batch only the newest version of an id goes.
      const newest = new Map<string, LedgerRecord>();
      for (const r of records.slice(i, i + IMPORT_BATCH)) {
        if (!Number.isInteger(r.version) || r.version < 1) throw new Error(`record ${r.transactionId} has version ${String(r.version)}; versions start at 1`);
        const seen = newest.get(keyOf(r));
        if (!seen || seen.version < r.version) newest.set(keyOf(r), r);
      }
      // Their months' partitions first, in a statement of their own (a copy brings records of any
      // age; making a partition locks the table, which a transaction that wrote to it must not wait for).
      const created = [...newest.values()].map((r) => Date.parse(r.createdAt));
      await this.pool.query('SELECT ledger_ensure_partitions($1, $2)', [new Date(Math.min(...created)).toISOString(), new Date(Math.max(...created) + 1).toISOString()]);
      imported += await inTransaction(this.pool, async (client) => {
        // Records already stored at their version or a newer one are not sent again (a re-run after
        // an interruption then reads versions only); the ON CONFLICT condition stays the guard.
        const stored = await client.query<{ transaction_id: string; version: number }>(
          'SELECT r.transaction_id, r.version FROM ledger_keys k JOIN ledger_records r ON r.created_at = k.created_at AND r.transaction_id = k.transaction_id WHERE k.transaction_id = ANY ($1::text[])',
          [[...newest.keys()]],
        );
        for (const row of stored.rows) if (row.version >= newest.get(row.transaction_id)!.version) newest.delete(row.transaction_id);
        const batch = [...newest.values()];
        if (batch.length === 0) return 0;
        await client.query(
          `INSERT INTO ledger_keys (transaction_id, merchant_id, created_at, order_id) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[])
           ON CONFLICT (transaction_id) DO NOTHING`,
          [batch.map((r) => keyOf(r)), batch.map((r) => merchantOf(r)), batch.map((r) => r.createdAt), batch.map((r) => safeText(r.orderId))],
        );
        // A key held already (an earlier copy) must name the same creation time: the record is
        // found in its month's partition by it, and another would make a second row of one id.
        const held = await client.query<{ transaction_id: string; created_at: Date }>('SELECT transaction_id, created_at FROM ledger_keys WHERE transaction_id = ANY ($1::text[])', [batch.map((r) => keyOf(r))]);
        for (const row of held.rows) {
          const r = newest.get(row.transaction_id)!;
          if (row.created_at.getTime() !== Date.parse(r.createdAt)) {
            throw new ConflictError(`record ${r.transactionId} of merchant ${merchantOf(r)} was created at ${row.created_at.toISOString()} in PostgreSQL and at ${r.createdAt} in the copy: one record cannot have two; nothing of this batch was written`);
          }
        }
        const { rows } = await client.query<{ transaction_id: string }>(
          `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, merchant_id, refund_ids, attention)
           SELECT t.transaction_id, t.version, t.pos, t.order_id, t.status, t.open, t.created_at, t.updated_at, t.record, t.merchant_id,
                  CASE WHEN jsonb_array_length(t.refund_ids) > 0 THEN ARRAY(SELECT jsonb_array_elements_text(t.refund_ids)) END,
                  jsonb_array_length(t.attention) > 0
             FROM ROWS FROM (unnest($1::text[]), unnest($2::integer[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]),
                                    unnest($6::boolean[]), unnest($7::timestamptz[]), unnest($8::timestamptz[]), jsonb_array_elements($9::jsonb),
                                    unnest($10::text[]), jsonb_array_elements($11::jsonb), jsonb_array_elements($12::jsonb))
                  AS t (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, merchant_id, refund_ids, attention)
           ON CONFLICT (created_at, transaction_id) DO UPDATE
              SET version = EXCLUDED.version, pos = EXCLUDED.pos, order_id = EXCLUDED.order_id, status = EXCLUDED.status, open = EXCLUDED.open,
                  updated_at = EXCLUDED.updated_at, record = EXCLUDED.record, refund_ids = EXCLUDED.refund_ids, attention = EXCLUDED.attention
            WHERE ledger_records.version < EXCLUDED.version
           RETURNING transaction_id`,
          [
            batch.map((r) => keyOf(r)),
            batch.map((r) => r.version),
            batch.map((r) => r.pos),
            batch.map((r) => safeText(r.orderId)),
            batch.map((r) => r.status),
            batch.map((r) => isOpen(r)),
            batch.map((r) => r.createdAt),
            batch.map((r) => r.updatedAt),
            // The bodies go as one JSON array: a jsonb[] parameter would be an array literal, every quote
            // escaped by pg and parsed twice by the server, 2-3 times slower for records of a few kB.
            jsonb(batch),
            batch.map((r) => merchantOf(r)),
            jsonb(batch.map((r) => r.reversal.refundIds)),
            `[${batch.map((r) => attentionColumn(r)).join(',')}]`,
          ],
        );
        const writtenIds = new Set(rows.map((r) => r.transaction_id));
        const written = batch.filter((r) => writtenIds.has(keyOf(r)));
        if (written.length === 0) return 0;
        const keysOf = written.map((r) => keyOf(r));
        // The search indexes (migration 11): customers by keyed hash, refund ids folded; rows already there stay.
        const customers = written.flatMap((r) => customerHashesOf(r.accrual.customer, this.#key).map((hash) => [hash, keyOf(r), r.createdAt] as const));
        if (customers.length) {
          await client.query('INSERT INTO ledger_customers (hash, transaction_id, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING', [
            customers.map((c) => c[0]),
            customers.map((c) => c[1]),
            customers.map((c) => c[2]),
          ]);
        }
        const refunds = written.flatMap((r) => r.reversal.refundIds.map((id) => [foldCase(safeText(id)), keyOf(r), r.createdAt] as const));
        if (refunds.length) {
          await client.query('INSERT INTO ledger_refund_ids (refund_id, transaction_id, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING', [
            refunds.map((f) => f[0]),
            refunds.map((f) => f[1]),
            refunds.map((f) => f[2]),
          ]);
        }
        // The keys the stored versions held are their work rows' (replaced below).
        await client.query('DELETE FROM ledger_accrual_keys a USING ledger_work w WHERE w.transaction_id = ANY ($1::text[]) AND a.key = ANY (w.accrual_keys) AND a.transaction_id = w.transaction_id', [keysOf]);
        // Work rows: the open records' (their leases start free), none for the settled.
        await client.query('DELETE FROM ledger_work WHERE transaction_id = ANY ($1::text[])', [keysOf]);
        const open = written.filter((r) => isOpen(r));
        if (open.length) {
          const work = open.map((r) => ({ ...dueColumns(r), ...accrualKeyColumns(r) }));
          await client.query(
            `INSERT INTO ledger_work (transaction_id, merchant_id, created_at, updated_at, status, due_at, due_needs_verifier, accrual_keys, unsettled_amount)
             SELECT t.transaction_id, t.merchant_id, t.created_at, t.updated_at, t.status, t.due_at, t.due_needs_verifier, ARRAY(SELECT jsonb_array_elements_text(t.keys)), t.unsettled_amount
               FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), unnest($3::timestamptz[]), unnest($4::timestamptz[]), unnest($5::text[]), unnest($6::timestamptz[]),
                               unnest($7::boolean[]), jsonb_array_elements($8::jsonb), unnest($9::bigint[]))
                    AS t (transaction_id, merchant_id, created_at, updated_at, status, due_at, due_needs_verifier, keys, unsettled_amount)`,
            [
              open.map((r) => keyOf(r)),
              open.map((r) => merchantOf(r)),
              open.map((r) => r.createdAt),
              open.map((r) => r.updatedAt),
              open.map((r) => r.status),
              work.map((w) => w.dueAt),
              work.map((w) => w.needsVerifier),
              JSON.stringify(work.map((w) => w.keys)),
              work.map((w) => w.unsettledAmount),
            ],
          );
        }
        // Accrual keys as the records list them. A key two imported records list (a ledger from
        // before keys) stays with the first; neither is refused later for a key it lists.
        const keyHolders = open.flatMap((r) => accrualKeyColumns(r).keys.map((key) => [key, keyOf(r)] as const));
        if (keyHolders.length) {
          await client.query('INSERT INTO ledger_accrual_keys (key, transaction_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (key) DO NOTHING', [keyHolders.map((k) => k[0]), keyHolders.map((k) => k[1])]);
        }
        // The attention index as the written versions say, as the write functions keep it.
        const entries = written.flatMap((r) => attentionEntriesOf(r).map((e) => ({ ...e, createdAt: r.createdAt })));
        await client.query('DELETE FROM ledger_attention WHERE transaction_id = ANY ($1::text[])', [keysOf]);
        if (entries.length) {
          await client.query('INSERT INTO ledger_attention (transaction_id, kind, merchant_id, since, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])', [
            entries.map((e) => e.key),
            entries.map((e) => e.kind),
            entries.map((e) => e.merchantId),
            entries.map((e) => e.since),
            entries.map((e) => e.createdAt),
          ]);
        }
        const claimIds: string[] = [];
        const claimMerchants: string[] = [];
        const claimOps: number[] = [];
        for (const r of written) {
          for (const op of claimedOperationIds(r)) {
            claimIds.push(keyOf(r));
            claimMerchants.push(merchantOf(r));
            claimOps.push(op);
          }
        }
        // A replaced record gives up the claims its new version no longer lists, as ledger_update does.
        await client.query(
          `DELETE FROM ledger_operation_claims c
            WHERE c.transaction_id = ANY ($1::text[])
              AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::bigint[]) AS k (transaction_id, operation_id)
                               WHERE k.transaction_id = c.transaction_id AND k.operation_id = c.operation_id)`,
          [keysOf, claimIds, claimOps],
        );
        if (claimOps.length) {
          await client.query(
            `INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id)
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) ON CONFLICT (merchant_id, operation_id) DO NOTHING`,
            [claimMerchants, claimOps, claimIds],
          );
          const taken = await client.query<{ operation_id: string; wanted: string; holder: string }>(
            `SELECT k.operation_id, k.transaction_id AS wanted, c.transaction_id AS holder
               FROM unnest($1::text[], $2::bigint[], $3::text[]) AS k (merchant_id, operation_id, transaction_id)
               JOIN ledger_operation_claims c ON c.merchant_id = k.merchant_id AND c.operation_id = k.operation_id
              WHERE c.transaction_id <> k.transaction_id
              LIMIT 1`,
            [claimMerchants, claimOps, claimIds],
          );
          const clash = taken.rows[0];
          if (clash) throw new ConflictError(`operation ${clash.operation_id} is claimed by ${clash.holder}; ${clash.wanted} claims it too`);
        }
        return written.length;
      });
    }
    return { imported, skipped: records.length - imported };
  }

  /** Through the work table (migration 10), or (`dueOnly`) its index of the open records the bridge moves by itself. */
  async listOpen(query: OpenQuery): Promise<LedgerRecord[]> {
    const params: unknown[] = [];
    let where = query.dueOnly ? "w.due_at < 'infinity'" : 'true';
    if (query.after) where += ` AND (w.created_at, w.transaction_id) > ($${params.push(query.after.createdAt)}::timestamptz, $${params.push(keyOf(query.after))}::text)`;
    if (query.merchantId) where += ` AND w.merchant_id = $${params.push(query.merchantId)}`;
    return this.#select(where, params, query.limit, query.claim);
  }

  /**
   * One statement (`dueSql`); with a claim, in a transaction that first takes CLAIM_LOCK, so that
   * instances claim one after another: each one's turns are taken among the records the others have
   * not leased, and two claiming at once get disjoint batches, neither of them cut short.
   */
  async listDue(query: DueQuery): Promise<LedgerRecord[]> {
    const { text, values } = dueSql(query);
    if (!query.claim) return (await this.pool.query<{ record: LedgerRecord }>(text, values)).rows.map((r) => r.record);
    return inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [CLAIM_LOCK]);
      return (await client.query<{ record: LedgerRecord }>(text, values)).rows.map((r) => r.record);
    });
  }

  /** Work rows `w` matching `where` (over `params`), oldest first, at most `limit`, with their records; with `claim`, leased to its owner. */
  async #select(where: string, params: unknown[], limit: number, claim: OpenClaim | undefined): Promise<LedgerRecord[]> {
    const join = `CROSS JOIN LATERAL ${RECORD_OF('w')} r`;
    const order = 'ORDER BY w.created_at, w.transaction_id';
    if (!claim) {
      const { rows } = await this.pool.query<{ record: LedgerRecord }>(`SELECT r.record FROM ledger_work w ${join} WHERE ${where} ${order} LIMIT $${params.push(limit)}`, params);
      return rows.map((r) => r.record);
    }
    // Each instance's worker takes a disjoint batch: rows another instance holds a live lease on,
    // or is claiming right now (locked), are skipped. The lease test is src/kernel/lease.ts' rule in SQL
    // (see `dueSql`).
    const owner = `$${params.push(claim.owner)}`;
    const leaseMs = `$${params.push(claim.leaseMs)}`;
    const idleMs = `$${params.push(claim.idleMs ?? 0)}`;
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `WITH claimed AS (
         UPDATE ledger_work c SET lease_owner = ${owner}, lease_until = now() + make_interval(secs => ${leaseMs}::double precision / 1000)
          WHERE c.transaction_id IN (
            SELECT w.transaction_id FROM ledger_work w
             WHERE ${where} AND (w.lease_until IS NULL OR w.lease_until < now() OR w.lease_owner = ${owner})
               AND w.updated_at < now() - make_interval(secs => ${idleMs}::double precision / 1000)
               AND ${NOT_IN_FLIGHT_ELSEWHERE('w', owner, leaseMs)}
             ${order} LIMIT $${params.push(limit)} FOR UPDATE SKIP LOCKED)
         RETURNING c.*)
       SELECT r.record FROM claimed w ${join} ${order}`,
      params,
    );
    return rows.map((r) => r.record);
  }

  async countOpen(): Promise<number> {
    return Number((await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM ledger_work')).rows[0]!.n);
  }

  /** In the work table: costs what is open. */
  async countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>> {
    const { rows } = await this.pool.query<{ status: LedgerStatus; n: string }>('SELECT status, count(*) AS n FROM ledger_work GROUP BY status');
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  async countOpenDeadLetters(): Promise<DeadLetterCounts> {
    const { rows } = await this.pool.query<{ code: string; merchant: string; n: string }>(
      `SELECT coalesce(letter ->> 'reasonCode', $1) AS code, coalesce(merchant_id, '') AS merchant, count(*) AS n FROM ledger_dead_letters WHERE NOT resolved GROUP BY 1, 2`,
      [UNCLASSIFIED],
    );
    const counts: DeadLetterCounts = { byReason: {}, byMerchant: {} };
    for (const r of rows) {
      counts.byReason[r.code] = (counts.byReason[r.code] ?? 0) + Number(r.n);
      counts.byMerchant[r.merchant] = (counts.byMerchant[r.merchant] ?? 0) + Number(r.n);
    }
    return counts;
  }

  async listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]> {
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `SELECT record FROM (
         SELECT r.record, w.created_at, w.transaction_id FROM ledger_work w CROSS JOIN LATERAL ${RECORD_OF('w')} r WHERE w.merchant_id = $1 AND w.unsettled_amount = $2
         UNION
         -- Settled by a person without naming the operation (record.ts unsettledAmount, personSettledAt): the partial index of migration 13.
         SELECT p.record, p.created_at, p.transaction_id FROM ledger_records p
          WHERE p.merchant_id = $1 AND (p.record -> 'accrual') ? 'personSettledAt' AND (p.record #>> '{accrual,check,amount}')::bigint = $2
       ) u ORDER BY created_at, transaction_id`,
      [merchantId, amountCents],
    );
    return rows.map((r) => r.record);
  }

  async findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ transaction_id: string }>('SELECT transaction_id FROM ledger_operation_claims WHERE merchant_id = $1 AND operation_id = $2', [merchantId, operationId]);
    const key = rows[0]?.transaction_id;
    return key === undefined ? undefined : transactionIdOf(key);
  }

  /** Every record ever written, archived ones included (their keys stay): for operators' tools, it costs what the ledger holds. */
  async count(): Promise<number> {
    return Number((await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM ledger_keys')).rows[0]!.n);
  }

  async saveMerchant(merchant: StoredMerchant): Promise<StoredMerchant> {
    try {
      await inTransaction(this.pool, async (client) => {
        if (merchant.version === 1) {
          const inserted = await client.query(
            'INSERT INTO ledger_merchants (id, version, merchant, pos_token, admin_token, created_at) VALUES ($1, 1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING',
            [merchant.id, jsonb(merchant), merchant.tokens.pos, merchant.tokens.admin, merchant.createdAt],
          );
          if (!inserted.rowCount) throw new ConflictError(`merchant ${merchant.id} exists`);
        } else {
          const updated = await client.query('UPDATE ledger_merchants SET version = $2, merchant = $3, pos_token = $4, admin_token = $5 WHERE id = $1 AND version = $2 - 1', [
            merchant.id,
            merchant.version,
            jsonb(merchant),
            merchant.tokens.pos,
            merchant.tokens.admin,
          ]);
          if (!updated.rowCount) {
            const current = await client.query<{ version: number }>('SELECT version FROM ledger_merchants WHERE id = $1', [merchant.id]);
            throw new VersionConflictError(`merchant ${merchant.id}`, merchant.version - 1, current.rows[0]?.version);
          }
          await client.query('DELETE FROM ledger_merchant_accounts WHERE merchant_id = $1', [merchant.id]);
        }
        for (const account of accountKeysOf(merchant)) {
          const held = await client.query('INSERT INTO ledger_merchant_accounts (account, merchant_id) VALUES ($1, $2) ON CONFLICT (account) DO NOTHING', [account, merchant.id]);
          if (!held.rowCount) {
            const holder = await client.query<{ merchant_id: string }>('SELECT merchant_id FROM ledger_merchant_accounts WHERE account = $1', [account]);
            throw new ConflictError(`POS account ${account} belongs to merchant ${holder.rows[0]?.merchant_id}`);
          }
        }
      });
    } catch (error) {
      // A token hash already in use: unique_violation on pos_token or admin_token.
      if ((error as { code?: string }).code === '23505') throw new ConflictError('token already in use');
      throw error;
    }
    return merchant;
  }

  /**
   * `npm run ledger:copy`: stores a merchant as it is in another ledger, at its own version (its
   * sealed secrets and token hashes as they are). Skipped, and false answered, when this ledger holds
   * it at the same or a newer version. ConflictError, nothing written, when another merchant holds
   * one of its POS accounts or token hashes here.
   */
  async importMerchant(merchant: StoredMerchant): Promise<boolean> {
    try {
      return await inTransaction(this.pool, async (client) => {
        const stored = await client.query<{ version: number }>('SELECT version FROM ledger_merchants WHERE id = $1 FOR UPDATE', [merchant.id]);
        if (stored.rows[0] && stored.rows[0].version >= merchant.version) return false;
        await client.query(
          `INSERT INTO ledger_merchants (id, version, merchant, pos_token, admin_token, created_at) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, merchant = EXCLUDED.merchant, pos_token = EXCLUDED.pos_token, admin_token = EXCLUDED.admin_token, created_at = EXCLUDED.created_at`,
          [merchant.id, merchant.version, jsonb(merchant), merchant.tokens.pos, merchant.tokens.admin, merchant.createdAt],
        );
        await client.query('DELETE FROM ledger_merchant_accounts WHERE merchant_id = $1', [merchant.id]);
        for (const account of accountKeysOf(merchant)) {
          const held = await client.query('INSERT INTO ledger_merchant_accounts (account, merchant_id) VALUES ($1, $2) ON CONFLICT (account) DO NOTHING', [account, merchant.id]);
          if (!held.rowCount) {
            const holder = await client.query<{ merchant_id: string }>('SELECT merchant_id FROM ledger_merchant_accounts WHERE account = $1', [account]);
            throw new ConflictError(`merchant ${merchant.id}: POS account ${account} belongs to merchant ${holder.rows[0]?.merchant_id} here`);
          }
        }
        return true;
      });
    } catch (error) {
      if ((error as { code?: string }).code === '23505') throw new ConflictError(`merchant ${merchant.id}: one of its tokens is another merchant's here`);
      throw error;
    }
  }

  async getMerchant(id: string): Promise<StoredMerchant | undefined> {
    return (await this.pool.query<{ merchant: StoredMerchant }>('SELECT merchant FROM ledger_merchants WHERE id = $1', [id])).rows[0]?.merchant;
  }

  async listMerchants(query: { offset: number; limit: number }): Promise<{ items: StoredMerchant[]; total: number }> {
    const total = Number((await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM ledger_merchants')).rows[0]!.n);
    const { rows } = await this.pool.query<{ merchant: StoredMerchant }>('SELECT merchant FROM ledger_merchants ORDER BY created_at, id LIMIT $1 OFFSET $2', [query.limit, query.offset]);
    return { items: rows.map((r) => r.merchant), total };
  }

  async findMerchantByToken(kind: 'pos' | 'admin', hash: string): Promise<StoredMerchant | undefined> {
    const column = kind === 'pos' ? 'pos_token' : 'admin_token';
    return (await this.pool.query<{ merchant: StoredMerchant }>(`SELECT merchant FROM ledger_merchants WHERE ${column} = $1`, [hash])).rows[0]?.merchant;
  }

  async findMerchantByAccount(accountKey: string): Promise<StoredMerchant | undefined> {
    const { rows } = await this.pool.query<{ merchant: StoredMerchant }>('SELECT m.merchant FROM ledger_merchant_accounts a JOIN ledger_merchants m ON m.id = a.merchant_id WHERE a.account = $1', [accountKey]);
    return rows[0]?.merchant;
  }

  async rememberWebhookEvent(pos: string, key: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('INSERT INTO ledger_webhook_events (pos, key) VALUES ($1, $2) ON CONFLICT DO NOTHING', [pos, key]);
    return rowCount === 1;
  }

  async hasWebhookEvent(pos: string, key: string): Promise<boolean> {
    return (await this.pool.query('SELECT 1 FROM ledger_webhook_events WHERE pos = $1 AND key = $2', [pos, key])).rowCount === 1;
  }

  async deliveryBinding(pos: string, key: string): Promise<string | undefined> {
    return (await this.pool.query<{ account: string }>('SELECT account FROM ledger_delivery_bindings WHERE pos = $1 AND key = $2', [pos, key])).rows[0]?.account;
  }

  async bindDelivery(pos: string, key: string, account: string): Promise<string> {
    // The row this call inserts, or the one an earlier call (any instance's) inserted. A row another
    // transaction committed while this statement ran is not in its snapshot: read again then.
    for (;;) {
      const { rows } = await this.pool.query<{ account: string }>(
        `WITH bound AS (INSERT INTO ledger_delivery_bindings (pos, key, account) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING account)
         SELECT account FROM bound UNION ALL SELECT account FROM ledger_delivery_bindings WHERE pos = $1 AND key = $2 LIMIT 1`,
        [pos, key, account],
      );
      if (rows[0]) return rows[0].account;
    }
  }

  async saveDeadLetter(letter: DeadLetter): Promise<void> {
    await this.#saveDeadLetter(letter, this.pool);
  }

  async #saveDeadLetter(letter: DeadLetter, client: pg.Pool | pg.PoolClient): Promise<void> {
    const dueAt = deadLetterDueAtMs(letter);
    await client.query(
      `INSERT INTO ledger_dead_letters (id, pos, received_at, resolved, letter, merchant_id, due_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (id) DO UPDATE SET resolved = EXCLUDED.resolved, letter = EXCLUDED.letter, merchant_id = EXCLUDED.merchant_id, due_at = EXCLUDED.due_at`,
      [letter.id, letter.pos, letter.receivedAt, Boolean(letter.resolvedAt), jsonb(letter), letter.merchantId ?? null, dueAt === undefined ? null : new Date(dueAt).toISOString()],
    );
  }

  async updateDeadLetter(id: string, change: (current: DeadLetter | undefined) => DeadLetter | undefined): Promise<DeadLetter | undefined> {
    return inTransaction(this.pool, async (client) => {
      // A transaction-scoped advisory lock on the id, not FOR UPDATE: it also holds for a letter
      // not written yet, so two instances keeping the same delivery at once count it twice, not once.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [DEAD_LETTER_LOCK, id]);
      const current = (await client.query<{ letter: DeadLetter }>('SELECT letter FROM ledger_dead_letters WHERE id = $1', [id])).rows[0]?.letter;
      const next = change(current);
      if (!next) return current;
      const stored = { ...next, id };
      await this.#saveDeadLetter(stored, client);
      return JSON.parse(jsonb(stored)) as DeadLetter;
    });
  }

  /** In ledger_settings (migration 11), beside the customer search key. */
  async getSetting(name: string): Promise<string | undefined> {
    return (await this.pool.query<{ value: string }>('SELECT value FROM ledger_settings WHERE name = $1', [name])).rows[0]?.value;
  }

  async putSetting(name: string, value: string): Promise<void> {
    await this.pool.query('INSERT INTO ledger_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value', [name, value]);
  }

  async getBackfillState(merchantId: string, pos: string): Promise<BackfillState | undefined> {
    const { rows } = await this.pool.query<{ state: BackfillState }>('SELECT state FROM ledger_backfill WHERE merchant_id = $1 AND pos = $2', [merchantId, pos]);
    return rows[0]?.state;
  }

  async updateBackfillState(merchantId: string, pos: string, change: (current: BackfillState | undefined) => BackfillState | undefined): Promise<BackfillState | undefined> {
    return inTransaction(this.pool, async (client) => {
      // As for dead letters: the lock holds for a state not written yet too, so two instances
      // taking the first lease of an account at once are one after the other, and one gets it.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [BACKFILL_LOCK, backfillKey(merchantId, pos)]);
      const current = (await client.query<{ state: BackfillState }>('SELECT state FROM ledger_backfill WHERE merchant_id = $1 AND pos = $2', [merchantId, pos])).rows[0]?.state;
      const next = change(current);
      if (!next) return current;
      const stored = { ...next, merchantId, pos };
      await client.query('INSERT INTO ledger_backfill (merchant_id, pos, state) VALUES ($1, $2, $3) ON CONFLICT (merchant_id, pos) DO UPDATE SET state = EXCLUDED.state', [merchantId, pos, jsonb(stored)]);
      return JSON.parse(jsonb(stored)) as BackfillState;
    });
  }

  async listBackfillStates(merchantId?: string): Promise<BackfillState[]> {
    const { rows } = merchantId
      ? await this.pool.query<{ state: BackfillState }>('SELECT state FROM ledger_backfill WHERE merchant_id = $1 ORDER BY merchant_id, pos', [merchantId])
      : await this.pool.query<{ state: BackfillState }>('SELECT state FROM ledger_backfill ORDER BY merchant_id, pos');
    return rows.map((r) => r.state);
  }

  async listDueDeadLetters(query: { nowMs: number; limit: number }): Promise<DeadLetter[]> {
    const { rows } = await this.pool.query<{ letter: DeadLetter }>('SELECT letter FROM ledger_dead_letters WHERE NOT resolved AND due_at <= $1 ORDER BY due_at, id LIMIT $2', [
      new Date(query.nowMs).toISOString(),
      query.limit,
    ]);
    return rows.map((r) => r.letter);
  }

  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return (await this.pool.query<{ letter: DeadLetter }>('SELECT letter FROM ledger_dead_letters WHERE id = $1', [id])).rows[0]?.letter;
  }

  async listDeadLetters(query: DeadLetterQuery): Promise<Page<DeadLetter>> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.pos) where.push(`pos = $${params.push(query.pos)}`);
    if (query.merchantId) where.push(`merchant_id = $${params.push(query.merchantId)}`);
    // Written out, not a parameter: `NOT resolved` is the open letters' index predicate (migration 10).
    if (query.open !== undefined) where.push(query.open ? 'NOT resolved' : 'resolved');
    if (query.awaiting) where.push(`NOT resolved AND due_at IS ${query.awaiting === 'bridge' ? 'NOT ' : ''}NULL`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const counted = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ledger_dead_letters ${filter} LIMIT ${LIST_COUNT_CAP + 1}) m`, params)).rows[0]!.n);
    const order = query.oldestFirst ? 'received_at, id' : 'received_at DESC, id DESC';
    const { rows } = await this.pool.query<{ letter: DeadLetter }>(`SELECT letter FROM ledger_dead_letters ${filter} ORDER BY ${order} LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`, params);
    return pageOf(
      rows.map((r) => r.letter),
      counted,
    );
  }
}
