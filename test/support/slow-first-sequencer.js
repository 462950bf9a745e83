/**
 * Jest's order of suites, with the longest first. Jest orders by the durations it cached on an
 * earlier run, and a fresh clone (CI) has none: it falls back to file size, which put the model
 * check (the longest suite by far, a few minutes of CPU) wherever its small file landed, and a
 * suite that starts late ends the whole run late. These are the suites that took longest on this
 * project's 2-core machine (docs/development.md); they start first, longest first, and the rest
 * follow in jest's own order, filling the workers as they free up.
 */
import Sequencer from '@jest/test-sequencer';

const BaseSequencer = Sequencer.default ?? Sequencer;

/** Longest first, as measured (2026-12-03, jest --json, three workers on two cores). */
export const SLOW_FIRST = [
  'test/model-check/model-check.test.ts',
  'test/e2e/backfill-crash.test.ts',
  'test/e2e/fairness.test.ts',
  'test/e2e/crash.test.ts',
  'test/e2e/backfill.test.ts',
  'test/console/console.test.ts',
  'test/build/start.test.ts',
  'test/console/decisions.test.ts',
  'test/ledger/pg-store.test.ts',
  'test/build/launcher-parent-death.test.ts',
];

export default class SlowFirstSequencer extends BaseSequencer {
  sort(tests) {
    const ordered = super.sort(tests);
    const rank = (test) => SLOW_FIRST.findIndex((suffix) => test.path.endsWith(suffix));
    const slow = ordered.filter((t) => rank(t) >= 0).sort((a, b) => rank(a) - rank(b));
    return [...slow, ...ordered.filter((t) => rank(t) < 0)];
  }
}
