/**
 * The history verifier's matching rules, one by one, against a scripted history and the in-memory
 * store: which operation proves an accrual in doubt, and when absence proves it did not happen.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { HistoryVerifier, type HistoryReader } from '../../src/core/history-verifier.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import type { LedgerRecord } from '../../src/state/record.js';
import type { Card, Operation } from '../../src/loyalty/contract.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

const SKEW_MS = 60_000;
const GRACE_MS = 5 * 60_000;
const PHONE = '+15550003333';
const CARD = '11-100001-2';

/** Operations on CARD; cards found by PHONE (and by EMAIL when `emails` names it). */
function history(operations: Partial<Operation>[], emails: Record<string, string[]> = {}): HistoryReader {
  const ops = operations.map((o, i) => ({ id: 100 + i, cardId: CARD, purchaseSum: 59.97, createdAt: minutes(10), eventId: 24, ...o }) as Operation);
  return {
    canVerify: true,
    async findCards(query) {
      if (query.phone === PHONE) return [{ id: CARD } as Card];
      if (query.email && emails[query.email]) return emails[query.email]!.map((id) => ({ id }) as Card);
      return [];
    },
    async listOperations(cardId) {
      return ops.filter((o) => o.cardId === cardId);
    },
  };
}

/** An accrual of 59.97 for PHONE in doubt since minute `since`. */
function inDoubt(id: string, since: number, customer: LedgerRecord['accrual']['customer'] = { phone: PHONE }): LedgerRecord {
  const r = makeRecord(id, { accrual: 'in_doubt', customer });
  r.accrual.inDoubtSince = minutes(since);
  return r;
}

let store: MemoryLedgerStore;
beforeEach(async () => {
  store = new MemoryLedgerStore();
  await store.init();
});

const verify = (reader: HistoryReader, record: LedgerRecord, atMinute: number) => new HistoryVerifier(reader, store, { graceMs: GRACE_MS, clockSkewMs: SKEW_MS }).verifyAccrual(record, new Date(minutes(atMinute)));

describe('matching an operation to an accrual in doubt', () => {
  it('the customer\'s card, the same sum, created after the attempt began, claimed by nobody: it happened', async () => {
    const record = inDoubt('generic:A', 9);
    await store.insert(record);
    expect(await verify(history([{}]), record, 11)).toEqual({ kind: 'happened', operationId: 100, cardId: CARD });
  });

  it('a wrong amount does not match', async () => {
    const record = inDoubt('generic:A', 9);
    await store.insert(record);
    expect(await verify(history([{ purchaseSum: 59.96 }, { purchaseSum: 5997 }]), record, 11)).toMatchObject({ kind: 'too_early' });
  });

  it('an operation older than the attempt less the clock skew does not match; within the skew it does', async () => {
    const record = inDoubt('generic:A', 20);
    await store.insert(record);
    expect(await verify(history([{ createdAt: minutes(18.9) }]), record, 21)).toMatchObject({ kind: 'too_early' });
    expect(await verify(history([{ createdAt: minutes(19.1) }]), record, 21)).toMatchObject({ kind: 'happened' });
  });

  it('an operation another record claimed does not match; one this record claimed does', async () => {
    const record = inDoubt('generic:A', 9);
    await store.insert(record);
    await store.insert(makeRecord('generic:other', { accrual: 'accrued', operationIds: [100] }));
    expect(await verify(history([{}]), record, 11)).toMatchObject({ kind: 'too_early' });
    expect(await verify(history([{}, { id: 101 }].map((o, i) => ({ ...o, id: 100 + i }))), record, 11)).toEqual({ kind: 'happened', operationId: 101, cardId: CARD });
  });

  it('absence proves nothing before the grace period ends, and everything after it', async () => {
    const record = inDoubt('generic:A', 10);
    await store.insert(record);
    expect(await verify(history([]), record, 10 + GRACE_MS / 60_000 - 0.01)).toMatchObject({ kind: 'too_early' });
    expect(await verify(history([]), record, 10 + GRACE_MS / 60_000)).toEqual({ kind: 'did_not_happen', examinedCards: 1 });
  });

  it('every look before the grace ends says the same moment, so the history keeps one line for them (the console counts repeats)', async () => {
    const record = inDoubt('generic:A2', 10);
    await store.insert(record);
    const early = await verify(history([]), record, 10.1);
    const later = await verify(history([]), record, 10 + GRACE_MS / 60_000 - 0.01);
    expect(early).toEqual(later);
    expect(early).toMatchObject({ kind: 'too_early', reason: expect.stringMatching(/conclusive at \d{4}-\d\d-\d\dT/) });
  });

  it('a card found only by email is searched too', async () => {
    const record = inDoubt('generic:A', 9, { phone: '+15559999999', email: 'ann@example.test' });
    await store.insert(record);
    expect(await verify(history([{}], { 'ann@example.test': [CARD] }), record, 11)).toMatchObject({ kind: 'happened', operationId: 100 });
  });
});

