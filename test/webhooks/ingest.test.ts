/**
 * The webhook pipeline of the core, with a minimal test POS: verify, classify into actions, dedupe
 * on each action's key, carry out what it can, and keep an authentic delivery it cannot carry out
 * (a bad action in a batch, a refund of more than remains) as a replayable dead letter.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { genericAdapter } from '../../adapters/generic/index.js';
import type { PosAdapter, PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { postRaw, signature } from '../support/webhooks.js';

/** Events: `{ events: [{ id, type: 'sale' | 'refund', body }] }`, each body a generic payload. */
const testPos: PosAdapter = {
  name: 'testpos',
  parseCheckout: (body, context) => genericAdapter.parseCheckout(body, context),
  parseRefund: (body, context) => genericAdapter.parseRefund(body, context),
  webhook: {
    signature: { kind: 'hmac', header: 'X-Test-Signature', algorithm: 'sha256', encodings: ['hex'], message: (raw) => raw },
    classify: (body) =>
      (body as { events: { id: string; type: string; body: unknown }[] }).events.map((e) =>
        e.type === 'sale' ? { kind: 'checkout', key: e.id, payload: e.body } : e.type === 'refund' ? { kind: 'refund', key: e.id, payload: e.body } : { kind: 'ignored', key: e.id, reason: `${e.type} is not handled` },
      ),
  },
};
const settings: PosSettings = { webhookSecret: 'test-secret', apiBaseUrl: '' };

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ overrides: { adapters: new Map([['testpos', testPos]]), posSettings: { testpos: settings } } });
});
afterEach(async () => {
  await h.close();
});

const deliver = (events: unknown[]) => {
  const body = JSON.stringify({ events });
  return postRaw(`${h.bridge.url}/v1/webhooks/testpos`, body, [signature(testPos, settings, body, {}, 'hex')]);
};
const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

