/**
 * The three-way classification, rule by rule, on hand-made sides: each kind of difference is found
 * once with its reason and next step, a clean range gives none, and what must not count (unpaid
 * sales, non-purchase operations, operations outside the range, reversals another record explains)
 * does not.
 */
import { describe, expect, it } from '@jest/globals';
import type { LedgerRecord } from '../../src/state/record.js';
import type { Operation } from '../../src/loyalty/contract.js';
import { classify, type ReconcileInput } from '../../src/reconcile/classify.js';
import { posEntryOf, type PosRefund, type PosSale } from '../../src/reconcile/pos-source.js';
import { makeRecord, minutes } from '../ledger/contracts/factories.js';

const CARD = '11-100001-2';
const FROM = new Date(minutes(-60));
const TO = new Date(minutes(24 * 60));

function sale(orderId: string, overrides: Partial<PosSale> = {}): PosSale {
  return { kind: 'sale', pos: 'generic', orderId, transactionId: `generic:${orderId}`, paid: true, amountCents: 5997, updatedAt: minutes(0), ...overrides };
}

function refund(orderId: string, refundId: string, overrides: Partial<PosRefund> = {}): PosRefund {
  return { kind: 'refund', pos: 'generic', orderId, transactionId: `generic:${orderId}`, refundId, updatedAt: minutes(30), ...overrides };
}

function op(id: number, overrides: Partial<Operation> = {}): Operation {
  return { id, cardId: CARD, eventId: 24, purchaseSum: 59.97, amount: 59, source: 'api', createdAt: minutes(1), ...overrides };
}

/** An order accrued as operation `operationId` (made at minute 0). */
function accrued(orderId: string, operationId: number, overrides: Parameters<typeof makeRecord>[1] = {}): LedgerRecord {
  return makeRecord(`generic:${orderId}`, { accrual: 'accrued', operationIds: [operationId], ...overrides });
}

/** `record` reversed for `refundId` at minute 30. */
function reversed(record: LedgerRecord, refundId: string): LedgerRecord {
  return { ...record, status: 'reversed', reversal: { ...record.reversal, state: 'reversed', refundIds: [refundId], requestedAt: minutes(30) } };
}

function run(sides: Partial<ReconcileInput>) {
  return classify({ merchantId: 'm1', from: FROM, to: TO, pos: [], ledger: [], claimants: [], history: [], clockSkewMs: 60_000, ...sides });
}

describe('a clean range', () => {
  it('has no difference: sales accrued with their operations, a refund reversed with its reversing operation', () => {
    const a = accrued('A-1', 1);
    const b = reversed(accrued('B-1', 2), 'R-1');
    const differences = run({
      pos: [sale('A-1'), sale('B-1'), refund('B-1', 'R-1')],
      ledger: [a, b],
      history: [op(1), op(2), op(3, { purchaseSum: -59.97, amount: -59, createdAt: minutes(31) }), op(4, { eventId: 5, purchaseSum: null })],
    });
    expect(differences).toEqual([]);
  });

  it('ignores unpaid sales, and a skipped or refused sale the ledger holds', () => {
    const skipped = makeRecord('generic:S-1', { accrual: 'skipped' });
    const failed = makeRecord('generic:F-1', { accrual: 'failed' });
    expect(run({ pos: [sale('U-1', { paid: false }), sale('S-1'), sale('F-1')], ledger: [skipped, failed] })).toEqual([]);
  });
});

