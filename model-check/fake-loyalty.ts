/**
 * The loyalty service as the model checker plays it (docs/correctness.md): the point-of-sale calls
 * each bridge instance makes (`PosCalls`) and the operations history its verifier reads
 * (`HistoryReader`), over books kept as the in-repo simulator keeps them (simulator/state.ts):
 * an accrual is one "Points earned" operation on the customer's card with `purchaseSum` = amount /
 * 100 and its operation id in the result; a reversal is the simulator's default entry, the same
 * event with the purchase taken back (a negative `purchaseSum`), its result carrying `reversedAt`.
 * Like the real service, nothing is idempotent: a second accrue or reverse of one transactionId is
 * booked again, which is what the checker's invariants look for.
 *
 * Every accrue and reverse is suspended: the call's promise stays pending until the explorer
 * chooses its fate (`FATES`). A history read is answered at once, oldest first, unless it holds two
 * operations of the same positive sum (the only case where the order can change what the verifier
 * concludes: which of two candidates it claims); such a read is suspended too and the explorer
 * chooses the order it is listed in.
 *
 * What is plain data (books, outstanding calls) is copied by `snapshot`; the promises' resolvers
 * belong to the live instances and are never copied (a snapshot is taken only when none is pending).
 */
import type { HistoryReader } from '../src/core/history-verifier.js';
import type { PosCalls } from '../src/core/delivery.js';
import type { Attempt, UpstreamOperation } from '../src/loyalty/calls.js';
import type { CallReport } from '../src/loyalty/client.js';
import type { AccrualResult, AccrueRequest, Card, Operation, ReverseRequest } from '../src/loyalty/contract.js';
import { DEFAULT_REVERSAL_ENTRY } from '../simulator/state.js';
import { operationsOfCard } from '../src/loyalty/history-reader.js';
import { copyPlain } from '../src/ledger/plain-copy.js';

/** What can become of one accrue or reverse a live bridge instance sent (issue 20, "per call, each fate"). */
export const FATES = ['answered', 'results_failed', 'rate_limited', 'server_error', 'reset_before_commit', 'reset_after_commit', 'timeout'] as const;
export type Fate = (typeof FATES)[number];

/** The fate in words, for the counterexample's trace. */
export const FATE_WORDS: Record<Fate, string> = {
  answered: 'booked and answered',
  results_failed: 'answered with a per-result failure (nothing booked)',
  rate_limited: '429 after the round\'s retries (nothing booked)',
  server_error: '503 after the round\'s retries (nothing booked)',
  reset_before_commit: 'connection reset before the service commits (nothing booked; unknown to the bridge)',
  reset_after_commit: 'connection reset after the service commits (booked; unknown to the bridge)',
  timeout: 'no answer within the timeout (unknown to the bridge; the service books it later)',
};

/** A customer of the service: identified by phone or email, with one card. */
export interface ModelCustomer {
  name: string;
  phone?: string;
  email?: string;
  card: string;
}

export interface BookedOperation {
  id: number;
  card: string;
  eventId: number;
  eventName: string;
  /** Account-currency units (the Check's cents / 100), negative for a reversal's entry. */
  purchaseSum: number;
  points: number;
  createdAtMs: number;
  /** Ground truth the history does not show: which transaction's call booked it. */
  transactionId: string;
  kind: 'accrual' | 'reversal';
}

export interface TransactionBooks {
  accruals: number;
  reversals: number;
  amount: number;
  /** The last booked accrual's credit: what a reverse takes back (as the simulator's `credited`). */
  credited?: { card: string; points: number; result: AccrualResult };
}

/** An accrue or reverse the service has received and not yet settled. */
export interface OutstandingCall {
  seq: number;
  /** The instance that sent it (its in-flight owner id). */
  instance: string;
  /** false once that instance crashed: an answer reaches nobody, but the service may still book it. */
  live: boolean;
  operation: UpstreamOperation;
  transactionId: string;
  request: AccrueRequest | ReverseRequest;
  sentAtMs: number;
  /**
   * Answered `timeout` to its instance: the service books it later (`lateCommit`), within the grace
   * period (the contract's assumption: a request commits within IN_DOUBT_GRACE_MS or never).
   */
  lingering: boolean;
}

/** A history read whose order the explorer chooses. */
export interface OutstandingRead {
  seq: number;
  instance: string;
  card: string;
}

export interface FakeLoyaltyState {
  customers: ModelCustomer[];
  operations: BookedOperation[];
  transactions: Record<string, TransactionBooks>;
  calls: OutstandingCall[];
  nextOperationId: number;
  nextSeq: number;
  /** Transactions whose last accrue the service answered with a per-result failure: nothing is owed for them. */
  refused: string[];
  /** Transactions whose last reverse the service answered with a per-result failure: a person's (reverse_failed). */
  refusedReversals: string[];
}

