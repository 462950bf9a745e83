/**
 * The three-way comparison itself, pure: a merchant's POS orders and refunds, its ledger records and
 * its operations history in, every difference out, each with why it is one and what to do next.
 * Nothing here reads or writes anything; `report.ts` gathers the three sides.
 *
 * How the sides are matched (docs/backfill-and-reconcile.md, "Three-way reconcile"):
 * - POS ↔ ledger by transactionId: the ledger keys an order by the id derived from the POS's own
 *   ids, which the POS listing computes the same way; a refund by its order and its refund id.
 * - Ledger ↔ history by operation id where the record holds them (an accrue's answer names the
 *   operation it made, and the history verifier records the one it matched); otherwise an operation
 *   on a card the accrue reached, of the Check amount (`purchaseSum` is in currency units, the Check
 *   in cents), no earlier than the record, that nothing else claims. A reversal shows in the history
 *   as an operation of the negative sum on the same card, no earlier than the refund was recorded.
 * - An operation nobody claims counts only when it is a purchase (`purchaseSum` set): cards
 *   installed, rewards redeemed and the like are not the bridge's to account for.
 */
import { callInDoubt, ownersOf } from '../core/operation-owners.js';
import { claimedOperationIds, isAccrualUnsettled, type LedgerRecord, type ReversalShape } from '../state/record.js';
import type { Operation } from '../loyalty/contract.js';
import { centsEqualsMajor, centsToDecimalString as money } from '../kernel/money.js';
import type { PosEntry, PosRefund, PosSale, PosUnreadable } from './pos-source.js';

export const DIFFERENCE_KINDS = ['missing_in_ledger', 'not_in_history', 'in_doubt', 'unclaimed_operation', 'amount_mismatch', 'refund_not_reversed', 'pos_amount_differs'] as const;
export type DifferenceKind = (typeof DIFFERENCE_KINDS)[number];

/** Each kind of difference in a person's words (the console's report shows these; the API keeps the kinds). */
export const DIFFERENCE_LABELS: Readonly<Record<DifferenceKind, string>> = {
  missing_in_ledger: 'Paid in the POS, not in the ledger',
  not_in_history: 'In the ledger, not in the loyalty history',
  in_doubt: 'Waits for its record to settle (a call in doubt)',
  unclaimed_operation: 'In the loyalty history, claimed by no record',
  amount_mismatch: 'Amounts differ between ledger and history',
  refund_not_reversed: 'Refunded in the POS, not reversed',
  pos_amount_differs: 'The POS now shows another amount',
};

export interface Difference {
  kind: DifferenceKind;
  transactionId?: string;
  orderId?: string;
  operationId?: number;
  why: string;
  next: string;
}

export interface ReconcileInput {
  merchantId: string;
  /** The range, [from, to): operations created in it are accounted for. */
  from: Date;
  to: Date;
  /** The POS's orders and refunds changed in the range (empty when no POS could be read). */
  pos: readonly PosEntry[];
  /** The records examined: created in the range, or named by a POS entry (with their remainders). */
  ledger: readonly LedgerRecord[];
  /** Other records of the merchant that claim an operation read: they explain it, and are not examined. */
  claimants: readonly LedgerRecord[];
  /** Every operation read (the range with a margin, and what was read again by card). */
  history: readonly Operation[];
  /**
   * The merchant's records with a call in doubt (or still out), wherever they were created: an
   * operation one of them may have made is theirs to settle (`in_doubt`), never a double to take
   * back by hand. Those among `ledger` and `claimants` count whether listed here or not.
   */
  doubtful?: readonly LedgerRecord[];
  /** How the merchant's loyalty service shows a reversal, when learned (reversal-shape.ts). */
  reversalShape?: Pick<ReversalShape, 'eventId' | 'sign'>;
  /** How far the loyalty service's clock may be behind the bridge's. */
  clockSkewMs: number;
}

