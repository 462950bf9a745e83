/**
 * Every command answers `--help` with its usage on stdout and exit 0, doing nothing else (the chaos
 * campaign used to start a 1,000-order run; backfill and model-check called it an unknown argument).
 * The built scripts, as `npm run <name> -- --help` runs them. Needs `npm run build` first.
 */
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from '@jest/globals';

const COMMANDS: [script: string, usage: RegExp][] = [
  ['migrate', /^usage: npm run migrate /],
  ['ledger-copy', /^usage: npm run ledger:copy /],
  ['ledger-archive', /^usage: npm run ledger:archive /],
  ['secrets-rotate', /^usage: SECRETS_KEY=<current key> npm run secrets:rotate /],
  ['reconcile-report', /^usage: npm run reconcile-report /],
  ['backfill', /^usage: npm run backfill /],
  ['simulator', /^usage: npm run simulator /],
  ['chaos', /^usage: npm run chaos /],
  ['model-check', /^usage: npm run model-check /],
];

it.each(COMMANDS)('%s --help prints its usage and exits 0', (script, usage) => {
  const run = spawnSync(process.execPath, [join(process.cwd(), 'dist', 'scripts', `${script}.js`), '--help'], { cwd: tmpdir(), env: { PATH: process.env.PATH!, HOME: tmpdir() }, encoding: 'utf8', timeout: 20_000 });
  expect([run.status, run.stderr]).toEqual([0, '']);
  expect(run.stdout).toMatch(usage);
  expect(run.stdout.trimEnd().split('\n')).toHaveLength(1);
});

/** The benchmark, as `npm run bench -- …` runs it after its build. */
function bench(...args: string[]) {
  return spawnSync(process.execPath, [join(process.cwd(), 'dist', 'bench', 'index.js'), ...args], { cwd: tmpdir(), env: { PATH: process.env.PATH!, HOME: tmpdir() }, encoding: 'utf8', timeout: 20_000 });
}

it('bench --help prints every option with its variable and exits 0, running no part', () => {
  const run = bench('--help');
  expect([run.status, run.stderr]).toEqual([0, '']);
  expect(run.stdout).toMatch(/^usage: npm run bench -- /);
  for (const line of ['--requests=N       BENCH_REQUESTS', '--only=http|ledger|pg|merchants|backfill|register|scale|fleet', '--fleet-instances=L BENCH_FLEET_INSTANCES', '--scale-10m']) expect(run.stdout).toContain(line);
  expect(run.stdout).not.toContain('loyalty-bridge benchmark');
});

it.each([
  [['--onlyy=http'], 'bench: unknown argument "--onlyy=http" (npm run bench -- --help lists the options)'],
  [['--only=nope'], 'bench: --only must be one of http, ledger, pg, merchants, backfill, register, scale, fleet (npm run bench -- --help lists the options)'],
  [['--rate=fast'], 'bench: --rate / BENCH_RATE must be an integer ≥ 1, got "fast" (npm run bench -- --help lists the options)'],
  [['--fleet-instances=1,9'], 'bench: --fleet-instances / BENCH_FLEET_INSTANCES: "9" is not an instance count from 1 to 8 (npm run bench -- --help lists the options)'],
])('bench %j is refused in one line with exit 2, before any part runs', (args, line) => {
  const run = bench(...args);
  expect([run.status, run.stderr, run.stdout]).toEqual([2, `${line}\n`, '']);
});
