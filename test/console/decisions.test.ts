/**
 * The console's second version (issue 18), driven as a person would in Debian's Chromium against a
 * real bridge, the loyalty simulator and its fake Shopify: the evidence the loyalty history gives
 * for an in-doubt reversal and the outcome a person chooses from it (none chosen for them, the
 * outcomes reached with Tab); a backfill started from a three-way report's row and from a dead
 * letter whose order the ledger lacks, and the records a replay then created; where a record came
 * from and the payload the POS sent (masked until asked for, audited); order ids found by their
 * beginning in any case, customers by phone or email, merchants picked from a list, ticks kept
 * across searches; a bulk action over more than 100 records refused before any confirmation; and
 * every page at a phone's width with nothing wider than the screen. Screenshots as in
 * console.test.ts: into docs/screenshots/ with UPDATE_SCREENSHOTS=1, else a temporary folder.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import request from 'supertest';
import { gone, launchChromium, submitSearch, openConsole, overflow, PHONE, seriousViolations, visible, type ConsolePage, closeWatched, goTo, signIn } from '../support/browser.js';
import { sale } from '../support/backfill-pos.js';
import { ADMIN_TOKEN, checkout, eventually, startHarness, type Harness } from '../support/harness.js';
import { postRaw } from '../support/webhooks.js';

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? fileURLToPath(new URL('../../docs/screenshots/', import.meta.url)) : `${mkdtempSync(join(tmpdir(), 'console-screenshots-'))}/`;
const TEST_MS = 90_000;
/** The Shopify app's client secret: what the fake signs webhooks with and the bridge checks. */
const SHOPIFY_SECRET = 'shpss_decisions_secret_0123456789';
const HARBOUR_SHOP = 'harbour.myshopify.com';
const QUAY_SHOP = 'quay.myshopify.com';
const PIER_SHOP = 'pier.myshopify.com';
/** The bridge's bulk limit (BULK_MAX): one record more is refused before any confirmation. */
const CROWD = 101;

let h: Harness;
let browser: Browser;
let open: ConsolePage | undefined;
const merchants: Record<string, { adminToken: string; posToken: string }> = {};

const admin = (method: 'get' | 'post', path: string, token = ADMIN_TOKEN) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${token}`);

/** A merchant at the simulator and in the bridge, with a Shopify shop in the fake when `shop` is given. */
async function createMerchant(id: string, { apiKey, shop }: { apiKey?: boolean; shop?: string } = {}) {
  const appToken = `app-${id}-${randomBytes(8).toString('hex')}`;
  const key = apiKey ? `key-${id}-${randomBytes(8).toString('hex')}` : undefined;
  h.sim.addMerchant({ id, appToken, ...(key ? { apiKey: key } : {}) });
  // The shop's account in the fake, as it is (a shop that sold before the merchant was created) or new.
  const account = shop ? (h.sim.pos.shopify.accounts().find((a) => a.shop === shop) ?? h.sim.pos.shopify.addAccount({ shop })) : undefined;
  const res = await admin('post', '/v1/admin/merchants').send({
    id,
    loyalty: { appToken, ...(key ? { apiKey: key } : {}) },
    ...(account ? { pos: { shopify: { shopDomain: account.shop, accessToken: account.accessToken } } } : {}),
  });
  expect(res.status).toBe(201);
  merchants[id] = { adminToken: res.body.adminToken, posToken: res.body.posToken };
}

function post(merchant: string, path: string, body: unknown) {
  return request(h.bridge.url).post(path).set('authorization', `Bearer ${merchants[merchant]!.posToken}`).set('content-type', 'application/json').send(JSON.stringify(body));
}

/** Delivers the fake Shopify's signed webhook for `id` (an order, or a refund for refunds/create). */
async function shopifyWebhook(shop: string, topic: 'orders/paid' | 'refunds/create', id: string | number) {
  const delivery = h.sim.pos.shopify.webhook(shop, { topic, id, secret: SHOPIFY_SECRET });
  return postRaw(`${h.bridge.url}/v1/webhooks/shopify`, delivery.body, Object.entries(delivery.headers));
}

/** Waits (polling, each read asserted) until the lead's API serves what a test needs: the route in src/http/routes/admin.ts. */
const recordOf = async (merchantId: string, transactionId: string) => (await admin('get', `/v1/admin/transactions/${encodeURIComponent(transactionId)}?merchantId=${merchantId}`)).body;

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const shopify = { webhookSecret: SHOPIFY_SECRET, apiBaseUrl: '' };
  // No worker: nothing in doubt is settled behind the person's back; no API key for the default merchant.
  h = await startHarness({ withApiKey: false, overrides: { startWorker: false, secretsKey: randomBytes(32).toString('base64'), posSettings: { shopify } } });
  // The Shopify app's API is the simulator's fake (known once the simulator listens).
  await h.restart({ posSettings: { shopify: { ...shopify, apiBaseUrl: `${h.simServer.url}/shopify/{shop}`, accessTokenHeader: 'X-Shopify-Access-Token' } } });

  // harbour: its loyalty history can be read (an API key), and it has a Shopify shop.
  await createMerchant('harbour', { apiKey: true, shop: HARBOUR_SHOP });
  const harbour = (body: Record<string, unknown>) => post('harbour', '/v1/checkouts/generic', checkout(body));
  expect((await harbour({ orderId: 'HB-100', customer: { phone: '+15550007001', email: 'rita.moss@example.test' } })).body.status).toBe('accrued');
  expect((await harbour({ orderId: 'HB-101', customer: { phone: '+15550007002' } })).body.status).toBe('accrued');
  expect((await harbour({ orderId: 'hb-200', customer: { phone: '+15550007001' } })).body.status).toBe('accrued');
  // An in-doubt reversal: the loyalty service reversed it and the answer was lost on the way back.
  // No reversal of this loyalty service was confirmed before it, so nothing tells the bridge how
  // its history shows one: it waits for a person.
  expect((await harbour({ orderId: 'HB-300', customer: { phone: '+15550007003' } })).body.status).toBe('accrued');
  h.sim.merchant('harbour').faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
  await post('harbour', '/v1/refunds/generic', { orderId: 'HB-300', refundId: 'RHB-300' });
  const inDoubt = await recordOf('harbour', 'generic:HB-300');
  expect(inDoubt).toMatchObject({ status: 'in_doubt', reversal: { state: 'in_doubt' } });
  expect(h.sim.merchant('harbour').books().transactions['generic:HB-300']!.reversals).toBe(1);

  // quay: a Shopify shop, no API key; one accrual the loyalty service refused, waiting for a person.
  await createMerchant('quay', { shop: QUAY_SHOP });
  h.sim.merchant('quay').faults.inject({ kind: 'result_failure', on: 'accrue' });
  expect((await post('quay', '/v1/checkouts/generic', checkout({ orderId: 'QY-1', customer: { phone: '+15550007060' } }))).body.status).toBe('failed');
  // crowd: more records than one bulk action takes (no customer: recorded as skipped, nothing sent).
  await createMerchant('crowd');
  for (let i = 0; i < CROWD; i++) expect((await post('crowd', '/v1/checkouts/generic', checkout({ orderId: `CR-${String(i).padStart(3, '0')}`, customer: undefined }))).body.status).toBe('skipped');

  browser = await launchChromium();
}, TEST_MS);

afterEach(async () => {
  // Whatever a test did in the page, it loaded nothing from elsewhere and broke no policy.
  const watched = open;
  open = undefined;
  await closeWatched(watched);
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

async function signedIn(token = ADMIN_TOKEN, viewport?: { width: number; height: number }): Promise<Page> {
  open = await openConsole(browser, h.bridge.url, viewport);
  return signIn(open.page, token);
}

async function screenshot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage });
}

/** The record's page, opened by its route. */
async function recordPage(page: Page, merchantId: string, transactionId: string): Promise<void> {
  await page.goto(`/admin/#/transactions/${merchantId}/${encodeURIComponent(transactionId)}`);
  await visible(page.getByRole('heading', { level: 1, name: `Record ${transactionId}` }));
}

