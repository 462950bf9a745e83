/**
 * Settles an in-doubt accrual from the loyalty service's operations history, never by guessing.
 * Operations carry no transactionId, so (bridge-contract, "Rules the loyalty service imposes") an
 * operation proves the accrual when it is on the customer's card, its `purchaseSum` equals the
 * Check amount / 100, it was created no earlier than the attempt began (less a clock-skew margin),
 * and no other ledger record has claimed its id. Absence proves the accrual did not happen only
 * after a grace period: a slow request may still be committing upstream.
 */
import type { LedgerRecord } from '../ledger/record.js';
import type { LedgerStore } from '../ledger/store.js';
import type { LoyaltyClient } from '../loyalty/client.js';
import { centsEqualsMajor } from '../money.js';

export type Verdict =
  | { kind: 'happened'; operationId: number; cardId: string }
  | { kind: 'did_not_happen'; examinedCards: number }
  | { kind: 'too_early'; reason: string }
  | { kind: 'cannot_verify'; reason: string };

export interface VerifierOptions {
  graceMs: number;
  clockSkewMs: number;
}

export class HistoryVerifier {
  constructor(
    private readonly client: LoyaltyClient,
    private readonly store: LedgerStore,
    private readonly options: VerifierOptions,
  ) {}

  get enabled(): boolean {
    return this.client.canVerify;
  }

  async verifyAccrual(record: LedgerRecord, now: Date): Promise<Verdict> {
    const { check, customer, inDoubtSince } = record.accrual;
    if (!this.enabled) return { kind: 'cannot_verify', reason: 'LOYALTY_API_KEY is not set: an operator must /resolve it' };
    if (!check || !customer || !inDoubtSince) return { kind: 'cannot_verify', reason: 'the record lacks the check, customer or attempt time to match on' };
    const since = Date.parse(inDoubtSince) - this.options.clockSkewMs;
    let cardIds: string[];
    try {
      // The accrue carried every identifier the bridge had, and the upstream does not say which one it
      // found the card by (a phone it does not know, an email it does): every card any of them names
      // is searched. Missing one would turn "happened" into "did not happen" and accrue twice.
      const byPhone = customer.phone ? await this.client.findCards({ phone: customer.phone }) : [];
      const byEmail = customer.email ? await this.client.findCards({ email: customer.email }) : [];
      cardIds = [...new Set([...(customer.serialNumber ? [customer.serialNumber] : []), ...byPhone.map((c) => c.id), ...byEmail.map((c) => c.id)])];
      // The history filters by date in a time zone it does not state: a day of margin on each side.
      const startDate = utcDate(new Date(since - DAY_MS));
      const endDate = utcDate(new Date(now.getTime() + DAY_MS));
      for (const cardId of cardIds) {
        const operations = await this.client.listOperations(cardId, startDate, endDate);
        for (const op of operations) {
          if (op.cardId !== cardId || op.purchaseSum == null) continue;
          if (Date.parse(op.createdAt) < since) continue;
          if (!centsEqualsMajor(check.amount, op.purchaseSum)) continue;
          const claimedBy = await this.store.findOperationClaim(op.id);
          if (claimedBy && claimedBy !== record.transactionId) continue;
          return { kind: 'happened', operationId: op.id, cardId };
        }
      }
    } catch (error) {
      return { kind: 'cannot_verify', reason: `history lookup failed: ${(error as Error).message}` };
    }
    const waited = now.getTime() - Date.parse(inDoubtSince);
    if (waited < this.options.graceMs) {
      return { kind: 'too_early', reason: `no matching operation yet; absence is conclusive ${Math.ceil((this.options.graceMs - waited) / 1000)} s from now` };
    }
    return { kind: 'did_not_happen', examinedCards: cardIds.length };
  }
}

const DAY_MS = 86_400_000;

function utcDate(date: Date): string {
  return date.toISOString().slice(0, 10);
}
