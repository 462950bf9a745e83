/**
 * Toast refunds stay on the order (pos-facts "Order identity and refunds"), and are each check's
 * own, as its sale is (checkout.ts: loyalty belongs to the check). Each payment has a
 * `refundStatus` (NONE, PARTIAL, FULL) and a `refund {refundAmount, tipRefundAmount, refundDate,
 * refundTransaction}`; each refunded selection or service charge has `refundDetails {refundAmount,
 * taxRefundAmount, refundTransaction}`. The order Toast sends is its state after ALL its refunds.
 *
 * Measuring (contract: refunds like Check.amount, tax and tip excluded):
 * - every live payment FULL: the whole sale came back → a full refund (reverses what remains).
 * - otherwise the refunded purchase is the sum of `refundDetails.refundAmount` (which excludes tax,
 *   and includes the item's modifiers, so nested modifiers are not added again) over the live
 *   checks' selections and non-gratuity service charges. A gratuity service charge is a tip: its
 *   refund counts for nothing. `payments[].refund.refundAmount` is never used as the measure: it
 *   includes tax, and splitting tax back out would be a guess.
 *
 * Identity: the order carries every refund made so far, so the same refund arrives again with each
 * later update. Refunds are told apart by `refundDetails.refundTransaction.guid` ("use the
 * identifier to associate items and service charges that were refunded in the same transaction"):
 * one partial refund per transaction, with the transaction guid as its refundId, so a transaction
 * already applied is recognised and changes nothing, and a later one is applied on what remains.
 * Refund details without that guid are refused: summed without it, a second refund would carry
 * the first one again and reduce the order twice.
 */
import { ValidationError } from '../../src/kernel/errors.js';
import type { RefundIntent, RefundLine } from '../../src/pos/contract.js';
import { at, checkGuidOf, checkMoneyOf, chosenCheck, liveChecks, livePayments, readOrder, selectionOf, wasPaid, wholeOrderId, type LiveCheck, type ReadOrder } from './checkout.js';
import type { RefundDetails } from './schema.js';

export interface RefundEntry {
  path: string;
  cents: number;
  /** Set when the entry refunds one selection's whole line, which the remainder can take off by item. */
  line?: RefundLine;
}

export interface RefundGroup {
  /** The refund transaction's guid. */
  id: string;
  cents: number;
  entries: RefundEntry[];
}

export interface OrderRefunds {
  full: boolean;
  groups: RefundGroup[];
}

function refunds(details: RefundDetails): details is NonNullable<RefundDetails> {
  return Boolean(details && ((details.refundAmount ?? 0) > 0 || (details.taxRefundAmount ?? 0) > 0));
}

/** One check's refunds: all of it (every live payment FULL), or one group per refund transaction. */
export function refundsOf(one: LiveCheck): OrderRefunds {
  const live = [one];
  const payments = live.flatMap(({ check, path }) => livePayments(check).map(({ payment, index }) => ({ payment, path: `${path}.payments.${index}` })));
  const full = payments.length > 0 && payments.every(({ payment }) => payment.refundStatus === 'FULL');

  // Lines can be named in a refund only when their item id is unambiguous among the Check's lines.
  const idCounts = new Map<string, number>();
  for (const { check } of live) for (const s of check.selections) if (!s.voided && s.item?.guid) idCounts.set(s.item.guid, (idCounts.get(s.item.guid) ?? 0) + 1);

  const groups = new Map<string, RefundGroup>();
  const add = (details: NonNullable<RefundDetails>, path: string, cents: number, line?: RefundLine) => {
    const id = details.refundTransaction?.guid;
    if (!id) {
      throw ValidationError.field(
        `${path}.refundDetails.refundTransaction.guid`,
        'is missing: without the refund transaction the bridge cannot tell this refund from later ones on the same order, and could count it twice',
      );
    }
    const group = groups.get(id) ?? { id, cents: 0, entries: [] };
    group.cents += cents;
    group.entries.push({ path, cents, ...(line ? { line } : {}) });
    groups.set(id, group);
  };

  for (const { check, path } of live) {
    check.selections.forEach((selection, j) => {
      if (selection.voided || !refunds(selection.refundDetails)) return;
      const selectionPath = `${path}.selections.${j}`;
      const cents = selection.refundDetails.refundAmount ?? 0;
      const sold = selectionOf(selection, selectionPath);
      const whole = sold.id !== undefined && idCounts.get(sold.id) === 1 && cents === sold.totalPrice;
      add(selection.refundDetails, selectionPath, cents, whole ? { id: sold.id!, quantity: sold.quantity, totalCents: sold.totalPrice } : undefined);
    });
    check.appliedServiceCharges.forEach((charge, k) => {
      if (!refunds(charge.refundDetails)) return;
      add(charge.refundDetails, `${path}.appliedServiceCharges.${k}`, charge.gratuity ? 0 : (charge.refundDetails.refundAmount ?? 0));
    });
  }

  if (!full && groups.size === 0) {
    // A refund of tips only takes back no purchase; any other refund must say what it refunded.
    const unmeasured = payments.find(({ payment }) => (payment.refundStatus === 'PARTIAL' || payment.refundStatus === 'FULL') && (payment.refund?.refundAmount ?? 1) > 0);
    if (unmeasured) {
      throw ValidationError.field(
        `${unmeasured.path}.refundStatus`,
        `is ${unmeasured.payment.refundStatus} but no selection or service charge carries refundDetails: the payment's refundAmount includes tax, and the bridge measures refunds without tax`,
      );
    }
  }
  return { full, groups: [...groups.values()] };
}