/** The three-way report of `merchantId` for today, read from the Reconcile page. */
async function readReport(page: Page, merchantId: string): Promise<void> {
  await goTo(page, 'Reconcile', 'Reconcile');
  await page.getByLabel('Merchant').selectOption(merchantId);
  await page.getByRole('button', { name: 'Read report' }).click();
  await visible(page.getByText(new RegExp(`^Merchant ${merchantId}, from .* UTC to .* UTC \\(not included\\):`)));
}

describe('evidence where the decision is made', () => {
  it('resolves an in-doubt reversal from the loyalty history it shows: no outcome chosen for the person, the outcomes reached with Tab', async () => {
    // What the API reads from the history (it changes nothing): the page must show this, not a guess of its own.
    const evidence = (await admin('get', '/v1/admin/transactions/generic%3AHB-300/evidence?merchantId=harbour')).body;
    expect(evidence).toMatchObject({ transactionId: 'generic:HB-300', merchantId: 'harbour', question: 'reversal' });
    // The reversal the loyalty service made: −59.97 on the record's card, a candidate.
    // The reversal the loyalty service made: −59.97 on the record's card, claimed by no record. Whether
    // the bridge counts it as a candidate depends on what it has learned of this service's reversals
    // (nothing yet here): the page shows it either way, marked as the API says.
    const reversal = evidence.operations.find((o: { purchaseSum?: number; claimedBy?: string }) => o.purchaseSum === -59.97 && !o.claimedBy);
    expect(reversal).toBeDefined();
    const points = (n: number | undefined) => (n === undefined ? '' : String(n).replace(/^-/, '\u2212'));

    const page = await signedIn();
    await recordPage(page, 'harbour', 'generic:HB-300');
    const section = page.getByRole('region', { name: 'Evidence from the loyalty history' });
    // The API's why, in its words (up to a time or an amount in cents, which the page formats).
    const words = String(evidence.why).split(/\d{4}-\d{2}-\d{2}T|-?\d+(?: cents?|-cent)\b/)[0]!.trim();
    expect(words.length).toBeGreaterThan(10);
    await visible(section.locator('.reading').filter({ hasText: words }));
    const operations = await visible(section.getByRole('table', { name: /^Operations on its cards in that time/ }));
    const row = operations.getByRole('row').filter({ has: page.getByRole('cell', { name: String(reversal.id), exact: true }) });
    // Labelled by what it is (the service may name a reversal's event "Points earned"), with the balance's arithmetic.
    expect(reversal.kind).toBe('reversal');
    expect(reversal.balance).toBe(reversal.balanceBefore + reversal.amount);
    expect((await row.getByRole('cell').allTextContents()).slice(3)).toEqual([
      expect.stringMatching(/^Reversal \(the service's event /),
      '−59.97 USD',
      points(reversal.amount),
      `${points(reversal.balanceBefore)} ${reversal.amount < 0 ? '−' : '+'} ${points(Math.abs(reversal.amount))} = ${points(reversal.balance)}`,
      '',
      (reversal.mayBeOf ?? []).join(', '),
      reversal.candidate ? 'candidate' : 'not a candidate',
      expect.stringContaining(reversal.why.split(/\d/)[0]),
    ]);
    // Every operation the API read is listed, each marked as it says.
    expect(await operations.locator('tbody tr').count()).toBe(evidence.operations.length);
    await screenshot(page, 'evidence');
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Resolve…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Resolve generic:HB-300' }));
    // What the history shows comes first in the dialog too; no outcome is chosen for the person.
    await visible(dialog.getByRole('heading', { level: 3, name: 'What the loyalty history shows' }));
    await visible(dialog.getByText(`Operation ${reversal.id} on card ${reversal.cardId}: −59.97 USD at`));
    const radios = dialog.getByRole('radio');
    expect(await radios.count()).toBeGreaterThan(1);
    for (const radio of await radios.all()) expect(await radio.isChecked()).toBe(false);
    // Going ahead without an outcome is refused, in words.
    await dialog.getByLabel('Reason').fill('The history shows the reversal of −59.97 on the card');
    await dialog.getByRole('button', { name: 'Resolve', exact: true }).click();
    await visible(dialog.getByRole('alert').filter({ hasText: 'Choose an outcome' }));
    expect((await recordOf('harbour', 'generic:HB-300')).status).toBe('in_doubt');

    // By keyboard alone: the dialog starts at its title; Tab reaches the outcomes, Space chooses.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    await page.getByRole('button', { name: 'Resolve…' }).focus();
    await page.keyboard.press('Enter');
    const again = await visible(page.getByRole('dialog', { name: 'Resolve generic:HB-300' }));
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('confirm-title');
    await page.keyboard.press('Tab');
    const focused = () => page.evaluate(() => ({ type: (document.activeElement as HTMLInputElement | null)?.type, value: (document.activeElement as HTMLInputElement | null)?.value, id: document.activeElement?.id }));
    expect(await focused()).toMatchObject({ type: 'radio', value: 'reversed' });
    await page.keyboard.press('Space');
    expect(await again.getByRole('radio', { name: 'Reversed', exact: true }).isChecked()).toBe(true);
    await visible(again.getByText('the record becomes reversed'));
    await page.keyboard.press('Tab');
    expect(await focused()).toMatchObject({ id: 'confirm-reason' });
    await page.keyboard.type(`Operation ${reversal.id} in the history is the reversal of −59.97 on its card`);
    // Back with Shift+Tab: the outcome chosen, then forward to the button that does it.
    await page.keyboard.press('Shift+Tab');
    expect(await focused()).toMatchObject({ type: 'radio', value: 'reversed' });
    await screenshot(page, 'resolve-evidence', false);
    expect(await seriousViolations(page)).toEqual([]);
    await again.getByRole('button', { name: 'Resolve', exact: true }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.locator('.facts').getByText('Reversed', { exact: true }));
    const after = await recordOf('harbour', 'generic:HB-300');
    expect(after.status).toBe('reversed');
    // Nothing was sent again: the loyalty service reversed it once.
    expect(h.sim.merchant('harbour').books().transactions['generic:HB-300']!.reversals).toBe(1);
    const audit = (await admin('get', '/v1/admin/audit?merchantId=harbour')).body.items;
    expect(audit).toContainEqual(expect.objectContaining({ action: 'resolve reversed', target: 'generic:HB-300', reason: `Operation ${reversal.id} in the history is the reversal of −59.97 on its card` }));
  }, TEST_MS);
});

describe('next steps are buttons', () => {
  it('starts a backfill from a three-way report row that advises one, shows its answer, and reads the report again', async () => {
    // A paid sale in harbour's Shopify shop whose webhook never arrived.
    const order = h.sim.pos.shopify.addOrder(HARBOUR_SHOP, sale('+15550007010', new Date().toISOString())) as unknown as { id: number };
    const transactionId = `shopify:${order.id}`;
    expect((await admin('get', `/v1/admin/transactions/${encodeURIComponent(transactionId)}?merchantId=harbour`)).status).toBe(404);

    const page = await signedIn();
    await readReport(page, 'harbour');
    const differences = await visible(page.getByRole('table', { name: 'Differences', exact: true }));
    const row = differences.getByRole('row').filter({ hasText: String(order.id) }).filter({ hasText: 'Paid in the POS, not in the ledger' });
    await visible(row);
    // Not in the ledger: named, not linked to a page that would say "no such record".
    expect(await row.getByRole('link', { name: transactionId }).count()).toBe(0);
    await visible(row.getByText('(not in the ledger)'));
    const backfill = row.getByRole('link', { name: /^Backfill shopify since / });
    await visible(backfill);
    // The report fits the page at 1280 px: nothing wider than the window.
    const fit = await overflow(page);
    expect(fit.wider).toEqual([]);
    expect(fit.scrollWidth).toBeLessThanOrEqual(fit.viewport);
    await screenshot(page, 'reconcile-backfill');
    expect(await seriousViolations(page)).toEqual([]);

    await backfill.click();
    await visible(page.getByRole('heading', { level: 1, name: 'Backfill' }));
    expect(await page.getByLabel('Merchant').inputValue()).toBe('harbour');
    expect(await page.getByLabel('POS', { exact: true }).inputValue()).toBe('shopify');
    expect(await page.getByLabel('Since (UTC)').inputValue()).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/);
    await page.getByRole('button', { name: 'Start backfill' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'What the pass found' }));
    await visible(page.getByText(/^Merchant harbour, shopify, from .* UTC to .* UTC \(not included\): \d+ orders? (and|or) refunds? read in \d+ pages?; 1 new, \d+ already known, 0 refused, 0 unpaid\.$/));
    await visible(page.getByRole('link', { name: transactionId }));
    await screenshot(page, 'backfill');
    expect(await seriousViolations(page)).toEqual([]);
    // Recorded, and accrued once.
    expect((await recordOf('harbour', transactionId)).status).toBe('accrued');
    expect(h.sim.merchant('harbour').books().transactions[transactionId]!.accruals).toBe(1);

    // Back to the same report: the difference is gone.
    await page.getByRole('link', { name: 'Read the three-way report again' }).click();
    await visible(page.getByText(/^Merchant harbour, from .* UTC to .* UTC \(not included\):/));
    expect(await page.getByRole('row').filter({ hasText: String(order.id) }).filter({ hasText: 'Paid in the POS, not in the ledger' }).count()).toBe(0);
  }, TEST_MS);

  it('backfills the order a dead letter lacks ("no order … in the ledger"), then replays the letter', async () => {
    // A partial refund at quay's till whose sale's webhook never came: the refund's webhook cannot be measured.
    const order = h.sim.pos.shopify.addOrder(QUAY_SHOP, sale('+15550007020', new Date().toISOString())) as unknown as { id: number };
    const refund = h.sim.pos.shopify.addRefund(QUAY_SHOP, { orderId: String(order.id), lines: [{ line: 0, quantity: 1 }] }) as unknown as { id: number };
    const delivered = await shopifyWebhook(QUAY_SHOP, 'refunds/create', refund.id);
    expect(delivered.status).toBe(202);
    const result = delivered.body.results[0];
    expect(result).toMatchObject({ action: 'dead_lettered', reason: expect.stringMatching(/^no order .* in the ledger/) });
    const letterId = result.deadLetterId as string;
    const transactionId = `shopify:${order.id}`;

    const page = await signedIn();
    await goTo(page, 'Dead letters', 'Dead letters');
    await page.getByRole('table', { name: 'Dead letters, newest first' }).getByRole('link', { name: letterId }).click();
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${letterId}` }));
    await visible(page.getByRole('heading', { level: 2, name: 'Next step: backfill its order' }));
    await screenshot(page, 'dead-letter-backfill');
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('link', { name: 'Backfill shopify for merchant quay…' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Backfill' }));
    expect(await page.getByLabel('Merchant').inputValue()).toBe('quay');
    expect(await page.getByLabel('POS', { exact: true }).inputValue()).toBe('shopify');
    await page.getByRole('button', { name: 'Start backfill' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'What the pass found' }));
    await visible(page.getByRole('link', { name: transactionId, exact: true }));
    // The sale and its refund, read back: the sale reversed, what remains of it accrued.
    expect((await recordOf('quay', transactionId)).status).toBe('reversed');

    // Back to the letter, and run it again: its refund is in the ledger now, so nothing is done twice.
    await page.getByRole('link', { name: `Back to dead letter ${letterId}` }).click();
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${letterId}` }));
    await page.getByRole('button', { name: 'Replay' }).click();
    const replay = await visible(page.getByRole('dialog', { name: `Replay dead letter ${letterId}` }));
    await replay.getByLabel('Reason').fill('Its order is in the ledger now (backfill)');
    await replay.getByRole('button', { name: 'Replay' }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.locator('.facts').getByText('resolved', { exact: true }));
    expect(await page.getByRole('heading', { level: 2, name: 'Next step: backfill its order' }).count()).toBe(0);
    expect(h.sim.merchant('quay').books().transactions[transactionId]!.reversals).toBe(1);
    // The run links the record it acted on (its refund's order, found already reversed), though it created none.
    const runs = page.getByRole('table', { name: 'Every run since it was kept, oldest first' });
    await visible(runs.getByRole('link', { name: transactionId, exact: true }));
    // The record says where it came from: the backfill.
    await recordPage(page, 'quay', transactionId);
    await visible(page.locator('.facts').getByText('Reversed', { exact: true }));
    await visible(page.getByRole('region', { name: 'Where it came from' }).getByText(/^backfill: read back from the POS/));
  }, TEST_MS);

  it('replays a letter once its cause is fixed: the run links the record it created, and the record its dead letter', async () => {
    // A sale at a shop no merchant had yet: its webhook is kept as a dead letter.
    h.sim.pos.shopify.addAccount({ shop: PIER_SHOP });
    const order = h.sim.pos.shopify.addOrder(PIER_SHOP, sale('+15550007050', new Date().toISOString())) as unknown as { id: number };
    const delivered = await shopifyWebhook(PIER_SHOP, 'orders/paid', order.id);
    expect(delivered.status).toBe(202);
    expect(delivered.body.results[0]).toMatchObject({ action: 'dead_lettered', reason: expect.stringContaining(PIER_SHOP) });
    const letterId = delivered.body.results[0].deadLetterId as string;
    const transactionId = `shopify:${order.id}`;
    // The merchant is created with the shop: the letter can go through now.
    await createMerchant('pier', { shop: PIER_SHOP });

    const page = await signedIn();
    await page.goto(`/admin/#/dead-letters/${letterId}`);
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${letterId}` }));
    await page.getByRole('button', { name: 'Replay' }).click();
    const replay = await visible(page.getByRole('dialog', { name: `Replay dead letter ${letterId}` }));
    await replay.getByLabel('Reason').fill('The pier shop is a merchant now');
    await replay.getByRole('button', { name: 'Replay' }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.locator('.facts').getByText('resolved', { exact: true }));
    // The run names the record it created, linked.
    const runs = await visible(page.getByRole('table', { name: 'Every run since it was kept, oldest first' }));
    const run = runs.getByRole('row').filter({ has: page.getByRole('cell', { name: 'operator', exact: true }) });
    await visible(run.getByRole('link', { name: transactionId }));
    await screenshot(page, 'dead-letter-replayed');
    expect(await seriousViolations(page)).toEqual([]);
    await run.getByRole('link', { name: transactionId }).click();
    await visible(page.getByRole('heading', { level: 1, name: `Record ${transactionId}` }));
    expect((await recordOf('pier', transactionId)).status).toBe('accrued');
    // And the record names the letter it came from.
    const origin = page.getByRole('region', { name: 'Where it came from' });
    await visible(origin.getByText('a replay of a dead letter', { exact: true }));
    await origin.getByRole('link', { name: `dead letter ${letterId}` }).click();
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${letterId}` }));
  }, TEST_MS);

  it("links a record to what created it: the webhook's event, the payload the POS sent (masked until shown, which is audited)", async () => {
    const order = h.sim.pos.shopify.addOrder(QUAY_SHOP, sale('+15550007030', new Date().toISOString())) as unknown as { id: number };
    const delivered = await shopifyWebhook(QUAY_SHOP, 'orders/paid', order.id);
    expect(delivered.status).toBe(200);
    const { key, transactionId } = delivered.body.results[0] as { key: string; transactionId: string };
    const detail = await recordOf('quay', transactionId);
    // The event's key as the bridge keeps it (the delivery's key, within its merchant).
    expect(detail.origin).toMatchObject({ via: 'webhook', webhookKey: expect.stringContaining(key), payload: true });

    const page = await signedIn();
    await recordPage(page, 'quay', transactionId);
    const origin = page.getByRole('region', { name: 'Where it came from' });
    await visible(origin.getByText('a webhook delivery from the POS', { exact: true }));
    await visible(origin.getByText(detail.origin.webhookKey, { exact: true }));
    // The payload is folded away (most of a page's length): opened on request.
    const fold = await visible(origin.getByText('What the POS sent', { exact: true }));
    expect(await origin.getByRole('heading', { level: 3, name: /phone numbers and emails masked/ }).isVisible()).toBe(false);
    await fold.click();
    await visible(origin.getByRole('heading', { level: 3, name: /phone numbers and emails masked/ }));
    expect(await page.getByText('+15550007030').count()).toBe(0);
    await screenshot(page, 'record-origin');
    expect(await seriousViolations(page)).toEqual([]);
    await origin.getByRole('button', { name: 'Show the payload unmasked' }).click();
    await visible(origin.getByText('+15550007030').first());
    expect(await origin.getByRole('button', { name: 'Show the payload unmasked' }).count()).toBe(0);
    const audit = (await admin('get', '/v1/admin/audit?merchantId=quay')).body.items as { action: string; target: string }[];
    expect(audit.filter((e) => e.target === transactionId && /^unmask/.test(e.action) && e.action !== 'unmask record')).toHaveLength(1);
  }, TEST_MS);

  it("shows a check the register accrued as a Toast record made at the register: the guest's card by its end, and Toast's key nowhere, even unmasked", async () => {
    // A restaurant whose cashier found the guest with Rewards: Toast's ACCRUE names the card (src/core/register.ts).
    const restaurant = 'a0000000-0000-4000-8000-0000000000d1';
    const loyaltyKey = `toast-console-key-${randomBytes(12).toString('hex')}`;
    const appToken = `app-tavern-${randomBytes(8).toString('hex')}`;
    const tavern = h.sim.addMerchant({ id: 'tavern', appToken, apiKey: `key-tavern-${randomBytes(8).toString('hex')}` });
    h.sim.pos.toast.addAccount({ restaurantGuid: restaurant, loyaltyKey, currency: 'USD' });
    expect((await admin('post', '/v1/admin/merchants').send({ id: 'tavern', loyalty: { appToken, apiKey: tavern.apiKey }, pos: { toast: { restaurantGuid: restaurant, loyaltyKey } } })).status).toBe(201);
    const { cardIds } = h.sim.merchant('tavern').addCustomer({ phone: '+15550007090', firstName: 'Ann', surname: 'Lee' });
    const card = cardIds[0]!;
    const order = randomUUID();
    const held = h.sim.pos.toast.addOrder(restaurant, { id: order, lines: [{ name: 'Burger', unitPrice: 1500, quantity: 1, tax: 94 }] });
    const transactionId = `toast:${order}:${held.checks[0]!.guid as string}`;
    const call = h.sim.pos.toast.loyaltyCall(restaurant, { type: 'ACCRUE', orderId: order, identifier: card });
    const answer = await postRaw(`${h.bridge.url}/v1/toast/loyalty`, call.body, Object.entries(call.headers));
    expect([answer.status, answer.body]).toEqual([200, { transactionStatus: 'ACCEPT' }]);
    await eventually(() => recordOf('tavern', transactionId), (r) => r.status === 'accrued', 8000, { what: `${transactionId} accrued` });

    const page = await signedIn();
    await recordPage(page, 'tavern', transactionId);
    // Like any Toast record: its POS, its order, its status; and where it came from, in words.
    await visible(page.getByText('Accrued', { exact: true }).first());
    const origin = page.getByRole('region', { name: 'Where it came from' });
    await visible(origin.getByText('the register, while the sale was open (Toast\u2019s loyalty integration)', { exact: true }));
    // The card is shown by its end only; the whole serial never reaches the page.
    // The guest as the record names them: the card by its end only (docs/operators.md); the results per card keep it whole, to look up in the loyalty service.
    await visible(page.getByText(`card …${card.slice(-4)}`, { exact: true }));
    await visible(page.locator('td[data-label="Card"]').getByText(card, { exact: true }));
    await (await visible(origin.getByText('What the POS sent', { exact: true }))).click();
    await origin.getByRole('button', { name: 'Show the payload unmasked' }).click();
    await gone(origin.getByRole('button', { name: 'Show the payload unmasked' }));
    // Unmasked, the body is Toast's whole (its loyaltyIdentifier), and the static key it authenticated with is not kept at all.
    await visible(origin.getByText(`"loyaltyIdentifier": "${card}"`).first());
    expect(await page.content()).not.toContain(loyaltyKey);
    expect(await seriousViolations(page)).toEqual([]);
    // The admin list finds it by its order, as any Toast record.
    const listed = (await admin('get', `/v1/admin/transactions?merchantId=tavern&orderId=${order}`)).body.items as { transactionId: string; pos: string }[];
    expect(listed.map((r) => [r.transactionId, r.pos])).toEqual([[transactionId, 'toast']]);
  }, TEST_MS);
});

