/**
 * The lease rules (src/kernel/lease.ts), on a fake clock: taken, renewed, given back, run out, two owners;
 * and the keeper that renews a lease for long work, on a timer the test drives (or jest's fake
 * timers), reporting the lease lost once another owner holds it. No wall clock, no sleeps.
 */
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { expired, isHeld, LeaseKeeper, leaseFrom, release, renew, renewalDue, standing, take, type Lease, type Renewal, type Repeat } from '../../src/kernel/lease.js';

const T0 = Date.parse('2026-05-01T12:00:00.000Z');
const LEASE = 30_000;
const iso = (ms: number) => new Date(ms).toISOString();
const leaseOf = (owner: string, untilMs: number): Lease => ({ owner, until: iso(untilMs) });

describe('the rule: free to its owner, and to anyone once run out', () => {
  it('nothing held: taken, for leaseMs from now', () => {
    expect(take(undefined, 'a', T0, LEASE)).toEqual({ taken: leaseOf('a', T0 + LEASE) });
  });

  it("another owner's live lease keeps one out, naming it; from its until on it is anyone's", () => {
    const theirs = leaseOf('b', T0 + 1000);
    expect(take(theirs, 'a', T0, LEASE)).toEqual({ heldBy: theirs });
    expect(take(theirs, 'a', T0 + 999, LEASE)).toEqual({ heldBy: theirs });
    expect(take(theirs, 'a', T0 + 1000, LEASE)).toEqual({ taken: leaseOf('a', T0 + 1000 + LEASE) });
    expect(take(theirs, 'a', T0 + 5000, LEASE)).toEqual({ taken: leaseOf('a', T0 + 5000 + LEASE) });
  });

  it('its own live lease keeps its owner out of nothing: taken again, from now', () => {
    expect(take(leaseOf('a', T0 + 1000), 'a', T0, LEASE)).toEqual({ taken: leaseOf('a', T0 + LEASE) });
  });

  it('isHeld: live and another\'s; without an asker, live at all', () => {
    const lease = leaseOf('b', T0 + 1000);
    expect(isHeld(undefined, T0, 'a')).toBe(false);
    expect(isHeld(lease, T0, 'a')).toBe(true);
    expect(isHeld(lease, T0, 'b')).toBe(false);
    expect(isHeld(lease, T0)).toBe(true);
    expect(isHeld(lease, T0 + 1000)).toBe(false);
    expect(expired(lease, T0 + 999)).toBe(false);
    expect(expired(lease, T0 + 1000)).toBe(true);
  });

  it('an until that is not a time holds nothing', () => {
    const broken = { owner: 'b', until: 'not a time' };
    expect(expired(broken, T0)).toBe(true);
    expect(isHeld(broken, T0, 'a')).toBe(false);
    expect(take(broken, 'a', T0, LEASE)).toEqual({ taken: leaseOf('a', T0 + LEASE) });
  });
});

describe('renew and release: the owner only', () => {
  it('renewed while still its own, run out or not (nobody took it meanwhile)', () => {
    expect(renew(leaseOf('a', T0 + 1000), 'a', T0, LEASE)).toEqual({ renewed: leaseOf('a', T0 + LEASE) });
    expect(renew(leaseOf('a', T0 - 1000), 'a', T0, LEASE)).toEqual({ renewed: leaseOf('a', T0 + LEASE) });
  });

  it("lost once another owner's, or nobody's", () => {
    const theirs = leaseOf('b', T0 + 1000);
    expect(renew(theirs, 'a', T0, LEASE)).toEqual({ lost: theirs });
    expect(renew(undefined, 'a', T0, LEASE)).toEqual({ lost: undefined });
  });

  it('a renewal is worth a write once half of the lease is used', () => {
    const lease = leaseOf('a', T0 + LEASE);
    expect(renewalDue(lease, T0, LEASE)).toBe(false);
    expect(renewalDue(lease, T0 + LEASE / 2 - 1, LEASE)).toBe(false);
    expect(renewalDue(lease, T0 + LEASE / 2, LEASE)).toBe(true);
  });

  it('given back by its owner; anyone else leaves it as it is', () => {
    const ours = leaseOf('a', T0 + 1000);
    expect(release(ours, 'a')).toBeUndefined();
    expect(release(ours, 'b')).toBe(ours);
    expect(release(undefined, 'a')).toBeUndefined();
  });

  it('two owners, one thing: b waits a out, takes it, and a finds it lost and cannot give it back', () => {
    let stored: Lease | undefined;
    const a = take(stored, 'a', T0, LEASE);
    expect(a).toEqual({ taken: leaseOf('a', T0 + LEASE) });
    stored = (a as { taken: Lease }).taken;
    // a stalls (no renewal); b asks before and at the end of a's lease.
    expect(take(stored, 'b', T0 + LEASE - 1, LEASE)).toEqual({ heldBy: stored });
    const b = take(stored, 'b', T0 + LEASE, LEASE);
    expect(b).toEqual({ taken: leaseOf('b', T0 + 2 * LEASE) });
    stored = (b as { taken: Lease }).taken;
    // a wakes: its renewal finds b's lease, and its release leaves it b's.
    expect(renew(stored, 'a', T0 + LEASE + 5, LEASE)).toEqual({ lost: stored });
    expect(release(stored, 'a')).toBe(stored);
    expect(take(stored, 'a', T0 + LEASE + 5, LEASE)).toEqual({ heldBy: stored });
    // b gives it back: a may take it at once.
    stored = release(stored, 'b');
    expect(take(stored, 'a', T0 + LEASE + 6, LEASE)).toEqual({ taken: leaseOf('a', T0 + 2 * LEASE + 6) });
  });
});

