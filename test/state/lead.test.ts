/** `leadOf`: what a record's page leads with, for each case the worker tells apart: a person needed or not, the bridge acting by itself (and when) or not. */
import { describe, expect, it } from '@jest/globals';
import { leadOf } from '../../src/state/lead.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { makeRecord, minutes, type RecordOptions } from '../ledger/contracts/factories.js';

/** A record written at minute 10, its next round at minute 10 + `pause` when given; read at minute 12. */
function written(options: RecordOptions, change: (r: LedgerRecord) => void = () => {}, pause?: number): LedgerRecord {
  const record = { ...makeRecord('generic:D-1', options), updatedAt: minutes(10) };
  change(record);
  if (pause !== undefined) record.nextAttemptAt = minutes(10 + pause);
  return record;
}
const NOW = Date.parse(minutes(12));

describe('leadOf', () => {
  it('an accrual in doubt without the merchant\'s API key: a person, and the bridge will not act, saying why', () => {
    const lead = leadOf(written({ accrual: 'in_doubt' }, undefined, 5), { canVerify: false, nowMs: NOW });
    expect(lead.needsPerson).toEqual([{ kind: 'in_doubt', since: expect.any(String), why: expect.stringContaining('this merchant has no loyalty API key') }]);
    expect(lead.bridge).toEqual({ acts: false, what: expect.stringMatching(/^this merchant has no loyalty API key/) });
  });

  it('an accrual in doubt with the API key: the bridge reads the history by itself, at the time ahead', () => {
    const lead = leadOf(written({ accrual: 'in_doubt' }, undefined, 5), { canVerify: true, nowMs: NOW });
    expect(lead.needsPerson[0]!.why).toContain('the bridge settles it by itself from the operations history');
    expect(lead.bridge).toEqual({ acts: true, what: 'it reads the operations history to settle the accrual by itself', at: minutes(15) });
  });

  it('a pending accrual whose pause is already over: the next pass, no time in the past given as still to come', () => {
    const lead = leadOf(written({ accrual: 'pending' }, undefined, 1), { canVerify: true, nowMs: NOW });
    expect(lead).toEqual({ needsPerson: [], bridge: { acts: true, what: 'it sends the accrual to the loyalty service' } });
  });

  it('a pending accrual in its pause: sent after it', () => {
    expect(leadOf(written({ accrual: 'pending' }, undefined, 30), { canVerify: false, nowMs: NOW }).bridge).toEqual({ acts: true, what: 'it sends the accrual to the loyalty service, after the pause between attempts', at: minutes(40) });
  });

  it('an accrual held behind another of the same customer and amount: names the other', () => {
    const lead = leadOf(written({ accrual: 'pending' }, (r) => (r.accrual.waitingBehind = 'generic:D-0')), { canVerify: true, nowMs: NOW });
    expect(lead.bridge).toEqual({ acts: true, what: expect.stringMatching(/^it sends the accrual once generic:D-0, an accrual of the same customer and amount whose outcome is unknown, is settled/) });
  });

  it('an ambiguous accrual: a person or the count, the rivals named', () => {
    const lead = leadOf(written({ accrual: 'in_doubt' }, (r) => (r.accrual.ambiguousWith = ['generic:D-2'])), { canVerify: true, nowMs: NOW });
    expect(lead.needsPerson).toEqual([{ kind: 'ambiguous', since: expect.any(String), why: expect.stringContaining('matches it and generic:D-2 alike') }]);
    expect(lead.bridge.what).toContain('once the history tells it apart from generic:D-2');
  });

  it('a reversal in doubt the history did not prove: a person, and the bridge will not guess', () => {
    const lead = leadOf(written({ accrual: 'accrued', reversal: 'in_doubt', reversalUnproven: true }), { canVerify: true, nowMs: NOW });
    expect(lead.needsPerson).toEqual([{ kind: 'in_doubt', since: expect.any(String), why: expect.stringContaining('the bridge will not guess') }]);
    expect(lead.bridge).toEqual({ acts: false, what: expect.stringContaining('a person must resolve it as reversed or not reversed') });
  });

  it('settled, closed, or of a merchant this bridge does not know: nothing, saying which', () => {
    expect(leadOf(written({ accrual: 'accrued' }), { canVerify: true, nowMs: NOW })).toEqual({ needsPerson: [], bridge: { acts: false, what: 'the record is settled' } });
    const closed = written({ accrual: 'accrued', reversal: 'failed' }, (r) => (r.closed = { at: minutes(11), actor: 'admin', reason: 'orphan' }));
    expect(leadOf(closed, { canVerify: true, nowMs: NOW })).toEqual({ needsPerson: [], bridge: { acts: false, what: expect.stringContaining('an operator closed the record') } });
    expect(leadOf(written({ accrual: 'pending' }), { canVerify: undefined, nowMs: NOW }).bridge).toEqual({ acts: false, what: expect.stringContaining('not known to this bridge') });
  });
});