describe('finding things', () => {
  it('finds order ids by their beginning in any case, merchants from a list, and keeps ticks across searches until cleared', async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await visible(page.getByText('Its beginning is enough, in any case: h-1 finds H-1 and H-10.'));
    // Every merchant the bridge has, from its list: nothing to type.
    const options = await page.getByLabel('Merchant').locator('option').allTextContents();
    expect(options).toEqual(expect.arrayContaining(['all merchants', 'default', 'harbour', 'quay', 'crowd']));
    const search = async (orderId: string, heading: string) => {
      await page.getByLabel('POS order id').fill(orderId);
      await page.getByLabel('Merchant').selectOption('harbour');
      await submitSearch(page);
      await visible(page.getByRole('heading', { level: 2, name: heading }));
    };
    const table = page.getByRole('table', { name: 'Records, newest first' });
    // "hb-1": HB-100 and HB-101 (another case, a beginning), not hb-200.
    await search('hb-1', '2 records match');
    expect((await table.getByRole('link').allTextContents()).sort()).toEqual(['generic:HB-100', 'generic:HB-101']);
    await page.getByRole('checkbox', { name: 'Select generic:HB-100' }).check();
    await visible(page.getByText('1 record ticked, kept across pages and searches until you clear them.'));
    // A new search: the tick stays, and the bulk form counts it.
    await search('HB-2', '1 record matches');
    await visible(table.getByRole('link', { name: 'generic:hb-200' }));
    await page.getByRole('checkbox', { name: 'Select generic:hb-200' }).check();
    await visible(page.getByText('2 records ticked, kept across pages and searches until you clear them.'));
    await visible(page.getByRole('radio', { name: 'The records ticked (2)' }));
    await search('hb-1', '2 records match');
    expect(await page.getByRole('checkbox', { name: 'Select generic:HB-100' }).isChecked()).toBe(true);
    expect(await page.getByRole('checkbox', { name: 'Select generic:HB-101' }).isChecked()).toBe(false);
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Retry 2 records' }));
    await visible(dialog.getByText('The 2 records selected: generic:HB-100, generic:hb-200.'));
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    await page.getByRole('button', { name: 'Clear the selection' }).click();
    await visible(page.getByText('No record ticked.'));
    expect(await page.getByRole('checkbox', { name: 'Select generic:HB-100' }).isChecked()).toBe(false);
  }, TEST_MS);

  it("finds a customer's records by phone or email within a merchant, and the search is audited", async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await visible(page.getByText(/A phone number, email or card serial, looked up within the merchant chosen/));
    // A search of every record first, then one by customer without a merchant.
    await submitSearch(page);
    await visible(page.getByRole('table', { name: 'Records, newest first' }));
    // Within one merchant: asked for, before anything is searched.
    await page.getByLabel('Customer').fill('+15550007001');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await visible(page.getByRole('alert').filter({ hasText: 'Choose the merchant: a customer is looked up within one merchant.' }));
    // The list of the search before (every record, on opening the page) is not left under the question.
    expect(await page.getByRole('table', { name: 'Records, newest first' }).count()).toBe(0);
    await page.getByLabel('Merchant').selectOption('harbour');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '2 records match' }));
    const table = page.getByRole('table', { name: 'Records, newest first' });
    expect((await table.getByRole('link').allTextContents()).sort()).toEqual(['generic:HB-100', 'generic:hb-200']);
    // The phone number is not kept in the page's address.
    expect(page.url()).not.toContain('5550007001');
    await screenshot(page, 'customer-search');
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByLabel('Customer').fill('rita.moss@example.test');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '1 record matches' }));
    await visible(table.getByRole('link', { name: 'generic:HB-100' }));
    const audit = (await admin('get', '/v1/admin/audit?merchantId=harbour')).body.items as { action: string }[];
    expect(audit.filter((e) => e.action === 'search customer').length).toBeGreaterThanOrEqual(2);
  }, TEST_MS);
});

