/**
 * The suites the sequencer starts first (test/support/slow-first-sequencer.js) exist: a renamed or
 * deleted suite left in the list would quietly stop being started early.
 */
import { existsSync } from 'node:fs';
import { expect, it } from '@jest/globals';
import { SLOW_FIRST } from '../support/slow-first-sequencer.js';

it('every suite the sequencer starts first is a test file of this project', () => {
  expect(SLOW_FIRST.filter((path) => !existsSync(path))).toEqual([]);
  expect(new Set(SLOW_FIRST).size).toBe(SLOW_FIRST.length);
});
