/**
 * The one verifier every POS's webhook goes through: one test per rejection reason. Every refusal is
 * a 401 whatever its reason, so a test that looked only at the class would pass on a refusal for
 * the wrong reason: each one is asserted whole, its message and the reason code the logs and
 * metrics get.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { PosSettings, SignatureScheme } from '../../src/pos/contract.js';
import { UnauthorizedError } from '../../src/kernel/errors.js';
import { signLikePos, singleHeader, verifySignature } from '../../src/webhooks/signature.js';

const settings: PosSettings = { webhookSecret: 'shh', notificationUrl: 'https://bridge.example.test/v1/webhooks/x', apiBaseUrl: '' };
const hmacBody: SignatureScheme = { kind: 'hmac', header: 'X-Sig', algorithm: 'sha256', encodings: ['base64'], message: (raw) => raw };
const hmacUrlBody: SignatureScheme = { kind: 'hmac', header: 'X-Sig', algorithm: 'sha256', encodings: ['base64'], message: (raw, _h, s) => Buffer.concat([Buffer.from(s.notificationUrl ?? ''), raw]) };
const hmacWithTimestamp: SignatureScheme = {
  kind: 'hmac',
  header: 'X-Sig',
  algorithm: 'sha1',
  encodings: ['base64', 'hex'],
  message: (raw, headers) => (typeof headers['x-ts'] === 'string' ? Buffer.concat([raw, Buffer.from(headers['x-ts'])]) : undefined),
};
const staticCode: SignatureScheme = { kind: 'static', header: 'X-Auth' };
const body = Buffer.from('{"a":1}');

const verify = (scheme: SignatureScheme, rawHeaders: string[], raw = body, s = settings, now?: Date) => () =>
  verifySignature(scheme, s, raw, Object.fromEntries(Array.from({ length: rawHeaders.length / 2 }, (_, i) => [rawHeaders[2 * i]!.toLowerCase(), rawHeaders[2 * i + 1]!])), rawHeaders, now);

interface Refusal {
  status: number;
  code: string;
  reason: string | undefined;
  message: string;
}

/** What `run` was refused with: an UnauthorizedError's status, code, reason and message (fails when nothing was refused). */
function refusal(run: () => void): Refusal {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UnauthorizedError);
    const { status, code, reason, message } = error as UnauthorizedError;
    return { status, code, reason, message };
  }
  throw new Error('expected a refusal, but the signature was accepted');
}

const refused = (reason: string, message: string): Refusal => ({ status: 401, code: 'unauthorized', reason, message });
const MISSING = refused('signature_missing', 'webhook signature header X-Sig is missing, empty or repeated');
const MISMATCH = refused('signature_mismatch', 'webhook signature does not match');

describe('verifySignature', () => {
  const good = createHmac('sha256', 'shh').update(body).digest('base64');

  it('accepts the HMAC of the raw body', () => {
    expect(verify(hmacBody, ['X-Sig', good])).not.toThrow();
    expect(signLikePos(hmacBody, settings, body)).toBe(good);
  });

  it.each([
    ['missing', [] as string[], MISSING],
    ['empty', ['X-Sig', ''], MISSING],
    ['blank', ['X-Sig', '   '], MISSING],
    ['repeated, even when both are right', ['X-Sig', good, 'x-sig', good], MISSING],
    ['wrong', ['X-Sig', good.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))], MISMATCH],
    ['of another length', ['X-Sig', good.slice(0, 10)], MISMATCH],
    ['in another encoding', ['X-Sig', createHmac('sha256', 'shh').update(body).digest('hex')], MISMATCH],
  ])('refuses a header that is %s with 401, saying why', (_name, rawHeaders, expected) => {
    expect(refusal(verify(hmacBody, rawHeaders))).toEqual(expected);
  });

  it('refuses a body changed by one byte', () => {
    expect(refusal(verify(hmacBody, ['X-Sig', good], Buffer.from('{"a":2}')))).toEqual(MISMATCH);
  });

  it('refuses everything when the POS has no secret configured, after the header is found', () => {
    expect(refusal(verify(hmacBody, ['X-Sig', good], body, { apiBaseUrl: '' }))).toEqual(refused('not_configured', 'webhooks of this POS are not configured (no signing secret)'));
    // The header is looked at first: without one, that is what is said, configured or not.
    expect(refusal(verify(hmacBody, [], body, { apiBaseUrl: '' }))).toEqual(MISSING);
  });

  it('signs the notification URL followed by the body when the scheme says so', () => {
    const sig = createHmac('sha256', 'shh').update(`${settings.notificationUrl}{"a":1}`).digest('base64');
    expect(verify(hmacUrlBody, ['X-Sig', sig])).not.toThrow();
    expect(refusal(verify(hmacUrlBody, ['X-Sig', good]))).toEqual(MISMATCH);
  });

  it('needs the headers a signature covers, and accepts each listed encoding', () => {
    const mac = createHmac('sha1', 'shh').update(Buffer.concat([body, Buffer.from('1700000000')]));
    const digest = mac.digest();
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex'), 'X-Ts', '1700000000'])).not.toThrow();
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('base64'), 'X-Ts', '1700000000'])).not.toThrow();
    expect(refusal(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex')]))).toEqual(refused('signed_header_missing', 'webhook is missing a header its signature covers'));
    expect(refusal(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex'), 'X-Ts', '1700000001']))).toEqual(MISMATCH);
  });

  it('compares a static code exactly', () => {
    expect(verify(staticCode, ['X-Auth', 'shh'])).not.toThrow();
    expect(verify(staticCode, ['X-Auth', 'shh '])).not.toThrow();
    expect(refusal(verify(staticCode, ['X-Auth', 'sh']))).toEqual(MISMATCH);
    expect(refusal(verify(staticCode, ['X-Auth', 'SHH']))).toEqual(MISMATCH);
    expect(refusal(verify(staticCode, []))).toEqual(refused('signature_missing', 'webhook signature header X-Auth is missing, empty or repeated'));
  });
});

