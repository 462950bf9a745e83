/** Chooses the ledger store from LEDGER_URL. */
import { FileLedgerStore } from './file-store.js';
import type { LedgerStore } from './store.js';

export function openStore(ledgerUrl: string): LedgerStore {
  if (ledgerUrl.startsWith('file:')) return FileLedgerStore.fromUrl(ledgerUrl);
  throw new Error(`LEDGER_URL ${ledgerUrl.replace(/\/\/[^@/]*@/, '//***@')} is not supported by this build: use file:<path>`);
}
