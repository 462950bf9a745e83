/**
 * The journal's group commit: `durable()` resolves only once every line appended before the call
 * is on disk, including a line whose sync another caller started and which has not finished yet
 * (the caller would otherwise make its upstream call on a line a crash could take back). The
 * file sync is held by the test, so who waits for what is seen exactly: a caller that must be let
 * through is awaited itself once its sync is let finish (the test fails on jest's timeout if it never
 * is), and one that must still wait is seen still waiting while the sync it needs is held.
 */
import { fdatasync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { Journal } from '../../src/ledger/journal.js';

let dir: string;
let journal: Journal;
/** Syncs started and not yet let finish. */
let held: (() => void)[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'journal-'));
  held = [];
  journal = new Journal(dir, (fd, done) => held.push(() => fdatasync(fd, done)));
  journal.open([1]);
});
afterEach(async () => {
  for (const release of held.splice(0)) release();
  await journal.settle();
  journal.close();
  await rm(dir, { recursive: true, force: true });
});

const ticks = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** A promise's state without waiting for it. */
function track(p: Promise<void>): { done: boolean } {
  const state = { done: false };
  void p.then(() => (state.done = true));
  return state;
}

it('a caller arriving while a sync that covers its line is under way waits for that sync', async () => {
  journal.append({ k: 'r' }, '"first"');
  const firstDurable = journal.durable();
  const first = track(firstDurable);
  await ticks();
  expect(held).toHaveLength(1); // the sync has started: the line no longer waits for one
  const secondDurable = journal.durable();
  const second = track(secondDurable);
  await ticks();
  expect([first.done, second.done]).toEqual([false, false]);
  held.shift()!();
  // That one sync lets both through, and no other was started for the second caller.
  await Promise.all([firstDurable, secondDurable]);
  expect(held).toHaveLength(0);
});

it('callers arriving together share one sync; a line appended after it started gets the next one', async () => {
  journal.append({ k: 'r' }, '"a"');
  const together = [journal.durable(), journal.durable(), journal.durable()];
  await ticks();
  expect(held).toHaveLength(1);
  journal.append({ k: 'r' }, '"b"');
  const laterDurable = journal.durable();
  const later = track(laterDurable);
  await ticks();
  expect(held).toHaveLength(1); // the next sync waits for the one under way
  held.shift()!();
  await Promise.all(together);
  // The first sync covered "a" only: the caller of "b" still waits, on the sync that started for it.
  expect(later.done).toBe(false);
  expect(held).toHaveLength(1);
  held.shift()!();
  await laterDurable;
  expect(held).toHaveLength(0);
});

it('nothing appended since the last sync: durable() resolves without a new one', async () => {
  journal.append({ k: 'r' }, '"a"');
  const first = journal.durable();
  await ticks();
  held.shift()!();
  await first;
  await journal.durable();
  expect(held).toHaveLength(0);
});

it('a sync that fails: durable() rejects, the failure is remembered for readiness, and the next durable() syncs again', async () => {
  const syncs: ((error: NodeJS.ErrnoException | null) => void)[] = [];
  const failing = new Journal(join(dir, 'failing'), (_fd, done) => syncs.push(done));
  failing.open([1]);
  try {
    failing.append({ k: 'r' }, '"a"');
    const first = failing.durable();
    await ticks();
    syncs.shift()!(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await expect(first).rejects.toMatchObject({ code: 'EIO' });
    expect(failing.writeFailure?.error.code).toBe('EIO');
    // The line is not known to be on disk: no call may go out on it before a sync succeeds.
    const secondDurable = failing.durable();
    const second = track(secondDurable);
    await ticks();
    expect(syncs).toHaveLength(1);
    expect(second.done).toBe(false);
    syncs.shift()!(null);
    await secondDurable;
    expect(syncs).toHaveLength(0);
  } finally {
    await failing.settle();
    failing.close();
  }
});
