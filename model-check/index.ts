/**
 * `npm run model-check`: explores every scenario of the chosen bounds (scenario.ts) and reports
 * its figures, or the shortest counterexample found; with `mutants`, runs the search once per named
 * mistake (src/kernel/mutants.ts) and reports whether each was caught and how long its counterexample is.
 * docs/correctness.md explains the model, its bounds and what it does not cover.
 */
import { armMutant, MUTANTS, type MutantName } from '../src/kernel/mutants.js';
import { REQUIRED_COVERAGE } from './coverage.js';
import { explore, type ExploreFigures, type Violation } from './explorer.js';
import { scenarios, TIMING, type Scenario } from './scenario.js';

export interface ModelCheckOptions {
  depth: 'ci' | 'deep';
  /** Only the scenarios with these names (all when absent). */
  only?: string[];
  log: (line: string) => void;
}

export interface ScenarioOutcome {
  figures: ExploreFigures;
  violation?: Violation;
}

/** Explores each scenario; stops at the first violation. */
export async function checkModel(options: ModelCheckOptions): Promise<ScenarioOutcome[]> {
  const outcomes: ScenarioOutcome[] = [];
  for (const scenario of chosen(options)) {
    options.log(describeBounds(scenario));
    const result = await explore(scenario, { progress: (f) => options.log(`  … ${f.states} states, ${f.transitions} transitions, depth ${f.maxDepth}, ${(f.ms / 1000).toFixed(0)} s`) });
    options.log(describeFigures(result.figures));
    outcomes.push(result);
    if (result.violation) break;
  }
  return outcomes;
}

export interface MutantOutcome {
  mutant: MutantName;
  caught: boolean;
  scenario?: string;
  violation?: Violation;
  figures: ExploreFigures[];
}

/**
 * Scenarios tried first for each mutant: the one whose world holds the mistake's case. The others
 * follow only if it is not caught there, so the length printed is the shortest in the first scenario
 * that catches it.
 */
export const FIRST_SCENARIO: Record<MutantName, string> = {
  'no-accrual-keys': 'same-customer-and-amount',
  'claim-ambiguous': 'one-person-two-identifiers',
  'count-fewer': 'one-person-two-identifiers',
  'probe-claimed': 'probe',
  'reaccrue-same-id': 'probe',
  'release-hold-early': 'probe',
  'resend-after-reset': 'every-fate',
  'double-reverse': 'every-fate',
  'keep-unproven': 'reversals-in-doubt',
  'count-reversals-fewer': 'reversals-in-doubt',
};

export async function checkMutants(options: ModelCheckOptions & { mutants?: MutantName[] }): Promise<MutantOutcome[]> {
  const outcomes: MutantOutcome[] = [];
  for (const name of options.mutants ?? MUTANTS) {
    armMutant(name);
    try {
      const order = [...chosen(options)].sort((a, b) => Number(b.name === FIRST_SCENARIO[name]) - Number(a.name === FIRST_SCENARIO[name]));
      const outcome: MutantOutcome = { mutant: name, caught: false, figures: [] };
      for (const scenario of order) {
        const result = await explore(scenario);
        outcome.figures.push(result.figures);
        if (result.violation) {
          Object.assign(outcome, { caught: true, scenario: scenario.name, violation: result.violation });
          break;
        }
      }
      options.log(outcome.caught ? `mutant ${name}: caught in ${outcome.scenario}, shortest counterexample ${outcome.violation!.length} events${outcome.violation!.where === 'continuation' ? ` then ${outcome.violation!.continuation.length} of the fault-free continuation` : ''} (${outcome.violation!.kind}: ${outcome.violation!.why})` : `mutant ${name}: NOT caught`);
      outcomes.push(outcome);
    } finally {
      armMutant(undefined);
    }
  }
  return outcomes;
}

function chosen(options: Pick<ModelCheckOptions, 'depth' | 'only'>): Scenario[] {
  const all = scenarios(options.depth);
  if (!options.only) return all;
  const unknown = options.only.filter((name) => !all.some((s) => s.name === name));
  if (unknown.length) throw new Error(`no scenario ${unknown.join(', ')}; known: ${all.map((s) => s.name).join(', ')}`);
  return all.filter((s) => options.only!.includes(s.name));
}

