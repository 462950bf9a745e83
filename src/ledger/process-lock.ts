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
 *
 * Taking over a stale lock is atomic. Judging a lock stale and then removing it by name is not: two
 * bridges starting at once both judge the same stale lock, one replaces it with its own, and the
 * other then removes that fresh lock, believing it still the stale one; both own the ledger. So a
 * stale lock is replaced only by a process holding the takeover guard `<lock>.takeover`, itself
 * taken exactly like the lock (linked into place whole, naming its pid and boot), and only after
 * judging the lock again while holding it. While the guard is held, the lock cannot change under
 * its holder: other takers need the guard, the lock's owner is gone (judged so), and a new lock
 * cannot be linked while one exists. The holder then renames its own lock over the stale one: the
 * lock is never absent, so no process starting meanwhile can slip into a gap (and miss that the lock
 * it would have found was left on an earlier boot). A guard left by a taker killed mid-takeover is
 * itself stale and taken over the same way, through `<lock>.takeover.takeover`.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { PRIVATE_FILE } from './private-files.js';

/** Lock and guard files this process holds or is linking into place right now. */
const heldHere = new Set<string>();

/** Guards over guards, each needed only when a taker was killed while holding the one below: a chain this deep is not a crash. */
const MAX_GUARD_DEPTH = 3;
/** A live taker holds its guard for a few file operations; waiting this long for one means it hangs. */
const GUARD_WAIT_MS = 10_000;
const GUARD_POLL_MS = 5;

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

/** What a lock or guard file says. */
interface Owner {
  /** Undefined when the file holds no readable pid. */
  pid?: number;
  boot?: string;
}

type Claim = { held: true; replaced?: Owner } | { held: false; owner: Owner };

export class ProcessLock {
  #held = false;

  constructor(
    readonly path: string,
    private readonly bootId: () => string | undefined = currentBootId,
  ) {}

  async acquire(): Promise<LockTakeover> {
    const candidate = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const boot = this.bootId();
    // Created private (a new name, so the mode applies), like every file of the ledger (see private-files.ts).
    await writeFile(candidate, boot ? `${process.pid}\n${boot}\n` : String(process.pid), { mode: PRIVATE_FILE, flag: 'wx' });
    try {
      const claim = await this.#claim(this.path, candidate, boot, 0);
      if (!claim.held) throw new Error(`the ledger is in use by process ${claim.owner.pid} (${this.path}); a JSON-file ledger serves one process, use PostgreSQL for several`);
      this.#held = true;
      heldHere.add(this.path);
      const replaced = claim.replaced;
      if (!replaced) return { stale: false, machineRestarted: false };
      // A lock is linked into place whole, so one without a readable pid (empty, zero bytes) was cut
      // by an OS crash: its boot cannot be told, and the conservative answer is that it restarted.
      return { stale: true, machineRestarted: replaced.pid === undefined || earlierBoot(replaced, boot) };
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

  /**
   * Puts `candidate`'s contents at `path` unless a live process holds it: linked when `path` is
   * free, renamed over a stale file under the guard `<path>.takeover` (see the file's comment).
   * Answers the stale owner replaced, or the live owner found.
   */
  async #claim(path: string, candidate: string, boot: string | undefined, depth: number): Promise<Claim> {
    const guardPath = `${path}.takeover`;
    const waitUntil = Date.now() + GUARD_WAIT_MS;
    for (;;) {
      // Marked before linking: a second opener in this process reading our pid must find it held.
      const ours = !heldHere.has(path);
      heldHere.add(path);
      try {
        await link(candidate, path);
        return { held: true };
      } catch (error) {
        if (ours) heldHere.delete(path);
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const found = await readOwner(path);
      if (!found) continue; // released meanwhile: link again
      if (isLive(found, path, boot)) return { held: false, owner: found };
      if (depth >= MAX_GUARD_DEPTH) throw new Error(`could not take the ledger lock ${this.path}: ${guardPath} is stale too; remove the *.takeover files once no bridge runs on this ledger`);
      const guard = await this.#claim(guardPath, candidate, boot, depth + 1);
      if (!guard.held) {
        // Another live process is taking the stale file over: its own appears in a moment.
        if (Date.now() > waitUntil) throw new Error(`could not take the ledger lock ${this.path}: process ${guard.owner.pid} has held ${guardPath} for ${GUARD_WAIT_MS} ms`);
        await sleep(GUARD_POLL_MS);
        continue;
      }
      try {
        // Judged again under the guard: what is read now is what the rename replaces (see above).
        const stale = await readOwner(path);
        if (!stale) continue;
        if (isLive(stale, path, boot)) return { held: false, owner: stale };
        const replacement = `${candidate}.${depth}`;
        await link(candidate, replacement);
        heldHere.add(path);
        try {
          await rename(replacement, path);
        } catch (error) {
          heldHere.delete(path);
          await unlink(replacement).catch(() => undefined);
          throw error;
        }
        return { held: true, replaced: stale };
      } finally {
        heldHere.delete(guardPath);
        await unlink(guardPath);
      }
    }
  }
}

/** What the file at `path` says, or undefined when there is none. Older locks hold the pid alone. */
async function readOwner(path: string): Promise<Owner | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const [pidLine = '', boot = ''] = text.split('\n').map((l) => l.trim());
  return { pid: /^[1-9]\d*$/.test(pidLine) ? Number(pidLine) : undefined, boot: boot || undefined };
}

function earlierBoot(owner: Owner, boot: string | undefined): boolean {
  return Boolean(boot && owner.boot && owner.boot !== boot);
}

/**
 * Judged by boot first: pids start over with every boot, so a file from an earlier boot names a
 * pid that may well run again now (PID 1 always does) and is someone else's.
 */
function isLive(owner: Owner, path: string, boot: string | undefined): boolean {
  if (earlierBoot(owner, boot) || owner.pid === undefined) return false;
  return owner.pid === process.pid ? heldHere.has(path) : isAlive(owner.pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
