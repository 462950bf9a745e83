/**
 * Square's own SDK (square 46.0.0) as the oracle for Square's webhook signature: every case is
 * signed with the simulator's signer (the fake Square's `webhook()` deliveries, and
 * `signSquareNotification` for bodies of a test's own) and verified twice, by the SDK's
 * `WebhooksHelper.verifySignature` and by the bridge's verifier (src/webhooks/signature.ts with
 * the Square adapter's scheme, as docs/pos-systems.md describes Square's signing).
 *
 * The two must agree on every case. The only disagreements allowed are the ones listed in
 * KNOWN_DIFFERENCES, each with its reason; any other disagreement fails, and so does a listed one
 * that stops being one.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { WebhooksHelper } from 'square';
import { squareAdapter } from '../../adapters/square/index.js';
import type { PosSettings } from '../../src/pos/contract.js';
import { signSquareNotification } from '../../simulator/pos-apis/square.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { fakePosApis, TWO_LINES } from '../support/pos-http.js';

const KEY = 'sq-signature-key-Zx81';
const URL_ = 'https://bridge.example.test/v1/webhooks/square';
const NOW = Date.parse('2026-03-01T10:00:00.000Z');
const HEADER = 'x-square-hmacsha256-signature';

interface Case {
  name: string;
  /** The bytes that arrive, as text (Square's bodies are UTF-8 JSON). */
  body: string;
  /** The signature header's raw values as they arrive: none, one, or several. */
  header: string[];
  /** What the receiver is configured with. */
  key: string;
  url: string;
}

/** Square's SDK's verdict: true or false, or 'throws' (it throws for an empty key or URL). */
async function sdkVerdict(c: Case): Promise<boolean | 'throws'> {
  try {
    // The SDK takes one header value; Node joins repeated ones with ", ", and so does this.
    return await WebhooksHelper.verifySignature({ requestBody: c.body, signatureHeader: c.header.join(', '), signatureKey: c.key, notificationUrl: c.url });
  } catch {
    return 'throws';
  }
}

/** The bridge's verdict through its one verifier, with the Square adapter's scheme, at the signed time. */
function bridgeVerdict(c: Case, now = NOW): true | string {
  const settings: PosSettings = { webhookSecret: c.key, notificationUrl: c.url, apiBaseUrl: '' };
  const rawHeaders = [...c.header.flatMap((v) => [HEADER, v]), 'content-type', 'application/json'];
  const headers = { [HEADER]: c.header.join(', '), 'content-type': 'application/json' };
  try {
    verifySignature(squareAdapter.webhook!.signature, settings, Buffer.from(c.body, 'utf8'), headers, rawHeaders, new Date(now));
    return true;
  } catch (error) {
    return (error as { reason?: string }).reason ?? String(error);
  }
}

/**
 * Where the bridge answers otherwise than the SDK, on purpose: case name → why. Both verdicts are
 * asserted, so each entry stays true.
 */
const KNOWN_DIFFERENCES: Record<string, { sdk: boolean | 'throws'; bridge: true | string; why: string }> = {
  'a header with spaces around it': {
    sdk: false,
    bridge: true,
    why: 'the bridge trims the header value (HTTP strips such whitespace anyway: over the wire both see the bare value); the SDK compares the string as given',
  },
  'a correct signature, signed 30 hours ago': {
    sdk: true,
    bridge: 'replay_window',
    why: 'the bridge also refuses an event whose signed created_at is outside its 26 h replay window (Square retries for 24 h); the SDK checks only the signature',
  },
};

