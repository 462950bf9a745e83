/**
 * The core verifies; adapters only describe (header, algorithm, signed bytes). Computed over the
 * raw bytes, compared in constant time; a missing, empty or repeated signature header is refused
 * before anything else is looked at.
 */
import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { UnauthorizedError } from '../kernel/errors.js';
import type { PosSettings, ReplayWindow, SignatureScheme } from '../pos/contract.js';
import { sameSecret } from '../kernel/constant-time.js';

/** Node folds repeated headers into one value, so repeats are counted on the raw header list. */
export function singleHeader(rawHeaders: string[], name: string): string | undefined {
  const lower = name.toLowerCase();
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === lower) values.push(rawHeaders[i + 1]!);
  if (values.length !== 1) return undefined;
  const value = values[0]!.trim();
  return value === '' ? undefined : value;
}

/** A signed time as POSes write it: ISO 8601, or epoch milliseconds or seconds; undefined when it is none of these. */
export function parseSignedTime(text: string): number | undefined {
  if (/^\d{13}$/.test(text)) return Number(text);
  if (/^\d{10}$/.test(text)) return Number(text) * 1000;
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

/** `now` is the bridge's clock (injectable in tests), against which signed times are judged. */
export function verifySignature(scheme: SignatureScheme, settings: PosSettings, raw: Buffer, headers: IncomingHttpHeaders, rawHeaders: string[], now: Date = new Date()): void {
  const given = singleHeader(rawHeaders, scheme.header);
  if (!given) throw new UnauthorizedError(`webhook signature header ${scheme.header} is missing, empty or repeated`, 'signature_missing');
  if (!settings.webhookSecret) throw new UnauthorizedError('webhooks of this POS are not configured (no signing secret)', 'not_configured');
  if (scheme.kind === 'static') {
    if (!sameSecret(given, settings.webhookSecret)) throw new UnauthorizedError('webhook signature does not match', 'signature_mismatch');
    return;
  }
  const message = scheme.message(raw, headers, settings);
  if (!message) throw new UnauthorizedError('webhook is missing a header its signature covers', 'signed_header_missing');
  const mac = createHmac(scheme.algorithm, settings.webhookSecret).update(message).digest();
  const ok = scheme.encodings.map((encoding) => sameSecret(given, mac.toString(encoding))).some(Boolean);
  if (!ok) throw new UnauthorizedError('webhook signature does not match', 'signature_mismatch');
  if (scheme.replay) checkReplayWindow(scheme.replay, raw, headers, now);
}

/** Checked after the signature: only then is the time known to be the POS's own. */
function checkReplayWindow(replay: ReplayWindow, raw: Buffer, headers: IncomingHttpHeaders, now: Date): void {
  const text = replay.signedAt(raw, headers);
  if (text === undefined) return;
  const signedMs = parseSignedTime(text);
  if (signedMs === undefined) throw new UnauthorizedError('webhook signed time is not a date-time or epoch time', 'signed_time_invalid');
  const ageMs = now.getTime() - signedMs;
  if (Math.abs(ageMs) > replay.windowMs) {
    const minutes = (ms: number) => `${Math.round(Math.abs(ms) / 60_000)} min`;
    throw new UnauthorizedError(`webhook was signed ${minutes(ageMs)} ${ageMs >= 0 ? 'ago' : 'ahead'}, outside the ${minutes(replay.windowMs)} replay window (${replay.why}): refused as a possible replay`, 'replay_window');
  }
}

/** The test signer: signs a body the way the POS would, for tests and local tools. */
export function signLikePos(scheme: SignatureScheme, settings: PosSettings, raw: Buffer, headers: IncomingHttpHeaders = {}, encoding?: 'base64' | 'hex'): string {
  if (scheme.kind === 'static') return settings.webhookSecret ?? '';
  const message = scheme.message(raw, headers, settings);
  if (!message) throw new Error('the headers the signature covers are missing');
  return createHmac(scheme.algorithm, settings.webhookSecret ?? '').update(message).digest(encoding ?? scheme.encodings[0]!);
}
