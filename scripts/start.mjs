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
 * Ctrl-C. The child runs in a process group of its own, so that a Ctrl-C at a terminal reaches it
 * once, through this process: the terminal signals the whole foreground group, npm forwards the same
 * SIGINT again, and the bridge, which stops gracefully on its first SIGINT or SIGTERM and at once on
 * a second one, would otherwise be stopped at once. For the same reason a signal that repeats one
 * passed on less than a second earlier is dropped. So: a first Ctrl-C stops the bridge gracefully (no
 * new requests, in-flight work finished, the ledger's lock released); a second one, a second or more
 * later, goes through and stops it at once (its lock is then taken over at the next start).
 *
 * Nothing outlives the launcher. In a group of its own the child is not reached by a SIGKILL of npm's
 * process group (`kill -KILL -<pgid>`, or `timeout -s KILL … npm start`, which signals its group),
 * and a bridge left running would answer and hold the ledger's lock, so that a supervisor's next
 * start is refused (docs/development.md, "Building and starting"). So the child's link to this
 * process is watched from both ends:
 * - the child gets an IPC channel to this process, which the kernel closes when this process ends,
 *   however (SIGKILL included); the bridge (src/main.ts) stops gracefully when it closes, as on SIGTERM.
 *   Entries that do not listen for it (the operator commands, the simulator) are not held by it.
 * - this process watches its own parent (npm): when npm is gone (SIGKILLed alone, say), this
 *   process is its orphan, and it stops the child as a SIGTERM would, then exits with its code.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { ensureBuilt, reportBuildError, ROOT, withInterrupts } from './build.mjs';

const FORWARDED = ['SIGTERM', 'SIGINT', 'SIGHUP'];
const REPEAT_MS = 1000;
/** How often this process looks whether its parent is still there. */
const PARENT_POLL_MS = 250;

/** The process that started this one: npm, a shell, a supervisor. */
const startedBy = process.ppid;

/**
 * Whether the process that started this one has ended. Linux: this process's parent now (field 4 of
 * /proc/self/stat; an orphan is handed to init or a subreaper at once, even while its old parent
 * is an unreaped zombie). Elsewhere: whether that pid still answers (Node 20's process.ppid is read
 * once, at start).
 */
function parentGone() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== startedBy;
  } catch {
    try {
      process.kill(startedBy, 0);
      return false;
    } catch (error) {
      return error.code !== 'EPERM';
    }
  }
}

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
if (startedBy > 1 && parentGone()) {
  // Its parent ended during the build: nothing is there to stop what would be started.
  process.stderr.write(`start: process ${startedBy}, which started this one, is gone; ${entryArg} is not started\n`);
  process.exit(1);
}

const child = spawn(process.execPath, [entry, ...argv], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], detached: true });
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
// Pid 1 (or 0: this process is PID 1 of a container) is never gone while this process runs.
const watchParent =
  startedBy > 1
    ? setInterval(() => {
        if (!parentGone()) return;
        clearInterval(watchParent);
        process.stderr.write(`start: process ${startedBy}, which started this one, is gone; stopping ${entryArg} as SIGTERM does\n`);
        pass('SIGTERM');
      }, PARENT_POLL_MS)
    : undefined;
child.once('error', (error) => {
  process.stderr.write(`start: could not run ${entryArg}: ${error.message}\n`);
  process.exit(1);
});
child.once('exit', (code, signalName) => {
  for (const name of FORWARDED) process.off(name, pass);
  clearInterval(watchParent);
  if (signalName) {
    // Ended by a signal: end the same way, so that whoever started this sees what happened.
    process.kill(process.pid, signalName);
    setTimeout(() => process.exit(128 + (osConstants.signals[signalName] ?? 0)), 100);
    return;
  }
  process.exit(code ?? 1);
});
