/**
 * The register's card reads (src/core/register.ts `CardReads`): one request per question at a time,
 * a short-lived cache per merchant, forgotten for a card the bridge changed, bounded; failures and
 * "nobody found" never kept.
 */
import { describe, expect, it } from '@jest/globals';
import { CardReads, type RegisterMerchant } from '../../src/core/register.js';
import { RegisterReadError, type RegisterCard } from '../../src/loyalty/client.js';

const card = (serialNumber: string, points = 0): RegisterCard => ({ serialNumber, pointsBalance: points, balance: { bonusBalance: points }, customer: {} });

/** A merchant whose reads answer what `answers` says, counting them; `gate` holds every read until released. */
function merchant(id: string, answers: (query: string) => RegisterCard[] | Error) {
  const calls: string[] = [];
  let release: () => void = () => {};
  let gate: Promise<void> | undefined;
  const m: RegisterMerchant = {
    id,
    status: 'active',
    context: { defaultCurrency: 'USD', defaultPhoneRegion: 'US' },
    pos: {},
    client: {
      canVerify: true,
      async registerCards(query) {
        const key = query.phone ?? query.email!;
        calls.push(key);
        await gate;
        const answer = answers(key);
        if (answer instanceof Error) throw answer;
        return answer;
      },
      async registerCard(serial) {
        calls.push(`card:${serial}`);
        await gate;
        const answer = answers(serial);
        if (answer instanceof Error) throw answer;
        return answer[0];
      },
    },
  };
  return {
    m,
    calls,
    hold() {
      gate = new Promise((resolve) => (release = resolve));
    },
    release: () => release(),
  };
}

const reads = (now: { ms: number }, entries = 100) => new CardReads({ budgetMs: 100, cacheMs: 1000, cacheEntries: entries, now: () => now.ms });

describe('CardReads', () => {
  it('asks once for cashiers asking together, and answers from the cache until it is stale', async () => {
    const now = { ms: 0 };
    const r = reads(now);
    const a = merchant('m-a', () => [card('11-1')]);
    a.hold();
    const both = Promise.all([r.cards(a.m, { phone: '+15550001111' }), r.cards(a.m, { phone: '+15550001111' })]);
    a.release();
    expect(await both).toEqual([[card('11-1')], [card('11-1')]]);
    expect(a.calls).toEqual(['+15550001111']);
    now.ms = 999;
    await r.cards(a.m, { phone: '+15550001111' });
    expect(a.calls).toHaveLength(1);
    now.ms = 1000;
    await r.cards(a.m, { phone: '+15550001111' });
    expect(a.calls).toHaveLength(2);
  });

  it("keeps each merchant's answers apart", async () => {
    const r = reads({ ms: 0 });
    const a = merchant('m-a', () => [card('11-1')]);
    const b = merchant('m-b', () => []);
    expect(await r.cards(a.m, { phone: '+15550001111' })).toEqual([card('11-1')]);
    expect(await r.cards(b.m, { phone: '+15550001111' })).toEqual([]);
    expect([a.calls, b.calls]).toEqual([['+15550001111'], ['+15550001111']]);
  });

  it('forgets a card the bridge changed: its own read and every search that found it, nothing else', async () => {
    const r = reads({ ms: 0 });
    const points = { '11-1': 0 };
    const a = merchant('m-a', (q) => (q.startsWith('11-') ? [card(q, points['11-1'])] : q === 'other@x.test' ? [card('11-9')] : [card('11-1', points['11-1'])]));
    await r.cards(a.m, { phone: '+15550001111' });
    await r.card(a.m, '11-1');
    await r.cards(a.m, { email: 'other@x.test' });
    points['11-1'] = 7;
    r.forget('m-b', ['11-1']);
    expect((await r.card(a.m, '11-1'))?.pointsBalance).toBe(0);
    r.forget('m-a', ['11-1']);
    expect((await r.card(a.m, '11-1'))?.pointsBalance).toBe(7);
    expect((await r.cards(a.m, { phone: '+15550001111' }))[0]?.pointsBalance).toBe(7);
    await r.cards(a.m, { email: 'other@x.test' });
    expect(a.calls).toEqual(['+15550001111', 'card:11-1', 'other@x.test', 'card:11-1', '+15550001111']);
  });

  it('keeps neither a failed read nor a read that found nobody: the next question asks again', async () => {
    const r = reads({ ms: 0 });
    let answer: RegisterCard[] | Error = new RegisterReadError('rate_limited', '429');
    const a = merchant('m-a', () => answer);
    await expect(r.cards(a.m, { phone: '+15550001111' })).rejects.toThrow(RegisterReadError);
    answer = [];
    expect(await r.cards(a.m, { phone: '+15550001111' })).toEqual([]);
    answer = [card('11-1')];
    expect(await r.cards(a.m, { phone: '+15550001111' })).toEqual([card('11-1')]);
    expect(a.calls).toHaveLength(3);
  });

  it('holds at most its bound per merchant, the oldest going first', async () => {
    const r = reads({ ms: 0 }, 2);
    const a = merchant('m-a', (q) => [card(`11-${q.slice(-1)}`)]);
    for (const phone of ['+15550000001', '+15550000002', '+15550000003']) await r.cards(a.m, { phone });
    await r.cards(a.m, { phone: '+15550000003' });
    await r.cards(a.m, { phone: '+15550000001' });
    expect(a.calls).toEqual(['+15550000001', '+15550000002', '+15550000003', '+15550000001']);
  });

  it('forgets by card through its index: a full cache keeps every other card, and reads evicted or replaced are not forgotten twice', async () => {
    const r = reads({ ms: 0 }, 5000);
    const a = merchant('m-a', (q) => [card(q.startsWith('11-') ? q : `11-${q.slice(-4)}`)]);
    for (let i = 0; i < 5000; i++) await r.cards(a.m, { phone: `+1555000${String(i).padStart(4, '0')}` });
    // One more read evicts the oldest (11-0000); forgetting it then finds nothing to drop.
    await r.card(a.m, '11-4999');
    r.forget('m-a', ['11-0000', '11-4999']);
    a.calls.length = 0;
    // 11-4999's search and its card read are asked again; every other card's search is still cached.
    await r.cards(a.m, { phone: '+15550004999' });
    await r.card(a.m, '11-4999');
    for (const i of [1, 2500, 4998]) await r.cards(a.m, { phone: `+1555000${String(i).padStart(4, '0')}` });
    expect(a.calls).toEqual(['+15550004999', 'card:11-4999']);
  });
});
