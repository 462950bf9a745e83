/**
 * The launcher that started this process: scripts/start.mjs, behind `npm start` and the other npm
 * commands that run a built entry. It gives the process an IPC channel and nothing else: the kernel
 * closes it when the launcher ends, even by SIGKILL, which no signal handler of the launcher's could
 * pass on. The process runs in a process group of its own (so that a Ctrl-C reaches it once:
 * scripts/start.mjs says why), so a SIGKILL of npm's group would otherwise leave it running (a
 * bridge answering and holding the ledger's lock, so that the next start is refused).
 */

/**
 * Resolves when the launcher has ended; undefined when no launcher started this process (`node
 * dist/src/main.js`, as the image runs it).
 */
export function launcherGone(): Promise<void> | undefined {
  if (!process.send) return undefined;
  if (!process.connected) return Promise.resolve();
  return new Promise((resolve) => process.once('disconnect', () => resolve()));
}