/** Every difference, in a stable order: by kind (as listed in DIFFERENCE_KINDS), then by ids. */
export function classify(input: ReconcileInput): Difference[] {
  const differences: Difference[] = [];
  const { merchantId } = input;
  const byTransaction = new Map(input.ledger.map((r) => [r.transactionId, r]));
  for (const r of input.claimants) if (!byTransaction.has(r.transactionId)) byTransaction.set(r.transactionId, r);
  const operations = new Map(input.history.map((op) => [op.id, op]));
  /** Each card's operations: every search below is of one card. */
  const byCard = new Map<string, Operation[]>();
  for (const op of input.history) {
    const ops = byCard.get(op.cardId);
    if (ops) ops.push(op);
    else byCard.set(op.cardId, [op]);
  }
  const onCard = (card: string) => byCard.get(card) ?? [];
  /** Operation id → the transactionId that accounts for it (its accrual or its reversal): first what the ledger claims, as the record page names it. */
  const explained = new Map<number, string>();
  for (const r of [...byTransaction.values(), ...(input.doubtful ?? [])]) for (const id of claimedOperationIds(r)) explained.set(id, r.transactionId);
  const doubtful = [...new Map([...byTransaction.values(), ...(input.doubtful ?? [])].filter((r) => callInDoubt(r)).map((r) => [r.transactionId, r])).values()];

  // Ledger → history: every accrual the ledger holds as done has its operations.
  for (const record of input.ledger) {
    if (!accrued(record)) continue;
    const found = accrualOperations(record, operations, onCard, explained, input.clockSkewMs);
    const missing = found.missing;
    if (missing.length > 0) differences.push(notInHistory(record, missing));
    // One difference per record, however many of its cards' operations differ.
    const differing = found.operations.filter((op) => !centsEqualsMajor(record.accrual.check!.amount, op.purchaseSum ?? NaN));
    if (differing.length > 0) {
      differences.push({
        kind: 'amount_mismatch',
        transactionId: record.transactionId,
        orderId: record.orderId,
        operationId: differing[0]!.id,
        why: `the ledger accrued ${money(record.accrual.check!.amount)} but ${differing.map((op) => `operation ${op.id} on card ${op.cardId} is a purchase of ${op.purchaseSum}`).join(', ')}`,
        next: `verify at the loyalty service which amount is right; correct the card there by hand (the bridge sends one accrual per transactionId)`,
      });
    }
  }
  // Ledger reversals → history. A claimant's reversal explains its operation too, unreported when missing.
  const examined = new Set(input.ledger);
  for (const record of [...input.ledger, ...input.claimants]) {
    // A reversal whose operations the ledger claims is explained by them (seeded above).
    if (record.reversal.state !== 'reversed' || !accrued(record) || (record.reversal.operationIds?.length ?? 0) > 0) continue;
    const amount = record.accrual.check!.amount;
    const since = Date.parse(record.reversal.requestedAt ?? record.createdAt) - input.clockSkewMs;
    const unreversed: string[] = [];
    for (const card of cardsOf(record, operations)) {
      const reversal = earliest(onCard(card), (op) => !explained.has(op.id) && Date.parse(op.createdAt) >= since && centsEqualsMajor(-amount, op.purchaseSum ?? NaN));
      if (reversal) explained.set(reversal.id, record.transactionId);
      else unreversed.push(card);
    }
    if (unreversed.length === 0 || !examined.has(record)) continue;
    const cards = unreversed.length === 1 ? `card ${unreversed[0]}` : `cards ${unreversed.join(', ')}`;
    differences.push({
      kind: 'refund_not_reversed',
      transactionId: record.transactionId,
      orderId: record.orderId,
      why: `the ledger reversed it${refundsOf(record)} at ${record.reversal.requestedAt ?? record.updatedAt}, but the history shows no reversing operation of ${money(-amount)} on ${cards}`,
      next: `verify ${cards} at the loyalty service; where the points are still there, take them back by hand there (the ledger holds the reversal as done)`,
    });
  }

  // POS → ledger.
  const refunds = latestBy(input.pos.filter((e): e is PosRefund => e.kind === 'refund'), (r) => `${r.transactionId}\u0000${r.refundId ?? ''}`);
  const sales = latestBy(input.pos.filter((e): e is PosSale => e.kind === 'sale'), (s) => s.transactionId);
  const paidSales = new Set(sales.filter((s) => s.paid).map((s) => s.transactionId));
  for (const sale of sales) {
    if (!sale.paid) continue;
    const own = byTransaction.get(sale.transactionId);
    const record = own ?? earlierRecord(byTransaction, sale);
    if (!record) {
      differences.push(missingInLedger(merchantId, sale.pos, sale.transactionId, sale.orderId, sale.updatedAt, `a paid ${sale.pos} order of ${money(sale.amountCents)} (changed ${sale.updatedAt}) has no ledger record: its webhook never arrived or was not processed`));
      continue;
    }
    // A sale found where an earlier build kept its whole order holds every part's amount: it is there, and compares with no part alone.
    if (!own) continue;
    const recorded = record.accrual.check?.amount;
    if (recorded !== undefined && recorded !== sale.amountCents) {
      differences.push({
        kind: 'amount_mismatch',
        transactionId: sale.transactionId,
        orderId: sale.orderId,
        why: `the ${sale.pos} order now totals ${money(sale.amountCents)} but the ledger recorded ${money(recorded)} (a reopened check, changed ${sale.updatedAt})`,
        next: `decide whether the difference is owed; the bridge sends one accrual per order, so an operator adjusts the card at the loyalty service by hand`,
      });
    } else if (recorded !== undefined && sale.currentCents !== undefined) {
      const differs = posAmountDiffers(sale, chainOf(byTransaction, sale.transactionId), refunds.filter((r) => r.transactionId === sale.transactionId));
      if (differs) differences.push(differs);
    }
  }
  for (const unreadable of latestBy(input.pos.filter((e): e is PosUnreadable => e.kind === 'unreadable'), (u) => `${u.orderId}\u0000${u.refundId ?? ''}`)) {
    const what = unreadable.refundId ? `refund ${unreadable.refundId} of ${unreadable.pos} order ${unreadable.orderId}` : `paid ${unreadable.pos} order ${unreadable.orderId}`;
    differences.push({
      kind: 'missing_in_ledger',
      orderId: unreadable.orderId,
      why: `the ${what} (changed ${unreadable.updatedAt}) cannot be translated exactly, so the ledger cannot hold it: ${unreadable.why}`,
      next: `GET /v1/admin/dead-letters?pos=${unreadable.pos}&merchantId=${merchantId}: its webhook was kept there; fix what it names, then replay it or backfill`,
    });
  }
  for (const refund of refunds) {
    const own = chainOf(byTransaction, refund.transactionId);
    const earlier = own.length === 0 ? earlierRecord(byTransaction, refund) : undefined;
    const chain = earlier ? chainOf(byTransaction, earlier.transactionId) : own;
    const named = refund.refundId ? ` ${refund.refundId}` : '';
    if (chain.length === 0) {
      // The sale itself is reported missing when the POS listed it; otherwise the refund names it.
      if (!paidSales.has(refund.transactionId)) {
        differences.push(missingInLedger(merchantId, refund.pos, refund.transactionId, refund.orderId, refund.updatedAt, `refund${named} of ${refund.pos} order ${refund.orderId} (changed ${refund.updatedAt}): the ledger has no record of the order or the refund`));
      }
      continue;
    }
    const holder = refund.refundId ? chain.find((r) => r.reversal.refundIds.includes(refund.refundId!)) : chain.find((r) => r.reversal.state !== 'none');
    if (!holder) {
      differences.push({
        kind: 'refund_not_reversed',
        transactionId: refund.transactionId,
        orderId: refund.orderId,
        why: `refund${named} of ${refund.pos} order ${refund.orderId} (changed ${refund.updatedAt}) is not in the ledger: its webhook never arrived or was not processed`,
        next: backfillStep(merchantId, refund.pos, refund.updatedAt),
      });
      continue;
    }
    const state = holder.reversal.state;
    if (state === 'pending' || state === 'in_doubt') {
      differences.push({
        kind: 'refund_not_reversed',
        transactionId: holder.transactionId,
        orderId: refund.orderId,
        why: `refund${named} is recorded but its reversal is ${state === 'pending' ? 'still waiting to be sent' : 'in doubt'}`,
        next: `the worker delivers it; POST /v1/admin/reconcile${merchantQuery(merchantId)} runs a pass now`,
      });
    } else if (state === 'failed') {
      differences.push({
        kind: 'refund_not_reversed',
        transactionId: holder.transactionId,
        orderId: refund.orderId,
        why: `refund${named} is recorded but the loyalty service refused the reversal: ${holder.reversal.errors.join('; ') || 'no reason given'}`,
        next: `an operator looks at GET /v1/admin/transactions/${holder.transactionId}, then reverses (POST …/reverse) or resolves it`,
      });
    }
  }

  // History → ledger: purchases in the range that nothing accounts for. One a record in doubt may
  // have made waits for that record (`in_doubt`, naming it): advised to take it back by hand, it
  // could be taken twice, once by the person and once when the record settles as done.
  const unsettled = [...byTransaction.values()].filter((r) => isAccrualUnsettled(r));
  const fromMs = input.from.getTime();
  const toMs = input.to.getTime();
  const awaited = new Set<string>();
  for (const op of input.history) {
    const at = Date.parse(op.createdAt);
    if (op.purchaseSum == null || explained.has(op.id)) continue;
    const owners = ownersOf(op, undefined, doubtful, input.reversalShape, input.clockSkewMs);
    const mayBeOf = 'mayBeOf' in owners ? owners.mayBeOf : [];
    for (const transactionId of mayBeOf) {
      awaited.add(transactionId);
      if (at >= fromMs && at < toMs) differences.push(inDoubt(byTransaction.get(transactionId) ?? doubtful.find((r) => r.transactionId === transactionId)!, merchantId, op, mayBeOf));
    }
    if (mayBeOf.length > 0 || at < fromMs || at >= toMs) continue;
    differences.push({ kind: 'unclaimed_operation', operationId: op.id, why: unclaimedWhy(op, onCard(op.cardId), explained, unsettled), next: UNCLAIMED_NEXT });
  }
  // A record in doubt of the range that no operation read could be yet: in doubt all the same.
  for (const record of input.ledger) if (callInDoubt(record) && !awaited.has(record.transactionId)) differences.push(inDoubt(record, merchantId));
  return differences.sort(byKindThenIds);
}

