/**
 * Merchants' secrets at rest. App tokens, API keys and POS access tokens are kept encrypted with
 * AES-256-GCM under SECRETS_KEY (32 random bytes, base64): a copy of the ledger's files or tables
 * holds none of them in clear. The bridge's own credentials for a merchant (its POS token and admin
 * token) are kept only as SHA-256 hashes: they are random 32-byte strings, so a fast hash is
 * enough, and nobody, the bridge included, can show them again once created.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { SealedSecret } from '../state/merchant.js';
import { maskSecret } from '../kernel/mask.js';

export class SecretsKeyError extends Error {}

export function keyFingerprint(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/** SECRETS_KEY as bytes; refuses anything but 32 bytes of base64. */
export function parseSecretsKey(text: string): Buffer {
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32 || key.toString('base64').replace(/=+$/, '') !== text.trim().replace(/=+$/, '')) {
    throw new SecretsKeyError('must be 32 random bytes in base64 (openssl rand -base64 32)');
  }
  return key;
}

export function newSecretsKey(): string {
  return randomBytes(32).toString('base64');
}

export class SecretBox {
  readonly fingerprint: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new SecretsKeyError('a secrets key is 32 bytes');
    this.fingerprint = keyFingerprint(key);
  }

  seal(secret: string): SealedSecret {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return { alg: 'aes-256-gcm', key: this.fingerprint, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64'), hint: maskSecret(secret) };
  }

  open(sealed: SealedSecret): string {
    if (sealed.key !== this.fingerprint) throw new SecretsKeyError(`a secret was sealed with another SECRETS_KEY (fingerprint ${sealed.key}, this one is ${this.fingerprint})`);
    // The tag's length is fixed at the 16 bytes `seal` writes: unstated, GCM would accept a tag cut
    // to 4 bytes, and a forger would need some 2^32 tries instead of 2^128.
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(sealed.iv, 'base64'), { authTagLength: 16 });
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
  }
}

/** A credential the bridge hands out once (a merchant's POS or admin token). */
export function newToken(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

