/**
 * The ledger lock between real processes: several bridges started at once on a ledger whose lock
 * is stale (a killed bridge's) must end with exactly one owner. Each contender is a node process
 * running the built lock (`dist/`, as the crash tests run the built bridge); all of them are
 * started, report ready, and are then told one instant at which to try.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { currentBootId, ProcessLock } from '../../src/ledger/process-lock.js';

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
  exited: Promise<unknown>;
}

function startContender(lockPath: string): Contender {
  const child = spawn(process.execPath, ['--input-type=module', '-e', CONTENDER, lockPath], { stdio: ['pipe', 'pipe', 'inherit'] });
  const contender: Contender = { child, lines: [], exited: new Promise((resolve) => child.once('exit', resolve)) };
  let buffered = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    contender.lines.push(...lines);
  });
  return contender;
}

/** Polls until every contender has said a line matching `pattern`, or 20 s have passed; answers what each said. */
async function allSaid(contenders: Contender[], pattern: RegExp): Promise<string[][]> {
  const deadline = Date.now() + 20_000;
  while (!contenders.every((c) => c.lines.some((l) => pattern.test(l))) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return contenders.map((c) => c.lines);
}

let dir: string;
let running: Contender[] = [];

beforeAll(async () => {
  if (!existsSync(BUILT_LOCK)) throw new Error(`${BUILT_LOCK} is missing: run \`npm run build\` first (npm test does)`);
  dir = await mkdtemp(join(tmpdir(), 'process-lock-'));
});
afterAll(async () => {
  for (const c of running) c.child.kill('SIGKILL');
  await Promise.all(running.map((c) => c.exited));
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
        expect(JSON.parse(winners[0]!.lines.find((l) => l.startsWith('held'))!.slice('held '.length))).toEqual({ stale: true, machineRestarted: earlierBoot });
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
    const lock = new ProcessLock(lockPath);
    expect(await lock.acquire()).toEqual({ stale: true, machineRestarted: true });
    expect((await readFile(lockPath, 'utf8')).split('\n')[0]).toBe(String(process.pid));
    expect((await readdir(dir)).filter((f) => f.startsWith('guarded'))).toEqual(['guarded.lock']);
    await lock.release();
  });

  it('a lock held by a live process is refused even when a stale guard lies beside it, and nothing of it changes', async () => {
    const lockPath = join(dir, 'live.lock');
    await writeFile(lockPath, `1\n${currentBootId()}\n`);
    await writeFile(`${lockPath}.takeover`, '');
    await expect(new ProcessLock(lockPath).acquire()).rejects.toThrow(/in use by process 1 /);
    expect(await readFile(lockPath, 'utf8')).toBe(`1\n${currentBootId()}\n`);
  });
});
