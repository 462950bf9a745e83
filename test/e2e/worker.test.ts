/**
 * The background worker over HTTP against the simulator: it takes what is due, however many older
 * open records wait for an operator; an operator's reconcile still reports every one of them.
 */
import { afterEach, expect, it } from '@jest/globals';
import request from 'supertest';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import type { LedgerRecord } from '../../src/state/record.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness, postJson } from '../support/harness.js';
import { makeRecord } from '../ledger/contracts/factories.js';

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const TX = 'generic:A-1001';
/** More than the worker's batch of 500. */
const WAITING = 600;
const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);
const record = () => h.bridge.store.get(TX) as Promise<LedgerRecord>;

/**
 * Puts WAITING open records, a day old, into the ledger (the bridge is stopped meanwhile: the file
 * ledger has one process): reversals in doubt, and accruals in doubt, which a bridge without
 * LOYALTY_API_KEY cannot verify. Only an operator can move any of them.
 */
async function seedAwaitingOperator(): Promise<void> {
  await h.bridge.close();
  const store = new FileLedgerStore(h.config.ledgerUrl.slice('file:'.length));
  await store.init();
  const dayAgo = Date.now() - 24 * 3600 * 1000;
  for (let i = 0; i < WAITING; i++) {
    const at = new Date(dayAgo + i).toISOString();
    const waiting = makeRecord(`generic:WAIT-${i}`, i % 2 ? { accrual: 'in_doubt' } : { accrual: 'accrued', reversal: 'in_doubt' });
    await store.insert({ ...waiting, createdAt: at, updatedAt: at });
  }
  await store.close();
  await h.restart();
}

it('delivers a pending checkout whose round is due while 600 older records wait for an operator', async () => {
  h = await startHarness({ withApiKey: false });
  await seedAwaitingOperator();
  h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
  const res = await post('/v1/checkouts/generic', checkout());
  expect(res.status).toBe(202);
  expect(res.body.status).toBe('pending');
  expect((await eventually(record, (r) => r.status === 'accrued')).status).toBe('accrued');
  expect(h.sim.books().transactions[TX]!.accruals).toBe(1);
  expect((await h.bridge.store.get('generic:WAIT-0'))!.version).toBe(1);
});

it("an operator's reconcile examines every open record, past one batch, and says why each waiting one is left open", async () => {
  h = await startHarness({ withApiKey: false, overrides: { startWorker: false } });
  await seedAwaitingOperator();
  h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
  expect((await post('/v1/checkouts/generic', checkout())).status).toBe(202);
  const report = await request(h.bridge.url).post('/v1/admin/reconcile').set('authorization', `Bearer ${ADMIN_TOKEN}`);
  expect(report.status).toBe(200);
  expect(report.body.examined).toBe(WAITING + 1);
  expect(report.body.fixed).toEqual([expect.objectContaining({ transactionId: TX, from: 'pending', to: 'accrued' })]);
  expect(report.body.open).toHaveLength(WAITING);
  for (const open of report.body.open as { status: string; why: string }[]) {
    expect(open).toMatchObject({ status: 'in_doubt', why: expect.stringContaining('a person must resolve it') });
  }
});
