/**
 * The operator console (docs/operators.md "Console") driven as a person would, in Debian's Chromium: the
 * bridge and the loyalty simulator run for real over HTTP, elements are found by their role and
 * visible text, and every wait fails the test when what it waits for does not appear. The tests
 * take the screenshots the README shows: into docs/screenshots/ with UPDATE_SCREENSHOTS=1 (so a plain
 * test run leaves the checkout as it was), else into a temporary folder.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, Locator, Page } from 'playwright-core';
import request from 'supertest';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { CONSOLE_CSP, type ConsoleVocabulary } from '../../src/http/routes/console.js';
import { gone, launchChromium, openConsole, readableText, submitSearch, seriousViolations, visible, type ConsolePage, closeWatched, goTo, signIn } from '../support/browser.js';
import { ADMIN_TOKEN, checkout, postJson, startHarness, type Harness } from '../support/harness.js';
import { sale } from '../support/backfill-pos.js';
import { postRaw, signature } from '../support/webhooks.js';

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? fileURLToPath(new URL('../../docs/screenshots/', import.meta.url)) : `${mkdtempSync(join(tmpdir(), 'console-screenshots-'))}/`;
const TEST_MS = 60_000;

const MARKUP_ORDER_ID = '<img src=x id=injected onerror=alert(1)>';

/** A named operator's global token (ADMIN_TOKENS): her actions are recorded under her name. */
const ALICE_TOKEN = 'alice-operator-token-0123456789';
const shopify: PosSettings = { webhookSecret: 'shpss_console_secret_0123456789', apiBaseUrl: '' };
/** A Shopify shop in the simulator's fake, whose orders backfill and the three-way report read. */
const COVE_SHOP = 'cove.myshopify.com';

let h: Harness;
let browser: Browser;
/** A Shopify delivery the bridge could not carry out (an order without a total), kept as a dead letter. */
let deadLetterId: string;
let open: ConsolePage | undefined;
const merchants: Record<string, { adminToken: string; posToken: string }> = {};

const admin = (method: 'get' | 'post', path: string, token = ADMIN_TOKEN) => request(h.bridge.url)[method](path).set('authorization', `Bearer ${token}`);

/** A merchant installed at the simulator and created in the bridge, with an account of the fake Shopify's when `shop` is given; answers its tokens. */
async function createMerchant(id: string, apiKey?: string, shop?: string) {
  const appToken = `app-${id}-${randomBytes(8).toString('hex')}`;
  h.sim.addMerchant({ id, appToken, ...(apiKey ? { apiKey } : {}) });
  const account = shop ? h.sim.pos.shopify.addAccount({ shop }) : undefined;
  const res = await admin('post', '/v1/admin/merchants').send({
    id,
    loyalty: { appToken, ...(apiKey ? { apiKey } : {}) },
    ...(account ? { pos: { shopify: { shopDomain: account.shop, accessToken: account.accessToken } } } : {}),
  });
  expect(res.status).toBe(201);
  merchants[id] = { adminToken: res.body.adminToken, posToken: res.body.posToken };
  return h.sim.merchant(id);
}

async function merchantCheckout(id: string, body: Record<string, unknown>) {
  const res = await request(h.bridge.url).post('/v1/checkouts/generic').set('authorization', `Bearer ${merchants[id]!.posToken}`).set('content-type', 'application/json').send(JSON.stringify(body));
  expect(res.status).toBeLessThan(300);
  return res.body;
}

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  // No API key and no worker: an in-doubt accrual stays in doubt until a person resolves it.
  h = await startHarness({ withApiKey: false, env: { ADMIN_TOKENS: `alice=${ALICE_TOKEN}` }, overrides: { startWorker: false, secretsKey: randomBytes(32).toString('base64'), posSettings: { shopify } } });
  // The Shopify app's API is the simulator's fake (known once the simulator listens): backfill and the report read it.
  await h.restart({ posSettings: { shopify: { ...shopify, apiBaseUrl: `${h.simServer.url}/shopify/{shop}`, accessTokenHeader: 'X-Shopify-Access-Token' } } });
  const post = (body: Record<string, unknown>) => postJson(h.bridge.url, '/v1/checkouts/generic', body);

  expect((await post(checkout({ orderId: 'A-1' }))).body.status).toBe('accrued');
  expect((await post(checkout({ orderId: 'H-1', customer: { phone: '+15550003333' } }))).body.status).toBe('accrued');
  h.sim.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
  expect((await post(checkout({ orderId: 'D-1', customer: { phone: '+15550004444' } }))).body.status).toBe('in_doubt');
  h.sim.faults.inject({ kind: 'result_failure', on: 'accrue', times: 2 });
  expect((await post(checkout({ orderId: 'F-1', customer: { phone: '+15550005555' } }))).body.status).toBe('failed');
  expect((await post(checkout({ orderId: 'F-2', customer: { phone: '+15550006666' } }))).body.status).toBe('failed');
  // A reopened check: the same order delivered again with another amount (counted, nothing sent).
  expect((await post(checkout({ orderId: 'C-1', customer: { phone: '+15550001212' } }))).body.status).toBe('accrued');
  await post(checkout({ orderId: 'C-1', customer: { phone: '+15550001212' }, total: '9.99', items: [{ id: 'sku-1', name: 'Latte', quantity: 1, unitPrice: '9.99', total: '9.99' }] }));
  // An order id that is markup: the page must show it as text.
  expect((await post(checkout({ orderId: MARKUP_ORDER_ID, customer: { phone: '+15550002222' } }))).body.status).toBe('accrued');
  // A refund of an order neither the ledger nor the loyalty service knows: an orphan reverse_failed record.
  expect((await postJson(h.bridge.url, '/v1/refunds/generic', { orderId: 'O-404', refundId: 'R-404' })).status).toBe(404);
  // A partial refund: P-1 reversed, what remains accrued as its remainder record P-1~r1.
  expect((await post(checkout({ orderId: 'P-1', customer: { phone: '+15550001313' } }))).body.status).toBe('accrued');
  const partial = await postJson(h.bridge.url, '/v1/refunds/generic', { orderId: 'P-1', refundId: 'RP-1', amount: '19.99' });
  expect(partial.body).toMatchObject({ status: 'reversed', remainder: { transactionId: 'generic:P-1~r1' } });

  const north = await createMerchant('north');
  expect((await merchantCheckout('north', checkout({ orderId: 'N-2' }))).status).toBe('accrued');
  north.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
  expect((await merchantCheckout('north', checkout({ orderId: 'N-1', customer: { phone: '+15550007777' } }))).status).toBe('in_doubt');
  // With an API key: its operations history can be read for the three-way report.
  await createMerchant('east', `key-east-${randomBytes(8).toString('hex')}`);
  expect((await merchantCheckout('east', checkout({ orderId: 'E-1' }))).status).toBe('accrued');
  const south = await createMerchant('south');
  south.faults.inject({ kind: 'result_failure', on: 'accrue' });
  expect((await merchantCheckout('south', checkout({ orderId: 'S-1' }))).status).toBe('failed');
  // Two refused accruals of one merchant, retried in bulk by a filter (the merchant, Failed, since a day).
  const west = await createMerchant('west');
  west.faults.inject({ kind: 'result_failure', on: 'accrue', times: 2 });
  expect((await merchantCheckout('west', checkout({ orderId: 'W-1', customer: { phone: '+15550001414' } }))).status).toBe('failed');
  expect((await merchantCheckout('west', checkout({ orderId: 'W-2', customer: { phone: '+15550001515' } }))).status).toBe('failed');

  const delivery = JSON.stringify({ id: 77, email: 'pat.doe@example.test', phone: '+15550008888' });
  const dead = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, delivery, [
    signature(shopifyAdapter, shopify, delivery),
    ['X-Shopify-Topic', 'orders/paid'],
    ['X-Shopify-Event-Id', 'evt-console-1'],
    ['X-Shopify-Shop-Domain', 'console-shop.myshopify.com'],
  ]);
  expect(dead.status).toBe(202);
  deadLetterId = dead.body.results[0].deadLetterId;
  expect(deadLetterId).toBeTruthy();

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