describe('each kind, found once', () => {
  it('missing_in_ledger: a paid sale the ledger lacks → backfill from its time', () => {
    const [d, ...rest] = run({ pos: [sale('M-1', { updatedAt: minutes(5) }), sale('M-1', { updatedAt: minutes(3) })] });
    expect(rest).toEqual([]);
    expect(d).toEqual({ kind: 'missing_in_ledger', transactionId: 'generic:M-1', orderId: 'M-1', why: expect.stringContaining('paid generic order of 59.97'), next: expect.stringContaining(`POST /v1/admin/backfill {"merchantId":"m1","pos":"generic","since":"${minutes(5)}"}`) });
  });

  it('missing_in_ledger: a refund of an order the ledger never saw, once, and not twice when the sale is listed too', () => {
    expect(run({ pos: [refund('O-1', 'R-1')] })).toEqual([expect.objectContaining({ kind: 'missing_in_ledger', transactionId: 'generic:O-1', why: expect.stringContaining('refund R-1') })]);
    expect(run({ pos: [sale('O-1'), refund('O-1', 'R-1')] })).toEqual([expect.objectContaining({ kind: 'missing_in_ledger', why: expect.stringContaining('paid generic order') })]);
  });

  it('missing_in_ledger: a paid order the adapter cannot translate (its webhook became a dead letter)', () => {
    const differences = run({ pos: [{ kind: 'unreadable', pos: 'clover', orderId: 'X-1', updatedAt: minutes(4), why: 'lineItems.0.price: must be a whole number of cents' }] });
    expect(differences).toEqual([{ kind: 'missing_in_ledger', orderId: 'X-1', why: expect.stringContaining('cannot be translated exactly, so the ledger cannot hold it: lineItems.0.price'), next: expect.stringContaining('GET /v1/admin/dead-letters?pos=clover&merchantId=m1') }]);
  });

  it('not_in_history: an accrual whose operation the history does not hold', () => {
    const differences = run({ ledger: [accrued('N-1', 7)], history: [] });
    expect(differences).toEqual([{ kind: 'not_in_history', transactionId: 'generic:N-1', orderId: 'N-1', why: expect.stringMatching(/but the history has no operation 7$/), next: expect.stringContaining('verify') }]);
  });

  it('not_in_history: an accrual an operator resolved without naming an operation or card', () => {
    const r = makeRecord('generic:H-1', { accrual: 'accrued' });
    r.accrual.settledBy = 'operator';
    expect(run({ ledger: [r] })).toEqual([expect.objectContaining({ kind: 'not_in_history', transactionId: 'generic:H-1', why: expect.stringContaining('an operator resolved it as accrued') })]);
  });

  it('in_doubt: an accrual in doubt that no operation could be yet, to settle', () => {
    const r = makeRecord('generic:D-1', { accrual: 'in_doubt' });
    expect(run({ ledger: [r] })).toEqual([
      { kind: 'in_doubt', transactionId: 'generic:D-1', orderId: 'D-1', why: expect.stringContaining('no operation read could be it yet'), next: expect.stringContaining('POST /v1/admin/reconcile?merchantId=m1') },
    ]);
  });

  it('in_doubt: the operation an accrual in doubt may have made is that record\'s to settle, never unclaimed', () => {
    const r = makeRecord('generic:D-2', { accrual: 'in_doubt' });
    r.accrual.inDoubtSince = minutes(0);
    const differences = run({ ledger: [r], history: [op(5)] });
    expect(differences).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:D-2', operationId: 5, why: expect.stringContaining('may be the accrual of generic:D-2'), next: expect.stringMatching(/^settle the record first, never by taking points back by hand/) })]);
  });

  it('unclaimed_operation: a purchase in the range nobody claims', () => {
    const differences = run({ history: [op(9, { source: 'scanner' })] });
    expect(differences).toEqual([{ kind: 'unclaimed_operation', operationId: 9, why: expect.stringContaining('source scanner'), next: expect.stringContaining('booked outside the bridge') }]);
  });

  it('unclaimed_operation: a second operation of the same card and sum is named as a possible double', () => {
    const differences = run({ ledger: [accrued('A-1', 1)], history: [op(1), op(2, { createdAt: minutes(2) })] });
    expect(differences).toEqual([expect.objectContaining({ kind: 'unclaimed_operation', operationId: 2, why: expect.stringContaining("operation 1 of the same card and sum is generic:A-1's: possibly a double") })]);
  });

  it('amount_mismatch: a reopened check (the POS total differs from the ledger Check)', () => {
    const differences = run({ pos: [sale('A-1', { amountCents: 7997 })], ledger: [accrued('A-1', 1)], history: [op(1)] });
    expect(differences).toEqual([{ kind: 'amount_mismatch', transactionId: 'generic:A-1', orderId: 'A-1', why: expect.stringContaining('now totals 79.97 but the ledger recorded 59.97'), next: expect.any(String) }]);
  });

  it('amount_mismatch: the operation a record claims is of another sum', () => {
    const differences = run({ ledger: [accrued('A-1', 1)], history: [op(1, { purchaseSum: 5.97 })] });
    expect(differences).toEqual([expect.objectContaining({ kind: 'amount_mismatch', transactionId: 'generic:A-1', operationId: 1, why: expect.stringContaining('a purchase of 5.97') })]);
  });

  it('refund_not_reversed: a refund the ledger never recorded → backfill', () => {
    const differences = run({ pos: [refund('A-1', 'R-9')], ledger: [accrued('A-1', 1)], history: [op(1)] });
    expect(differences).toEqual([{ kind: 'refund_not_reversed', transactionId: 'generic:A-1', orderId: 'A-1', why: expect.stringContaining('refund R-9 of generic order A-1'), next: expect.stringContaining('backfill') }]);
  });

  it('refund_not_reversed: recorded, but the reversal is pending, or was refused', () => {
    const pending = accrued('A-1', 1);
    pending.reversal = { ...pending.reversal, state: 'pending', refundIds: ['R-1'] };
    const refused = accrued('B-1', 2);
    refused.reversal = { ...refused.reversal, state: 'failed', refundIds: ['R-2'], errors: ['Transaction not found'] };
    const differences = run({ pos: [refund('A-1', 'R-1'), refund('B-1', 'R-2')], ledger: [pending, refused], history: [op(1), op(2)] });
    expect(differences).toEqual([
      expect.objectContaining({ kind: 'refund_not_reversed', transactionId: 'generic:A-1', why: expect.stringContaining('still waiting to be sent') }),
      expect.objectContaining({ kind: 'refund_not_reversed', transactionId: 'generic:B-1', why: expect.stringContaining('Transaction not found') }),
    ]);
  });

  it('refund_not_reversed: reversed in the ledger, but no reversing operation in the history', () => {
    const differences = run({ pos: [refund('A-1', 'R-1')], ledger: [reversed(accrued('A-1', 1), 'R-1')], history: [op(1)] });
    expect(differences).toEqual([expect.objectContaining({ kind: 'refund_not_reversed', transactionId: 'generic:A-1', why: expect.stringContaining(`no reversing operation of -59.97 on card ${CARD}`) })]);
  });
});

