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
 * A live pid is not enough to call a lock held: pids are reused, so a lock left by a killed bridge
 * can name an unrelated process started since (or a zombie, a process that ended and was not yet
 * reaped), and such a lock would block every start. So the lock also names its owner's start time
 * (field 22 of /proc/<pid>/stat, clock ticks since boot), and it is held only while a process with
 * that pid runs, is not a zombie and started at that time. A lock written before the start time was
 * recorded is held only while its pid runs a program whose command line is node's. Where /proc is
 * not there (macOS), a lock is held while its pid is alive, as before. A process hidden from this
 * one in /proc (hidepid) but alive is taken to hold it: the rule never takes a live owner's lock.
 * A lock taken over is said on stderr with why (`log`), and `LockTakeover.why` says it to the caller.
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
import { existsSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';
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
/** How often a start waiting for a stopping owner looks at the lock again. */
const OWNER_POLL_MS = 200;

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
  /** Why the lock taken over was stale, e.g. "process 123 is gone" (only when `stale`). */
  why?: string;
}

/** What a lock or guard file says. */
interface Owner {
  /** Undefined when the file holds no readable pid. */
  pid?: number;
  boot?: string;
  /** The owner's start time in clock ticks since boot; undefined in locks written without /proc or by earlier builds. */
  started?: string;
}

/** Whether the owner a file names holds it, and if not, why (said when it is taken over). */
type Judgment = { live: true } | { live: false; why: string };

type Claim = { held: true; replaced?: { owner: Owner; why: string } } | { held: false; owner: Owner };

export interface ProcessLockOptions {
  /** This boot's id (default: the kernel's). */
  bootId?: () => string | undefined;
  /** Where the processes are listed (default /proc; one that does not exist stands for a system without it). */
  procRoot?: string;
  /** Where a takeover is said (default: a line on stderr). */
  log?: (line: string) => void;
  /**
   * How long `acquire` waits for a live owner to let go before refusing (default 0: refuse at once).
   * A bridge told to stop finishes its in-flight work first (at most 15 s: main.ts), holding the lock
   * meanwhile, so a supervisor's restart right after a kill would otherwise find it held and fail.
   */
  waitForOwnerMs?: number;
}

/** The ledger is held by another live process: start-up says so in one line (open-store.ts `ledgerStartProblem`). */
export class LedgerLockedError extends Error {}

export class ProcessLock {
  #held = false;
  readonly #bootId: () => string | undefined;
  readonly #processes: ProcessTable;
  readonly #log: (line: string) => void;
  readonly #waitForOwnerMs: number;

  constructor(
    readonly path: string,
    options: ProcessLockOptions = {},
  ) {
    this.#bootId = options.bootId ?? currentBootId;
    this.#processes = new ProcessTable(options.procRoot ?? '/proc');
    this.#log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.#waitForOwnerMs = options.waitForOwnerMs ?? 0;
  }

  async acquire(): Promise<LockTakeover> {
    const candidate = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const boot = this.#bootId();
    const started = this.#processes.startTime(process.pid);
    // Created private (a new name, so the mode applies), like every file of the ledger (see private-files.ts).
    await writeFile(candidate, boot ? `${process.pid}\n${boot}\n${started ?? ''}\n` : String(process.pid), { mode: PRIVATE_FILE, flag: 'wx' });
    try {
      let claim = await this.#claim(this.path, candidate, boot, 0);
      const waitUntil = Date.now() + this.#waitForOwnerMs;
      if (!claim.held && this.#waitForOwnerMs > 0) this.#log(`the ledger lock ${this.path} is held by process ${claim.owner.pid}: waiting up to ${Math.round(this.#waitForOwnerMs / 1000)} s for it to finish stopping`);
      while (!claim.held && Date.now() < waitUntil) {
        await sleep(OWNER_POLL_MS);
        claim = await this.#claim(this.path, candidate, boot, 0);
      }
      if (!claim.held) throw new LedgerLockedError(`the ledger is in use by process ${claim.owner.pid} (${this.path}); a JSON-file ledger serves one process, use PostgreSQL for several`);
      this.#held = true;
      heldHere.add(this.path);
      const replaced = claim.replaced;
      if (!replaced) return { stale: false, machineRestarted: false };
      // Said, so that whoever finds the lock file renewed knows whose it was and why it was not theirs.
      this.#log(`taking over the lock ${this.path}: ${replaced.why}`);
      // A lock is linked into place whole, so one without a readable pid (empty, zero bytes) was cut
      // by an OS crash: its boot cannot be told, and the conservative answer is that it restarted.
      return { stale: true, machineRestarted: replaced.owner.pid === undefined || earlierBoot(replaced.owner, boot), why: replaced.why };
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
      if (this.#judge(found, path, boot).live) return { held: false, owner: found };
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
        const judgment = this.#judge(stale, path, boot);
        if (judgment.live) return { held: false, owner: stale };
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
        return { held: true, replaced: { owner: stale, why: judgment.why } };
      } finally {
        heldHere.delete(guardPath);
        await unlink(guardPath);
      }
    }
  }

  /**
   * Judged by boot first: pids start over with every boot, so a file from an earlier boot names a
   * pid that may well run again now (PID 1 always does) and is someone else's. Then by the process
   * the pid names now (see the file's comment).
   */
  #judge(owner: Owner, path: string, boot: string | undefined): Judgment {
    if (earlierBoot(owner, boot)) return { live: false, why: `it was written on an earlier boot of this machine (by process ${owner.pid ?? '?'})` };
    if (owner.pid === undefined) return { live: false, why: 'it names no process (an empty or cut file)' };
    if (owner.pid === process.pid) {
      return heldHere.has(path) ? { live: true } : { live: false, why: `it names this process's pid ${owner.pid}, but this process did not take it (an earlier process with the same pid did, as a restarted container's PID 1 does)` };
    }
    return this.#processes.judge(owner.pid, owner.started);
  }
}