/**
 * `pos_amount_differs` (docs/backfill-and-reconcile.md): the POS says the order stands at
 * `sale.currentCents` now (after its refunds and edits), but the ledger's chain of the order (the
 * sale and the remainders its partial refunds left) accrued less what it reversed comes to another
 * figure. Only where nothing else explains it: the sale reads as the ledger recorded it (else
 * `amount_mismatch`), every refund the POS lists is reversed in the ledger (else
 * `refund_not_reversed`), and every record of the chain is settled (accrued, its reversal none or
 * done). What remains is a refund measured otherwise than the POS measured it, or an edit after the
 * accrual: the bridge never accrues a current figure by itself, an operator decides.
 */
function posAmountDiffers(sale: PosSale, chain: readonly LedgerRecord[], refunds: readonly PosRefund[]): Difference | undefined {
  if (chain.length === 0 || sale.currentCents === undefined) return undefined;
  const settled = chain.every((r) => r.accrual.state === 'accrued' && r.accrual.check !== undefined && (r.reversal.state === 'none' || r.reversal.state === 'reversed'));
  if (!settled) return undefined;
  const reversedIds = new Set(chain.flatMap((r) => r.reversal.refundIds));
  if (refunds.some((r) => (r.refundId ? !reversedIds.has(r.refundId) : !chain.some((c) => c.reversal.state === 'reversed')))) return undefined;
  const accrued = chain.reduce((s, r) => s + r.accrual.check!.amount, 0);
  const reversed = chain.reduce((s, r) => s + (r.reversal.state === 'reversed' ? r.accrual.check!.amount : 0), 0);
  const net = accrued - reversed;
  if (net === sale.currentCents) return undefined;
  return {
    kind: 'pos_amount_differs',
    transactionId: sale.transactionId,
    orderId: sale.orderId,
    why: `the ${sale.pos} order now stands at ${money(sale.currentCents)} after its refunds and edits (changed ${sale.updatedAt}), but the ledger accrued ${money(accrued)} and reversed ${money(reversed)}, ${money(net)} in all`,
    next: `compare the order's refunds at ${sale.pos} with the records (GET /v1/admin/transactions/${sale.transactionId}); an edit after payment, or a refund measured otherwise, is adjusted on the card at the loyalty service by hand`,
  };
}