async function signedIn(token = ADMIN_TOKEN): Promise<Page> {
  open = await openConsole(browser, h.bridge.url);
  return signIn(open.page, token);
}

/** The attention queue's table of items, once loaded. */
async function queue(page: Page): Promise<Locator> {
  await goTo(page, 'Needs attention', 'Needs attention');
  return visible(page.getByRole('table', { name: /^Oldest first/ }));
}

/** The API's words as the page shows them: each time in them written as the console writes times (UTC, to the second). */
function asShown(text: string): string {
  return text.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, (iso) => `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`);
}

/** No raw ISO time, no count of cents, no JSON word where a person reads the page (`what` names the page in a failure). */
async function readsWell(page: Page, what: string): Promise<void> {
  const text = await readableText(page);
  // Each one found, with what surrounds it.
  const raw = [...text.matchAll(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|\b\d+ cents?\b|\d+-cent\b|\bnull\b|\bundefined\b|\bNaN\b/g)].map((m) => text.slice(Math.max(0, m.index - 40), m.index + m[0].length + 20));
  expect({ what, raw }).toEqual({ what, raw: [] });
}

/** The whole page, or what is on screen (a dialog over the page). */
async function screenshot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage });
}

describe('the page itself', () => {
  it('is served at /admin with a strict Content-Security-Policy, no framing, no referrer, no sniffing', async () => {
    const redirect = await request(h.bridge.url).get('/admin');
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe('/admin/');
    for (const path of ['/admin', '/admin/', '/admin/js/main.js', '/admin/console.css', '/admin/no-such-file.js']) {
      const res = await request(h.bridge.url).get(path);
      expect(res.status).toBe(path === '/admin' ? 301 : path.includes('no-such') ? 404 : 200);
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
    expect(CONSOLE_CSP).toContain("script-src 'self';");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    const html = (await request(h.bridge.url).get('/admin/')).text;
    // No inline script or style, and nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|style=/);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect((await request(h.bridge.url).get('/admin/js/main.js')).headers['content-type']).toMatch(/^text\/javascript/);
  });

  it('keeps the token in this tab only: never in a URL, a cookie or localStorage; a wrong token is refused', async () => {
    open = await openConsole(browser, h.bridge.url);
    const { page, context } = open;
    await page.goto('/admin/');
    await page.getByLabel('Admin token').fill('not-a-token-of-this-bridge');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByRole('alert').filter({ hasText: 'The bridge does not accept this token.' }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'sign-in');

    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Needs attention' }));
    expect(page.url()).not.toContain(ADMIN_TOKEN);
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([ADMIN_TOKEN]);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await context.cookies()).toEqual([]);
    // A reload of the tab keeps the session; signing out ends it.
    await page.reload();
    await visible(page.getByRole('heading', { level: 1, name: 'Needs attention' }));
    await page.getByRole('button', { name: 'Sign out' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Sign in to the operator console' }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  }, TEST_MS);
  it("shows what the API returns as text: an order id that is markup stays text and runs nothing", async () => {
    const page = await signedIn();
    let dialogs = 0;
    page.on('dialog', (dialog) => {
      dialogs++;
      void dialog.dismiss();
    });
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('POS order id').fill(MARKUP_ORDER_ID);
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '1 record matches' }));
    await visible(page.getByRole('cell', { name: MARKUP_ORDER_ID, exact: true }));
    expect(await page.locator('#injected').count()).toBe(0);
    expect(dialogs).toBe(0);
  }, TEST_MS);
});

describe('as a person would', () => {
  it("signs in with a merchant's token and sees only that merchant", async () => {
    const page = await signedIn(merchants.north!.adminToken);
    await visible(page.getByText('merchant:north'));
    await visible(page.getByText('(merchant north only)'));
    const items = await queue(page);
    await visible(items.getByRole('link', { name: 'generic:N-1' }));
    for (const other of ['generic:D-1', 'generic:F-1', 'generic:S-1']) expect(await page.getByText(other).count()).toBe(0);
    // No merchant to choose: the token decides.
    expect(await page.getByLabel('Merchant').count()).toBe(0);
    expect(await page.getByRole('table', { name: 'By merchant' }).count()).toBe(0);
    await screenshot(page, 'merchant-attention');
    expect(await seriousViolations(page)).toEqual([]);

    await goTo(page, 'Search', 'Search records');
    expect(await page.getByLabel('Merchant').count()).toBe(0);
    await submitSearch(page);
    const records = await visible(page.getByRole('table', { name: 'Records, newest first' }));
    await visible(page.getByRole('heading', { level: 2, name: '2 records match' }));
    expect((await records.getByRole('link').allTextContents()).sort()).toEqual(['generic:N-1', 'generic:N-2']);

    // Dead letters: the one kept belongs to no merchant, so north sees none.
    await goTo(page, 'Dead letters', 'Dead letters');
    await visible(page.getByText('0 dead letters.'));
    // The audit log: another merchant's action (taken here by the global admin) is not north's to see.
    expect((await admin('post', '/v1/admin/transactions/generic:S-1/acknowledge?merchantId=south').send({ reason: 'card closed for good' })).status).toBe(200);
    expect((await admin('get', '/v1/admin/audit?merchantId=south')).body.items).toEqual([expect.objectContaining({ target: 'generic:S-1', merchantId: 'south' })]);
    await goTo(page, 'Audit log', 'Audit log');
    expect(await page.getByLabel('Merchant').count()).toBe(0);
    await visible(page.getByText('0 entries.'));
    expect(await page.getByText('generic:S-1').count()).toBe(0);
    // Reconcile: a pass over north's records only.
    await goTo(page, 'Reconcile', 'Reconcile');
    await visible(page.getByText(/every open record of merchant north now/));
    await page.getByRole('button', { name: 'Run reconcile now' }).click();
    const stillOpen = await visible(page.getByRole('table', { name: /^Still open/ }));
    expect(await stillOpen.getByRole('link').allTextContents()).toEqual(['generic:N-1']);
    expect(await page.getByLabel('Merchant').count()).toBe(0);

    // Another merchant's record, asked for by its route, is not found.
    await page.goto('/admin/#/transactions/default/generic%3AD-1');
    await visible(page.getByRole('alert').filter({ hasText: '404' }));
    expect(await page.getByText('Latte').count()).toBe(0);
  }, TEST_MS);

  it('finds an order by its POS order id and shows its Check, attempts and history', async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('POS order id').fill('H-1');
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '1 record matches' }));
    await screenshot(page, 'search');
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('table', { name: 'Records, newest first' }).getByRole('link', { name: 'generic:H-1' }).click();

    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }));
    const selections = await visible(page.getByRole('table', { name: 'Selections' }));
    expect(await selections.getByRole('row').nth(1).getByRole('cell').allTextContents()).toEqual(['Latte', 'coffee', '3', '19.99 USD', '59.97 USD']);
    await visible(page.getByRole('heading', { level: 2, name: /^Attempts \(1/ }));
    await page.getByText('What was sent').click();
    await visible(page.getByText('"transactionId": "generic:H-1"').first());
    await page.getByText('What came back (200)').click();
    await visible(page.getByText('"isSuccess": true').first());
    await visible(page.getByRole('heading', { level: 2, name: 'History' }));
    await visible(page.locator('.timeline').getByText('Pending → Accrued'));
    // Contact details are masked by the API, in the customer and in what was sent.
    await visible(page.getByText('phone ***', { exact: true }));
    await visible(page.locator('.attempts').getByText('"phone": "***"').first());
    expect(await page.getByText('+15550003333').count()).toBe(0);
    await screenshot(page, 'record');
    expect(await seriousViolations(page)).toEqual([]);
    // Asked for explicitly, they are shown, and the audit log says who asked.
    await page.getByRole('button', { name: 'Show phone numbers and emails' }).click();
    await visible(page.getByText('phone +15550003333', { exact: true }));
    await page.getByText('What was sent').click();
    await visible(page.getByText('"phone": "+15550003333"').first());
    expect(await page.getByRole('button', { name: 'Show phone numbers and emails' }).count()).toBe(0);
    await goTo(page, 'Audit log', 'Audit log');
    const row = page.getByRole('table', { name: 'Operator actions, newest first' }).getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:H-1' }) });
    expect((await (await visible(row)).getByRole('cell').allTextContents()).slice(1)).toEqual(['admin', 'unmask record', 'generic:H-1', '', '', 'default']);
  }, TEST_MS);

  it('searches by transactionId, refund id, several statuses, POS and dates; links a partial refund\'s record and its remainder', async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await visible(page.getByRole('heading', { level: 2, name: /records match$/ }));
    // Every field set each time (the form keeps what the last search asked), then the answer waited
    // for by what it must show: no two searches in a row show the same records.
    const search = async (fields: Record<string, string>, statuses: string[] = []) => {
      for (const label of ['POS order id', 'Transaction id', 'Refund id', 'Created from', 'Created to (inclusive)']) await page.getByLabel(label, { exact: true }).fill(fields[label] ?? '');
      // Merchants are picked from the list the bridge gives ('' is all merchants).
      await page.getByLabel('Merchant', { exact: true }).selectOption(fields.Merchant ?? '');
      await page.getByLabel('POS', { exact: true }).selectOption(fields.POS ?? '');
      for (const status of ['Reversed', 'Reverse failed']) await page.getByRole('checkbox', { name: status, exact: true }).setChecked(statuses.includes(status));
      await submitSearch(page);
    };
    const shows = async (ids: string[]) => {
      if (ids.length === 0) return void (await visible(page.getByRole('heading', { level: 2, name: 'No records match' })));
      const table = page.getByRole('table', { name: 'Records, newest first' });
      for (const id of ids) await visible(table.getByRole('link', { name: id, exact: true }));
      await visible(page.getByRole('heading', { level: 2, name: `${ids.length} ${ids.length === 1 ? 'record matches' : 'records match'}` }));
      expect((await table.getByRole('link').allTextContents()).sort()).toEqual(ids);
    };

    await search({ 'Transaction id': 'generic:A-1' });
    await shows(['generic:A-1']);
    await search({ 'Refund id': 'RP-1' });
    await shows(['generic:P-1']);
    // Several statuses at once, of one merchant.
    await search({ Merchant: 'default' }, ['Reversed', 'Reverse failed']);
    await shows(['generic:O-404', 'generic:P-1']);
    // The POS, and the days the records were created.
    const created = (await admin('get', '/v1/admin/transactions/generic:A-1')).body.createdAt as string;
    const day = created.slice(0, 10);
    const nextDay = new Date(Date.parse(created) + 86_400_000).toISOString().slice(0, 10);
    await search({ 'POS order id': 'A-1', POS: 'square' });
    await shows([]);
    await search({ 'POS order id': 'A-1', POS: 'generic', 'Created from': day, 'Created to (inclusive)': day });
    await shows(['generic:A-1']);
    await search({ 'POS order id': 'A-1', 'Created from': nextDay });
    await shows([]);

    // A partial refund's record names its remainder, and the remainder its parent.
    await page.goto('/admin/#/transactions/default/generic%3AP-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:P-1' }));
    await visible(page.getByText(/^RP-1: 19\.99 USD refunded; the rest is accrued as generic:P-1~r1$/));
    await page.locator('.facts').getByRole('link', { name: 'generic:P-1~r1' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:P-1~r1' }));
    await page.locator('.facts').getByRole('link', { name: 'generic:P-1', exact: true }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:P-1' }));
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);

  it('shows an action that is not allowed disabled, with the reason the API gives', async () => {
    const detail = await admin('get', '/v1/admin/transactions/generic:A-1');
    const why = detail.body.actions.retry.why as string;
    expect(detail.body.actions.retry.allowed).toBe(false);
    expect(why).toBeTruthy();

    const page = await signedIn();
    await page.goto('/admin/#/transactions/default/generic%3AA-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:A-1' }));
    const retry = page.getByRole('button', { name: 'Retry', exact: true });
    expect(await retry.isDisabled()).toBe(true);
    const describedBy = await retry.getAttribute('aria-describedby');
    expect(await page.locator(`#${describedBy}`).textContent()).toBe(`Not available: ${why}`);
    await visible(page.getByText(`Not available: ${why}`));
    // Reachable by keyboard with its reason (a disabled attribute would skip it), and pressing it does nothing.
    await retry.focus();
    expect(await retry.evaluate((button) => button === document.activeElement)).toBe(true);
    await page.keyboard.press('Enter');
    expect(await page.getByRole('dialog').count()).toBe(0);
    expect((await admin('get', '/v1/admin/transactions/generic:A-1')).body.version).toBe(detail.body.version);
    const tabbable = await page.evaluate(() => [...document.querySelectorAll<HTMLButtonElement>('button.action')].map((b) => ({ name: b.textContent, tabIndex: b.tabIndex, disabled: b.disabled })));
    for (const button of tabbable) expect(button).toEqual({ name: button.name, tabIndex: 0, disabled: false });

    // An allowed action asks first: the dialog takes the focus, Escape leaves it, and nothing was done.
    const reverse = page.getByRole('button', { name: 'Reverse', exact: true });
    await reverse.click();
    await visible(page.getByRole('dialog', { name: 'Reverse generic:A-1' }));
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('confirm-reason');
    await page.keyboard.press('Escape');
    await gone(page.getByRole('dialog'));
    expect(await reverse.evaluate((button) => button === document.activeElement)).toBe(true);
    expect((await admin('get', '/v1/admin/transactions/generic:A-1')).body.status).toBe('accrued');
    expect(h.sim.books().transactions['generic:A-1']!.reversals).toBe(0);
  }, TEST_MS);

  it('resolves an in-doubt record with a reason: it leaves the queue and the audit log shows who, what and why', async () => {
    const page = await signedIn();
    const items = await queue(page);
    await visible(items.getByRole('link', { name: 'generic:D-1' }));
    await visible(page.getByRole('table', { name: 'By kind' }).getByRole('cell', { name: 'In doubt' }));
    await visible(page.getByRole('table', { name: 'By merchant' }).getByRole('link', { name: 'north' }));
    const west = page.getByRole('table', { name: 'By merchant' }).getByRole('row').filter({ has: page.getByRole('link', { name: 'west', exact: true }) });
    expect(await west.getByRole('cell').allTextContents()).toEqual(['west', '2']);
    // The dead letter no merchant was found for is counted, but "(none)" is no merchant to filter by.
    await visible(page.getByRole('table', { name: 'By merchant' }).getByRole('cell', { name: '(none)', exact: true }));
    expect(await page.getByRole('table', { name: 'By merchant' }).getByRole('link', { name: '(none)' }).count()).toBe(0);
    const failed = page.getByRole('table', { name: 'By kind' }).getByRole('row').filter({ has: page.getByRole('cell', { name: 'Failed', exact: true }) });
    expect(await failed.getByRole('cell').allTextContents()).toEqual(['Failed', String((await admin('get', '/v1/admin/attention')).body.counts.failed)]);
    await visible(page.getByText(/The oldest has waited \d/));
    // Each item says why, and the oldest comes first (each waiting time carries its start).
    await visible(items.getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:D-1' }) }).getByRole('cell', { name: /^the accrual was sent and its answer was lost/ }));
    const since = await items.locator('tbody tr td:nth-child(7) span').evaluateAll((spans) => spans.map((span) => Date.parse(span.getAttribute('title')!)));
    expect(since.length).toBeGreaterThan(5);
    expect(since).toEqual([...since].sort((a, b) => a - b));
    await screenshot(page, 'attention');
    expect(await seriousViolations(page)).toEqual([]);

    // This merchant has no API key: the queue says which case applies, in plain words.
    await visible(items.getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:D-1' }) }).getByRole('cell', { name: /this merchant has no loyalty API key, so the bridge cannot read the operations history/ }));
    await items.getByRole('link', { name: 'generic:D-1' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:D-1' }));
    // The page leads with why it needs a person, whether the bridge acts itself, and what each action would do.
    const lead = page.getByRole('region', { name: 'Why it needs a person' });
    await visible(lead.getByText('In doubt', { exact: true }));
    await visible(lead.getByText(/^The bridge will not act by itself: this merchant has no loyalty API key/));
    await visible(lead.getByRole('listitem').filter({ hasText: /^Resolve: The bridge records the outcome you established/ }));
    const leadBox = (await lead.boundingBox())!;
    expect(leadBox.y).toBeLessThan(200);
    await screenshot(page, 'record-lead', false);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Resolve…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Resolve generic:D-1' }));
    await dialog.getByRole('radio', { name: 'Accrued', exact: true }).check();
    await visible(dialog.getByText('the record becomes accrued'));
    // No reason, no action.
    await dialog.getByRole('button', { name: 'Resolve', exact: true }).click();
    await visible(dialog.getByRole('alert').filter({ hasText: 'Give a reason' }));
    await dialog.getByLabel('Reason').fill('Found the accrual in the loyalty history, operation 2');
    await screenshot(page, 'resolve-dialog', false);
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Resolve', exact: true }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.locator('.facts').getByText('Accrued', { exact: true }));
    expect((await admin('get', '/v1/admin/transactions/generic:D-1')).body.status).toBe('accrued');
    // After acting: what was done, and the queue's next item to go on with; the lead says nothing is left.
    const next = (await admin('get', '/v1/admin/attention')).body.items[0];
    const done = await visible(page.locator('main p.done'));
    await visible(done.getByText(/^Resolve generic:D-1: now Accrued\./));
    await visible(done.getByRole('link', { name: next.deadLetterId ? `dead letter ${next.deadLetterId}` : next.transactionId }));
    await visible(page.getByRole('region', { name: 'Nothing here needs a person' }).getByText('The bridge will not act by itself: the record is settled.'));

    const after = await queue(page);
    await visible(after.getByRole('link', { name: 'generic:F-1' }));
    expect(await after.getByRole('link', { name: 'generic:D-1' }).count()).toBe(0);

    await goTo(page, 'Audit log', 'Audit log');
    const log = await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    const row = await visible(log.getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:D-1' }) }));
    const cells = await row.getByRole('cell').allTextContents();
    expect(cells.slice(1)).toEqual(['admin', 'resolve accrued', 'generic:D-1', 'Found the accrual in the loyalty history, operation 2', 'accrued', 'default']);
    await screenshot(page, 'audit');
    expect(await seriousViolations(page)).toEqual([]);
    // The actor is matched by its start: "adm" finds admin's line, "merchant:" none of admin's.
    await page.getByLabel('Actor starts with').fill('adm');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await visible(page.getByRole('table', { name: 'Operator actions, newest first' }).getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:D-1' }) }));
    await page.getByLabel('Actor starts with').fill('merchant:');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.waitForURL(/actor=merchant%3A/);
    const merchantLines = (await admin('get', '/v1/admin/audit?actor=merchant%3A')).body.total as number;
    await visible(page.locator('main p.summary').filter({ hasText: new RegExp(`^${merchantLines} entr`) }));
    const actors = await page.locator('table.audit tbody td[data-label="Actor"]').allTextContents();
    expect(actors.every((actor) => actor.startsWith('merchant:'))).toBe(true);
  }, TEST_MS);

  it('retries several failed records in one bulk action, confirmed with their count', async () => {
    const page = await signedIn();
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Merchant').selectOption('default');
    await page.getByRole('checkbox', { name: 'Failed', exact: true }).check();
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '2 records match' }));
    await page.getByRole('checkbox', { name: 'Select generic:F-1' }).check();
    await page.getByRole('checkbox', { name: 'Select generic:F-2' }).check();
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Retry 2 records' }));
    await visible(dialog.getByText('The 2 records selected: generic:F-1, generic:F-2.'));
    await dialog.getByLabel('Reason').fill('The card block was lifted');
    await screenshot(page, 'bulk-dialog', false);
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Retry 2 records' }).click();
    await visible(page.getByText('Retry: 2 queued, 0 refused.').first());
    // A bulk retry hands the records back to delivery (this bridge's worker is off: a pass sends them), each once.
    for (const id of ['generic:F-1', 'generic:F-2']) expect((await admin('get', `/v1/admin/transactions/${id}`)).body.status).toBe('pending');
    expect((await admin('post', '/v1/admin/reconcile')).body.fixed.map((f: { transactionId: string }) => f.transactionId).sort()).toEqual(['generic:F-1', 'generic:F-2']);
    for (const id of ['generic:F-1', 'generic:F-2']) {
      expect((await admin('get', `/v1/admin/transactions/${id}`)).body.status).toBe('accrued');
      expect(h.sim.books().transactions[id]!.accruals).toBe(1);
    }
  }, TEST_MS);

  it('a bulk action the bridge refuses for every record looks failed, in words and drawn as a problem, and changes nothing', async () => {
    const page = await signedIn();
    const before = (await admin('get', '/v1/admin/transactions/generic:A-1')).body;
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Transaction id').fill('generic:A-1');
    await submitSearch(page);
    await page.getByRole('checkbox', { name: 'Select generic:A-1' }).check();
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Retry 1 record' }));
    await visible(dialog.getByRole('table', { name: 'It would refuse' }).getByRole('cell', { name: 'generic:A-1' }));
    await dialog.getByLabel('Reason').fill('Trying an accrued one');
    await dialog.getByRole('button', { name: 'Retry 1 record' }).click();
    await gone(page.getByRole('dialog'));
    const failed = await visible(page.getByRole('status').filter({ hasText: 'Retry: 0 queued, 1 refused.' }).first());
    expect(await page.locator('#status').textContent()).toBe('Failed: Retry: 0 queued, 1 refused.');
    expect(await page.locator('#status').evaluate((status) => status.classList.contains('problem'))).toBe(true);
    expect(await failed.evaluate((line) => line.classList.contains('problem'))).toBe(true);
    await visible(page.getByRole('table', { name: 'Refused' }).getByRole('cell', { name: 'generic:A-1' }));
    expect(await seriousViolations(page)).toEqual([]);
    const after = (await admin('get', '/v1/admin/transactions/generic:A-1')).body;
    expect([after.status, after.version]).toEqual([before.status, before.version]);
    expect(h.sim.books().transactions['generic:A-1']!.accruals).toBe(1);
  }, TEST_MS);

  it("retries every failed record of one merchant since a day, by the search's filter, confirmed with the count", async () => {
    const page = await signedIn();
    const created = (await admin('get', '/v1/admin/transactions/generic:W-1?merchantId=west')).body.createdAt as string;
    const since = created.slice(0, 10);
    await goTo(page, 'Search', 'Search records');
    await page.getByLabel('Merchant').selectOption('west');
    await page.getByRole('checkbox', { name: 'Failed', exact: true }).check();
    await page.getByLabel('Created from').fill(since);
    await submitSearch(page);
    await visible(page.getByRole('heading', { level: 2, name: '2 records match' }));
    await page.getByLabel('Action', { exact: true }).selectOption('retry');
    await page.getByRole('radio', { name: 'Every record matching this search (2)' }).check();
    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Retry 2 records' }));
    await visible(dialog.getByText(`Every record matching this search now: 2 records (status Failed, merchant west, created from ${since}).`));
    await visible(dialog.getByText('provably did not happen upstream'));
    // Cancelled, nothing is done.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    expect((await admin('get', '/v1/admin/transactions/generic:W-1?merchantId=west')).body.status).toBe('failed');

    await page.getByRole('button', { name: 'Review bulk action…' }).click();
    const again = await visible(page.getByRole('dialog', { name: 'Retry 2 records' }));
    await again.getByLabel('Reason').fill('West\'s card block was lifted');
    await again.getByRole('button', { name: 'Retry 2 records' }).click();
    await visible(page.getByText('Retry: 2 queued, 0 refused.').first());
    const audit = (await admin('get', '/v1/admin/audit?merchantId=west')).body.items;
    expect(audit.map((e: { action: string; target: string; reason: string }) => [e.action, e.target, e.reason]).sort()).toEqual([
      ['bulk:retry', 'generic:W-1', "West's card block was lifted"],
      ['bulk:retry', 'generic:W-2', "West's card block was lifted"],
    ]);
    for (const id of ['generic:W-1', 'generic:W-2']) expect((await admin('get', `/v1/admin/transactions/${id}?merchantId=west`)).body.status).toBe('pending');
    // Delivered once each by a pass.
    await admin('post', '/v1/admin/reconcile?merchantId=west');
    for (const id of ['generic:W-1', 'generic:W-2']) {
      expect((await admin('get', `/v1/admin/transactions/${id}?merchantId=west`)).body.status).toBe('accrued');
      expect(h.sim.merchant('west').books().transactions[id]!.accruals).toBe(1);
    }
  }, TEST_MS);

  it('dismisses a dead letter with a reason: its body masked, then kept as dismissed and audited', async () => {
    const page = await signedIn();
    await goTo(page, 'Dead letters', 'Dead letters');
    const letters = await visible(page.getByRole('table', { name: 'Dead letters, newest first' }));
    await letters.getByRole('link', { name: deadLetterId }).click();
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${deadLetterId}` }));
    await visible(page.getByRole('heading', { level: 3, name: /phone numbers and emails masked/ }));
    expect(await page.getByText('pat.doe@example.test').count()).toBe(0);
    expect(await page.getByText('+15550008888').count()).toBe(0);
    // A replay asks first too; this one fails again (no merchant has the shop), and its run is kept.
    await page.getByRole('button', { name: 'Replay' }).click();
    const replay = await visible(page.getByRole('dialog', { name: `Replay dead letter ${deadLetterId}` }));
    await visible(replay.getByText('runs this delivery through again'));
    await replay.getByLabel('Reason').fill('Tried after adding the shop domain');
    await replay.getByRole('button', { name: 'Replay' }).click();
    await gone(page.getByRole('dialog'));
    // A failed replay looks failed: said in words first, and drawn as a problem, never as the blue of a success.
    const failed = await visible(page.getByRole('status').filter({ hasText: `Replay of dead letter ${deadLetterId} failed again` }));
    expect(await failed.textContent()).toMatch(/^Failed: /);
    expect(await failed.evaluate((status) => status.classList.contains('problem'))).toBe(true);
    await screenshot(page, 'dead-letter-replay-failed');
    expect(await seriousViolations(page)).toEqual([]);
    await visible(page.getByRole('table', { name: 'Every run since it was kept, oldest first' }).getByRole('cell', { name: 'operator' }));
    await page.getByRole('button', { name: 'Dismiss' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: `Dismiss dead letter ${deadLetterId}` }));
    await visible(dialog.getByText('kept, never deleted, never run again'));
    await dialog.getByLabel('Reason').fill('A test order from the shop owner');
    await dialog.getByRole('button', { name: 'Dismiss' }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.locator('.facts').getByText('dismissed', { exact: true }));
    // Both actions now disabled, each with the API's own why.
    const why = (await admin('get', `/v1/admin/dead-letters/${deadLetterId}`)).body.actions;
    expect(why.replay).toEqual({ allowed: false, why: expect.stringContaining('was resolved at') });
    expect(why.dismiss).toEqual({ allowed: false, why: expect.stringContaining('was dismissed by admin') });
    for (const [name, rule] of [['Replay', why.replay], ['Dismiss', why.dismiss]] as const) {
      const button = page.getByRole('button', { name, exact: true });
      expect(await button.isDisabled()).toBe(true);
      expect(await page.locator(`#${await button.getAttribute('aria-describedby')}`).textContent()).toBe(`Not available: ${asShown(rule.why)}`);
    }
    await screenshot(page, 'dead-letter');
    expect(await seriousViolations(page)).toEqual([]);
    // Asked for explicitly, the contact details are shown, and that is audited too.
    await page.getByRole('button', { name: 'Show phone numbers and emails' }).click();
    await visible(page.getByText('"email": "pat.doe@example.test"'));

    await goTo(page, 'Audit log', 'Audit log');
    const log = await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    const rows = log.getByRole('row').filter({ has: page.getByRole('link', { name: deadLetterId }) });
    await visible(rows.first());
    const actions = await Promise.all((await rows.all()).map(async (row) => (await row.getByRole('cell').allTextContents()).slice(1, 5)));
    expect(actions).toEqual([
      ['admin', 'unmask', deadLetterId, ''],
      ['admin', 'dismiss', deadLetterId, 'A test order from the shop owner'],
      ['admin', 'replay', deadLetterId, 'Tried after adding the shop domain'],
    ]);
  }, TEST_MS);

  it("closes an orphan reverse_failed as a named operator: kept in its status, marked closed with her name and reason", async () => {
    const page = await signedIn(ALICE_TOKEN);
    await visible(page.getByText('alice'));
    await page.goto('/admin/#/transactions/default/generic%3AO-404');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:O-404' }));
    await visible(page.getByText('No Check: this record was created by a refund of an order the bridge never saw.'));
    await page.getByRole('button', { name: 'Close', exact: true }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Close generic:O-404' }));
    await visible(dialog.getByText('kept in the ledger with your reason, never deleted'));
    await dialog.getByLabel('Reason').fill('Refund of an order from before the loyalty program');
    await dialog.getByRole('button', { name: 'Close', exact: true }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.getByText('by alice: Refund of an order from before the loyalty program').first());
    await visible(page.locator('.facts').getByText('Reverse failed', { exact: true }));
    expect(await page.getByRole('button', { name: 'Close', exact: true }).isDisabled()).toBe(true);
    const detail = (await admin('get', '/v1/admin/transactions/generic:O-404')).body;
    expect(detail.closed).toMatchObject({ actor: 'alice', reason: 'Refund of an order from before the loyalty program' });
    expect((await admin('get', '/v1/admin/attention')).body.items.map((i: { transactionId?: string }) => i.transactionId)).not.toContain('generic:O-404');
  }, TEST_MS);

  it('acknowledges the deliveries of an order with another amount: counted on its page, then out of the queue', async () => {
    const page = await signedIn();
    const items = await queue(page);
    const row = items.getByRole('row').filter({ has: page.getByRole('link', { name: 'generic:C-1' }) });
    await visible(row.getByRole('cell', { name: 'Changed repeats', exact: true }));
    await row.getByRole('link', { name: 'generic:C-1' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'Delivered again with another amount (1 time)' }));
    await visible(page.getByRole('table', { name: 'Deliveries kept (the first and the latest)' }).getByRole('cell', { name: '9.99 USD' }));
    await page.getByRole('button', { name: 'Acknowledge', exact: true }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Acknowledge generic:C-1' }));
    await visible(dialog.getByText('nothing is sent'));
    await dialog.getByLabel('Reason').fill('The till reopened the check; the customer keeps the first accrual');
    await dialog.getByRole('button', { name: 'Acknowledge', exact: true }).click();
    await gone(page.getByRole('dialog'));
    await visible(page.getByText(/^Not available: nothing to acknowledge/));
    await visible(page.getByRole('heading', { level: 2, name: 'Delivered again with another amount (1 time, acknowledged by admin)' }));
    const after = await queue(page);
    expect(await after.getByRole('link', { name: 'generic:C-1' }).count()).toBe(0);
    expect(h.sim.books().transactions['generic:C-1']!.accruals).toBe(1);
  }, TEST_MS);

  it('runs a reconcile pass and shows its report', async () => {
    const page = await signedIn();
    await goTo(page, 'Reconcile', 'Reconcile');
    await page.getByRole('button', { name: 'Run reconcile now' }).click();
    await visible(page.getByText(/^Examined \d+ records? between/));
    const open = await visible(page.getByRole('table', { name: /^Still open/ }));
    await visible(open.getByRole('link', { name: 'generic:N-1' }));

    // The three-way report of a merchant whose history the bridge can read, for today.
    await page.getByLabel('Merchant').selectOption('east');
    await page.getByRole('button', { name: 'Read report' }).click();
    await visible(page.getByText(/^Merchant east, from .* UTC to .* UTC \(not included\): 0 POS orders and refunds, 1 ledger record and 1 operation examined; 0 differences\.$/));
    await screenshot(page, 'reconcile');
    expect(await seriousViolations(page)).toEqual([]);
    // Where it cannot be read, the page says why, in the API's words.
    await page.getByLabel('Merchant').selectOption('north');
    await page.getByRole('button', { name: 'Read report' }).click();
    await visible(page.getByRole('alert').filter({ hasText: 'merchant north has no loyalty API key' }));

    // Reconcile passes and reports are recorded in the audit log, naming no record.
    await goTo(page, 'Audit log', 'Audit log');
    const log = await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    for (const action of ['reconcile', 'report']) {
      const row = log.getByRole('row').filter({ has: page.getByRole('cell', { name: action, exact: true }) });
      await visible(row.first());
      expect(await row.first().getByRole('cell').nth(1).textContent()).toBe('admin');
      expect(await row.first().getByRole('cell').nth(3).getByRole('link').count()).toBe(0);
    }
  }, TEST_MS);

  it('signs the page out when the bridge stops accepting its token (rotated), and forgets it', async () => {
    const page = await signedIn(merchants.south!.adminToken);
    await visible(page.getByText('(merchant south only)'));
    expect((await admin('post', '/v1/admin/merchants/south/tokens')).status).toBe(200);
    await goTo(page, 'Search', 'Sign in to the operator console');
    await visible(page.getByRole('alert').filter({ hasText: 'no longer accepts your token' }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  }, TEST_MS);
});

describe('rough edges', () => {
  it('formats every time and amount the API writes in its words, and shows no stray null', async () => {
    // An entry in the audit log, whatever ran before.
    expect((await admin('get', '/v1/admin/transactions/generic:A-1?unmask=true')).status).toBe(200);
    const page = await signedIn();
    // A partial refund's history is kept in cents and with times: the API writes them as money (the
    // page does no arithmetic on amounts), the page formats the times.
    await page.goto('/admin/#/transactions/default/generic%3AP-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:P-1' }));
    const history = (await admin('get', '/v1/admin/transactions/generic:P-1')).body.history as { event: string }[];
    expect(history.some((e) => /partial refund RP-1 of 19\.99 USD/.test(e.event))).toBe(true);
    expect(history.filter((e) => / cents?\b|-cent\b/.test(e.event))).toEqual([]);
    await visible(page.locator('.timeline').getByText(/partial refund RP-1 of 19\.99 USD/));
    await readsWell(page, 'record P-1');
    await page.goto('/admin/#/transactions/default/generic%3AP-1~r1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:P-1~r1' }));
    await readsWell(page, 'record P-1~r1');
    await page.goto('/admin/#/transactions/default/generic%3AO-404');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:O-404' }));
    await readsWell(page, 'record O-404');
    await queue(page);
    await readsWell(page, 'attention');
    await goTo(page, 'Search', 'Search records');
    await visible(page.getByRole('table', { name: 'Records, newest first' }));
    await readsWell(page, 'search');
    await goTo(page, 'Dead letters', 'Dead letters');
    await page.getByLabel('Show').selectOption('all');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByRole('table', { name: 'Dead letters, newest first' }).getByRole('link', { name: deadLetterId }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'Delivery' }));
    await readsWell(page, 'dead letter');
    await goTo(page, 'Audit log', 'Audit log');
    await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    await readsWell(page, 'audit');
  }, TEST_MS);

  it('highlights the tab a record was reached from: the queue, a search, the audit log', async () => {
    const page = await signedIn();
    const tab = (name: string) => page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });
    const current = async () => (await page.getByRole('navigation', { name: 'Console' }).locator('a[aria-current="page"]').allTextContents());
    const items = await queue(page);
    await items.getByRole('link', { name: 'generic:N-1' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:N-1' }));
    expect(await current()).toEqual(['Needs attention']);
    await tab('Search').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Search records' }));
    await page.getByLabel('POS order id').fill('H-1');
    await submitSearch(page);
    await page.getByRole('table', { name: 'Records, newest first' }).getByRole('link', { name: 'generic:H-1' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }));
    expect(await current()).toEqual(['Search']);
    await page.goBack();
    await visible(page.getByRole('heading', { level: 1, name: 'Search records' }));
    expect(await current()).toEqual(['Search']);
    // From the audit log: under the audit log (an entry about A-1 there to follow).
    expect((await admin('get', '/v1/admin/transactions/generic:A-1?unmask=true')).status).toBe(200);
    await tab('Audit log').click();
    const log = await visible(page.getByRole('table', { name: 'Operator actions, newest first' }));
    await log.getByRole('link', { name: 'generic:A-1' }).first().click();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:A-1' }));
    expect(await current()).toEqual(['Audit log']);
    // Opened by its address (the tab reloaded there): under Search, where records are found.
    await page.goto('/admin/#/transactions/north/generic%3AN-1');
    await page.reload();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:N-1' }));
    expect(await current()).toEqual(['Search']);
  }, TEST_MS);

  it('says there is no such record, where a link names one the ledger lacks, instead of loading for ever', async () => {
    const page = await signedIn();
    await page.goto('/admin/#/transactions/default/generic%3ANO-SUCH');
    await visible(page.getByRole('heading', { level: 1, name: 'No such record' }));
    await visible(page.getByRole('alert').filter({ hasText: 'The ledger has no record generic:NO-SUCH of merchant default.' }));
    expect(await page.getByText('Loading…').count()).toBe(0);
    await visible(page.getByRole('link', { name: 'Start a backfill' }));
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);

  it("starts afresh after signing out and in again: no previous person's page, no \"Signed out.\" banner", async () => {
    const page = await signedIn();
    await page.goto('/admin/#/transactions/default/generic%3AH-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }));
    await page.getByRole('button', { name: 'Sign out' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Sign in to the operator console' }));
    await visible(page.getByRole('status').filter({ hasText: 'Signed out.' }));
    // The address keeps nothing of the page signed out of.
    expect(new URL(page.url()).hash).toBe('');
    await page.getByLabel('Admin token').fill(ALICE_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByText('Signed in as'));
    await visible(page.getByRole('heading', { level: 1, name: 'Needs attention' }));
    expect(await page.locator('#status').textContent()).toBe('');
    expect(await page.getByText('Signed out.').count()).toBe(0);
    expect(await page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }).count()).toBe(0);
    expect(new URL(page.url()).hash).toBe('#/attention');
  }, TEST_MS);

  it("formats every time and amount on the three-way report, the backfill page and a record's evidence too, and shows no stray null there", async () => {
    // cove: its loyalty history can be read (an API key), and it has a Shopify shop the fake serves.
    const cove = await createMerchant('cove', `key-cove-${randomBytes(8).toString('hex')}`, COVE_SHOP);
    expect((await merchantCheckout('cove', checkout({ orderId: 'CV-1', customer: { phone: '+15550002424' } }))).status).toBe('accrued');
    // An accrual the loyalty service made, its answer lost: in doubt, with evidence in the history.
    cove.faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await merchantCheckout('cove', checkout({ orderId: 'CV-2', customer: { phone: '+15550002525' } }))).status).toBe('in_doubt');
    // A paid sale at cove's shop whose webhook never arrived: a difference in the report, and a backfill to run.
    const order = h.sim.pos.shopify.addOrder(COVE_SHOP, sale('+15550002626', new Date().toISOString())) as unknown as { id: number };
    const page = await signedIn();

    // The record's evidence, read from the history: its reading, the operations, and the resolve dialog's summary of them.
    await page.goto('/admin/#/transactions/cove/generic%3ACV-2');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:CV-2' }));
    const evidence = page.getByRole('region', { name: 'Evidence from the loyalty history' });
    await visible(evidence.locator('.reading'));
    const operations = await visible(evidence.getByRole('table', { name: /^Operations on its cards in that time/ }));
    expect(await operations.locator('tbody tr').count()).toBeGreaterThan(0);
    await readsWell(page, 'record CV-2 with its evidence');
    await page.getByRole('button', { name: 'Resolve…' }).click();
    const dialog = await visible(page.getByRole('dialog', { name: 'Resolve generic:CV-2' }));
    await visible(dialog.getByRole('heading', { level: 3, name: 'What the loyalty history shows' }));
    await visible(dialog.getByText(/^Operation \d+ on card /).first());
    await readsWell(page, 'resolve dialog of CV-2');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await gone(page.getByRole('dialog'));
    // Where the history cannot be read (no API key), the evidence says why.
    await page.goto('/admin/#/transactions/north/generic%3AN-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:N-1' }));
    const unread = page.getByRole('region', { name: 'Evidence from the loyalty history' });
    await visible(unread.locator('.reading'));
    // An empty list of an unread history is never shown as "no operation": a person must not decide from it.
    await visible(unread.getByText(/^The loyalty history cannot be read without the merchant’s API key, so this shows nothing about whether the call happened/));
    expect(await unread.getByText('No operation on its cards in that time.').count()).toBe(0);
    await readsWell(page, 'record N-1 with its evidence');

    // The three-way report, with a difference that advises a backfill, and a pass over open work beside it.
    await goTo(page, 'Reconcile', 'Reconcile');
    await page.getByLabel('Merchant').selectOption('cove');
    await page.getByRole('button', { name: 'Read report' }).click();
    await visible(page.getByText(/^Merchant cove, from .* UTC to .* UTC \(not included\): .*; \d+ differences?\.$/));
    const row = page.getByRole('table', { name: 'Differences', exact: true }).getByRole('row').filter({ hasText: String(order.id) }).filter({ hasText: 'Paid in the POS, not in the ledger' });
    const backfill = await visible(row.getByRole('link', { name: /^Backfill shopify since / }));
    await readsWell(page, 'three-way report');
    await page.getByRole('button', { name: 'Run reconcile now' }).click();
    await visible(page.getByText(/^Examined \d+ records? between .* UTC and .* UTC\./));
    await visible(page.getByRole('table', { name: /^Still open/ }));
    await readsWell(page, 'three-way report and a reconcile pass');

    // The backfill page, prefilled from the report's row, with the accounts it reads; then its pass.
    await backfill.click();
    await visible(page.getByRole('heading', { level: 1, name: 'Backfill' }));
    const accounts = () => page.getByRole('table', { name: 'Accounts, with their watermark and last pass' }).getByRole('row').filter({ has: page.getByRole('cell', { name: 'cove', exact: true }) });
    await visible(accounts());
    await readsWell(page, 'backfill');
    await page.getByRole('button', { name: 'Start backfill' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'What the pass found' }));
    await visible(page.getByText(/^Merchant cove, shopify, from .* UTC to .* UTC \(not included\): .*; 1 new, /));
    await visible(page.getByRole('link', { name: `shopify:${order.id}`, exact: true }));
    // The accounts read again: cove's last pass, just run, and its watermark.
    await visible(accounts().filter({ hasText: /\(request\): \d+ read, 1 new, 0 refused/ }));
    await readsWell(page, 'backfill pass');
  }, TEST_MS);
});

