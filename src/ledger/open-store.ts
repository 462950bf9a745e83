/** Chooses the ledger store from LEDGER_URL. */
import { FileLedgerStore } from './file-store.js';
import { PostgresLedgerStore, redactUrl } from './pg-store.js';
import type { LedgerStore } from './store.js';

/** `fileLockWaitMs`: how long a file ledger's start waits for a bridge still stopping on it (see ProcessLock). */
export function openStore(ledgerUrl: string, options: { fileLockWaitMs?: number } = {}): LedgerStore {
  if (ledgerUrl.startsWith('file:')) return FileLedgerStore.fromUrl(ledgerUrl, { lockWaitMs: options.fileLockWaitMs });
  if (/^postgres(ql)?:\/\//.test(ledgerUrl)) return new PostgresLedgerStore(ledgerUrl);
  throw new Error(`LEDGER_URL ${redactUrl(ledgerUrl)} is not supported: use file:<path> or postgres://…`);
}
