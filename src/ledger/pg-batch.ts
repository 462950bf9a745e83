/**
 * Group commit for the PostgreSQL ledger's writes. Each write is one statement and one commit; under
 * load, the writes of concurrent checkouts that come while the previous one of their kind is out
 * are gathered and sent as one statement (the `ledger_*_batch` functions of migration 10), so they
 * commit together: one commit and one WAL flush for many checkouts, where each used to wait for
 * its own. A write alone goes out at once, as a single statement; nothing waits for company.
 *
 * A batch's writes are independent: the functions make each in a subtransaction of its own and
 * answer each one's outcome. If the batch as a whole fails (a deadlock with another instance's
 * batch, a connection lost), each of its writes is made again alone and answered alone: none is
 * lost, none is answered with another's error. A batch that did commit before its answer was lost
 * is then found done, as after any statement whose answer was lost: an insert answers the record
 * as stored, an update's compare-and-set is refused and the writer reads the record again.
 */

interface Waiting<I, O> {
  item: I;
  resolve: (out: O) => void;
  reject: (error: unknown) => void;
}

export class WriteBatch<I, O> {
  readonly #queue: Waiting<I, O>[] = [];
  #running = false;
  /** Batches sent and the writes they held (for the benchmark and tests). */
  readonly stats = { batches: 0, batched: 0, alone: 0 };

  constructor(
    /** Sends several writes as one statement; answers one outcome per write, in order. */
    private readonly sendMany: (items: I[]) => Promise<O[]>,
    /** Sends one write as its own statement. */
    private readonly sendOne: (item: I) => Promise<O>,
    private readonly max = 64,
  ) {}

  /** Resolves with this write's outcome once the statement that carried it has committed. */
  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (!this.#running) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, this.max);
        if (batch.length === 1) {
          this.stats.alone++;
          await this.sendOne(batch[0]!.item).then(batch[0]!.resolve, batch[0]!.reject);
          continue;
        }
        let outcomes: O[];
        try {
          outcomes = await this.sendMany(batch.map((w) => w.item));
          if (outcomes.length !== batch.length) throw new Error(`a batch of ${batch.length} writes answered ${outcomes.length} outcomes`);
        } catch {
          // Each write again, alone, with its own outcome or error.
          this.stats.alone += batch.length;
          await Promise.all(batch.map((w) => this.sendOne(w.item).then(w.resolve, w.reject)));
          continue;
        }
        this.stats.batches++;
        this.stats.batched += batch.length;
        batch.forEach((w, i) => w.resolve(outcomes[i]!));
      }
    } finally {
      this.#running = false;
    }
  }
}
