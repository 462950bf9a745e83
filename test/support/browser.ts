/**
 * A real browser for the console's tests: Debian's Chromium (`/usr/bin/chromium`; `.ci/run`
 * installs it where it is missing) driven by playwright-core, which downloads no browser of its own.
 * Every request the page makes is watched: one to another origin is aborted and remembered, so a
 * test can assert the console loads nothing from the internet; console errors (a Content-Security-
 * Policy violation among them) are remembered too.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

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

/** A fresh browser context (its own sessionStorage, cookies and cache) with the page watched. */
export async function openConsole(browser: Browser, origin: string): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, baseURL: origin });
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

const require = createRequire(import.meta.url);
/** axe-core's own browser bundle, injected into the page as a script. */
export const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
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
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations;
  })) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