describe('webhook pipeline', () => {
  it('carries out each action once, by its key, and acknowledges the unknown', async () => {
    const events = [
      { id: 'e1', type: 'sale', body: checkout({ orderId: 'W-1' }) },
      { id: 'e2', type: 'sale', body: checkout({ orderId: 'W-2' }) },
      { id: 'e3', type: 'shift.closed', body: {} },
    ];
    const first = await deliver(events);
    expect(first.status).toBe(200);
    expect(first.body.results).toEqual([
      { key: 'e1', action: 'checkout', transactionId: 'testpos:W-1', status: 'accrued' },
      { key: 'e2', action: 'checkout', transactionId: 'testpos:W-2', status: 'accrued' },
      { key: 'e3', action: 'ignored', reason: 'shift.closed is not handled' },
    ]);
    const again = await deliver(events);
    expect(again.body.results.slice(0, 2)).toEqual([
      { key: 'e1', action: 'checkout', duplicate: true },
      { key: 'e2', action: 'checkout', duplicate: true },
    ]);
    expect(h.sim.books().accrueRequests).toBe(2);
  });

  it('a bad action in a batch does not hold back the others; the delivery is kept and replays the rest', async () => {
    const res = await deliver([
      { id: 'b1', type: 'sale', body: checkout({ orderId: 'B-1', total: 'not money' }) },
      { id: 'b2', type: 'sale', body: checkout({ orderId: 'B-2' }) },
    ]);
    // Authentic: kept and answered 2xx, the bad action named with its letter, the good one carried out.
    expect(res.status).toBe(202);
    const deadLetterId = res.body.results[0].deadLetterId as string;
    expect(res.body.results).toEqual([
      { key: 'b1', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringContaining('total'), issues: [expect.objectContaining({ field: 'total' })] },
      { key: 'b2', action: 'checkout', transactionId: 'testpos:B-2', status: 'accrued' },
    ]);
    expect(h.sim.books().transactions['testpos:B-2']).toMatchObject({ accruals: 1 });
    const letters = await admin('get', '/v1/admin/dead-letters?open=true');
    expect(letters.body.total).toBe(1);
    expect(letters.body.items[0]).toMatchObject({ pos: 'testpos', deliveries: 1, reason: expect.stringContaining('total'), retry: { transient: false, attempts: 0 } });
    // A payload that cannot be translated needs a person: the bridge never runs it by itself.
    expect(letters.body.items[0].retry.nextAt).toBeUndefined();
    expect((await admin('get', '/v1/admin/dead-letters?awaiting=operator')).body.total).toBe(1);
    expect((await admin('get', '/v1/admin/dead-letters?awaiting=bridge')).body.total).toBe(0);
    // The POS redelivers: the same letter, counted; B-2 is not accrued again.
    await deliver([
      { id: 'b1', type: 'sale', body: checkout({ orderId: 'B-1', total: 'not money' }) },
      { id: 'b2', type: 'sale', body: checkout({ orderId: 'B-2' }) },
    ]);
    expect((await admin('get', `/v1/admin/dead-letters/${deadLetterId}`)).body.deliveries).toBe(2);
    expect(h.sim.books().transactions['testpos:B-2']!.accruals).toBe(1);
  });

  it('a refund of more than remains is kept as a dead letter rather than lost, and replays once fixed', async () => {
    await deliver([{ id: 's1', type: 'sale', body: checkout({ orderId: 'R-1' }) }]);
    await deliver([{ id: 'r1', type: 'refund', body: { orderId: 'R-1', refundId: 'RF-1', amount: '50.00' } }]);
    const over = await deliver([{ id: 'r2', type: 'refund', body: { orderId: 'R-1', refundId: 'RF-2', amount: '20.00' } }]);
    expect(over.status).toBe(202);
    expect(over.body.results).toEqual([{ key: 'r2', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/more than/) }]);
    const id = over.body.results[0].deadLetterId as string;
    const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(replay.status).toBe(422);
    expect(replay.body.deadLetter.replays).toEqual([{ at: expect.any(String), by: 'operator', outcome: expect.stringMatching(/^failed: .*more than/) }]);
    expect(replay.body.results).toEqual([expect.objectContaining({ key: 'r2', action: 'dead_lettered', deadLetterId: id })]);
    expect(h.sim.books().reverseRequests).toBe(1);
  });

  it('a refund that arrives before its order is kept, and replayed after the order, reverses it', async () => {
    const early = await deliver([{ id: 'r1', type: 'refund', body: { orderId: 'E-1', refundId: 'RF-1', amount: '10.00' } }]);
    expect(early.status).toBe(202);
    expect(early.body.results).toEqual([{ key: 'r1', action: 'dead_lettered', deadLetterId: expect.any(String), reason: expect.stringMatching(/^no order E-1 in the ledger/) }]);
    await deliver([{ id: 's1', type: 'sale', body: checkout({ orderId: 'E-1' }) }]);
    const id = early.body.results[0].deadLetterId as string;
    const replay = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(replay.status).toBe(200);
    expect(replay.body.deadLetter.resolvedAt).toEqual(expect.any(String));
    expect(replay.body.results).toEqual([expect.objectContaining({ key: 'r1', action: 'refund', transactionId: 'testpos:E-1', status: 'reversed' })]);
    expect(h.sim.books().transactions['testpos:E-1~r1']).toMatchObject({ accruals: 1, amount: 4997 });
    expect((await admin('get', '/v1/admin/dead-letters?open=true')).body.total).toBe(0);
    // A resolved letter is never run again: the refund is not applied twice.
    const again = await admin('post', `/v1/admin/dead-letters/${id}/replay`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'conflict', deadLetterId: id, message: expect.stringMatching(/was resolved at/) });
    expect(h.sim.books().reverseRequests).toBe(1);
  });

  it('refuses an unsigned or wrongly signed delivery with 401 and records nothing', async () => {
    const body = JSON.stringify({ events: [{ id: 'x', type: 'sale', body: checkout({ orderId: 'X-1' }) }] });
    expect((await postRaw(`${h.bridge.url}/v1/webhooks/testpos`, body, [])).status).toBe(401);
    expect((await postRaw(`${h.bridge.url}/v1/webhooks/testpos`, body, [['X-Test-Signature', 'ab'.repeat(32)]])).status).toBe(401);
    expect(await h.bridge.store.count()).toBe(0);
    expect((await admin('get', '/v1/admin/dead-letters')).body.total).toBe(0);
  });
});