describe('what the bridge says, and only that', () => {
  it('names statuses and POSes in the words of the vocabulary the bridge serves, read once before the page renders', async () => {
    open = await openConsole(browser, h.bridge.url);
    const { page } = open;
    const bridge = (await request(h.bridge.url).get('/admin/vocabulary.json')).body as ConsoleVocabulary;
    // The bridge's own answer with one label and one POS more: the page shows what it is given, from nowhere else.
    const label = (status: string, words: string) => (status === 'accrued' ? 'Accrued (as served)' : words);
    let reads = 0;
    await page.route('**/admin/vocabulary.json', async (route) => {
      reads += 1;
      const response = await route.fetch();
      const served = (await response.json()) as ConsoleVocabulary;
      await route.fulfill({ response, json: { ...served, statuses: served.statuses.map((s) => ({ ...s, label: label(s.status, s.label) })), pos: [...served.pos, 'example-pos'] } });
    });
    await signIn(page, ADMIN_TOKEN);
    await goTo(page, 'Search', 'Search records');
    await visible(page.getByRole('checkbox', { name: 'Accrued (as served)', exact: true }));
    expect((await page.locator('fieldset.statuses label').allTextContents()).map((text) => text.trim())).toEqual(bridge.statuses.map((s) => label(s.status, s.label)));
    expect(await page.locator('fieldset.statuses label').evaluateAll((labels) => labels.map((l) => l.getAttribute('title')))).toEqual(bridge.statuses.map((s) => s.description));
    expect(await page.locator('#search-pos option').allTextContents()).toEqual(['any POS', ...bridge.pos, 'example-pos']);
    // A record's status in the served words, what it means as the badge's title.
    await page.goto('/admin/#/transactions/default/generic%3AH-1');
    const badge = await visible(page.locator('.facts .badge'));
    expect(await badge.textContent()).toBe('Accrued (as served)');
    expect(await badge.getAttribute('title')).toBe(bridge.statuses.find((s) => s.status === 'accrued')!.description);
    // Dead letters by the POSes with webhooks; backfill by those whose API it reads.
    await goTo(page, 'Dead letters', 'Dead letters');
    expect(await page.locator('#dl-pos option').allTextContents()).toEqual(['any POS', ...bridge.webhookPos]);
    await goTo(page, 'Backfill', 'Backfill');
    expect(await page.locator('#backfill-pos option').allTextContents()).toEqual(['choose a POS', ...bridge.listingPos]);
    expect(reads).toBe(1);
  }, TEST_MS);

  it('says it could not start, rather than showing a page without the bridge\'s words, when the vocabulary cannot be read', async () => {
    open = await openConsole(browser, h.bridge.url);
    const { page } = open;
    await page.route('**/admin/vocabulary.json', (route) => route.fulfill({ status: 404, contentType: 'application/json', body: JSON.stringify({ error: { code: 'not_found', message: 'no route GET /admin/vocabulary.json' } }) }));
    await page.goto('/admin/');
    await visible(page.getByRole('heading', { level: 1, name: 'The console could not start' }));
    await visible(page.getByRole('alert').filter({ hasText: 'could not be read: no route GET /admin/vocabulary.json [404 not_found]' }));
    expect(await page.getByLabel('Admin token').count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);

  it('shows an action the API gave no rule for as not allowed, saying so: never as allowed', async () => {
    const page = await signedIn();
    const detail = (await admin('get', '/v1/admin/transactions/generic:H-1')).body;
    // The API allows reversing H-1 now: only the rule's absence disables it below.
    expect(detail.actions.reverse).toEqual({ allowed: true });
    let drop: (actions: Record<string, unknown>) => Record<string, unknown> | undefined = ({ reverse: _reverse, ...rest }) => rest;
    await page.route(/\/v1\/admin\/transactions\/generic%3AH-1(\?|$)/, async (route) => {
      const response = await route.fetch();
      const record = await response.json();
      const actions = drop(record.actions);
      await route.fulfill({ response, json: actions ? { ...record, actions } : { ...record, actions: undefined } });
    });
    const why = async (name: string) => {
      const button = page.getByRole('button', { name, exact: true });
      expect(await button.isDisabled()).toBe(true);
      return page.locator(`#${await button.getAttribute('aria-describedby')}`).textContent();
    };
    const noRule = 'Not available: the bridge gave no rule for this action, so the console does not offer it';

    // One rule missing: that action only.
    await page.goto('/admin/#/transactions/default/generic%3AH-1');
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }));
    expect(await why('Reverse')).toBe(noRule);
    expect(await why('Retry')).toBe(`Not available: ${asShown(detail.actions.retry.why)}`);

    // No rules at all: no action is offered.
    drop = () => undefined;
    await page.reload();
    await visible(page.getByRole('heading', { level: 1, name: 'Record generic:H-1' }));
    for (const name of ['Retry', 'Reverse', 'Resolve…', 'Close']) expect(await why(name)).toBe(noRule);
    expect(await page.getByRole('button', { name: 'Acknowledge', exact: true }).count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);

    // A dead letter's actions alike.
    await page.route(`**/v1/admin/dead-letters/${deadLetterId}`, async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, json: { ...(await response.json()), actions: {} } });
    });
    await page.goto(`/admin/#/dead-letters/${deadLetterId}`);
    await visible(page.getByRole('heading', { level: 1, name: `Dead letter ${deadLetterId}` }));
    for (const name of ['Replay', 'Dismiss']) expect(await why(name)).toBe(noRule);
  }, TEST_MS);
});