describe('safe bulk', () => {
  it(`refuses a bulk action over more than 100 records before any confirmation, and asks for a narrower selection`, async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Merchant').selectOption('crowd');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: `${CROWD} records match` }));
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    // By the search's filter: 101 is more than a bulk action takes, said before any dialog.
    await visible(page.getByText('More than 100 match: a bulk action takes at most 100. Narrow the search first.'));
    await page.getByRole('radio', { name: `Every record matching this search (${CROWD})` }).check();
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    await visible(page.getByRole('alert').filter({ hasText: `${CROWD} records match this search: a bulk action takes at most 100. Narrow the search` }));
    expect(await page.getByRole('dialog').count()).toBe(0);
    await screenshot(page, 'bulk-refused');
    expect(await seriousViolations(page)).toEqual([]);

    // Ticked page by page (kept across pages): 101 ticked is refused too, before any dialog.
    for (const n of [1, 2, 3]) {
      if (n > 1) {
        await page.getByRole('navigation', { name: 'Result pages' }).getByRole('link', { name: 'Next page' }).click();
        await visible(page.getByText(`Page ${n} of 3`));
      }
      await page.getByLabel('Select every record on this page').check();
    }
    await visible(page.getByText(`${CROWD} records ticked, kept across pages and searches until you clear them: more than the 100 a bulk action takes.`));
    await page.getByRole('radio', { name: `The records ticked (${CROWD})` }).check();
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    await visible(page.getByRole('alert').filter({ hasText: `${CROWD} records ticked: a bulk action takes at most 100.` }));
    expect(await page.getByRole('dialog').count()).toBe(0);
    // One fewer, and the action may be reviewed (and is cancelled here: nothing is done).
    const last = page.getByRole('table', { name: 'Records, newest first' }).getByRole('checkbox').first();
    await last.uncheck();
    await visible(page.getByText('100 records ticked, kept across pages and searches until you clear them.'));
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Retry 100 records' }));
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect((await admin('get', '/v1/admin/audit?merchantId=crowd')).body.items).toEqual([]);
  }, TEST_MS);
});

