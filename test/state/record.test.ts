/** `dueOf`: when the worker looks at a record again, for every state the transitions tell apart; and what a record may accumulate. */
import { describe, expect, it } from '@jest/globals';
import { dueOf } from '../../src/core/transitions.js';
import { attentionOf } from '../../src/state/attention.js';
import { isOpen, RECORD_BOUNDS, withAttempts, withChangedDelivery, withHistoryEvent, type ChangedRepeats, type HistoryEvent, type LedgerRecord } from '../../src/state/record.js';
import type { Attempt } from '../../src/loyalty/calls.js';
import { makeRecord, minutes, type RecordOptions } from '../ledger/contracts/factories.js';

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
    ['a reversal in doubt: when the history is looked at for its entry, by the verifier only', written({ accrual: 'accrued', reversal: 'in_doubt' }, undefined, 5), { atMs: at(15), needsVerifier: true }],
    ['a reversal in doubt the history did not prove: never, an operator must resolve it', written({ accrual: 'accrued', reversal: 'in_doubt', reversalUnproven: true }, undefined, 5), undefined],
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

describe('what one record may accumulate', () => {
  const event = (n: number): HistoryEvent => ({ at: minutes(n), event: `event ${n}` });

  it('history keeps its first events and the latest, and counts what it folded between them', () => {
    let history: HistoryEvent[] = [];
    for (let n = 1; n <= 1000; n++) history = withHistoryEvent(history, event(n));
    expect(history).toHaveLength(RECORD_BOUNDS.historyEvents);
    const first = RECORD_BOUNDS.historyKeptFirst;
    expect(history.slice(0, first).map((e) => e.event)).toEqual(Array.from({ length: first }, (_, i) => `event ${i + 1}`));
    const marker = history[first]!;
    expect(marker.omitted).toBe(1000 - RECORD_BOUNDS.historyEvents + 1);
    expect(marker.event).toMatch(/^\d+ earlier events omitted/);
    // Every event is either kept or counted, and the latest are kept in order.
    expect(history.filter((e) => e.omitted === undefined)).toHaveLength(1000 - marker.omitted!);
    expect(history.at(-1)!.event).toBe('event 1000');
    expect(history.slice(first + 1).map((e) => Number(e.event.split(' ')[1]))).toEqual(Array.from({ length: RECORD_BOUNDS.historyEvents - first - 1 }, (_, i) => 1000 - (RECORD_BOUNDS.historyEvents - first - 2) + i));
  });

  it('history under the bound is kept whole', () => {
    const history = [event(1), event(2)];
    expect(withHistoryEvent(history, event(3))).toEqual([event(1), event(2), event(3)]);
    expect(history).toHaveLength(2);
  });

  it('attempts keep the first and the latest and count the rest', () => {
    const attempt = (n: number): Attempt => ({ operation: 'accrue', startedAt: minutes(n), finishedAt: minutes(n), request: { n } });
    let kept: Pick<LedgerRecord, 'attempts' | 'attemptsOmitted'> = { attempts: [] };
    for (let n = 1; n <= 300; n += 5) kept = withAttempts(kept, [1, 2, 3, 4, 5].map((i) => attempt(n + i - 1)));
    expect(kept.attempts).toHaveLength(RECORD_BOUNDS.attempts);
    expect(kept.attemptsOmitted).toBe(300 - RECORD_BOUNDS.attempts);
    expect(kept.attempts.slice(0, RECORD_BOUNDS.attemptsKeptFirst).map((a) => (a.request as { n: number }).n)).toEqual([1, 2, 3, 4, 5]);
    expect((kept.attempts.at(-1)!.request as { n: number }).n).toBe(300);
  });

  it('changed deliveries are counted, with the first and the latest few', () => {
    let changed: ChangedRepeats | undefined;
    for (let n = 1; n <= 500; n++) changed = withChangedDelivery(changed, { at: minutes(n), amountCents: n });
    expect(changed).toEqual({
      count: 500,
      first: [1, 2, 3].map((n) => ({ at: minutes(n), amountCents: n })),
      latest: [498, 499, 500].map((n) => ({ at: minutes(n), amountCents: n })),
    });
  });
});

describe('attentionOf: a call in doubt as the transitions plan it', () => {
  it.each<[string, LedgerRecord, string[]]>([
    ['an accrual in doubt: the history is asked (or a person)', written({ accrual: 'in_doubt' }), ['in_doubt']],
    ['an accrual in doubt the history matches with another record: ambiguous', written({ accrual: 'in_doubt' }, (r) => (r.accrual.ambiguousWith = ['generic:D-2'])), ['ambiguous']],
    ['a reversal in doubt', written({ accrual: 'accrued', reversal: 'in_doubt' }), ['in_doubt']],
    ['a reversal in doubt the history did not prove', written({ accrual: 'accrued', reversal: 'in_doubt', reversalUnproven: true }), ['in_doubt']],
    ['a call in flight: the bridge is moving it, nobody is asked', written({ accrual: 'in_doubt', inFlight: true }), []],
    ['settled', written({ accrual: 'accrued' }), []],
  ])('%s', (_name, record, kinds) => {
    expect(attentionOf(record).map((item) => item.kind)).toEqual(kinds);
  });

  it('both sides in doubt (a journal damaged under a refund waiting for its sale): the accrual is what is asked about first, as the plan settles it first', () => {
    const both = written({ accrual: 'in_doubt', reversal: 'in_doubt' });
    expect(attentionOf(both)).toEqual([expect.objectContaining({ kind: 'in_doubt', why: expect.stringMatching(/^the accrual was sent and its answer was lost/) })]);
  });
});
