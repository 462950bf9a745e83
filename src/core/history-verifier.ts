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
import type { Customer } from '../kernel/customer.js';
import { identitiesOf } from '../state/customer-index.js';
import { isAccrualUnsettled, isProbing, keyOf, merchantOf, type LedgerRecord, type ReversalShape } from '../state/record.js';
import type { ListCursor, RecordStore, SettingStore } from '../ledger/store.js';
import type { LoyaltyClient } from '../loyalty/client.js';
import type { Operation } from '../loyalty/contract.js';
import { centsEqualsMajor, exactDifference } from '../kernel/money.js';
import { mutant } from '../kernel/mutants.js';
import { describeShape, isReversalEntry, readShape, sumSign } from './reversal-shape.js';
import { ownersOf, type OperationOwners } from './operation-owners.js';
import type { ResolveOutcome, ReversalVerdict, Verdict } from './transitions.js';
import { unreachable } from '../kernel/unreachable.js';

export type { ReversalVerdict, Verdict };

export interface VerifierOptions {
  graceMs: number;
  clockSkewMs: number;
}

/** What the verifier reads of the loyalty service (the client's history endpoints). */
export type HistoryReader = Pick<LoyaltyClient, 'canVerify' | 'findCards' | 'listOperations'> & Partial<Pick<LoyaltyClient, 'cardOwner'>>;

/** What the verifier reads of the ledger: claims, unsettled accruals by amount, a customer's records, the learned reversal shape. */
export type VerifierStore = Pick<RecordStore, 'findOperationClaim' | 'listUnsettledAccruals' | 'list'> & SettingStore;

/** A reversal's history entries, found after the service confirmed it (`learnReversal`). */
export type LearnedReversal = { kind: 'learned'; operationIds: number[]; shape: Pick<ReversalShape, 'eventId' | 'sign'> } | { kind: 'not_learned'; why: string };

/** One operation of the evidence (contract v1.4), with whether it could settle the record's uncertain call and why. */
export interface EvidenceOperation {
  id: number;
  at: string;
  cardId: string;
  eventId: number;
  eventName?: string;
  amount?: number;
  purchaseSum?: number | null;
  balance?: number;
  /** The record that claimed it (its accrual's or its reversal's), when one did. */
  claimedBy?: string;
  /**
   * Unclaimed, the records whose call in doubt it may be (operation-owners.ts `ownersOf`, as the
   * three-way report names them): theirs to settle, never a double to take back by hand.
   */
  mayBeOf?: string[];
  candidate: boolean;
  why: string;
  /**
   * What the operation is, read from the history itself: a reversal's entry (this service's learned
   * reversal shape, or a negative purchase sum), an accrual (a positive purchase sum and points
   * earned), or other. The service's own event name (a reversal may be named "Points earned") is
   * not what it is.
   */
  kind: 'accrual' | 'reversal' | 'other';
  /** The card's balance before it (its balance less its points), so a person sees the arithmetic: before + points = balance. */
  balanceBefore?: number;
}

/** Another record in doubt that could own one of the operations this record could own (`mayBeOf`): the rival of an ambiguity. */
export interface EvidenceRival {
  transactionId: string;
  /** The operations, candidates of this record, that it could own as well. */
  operationIds: number[];
}

export interface Evidence {
  transactionId: string;
  merchantId: string;
  /** The call in question: an accrual or a reversal whose outcome is unknown, or none (the last call's). */
  question: 'accrual' | 'reversal' | 'none';
  window: { from: string; to: string };
  cards: { serialNumber: string; balance?: number }[];
  operations: EvidenceOperation[];
  reading: ResolveOutcome | 'ambiguous' | 'unknown';
  why: string;
  /**
   * Whether the operations were read: `read`; `unreadable` (the history failed: `operations` is then
   * empty and says nothing about whether the call happened); `not_configured` (no API key to read it).
   * A person must never take an empty list of an unread history for "no operation".
   */
  history: 'read' | 'unreadable' | 'not_configured';
  /** How this merchant's loyalty service shows a reversal, when learned. */
  reversalShape?: ReversalShape;
  /** The other records in doubt that could own this record's candidate operations: none where no ambiguity stands. */
  rivals: EvidenceRival[];
}

/** Records of one customer looked at for rival reversals: past it, another cannot be ruled out and a person decides. */
const RIVAL_SCAN = 200;

export class HistoryVerifier {
  constructor(
    private readonly client: HistoryReader,
    private readonly store: VerifierStore,
    private readonly options: VerifierOptions,
  ) {}

  get enabled(): boolean {
    return this.client.canVerify;
  }

