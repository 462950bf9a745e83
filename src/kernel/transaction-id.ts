/**
 * One POS order ↔ one upstream transactionId, derived only from the POS's own ids so every retry,
 * restart and instance computes the same one. Readable when the ids are plain
 * (`generic:A-1001`, `clover:MERCHANT:ORDER`); otherwise a hash that keeps the POS name visible
 * (`square:~<32 hex>`). `~` cannot occur in the plain form, so the two forms never collide.
 *
 * Unambiguous: two different (POS, scope, order) triples never give one id. The plain form joins
 * parts that cannot contain its separator `:`. The hashed form joins the parts with NUL, and ids
 * holding a control character (NUL among them) are refused here, so the joined text splits back
 * into exactly the parts it was made of. Without that refusal `{orderId: "c", storeId: "store 7"}`
 * and `{orderId: "store 7\u0000c"}` hashed alike, and the second order was answered, and refunded,
 * as the first. The encoding itself is kept as it was, so the ids of recorded orders do not change.
 */
import { createHash } from 'node:crypto';
import { ValidationError } from './errors.js';

const PLAIN = /^[A-Za-z0-9._-]{1,64}$/;
/** C0 controls, DEL and C1 controls: no POS's ids contain them, and NUL is the hashed form's separator. */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/** Refuses an id (order, store, refund) the bridge cannot key records by, naming the field. */
export function checkId(field: string, value: string): void {
  if (value.length === 0) throw ValidationError.field(field, 'must not be empty');
  if (hasControlCharacter(value)) throw ValidationError.field(field, 'must not contain control characters');
}

export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}

/**
 * `part`: the part of the order the sale is (a Toast check), after the order id. A POS's adapter
 * uses a scope or parts, never both, so one POS's ids always have the same number of parts and
 * `scope:order` never meets `order:part`; giving both is refused.
 */
export function deriveTransactionId(pos: string, orderId: string, scope?: string, part?: string): string {
  checkId('orderId', orderId);
  if (scope) checkId('scope', scope);
  if (part !== undefined) checkId('part', part);
  if (scope && part !== undefined) throw new Error(`${pos}: a sale is identified by a scope or by a part of its order, not both`);
  const parts = scope ? [scope, orderId] : part !== undefined ? [orderId, part] : [orderId];
  if (parts.every((p) => PLAIN.test(p))) return [pos, ...parts].join(':');
  const hash = createHash('sha256').update([pos, ...parts].join('\u0000')).digest('hex').slice(0, 32);
  return `${pos}:~${hash}`;
}

/** The transactionId of a sale or refund an adapter read: its order, scope and part (`deriveTransactionId`). */
export function saleTransactionId(pos: string, sale: { orderId: string; scope?: string; part?: string }): string {
  return deriveTransactionId(pos, sale.orderId, sale.scope, sale.part);
}