describe('ambiguity: an operation more than one unsettled accrual could have made', () => {
  it('two accruals in doubt on the same card and sum: neither claims it, each names the other', async () => {
    const a = inDoubt('generic:A', 9);
    const b = inDoubt('generic:B', 9.5, { email: 'ann@example.test' });
    await store.insert(a);
    await store.insert(b);
    const reader = history([{}], { 'ann@example.test': [CARD] });
    expect(await verify(reader, a, 11)).toEqual({ kind: 'ambiguous', operationId: 100, cardId: CARD, with: ['generic:B'] });
    expect(await verify(reader, b, 11)).toEqual({ kind: 'ambiguous', operationId: 100, cardId: CARD, with: ['generic:A'] });
    // Even after the grace period: an operation that could be either's is not absence.
    expect(await verify(reader, a, 60)).toMatchObject({ kind: 'ambiguous' });
  });

  it('a record in flight counts as a rival too', async () => {
    const a = inDoubt('generic:A', 9);
    await store.insert(a);
    const b = makeRecord('generic:B', { inFlight: true, customer: { email: 'ann@example.test' } });
    b.inFlight!.startedAt = minutes(9.5);
    await store.insert(b);
    expect(await verify(history([{}], { 'ann@example.test': [CARD] }), a, 11)).toMatchObject({ kind: 'ambiguous', with: ['generic:B'] });
  });

  it('no rival when the other began after the operation (less the skew), reaches another card, or has another amount', async () => {
    const a = inDoubt('generic:A', 9);
    await store.insert(a);
    await store.insert(inDoubt('generic:late', 12, { email: 'late@example.test' }));
    await store.insert(inDoubt('generic:elsewhere', 9, { email: 'other@example.test' }));
    const otherAmount = makeRecord('generic:amount', { accrual: 'in_doubt', amount: 1000, customer: { email: 'ann@example.test' } });
    otherAmount.accrual.inDoubtSince = minutes(9);
    await store.insert(otherAmount);
    const reader = history([{}], { 'late@example.test': [CARD], 'other@example.test': ['22-1-1'], 'ann@example.test': [CARD] });
    expect(await verify(reader, a, 11)).toEqual({ kind: 'happened', operationId: 100, cardId: CARD });
  });

  it('a second operation only this record could have made is claimed, even when an earlier one is ambiguous', async () => {
    const a = inDoubt('generic:A', 9);
    const b = inDoubt('generic:B', 10.5, { email: 'ann@example.test' });
    await store.insert(a);
    await store.insert(b);
    // 100 at minute 11 could be either's; 101 at minute 9.5 was made before B began (less the skew): only A's.
    const reader = history([{ createdAt: minutes(11) }, { id: 101, createdAt: minutes(9.2) }], { 'ann@example.test': [CARD] });
    expect(await verify(reader, a, 12)).toEqual({ kind: 'happened', operationId: 101, cardId: CARD });
  });

  it('the count rule: as many unclaimed matching operations as accruals in doubt that could have made them: all happened, each taking one in the order the calls began', async () => {
    const a = inDoubt('generic:A', 9);
    const b = inDoubt('generic:B', 9.5, { email: 'ann@example.test' });
    await store.insert(a);
    await store.insert(b);
    const reader = history([{ id: 100, createdAt: minutes(9.2) }, { id: 101, createdAt: minutes(9.7) }], { 'ann@example.test': [CARD] });
    const counted = { inDoubt: ['generic:A', 'generic:B'], operations: 2 };
    expect(await verify(reader, a, 11)).toEqual({ kind: 'happened', operationId: 100, cardId: CARD, counted });
    expect(await verify(reader, b, 11)).toEqual({ kind: 'happened', operationId: 101, cardId: CARD, counted });
  });

  it('the count rule: a call still out, or fewer operations than accruals in doubt, is not counted', async () => {
    const a = inDoubt('generic:A', 9);
    await store.insert(a);
    const b = makeRecord('generic:B', { inFlight: true, customer: { email: 'ann@example.test' } });
    b.inFlight!.startedAt = minutes(9.5);
    await store.insert(b);
    const two = history([{ id: 100, createdAt: minutes(9.2) }, { id: 101, createdAt: minutes(9.7) }], { 'ann@example.test': [CARD] });
    // 100 was made before B's call began (less the skew)? No: the skew is a minute, so both could be B's.
    expect(await verify(two, a, 11)).toMatchObject({ kind: 'ambiguous', with: ['generic:B'] });
    await store.update({ ...b, version: b.version + 1, inFlight: undefined, accrual: { ...b.accrual, state: 'in_doubt', inDoubtSince: minutes(9.5) } });
    const c = inDoubt('generic:C', 9.6, { email: 'cy@example.test' });
    await store.insert(c);
    // Three in doubt reach the card, two operations: which one did not happen cannot be told.
    const three = history([{ id: 100, createdAt: minutes(9.2) }, { id: 101, createdAt: minutes(9.7) }], { 'ann@example.test': [CARD], 'cy@example.test': [CARD] });
    expect(await verify(three, a, 11)).toMatchObject({ kind: 'ambiguous' });
  });

  it('the count rule: no operation for any of them, past the grace period: none happened', async () => {
    const a = inDoubt('generic:A', 9);
    await store.insert(a);
    await store.insert(inDoubt('generic:B', 9.5, { email: 'ann@example.test' }));
    expect(await verify(history([], { 'ann@example.test': [CARD] }), a, 9 + GRACE_MS / 60_000)).toEqual({ kind: 'did_not_happen', examinedCards: 1 });
  });

  it('settled records are no rivals', async () => {
    const a = inDoubt('generic:A', 9);
    await store.insert(a);
    await store.insert(makeRecord('generic:B', { accrual: 'pending', customer: { phone: PHONE } }));
    expect(await verify(history([{}]), a, 11)).toMatchObject({ kind: 'happened' });
  });
});

