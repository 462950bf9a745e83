/**
 * `npm run model-check` as CI runs it (the built dist/scripts/model-check.js, a process of its own;
 * docs/correctness.md): the CI bounds of every scenario explored exhaustively with every invariant
 * holding, together going through every situation of issue 20's world; every named mutant caught
 * with a counterexample of its own mistake, printed one event a line; and the run failing when a
 * mutant is not caught. Needs `npm run build` first (npm test does it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { REQUIRED_COVERAGE } from '../../model-check/coverage.js';
import type { ExploreFigures, Violation } from '../../model-check/explorer.js';
import { scenarios } from '../../model-check/scenario.js';
import { MUTANTS } from '../../src/kernel/mutants.js';

interface ScenarioReport {
  depth: string;
  scenarios: { figures: ExploreFigures; violation?: Violation }[];
  missingCoverage: string[];
}

interface MutantsReport {
  mutants: { mutant: string; caught: boolean; scenario?: string; violation?: Violation }[];
}

const dir = mkdtempSync(join(tmpdir(), 'model-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The built script, with no mutant armed from outside; its exit code, stdout and the JSON report it wrote. */
function modelCheck<Report>(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string; report: Report }> {
  const reportFile = join(dir, `report-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'model-check.js'), ...args, '--report', reportFile], { env: { PATH: process.env.PATH!, NODE_ENV: 'test' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr, report: JSON.parse(readFileSync(reportFile, 'utf8')) as Report }));
  });
}

/** What each mutant's mistake does to the books or the ledger, as the invariant that catches it says it. */
const CAUGHT_BY: Record<(typeof MUTANTS)[number], RegExp> = {
  'no-accrual-keys': /waits for a person, though its rivals .* share an identifier with it/,
  'claim-ambiguous': /claims operation \d+ as its accrual, but it is the accrual of/,
  'count-fewer': /claims operation \d+ as its accrual, but it is the accrual of|booked no accrual of it/,
  'probe-claimed': /card holds \d+ points where the orders and refunds give \d+/,
  'reaccrue-same-id': /the loyalty service booked 2 accruals of/,
  'release-hold-early': /claims operation \d+ as its accrual, but it is the accrual of/,
  'resend-after-reset': /the loyalty service booked 2 accruals of/,
  'double-reverse': /the loyalty service booked 2 reversals of/,
  'keep-unproven': /waits for a person, though the reversal shape is known, the service booked the reversal/,
  'count-reversals-fewer': /the ledger says generic:O\d is reversed, but the loyalty service booked no reversal of it|claims operation \d+ as its reversal, but it is the reversal of/,
};

describe('npm run model-check', () => {
  it(
    'explores every CI scenario exhaustively, finds no violation, and together they go through every situation of the issue\'s world',
    async () => {
      const { status, stdout, stderr, report } = await modelCheck<ScenarioReport>([]);

      expect(stderr).toBe('');
      expect(status).toBe(0);
      expect(report.depth).toBe('ci');
      expect(report.scenarios.map((s) => s.figures.scenario)).toEqual(scenarios('ci').map((s) => s.name));
      for (const { figures, violation } of report.scenarios) {
        expect({ scenario: figures.scenario, violation: violation?.why }).toEqual({ scenario: figures.scenario, violation: undefined });
        expect({ scenario: figures.scenario, exhaustive: figures.exhaustive }).toEqual({ scenario: figures.scenario, exhaustive: true });
        expect(figures.states).toBeGreaterThan(1);
        expect(stdout).toContain(`explored exhaustively: ${figures.states} states, ${figures.transitions} transitions`);
      }
      expect(report.missingCoverage).toEqual([]);
      const covered = new Set(report.scenarios.flatMap((s) => s.figures.covered));
      expect(REQUIRED_COVERAGE.filter((situation) => !covered.has(situation))).toEqual([]);
      expect(stdout).toMatch(/every invariant holds: \d+ states, \d+ transitions in 10 scenarios, each explored exhaustively/);
    },
    // 121 s alone, 454 s beside the other suites on a fresh clone's CI (2 cores, 3 workers): the
    // timeout only guards against a hang, so it leaves room for a loaded machine.
    15 * 60_000,
  );

  it(
    'catches every mutant with a counterexample of its own mistake, printed one event a line with its length',
    async () => {
      const { status, stdout, report } = await modelCheck<MutantsReport>(['--mutants']);

      expect(status).toBe(0);
      expect(report.mutants.map((m) => m.mutant)).toEqual([...MUTANTS]);
      for (const outcome of report.mutants) {
        const violation = outcome.violation!;
        expect({ mutant: outcome.mutant, caught: outcome.caught }).toEqual({ mutant: outcome.mutant, caught: true });
        expect(violation.why).toMatch(CAUGHT_BY[outcome.mutant as keyof typeof CAUGHT_BY]);
        expect(violation.length).toBeGreaterThan(0);
        expect(violation.trace).toHaveLength(violation.length);
        // Printed: its length, then one numbered event a line, the first the POS's first delivery.
        const printed = stdout.slice(stdout.indexOf(`\n${outcome.mutant}, caught in ${outcome.scenario}:`));
        expect(printed).toMatch(new RegExp(`shortest counterexample: ${violation.length} events`));
        expect(printed).toContain(`   1. ${violation.trace[0]}`);
        expect(printed).toContain(`${String(violation.length).padStart(4)}. ${violation.trace.at(-1)}`);
        expect(violation.trace[0]).toMatch(/POS delivers checkout O1/);
      }
      expect(stdout).toContain(`${MUTANTS.length} of ${MUTANTS.length} mutants caught`);
    },
    4 * 60_000,
  );

  it('refuses a mutant it does not know, and --mutant without --mutants', async () => {
    for (const args of [['--mutants', '--mutant', 'no-such-mistake'], ['--mutant', 'double-reverse']]) {
      const run = spawnSync(process.execPath, [join(process.cwd(), 'dist', 'scripts', 'model-check.js'), ...args], { encoding: 'utf8', env: { PATH: process.env.PATH!, NODE_ENV: 'test' } });
      expect([run.status, run.stdout]).toEqual([2, '']);
      expect(run.stderr).toMatch(/^model-check: --mutant (must be one of|goes with --mutants)/);
    }
  });

  it(
    'fails when a mutant is not caught: double-reverse in a world without refunds',
    async () => {
      // That mutant alone (--mutant): the others would each explore the scenario again for nothing.
      const { status, stdout, report } = await modelCheck<MutantsReport>(['--mutants', '--mutant', 'double-reverse', '--scenario', 'same-customer-and-amount']);

      expect(status).toBe(1);
      expect(report.mutants).toEqual([expect.objectContaining({ mutant: 'double-reverse', caught: false })]);
      expect(stdout).toMatch(/0 of 1 mutants caught .*; NOT caught: double-reverse$/m);
    },
    4 * 60_000,
  );
});
