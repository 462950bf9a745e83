/** Chooses the ledger store from LEDGER_URL. */
import { FileLedgerStore } from './file-store.js';
import { PostgresLedgerStore, redactUrl } from './pg-store.js';
import { LedgerLockedError } from './process-lock.js';
import type { LedgerStore } from './store.js';

/** `fileLockWaitMs`: how long a file ledger's start waits for a bridge still stopping on it (see ProcessLock); `poolSize`: PostgreSQL connections at most (LEDGER_POOL_SIZE). */
export function openStore(ledgerUrl: string, options: { fileLockWaitMs?: number; poolSize?: number } = {}): LedgerStore {
  if (ledgerUrl.startsWith('file:')) return FileLedgerStore.fromUrl(ledgerUrl, { lockWaitMs: options.fileLockWaitMs });
  if (/^postgres(ql)?:\/\//.test(ledgerUrl)) return new PostgresLedgerStore(ledgerUrl, { poolSize: options.poolSize });
  throw new Error(`LEDGER_URL ${redactUrl(ledgerUrl)} is not supported: use file:<path> or postgres://…`);
}

/** Causes of a ledger that cannot be reached, by the code Node or the PostgreSQL driver gives them. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET']);

/**
 * Why the ledger could not be opened at start-up, in one line naming LEDGER_URL and what to do, for
 * the causes an operator meets first (docs/configuration.md): PostgreSQL unreachable, its database
 * missing, its user refused; a file ledger held by another process, or in a folder it may not write.
 * Undefined for anything else (a bug, shown as one).
 */
export function ledgerStartProblem(error: unknown, ledgerUrl: string): string | undefined {
  const url = redactUrl(ledgerUrl);
  const { code, message } = error as { code?: string; message?: string };
  if (error instanceof LedgerLockedError) return `LEDGER_URL ${url}: ${message}: stop the other bridge (or sandbox of this clone) first, or point LEDGER_URL at another file`;
  if (code && UNREACHABLE.has(code)) {
    const where = /^postgres/.test(ledgerUrl) ? 'start PostgreSQL there, or set LEDGER_URL to where it runs' : 'check the path';
    const said = message?.replace(/^connect /, '');
    return `LEDGER_URL ${url} cannot be reached (${said?.includes(code) ? said : code}): ${where}`;
  }
  if (code === '3D000') return `LEDGER_URL ${url}: ${message}: create it (createdb <name>), or name a database that exists`;
  if (code === '28P01' || code === '28000') return `LEDGER_URL ${url}: the server refused its user (${message}): check the user and password in LEDGER_URL`;
  if (code === 'EACCES' || code === 'EROFS' || code === 'EPERM') return `LEDGER_URL ${url}: ${message}: the bridge must be able to write the ledger's folder`;
  return undefined;
}