const UNCLAIMED_NEXT = 'investigate at the loyalty service: booked outside the bridge (a scanner, the web app), or a double; take a double back there by hand';

/** An accrual the loyalty service answered as done (wholly or for some cards), or that history or an operator settled as done. */
function accrued(record: LedgerRecord): boolean {
  return (record.accrual.state === 'accrued' || record.accrual.state === 'partially_accrued') && record.accrual.check !== undefined;
}

/**
 * The operations of a done accrual: those it claims by id, or else, by card, the earliest fitting
 * one nothing else accounts for (marked as its own in `explained`). `missing`: what cannot be found.
 */
function accrualOperations(record: LedgerRecord, operations: Map<number, Operation>, onCard: (card: string) => Operation[], explained: Map<number, string>, clockSkewMs: number): { operations: Operation[]; missing: string[] } {
  const claimed = record.accrual.operationIds;
  if (claimed.length > 0) {
    return { operations: claimed.flatMap((id) => operations.get(id) ?? []), missing: claimed.filter((id) => !operations.has(id)).map((id) => `operation ${id}`) };
  }
  const cards = successfulCards(record);
  if (cards.length === 0) return { operations: [], missing: ['operation for it (the record names neither an operation nor a card: settled by hand?)'] };
  const since = Date.parse(record.createdAt) - clockSkewMs;
  const found: Operation[] = [];
  const missing: string[] = [];
  for (const card of cards) {
    const op = earliest(onCard(card), (o) => !explained.has(o.id) && Date.parse(o.createdAt) >= since && centsEqualsMajor(record.accrual.check!.amount, o.purchaseSum ?? NaN));
    if (!op) {
      missing.push(`operation of ${money(record.accrual.check!.amount)} on card ${card}`);
      continue;
    }
    explained.set(op.id, record.transactionId);
    found.push(op);
  }
  return { operations: found, missing };
}