describe('a customer with two cards (one per loyalty program): one accrue, one operation per card', () => {
  const CARD_B = '12-100001-2';
  function twoCards(): LedgerRecord {
    const r = accrued('T-1', 1);
    r.accrual.operationIds = [1, 2];
    r.accrual.results = [...r.accrual.results, { ...r.accrual.results[0]!, serialNumber: CARD_B, operationId: 2 }];
    return r;
  }

  it('reversed on both cards: nothing', () => {
    const history = [op(1), op(2, { cardId: CARD_B }), op(3, { purchaseSum: -59.97, createdAt: minutes(31) }), op(4, { cardId: CARD_B, purchaseSum: -59.97, createdAt: minutes(31) })];
    expect(run({ ledger: [reversed(twoCards(), 'R-1')], history })).toEqual([]);
  });

  it('reversed on one card only: one difference, naming the other card', () => {
    const history = [op(1), op(2, { cardId: CARD_B }), op(3, { purchaseSum: -59.97, createdAt: minutes(31) })];
    expect(run({ ledger: [reversed(twoCards(), 'R-1')], history })).toEqual([expect.objectContaining({ kind: 'refund_not_reversed', why: expect.stringMatching(new RegExp(`on card ${CARD_B}$`)) })]);
  });

  it('both operations of another sum: one amount_mismatch naming both', () => {
    const history = [op(1, { purchaseSum: 5 }), op(2, { cardId: CARD_B, purchaseSum: 5 })];
    const differences = run({ ledger: [twoCards()], history });
    expect(differences).toEqual([expect.objectContaining({ kind: 'amount_mismatch', operationId: 1, why: expect.stringContaining(`operation 2 on card ${CARD_B} is a purchase of 5`) })]);
  });
});