/** The refund's identity: the check's sale (its transactionId's part) and the whole order's id builds before gave it. */
function saleOf(read: ReadOrder, live: LiveCheck): { orderId: string; part: string; recordedAs: string[] } {
  return { orderId: read.order.guid, part: checkGuidOf(live), recordedAs: [wholeOrderId(read.order.guid)] };
}

/**
 * One refund transaction of one check as a partial refund. It names the lines it took back whole,
 * so the remainder keeps the products that were not returned; otherwise only the amount.
 */
export function refundIntent(read: ReadOrder, live: LiveCheck, group: RefundGroup): RefundIntent {
  if (group.cents === 0) {
    throw ValidationError.field(at(read.prefix, 'checks'), `refund transaction ${group.id} returns only tax or gratuity: no purchase amount to take back`);
  }
  const lines = group.entries.every((e) => e.line) ? group.entries.map((e) => e.line!) : undefined;
  return { ...saleOf(read, live), refundId: group.id, amountCents: group.cents, ...(lines ? { items: lines } : {}) };
}

/**
 * All of one check back (voided, or every payment refunded): a full refund of its sale. Met by the
 * record an earlier build kept for the whole order, it takes back this check's share of it (`partCents`).
 */
export function wholeCheckRefund(read: ReadOrder, live: LiveCheck, why: 'void' | 'full'): RefundIntent {
  const part = checkGuidOf(live);
  let partCents: number | undefined;
  try {
    partCents = checkMoneyOf(live).amount;
  } catch {
    // A voided check's figures may not add up (Toast keeps what was on it): then the whole record is reversed.
  }
  return { ...saleOf(read, live), refundId: `${why}:${read.order.guid}:${part}`, ...(partCents !== undefined ? { partCents } : {}) };
}

/** Checks that may be refunded: every check not deleted (a voided one is refunded whole). */
export function refundableChecks(read: ReadOrder): LiveCheck[] {
  return read.order.checks.flatMap((check, i) => (check.deleted ? [] : [{ check, path: at(read.prefix, `checks.${i}`) }]));
}

export function parseRefund(body: unknown): RefundIntent {
  const read = readOrder(body);
  const { order } = read;
  if (order.deleted) throw ValidationError.field(at(read.prefix, 'deleted'), 'is true: a deleted order was never a sale of its own, so there is nothing to refund');
  const live = chosenCheck(read, refundableChecks(read), 'refund');
  // A void takes back the whole check's sale, whatever was refunded before.
  if (order.voided || live.check.voided) {
    if (!wasPaid(live.check) && !order.closedDate) throw ValidationError.field(at(live.path, 'voided'), 'the check was voided before it was paid: nothing was accrued, so nothing is reversed');
    return wholeCheckRefund(read, live, 'void');
  }
  const refunds = refundsOf(live);
  if (read.refundTransactionGuid) {
    const group = refunds.groups.find((g) => g.id === read.refundTransactionGuid);
    if (!group) {
      throw ValidationError.field('refundTransactionGuid', `names no refund transaction of this check; it has ${refunds.groups.map((g) => g.id).join(', ') || 'none'}`);
    }
    return refundIntent(read, live, group);
  }
  if (refunds.full) return wholeCheckRefund(read, live, 'full');
  const measured = refunds.groups.filter((g) => g.cents > 0);
  if (measured.length === 1) return refundIntent(read, live, measured[0]!);
  if (measured.length > 1) {
    throw ValidationError.field(
      'refundTransactionGuid',
      `is required: this check carries ${measured.length} refunds (${measured.map((g) => g.id).join(', ')}); post each as { "order": …, "checkGuid": "…", "refundTransactionGuid": "…" }`,
    );
  }
  if (refunds.groups.length > 0) throw ValidationError.field(at(live.path, 'selections'), 'the refund returns only tax or gratuity: no purchase amount to take back');
  throw ValidationError.field(at(live.path, 'payments'), 'carry no refund: no payment has refundStatus FULL, no selection or service charge has refundDetails, and the check is not voided');
}