describe('safe bulk, one click never reaches further than the person saw (contract v1.5)', () => {
  it('a reverse over every merchant shows whose records and how much, asks to tick each merchant and type the count, and does nothing until then', async () => {
    await createMerchant('dock');
    for (let i = 0; i < 11; i++) expect((await post('dock', '/v1/checkouts/generic', checkout({ orderId: `DK-${i}`, customer: { phone: `+155500083${String(i).padStart(2, '0')}` } }))).body.status).toBe('accrued');
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await page.getByRole('checkbox', { name: 'Accrued', exact: true }).check();
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: /records match$/ }));
    await page.getByLabel('Action', { exact: true }).selectOption('reverse');
    await page.getByRole('radio', { name: /^Every record matching this search/ }).check();
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: /^Reverse \d+ records$/ }));
    const byMerchant = await visible(dialog.getByRole('table', { name: 'By merchant' }));
    expect(await byMerchant.getByRole('row').filter({ hasText: 'dock' }).getByRole('cell').allTextContents()).toEqual(['dock', '11']);
    expect(await byMerchant.getByRole('row').filter({ hasText: 'harbour' }).count()).toBe(1);
    await visible(dialog.getByText(/^Amount of the records it acts on: \d+\.\d\d USD; points their accruals earned: /));
    await dialog.getByLabel('Reason').fill('refunded at the till');
    await screenshot(page, 'bulk-reverse-every-merchant', false);
    expect(await seriousViolations(page)).toEqual([]);
    // Neither the merchants ticked nor the count typed: refused in the dialog, nothing sent.
    await dialog.getByRole('button', { name: /^Reverse \d+ records$/ }).click();
    await visible(dialog.getByRole('alert').filter({ hasText: 'tick each one to go ahead' }));
    for (const box of await dialog.getByRole('group', { name: /merchants whose records this reverses$/ }).getByRole('checkbox').all()) await box.check();
    await dialog.getByRole('button', { name: /^Reverse \d+ records$/ }).click();
    await visible(dialog.getByRole('alert').filter({ hasText: /^Type \d+, the number of records this acts on, to go ahead\.$/ }));
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect(h.sim.merchant('dock').books().reverseRequests).toBe(0);
    expect((await admin('get', '/v1/admin/audit?merchantId=dock')).body.items).toEqual([]);

    // One merchant's, with the count typed: done, each once.
    await page.getByLabel('Merchant').selectOption('dock');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '11 records match' }));
    await page.getByLabel('Action', { exact: true }).selectOption('reverse');
    await page.getByRole('radio', { name: 'Every record matching this search (11)' }).check();
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const one = await visible(page.getByRole('dialog', { name: 'Reverse 11 records' }));
    expect(await one.getByRole('group', { name: /merchants whose records this reverses$/ }).count()).toBe(0);
    await one.getByLabel('Reason').fill('refunded at the till');
    await one.getByLabel('Number of records').fill('11');
    await one.getByRole('button', { name: 'Reverse 11 records' }).click();
    await visible(page.getByText('Reverse: 11 done, 0 refused.').first());
    expect(h.sim.merchant('dock').books()).toMatchObject({ reverseRequests: 11, doubleReversals: [] });
  }, TEST_MS);

  it('acknowledges in bulk, and a retry says queued, then shows what came of it as it lands: failed again', async () => {
    await createMerchant('slip');
    for (const id of ['SL-1', 'SL-2']) {
      h.sim.merchant('slip').faults.inject({ kind: 'result_failure', on: 'accrue' });
      expect((await post('slip', '/v1/checkouts/generic', checkout({ orderId: id, customer: { phone: id === 'SL-1' ? '+15550008201' : '+15550008202' } }))).body.status).toBe('failed');
    }
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Merchant').selectOption('slip');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '2 records match' }));
    await page.getByRole('checkbox', { name: 'Select generic:SL-1' }).check();
    await page.getByLabel('Action', { exact: true }).selectOption('acknowledge');
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const ack = await visible(page.getByRole('dialog', { name: 'Acknowledge 1 record' }));
    await ack.getByLabel('Reason').fill('the card was closed for good');
    await ack.getByRole('button', { name: 'Acknowledge 1 record' }).click();
    await visible(page.getByText('Acknowledge: 1 done, 0 refused.').first());
    expect((await admin('get', '/v1/admin/attention?merchantId=slip')).body.items.map((i: { transactionId?: string }) => i.transactionId)).toEqual(['generic:SL-2']);

    // The retry is queued (the worker is off here); the loyalty service refuses it again on the pass.
    await page.getByRole('checkbox', { name: 'Select generic:SL-2' }).check();
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const retry = await visible(page.getByRole('dialog', { name: 'Retry 1 record' }));
    await retry.getByLabel('Reason').fill('the block was lifted, they say');
    await retry.getByRole('button', { name: 'Retry 1 record' }).click();
    await visible(page.getByText('Retry: 1 queued, 0 refused.').first());
    const landing = await visible(page.getByRole('table').filter({ has: page.getByRole('columnheader', { name: 'Status now' }) }));
    await visible(landing.getByText('Pending'));
    h.sim.merchant('slip').faults.inject({ kind: 'result_failure', on: 'accrue' });
    expect((await admin('post', '/v1/admin/reconcile?merchantId=slip')).status).toBe(200);
    await visible(landing.getByText('Failed'));
    await visible(page.getByText('Every record has landed.'));
    await screenshot(page, 'bulk-retry-landed', false);
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);
});