  /**
   * When the absence of a call's entry becomes conclusive: the moment, not a countdown, so that every
   * look before it writes the same history line (which the console shows once, with a count).
   */
  #conclusiveAt(inDoubtSince: string): string {
    return new Date(Date.parse(inDoubtSince) + this.options.graceMs).toISOString();
  }

  /** The phone and email of the customer a card belongs to (undefined: no such card); throws where the service cannot be asked (no API key). */
  async cardOwner(serial: string): Promise<{ phone?: string; email?: string } | undefined> {
    if (!this.enabled || !this.client.cardOwner) throw new Error("the loyalty service's cards cannot be read without the merchant's API key");
    return this.client.cardOwner(serial);
  }

  async verifyAccrual(record: LedgerRecord, now: Date): Promise<Verdict> {
    const { check, customer, inDoubtSince } = record.accrual;
    if (!this.enabled) return { kind: 'cannot_verify', reason: "the merchant's loyalty API key is not set (LOYALTY_API_KEY for default), so the history cannot be read: a person must resolve it" };
    if (!check || !customer || !inDoubtSince) return { kind: 'cannot_verify', reason: 'the record lacks the check, customer or attempt time to match on' };
    const since = Date.parse(inDoubtSince) - this.options.clockSkewMs;
    const cards = new CardLookup(this.client);
    const reads = new Map<string, Promise<Operation[]>>();
    let cardIds: string[];
    let ambiguous: Extract<Verdict, { kind: 'ambiguous' }> | undefined;
    try {
      cardIds = await cards.of(customer);
      const shape = await readShape(this.store, merchantOf(record));
      const contenders = await this.store.listUnsettledAccruals(merchantOf(record), check.amount);
      for (const cardId of cardIds) {
        for (const op of await this.#operations(cardId, since, now, reads)) {
          const claimedBy = await this.store.findOperationClaim(merchantOf(record), op.id);
          if (!accrualCandidate(op, record, cardId, since, claimedBy, shape).candidate) continue;
          const rivals = await this.#rivals(record, op, cards, contenders);
          if (rivals.length === 0 || mutant('claim-ambiguous')) return { kind: 'happened', operationId: op.id, cardId };
          // Another matching operation may still be this record's alone: look at every one first.
          ambiguous ??= { kind: 'ambiguous', operationId: op.id, cardId, with: rivals };
        }
      }
      if (ambiguous) {
        const counted = await this.#count(record, contenders, cards, shape, now, reads);
        if (counted.kind === 'happened') return counted;
        return counted.kind === 'askable' ? { ...ambiguous, askable: true } : ambiguous;
      }
    } catch (error) {
      return { kind: 'cannot_verify', reason: `history lookup failed: ${(error as Error).message}` };
    }
    const waited = now.getTime() - Date.parse(inDoubtSince);
    if (waited < this.options.graceMs) {
      return { kind: 'too_early', reason: `no matching operation yet; absence is conclusive at ${this.#conclusiveAt(inDoubtSince)}` };
    }
    return { kind: 'did_not_happen', examinedCards: cardIds.length };
  }

  /**
   * The count rule, where an operation could be this accrual's or another's: the group is the
   * accruals in doubt that could have made the unclaimed matching operations on their cards (each
   * operation's possible makers, until no operation names one outside the group). When every one of
   * them can be given an operation of its own (on one of its cards, made after its call began), all
   * of them happened: this record takes the operation the matching gives it. Fewer operations than
   * accruals is the true ambiguity (undefined). So is a group with a call still out (its answer may
   * yet name the operation) or a record a person settled (its operation is not known).
   */
  async #count(record: LedgerRecord, contenders: LedgerRecord[], cards: CardLookup, shape: ReversalShape | undefined, now: Date, reads: Map<string, Promise<Operation[]>>): Promise<Extract<Verdict, { kind: 'happened' }> | { kind: 'askable' | 'not_counted' }> {
    const notCounted = { kind: 'not_counted' as const };
    const merchantId = merchantOf(record);
    const others = contenders.filter((c) => c.transactionId !== record.transactionId);
    /** Each matching unclaimed operation on a group member's card, with the members that could have made it. */
    const operations = new Map<number, { op: Operation; cardId: string; makers: Set<string> }>();
    const sinceOf = (r: LedgerRecord) => Date.parse(r.accrual.inDoubtSince!) - this.options.clockSkewMs;
    const group = await closeGroup(record, async (member, inGroup) => {
      const joining: LedgerRecord[] = [];
      for (const cardId of await cards.of(member.accrual.customer!)) {
        for (const op of await this.#operations(cardId, sinceOf(member), now, reads)) {
          const claimedBy = await this.store.findOperationClaim(merchantId, op.id);
          if (!accrualCandidate(op, member, cardId, sinceOf(member), claimedBy, shape).candidate) continue;
          const entry = operations.get(op.id) ?? { op, cardId, makers: new Set<string>() };
          entry.makers.add(member.transactionId);
          operations.set(op.id, entry);
          for (const rival of await this.#rivals(member, op, cards, others)) {
            entry.makers.add(rival);
            if (inGroup(rival)) continue;
            const other = contenders.find((c) => c.transactionId === rival);
            // A call out, a record a person settled, one of more records than were looked at: not counted.
            if (!other || other.inFlight || other.accrual.state !== 'in_doubt' || isProbing(other) || !other.accrual.inDoubtSince || !other.accrual.customer) return undefined;
            joining.push(other);
          }
        }
      }
      return joining;
    });
    if (!group) return notCounted;
    // Each member an operation of its own, in the order the calls began, each taking the earliest it
    // can: an operation can only follow its call, so this finds a matching whenever one exists on one
    // card, and gives the calls their operations in time order (the same card and sum either way).
    const members = [...group.values()].sort((a, b) => sinceOf(a) - sinceOf(b) || a.transactionId.localeCompare(b.transactionId));
    const free = [...operations.values()].sort((a, b) => Date.parse(a.op.createdAt) - Date.parse(b.op.createdAt) || a.op.id - b.op.id);
    const given = new Map<string, { op: Operation; cardId: string }>();
    if (mutant('count-fewer') && free[0]) return { kind: 'happened', operationId: free[0].op.id, cardId: free[0].cardId, counted: { inDoubt: [...group.keys()].sort(), operations: free.length } };
    for (const member of members) {
      const i = free.findIndex((o) => o.makers.has(member.transactionId));
      if (i < 0) return this.#askable(record, members, now) ? { kind: 'askable' } : notCounted;
      given.set(member.transactionId, free.splice(i, 1)[0]!);
    }
    const mine = given.get(record.transactionId)!;
    return { kind: 'happened', operationId: mine.op.id, cardId: mine.cardId, counted: { inDoubt: members.map((m) => m.transactionId).sort(), operations: operations.size } };
  }

  /**
   * Whether the service may be asked about this record (`startProbe`): every accrual of the group in
   * doubt past the grace period (no late commit can still appear), and this one the first of those
   * with no reversal asked for, by when their calls began (one asked at a time; an order refunded
   * meanwhile is left to its refund).
   */
  #askable(record: LedgerRecord, members: LedgerRecord[], now: Date): boolean {
    if (members.some((m) => now.getTime() - Date.parse(m.accrual.inDoubtSince!) < this.options.graceMs)) return false;
    const first = members.find((m) => m.reversal.state === 'none' && !m.reversal.partial);
    return first?.transactionId === record.transactionId;
  }

  /**
   * The merchant's accruals of this amount a person settled without naming their operation
   * (`personSettledAt`) that can no longer be mistaken for anyone's: settled long enough ago that
   * an accrual sent from now on begins after their operation, and no accrual of the amount still
   * unsettled began early enough to find it. The delivery releases them (`releasePersonSettled`),
   * so the merchant's unsettled accruals of an amount stay as few as its recent doubts.
   */
  async releasable(merchantId: string, amountCents: number, now: Date): Promise<LedgerRecord[]> {
    const contenders = await this.store.listUnsettledAccruals(merchantId, amountCents);
    const skew = this.options.clockSkewMs;
    const began = contenders.filter((c) => isAccrualUnsettled(c)).map((c) => Date.parse(c.inFlight?.startedAt ?? c.accrual.inDoubtSince ?? c.updatedAt));
    const earliest = Math.min(now.getTime() - this.options.graceMs, ...began);
    return contenders.filter((c) => c.accrual.personSettledAt !== undefined && !isAccrualUnsettled(c) && Date.parse(c.accrual.personSettledAt) + 2 * skew < earliest);
  }

  /**
   * The merchant's reversals left to a person (`reversal.unproven`) of this amount, but `settled`'s:
   * once a reversal of the amount has settled, one it kept from being proven may be provable
   * (docs/correctness.md, finding 3). Looked for among the merchant's records in doubt (the queue,
   * not the history), and not among the customer's: one person may be known by a phone on one order
   * and an email on the other, which only the history's entries tie together.
   */
  async unprovenReversals(merchantId: string, amountCents: number, settled: string): Promise<LedgerRecord[]> {
    const found: LedgerRecord[] = [];
    for (let after: ListCursor | undefined; ; ) {
      const page = await this.store.list({ merchantId, status: 'in_doubt', offset: 0, limit: RIVAL_SCAN, ...(after ? { after } : {}) });
      for (const record of page.items) {
        if (record.transactionId !== settled && record.reversal.state === 'in_doubt' && record.reversal.unproven && record.accrual.check?.amount === amountCents) found.push(record);
      }
      const last = page.items.at(-1);
      if (page.items.length < RIVAL_SCAN || !last) return found;
      after = { createdAt: last.createdAt, key: keyOf(last) };
    }
  }

  /**
   * A reversal whose outcome is unknown, from the history (reversal-shape.ts): reversed when each
   * card it should have reversed shows exactly one unclaimed entry of the merchant's learned shape
   * with the Check's sum since the call began, and no other record of the customer could have made
   * one (`#reversalRivals`). Anything else is left to a person (`unproven`), except an entry not
   * there yet within the grace period (a slow request may still be committing).
   */
  async verifyReversal(record: LedgerRecord, now: Date): Promise<ReversalVerdict> {
    const { check, customer } = record.accrual;
    const inDoubtSince = record.reversal.inDoubtSince;
    if (!this.enabled) return { kind: 'cannot_verify', reason: "the merchant's loyalty API key is not set (LOYALTY_API_KEY for default), so the history cannot be read: a person must resolve it" };
    if (!check || !customer || !inDoubtSince) return { kind: 'cannot_verify', reason: 'the record lacks the check, customer or attempt time to match on' };
    const shape = await readShape(this.store, merchantOf(record));
    if (!shape) return { kind: 'unproven', reading: 'unknown', why: 'no reversal of this merchant has been confirmed by the loyalty service yet, so how its history shows one is not known' };
    const since = Date.parse(inDoubtSince) - this.options.clockSkewMs;
    const cards = new CardLookup(this.client);
    const credited = creditedCards(record);
    try {
      const looked = credited.length ? credited : await cards.of(customer);
      if (!credited.length && record.accrual.operationIds.length !== 1) {
        return { kind: 'unproven', reading: 'unknown', why: 'which of the customer\'s cards the accrual credited is not recorded, so the reversals to look for cannot be counted' };
      }
      const found = new Map<string, Operation[]>();
      for (const cardId of looked) {
        const entries: Operation[] = [];
        for (const op of await this.#operations(cardId, since, now)) {
          const claimedBy = await this.store.findOperationClaim(merchantOf(record), op.id);
          if (reversalCandidate(op, record, cardId, since, claimedBy, shape).candidate) entries.push(op);
        }
        found.set(cardId, entries);
      }
      const all = [...found.values()].flat();
      const many = [...found].filter(([, ops]) => ops.length > 1);
      if (many.length) {
        const counted = credited.length === 1 ? await this.#countReversals(record, credited[0]!, shape, now) : undefined;
        if (counted) return counted;
        return { kind: 'unproven', reading: 'ambiguous', why: `card ${many[0]![0]} shows ${many[0]![1].length} entries of ${describeShape(shape)} for ${check.amount} cents since the call: which is this reversal's cannot be told` };
      }
      const missing = credited.length ? [...found].filter(([, ops]) => ops.length === 0).map(([card]) => card) : all.length === 0 ? looked : [];
      if (!credited.length && all.length > 1) return { kind: 'unproven', reading: 'ambiguous', why: `${all.length} entries of ${describeShape(shape)} for ${check.amount} cents on the customer's cards since the call` };
      if (missing.length) {
        const waited = now.getTime() - Date.parse(inDoubtSince);
        if (waited < this.options.graceMs) return { kind: 'too_early', reason: `no reversal entry yet on card ${missing.join(', ')}; conclusive at ${this.#conclusiveAt(inDoubtSince)}` };
        const none = missing.length === looked.length;
        return {
          kind: 'unproven',
          reading: none ? 'not_reversed' : 'unknown',
          why: none
            ? `no entry of ${describeShape(shape)} for ${check.amount} cents on card ${missing.join(', ')} since the call, past the grace period: it looks not reversed, which only a person may conclude (reversing again would take the points twice if it did happen)`
            : `reversed on some cards but no entry on card ${missing.join(', ')}: a person decides`,
        };
      }
      const rivals = await this.#reversalRivals(record, all, since, now);
      if (rivals === 'too_many') return { kind: 'unproven', reading: 'unknown', why: `the customer has more than ${RIVAL_SCAN} records: another reversal of ${check.amount} cents cannot be ruled out` };
      if (rivals.others.length) {
        const counted = credited.length === 1 ? await this.#countReversals(record, credited[0]!, shape, now) : undefined;
        if (counted) return counted;
        return { kind: 'unproven', reading: 'ambiguous', why: `the entr${all.length === 1 ? 'y' : 'ies'} could be the reversal of ${rivals.others.map((o) => o.transactionId).join(', ')} too (the same customer and amount, its own entries not claimed)` };
      }
      // A reversal confirmed a moment ago whose entries are being noted: looked at again once they are.
      if (rivals.noting.length) return { kind: 'too_early', reason: `the confirmed reversal of ${rivals.noting.join(', ')} (the same customer and amount) is having its history entries noted: looked at again after that` };
      return { kind: 'reversed', operationIds: all.map((op) => op.id), cards: [...found.keys()], shape };
    } catch (error) {
      return { kind: 'cannot_verify', reason: `history lookup failed: ${(error as Error).message}` };
    }
  }

  /**
   * The count rule for reversals, where an entry could be this reversal's or another's: the group is
   * this reversal and the customer's other reversals of the amount in doubt that could have made an
   * entry on the card (`#reversalRivals` of each, until none names one outside the group). Each
   * reversal leaves at most one entry on a card it reverses, so when the unclaimed entries of the
   * shape and sum on the card since the earliest call began are exactly as many as the group, and
   * each reversal can be given one made after its own call began, all of them happened: this one
   * takes the entry the matching gives it, in the order the calls began. Fewer entries is the true
   * ambiguity, more means something outside the group made one: both are left (undefined). So is a
   * group with a call still out, a reversal a person settled without naming its entry, or one that
   * credited other cards. A confirmed reversal whose entry was not noted (when it was answered, the
   * card showed another unclaimed entry too) is a member that certainly made one; one confirmed
   * within the grace period may still be noted, so the count waits for it (`too_early`).
   */
  async #countReversals(record: LedgerRecord, cardId: string, shape: ReversalShape, now: Date): Promise<Extract<ReversalVerdict, { kind: 'reversed' | 'too_early' }> | undefined> {
    const merchantId = merchantOf(record);
    // A confirmed reversal whose entry was never noted (its answer's moment showed more than one) is
    // a member known to have made one, at the time the service stamped on its results.
    const confirmedAt = (r: LedgerRecord) => Math.max(...r.reversal.results.filter((x) => x.isSuccess && x.serialNumber === cardId).map((x) => Date.parse(x.reversedAt ?? '')).filter((ms) => !Number.isNaN(ms)));
    const confirmedUnnoted = (r: LedgerRecord) => r.reversal.state === 'reversed' && r.reversal.operationIds === undefined && Number.isFinite(confirmedAt(r));
    const sinceOf = (r: LedgerRecord) => (r.reversal.state === 'in_doubt' ? Date.parse(r.reversal.inDoubtSince!) : confirmedAt(r)) - this.options.clockSkewMs;
    // A confirmed member's entry was made by the time its answer was stamped (within the skew): it is
    // never given a later one. The entry it is given stays unclaimed (nothing notes it), and it is a
    // rival of later reversals for exactly that long (`#reversalRivals`), so the leftover entry can
    // never look like a later reversal's own.
    const untilOf = (r: LedgerRecord) => (r.reversal.state === 'in_doubt' ? Number.POSITIVE_INFINITY : confirmedAt(r) + this.options.clockSkewMs);
    const countable = (r: LedgerRecord) =>
      !r.inFlight &&
      !isProbing(r) &&
      r.accrual.check?.amount === record.accrual.check!.amount &&
      sameCards(creditedCards(r), [cardId]) &&
      ((r.reversal.state === 'in_doubt' && r.reversal.inDoubtSince !== undefined) || confirmedUnnoted(r));
    // The card's history of the same days is read once for the whole count (members whose calls
    // fall on other days read it again, later). Each read comes before that member's rivals are
    // listed; an entry claimed since it was read is caught below, before anything is concluded.
    const reads = new Map<string, Promise<Operation[]>>();
    const entriesOf = async (member: LedgerRecord): Promise<Operation[]> => {
      const found: Operation[] = [];
      for (const op of await this.#operations(cardId, sinceOf(member), now, reads)) {
        if (Date.parse(op.createdAt) > untilOf(member)) continue;
        const claimedBy = await this.store.findOperationClaim(merchantId, op.id);
        if (reversalCandidate(op, member, cardId, sinceOf(member), claimedBy, shape).candidate) found.push(op);
      }
      return found;
    };
    const entries = new Map<string, Operation[]>();
    const noting: string[] = [];
    const group = await closeGroup(record, async (member, inGroup) => {
      const mine = await entriesOf(member);
      entries.set(member.transactionId, mine);
      const rivals = await this.#reversalRivals(member, mine, sinceOf(member), now);
      if (rivals === 'too_many') return undefined;
      if (rivals.noting.length) {
        noting.push(...rivals.noting);
        return undefined;
      }
      const joining = rivals.others.filter((other) => !inGroup(other.transactionId));
      return joining.every(countable) ? joining : undefined;
    });
    // A reversal confirmed a moment ago whose entries are being noted: counted again once they are.
    if (noting.length) return { kind: 'too_early', reason: `the confirmed reversal of ${[...new Set(noting)].sort().join(', ')} (the same customer and amount) is having its history entries noted: looked at again after that` };
    if (!group) return undefined;
    // Each member an entry of its own: those whose window closes first choose first, each the
    // earliest it may have (the greedy that finds a matching of points to intervals whenever one
    // exists); among reversals in doubt, whose windows stay open, in the order their calls began.
    const members = [...group.values()].sort((a, b) => untilOf(a) - untilOf(b) || sinceOf(a) - sinceOf(b) || a.transactionId.localeCompare(b.transactionId));
    const free = [...new Map([...entries.values()].flat().map((op) => [op.id, op])).values()].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || a.id - b.id);
    // The rivals were listed after the card was read: one that settled in between has claimed its
    // entry and left the group, so the read would count an entry no member can have. Counted again
    // on the next look, from a fresh read.
    for (const op of free) {
      const claimedBy = await this.store.findOperationClaim(merchantId, op.id);
      if (claimedBy) return { kind: 'too_early', reason: `operation ${op.id} was claimed by ${claimedBy} while the reversals of the amount were counted: counted again from a fresh read` };
    }
    const total = free.length;
    if (mutant('count-reversals-fewer') && free[0]) return { kind: 'reversed', operationIds: [free[0].id], cards: [cardId], shape, counted: { inDoubt: members.map((m) => m.transactionId).sort(), operations: total } };
    if (total !== members.length) return undefined;
    let given: Operation | undefined;
    for (const member of members) {
      const i = free.findIndex((op) => entries.get(member.transactionId)!.some((e) => e.id === op.id));
      if (i < 0) return undefined;
      const [op] = free.splice(i, 1);
      if (member.transactionId === record.transactionId) given = op;
    }
    if (!given) return undefined;
    return { kind: 'reversed', operationIds: [given.id], cards: [cardId], shape, counted: { inDoubt: members.map((m) => m.transactionId).sort(), operations: total } };
  }

  /**
   * After the service confirmed a reversal (its results carry `reversedAt`): the history's entry of
   * it on each reversed card, read once, at that moment (within the clock-skew margin), with the
   * Check's sum of either sign, claimed by no record and not the accrual's own. Exactly one on each
   * card, all of one event and sign: those are claimed and that is the shape (reversal-shape.ts). A
   * positive shape is learned only when the same read shows the accrual's entry under another event:
   * otherwise reversals could not be told from accruals.
   */
  async learnReversal(record: LedgerRecord): Promise<LearnedReversal> {
    const check = record.accrual.check;
    const reversed = record.reversal.results.filter((r) => r.isSuccess && r.reversedAt && r.serialNumber);
    if (!this.enabled) return { kind: 'not_learned', why: 'LOYALTY_API_KEY is not set' };
    if (!check || reversed.length === 0) return { kind: 'not_learned', why: 'no card was reversed' };
    const entries: Operation[] = [];
    const accrualEvents = new Set<number>();
    try {
      for (const result of reversed) {
        const at = Date.parse(result.reversedAt!);
        const ops = await this.client.listOperations(result.serialNumber!, utcDate(new Date(at - DAY_MS)), utcDate(new Date(at + DAY_MS)));
        const matching: Operation[] = [];
        for (const op of ops) {
          if (op.cardId !== result.serialNumber) continue;
          if (record.accrual.operationIds.includes(op.id)) {
            accrualEvents.add(op.eventId);
            continue;
          }
          if (Math.abs(Date.parse(op.createdAt) - at) > this.options.clockSkewMs || sumSign(op, check.amount) === undefined) continue;
          if (await this.store.findOperationClaim(merchantOf(record), op.id)) continue;
          matching.push(op);
        }
        if (matching.length !== 1) return { kind: 'not_learned', why: `card ${result.serialNumber} shows ${matching.length} unclaimed entries for ${check.amount} cents at ${result.reversedAt}` };
        entries.push(matching[0]!);
      }
    } catch (error) {
      return { kind: 'not_learned', why: `history lookup failed: ${(error as Error).message}` };
    }
    const shapes = new Set(entries.map((op) => `${op.eventId}/${sumSign(op, check.amount)}`));
    if (shapes.size !== 1) return { kind: 'not_learned', why: 'the reversed cards show entries of different events or signs' };
    const shape = { eventId: entries[0]!.eventId, sign: sumSign(entries[0]!, check.amount)! };
    if (shape.sign === 1 && (accrualEvents.size === 0 || accrualEvents.has(shape.eventId))) {
      return { kind: 'not_learned', why: `its entries (${describeShape(shape)}) cannot be told from the accrual's` };
    }
    return { kind: 'learned', operationIds: entries.map((op) => op.id), shape };
  }

  /**
   * The evidence for a person deciding a record (GET /v1/admin/transactions/{id}/evidence): the
   * customer's cards and every operation on them around the uncertain call, each marked a candidate
   * or not by the same rules the verifier applies, and what the verifier reads from them. Changes nothing.
   * `withReading: false`: the operations only (a person's resolve naming its operation needs no
   * reading, which reads the history again), the reading `unknown`.
   */
  async evidence(record: LedgerRecord, now: Date, withReading = true): Promise<Evidence> {
    const question: Evidence['question'] =
      record.reversal.state === 'in_doubt' || record.inFlight?.operation === 'reverse' ? 'reversal' : record.accrual.state === 'in_doubt' || record.inFlight?.operation === 'accrue' ? 'accrual' : 'none';
    const shape = await readShape(this.store, merchantOf(record));
    const began = question === 'reversal' ? (record.reversal.inDoubtSince ?? record.inFlight?.startedAt) : question === 'accrual' ? (record.accrual.inDoubtSince ?? record.inFlight?.startedAt) : record.attempts.at(-1)?.startedAt;
    const fromMs = Date.parse(began ?? record.createdAt) - this.options.clockSkewMs;
    const window = { from: new Date(fromMs).toISOString(), to: now.toISOString() };
    const base = { transactionId: record.transactionId, merchantId: merchantOf(record), question, window, ...(shape ? { reversalShape: shape } : {}) };
    const { customer } = record.accrual;
    // The cards the record itself names (those its accrual credited) are known without the history.
    const named = (serials: readonly string[]) => serials.map((serialNumber) => ({ serialNumber }));
    if (!this.enabled) return { ...base, rivals: [], cards: named(creditedCards(record)), operations: [], history: 'not_configured', reading: 'unknown', why: "LOYALTY_API_KEY is not set (nor the merchant's loyalty.apiKey): the operations history cannot be read, so nothing here shows whether the call happened" };
    const cards = new CardLookup(this.client);
    let cardIds: string[] = creditedCards(record);
    const operations: EvidenceOperation[] = [];
    try {
      const doubtful = await this.#doubtfulBeside(record);
      cardIds = [...new Set([...cardIds, ...(customer ? await cards.of(customer) : [])])];
      for (const cardId of cardIds) {
        for (const op of await this.#operations(cardId, fromMs, now)) {
          const claimedBy = await this.store.findOperationClaim(merchantOf(record), op.id);
          const judged =
            question === 'reversal'
              ? shape
                ? reversalCandidate(op, record, cardId, fromMs, claimedBy, shape)
                : { candidate: false, why: 'how this service shows a reversal is not learned yet' }
              : question === 'accrual'
                ? accrualCandidate(op, record, cardId, fromMs, claimedBy, shape)
                : { candidate: false, why: claimedBy ? `claimed by ${claimedBy}` : 'no call of this record is in doubt' };
          operations.push({
            id: op.id,
            at: op.createdAt,
            cardId,
            eventId: op.eventId,
            ...(op.eventName !== undefined ? { eventName: op.eventName.trim() } : {}),
            ...(op.amount !== undefined ? { amount: op.amount } : {}),
            purchaseSum: op.purchaseSum ?? null,
            ...(op.balance !== undefined ? { balance: op.balance } : {}),
            ...ownersIn(ownersOf(op, claimedBy, doubtful, shape, this.options.clockSkewMs)),
            ...judged,
            kind: operationKind(op, shape),
            ...balanceBeforeOf(op),
          });
        }
      }
    } catch (error) {
      // What was read before the failure is not shown: a part of the history is no evidence of what the rest holds.
      return { ...base, rivals: [], cards: named(cardIds), operations: [], history: 'unreadable', reading: 'unknown', why: `the operations history could not be read (${(error as Error).message}), so nothing here shows whether the call happened; try again later` };
    }
    operations.sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.id - b.id);
    const cardsOut = cardIds.map((serialNumber) => {
      const last = operations.filter((o) => o.cardId === serialNumber && o.balance !== undefined).at(-1);
      return { serialNumber, ...(last ? { balance: last.balance } : {}) };
    });
    const reading = withReading ? await this.#reading(record, question, now) : { reading: 'unknown' as const, why: 'not read' };
    return { ...base, cards: cardsOut, operations, history: 'read', ...reading, rivals: rivalsOf(record, operations) };
  }

  /**
   * The record and the merchant's other records in doubt of the same Check amount: whose calls an
   * operation on these cards may be (`ownersOf`). Unsettled accruals come from their own index;
   * records with a reversal in doubt are few (each waits for the verifier or a person): the newest
   * RIVAL_SCAN of them are looked at.
   */
  async #doubtfulBeside(record: LedgerRecord): Promise<LedgerRecord[]> {
    const amount = record.accrual.check?.amount;
    if (amount === undefined) return [record];
    const merchantId = merchantOf(record);
    const accruals = await this.store.listUnsettledAccruals(merchantId, amount);
    const inDoubt = (await this.store.list({ merchantId, status: 'in_doubt', offset: 0, limit: RIVAL_SCAN })).items.filter((r) => r.accrual.check?.amount === amount);
    return [...new Map([record, ...accruals, ...inDoubt].map((r) => [r.transactionId, r])).values()];
  }

  /** What the verifier concludes from the history for the question, in the evidence's words. */
  async #reading(record: LedgerRecord, question: Evidence['question'], now: Date): Promise<Pick<Evidence, 'reading' | 'why'>> {
    if (question === 'none') return { reading: 'unknown', why: 'no call of this record is in doubt: its outcome is known' };
    if (question === 'accrual') {
      if (record.inFlight) return { reading: 'unknown', why: 'the accrue call is still out' };
      const verdict = await this.verifyAccrual(record, now);
      switch (verdict.kind) {
        case 'happened':
          return { reading: 'accrued', why: `operation ${verdict.operationId} on card ${verdict.cardId} matches the accrual and no other record could have made it` };
        case 'did_not_happen':
          return { reading: 'not_accrued', why: `no matching operation on ${verdict.examinedCards} card(s) after the grace period` };
        case 'ambiguous':
          return { reading: 'ambiguous', why: `operation ${verdict.operationId} on card ${verdict.cardId} could be the accrual of ${verdict.with.join(', ')} too` };
        case 'too_early':
        case 'cannot_verify':
          return { reading: 'unknown', why: verdict.reason };
        default:
          return unreachable(verdict);
      }
    }
    if (record.inFlight) return { reading: 'unknown', why: 'the reverse call is still out' };
    const verdict = await this.verifyReversal(record, now);
    switch (verdict.kind) {
      case 'reversed':
        if (verdict.counted) return { reading: 'reversed', why: `${verdict.counted.operations} unclaimed entries of ${describeShape(verdict.shape)} on card ${verdict.cards.join(', ')} for the ${verdict.counted.inDoubt.length} reversals in doubt that could have made them (${verdict.counted.inDoubt.join(', ')}): all happened; operation ${verdict.operationIds.join(', ')} is this one's` };
        return { reading: 'reversed', why: `operation ${verdict.operationIds.join(', ')} (${describeShape(verdict.shape)}) on card ${verdict.cards.join(', ')}: one on each, claimed by no record, none could be another's` };
      case 'unproven':
        return { reading: verdict.reading, why: verdict.why };
      case 'too_early':
      case 'cannot_verify':
        return { reading: 'unknown', why: verdict.reason };
      default:
        return unreachable(verdict);
    }
  }

  /** Operations on a card from `fromMs` to `now` (the history filters by day in an unstated time zone: a day of margin, then exact times). */
  async #operations(cardId: string, fromMs: number, now: Date, reads?: Map<string, Promise<Operation[]>>): Promise<Operation[]> {
    const [startDate, endDate] = [utcDate(new Date(fromMs - DAY_MS)), utcDate(new Date(now.getTime() + DAY_MS))];
    // Within one verification (`reads`), a card's history of the same days is read once, however many accruals of the count look at it.
    const key = `${cardId}|${startDate}|${endDate}`;
    let read = reads?.get(key);
    if (!read) {
      read = this.client.listOperations(cardId, startDate, endDate);
      reads?.set(key, read);
    }
    const ops = await read;
    return ops.filter((op) => op.cardId === cardId && Date.parse(op.createdAt) >= fromMs);
  }

  /**
   * Other records of the customer (by any identifier of its own or of the cards' owner, through the
   * customer index) that could have left one of `entries`: the same Check amount, and a reversal in
   * doubt, out now, confirmed since `since` (less the skew) without its entries claimed, or settled by a person
   * without naming them.
   */
  async #reversalRivals(record: LedgerRecord, entries: Operation[], since: number, now: Date): Promise<{ others: LedgerRecord[]; noting: string[] } | 'too_many'> {
    const owners = entries.map((op) => (op as { customer?: { phone?: string | null; email?: string | null } }).customer).filter((c) => c !== undefined);
    const identities = [...new Set([...identitiesOf(record.accrual.customer), ...owners.flatMap((c) => identitiesOf({ phone: c.phone ?? undefined, email: c.email ?? undefined }))])];
    const page = await this.store.list({ merchantId: merchantOf(record), customer: identities, offset: 0, limit: RIVAL_SCAN });
    if (page.totalCapped || page.total > RIVAL_SCAN) return 'too_many';
    const amount = record.accrual.check!.amount;
    const others: LedgerRecord[] = [];
    const noting: string[] = [];
    for (const other of page.items) {
      if (keyOf(other) === keyOf(record) || other.accrual.check?.amount !== amount) continue;
      if (other.reversal.state === 'in_doubt' || other.inFlight?.operation === 'reverse') {
        others.push(other);
        continue;
      }
      if (other.reversal.state === 'reversed' && other.reversal.operationIds === undefined && !other.reversal.results.some((r) => r.reversedAt)) {
        // A person settled it as reversed without naming its entry (resolve reversed): its entry, if
        // its call could have left one since `since` (a call commits within its timeout and the
        // grace period), is in the history claimed by nobody, as a rival's would be.
        const lastCall = Math.max(...other.attempts.filter((a) => a.operation === 'reverse').map((a) => Date.parse(a.startedAt)));
        if (lastCall >= since - this.options.graceMs) others.push(other);
        continue;
      }
      // Within the skew of `since`: its entry may have been made up to the skew after its answer's stamp (`#countReversals`).
      const confirmed = other.reversal.results.map((r) => Date.parse(r.reversedAt ?? '')).filter((ms) => !Number.isNaN(ms) && ms + this.options.clockSkewMs >= since);
      if (other.reversal.operationIds !== undefined || confirmed.length === 0) continue;
      // Its entries are noted right after its answer; one still unnoted past the grace period never will be.
      if (now.getTime() - Math.max(...confirmed) < this.options.graceMs) noting.push(other.transactionId);
      else others.push(other);
    }
    return { others: others.sort((a, b) => a.transactionId.localeCompare(b.transactionId)), noting: noting.sort() };
  }

  /**
   * The other accruals that could have made `op`, among the merchant's unsettled accruals of the
   * amount (`contenders`, the store's index): an attempt begun no later than the operation (less the
   * skew) and `op`'s card among theirs; and the records a person settled as accrued without naming
   * their operation, settled late enough that theirs could be `op` (`personSettledAt`, in the same
   * index; `#settledByAPersonBefore` for those settled before it was kept).
   */
  async #rivals(record: LedgerRecord, op: Operation, cards: CardLookup, contenders: LedgerRecord[]): Promise<string[]> {
    const rivals: string[] = [];
    const created = Date.parse(op.createdAt);
    const skew = this.options.clockSkewMs;
    for (const other of contenders) {
      if (other.transactionId === record.transactionId || !other.accrual.customer) continue;
      if (isAccrualUnsettled(other)) {
        // When its accrue began (a probe's reverse out now is not it).
        const began = other.inFlight?.operation === 'accrue' ? other.inFlight.startedAt : other.accrual.inDoubtSince;
        if (began !== undefined && Date.parse(began) - skew > created) continue;
      } else if (other.accrual.personSettledAt !== undefined) {
        // Its operation was made before a person settled it (less the skew) and after it was recorded.
        if (Date.parse(other.accrual.personSettledAt) + skew < created || Date.parse(other.createdAt) - skew > created) continue;
      } else continue;
      if ((await cards.of(other.accrual.customer)).includes(op.cardId)) rivals.push(other.transactionId);
    }
    for (const other of await this.#settledByAPersonBefore(record, op)) {
      if (other.accrual.customer && (await cards.of(other.accrual.customer)).includes(op.cardId)) rivals.push(other.transactionId);
    }
    return [...new Set(rivals)].sort();
  }

  /**
   * Records of the customer (any identifier of the record's or of `op`'s card owner, through the
   * customer index) whose accrual a person settled as done without naming its operation before the
   * bridge kept when (`personSettledAt`), of the same Check amount, made no later than `op` (less the
   * skew): their operation is in the history and claimed by nobody, so `op` may be it (found by the
   * model check, docs/correctness.md). The customer's newest RIVAL_SCAN records are looked at; such
   * records settle no new accrual's doubt once they are older than that (docs/how-it-works.md).
   */
  async #settledByAPersonBefore(record: LedgerRecord, op: Operation): Promise<LedgerRecord[]> {
    const owner = (op as { customer?: { phone?: string | null; email?: string | null } }).customer;
    const identities = [...new Set([...identitiesOf(record.accrual.customer), ...(owner ? identitiesOf({ phone: owner.phone ?? undefined, email: owner.email ?? undefined }) : [])])];
    if (identities.length === 0) return [];
    const page = await this.store.list({ merchantId: merchantOf(record), customer: identities, offset: 0, limit: RIVAL_SCAN });
    const amount = record.accrual.check!.amount;
    const made = (other: LedgerRecord) => Date.parse(other.createdAt) - this.options.clockSkewMs <= Date.parse(op.createdAt);
    return page.items.filter(
      (other) =>
        keyOf(other) !== keyOf(record) &&
        other.accrual.check?.amount === amount &&
        made(other) &&
        other.accrual.settledBy === 'operator' &&
        other.accrual.operationIds.length === 0 &&
        other.accrual.personSettledAt === undefined &&
        other.accrual.personSettledReleasedAt === undefined &&
        (other.accrual.state === 'accrued' || other.accrual.state === 'partially_accrued'),
    );
  }
}

