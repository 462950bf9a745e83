/** `dueOf`: when the worker looks at a record again, for every state `TransactionService#claim` tells apart. */
import { describe, expect, it } from '@jest/globals';
import { dueOf, isOpen, type LedgerRecord } from '../../src/ledger/record.js';
import { makeRecord, minutes, type RecordOptions } from './store-contract.js';

const at = (n: number): number => Date.parse(minutes(n));

/** A record written at minute 10, whose next round (when `pause` is given) is at minute 10 + pause. */
function written(options: RecordOptions, change: (r: LedgerRecord) => void = () => {}, pause?: number): LedgerRecord {
  const record = { ...makeRecord('generic:D-1', options), updatedAt: minutes(10) };
  change(record);
  if (pause !== undefined) record.nextAttemptAt = minutes(10 + pause);
  return record;
}

describe('dueOf', () => {
  it.each<[string, LedgerRecord, ReturnType<typeof dueOf>]>([
    ['a pending accrual never tried', written({ accrual: 'pending' }), { atMs: at(10), needsVerifier: false }],
    ['a pending accrual after a round without an answer: when its pause ends', written({ accrual: 'pending' }, undefined, 60), { atMs: at(70), needsVerifier: false }],
    ['an accrual in doubt: when the history is checked, by the verifier only', written({ accrual: 'in_doubt' }, undefined, 5), { atMs: at(15), needsVerifier: true }],
    ['a pending reversal: when its pause ends', written({ accrual: 'accrued', reversal: 'pending' }, undefined, 30), { atMs: at(40), needsVerifier: false }],
    ['a pending reversal of a refused accrual: now, nothing to wait for', written({ accrual: 'failed', reversal: 'pending' }, undefined, 30), { atMs: at(10), needsVerifier: false }],
    ['a pending reversal of a skipped checkout: now', written({ accrual: 'skipped', reversal: 'pending' }), { atMs: at(10), needsVerifier: false }],
    ['a reversal in doubt: never, an operator must resolve it', written({ accrual: 'accrued', reversal: 'in_doubt' }, undefined, 5), undefined],
    ['a call in flight: now, whatever the pause says (a takeover may be needed)', written({ accrual: 'pending', inFlight: true }, undefined, 60), { atMs: at(10), needsVerifier: false }],
    ['an in-doubt accrual marked in flight: now, for anyone', written({ accrual: 'in_doubt', inFlight: true }, undefined, 60), { atMs: at(10), needsVerifier: false }],
    [
      'reversed for a partial refund, remainder not created yet: now',
      written({ accrual: 'accrued', reversal: 'reversed' }, (r) => (r.reversal.partial = { refundId: 'R-1', refundedCents: 100, remainderTransactionId: 'generic:D-1~r1', remainderCheck: r.accrual.check! })),
      { atMs: at(10), needsVerifier: false },
    ],
  ])('%s', (_name, record, due) => {
    expect(isOpen(record)).toBe(true);
    expect(dueOf(record)).toEqual(due);
  });

  it.each([
    ['accrued', written({ accrual: 'accrued' })],
    ['failed', written({ accrual: 'failed' }, undefined, 30)],
    ['skipped', written({ accrual: 'skipped' })],
    ['reversed', written({ accrual: 'accrued', reversal: 'reversed' })],
    ['reverse_failed', written({ accrual: 'accrued', reversal: 'failed' })],
    ['a refund with nothing to reverse', written({ accrual: 'failed', reversal: 'not_needed' })],
  ])('a settled record (%s) is never due', (_name, record) => {
    expect(isOpen(record)).toBe(false);
    expect(dueOf(record)).toBeUndefined();
  });
});
