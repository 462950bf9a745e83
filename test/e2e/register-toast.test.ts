/**
 * Toast's loyalty integration end to end over HTTP, on both ledger stores: the fake Toast
 * restaurant's register (simulator/pos-apis/toast.ts `loyaltyCall`) → POST /v1/toast/loyalty →
 * the loyalty simulator's cards and books. Every transaction type; Toast's idempotence (the same
 * Toast-Transaction-GUID, an ACCRUE retried under a new one, a REVERSE retried); one check, one
 * accrual whether it comes by the loyalty API, the orders webhook or both; a split order's checks
 * each to its own card; a slow and a rate-limiting upstream; who may call; what is recorded.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { toastAdapter } from '../../adapters/toast/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import type { SimMerchant } from '../../simulator/index.js';
import type { ToastLoyaltyRequest } from '../../simulator/pos-apis/toast.js';
import { createLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, eventually, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature, type RawAnswer } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

const RESTAURANT = 'a0000000-0000-4000-8000-00000000000a';
const KEY = 'toast-e2e-loyalty-key-0123456789abcdef';
const OTHER = { id: 'm-other', restaurant: 'a0000000-0000-4000-8000-00000000000b', key: 'toast-e2e-other-key-0123456789abcdef' };
const NO_API_KEY = { id: 'm-nokey', restaurant: 'a0000000-0000-4000-8000-00000000000c', key: 'toast-e2e-nokey-key-0123456789abcdef' };
const toast: PosSettings = { webhookSecret: 'toast-register-e2e-secret', apiBaseUrl: '', account: RESTAURANT, registerKey: KEY };

const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

for (const store of STORES) {
  store.describe(`Toast at the register, on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let other: SimMerchant;
    /** The bridge's log, as JSON lines. */
    const logLines: string[] = [];

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'register');
      h = await startHarness({
        logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
        // A budget a slow upstream visibly overruns, with the cache long enough to outlive a test.
        env: { ...(schema ? { LEDGER_URL: schema.url } : {}), REGISTER_BUDGET_MS: '400', REGISTER_CACHE_MS: '60000' },
        overrides: { posSettings: { toast }, secretsKey: randomBytes(32).toString('base64') },
      });
      h.sim.pos.toast.addAccount({ restaurantGuid: RESTAURANT, loyaltyKey: KEY, currency: 'USD' });
      h.sim.pos.toast.addAccount({ restaurantGuid: OTHER.restaurant, loyaltyKey: OTHER.key, currency: 'USD' });
      h.sim.pos.toast.addAccount({ restaurantGuid: NO_API_KEY.restaurant, loyaltyKey: NO_API_KEY.key, currency: 'USD' });
      const installed = h.sim.addMerchant({ id: OTHER.id, appToken: `app-${randomBytes(6).toString('hex')}`, apiKey: `key-${randomBytes(6).toString('hex')}` });
      other = h.sim.merchant(OTHER.id);
      expect((await admin('post', '/v1/admin/merchants').send({ id: OTHER.id, loyalty: { appToken: installed.appToken, apiKey: installed.apiKey }, pos: { toast: { restaurantGuid: OTHER.restaurant, loyaltyKey: OTHER.key } } })).status).toBe(201);
      const keyless = h.sim.addMerchant({ id: NO_API_KEY.id, appToken: `app-${randomBytes(6).toString('hex')}` });
      expect((await admin('post', '/v1/admin/merchants').send({ id: NO_API_KEY.id, loyalty: { appToken: keyless.appToken }, pos: { toast: { restaurantGuid: NO_API_KEY.restaurant, loyaltyKey: NO_API_KEY.key } } })).status).toBe(201);
    }, 30_000);

    afterEach(() => {
      h.sim.faults.clear();
    });

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    const admin = (method: 'get' | 'post' | 'patch', path: string) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${ADMIN_TOKEN}`);

    /** The fake restaurant's register makes the call; it is posted to the bridge byte for byte, as Toast would. */
    async function register(call: ToastLoyaltyRequest, restaurant = RESTAURANT, change: (headers: Record<string, string>) => void = () => {}): Promise<RawAnswer & { guid: string }> {
      const made = h.sim.pos.toast.loyaltyCall(restaurant, call);
      change(made.headers);
      const answer = await postRaw(`${h.bridge.url}/v1/toast/loyalty`, made.body, Object.entries(made.headers));
      return { ...answer, guid: made.guid };
    }

    /** A guest of the default merchant's loyalty service, with one card. */
    function guest(): { phone: string; card: string } {
      const phone = `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
      const { cardIds } = h.sim.addCustomer({ phone, firstName: 'Ann', surname: 'Lee' });
      return { phone, card: cardIds[0]! };
    }

    /** A paid one-check order at the fake restaurant: $25.00 of food (tax and tip beside it). */
    function paidOrder(restaurant = RESTAURANT): { order: string; check: string; transactionId: string } {
      const order = randomUUID();
      const held = h.sim.pos.toast.addOrder(restaurant, { id: order, lines: [{ name: 'Burger', unitPrice: 1500, quantity: 1, tax: 94 }, { name: 'Fries', unitPrice: 500, quantity: 2, tax: 62 }] });
      const check = held.checks[0]!.guid as string;
      return { order, check, transactionId: `toast:${order}:${check}` };
    }

    const points = (card: string) => h.sim.books().cardBalances[card];
    const accruals = (transactionId: string) => h.sim.books().transactions[transactionId]?.accruals ?? 0;
    const record = (transactionId: string) => admin('get', `/v1/admin/transactions/${encodeURIComponent(transactionId)}`);
    const settled = (transactionId: string, status: string) =>
      eventually(
        async () => (await record(transactionId)).body.status,
        (s) => s === status,
        8000,
        { what: `${transactionId} ${status}` },
      );

    it('the Rewards flow: SEARCH by phone finds the card, INQUIRE shows its points, REDEEM rejects every redemption, ACCRUE credits the check once, REVERSE takes it back', async () => {
      const ann = guest();
      const sale = paidOrder();

      const search = await register({ type: 'SEARCH', phone: ann.phone });
      expect(search.status).toBe(200);
      expect(search.body).toEqual({ transactionStatus: 'ACCEPT', searchResponse: { accounts: [{ identifier: ann.card, firstName: 'Ann', lastName: 'Lee', phone: expect.stringMatching(/^…\d{4}$/), pointsBalance: 0 }] } });
      // A contact is shown masked: never in full to the register.
      expect(search.text).not.toContain(ann.phone);

      const redemption = { appliedDiscountGuid: randomUUID(), quantity: 1 };
      const inquire = await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card, redemptions: [redemption] });
      expect(inquire.status).toBe(200);
      expect(inquire.body).toMatchObject({ transactionStatus: 'ACCEPT', checkResponse: { accountInfo: { identifier: ann.card, firstName: 'Ann' }, pointsBalance: 0, offers: [], appliedRedemptions: [] } });
      expect(inquire.body.checkResponse.rejectedRedemptions).toEqual([{ redemption, message: expect.stringContaining('no rewards to redeem') }]);

      const redeem = await register({ type: 'REDEEM', orderId: sale.order, redemptions: [redemption] });
      expect(redeem.status).toBe(200);
      expect(redeem.body).toEqual({ transactionStatus: 'ACCEPT', checkResponse: { rejectedRedemptions: [{ redemption, message: expect.any(String) }], appliedRedemptions: [] } });

      // The check carries the card INQUIRE attached (appliedLoyaltyInfo), as Toast's ACCRUE does.
      const accrue = await register({ type: 'ACCRUE', orderId: sale.order });
      expect(accrue.status).toBe(200);
      expect(accrue.body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(sale.transactionId, 'accrued');
      expect(h.sim.books().transactions[sale.transactionId]).toMatchObject({ accruals: 1, amount: 2500 });
      // Kept whole (unmask: an operator's record detail shows a card serial by its end only).
      const kept = (await admin('get', `/v1/admin/transactions/${encodeURIComponent(sale.transactionId)}?unmask=true`)).body;
      expect(kept).toMatchObject({ pos: 'toast', orderId: sale.order, origin: { via: 'register' }, customer: { serialNumber: ann.card } });
      expect(kept.check).toMatchObject({ amount: 2500, taxAmount: 156, externalTransactionId: sale.order });
      // The card's points were read before the accrual: the bridge forgot them once it accrued.
      const after = await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card });
      expect(after.body.checkResponse.pointsBalance).toBe(25);

      const reverse = await register({ type: 'REVERSE', reverses: accrue.guid, identifier: ann.card });
      expect(reverse.status).toBe(200);
      expect(reverse.body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(sale.transactionId, 'reversed');
      expect(h.sim.books().transactions[sale.transactionId]).toMatchObject({ accruals: 1, reversals: 1 });
      expect((await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card })).body.checkResponse.pointsBalance).toBe(0);
    });

    /** A request of Toast's as its developer guide shows it (test/fixtures/toast/loyalty), sent for this restaurant and this guest. */
    function documented(name: string, guest: { phone: string; card: string }) {
      const text = readFileSync(new URL(`../fixtures/toast/loyalty/${name}_request.json`, import.meta.url), 'utf8')
        .replaceAll('toast-fixture-loyalty-key-0123456789', KEY)
        .replaceAll('b0000000-0000-4000-8000-000000000001', RESTAURANT)
        .replaceAll('11-100001-2', guest.card)
        .replaceAll('+15550007001', guest.phone);
      const { headers, body } = JSON.parse(text) as { headers: Record<string, string>; body: unknown };
      return postRaw(`${h.bridge.url}/v1/toast/loyalty`, JSON.stringify(body), Object.entries(headers));
    }

    it("Toast's documented example bodies, each transaction type in turn", async () => {
      const ada = guest();
      const search = await documented('search', ada);
      expect(search.status).toBe(200);
      expect(search.body.searchResponse.accounts).toEqual([expect.objectContaining({ identifier: ada.card, pointsBalance: 0 })]);
      const inquire = await documented('inquire', ada);
      expect(inquire.body).toMatchObject({ transactionStatus: 'ACCEPT', checkResponse: { accountInfo: { identifier: ada.card }, pointsBalance: 0 } });
      expect(inquire.body.checkResponse.rejectedRedemptions).toHaveLength(1);
      const redeem = await documented('redeem', ada);
      expect(redeem.status).toBe(200);
      // Rejected naming the discount Toast applied, so the register takes it off the check.
      expect(redeem.body.checkResponse.rejectedRedemptions).toEqual([{ redemption: expect.objectContaining({ appliedDiscountGuid: 'd0000000-0000-4000-8000-0000000001a1' }), message: expect.any(String) }]);
      const accrue = await documented('accrue', ada);
      expect(accrue.body).toEqual({ transactionStatus: 'ACCEPT' });
      const transactionId = 'toast:d0000000-0000-4000-8000-000000000010:d0000000-0000-4000-8000-000000000011';
      await settled(transactionId, 'accrued');
      expect((await record(transactionId)).body.check).toMatchObject({ amount: 2500, taxAmount: 156, tipAmount: 400 });
      expect(points(ada.card)).toBe(25);
      const reverse = await documented('reverse', ada);
      expect(reverse.body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(transactionId, 'reversed');
      const transfer = await documented('transfer', ada);
      expect(transfer.status).toBe(400);
      expect(transfer.body.transactionStatus).toBe('ERROR_INVALID_TOAST_TRANSACTION_TYPE');
    });

    it('the same Toast-Transaction-GUID again gets the first answer and calls nothing: a SEARCH while the upstream rate-limits, an ACCRUE', async () => {
      const ann = guest();
      const guid = randomUUID();
      const first = await register({ type: 'SEARCH', phone: ann.phone, guid });
      expect(first.body.transactionStatus).toBe('ACCEPT');
      // Any card read now is refused: the repeat is answered without one (the fault stays queued).
      h.sim.faults.inject({ kind: 'rate_limit', on: 'cards', times: 5 });
      const again = await register({ type: 'SEARCH', phone: ann.phone, guid });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect(h.sim.faults.pending()).toBe(5);
      h.sim.faults.clear();

      // "No such guest" is a first answer too: the guest made since is not found under the same GUID, and is under a new one.
      const newcomer = `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
      const unknownGuid = randomUUID();
      const unknown = await register({ type: 'SEARCH', phone: newcomer, guid: unknownGuid });
      expect(unknown.status).toBe(404);
      h.sim.addCustomer({ phone: newcomer, firstName: 'Bo', surname: 'Ng' });
      expect((await register({ type: 'SEARCH', phone: newcomer, guid: unknownGuid })).body).toEqual(unknown.body);
      expect((await register({ type: 'SEARCH', phone: newcomer })).body.transactionStatus).toBe('ACCEPT');

      const sale = paidOrder();
      const accrueGuid = randomUUID();
      const accrue = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card, guid: accrueGuid });
      expect(accrue.body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(sale.transactionId, 'accrued');
      const repeat = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card, guid: accrueGuid });
      expect(repeat.status).toBe(200);
      expect(repeat.body).toEqual({ transactionStatus: 'ACCEPT' });
      expect(accruals(sale.transactionId)).toBe(1);
      expect(h.sim.books().doubleAccruals).toEqual([]);
    });

    it('an ACCRUE Toast retries under a new GUID is the same check: it accrues once, and a REVERSE naming either GUID takes it back once', async () => {
      const ann = guest();
      const sale = paidOrder();
      // The first attempt's answer is lost (the upstream is slow and Toast gives up): Toast sends it again under another GUID.
      h.sim.faults.inject({ kind: 'slow_after_commit', on: 'accrue', delayMs: 1500 });
      const first = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card });
      const retried = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card });
      expect([first.body, retried.body]).toEqual([{ transactionStatus: 'ACCEPT' }, { transactionStatus: 'ACCEPT' }]);
      expect(first.guid).not.toBe(retried.guid);
      await settled(sale.transactionId, 'accrued');
      expect(accruals(sale.transactionId)).toBe(1);

      const reverse = await register({ type: 'REVERSE', reverses: first.guid });
      expect(reverse.body).toEqual({ transactionStatus: 'ACCEPT' });
      // Toast retries a failed REVERSE with the same GUID; another REVERSE names the retried accrue: neither reverses again.
      const sameGuid = await register({ type: 'REVERSE', reverses: first.guid, guid: reverse.guid });
      const otherAccrue = await register({ type: 'REVERSE', reverses: retried.guid });
      expect([sameGuid.body, otherAccrue.body]).toEqual([{ transactionStatus: 'ACCEPT' }, { transactionStatus: 'ACCEPT' }]);
      await settled(sale.transactionId, 'reversed');
      expect(h.sim.books().transactions[sale.transactionId]).toMatchObject({ accruals: 1, reversals: 1 });
      expect(h.sim.books().doubleReversals).toEqual([]);
    });

    it('a check reversed, then sent by ACCRUE again (a late retry, or the check paid again): ACCEPT, nothing more accrued, and the log says why', async () => {
      const ann = guest();
      const sale = paidOrder();
      const first = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card });
      await settled(sale.transactionId, 'accrued');
      expect((await register({ type: 'REVERSE', reverses: first.guid })).body).toEqual({ transactionStatus: 'ACCEPT' });
      // Settled, and its operation claimed from the history (written after the answer, off the POS's path).
      const before = await eventually(
        async () => (await record(sale.transactionId)).body,
        (r) => r.status === 'reversed' && (r.reversal?.operationIds?.length ?? 0) > 0,
        8000,
        { what: `${sale.transactionId} reversed and its operation claimed` },
      );

      const again = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card });
      expect([again.status, again.body]).toEqual([200, { transactionStatus: 'ACCEPT' }]);
      // One accrual and one reversal, as before: the guest holds none of this check's points.
      expect(h.sim.books().transactions[sale.transactionId]).toMatchObject({ accruals: 1, reversals: 1 });
      expect(points(ann.card)).toBe(0);
      const after = (await record(sale.transactionId)).body;
      expect([after.status, after.version]).toEqual(['reversed', before.version]);
      const said = logLines.map((line) => JSON.parse(line) as { msg: string; transactionId?: string }).filter((line) => line.transactionId === sale.transactionId && line.msg.startsWith('a register ACCRUE came for a check already reversed'));
      expect(said).toHaveLength(1);
    });

    /** The orders webhook for a held order, signed as Toast signs it. */
    /** The fake restaurant's orders webhook of `order`, signed as Toast signs it; `change` edits the order first (a shape the fake does not make). */
    async function webhook(order: string, change?: (order: { checks: Record<string, unknown>[] }) => void) {
      const made = h.sim.pos.toast.webhook(RESTAURANT, { id: order, secret: toast.webhookSecret! });
      const delivery = JSON.parse(made.body) as { timestamp: string; details: { order: { checks: Record<string, unknown>[] } } };
      change?.(delivery.details.order);
      const body = change ? JSON.stringify(delivery) : made.body;
      return postRaw(`${h.bridge.url}/v1/webhooks/toast`, body, [signature(toastAdapter, toast, body, { 'Toast-Timestamp': delivery.timestamp }), ...Object.entries(made.headers).filter(([name]) => name !== 'toast-signature')]);
    }

    it('one check, one accrual across channels: ACCRUE then the orders webhook, and the webhook then ACCRUE', async () => {
      const ann = guest();
      const first = paidOrder();
      // INQUIRE attaches the card to the check, so the webhook's order carries it as well.
      await register({ type: 'INQUIRE', orderId: first.order, identifier: ann.card });
      expect((await register({ type: 'ACCRUE', orderId: first.order })).body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(first.transactionId, 'accrued');
      const hook = await webhook(first.order);
      expect(hook.status).toBe(200);
      expect(hook.body.results).toEqual([expect.objectContaining({ action: 'checkout', transactionId: first.transactionId, status: 'accrued', duplicate: true })]);

      const second = paidOrder();
      await register({ type: 'INQUIRE', orderId: second.order, identifier: ann.card });
      const early = await webhook(second.order);
      expect(early.body.results).toEqual([expect.objectContaining({ transactionId: second.transactionId })]);
      await settled(second.transactionId, 'accrued');
      expect((await register({ type: 'ACCRUE', orderId: second.order })).body).toEqual({ transactionStatus: 'ACCEPT' });
      expect([accruals(first.transactionId), accruals(second.transactionId)]).toEqual([1, 1]);
      expect(points(ann.card)).toBe(50);
    });

    it("a two-check order whose checks name two guests accrues each check to its own card, and the order's webhook adds nothing", async () => {
      const ann = guest();
      const bob = guest();
      const order = randomUUID();
      const held = h.sim.pos.toast.addOrder(RESTAURANT, { id: order, lines: [{ name: 'Pasta', unitPrice: 1800, quantity: 1 }] });
      // The table split: a second check of its own on the same order (Toast keeps loyalty per check).
      const second = { ...structuredClone(held.checks[0]!), guid: randomUUID(), amount: 12, totalAmount: 12, selections: [{ ...(held.checks[0]!.selections as object[])[0], guid: randomUUID(), displayName: 'Salad', price: 12, tax: 0 }] };
      const checks = [held.checks[0]!, second];
      const transactionIds = checks.map((c) => `toast:${order}:${c.guid as string}`);
      const accrueCheck = (check: Record<string, unknown>, card: string) => {
        const body = JSON.stringify({ toastTransactionType: 'LOYALTY_ACCRUE', checkTransactionInformation: { loyaltyIdentifier: card, orderGuid: order, check: { ...check, appliedLoyaltyInfo: { loyaltyIdentifier: card, vendor: 'INTEGRATION' } }, redemptions: [] } });
        return postRaw(`${h.bridge.url}/v1/toast/loyalty`, body, [
          ['authorization', KEY],
          ['toast-restaurant-external-id', RESTAURANT],
          ['toast-transaction-guid', randomUUID()],
          ['toast-transaction-type', 'LOYALTY_ACCRUE'],
        ]);
      };
      expect((await accrueCheck(checks[0]!, ann.card)).body).toEqual({ transactionStatus: 'ACCEPT' });
      expect((await accrueCheck(checks[1]!, bob.card)).body).toEqual({ transactionStatus: 'ACCEPT' });
      await settled(transactionIds[0]!, 'accrued');
      await settled(transactionIds[1]!, 'accrued');
      expect(h.sim.books().transactions[transactionIds[0]!]).toMatchObject({ amount: 1800, cards: [ann.card] });
      expect(h.sim.books().transactions[transactionIds[1]!]).toMatchObject({ amount: 1200, cards: [bob.card] });
      expect([points(ann.card), points(bob.card)]).toEqual([18, 12]);

      // The order's webhook comes with both checks, each carrying its guest as Toast keeps it: each
      // check is the sale already recorded, and nothing is accrued again. (The fake makes one-check
      // orders only: the delivery is given the split as the register saw it.)
      const hook = await webhook(order, (delivered) => {
        delivered.checks = checks.map((check, i) => ({ ...check, appliedLoyaltyInfo: { loyaltyIdentifier: [ann.card, bob.card][i], vendor: 'INTEGRATION' } }));
      });
      expect(hook.status).toBe(200);
      expect(hook.body.results).toEqual(transactionIds.map((transactionId) => expect.objectContaining({ action: 'checkout', transactionId, status: 'accrued', duplicate: true })));
      expect(transactionIds.map(accruals)).toEqual([1, 1]);
      expect([points(ann.card), points(bob.card)]).toEqual([18, 12]);
    });

    it('a slow upstream: SEARCH and INQUIRE answer within the budget with Toast\'s catch-all ERROR and a message for the cashier; the next read, answered, is not a cached failure', async () => {
      const ann = guest();
      const sale = paidOrder();
      h.sim.faults.inject({ kind: 'slow', on: 'cards', delayMs: 10_000, times: 2 });
      const started = Date.now();
      const search = await register({ type: 'SEARCH', phone: ann.phone });
      const inquire = await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card });
      // Both came back long before the upstream would have (10 s each): the 400 ms budget held.
      expect(Date.now() - started).toBeLessThan(5000);
      for (const answer of [search, inquire]) {
        expect(answer.status).toBe(400);
        expect(answer.body).toEqual({ transactionStatus: 'ERROR', message: 'The loyalty program did not answer in time: try again in a moment.' });
      }
      h.sim.faults.clear();
      expect((await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card })).body).toMatchObject({ transactionStatus: 'ACCEPT', checkResponse: { pointsBalance: 0 } });
    });

    it('a rate-limiting upstream: a read is not waited out (the cashier is waiting) but answered busy; an ACCRUE is ACCEPT at once and delivered once the limit lifts', async () => {
      const ann = guest();
      const sale = paidOrder();
      h.sim.faults.inject({ kind: 'rate_limit', on: 'cards' });
      const busy = await register({ type: 'INQUIRE', orderId: sale.order, identifier: ann.card });
      expect(busy.status).toBe(400);
      expect(busy.body).toEqual({ transactionStatus: 'ERROR', message: 'The loyalty program is busy: try again in a moment.' });
      expect(h.sim.faults.pending()).toBe(0);

      h.sim.faults.rateLimitAll = true;
      const accrue = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card });
      expect(accrue.body).toEqual({ transactionStatus: 'ACCEPT' });
      const pending = (await record(sale.transactionId)).body;
      expect(['pending', 'in_doubt']).toContain(pending.status);
      h.sim.faults.rateLimitAll = false;
      await settled(sale.transactionId, 'accrued');
      expect(accruals(sale.transactionId)).toBe(1);
    });

    it('a wrong key, another merchant\'s key and an unknown restaurant are refused before anything is read or recorded', async () => {
      const ann = guest();
      const sale = paidOrder();
      h.sim.faults.inject({ kind: 'rate_limit', on: 'cards', times: 3 });
      const wrong = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card, key: `${KEY}-not` });
      const others = await register({ type: 'ACCRUE', orderId: sale.order, identifier: ann.card, key: OTHER.key });
      const missing = await register({ type: 'SEARCH', phone: ann.phone }, RESTAURANT, (headers) => delete headers.authorization);
      for (const answer of [wrong, others, missing]) {
        expect(answer.status).toBe(400);
        expect(answer.body.transactionStatus).toBe('ERROR_INVALID_TOKEN');
      }
      const unknown = await register({ type: 'SEARCH', phone: ann.phone }, RESTAURANT, (headers) => (headers['toast-restaurant-external-id'] = 'a0000000-0000-4000-8000-0000000000ff'));
      expect(unknown.status).toBe(400);
      expect(unknown.body.transactionStatus).toBe('ERROR_INVALID_RESTAURANT');
      // The other merchant's restaurant with this merchant's key: its key is not this one.
      const crossed = await register({ type: 'SEARCH', phone: ann.phone, key: KEY }, OTHER.restaurant);
      expect(crossed.body.transactionStatus).toBe('ERROR_INVALID_TOKEN');
      expect(h.sim.faults.pending()).toBe(3);
      expect((await record(sale.transactionId)).status).toBe(404);
    });

    it("a merchant's register sees its own loyalty service only, and a merchant without an API key is told so in Toast's words", async () => {
      const ann = guest();
      // Ann is the default merchant's guest: the other merchant's loyalty service knows no such phone.
      const elsewhere = await register({ type: 'SEARCH', phone: ann.phone }, OTHER.restaurant);
      expect(elsewhere.status).toBe(404);
      expect(elsewhere.body.transactionStatus).toBe('ERROR_ACCOUNT_INVALID');
      const theirs = other.addCustomer({ phone: ann.phone });
      expect((await register({ type: 'SEARCH', phone: ann.phone }, OTHER.restaurant)).body.searchResponse.accounts.map((a: { identifier: string }) => a.identifier)).toEqual(theirs.cardIds);

      const keyless = await register({ type: 'SEARCH', phone: ann.phone }, NO_API_KEY.restaurant);
      expect(keyless.status).toBe(400);
      expect(keyless.body).toEqual({ transactionStatus: 'ERROR_INVALID_RESTAURANT', message: expect.stringContaining('no loyalty API key') });
      // /readyz (with the admin token) and the console's queue say which merchants these are, once checked.
      await h.bridge.upstream.refresh();
      const ready = await request(h.bridge.url).get('/readyz').set('authorization', `Bearer ${ADMIN_TOKEN}`);
      expect(ready.body.status).toBe('ready');
      expect(ready.body.checks.register).toMatch(new RegExp(`no loyalty API key, so their registers cannot find guests.*: .*${NO_API_KEY.id}`));
      expect(ready.body.checks.register).not.toContain(OTHER.id);
      const sale = paidOrder(NO_API_KEY.restaurant);
      const accrue = await register({ type: 'ACCRUE', orderId: sale.order }, NO_API_KEY.restaurant);
      // No guest attached: recorded, and nothing to earn.
      expect(accrue.body).toEqual({ transactionStatus: 'ACCEPT' });
      expect((await admin('get', `/v1/admin/transactions/${encodeURIComponent(sale.transactionId)}?merchantId=${NO_API_KEY.id}`)).body.status).toBe('skipped');
    });

    it('REVERSE of a GUID never accepted is ERROR_TRANSACTION_DOES_NOT_EXIST; TRANSFER is refused; a body not of Toast\'s shape names the field', async () => {
      const reverse = await register({ type: 'REVERSE', reverses: randomUUID() });
      expect(reverse.status).toBe(400);
      expect(reverse.body.transactionStatus).toBe('ERROR_TRANSACTION_DOES_NOT_EXIST');
      const transfer = await register({ type: 'TRANSFER', identifier: 'x' });
      expect(transfer.status).toBe(400);
      expect(transfer.body.transactionStatus).toBe('ERROR_INVALID_TOAST_TRANSACTION_TYPE');
      const bad = await postRaw(`${h.bridge.url}/v1/toast/loyalty`, JSON.stringify({ toastTransactionType: 'LOYALTY_INQUIRE', checkTransactionInformation: { orderGuid: 'x' } }), [
        ['authorization', KEY],
        ['toast-restaurant-external-id', RESTAURANT],
        ['toast-transaction-guid', randomUUID()],
      ]);
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ transactionStatus: 'ERROR_INVALID_INPUT_PROPERTIES', message: expect.stringContaining('checkTransactionInformation.loyaltyIdentifier') });
      const noGuid = await register({ type: 'SEARCH', phone: '+15550001111' }, RESTAURANT, (headers) => delete headers['toast-transaction-guid']);
      expect(noGuid.body).toEqual({ transactionStatus: 'ERROR_INVALID_INPUT_PROPERTIES', message: expect.stringContaining('Toast-Transaction-GUID') });
    });

    it('the metrics count register calls by type and status, and time SEARCH and INQUIRE', async () => {
      const ann = guest();
      await register({ type: 'SEARCH', phone: ann.phone });
      const text = (await request(h.bridge.url).get('/metrics').set('authorization', `Bearer ${ADMIN_TOKEN}`)).text;
      expect(text).toMatch(/bridge_register_calls_total\{pos="toast",type="search",status="accepted"\} [1-9]/);
      expect(text).toMatch(/bridge_register_read_duration_seconds_count\{pos="toast",type="search"\} [1-9]/);
    });
  });
}
