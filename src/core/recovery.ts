/**
 * Recovery at start-up. Records still marked in flight were mid-call when the last process stopped:
 * the call may have gone out, so they are put in doubt (verified before anything is resent). After
 * the file ledger skipped damaged journal lines, or the machine restarted under it (an OS crash can
 * cut the journal's tail cleanly), any record may have lost its latest lines, so every side that
 * could have been called is put in doubt too (`transitions.doubtAfterDamage`).
 */
import { AccrualKeyHeldError } from '../errors.js';
import { awaitsRemainder, keyOf, ledgerKey, merchantOf } from '../ledger/record.js';
import { insertRemainder, type DeliveryService } from './delivery.js';
import type { RecordWriter } from './record-writer.js';
import { doubtAfterDamage, keyless, newRemainder, type TransitionOptions } from './transitions.js';

export class RecoveryService {
  constructor(
    private readonly writer: RecordWriter,
    private readonly delivery: DeliveryService,
    private readonly options: TransitionOptions,
  ) {}

  /** Answers how many records it put in doubt. */
  async recoverInterrupted(): Promise<number> {
    let recovered = 0;
    for (const record of await this.writer.store.listOpen(Number.MAX_SAFE_INTEGER)) {
      if (!this.delivery.abandoned(record)) continue;
      await this.writer.locked(keyOf(record), async () => {
        const current = await this.writer.store.get(keyOf(record));
        if (current && this.delivery.abandoned(current) && (await this.delivery.takeOver(current))) recovered++;
      });
    }
    return recovered;
  }

  /**
   * Run after `recoverInterrupted`. `cause` says why lines may be lost, for the records' history.
   * Answers how many records it changed or created.
   */
  async recoverAfterJournalDamage(cause = 'journal damage found at start-up'): Promise<number> {
    let changed = 0;
    for (const open of await this.writer.store.listOpen(Number.MAX_SAFE_INTEGER)) {
      await this.writer.locked(keyOf(open), async () => {
        const record = await this.writer.store.get(keyOf(open));
        if (!record || record.inFlight) return;
        const now = this.writer.now();
        const partial = record.reversal.partial;
        const remainderExists = partial ? Boolean(await this.writer.store.get(ledgerKey(merchantOf(record), partial.remainderTransactionId))) : false;
        if (awaitsRemainder(record) && partial && !remainderExists) {
          // The lost lines may have created and accrued the remainder: it is created in doubt from this version.
          if (await insertRemainder(this.writer, newRemainder(record, partial, now, this.options, record.updatedAt, cause))) changed++;
          return;
        }
        const transition = doubtAfterDamage(record, cause, now, this.options, remainderExists);
        if (!transition) return;
        try {
          await this.writer.write(record, transition);
        } catch (error) {
          // Both may have been sent in the lost lines, so neither can wait for the other: in doubt without the key.
          if (!(error instanceof AccrualKeyHeldError)) throw error;
          await this.writer.write(record, { ...transition, record: keyless(transition.record, error.holder) });
        }
        changed++;
      });
    }
    return changed;
  }
}