describe('verifySignature: the replay window (checked after the signature)', () => {
  /** Signs the body followed by the X-Ts header, and judges X-Ts against a 20-minute window. */
  const windowed: SignatureScheme = {
    ...hmacWithTimestamp,
    replay: { windowMs: 20 * 60_000, why: 'the POS retries for 15 minutes', signedAt: (_raw, headers) => (typeof headers['x-ts'] === 'string' ? headers['x-ts'] : undefined) },
  };
  const signedAt = (ts: string) => ['X-Sig', createHmac('sha1', 'shh').update(Buffer.concat([body, Buffer.from(ts)])).digest('hex'), 'X-Ts', ts];
  const SIGNED = 1_700_000_000_000;
  const at = (offsetMs: number) => new Date(SIGNED + offsetMs);

  it('accepts a time within the window, either side of the clock', () => {
    expect(verify(windowed, signedAt('1700000000'), body, settings, at(20 * 60_000))).not.toThrow();
    expect(verify(windowed, signedAt('1700000000000'), body, settings, at(-20 * 60_000))).not.toThrow();
  });

  it('refuses a time outside it, naming how far and the window', () => {
    expect(refusal(verify(windowed, signedAt('1700000000'), body, settings, at(20 * 60_000 + 1)))).toEqual(
      refused('replay_window', 'webhook was signed 20 min ago, outside the 20 min replay window (the POS retries for 15 minutes): refused as a possible replay'),
    );
    expect(refusal(verify(windowed, signedAt('1700000000'), body, settings, at(-45 * 60_000)))).toEqual(
      refused('replay_window', 'webhook was signed 45 min ahead, outside the 20 min replay window (the POS retries for 15 minutes): refused as a possible replay'),
    );
  });

  it('refuses a signed time that is no time', () => {
    expect(refusal(verify(windowed, signedAt('yesterday'), body, settings, at(0)))).toEqual(refused('signed_time_invalid', 'webhook signed time is not a date-time or epoch time'));
  });

  it('looks at the time only once the signature holds: a forged old time is a mismatch, not a replay', () => {
    const forged = signedAt('1700000000');
    forged[1] = forged[1]!.replace(/^./, (c) => (c === 'a' ? 'b' : 'a'));
    expect(refusal(verify(windowed, forged, body, settings, at(60 * 60_000)))).toEqual(MISMATCH);
  });
});

describe('singleHeader', () => {
  it('matches names case-insensitively and refuses repeats', () => {
    expect(singleHeader(['x-sig', 'a'], 'X-Sig')).toBe('a');
    expect(singleHeader(['X-SIG', 'a', 'Other', 'b'], 'x-sig')).toBe('a');
    expect(singleHeader(['X-Sig', 'a', 'X-Sig', 'b'], 'x-sig')).toBeUndefined();
  });
});
