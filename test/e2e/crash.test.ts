/**
 * Crash safety: a bridge process is SIGKILLed at each point of a checkout and a refund (before the
 * ledger write, after it, before the call is sent, during the call, after the loyalty service
 * committed, between the two steps of a partial refund). A new process on the same ledger, the
 * POS redelivering as it does when it got no answer, and reconciliation must leave every order
 * accrued or reversed exactly once in the simulator's books. On both stores: the file ledger, and
 * PostgreSQL, where the new process takes a dead one's call over once its lease has run out.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Failpoint } from '../../src/kernel/failpoints.js';
import type { LedgerStatus } from '../../src/state/record.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from '../support/bridge-process.js';
import { ADMIN_TOKEN, checkout, eventually } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase, describeIf: describeIfPostgres } = await describeWithDatabase();

let sim: Simulator;
let simServer: ListeningSimulator;
let bridge: BridgeProcess | undefined;
/** The ledger of the test under way: its variables, and how long a record may take to settle after a restart. */
let ledger: { env: Record<string, string>; settleMs: number; drop(): Promise<void> };

const TX = 'generic:A-1001';

function start(failpoints: Failpoint[] = []) {
  return spawnBridge({
    LOYALTY_BASE_URL: simServer.url,
    LOYALTY_APP_TOKEN: sim.appToken,
    LOYALTY_API_KEY: sim.apiKey,
    ...ledger.env,
    ...(failpoints.length ? { BRIDGE_FAILPOINTS: failpoints.join(',') } : {}),
  });
}

