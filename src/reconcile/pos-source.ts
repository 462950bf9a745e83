/**
 * What the three-way report reads of a POS: every order and refund of one merchant's account on one
 * POS that changed in a window, as the adapter parsed it. Read-only: listing changes nothing in the
 * POS, the ledger or the loyalty service.
 */
import type { ActiveMerchant } from '../merchants/registry.js';

/** A sale as the POS shows it now. */
export interface PosSale {
  kind: 'sale';
  pos: string;
  /** The POS's own order id. */
  orderId: string;
  /** The ledger's key for it (`deriveTransactionId`), within the merchant. */
  transactionId: string;
  /** Paid (closed, captured): only a paid sale earns points. */
  paid: boolean;
  /** The Check amount the adapter makes of it, in cents. */
  amountCents: number;
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
  /** The POS's id of the refund, where it has one. */
  refundId?: string;
  /** Cents refunded when the POS names a part; absent for a whole order. */
  amountCents?: number;
  updatedAt: string;
}

export type PosEntry = PosSale | PosRefund;

export interface PosOrderSource {
  /**
   * Every order and refund of `merchant`'s account on `pos` the POS changed within [since, until),
   * each once. Throws when the POS cannot be read whole (a page that fails fails the listing).
   */
  list(merchant: ActiveMerchant, pos: string, since: Date, until: Date): AsyncIterable<PosEntry>;
}
