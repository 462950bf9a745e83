#!/usr/bin/env node
/**
 * `npm start`, `npm run simulator`, `npm run migrate`, `npm run ledger:copy`, `npm run secrets:rotate`,
 * `npm run reconcile-report`, `npm run backfill`: `node scripts/start.mjs [dist/<entry>.js] [args…]`
 * (default entry: dist/src/main.js, the bridge). Plain JavaScript, so it runs without TypeScript.
 *
 * 1. dist/ is made current first (scripts/build.mjs: nothing is compiled when it already is, a build
 *    goes to a folder of its own and is renamed into place whole, two starts at once build once).
 *    Where TypeScript is not installed (the image), nothing is built: what is in dist/ runs.
 * 2. The entry runs as a child process with this one's stdio, and this process stands in for it:
 *    SIGTERM, SIGINT and SIGHUP are passed on, and it exits with the child's code (or is ended by
 *    the child's signal). npm's script runs it with `exec`, so npm's own forwarding of SIGTERM and
 *    SIGINT reaches it (sh does not pass signals on to its children).
 *
 * The child runs in a process group of its own, so that a Ctrl-C at a terminal reaches it once,
 * through this process: the terminal signals the whole foreground group, npm forwards the same
 * SIGINT again, and the bridge, which stops gracefully on its first SIGINT or SIGTERM and at once on
 * a second one, would otherwise be stopped at once. For the same reason a signal that repeats one
 * passed on less than a second earlier is dropped; a later one (a second Ctrl-C, to stop now) goes through.
 * The price: should this process be SIGKILLed, the child goes on running (as it would anyway).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { ensureBuilt, reportBuildError, ROOT, withInterrupts } from './build.mjs';

const FORWARDED = ['SIGTERM', 'SIGINT', 'SIGHUP'];
const REPEAT_MS = 1000;

const argv = process.argv.slice(2);
const entryArg = argv[0]?.endsWith('.js') ? argv.shift() : 'dist/src/main.js';
const entry = isAbsolute(entryArg) ? entryArg : resolve(ROOT, entryArg);

try {
  await withInterrupts((signal) => ensureBuilt({ signal }));
} catch (error) {
  process.exit(reportBuildError(error, 'start'));
}
if (!existsSync(entry)) {
  process.stderr.write(`start: ${entryArg} is not in ${join(ROOT, 'dist')}\n`);
  process.exit(1);
}

const child = spawn(process.execPath, [entry, ...argv], { stdio: 'inherit', detached: true });
const lastPassed = new Map();
const pass = (name) => {
  const now = Date.now();
  if (now - (lastPassed.get(name) ?? -Infinity) < REPEAT_MS) return;
  lastPassed.set(name, now);
  try {
    child.kill(name);
  } catch {
    // Already gone: its exit is on its way.
  }
};
for (const name of FORWARDED) process.on(name, pass);
child.once('error', (error) => {
  process.stderr.write(`start: could not run ${entryArg}: ${error.message}\n`);
  process.exit(1);
});
child.once('exit', (code, signalName) => {
  for (const name of FORWARDED) process.off(name, pass);
  if (signalName) {
    // Ended by a signal: end the same way, so that whoever started this sees what happened.
    process.kill(process.pid, signalName);
    setTimeout(() => process.exit(128 + (osConstants.signals[signalName] ?? 0)), 100);
    return;
  }
  process.exit(code ?? 1);
});
