/**
 * Shopify's own library (@shopify/shopify-api 15.0.0) as the oracle for Shopify's webhook
 * signature: every case is signed with the simulator's signer (the fake Shopify's `webhook()`
 * deliveries, and `signShopifyDelivery` for bodies of a test's own) and verified twice, by the
 * library's `shopify.webhooks.validate` (node runtime adapter, given a node `IncomingMessage` as
 * its raw request) and by the bridge's verifier (src/webhooks/signature.ts with the Shopify
 * adapter's scheme, after its header aliases are read as the bridge's ingest reads them; as
 * docs/pos-systems.md, "Shopify" and "Signing a webhook by hand", describe Shopify's signing).
 *
 * The two must agree on every case. The only disagreements allowed are the ones listed in
 * KNOWN_DIFFERENCES, each with its reason; any other disagreement fails, and so does a listed one
 * that stops being one. The same cases are then posted over real HTTP to a local server that asks
 * both, to show the request built by hand is what Node hands a receiver.
 */
import { once } from 'node:events';
import { createHmac } from 'node:crypto';
import { createServer, IncomingMessage, request, ServerResponse, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Socket } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import '@shopify/shopify-api/adapters/node';
import { ApiVersion, LogSeverity, shopifyApi, type Shopify } from '@shopify/shopify-api';
import { SHOPIFY_API_VERSION } from '../../adapters/shopify/backfill.js';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { ValidationError } from '../../src/kernel/errors.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { signShopifyDelivery } from '../../simulator/pos-apis/shopify.js';
import { canonicalHeaders } from '../../src/webhooks/headers.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { fakePosApis, TWO_LINES } from '../support/pos-http.js';

const SECRET = 'shpss_signature-secret-Q7';
const SHOP = 'signature-cafe.myshopify.com';
const NOW = Date.parse('2026-03-01T10:00:00.000Z');
const HMAC = 'x-shopify-hmac-sha256';
const SPEC = shopifyAdapter.webhook!;

type Headers = [name: string, value: string][];

interface Case {
  name: string;
  /** The bytes that arrive, as text (Shopify's bodies are UTF-8 JSON). */
  body: string;
  /** The delivery's headers as they arrive, in order: a name may be absent or come twice. */
  headers: Headers;
  /** The app's secret the receiver is configured with. */
  secret: string;
}

/** A verdict: accepted, or why not (the library's reason, with the headers it missed; the bridge's reason code). */
type Verdict = true | string;

/** One case's row of the table: the library's verdict ('throws' when it cannot be configured) and the bridge's. */
interface Row {
  name: string;
  library: Verdict | 'throws';
  bridge: Verdict;
}

/** Node's view of the header lines: names in lower case, a repeated one joined with ", " (as Node does for these). */
function folded(headers: Headers): IncomingHttpHeaders {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) {
    const key = name.toLowerCase();
    out[key] = key in out ? `${out[key]}, ${value}` : value;
  }
  return out;
}

const libraries = new Map<string, Shopify>();
/** The library configured as an app with this secret (its constructor throws for an empty one). */
function library(secret: string): Shopify {
  let shopify = libraries.get(secret);
  if (!shopify) {
    shopify = shopifyApi({
      apiKey: 'signature-oracle-app',
      apiSecretKey: secret,
      scopes: ['read_orders'],
      hostName: 'bridge.example.test',
      apiVersion: SHOPIFY_API_VERSION as ApiVersion,
      isEmbeddedApp: false,
      logger: { log: () => undefined, level: LogSeverity.Error },
    });
    libraries.set(secret, shopify);
  }
  return shopify;
}

/** The library's verdict on a node request carrying the headers: `webhooks.validate` reads them through the node adapter. */
async function libraryVerdict(secret: string, body: string, rawRequest: IncomingMessage): Promise<Verdict | 'throws'> {
  let shopify: Shopify;
  try {
    shopify = library(secret);
  } catch {
    return 'throws';
  }
  const result = await shopify.webhooks.validate({ rawBody: body, rawRequest, rawResponse: new ServerResponse(rawRequest) });
  if (result.valid) return true;
  return 'missingHeaders' in result ? `${result.reason} (${result.missingHeaders.join(', ')})` : result.reason;
}

