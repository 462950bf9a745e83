/**
 * `npm run model-check [-- --deep] [-- --mutants [--mutant <name>]…] [-- --scenario <name>]… [-- --report <file>]`:
 * the exhaustive model check of the bridge's exactly-once promise (model-check/,
 * docs/correctness.md). Prints the bounds, then the states and transitions explored, the time taken
 * and the situations gone through, per scenario.
 *
 * Exit 0 when every scenario was explored exhaustively, every invariant holds and (all scenarios
 * run) together they went through every situation of issue 20's world; 1 otherwise, with the
 * shortest counterexample, one event a line, when an invariant does not hold.
 *
 * `--mutants` runs the search once per named mistake (src/kernel/mutants.ts; MODEL_CHECK_MUTANT=<name>
 * runs one as the plain check), prints each one's shortest counterexample and its length, and exits
 * 1 if any is not caught; `--mutant <name>` (repeatable) runs only those. `--deep`: larger bounds, run by hand. `--report <file>`: the figures,
 * violations and mutants' outcomes as JSON too (the model check's test reads it).
 */
import { writeFileSync } from 'node:fs';
import { armedMutant, MUTANTS, type MutantName } from '../src/kernel/mutants.js';
import { checkModel, checkMutants, describeViolation, missingCoverage } from '../model-check/index.js';

const USAGE = 'usage: npm run model-check [-- --deep] [-- --mutants [--mutant <name>]…] [-- --scenario <name>]… [-- --report <file>]';
const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const flags = new Set(['--deep', '--mutants']);
const valued = new Set(['--scenario', '--report', '--mutant']);
for (let i = 0; i < args.length; i++) {
  const arg = args[i]!;
  if (flags.has(arg)) continue;
  if (valued.has(arg) && args[i + 1] !== undefined && !args[i + 1]!.startsWith('--')) {
    i += 1;
    continue;
  }
  process.stderr.write(`model-check: ${valued.has(arg) ? `${arg} needs a value` : `unknown argument ${JSON.stringify(arg)}`}; ${USAGE}\n`);
  process.exit(2);
}
const valuesOf = (flag: string) => args.flatMap((a, i) => (args[i - 1] === flag ? [a] : []));
const depth = args.includes('--deep') ? 'deep' : 'ci';
const only = valuesOf('--scenario');
const reportFile = valuesOf('--report').at(-1);
const log = (line: string) => process.stdout.write(`${line}\n`);
const started = Date.now();
const seconds = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const report = (value: unknown) => reportFile && writeFileSync(reportFile, `${JSON.stringify(value, null, 2)}\n`);

const named = valuesOf('--mutant');
const unknownMutant = named.find((name) => !(MUTANTS as readonly string[]).includes(name));
if (unknownMutant !== undefined || (named.length && !args.includes('--mutants'))) {
  process.stderr.write(`model-check: ${unknownMutant !== undefined ? `--mutant must be one of ${MUTANTS.join(', ')}, got ${JSON.stringify(unknownMutant)}` : '--mutant goes with --mutants'}; ${USAGE}\n`);
  process.exit(2);
}

if (args.includes('--mutants')) {
  const mutants = named.length ? (named as MutantName[]) : [...MUTANTS];
  log(`model check of the mutants (${mutants.join(', ')}), ${depth} bounds`);
  const outcomes = await checkMutants({ depth, only: only.length ? only : undefined, mutants, log });
  for (const outcome of outcomes) if (outcome.violation) log(`\n${outcome.mutant}, caught in ${outcome.scenario}:\n${describeViolation(outcome.violation)}`);
  const missed = outcomes.filter((o) => !o.caught).map((o) => o.mutant);
  log(`\n${outcomes.length - missed.length} of ${outcomes.length} mutants caught in ${seconds()}${missed.length ? `; NOT caught: ${missed.join(', ')}` : ''}`);
  report({ depth, mutants: outcomes, ms: Date.now() - started });
  process.exit(missed.length ? 1 : 0);
}

const mutant: MutantName | undefined = armedMutant();
log(`model check, ${depth} bounds${mutant ? `, with mutant ${mutant} (MODEL_CHECK_MUTANT)` : ''}`);
const outcomes = await checkModel({ depth, only: only.length ? only : undefined, log });
const violation = outcomes.find((o) => o.violation)?.violation;
const unfinished = outcomes.filter((o) => !o.figures.exhaustive).map((o) => o.figures.scenario);
// The whole set must still reach every situation of issue 20's world: a bound trimmed too far fails here.
const missing = only.length ? [] : missingCoverage(outcomes.map((o) => o.figures));
const states = outcomes.reduce((sum, o) => sum + o.figures.states, 0);
const transitions = outcomes.reduce((sum, o) => sum + o.figures.transitions, 0);
report({ depth, scenarios: outcomes, missingCoverage: missing, ms: Date.now() - started });
if (violation) {
  log(`\n${describeViolation(violation)}`);
  process.exit(1);
}
if (unfinished.length) {
  log(`\nnot explored exhaustively: ${unfinished.join(', ')}`);
  process.exit(1);
}
log(`\nevery invariant holds: ${states} states, ${transitions} transitions in ${outcomes.length} scenarios, each explored exhaustively, ${seconds()}`);
if (missing.length) {
  log(`but no scenario went through: ${missing.join('; ')}`);
  process.exit(1);
}
process.exit(0);