describe('the queue reads itself again', () => {
  it('refreshes while shown, saying when it was last read: a new item comes in and the waiting times move on, without a click', async () => {
    open = await openConsole(browser, h.bridge.url);
    // The page's clock, under the test's hand: the refresh fires when the test moves it on, not after a real wait.
    await open.page.clock.install();
    const page = await signIn(open.page, ADMIN_TOKEN);
    const items = await visible(page.getByRole('table', { name: /^Oldest first/ }));
    await visible(page.getByText(/^Read \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC; read again every 30 s while shown\.$/));
    const readAt = await page.locator('.refreshed time').getAttribute('datetime');
    expect(await items.getByRole('link', { name: 'generic:N-9' }).count()).toBe(0);

    // Meanwhile, another call of north's is cut off after the service committed it.
    h.sim.merchant('north').faults.inject({ kind: 'drop_after_commit', on: 'accrue' });
    expect((await merchantCheckout('north', checkout({ orderId: 'N-9', customer: { phone: '+15550007979' } }))).status).toBe('in_doubt');
    await page.clock.fastForward('00:31');
    const fresh = await visible(page.getByRole('table', { name: /^Oldest first/ }).getByRole('link', { name: 'generic:N-9' }));
    expect(await fresh.isVisible()).toBe(true);
    expect(await page.locator('.refreshed time').getAttribute('datetime')).not.toBe(readAt);
    await screenshot(page, 'attention-refreshed', false);
    expect(await seriousViolations(page)).toEqual([]);
  }, TEST_MS);
});
