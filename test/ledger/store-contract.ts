/**
 * The LedgerStore contract, shared by every store (memory, files, PostgreSQL): one suite per
 * aggregate (test/ledger/contracts/), each speaking only through that aggregate's interface
 * (src/ledger/store.ts), so nothing here may know how a store keeps its data.
 *
 * Usage, from a `*.test.ts` file:
 *
 *   ledgerStoreContract('FileLedgerStore', async () => { ... return { store, reopen, cleanup }; });
 *
 * See contracts/subject.ts for what `makeStore` must answer.
 */
import type { LedgerStore } from '../../src/ledger/store.js';
import { auditStoreContract } from './contracts/audit.js';
import { backfillStateStoreContract } from './contracts/backfill-states.js';
import { deadLetterStoreContract } from './contracts/dead-letters.js';
import { merchantStoreContract } from './contracts/merchants.js';
import { recordStoreContract } from './contracts/records.js';
import { settingStoreContract } from './contracts/settings.js';
import type { MakeStore } from './contracts/subject.js';
import { webhookEventStoreContract } from './contracts/webhook-events.js';

export function ledgerStoreContract(name: string, makeStore: MakeStore<LedgerStore>): void {
  recordStoreContract(name, makeStore);
  merchantStoreContract(name, makeStore);
  deadLetterStoreContract(name, makeStore);
  auditStoreContract(name, makeStore);
  backfillStateStoreContract(name, makeStore);
  webhookEventStoreContract(name, makeStore);
  settingStoreContract(name, makeStore);
}
