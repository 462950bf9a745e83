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
import { AccrualKeyHeldError, ConflictError, VersionConflictError } from '../errors.js';
import { accrualKeyColumns, ATTENTION_PREDICATE, dueColumns, fillDueTimes, MIGRATIONS, REFUNDED_PREDICATE } from './pg-migrations.js';
import { accountKeysOf, type StoredMerchant } from '../merchants/merchant.js';
import { DEFAULT_MERCHANT, isOpen, keyOf, merchantOf, type LedgerRecord, type LedgerStatus } from './record.js';
import { needsAttention, SETTLED_ATTENTION_STATUSES, UNCLASSIFIED, type AttentionInput } from './attention.js';
import { backfillKey, deadLetterDueAtMs, statusesOf, type AuditEntry, type AuditQuery, type BackfillState, type DeadLetter, type DeadLetterQuery, type DueQuery, type LedgerStore, type ListQuery, type OpenClaim, type OpenCursor } from './store.js';

const MIGRATION_LOCK = 0x4c42_4d49; // 'LBMI': one advisory lock id for every instance of the bridge
/** 'LBDL': the class of the advisory locks that make each dead letter's read-change-write one step (`updateDeadLetter`). */
const DEAD_LETTER_LOCK = 0x4c42_444c;
/** 'LBBF': the class of the advisory locks that make each backfill state's read-change-write one step (`updateBackfillState`). */
const BACKFILL_LOCK = 0x4c42_4246;
const CLAIM_LOCK = 0x4c42_434c; // 'LBCL': held by an instance's worker while it claims due records
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** Records per transaction in `importRecords`. */
const IMPORT_BATCH = 500;

export interface PgConnection {
  connectionString: string;
  schema?: string;
}

/** Splits our own `schema` parameter off a postgres:// URL; pg keeps the rest. */
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

/** `ledger_hold_keys`'s refusal (LB002, the holder's ledger key in DETAIL) as the error the interface names; anything else as it is. */
function heldKeyError(error: unknown, transactionId: string, merchantId: string): unknown {
  const e = error as { code?: string; detail?: string };
  return e.code === 'LB002' && e.detail ? new AccrualKeyHeldError(transactionId, transactionIdOf(merchantId, e.detail)) : error;
}

/** The transactionId a ledger key of this merchant stands for. */
function transactionIdOf(merchantId: string, key: string): string {
  return merchantId === DEFAULT_MERCHANT ? key : key.slice(merchantId.length + 1);
}