describe('what is explained, and what is out of the range', () => {
  it('a partial refund: the record reversed, its remainder accrued; each operation explained', () => {
    const root = reversed(accrued('P-1', 1), 'R-1');
    root.remainderTransactionId = 'generic:P-1~r1';
    const remainder = { ...accrued('P-1', 3, { amount: 3998 }), transactionId: 'generic:P-1~r1', parentTransactionId: 'generic:P-1' };
    const history = [op(1), op(2, { purchaseSum: -59.97, createdAt: minutes(31) }), op(3, { purchaseSum: 39.98, createdAt: minutes(32) })];
    expect(run({ pos: [sale('P-1'), refund('P-1', 'R-1', { amountCents: 1999 })], ledger: [root, remainder], history })).toEqual([]);
  });

  it('a reversal in the range of an order older than the range: its record, a claimant, explains it', () => {
    const old = reversed(accrued('OLD-1', 1, { at: -3 * 24 * 60 }), 'R-1');
    const history = [op(1, { createdAt: minutes(-3 * 24 * 60) }), op(2, { purchaseSum: -59.97, createdAt: minutes(31) })];
    expect(run({ claimants: [old], history })).toEqual([]);
    expect(run({ history })).toEqual([expect.objectContaining({ kind: 'unclaimed_operation', operationId: 2, why: expect.stringContaining('a reversal of -59.97') })]);
  });

  it('operations outside [from, to) and without a purchase sum are not reported', () => {
    const history = [op(1, { createdAt: minutes(-61) }), op(2, { createdAt: TO.toISOString() }), op(3, { purchaseSum: null, eventId: 5 }), op(4, { createdAt: minutes(-60) })];
    expect(run({ history }).map((d) => d.operationId)).toEqual([4]);
  });

  it('a record that names no operation id is matched by card and sum, no earlier than the record', () => {
    const r = accrued('C-1', 1);
    r.accrual.operationIds = [];
    expect(run({ ledger: [r], history: [op(5, { createdAt: minutes(-5) }), op(6, { createdAt: minutes(2) })] })).toEqual([
      expect.objectContaining({ kind: 'unclaimed_operation', operationId: 5 }),
    ]);
  });

  it('sorts by kind, then ids', () => {
    const differences = run({ pos: [sale('Z-1'), sale('A-1')], history: [op(9)], ledger: [accrued('N-1', 7)] });
    expect(differences.map((d) => `${d.kind} ${d.transactionId ?? d.operationId}`)).toEqual(['missing_in_ledger generic:A-1', 'missing_in_ledger generic:Z-1', 'not_in_history generic:N-1', 'unclaimed_operation 9']);
  });
});

describe('posEntryOf: what the report compares of what the POS listing found', () => {
  const base = { pos: 'clover', orderId: 'O-1', updatedAt: minutes(0), payload: {} };
  const check = { amount: 1250, currency: 'USD', selections: [] };
  it('a paid sale: its transactionId and Check amount', () => {
    expect(posEntryOf({ ...base, kind: 'checkout', paid: true, transactionId: 'clover:M:O-1', intent: { orderId: 'O-1', check, customer: {} } })).toEqual({ kind: 'sale', pos: 'clover', orderId: 'O-1', transactionId: 'clover:M:O-1', paid: true, amountCents: 1250, updatedAt: minutes(0) });
  });
  it('an unpaid sale: nothing (it cannot differ)', () => {
    expect(posEntryOf({ ...base, kind: 'checkout', paid: false })).toBeUndefined();
  });
  it("a refund: its order's transactionId, the refund id (the listing's, else the intent's) and the part refunded", () => {
    expect(posEntryOf({ ...base, kind: 'refund', paid: true, transactionId: 'clover:M:O-1', intent: { orderId: 'O-1', refundId: 'R-1', amountCents: 300 } })).toEqual({ kind: 'refund', pos: 'clover', orderId: 'O-1', transactionId: 'clover:M:O-1', refundId: 'R-1', amountCents: 300, updatedAt: minutes(0) });
  });
  it('refused by the adapter: unreadable, with why', () => {
    expect(posEntryOf({ ...base, kind: 'checkout', paid: true, refused: 'total: must not be negative' })).toEqual({ kind: 'unreadable', pos: 'clover', orderId: 'O-1', updatedAt: minutes(0), why: 'total: must not be negative' });
  });
});

