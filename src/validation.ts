/** zod at the edges: one helper turns a failed parse into the ValidationError that names each field. */
import type { z } from 'zod';
import { ValidationError, type FieldIssue } from './errors.js';

export function zodIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.'),
    message: issue.message,
  }));
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