export function describeBounds(scenario: Scenario): string {
  const orders = scenario.orders.map((o) => `${o.id} (${o.customer} by ${o.by}, ${(o.amountCents / 100).toFixed(2)}, delivered ≤ ${o.deliveries}×${o.register ? `, by the register's ACCRUE ≤ ${o.register}×` : ''})`).join(', ');
  const refunds = [
    scenario.fullRefund && `full refund of ${scenario.fullRefund.order} (${scenario.fullRefund.register ? "the register's REVERSE, " : ''}delivered ≤ ${scenario.fullRefund.deliveries}×)`,
    scenario.partialRefund && `partial refund of ${(scenario.partialRefund.cents / 100).toFixed(2)} of ${scenario.partialRefund.order} (≤ ${scenario.partialRefund.deliveries}×)`,
  ].filter(Boolean);
  return [
    `scenario ${scenario.name}: ${scenario.description}`,
    `  bounds: ${scenario.instances} instance(s) ${scenario.instances > 1 ? 'sharing the ledger' : 'owning the ledger'}; orders ${orders}; ${refunds.join(', ') || 'no refunds'}`,
    `          fates ${scenario.fates.join(', ')}${scenario.accrueFates ? ` (an accrue: ${scenario.accrueFates.join(', ')})` : ''}; ≤ ${scenario.crashes} crash(es); ≤ ${scenario.timeSteps} time steps; ≤ ${scenario.operatorActions} operator action(s)`,
    `          timing: retry unit ${TIMING.retryBaseMs / 1000} s, history check after ${TIMING.inDoubtVerifyAfterMs / 1000} s, grace ${TIMING.graceMs / 1000} s, clock skew ${TIMING.clockSkewMs / 1000} s, in-flight lease ${TIMING.inFlightLeaseMs / 1000} s, call timeout ${TIMING.loyaltyTimeoutMs / 1000} s`,
  ].join('\n');
}

export function describeFigures(f: ExploreFigures): string {
  return [
    `  ${f.exhaustive ? 'explored exhaustively' : 'explored until it stopped (NOT exhaustive)'}: ${f.states} states, ${f.transitions} transitions, depth ${f.maxDepth}, ${f.continuations} fault-free continuations (${f.continuationSteps} events, the longest ${f.longestContinuation}; ${f.continuationsRemembered} ended at a state shown to settle), ${(f.ms / 1000).toFixed(1)} s`,
    `  went through: ${f.covered.filter((c) => REQUIRED_COVERAGE.includes(c)).join('; ')}`,
  ].join('\n');
}

/** The situations of issue 20's world (REQUIRED_COVERAGE) that none of these runs went through. */
export function missingCoverage(figures: ExploreFigures[]): string[] {
  const covered = new Set(figures.flatMap((f) => f.covered));
  return REQUIRED_COVERAGE.filter((situation) => !covered.has(situation));
}

/**
 * A continuation's lines with runs of one repeated pair of events (a look every few seconds that
 * changes nothing: "time passes", "worker pass") folded into one line saying how often and until when.
 */
function folded(lines: string[]): string[] {
  const bare = (line: string) => line.replace(/^\[t\+\d+s\] /, '');
  const out: string[] = [];
  for (let i = 0; i < lines.length; ) {
    let repeats = 0;
    while (i + 2 * (repeats + 1) + 1 < lines.length && bare(lines[i + 2 * (repeats + 1)]!) === bare(lines[i]!) && bare(lines[i + 2 * (repeats + 1) + 1]!) === bare(lines[i + 1]!)) repeats++;
    if (repeats >= 2) {
      out.push(lines[i]!, lines[i + 1]!, `… the same two events ${repeats} more times, to ${lines[i + 2 * repeats + 1]!.match(/^\[(t\+\d+s)\]/)?.[1] ?? 'later'}`);
      i += 2 * (repeats + 1);
    } else out.push(lines[i++]!);
  }
  return out;
}

export function describeViolation(v: Violation): string {
  const where = v.where === 'continuation' ? ', on the fault-free continuation' : '';
  const after = v.where === 'continuation' ? `, then ${v.continuation.length} of the fault-free continuation` : '';
  const lines = [`VIOLATION (${v.kind}${where}): ${v.why}`, `shortest counterexample: ${v.length} events${after}`, ...v.trace.map((line, i) => `  ${String(i + 1).padStart(2)}. ${line}`)];
  if (v.continuation.length) lines.push('  then faults stop (the fault-free, fair continuation):', ...folded(v.continuation).map((line) => `      ${line}`));
  lines.push('  state:', ...v.summary.map((line) => `    ${line}`));
  return lines.join('\n');
}
