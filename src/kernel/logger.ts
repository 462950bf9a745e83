/**
 * pino, JSON lines. The bridge logs ids and statuses, never bodies; redaction is the second line of
 * defence for anything that slips into a log object: credentials and customer contact details.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import { logContext } from './log-context.js';

export type { Logger };

const SENSITIVE_KEYS = ['phone', 'email', 'phoneNumber', 'phone_number', 'email_address', 'emailAddress', 'firstName', 'lastName', 'appToken', 'apiKey', 'adminToken', 'token', 'password', 'secret'];

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-app-token"]',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'req.headers["x-shopify-hmac-sha256"]',
  'req.headers["x-square-hmacsha256-signature"]',
  'req.headers["x-clover-auth"]',
  'req.headers["toast-signature"]',
  'req.headers["x-loyverse-signature"]',
  'res.headers["set-cookie"]',
  'headers["x-app-token"]',
  'headers["x-api-key"]',
  'headers.authorization',
  ...SENSITIVE_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]),
];

/** The request and merchant a line was written for (log-context.ts), on every line; the line's own fields win. */
function contextFields(): Record<string, string> {
  const context = logContext();
  if (!context) return {};
  const fields: Record<string, string> = {};
  if (context.requestId) fields.requestId = context.requestId;
  if (context.merchantId) fields.merchantId = context.merchantId;
  return fields;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'loyalty-bridge' }, mixin: contextFields }, destination);
}

export const silentLogger: Logger = pino({ level: 'silent' });