describe('leases stored otherwise', () => {
  it('an in-flight marker (owner, start) is the lease from its start for leaseMs', () => {
    expect(leaseFrom('a', iso(T0), LEASE)).toEqual(leaseOf('a', T0 + LEASE));
    expect(isHeld(leaseFrom('a', iso(T0), LEASE), T0 + LEASE - 1, 'b')).toBe(true);
    expect(isHeld(leaseFrom('a', iso(T0), LEASE), T0 + LEASE, 'b')).toBe(false);
    // A start that is not a time stands for a lease that holds nothing.
    expect(isHeld(leaseFrom('a', 'garbled', LEASE), T0, 'b')).toBe(false);
  });

  it("on a store one process holds, another owner's lease was left by a process that is gone: nothing stands", () => {
    const theirs = leaseOf('b', T0 + 1000);
    const ours = leaseOf('a', T0 + 1000);
    expect(standing(theirs, 'a', true)).toBe(theirs);
    expect(standing(theirs, 'a', false)).toBeUndefined();
    expect(standing(ours, 'a', false)).toBe(ours);
    expect(standing(undefined, 'a', true)).toBeUndefined();
  });
});

/** A timer the test fires by hand: what the keeper asked for, and whether it was cancelled. */
function drivenTimer() {
  const state: { periodMs?: number; tick?: () => Promise<void>; cancelled: boolean } = { cancelled: false };
  const repeat: Repeat = (ms, tick) => {
    state.periodMs = ms;
    state.tick = tick;
    return () => {
      state.cancelled = true;
    };
  };
  return { repeat, state, fire: () => state.tick!() };
}

/** One stored lease and a clock, renewed as a store's atomic update would (`renew`), failing on demand. */
function store(owner: string, startMs: number) {
  const s: { now: number; lease: Lease | undefined; failing: boolean; calls: number; renew(): Promise<Renewal> } = {
    now: startMs,
    lease: (take(undefined, owner, startMs, LEASE) as { taken: Lease }).taken,
    failing: false,
    calls: 0,
    async renew() {
      s.calls++;
      if (s.failing) throw new Error('the ledger is unreachable');
      const outcome = renew(s.lease, owner, s.now, LEASE);
      if ('renewed' in outcome) s.lease = outcome.renewed;
      return outcome;
    },
  };
  return s;
}

