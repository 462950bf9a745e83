/**
 * A lock file naming the process that owns a JSON-file ledger. Created exclusively; a lock whose
 * process is gone (SIGKILL, power loss) is stale and taken over, so a crash never blocks a restart.
 */
import { open, readFile, unlink } from 'node:fs/promises';

export class ProcessLock {
  #held = false;

  constructor(readonly path: string) {}

  async acquire(): Promise<void> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const handle = await open(this.path, 'wx');
        await handle.writeFile(String(process.pid));
        await handle.close();
        this.#held = true;
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const owner = Number((await readFile(this.path, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
        throw new Error(`the ledger is in use by process ${owner} (${this.path}); a JSON-file ledger serves one process, use PostgreSQL for several`);
      }
      await unlink(this.path).catch(() => undefined);
    }
    throw new Error(`could not take the ledger lock ${this.path}`);
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
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
