/**
 * What an adapter is: pure functions from one POS's own payloads to the bridge's neutral intents.
 * Adapters describe and translate; they never call the loyalty service or touch the ledger, and
 * they throw ValidationError (naming the field) for anything they cannot translate exactly.
 */
import type { Customer } from '../src/ledger/record.js';
import type { Check } from '../src/loyalty/contract.js';

export interface AdapterContext {
  defaultCurrency: string;
  defaultPhoneRegion: string;
}

export interface CheckoutIntent {
  orderId: string;
  /** Merchant/location part of the order's identity where the POS's order ids are not globally unique. */
  scope?: string;
  check: Check;
  customer: Customer;
}

export interface RefundLine {
  id: string;
  quantity: number;
  totalCents: number;
}

export interface RefundIntent {
  orderId: string;
  scope?: string;
  /** The POS's id of this refund: the same id delivered again changes nothing. */
  refundId?: string;
  /** Partial refunds name the refunded amount (cents, tax and tip excluded) and/or lines. */
  amountCents?: number;
  items?: RefundLine[];
}

export interface PosAdapter {
  readonly name: string;
  parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent;
  parseRefund(body: unknown, context: AdapterContext): RefundIntent;
}
