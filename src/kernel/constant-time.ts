/**
 * Comparing secrets (tokens, keys, webhook signatures, cursor MACs) in the same time whatever is
 * given: both sides are hashed to equal-length digests first, so neither a differing length nor the
 * position of the first differing byte shows in how long a refusal takes. The one owner of this
 * rule (docs/security.md): every credential check of the bridge goes through it.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Whether `given` is `expected`, compared in constant time. */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** `sameSecret` against one expected secret, its digest taken once (a token checked on every request). */
export function secretMatcher(expected: string): (given: string) => boolean {
  const expectedDigest = digest(expected);
  return (given) => timingSafeEqual(digest(given), expectedDigest);
}
