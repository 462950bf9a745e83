/** zod at the edges: one helper turns a failed parse into the ValidationError that names each field. */
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
    message: bounded(issue.code === 'unrecognized_keys' ? unrecognizedKeys(issue.keys) : issue.message),
  }));
  const rest = error.issues.length - MAX_LISTED_ISSUES;
  if (rest > 0) issues.push({ field: '', message: `and ${rest} more issue${rest === 1 ? '' : 's'} not listed` });
  return issues;
}

export function parseWith<T extends z.ZodType>(schema: T, input: unknown, prefix = ''): z.infer<T> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ValidationError(zodIssues(result.error, prefix));
  return result.data;
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
  return `Unrecognized key${keys.length === 1 ? '' : 's'}: ${named.join(', ')}${rest > 0 ? ` and ${rest} more` : ''}`;
}