describe('when the history cannot be read', () => {
  it('without the API key, or when a lookup fails, it says so and decides nothing', async () => {
    const record = inDoubt('generic:A', 9);
    expect(await verify({ ...history([]), canVerify: false }, record, 60)).toMatchObject({ kind: 'cannot_verify', reason: expect.stringContaining('LOYALTY_API_KEY') });
    const failing: HistoryReader = { ...history([]), listOperations: async () => Promise.reject(new Error('429')) };
    expect(await verify(failing, record, 60)).toMatchObject({ kind: 'cannot_verify', reason: expect.stringContaining('429') });
  });
});

describe('a reversal in doubt, by the learned shape (reversal-shape.ts)', () => {
  /** An accrual of 59.97 on CARD (operation 50 unless said), its reversal in doubt since minute `since`. */
  function reversalInDoubt(id: string, since: number, customer: LedgerRecord['accrual']['customer'] = { phone: PHONE }, accrualOperation = 50): LedgerRecord {
    const r = makeRecord(id, { accrual: 'accrued', reversal: 'in_doubt', operationIds: [accrualOperation], customer });
    r.accrual.results = r.accrual.results.map((res) => ({ ...res, serialNumber: CARD }));
    r.reversal.inDoubtSince = minutes(since);
    return r;
  }
  const reversal = (o: Partial<Operation> = {}): Partial<Operation> => ({ purchaseSum: -59.97, eventId: 24, ...o });
  const verifyReversal = (reader: HistoryReader, record: LedgerRecord, atMinute: number) => new HistoryVerifier(reader, store, { graceMs: GRACE_MS, clockSkewMs: SKEW_MS }).verifyReversal(record, new Date(minutes(atMinute)));
  const learn = (reader: HistoryReader, record: LedgerRecord) => new HistoryVerifier(reader, store, { graceMs: GRACE_MS, clockSkewMs: SKEW_MS }).learnReversal(record);
  const knowShape = (shape: { eventId: number; sign: 1 | -1 }) => store.putSetting('reversal_shape/default', JSON.stringify({ ...shape, learnedFrom: 'generic:L', at: minutes(0) }));

  it('without a learned shape, nothing is proven', async () => {
    const r = reversalInDoubt('generic:R', 9);
    await store.insert(r);
    expect(await verifyReversal(history([reversal()]), r, 11)).toMatchObject({ kind: 'unproven', reading: 'unknown', why: expect.stringMatching(/no reversal of this merchant has been confirmed/) });
  });

  it('one unclaimed entry of the shape with the sum, on the credited card, after the call began: reversed', async () => {
    await knowShape({ eventId: 24, sign: -1 });
    const r = reversalInDoubt('generic:R', 9);
    await store.insert(r);
    expect(await verifyReversal(history([reversal()]), r, 11)).toEqual({ kind: 'reversed', operationIds: [100], cards: [CARD], shape: expect.objectContaining({ eventId: 24, sign: -1 }) });
  });

  it('not the shape, not the sum, before the call, or claimed: no entry; through the grace period too early, then left to a person as not reversed', async () => {
    await knowShape({ eventId: 24, sign: -1 });
    const r = reversalInDoubt('generic:R', 9);
    await store.insert(r);
    await store.insert(makeRecord('generic:other', { accrual: 'accrued', operationIds: [103] }));
    const ops = [reversal({ eventId: 77 }), reversal({ purchaseSum: 59.97 }), reversal({ createdAt: minutes(7.9) }), reversal({ purchaseSum: -59.96 })].map((o, i) => ({ ...o, id: 100 + i }));
    const claimed = { ...reversal(), id: 103 };
    expect(await verifyReversal(history([...ops, claimed]), r, 11)).toMatchObject({ kind: 'too_early' });
    expect(await verifyReversal(history([...ops, claimed]), r, 9 + GRACE_MS / 60_000)).toMatchObject({ kind: 'unproven', reading: 'not_reversed' });
  });

  it('two entries on the card, or one another in-doubt reversal of the customer and amount could have left: unproven, ambiguous', async () => {
    await knowShape({ eventId: 24, sign: -1 });
    const r = reversalInDoubt('generic:R', 9);
    await store.insert(r);
    expect(await verifyReversal(history([reversal(), reversal({ id: 101 })]), r, 11)).toMatchObject({ kind: 'unproven', reading: 'ambiguous' });
    await store.insert(reversalInDoubt('generic:S', 9.5, { phone: PHONE }, 51));
    expect(await verifyReversal(history([reversal()]), r, 11)).toMatchObject({ kind: 'unproven', reading: 'ambiguous', why: expect.stringMatching(/could be the reversal of generic:S too/) });
  });

  it('a reversal of the customer and amount confirmed a moment ago, its entries not noted yet: too early; past the grace period, a rival', async () => {
    await knowShape({ eventId: 24, sign: -1 });
    const r = reversalInDoubt('generic:R', 9);
    await store.insert(r);
    const done = makeRecord('generic:done', { accrual: 'accrued', reversal: 'reversed', operationIds: [60], customer: { phone: PHONE } });
    done.reversal.results = [{ ...done.accrual.results[0]!, reversedAt: minutes(10) }];
    await store.insert(done);
    expect(await verifyReversal(history([reversal()]), r, 11)).toMatchObject({ kind: 'too_early', reason: expect.stringMatching(/generic:done/) });
    expect(await verifyReversal(history([reversal()]), r, 10 + GRACE_MS / 60_000 + 0.1)).toMatchObject({ kind: 'unproven', reading: 'ambiguous' });
  });

  it('the count rule for reversals: a confirmed reversal whose entry was never noted is given one made by its answer (within the skew), so the one in doubt takes its own later entry', async () => {
    await knowShape({ eventId: 24, sign: -1 });
    const b = reversalInDoubt('generic:B', 9);
    await store.insert(b);
    const d = makeRecord('generic:D', { accrual: 'accrued', reversal: 'reversed', operationIds: [60], customer: { phone: PHONE } });
    d.accrual.results = d.accrual.results.map((res) => ({ ...res, serialNumber: CARD }));
    d.reversal.results = [{ ...d.accrual.results[0]!, reversedAt: minutes(9.5) }];
    await store.insert(d);
    // D's entry stamped with its answer; B's booked later, past D's answer plus the skew.
    const entries = history([reversal({ id: 100, createdAt: minutes(9.5) }), reversal({ id: 101, createdAt: minutes(10.8) })]);
    // B's call began first, yet B is not given D's entry: that would leave B's own entry, later than
    // D's answer, unclaimed where a later reversal could take it for its own once D is no rival of it.
    expect(await verifyReversal(entries, b, 9.5 + GRACE_MS / 60_000 + 0.1)).toEqual({
      kind: 'reversed',
      operationIds: [101],
      cards: [CARD],
      shape: expect.objectContaining({ eventId: 24, sign: -1 }),
      counted: { inDoubt: ['generic:B', 'generic:D'], operations: 2 },
    });
    // Fewer entries than the two reversals: nothing counted.
    expect(await verifyReversal(history([reversal({ id: 101, createdAt: minutes(10.8) })]), b, 9.5 + GRACE_MS / 60_000 + 0.1)).toMatchObject({ kind: 'unproven', reading: 'ambiguous' });
  });

  it('learning: the one unclaimed entry with the sum at reversedAt on each reversed card; a positive one only when the accrual shows under another event', async () => {
    const confirmed = (id: string) => {
      const r = makeRecord(id, { accrual: 'accrued', reversal: 'reversed', operationIds: [50] });
      r.accrual.results = r.accrual.results.map((res) => ({ ...res, serialNumber: CARD }));
      r.reversal.results = r.accrual.results.map((res) => ({ ...res, reversedAt: minutes(10) }));
      return r;
    };
    const accrualEntry = { id: 50, purchaseSum: 59.97, eventId: 24, createdAt: minutes(9) };
    expect(await learn(history([accrualEntry, reversal({ id: 60 })]), confirmed('generic:L1'))).toEqual({ kind: 'learned', operationIds: [60], shape: { eventId: 24, sign: -1 } });
    expect(await learn(history([accrualEntry, { id: 61, eventId: 77, purchaseSum: 59.97 }]), confirmed('generic:L2'))).toEqual({ kind: 'learned', operationIds: [61], shape: { eventId: 77, sign: 1 } });
    // The accrual not in sight: a positive entry cannot be told from an accrual.
    expect(await learn(history([{ id: 61, eventId: 77, purchaseSum: 59.97 }]), confirmed('generic:L3'))).toMatchObject({ kind: 'not_learned', why: expect.stringMatching(/cannot be told from the accrual/) });
    expect(await learn(history([accrualEntry, reversal({ id: 60 }), reversal({ id: 62 })]), confirmed('generic:L4'))).toMatchObject({ kind: 'not_learned', why: expect.stringMatching(/2 unclaimed entries/) });
    expect(await learn(history([accrualEntry, reversal({ id: 60, createdAt: minutes(12) })]), confirmed('generic:L5'))).toMatchObject({ kind: 'not_learned', why: expect.stringMatching(/0 unclaimed entries/) });
  });

  it("an accrual in doubt never takes an entry of a positive reversal shape for its own", async () => {
    await knowShape({ eventId: 77, sign: 1 });
    const record = inDoubt('generic:A', 9);
    await store.insert(record);
    expect(await verify(history([{ eventId: 77 }]), record, 11)).toMatchObject({ kind: 'too_early' });
    expect(await verify(history([{ eventId: 77 }, { id: 101, eventId: 24 }]), record, 11)).toEqual({ kind: 'happened', operationId: 101, cardId: CARD });
  });
});

