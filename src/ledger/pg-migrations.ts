/**
 * The PostgreSQL ledger's schema, as versioned migrations applied in order at start-up and by
 * `npm run migrate`. Applied versions are recorded in `ledger_schema_migrations`; an advisory lock
 * makes several instances starting at once apply each migration exactly once. Never edit a
 * migration that has shipped: add the next version.
 */
import type pg from 'pg';
import type { Customer } from '../kernel/customer.js';
import { attentionEntriesOf } from '../state/attention.js';
import { CUSTOMER_SEARCH_KEY, customerHashesOf, newSearchKey } from '../state/customer-index.js';
import { accrualKeys, dueOf, unsettledAmount, type LedgerRecord } from '../state/record.js';
import { FOLD_CASE_SQL, foldCase } from './store.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Runs after `sql`, in the same transaction: data that must follow the bridge's own rules (record.ts), not a copy of them in SQL. */
  backfill?: (client: pg.PoolClient) => Promise<void>;
}

/**
 * A record's due time (`dueOf`) as the `due_at` and `due_needs_verifier` columns of migration 2:
 * 'infinity' when the worker has nothing to do on its own (settled, or an operator's to move).
 */
export function dueColumns(record: LedgerRecord): { dueAt: string; needsVerifier: boolean } {
  const due = dueOf(record);
  return { dueAt: due ? new Date(due.atMs).toISOString() : 'infinity', needsVerifier: due?.needsVerifier ?? false };
}

/** The accrual-key columns of migration 3 (record.ts `accrualKeys`, `unsettledAmount`). */
export function accrualKeyColumns(record: LedgerRecord): { keys: string[]; unsettledAmount: number | null } {
  return { keys: accrualKeys(record), unsettledAmount: unsettledAmount(record) ?? null };
}

/**
 * What the attention index (`ledger_attention`, migration 10) holds of a record, as the write
 * functions take it: one `{ kind, since }` per item `attentionOf` finds (attention.ts
 * `attentionEntriesOf`), as JSON text; `[]` for most records, which need no one.
 */
export function attentionColumn(record: LedgerRecord): string {
  return JSON.stringify(attentionEntriesOf(record).map((e) => ({ kind: e.kind, since: e.since })));
}

/** The refund ids a record names, for migration 10's `refund_ids` (null when none: its index holds refunded records only). */
export function refundIdsColumn(record: LedgerRecord): string[] | null {
  return record.reversal.refundIds.length ? record.reversal.refundIds : null;
}