describe('fits a phone', () => {
  /** Nothing on the page wider than the phone's screen, and each table laid out as cards. */
  async function fitsThePhone(page: Page, what: string) {
    const fit = await overflow(page);
    expect({ what, wider: fit.wider }).toEqual({ what, wider: [] });
    expect(fit.scrollWidth).toBeLessThanOrEqual(PHONE.width);
    // Compact tables (a kind and its count) fit as they are; the others are laid out as cards.
    const tables = await page.locator('main table:not(.compact)').evaluateAll((tables) =>
      tables.map((table) => ({
        caption: table.querySelector('caption')?.textContent,
        cell: table.querySelector('tbody td') ? getComputedStyle(table.querySelector('tbody td')!).display : 'none',
        header: (table.querySelector('thead') as HTMLElement | null)?.getBoundingClientRect().height ?? 0,
      })),
    );
    expect(tables.length).toBeGreaterThan(0);
    // Rows as cards: cells stacked (block), the column headers kept for screen readers but not drawn.
    for (const table of tables) expect(table).toEqual({ caption: table.caption, cell: 'block', header: expect.any(Number) });
    for (const table of tables) expect(table.header).toBeLessThanOrEqual(1);
    // And every state a phone shows passes axe (WCAG 2.2) as the desktop's do.
    expect({ what, violations: await seriousViolations(page) }).toEqual({ what, violations: [] });
  }

  it('shows every page at 390 px with nothing wider than the screen: tables reflow into cards', async () => {
    const page = await signedIn(ADMIN_TOKEN, PHONE);
    await visible(page.getByRole('table', { name: /^Oldest first/ }));
    await fitsThePhone(page, 'attention');
    // A queue item is a short card (each cell's name beside its value), not a screen and a half of stacked lines.
    const cards = await page.locator('table.queue tbody tr').evaluateAll((rows) => rows.map((row) => Math.round(row.getBoundingClientRect().height)));
    expect(cards.length).toBeGreaterThan(0);
    expect(Math.max(...cards)).toBeLessThanOrEqual(360);
    await screenshot(page, 'phone-attention');
    expect(await seriousViolations(page)).toEqual([]);

    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Merchant').selectOption('harbour');
    await visible((await submitSearch(page)).getByRole('table', { name: 'Records, newest first' }));
    await fitsThePhone(page, 'search');

    await recordPage(page, 'harbour', 'generic:HB-100');
    await visible(page.getByRole('table', { name: 'Selections' }));
    await fitsThePhone(page, 'record');
    await screenshot(page, 'phone-record');
    expect(await seriousViolations(page)).toEqual([]);
    // An action's dialog fits the screen too (its padding inside its width), its controls 24 px or more.
    await page.getByRole('button', { name: 'Reverse', exact: true }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Reverse generic:HB-100' }));
    const box = (await dialog.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(PHONE.width);
    expect((await overflow(page)).wider).toEqual([]);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'phone-dialog', false);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));

    // A sale whose webhook never came: the report has a difference, with its backfill button, to lay out.
    const missing = h.sim.pos.shopify.addOrder(HARBOUR_SHOP, sale('+15550007040', new Date().toISOString())) as unknown as { id: number };
    await readReport(page, 'harbour');
    const row = page.getByRole('table', { name: 'Differences', exact: true }).getByRole('row').filter({ hasText: String(missing.id) });
    await visible(row.getByRole('link', { name: /^Backfill shopify since / }));
    await fitsThePhone(page, 'reconcile');
    await screenshot(page, 'phone-reconcile');

    await goTo(page, 'Dead letters', 'Dead letters');
    await page.getByLabel('Show').selectOption('all');
    await page.getByRole('button', { name: 'Show' }).click();
    const letters = await visible(page.getByRole('table', { name: 'Dead letters, newest first' }));
    await fitsThePhone(page, 'dead letters');
    await letters.getByRole('link').first().click();
    await visible(page.getByRole('heading', { level: 1, name: /^Dead letter / }));
    await visible(page.getByRole('heading', { level: 2, name: 'Delivery' }));
    await fitsThePhone(page, 'dead letter');

    await goTo(page, 'Backfill', 'Backfill');
    await visible(page.getByRole('table', { name: 'Accounts, with their watermark and last pass' }));
    await fitsThePhone(page, 'backfill');

    await goTo(page, 'Audit log', 'Audit log');
    await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    await fitsThePhone(page, 'audit');
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);
});

