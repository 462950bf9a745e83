/**
 * The ledger lock between real processes: several bridges started at once on a ledger whose lock
 * is stale (a killed bridge's) must end with exactly one owner. Each contender is a node process
 * running the built lock (`dist/`, as the crash tests run the built bridge); all of them are
 * started, report ready, and are then told one instant at which to try.
 *
 * Then whose a lock is: a lock naming a pid reused by an unrelated process, or a zombie, is taken
 * over; a live bridge's is refused; without /proc a live pid holds it, as before. Linux: processes
 * are read from /proc.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { currentBootId, ProcessLock } from '../../src/ledger/process-lock.js';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { eventually } from '../support/eventually.js';

const BUILT_LOCK = join(process.cwd(), 'dist', 'src', 'ledger', 'process-lock.js');
const CONTENDERS = 8;
const ROUNDS = 10;

/**
 * Says `ready`, waits for the instant it is sent (epoch ms), tries the lock, says `held <takeover>`
 * or `refused <message>`, and then stays alive holding whatever it got until it is killed: a winner
 * that exited would leave a stale lock, and the others must see a live owner.
 */
const CONTENDER = `
import { ProcessLock } from ${JSON.stringify(pathToFileURL(BUILT_LOCK).href)};
const lock = new ProcessLock(process.argv[1]);
process.stdin.once('data', (data) => {
  setTimeout(async () => {
    try {
      const takeover = await lock.acquire();
      process.stdout.write('held ' + JSON.stringify(takeover) + '\\n');
    } catch (error) {
      process.stdout.write('refused ' + JSON.stringify(error.message) + '\\n');
    }
  }, Math.max(0, Number(data.toString()) - Date.now()));
});
setInterval(() => undefined, 60_000);
process.stdout.write('ready\\n');
`;

interface Contender {
  child: ChildProcess;
  lines: string[];
  /** What it wrote on stderr: the lock says a takeover there. */
  errors: () => string;
  exited: Promise<unknown>;
}

function startContender(lockPath: string): Contender {
  const child = spawn(process.execPath, ['--input-type=module', '-e', CONTENDER, lockPath], { stdio: ['pipe', 'pipe', 'pipe'] });
  let errors = '';
  child.stderr!.on('data', (d: Buffer) => (errors += d.toString()));
  const contender: Contender = { child, lines: [], errors: () => errors, exited: new Promise((resolve) => child.once('exit', resolve)) };
  let buffered = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    contender.lines.push(...lines);
  });
  return contender;
}

/**
 * Waits until every contender has said a line matching `pattern` and answers what each said; at 20 s
 * it fails, naming each contender that had not (its pid, what it said and its stderr).
 */
async function allSaid(contenders: Contender[], pattern: RegExp): Promise<string[][]> {
  const silent = () => contenders.filter((c) => !c.lines.some((l) => pattern.test(l))).map((c) => ({ pid: c.child.pid, said: [...c.lines], stderr: c.errors() }));
  await eventually(silent, (left) => left.length === 0, 20_000, { what: `${contenders.length} contenders to say ${pattern} (the value: those that had not)` });
  return contenders.map((c) => c.lines);
}

/** State (field 3) and start time in clock ticks since boot (field 22) of /proc/<pid>/stat, or undefined once it is gone. */
function procStat(pid: number): { state: string; started: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, started: fields[19]! };
  } catch {
    return undefined;
  }
}

/** Processes this test started and ends in afterAll, whatever its outcome. */
const helpers: ChildProcess[] = [];

/** Starts `command`, and answers it once it runs (its pid in /proc). */
async function startProcess(command: string, args: string[]): Promise<{ child: ChildProcess; pid: number; stdout: () => string }> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  helpers.push(child);
  let stdout = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  const pid = child.pid!;
  await eventually(() => procStat(pid), (stat) => stat !== undefined, 10_000, { what: `${command} (pid ${pid}) to run` });
  return { child, pid, stdout: () => stdout };
}

/** A lock file as the bridge writes it: pid, boot id and, where given, start time. */
const lockText = (pid: number, started?: string) => `${pid}\n${currentBootId()}\n${started === undefined ? '' : `${started}\n`}`;

let dir: string;
let running: Contender[] = [];

