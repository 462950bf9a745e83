/**
 * Asking the service (merchant policy `ambiguity: probe`), over HTTP against the simulator, on both
 * ledger stores. Two accruals of one person in doubt at once (a phone on one order, an email on the
 * other) and one operation in the history: the count cannot tell which happened. The bridge
 * reverses the first: the service reverses only an accrual it made, so "unknown" means it never
 * happened (it is sent again), and a reversal means it had (its operation is claimed from the
 * answer, and the purchase accrued again as `~r1`). A lost probe answer is never asked again blindly.
 * Under the default policy (`person`) the pair waits for a person (test/e2e/ambiguity.test.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { LedgerRecord } from '../../src/state/record.js';
import { ADMIN_TOKEN, checkout, eventually, postJson, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

const PHONE = '+15550004040';
const EMAIL = 'rae@example.test';

for (const store of STORES) {
  store.describe(`an ambiguous pair settled by asking the service, on the ${store.name} ledger`, () => {
    let h: Harness | undefined;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'probe');
    });
    afterEach(async () => {
      await h?.close();
      h = undefined;
      await schema?.drop();
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'probe');
    });
    afterAll(async () => {
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post' | 'patch', path: string) => request(h!.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    const record = async (id: string) => (await h!.bridge.store.get(id)) as LedgerRecord;
    const books = () => h!.sim.books();

    /** A bridge whose default merchant probes, and the pair in doubt: `first` and `second` are what the service does with each call. */
    async function ambiguousPair(first: 'drop_before_commit' | 'drop_after_commit', second: 'drop_before_commit' | 'drop_after_commit', env: Record<string, string> = {}) {
      h = await startHarness({ env: { ...(schema ? { LEDGER_URL: schema.url } : {}), IN_DOUBT_GRACE_MS: '300', AMBIGUITY_POLICY: 'probe', ...env }, overrides: { startWorker: false } });
      // The loyalty service knows the customer by both identifiers.
      expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'Q-0', total: '1.00', customer: { phone: PHONE, email: EMAIL } }))).body.status).toBe('accrued');
      h.sim.faults.inject({ kind: first, on: 'accrue' });
      h.sim.faults.inject({ kind: second, on: 'accrue' });
      expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'Q-1', customer: { phone: PHONE } }))).body.status).toBe('in_doubt');
      expect((await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'Q-2', customer: { email: EMAIL } }))).body.status).toBe('in_doubt');
    }

    /** Reconciles until nothing is open; the last report. */
    const settled = () =>
      eventually(
        () => admin('post', '/v1/admin/reconcile'),
        (res) => res.body.open.length === 0,
        8000,
      );

    it('the first never happened: the service does not know it, so it is sent again; the second then owns the one operation', async () => {
      await ambiguousPair('drop_before_commit', 'drop_after_commit');
      expect(books().transactions['generic:Q-1']).toBeUndefined();
      await settled();
      const q1 = await record('generic:Q-1');
      expect(q1.history.map((e) => e.event)).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^ambiguous with generic:Q-2: the loyalty service is asked \(merchant policy ambiguity=probe\) by reversing generic:Q-1/),
          expect.stringMatching(/^probe: the loyalty service does not know generic:Q-1 .*: its accrual never happened, and it is sent again/),
        ]),
      );
      expect([q1.status, (await record('generic:Q-2')).status]).toEqual(['accrued', 'accrued']);
      expect(books().transactions['generic:Q-1']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(books().transactions['generic:Q-2']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(books().doubleAccruals).toEqual([]);
      expect(books().reverseRequests).toBe(1);
      for (const id of ['generic:Q-1', 'generic:Q-2']) for (const op of (await record(id)).accrual.operationIds) expect(books().transactions[id]!.operationIds).toContain(op);
      expect((await admin('get', '/v1/admin/attention')).body.total).toBe(0);
    });

    it('the first had happened: the service reverses it, its operation is claimed from the answer, the purchase accrues again as ~r1, and the second is sent again', async () => {
      await ambiguousPair('drop_after_commit', 'drop_before_commit');
      const booked = books().transactions['generic:Q-1']!.operationIds;
      await settled();
      const q1 = await record('generic:Q-1');
      expect(q1.accrual.operationIds).toEqual(booked);
      expect(q1.history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^probe: the loyalty service reversed generic:Q-1, so its accrual had happened .*; the purchase is accrued again as generic:Q-1~r1/));
      expect(q1.remainderTransactionId).toBe('generic:Q-1~r1');
      expect((await record('generic:Q-1~r1')).status).toBe('accrued');
      expect((await record('generic:Q-2')).status).toBe('accrued');
      expect(books().transactions['generic:Q-1']).toMatchObject({ accruals: 1, reversals: 1 });
      expect(books().transactions['generic:Q-1~r1']).toMatchObject({ accruals: 1 });
      expect(books().transactions['generic:Q-2']).toMatchObject({ accruals: 1, reversals: 0 });
      expect(books().doubleAccruals).toEqual([]);
      // The order list shows the order accrued (its live record), and a refund of it reverses the ~r1 record.
      const refund = await postJson(h!.bridge.url, '/v1/refunds/generic', { orderId: 'Q-1', refundId: 'Q-1-R1' });
      expect([refund.status, refund.body.transactionId, refund.body.status]).toEqual([200, 'generic:Q-1~r1', 'reversed']);
      expect(books().transactions['generic:Q-1']).toMatchObject({ reversals: 1 });
    });

    it("a probe whose answer is lost is not asked again: it waits for the history or a person, and a person's word settles it", async () => {
      await ambiguousPair('drop_after_commit', 'drop_before_commit');
      h!.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
      const report = await eventually(
        () => admin('post', '/v1/admin/reconcile'),
        (res) => res.body.open.some((o: { transactionId: string; why: string }) => o.transactionId === 'generic:Q-1' && /reverse outcome unknown/.test(o.why)),
        8000,
      );
      expect(report.body.open.length).toBeGreaterThan(0);
      // Asked once; reconciled again, it is not asked again.
      await admin('post', '/v1/admin/reconcile');
      expect(books().reverseRequests).toBe(1);
      expect(books().transactions['generic:Q-1']).toMatchObject({ accruals: 1, reversals: 1 });
      expect((await record('generic:Q-1')).status).toBe('in_doubt');
      // A refund of the order now is refused for the moment (409, delivered again later), never taken for the probe's reversal.
      const early409 = await postJson(h!.bridge.url, '/v1/refunds/generic', { orderId: 'Q-1', refundId: 'Q-1-R1' });
      expect([early409.status, early409.body.error?.code]).toEqual([409, 'conflict']);
      expect((await record('generic:Q-1')).reversal.refundIds).toEqual([]);
      // Meanwhile the accrual itself cannot be resolved: the reversal's answer decides it.
      const early = await admin('post', '/v1/admin/transactions/generic:Q-1/resolve').send({ outcome: 'not_accrued' });
      expect([early.status, early.body.error.message]).toEqual([409, expect.stringMatching(/settle the reversal \(reversed or not_reversed\), which settles the accrual/)]);
      // The person reads the card: reversed. The purchase accrues again as Q-1~r1.
      expect((await admin('post', '/v1/admin/transactions/generic:Q-1/resolve').send({ outcome: 'reversed', note: 'the card shows the reversal' })).status).toBe(200);
      const after = await eventually(
        () => admin('post', '/v1/admin/reconcile'),
        (res) => res.body.open.length === 1,
        8000,
      );
      expect((await record('generic:Q-1~r1')).status).toBe('accrued');
      // Which of the two accruals' operations was Q-1's, its lost answer would have said: Q-1 now
      // counts as a rival of Q-2's match (its operation not named), so Q-2 is a person's too.
      expect(after.body.open).toEqual([expect.objectContaining({ transactionId: 'generic:Q-2', why: expect.stringContaining('ambiguous with generic:Q-1') })]);
      expect((await admin('post', '/v1/admin/transactions/generic:Q-2/resolve').send({ outcome: 'not_accrued', note: 'only Q-1 shows on the card' })).status).toBe(200);
      await settled();
      expect((await record('generic:Q-2')).status).toBe('accrued');
      expect(books().reverseRequests).toBe(1);
      // The refund delivered again applies to what remains of the order: Q-1~r1.
      const refund = await postJson(h!.bridge.url, '/v1/refunds/generic', { orderId: 'Q-1', refundId: 'Q-1-R1' });
      expect([refund.status, refund.body.transactionId, refund.body.status]).toEqual([200, 'generic:Q-1~r1', 'reversed']);
      expect(books().transactions['generic:Q-1~r1']).toMatchObject({ accruals: 1, reversals: 1 });
      expect(books().doubleAccruals).toEqual([]);
      expect(books().doubleReversals).toEqual([]);
    });

    it('under the default policy the pair waits for a person, whose "ask the service" does what the probe does; asked where there is nothing to ask, it is a 409 saying why', async () => {
      await ambiguousPair('drop_before_commit', 'drop_after_commit', { AMBIGUITY_POLICY: 'person' });
      const waiting = await eventually(
        async () => {
          await admin('post', '/v1/admin/reconcile');
          return admin('get', '/v1/admin/transactions/generic:Q-1');
        },
        (res) => res.body.actions?.ask?.allowed === true,
        8000,
      );
      expect(waiting.body.status).toBe('in_doubt');
      expect(books().reverseRequests).toBe(0);
      expect((await admin('get', '/v1/admin/attention')).body.counts).toEqual(expect.objectContaining({ ambiguous: 2 }));
      // Q-2 is not the one to ask first (Q-1's call began earlier).
      const notFirst = await admin('post', '/v1/admin/transactions/generic:Q-2/ask').send({ reason: 'checking' });
      expect(notFirst.status).toBe(409);
      expect(notFirst.body.error.message).toMatch(/first of them to ask about/);
      const asked = await admin('post', '/v1/admin/transactions/generic:Q-1/ask').send({ reason: 'the customer is at the counter' });
      expect(asked.status).toBe(200);
      expect((await record('generic:Q-1')).history.map((e) => e.event)).toContainEqual(expect.stringMatching(/^ambiguous with generic:Q-2: the loyalty service is asked \(admin asked\) by reversing generic:Q-1/));
      await settled();
      expect([(await record('generic:Q-1')).status, (await record('generic:Q-2')).status]).toEqual(['accrued', 'accrued']);
      expect(books().reverseRequests).toBe(1);
      expect(books().doubleAccruals).toEqual([]);
      const again = await admin('post', '/v1/admin/transactions/generic:Q-1/ask').send({});
      expect([again.status, again.body.error.message]).toEqual([409, expect.stringMatching(/not in doubt: nothing to ask/)]);
      expect((await admin('get', '/v1/admin/audit?limit=5')).body.items).toContainEqual(expect.objectContaining({ action: 'ask', target: 'generic:Q-1', reason: 'the customer is at the counter' }));
    });

    it('a merchant chooses its policy: the admin API takes person or probe and refuses anything else, naming it', async () => {
      h = await startHarness({ env: { ...(schema ? { LEDGER_URL: schema.url } : {}) }, overrides: { secretsKey: Buffer.alloc(32, 3).toString('base64') } });
      const installed = h.sim.addMerchant({ id: 'm-probe', appToken: 'app-m-probe-0123456789' });
      const made = await admin('post', '/v1/admin/merchants').send({ id: 'm-probe', loyalty: { appToken: installed.appToken }, ambiguity: 'probe' });
      expect([made.status, made.body.merchant?.ambiguity ?? made.body.ambiguity]).toEqual([201, 'probe']);
      const bad = await admin('patch', '/v1/admin/merchants/m-probe').send({ ambiguity: 'guess' });
      expect(bad.status).toBe(400);
      expect(JSON.stringify(bad.body)).toMatch(/ambiguity.*must be person .* or probe/);
      const back = await admin('patch', '/v1/admin/merchants/m-probe').send({ ambiguity: null });
      expect(back.status).toBe(200);
      expect(back.body.ambiguity).toBeUndefined();
    });
  });
}