describe("Square's webhook signature: the simulator's signer, verified by Square's SDK and by the bridge", () => {
  const apis = fakePosApis({ now: () => new Date(NOW), accounts: (sim) => void sim.pos.square.addAccount({ merchantId: 'SIGNATUREMER1', accessToken: 'sq-sig-token' }) });
  const { sim } = apis;

  /** Every case, built from real deliveries of the fake Square and from bodies of the test's own. */
  function cases(): Case[] {
    const sale = sim.pos.square.addOrder('SIGNATUREMER1', { lines: TWO_LINES, tip: 100 });
    const { refund } = sim.pos.square.addRefund('SIGNATUREMER1', { orderId: sale.id });
    const delivered = (event: 'order.created' | 'order.updated' | 'refund.created' | 'refund.updated', id: string, url = URL_) => {
      const d = sim.pos.square.webhook('SIGNATUREMER1', { event, id, signatureKey: KEY, notificationUrl: url });
      return { body: d.body, sig: d.headers[HEADER]! };
    };
    const order = delivered('order.updated', sale.id);
    const base = { body: order.body, header: [order.sig], key: KEY, url: URL_ };
    const signed = (body: string, url = URL_, key = KEY): Case => ({ name: '', body, header: [signSquareNotification(key, url, body)], key: KEY, url: URL_ });
    const unicode = JSON.stringify({ merchant_id: 'SIGNATUREMER1', type: 'order.updated', event_id: 'e-1', created_at: new Date(NOW).toISOString(), data: { note: 'Café ☕ — 東京 🍣 \u00e9\u0301' } });
    const escaped = unicode.replace(/[\u0080-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
    const oneByte = order.body.replace('"order_updated"', '"order_updatee"');
    const hex = createHmac('sha256', KEY).update(URL_ + order.body, 'utf8').digest('hex');
    const b64url = order.sig.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const old = JSON.stringify({ ...JSON.parse(order.body), created_at: new Date(NOW - 30 * 3600_000).toISOString() });

    const named: Case[] = [];
    const add = (name: string, c: Omit<Case, 'name'>) => named.push({ ...c, name });
    add('valid: order.updated delivery', base);
    const created = delivered('order.created', sale.id);
    add('valid: order.created delivery', { ...base, body: created.body, header: [created.sig] });
    const refunded = delivered('refund.updated', refund.id);
    add('valid: refund.updated delivery (a PaymentRefund)', { ...base, body: refunded.body, header: [refunded.sig] });
    add('valid: unicode body (UTF-8 bytes)', signed(unicode));
    add('valid: the same text with \\u escapes (other bytes, its own signature)', signed(escaped));
    add('valid: empty body', signed(''));
    add('valid: a key with non-ASCII characters', { ...signed(order.body, URL_, 'clé-ключ'), key: 'clé-ключ' });
    add('wrong key', { ...base, key: `${KEY}x` });
    add('key differing only in case', { ...base, key: KEY.toUpperCase() });
    add('body changed by one byte', { ...base, body: oneByte });
    add('body with a trailing newline added', { ...base, body: `${order.body}\n` });
    add('unicode body re-encoded with \\u escapes after signing', { ...signed(unicode), body: escaped });
    add('URL with a trailing slash', { ...base, url: `${URL_}/` });
    add('URL with a query string', { ...base, url: `${URL_}?merchant=1` });
    add('URL over http instead of https', { ...base, url: URL_.replace('https:', 'http:') });
    add('URL host in upper case', { ...base, url: URL_.replace('bridge.example.test', 'BRIDGE.example.test') });
    add('URL with the default port spelt out', { ...base, url: URL_.replace('.test/', '.test:443/') });
    add('signed for a URL with a trailing slash, received at the configured one', signed(order.body, `${URL_}/`));
    add('header missing', { ...base, header: [] });
    add('header empty', { ...base, header: [''] });
    add('header in hex instead of base64', { ...base, header: [hex] });
    add('header in base64url without padding', { ...base, header: [b64url] });
    add('header without its = padding', { ...base, header: [order.sig.replace(/=+$/, '')] });
    add('header in lower case', { ...base, header: [order.sig.toLowerCase()] });
    add('header of another delivery', { ...base, header: [created.sig] });
    add('a header with spaces around it', { ...base, header: [` ${order.sig} `] });
    add('the same correct header twice', { ...base, header: [order.sig, order.sig] });
    add('a correct signature, signed 30 hours ago', signed(old));
    add('empty signature key configured', { ...base, key: '' });
    add('empty notification URL configured', { ...base, url: '' });
    return named;
  }

  it('the SDK and the bridge agree on every case but the listed differences', async () => {
    const table: { name: string; sdk: boolean | 'throws'; bridge: true | string }[] = [];
    for (const c of cases()) table.push({ name: c.name, sdk: await sdkVerdict(c), bridge: bridgeVerdict(c) });
    const accepts = (v: boolean | 'throws' | string) => v === true;
    const disagreements = table.filter((row) => accepts(row.sdk) !== accepts(row.bridge) || KNOWN_DIFFERENCES[row.name] !== undefined);
    expect(disagreements.map(({ name, sdk, bridge }) => ({ name, sdk, bridge }))).toEqual(Object.entries(KNOWN_DIFFERENCES).map(([name, { sdk, bridge }]) => ({ name, sdk, bridge })));
    // Every "valid" case is accepted by both; everything else that is not a listed difference is refused by both.
    for (const row of table) {
      if (KNOWN_DIFFERENCES[row.name]) continue;
      expect({ name: row.name, sdk: accepts(row.sdk), bridge: accepts(row.bridge) }).toEqual({ name: row.name, sdk: row.name.startsWith('valid'), bridge: row.name.startsWith('valid') });
    }
  });

  it('the SDK accepts every kind of delivery the fake Square signs, for any notification URL', async () => {
    const sale = sim.pos.square.addOrder('SIGNATUREMER1', { lines: TWO_LINES });
    const { refund } = sim.pos.square.addRefund('SIGNATUREMER1', { orderId: sale.id });
    for (const url of [URL_, 'http://localhost:8080/v1/webhooks/square', 'https://bridge.example.test/v1/webhooks/square?x=1&y=ü']) {
      for (const [event, id] of [['order.created', sale.id], ['order.updated', sale.id], ['refund.created', refund.id], ['refund.updated', refund.id]] as const) {
        const d = sim.pos.square.webhook('SIGNATUREMER1', { event, id, signatureKey: KEY, notificationUrl: url });
        const c: Case = { name: event, body: d.body, header: [d.headers[HEADER]!], key: KEY, url };
        expect({ event, url, sdk: await sdkVerdict(c), bridge: bridgeVerdict(c) }).toEqual({ event, url, sdk: true, bridge: true });
      }
    }
  });
});
