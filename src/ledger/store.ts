/**
 * The one interface every ledger store implements (JSON files now, PostgreSQL next). Stores are
 * dumb and safe: they keep records and enforce the two rules that make "exactly once" hold across
 * concurrent writers: `insert` creates a transactionId at most once, and `update` is a
 * compare-and-set on `version`. Every store passes `test/ledger/store-contract.ts`.
 */
import type { LedgerRecord, LedgerStatus } from './record.js';

export interface ListQuery {
  status?: LedgerStatus;
  pos?: string;
  /** Inclusive bounds on `createdAt`. */
  from?: Date;
  to?: Date;
  offset: number;
  limit: number;
}

export interface LedgerStore {
  /** A short name for logs and readiness (`file`, `postgres`). */
  readonly kind: string;
  init(): Promise<void>;
  close(): Promise<void>;
  /** Throws when the store cannot be reached (readiness). */
  ping(): Promise<void>;
  get(transactionId: string): Promise<LedgerRecord | undefined>;
  /** Stores `record` (its `version` must be 1) unless the transactionId exists; answers the stored record either way. */
  insert(record: LedgerRecord): Promise<{ record: LedgerRecord; created: boolean }>;
  /**
   * Replaces the stored record when its version is `next.version - 1`; throws VersionConflictError
   * otherwise (another writer won) or when it does not exist.
   */
  update(next: LedgerRecord): Promise<LedgerRecord>;
  /** Newest first. */
  list(query: ListQuery): Promise<{ items: LedgerRecord[]; total: number }>;
  /** Records with work left (see `isOpen`), oldest first, at most `limit`. */
  listOpen(limit: number): Promise<LedgerRecord[]>;
  /** The transactionId that has claimed this upstream operation id, if any. */
  findOperationClaim(operationId: number): Promise<string | undefined>;
  count(): Promise<number>;
}
