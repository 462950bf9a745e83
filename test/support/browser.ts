/**
 * A real browser for the console's tests: Debian's Chromium (`/usr/bin/chromium`; `.ci/run`
 * installs it where it is missing) driven by playwright-core, which downloads no browser of its own.
 * Every request the page makes is watched: one to another origin is aborted and remembered, so a
 * test can assert the console loads nothing from the internet; console errors (a Content-Security-
 * Policy violation among them) are remembered too.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { expect } from '@jest/globals';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The flags the console's tests run Chromium with: headless, and nothing that calls home. */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface ConsolePage {
  page: Page;
  context: BrowserContext;
  /** URLs the page asked for outside the bridge's origin (each was aborted). */
  foreignRequests: string[];
  /** Console errors (a Content-Security-Policy violation among them) and uncaught page errors; not the 4xx answers the page handles. */
  errors: string[];
  close(): Promise<void>;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** The desktop the console's screenshots are taken at, and a phone (an iPhone's 390 CSS pixels). */
export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/** A fresh browser context (its own sessionStorage, cookies and cache) with the page watched. */
export async function openConsole(browser: Browser, origin: string, viewport: { width: number; height: number } = DESKTOP): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport, baseURL: origin });
  const foreignRequests: string[] = [];
  const errors: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(`${origin}/`) || url.startsWith('data:')) return route.continue();
    foreignRequests.push(url);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    // Chromium logs every 4xx the page's calls are answered with; the page shows those itself.
    if (message.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  return { page, context, foreignRequests, errors, close: () => context.close() };
}

/** Signs a fresh console page in with `token`, as a person does, and waits for the first page. */
export async function signIn(page: Page, token: string): Promise<Page> {
  await page.goto('/admin/');
  await visible(page.getByRole('heading', { level: 1, name: 'Sign in to the operator console' }));
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await visible(page.getByText('Signed in as'));
  await visible(page.getByRole('heading', { level: 1, name: 'Needs attention' }));
  return page;
}

/** Follows the console's navigation to `section` and waits for its heading. */
export async function goTo(page: Page, section: string, heading: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: section }).click();
  await visible(page.getByRole('heading', { level: 1, name: heading }));
}

/** Closes a page's context, then asserts that it loaded nothing from elsewhere and broke no policy (each test's afterEach). */
export async function closeWatched(open: ConsolePage | undefined): Promise<void> {
  if (!open) return;
  await open.close();
  expect(open.foreignRequests).toEqual([]);
  expect(open.errors).toEqual([]);
}

const require = createRequire(import.meta.url);
/** axe-core's own browser bundle, injected into the page as a script. */
export const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  tags: string[];
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/**
 * axe-core's WCAG 2.x A and AA rules run on the page as it is now; answers the serious and
 * critical violations. The script is added through the DevTools protocol (`addScriptTag` with
 * content would be an inline script, which the console's CSP refuses, as it should).
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa', 'best-practice'] } });
    return result.violations;
  })) as AxeViolation[];
  // Every WCAG 2.2 A and AA rule (target-size among them) at any impact; axe's best practices where serious.
  return violations.filter((v) => v.tags.some((tag) => /^wcag2\d?a{1,2}$/.test(tag)) || v.impact === 'serious' || v.impact === 'critical');
}

/** How long a test waits for what it expects to appear. */
export const WAIT_MS = 10_000;

/** Waits for `locator` to be visible; fails the test when it is not within WAIT_MS. */
export async function visible(locator: Locator): Promise<Locator> {
  try {
    await locator.waitFor({ state: 'visible', timeout: WAIT_MS });
  } catch (error) {
    // What the page showed instead, so that a failure seen once (under load, say) says why.
    const shown = await locator.page().locator('main').innerText({ timeout: 1000 }).catch(() => '(the page could not be read)');
    throw new Error(`${(error as Error).message}\nthe page's main content was:\n${shown.slice(0, 3000)}`);
  }
  return locator;
}

/**
 * Submits the search form and waits for that search's own results. The section re-renders on every
 * search, and it opened on the newest records under the same table name and headings: the results
 * shown before are marked, so nothing of them is mistaken for the new ones (a CI run measured the
 * old table, then found it gone). Answers the new results.
 */
export async function submitSearch(page: Page): Promise<Locator> {
  await page.locator('main .results').evaluateAll((shown) => shown.forEach((results) => results.setAttribute('data-before-search', '')));
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  const results = page.locator('main .results:not([data-before-search])');
  await visible(results.locator('#results-heading'));
  return results;
}

/** Waits until `locator` matches nothing; fails the test when it still does after WAIT_MS. */
export async function gone(locator: Locator): Promise<void> {
  await locator.first().waitFor({ state: 'detached', timeout: WAIT_MS });
  expect(await locator.count()).toBe(0);
}

/** What sticks out of the page at its width: the page's own scroll width, and each element whose box ends past the viewport's right edge. */
export async function overflow(page: Page): Promise<{ scrollWidth: number; viewport: number; wider: string[] }> {
  return page.evaluate(() => {
    const viewport = document.documentElement.clientWidth;
    const wider: string[] = [];
    for (const element of document.body.querySelectorAll('*')) {
      const box = element.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      if (box.right > viewport + 0.5 || box.left < -0.5) {
        const name = `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ''}${element.classList.length ? `.${[...element.classList].join('.')}` : ''}`;
        wider.push(`${name} (${Math.round(box.left)}-${Math.round(box.right)} px): ${(element.textContent ?? '').trim().slice(0, 60)}`);
      }
    }
    return { scrollWidth: document.documentElement.scrollWidth, viewport, wider };
  });
}

/**
 * The text a person reads in the page's main part and its dialog: <pre> blocks (JSON as the API
 * gave it) and closed <details> left out, as they are not prose the console formats.
 */
export async function readableText(page: Page): Promise<string> {
  return page.evaluate(() => {
    const parts: string[] = [];
    for (const root of [document.querySelector('main'), document.querySelector('#status'), ...document.querySelectorAll('dialog')]) {
      if (!root) continue;
      const copy = root.cloneNode(true) as Element;
      for (const skip of copy.querySelectorAll('pre, details:not([open]) > :not(summary)')) skip.remove();
      parts.push(copy.textContent ?? '');
    }
    return parts.join('\n');
  });
}