const POINTS_EARNED = { eventId: 24, eventName: 'Points earned' } as const;

export class FakeLoyalty {
  readonly state: FakeLoyaltyState;
  readonly #resolvers = new Map<number, (report: CallReport) => void>();
  readonly #reads: (OutstandingRead & { answer: (order: 'oldest_first' | 'newest_first') => void })[] = [];
  /** Reads that took more than one page: for the coverage report only, not part of a state. */
  readsInPages = 0;

  constructor(
    state: FakeLoyaltyState,
    private readonly nowMs: () => number,
  ) {
    this.state = state;
  }

  static empty(customers: ModelCustomer[], nowMs: () => number): FakeLoyalty {
    return new FakeLoyalty({ customers, operations: [], transactions: {}, calls: [], nextOperationId: 1, nextSeq: 1, refused: [], refusedReversals: [] }, nowMs);
  }

  /** A copy of the books and outstanding calls; only when no live call or read is pending (their resolvers are not copied). */
  snapshot(): FakeLoyaltyState {
    if (this.#resolvers.size > 0 || this.#reads.length > 0) throw new Error('a snapshot of the fake service was asked for while a live call or read is pending');
    return copyPlain(this.state);
  }

  /** The point-of-sale calls of one bridge instance (`instance`: its id, as its in-flight markers name it). */
  callsFor(instance: string): PosCalls {
    return {
      accrue: (body: AccrueRequest) => this.#receive(instance, 'accrue', body.transactionId, body),
      reverse: (body: ReverseRequest) => this.#receive(instance, 'reverse', body.transactionId, body),
    };
  }

  /** The operations history as one instance's verifier reads it (the service's API key: always set in the model). */
  readerFor(instance: string): HistoryReader {
    return {
      canVerify: true,
      findCards: async (query) => {
        const matching = this.state.customers.filter((c) => (query.phone ? c.phone === query.phone : query.email ? c.email === query.email : false));
        return matching.map((c) => ({ id: c.card, customerId: c.name }) as Card);
      },
      listOperations: (cardId, startDate, endDate) => this.#read(instance, cardId, startDate, endDate),
    };
  }

  outstandingCalls(): OutstandingCall[] {
    return [...this.state.calls];
  }

  outstandingReads(): OutstandingRead[] {
    return this.#reads.map(({ seq, instance, card }) => ({ seq, instance, card }));
  }

  /** The fate of a live call: books what it books and answers its instance. */
  settle(seq: number, fate: Fate): void {
    const call = this.#call(seq);
    if (!call.live || call.lingering) throw new Error(`call ${seq} cannot be given a fate now`);
    const resolve = this.#resolvers.get(seq)!;
    this.#resolvers.delete(seq);
    const report = this.#outcome(call, fate);
    if (fate === 'timeout') call.lingering = true;
    else this.#remove(seq);
    resolve(report);
  }

  /** A call whose instance crashed: the service books it (`booked`) or not; the answer reaches nobody. */
  settleOrphan(seq: number, booked: boolean): void {
    const call = this.#call(seq);
    if (call.live || call.lingering) throw new Error(`call ${seq} is not an orphan`);
    if (booked) this.#book(call);
    this.#remove(seq);
  }

  /** A call its instance gave up on (`timeout`) is booked now. */
  lateCommit(seq: number): void {
    const call = this.#call(seq);
    if (!call.lingering) throw new Error(`call ${seq} is not waiting to be committed`);
    this.#book(call);
    this.#remove(seq);
  }

  /** Answers a suspended history read, listing its operations in `order` of their ids. */
  answerRead(seq: number, order: 'oldest_first' | 'newest_first'): void {
    const index = this.#reads.findIndex((r) => r.seq === seq);
    if (index < 0) throw new Error(`no history read ${seq} is waiting`);
    const [read] = this.#reads.splice(index, 1);
    read!.answer(order);
  }

  /** The instance is gone: its calls become orphans (the service still decides them), its reads are never answered. */
  crash(instance: string): void {
    for (const call of this.state.calls) {
      if (call.instance !== instance || !call.live) continue;
      // A call answered `timeout` stays lingering: its booking still comes.
      call.live = false;
      this.#resolvers.delete(call.seq);
    }
    for (let i = this.#reads.length - 1; i >= 0; i--) if (this.#reads[i]!.instance === instance) this.#reads.splice(i, 1);
  }

  /** The card a customer's identifiers reach, as the service finds it (phone first, then email: the simulator's order). */
  customerOf(identity: { phone?: string; email?: string; serialNumber?: string }): ModelCustomer | undefined {
    const { customers } = this.state;
    return (
      (identity.serialNumber && customers.find((c) => c.card === identity.serialNumber)) ||
      (identity.phone && customers.find((c) => c.phone === identity.phone)) ||
      (identity.email && customers.find((c) => c.email === identity.email)) ||
      undefined
    );
  }

  balanceOf(card: string): number {
    return this.state.operations.filter((op) => op.card === card).reduce((sum, op) => sum + op.points, 0);
  }

  #receive(instance: string, operation: UpstreamOperation, transactionId: string, request: AccrueRequest | ReverseRequest): Promise<CallReport> {
    const seq = this.state.nextSeq++;
    this.state.calls.push({ seq, instance, live: true, operation, transactionId, request: copyPlain(request), sentAtMs: this.nowMs(), lingering: false });
    return new Promise((resolve) => this.#resolvers.set(seq, resolve));
  }

  #call(seq: number): OutstandingCall {
    const call = this.state.calls.find((c) => c.seq === seq);
    if (!call) throw new Error(`no outstanding call ${seq}`);
    return call;
  }

  #remove(seq: number): void {
    this.state.calls = this.state.calls.filter((c) => c.seq !== seq);
  }

