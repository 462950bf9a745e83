/**
 * Reversals in doubt, settled from the operations history where that is safe, over HTTP against the
 * simulator: the bridge learns how the loyalty service shows a reversal from one it confirmed (its
 * entry's event and sign, claimed), then settles a reversal whose outcome is unknown when each card
 * shows exactly one unclaimed entry of that shape and no other record could have made it; anything
 * less certain waits for a person, who is shown the evidence (GET …/evidence), and whose resolve
 * preselects nothing. Also with a service that writes a reversal as an event of its own with a
 * positive sum, which must never pass for an accrual. See docs/operators.md "Evidence".
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { LedgerRecord } from '../../src/state/record.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness } from '../support/harness.js';

const GRACE_MS = 300;

describe('reversals in doubt and their evidence', () => {
  let h: Harness;
  const admin = (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
  const post = (path: string, body: unknown, token?: string) => {
    const req = request(h.bridge.url).post(path).set('content-type', 'application/json');
    return (token ? req.set('authorization', `Bearer ${token}`) : req).send(JSON.stringify(body));
  };
  const record = async (id: string, merchantId = 'default') => (await admin('get', `/v1/admin/transactions/${id}?merchantId=${merchantId}&unmask=true`)).body as LedgerRecord & { origin?: unknown };
  const evidence = async (id: string, merchantId = 'default') => {
    const res = await admin('get', `/v1/admin/transactions/${id}/evidence?merchantId=${merchantId}`);
    expect(res.status).toBe(200);
    return res.body;
  };
  /** The confirmed reversal's entries noted (after the answer, off the POS's path). */
  const noted = (id: string, merchantId = 'default') => eventually(() => h.bridge.store.get(merchantId === 'default' ? id : `${merchantId}/${id}`), (r) => r?.reversal.operationIds !== undefined);
  const sold = async (orderId: string, phone: string, token?: string, path = '/v1/checkouts/generic') => {
    const res = await post(path, checkout({ orderId, customer: { phone } }), token);
    expect([orderId, res.body.status]).toEqual([orderId, 'accrued']);
  };
  const refund = (orderId: string, token?: string) => post('/v1/refunds/generic', { orderId, refundId: `RF-${orderId}` }, token);
  const reconcile = async (merchantId = 'default') => (await admin('post', `/v1/admin/reconcile?merchantId=${merchantId}`)).body;
  const pastGrace = () => new Promise((resolve) => setTimeout(resolve, GRACE_MS + 50));

  beforeAll(async () => {
    h = await startHarness({ env: { IN_DOUBT_GRACE_MS: String(GRACE_MS), IN_DOUBT_VERIFY_AFTER_MS: '50' }, overrides: { startWorker: false, secretsKey: randomBytes(32).toString('base64') } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('before any reversal was confirmed, a reversal in doubt waits for a person: how the history shows one is not known', async () => {
    await sold('N-1', '+15550001001');
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    expect((await refund('N-1')).body.status).toBe('in_doubt');
    const seen = await evidence('generic:N-1');
    expect(seen).toMatchObject({ question: 'reversal', reading: 'unknown', why: expect.stringMatching(/no reversal of this merchant has been confirmed/) });
    expect(seen.operations.some((o: { candidate: boolean }) => o.candidate)).toBe(false);
    const report = await reconcile();
    expect(report.open).toContainEqual(expect.objectContaining({ transactionId: 'generic:N-1', status: 'in_doubt' }));
    const after = await record('generic:N-1');
    expect(after.reversal.unproven?.why).toMatch(/no reversal of this merchant has been confirmed/);
    // A person decides: nothing is preselected (resolve requires its outcome), and reversed is the truth here.
    const bare = await admin('post', '/v1/admin/transactions/generic:N-1/resolve').send({ reason: 'looked' });
    expect(bare.status).toBe(400);
    expect(bare.body.error.issues[0].field).toBe('outcome');
    expect((await admin('post', '/v1/admin/transactions/generic:N-1/resolve').send({ outcome: 'reversed', reason: 'the history shows -59.97 on the card' })).body.status).toBe('reversed');
    expect(h.sim.books().transactions['generic:N-1']).toMatchObject({ accruals: 1, reversals: 1 });
  });

  it('when the history cannot be read, the evidence says so and names the cards the record credited: an empty list is never shown as "no operation"', async () => {
    await sold('HU-1', '+15550001009');
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    expect((await refund('HU-1')).body.status).toBe('in_doubt');
    const credited = (await h.bridge.store.get('generic:HU-1'))!.accrual.results.map((r) => r.serialNumber);
    expect(credited).toHaveLength(1);
    // Every history read answers 503 (the client's retries spent).
    h.sim.faults.inject({ kind: 'server_error', on: 'history', times: 100 });
    try {
      const seen = await evidence('generic:HU-1');
      expect(seen).toMatchObject({ question: 'reversal', history: 'unreadable', reading: 'unknown', operations: [], cards: [{ serialNumber: credited[0] }] });
      expect(seen.why).toMatch(/^the operations history could not be read \(.*503.*\), so nothing here shows whether the call happened/);
    } finally {
      h.sim.faults.clear();
    }
    // Read again once the history answers: the reversal's entry is there.
    const read = await evidence('generic:HU-1');
    expect(read).toMatchObject({ history: 'read', cards: [expect.objectContaining({ serialNumber: credited[0] })] });
    expect(read.operations).toContainEqual(expect.objectContaining({ purchaseSum: -59.97 }));
  });

  it("learns the shape from a reversal the service confirmed: its entry's event and sign, claimed by its record", async () => {
    await sold('L-1', '+15550001002');
    expect((await refund('L-1')).body.status).toBe('reversed');
    const learned = await noted('generic:L-1');
    expect(learned!.reversal.shape).toEqual({ eventId: 24, sign: -1, learnedFrom: 'generic:L-1', at: expect.any(String) });
    expect(learned!.reversal.operationIds).toHaveLength(1);
    expect(learned!.history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^the operations history shows this reversal as operation \d+ \(event 24, negative purchase sum\): claimed$/));
    expect(JSON.parse((await h.bridge.store.getSetting('reversal_shape/default'))!)).toMatchObject({ eventId: 24, sign: -1, learnedFrom: 'generic:L-1' });
    // Its entry is claimed: the evidence says so, and no other reversal can be settled by it.
    const seen = await evidence('generic:L-1');
    expect(seen).toMatchObject({ question: 'none', reversalShape: { eventId: 24, sign: -1 } });
    expect(seen.operations).toContainEqual(expect.objectContaining({ id: learned!.reversal.operationIds![0], claimedBy: 'generic:L-1', purchaseSum: -59.97 }));
  });

  it('settles a reversal in doubt that the history shows: one unclaimed entry of the shape on its card, no rival; the evidence said so first', async () => {
    await sold('D-1', '+15550001003');
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    expect((await refund('D-1')).body.status).toBe('in_doubt');
    const seen = await evidence('generic:D-1');
    expect(seen).toMatchObject({ question: 'reversal', reading: 'reversed', cards: [{ serialNumber: expect.any(String), balance: 0 }] });
    const candidates = seen.operations.filter((o: { candidate: boolean }) => o.candidate);
    expect(candidates).toEqual([expect.objectContaining({ eventId: 24, purchaseSum: -59.97, why: expect.stringMatching(/claimed by no record/) })]);
    // Reading it changed nothing.
    expect((await record('generic:D-1')).status).toBe('in_doubt');

    const report = await reconcile();
    expect(report.fixed).toContainEqual(expect.objectContaining({ transactionId: 'generic:D-1', from: 'in_doubt', to: 'reversed' }));
    const settled = await record('generic:D-1');
    expect(settled.reversal.operationIds).toEqual([candidates[0].id]);
    expect(settled.history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^operations history shows operation \d+ on card .+ as this service records a reversal\): reversed$/));
    expect(h.sim.books().transactions['generic:D-1']).toMatchObject({ accruals: 1, reversals: 1 });
    expect(h.sim.books().doubleReversals).toEqual([]);
  });

  it('a reversal in doubt the history does not show: looked for through the grace period, then left to a person, who resolves not_reversed and it is reversed once', async () => {
    await sold('U-1', '+15550001004');
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'reverse' });
    expect((await refund('U-1')).body.status).toBe('in_doubt');
    await pastGrace();
    const report = await reconcile();
    expect(report.open).toContainEqual(expect.objectContaining({ transactionId: 'generic:U-1', status: 'in_doubt' }));
    const left = await record('generic:U-1');
    expect(left.reversal.unproven?.why).toMatch(/it looks not reversed, which only a person may conclude/);
    const seen = await evidence('generic:U-1');
    expect(seen).toMatchObject({ question: 'reversal', reading: 'not_reversed' });
    const attention = (await admin('get', '/v1/admin/attention')).body;
    expect(attention.items).toContainEqual(expect.objectContaining({ transactionId: 'generic:U-1', kind: 'in_doubt', why: expect.stringMatching(/does not prove it/) }));
    // Unproven stays put: a second pass sends nothing.
    const requests = h.sim.books().reverseRequests;
    await reconcile();
    expect(h.sim.books().reverseRequests).toBe(requests);
    const resolved = await admin('post', '/v1/admin/transactions/generic:U-1/resolve').send({ outcome: 'not_reversed', reason: 'evidence: no entry on the card' });
    expect(resolved.body.status).toBe('reversed');
    expect(h.sim.books().transactions['generic:U-1']).toMatchObject({ accruals: 1, reversals: 1 });
  });

  it('two reversals in doubt of one customer and amount, one of which happened: neither is settled by the one entry; a person decides, shown both', async () => {
    await sold('T-1', '+15550001005');
    await sold('T-2', '+15550001005');
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    expect((await refund('T-1')).body.status).toBe('in_doubt');
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'reverse' });
    expect((await refund('T-2')).body.status).toBe('in_doubt');
    for (const id of ['generic:T-1', 'generic:T-2']) expect((await evidence(id)).reading).toBe('ambiguous');
    await reconcile();
    for (const id of ['generic:T-1', 'generic:T-2']) {
      const r = await record(id);
      expect([id, r.status, r.reversal.unproven?.why]).toEqual([id, 'in_doubt', expect.stringMatching(/could be the reversal of generic:T-[12] too/)]);
    }
    expect(h.sim.books().doubleReversals).toEqual([]);

  });

  it('a reversal the history did not prove is not looked at again for a settled reversal of another amount', async () => {
    await sold('W-1', '+15550001006');
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'reverse' });
    expect((await refund('W-1')).body.status).toBe('in_doubt');
    await pastGrace();
    await reconcile();
    const before = await record('generic:W-1');
    expect(before.reversal.unproven?.why).toMatch(/it looks not reversed/);
    const other = await post('/v1/checkouts/generic', checkout({ orderId: 'W-2', customer: { phone: '+15550001006' }, total: '19.99', tax: '0', tip: '0', items: [{ id: 'sku-1', groupId: 'coffee', name: 'Latte', quantity: 1, unitPrice: '19.99', total: '19.99' }] }));
    expect(other.body.status).toBe('accrued');
    expect((await refund('W-2')).body.status).toBe('reversed');
    // Everything the confirmed reversal set going after its answer (noting its entries, looking at unproven ones) has finished.
    await h.bridge.core.delivery.drain();
    expect((await record('generic:W-2')).reversal.operationIds).toHaveLength(1);
    const after = await record('generic:W-1');
    expect([after.version, after.reversal.unproven?.why]).toEqual([before.version, before.reversal.unproven!.why]);
  });

  describe('a service that writes a reversal as an event of its own with a positive sum', () => {
    let token: string;
    beforeAll(async () => {
      const odd = h.sim.addMerchant({ id: 'odd', appToken: 'odd-app-token-0123456789', apiKey: 'odd-api-key-0123456789' });
      odd.reversalEntry = { eventId: 77, eventName: 'Purchase returned', sign: 1 };
      const created = await admin('post', '/v1/admin/merchants').send({ id: 'odd', loyalty: { appToken: odd.appToken, apiKey: odd.apiKey } });
      expect([created.status, created.body.error?.message]).toEqual([201, undefined]);
      token = created.body.posToken;
    });

    it('learns it from a confirmed reversal (the accrual seen under another event), then settles a reversal in doubt by it', async () => {
      await sold('O-1', '+15550002001', token);
      expect((await refund('O-1', token)).body.status).toBe('reversed');
      const learned = await noted('generic:O-1', 'odd');
      expect(learned!.reversal.shape).toMatchObject({ eventId: 77, sign: 1 });

      await sold('O-2', '+15550002002', token);
      h.sim.merchant('odd').faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
      expect((await refund('O-2', token)).body.status).toBe('in_doubt');
      expect((await evidence('generic:O-2', 'odd')).reading).toBe('reversed');
      expect((await reconcile('odd')).fixed).toContainEqual(expect.objectContaining({ transactionId: 'generic:O-2', to: 'reversed' }));
      expect(h.sim.merchant('odd').books().transactions['generic:O-2']).toMatchObject({ accruals: 1, reversals: 1 });
    });

    it("never takes a reversal's entry for an accrual: the same customer and sum, in doubt, is accrued again once the grace period shows none", async () => {
      const phone = '+15550002003';
      await sold('P-1', phone, token);
      h.sim.merchant('odd').faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
      expect((await refund('P-1', token)).body.status).toBe('in_doubt');
      // The reversal's entry (event 77, +59.97) is on the card, unclaimed, when this accrual's outcome is unknown.
      h.sim.merchant('odd').faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
      const second = await post('/v1/checkouts/generic', checkout({ orderId: 'P-2', customer: { phone } }), token);
      expect(second.body.status).toBe('in_doubt');
      const seen = await evidence('generic:P-2', 'odd');
      expect(seen.question).toBe('accrual');
      expect(seen.operations).toContainEqual(expect.objectContaining({ eventId: 77, purchaseSum: 59.97, candidate: false, why: expect.stringMatching(/a reversal's entry \(event 77 with a positive purchase sum\)/) }));
      expect(seen.operations.filter((o: { candidate: boolean }) => o.candidate)).toEqual([]);
      await pastGrace();
      await reconcile('odd');
      await reconcile('odd');
      const books = h.sim.merchant('odd').books();
      expect(books.transactions['generic:P-2']).toMatchObject({ accruals: 1 });
      expect(books.transactions['generic:P-1']).toMatchObject({ accruals: 1, reversals: 1 });
      expect(books.doubleAccruals).toEqual([]);
      expect((await record('generic:P-2', 'odd')).status).toBe('accrued');
      expect((await record('generic:P-1', 'odd')).status).toBe('reversed');
    });
  });
});
