/** The one verifier every POS's webhook goes through: one test per rejection reason. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { PosSettings, SignatureScheme } from '../../src/pos/contract.js';
import { UnauthorizedError } from '../../src/errors.js';
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

const verify = (scheme: SignatureScheme, rawHeaders: string[], raw = body, s = settings) => () =>
  verifySignature(scheme, s, raw, Object.fromEntries(Array.from({ length: rawHeaders.length / 2 }, (_, i) => [rawHeaders[2 * i]!.toLowerCase(), rawHeaders[2 * i + 1]!])), rawHeaders);

describe('verifySignature', () => {
  const good = createHmac('sha256', 'shh').update(body).digest('base64');

  it('accepts the HMAC of the raw body', () => {
    expect(verify(hmacBody, ['X-Sig', good])).not.toThrow();
    expect(signLikePos(hmacBody, settings, body)).toBe(good);
  });

  it.each([
    ['missing', [] as string[]],
    ['empty', ['X-Sig', '']],
    ['blank', ['X-Sig', '   ']],
    ['repeated, even when both are right', ['X-Sig', good, 'x-sig', good]],
    ['wrong', ['X-Sig', good.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))]],
    ['of another length', ['X-Sig', good.slice(0, 10)]],
    ['in another encoding', ['X-Sig', createHmac('sha256', 'shh').update(body).digest('hex')]],
  ])('refuses a header that is %s with 401', (_name, rawHeaders) => {
    expect(verify(hmacBody, rawHeaders)).toThrow(UnauthorizedError);
  });

  it('refuses a body changed by one byte', () => {
    expect(verify(hmacBody, ['X-Sig', good], Buffer.from('{"a":2}'))).toThrow(UnauthorizedError);
  });

  it('refuses everything when the POS has no secret configured', () => {
    expect(verify(hmacBody, ['X-Sig', good], body, { apiBaseUrl: '' })).toThrow(/not configured/);
  });

  it('signs the notification URL followed by the body when the scheme says so', () => {
    const sig = createHmac('sha256', 'shh').update(`${settings.notificationUrl}{"a":1}`).digest('base64');
    expect(verify(hmacUrlBody, ['X-Sig', sig])).not.toThrow();
    expect(verify(hmacUrlBody, ['X-Sig', good])).toThrow(UnauthorizedError);
  });

  it('needs the headers a signature covers, and accepts each listed encoding', () => {
    const mac = createHmac('sha1', 'shh').update(Buffer.concat([body, Buffer.from('1700000000')]));
    const digest = mac.digest();
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex'), 'X-Ts', '1700000000'])).not.toThrow();
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('base64'), 'X-Ts', '1700000000'])).not.toThrow();
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex')])).toThrow(/missing a header/);
    expect(verify(hmacWithTimestamp, ['X-Sig', digest.toString('hex'), 'X-Ts', '1700000001'])).toThrow(UnauthorizedError);
  });

  it('compares a static code exactly', () => {
    expect(verify(staticCode, ['X-Auth', 'shh'])).not.toThrow();
    expect(verify(staticCode, ['X-Auth', 'shh '])).not.toThrow();
    expect(verify(staticCode, ['X-Auth', 'sh'])).toThrow(UnauthorizedError);
    expect(verify(staticCode, ['X-Auth', 'SHH'])).toThrow(UnauthorizedError);
  });
});

describe('singleHeader', () => {
  it('matches names case-insensitively and refuses repeats', () => {
    expect(singleHeader(['x-sig', 'a'], 'X-Sig')).toBe('a');
    expect(singleHeader(['X-SIG', 'a', 'Other', 'b'], 'x-sig')).toBe('a');
    expect(singleHeader(['X-Sig', 'a', 'X-Sig', 'b'], 'x-sig')).toBeUndefined();
  });
});