  /** What the instance hears, and what the service books on the way (src/loyalty/client.ts classifies the same answers so). */
  #outcome(call: OutstandingCall, fate: Fate): CallReport {
    const attempt = (status?: number, body?: unknown, error?: string): Attempt[] => [
      { operation: call.operation, startedAt: iso(call.sentAtMs), finishedAt: iso(this.nowMs()), request: call.request, ...(status ? { response: { status, body } } : {}), ...(error ? { error } : {}) },
    ];
    switch (fate) {
      case 'answered': {
        const booked = this.#book(call);
        if (booked === 'unknown_transaction') {
          const errors = [`transaction ${call.transactionId} not found`];
          return { outcome: { kind: 'refused', status: 400, errors }, attempts: attempt(400, { errors }) };
        }
        return { outcome: { kind: 'succeeded', results: booked }, attempts: attempt(200, { transactionId: call.transactionId, results: booked }) };
      }
      case 'results_failed': {
        const failed = this.#failedResults(call);
        if (failed === 'unknown_transaction') {
          const errors = [`transaction ${call.transactionId} not found`];
          return { outcome: { kind: 'refused', status: 400, errors }, attempts: attempt(400, { errors }) };
        }
        const refused = call.operation === 'accrue' ? this.state.refused : this.state.refusedReversals;
        if (!refused.includes(call.transactionId)) refused.push(call.transactionId);
        return { outcome: { kind: 'results_failed', results: failed, errors: ['Card is blocked'] }, attempts: attempt(200, { transactionId: call.transactionId, results: failed }) };
      }
      case 'rate_limited':
        return { outcome: { kind: 'retryable', reason: 'HTTP 429 (rate limited), the round\'s retries spent' }, attempts: attempt(429, '<html>Too Many Requests</html>') };
      case 'server_error':
        return { outcome: { kind: 'retryable', reason: 'HTTP 503, the round\'s retries spent' }, attempts: attempt(503, { errors: ['Service Unavailable'] }) };
      case 'reset_before_commit':
        return { outcome: { kind: 'unknown', reason: 'socket hang up (ECONNRESET)' }, attempts: attempt(undefined, undefined, 'socket hang up') };
      case 'reset_after_commit':
        this.#book(call);
        return { outcome: { kind: 'unknown', reason: 'socket hang up (ECONNRESET)' }, attempts: attempt(undefined, undefined, 'socket hang up') };
      case 'timeout':
        return { outcome: { kind: 'unknown', reason: 'timeout of 10000ms exceeded' }, attempts: attempt(undefined, undefined, 'timeout of 10000ms exceeded') };
      default:
        return unreachableFate(fate);
    }
  }

  /** Books the call as the simulator would: an accrual on the customer's card, or the reversal of the last booked accrual. */
  #book(call: OutstandingCall): AccrualResult[] | 'unknown_transaction' {
    const at = this.nowMs();
    if (call.operation === 'accrue') {
      const request = call.request as AccrueRequest;
      const customer = this.customerOf(request);
      if (!customer) throw new Error(`the model's service knows no customer for ${JSON.stringify(request)}`);
      const amount = request.check.amount;
      const points = Math.max(0, Math.floor(amount / 100));
      const op = this.#record(customer.card, POINTS_EARNED, amount / 100, points, at, call.transactionId, 'accrual');
      const result: AccrualResult = { isSuccess: true, errorMessage: null, serialNumber: customer.card, checkAmount: amount, accrualAmount: amount, accruedValue: points, operationId: op.id, createdAt: iso(at), reversedAt: null };
      const tx = (this.state.transactions[call.transactionId] ??= { accruals: 0, reversals: 0, amount: 0 });
      tx.accruals += 1;
      tx.amount = amount;
      tx.credited = { card: customer.card, points, result };
      this.state.refused = this.state.refused.filter((id) => id !== call.transactionId);
      return [result];
    }
    const tx = this.state.transactions[call.transactionId];
    if (!tx?.credited) return 'unknown_transaction';
    const { card, points, result } = tx.credited;
    const entry = DEFAULT_REVERSAL_ENTRY;
    this.#record(card, entry, entry.sign * (tx.amount / 100), -points, at, call.transactionId, 'reversal');
    tx.reversals += 1;
    this.state.refusedReversals = this.state.refusedReversals.filter((id) => id !== call.transactionId);
    return [{ ...result, reversedAt: iso(at) }];
  }

  #failedResults(call: OutstandingCall): AccrualResult[] | 'unknown_transaction' {
    if (call.operation === 'accrue') {
      const request = call.request as AccrueRequest;
      const customer = this.customerOf(request)!;
      return [{ isSuccess: false, errorMessage: 'Card is blocked', serialNumber: customer.card, checkAmount: request.check.amount, accrualAmount: 0, accruedValue: 0, operationId: null, createdAt: null, reversedAt: null }];
    }
    const tx = this.state.transactions[call.transactionId];
    if (!tx?.credited) return 'unknown_transaction';
    return [{ ...tx.credited.result, isSuccess: false, errorMessage: 'Card is blocked', reversedAt: null }];
  }

  #record(card: string, event: { eventId: number; eventName: string }, purchaseSum: number, points: number, atMs: number, transactionId: string, kind: BookedOperation['kind']): BookedOperation {
    const op: BookedOperation = { id: this.state.nextOperationId++, card, eventId: event.eventId, eventName: event.eventName, purchaseSum, points, createdAtMs: atMs, transactionId, kind };
    this.state.operations.push(op);
    return op;
  }

  /**
   * A card's operations as the verifier reads them: through the real paging reader
   * (`operationsOfCard`: overlapping pages, deduplicated, read again until a pass adds nothing), over
   * pages of `HISTORY_PAGE_SIZE` rows, so that a card with a few operations is already read in pages.
   * The list is the one at the moment of the read event (a read is one event: the list moving between
   * pages is the reader's own tests'). Its order is a choice only where it can matter (above).
   */
  #read(instance: string, cardId: string, startDate: string, endDate: string): Promise<Operation[]> {
    const list = (order: 'oldest_first' | 'newest_first'): Operation[] => {
      const rows = this.state.operations.filter((op) => op.card === cardId && iso(op.createdAtMs).slice(0, 10) >= startDate && iso(op.createdAtMs).slice(0, 10) <= endDate).map((op) => this.#operationOut(op));
      return order === 'oldest_first' ? rows : rows.reverse();
    };
    const paged = (rows: Operation[]): Promise<Operation[]> => {
      if (rows.length > HISTORY_PAGE_SIZE) this.readsInPages++;
      return operationsOfCard(
        { operationsPage: async (_query, page, itemsPerPage) => ({ data: rows.slice((page - 1) * itemsPerPage, page * itemsPerPage), meta: { totalItems: rows.length } }) },
        cardId,
        startDate,
        endDate,
        { maxItemsPerPage: HISTORY_PAGE_SIZE },
      );
    };
    const sums = this.state.operations.filter((op) => op.card === cardId && op.purchaseSum > 0).map((op) => op.purchaseSum);
    if (new Set(sums).size === sums.length) return paged(list('oldest_first'));
    return new Promise((resolve, reject) => this.#reads.push({ seq: this.state.nextSeq++, instance, card: cardId, answer: (order) => paged(list(order)).then(resolve, reject) }));
  }

  /** As the simulator lists an operation (contract, Operation), with the card's owner. */
  #operationOut(op: BookedOperation): Operation {
    const owner = this.state.customers.find((c) => c.card === op.card);
    return {
      id: op.id,
      cardId: op.card,
      customerId: owner?.name,
      eventId: op.eventId,
      eventName: op.eventName,
      amount: op.points,
      purchaseSum: op.purchaseSum,
      createdAt: iso(op.createdAtMs),
      customer: { phone: owner?.phone ?? null, email: owner?.email ?? null },
    } as Operation;
  }
}

/** Rows per page of the fake's history: two, so that a card with three operations or more is read in pages. */
const HISTORY_PAGE_SIZE = 2;

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function unreachableFate(fate: never): never {
  throw new Error(`unhandled fate ${String(fate)}`);
}