/** The cards the record's accrual credited, as its results name them (none when the history settled it). */
/** The evidence's fields of an operation's owners: who claims it, or the records in doubt it may be (none: neither field). */
/** The card's balance before `op`, exactly (points may carry decimals): absent where the history gave no balance or amount. */
function balanceBeforeOf(op: Operation): Pick<EvidenceOperation, 'balanceBefore'> {
  const before = op.balance === undefined || op.amount === undefined ? undefined : exactDifference(op.balance, op.amount);
  return before === undefined ? {} : { balanceBefore: before };
}

/** What an operation is, by the history's own fields (see `EvidenceOperation.kind`). */
function operationKind(op: Operation, shape: Pick<ReversalShape, 'eventId' | 'sign'> | undefined): EvidenceOperation['kind'] {
  const sum = op.purchaseSum ?? 0;
  if (shape && sum !== 0 && op.eventId === shape.eventId && Math.sign(sum) === shape.sign) return 'reversal';
  if (sum < 0) return 'reversal';
  if (sum > 0 && (op.amount ?? 0) >= 0) return 'accrual';
  return 'other';
}

/** The other records that could own this record's candidates, each with the operations it shares. */
function rivalsOf(record: LedgerRecord, operations: readonly EvidenceOperation[]): EvidenceRival[] {
  const shared = new Map<string, number[]>();
  for (const op of operations) {
    if (!op.candidate) continue;
    for (const other of op.mayBeOf ?? []) if (other !== record.transactionId) shared.set(other, [...(shared.get(other) ?? []), op.id]);
  }
  // Named by the accrual as its rivals too, where the count left them so (they may own an operation not shown as this one's candidate).
  for (const other of record.accrual.ambiguousWith ?? []) if (!shared.has(other) && other !== record.transactionId) shared.set(other, []);
  return [...shared].map(([transactionId, operationIds]) => ({ transactionId, operationIds }));
}