describe('LeaseKeeper: keeps a lease for long work', () => {
  it('renews every third of the lease, each renewal from the clock of its tick', async () => {
    const timer = drivenTimer();
    const s = store('a', T0);
    const keeper = new LeaseKeeper({ leaseMs: LEASE, renew: s.renew, repeat: timer.repeat });
    expect(timer.state.periodMs).toBe(LEASE / 3);
    s.now = T0 + LEASE / 3;
    await timer.fire();
    expect(s.lease).toEqual(leaseOf('a', T0 + LEASE / 3 + LEASE));
    s.now = T0 + (2 * LEASE) / 3;
    await timer.fire();
    expect(s.lease).toEqual(leaseOf('a', T0 + (2 * LEASE) / 3 + LEASE));
    expect(keeper.renewals).toBe(2);
    expect(keeper.lost).toBeUndefined();
    await keeper.stop();
    expect(timer.state.cancelled).toBe(true);
  });

  it('a renewal the store refused is reported and tried again at the next tick', async () => {
    const timer = drivenTimer();
    const s = store('a', T0);
    const errors: unknown[] = [];
    const keeper = new LeaseKeeper({ leaseMs: LEASE, renew: s.renew, repeat: timer.repeat, onError: (error) => errors.push(error) });
    s.failing = true;
    s.now = T0 + LEASE / 3;
    await timer.fire();
    expect(errors).toEqual([new Error('the ledger is unreachable')]);
    expect(keeper.lost).toBeUndefined();
    expect(s.lease).toEqual(leaseOf('a', T0 + LEASE));
    s.failing = false;
    s.now = T0 + (2 * LEASE) / 3;
    await timer.fire();
    expect(s.lease).toEqual(leaseOf('a', T0 + (2 * LEASE) / 3 + LEASE));
    expect(keeper.renewals).toBe(1);
    await keeper.stop();
  });

  it('reports the lease lost once another owner took it (it ran out while the store was down), and renews no more', async () => {
    const timer = drivenTimer();
    const s = store('a', T0);
    const keeper = new LeaseKeeper({ leaseMs: LEASE, renew: s.renew, repeat: timer.repeat, onError: () => undefined });
    s.failing = true;
    for (const third of [1, 2, 3]) {
      s.now = T0 + (third * LEASE) / 3;
      await timer.fire();
    }
    // a's lease ran out unrenewed: b takes it.
    const b = take(s.lease, 'b', s.now, LEASE);
    expect(b).toEqual({ taken: leaseOf('b', T0 + 2 * LEASE) });
    s.lease = (b as { taken: Lease }).taken;
    s.failing = false;
    s.now += LEASE / 3;
    await timer.fire();
    expect(keeper.lost).toEqual({ holder: leaseOf('b', T0 + 2 * LEASE) });
    expect(timer.state.cancelled).toBe(true);
    expect(s.lease).toEqual(leaseOf('b', T0 + 2 * LEASE));
    const calls = s.calls;
    await timer.fire();
    expect(s.calls).toBe(calls);
    await keeper.stop();
  });

  it('reports it lost, holder none, when nobody holds it any more', async () => {
    const timer = drivenTimer();
    const s = store('a', T0);
    const keeper = new LeaseKeeper({ leaseMs: LEASE, renew: s.renew, repeat: timer.repeat });
    s.lease = undefined;
    await timer.fire();
    expect(keeper.lost).toEqual({ holder: undefined });
    await keeper.stop();
  });

  it('skips a tick while a renewal is under way; stop() waits for that renewal', async () => {
    const timer = drivenTimer();
    const events: string[] = [];
    let finish!: (outcome: Renewal) => void;
    let calls = 0;
    const keeper = new LeaseKeeper({
      leaseMs: LEASE,
      repeat: timer.repeat,
      renew: () => {
        calls++;
        return new Promise<Renewal>((resolve) => (finish = resolve));
      },
    });
    const first = timer.fire();
    const second = timer.fire();
    expect(calls).toBe(1);
    const stopped = keeper.stop().then(() => events.push('stopped'));
    expect(timer.state.cancelled).toBe(true);
    events.push('renewal answered');
    finish({ renewed: leaseOf('a', T0 + LEASE) });
    await Promise.all([first, second, stopped]);
    expect(events).toEqual(['renewal answered', 'stopped']);
    expect(calls).toBe(1);
    expect(keeper.renewals).toBe(1);
    // Stopped: a tick that still comes renews nothing.
    await timer.fire();
    expect(calls).toBe(1);
  });
});

describe('LeaseKeeper on its own timer (jest fake timers)', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('renews every third of the lease until stopped', async () => {
    jest.useFakeTimers({ now: T0 });
    const s = store('a', T0);
    const keeper = new LeaseKeeper({ leaseMs: LEASE, renew: () => ((s.now = Date.now()), s.renew()) });
    await jest.advanceTimersByTimeAsync(LEASE / 3 - 1);
    expect(s.calls).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(s.calls).toBe(1);
    expect(s.lease).toEqual(leaseOf('a', T0 + LEASE / 3 + LEASE));
    await jest.advanceTimersByTimeAsync(LEASE);
    expect(s.calls).toBe(4);
    expect(s.lease).toEqual(leaseOf('a', T0 + (4 * LEASE) / 3 + LEASE));
    await keeper.stop();
    await jest.advanceTimersByTimeAsync(LEASE);
    expect(s.calls).toBe(4);
    expect(jest.getTimerCount()).toBe(0);
  });
});