/**
 * `listDue` in SQL (store.ts for what it answers; due-turns.ts says the same for the other stores).
 * Merchants with open records are walked one to the next through the index of migration 7 (a loose
 * index scan: one probe each, however many records each has); for each, its earliest due records up
 * to the cap, numbered (its turns); then turn by turn, earliest due first, up to the limit. With a
 * claim, the records another live instance leased, or that were written within `idleMs`, are not
 * candidates, and those chosen are locked (SKIP LOCKED: a row being written is left for the next
 * pass), checked again and leased to the owner.
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
  const due = (r: string) =>
    `${r}.open AND ${r}.due_at <= $1::timestamptz${query.canVerify ? '' : ` AND NOT ${r}.due_needs_verifier`}` +
    (claim ? ` AND (${r}.lease_until IS NULL OR ${r}.lease_until < now() OR ${r}.lease_owner = ${owner}) AND ${r}.updated_at < now() - make_interval(secs => ${idleMs}::double precision / 1000)` : '');
  const chosen = `
    WITH RECURSIVE merchants AS (
      (SELECT merchant_id FROM ledger_records WHERE open ORDER BY merchant_id LIMIT 1)
      UNION ALL
      SELECT (SELECT o.merchant_id FROM ledger_records o WHERE o.open AND o.merchant_id > m.merchant_id ORDER BY o.merchant_id LIMIT 1)
        FROM merchants m WHERE m.merchant_id IS NOT NULL
    ), chosen AS (
      SELECT t.transaction_id, t.turn, t.due_at, t.created_at
        FROM merchants m
        CROSS JOIN LATERAL (
          SELECT f.*, row_number() OVER (ORDER BY f.due_at, f.created_at, f.transaction_id) AS turn
            FROM (SELECT r.transaction_id, r.due_at, r.created_at FROM ledger_records r
                   WHERE r.merchant_id = m.merchant_id AND ${due('r')}
                   ORDER BY r.due_at, r.created_at, r.transaction_id LIMIT ${cap}) f
        ) t
       WHERE m.merchant_id IS NOT NULL AND m.merchant_id <> ALL (${skip})
       ORDER BY t.turn, t.due_at, t.created_at, t.transaction_id
       LIMIT ${limit}
    )`;
  const order = 'ORDER BY chosen.turn, chosen.due_at, chosen.created_at, chosen.transaction_id';
  if (!claim) return { text: `${chosen} SELECT r.record FROM chosen JOIN ledger_records r USING (transaction_id) ${order}`, values };
  return {
    text: `${chosen}, claimed AS (
      UPDATE ledger_records r SET lease_owner = ${owner}, lease_until = now() + make_interval(secs => ${leaseMs}::double precision / 1000)
       WHERE r.transaction_id IN (SELECT l.transaction_id FROM ledger_records l WHERE l.transaction_id IN (SELECT transaction_id FROM chosen) AND ${due('l')} FOR UPDATE SKIP LOCKED)
      RETURNING r.transaction_id, r.record
    )
    SELECT claimed.record FROM claimed JOIN chosen USING (transaction_id) ${order}`,
    values,
  };
}

export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/** Runs `work` in one transaction on one pooled connection: committed when it returns, rolled back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
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

  constructor(url: string, options: { poolSize?: number } = {}) {
    const { connectionString, schema } = parsePgUrl(url);
    this.#schema = schema;
    this.pool = new pg.Pool({
      connectionString,
      max: options.poolSize ?? 10,
      ...(schema ? { options: `-c search_path=${schema}` } : {}),
    });
    // An idle client that loses its connection must not crash the process; the next query reconnects.
    this.pool.on('error', () => undefined);
  }

  async init(): Promise<void> {
    await migrate(this.pool, this.#schema);
    await inTransaction(this.pool, (client) => fillDueTimes(client, true));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  /** `transaction_id` holds the ledger key (`keyOf`), and `merchant_id` whose it is. */
  async get(key: string): Promise<LedgerRecord | undefined> {
    const { rows } = await this.pool.query<{ record: LedgerRecord }>('SELECT record FROM ledger_records WHERE transaction_id = $1', [key]);
    return rows[0]?.record;
  }

  async insert(record: LedgerRecord): Promise<{ record: LedgerRecord; created: boolean }> {
    if (record.version !== 1) throw new Error(`a new record starts at version 1, got ${record.version}`);
    const ops = record.accrual.operationIds;
    const { keys, unsettledAmount } = accrualKeyColumns(record);
    const key = keyOf(record);
    const merchant = merchantOf(record);
    // With operation ids or accrual keys, the record and its claims are one transaction; without, one statement.
    const write = async (db: pg.Pool | pg.PoolClient): Promise<boolean> => {
      const due = dueColumns(record);
      const { rowCount } = await db.query(
        `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, due_at, due_needs_verifier, accrual_keys, unsettled_amount, merchant_id)
         VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (transaction_id) DO NOTHING`,
        [key, record.pos, record.orderId.replaceAll('\u0000', '\uFFFD'), record.status, isOpen(record), record.createdAt, record.updatedAt, jsonb(record), due.dueAt, due.needsVerifier, keys, unsettledAmount, merchant],
      );
      if (!rowCount) return false;
      for (const op of ops) {
        const claimed = await db.query('INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id) VALUES ($1, $2, $3) ON CONFLICT (merchant_id, operation_id) DO NOTHING', [merchant, op, key]);
        if (!claimed.rowCount) throw new ConflictError(`operation ${op} is already claimed by another record`);
      }
      if (keys.length) await db.query("SELECT ledger_hold_keys($1, $2, '{}'::text[])", [key, keys]);
      return true;
    };
    let created: boolean;
    try {
      created = ops.length || keys.length ? await inTransaction(this.pool, write) : await write(this.pool);
    } catch (error) {
      throw heldKeyError(error, record.transactionId, merchant);
    }
    return created ? { record, created } : { record: (await this.get(key))!, created };
  }

  async update(next: LedgerRecord): Promise<LedgerRecord> {
    try {
      const due = dueColumns(next);
      const { keys, unsettledAmount } = accrualKeyColumns(next);
      const { rows } = await this.pool.query<{ ok: boolean }>('SELECT ledger_update($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS ok', [
        keyOf(next),
        next.version - 1,
        next.status,
        isOpen(next),
        next.updatedAt,
        jsonb(next),
        next.accrual.operationIds,
        due.dueAt,
        due.needsVerifier,
        keys,
        unsettledAmount,
        merchantOf(next),
      ]);
      if (rows[0]?.ok) return next;
    } catch (error) {
      if ((error as { code?: string }).code === 'LB001') throw new ConflictError((error as Error).message);
      throw heldKeyError(error, next.transactionId, merchantOf(next));
    }
    const current = await this.pool.query<{ version: number }>('SELECT version FROM ledger_records WHERE transaction_id = $1', [keyOf(next)]);
    throw new VersionConflictError(keyOf(next), next.version - 1, current.rows[0]?.version);
  }

  async list(query: ListQuery): Promise<{ items: LedgerRecord[]; total: number }> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.merchantId) where.push(`merchant_id = $${params.push(query.merchantId)}`);
    const statuses = statusesOf(query);
    if (statuses) where.push(`status = ANY ($${params.push([...statuses])}::text[])`);
    if (query.pos) where.push(`pos = $${params.push(query.pos)}`);
    if (query.orderId) where.push(`order_id = $${params.push(query.orderId)}`);
    if (query.refundId) where.push(`${REFUNDED_PREDICATE} AND record -> 'reversal' -> 'refundIds' @> $${params.push(JSON.stringify([query.refundId]))}::jsonb`);
    if (query.from) where.push(`created_at >= $${params.push(query.from)}`);
    if (query.to) where.push(`created_at <= $${params.push(query.to)}`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_records ${filter}`, params)).rows[0]!.n);
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `SELECT record FROM ledger_records ${filter} ORDER BY created_at DESC, transaction_id DESC LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`,
      params,
    );
    return { items: rows.map((r) => r.record), total };
  }

  /** Through migration 9's partial index; the attempt log stays in the database. */
  async listAttention(merchantId?: string): Promise<AttentionInput[]> {
    const params: unknown[] = [];
    const merchant = merchantId ? `AND merchant_id = $${params.push(merchantId)}` : '';
    // The condition is migration 9's index predicate, word for word, so the planner uses the index.
    const { rows } = await this.pool.query<{ record: AttentionInput }>(`SELECT record - 'attempts' AS record FROM ledger_records WHERE (${ATTENTION_PREDICATE}) ${merchant}`, params);
    return rows.map((r) => r.record).filter((r) => needsAttention(r));
  }

  async appendAudit(entry: AuditEntry): Promise<void> {
    await this.pool.query('INSERT INTO ledger_audit (at, actor, merchant_id, entry) VALUES ($1, $2, $3, $4)', [entry.at, entry.actor, entry.merchantId ?? null, jsonb(entry)]);
  }

  async listAudit(query: AuditQuery): Promise<{ items: AuditEntry[]; total: number }> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.merchantId) where.push(`merchant_id = $${params.push(query.merchantId)}`);
    if (query.actor) where.push(`actor = $${params.push(query.actor)}`);
    if (query.from) where.push(`at >= $${params.push(query.from)}`);
    if (query.to) where.push(`at <= $${params.push(query.to)}`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_audit ${filter}`, params)).rows[0]!.n);
    const { rows } = await this.pool.query<{ entry: AuditEntry }>(
      `SELECT entry FROM ledger_audit ${filter} ORDER BY at DESC, id DESC LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`,
      params,
    );
    return { items: rows.map((r) => r.entry), total };
  }

  /**
   * Bulk import (`npm run ledger:copy`): stores records as they are, with their own versions, which
   * insert/update would refuse. A record is written when absent or when the stored version is older,
   * and skipped otherwise, so a re-run resumes. Each batch of IMPORT_BATCH is one transaction with
   * its operation claims; a claim another transaction holds fails that batch with ConflictError.
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
      imported += await inTransaction(this.pool, async (client) => {
        // Records already stored at their version or a newer one are not sent again (a re-run after
        // an interruption then reads versions only); the ON CONFLICT condition stays the guard.
        const stored = await client.query<{ transaction_id: string; version: number }>(
          'SELECT transaction_id, version FROM ledger_records WHERE transaction_id = ANY ($1::text[])',
          [[...newest.keys()]],
        );
        for (const row of stored.rows) if (row.version >= newest.get(row.transaction_id)!.version) newest.delete(row.transaction_id);
        const batch = [...newest.values()];
        if (batch.length === 0) return 0;
        const due = batch.map((r) => dueColumns(r));
        const keyColumns = batch.map((r) => accrualKeyColumns(r));
        const { rows } = await client.query<{ transaction_id: string }>(
          `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, due_at, due_needs_verifier, accrual_keys, unsettled_amount, merchant_id)
           SELECT t.transaction_id, t.version, t.pos, t.order_id, t.status, t.open, t.created_at, t.updated_at, t.record, t.due_at, t.due_needs_verifier,
                  ARRAY(SELECT jsonb_array_elements_text(t.keys)), t.unsettled_amount, t.merchant_id
             FROM ROWS FROM (unnest($1::text[]), unnest($2::integer[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]),
                                    unnest($6::boolean[]), unnest($7::timestamptz[]), unnest($8::timestamptz[]), jsonb_array_elements($9::jsonb),
                                    unnest($10::timestamptz[]), unnest($11::boolean[]), jsonb_array_elements($12::jsonb), unnest($13::bigint[]), unnest($14::text[]))
                  AS t (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, due_at, due_needs_verifier, keys, unsettled_amount, merchant_id)
           ON CONFLICT (transaction_id) DO UPDATE
              SET version = EXCLUDED.version, pos = EXCLUDED.pos, order_id = EXCLUDED.order_id, status = EXCLUDED.status, open = EXCLUDED.open,
                  created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, record = EXCLUDED.record,
                  due_at = EXCLUDED.due_at, due_needs_verifier = EXCLUDED.due_needs_verifier,
                  accrual_keys = EXCLUDED.accrual_keys, unsettled_amount = EXCLUDED.unsettled_amount
            WHERE ledger_records.version < EXCLUDED.version
           RETURNING transaction_id`,
          [
            batch.map((r) => keyOf(r)),
            batch.map((r) => r.version),
            batch.map((r) => r.pos),
            batch.map((r) => r.orderId.replaceAll('\u0000', '\uFFFD')),
            batch.map((r) => r.status),
            batch.map((r) => isOpen(r)),
            batch.map((r) => r.createdAt),
            batch.map((r) => r.updatedAt),
            // The bodies go as one JSON array: a jsonb[] parameter would be an array literal, every quote
            // escaped by pg and parsed twice by the server, 2-3 times slower for records of a few kB.
            jsonb(batch),
            due.map((d) => d.dueAt),
            due.map((d) => d.needsVerifier),
            JSON.stringify(keyColumns.map((k) => k.keys)),
            keyColumns.map((k) => k.unsettledAmount),
            batch.map((r) => merchantOf(r)),
          ],
        );
        const written = rows.map((r) => r.transaction_id);
        if (written.length) {
          const writtenIds = new Set(written);
          const claimIds: string[] = [];
          const claimMerchants: string[] = [];
          const claimOps: number[] = [];
          for (const r of batch) {
            if (!writtenIds.has(keyOf(r))) continue;
            for (const op of r.accrual.operationIds) {
              claimIds.push(keyOf(r));
              claimMerchants.push(merchantOf(r));
              claimOps.push(op);
            }
          }
          // Accrual keys as the records list them. A key two imported records list (a ledger from
          // before keys) stays with the first; neither is refused later for a key it lists.
          const keyHolders = batch.filter((r) => writtenIds.has(keyOf(r))).flatMap((r) => accrualKeyColumns(r).keys.map((key) => [key, keyOf(r)] as const));
          await client.query('DELETE FROM ledger_accrual_keys WHERE transaction_id = ANY ($1::text[])', [written]);
          if (keyHolders.length) {
            await client.query('INSERT INTO ledger_accrual_keys (key, transaction_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (key) DO NOTHING', [keyHolders.map((k) => k[0]), keyHolders.map((k) => k[1])]);
          }
          // A replaced record gives up the claims its new version no longer lists, as ledger_update does.
          await client.query(
            `DELETE FROM ledger_operation_claims c
              WHERE c.transaction_id = ANY ($1::text[])
                AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::bigint[]) AS k (transaction_id, operation_id)
                                 WHERE k.transaction_id = c.transaction_id AND k.operation_id = c.operation_id)`,
            [written, claimIds, claimOps],
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
        }
        return written.length;
      });
    }
    return { imported, skipped: records.length - imported };
  }

  async listOpen(limit: number, claim?: OpenClaim, after?: OpenCursor, merchantId?: string): Promise<LedgerRecord[]> {
    const params: unknown[] = [];
    let where = after ? `open AND (created_at, transaction_id) > ($${params.push(after.createdAt)}::timestamptz, $${params.push(keyOf(after))}::text)` : 'open';
    if (merchantId) where += ` AND merchant_id = $${params.push(merchantId)}`;
    return this.#select(where, 'created_at, transaction_id', params, limit, claim);
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

  /** Rows matching `where` (over `params`) in `order`, at most `limit`; with `claim`, leased to its owner. */
  async #select(where: string, order: string, params: unknown[], limit: number, claim: OpenClaim | undefined): Promise<LedgerRecord[]> {
    if (!claim) {
      const { rows } = await this.pool.query<{ record: LedgerRecord }>(`SELECT record FROM ledger_records WHERE ${where} ORDER BY ${order} LIMIT $${params.push(limit)}`, params);
      return rows.map((r) => r.record);
    }
    // Each instance's worker takes a disjoint batch: rows another instance holds a live lease on,
    // or is claiming right now (locked), are skipped.
    const owner = `$${params.push(claim.owner)}`;
    const leaseMs = `$${params.push(claim.leaseMs)}`;
    const idleMs = `$${params.push(claim.idleMs ?? 0)}`;
    const { rows } = await this.pool.query<{ record: LedgerRecord }>(
      `WITH claimed AS (
         UPDATE ledger_records r SET lease_owner = ${owner}, lease_until = now() + make_interval(secs => ${leaseMs}::double precision / 1000)
          WHERE r.transaction_id IN (
            SELECT transaction_id FROM ledger_records
             WHERE ${where} AND (lease_until IS NULL OR lease_until < now() OR lease_owner = ${owner})
               AND updated_at < now() - make_interval(secs => ${idleMs}::double precision / 1000)
             ORDER BY ${order} LIMIT $${params.push(limit)} FOR UPDATE SKIP LOCKED)
         RETURNING r.*)
       SELECT record FROM claimed ORDER BY ${order}`,
      params,
    );
    return rows.map((r) => r.record);
  }

  async countOpen(): Promise<number> {
    return Number((await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM ledger_records WHERE open')).rows[0]!.n);
  }

  async countOpenByStatus(): Promise<Partial<Record<LedgerStatus, number>>> {
    const open = await this.pool.query<{ status: LedgerStatus; n: string }>('SELECT status, count(*) AS n FROM ledger_records WHERE open GROUP BY status');
    // Through migration 9's attention index (its predicate word for word); settled records are never open.
    const settled = await this.pool.query<{ status: LedgerStatus; n: string }>(
      `SELECT status, count(*) AS n FROM ledger_records WHERE (${ATTENTION_PREDICATE}) AND NOT open AND status = ANY ($1::text[]) AND NOT (record ? 'closed') GROUP BY status`,
      [[...SETTLED_ATTENTION_STATUSES]],
    );
    return Object.fromEntries([...open.rows, ...settled.rows].map((r) => [r.status, Number(r.n)]));
  }

  async countOpenDeadLetters(): Promise<Record<string, number>> {
    const { rows } = await this.pool.query<{ code: string; n: string }>(`SELECT coalesce(letter ->> 'reasonCode', $1) AS code, count(*) AS n FROM ledger_dead_letters WHERE NOT resolved GROUP BY 1`, [UNCLASSIFIED]);
    return Object.fromEntries(rows.map((r) => [r.code, Number(r.n)]));
  }

  async listUnsettledAccruals(merchantId: string, amountCents: number): Promise<LedgerRecord[]> {
    const { rows } = await this.pool.query<{ record: LedgerRecord }>('SELECT record FROM ledger_records WHERE unsettled_amount = $1 AND merchant_id = $2 ORDER BY created_at, transaction_id', [amountCents, merchantId]);
    return rows.map((r) => r.record);
  }

  async findOperationClaim(merchantId: string, operationId: number): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ transaction_id: string }>('SELECT transaction_id FROM ledger_operation_claims WHERE merchant_id = $1 AND operation_id = $2', [merchantId, operationId]);
    const key = rows[0]?.transaction_id;
    return key === undefined ? undefined : transactionIdOf(merchantId, key);
  }

  async count(): Promise<number> {
    return Number((await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM ledger_records')).rows[0]!.n);
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

  async listDeadLetters(query: DeadLetterQuery): Promise<{ items: DeadLetter[]; total: number }> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.pos) where.push(`pos = $${params.push(query.pos)}`);
    if (query.merchantId) where.push(`merchant_id = $${params.push(query.merchantId)}`);
    if (query.open !== undefined) where.push(`resolved = $${params.push(!query.open)}`);
    if (query.awaiting) where.push(`NOT resolved AND due_at IS ${query.awaiting === 'bridge' ? 'NOT ' : ''}NULL`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = Number((await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_dead_letters ${filter}`, params)).rows[0]!.n);
    const { rows } = await this.pool.query<{ letter: DeadLetter }>(
      `SELECT letter FROM ledger_dead_letters ${filter} ORDER BY received_at DESC, id DESC LIMIT $${params.push(query.limit)} OFFSET $${params.push(query.offset)}`,
      params,
    );
    return { items: rows.map((r) => r.letter), total };
  }
}