async function post(path: string, body: unknown): Promise<{ status: number; body: any } | 'no answer'> {
  try {
    const res = await fetch(`${bridge!.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  } catch {
    return 'no answer';
  }
}

async function admin(path: string, method = 'GET'): Promise<any> {
  const res = await fetch(`${bridge!.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return res.json();
}

/** Kills at the armed failpoint: the request gets no answer and the process dies by SIGKILL. */
async function crashOn(path: string, body: unknown) {
  expect(await post(path, body)).toBe('no answer');
  expect(await bridge!.exited).toBe('SIGKILL');
}

async function statusOf(id = TX): Promise<LedgerStatus | undefined> {
  const res = await fetch(`${bridge!.url}/v1/admin/transactions/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return res.status === 200 ? ((await res.json()) as { status: LedgerStatus }).status : undefined;
}

async function settles(status: LedgerStatus, id = TX) {
  expect(await eventually(() => statusOf(id), (s) => s === status, ledger.settleMs)).toBe(status);
}

function expectBooks(expected: Record<string, { accruals: number; reversals: number }>) {
  const books = sim.books();
  expect(books.doubleAccruals).toEqual([]);
  expect(books.doubleReversals).toEqual([]);
  for (const [id, counts] of Object.entries(expected)) expect(books.transactions[id] ?? { accruals: 0, reversals: 0 }).toMatchObject(counts);
}

/** The same kills on each store: `makeLedger` gives each test a new, empty ledger. */
function crashSafety(name: string, describeOn: typeof describe, makeLedger: () => Promise<typeof ledger>): void {
  describeOn(`crash safety on ${name}`, () => {
    beforeEach(async () => {
      sim = createSimulator();
      simServer = await sim.listen();
      ledger = await makeLedger();
    });
    afterEach(async () => {
      await bridge?.kill();
      bridge = undefined;
      await simServer.close();
      await ledger.drop();
    });

    describe('SIGKILL during a checkout', () => {
      it.each<[Failpoint, string]>([
        ['checkout:before-ledger-write', 'nothing was recorded: the redelivery records and accrues it'],
        ['checkout:after-ledger-write', 'recorded and marked in flight in one write, never sent: in doubt, the history shows nothing, then accrued'],
        ['call:before-send', 'marked in flight, never sent: in doubt, the history shows nothing, then accrued'],
        ['call:after-answer', 'committed upstream, outcome unrecorded: in doubt, matched in the history, never resent'],
      ])('at %s: %s', async (failpoint) => {
        bridge = await start([failpoint]);
        await crashOn('/v1/checkouts/generic', checkout());
        bridge = await start();
        // The POS got no answer, so it delivers the same order again.
        const again = await post('/v1/checkouts/generic', checkout());
        expect(again).not.toBe('no answer');
        await settles('accrued');
        expectBooks({ [TX]: { accruals: 1, reversals: 0 } });
      });

      it('during the call (the loyalty service committed and is slow to answer)', async () => {
        sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 30_000 });
        bridge = await start();
        const pending = post('/v1/checkouts/generic', checkout());
        await eventually(() => sim.books(), (b) => (b.transactions[TX]?.accruals ?? 0) === 1);
        await bridge.kill('SIGKILL');
        expect(await pending).toBe('no answer');
        sim.faults.clear();
        bridge = await start();
        await settles('accrued');
        expect((await admin(`/v1/admin/transactions/${TX}`)).accrual.settledBy).toBe('history');
        expect(sim.books().accrueRequests).toBe(1);
        expectBooks({ [TX]: { accruals: 1, reversals: 0 } });
      });
    });

    describe('SIGKILL during a refund', () => {
      beforeEach(async () => {
        bridge = await start();
        expect(await post('/v1/checkouts/generic', checkout())).toMatchObject({ status: 200, body: { status: 'accrued' } });
        await bridge.kill('SIGTERM');
      });

      it('after the refund is recorded: the worker reverses it once after the restart', async () => {
        bridge = await start(['refund:after-ledger-write']);
        await crashOn('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
        bridge = await start();
        await settles('reversed');
        await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
        expectBooks({ [TX]: { accruals: 1, reversals: 1 } });
        expect(sim.books().reverseRequests).toBe(1);
      });

      it('after the reverse committed: in doubt, never resent; an operator settles it', async () => {
        bridge = await start(['call:after-answer']);
        await crashOn('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
        bridge = await start();
        await settles('in_doubt');
        // A reconcile lists what it examined: one that ran while the worker's own pass held the record
        // (a loaded machine) does not name it, so it is asked again until it does.
        const report = await eventually(
          () => admin('/v1/admin/reconcile', 'POST'),
          (r: { open: { transactionId: string }[] }) => r.open.some((o) => o.transactionId === TX),
          10_000,
          { what: `a reconcile report naming ${TX} open` },
        );
        // No reversal of this merchant was confirmed before: how its history shows one is not known, so a person decides.
        expect(report.open).toEqual([expect.objectContaining({ transactionId: TX, why: expect.stringMatching(/no reversal of this merchant has been confirmed by the loyalty service yet/) })]);
        await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1' });
        const res = await fetch(`${bridge.url}/v1/admin/transactions/${TX}/resolve`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ outcome: 'reversed', note: 'card balance checked' }),
        });
        expect(((await res.json()) as { status: string }).status).toBe('reversed');
        expect(sim.books().reverseRequests).toBe(1);
        expectBooks({ [TX]: { accruals: 1, reversals: 1 } });
      });

      it.each<[Failpoint]>([['partial:before-remainder'], ['partial:before-link']])('between the two steps of a partial refund (%s): resumes, never repeats', async (failpoint) => {
        bridge = await start([failpoint]);
        await crashOn('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '9.97' });
        bridge = await start();
        await settles('accrued', `${TX}~r1`);
        // Redelivered after the crash: changes nothing.
        expect(await post('/v1/refunds/generic', { orderId: 'A-1001', refundId: 'R-1', amount: '9.97' })).toMatchObject({ body: { repeat: true } });
        expectBooks({ [TX]: { accruals: 1, reversals: 1 }, [`${TX}~r1`]: { accruals: 1, reversals: 0 } });
        expect(sim.books().transactions[`${TX}~r1`]!.amount).toBe(5000);
      });
    });

    describe('SIGTERM', () => {
      it('stops taking requests, finishes the call in flight, exits 0; the record is settled', async () => {
        sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 300 });
        bridge = await start();
        const pending = post('/v1/checkouts/generic', checkout());
        await eventually(() => sim.books(), (b) => (b.transactions[TX]?.accruals ?? 0) === 1);
        const exit = bridge.kill('SIGTERM');
        expect(await pending).toMatchObject({ status: 200, body: { status: 'accrued' } });
        expect(await exit).toBe(0);
        bridge = await start();
        expect(await statusOf()).toBe('accrued');
        expectBooks({ [TX]: { accruals: 1, reversals: 0 } });
      });
    });
  });
}

crashSafety('the file ledger', describe, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'bridge-crash-'));
  return { env: { LEDGER_URL: `file:${join(dir, 'ledger.json')}` }, settleMs: 8000, drop: async () => rmSync(dir, { recursive: true, force: true }) };
});

// A call a killed instance left in flight is taken over once its lease (IN_FLIGHT_LEASE_MS) has run out.
crashSafety('PostgreSQL', describeIfPostgres, async () => {
  const schema = await freshSchema(pgBase!, 'crash');
  return { env: { LEDGER_URL: schema.url, IN_FLIGHT_LEASE_MS: '3000' }, settleMs: 20_000, drop: () => schema.drop() };
});
