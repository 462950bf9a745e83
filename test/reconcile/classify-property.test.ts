/**
 * The classification over many orders at once, each given a fate at random (agrees everywhere, or
 * one of the ways the sides part): every planted difference is found exactly once, of its kind and
 * naming its order or operation, and nothing else is found, whatever the mix and the order of the inputs.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { LedgerRecord } from '../../src/state/record.js';
import type { Operation } from '../../src/loyalty/contract.js';
import { classify, type DifferenceKind } from '../../src/reconcile/classify.js';
import type { PosEntry } from '../../src/reconcile/pos-source.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

const FATES = ['clean', 'refunded', 'missing_in_ledger', 'not_in_history', 'unclaimed_operation', 'reopened', 'refund_not_recorded', 'reversal_not_in_history', 'double'] as const;
type Fate = (typeof FATES)[number];

/** The three sides for orders O-0, O-1, … each meeting its fate, and the differences that must be found. */
function world(fates: Fate[]) {
  const pos: PosEntry[] = [];
  const ledger: LedgerRecord[] = [];
  const history: Operation[] = [];
  const expected: [DifferenceKind, string | number][] = [];
  let nextOp = 1;
  fates.forEach((fate, i) => {
    const orderId = `O-${i}`;
    const transactionId = `generic:${orderId}`;
    const card = `11-${100000 + i}-1`;
    const cents = 1000 + i;
    const sum = cents / 100;
    const at = minutes(i);
    const sale = (amountCents = cents): PosEntry => ({ kind: 'sale', pos: 'generic', orderId, transactionId, paid: true, amountCents, updatedAt: at });
    const operation = (purchaseSum: number, createdAt = at): Operation => ({ id: nextOp++, cardId: card, eventId: 24, purchaseSum, createdAt });
    const record = (opId: number): LedgerRecord => {
      const r = makeRecord(transactionId, { accrual: 'accrued', operationIds: [opId], amount: cents, at: i });
      r.accrual.results = r.accrual.results.map((res) => ({ ...res, serialNumber: card }));
      return r;
    };
    const reversed = (r: LedgerRecord): LedgerRecord => ({ ...r, status: 'reversed', reversal: { ...r.reversal, state: 'reversed', refundIds: [`R-${i}`], requestedAt: at } });
    switch (fate) {
      case 'clean': {
        const op = operation(sum);
        pos.push(sale());
        ledger.push(record(op.id));
        history.push(op);
        break;
      }
      case 'refunded': {
        const op = operation(sum);
        pos.push(sale(), { kind: 'refund', pos: 'generic', orderId, transactionId, refundId: `R-${i}`, updatedAt: at });
        ledger.push(reversed(record(op.id)));
        history.push(op, operation(-sum, minutes(i + 1)));
        break;
      }
      case 'missing_in_ledger':
        pos.push(sale());
        expected.push(['missing_in_ledger', transactionId]);
        break;
      case 'not_in_history':
        pos.push(sale());
        ledger.push(record(nextOp++));
        expected.push(['not_in_history', transactionId]);
        break;
      case 'unclaimed_operation': {
        const op = { ...operation(sum), cardId: `99-${i}` };
        history.push(op);
        expected.push(['unclaimed_operation', op.id]);
        break;
      }
      case 'reopened': {
        const op = operation(sum);
        pos.push(sale(cents + 500));
        ledger.push(record(op.id));
        history.push(op);
        expected.push(['amount_mismatch', transactionId]);
        break;
      }
      case 'refund_not_recorded': {
        const op = operation(sum);
        pos.push(sale(), { kind: 'refund', pos: 'generic', orderId, transactionId, refundId: `R-${i}`, updatedAt: at });
        ledger.push(record(op.id));
        history.push(op);
        expected.push(['refund_not_reversed', transactionId]);
        break;
      }
      case 'reversal_not_in_history': {
        const op = operation(sum);
        pos.push(sale(), { kind: 'refund', pos: 'generic', orderId, transactionId, refundId: `R-${i}`, updatedAt: at });
        ledger.push(reversed(record(op.id)));
        history.push(op);
        expected.push(['refund_not_reversed', transactionId]);
        break;
      }
      case 'double': {
        // The same accrual booked twice at the loyalty service: the second operation is nobody's.
        const op = operation(sum);
        const twice = operation(sum, minutes(i + 1));
        pos.push(sale());
        ledger.push(record(op.id));
        history.push(op, twice);
        expected.push(['unclaimed_operation', twice.id]);
        break;
      }
    }
  });
  return { pos, ledger, history, expected };
}

describe('classify over a random mix of fates', () => {
  it('finds every planted difference exactly once and nothing else, whatever the order of the inputs', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...FATES), { maxLength: 40 }), fc.integer(), (fates, seed) => {
        const { pos, ledger, history, expected } = world(fates);
        const shuffled = <T>(items: T[]) => fc.sample(fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }), { numRuns: 1, seed })[0]!;
        const found = classify({ merchantId: 'm1', from: new Date(minutes(-1)), to: new Date(minutes(1000)), pos: shuffled(pos), ledger: shuffled(ledger), claimants: [], history: shuffled(history), clockSkewMs: 60_000 });
        const key = ([kind, id]: [string, string | number]) => `${kind} ${id}`;
        expect(found.map((d) => key([d.kind, d.kind === 'unclaimed_operation' ? d.operationId! : d.transactionId!])).sort()).toEqual(expected.map(key).sort());
      }),
      { numRuns: 200 },
    );
  });
});