beforeAll(async () => {
  if (!existsSync(BUILT_LOCK)) throw new Error(`${BUILT_LOCK} is missing: run \`npm run build\` first (npm test does)`);
  dir = await mkdtemp(join(tmpdir(), 'process-lock-'));
});
afterAll(async () => {
  for (const c of running) c.child.kill('SIGKILL');
  await Promise.all(running.map((c) => c.exited));
  for (const child of helpers) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

describe('ProcessLock between processes', () => {
  it(`${CONTENDERS} processes taking over one stale lock at the same instant: exactly one wins, every round`, async () => {
    const lockPath = join(dir, 'ledger.json.lock');
    const outcomes: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // A bridge killed on this boot (its pid runs no more), or every other round one that ran when the
      // machine went down: the winner must know that, since the ledger's last writes may be lost.
      const earlierBoot = round % 2 === 1;
      await writeFile(lockPath, earlierBoot ? '1\nan-earlier-boot-id\n' : `999999999\n${currentBootId()}\n`);
      running = Array.from({ length: CONTENDERS }, () => startContender(lockPath));
      expect((await allSaid(running, /^ready$/)).every((lines) => lines.includes('ready'))).toBe(true);
      const at = String(Date.now() + 150);
      for (const c of running) c.child.stdin!.write(at);
      const said = await allSaid(running, /^(held|refused)/);
      const winners = running.filter((c) => c.lines.some((l) => l.startsWith('held')));
      outcomes.push(`${winners.length} held`);
      if (winners.length === 1) {
        const winner = winners[0]!.child.pid!;
        // It replaced the stale lock itself: no one started in a gap where no lock was.
        expect(JSON.parse(winners[0]!.lines.find((l) => l.startsWith('held'))!.slice('held '.length))).toEqual({
          stale: true,
          machineRestarted: earlierBoot,
          why: earlierBoot ? 'it was written on an earlier boot of this machine (by process 1)' : 'process 999999999 is gone',
        });
        // And said so where an operator reads it; the others said nothing of the kind.
        expect(winners[0]!.errors()).toContain(`taking over the lock ${lockPath}: `);
        expect(running.filter((c) => c.errors().includes('taking over'))).toHaveLength(1);
        // Every other one saw the winner alive in the lock, and the lock names the winner.
        expect(said.flat().filter((l) => l.startsWith('refused')).map((l) => JSON.parse(l.slice('refused '.length)) as string)).toEqual(
          Array.from({ length: CONTENDERS - 1 }, () => expect.stringMatching(new RegExp(`^the ledger is in use by process ${winner} `))),
        );
        expect((await readFile(lockPath, 'utf8')).split('\n')[0]).toBe(String(winner));
        // Nothing of the takeover is left beside the lock.
        expect(await readdir(dir)).toEqual(['ledger.json.lock']);
      }
      for (const c of running) c.child.kill('SIGKILL');
      await Promise.all(running.map((c) => c.exited));
      running = [];
    }
    // Every round, so that a failure shows how often two or more processes each believed they held the ledger.
    expect(outcomes).toEqual(Array.from({ length: ROUNDS }, () => '1 held'));
  }, 120_000);

  it('a takeover guard left by a taker killed mid-takeover is taken over too, and the stale lock under it', async () => {
    const lockPath = join(dir, 'guarded.lock');
    await writeFile(lockPath, '1\nan-earlier-boot-id\n');
    await writeFile(`${lockPath}.takeover`, `999999999\n${currentBootId()}\n`);
    const lock = new ProcessLock(lockPath, { log: () => undefined });
    expect(await lock.acquire()).toEqual({ stale: true, machineRestarted: true, why: 'it was written on an earlier boot of this machine (by process 1)' });
    expect((await readFile(lockPath, 'utf8')).split('\n')[0]).toBe(String(process.pid));
    expect((await readdir(dir)).filter((f) => f.startsWith('guarded'))).toEqual(['guarded.lock']);
    await lock.release();
  });

  it('a lock held by a live process is refused even when a stale guard lies beside it, and nothing of it changes', async () => {
    const owner = await startProcess(process.execPath, ['-e', 'setInterval(() => undefined, 60_000)']);
    const lockPath = join(dir, 'live.lock');
    const text = lockText(owner.pid, procStat(owner.pid)!.started);
    await writeFile(lockPath, text);
    await writeFile(`${lockPath}.takeover`, '');
    await expect(new ProcessLock(lockPath).acquire()).rejects.toThrow(new RegExp(`in use by process ${owner.pid} `));
    expect(await readFile(lockPath, 'utf8')).toBe(text);
  });
});

describe('whose a lock is: the process its pid names now, by start time', () => {
  /** A lock at a new path in the test's folder holding `text`, and what a takeover of it says. */
  async function lockHolding(name: string, text: string): Promise<{ lock: ProcessLock; path: string; said: string[] }> {
    const path = join(dir, name);
    await writeFile(path, text);
    const said: string[] = [];
    return { lock: new ProcessLock(path, { log: (line) => said.push(line) }), path, said };
  }

  it('writes its owner\'s pid, boot id and start time', async () => {
    const path = join(dir, 'own.lock');
    const lock = new ProcessLock(path);
    expect(await lock.acquire()).toEqual({ stale: false, machineRestarted: false });
    expect(await readFile(path, 'utf8')).toBe(lockText(process.pid, procStat(process.pid)!.started));
    await lock.release();
  });

  it('a lock naming a pid that now runs an unrelated `sleep` is taken over, with or without a start time, and the takeover is said', async () => {
    const sleeper = await startProcess('sleep', ['60']);
    const sleeperStarted = procStat(sleeper.pid)!.started;
    // A bridge that started before the sleep (this test's process did), killed, its pid since given to the sleep.
    const earlierStart = String(Number(sleeperStarted) - 1);
    const reused = await lockHolding('reused.lock', lockText(sleeper.pid, earlierStart));
    const why = `pid ${sleeper.pid} now names another process (started at tick ${sleeperStarted}, the lock's owner at ${earlierStart})`;
    expect(await reused.lock.acquire()).toEqual({ stale: true, machineRestarted: false, why });
    expect(reused.said).toEqual([`taking over the lock ${reused.path}: ${why}`]);
    expect((await readFile(reused.path, 'utf8')).split('\n')[0]).toBe(String(process.pid));
    await reused.lock.release();

    // A lock from before start times were recorded: a live pid that does not run node is not its owner.
    const old = await lockHolding('reused-old.lock', lockText(sleeper.pid));
    expect(await old.lock.acquire()).toEqual({ stale: true, machineRestarted: false, why: `pid ${sleeper.pid} now runs "sleep", not node (a lock without its owner's start time)` });
    await old.lock.release();
    // The sleep ran all along: the lock was judged by whose the pid is, not by whether it lives.
    expect(procStat(sleeper.pid)?.state).toMatch(/^[RS]$/);
  });

  it('a lock naming a zombie (a process that ended and was never reaped) is taken over, with or without a start time', async () => {
    // The shell starts `sleep 0` in the background, prints its pid and becomes `sleep 60`, which
    // never waits for its children: the ended `sleep 0` stays a zombie until `sleep 60` ends.
    const parent = await startProcess('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60']);
    const printed = await eventually(parent.stdout, (out) => /^\d+\n/.test(out), 10_000, { what: "the shell to print its background child's pid" });
    const zombie = Number(printed.trim());
    await eventually(() => procStat(zombie)?.state, (state) => state === 'Z', 10_000, { what: `process ${zombie} to be a zombie` });
    const why = `process ${zombie} has ended (a zombie its parent has not reaped)`;

    // Its own start time: only its being a zombie tells that it holds nothing.
    const withStart = await lockHolding('zombie.lock', lockText(zombie, procStat(zombie)!.started));
    expect(await withStart.lock.acquire()).toEqual({ stale: true, machineRestarted: false, why });
    expect(withStart.said).toEqual([`taking over the lock ${withStart.path}: ${why}`]);
    await withStart.lock.release();

    const withoutStart = await lockHolding('zombie-old.lock', lockText(zombie));
    expect(await withoutStart.lock.acquire()).toEqual({ stale: true, machineRestarted: false, why });
    await withoutStart.lock.release();
    // Still a zombie: kill(pid, 0) would have called it alive.
    expect(procStat(zombie)?.state).toBe('Z');
    expect(() => process.kill(zombie, 0)).not.toThrow();
  });

  it('a lock held by a live bridge is refused, and one from before start times naming a live node process is refused too', async () => {
    const ledger = join(dir, 'bridge', 'ledger.json');
    let bridge: BridgeProcess | undefined;
    try {
      bridge = await spawnBridge({ LEDGER_URL: `file:${ledger}` });
      const bridgePid = bridge.child.pid!;
      const lockPath = `${ledger}.lock`;
      const text = await readFile(lockPath, 'utf8');
      // The bridge wrote its own start time.
      expect(text).toBe(lockText(bridgePid, procStat(bridgePid)!.started));
      const said: string[] = [];
      await expect(new ProcessLock(lockPath, { log: (line) => said.push(line) }).acquire()).rejects.toThrow(
        `the ledger is in use by process ${bridgePid} (${lockPath}); a JSON-file ledger serves one process, use PostgreSQL for several`,
      );
      expect(said).toEqual([]);
      expect(await readFile(lockPath, 'utf8')).toBe(text);
      expect(await fetch(`${bridge.url}/healthz`).then((r) => r.status)).toBe(200);
    } finally {
      await bridge?.kill('SIGTERM');
    }

    const node = await startProcess(process.execPath, ['-e', 'setInterval(() => undefined, 60_000)']);
    const old = await lockHolding('node-old.lock', lockText(node.pid));
    await expect(old.lock.acquire()).rejects.toThrow(new RegExp(`in use by process ${node.pid} `));
    expect(old.said).toEqual([]);
  }, 60_000);

  it('a start told to wait for a live owner takes the lock once the owner lets go, and says it waited; one never let go is refused after the wait, unchanged', async () => {
    const owner = await startProcess(process.execPath, ['-e', 'setInterval(() => undefined, 60_000)']);
    const text = lockText(owner.pid, procStat(owner.pid)!.started);
    const path = join(dir, 'stopping.lock');
    await writeFile(path, text);
    const said: string[] = [];
    const taking = new ProcessLock(path, { log: (line) => said.push(line), waitForOwnerMs: 30_000 }).acquire();
    // The signal to let go: the waiting start has said it waits (the owner, a bridge finishing its work, then removes its lock).
    await eventually(() => said, (lines) => lines.length === 1, 10_000, { what: 'the start to say it waits for the owner' });
    expect(said).toEqual([`the ledger lock ${path} is held by process ${owner.pid}: waiting up to 30 s for it to finish stopping`]);
    expect(await readFile(path, 'utf8')).toBe(text);
    await rm(path);
    expect(await taking).toEqual({ stale: false, machineRestarted: false });
    expect((await readFile(path, 'utf8')).split('\n')[0]).toBe(String(process.pid));

    const held = join(dir, 'held.lock');
    await writeFile(held, text);
    const refusedSaid: string[] = [];
    await expect(new ProcessLock(held, { log: (line) => refusedSaid.push(line), waitForOwnerMs: 600 }).acquire()).rejects.toThrow(new RegExp(`in use by process ${owner.pid} `));
    expect(refusedSaid).toEqual([`the ledger lock ${held} is held by process ${owner.pid}: waiting up to 1 s for it to finish stopping`]);
    expect(await readFile(held, 'utf8')).toBe(text);
  });

  it('where /proc is not there (macOS), a live pid holds its lock as before and a gone one does not', async () => {
    const noProc = join(dir, 'no-proc');
    const sleeper = await startProcess('sleep', ['60']);
    const live = join(dir, 'no-proc-live.lock');
    await writeFile(live, `${sleeper.pid}\n`);
    await expect(new ProcessLock(live, { procRoot: noProc, bootId: () => undefined }).acquire()).rejects.toThrow(new RegExp(`in use by process ${sleeper.pid} `));

    const gone = join(dir, 'no-proc-gone.lock');
    await writeFile(gone, '999999999\n');
    const lock = new ProcessLock(gone, { procRoot: noProc, bootId: () => undefined, log: () => undefined });
    expect(await lock.acquire()).toEqual({ stale: true, machineRestarted: false, why: 'process 999999999 is gone' });
    // Without /proc the lock names the pid alone, as it did.
    expect(await readFile(gone, 'utf8')).toBe(String(process.pid));
    await lock.release();
  });
});