/** A node request as the library's node adapter reads one: method, URL and headers. */
function nodeRequest(headers: Headers): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  req.method = 'POST';
  req.url = '/v1/webhooks/shopify';
  req.rawHeaders = headers.flat();
  req.headers = folded(headers);
  return req;
}

/**
 * The bridge's verdict as its ingest reaches it: the adapter's header aliases read first (a `400`
 * `invalid_payload` naming the header when both names differ), then the one verifier with the
 * Shopify adapter's scheme, at the test's clock.
 */
function bridgeVerdict(secret: string, body: Buffer, headers: IncomingHttpHeaders, rawHeaders: string[]): Verdict {
  const settings: PosSettings = { webhookSecret: secret, apiBaseUrl: '' };
  try {
    const read = canonicalHeaders(SPEC.headerAliases, { headers, rawHeaders });
    verifySignature(SPEC.signature, settings, body, read.headers, read.rawHeaders, new Date(NOW));
    return true;
  } catch (error) {
    if (error instanceof ValidationError) return `${error.code} (${error.issues.map((i) => i.field).join(', ')})`;
    return (error as { reason?: string }).reason ?? String(error);
  }
}

async function verdicts(c: Case): Promise<Row> {
  return {
    name: c.name,
    library: await libraryVerdict(c.secret, c.body, nodeRequest(c.headers)),
    bridge: bridgeVerdict(c.secret, Buffer.from(c.body, 'utf8'), folded(c.headers), c.headers.flat()),
  };
}

/**
 * Where the bridge answers otherwise than the library, on purpose: case name → why. Both verdicts
 * are asserted, so each entry stays true.
 */
const KNOWN_DIFFERENCES: Record<string, { library: Verdict | 'throws'; bridge: Verdict; why: string }> = {
  'empty body, correctly signed': {
    library: 'missing_body',
    bridge: true,
    why: 'the library refuses an empty body before it looks at the signature; for the bridge the signature of the empty bytes is authentic, and the delivery is then kept as a dead letter (202, reason starting `empty body`, docs/pos-systems.md "Shopify") for a person to see',
  },
  'a header with spaces around it': {
    library: 'invalid_hmac',
    bridge: true,
    why: 'the bridge trims the header value; the library compares it as given. HTTP strips such whitespace anyway: over the wire both see the bare value (the last test)',
  },
  'X-Shopify-Topic missing': {
    library: 'missing_headers (X-Shopify-Topic)',
    bridge: true,
    why: "the library's validate also requires the topic, shop, API version and webhook id headers; the bridge's verifier checks the signature only (the HMAC covers the body, no header), and the topic is asked for after it: an authentic delivery without one is kept as a dead letter naming x-shopify-topic (the adapter's classify)",
  },
  'X-Shopify-Shop-Domain missing': {
    library: 'missing_headers (X-Shopify-Shop-Domain)',
    bridge: true,
    why: 'required by the library (see the topic); the shop is not signed, and the bridge finds the merchant by it after the signature: an authentic delivery naming no shop is kept as a dead letter for no merchant',
  },
  'X-Shopify-API-Version missing': {
    library: 'missing_headers (X-Shopify-API-Version)',
    bridge: true,
    why: 'required by the library (see the topic); the bridge reads the body as the REST object whatever version it was sent in, and never reads the version header',
  },
  'X-Shopify-Webhook-Id missing': {
    library: 'missing_headers (X-Shopify-Webhook-Id)',
    bridge: true,
    why: 'required by the library (see the topic); the bridge dedupes on X-Shopify-Event-Id, else X-Shopify-Webhook-Id, else the topic and the object id, and remembers the signed bytes (docs/pos-systems.md "Shopify")',
  },
  'signature header without X-, the other headers with it': {
    library: 'missing_headers (shopify-topic, shopify-shop-domain, shopify-api-version, shopify-webhook-id)',
    bridge: true,
    why: "the library chooses one set of names by the signature header's: `shopify-hmac-sha256` makes it read every header without `X-` (its events webhooks); the bridge reads each header under either name on its own (the adapter's headerAliases)",
  },
  'every header under both names, the two signatures different (the unprefixed one correct)': {
    library: true,
    bridge: 'invalid_payload (x-shopify-hmac-sha256)',
    why: "the library believes the unprefixed signature header when there is one and never looks at the X- one; the bridge refuses two names with different values (400 naming the header): which one Shopify meant cannot be told (docs/pos-systems.md \"Shopify\")",
  },
};

