/**
 * Serialises async work per key inside one process (e.g. per transactionId), so two deliveries of
 * the same order in this process never interleave. It is a fast path, not the guarantee: across
 * processes the store's insert-once and compare-and-set are what keep the ledger exact.
 */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => current);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  get size(): number {
    return this.#tails.size;
  }
}
