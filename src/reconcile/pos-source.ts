/**
 * What the three-way report reads of a POS: every order and refund of one merchant's account on one
 * POS that changed in a window, as the adapter parsed it. Read-only: listing changes nothing in the
 * POS, the ledger or the loyalty service.
 */
import { listPosChanges, type FoundItem, type ListingRetry } from '../backfill/index.js';
import type { ActiveMerchant } from '../merchants/registry.js';
import type { PosAdapter } from '../pos/contract.js';

/** A sale as the POS shows it now. */
export interface PosSale {
  kind: 'sale';
  pos: string;
  /** The POS's own order id. */
  orderId: string;
  /** The ledger's key for it (`deriveTransactionId`), within the merchant. */
  transactionId: string;
  /** Where an earlier build may have recorded it instead (intent `recordedAs`: a Toast order kept whole). */
  recordedAs?: readonly string[];
  /** Paid (closed, captured): only a paid sale earns points. */
  paid: boolean;
  /** The Check amount the adapter makes of it, in cents. */
  amountCents: number;
  /**
   * The Check the POS says the order stands at now, after its refunds and edits (Shopify's
   * `current_subtotal_price`), where the adapter reads one: compared with what the ledger accrued
   * less what it reversed (`pos_amount_differs`). Absent for POSes that state no such figure.
   */
  currentCents?: number;
  /** When the POS last changed it (ISO 8601). */
  updatedAt: string;
}

/** A refund as the POS shows it. */
export interface PosRefund {
  kind: 'refund';
  pos: string;
  /** The refunded order's id at the POS. */
  orderId: string;
  /** The refunded order's transactionId (the ledger keys a refund by its order). */
  transactionId: string;
  recordedAs?: readonly string[];
  /** The POS's id of the refund, where it has one. */
  refundId?: string;
  /** Cents refunded when the POS names a part; absent for a whole order. */
  amountCents?: number;
  updatedAt: string;
}

/**
 * A paid order or a refund the adapter cannot translate exactly (a webhook of it would have become a
 * dead letter): the ledger cannot hold it, and the POS names no transactionId it could be found by.
 */
export interface PosUnreadable {
  kind: 'unreadable';
  pos: string;
  orderId: string;
  refundId?: string;
  updatedAt: string;
  /** What the adapter refused: the field and the reason. */
  why: string;
}

export type PosEntry = PosSale | PosRefund | PosUnreadable;

/** What the report compares of a listed object; undefined for an unpaid sale (nothing accrues for it, so nothing can differ). */
export function posEntryOf(item: FoundItem): PosEntry | undefined {
  const { pos, orderId, updatedAt } = item;
  if (item.refused !== undefined) return { kind: 'unreadable', pos, orderId, ...(item.refundId ? { refundId: item.refundId } : {}), updatedAt, why: item.refused };
  if (!item.paid || !item.transactionId || !item.intent) return undefined;
  const { transactionId, intent } = item;
  const recordedAs = intent.recordedAs?.length ? { recordedAs: intent.recordedAs } : {};
  if (item.kind === 'checkout' && 'check' in intent) {
    // An adapter that reads the order's current figure adds it to the intent (adapters/shopify/checkout.ts, `currentAmountCents`).
    const current = (intent as { currentAmountCents?: unknown }).currentAmountCents;
    return { kind: 'sale', pos, orderId, transactionId, ...recordedAs, paid: true, amountCents: intent.check.amount, ...(typeof current === 'number' && Number.isSafeInteger(current) ? { currentCents: current } : {}), updatedAt };
  }
  if (item.kind === 'refund' && !('check' in intent)) {
    const refundId = item.refundId ?? intent.refundId;
    return { kind: 'refund', pos, orderId, transactionId, ...recordedAs, ...(refundId ? { refundId } : {}), ...(intent.amountCents !== undefined ? { amountCents: intent.amountCents } : {}), updatedAt };
  }
  return undefined;
}

export interface PosOrderSource {
  /**
   * Every order and refund of `merchant`'s account on `pos` the POS changed within [since, until),
   * each once. Throws when the POS cannot be read whole (a page that fails fails the listing).
   */
  list(merchant: ActiveMerchant, pos: string, since: Date, until: Date): AsyncIterable<PosEntry>;
}

/**
 * The POS side read through the backfill's listing (`listPosChanges`): the same requests, paging
 * and retries as a backfill pass, and nothing fed anywhere.
 */
export function backfillListing(adapters: ReadonlyMap<string, PosAdapter>, options: { timeoutMs?: number; retry?: ListingRetry } = {}): PosOrderSource {
  return {
    async *list(merchant, pos, since, until) {
      for await (const item of listPosChanges({ adapters, merchant, pos, window: { since, until }, ...options })) {
        const entry = posEntryOf(item);
        if (entry) yield entry;
      }
    },
  };
}
