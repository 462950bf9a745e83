/**
 * The words a person reads for each ledger status, and for each outcome a person may resolve a
 * record with: its name in a sentence or on a badge, and what it means (docs/how-it-works.md "Ledger states" says the same at length). Written here once, beside no
 * copy: the operator console reads them from the bridge (`GET /admin/vocabulary.json`,
 * src/http/routes/console.ts), so a status added to LEDGER_STATUSES without its words fails the
 * type-check here rather than showing as a raw code on the page.
 */
import type { ResolveOutcome } from '../core/transitions.js';
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

/** Each outcome of `/resolve` as a person picks it: its name, and what the bridge then does (the console shows both beside the choice). */
export const RESOLVE_OUTCOME_WORDS: Readonly<Record<ResolveOutcome, { label: string; effect: string }>> = {
  accrued: { label: 'Accrued', effect: 'The accrual happened upstream (you found its operation): the record becomes accrued. Nothing is sent.' },
  not_accrued: { label: 'Not accrued', effect: 'Nothing was booked upstream: the accrual goes back to pending and the bridge sends it again.' },
  reversed: { label: 'Reversed', effect: 'The reversal happened upstream, or you finished its failed cards by hand: the record becomes reversed (a partial refund then accrues what remains). Nothing is sent.' },
  not_reversed: { label: 'Not reversed', effect: 'The reversal did not happen upstream: it goes back to pending and the bridge sends it again.' },
};