/**
 * The processes of this machine as /proc shows them, or, where there is no /proc, as `kill(pid, 0)`
 * answers (alive or not, nothing more).
 */
class ProcessTable {
  constructor(private readonly root: string) {}

  /** The start time of process `pid`, or undefined without /proc. */
  startTime(pid: number): string | undefined {
    return this.#stat(pid)?.started;
  }

  /** Whether `pid` is the process that wrote a lock naming it (with its start time `started`, where the lock has one). */
  judge(pid: number, started: string | undefined): Judgment {
    if (!existsSync(`${this.root}/self/stat`)) {
      return isAlive(pid) ? { live: true } : { live: false, why: `process ${pid} is gone` };
    }
    const stat = this.#stat(pid);
    if (!stat) {
      // Alive but not listed: hidden from this process (/proc mounted with hidepid). Held, as before.
      return isAlive(pid) ? { live: true } : { live: false, why: `process ${pid} is gone` };
    }
    if (stat.state === 'Z' || stat.state === 'X') return { live: false, why: `process ${pid} has ended (a zombie its parent has not reaped)` };
    if (started !== undefined) {
      return stat.started === started ? { live: true } : { live: false, why: `pid ${pid} now names another process (started at tick ${stat.started}, the lock's owner at ${started})` };
    }
    // A lock from before start times were recorded: the owner was a node process (the bridge, or an operator command).
    const program = this.#program(pid);
    if (program === undefined) return { live: true };
    return /^node/.test(program) ? { live: true } : { live: false, why: `pid ${pid} now runs ${JSON.stringify(program.slice(0, 64))}, not node (a lock without its owner's start time)` };
  }

  /** State (field 3) and start time (field 22) of /proc/<pid>/stat; undefined where there is none. */
  #stat(pid: number): { state: string; started: string } | undefined {
    let text: string;
    try {
      text = readFileSync(`${this.root}/${pid}/stat`, 'utf8');
    } catch {
      return undefined;
    }
    // The command name (field 2, in parentheses) may hold spaces and parentheses: the fields after it are read from its last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const [state, started] = [fields[0], fields[19]];
    return state && started ? { state, started } : undefined;
  }

  /** The file name of the program `pid` runs (argv[0]), '' for a process without one, undefined where it cannot be read. */
  #program(pid: number): string | undefined {
    try {
      return basename(readFileSync(`${this.root}/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '');
    } catch {
      return undefined;
    }
  }
}

/** What the file at `path` says, or undefined when there is none. Older locks hold the pid alone, or the pid and boot. */
async function readOwner(path: string): Promise<Owner | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const [pidLine = '', boot = '', started = ''] = text.split('\n').map((l) => l.trim());
  return { pid: /^[1-9]\d*$/.test(pidLine) ? Number(pidLine) : undefined, boot: boot || undefined, started: /^\d+$/.test(started) ? started : undefined };
}

function earlierBoot(owner: Owner, boot: string | undefined): boolean {
  return Boolean(boot && owner.boot && owner.boot !== boot);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
