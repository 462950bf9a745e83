/**
 * Jest runs the TypeScript sources as ES modules through swc; `tsc` alone does type checking.
 *
 * Two projects, one run (`npm test` runs both):
 * - `unit`: the pure suites (the money module, the record's rules and transitions, the adapters'
 *   translations, the webhook and config checks, the architecture's import rules): no process, no
 *   server, no database, no browser. `npm run test:unit` runs only these, in about 11 s.
 * - `integration`: everything else (the bridge over HTTP, the simulator, PostgreSQL, Chromium, the
 *   built scripts).
 */
import { availableParallelism } from 'node:os';

const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // Its ESM build imports JSON without an import attribute, which jest's ESM loader warns about.
    '^libphonenumber-js$': '<rootDir>/node_modules/libphonenumber-js/index.cjs',
  },
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'es6' } }],
  },
};

/**
 * The unit suites, as path patterns. A suite in these folders that starts something of its own (a
 * bridge, a simulator, a server) is left out by a lookahead, and so runs with the integration suites.
 */
const UNIT = [
  '/test/(core|state|architecture|merchants|reconcile)/.*\\.test\\.ts$',
  '/test/adapters/(?!unsupported\\.test\\.ts$).*\\.test\\.ts$',
  '/test/webhooks/(?!ingest\\.test\\.ts$).*\\.test\\.ts$',
  '/test/console/format\\.test\\.ts$',
  '/test/(money|mask|constant-time|backoff|validation|json-body|config)\\.test\\.ts$',
];

export default {
  testTimeout: 30000,
  // One worker more than the cores, four at most. Most integration suites wait (on a bridge process,
  // the simulator, PostgreSQL, Chromium) rather than compute, so jest's default of cores − 1 left one
  // of two cores idle: the whole suite took 1,089 s of wall time with one worker, 535 s with three,
  // on this project's two-core machine (2026-12-03). Four at most keeps the workers' PostgreSQL
  // pools well inside the server's default 100 connections.
  maxWorkers: Math.min(4, availableParallelism() + 1),
  // The longest suites first, also on a fresh clone that has no cached durations (test/support/slow-first-sequencer.js).
  testSequencer: '<rootDir>/test/support/slow-first-sequencer.js',
  projects: [
    { ...base, displayName: 'unit', testRegex: UNIT },
    { ...base, displayName: 'integration', testMatch: ['<rootDir>/test/**/*.test.ts'], testPathIgnorePatterns: ['/node_modules/', ...UNIT] },
  ],
};
