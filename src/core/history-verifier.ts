/**
 * Settles an in-doubt accrual from the loyalty service's operations history, never by guessing.
 * Operations carry no transactionId, so (bridge-contract, "Rules the loyalty service imposes") an
 * operation proves the accrual when it is on one of the customer's cards, its `purchaseSum` equals
 * the Check amount / 100, it was created no earlier than the attempt began (less a clock-skew
 * margin), and no other ledger record has claimed its id. Absence proves the accrual did not happen
 * only after a grace period: a slow request may still be committing upstream.
 *
 * And only when no other record could have made it: another accrual of the same amount that is
 * unsettled too (in flight or in doubt), began early enough, and reaches the operation's card. Then
 * the operation is ambiguous: nobody claims it and nothing is resent (it could be either's), until
 * the others settle or an operator resolves. The bridge does not send a second accrual of one
 * customer and amount while the first is unsettled (`accrualKeys`), so this arises only where one
 * person is known by different identifiers (a phone on one order, an email on the other).
 */
import type { Customer } from '../customer.js';
import { isAccrualUnsettled, merchantOf, type LedgerRecord } from '../ledger/record.js';
import type { LedgerStore } from '../ledger/store.js';
import type { LoyaltyClient } from '../loyalty/client.js';
import type { Operation } from '../loyalty/contract.js';
import { centsEqualsMajor } from '../money.js';
import type { Verdict } from './transitions.js';

export type { Verdict };

export interface VerifierOptions {
  graceMs: number;
  clockSkewMs: number;
}

/** What the verifier reads of the loyalty service (the client's history endpoints). */
export type HistoryReader = Pick<LoyaltyClient, 'canVerify' | 'findCards' | 'listOperations'>;

export class HistoryVerifier {
  constructor(
    private readonly client: HistoryReader,
    private readonly store: Pick<LedgerStore, 'findOperationClaim' | 'listUnsettledAccruals'>,
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
    const cards = new CardLookup(this.client);
    let cardIds: string[];
    let ambiguous: Extract<Verdict, { kind: 'ambiguous' }> | undefined;
    try {
      cardIds = await cards.of(customer);
      // The history filters by date in a time zone it does not state: a day of margin on each side.
      const startDate = utcDate(new Date(since - DAY_MS));
      const endDate = utcDate(new Date(now.getTime() + DAY_MS));
      for (const cardId of cardIds) {
        for (const op of await this.client.listOperations(cardId, startDate, endDate)) {
          if (op.cardId !== cardId || op.purchaseSum == null) continue;
          if (Date.parse(op.createdAt) < since) continue;
          if (!centsEqualsMajor(check.amount, op.purchaseSum)) continue;
          const claimedBy = await this.store.findOperationClaim(merchantOf(record), op.id);
          if (claimedBy && claimedBy !== record.transactionId) continue;
          const rivals = await this.#rivals(record, op, cards);
          if (rivals.length === 0) return { kind: 'happened', operationId: op.id, cardId };
          // Another matching operation may still be this record's alone: look at every one first.
          ambiguous ??= { kind: 'ambiguous', operationId: op.id, cardId, with: rivals };
        }
      }
    } catch (error) {
      return { kind: 'cannot_verify', reason: `history lookup failed: ${(error as Error).message}` };
    }
    if (ambiguous) return ambiguous;
    const waited = now.getTime() - Date.parse(inDoubtSince);
    if (waited < this.options.graceMs) {
      return { kind: 'too_early', reason: `no matching operation yet; absence is conclusive ${Math.ceil((this.options.graceMs - waited) / 1000)} s from now` };
    }
    return { kind: 'did_not_happen', examinedCards: cardIds.length };
  }

  /**
   * The other unsettled accruals that could have made `op`: the same amount (the store's index),
   * an attempt begun no later than the operation (less the skew), and `op`'s card among theirs.
   */
  async #rivals(record: LedgerRecord, op: Operation, cards: CardLookup): Promise<string[]> {
    const rivals: string[] = [];
    const created = Date.parse(op.createdAt);
    for (const other of await this.store.listUnsettledAccruals(merchantOf(record), record.accrual.check!.amount)) {
      if (other.transactionId === record.transactionId || !isAccrualUnsettled(other) || !other.accrual.customer) continue;
      const began = other.inFlight?.startedAt ?? other.accrual.inDoubtSince;
      if (began !== undefined && Date.parse(began) - this.options.clockSkewMs > created) continue;
      if ((await cards.of(other.accrual.customer)).includes(op.cardId)) rivals.push(other.transactionId);
    }
    return rivals.sort();
  }
}

/**
 * The cards a customer's identifiers reach, looked up once per identifier in one verification. The
 * accrue carried every identifier the bridge had, and the upstream does not say which one it found
 * the card by (a phone it does not know, an email it does): every card any of them names counts.
 * Missing one would turn "happened" into "did not happen" and accrue twice.
 */
class CardLookup {
  readonly #byIdentifier = new Map<string, Promise<string[]>>();

  constructor(private readonly client: HistoryReader) {}

  async of(customer: Customer): Promise<string[]> {
    const found = await Promise.all([
      customer.phone ? this.#lookup(`phone:${customer.phone}`, () => this.client.findCards({ phone: customer.phone })) : [],
      customer.email ? this.#lookup(`email:${customer.email}`, () => this.client.findCards({ email: customer.email })) : [],
    ]);
    return [...new Set([...(customer.serialNumber ? [customer.serialNumber] : []), ...found.flat()])];
  }

  #lookup(key: string, find: () => Promise<{ id: string }[]>): Promise<string[]> {
    let ids = this.#byIdentifier.get(key);
    if (!ids) {
      ids = find().then((cards) => cards.map((c) => c.id));
      this.#byIdentifier.set(key, ids);
    }
    return ids;
  }
}

const DAY_MS = 86_400_000;

function utcDate(date: Date): string {
  return date.toISOString().slice(0, 10);
}