describe("Shopify's webhook signature: the simulator's signer, verified by Shopify's library and by the bridge", () => {
  const apis = fakePosApis({ now: () => new Date(NOW), accounts: (sim) => void sim.pos.shopify.addAccount({ shop: SHOP }) });
  const { sim } = apis;

  type Topic = 'orders/create' | 'orders/paid' | 'orders/updated' | 'refunds/create';
  /** A fake Shopify delivery's headers, in the order the fake gives them. */
  const headersOf = (d: { headers: Record<string, string> }): Headers => Object.entries(d.headers);
  const replaced = (headers: Headers, name: string, value: string): Headers => headers.map(([n, v]) => [n, n === name ? value : v]);
  const without = (headers: Headers, name: string): Headers => headers.filter(([n]) => n !== name);
  const unprefixed = (headers: Headers): Headers => headers.map(([n, v]) => [n.replace(/^x-shopify-/, 'shopify-'), v]);

  /** Every case, built from real deliveries of the fake Shopify and from bodies of the test's own. */
  function cases(): Case[] {
    const sale = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES, tip: 100, customer: { phone: '+15550001111' } });
    const delivered = (topic: Topic, id: number) => sim.pos.shopify.webhook(SHOP, { topic, id, secret: SECRET });
    const paid = delivered('orders/paid', sale.id);
    const refund = sim.pos.shopify.addRefund(SHOP, { orderId: String(sale.id), lines: [{ line: 0, quantity: 1 }] });
    const refunded = delivered('refunds/create', refund.id);
    const base = { body: paid.body, headers: headersOf(paid), secret: SECRET };
    const sig = paid.headers[HMAC]!;
    /** A body of the test's own, signed as the fake signs, under the orders/paid delivery's other headers. */
    const signed = (body: string, secret = SECRET): Omit<Case, 'name'> => ({ body, headers: replaced(base.headers, HMAC, signShopifyDelivery(secret, body)), secret: SECRET });
    const unicode = JSON.stringify({ ...JSON.parse(paid.body), note: 'Café ☕ — 東京 🍣 \u00e9\u0301' });
    const escaped = unicode.replace(/[\u0080-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
    const oneByte = paid.body.replace('"source_name":"pos"', '"source_name":"pot"');
    if (oneByte === paid.body) throw new Error('the one-byte change did not apply');
    const hex = createHmac('sha256', SECRET).update(paid.body, 'utf8').digest('hex');
    const b64url = sig.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

    const named: Case[] = [];
    const add = (name: string, c: Omit<Case, 'name'>) => named.push({ ...c, name });
    add('valid: orders/paid delivery', base);
    const created = delivered('orders/create', sale.id);
    add('valid: orders/create delivery', { ...base, body: created.body, headers: headersOf(created) });
    const updated = delivered('orders/updated', sale.id);
    add('valid: orders/updated delivery', { ...base, body: updated.body, headers: headersOf(updated) });
    add('valid: refunds/create delivery', { ...base, body: refunded.body, headers: headersOf(refunded) });
    add('valid: unicode body (UTF-8 bytes)', signed(unicode));
    add('valid: the same text with \\u escapes (other bytes, its own signature)', signed(escaped));
    add('valid: a body that is not JSON (the signature is over bytes)', signed('not json {'));
    add('valid: a secret with non-ASCII characters', { ...signed(paid.body, 'clé-ключ'), secret: 'clé-ключ' });
    add('valid: every header without X- (as the library also sends them)', { ...base, headers: unprefixed(base.headers) });
    add('valid: every header under both names, the same values', { ...base, headers: [...base.headers, ...unprefixed(base.headers)] });
    add('valid (unsigned header): X-Shopify-Topic changed to orders/create', { ...base, headers: replaced(base.headers, 'x-shopify-topic', 'orders/create') });
    add('valid (unsigned header): X-Shopify-Shop-Domain naming another shop', { ...base, headers: replaced(base.headers, 'x-shopify-shop-domain', 'other-shop.myshopify.com') });
    add('valid (Shopify signs no time): triggered 30 hours ago', { ...base, headers: replaced(base.headers, 'x-shopify-triggered-at', new Date(NOW - 30 * 3600_000).toISOString()) });
    add('wrong secret', { ...base, secret: `${SECRET}x` });
    add('secret differing only in case', { ...base, secret: SECRET.toUpperCase() });
    add('body changed by one byte', { ...base, body: oneByte });
    add('body with a trailing newline added', { ...base, body: `${paid.body}\n` });
    add('unicode body re-encoded with \\u escapes after signing', { ...signed(unicode), body: escaped });
    add('empty body, correctly signed', signed(''));
    add('header missing', { ...base, headers: without(base.headers, HMAC) });
    add('header empty', { ...base, headers: replaced(base.headers, HMAC, '') });
    add('header in hex instead of base64', { ...base, headers: replaced(base.headers, HMAC, hex) });
    add('header in base64url without padding', { ...base, headers: replaced(base.headers, HMAC, b64url) });
    add('header without its = padding', { ...base, headers: replaced(base.headers, HMAC, sig.replace(/=+$/, '')) });
    add('header in lower case', { ...base, headers: replaced(base.headers, HMAC, sig.toLowerCase()) });
    add('header of another delivery (the refund)', { ...base, headers: replaced(base.headers, HMAC, refunded.headers[HMAC]!) });
    add('a header with spaces around it', { ...base, headers: replaced(base.headers, HMAC, ` ${sig} `) });
    add('the same correct header twice', { ...base, headers: [...base.headers, [HMAC, sig]] });
    add('X-Shopify-Topic missing', { ...base, headers: without(base.headers, 'x-shopify-topic') });
    add('X-Shopify-Shop-Domain missing', { ...base, headers: without(base.headers, 'x-shopify-shop-domain') });
    add('X-Shopify-API-Version missing', { ...base, headers: without(base.headers, 'x-shopify-api-version') });
    add('X-Shopify-Webhook-Id missing', { ...base, headers: without(base.headers, 'x-shopify-webhook-id') });
    add('signature header without X-, the other headers with it', { ...base, headers: base.headers.map(([n, v]) => [n === HMAC ? 'shopify-hmac-sha256' : n, v]) });
    const wrongSig = refunded.headers[HMAC]!;
    add('every header under both names, the two signatures different (the unprefixed one correct)', { ...base, headers: [...replaced(base.headers, HMAC, wrongSig), ...unprefixed(base.headers)] });
    add('every header under both names, the two signatures different (the X- one correct)', { ...base, headers: [...base.headers, ...unprefixed(replaced(base.headers, HMAC, wrongSig))] });
    add('empty secret configured', { ...base, secret: '' });
    return named;
  }

  it('the library and the bridge agree on every case but the listed differences', async () => {
    const table: Row[] = [];
    for (const c of cases()) table.push(await verdicts(c));
    const accepts = (v: Verdict | 'throws') => v === true;
    const disagreements = table.filter((row) => accepts(row.library) !== accepts(row.bridge) || KNOWN_DIFFERENCES[row.name] !== undefined);
    expect(disagreements).toEqual(Object.entries(KNOWN_DIFFERENCES).map(([name, { library, bridge }]) => ({ name, library, bridge })));
    // Every "valid" case is accepted by both; everything else that is not a listed difference is refused by both.
    for (const row of table) {
      if (KNOWN_DIFFERENCES[row.name]) continue;
      expect({ name: row.name, library: accepts(row.library), bridge: accepts(row.bridge) }).toEqual({ name: row.name, library: row.name.startsWith('valid'), bridge: row.name.startsWith('valid') });
    }
    // Where both refuse, the reasons name the same fault.
    const row = (name: string) => table.find((r) => r.name === name)!;
    expect(row('header missing')).toEqual({ name: 'header missing', library: 'missing_hmac', bridge: 'signature_missing' });
    expect(row('header empty')).toEqual({ name: 'header empty', library: 'missing_hmac', bridge: 'signature_missing' });
    expect(row('wrong secret')).toEqual({ name: 'wrong secret', library: 'invalid_hmac', bridge: 'signature_mismatch' });
    expect(row('empty secret configured')).toEqual({ name: 'empty secret configured', library: 'throws', bridge: 'not_configured' });
  });

  it('what the bridge does after the signature with a delivery missing a header the library requires (the listed reasons)', () => {
    const sale = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES });
    const d = sim.pos.shopify.webhook(SHOP, { topic: 'orders/paid', id: sale.id, secret: SECRET });
    const headers = folded(headersOf(d));
    const body = JSON.parse(d.body) as unknown;
    const { 'x-shopify-topic': _topic, ...noTopic } = headers;
    expect(() => SPEC.classify(body, noTopic)).toThrow(ValidationError);
    expect(() => SPEC.classify(body, noTopic)).toThrow(/x-shopify-topic/);
    const { 'x-shopify-shop-domain': _shop, ...noShop } = headers;
    expect(SPEC.accounts!(body, noShop)).toEqual([{ account: undefined, body }]);
    const { 'x-shopify-api-version': _version, 'x-shopify-webhook-id': _webhookId, ...noVersionNorWebhookId } = headers;
    expect(SPEC.classify(body, noVersionNorWebhookId)).toEqual(SPEC.classify(body, headers));
  });

  it('the library and the bridge accept every kind of delivery the fake Shopify signs, in any API version', async () => {
    const plain = sim.pos.shopify.addOrder(SHOP, { lines: TWO_LINES });
    const rich = sim.pos.shopify.addOrder(SHOP, { lines: [{ name: 'Café crème ☕', unitPrice: 450, quantity: 2, discount: 50, tax: 68 }, { name: '抹茶 🍵', unitPrice: 299 }], tip: 150, customer: { phone: '+442079460018', firstName: 'Zoë' } });
    const partial = sim.pos.shopify.addRefund(SHOP, { orderId: String(rich.id), lines: [{ line: 1 }] });
    const whole = sim.pos.shopify.addRefund(SHOP, { orderId: String(plain.id) });
    for (const apiVersion of ['2024-01', SHOPIFY_API_VERSION, 'unstable']) {
      for (const [topic, id] of [
        ['orders/create', plain.id],
        ['orders/paid', plain.id],
        ['orders/updated', plain.id],
        ['orders/paid', rich.id],
        ['orders/updated', rich.id],
        ['refunds/create', partial.id],
        ['refunds/create', whole.id],
      ] as const) {
        const d = sim.pos.shopify.webhook(SHOP, { topic, id, secret: SECRET, apiVersion });
        const c: Case = { name: `${topic} ${id}`, body: d.body, headers: headersOf(d), secret: SECRET };
        expect({ apiVersion, ...(await verdicts(c)) }).toEqual({ apiVersion, name: c.name, library: true, bridge: true });
      }
    }
  });

  it('over real HTTP the verdicts are the same, but for spaces around the header, which HTTP strips for both', async () => {
    const all = cases();
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', async () => {
        const c = all[Number(req.url!.slice(1))]!;
        const raw = Buffer.concat(chunks);
        const verdict = { name: c.name, library: await libraryVerdict(c.secret, raw.toString('utf8'), req), bridge: bridgeVerdict(c.secret, raw, req.headers, req.rawHeaders) };
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(verdict));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      const post = (i: number, c: Case) =>
        new Promise<Row>((resolve, reject) => {
          const body = Buffer.from(c.body, 'utf8');
          // Header lines exactly as listed (a repeated name is sent twice); Host and Content-Length as a client sends them.
          const lines = [['Host', `127.0.0.1:${port}`], ...c.headers, ['Content-Length', String(body.length)]].flat();
          const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/${i}`, agent: false, headers: lines }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (text += chunk));
            res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`${c.name}: ${res.statusCode} ${text}`))));
          });
          req.on('error', reject);
          req.end(body);
        });
      const overHttp: Row[] = [];
      for (const [i, c] of all.entries()) overHttp.push(await post(i, c));
      const direct: Row[] = [];
      for (const c of all) direct.push(await verdicts(c));
      const spaces = 'a header with spaces around it';
      expect(overHttp).toEqual(direct.map((row) => (row.name === spaces ? { name: spaces, library: true, bridge: true } : row)));
    } finally {
      server.close();
    }
  });
});
