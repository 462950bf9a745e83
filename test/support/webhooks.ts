/** Posts a webhook signed the way the POS signs it (through the core's test signer), byte for byte. */
import http from 'node:http';
import type { PosAdapter, PosSettings } from '../../src/pos/contract.js';
import { signLikePos } from '../../src/webhooks/signature.js';

export interface RawAnswer {
  status: number;
  body: any;
  text: string;
  headers: http.IncomingHttpHeaders;
}

/** Sends exactly these bytes and headers (supertest would re-encode JSON and fold repeated headers); JSON content type unless one is given. */
export function postRaw(url: string, body: Buffer | string, headers: [string, string][]): Promise<RawAnswer> {
  const target = new URL(url);
  return sendRaw('POST', target.origin, target.pathname + target.search, body, headers);
}

/**
 * Any method, with `path` sent exactly as given (fetch and supertest would normalise it or its
 * percent-encoding) and, with a body, exactly these bytes: JSON content type unless one is given.
 */
export function sendRaw(method: string, origin: string, path: string, body: Buffer | string | undefined, headers: [string, string][] = []): Promise<RawAnswer> {
  const bytes = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  return new Promise((resolve, reject) => {
    const target = new URL(origin);
    const req = http.request({ hostname: target.hostname, port: target.port, path, method }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode!, body: parsed, text, headers: res.headers });
      });
    });
    req.on('error', reject);
    const defaults: [string, string][] = !bytes || headers.some(([name]) => name.toLowerCase() === 'content-type') ? [] : [['content-type', 'application/json']];
    const length: [string, string][] = bytes ? [['content-length', String(bytes.length)]] : [];
    for (const [name, value] of [...defaults, ...length, ...headers]) {
      // setHeader would replace a repeated name; raw headers keep every occurrence.
      const current = req.getHeader(name);
      req.setHeader(name, current === undefined ? value : ([] as string[]).concat(current as string, value));
    }
    req.end(bytes);
  });
}

/** The signature header the POS would send for `body` (with `extraHeaders` when the scheme covers them). */
export function signature(adapter: PosAdapter, settings: PosSettings, body: Buffer | string, extraHeaders: Record<string, string> = {}, encoding?: 'base64' | 'hex'): [string, string] {
  const spec = adapter.webhook;
  if (!spec) throw new Error(`${adapter.name} has no webhook spec`);
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  const lowered = Object.fromEntries(Object.entries(extraHeaders).map(([k, v]) => [k.toLowerCase(), v]));
  return [spec.signature.header, signLikePos(spec.signature, settings, bytes, lowered, encoding)];
}

/**
 * A paid Shopify order as its webhook carries it: two loaves at 5.00, no tax, so a 1000-cent Check;
 * `currency` and the customer's `phone` as a test needs them.
 */
export function paidShopifyOrder(id: number, options: { currency?: string; phone?: string | null } = {}): Record<string, unknown> {
  const phone = options.phone ?? null;
  return {
    id,
    name: `#${id}`,
    currency: options.currency ?? 'EUR',
    financial_status: 'paid',
    taxes_included: false,
    created_at: '2026-11-21T10:00:00+01:00',
    processed_at: '2026-11-21T10:05:00+01:00',
    email: 'pat@example.test',
    phone,
    customer: { id: 9, email: 'pat@example.test', phone, first_name: 'Pat', last_name: 'Doe' },
    line_items: [{ id: 1, variant_id: 11, product_id: 111, sku: 'BREAD', title: 'Bread', name: 'Bread', quantity: 2, price: '5.00', discount_allocations: [], tax_lines: [] }],
    shipping_lines: [],
    total_discounts: '0.00',
    subtotal_price: '10.00',
    total_tax: '0.00',
    total_tip_received: '0.00',
    total_price: '10.00',
  };
}
