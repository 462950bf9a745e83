/**
 * The PostgreSQL ledger's schema, as versioned migrations applied in order at start-up and by
 * `npm run migrate`. Applied versions are recorded in `ledger_schema_migrations`; an advisory lock
 * makes several instances starting at once apply each migration exactly once. Never edit a
 * migration that has shipped: add the next version.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
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
];