/** The month partitions (migration 10) are named by the month they hold: `ledger_records_2026_11`. */
export function partitionName(monthStartMs: number): string {
  const d = new Date(monthStartMs);
  return `ledger_records_${d.getUTCFullYear()}_${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/**
 * Migration 11's data: the ledger's customer search key, made once, then every record's customer
 * index entries (its customer's identifiers, hashed with it: customer-index.ts) and its refund
 * ids, read once through a cursor. The cost follows the ledger's size, once.
 */
async function indexCustomersAndRefunds(client: pg.PoolClient): Promise<void> {
  await client.query('INSERT INTO ledger_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [CUSTOMER_SEARCH_KEY, newSearchKey()]);
  const key = (await client.query<{ value: string }>('SELECT value FROM ledger_settings WHERE name = $1', [CUSTOMER_SEARCH_KEY])).rows[0]!.value;
  await forEachRow(client, "SELECT transaction_id, created_at, record -> 'accrual' -> 'customer' AS customer, refund_ids FROM ledger_records", async (rows) => {
    const hashes = rows.flatMap((r) => customerHashesOf((r.customer ?? undefined) as Customer | undefined, key).map((h) => [h, r.transaction_id as string, r.created_at as Date] as const));
    if (hashes.length) {
      await client.query('INSERT INTO ledger_customers (hash, transaction_id, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING', [
        hashes.map((h) => h[0]),
        hashes.map((h) => h[1]),
        hashes.map((h) => h[2]),
      ]);
    }
    const refunds = rows.flatMap((r) => ((r.refund_ids as string[] | null) ?? []).map((id) => [foldCase(id), r.transaction_id as string, r.created_at as Date] as const));
    if (refunds.length) {
      await client.query('INSERT INTO ledger_refund_ids (refund_id, transaction_id, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING', [
        refunds.map((r) => r[0]),
        refunds.map((r) => r[1]),
        refunds.map((r) => r[2]),
      ]);
    }
  });
}

/** Leaves room on each page for a record's next versions, so an update can stay on its page (a HOT update when it changes no indexed column). */
const FILLFACTOR = 80;

/**
 * The work table's row of an open record (migration 10's `ledger_work`), as the write functions
 * take it: its due time (`dueColumns`), its accrual keys and unsettled amount.
 */
function workRow(record: LedgerRecord): { dueAt: string; needsVerifier: boolean; keys: string[]; unsettledAmount: number | null } {
  return { ...dueColumns(record), ...accrualKeyColumns(record) };
}

/**
 * Migration 10's data, rows taken as they are (open records and those needing a person are few among
 * many): the work table from the open records, with due times computed by this build's rules (a row
 * an earlier build left undated is dated now); the attention index of the records that need a person
 * (found through migration 9's attention index); refund ids as a column. Then the old table becomes
 * the first partition of the new one (`ledger_records_before_10`, everything created before the
 * month after its newest record), without rewriting a row: a CHECK validated first lets ATTACH skip
 * its own scan. A new database has nothing to keep: its old table is dropped.
 */
async function partitionRecords(client: pg.PoolClient): Promise<void> {
  const { rows: found } = await client.query<{ some: boolean }>('SELECT EXISTS (SELECT 1 FROM ledger_records_before_10) AS some');
  if (!found[0]!.some) {
    await client.query('DROP TABLE ledger_records_before_10');
    await client.query(PARTITIONED_INDEXES);
    return;
  }
  await forEachRow(client, 'SELECT transaction_id, merchant_id, created_at, updated_at, status, record, lease_owner, lease_until, accrual_keys FROM ledger_records_before_10 WHERE open', async (rows) => {
    // Due times by this build's rules; the accrual keys each row holds as they are (the rows of
    // ledger_accrual_keys name them, and a key is released by the work row that lists it).
    const work = rows.map((r) => ({ ...workRow(r.record as LedgerRecord), keys: r.accrual_keys as string[] }));
    await client.query(
      `INSERT INTO ledger_work (transaction_id, merchant_id, created_at, updated_at, status, due_at, due_needs_verifier, accrual_keys, unsettled_amount, lease_owner, lease_until)
       SELECT t.transaction_id, t.merchant_id, t.created_at, t.updated_at, t.status, t.due_at, t.due_needs_verifier, ARRAY(SELECT jsonb_array_elements_text(t.keys)), t.unsettled_amount, t.lease_owner, t.lease_until
         FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), unnest($3::timestamptz[]), unnest($4::timestamptz[]), unnest($5::text[]), unnest($6::timestamptz[]),
                         unnest($7::boolean[]), jsonb_array_elements($8::jsonb), unnest($9::bigint[]), unnest($10::text[]), unnest($11::timestamptz[]))
              AS t (transaction_id, merchant_id, created_at, updated_at, status, due_at, due_needs_verifier, keys, unsettled_amount, lease_owner, lease_until)`,
      [
        rows.map((r) => r.transaction_id),
        rows.map((r) => r.merchant_id),
        rows.map((r) => r.created_at),
        rows.map((r) => r.updated_at),
        rows.map((r) => r.status),
        work.map((w) => w.dueAt),
        work.map((w) => w.needsVerifier),
        JSON.stringify(work.map((w) => w.keys)),
        work.map((w) => w.unsettledAmount),
        rows.map((r) => r.lease_owner),
        rows.map((r) => r.lease_until),
      ],
    );
  });
  await forEachRow(client, `SELECT transaction_id, merchant_id, created_at, record FROM ledger_records_before_10 WHERE ${ATTENTION_PREDICATE}`, async (rows) => {
    const entries = rows.flatMap((r) => attentionEntriesOf(r.record as LedgerRecord).map((e) => ({ id: r.transaction_id as string, merchant: r.merchant_id as string, createdAt: r.created_at, kind: e.kind, since: e.since })));
    if (entries.length === 0) return;
    await client.query(
      `INSERT INTO ledger_attention (transaction_id, kind, merchant_id, since, created_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[]) ON CONFLICT DO NOTHING`,
      [entries.map((e) => e.id), entries.map((e) => e.kind), entries.map((e) => e.merchant), entries.map((e) => e.since), entries.map((e) => e.createdAt)],
    );
    await client.query('UPDATE ledger_records_before_10 SET attention = true WHERE transaction_id = ANY ($1::text[])', [[...new Set(entries.map((e) => e.id))]]);
  });
  // Refund ids as a column of their own, through migration 9's index of refunded records.
  await client.query(`UPDATE ledger_records_before_10 SET refund_ids = ARRAY(SELECT jsonb_array_elements_text(record -> 'reversal' -> 'refundIds')) WHERE ${REFUNDED_PREDICATE}`);
  // What moved to ledger_work and ledger_keys, and the indexes the partitioned table does not have
  // (dropping a column or an index rewrites nothing).
  await client.query(`
    DROP INDEX ledger_records_created, ledger_records_status, ledger_records_pos, ledger_records_open, ledger_records_due,
               ledger_records_unsettled, ledger_records_merchant, ledger_records_merchant_due, ledger_records_attention,
               ledger_records_order_id, ledger_records_refund_ids;
    ALTER TABLE ledger_records_before_10 DROP CONSTRAINT ledger_records_pkey,
      DROP COLUMN due_at, DROP COLUMN due_needs_verifier, DROP COLUMN accrual_keys, DROP COLUMN unsettled_amount, DROP COLUMN lease_owner, DROP COLUMN lease_until;
    ALTER TABLE ledger_records_before_10 SET (fillfactor = ${FILLFACTOR});`);
  const { rows } = await client.query<{ until: Date }>(
    "SELECT (date_trunc('month', greatest(coalesce(max(created_at), now()), now()) AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC' AS until FROM ledger_records_before_10",
  );
  const until = rows[0]!.until.toISOString();
  await client.query(`ALTER TABLE ledger_records_before_10 ADD CONSTRAINT ledger_records_before_10_range CHECK (created_at IS NOT NULL AND created_at < '${until}') NOT VALID`);
  await client.query('ALTER TABLE ledger_records_before_10 VALIDATE CONSTRAINT ledger_records_before_10_range');
  await client.query(`ALTER TABLE ledger_records ATTACH PARTITION ledger_records_before_10 FOR VALUES FROM (MINVALUE) TO ('${until}')`);
  await client.query(PARTITIONED_INDEXES);
}

/** Runs `each` over the rows of `query`, BACKFILL_BATCH at a time, through a cursor (a migration's reads of a large table). */
async function forEachRow(client: pg.PoolClient, query: string, each: (rows: Record<string, any>[]) => Promise<void>): Promise<void> {
  await client.query(`DECLARE ledger_migration_rows NO SCROLL CURSOR FOR ${query}`);
  for (;;) {
    const { rows } = await client.query(`FETCH ${BACKFILL_BATCH} FROM ledger_migration_rows`);
    if (rows.length === 0) break;
    await each(rows);
  }
  await client.query('CLOSE ledger_migration_rows');
}

/**
 * Migration 10's indexes on the partitioned records, made on every partition. Each serves one
 * query, which costs what it returns there, and each is keyed by time or by one of a few values,
 * so a record's entries land on the pages the latest records use: the indexes keyed by a random id
 * are on ledger_keys, written once per record, and the open records' on ledger_work, which holds
 * them only.
 */
const PARTITIONED_INDEXES = `
-- One merchant's records, newest first (GET /v1/admin/transactions?merchantId=, the reconcile report).
CREATE INDEX ledger_records_merchant ON ledger_records (merchant_id, created_at DESC, transaction_id DESC);
-- Records of a status, newest first (?status=).
CREATE INDEX ledger_records_status ON ledger_records (status, created_at DESC, transaction_id DESC);
-- Records of a POS, newest first (?pos=): a POS seldom used is counted and paged through its own entries.
CREATE INDEX ledger_records_pos ON ledger_records (pos, created_at DESC, transaction_id DESC);
-- The records a refund id names (?refundId=): refunded records only.
CREATE INDEX ledger_records_refund_ids ON ledger_records USING gin (refund_ids) WHERE refund_ids IS NOT NULL;
`;

/**
 * Migration 3: the keys of the open records whose accrual is unsettled. Two such records of one key
 * (possible before this migration) both list it; the first takes the key row, and neither is refused
 * later for a key it already lists.
 */
async function backfillAccrualKeys(client: pg.PoolClient): Promise<void> {
  await client.query('DECLARE ledger_keys_backfill NO SCROLL CURSOR FOR SELECT transaction_id, record FROM ledger_records WHERE open');
  for (;;) {
    const { rows } = await client.query<{ transaction_id: string; record: LedgerRecord }>(`FETCH ${BACKFILL_BATCH} FROM ledger_keys_backfill`);
    if (rows.length === 0) break;
    const columns = rows.map((r) => accrualKeyColumns(r.record));
    await client.query(
      `UPDATE ledger_records r SET accrual_keys = ARRAY(SELECT jsonb_array_elements_text(k.keys)), unsettled_amount = k.amount
         FROM unnest($1::text[], $2::jsonb[], $3::bigint[]) AS k (transaction_id, keys, amount)
        WHERE r.transaction_id = k.transaction_id`,
      [rows.map((r) => r.transaction_id), columns.map((c) => JSON.stringify(c.keys)), columns.map((c) => c.unsettledAmount)],
    );
    const held = rows.flatMap((r, i) => columns[i]!.keys.map((key) => [key, r.transaction_id] as const));
    if (held.length) {
      await client.query('INSERT INTO ledger_accrual_keys (key, transaction_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (key) DO NOTHING', [held.map((h) => h[0]), held.map((h) => h[1])]);
    }
  }
  await client.query('CLOSE ledger_keys_backfill');
}

/**
 * The records a person may have to look at (attention.ts: a status that needs one, or deliveries
 * with another amount), as SQL: migration 9's partial index and the query it serves share it.
 */
export const ATTENTION_PREDICATE = "status IN ('in_doubt', 'failed', 'partially_accrued', 'reverse_failed') OR record ? 'changedRepeats'";

/** Records a refund has named (migration 9's refund-id index holds only these; a search by refund id says it too, to use it). */
export const REFUNDED_PREDICATE = "jsonb_array_length(record -> 'reversal' -> 'refundIds') > 0";

/** Rows per round trip when migration 2 fills in the due times of open records. */
const BACKFILL_BATCH = 1000;

function backfillDueTimes(client: pg.PoolClient): Promise<void> {
  return fillDueTimes(client, false);
}

/**
 * Sets `due_at` and `due_needs_verifier` from each open row's record (`dueColumns`), inside the
 * caller's transaction: every open row (migration 2), or only those still at the '-infinity' an
 * earlier build's writes leave (`undatedOnly`, at every start-up: an operator-bound row written by
 * an earlier build during a rolling deploy is never written again by this one, and would otherwise
 * sort first in every worker batch). A row another instance wrote meanwhile (its version moved on)
 * keeps what that instance set.
 */
export async function fillDueTimes(client: pg.PoolClient, undatedOnly: boolean): Promise<void> {
  // A cursor reads the rows as they were when it was declared, so the rows updated meanwhile are
  // not read again. Closed rows keep the default: their due time is never read.
  await client.query(`DECLARE ledger_due_backfill NO SCROLL CURSOR FOR SELECT transaction_id, created_at, version, record FROM ledger_records WHERE open${undatedOnly ? " AND due_at = '-infinity'" : ''}`);
  for (;;) {
    const { rows } = await client.query<{ transaction_id: string; created_at: Date; version: number; record: LedgerRecord }>(`FETCH ${BACKFILL_BATCH} FROM ledger_due_backfill`);
    if (rows.length === 0) break;
    const due = rows.map((r) => dueColumns(r.record));
    // By (created_at, transaction_id): the primary key from migration 10 on (records partitioned by time), a row's own before it.
    await client.query(
      `UPDATE ledger_records r SET due_at = k.due_at, due_needs_verifier = k.needs_verifier
         FROM unnest($1::text[], $2::timestamptz[], $3::integer[], $4::timestamptz[], $5::boolean[]) AS k (transaction_id, created_at, version, due_at, needs_verifier)
        WHERE r.created_at = k.created_at AND r.transaction_id = k.transaction_id AND r.version = k.version`,
      [rows.map((r) => r.transaction_id), rows.map((r) => r.created_at), rows.map((r) => r.version), due.map((d) => d.dueAt), due.map((d) => d.needsVerifier)],
    );
  }
  await client.query('CLOSE ledger_due_backfill');
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'ledger records, operation claims, webhook events, dead letters',
    sql: `
