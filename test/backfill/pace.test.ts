/**
 * How backfill shares the process with checkouts (src/backfill/pace.ts): it works at most its share
 * of the time, resting in proportion to what it worked, counting its own steps only; and at most
 * `maxPasses` passes run at once, the next waiting for a slot.
 */
import { describe, expect, it } from '@jest/globals';
import { Pace } from '../../src/backfill/pace.js';

/** A clock the test moves, and a sleep that moves it and notes each rest. */
function fakeTime() {
  let nowMs = 0;
  const rests: number[] = [];
  return {
    now: () => nowMs,
    advance: (ms: number) => (nowMs += ms),
    sleep: async (ms: number) => {
      rests.push(ms);
      nowMs += ms;
    },
    rests,
  };
}

describe('backfill pace', () => {
  it('rests three times what it worked at a quarter share, and never for a short step alone', async () => {
    const time = fakeTime();
    const pace = new Pace({ share: 0.25, restFromMs: 2, now: time.now, sleep: time.sleep });
    await pace.run(async (work) => {
      time.advance(1); // a short step: a turn of the event loop, no rest
      await work.rest();
      expect(time.rests).toEqual([]);
      time.advance(1.5); // 2.5 ms worked since the last rest
      await work.rest();
      expect(time.rests).toEqual([7.5]);
      time.advance(4);
      await work.rest();
      expect(time.rests).toEqual([7.5, 12]);
      expect(work.rested).toBe(19.5);
    });
  });

  it('counts the time of its steps only, not what ran between them', async () => {
    const time = fakeTime();
    const pace = new Pace({ share: 0.5, restFromMs: 2, now: time.now, sleep: time.sleep });
    await pace.run(async (work) => {
      time.advance(1);
      // What runs during the turn it gives (checkouts) is not its work.
      const resting = work.rest();
      time.advance(50);
      await resting;
      time.advance(0.5);
      await work.rest();
      expect(time.rests).toEqual([]);
      time.advance(0.5);
      await work.rest();
      expect(time.rests).toEqual([2]);
    });
  });

  it('does not count a wait before a step begins (a slow POS page) as work', async () => {
    const time = fakeTime();
    const pace = new Pace({ share: 0.25, restFromMs: 2, now: time.now, sleep: time.sleep });
    await pace.run(async (work) => {
      time.advance(6000); // the POS's next page took 6 s to come
      work.begin();
      time.advance(1);
      await work.rest();
      expect(time.rests).toEqual([]);
      time.advance(6000);
      work.begin();
      time.advance(2);
      await work.rest();
      // 3 ms worked since the last rest, never the 12 s of waiting: 9 ms of rest at a quarter share.
      expect(time.rests).toEqual([9]);
    });
  });

  it('runs at most maxPasses at once; the next starts when one ends, in the order they came', async () => {
    const pace = new Pace({ maxPasses: 2 });
    const started: string[] = [];
    const release = new Map<string, () => void>();
    const pass = (name: string) =>
      pace.run(async () => {
        started.push(name);
        await new Promise<void>((resolve) => release.set(name, resolve));
        return name;
      });
    const a = pass('a');
    const b = pass('b');
    const c = pass('c');
    const d = pass('d');
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a', 'b']);
    expect(pace.load).toEqual({ running: 2, waiting: 2 });
    release.get('b')!();
    expect(await b).toBe('b');
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a', 'b', 'c']);
    expect(pace.load).toEqual({ running: 2, waiting: 1 });
    release.get('a')!();
    release.get('c')!();
    await Promise.all([a, c]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    release.get('d')!();
    expect(await d).toBe('d');
    expect(pace.load).toEqual({ running: 0, waiting: 0 });
  });

  it('passes running at once share one budget: two of them work a quarter of the time together, not each', async () => {
    const time = fakeTime();
    const pace = new Pace({ share: 0.25, restFromMs: 2, now: time.now, sleep: time.sleep });
    await Promise.all([
      pace.run(async (work) => {
        time.advance(1.5);
        await work.rest();
      }),
      pace.run(async (work) => {
        time.advance(1);
        await work.rest();
      }),
    ]);
    // 1.5 ms and 1 ms of steps: 2.5 ms together, rested three times over by the pass that crossed 2 ms.
    expect(time.rests).toEqual([7.5]);
  });

  it('refuses a share outside (0, 1]', () => {
    expect(() => new Pace({ share: 0 })).toThrow(/share/);
    expect(() => new Pace({ share: 1.5 })).toThrow(/share/);
  });
});
