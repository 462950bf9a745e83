/** The in-memory store the core's unit tests use passes the same contract as the file and PostgreSQL stores. */
import { emptyMemoryLedger, MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { ledgerStoreContract } from './store-contract.js';

ledgerStoreContract('MemoryLedgerStore', async () => {
  const state = emptyMemoryLedger();
  let store = new MemoryLedgerStore(state);
  await store.init();
  return {
    store,
    async reopen() {
      await store.close();
      store = new MemoryLedgerStore(state);
      await store.init();
      return store;
    },
    async cleanup() {
      await store.close();
    },
  };
});
