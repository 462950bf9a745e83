/** Chooses the ledger store from LEDGER_URL. */
import { FileLedgerStore } from './file-store.js';
import { PostgresLedgerStore, redactUrl } from './pg-store.js';
import type { LedgerStore } from './store.js';

export function openStore(ledgerUrl: string): LedgerStore {
  if (ledgerUrl.startsWith('file:')) return FileLedgerStore.fromUrl(ledgerUrl);
  if (/^postgres(ql)?:\/\//.test(ledgerUrl)) return new PostgresLedgerStore(ledgerUrl);
  throw new Error(`LEDGER_URL ${redactUrl(ledgerUrl)} is not supported: use file:<path> or postgres://…`);
}
