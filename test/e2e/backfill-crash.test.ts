/**
 * A bridge process killed (SIGKILL) in the middle of a backfill pass, for each POS: a new process
 * on the same file ledger takes the dead one's lease over at once, reads the window again and
 * records only what is missing; every order is accrued exactly once at the loyalty simulator (one
 * the kill caught in flight is in doubt, and settled from the operations history), and the
 * watermark is the new pass's. On PostgreSQL, where the new process cannot know the other is dead,
 * it waits the dead one's leases out (30 s at most), then its scheduled round takes each account
 * over. Needs `npm run build` first (the bridge runs from dist/).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { BACKFILL_POSES, envFor, sale } from '../support/backfill-pos.js';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { accruedOnce, ADMIN_TOKEN, eventually } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

/** More than one page of the poller's default 100. */
const ORDERS = 130;
const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

/** A spawned bridge's admin API, as these tests ask it. */
const admin = (bridge: BridgeProcess) => ({
  backfill: (pos: string) => request(bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ pos, since: ago(60) }),
  /** With limit 1 it counts rather than lists: a wait on it must not slow down the pass it waits for. */
  records: async (pos: string, limit = 500) => (await request(bridge.url).get(`/v1/admin/transactions?pos=${pos}&limit=${limit}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body as { items: { transactionId: string }[]; total: number },
  states: async () => (await request(bridge.url).get('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items as BackfillRow[],
});

/** A row of GET /v1/admin/backfill, as far as these tests read it. */
interface BackfillRow {
  pos: string;
  watermark?: string;
  running?: { owner: string; until: string };
  lastPass?: { by: string; startedAt: string; examined: number; new: number; known: number; error?: string };
}

describe.each(BACKFILL_POSES)('backfill: $pos, a bridge killed mid-pass', (p) => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let dir: string;
  const bridges: BridgeProcess[] = [];
  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
    dir = mkdtempSync(join(tmpdir(), `backfill-crash-${p.pos}-`));
  });
  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill()));
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses and doubles nothing: the next process takes the lease over and records only what is missing', async () => {
    const account = p.addAccount(sim);
    for (let i = 0; i < ORDERS; i++) sim.pos[p.pos].addOrder(account.account, sale(`+1415${String(6_000_000 + i)}`, ago(30 - i / 10)));
    const env = {
      LEDGER_URL: `file:${join(dir, 'ledger.json')}`,
      LOYALTY_BASE_URL: server.url,
      LOYALTY_APP_TOKEN: sim.appToken,
      // An accrual the kill caught in flight is in doubt: the operations history settles it.
      LOYALTY_API_KEY: sim.apiKey,
      BACKFILL_INTERVAL_MS: '0',
      ...envFor(p, server.url, account),
    };
    const first = await spawnBridge(env);
    bridges.push(first);
    // The second page answers only after a long while (Clover reads each page twice: lines, then money).
    sim.pos[p.pos].faults(account.account).inject({ kind: 'slow', on: 'list', after: p.pos === 'clover' ? 2 : 1, delayMs: 60_000 });
    void admin(first).backfill(p.pos).catch(() => undefined);
    await eventually(() => admin(first).records(p.pos, 1), (r) => r.total >= 100, 60_000);
    await first.kill('SIGKILL');
    sim.pos[p.pos].faults(account.account).clear();

    const second = await spawnBridge(env);
    bridges.push(second);
    const pass = await admin(second).backfill(p.pos);
    expect(pass.status).toBe(200);
    expect(pass.body.examined).toBe(ORDERS);
    expect(pass.body.known).toBeGreaterThanOrEqual(100);
    expect(pass.body.new.length + pass.body.known).toBe(ORDERS);
    const { items, total } = await admin(second).records(p.pos);
    expect(total).toBe(ORDERS);
    await accruedOnce(sim, items.map((r) => r.transactionId), 20_000);
    const state = (await admin(second).states()).find((i) => i.pos === p.pos)!;
    expect(state.watermark).toBe(pass.body.watermark);
    // Longer than every wait in it: a test cut short by jest's default keeps running after afterAll,
    // and a bridge it spawns then is never killed.
  }, 150_000);
});

const { url: pgBase, describeIf } = await describeWithDatabase();

describeIf('backfill on PostgreSQL: a bridge killed mid-pass, and the next process', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  const bridges: BridgeProcess[] = [];
  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
    schema = await freshSchema(pgBase!, 'backfill_crash');
  });
  afterAll(async () => {
    await Promise.all(bridges.map((b) => b.kill()));
    await server.close();
    await schema.drop();
  });

  it("waits out the dead process's lease (30 s at most after its last renewal: asked meanwhile, a pass is 409), then its scheduled round takes each account over and records only what is missing, each order accrued once", async () => {
    const accounts = BACKFILL_POSES.map((p) => ({ p, account: p.addAccount(sim) }));
    for (const [j, { p, account }] of accounts.entries()) for (let i = 0; i < ORDERS; i++) sim.pos[p.pos].addOrder(account.account, sale(`+1416${j + 2}${String(600_000 + i)}`, ago(30 - i / 10)));
    // One process holds all five POS accounts: one kill leaves five leases behind.
    const env = {
      LEDGER_URL: schema.url,
      LOYALTY_BASE_URL: server.url,
      LOYALTY_APP_TOKEN: sim.appToken,
      LOYALTY_API_KEY: sim.apiKey,
      BACKFILL_INTERVAL_MS: '0',
      ...Object.assign({}, ...accounts.map(({ p, account }) => envFor(p, server.url, account))),
    } as Record<string, string>;

    const first = await spawnBridge(env);
    bridges.push(first);
    // Each account's second page answers only after a long while (Clover reads each page twice).
    for (const { p, account } of accounts) sim.pos[p.pos].faults(account.account).inject({ kind: 'slow', on: 'list', after: p.pos === 'clover' ? 2 : 1, delayMs: 120_000 });
    for (const { p } of accounts) void admin(first).backfill(p.pos).catch(() => undefined);
    for (const { p } of accounts) await eventually(() => admin(first).records(p.pos, 1), (r) => r.total >= 100, 60_000);
    const held = await admin(first).states();
    const deadOwner = held[0]!.running!.owner;
    expect(held.map((r) => r.running?.owner)).toEqual(accounts.map(() => deadOwner));
    const killedAt = Date.now();
    await first.kill('SIGKILL');
    for (const { p, account } of accounts) sim.pos[p.pos].faults(account.account).clear();

    const second = await spawnBridge({ ...env, BACKFILL_INTERVAL_MS: '1000' });
    bridges.push(second);
    // The accounts are the dead instance's until its leases run out: each at most 30 s after the
    // kill (renewed every 10 s while the pass ran), and at least a little after it.
    const leases = await admin(second).states();
    for (const row of leases) {
      expect(row.running?.owner).toBe(deadOwner);
      expect(Date.parse(row.running!.until)).toBeGreaterThan(killedAt);
      expect(Date.parse(row.running!.until)).toBeLessThanOrEqual(killedAt + 30_000);
    }
    const refused = await admin(second).backfill('square');
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain(deadOwner);

    // Once a lease has run out, the next scheduled round reads the account again (the watermark never moved).
    const done = await eventually(admin(second).states, (rows) => rows.length === accounts.length && rows.every((r) => r.watermark !== undefined && r.running === undefined), 90_000);
    for (const row of done) {
      const lease = leases.find((l) => l.pos === row.pos)!.running!;
      expect(row.lastPass).toMatchObject({ by: 'scheduled', examined: ORDERS });
      expect(row.lastPass!.error).toBeUndefined();
      expect(Date.parse(row.lastPass!.startedAt)).toBeGreaterThanOrEqual(Date.parse(lease.until));
      expect(row.lastPass!.known).toBeGreaterThanOrEqual(100);
      expect(row.lastPass!.new + row.lastPass!.known).toBe(ORDERS);
    }
    for (const { p } of accounts) {
      const { items, total } = await admin(second).records(p.pos);
      expect(total).toBe(ORDERS);
      await accruedOnce(sim, items.map((r) => r.transactionId), 20_000);
    }
  }, 240_000);
});
