/**
 * The bridge's one error family. Code throws these; `src/http/error-handler.ts` is the only place
 * that turns them into HTTP answers, and it hides the message of anything that is not one of them.
 */
export interface FieldIssue {
  /** Dotted path of the offending field, e.g. `items.0.quantity`; empty for the body itself. */
  field: string;
  message: string;
}

export class BridgeError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** 400: the payload is not valid; `issues` names each field and why. */
export class ValidationError extends BridgeError {
  readonly issues: FieldIssue[];

  /**
   * Each issue's field and message are cut at MAX_ISSUE_CHARS (`boundedIssue`), whoever raised it.
   * `code`: invalid_payload, or a narrower one where a client acts on it (invalid_cursor).
   */
  constructor(issues: FieldIssue[], message?: string, code = 'invalid_payload') {
    const bounded = issues.map(boundedIssue);
    super(message ?? describeIssues(bounded), 400, code, { issues: bounded });
    this.issues = bounded;
  }

  static field(field: string, message: string): ValidationError {
    return new ValidationError([{ field, message }]);
  }
}

/** 401: a webhook signature, the admin bearer token or the POS token is missing or wrong (indistinguishably). */
export class UnauthorizedError extends BridgeError {
  constructor(
    message = 'missing or invalid credentials',
    /** Which check failed, for logs and metrics (never in the answer): signature_missing, signature_mismatch, not_configured, … */
    readonly reason?: string,
  ) {
    super(message, 401, 'unauthorized');
  }
}

/** 404: unknown route, unknown `{pos}`, unknown record, or an order the loyalty service does not know. */
export class NotFoundError extends BridgeError {
  constructor(message: string, code = 'not_found') {
    super(message, 404, code);
  }
}

/** 409: the request conflicts with what the ledger holds (e.g. an operator action on the wrong state). */
export class ConflictError extends BridgeError {
  constructor(message: string, details?: Record<string, unknown>) {
    super(message, 409, 'conflict', details);
  }
}

/** 503: the ledger cannot be reached right now (the request's work stopped where it met that). */
export class LedgerUnreachableError extends BridgeError {
  constructor() {
    super('the ledger cannot be reached right now (its database connection failed): try again in a moment; what was recorded before stays recorded', 503, 'ledger_unavailable');
  }
}

export class PayloadTooLargeError extends BridgeError {
  constructor(limitBytes: number) {
    super(`request body is larger than ${limitBytes} bytes`, 413, 'payload_too_large', { limitBytes });
  }
}

/** 415: a body that is not JSON (POS bodies and admin bodies alike); the message names the type expected. */
export class UnsupportedMediaTypeError extends BridgeError {
  constructor(contentType: string | undefined) {
    super(`content-type must be application/json, got ${contentType ? JSON.stringify(echoed(contentType)) : 'none'}`, 415, 'unsupported_media_type');
  }
}

/** A store-level compare-and-set lost a race: another writer changed the record first. */
export class VersionConflictError extends BridgeError {
  constructor(transactionId: string, expected: number, actual: number | undefined) {
    super(`ledger record ${transactionId} changed concurrently (expected version ${expected}, found ${actual ?? 'none'})`, 409, 'version_conflict');
  }
}

/**
 * A store refused to let a record hold an accrual key another record holds (`accrualKeys`): an
 * accrual of the same customer and amount is unsettled there. Not an error to show anyone: the
 * service makes the record wait behind `holder`.
 */
export class AccrualKeyHeldError extends BridgeError {
  constructor(
    readonly transactionId: string,
    readonly holder: string,
  ) {
    super(`ledger record ${transactionId} cannot go out while ${holder}, an accrual of the same customer and amount, is unsettled`, 409, 'accrual_key_held');
  }
}

/**
 * 409: the order was recorded once, and its record has since been archived with its month
 * (`npm run ledger:archive`): the ledger still knows the id, so nothing is sent again, but it can
 * no longer show or change the record.
 */
export class ArchivedRecordError extends BridgeError {
  constructor(readonly transactionId: string) {
    super(`ledger record ${transactionId} was archived with the month it was created in: it was recorded once and nothing is sent again`, 409, 'archived');
  }
}

/** 503: the bridge cannot take the request now (ledger unreachable, shutting down). */
export class UnavailableError extends BridgeError {
  constructor(message: string) {
    super(message, 503, 'unavailable');
  }
}

/**
 * 503 with Retry-After: the bridge is too busy to answer this POS request within 2 s, so it was
 * refused before its body was read. Nothing was recorded: sending it again is safe.
 */
export class OverloadedError extends BridgeError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    reason: string,
  ) {
    super(message, 503, 'overloaded', { reason, retryAfterSeconds });
  }
}

/**
 * Characters of the client's own input an error message repeats (an id, a header), at most: a
 * 15,000-character id came back as a 15 KB 404 (docs/security.md, "Hostile input"). Enough to
 * recognise what was sent.
 */
export const MAX_ECHO = 200;

/**
 * `text` as an error message repeats it: cut at `max` characters, marked with … when it was. A cut
 * never leaves half of a surrogate pair behind (PostgreSQL refuses a lone surrogate wherever the
 * message is kept, e.g. a dead letter's reason).
 */
export function echoed(text: string, max = MAX_ECHO): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 2)) ? max - 2 : max - 1;
  return `${text.slice(0, end)}…`;
}

/**
 * The longest field or message of one issue a refusal repeats. What raises it cuts its echo of the
 * input (an id, a currency, a status) at MAX_ECHO; this bounds whatever else it says, so no answer,
 * dead letter or attention item repeats a hostile body whole (docs/security.md: a 12 KB header came
 * back in the answer and the attention queue).
 */
const MAX_ISSUE_CHARS = 600;

function boundedIssue(issue: FieldIssue): FieldIssue {
  if (issue.field.length <= MAX_ISSUE_CHARS && issue.message.length <= MAX_ISSUE_CHARS) return issue;
  return { ...issue, field: echoed(issue.field, MAX_ISSUE_CHARS), message: echoed(issue.message, MAX_ISSUE_CHARS) };
}

export function describeIssues(issues: FieldIssue[]): string {
  return issues.map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join('; ');
}
