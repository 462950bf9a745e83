/**
 * Group commit (src/ledger/pg-batch.ts): a write alone goes out at once and alone; writes that come
 * while one is out go together, in order, each answered with its own outcome; a batch that fails as
 * a whole is made again write by write, each answered alone.
 */
import { describe, expect, it } from '@jest/globals';
import { WriteBatch } from '../../src/ledger/pg-batch.js';

/** A fake database: statements wait until the test lets them answer. */
function fakeDatabase(options: { failMany?: boolean } = {}) {
  const sent: string[][] = [];
  const pending: (() => void)[] = [];
  const answer = () => pending.shift()!();
  const batch = new WriteBatch<string, string>(
    async (items) => {
      sent.push(items);
      await new Promise<void>((resolve) => pending.push(resolve));
      if (options.failMany) throw new Error('deadlock detected');
      return items.map((i) => `done ${i}`);
    },
    async (item) => {
      sent.push([item]);
      await new Promise<void>((resolve) => pending.push(resolve));
      if (item === 'bad') throw new Error(`refused ${item}`);
      return `alone ${item}`;
    },
  );
  return { batch, sent, answer, pending };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('WriteBatch', () => {
  it('sends a write alone at once; those that come meanwhile go together, in order, each with its own outcome', async () => {
    const { batch, sent, answer } = fakeDatabase();
    const a = batch.add('a');
    await tick();
    expect(sent).toEqual([['a']]);
    const rest = ['b', 'c', 'd'].map((x) => batch.add(x));
    await tick();
    // Still out: the others wait for it, and nothing else is sent.
    expect(sent).toEqual([['a']]);
    answer();
    expect(await a).toBe('alone a');
    await tick();
    expect(sent).toEqual([['a'], ['b', 'c', 'd']]);
    answer();
    expect(await Promise.all(rest)).toEqual(['done b', 'done c', 'done d']);
    expect(batch.stats).toEqual({ batches: 1, batched: 3, alone: 1 });
  });

  it('a batch that fails as a whole is made again write by write, each answered alone', async () => {
    const { batch, sent, answer, pending } = fakeDatabase({ failMany: true });
    const first = batch.add('first');
    await tick();
    const [good, bad] = [batch.add('good'), batch.add('bad')];
    answer();
    await first;
    await tick();
    expect(sent.at(-1)).toEqual(['good', 'bad']);
    answer();
    // The batch failed: each is sent alone.
    for (let i = 0; i < 10 && pending.length < 2; i++) await tick();
    expect(sent.slice(-2)).toEqual([['good'], ['bad']]);
    answer();
    answer();
    expect(await good).toBe('alone good');
    await expect(bad).rejects.toThrow('refused bad');
  });
});
