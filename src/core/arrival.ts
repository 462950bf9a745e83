/**
 * How an order or refund reached the bridge: the post, webhook delivery, backfill pass, dead-letter
 * replay or operator act that brought it. A record it creates keeps where it came from
 * (`LedgerRecord.origin`) and the payload as it arrived (the store's `getPayload`), so an operator
 * asking "why does this record say that?" can read what the POS actually sent.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { RecordOrigin } from '../state/record.js';
import { PAYLOAD_KEPT_BYTES, type KeptPayload } from '../ledger/store.js';

export interface Arrival {
  via: RecordOrigin['via'];
  receivedAt: string;
  /** The HTTP request's id (x-request-id), as the request log names it. */
  requestId?: string;
  /** The dead letter being run again. */
  deadLetterId?: string;
  /** The webhook event's key (set per action of a delivery). */
  webhookKey?: string;
  /** The payload as it arrived; absent when larger than PAYLOAD_KEPT_BYTES or when there was none (a remainder). */
  payload?: KeptPayload;
  /** Said in the first history event of a record it creates ("found by backfill: …"). */
  note?: string;
}

/** The record's `origin` for a record this arrival creates. */
export function originOf(arrival: Arrival): RecordOrigin {
  return {
    via: arrival.via,
    receivedAt: arrival.receivedAt,
    ...(arrival.requestId ? { requestId: arrival.requestId } : {}),
    ...(arrival.webhookKey ? { webhookKey: arrival.webhookKey } : {}),
    ...(arrival.deadLetterId ? { deadLetterId: arrival.deadLetterId } : {}),
    payload: arrival.payload !== undefined,
  };
}

/**
 * Headers never kept with a payload or a dead letter: credentials and signatures. A kept delivery is
 * never verified again (it was when it arrived), so nothing is lost by dropping them, while keeping
 * them would let anyone who reads it forge deliveries: Clover's `X-Clover-Auth` is that POS's
 * static secret itself. Each POS's own signature header is dropped by name as well.
 */
const CREDENTIAL_HEADER = /auth|cookie|signature|hmac|token|secret|key|password|session/i;
/** What is kept of the rest: event type and ids are short; anything longer is not a header processing needs. */
const MAX_KEPT_HEADER_CHARS = 1024;

export function headersToKeep(headers: IncomingHttpHeaders | Record<string, string>, signatureHeader?: string): Record<string, string> {
  const signature = signatureHeader?.toLowerCase();
  return Object.fromEntries(
    Object.entries(headers).filter(([name, value]) => typeof value === 'string' && value.length <= MAX_KEPT_HEADER_CHARS && name !== signature && !CREDENTIAL_HEADER.test(name)),
  ) as Record<string, string>;
}

/** Bytes as stored text: as UTF-8 when that is byte-exact and storable everywhere (PostgreSQL's jsonb refuses NUL), else base64. */
export function storedBody(raw: Buffer): { body: string; bodyEncoding: 'utf8' | 'base64' } {
  const text = raw.toString('utf8');
  return Buffer.from(text, 'utf8').equals(raw) && !text.includes('\u0000') ? { body: text, bodyEncoding: 'utf8' } : { body: raw.toString('base64'), bodyEncoding: 'base64' };
}

/** The payload to keep with a record: undefined past PAYLOAD_KEPT_BYTES (the record's origin then says none was kept). */
export function keptPayload(pos: string, raw: Buffer, receivedAt: string, headers: IncomingHttpHeaders | Record<string, string> = {}, signatureHeader?: string): KeptPayload | undefined {
  if (raw.length > PAYLOAD_KEPT_BYTES) return undefined;
  return { receivedAt, pos, headers: headersToKeep(headers, signatureHeader), ...storedBody(raw) };
}
