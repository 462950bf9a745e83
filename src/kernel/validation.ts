/**
 * zod at the edges: one helper turns a failed parse into the ValidationError that names each field,
 * in words a POS developer reads ("is required", "must be a string, got a number", "unknown field
 * \"x\""), never the validator's own text ("Invalid input: expected string, received undefined").
 */
import type { z } from 'zod';
import { ValidationError, type FieldIssue } from './errors.js';

/**
 * What a ValidationError lists, at most. A hostile body can fail on every one of thousands of
 * fields, and a strict object names every unrecognized key in one message: an 869 KB body of
 * unknown keys came back as a 1.9 MB error (security review, issue 9). The first issues name the
 * problem; the rest are counted.
 */
export const MAX_LISTED_ISSUES = 20;
/** Characters of one issue's field path or message. */
export const MAX_ISSUE_TEXT = 200;
/** Unrecognized keys named in one issue's message before the rest are counted. */
const MAX_KEYS_NAMED = 5;
const MAX_KEY_TEXT = 40;

export function zodIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  const issues: FieldIssue[] = error.issues.slice(0, MAX_LISTED_ISSUES).map((issue) => ({
    field: bounded([prefix, ...issue.path.map(String)].filter(Boolean).join('.')),
    message: bounded(issue.code === 'unrecognized_keys' ? unrecognizedKeys(issue.keys) : isMissing(issue) ? required(issue.message) : issue.message),
  }));
  const rest = error.issues.length - MAX_LISTED_ISSUES;
  if (rest > 0) issues.push({ field: '', message: `and ${rest} more issue${rest === 1 ? '' : 's'} not listed` });
  return issues;
}

/**
 * `inWords` is zod's error map for this parse: zod asks it only for the issues whose schema states no
 * message of its own (a schema's `error`, a check's or a refinement's message outrank it), and only
 * it still sees the input, which tells a missing field from a wrong one. `reportInput` keeps the
 * input on the issues for `zodIssues` to tell the same where a schema's own message won; the
 * ZodError never leaves this module, so no input is echoed.
 */
export function parseWith<T extends z.ZodType>(schema: T, input: unknown, prefix = ''): z.infer<T> {
  const result = schema.safeParse(input, { error: inWords, reportInput: true });
  if (!result.success) throw new ValidationError(zodIssues(result.error, prefix));
  return result.data;
}

/** What an issue zod raised means, said of the field (the field's path comes before it). */
export function inWords(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      if (typeof issue.input === 'number' && Number.isNaN(issue.input)) return `must be ${kindOf(issue.expected)}`;
      return `must be ${kindOf(issue.expected)}, got ${describeValue(issue.input, issue.expected)}`;
    case 'too_small':
      return tooSmall(issue.origin, issue.minimum, issue.inclusive !== false, issue.exact === true);
    case 'too_big':
      return tooBig(issue.origin, issue.maximum, issue.inclusive !== false, issue.exact === true);
    case 'invalid_value':
      return oneOf(issue.values);
    case 'invalid_format':
      return formatInWords(issue);
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    case 'unrecognized_keys':
      return unrecognizedKeys(issue.keys);
    case 'invalid_union':
      return unionInWords(issue);
    case 'invalid_key':
      return 'has a key that is not allowed';
    case 'invalid_element':
      return 'holds a value that is not allowed';
    case 'custom':
      return 'is not valid';
  }
}

/** A JSON object as parsed: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Runs a money conversion inside a zod transform so its ValidationError lands on the field's path. */
export function issueFrom(error: unknown): string {
  if (error instanceof ValidationError) return error.issues.map((i) => i.message).join('; ');
  throw error;
}

function bounded(text: string): string {
  return text.length > MAX_ISSUE_TEXT ? `${text.slice(0, MAX_ISSUE_TEXT - 1)}…` : text;
}

/** zod's own message quotes every key; this names a few, each cut short, and counts the rest. */
function unrecognizedKeys(keys: readonly string[]): string {
  const named = keys.slice(0, MAX_KEYS_NAMED).map((k) => JSON.stringify(k.length > MAX_KEY_TEXT ? `${k.slice(0, MAX_KEY_TEXT)}…` : k));
  const rest = keys.length - named.length;
  return `unknown field${keys.length === 1 ? '' : 's'} ${named.join(', ')}${rest > 0 ? ` and ${rest} more` : ''}`;
}

/**
 * A field that is absent where a value is required. A schema's own message (e.g. "must be an ISO
 * 4217 code") won over `inWords` for it, but "is required" says what happened; the schema's words
 * still tell what to send.
 */
function isMissing(issue: z.core.$ZodIssue): boolean {
  return (issue.code === 'invalid_type' || issue.code === 'invalid_union') && 'input' in issue && issue.input === undefined;
}

function required(message: string): string {
  if (message.startsWith('is required')) return message;
  const what = /^must be (.+)$/s.exec(message)?.[1];
  return what ? `is required: ${what}` : 'is required';
}

const KINDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  bigint: 'a whole number',
  boolean: 'true or false',
  null: 'null',
  array: 'an array',
  tuple: 'an array',
  object: 'an object',
  record: 'an object',
  map: 'an object',
  date: 'a date',
  undefined: 'absent',
  void: 'absent',
  never: 'absent',
};

function kindOf(expected: string): string {
  return KINDS[expected] ?? `a ${expected}`;
}

/**
 * The type of what was sent, never a string's text (it may be a phone number or an email). A
 * number is shown where a whole one was wanted: "got 1.5" says why 1.5 is not one.
 */
function describeValue(input: unknown, expected?: string): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'an array';
  switch (typeof input) {
    case 'string':
      return 'a string';
    case 'number':
      return expected === 'int' && Number.isFinite(input) ? String(input) : 'a number';
    case 'boolean':
      return String(input);
    case 'object':
      return 'an object';
    default:
      return `a ${typeof input}`;
  }
}

/** Allowed values as a sender writes them: strings quoted, numbers and true/false bare. */
function oneOf(values: readonly unknown[]): string {
  const shown = values.map((v) => (typeof v === 'string' ? JSON.stringify(v) : String(v)));
  return shown.length === 1 ? `must be ${shown[0]}` : `must be one of ${shown.join(', ')}`;
}

function count(n: number | bigint, one: string, many: string): string {
  return `${n} ${n === 1 || n === 1n ? one : many}`;
}

function tooSmall(origin: string, minimum: number | bigint, inclusive: boolean, exact: boolean): string {
  switch (origin) {
    case 'string':
      if (exact) return `must be exactly ${count(minimum, 'character', 'characters')}`;
      return Number(minimum) === 1 && inclusive ? 'must not be empty' : `must be at least ${count(minimum, 'character', 'characters')}`;
    case 'array':
    case 'set':
      if (exact) return `must have exactly ${count(minimum, 'item', 'items')}`;
      return Number(minimum) === 1 && inclusive ? 'must have at least one item' : `must have at least ${count(minimum, 'item', 'items')}`;
    case 'date':
      return `must be ${inclusive ? 'on or after' : 'after'} ${new Date(Number(minimum)).toISOString()}`;
    default:
      return `must be ${inclusive ? 'at least' : 'greater than'} ${minimum}`;
  }
}

function tooBig(origin: string, maximum: number | bigint, inclusive: boolean, exact: boolean): string {
  switch (origin) {
    case 'string':
      return `must be ${exact ? 'exactly' : 'at most'} ${count(maximum, 'character', 'characters')}`;
    case 'array':
    case 'set':
      return `must have ${exact ? 'exactly' : 'at most'} ${count(maximum, 'item', 'items')}`;
    case 'date':
      return `must be ${inclusive ? 'on or before' : 'before'} ${new Date(Number(maximum)).toISOString()}`;
    default:
      return `must be ${inclusive ? 'at most' : 'less than'} ${maximum}`;
  }
}

const FORMATS: Record<string, string> = {
  datetime: 'an ISO 8601 date-time such as 2026-11-21T10:20:00Z',
  date: 'a date such as 2026-11-21',
  time: 'a time such as 10:20:00',
  duration: 'an ISO 8601 duration such as PT5M',
  email: 'an email address',
  url: 'a URL',
  uuid: 'a UUID',
  guid: 'a GUID',
  e164: 'a phone number in E.164 form such as +15550001111',
  base64: 'base64 text',
  base64url: 'base64url text',
};

function formatInWords(issue: Extract<z.core.$ZodRawIssue, { code: 'invalid_format' }>): string {
  switch (issue.format) {
    case 'regex':
      return `must match the pattern ${issue.pattern}`;
    case 'starts_with':
      return `must start with ${JSON.stringify(issue.prefix)}`;
    case 'ends_with':
      return `must end with ${JSON.stringify(issue.suffix)}`;
    case 'includes':
      return `must contain ${JSON.stringify(issue.includes)}`;
    default:
      return `must be ${FORMATS[issue.format] ?? `a valid ${issue.format}`}`;
  }
}

/**
 * A union none of whose forms matched. Where each form is a plain type ("a string or a number"),
 * they are named; a tagged union whose tag matched none names the tags it knows.
 */
function unionInWords(issue: Extract<z.core.$ZodRawIssue, { code: 'invalid_union' }>): string {
  if (issue.input === undefined) return 'is required';
  if (issue.inclusive === false) return 'matches more than one of the accepted forms';
  if (issue.options?.length) return oneOf(issue.options);
  const kinds = issue.errors.map((errors) => (errors.length === 1 && errors[0]!.code === 'invalid_type' && errors[0]!.path.length === 0 ? errors[0]!.expected : undefined));
  if (kinds.length > 0 && kinds.every((k) => k !== undefined)) return `must be ${[...new Set(kinds.map(kindOf))].join(' or ')}, got ${describeValue(issue.input)}`;
  return 'does not match any of the accepted forms';
}