function notInHistory(record: LedgerRecord, missing: string[]): Difference {
  const how = record.accrual.settledBy === 'operator' ? 'an operator resolved it as accrued' : record.accrual.settledBy === 'history' ? 'the history verifier matched it' : 'the loyalty service answered it as done';
  return {
    kind: 'not_in_history',
    transactionId: record.transactionId,
    orderId: record.orderId,
    // Names what is missing: "has no operation 7", the operation the record claims.
    why: `the ledger holds it as ${record.accrual.state} (${how}, ${money(record.accrual.check!.amount)}) but the history has no ${missing.join(' and no ')}`,
    next: `verify at the loyalty service (the card's history); in doubt, do not re-send: correct the card there by hand or resolve the record (POST /v1/admin/transactions/${record.transactionId}/resolve)`,
  };
}

function missingInLedger(merchantId: string, pos: string, transactionId: string, orderId: string, updatedAt: string, why: string): Difference {
  return { kind: 'missing_in_ledger', transactionId, orderId, why, next: backfillStep(merchantId, pos, updatedAt) };
}

/**
 * `in_doubt`: the record's accrue or reverse is in doubt (or still out), and `op`, when given, may
 * be that call's operation (`others`: every record it may be). The next step is the record's to
 * settle: the history verifier, or a person shown the evidence; never a take-back by hand.
 */
function inDoubt(record: LedgerRecord, merchantId: string, op?: Operation, others: readonly string[] = []): Difference {
  const call = callInDoubt(record)!;
  const since = new Date(call.sinceMs).toISOString();
  const what = call.side === 'reverse' ? 'reversal' : 'accrual';
  const rivals = others.filter((t) => t !== record.transactionId);
  const why = op
    ? `operation ${op.id} on card ${op.cardId}, a ${op.purchaseSum! < 0 ? 'reversal' : 'purchase'} of ${op.purchaseSum} at ${op.createdAt}, may be the ${what} of ${record.transactionId}, in doubt since ${since}${rivals.length ? ` (or of ${rivals.join(', ')}, in doubt too)` : ''}: it is not claimed until the record settles`
    : `in doubt since ${since}: the ${call.side} may or may not have reached the loyalty service, and no operation read could be it yet`;
  return {
    kind: 'in_doubt',
    transactionId: record.transactionId,
    orderId: record.orderId,
    ...(op ? { operationId: op.id } : {}),
    why,
    next: `settle the record first, never by taking points back by hand: POST /v1/admin/reconcile${merchantQuery(merchantId)} lets the history verifier settle it, or a person resolves it shown its evidence (GET /v1/admin/transactions/${record.transactionId}/evidence, then POST …/resolve)`,
  };
}

