/**
 * The core's services without disk or network: the in-memory store, a scripted loyalty service and
 * a fixed history. What intake, delivery and operator actions do with one record, and with two
 * accruals of one customer and amount.
 */
import { describe, expect, it } from '@jest/globals';
import { createCore, type Core } from '../../src/core/core.js';
import { HistoryVerifier } from '../../src/core/history-verifier.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { CallReport } from '../../src/loyalty/client.js';
import { createMetrics } from '../../src/core/metrics.js';
import type { CheckoutIntent } from '../../src/pos/contract.js';
import { eventually } from '../support/harness.js';
import { ScriptedLoyalty } from '../support/scripted-loyalty.js';

const succeeded = (operationId: number): CallReport => ({
  outcome: { kind: 'succeeded', results: [{ isSuccess: true, errorMessage: null, serialNumber: '11-1', checkAmount: 5997, accruedValue: 59, operationId, createdAt: new Date().toISOString(), reversedAt: null }] },
  attempts: [],
});
const unknown: CallReport = { outcome: { kind: 'unknown', reason: 'timeout' }, attempts: [] };

function core(loyalty: ScriptedLoyalty, answerBudgetMs = 1000): { core: Core; store: MemoryLedgerStore } {
  const store = new MemoryLedgerStore();
  const noHistory = { canVerify: false, findCards: async () => [], listOperations: async () => [] };
  const verifier = new HistoryVerifier(noHistory, store, { graceMs: 0, clockSkewMs: 0 });
  const options = { answerBudgetMs, retryBaseMs: 10, inDoubtVerifyAfterMs: 100, partialRefundPolicy: 'reaccrue' as const, inFlightLeaseMs: 60_000 };
  const upstreams = { upstreamOf: async () => ({ calls: loyalty, verifier, suspended: false, ambiguity: 'person' as const }), canVerifyAny: async () => false };
  return { core: createCore({ store, upstreams, options, logger: silentLogger, metrics: createMetrics(undefined, false) }), store };
}

const intent = (orderId: string, phone = '+15550003333', amount = 5997): CheckoutIntent => ({
  orderId,
  check: { amount, currency: 'USD', selections: [{ quantity: 1, totalPrice: amount }] },
  customer: { phone },
});

describe('one customer and one amount, two orders a moment apart', () => {
  it('the second is not sent while the first is out; it goes right after the first settles, within its answer', async () => {
    const loyalty = new ScriptedLoyalty();
    const { core: c, store } = core(loyalty);
    const first = c.intake.checkout('generic', intent('A-1'));
    await loyalty.made(1);
    const second = c.intake.checkout('generic', intent('A-2'));
    // Recorded, but the store refuses its in-flight marker while A-1 holds the key: still one call out.
    const waiting = await eventually(() => store.get('generic:A-2'), (r) => r !== undefined);
    expect([waiting!.status, waiting!.inFlight]).toEqual(['pending', undefined]);
    expect(loyalty.calls.map((x) => x.transactionId)).toEqual(['generic:A-1']);
    loyalty.calls[0]!.answer(succeeded(1));
    expect((await first).record.status).toBe('accrued');
    await loyalty.made(2);
    expect(loyalty.calls[1]!.transactionId).toBe('generic:A-2');
    loyalty.calls[1]!.answer(succeeded(2));
    const answer = await second;
    expect(answer).toMatchObject({ outcome: 'settled', record: { status: 'accrued', accrual: { operationIds: [2] } } });
  });

  it('behind one in doubt, the second stays pending, says behind whom, and is sent once an operator settles the first', async () => {
    const loyalty = new ScriptedLoyalty();
    const { core: c, store } = core(loyalty);
    const first = c.intake.checkout('generic', intent('B-1'));
    await loyalty.made(1);
    loyalty.calls[0]!.answer(unknown);
    expect((await first).record.status).toBe('in_doubt');
    const second = await c.intake.checkout('generic', intent('B-2'));
    expect(second).toMatchObject({ outcome: 'in_progress', record: { status: 'pending', accrual: { waitingBehind: 'generic:B-1' } } });
    expect(loyalty.calls).toHaveLength(1);
    // Looked at again: still behind it, and the history does not say so twice.
    await c.delivery.advance('generic:B-2', true);
    expect((await store.get('generic:B-2'))!.history.filter((e) => e.event.startsWith('waits behind'))).toHaveLength(1);
    expect(loyalty.calls).toHaveLength(1);

    await c.operator.resolve('generic:B-1', { outcome: 'accrued', note: 'seen on the card' }, { actor: 'admin', reason: 'seen on the card' });
    const sending = c.delivery.advance('generic:B-2', true);
    await loyalty.made(2);
    loyalty.calls[1]!.answer(succeeded(7));
    expect((await sending).after).toBe('accrued');
    expect((await store.get('generic:B-2'))!.accrual.waitingBehind).toBeUndefined();
  });

  it('another customer or another amount goes out at once', async () => {
    const loyalty = new ScriptedLoyalty();
    const { core: c } = core(loyalty);
    void c.intake.checkout('generic', intent('C-1'));
    void c.intake.checkout('generic', intent('C-2', '+15550004444'));
    void c.intake.checkout('generic', intent('C-3', '+15550003333', 450));
    await loyalty.made(3);
    expect(loyalty.calls.map((x) => x.transactionId).sort()).toEqual(['generic:C-1', 'generic:C-2', 'generic:C-3']);
    for (const call of loyalty.calls) call.answer(succeeded(loyalty.calls.indexOf(call) + 10));
  });
});

describe('answers', () => {
  it('a repeat answers what is recorded and sends nothing', async () => {
    const loyalty = new ScriptedLoyalty();
    const { core: c } = core(loyalty);
    const first = c.intake.checkout('generic', intent('D-1'));
    await loyalty.made(1);
    loyalty.calls[0]!.answer(succeeded(1));
    await first;
    expect(await c.intake.checkout('generic', intent('D-1'))).toMatchObject({ repeat: true, outcome: 'settled' });
    expect(loyalty.calls).toHaveLength(1);
  });

  it('a refund of an order nobody knows is an unknown order once the loyalty service says so', async () => {
    const loyalty = new ScriptedLoyalty();
    const { core: c } = core(loyalty);
    const refund = c.intake.refund('generic', { orderId: 'E-1', refundId: 'R-1' });
    await loyalty.made(1);
    loyalty.calls[0]!.answer({ outcome: { kind: 'refused', status: 400, errors: ['transaction not found'] }, attempts: [] });
    expect(await refund).toMatchObject({ outcome: 'unknown_order', record: { status: 'reverse_failed' } });
  });
});