describe('asking the service about an ambiguous accrual', () => {
  it('offers "Ask the service…" on an accrual the history leaves ambiguous, says what it will do, and does it: the one that never happened is sent again', async () => {
    // Last in the file: its records of rita's would change what the searches above find.
    // One person, known to harbour's loyalty service by phone and email (HB-100), buys the same
    // thing twice under each: the first call is cut before the service commits it, the second
    // commits and its answer is lost. One operation, two accruals in doubt: the count cannot tell.
    const faults = h.sim.merchant('harbour').faults;
    faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await post('harbour', '/v1/checkouts/generic', checkout({ orderId: 'HB-400', customer: { phone: '+15550007001' } }))).body.status).toBe('in_doubt');
    expect((await post('harbour', '/v1/checkouts/generic', checkout({ orderId: 'HB-401', customer: { email: 'rita.moss@example.test' } }))).body.status).toBe('in_doubt');
    const askable = await eventually(
      async () => {
        await admin('post', '/v1/admin/reconcile?merchantId=harbour');
        return recordOf('harbour', 'generic:HB-400');
      },
      (r) => r.actions?.ask?.allowed === true,
      8000,
    );
    expect(askable.status).toBe('in_doubt');
    const books = () => h.sim.merchant('harbour').books();
    // Nothing asked yet (the reverses before are other records' refunds).
    const reversesBefore = books().reverseRequests;
    expect(books().transactions['generic:HB-400']).toBeUndefined();

    // The evidence names the rival and the operation both could own, and the page leads with why a person is needed.
    const evidence = (await admin('get', '/v1/admin/transactions/generic%3AHB-400/evidence?merchantId=harbour')).body;
    expect(evidence.reading).toBe('ambiguous');
    const shared = evidence.operations.filter((o: { candidate: boolean }) => o.candidate).map((o: { id: number }) => o.id);
    expect(shared).toHaveLength(1);
    expect(evidence.rivals).toEqual([{ transactionId: 'generic:HB-401', operationIds: shared }]);
    // The queue counts it as ambiguous, not as a plain doubt.
    const queued = (await admin('get', '/v1/admin/attention?merchantId=harbour')).body;
    expect(queued.items).toContainEqual(expect.objectContaining({ kind: 'ambiguous', transactionId: 'generic:HB-400' }));
    expect(queued.counts.ambiguous).toBeGreaterThanOrEqual(1);
    const page = await signedIn();
    await recordPage(page, 'harbour', 'generic:HB-400');
    const lead = page.getByRole('region', { name: 'Why it needs a person' });
    await visible(lead.getByText('Ambiguous match', { exact: true }));
    await visible(lead.getByText(/the operations history matches it and generic:HB-401 alike/));
    const rivals = page.getByRole('region', { name: 'Evidence from the loyalty history' }).locator('.rivals');
    await visible(rivals.getByText(`This record could own operation ${shared[0]}. So could:`));
    await visible(rivals.getByRole('listitem').filter({ has: page.getByRole('link', { name: 'generic:HB-401' }) }).filter({ hasText: `operation ${shared[0]}` }));
    await screenshot(page, 'ambiguous-evidence');
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Ask the service…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Ask the service generic:HB-400' }));
    await visible(dialog.getByText(/by reversing its transactionId: the service reverses only an accrual it made/));
    await screenshot(page, 'ask-the-service', false);
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByLabel('Reason').fill('The customer is at the counter');
    await dialog.getByRole('button', { name: 'Ask the service', exact: true }).click();
    await gone(page.getByRole('dialog'));
    // The service did not know HB-400: it never happened, and was sent again (once).
    const settled = await eventually(
      () => recordOf('harbour', 'generic:HB-400'),
      (r) => r.status === 'accrued',
      8000,
    );
    expect(settled.history.map((e: { event: string }) => e.event)).toContainEqual(expect.stringMatching(/^probe: the loyalty service does not know generic:HB-400/));
    await visible(page.locator('.facts').getByText('Accrued', { exact: true }));
    expect(books().transactions['generic:HB-400']).toMatchObject({ accruals: 1, reversals: 0 });
    expect(books().reverseRequests).toBe(reversesBefore + 1);
    // HB-401 then owns the one operation, by itself.
    await eventually(
      async () => {
        await admin('post', '/v1/admin/reconcile?merchantId=harbour');
        return recordOf('harbour', 'generic:HB-401');
      },
      (r) => r.status === 'accrued',
      8000,
    );
    expect(books().doubleAccruals).toEqual([]);
    expect((await admin('get', '/v1/admin/audit?merchantId=harbour')).body.items).toContainEqual(expect.objectContaining({ action: 'ask', target: 'generic:HB-400', reason: 'The customer is at the counter' }));
  }, TEST_MS);
});