function ownersIn(owners: OperationOwners): Pick<EvidenceOperation, 'claimedBy' | 'mayBeOf'> {
  if ('claimedBy' in owners) return { claimedBy: owners.claimedBy };
  return owners.mayBeOf.length > 0 ? { mayBeOf: owners.mayBeOf } : {};
}

/**
 * A count's group, grown from `first` until closed: `visit` looks at each member once and names the
 * records it brings in (undefined: one of them cannot be counted, nor then the group).
 */
async function closeGroup(first: LedgerRecord, visit: (member: LedgerRecord, inGroup: (transactionId: string) => boolean) => Promise<LedgerRecord[] | undefined>): Promise<Map<string, LedgerRecord> | undefined> {
  const group = new Map<string, LedgerRecord>([[first.transactionId, first]]);
  const pending = [first];
  for (let member = pending.shift(); member; member = pending.shift()) {
    const joining = await visit(member, (id) => group.has(id));
    if (!joining) return undefined;
    for (const other of joining) {
      if (group.has(other.transactionId)) continue;
      group.set(other.transactionId, other);
      pending.push(other);
    }
  }
  return group;
}

function sameCards(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((card) => b.includes(card));
}

function creditedCards(record: LedgerRecord): string[] {
  return [...new Set(record.accrual.results.filter((r) => r.isSuccess && r.serialNumber).map((r) => r.serialNumber!))];
}

