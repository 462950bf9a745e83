/**
 * A lock file naming the process that owns a JSON-file ledger, and the machine boot it runs in. A
 * lock whose process is gone (SIGKILL, power loss) is stale and taken over, so a crash never blocks
 * a restart.
 *
 * The lock appears with its contents already in it (written to a temporary file, then hard-linked
 * into place, which fails when a lock exists), so no one ever reads a lock that is still being
 * written. A lock naming this very pid that this process does not hold is stale too: in a container
 * the bridge is PID 1 on every start, so a killed one leaves a lock naming the pid of its successor.
 *
 * The boot id (Linux: /proc/sys/kernel/random/boot_id, the host's, also inside containers) says
 * whether the machine restarted since the lock was written: then the lock is stale whatever its pid
 * (pids start over at boot), and the ledger's last writes may never have reached the disk (the
 * journal does not fsync every line), which a process kill alone cannot cause.
 */
import { readFileSync } from 'node:fs';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';

const heldHere = new Set<string>();

/** This boot's id, or undefined where the system does not tell. */
export function currentBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

export interface LockTakeover {
  /** A lock left by a process that did not stop cleanly was taken over. */
  stale: boolean;
  /** That lock was written on an earlier boot of this machine (both boot ids known and different). */
  machineRestarted: boolean;
}

export class ProcessLock {
  #held = false;

  constructor(
    readonly path: string,
    private readonly bootId: () => string | undefined = currentBootId,
  ) {}

  async acquire(): Promise<LockTakeover> {
    const candidate = `${this.path}.${process.pid}.${Date.now()}.tmp`;
    const boot = this.bootId();
    await writeFile(candidate, boot ? `${process.pid}\n${boot}\n` : String(process.pid));
    let takeover: LockTakeover = { stale: false, machineRestarted: false };
    try {
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          await link(candidate, this.path);
          this.#held = true;
          heldHere.add(this.path);
          return takeover;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        // Older locks hold the pid alone.
        const [pidLine = '', lockBoot = ''] = (await readFile(this.path, 'utf8').catch(() => '')).split('\n').map((l) => l.trim());
        const owner = Number(pidLine);
        const readable = /^[1-9]\d*$/.test(pidLine);
        // Judged before liveness: pids start over with every boot, so a lock from an earlier boot
        // names a pid that may well run again now (PID 1 always does) and is someone else's.
        const earlierBoot = Boolean(boot && lockBoot && lockBoot !== boot);
        const live = !earlierBoot && (owner === process.pid ? heldHere.has(this.path) : readable && isAlive(owner));
        if (live) throw new Error(`the ledger is in use by process ${owner} (${this.path}); a JSON-file ledger serves one process, use PostgreSQL for several`);
        // A lock is linked into place whole, so one without a readable pid (empty, zero bytes) was cut
        // by an OS crash: its boot cannot be told, and the conservative answer is that it restarted.
        takeover = { stale: true, machineRestarted: !readable || earlierBoot };
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
