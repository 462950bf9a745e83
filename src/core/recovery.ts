/**
 * Recovery at start-up. Records still marked in flight were mid-call when the last process stopped:
 * the call may have gone out, so they are put in doubt (verified before anything is resent). After
 * the file ledger skipped damaged journal lines, or the machine restarted under it (an OS crash can
 * cut the journal's tail cleanly), any record may have lost its latest lines, so every side that
 * could have been called is put in doubt too (`transitions.doubtAfterDamage`).
 */
import { AccrualKeyHeldError } from '../kernel/errors.js';
import { awaitsRemainder, keyOf, ledgerKey, merchantOf, type LedgerRecord } from '../state/record.js';
import type { RecordStore } from '../ledger/store.js';
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
    for await (const record of movingOnTheirOwn(this.writer.store)) {
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
    // Every open record, those waiting for a person too: a partial reversal in doubt waits for one,
    // and lost lines may have created and accrued its remainder (doubtAfterDamage marks it so).
    for await (const open of everyOpen(this.writer.store)) {
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

/** Records read per page at start-up. */
const PAGE = 500;

/**
 * The open records the bridge moves by itself, a page at a time (`dueOnly`): a call in flight is
 * among them, and a remainder to create. Those waiting for a person (a reversal in doubt, an accrual
 * in doubt the bridge cannot verify) are left out: a lost line cannot make them more doubtful than
 * they are, and however many pile up, start-up does not read them.
 */
async function* movingOnTheirOwn(store: Pick<RecordStore, 'listOpen'>): AsyncGenerator<LedgerRecord> {
  for (let page = await store.listOpen({ limit: PAGE, dueOnly: true }); page.length > 0; page = await store.listOpen({ limit: PAGE, dueOnly: true, after: page.at(-1) })) yield* page;
}

/** Every open record, a page at a time: after journal damage (rare), what is open is looked at whole. */
async function* everyOpen(store: Pick<RecordStore, 'listOpen'>): AsyncGenerator<LedgerRecord> {
  for (let page = await store.listOpen({ limit: PAGE }); page.length > 0; page = await store.listOpen({ limit: PAGE, after: page.at(-1) })) yield* page;
}
