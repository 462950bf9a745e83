/**
 * `npm run chaos [-- --orders 1000 --kills 2 --concurrency 8 --fault-rate 0.3 --seed 42 --customers 5 --prices 3 --ambiguity person|probe]`
 * Runs the chaos campaign (scripts/chaos-lib.ts) and prints its figures. Exit code 1 when any
 * double, loss, open record or balance mismatch remains: zero is the only acceptable figure.
 */
import { formatChaosReport, runChaos, type ChaosOptions } from './chaos-lib.js';

const USAGE = 'usage: npm run chaos [-- --orders 1000 --kills 2 --concurrency 8 --fault-rate 0.3 --seed 42 --customers 5 --prices 3 --ambiguity person|probe]';
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

/** A bad argument: one line and the usage, exit 2, as every command says it (scripts/cli.ts). */
function refuse(message: string): never {
  process.stderr.write(`chaos: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(value)) refuse(`--${name} must be a number, not ${JSON.stringify(process.argv[i + 1] ?? '')}`);
  return value;
}

function ambiguityFlag(): 'person' | 'probe' {
  const i = process.argv.indexOf('--ambiguity');
  const value = i >= 0 ? process.argv[i + 1] : 'person';
  if (value !== 'person' && value !== 'probe') refuse(`--ambiguity must be person or probe, not ${JSON.stringify(value ?? '')}`);
  return value;
}

const options: ChaosOptions = {
  orders: flag('orders', 1000),
  kills: flag('kills', 2),
  concurrency: flag('concurrency', 8),
  faultRate: flag('fault-rate', 0.3),
  seed: flag('seed', 42),
  customers: flag('customers', 5),
  prices: flag('prices', 3),
  ambiguity: ambiguityFlag(),
  log: (line) => process.stderr.write(`${line}\n`),
};

const report = await runChaos(options);
process.stdout.write(`${formatChaosReport(report, options)}\n`);
const clean = report.doubleAccruals.length + report.doubleReversals.length + report.lost.length + report.open.length + report.held.length + report.cardsMismatched + report.misAttributed.length === 0;
process.exit(clean ? 0 : 1);