describe('pos_amount_differs: the POS current figure against the ledger accrued less reversed', () => {
  const runAll = run;
  // A Shopify order of 15.99 (tax on top), one unit of 4.33 refunded: the POS stands at 11.66.
  const shopifySale = (overrides: Partial<PosSale> = {}) => sale('S-1', { pos: 'shopify', transactionId: 'shopify:S-1', amountCents: 1599, currentCents: 1166, ...overrides });
  const shopifyRefund = (overrides: Partial<PosRefund> = {}) => refund('S-1', 'R-1', { pos: 'shopify', transactionId: 'shopify:S-1', ...overrides });
  const root = () => reversed({ ...makeRecord('shopify:S-1', { pos: 'shopify', accrual: 'accrued', amount: 1599 }), remainderTransactionId: 'shopify:S-1~r1' }, 'R-1');
  const remainder = (amount: number) => makeRecord('shopify:S-1~r1', { pos: 'shopify', orderId: 'S-1', accrual: 'accrued', amount });
  const kinds = (sides: Partial<ReconcileInput>) => run(sides).filter((d) => d.kind === 'pos_amount_differs');

  it('none when 1599 accrued − 1599 reversed + 1166 re-accrued = the POS current 1166', () => {
    expect(kinds({ pos: [shopifySale(), shopifyRefund()], ledger: [root(), remainder(1166)] })).toEqual([]);
  });

  it('found when the ledger re-accrued 733 (a refund measured as 8.66) but the POS stands at 11.66', () => {
    expect(kinds({ pos: [shopifySale(), shopifyRefund()], ledger: [root(), remainder(733)] })).toEqual([
      {
        kind: 'pos_amount_differs',
        transactionId: 'shopify:S-1',
        orderId: 'S-1',
        why: expect.stringContaining('now stands at 11.66 after its refunds and edits (changed '),
        next: expect.stringContaining('GET /v1/admin/transactions/shopify:S-1'),
      },
    ]);
    expect(kinds({ pos: [shopifySale(), shopifyRefund()], ledger: [root(), remainder(733)] })[0]!.why).toContain('the ledger accrued 23.32 and reversed 15.99, 7.33 in all');
  });

  it('found when the order was edited after it was accrued, with no refund: 1599 accrued, the POS stands at 1300', () => {
    // The sale as the adapter reads it is the paid one here (the ledger's 1599), the current figure lower.
    const accruedOnly = makeRecord('shopify:S-1', { pos: 'shopify', accrual: 'accrued', amount: 1599 });
    expect(kinds({ pos: [shopifySale({ currentCents: 1300 })], ledger: [accruedOnly] })).toEqual([expect.objectContaining({ kind: 'pos_amount_differs', why: expect.stringContaining('now stands at 13.00') })]);
  });

  it('not reported where another kind explains it: the sale reads otherwise (amount_mismatch), a POS refund the ledger lacks (refund_not_reversed), a record not settled, no current figure', () => {
    // These records name no operation (not_in_history, beside the point here).
    const run = (sides: Partial<ReconcileInput>) => runAll(sides).filter((d) => d.kind !== 'not_in_history');
    const accruedOnly = makeRecord('shopify:S-1', { pos: 'shopify', accrual: 'accrued', amount: 1599 });
    // amount_mismatch instead.
    expect(run({ pos: [shopifySale({ amountCents: 1300, currentCents: 1300 })], ledger: [accruedOnly] }).map((d) => d.kind)).toEqual(['amount_mismatch']);
    // refund_not_reversed instead.
    expect(run({ pos: [shopifySale(), shopifyRefund()], ledger: [accruedOnly] }).map((d) => d.kind)).toEqual(['refund_not_reversed']);
    // The reversal still pending: refund_not_reversed, and nothing compared.
    const pending = { ...accruedOnly, reversal: { ...accruedOnly.reversal, state: 'pending' as const, refundIds: ['R-1'] } };
    expect(run({ pos: [shopifySale(), shopifyRefund()], ledger: [pending] }).map((d) => d.kind)).toEqual(['refund_not_reversed']);
    // A skipped sale (no customer) accrues nothing: nothing to compare.
    expect(kinds({ pos: [shopifySale({ currentCents: 0 })], ledger: [makeRecord('shopify:S-1', { pos: 'shopify', accrual: 'skipped', amount: 1599 })] })).toEqual([]);
    // A POS that states no current figure.
    expect(kinds({ pos: [shopifySale({ currentCents: undefined })], ledger: [makeRecord('shopify:S-1', { pos: 'shopify', accrual: 'accrued', amount: 1599 })] })).toEqual([]);
  });

  it('posEntryOf carries the current figure an adapter adds to its intent (Shopify: currentAmountCents)', () => {
    const check = { amount: 1599, currency: 'USD', selections: [] };
    const intent = { orderId: 'S-1', check, customer: {}, currentAmountCents: 1166 };
    expect(posEntryOf({ pos: 'shopify', orderId: 'S-1', updatedAt: minutes(0), payload: {}, kind: 'checkout', paid: true, transactionId: 'shopify:S-1', intent })).toMatchObject({ kind: 'sale', amountCents: 1599, currentCents: 1166 });
  });
});

