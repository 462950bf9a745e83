/**
 * What a record's page leads with (`lead` of `GET /v1/admin/transactions/{id}`): why it needs a
 * person, in the words of the attention queue for the case of its merchant, and whether the bridge
 * will move it by itself, and when. Pure: read off the record and what is known of its merchant, by
 * the same rules that decide (`attentionOf`, `plan`), so the page never says what the worker will
 * not do.
 */
import { attentionOf, type AttentionKind } from './attention.js';
import { isProbing, plan, unreachable, type LedgerRecord } from './record.js';

export interface RecordLead {
  /** Each reason a person is needed now (the attention queue's items for this record); empty when none. */
  needsPerson: { kind: AttentionKind; since: string; why: string }[];
  /**
   * What the bridge does next by itself. `acts` false: it will not move the record on its own (a
   * person, or nothing, is left), and `what` says why, worded to follow "will not act by itself:".
   * `at`: not before then (absent: at its next pass, which may be now).
   */
  bridge: { acts: boolean; what: string; at?: string };
}

export interface LeadContext {
  /** The bridge can read the merchant's operations history (its loyalty API key is set); undefined: the merchant is not known. */
  canVerify: boolean | undefined;
  nowMs: number;
}

/** A time the bridge waits for, only while it is still ahead: one already past is the next pass. */
function ahead(at: string | undefined, nowMs: number): string | undefined {
  return at !== undefined && Date.parse(at) > nowMs ? at : undefined;
}

export function leadOf(record: LedgerRecord, context: LeadContext): RecordLead {
  const needsPerson = attentionOf(record, { canVerify: context.canVerify }).map(({ kind, since, why }) => ({ kind, since, why }));
  return { needsPerson, bridge: bridgeNext(record, context) };
}

function bridgeNext(record: LedgerRecord, { canVerify, nowMs }: LeadContext): RecordLead['bridge'] {
  if (record.closed) return { acts: false, what: 'an operator closed the record, and the bridge never sends anything for it again' };
  if (canVerify === undefined) return { acts: false, what: 'its merchant is not known to this bridge, so nothing is sent for it' };
  const { accrual } = record;
  const next = plan(record);
  switch (next.kind) {
    case 'in_flight':
      return { acts: true, what: `its ${next.operation} call is under way on ${record.inFlight?.owner ?? 'an instance'}: that instance records the answer, or another takes the call over once that one stops answering` };
    case 'create_remainder':
      return { acts: true, what: 'it records what the partial refund left as a record of its own, and accrues that' };
    case 'reversal_not_needed':
      return { acts: true, what: 'it records that nothing needs reversing: the accrual was refused or skipped, so nothing was earned' };
    case 'call': {
      if (next.operation === 'accrue' && accrual.waitingBehind) {
        return { acts: true, what: `it sends the accrual once ${accrual.waitingBehind}, an accrual of the same customer and amount whose outcome is unknown, is settled: sending both now could leave the history unable to tell them apart` };
      }
      const at = ahead(next.notBefore, nowMs);
      const what = next.operation === 'accrue' ? 'it sends the accrual to the loyalty service' : isProbing(record) ? 'it asks the loyalty service whether the accrual happened, by reversing it' : 'it sends the reversal to the loyalty service';
      return { acts: true, what: at ? `${what}, after the pause between attempts` : what, ...(at ? { at } : {}) };
    }
    case 'verify': {
      if (!canVerify) return { acts: false, what: "this merchant has no loyalty API key, so the bridge cannot read the operations history that would settle it" };
      const at = ahead(next.notBefore, nowMs);
      const what =
        next.side === 'accrue' && accrual.ambiguousWith?.length
          ? `it reads the operations history again; it settles the accrual by itself once the history tells it apart from ${accrual.ambiguousWith.join(', ')} (an operation for each, or none)`
          : `it reads the operations history to settle the ${next.side === 'accrue' ? 'accrual' : 'reversal'} by itself`;
      return { acts: true, what, ...(at ? { at } : {}) };
    }
    case 'operator':
      return { acts: false, what: next.why };
    case 'settled':
      return { acts: false, what: 'the record is settled' };
    default:
      return unreachable(next);
  }
}
