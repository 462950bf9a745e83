/**
 * The PostgreSQL ledger's schema, as versioned migrations applied in order at start-up and by
 * `npm run migrate`. Applied versions are recorded in `ledger_schema_migrations`; an advisory lock
 * makes several instances starting at once apply each migration exactly once. Never edit a
 * migration that has shipped: add the next version.
 */
import type pg from 'pg';
import { dueOf } from '../core/transitions.js';
import { accrualKeys, unsettledAmount, type LedgerRecord } from './record.js';

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
  await client.query(`DECLARE ledger_due_backfill NO SCROLL CURSOR FOR SELECT transaction_id, version, record FROM ledger_records WHERE open${undatedOnly ? " AND due_at = '-infinity'" : ''}`);
  for (;;) {
    const { rows } = await client.query<{ transaction_id: string; version: number; record: LedgerRecord }>(`FETCH ${BACKFILL_BATCH} FROM ledger_due_backfill`);
    if (rows.length === 0) break;
    const due = rows.map((r) => dueColumns(r.record));
    await client.query(
      `UPDATE ledger_records r SET due_at = k.due_at, due_needs_verifier = k.needs_verifier
         FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::boolean[]) AS k (transaction_id, version, due_at, needs_verifier)
        WHERE r.transaction_id = k.transaction_id AND r.version = k.version`,
      [rows.map((r) => r.transaction_id), rows.map((r) => r.version), due.map((d) => d.dueAt), due.map((d) => d.needsVerifier)],
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
];