CREATE TABLE ledger_records (
  transaction_id text PRIMARY KEY,
  version integer NOT NULL,
  pos text NOT NULL,
  order_id text NOT NULL,
  status text NOT NULL,
  open boolean NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- Which instance's worker is looking at this record, until when (claimed with SKIP LOCKED).
  lease_owner text,
  lease_until timestamptz,
  record jsonb NOT NULL
);
CREATE INDEX ledger_records_created ON ledger_records (created_at DESC, transaction_id DESC);
CREATE INDEX ledger_records_status ON ledger_records (status, created_at DESC);
CREATE INDEX ledger_records_pos ON ledger_records (pos, created_at DESC);
CREATE INDEX ledger_records_open ON ledger_records (created_at) WHERE open;

-- An upstream operation proves at most one accrual: the primary key enforces it across instances.
CREATE TABLE ledger_operation_claims (
  operation_id bigint PRIMARY KEY,
  transaction_id text NOT NULL REFERENCES ledger_records (transaction_id) ON DELETE CASCADE
);
CREATE INDEX ledger_operation_claims_tx ON ledger_operation_claims (transaction_id);

CREATE TABLE ledger_webhook_events (
  pos text NOT NULL,
  key text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (pos, key)
);

CREATE TABLE ledger_dead_letters (
  id text PRIMARY KEY,
  pos text NOT NULL,
  received_at timestamptz NOT NULL,
  resolved boolean NOT NULL,
  letter jsonb NOT NULL
);
CREATE INDEX ledger_dead_letters_received ON ledger_dead_letters (received_at DESC);

-- Compare-and-set on version plus the record's operation claims, atomically, in one round trip.
-- Returns false when the stored version is not p_expected (another writer won, or no such record);
-- raises 'operation % is claimed by %' (SQLSTATE LB001) when another record holds one of p_ops.
CREATE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  other text;
  op bigint;
BEGIN
  UPDATE ledger_records
     SET version = p_expected + 1, status = p_status, open = p_open, updated_at = p_updated_at, record = p_record
   WHERE transaction_id = p_id AND version = p_expected;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  DELETE FROM ledger_operation_claims WHERE transaction_id = p_id AND NOT (operation_id = ANY (p_ops));
  FOREACH op IN ARRAY p_ops LOOP
    INSERT INTO ledger_operation_claims (operation_id, transaction_id) VALUES (op, p_id) ON CONFLICT (operation_id) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_operation_claims WHERE operation_id = op;
    IF other <> p_id THEN
      RAISE EXCEPTION 'operation % is claimed by %', op, other USING ERRCODE = 'LB001';
    END IF;
  END LOOP;
  RETURN true;
END;
$$;
`,
  },
  {
    version: 2,
    name: 'due time of each record, for the worker to take due work first',
    sql: `
-- When the worker should next look at a record (record.ts dueOf), so that its claim takes what is
-- due, earliest first, instead of the oldest open records, which may all be waiting for an
-- operator or for a round an hour away. 'infinity': never on its own (settled, or only an operator
-- can move it). due_needs_verifier: an accrual in doubt, which only the history verifier settles;
-- a bridge without LOYALTY_API_KEY leaves those to an operator.
-- The default '-infinity' (due since ever) is for rows written by an earlier build while instances
-- are replaced one by one: such a row is looked at, never forgotten; this build's next write of it
-- sets its real due time. Existing rows are filled in by the backfill after this script.
ALTER TABLE ledger_records
  ADD COLUMN due_at timestamptz NOT NULL DEFAULT '-infinity',
  ADD COLUMN due_needs_verifier boolean NOT NULL DEFAULT false;
-- Serves WHERE open AND due_at <= $now [AND NOT due_needs_verifier] ORDER BY due_at: a range scan
-- in due order that stops at the first row not due yet, checking due_needs_verifier in the index.
CREATE INDEX ledger_records_due ON ledger_records (due_at, due_needs_verifier) WHERE open;

CREATE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[],
                              p_due_at timestamptz, p_due_needs_verifier boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  other text;
  op bigint;
BEGIN
  UPDATE ledger_records
     SET version = p_expected + 1, status = p_status, open = p_open, updated_at = p_updated_at, record = p_record,
         due_at = p_due_at, due_needs_verifier = p_due_needs_verifier
   WHERE transaction_id = p_id AND version = p_expected;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  DELETE FROM ledger_operation_claims WHERE transaction_id = p_id AND NOT (operation_id = ANY (p_ops));
  FOREACH op IN ARRAY p_ops LOOP
    INSERT INTO ledger_operation_claims (operation_id, transaction_id) VALUES (op, p_id) ON CONFLICT (operation_id) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_operation_claims WHERE operation_id = op;
    IF other <> p_id THEN
      RAISE EXCEPTION 'operation % is claimed by %', op, other USING ERRCODE = 'LB001';
    END IF;
  END LOOP;
  RETURN true;
END;
$$;

-- What earlier builds call: the same write, due at once (see the default above).
CREATE OR REPLACE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[])
RETURNS boolean LANGUAGE sql AS $$
  SELECT ledger_update(p_id, p_expected, p_status, p_open, p_updated_at, p_record, p_ops, '-infinity', false);
$$;
`,
    backfill: backfillDueTimes,
  },
  {
    version: 3,
    name: 'accrual keys: one unsettled accrual per customer and amount',
    sql: `
-- accrual_keys: the keys (record.ts accrualKeys) the record's latest version holds; unsettled_amount:
-- the Check amount while its accrual is unsettled, to find the records an operation could belong to.
ALTER TABLE ledger_records
  ADD COLUMN accrual_keys text[] NOT NULL DEFAULT '{}',
  ADD COLUMN unsettled_amount bigint;
CREATE INDEX ledger_records_unsettled ON ledger_records (unsettled_amount) WHERE unsettled_amount IS NOT NULL;