/**
 * Whether `op` could be the accrual's (the module's rule): on the card, the Check's sum, created no
 * earlier than the attempt (less the skew), claimed by no other record, and not an entry of the
 * merchant's reversal shape (which, learned positive, carries the Check's sum as an accrual does).
 */
function accrualCandidate(op: Operation, record: LedgerRecord, cardId: string, since: number, claimedBy: string | undefined, shape: ReversalShape | undefined): { candidate: boolean; why: string } {
  const check = record.accrual.check!;
  if (op.cardId !== cardId) return { candidate: false, why: 'another card' };
  if (op.purchaseSum == null) return { candidate: false, why: 'no purchase sum' };
  if (!centsEqualsMajor(check.amount, op.purchaseSum)) return { candidate: false, why: `purchase sum ${op.purchaseSum}, the Check is ${check.amount} cents` };
  if (Date.parse(op.createdAt) < since) return { candidate: false, why: 'before the accrue call began' };
  if (shape && isReversalEntry(op, shape, check.amount)) return { candidate: false, why: `a reversal's entry (${describeShape(shape)})` };
  if (claimedBy && claimedBy !== record.transactionId) return { candidate: false, why: `claimed by ${claimedBy}` };
  return { candidate: true, why: "the customer's card, the Check's sum, after the accrue call began, claimed by no other record" };
}

/** Whether `op` could be the reversal's (reversal-shape.ts): a card it should reverse, the shape with the Check's sum, since the call began, claimed by no record. */
function reversalCandidate(op: Operation, record: LedgerRecord, cardId: string, since: number, claimedBy: string | undefined, shape: Pick<ReversalShape, 'eventId' | 'sign'>): { candidate: boolean; why: string } {
  const check = record.accrual.check!;
  if (op.cardId !== cardId) return { candidate: false, why: 'another card' };
  if (!isReversalEntry(op, shape, check.amount)) return { candidate: false, why: `not ${describeShape(shape)} for ${check.amount} cents` };
  if (Date.parse(op.createdAt) < since) return { candidate: false, why: 'before the reverse call began' };
  if (claimedBy) return { candidate: false, why: `claimed by ${claimedBy}` };
  return { candidate: true, why: `${describeShape(shape)} for the Check's ${check.amount} cents, after the reverse call began, claimed by no record` };
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
