/**
 * What the core answers a POS or an operator about one record. It speaks of outcomes, not of HTTP:
 * `http/` maps `settled` to 200, `in_progress` to 202 and `unknown_order` to 404, in one place.
 */
import { FINAL_STATUSES, isOpen, isOrphanReversal, ledgerKey, merchantOf, type LedgerRecord, type LedgerStatus } from '../state/record.js';
import type { RecordStore } from '../ledger/store.js';

export type AnswerOutcome =
  /** Final now: the record (and its remainder, if any) has nothing left in flight. */
  | 'settled'
  /** Recorded durably; delivery continues in the background. */
  | 'in_progress'
  /** A refund of an order neither the ledger nor the loyalty service knows. */
  | 'unknown_order';

export interface Answer {
  record: LedgerRecord;
  /** The order or refund was already recorded: its recorded outcome, no new upstream call. */
  repeat: boolean;
  refundId?: string;
  /** After a partial refund: the record that accrues what remains. */
  remainder?: { transactionId: string; status: LedgerStatus };
  outcome: AnswerOutcome;
}

export async function answerFor(store: Pick<RecordStore, 'get'>, record: LedgerRecord, repeat: boolean, refundId?: string): Promise<Answer> {
  // The remainder is the same merchant's record: read by its ledger key (a bare transactionId is the default merchant's).
  const child = record.remainderTransactionId ? await store.get(ledgerKey(merchantOf(record), record.remainderTransactionId)) : undefined;
  const remainder = child ? { transactionId: child.transactionId, status: child.status } : undefined;
  const settled = FINAL_STATUSES.has(record.status) && !isOpen(record) && (!child || (FINAL_STATUSES.has(child.status) && !isOpen(child)));
  return { record, repeat, refundId, remainder, outcome: isOrphanReversal(record) ? 'unknown_order' : settled ? 'settled' : 'in_progress' };
}