-- A key is held by one record at most, across instances: the primary key enforces it.
CREATE TABLE ledger_accrual_keys (
  key text PRIMARY KEY,
  transaction_id text NOT NULL
);
CREATE INDEX ledger_accrual_keys_tx ON ledger_accrual_keys (transaction_id);

-- The compare-and-set of migration 2, plus the accrual keys, in the same transaction: a key another
-- record holds is refused (LB002, the holder in DETAIL) when this version takes it newly; one the
-- stored version already lists is kept (two holders can only come from before this migration).
CREATE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[],
                              p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  other text;
  op bigint;
  prev text[];
BEGIN
  -- The keys the stored version holds, with the row locked: the update below replaces that version.
  SELECT accrual_keys INTO prev FROM ledger_records WHERE transaction_id = p_id AND version = p_expected FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE ledger_records
     SET version = p_expected + 1, status = p_status, open = p_open, updated_at = p_updated_at, record = p_record,
         due_at = p_due_at, due_needs_verifier = p_due_needs_verifier, accrual_keys = p_keys, unsettled_amount = p_unsettled_amount
   WHERE transaction_id = p_id;
  DELETE FROM ledger_operation_claims WHERE transaction_id = p_id AND NOT (operation_id = ANY (p_ops));
  FOREACH op IN ARRAY p_ops LOOP
    INSERT INTO ledger_operation_claims (operation_id, transaction_id) VALUES (op, p_id) ON CONFLICT (operation_id) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_operation_claims WHERE operation_id = op;
    IF other <> p_id THEN
      RAISE EXCEPTION 'operation % is claimed by %', op, other USING ERRCODE = 'LB001';
    END IF;
  END LOOP;
  PERFORM ledger_hold_keys(p_id, p_keys, prev);
  RETURN true;
END;
$$;

-- Holds p_keys for p_id (releasing the others it held); refuses a key another record holds unless p_id already listed it (p_prev).
CREATE FUNCTION ledger_hold_keys(p_id text, p_keys text[], p_prev text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  other text;
  k text;
BEGIN
  DELETE FROM ledger_accrual_keys WHERE transaction_id = p_id AND NOT (key = ANY (p_keys));
  FOREACH k IN ARRAY p_keys LOOP
    -- Waits for a concurrent transaction inserting the same key, then sees its outcome.
    INSERT INTO ledger_accrual_keys (key, transaction_id) VALUES (k, p_id) ON CONFLICT (key) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_accrual_keys WHERE key = k;
    IF other <> p_id AND NOT (k = ANY (p_prev)) THEN
      RAISE EXCEPTION 'accrual key of % is held by %', p_id, other USING ERRCODE = 'LB002', DETAIL = other;
    END IF;
  END LOOP;
END;
$$;

-- What the build before this one calls during a rolling deploy: the same write, holding no keys.
CREATE OR REPLACE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[],
                                         p_due_at timestamptz, p_due_needs_verifier boolean)
RETURNS boolean LANGUAGE sql AS $$
  SELECT ledger_update(p_id, p_expected, p_status, p_open, p_updated_at, p_record, p_ops, p_due_at, p_due_needs_verifier, '{}'::text[], NULL::bigint);
$$;
`,
    backfill: backfillAccrualKeys,
  },
  {
    version: 4,
    name: 'merchants: records and operation claims per merchant',
    sql: `
-- transaction_id holds the ledger key (record.ts ledgerKey): the bare transactionId for the default
-- merchant (every row before this migration), '<merchant>/<transactionId>' for another; merchant_id
-- says whose, for listing one merchant's records.
ALTER TABLE ledger_records ADD COLUMN merchant_id text NOT NULL DEFAULT 'default';
CREATE INDEX ledger_records_merchant ON ledger_records (merchant_id, created_at DESC, transaction_id DESC);

-- Operation ids are per loyalty account: two merchants' accounts may number operations alike.
ALTER TABLE ledger_operation_claims ADD COLUMN merchant_id text NOT NULL DEFAULT 'default';
ALTER TABLE ledger_operation_claims DROP CONSTRAINT ledger_operation_claims_pkey;
ALTER TABLE ledger_operation_claims ADD PRIMARY KEY (merchant_id, operation_id);

-- Migration 3's write, with the claims in the record's merchant.
CREATE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[],
                              p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint, p_merchant text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  other text;
  op bigint;
  prev text[];
BEGIN
  SELECT accrual_keys INTO prev FROM ledger_records WHERE transaction_id = p_id AND version = p_expected FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE ledger_records
     SET version = p_expected + 1, status = p_status, open = p_open, updated_at = p_updated_at, record = p_record,
         due_at = p_due_at, due_needs_verifier = p_due_needs_verifier, accrual_keys = p_keys, unsettled_amount = p_unsettled_amount
   WHERE transaction_id = p_id;
  DELETE FROM ledger_operation_claims WHERE merchant_id = p_merchant AND transaction_id = p_id AND NOT (operation_id = ANY (p_ops));
  FOREACH op IN ARRAY p_ops LOOP
    INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id) VALUES (p_merchant, op, p_id) ON CONFLICT (merchant_id, operation_id) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_operation_claims WHERE merchant_id = p_merchant AND operation_id = op;
    IF other <> p_id THEN
      RAISE EXCEPTION 'operation % is claimed by %', op, other USING ERRCODE = 'LB001';
    END IF;
  END LOOP;
  PERFORM ledger_hold_keys(p_id, p_keys, prev);
  RETURN true;
END;
$$;

-- What the build before this one calls during a rolling deploy: the default merchant's write.
CREATE OR REPLACE FUNCTION ledger_update(p_id text, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb, p_ops bigint[],
                                         p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint)
RETURNS boolean LANGUAGE sql AS $$
  SELECT ledger_update(p_id, p_expected, p_status, p_open, p_updated_at, p_record, p_ops, p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount, 'default');
$$;
`,
  },
  {
    version: 5,
    name: 'merchants',
    sql: `
-- One row per created merchant (the default merchant is built from the variables, never stored):
-- its document holds sealed secrets and token hashes only (src/merchants/secrets.ts). The token
-- hashes are unique, so a token can name one merchant at most.
CREATE TABLE ledger_merchants (
  id text PRIMARY KEY,
  version integer NOT NULL,
  merchant jsonb NOT NULL,
  pos_token text NOT NULL UNIQUE,
  admin_token text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL
);
-- A POS account (pos and its id there, lower-cased) belongs to one merchant at most: webhooks are
-- attributed by it.
CREATE TABLE ledger_merchant_accounts (
  account text PRIMARY KEY,
  merchant_id text NOT NULL REFERENCES ledger_merchants (id)
);
CREATE INDEX ledger_merchant_accounts_merchant ON ledger_merchant_accounts (merchant_id);

-- Whose a dead letter is: null when no merchant is known for its delivery.
ALTER TABLE ledger_dead_letters ADD COLUMN merchant_id text;
CREATE INDEX ledger_dead_letters_merchant ON ledger_dead_letters (merchant_id, received_at DESC);
`,
  },
  {
    version: 6,
    name: 'dead letters retried by the bridge',
    sql: `
-- When the bridge runs an open dead letter again by itself (store.ts deadLetterDueAtMs: its retry's
-- nextAt, or the end of the claim of the instance running it); null when it never will (resolved,
-- or waiting for a person). Letters kept before this version wait for a person: null is right.
ALTER TABLE ledger_dead_letters ADD COLUMN due_at timestamptz;
CREATE INDEX ledger_dead_letters_due ON ledger_dead_letters (due_at) WHERE NOT resolved AND due_at IS NOT NULL;
`,
  },
  {
    version: 7,
    name: 'due work by merchant, for the worker to take turns between merchants',
    sql: `
