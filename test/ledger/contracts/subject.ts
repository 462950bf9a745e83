/**
 * How a contract suite gets its store: `makeStore` is called before every test and must return an
 * initialised (`init()` done), empty store. `reopen()` closes the store it handed out last (the first
 * one, or the previous reopen's) and answers a new, initialised store on the same location.
 * `cleanup()` closes the current store and removes the location.
 *
 * A suite is typed by the aggregate it holds the stores to (`RecordStore`, `MerchantStore`, …), so
 * it can speak only through that interface: nothing in it may know how a store keeps its data.
 */
import { afterEach, beforeEach } from '@jest/globals';
import type { StoreLifecycle } from '../../../src/ledger/store.js';

export interface StoreUnderTest<S> {
  store: S & StoreLifecycle;
  reopen(): Promise<S & StoreLifecycle>;
  cleanup(): Promise<void>;
}

export type MakeStore<S> = () => Promise<StoreUnderTest<S>>;

/**
 * Makes the running test's store fresh before each test (handing it to `use`) and cleans it up after.
 * Answers `reopen`: on the same location, handing the new store to `use` as well, so the suite's
 * `store` is always the one in use.
 */
export function storeForEachTest<S>(makeStore: MakeStore<S>, use: (store: S & StoreLifecycle) => void): () => Promise<S & StoreLifecycle> {
  let underTest: StoreUnderTest<S>;
  beforeEach(async () => {
    underTest = await makeStore();
    use(underTest.store);
  });
  afterEach(async () => {
    await underTest.cleanup();
  });
  return async () => {
    const reopened = await underTest.reopen();
    use(reopened);
    return reopened;
  };
}
