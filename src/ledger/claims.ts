/**
 * What a record may claim, checked the same way by the memory and file stores (PostgreSQL checks the
 * same rules in its write function, `ledger_write`): an upstream operation proves one accrual, so an
 * operation id another record of the merchant holds is refused (ConflictError); an accrual key
 * (one unsettled accrual per customer and amount) another record holds is refused when this version
 * takes it newly (AccrualKeyHeldError), while a record already holding a key (`held`: the keys its
 * stored version has) keeps moving. Checked before anything changes, so a refused write leaves
 * everything as it was.
 */
import { AccrualKeyHeldError, ConflictError } from '../kernel/errors.js';
import { claimedOperationIds, keyOf, merchantOf, transactionIdOf, type LedgerRecord } from '../state/record.js';

/** Who holds a claim now, by the holder's ledger key. */
export interface ClaimHolders {
  operation(merchantId: string, operationId: number): string | undefined;
  accrualKey(accrualKey: string): string | undefined;
}

export function checkClaims(record: LedgerRecord, keys: readonly string[], held: readonly string[], holders: ClaimHolders): void {
  const key = keyOf(record);
  const merchant = merchantOf(record);
  for (const id of claimedOperationIds(record)) {
    const holder = holders.operation(merchant, id);
    if (holder !== undefined && holder !== key) throw new ConflictError(`operation ${id} is claimed by ${transactionIdOf(holder)}`);
  }
  for (const accrualKey of keys) {
    const holder = holders.accrualKey(accrualKey);
    // Accrual keys are per merchant (the merchant is hashed into them): the holder is this merchant's.
    if (holder !== undefined && holder !== key && !held.includes(accrualKey)) throw new AccrualKeyHeldError(record.transactionId, transactionIdOf(holder));
  }
}
