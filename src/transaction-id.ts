/**
 * One POS order ↔ one upstream transactionId, derived only from the POS's own ids so every retry,
 * restart and instance computes the same one. Readable when the ids are plain
 * (`generic:A-1001`, `clover:MERCHANT:ORDER`); otherwise a hash that keeps the POS name visible
 * (`square:~<32 hex>`). `~` cannot occur in the plain form, so the two forms never collide.
 */
import { createHash } from 'node:crypto';

const PLAIN = /^[A-Za-z0-9._-]{1,64}$/;

export function deriveTransactionId(pos: string, orderId: string, scope?: string): string {
  const parts = scope ? [scope, orderId] : [orderId];
  if (parts.every((p) => PLAIN.test(p))) return [pos, ...parts].join(':');
  const hash = createHash('sha256').update([pos, ...parts].join('\u0000')).digest('hex').slice(0, 32);
  return `${pos}:~${hash}`;
}