describe('an honest report (contract v1.5): never a take-back by hand for what a record in doubt may own', () => {
  // Two orders of one card and amount, both refunded: A's reversal is done (its operation claimed),
  // B's reverse timed out and is in doubt. The history holds both reversals, -59.97 each.
  const a = () => {
    const r = reversed(accrued('A-1', 1), 'R-A');
    r.reversal.operationIds = [3];
    return r;
  };
  const b = () => {
    const r = accrued('B-1', 2);
    return { ...r, status: 'in_doubt' as const, reversal: { ...r.reversal, state: 'in_doubt' as const, refundIds: ['R-B'], requestedAt: minutes(40), inDoubtSince: minutes(40) } };
  };
  const history = [op(1), op(2), op(3, { purchaseSum: -59.97, amount: -59, createdAt: minutes(31) }), op(4, { purchaseSum: -59.97, amount: -59, createdAt: minutes(41) })];

  it("the in-doubt reversal's operation is kind in_doubt naming its record, and no difference advises taking anything back", () => {
    const differences = run({ ledger: [a(), b()], history });
    expect(differences).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:B-1', operationId: 4, why: expect.stringContaining('may be the reversal of generic:B-1') })]);
    expect(differences.map((d) => d.next).join(' ')).not.toMatch(/take .* back .* by hand|take a double back/);
  });

  it('a reversal the ledger claims explains its own operation, never its sibling\'s: with the claim, the earlier match cannot take it', () => {
    // B's reverse in doubt made its operation first (minute 29), before A's claimed one (minute 31).
    const early = [op(1), op(2), op(3, { purchaseSum: -59.97, amount: -59, createdAt: minutes(31) }), op(4, { purchaseSum: -59.97, amount: -59, createdAt: minutes(29) })];
    const inDoubt = b();
    inDoubt.reversal.inDoubtSince = minutes(28);
    const differences = run({ ledger: [a(), inDoubt], history: early });
    expect(differences).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:B-1', operationId: 4 })]);
  });

  it('settled, the difference is gone: B reversed with its operation claimed leaves a clean range', () => {
    const settled = b();
    const done = { ...settled, status: 'reversed' as const, reversal: { ...settled.reversal, state: 'reversed' as const, operationIds: [4] } };
    expect(run({ ledger: [a(), done], history })).toEqual([]);
  });

  it('a record in doubt outside the range (listed as doubtful) is named for the operation of the range it may own', () => {
    const differences = run({ ledger: [a()], doubtful: [b()], history });
    expect(differences).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:B-1', operationId: 4 })]);
  });
});

