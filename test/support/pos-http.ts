/** Reads the simulator's fake POS APIs over real HTTP, the way a backfill poller would. */
import { afterAll, beforeAll, beforeEach } from '@jest/globals';
import type { AdapterContext, PosSettings } from '../../src/pos/contract.js';
import { createSimulator, type ListeningSimulator, type SignedDelivery, type Simulator } from '../../simulator/index.js';
import { verifySignature } from '../../src/webhooks/signature.js';

/**
 * The simulator for one test file's fake-POS tests: listening from before the first test to after
 * the last, its clock `now`, its fake POSes emptied before each test and `accounts` added back.
 */
export function fakePosApis(options: { now?: () => Date; accounts?: (sim: Simulator) => void } = {}): { readonly sim: Simulator; readonly url: string } {
  const sim = createSimulator(options.now ? { now: options.now } : {});
  let server: ListeningSimulator | undefined;
  beforeAll(async () => {
    server = await sim.listen();
  });
  afterAll(() => server?.close());
  beforeEach(() => {
    sim.pos.reset();
    options.accounts?.(sim);
  });
  return {
    sim,
    get url() {
      if (!server) throw new Error('the simulator is not listening yet: read url inside a test');
      return server.url;
    },
  };
}

/** ISO times `minutes` after `t0`: the fixed clock fake-POS tests write their orders at. */
export const minutesAfter =
  (t0: number) =>
  (minutes: number): string =>
    new Date(t0 + minutes * 60_000).toISOString();

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

export async function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<Reply> {
  const headers = { ...(init.headers ?? {}) };
  let body: string | undefined;
  if (init.body !== undefined) {
    body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(url, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/** `<url>; rel="next", <url>; rel="previous"` → { next: url, previous: url }. */
export function links(header: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(/,\s*(?=<)/)) {
    const m = /^<([^>]*)>;\s*rel="([^"]+)"$/.exec(part.trim());
    if (m) out[m[2]!] = m[1]!;
  }
  return out;
}

export const US: AdapterContext = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };

/** Verifies a signed delivery with the bridge's own verifier and the adapter's scheme: throws when the bridge would refuse it. */
export function verifyDelivery(scheme: Parameters<typeof verifySignature>[0], settings: PosSettings, delivery: SignedDelivery, now = new Date()): void {
  const raw = Buffer.from(delivery.body, 'utf8');
  const headers = Object.fromEntries(Object.entries(delivery.headers).map(([k, v]) => [k.toLowerCase(), v]));
  const rawHeaders = Object.entries(delivery.headers).flat();
  verifySignature(scheme, settings, raw, headers, rawHeaders, now);
}

/**
 * One order of two lines, the same for every POS: 3 × 4.50 less 0.50 with 0.68 tax, and 2.99 with
 * 0.25 tax, tip 1.00. After discounts and before tax and tip it is 13.00 + 2.99 = 15.99.
 */
export const TWO_LINES = [
  { name: 'Latte', unitPrice: 450, quantity: 3, discount: 50, tax: 68 },
  { name: 'Bagel', unitPrice: 299, tax: 25 },
];
