/**
 * How this loyalty service shows a reversal in its operations history. The contract documents the
 * `reverse` call (its results carry `reversedAt`) but not the history entry a reversal leaves: the
 * observed event ids are all credits (24 "Points earned", 1 "Stamps earned", …), and a reversal may
 * be written as the purchase taken back (a negative `purchaseSum` under the accrual's event) or as
 * an event of its own. So the bridge learns it, per merchant (each is its own account), from a
 * reversal the service confirmed: after a `reverse` answered with `reversedAt`, the card's history is
 * read once, and the one entry on each reversed card with the Check's sum (either sign) at that
 * moment gives the shape: its `eventId` and the sign of its `purchaseSum`.
 *
 * With a shape known, a reversal whose outcome is unknown (a timeout, a 5xx) is settled from the
 * history when each card it should have reversed shows exactly one unclaimed entry of that shape,
 * with the Check's sum, since the call began, and no other record of the customer could have made
 * it (history-verifier.ts `verifyReversal`). Anything less certain waits for a person, who is shown
 * the evidence (GET /v1/admin/transactions/{id}/evidence).
 */
import type { ReversalShape } from '../state/record.js';
import type { SettingStore } from '../ledger/store.js';
import type { Operation } from '../loyalty/contract.js';
import { centsEqualsMajor } from '../kernel/money.js';

export type { ReversalShape };

/** The setting a merchant's learned shape is kept under (the store's `putSetting`). */
export function shapeSettingName(merchantId: string): string {
  return `reversal_shape/${merchantId}`;
}

export async function readShape(store: Pick<SettingStore, 'getSetting'>, merchantId: string): Promise<ReversalShape | undefined> {
  const text = await store.getSetting(shapeSettingName(merchantId));
  if (!text) return undefined;
  const parsed = JSON.parse(text) as ReversalShape;
  return Number.isInteger(parsed.eventId) && (parsed.sign === 1 || parsed.sign === -1) ? parsed : undefined;
}

/** The sum of an operation, as cents compared with a Check: `amountCents` in magnitude, and its sign. */
export function sumSign(op: Pick<Operation, 'purchaseSum'>, amountCents: number): -1 | 1 | undefined {
  if (op.purchaseSum == null) return undefined;
  if (centsEqualsMajor(amountCents, op.purchaseSum)) return 1;
  if (centsEqualsMajor(-amountCents, op.purchaseSum)) return -1;
  return undefined;
}

/** Whether `op` is of the shape with the Check's sum: the entry a reversal of `amountCents` leaves. */
export function isReversalEntry(op: Pick<Operation, 'eventId' | 'purchaseSum'>, shape: Pick<ReversalShape, 'eventId' | 'sign'>, amountCents: number): boolean {
  return op.eventId === shape.eventId && sumSign(op, amountCents) === shape.sign;
}

/** A shape in words, for the history and the evidence. */
export function describeShape(shape: Pick<ReversalShape, 'eventId' | 'sign'>): string {
  return `event ${shape.eventId} with a ${shape.sign < 0 ? 'negative' : 'positive'} purchase sum`;
}
