/**
 * The one way the core changes a ledger record: read it, decide with a pure transition
 * (`transitions.ts`), write the next version as a compare-and-set. Within this process, changes to
 * one record are serialised by a keyed lock; across instances, the store's compare-and-set decides,
 * and a change that lost the race (VersionConflictError) is decided again on the record read again:
 * the one conflict-retry rule of the core. A transition that no longer applies to what was read
 * says so itself (it answers undefined, or throws a ConflictError for the caller to show).
 */
import { echoed, NotFoundError, VersionConflictError } from '../kernel/errors.js';
import { KeyedMutex } from '../kernel/keyed-mutex.js';
import { transactionIdOf, type LedgerRecord } from '../state/record.js';
import type { InsertOptions, LedgerStore, StoreWithoutRecordWrites, UpdateOptions } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import { nextVersion, type Transition } from './transitions.js';

/** How often a change is decided again after another writer won the race. */
const MAX_DECISIONS = 5;

export class RecordWriter {
  readonly #locks = new KeyedMutex();
  readonly #store: LedgerStore;
  /** The ledger for reads and the other aggregates; a record is written only through this writer. */
  readonly store: StoreWithoutRecordWrites;

  constructor(
    store: LedgerStore,
    private readonly logger: Logger,
    private readonly clock: () => Date,
    /** Told of each record written (the metric of the last good write: an outage shows as its age). */
    private readonly onWritten: () => void = () => undefined,
  ) {
    this.#store = store;
    this.store = store;
  }

  /** Inserts a new record (`LedgerStore.insert`: insert-once, the holder answered when the key is taken). */
  async insert(record: LedgerRecord, options?: InsertOptions): Promise<{ record: LedgerRecord; created: boolean }> {
    const inserted = await this.#store.insert(record, options);
    if (inserted.created) this.onWritten();
    return inserted;
  }

  now(): Date {
    return this.clock();
  }

  /** The record under this ledger key (`keyOf`: its transactionId within its merchant). */
  async require(key: string): Promise<LedgerRecord> {
    const record = await this.store.get(key);
    if (!record) throw new NotFoundError(`no ledger record ${echoed(transactionIdOf(key))}`);
    return record;
  }

  /** Runs `work` holding this process's lock on the record (for steps that read and write more than one thing). */
  locked<T>(key: string, work: () => Promise<T>): Promise<T> {
    return this.#locks.run(key, work);
  }

  /**
   * Writes the next version of `record` (the version read) after `transition`. Throws
   * VersionConflictError when another writer got there first: callers that may decide again use
   * `change`; callers whose decision was about that exact version (a claim to call) stay out.
   */
  async write(record: LedgerRecord, transition: Transition, options?: UpdateOptions): Promise<LedgerRecord> {
    const next = nextVersion(record, transition, this.clock());
    const written = await this.#store.update(next, options);
    this.onWritten();
    if (next.status !== record.status) this.logger.info({ transactionId: next.transactionId, from: record.status, to: next.status }, 'ledger status changed');
    return written;
  }

  /**
   * Reads the record under the lock, asks `decide` for a transition, and writes it; when another
   * instance wrote the record in between, reads it again and decides again. Answers the record as
   * written, or as read when `decide` answered undefined (nothing to change). `options`: the store's
   * (`UpdateOptions`: whether the write must be durable before it is acknowledged). `known`: the
   * version the caller last wrote or read, decided on first without reading it again (a call's
   * outcome, written over the in-flight marker this process wrote): the compare-and-set still
   * refuses it if anyone wrote the record since, and the next decision reads it.
   */
  async change(key: string, decide: (record: LedgerRecord) => Transition | undefined | Promise<Transition | undefined>, options?: UpdateOptions, known?: LedgerRecord): Promise<LedgerRecord> {
    for (let decision = 1; ; decision++) {
      try {
        return await this.#locks.run(key, async () => {
          const record = decision === 1 && known ? known : await this.require(key);
          const transition = await decide(record);
          return transition ? this.write(record, transition, options) : record;
        });
      } catch (error) {
        if (!(error instanceof VersionConflictError) || decision >= MAX_DECISIONS) throw error;
      }
    }
  }
}
