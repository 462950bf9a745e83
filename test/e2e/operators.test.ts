/**
 * The operators' admin API end to end over HTTP, on both ledger stores (the JSON-file ledger and
 * PostgreSQL): who a token is; finding records by several statuses, the POS's own order id, a refund
 * id and days; the attention queue; the actions allowed on a record and why not; close, dismiss,
 * resolve and bulk actions, each with its actor and reason in the record's history and the audit
 * trail; merchant scoping; dead letters as summaries and masked details. See docs/operators.md.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature } from '../support/webhooks.js';

const POS_TOKEN = 'pos-token-operators-0123456789';
const ALICE_TOKEN = 'alice-token-0123456789abcdef';
const shopifySettings: PosSettings = { webhookSecret: 'shpss_operators_secret_0123456789', apiBaseUrl: '' };

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

/** The day (UTC) a record was created: days as dates are tested on the records' own days, whenever the test runs. */
const dayOf = (iso: string) => iso.slice(0, 10);
const day = (offsetDays: number) => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

for (const store of STORES) {
  store.describe(`operators on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let bakeryAdmin: string;
    let bakeryPos: string;
    let letterId: string;

    const as = (token: string) => (method: 'get' | 'post', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${token}`);
    const admin = as(ADMIN_TOKEN);
    const alice = as(ALICE_TOKEN);
    const pos = (body: unknown, path = '/v1/checkouts/generic', token = POS_TOKEN) => request(h.bridge.url).post(path).set('content-type', 'application/json').set('authorization', `Bearer ${token}`).send(JSON.stringify(body));
    const ids = (res: { body: { items: { transactionId: string }[] } }) => res.body.items.map((i) => i.transactionId).sort();

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'operators');
      h = await startHarness({
        withApiKey: false,
        env: { POS_TOKEN, ADMIN_TOKENS: `alice=${ALICE_TOKEN}`, ...(schema ? { LEDGER_URL: schema.url } : {}) },
        overrides: { startWorker: false, posSettings: { shopify: shopifySettings }, secretsKey: randomBytes(32).toString('base64') },
      });
      const shop = h.sim.addMerchant({ id: 'bakery-17' });
      const created = await admin('post', '/v1/admin/merchants').send({ id: 'bakery-17', loyalty: { appToken: shop.appToken } });
      expect(created.status).toBe(201);
      bakeryAdmin = created.body.adminToken;
      bakeryPos = created.body.posToken;

      expect((await pos(checkout({ orderId: 'A-1' }))).body.status).toBe('accrued');
      h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
      expect((await pos(checkout({ orderId: 'F-1', customer: { phone: '+15550003333' } }))).body.status).toBe('failed');
      h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
      expect((await pos(checkout({ orderId: 'D-1', customer: { phone: '+15550004444' } }))).body.status).toBe('in_doubt');
      expect((await pos(checkout({ orderId: 'H 1/ü', customer: { phone: '+15550005555' } }))).body.status).toBe('accrued');
      expect((await pos({ orderId: 'A-1', refundId: 'RF-1' }, '/v1/refunds/generic')).body.status).toBe('reversed');
      expect((await pos({ orderId: 'NEVER-SEEN', refundId: 'RF-2' }, '/v1/refunds/generic')).status).toBe(404);
      expect((await pos(checkout({ orderId: 'C-1', customer: { phone: '+15550006666' } }))).body.status).toBe('accrued');
      await pos(checkout({ orderId: 'C-1', customer: { phone: '+15550006666' }, total: '9.99', items: [{ id: 'sku-1', quantity: 1, unitPrice: '9.99', total: '9.99' }] }));
      shop.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
      expect((await pos(checkout({ orderId: 'B-1' }), '/v1/checkouts/generic', bakeryPos)).body.status).toBe('in_doubt');
      const body = JSON.stringify({ id: 2, email: 'ann@example.test', customer: { phone: '+15550007777', first_name: 'Ann' }, note: 'call +1 555 000 8888' });
      const dead = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, body, [
        signature(shopifyAdapter, shopifySettings, body),
        ['X-Shopify-Topic', 'orders/paid'],
        ['X-Shopify-Event-Id', 'evt-operators-1'],
        ['X-Shopify-Shop-Domain', 'nobody.myshopify.com'],
      ]);
      expect(dead.body.results[0].action).toBe('dead_lettered');
      letterId = dead.body.results[0].deadLetterId;
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    it('whoami names the actor of each kind of token', async () => {
      expect((await admin('get', '/v1/admin/whoami')).body).toEqual({ actor: 'admin', scope: 'global' });
      expect((await alice('get', '/v1/admin/whoami')).body).toEqual({ actor: 'alice', scope: 'global' });
      expect((await as(bakeryAdmin)('get', '/v1/admin/whoami')).body).toEqual({ actor: 'merchant:bakery-17', scope: 'merchant', merchantId: 'bakery-17' });
      expect((await as('alice-token-0123456789abcdeX')('get', '/v1/admin/whoami')).status).toBe(401);
    });

    it('finds records by several statuses, the POS order id, a refund id and days', async () => {
      expect(ids(await admin('get', '/v1/admin/transactions?status=in_doubt,failed'))).toEqual(['generic:B-1', 'generic:D-1', 'generic:F-1']);
      expect(ids(await admin('get', '/v1/admin/transactions?status=in_doubt,failed&merchantId=default'))).toEqual(['generic:D-1', 'generic:F-1']);
      const odd = await admin('get', `/v1/admin/transactions?orderId=${encodeURIComponent('H 1/ü')}`);
      expect(odd.body.items).toEqual([expect.objectContaining({ orderId: 'H 1/ü', status: 'accrued' })]);
      // The transactionId of an order id with odd characters is a hash: the order id finds it all the same.
      expect(odd.body.items[0].transactionId).not.toContain('H 1');
      expect(ids(await admin('get', '/v1/admin/transactions?orderId=A-1'))).toEqual(['generic:A-1']);
      expect(ids(await admin('get', '/v1/admin/transactions?refundId=RF-1'))).toEqual(['generic:A-1']);
      const first = dayOf((await admin('get', '/v1/admin/transactions/generic:A-1')).body.createdAt);
      const last = dayOf((await admin('get', '/v1/admin/transactions/generic:C-1')).body.createdAt);
      // A day as `to` runs to its end: from=D&to=D is the whole day.
      expect((await admin('get', `/v1/admin/transactions?from=${first}&to=${last}&merchantId=default`)).body.total).toBe(6);
      expect((await admin('get', `/v1/admin/transactions?from=${day(1)}`)).body.total).toBe(0);
      expect((await admin('get', `/v1/admin/transactions?to=${day(-1)}`)).body.total).toBe(0);
      const unknown = await admin('get', '/v1/admin/transactions?status=failed,lost');
      expect(unknown.status).toBe(400);
      expect(unknown.body.error.issues).toEqual([{ field: 'status', message: expect.stringContaining('unknown status "lost"') }]);
      expect((await admin('get', '/v1/admin/transactions?from=2026-02-30')).status).toBe(400);
      // A merchant's token finds its own records only.
      expect(ids(await as(bakeryAdmin)('get', '/v1/admin/transactions?status=in_doubt,failed'))).toEqual(['generic:B-1']);
    });

    it("a record's detail says which actions are allowed, and why not", async () => {
      const doubt = await admin('get', '/v1/admin/transactions/generic:D-1');
      expect(doubt.body.actions.resolve).toEqual({ allowed: true, outcomes: ['accrued', 'not_accrued'] });
      expect(doubt.body.actions.retry).toEqual({ allowed: false, why: expect.stringContaining('resolve it (or let reconcile settle it) first') });
      expect(doubt.body.actions.close.allowed).toBe(false);
      const orphan = await admin('get', '/v1/admin/transactions/generic:NEVER-SEEN');
      expect(orphan.body.status).toBe('reverse_failed');
      expect(orphan.body.actions.close).toEqual({ allowed: true });
      expect(orphan.body.actions.resolve.outcomes).not.toContain('reversed');
      expect((await admin('get', '/v1/admin/transactions/generic:F-1')).body.actions.retry).toEqual({ allowed: true });
    });

    it("a record's detail masks the customer's phone and email, in the customer and every attempt, unless unmask=true (audited)", async () => {
      const masked = await admin('get', '/v1/admin/transactions/generic:F-1');
      expect(masked.body).toMatchObject({ masked: true, customer: { phone: '***' } });
      expect(masked.body.attempts[0].request.phone).toBe('***');
      expect(JSON.stringify(masked.body)).not.toContain('+15550003333');
      const clear = await as(bakeryAdmin)('get', '/v1/admin/transactions/generic:B-1?unmask=true');
      expect(clear.body).toMatchObject({ masked: false, customer: { phone: '+15550001111', email: 'a@b.test' } });
      expect(clear.body.attempts[0].request).toMatchObject({ phone: '+15550001111', email: 'a@b.test' });
      expect((await admin('get', '/v1/admin/audit?merchantId=bakery-17')).body.items).toEqual([expect.objectContaining({ actor: 'merchant:bakery-17', action: 'unmask record', target: 'generic:B-1', merchantId: 'bakery-17' })]);
      expect((await admin('get', '/v1/admin/transactions/generic:F-1?unmask=yes')).status).toBe(400);
    });

    it('the attention queue lists what needs a person, oldest first, counted per kind and merchant, scoped to a merchant', async () => {
      const queue = await admin('get', '/v1/admin/attention');
      expect(queue.status).toBe(200);
      const kinds = queue.body.items.map((i: { kind: string; transactionId?: string }) => `${i.kind} ${i.transactionId ?? 'letter'}`);
      expect(kinds).toEqual(['failed generic:F-1', 'in_doubt generic:D-1', 'reverse_failed generic:NEVER-SEEN', 'changed_repeats generic:C-1', 'in_doubt generic:B-1', 'dead_letter letter']);
      const since = queue.body.items.map((i: { since: string }) => Date.parse(i.since));
      expect(since).toEqual([...since].sort((a, b) => a - b));
      expect(queue.body.counts).toMatchObject({ in_doubt: 2, failed: 1, reverse_failed: 1, changed_repeats: 1, dead_letter: 1, ambiguous: 0, partially_accrued: 0 });
      expect(queue.body.perMerchant).toEqual({ default: 4, 'bakery-17': 1, '(none)': 1 });
      expect(queue.body.oldestSince).toBe(queue.body.items[0].since);
      expect(queue.body.items[5]).toMatchObject({ kind: 'dead_letter', deadLetterId: letterId, pos: 'shopify', why: expect.stringContaining('waits for a person') });
      const one = await admin('get', '/v1/admin/attention?limit=1');
      expect(one.body.items).toHaveLength(1);
      expect(one.body.counts).toEqual(queue.body.counts);
      const own = await as(bakeryAdmin)('get', '/v1/admin/attention');
      expect(own.body.items).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:B-1', merchantId: 'bakery-17' })]);
      expect(own.body.perMerchant).toEqual({ 'bakery-17': 1 });
      expect((await as(bakeryAdmin)('get', '/v1/admin/attention?merchantId=default')).status).toBe(404);
      expect((await admin('get', '/v1/admin/attention?limit=0')).status).toBe(400);
    });

    it("reconcile's open list names the failed and reverse_failed records too", async () => {
      const report = await admin('post', '/v1/admin/reconcile?merchantId=default');
      expect(report.body.open).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ transactionId: 'generic:F-1', status: 'failed', settled: true }),
          expect.objectContaining({ transactionId: 'generic:NEVER-SEEN', status: 'reverse_failed', settled: true }),
          expect.objectContaining({ transactionId: 'generic:D-1', status: 'in_doubt' }),
        ]),
      );
      expect(report.body.open.find((o: { transactionId: string }) => o.transactionId === 'generic:D-1').settled).toBeUndefined();
    });

    it("dead letters: listed as summaries, the detail masked unless unmasked (audited); a failed replay is in the error envelope; dismissed with a reason, kept", async () => {
      const list = await admin('get', '/v1/admin/dead-letters?open=true');
      expect(list.body.items).toEqual([expect.objectContaining({ id: letterId })]);
      for (const field of ['body', 'headers', 'bodyEncoding']) expect(list.body.items[0]).not.toHaveProperty(field);
      const masked = await admin('get', `/v1/admin/dead-letters/${letterId}`);
      expect(masked.body.masked).toBe(true);
      expect(masked.body.actions).toEqual({ replay: { allowed: true }, dismiss: { allowed: true } });
      for (const contact of ['ann@example.test', '+15550007777', '+1 555 000 8888']) expect(masked.body.body).not.toContain(contact);
      expect(JSON.parse(masked.body.body)).toMatchObject({ id: 2, email: '***', customer: { phone: '***', first_name: 'Ann' } });
      const clear = await alice('get', `/v1/admin/dead-letters/${letterId}?unmask=true`);
      expect(clear.body).toMatchObject({ masked: false });
      expect(clear.body.body).toContain('ann@example.test');

      const replay = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`).send({ reason: 'after fixing the shop' });
      expect(replay.status).toBe(422);
      expect(replay.body).toMatchObject({ error: { code: 'replay_failed', message: expect.any(String), deadLetterId: letterId }, deadLetter: { id: letterId, masked: true } });

      expect((await admin('post', `/v1/admin/dead-letters/${letterId}/dismiss`).send({})).body.error.issues).toEqual([{ field: 'reason', message: 'is required' }]);
      expect((await as(bakeryAdmin)('post', `/v1/admin/dead-letters/${letterId}/dismiss`).send({ reason: 'not mine' })).status).toBe(404);
      const dismissed = await alice('post', `/v1/admin/dead-letters/${letterId}/dismiss`).send({ reason: 'a test order from the shop owner' });
      expect(dismissed.status).toBe(200);
      expect(dismissed.body).toMatchObject({ dismissed: { actor: 'alice', reason: 'a test order from the shop owner' }, resolvedAt: expect.any(String) });
      // What the detail says is not allowed is word for word what the action answers.
      const { actions } = (await admin('get', `/v1/admin/dead-letters/${letterId}`)).body;
      expect(actions.dismiss).toEqual({ allowed: false, why: expect.stringContaining('was dismissed by alice') });
      expect(actions.replay).toEqual({ allowed: false, why: expect.stringContaining('was resolved at') });
      const again = await admin('post', `/v1/admin/dead-letters/${letterId}/dismiss`).send({ reason: 'again' });
      expect([again.status, again.body.error.message]).toEqual([409, actions.dismiss.why]);
      const replayed = await admin('post', `/v1/admin/dead-letters/${letterId}/replay`);
      expect([replayed.status, replayed.body.error.message]).toEqual([409, actions.replay.why]);
      // Kept, and out of the open list and the queue.
      expect((await admin('get', `/v1/admin/dead-letters/${letterId}`)).status).toBe(200);
      expect((await admin('get', '/v1/admin/dead-letters?open=true')).body.total).toBe(0);
      expect((await admin('get', '/v1/admin/attention')).body.counts.dead_letter).toBe(0);
    });

    it('close: an orphan reverse_failed with a reason, kept in its status and audited; anything else is 409 with why', async () => {
      expect((await admin('post', '/v1/admin/transactions/generic:NEVER-SEEN/close').send({})).status).toBe(400);
      const refused = await admin('post', '/v1/admin/transactions/generic:F-1/close').send({ reason: 'give up' });
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toMatch(/only an orphan reverse_failed/);
      const closed = await alice('post', '/v1/admin/transactions/generic:NEVER-SEEN/close').send({ reason: 'refund of an order from before the program' });
      expect(closed.status).toBe(200);
      expect(closed.body.status).toBe('reverse_failed');
      const detail = await admin('get', '/v1/admin/transactions/generic:NEVER-SEEN');
      expect(detail.body.closed).toMatchObject({ actor: 'alice', reason: 'refund of an order from before the program' });
      expect(detail.body.history.at(-1)).toMatchObject({ actor: 'alice', detail: 'refund of an order from before the program' });
      expect(detail.body.actions.close).toEqual({ allowed: false, why: expect.stringContaining('already closed by alice') });
      expect((await admin('get', '/v1/admin/attention')).body.counts.reverse_failed).toBe(0);
      // Nor is it left in reconcile's open list: nothing more is to be done with it.
      expect((await admin('post', '/v1/admin/reconcile?merchantId=default')).body.open.map((o: { transactionId: string }) => o.transactionId)).not.toContain('generic:NEVER-SEEN');
    });

    it('reverse by a named operator: the history line names who and why', async () => {
      const res = await alice('post', '/v1/admin/transactions/generic:C-1/reverse').send({ reason: 'customer left the program' });
      expect(res.body.status).toBe('reversed');
      const history = (await admin('get', '/v1/admin/transactions/generic:C-1')).body.history;
      expect(history).toEqual(expect.arrayContaining([expect.objectContaining({ actor: 'alice', detail: 'customer left the program', event: expect.stringContaining('asked by alice') })]));
      expect((await admin('get', '/v1/admin/audit?actor=alice&limit=1')).body.items[0]).toMatchObject({ action: 'reverse', target: 'generic:C-1', reason: 'customer left the program', outcome: 'reversed' });
    });

    it('acknowledge: changed repeats settled outside the bridge leave the queue; a doubt cannot be acknowledged', async () => {
      expect((await admin('post', '/v1/admin/transactions/generic:C-1/acknowledge').send({})).status).toBe(400);
      const refused = await admin('post', '/v1/admin/transactions/generic:D-1/acknowledge').send({ reason: 'x' });
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toMatch(/nothing to acknowledge/);
      const acked = await alice('post', '/v1/admin/transactions/generic:C-1/acknowledge').send({ reason: 'the customer paid the difference at the till' });
      expect(acked.status).toBe(200);
      const detail = await admin('get', '/v1/admin/transactions/generic:C-1');
      expect(detail.body.acknowledged).toMatchObject({ actor: 'alice', reason: 'the customer paid the difference at the till' });
      expect(detail.body.actions.acknowledge).toEqual({ allowed: false, why: expect.stringContaining('acknowledged by alice') });
      expect((await admin('get', '/v1/admin/attention')).body.counts.changed_repeats).toBe(0);
    });

    it('resolve by a named operator: the record leaves the queue; history and audit name who and why', async () => {
      const res = await alice('post', '/v1/admin/transactions/generic:D-1/resolve').send({ outcome: 'accrued', reason: 'seen on the card in the loyalty back office' });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('accrued');
      const detail = await admin('get', '/v1/admin/transactions/generic:D-1');
      expect(detail.body.history.at(-1)).toMatchObject({ actor: 'alice', detail: 'seen on the card in the loyalty back office' });
      const queue = await admin('get', '/v1/admin/attention');
      expect(queue.body.items.map((i: { transactionId?: string }) => i.transactionId)).not.toContain('generic:D-1');
      const audit = await admin('get', '/v1/admin/audit?actor=alice');
      expect(audit.body.items[0]).toMatchObject({ actor: 'alice', action: 'resolve accrued', target: 'generic:D-1', reason: 'seen on the card in the loyalty back office', merchantId: 'default', outcome: 'accrued' });
      expect(audit.body.items.map((e: { action: string }) => e.action)).toEqual(['resolve accrued', 'acknowledge', 'reverse', 'close', 'dismiss', 'unmask']);
    });

    it('bulk: by ids or a filter, each done or refused with why, bounded, reason required, scoped to a merchant', async () => {
      expect((await admin('post', '/v1/admin/transactions/bulk').send({ action: 'retry', ids: ['generic:F-1'] })).body.error.issues).toEqual([{ field: 'reason', message: 'is required' }]);
      expect((await admin('post', '/v1/admin/transactions/bulk').send({ action: 'retry', reason: 'x' })).status).toBe(400);
      expect((await admin('post', '/v1/admin/transactions/bulk').send({ action: 'resolve', ids: ['generic:F-1'], reason: 'x' })).body.error.issues).toEqual([{ field: 'outcome', message: 'is required for resolve' }]);
      // A merchant's token reaches its own records only: another's id is as unknown as a missing one.
      const mine = await as(bakeryAdmin)('post', '/v1/admin/transactions/bulk').send({ action: 'retry', ids: ['generic:F-1', 'generic:B-1'], reason: 'mine?' });
      expect(mine.body).toEqual({ done: [], refused: [{ id: 'generic:F-1', why: 'no ledger record generic:F-1' }, { id: 'generic:B-1', why: expect.stringContaining('resolve it (or let reconcile settle it) first') }] });

      // A filter states how many records it matches, as the person saw them: the preview says so, doing nothing.
      const filter = { status: 'failed,in_doubt', merchantId: 'default', from: day(-1) };
      const preview = await alice('post', '/v1/admin/transactions/bulk/preview').send({ action: 'retry', filter });
      expect(preview.status).toBe(200);
      expect(preview.body).toMatchObject({ matched: 1, acted: 1, byMerchant: [{ merchantId: 'default', count: 1 }], byStatus: [{ status: 'failed', count: 1 }], refused: [] });
      for (const expectCount of [undefined, 2]) {
        const unseen = await alice('post', '/v1/admin/transactions/bulk').send({ action: 'retry', filter, ...(expectCount === undefined ? {} : { expectCount }), reason: 'x' });
        expect([unseen.status, unseen.body.matched, unseen.body.error.code]).toEqual([409, 1, 'count_mismatch']);
      }
      expect((await admin('get', '/v1/admin/transactions/generic:F-1')).body.status).toBe('failed');
      const bulk = await alice('post', '/v1/admin/transactions/bulk').send({ action: 'retry', filter, expectCount: preview.body.matched, reason: 'loyalty service fixed the blocked card' });
      expect(bulk.status).toBe(200);
      expect(bulk.body).toEqual({ done: ['generic:F-1'], refused: [] });
      expect((await admin('get', '/v1/admin/transactions/generic:F-1')).body.history.at(-1)).toMatchObject({ actor: 'alice', detail: 'loyalty service fixed the blocked card' });
      const audit = await admin('get', '/v1/admin/audit?actor=alice&limit=1');
      expect(audit.body.items[0]).toMatchObject({ action: 'bulk:retry', target: 'generic:F-1', reason: 'loyalty service fixed the blocked card' });

      const global = await admin('post', '/v1/admin/transactions/bulk').send({ action: 'resolve', outcome: 'not_accrued', ids: ['bakery-17/generic:B-1', 'generic:A-1'], reason: 'checked both' });
      expect(global.body).toEqual({ done: ['bakery-17/generic:B-1'], refused: [{ id: 'generic:A-1', why: 'the accrual is accrued, not in doubt' }] });

      // Acknowledged in bulk: what is not a refusal or a changed repeat is refused with why.
      h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
      expect((await pos(checkout({ orderId: 'F-2', customer: { phone: '+15550001212' } }))).body.status).toBe('failed');
      const acked = await admin('post', '/v1/admin/transactions/bulk').send({ action: 'acknowledge', ids: ['generic:F-2', 'generic:A-1'], reason: 'card closed for good' });
      expect(acked.body).toEqual({ done: ['generic:F-2'], refused: [{ id: 'generic:A-1', why: expect.stringContaining('nothing to acknowledge') }] });
      expect((await admin('get', '/v1/admin/attention?merchantId=default')).body.items.map((i: { transactionId?: string }) => i.transactionId)).not.toContain('generic:F-2');

      for (let i = 0; i < 101; i++) await pos(checkout({ orderId: `S-${i}`, customer: {} }));
      const tooMany = await admin('post', '/v1/admin/transactions/bulk').send({ action: 'retry', filter: { status: 'skipped' }, expectCount: 100, reason: 'x' });
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.error.issues).toEqual([{ field: 'filter', message: expect.stringContaining('matches 101 records') }]);
    }, 30_000);

    it("the audit trail is filtered by merchant, actor and time, and a merchant's token sees its own only", async () => {
      const all = await admin('get', '/v1/admin/audit');
      expect(all.body.total).toBeGreaterThanOrEqual(7);
      const bakery = await admin('get', '/v1/admin/audit?merchantId=bakery-17');
      expect(bakery.body.items).toEqual([
        expect.objectContaining({ actor: 'admin', action: 'bulk:resolve not_accrued', target: 'generic:B-1', merchantId: 'bakery-17' }),
        expect.objectContaining({ actor: 'merchant:bakery-17', action: 'unmask record', target: 'generic:B-1' }),
      ]);
      expect((await as(bakeryAdmin)('get', '/v1/admin/audit')).body).toEqual(bakery.body);
      expect((await as(bakeryAdmin)('get', '/v1/admin/audit?merchantId=default')).status).toBe(404);
      expect((await admin('get', `/v1/admin/audit?from=${day(1)}`)).body.total).toBe(0);
      expect((await admin('get', `/v1/admin/audit?to=${dayOf(all.body.items[0].at)}`)).body.total).toBe(all.body.total);
      expect((await admin('get', '/v1/admin/audit?from=soon')).status).toBe(400);
    });

    it('bulk reverse over a filter matching several merchants: 409 naming them, nothing reversed; with them named, each reversed once', async () => {
      const since = new Date().toISOString();
      expect((await pos(checkout({ orderId: 'X-D', customer: { phone: '+15550007001' } }))).body.status).toBe('accrued');
      expect((await pos(checkout({ orderId: 'X-B', customer: { phone: '+15550007002' } }), '/v1/checkouts/generic', bakeryPos)).body.status).toBe('accrued');
      const filter = { status: 'accrued', from: since };
      const preview = await admin('post', '/v1/admin/transactions/bulk/preview').send({ action: 'reverse', filter });
      expect(preview.body).toMatchObject({ matched: 2, byMerchant: [{ merchantId: 'bakery-17', count: 1 }, { merchantId: 'default', count: 1 }] });
      const unpicked = await admin('post', '/v1/admin/transactions/bulk').send({ action: 'reverse', filter, expectCount: 2, reason: 'refunds' });
      expect([unpicked.status, unpicked.body.error.merchants]).toEqual([409, ['bakery-17', 'default']]);
      expect((await admin('get', '/v1/admin/transactions/generic:X-D')).body.status).toBe('accrued');
      const picked = await admin('post', '/v1/admin/transactions/bulk').send({ action: 'reverse', filter, expectCount: 2, merchants: ['default', 'bakery-17'], reason: 'refunds' });
      expect(picked.status).toBe(200);
      expect(picked.body.done.sort()).toEqual(['bakery-17/generic:X-B', 'generic:X-D']);
      expect(h.sim.books().transactions['generic:X-D']).toMatchObject({ accruals: 1, reversals: 1 });
      expect(h.sim.merchant('bakery-17').books().transactions['generic:X-B']).toMatchObject({ accruals: 1, reversals: 1 });
    });
  });
}
