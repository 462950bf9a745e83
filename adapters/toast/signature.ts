/**
 * Toast signs each webhook message: `Toast-Signature` = base64(HMAC-SHA256(subscription secret,
 * body + timestamp)) (developer guide "Message signing": "The signature is derived by concatenating
 * the body and timestamp of the webhook message into a string"). The core verifies; this file only
 * says which timestamp.
 *
 * WHICH TIMESTAMP IS UNCONFIRMED (pos-facts). Toast's guide does not say where the timestamp comes
 * from. Two readings are possible:
 *   1. a `Toast-Timestamp` request header, when Toast sends one: used first;
 *   2. otherwise the message's own `timestamp` field (every Toast webhook body has one, "ISO
 *      formatted timestamp in UTC"), as the text it holds in the body.
 * Either way the HMAC is still keyed by the secret and compared in constant time, so a wrong
 * reading cannot let a forged message in: it makes every delivery fail with 401 (loudly: the
 * bridge's logs and metrics show the refusals), never a wrong amount. A present but empty
 * `Toast-Timestamp` header is refused rather than guessed around (no fallback to the body).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ReplayWindow } from '../../src/pos/contract.js';

export const TOAST_SIGNATURE_HEADER = 'Toast-Signature';
export const TOAST_TIMESTAMP_HEADER = 'Toast-Timestamp';

/** The timestamp the signature covers, or undefined when there is none to use (→ 401). */
export function timestampOf(raw: Buffer, headers: IncomingHttpHeaders): string | undefined {
  const value = headers[TOAST_TIMESTAMP_HEADER.toLowerCase()];
  if (value !== undefined) {
    // A repeated header reaches here joined ("a, b"), which no signature covers: it fails as a mismatch.
    const text = Array.isArray(value) ? value.join(', ') : value;
    return text.trim() === '' ? undefined : text.trim();
  }
  try {
    const body: unknown = JSON.parse(raw.toString('utf8'));
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      const timestamp = (body as { timestamp?: unknown }).timestamp;
      if (typeof timestamp === 'string' && timestamp !== '') return timestamp;
    }
  } catch {
    // Not JSON: nothing signed can be found, and the delivery is refused as unsigned.
  }
  return undefined;
}

/**
 * Toast signs the timestamp so that a captured delivery cannot be replayed later. Toast retries a
 * failed delivery after 5 and then 10 minutes and then drops it (pos-facts); if the signed time is
 * the first attempt's, the last retry comes ~15 minutes after it. 20 minutes lets every retry
 * through with room for clock skew, and refuses anything older or further ahead.
 */
export const TOAST_REPLAY_WINDOW: ReplayWindow = {
  signedAt: timestampOf,
  windowMs: 20 * 60_000,
  why: 'Toast retries for ~15 minutes',
};