describe('an accrual a person settled without naming its operation (resolve accrued, as the console sends it)', () => {
  /** O1: accrued by a person's word at minute 9, its operation not named; made at minute 8. */
  function settledByAPerson(id: string, customer: LedgerRecord['accrual']['customer'] = { phone: PHONE }): LedgerRecord {
    const r = makeRecord(id, { at: 8, accrual: 'accrued', customer });
    r.accrual.settledBy = 'operator';
    return r;
  }

  it("its operation may be the one the history shows: a later accrual of the customer and amount does not take it, but is ambiguous with it (found by the model check)", async () => {
    await store.insert(settledByAPerson('generic:O1'));
    const o2 = inDoubt('generic:O2', 9);
    await store.insert(o2);
    expect(await verify(history([{}]), o2, 11)).toEqual({ kind: 'ambiguous', operationId: 100, cardId: CARD, with: ['generic:O1'] });
  });

  it('the same person known by an email on the settled order: still a rival, through the card owner the history names', async () => {
    await store.insert(settledByAPerson('generic:O1', { email: 'kim@example.test' }));
    const o2 = inDoubt('generic:O2', 9);
    await store.insert(o2);
    const owned = history([{ customer: { phone: PHONE, email: 'kim@example.test' } } as Partial<Operation>], { 'kim@example.test': [CARD] });
    expect(await verify(owned, o2, 11)).toMatchObject({ kind: 'ambiguous', with: ['generic:O1'] });
  });

  it('settled now (personSettledAt kept, in the unsettled index): a rival of an operation made before it was settled, none of one made after, and released once no accrual can mistake it', async () => {
    const o1 = settledByAPerson('generic:O1');
    o1.accrual.personSettledAt = minutes(10.5);
    await store.insert(o1);
    const o2 = inDoubt('generic:O2', 9);
    await store.insert(o2);
    // Found through the index whatever the customer's records number (no scan, no stand-in rival).
    expect(await verify(history([{ createdAt: minutes(10) }]), o2, 11)).toEqual({ kind: 'ambiguous', operationId: 100, cardId: CARD, with: ['generic:O1'] });
    expect(await verify(history([{ createdAt: minutes(11.6) }]), o2, 12)).toEqual({ kind: 'happened', operationId: 100, cardId: CARD });

    const verifier = new HistoryVerifier(history([]), store, { graceMs: GRACE_MS, clockSkewMs: SKEW_MS });
    const amount = o1.accrual.check!.amount;
    const quiet = 10.5 + (2 * SKEW_MS + GRACE_MS) / 60_000 + 0.1;
    // O2, in doubt since minute 9, could still take O1's operation: O1 stays.
    expect(await verifier.releasable('default', amount, new Date(minutes(quiet)))).toEqual([]);
    const settled = (await store.get('generic:O2'))!;
    await store.update({ ...settled, version: settled.version + 1, accrual: { ...settled.accrual, state: 'accrued', settledBy: 'history', inDoubtSince: undefined, operationIds: [100] } });
    // Not before the grace period and twice the skew have passed since it was settled.
    expect(await verifier.releasable('default', amount, new Date(minutes(quiet - 0.2)))).toEqual([]);
    expect((await verifier.releasable('default', amount, new Date(minutes(quiet)))).map((r) => r.transactionId)).toEqual(['generic:O1']);
  });

  it('settled with its operation named, or by the history, or made after the operation: not a rival', async () => {
    const named = settledByAPerson('generic:O1');
    named.accrual.operationIds = [99];
    await store.insert(named);
    const byHistory = makeRecord('generic:O3', { at: 8, accrual: 'accrued', customer: { phone: PHONE } });
    byHistory.accrual.settledBy = 'history';
    await store.insert(byHistory);
    await store.insert(settledByAPerson('generic:O4-later', { phone: PHONE }));
    const later = (await store.get('generic:O4-later'))!;
    await store.update({ ...later, version: later.version + 1, createdAt: minutes(30) });
    const o2 = inDoubt('generic:O2', 9);
    await store.insert(o2);
    expect(await verify(history([{}]), o2, 11)).toEqual({ kind: 'happened', operationId: 100, cardId: CARD });
  });
});