/** The record an earlier build kept for the entry's sale under another transactionId (`recordedAs`: a Toast order kept whole), when the ledger holds one. */
function earlierRecord(byTransaction: Map<string, LedgerRecord>, entry: { recordedAs?: readonly string[] }): LedgerRecord | undefined {
  for (const id of entry.recordedAs ?? []) {
    const record = byTransaction.get(id);
    if (record) return record;
  }
  return undefined;
}

function backfillStep(merchantId: string, pos: string, updatedAt: string): string {
  return `backfill: POST /v1/admin/backfill {"merchantId":"${merchantId}","pos":"${pos}","since":"${updatedAt}"} (or npm run backfill -- --merchant ${merchantId} --pos ${pos} --since ${updatedAt})`;
}

/** `sameCard`: the operation's card's operations; `unsettled`: the accruals not known yet to have happened or not. */
function unclaimedWhy(op: Operation, sameCard: readonly Operation[], explained: Map<number, string>, unsettled: readonly LedgerRecord[]): string {
  const what = `operation ${op.id} on card ${op.cardId}, a ${op.purchaseSum! < 0 ? 'reversal' : 'purchase'} of ${op.purchaseSum} at ${op.createdAt}${op.source ? ` (source ${op.source})` : ''}, is claimed by no ledger record`;
  const twin = sameCard.find((o) => o.id !== op.id && o.purchaseSum === op.purchaseSum && explained.has(o.id));
  if (twin) return `${what}; operation ${twin.id} of the same card and sum is ${explained.get(twin.id)}'s: possibly a double`;
  if (op.purchaseSum! > 0) {
    const maker = unsettled.find((r) => centsEqualsMajor(r.accrual.check?.amount ?? NaN, op.purchaseSum!));
    if (maker) return `${what}; ${maker.transactionId}, an accrual of the same amount, is unsettled and may have made it`;
  }
  return what;
}

/** The cards an accrual reached: those of the operations it claims, and those its successful results name. */
function cardsOf(record: LedgerRecord, operations: Map<number, Operation>): string[] {
  const cards = new Set(successfulCards(record));
  for (const id of record.accrual.operationIds) {
    const op = operations.get(id);
    if (op) cards.add(op.cardId);
  }
  return [...cards].sort();
}

export function successfulCards(record: LedgerRecord): string[] {
  return [...new Set(record.accrual.results.filter((r) => r.isSuccess && r.serialNumber).map((r) => r.serialNumber!))].sort();
}

/** The order's first record and the remainders its partial refunds left, in order. */
function chainOf(byTransaction: Map<string, LedgerRecord>, rootId: string): LedgerRecord[] {
  const chain: LedgerRecord[] = [];
  for (let r = byTransaction.get(rootId); r && chain.length < 1000; r = r.remainderTransactionId ? byTransaction.get(r.remainderTransactionId) : undefined) chain.push(r);
  return chain;
}

function earliest(operations: readonly Operation[], fits: (op: Operation) => boolean): Operation | undefined {
  let best: Operation | undefined;
  for (const op of operations) if (fits(op) && (!best || Date.parse(op.createdAt) < Date.parse(best.createdAt) || (op.createdAt === best.createdAt && op.id < best.id))) best = op;
  return best;
}

/** One entry per key, the one the POS changed last. */
function latestBy<T extends { updatedAt: string }>(entries: readonly T[], key: (entry: T) => string): T[] {
  const latest = new Map<string, T>();
  for (const entry of entries) {
    const k = key(entry);
    const seen = latest.get(k);
    if (!seen || Date.parse(entry.updatedAt) > Date.parse(seen.updatedAt)) latest.set(k, entry);
  }
  return [...latest.values()];
}

function refundsOf(record: LedgerRecord): string {
  return record.reversal.refundIds.length ? ` (refund ${record.reversal.refundIds.join(', ')})` : '';
}

function merchantQuery(merchantId: string): string {
  return `?merchantId=${merchantId}`;
}

function byKindThenIds(a: Difference, b: Difference): number {
  return (
    DIFFERENCE_KINDS.indexOf(a.kind) - DIFFERENCE_KINDS.indexOf(b.kind) ||
    (a.transactionId ?? '').localeCompare(b.transactionId ?? '') ||
    (a.operationId ?? 0) - (b.operationId ?? 0) ||
    a.why.localeCompare(b.why)
  );
}
