/** The issues of the ValidationError `run` throws; fails the test when it throws nothing or something else. */
import type { FieldIssue } from '../../src/kernel/errors.js';
import { ValidationError } from '../../src/kernel/errors.js';

export function validationIssues(run: () => unknown): FieldIssue[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ValidationError) return error.issues;
    throw error;
  }
  throw new Error('expected a ValidationError');
}
