/**
 * POS bodies are read raw (webhook signatures are computed over the exact bytes) and parsed here:
 * JSON only (415 otherwise), within the size limit (413), valid UTF-8, and no deeper than
 * MAX_JSON_DEPTH, so hostile nesting cannot exhaust the stack of whatever walks it later.
 */
import express, { type RequestHandler } from 'express';
import { UnsupportedMediaTypeError, ValidationError } from '../errors.js';

export const MAX_JSON_DEPTH = 32;
const utf8 = new TextDecoder('utf-8', { fatal: true });

declare module 'express-serve-static-core' {
  interface Request {
    rawBody?: Buffer;
  }
}

export function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Rejects non-JSON content types before a byte of the body is read. */
export function requireJson(): RequestHandler {
  return (req, _res, next) => next(isJsonContentType(req.headers['content-type']) ? undefined : new UnsupportedMediaTypeError(req.headers['content-type']));
}

export function rawBody(limitBytes: number): RequestHandler {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  return (req, res, next) =>
    raw(req, res, (error?: unknown) => {
      if (error) return next(error);
      req.rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      next();
    });
}

export function parseJsonBody(raw: Buffer | undefined): unknown {
  if (!raw || raw.length === 0) throw ValidationError.field('', 'body is empty; a JSON object is required');
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw ValidationError.field('', 'body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw ValidationError.field('', `body is not valid JSON: ${(error as Error).message.slice(0, 120)}`);
  }
  if (depthOf(value) > MAX_JSON_DEPTH) throw ValidationError.field('', `body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  return value;
}

function depthOf(value: unknown): number {
  // Iterative: a recursive walk would itself overflow on the hostile input it guards against.
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) max = d;
    if (max > MAX_JSON_DEPTH) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}
