/**
 * A lock file naming the process that owns a JSON-file ledger. A lock whose process is gone
 * (SIGKILL, power loss) is stale and taken over, so a crash never blocks a restart.
 *
 * The lock appears with its pid already in it (written to a temporary file, then hard-linked into
 * place, which fails when a lock exists), so no one ever reads a lock that is still being written.
 * A lock naming this very pid that this process does not hold is stale too: in a container the
 * bridge is PID 1 on every start, so a killed one leaves a lock naming the pid of its successor.
 */
import { link, readFile, unlink, writeFile } from 'node:fs/promises';

const heldHere = new Set<string>();

export class ProcessLock {
  #held = false;

  constructor(readonly path: string) {}

  async acquire(): Promise<void> {
    const candidate = `${this.path}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(candidate, String(process.pid));
    try {
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          await link(candidate, this.path);
          this.#held = true;
          heldHere.add(this.path);
          return;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        const owner = Number((await readFile(this.path, 'utf8').catch(() => '')).trim());
        const live = owner === process.pid ? heldHere.has(this.path) : Number.isInteger(owner) && owner > 0 && isAlive(owner);
        if (live) throw new Error(`the ledger is in use by process ${owner} (${this.path}); a JSON-file ledger serves one process, use PostgreSQL for several`);
        await unlink(this.path).catch(() => undefined);
      }
      throw new Error(`could not take the ledger lock ${this.path}`);
    } finally {
      await unlink(candidate).catch(() => undefined);
    }
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
    heldHere.delete(this.path);
    await unlink(this.path).catch(() => undefined);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
