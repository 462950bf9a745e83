/** Bearer-token checks: `/v1/admin/*` (ADMIN_TOKEN) and, when POS_TOKEN is set, direct POS posts. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { UnauthorizedError } from '../errors.js';

/**
 * Compares digests, so the comparison takes the same time whatever the token's length or content;
 * a missing header and a wrong token get the same answer.
 */
export function bearerAuth(expectedToken: string): RequestHandler {
  const expected = createHash('sha256').update(expectedToken).digest();
  return (req, _res, next) => {
    const header = req.headers.authorization ?? '';
    const given = header.startsWith('Bearer ') ? header.slice(7) : '';
    const ok = timingSafeEqual(createHash('sha256').update(given).digest(), expected) && given.length > 0;
    next(ok ? undefined : new UnauthorizedError());
  };
}
