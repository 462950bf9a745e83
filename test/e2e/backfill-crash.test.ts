/**
 * A bridge process killed (SIGKILL) in the middle of a backfill pass, for each POS: a new process
 * on the same file ledger takes the dead one's lease over at once, reads the window again and
 * records only what is missing; every order is accrued exactly once at the loyalty simulator (one
 * the kill caught in flight is in doubt, and settled from the operations history), and the
 * watermark is the new pass's. Needs `npm run build` first (the bridge runs from dist/).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../src/simulator/index.js';
import { BACKFILL_POSES, envFor, sale } from '../support/backfill-pos.js';
import { spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN, eventually } from '../support/harness.js';

/** More than one page of the poller's default 100. */
const ORDERS = 130;
const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

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
    const admin = (bridge: BridgeProcess) => ({
      backfill: () => request(bridge.url).post('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ pos: p.pos, since: ago(60) }),
      records: async (limit = 500) => (await request(bridge.url).get(`/v1/admin/transactions?pos=${p.pos}&limit=${limit}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body as { items: { transactionId: string }[]; total: number },
    });
    // The second page answers only after a long while (Clover reads each page twice: lines, then money).
    sim.pos[p.pos].faults(account.account).inject({ kind: 'slow', on: 'list', after: p.pos === 'clover' ? 2 : 1, delayMs: 60_000 });
    void admin(first).backfill().catch(() => undefined);
    // Counted, not listed: the wait must not slow down the pass it waits for.
    await eventually(() => admin(first).records(1), (r) => r.total >= 100, 60_000);
    await first.kill('SIGKILL');
    sim.pos[p.pos].faults(account.account).clear();

    const second = await spawnBridge(env);
    bridges.push(second);
    const pass = await admin(second).backfill();
    expect(pass.status).toBe(200);
    expect(pass.body.examined).toBe(ORDERS);
    expect(pass.body.known).toBeGreaterThanOrEqual(100);
    expect(pass.body.new.length + pass.body.known).toBe(ORDERS);
    const { items, total } = await admin(second).records();
    expect(total).toBe(ORDERS);
    await eventually(
      () => items.map((r) => sim.books().transactions[r.transactionId]?.accruals ?? 0),
      (counts) => counts.every((n) => n >= 1),
      20_000,
    );
    expect(items.every((r) => sim.books().transactions[r.transactionId]!.accruals === 1)).toBe(true);
    expect(sim.books().doubleAccruals).toEqual([]);
    const state = (await request(second.url).get('/v1/admin/backfill').set('authorization', `Bearer ${ADMIN_TOKEN}`)).body.items.find((i: { pos: string }) => i.pos === p.pos);
    expect(state.watermark).toBe(pass.body.watermark);
  });
});
