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