-- Serves the worker's claim (pg-store.ts listDue), which takes a few of each merchant's due records
-- in turn: the walk from one merchant with open records to the next (merchant_id > $previous LIMIT 1),
-- and each merchant's earliest due records read in due order, stopping at the per-merchant cap
-- however many more are due (one merchant's 100,000 due rows are not read to take 50 of them).
-- Its order is the claim's whole order (due time, then age, then key), so no sort stands between
-- the index and the cap. ledger_records_due (migration 2) stays: the build before this one claims
-- through it while instances are replaced one by one.
CREATE INDEX ledger_records_merchant_due ON ledger_records (merchant_id, due_at, created_at, transaction_id) WHERE open;
`,
  },
  {
    version: 8,
    name: 'backfill watermarks',
    sql: `
-- One row per merchant and POS it is backfilled from (store.ts BackfillState): how far that POS
-- account's orders have been read back (the watermark), the last pass, and the lease of the
-- instance running a pass now. Changed only by pg-store.ts updateBackfillState, one row at a time
-- under a transaction-scoped advisory lock, so one instance at most holds a lease at a time.
CREATE TABLE ledger_backfill (
  merchant_id text NOT NULL,
  pos text NOT NULL,
  state jsonb NOT NULL,
  PRIMARY KEY (merchant_id, pos)
);
`,
  },
  {
    version: 9,
    name: 'operators: attention queue, order and refund search, audit trail',
    sql: `
-- The attention queue (pg-store.ts listAttention) reads the records a person may have to look at:
-- those in a status that needs one, and those delivered again with another amount. Few among
-- many: a partial index holds just them.
CREATE INDEX ledger_records_attention ON ledger_records (merchant_id) WHERE ${ATTENTION_PREDICATE};
-- Operators find a record by the POS's own order id (the transactionId may be a hash of it), and by
-- a refund id: only refunded records are in that index (${REFUNDED_PREDICATE}), so the writes of
-- every other record pay nothing for it.
CREATE INDEX ledger_records_order_id ON ledger_records (order_id);
CREATE INDEX ledger_records_refund_ids ON ledger_records USING gin ((record -> 'reversal' -> 'refundIds')) WHERE ${REFUNDED_PREDICATE};
-- Every operator action, kept for good: who, what, to which record or letter, why.
CREATE TABLE ledger_audit (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL,
  actor text NOT NULL,
  merchant_id text,
  entry jsonb NOT NULL
);
CREATE INDEX ledger_audit_at ON ledger_audit (at DESC, id DESC);
CREATE INDEX ledger_audit_merchant ON ledger_audit (merchant_id, at DESC, id DESC);
`,
  },
  {
    version: 10,
    name: 'flat cost at scale: records partitioned by month, ids written once, an attention index written with each record',
    sql: `
-- Every record's ledger key, written once when the record is created and never again: what makes
-- a transactionId insert once (its primary key) across every partition, and what finds a record by
-- key or by the POS's order id. The records themselves are partitioned by creation month
-- (ledger_records, below), so a month of settled history can be detached and dropped in one step
-- (npm run ledger:archive); its keys stay here, so a late redelivery of an archived order is still
-- a repeat, never a second accrual.
CREATE TABLE ledger_keys (
  transaction_id text PRIMARY KEY,
  merchant_id text NOT NULL,
  created_at timestamptz NOT NULL,
  order_id text NOT NULL
);
INSERT INTO ledger_keys (transaction_id, merchant_id, created_at, order_id) SELECT transaction_id, merchant_id, created_at, order_id FROM ledger_records;
CREATE INDEX ledger_keys_order_id ON ledger_keys (order_id);

-- Claims name a key; the records they were made by may be archived since.
ALTER TABLE ledger_operation_claims DROP CONSTRAINT ledger_operation_claims_transaction_id_fkey;

-- The attention index (store.ts AttentionEntry): one row per item attentionOf finds in a record,
-- written by the same statement as the record, so a record leaves it with the write that settles,
-- closes or acknowledges it. The queue and the gauges read and count it, never the records.
CREATE TABLE ledger_attention (
  transaction_id text NOT NULL,
  kind text NOT NULL,
  merchant_id text NOT NULL,
  since timestamptz NOT NULL,
  -- The record's, to find it in its partition.
  created_at timestamptz NOT NULL,
  PRIMARY KEY (transaction_id, kind)
);
CREATE INDEX ledger_attention_since ON ledger_attention (since, transaction_id, kind);
CREATE INDEX ledger_attention_merchant ON ledger_attention (merchant_id, since, transaction_id, kind);

-- Open dead letters (the attention queue, its counts and the gauges) through their own index:
-- however many letters were resolved since, they are not walked.
CREATE INDEX ledger_dead_letters_open ON ledger_dead_letters (received_at, id) WHERE NOT resolved;

-- The open records' work state (record.ts isOpen): a row while a record has work left, deleted by
-- the write that settles it. Small whatever the ledger holds: the worker's due walk, an operator's
-- reconcile, start-up recovery, the open-records gauge and the history verifier's candidates read
-- it, and leases are taken on it, never on the records. due_at (record.ts dueOf) is 'infinity' for
-- a record only a person can move: out of the due walk and of start-up recovery.
CREATE TABLE ledger_work (
  transaction_id text PRIMARY KEY,
  merchant_id text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  status text NOT NULL,
  due_at timestamptz NOT NULL,
  due_needs_verifier boolean NOT NULL,
  accrual_keys text[] NOT NULL,
  unsettled_amount bigint,
  -- Which instance's worker is looking at this record, until when (claimed with SKIP LOCKED).
  lease_owner text,
  lease_until timestamptz
);
-- Every index here is written by every checkout (its row is inserted when it is recorded and
-- deleted when it settles), so there are only these. An operator's reconcile, the gauge and the
-- history verifier's candidates read the table whole: it holds what is open.
-- Start-up recovery: the open records the bridge moves by itself, oldest first.
CREATE INDEX ledger_work_moving ON ledger_work (created_at, transaction_id) WHERE due_at < 'infinity';
-- The worker's claim (pg-store.ts dueSql): a loose index scan from one merchant with due-able work
-- to the next, then each one's earliest due, stopping at the per-merchant cap.
CREATE INDEX ledger_work_merchant_due ON ledger_work (merchant_id, due_at, created_at, transaction_id) WHERE due_at < 'infinity';

-- Accrual keys are released by the keys the record held (its work row's), through the primary key:
-- the index by record is not needed, and not written.
DROP INDEX ledger_accrual_keys_tx;
CREATE OR REPLACE FUNCTION ledger_hold_keys(p_id text, p_keys text[], p_prev text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  other text;
  k text;
BEGIN
  DELETE FROM ledger_accrual_keys WHERE key = ANY (p_prev) AND transaction_id = p_id AND NOT (key = ANY (p_keys));
  FOREACH k IN ARRAY p_keys LOOP
    -- Waits for a concurrent transaction inserting the same key, then sees its outcome.
    INSERT INTO ledger_accrual_keys (key, transaction_id) VALUES (k, p_id) ON CONFLICT (key) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_accrual_keys WHERE key = k;
    IF other <> p_id AND NOT (k = ANY (p_prev)) THEN
      RAISE EXCEPTION 'accrual key of % is held by %', p_id, other USING ERRCODE = 'LB002', DETAIL = other;
    END IF;
  END LOOP;
END;
$$;

-- The old table keeps its rows and becomes the first partition (partitionRecords, after this script).
ALTER TABLE ledger_records RENAME TO ledger_records_before_10;
-- refund_ids: the refund ids the record names (null: none); attention: it has rows in ledger_attention.
ALTER TABLE ledger_records_before_10 ADD COLUMN refund_ids text[], ADD COLUMN attention boolean NOT NULL DEFAULT false;

CREATE TABLE ledger_records (
  transaction_id text NOT NULL,
  version integer NOT NULL,
  pos text NOT NULL,
  order_id text NOT NULL,
  status text NOT NULL,
  open boolean NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  record jsonb NOT NULL,
  merchant_id text NOT NULL,
  refund_ids text[],
  attention boolean NOT NULL DEFAULT false,
  PRIMARY KEY (created_at, transaction_id)
) PARTITION BY RANGE (created_at);

-- Creates the month partitions of [p_from, p_to) that are missing, each WITH (fillfactor); skips a
-- month another partition covers already (the table this migration made the first partition).
-- Answers how many it made. Run at every start-up and every day after, for four months ahead.
CREATE FUNCTION ledger_ensure_partitions(p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  m timestamptz := date_trunc('month', p_from AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  name text;
  made integer := 0;
  first_until timestamptz;
BEGIN
  -- Months the table that was there before this migration holds (it is the first partition, up to
  -- its bound) are not made: asking would lock the partitioned table to learn they overlap.
  SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz INTO first_until
    FROM pg_class c WHERE c.oid = to_regclass('ledger_records_before_10');
  IF first_until IS NOT NULL AND m < first_until THEN
    m := first_until;
  END IF;
  -- Nothing missing (the usual answer): no lock taken. Otherwise under the migrations' advisory lock
  -- (pg-store.ts MIGRATION_LOCK), so callers at once make each month once. Called in a transaction
  -- of its own, never one that has written records: making a partition locks the partitioned table.
  IF NOT EXISTS (SELECT 1 FROM generate_series(m, p_to - interval '1 microsecond', interval '1 month') g
                  WHERE to_regclass('ledger_records_' || to_char(g AT TIME ZONE 'UTC', 'YYYY_MM')) IS NULL) THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(${0x4c42_4d49});
  WHILE m < p_to LOOP
    name := 'ledger_records_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
    IF to_regclass(name) IS NULL THEN
      BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF ledger_records FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = ${FILLFACTOR})', name, m, (m AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC');
        made := made + 1;
      EXCEPTION WHEN invalid_object_definition THEN
        -- 42P17: another partition covers this month.
        NULL;
      END;
    END IF;
    m := (m AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
  END LOOP;
  RETURN made;
END;
$$;

-- Writes the work row of an open record (keeping its lease) or removes it once the record is settled.
CREATE FUNCTION ledger_put_work(p_id text, p_merchant text, p_created_at timestamptz, p_updated_at timestamptz, p_status text, p_open boolean,
                                p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_open THEN
    INSERT INTO ledger_work (transaction_id, merchant_id, created_at, updated_at, status, due_at, due_needs_verifier, accrual_keys, unsettled_amount)
    VALUES (p_id, p_merchant, p_created_at, p_updated_at, p_status, p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount)
    ON CONFLICT (transaction_id) DO UPDATE
       SET updated_at = EXCLUDED.updated_at, status = EXCLUDED.status, due_at = EXCLUDED.due_at, due_needs_verifier = EXCLUDED.due_needs_verifier,
           accrual_keys = EXCLUDED.accrual_keys, unsettled_amount = EXCLUDED.unsettled_amount;
  ELSE
    DELETE FROM ledger_work WHERE transaction_id = p_id;
  END IF;
END;
$$;

-- Claims p_ops (upstream operation ids) for p_id in its merchant; raises LB001 naming the holder
-- when another record holds one (waiting for a concurrent inserter of the same id to end first).
CREATE FUNCTION ledger_take_claims(p_id text, p_merchant text, p_ops bigint[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  other text;
  op bigint;
BEGIN
  FOREACH op IN ARRAY p_ops LOOP
    INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id) VALUES (p_merchant, op, p_id) ON CONFLICT (merchant_id, operation_id) DO NOTHING;
    SELECT transaction_id INTO other FROM ledger_operation_claims WHERE merchant_id = p_merchant AND operation_id = op;
    IF other <> p_id THEN
      RAISE EXCEPTION 'operation % is claimed by %', op, other USING ERRCODE = 'LB001';
    END IF;
  END LOOP;
END;
$$;

-- A new record, its key, its work row, operation claims, accrual keys and attention entries, as
-- one statement (one commit, nothing left idle in a transaction). Answers created = false and the
-- stored record when the key exists (stored is null when that record was archived). Raises LB001
-- (an operation another record claims) or LB002 (an accrual key another record holds).
CREATE FUNCTION ledger_insert(p_id text, p_merchant text, p_pos text, p_order_id text, p_status text, p_open boolean,
                              p_created_at timestamptz, p_updated_at timestamptz, p_record jsonb, p_due_at timestamptz, p_due_needs_verifier boolean,
                              p_keys text[], p_unsettled_amount bigint, p_ops bigint[], p_refund_ids text[], p_attention jsonb,
                              OUT created boolean, OUT stored jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ledger_keys (transaction_id, merchant_id, created_at, order_id) VALUES (p_id, p_merchant, p_created_at, p_order_id) ON CONFLICT (transaction_id) DO NOTHING;
  IF NOT FOUND THEN
    created := false;
    SELECT r.record INTO stored FROM ledger_keys k JOIN ledger_records r ON r.created_at = k.created_at AND r.transaction_id = k.transaction_id WHERE k.transaction_id = p_id;
    RETURN;
  END IF;
  PERFORM ledger_take_claims(p_id, p_merchant, p_ops);
  IF cardinality(p_keys) > 0 THEN
    PERFORM ledger_hold_keys(p_id, p_keys, '{}'::text[]);
  END IF;
  INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, merchant_id, refund_ids, attention)
  VALUES (p_id, 1, p_pos, p_order_id, p_status, p_open, p_created_at, p_updated_at, p_record, p_merchant, p_refund_ids, jsonb_array_length(p_attention) > 0);
  PERFORM ledger_put_work(p_id, p_merchant, p_created_at, p_updated_at, p_status, p_open, p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount);
  IF jsonb_array_length(p_attention) > 0 THEN
    INSERT INTO ledger_attention (transaction_id, kind, merchant_id, since, created_at)
    SELECT p_id, a ->> 'kind', p_merchant, (a ->> 'since')::timestamptz, p_created_at FROM jsonb_array_elements(p_attention) a;
  END IF;
  created := true;
END;
$$;

-- The compare-and-set of migration 4 on the partitioned records (found by their primary key), with
-- the work row, refund ids and attention entries in the same statement. p_synchronous = false
-- commits without waiting for the WAL flush: only for a write whose loss (a database crash, never
-- a bridge's) the bridge re-verifies safely (store.ts UpdateOptions). Earlier builds' overloads are
-- dropped: they cannot write the partitioned table, so an instance of an earlier build fails at
-- its first write instead of writing what this schema would not index.
DROP FUNCTION ledger_update(text, integer, text, boolean, timestamptz, jsonb, bigint[]);
DROP FUNCTION ledger_update(text, integer, text, boolean, timestamptz, jsonb, bigint[], timestamptz, boolean);
DROP FUNCTION ledger_update(text, integer, text, boolean, timestamptz, jsonb, bigint[], timestamptz, boolean, text[], bigint);
DROP FUNCTION ledger_update(text, integer, text, boolean, timestamptz, jsonb, bigint[], timestamptz, boolean, text[], bigint, text);
CREATE FUNCTION ledger_update(p_id text, p_created_at timestamptz, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb,
                              p_ops bigint[], p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint, p_merchant text,
                              p_refund_ids text[], p_attention jsonb, p_synchronous boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  prev text[];
BEGIN
  IF NOT p_synchronous THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- The compare-and-set itself: its row lock keeps every other writer of this record out of what
  -- follows until this transaction ends (no SELECT ... FOR UPDATE first: that writes a lock record).
  UPDATE ledger_records
     SET version = p_expected + 1, status = p_status, open = p_open, updated_at = p_updated_at, record = p_record, refund_ids = p_refund_ids,
         attention = jsonb_array_length(p_attention) > 0
   WHERE created_at = p_created_at AND transaction_id = p_id AND version = p_expected;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  -- The keys the stored version held are its work row's (none once settled).
  IF p_open THEN
    SELECT accrual_keys INTO prev FROM ledger_work WHERE transaction_id = p_id;
    PERFORM ledger_put_work(p_id, p_merchant, p_created_at, p_updated_at, p_status, p_open, p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount);
  ELSE
    DELETE FROM ledger_work WHERE transaction_id = p_id RETURNING accrual_keys INTO prev;
  END IF;
  prev := coalesce(prev, '{}');
  DELETE FROM ledger_operation_claims WHERE merchant_id = p_merchant AND transaction_id = p_id AND NOT (operation_id = ANY (p_ops));
  PERFORM ledger_take_claims(p_id, p_merchant, p_ops);
  IF cardinality(p_keys) > 0 OR cardinality(prev) > 0 THEN
    PERFORM ledger_hold_keys(p_id, p_keys, prev);
  END IF;
  -- A probe when the record has no entries (most): nothing is written then.
  DELETE FROM ledger_attention WHERE transaction_id = p_id;
  IF jsonb_array_length(p_attention) > 0 THEN
    INSERT INTO ledger_attention (transaction_id, kind, merchant_id, since, created_at)
    SELECT p_id, a ->> 'kind', p_merchant, (a ->> 'since')::timestamptz, p_created_at FROM jsonb_array_elements(p_attention) a;
  END IF;
  RETURN true;
END;
$$;

-- Several records' writes of one kind as one statement (pg-store.ts WriteBatch): the writes of
-- concurrent checkouts, gathered while the previous batch was out, commit together (one commit,
-- one WAL flush for many). Each is made in a subtransaction of its own, in order, so one refused
-- (LB001: an operation another record claims; LB002: an accrual key another record holds) is rolled
-- back alone and answered with its code, and the others stand.
CREATE FUNCTION ledger_insert_batch(p_writes jsonb)
RETURNS TABLE (created boolean, stored jsonb, code text, message text, detail text) LANGUAGE plpgsql AS $$
DECLARE
  w jsonb;
BEGIN
  FOR w IN SELECT e.value FROM jsonb_array_elements(p_writes) WITH ORDINALITY AS e(value, n) ORDER BY e.n LOOP
    code := NULL; message := NULL; detail := NULL; stored := NULL;
    BEGIN
      SELECT i.created, i.stored INTO created, stored FROM ledger_insert(w ->> 'id', w ->> 'merchant', w ->> 'pos', w ->> 'orderId', w ->> 'status', (w ->> 'open')::boolean,
        (w ->> 'createdAt')::timestamptz, (w ->> 'updatedAt')::timestamptz, w -> 'record', (w ->> 'dueAt')::timestamptz, (w ->> 'needsVerifier')::boolean,
        ARRAY(SELECT jsonb_array_elements_text(w -> 'keys')), (w ->> 'unsettled')::bigint, ARRAY(SELECT jsonb_array_elements_text(w -> 'ops'))::bigint[],
        CASE WHEN jsonb_array_length(w -> 'refundIds') > 0 THEN ARRAY(SELECT jsonb_array_elements_text(w -> 'refundIds')) END, w -> 'attention') i;
    EXCEPTION WHEN SQLSTATE 'LB001' OR SQLSTATE 'LB002' THEN
      GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
      created := false;
    END;
    RETURN NEXT;
  END LOOP;
END;
$$;

CREATE FUNCTION ledger_update_batch(p_writes jsonb, p_synchronous boolean)
RETURNS TABLE (ok boolean, code text, message text, detail text) LANGUAGE plpgsql AS $$
DECLARE
  w jsonb;
BEGIN
  IF NOT p_synchronous THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  FOR w IN SELECT e.value FROM jsonb_array_elements(p_writes) WITH ORDINALITY AS e(value, n) ORDER BY e.n LOOP
    code := NULL; message := NULL; detail := NULL;
    BEGIN
      ok := ledger_update(w ->> 'id', (w ->> 'createdAt')::timestamptz, (w ->> 'expected')::integer, w ->> 'status', (w ->> 'open')::boolean, (w ->> 'updatedAt')::timestamptz,
        w -> 'record', ARRAY(SELECT jsonb_array_elements_text(w -> 'ops'))::bigint[], (w ->> 'dueAt')::timestamptz, (w ->> 'needsVerifier')::boolean,
        ARRAY(SELECT jsonb_array_elements_text(w -> 'keys')), (w ->> 'unsettled')::bigint, w ->> 'merchant',
        CASE WHEN jsonb_array_length(w -> 'refundIds') > 0 THEN ARRAY(SELECT jsonb_array_elements_text(w -> 'refundIds')) END, w -> 'attention', true);
    EXCEPTION WHEN SQLSTATE 'LB001' OR SQLSTATE 'LB002' THEN
      GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
      ok := false;
    END;
    RETURN NEXT;
  END LOOP;
END;
$$;
`,
    backfill: partitionRecords,
  },
  {
    version: 11,
    name: 'finding records: order and refund ids by prefix, customers by keyed hash; the payload each record came from',
    sql: `
-- The ledger's own settings: the customer search key (customer-index.ts), made once by the backfill below.
CREATE TABLE ledger_settings (
  name text PRIMARY KEY,
  value text NOT NULL
);

-- Each record under a keyed hash of each of its customer's identifiers (customer-index.ts): a
-- customer's records are found by looking a hash up, never by reading contacts. Written with the
-- record (a customer never changes), kept when its month is archived, like its key.
CREATE TABLE ledger_customers (
  hash text NOT NULL,
  transaction_id text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (hash, transaction_id)
);
-- A customer's records newest first (a search reads the newest CUSTOMER_SEARCH_DEPTH of each identifier).
CREATE INDEX ledger_customers_newest ON ledger_customers (hash, created_at DESC, transaction_id DESC);

-- Refund ids, A-Z folded (store.ts foldCase), by prefix (a "C" collation lets the primary key serve LIKE 'abc%').
CREATE TABLE ledger_refund_ids (
  refund_id text COLLATE "C" NOT NULL,
  transaction_id text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (refund_id, transaction_id)
);
DROP INDEX ledger_records_refund_ids;

-- Order ids by prefix, A-Z folded (store.ts foldCase).
DROP INDEX ledger_keys_order_id;
CREATE INDEX ledger_keys_order_prefix ON ledger_keys (${FOLD_CASE_SQL('order_id')} text_pattern_ops);

-- The POS payload each record was created from (store.ts KeptPayload), partitioned by the same
-- months as the records: archiving a month takes its payloads with it.
CREATE TABLE ledger_payloads (
  created_at timestamptz NOT NULL,
  transaction_id text NOT NULL,
  payload jsonb NOT NULL,
  PRIMARY KEY (created_at, transaction_id)
) PARTITION BY RANGE (created_at);

-- Migration 10's, plus the payloads' month partitions (every month: the payloads began with this migration).
CREATE OR REPLACE FUNCTION ledger_ensure_partitions(p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  m timestamptz := date_trunc('month', p_from AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  name text;
  made integer := 0;
  first_until timestamptz;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM generate_series(m, p_to - interval '1 microsecond', interval '1 month') g
                  WHERE to_regclass('ledger_payloads_' || to_char(g AT TIME ZONE 'UTC', 'YYYY_MM')) IS NULL
                     OR (to_regclass('ledger_records_' || to_char(g AT TIME ZONE 'UTC', 'YYYY_MM')) IS NULL
                         AND g >= coalesce((SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz
                                              FROM pg_class c WHERE c.oid = to_regclass('ledger_records_before_10')), '-infinity'))) THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(${0x4c42_4d49});
  SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz INTO first_until
    FROM pg_class c WHERE c.oid = to_regclass('ledger_records_before_10');
  WHILE m < p_to LOOP
    name := 'ledger_payloads_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
    IF to_regclass(name) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF ledger_payloads FOR VALUES FROM (%L) TO (%L)', name, m, (m AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC');
      made := made + 1;
    END IF;
    name := 'ledger_records_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
    IF to_regclass(name) IS NULL AND (first_until IS NULL OR m >= first_until) THEN
      BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF ledger_records FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = ${FILLFACTOR})', name, m, (m AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC');
        made := made + 1;
      EXCEPTION WHEN invalid_object_definition THEN
        NULL;
      END;
    END IF;
    m := (m AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
  END LOOP;
  RETURN made;
END;
$$;

-- Migration 10's insert, plus the record's customer index entries, its refund ids and its payload.
CREATE FUNCTION ledger_insert(p_id text, p_merchant text, p_pos text, p_order_id text, p_status text, p_open boolean,
                              p_created_at timestamptz, p_updated_at timestamptz, p_record jsonb, p_due_at timestamptz, p_due_needs_verifier boolean,
                              p_keys text[], p_unsettled_amount bigint, p_ops bigint[], p_refund_ids text[], p_attention jsonb,
                              p_customers text[], p_payload jsonb,
                              OUT created boolean, OUT stored jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT i.created, i.stored INTO created, stored FROM ledger_insert(p_id, p_merchant, p_pos, p_order_id, p_status, p_open, p_created_at, p_updated_at, p_record,
    p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount, p_ops, p_refund_ids, p_attention) i;
  IF NOT created THEN
    RETURN;
  END IF;
  IF cardinality(p_customers) > 0 THEN
    INSERT INTO ledger_customers (hash, transaction_id, created_at) SELECT h, p_id, p_created_at FROM unnest(p_customers) h ON CONFLICT DO NOTHING;
  END IF;
  PERFORM ledger_note_refund_ids(p_id, p_created_at, p_refund_ids);
  IF p_payload IS NOT NULL THEN
    INSERT INTO ledger_payloads (created_at, transaction_id, payload) VALUES (p_created_at, p_id, p_payload);
  END IF;
END;
$$;

-- Refund ids, folded, into their index: those the record did not list before are new rows.
CREATE FUNCTION ledger_note_refund_ids(p_id text, p_created_at timestamptz, p_refund_ids text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_refund_ids) > 0 THEN
    INSERT INTO ledger_refund_ids (refund_id, transaction_id, created_at) SELECT ${FOLD_CASE_SQL('r')}, p_id, p_created_at FROM unnest(p_refund_ids) r ON CONFLICT DO NOTHING;
  END IF;
END;
$$;

-- Migration 10's update keeps its name and arguments (ledger_update_batch calls it by name), and
-- notes the refund ids it newly lists into their index, in the same statement.
ALTER FUNCTION ledger_update(text, timestamptz, integer, text, boolean, timestamptz, jsonb, bigint[], timestamptz, boolean, text[], bigint, text, text[], jsonb, boolean)
  RENAME TO ledger_update_v10;
CREATE FUNCTION ledger_update(p_id text, p_created_at timestamptz, p_expected integer, p_status text, p_open boolean, p_updated_at timestamptz, p_record jsonb,
                              p_ops bigint[], p_due_at timestamptz, p_due_needs_verifier boolean, p_keys text[], p_unsettled_amount bigint, p_merchant text,
                              p_refund_ids text[], p_attention jsonb, p_synchronous boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ledger_update_v10(p_id, p_created_at, p_expected, p_status, p_open, p_updated_at, p_record, p_ops, p_due_at, p_due_needs_verifier, p_keys, p_unsettled_amount,
                           p_merchant, p_refund_ids, p_attention, p_synchronous) THEN
    RETURN false;
  END IF;
  PERFORM ledger_note_refund_ids(p_id, p_created_at, p_refund_ids);
  RETURN true;
END;
$$;

CREATE OR REPLACE FUNCTION ledger_insert_batch(p_writes jsonb)
RETURNS TABLE (created boolean, stored jsonb, code text, message text, detail text) LANGUAGE plpgsql AS $$
DECLARE
  w jsonb;
BEGIN
  FOR w IN SELECT e.value FROM jsonb_array_elements(p_writes) WITH ORDINALITY AS e(value, n) ORDER BY e.n LOOP
    code := NULL; message := NULL; detail := NULL; stored := NULL;
    BEGIN
      SELECT i.created, i.stored INTO created, stored FROM ledger_insert(w ->> 'id', w ->> 'merchant', w ->> 'pos', w ->> 'orderId', w ->> 'status', (w ->> 'open')::boolean,
        (w ->> 'createdAt')::timestamptz, (w ->> 'updatedAt')::timestamptz, w -> 'record', (w ->> 'dueAt')::timestamptz, (w ->> 'needsVerifier')::boolean,
        ARRAY(SELECT jsonb_array_elements_text(w -> 'keys')), (w ->> 'unsettled')::bigint, ARRAY(SELECT jsonb_array_elements_text(w -> 'ops'))::bigint[],
        CASE WHEN jsonb_array_length(w -> 'refundIds') > 0 THEN ARRAY(SELECT jsonb_array_elements_text(w -> 'refundIds')) END, w -> 'attention',
        ARRAY(SELECT jsonb_array_elements_text(w -> 'customers')), CASE WHEN jsonb_typeof(w -> 'payload') = 'object' THEN w -> 'payload' END) i;
    EXCEPTION WHEN SQLSTATE 'LB001' OR SQLSTATE 'LB002' THEN
      GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
      created := false;
    END;
    RETURN NEXT;
  END LOOP;
END;
$$;
`,
    backfill: indexCustomersAndRefunds,
  },
  {
    version: 12,
    name: 'one captured delivery, one account: verified deliveries bound to the account they were first taken for',
    sql: `
-- A delivery whose account is named outside its signature (store.ts bindDelivery): the digest of
-- its signed bytes and the account it was first taken for. Insert-once, never expired.
CREATE TABLE ledger_delivery_bindings (
  pos text NOT NULL,
  key text NOT NULL,
  account text NOT NULL,
  bound_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (pos, key)
);
`,
  },
  {
    version: 13,
    name: "accruals a person settled without naming their operation, found by amount as the unsettled are",
    sql: `
-- record.ts personSettledAt: such a record is settled (so it has no ledger_work row), yet its
-- operation is in the history claimed by no record, so the history verifier weighs it beside the
-- unsettled accruals of its amount until it is released. Few rows: a partial index.
CREATE INDEX ledger_records_person_settled ON ledger_records (merchant_id, ((record #>> '{accrual,check,amount}')::bigint)) WHERE (record -> 'accrual') ? 'personSettledAt';
`,
  },
];
