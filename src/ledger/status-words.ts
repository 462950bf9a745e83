/**
 * The words a person reads for each ledger status: its name in a sentence or on a badge, and what it
 * means (docs/how-it-works.md "Ledger states" says the same at length). Written here once, beside no
 * copy: the operator console reads them from the bridge (`GET /admin/vocabulary.json`,
 * src/http/routes/console.ts), so a status added to LEDGER_STATUSES without its words fails the
 * type-check here rather than showing as a raw code on the page.
 */
import type { LedgerStatus } from '../state/record.js';

/** A status as a person names it: `in_doubt` → "In doubt". */
export const STATUS_LABELS: Readonly<Record<LedgerStatus, string>> = {
  skipped: 'Skipped',
  pending: 'Pending',
  in_doubt: 'In doubt',
  accrued: 'Accrued',
  partially_accrued: 'Partially accrued',
  failed: 'Failed',
  reversal_pending: 'Reversal pending',
  reversed: 'Reversed',
  reverse_failed: 'Reverse failed',
};

/** What a record in each status is, in a sentence. */
export const STATUS_DESCRIPTIONS: Readonly<Record<LedgerStatus, string>> = {
  skipped: 'No phone number, email or card serial: nothing to accrue, and a refund of it calls nothing.',
  pending: 'Recorded; the accrual has not happened yet (or provably did not) and is being delivered.',
  in_doubt: 'The accrual (or the reversal) may or may not have happened: it is verified in the loyalty history, or settled by a person, before anything is sent again.',
  accrued: 'Every card result succeeded.',
  partially_accrued: 'Some card results failed (each error is kept); a person settles them in the loyalty service.',
  failed: 'The loyalty service refused the accrual; sending the same again cannot help.',
  reversal_pending: 'A refund is recorded; the reversal waits for its round, or for the accrual to settle.',
  reversed: 'Reversed at the loyalty service; after a partial refund, its remainder record accrues what remains.',
  reverse_failed: 'The loyalty service refused the reversal, or does not know the transaction.',
};
