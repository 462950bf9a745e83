/**
 * Merchants' secrets at rest (secrets.ts): sealed with AES-256-GCM under SECRETS_KEY, opened only by
 * that key and only as sealed, never shown but by their last four characters; and the bridge's own
 * tokens for a merchant kept as hashes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { SealedSecret } from '../../src/state/merchant.js';
import { maskSecret as mask } from '../../src/kernel/mask.js';
import { keyFingerprint, newSecretsKey, newToken, parseSecretsKey, SecretBox, SecretsKeyError, tokenHash } from '../../src/merchants/secrets.js';

const KEY = Buffer.alloc(32, 7);
const box = new SecretBox(KEY);
const APP_TOKEN = 'app-token-0123456789abcdef';

/** `sealed` with one bit of one of its base64 fields flipped. */
function flipped(sealed: SealedSecret, field: 'data' | 'tag' | 'iv', byte = 0): SealedSecret {
  const bytes = Buffer.from(sealed[field], 'base64');
  bytes[byte] = bytes[byte]! ^ 0x01;
  return { ...sealed, [field]: bytes.toString('base64') };
}

describe('SecretBox', () => {
  it('opens what it sealed, exactly (any text, the empty one included)', () => {
    for (const secret of [APP_TOKEN, '', 'ключ-🔑-with\ttab and "quotes"', 'x'.repeat(4096)]) expect(box.open(box.seal(secret))).toBe(secret);
  });

  it('seals as AES-256-GCM under the key it names by fingerprint, a 96-bit nonce and a 128-bit tag, nothing in clear', () => {
    const sealed = box.seal(APP_TOKEN);
    expect(sealed).toEqual({ alg: 'aes-256-gcm', key: keyFingerprint(KEY), iv: expect.any(String), tag: expect.any(String), data: expect.any(String), hint: '…cdef' });
    expect(Buffer.from(sealed.iv, 'base64')).toHaveLength(12);
    expect(Buffer.from(sealed.tag, 'base64')).toHaveLength(16);
    // GCM is a stream mode: the ciphertext is as long as the text, and none of the text shows.
    expect(Buffer.from(sealed.data, 'base64')).toHaveLength(Buffer.byteLength(APP_TOKEN));
    expect(JSON.stringify(sealed)).not.toContain(APP_TOKEN.slice(0, 8));
    expect(JSON.stringify(sealed)).not.toContain(Buffer.from(APP_TOKEN).toString('base64').slice(0, 8));
  });

  it('sealing the same secret twice gives two different sealings (a fresh nonce each time), both opening to it', () => {
    const [a, b] = [box.seal(APP_TOKEN), box.seal(APP_TOKEN)];
    expect(a.iv).not.toBe(b.iv);
    expect(a.data).not.toBe(b.data);
    expect(a.tag).not.toBe(b.tag);
    expect([box.open(a), box.open(b)]).toEqual([APP_TOKEN, APP_TOKEN]);
  });

  it.each([
    ['ciphertext', 'data'],
    ['tag', 'tag'],
    ['nonce', 'iv'],
  ] as const)('refuses a sealing whose %s was changed by one bit', (_name, field) => {
    const sealed = box.seal(APP_TOKEN);
    expect(() => box.open(flipped(sealed, field))).toThrow('Unsupported state or unable to authenticate data');
    // The last byte too: every byte is covered, not only the first.
    expect(() => box.open(flipped(sealed, field, Buffer.from(sealed[field], 'base64').length - 1))).toThrow('Unsupported state or unable to authenticate data');
  });

  it.each([4, 8, 12, 15])('refuses a tag cut to its first %i bytes: only the whole 16-byte tag authenticates', (bytes) => {
    const sealed = box.seal(APP_TOKEN);
    expect(() => box.open({ ...sealed, tag: Buffer.from(sealed.tag, 'base64').subarray(0, bytes).toString('base64') })).toThrow('Invalid authentication tag length');
  });

  it('refuses a ciphertext cut short or moved to another sealing', () => {
    const sealed = box.seal(APP_TOKEN);
    expect(() => box.open({ ...sealed, data: Buffer.from(sealed.data, 'base64').subarray(1).toString('base64') })).toThrow('Unsupported state or unable to authenticate data');
    const other = box.seal('another-secret-of-the-same-len');
    expect(() => box.open({ ...other, data: sealed.data })).toThrow('Unsupported state or unable to authenticate data');
  });

  it('refuses a sealing of another key by its fingerprint, naming both and neither key', () => {
    const otherKey = Buffer.alloc(32, 9);
    const sealed = new SecretBox(otherKey).seal(APP_TOKEN);
    let refusal: unknown;
    try {
      box.open(sealed);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(SecretsKeyError);
    expect((refusal as Error).message).toBe(`a secret was sealed with another SECRETS_KEY (fingerprint ${keyFingerprint(otherKey)}, this one is ${keyFingerprint(KEY)})`);
    expect((refusal as Error).message).not.toContain(otherKey.toString('base64'));
  });

  it('refuses a sealing of another key that claims this key\'s fingerprint: the tag does not hold', () => {
    const forged = { ...new SecretBox(Buffer.alloc(32, 9)).seal(APP_TOKEN), key: box.fingerprint };
    expect(() => box.open(forged)).toThrow('Unsupported state or unable to authenticate data');
  });

  it('takes a key of 32 bytes only', () => {
    expect(() => new SecretBox(Buffer.alloc(31))).toThrow(new SecretsKeyError('a secrets key is 32 bytes'));
    expect(() => new SecretBox(Buffer.alloc(33))).toThrow(SecretsKeyError);
  });
});

describe('SECRETS_KEY', () => {
  it('the fingerprint is the first 16 hex characters of SHA-256 of the key', () => {
    expect(keyFingerprint(KEY)).toBe(createHash('sha256').update(KEY).digest('hex').slice(0, 16));
    expect(keyFingerprint(KEY)).toMatch(/^[0-9a-f]{16}$/);
    expect(new SecretBox(KEY).fingerprint).toBe(keyFingerprint(KEY));
  });

  it('parses 32 bytes of base64, with or without its padding and around whitespace', () => {
    const text = KEY.toString('base64');
    expect(parseSecretsKey(text)).toEqual(KEY);
    expect(parseSecretsKey(text.replace(/=+$/, ''))).toEqual(KEY);
    expect(parseSecretsKey(` ${text}\n`)).toEqual(KEY);
  });

  it.each([
    ['16 bytes', randomBytes(16).toString('base64')],
    ['33 bytes', randomBytes(33).toString('base64')],
    ['hex', KEY.toString('hex')],
    ['base64 with a character that is not', `${KEY.toString('base64').slice(0, -3)}!A=`],
    ['empty', ''],
  ])('refuses %s, saying what it must be', (_name, text) => {
    expect(() => parseSecretsKey(text)).toThrow(new SecretsKeyError('must be 32 random bytes in base64 (openssl rand -base64 32)'));
  });

  it('a new key is 32 random bytes that parse', () => {
    const [a, b] = [newSecretsKey(), newSecretsKey()];
    expect(parseSecretsKey(a)).toHaveLength(32);
    expect(a).not.toBe(b);
  });
});

describe('tokens and their hashes', () => {
  it('a new token is its prefix and 32 random bytes in base64url, different every time', () => {
    const [a, b] = [newToken('pos'), newToken('pos')];
    expect(a).toMatch(/^pos_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a.slice('pos_'.length), 'base64url')).toHaveLength(32);
    expect(a).not.toBe(b);
    expect(newToken('adm')).toMatch(/^adm_/);
  });

  it('tokenHash is SHA-256 in base64url: the same for the same token, another for any change, never the token', () => {
    const token = newToken('pos');
    const hash = tokenHash(token);
    expect(hash).toBe(createHash('sha256').update(token).digest('base64url'));
    expect(hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(tokenHash(token)).toBe(hash);
    expect(hash).not.toContain(token.slice(4, 12));
    for (const changed of [`${token}x`, token.slice(0, -1), token.toUpperCase(), ` ${token}`]) expect(tokenHash(changed)).not.toBe(hash);
  });
});

describe('mask', () => {
  it('shows the last four characters of a secret of 12 or more, and nothing of a shorter one', () => {
    expect(mask('0123456789ab')).toBe('…89ab');
    expect(mask(APP_TOKEN)).toBe('…cdef');
    expect(mask('0123456789a')).toBe('…');
    expect(mask('')).toBe('…');
  });
});
