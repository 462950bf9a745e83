/**
 * A delivery's headers read under the names the adapter reads: Shopify's names without `X-` are the
 * X- ones (docs/pos-systems.md, "Shopify"); both with equal values are one header, with different
 * values a 400 naming the header; a repeat under the alias stays a repeat (refused by the signature
 * check as any repeated signature header is).
 */
import { describe, expect, it } from '@jest/globals';
import { shopifyWebhook } from '../../adapters/shopify/webhook.js';
import { canonicalHeaders } from '../../src/webhooks/headers.js';
import { singleHeader } from '../../src/webhooks/signature.js';
import { validationIssues } from '../support/validation.js';

const aliases = shopifyWebhook.headerAliases;

/** Node's view of a raw header list: lower-case names, repeats joined. */
function delivery(raw: string[]) {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    headers[name] = headers[name] === undefined ? raw[i + 1]! : `${headers[name]}, ${raw[i + 1]}`;
  }
  return { headers, rawHeaders: raw };
}

describe('canonicalHeaders', () => {
  it('renames each unprefixed Shopify header to its X- name, in the parsed headers and the raw list', () => {
    const read = canonicalHeaders(aliases, delivery(['shopify-hmac-sha256', 'sig', 'Shopify-Topic', 'orders/paid', 'shopify-event-id', 'e-1', 'shopify-webhook-id', 'w-1', 'shopify-shop-domain', 'a.myshopify.com', 'content-type', 'application/json']));
    expect(read.headers).toEqual({ 'x-shopify-hmac-sha256': 'sig', 'x-shopify-topic': 'orders/paid', 'x-shopify-event-id': 'e-1', 'x-shopify-webhook-id': 'w-1', 'x-shopify-shop-domain': 'a.myshopify.com', 'content-type': 'application/json' });
    expect(singleHeader(read.rawHeaders, 'x-shopify-hmac-sha256')).toBe('sig');
    expect(singleHeader(read.rawHeaders, 'x-shopify-topic')).toBe('orders/paid');
  });

  it('both names with equal values are one header', () => {
    const read = canonicalHeaders(aliases, delivery(['X-Shopify-Hmac-Sha256', 'sig', 'shopify-hmac-sha256', 'sig']));
    expect(read.headers).toEqual({ 'x-shopify-hmac-sha256': 'sig' });
    expect(singleHeader(read.rawHeaders, 'x-shopify-hmac-sha256')).toBe('sig');
  });

  it('both names with different values are a 400 naming the header, without echoing either value', () => {
    const issues = validationIssues(() => canonicalHeaders(aliases, delivery(['X-Shopify-Hmac-Sha256', 'sig-one', 'shopify-hmac-sha256', 'sig-two'])));
    expect(issues).toEqual([{ field: 'x-shopify-hmac-sha256', message: 'is also sent as shopify-hmac-sha256 with another value: which one the POS meant cannot be told; send one of the two names' }]);
    expect(JSON.stringify(issues)).not.toMatch(/sig-one|sig-two/);
  });

  it('a repeated alias stays repeated, so the signature check refuses it as any repeat', () => {
    const read = canonicalHeaders(aliases, delivery(['shopify-hmac-sha256', 'sig', 'shopify-hmac-sha256', 'sig']));
    expect(singleHeader(read.rawHeaders, 'x-shopify-hmac-sha256')).toBeUndefined();
  });

  it('a replay, which keeps only the parsed headers, reads them the same way', () => {
    expect(canonicalHeaders(aliases, { headers: { 'shopify-topic': 'orders/paid' }, rawHeaders: [] }).headers).toEqual({ 'x-shopify-topic': 'orders/paid' });
  });

  it('without aliases the delivery is as it came', () => {
    const given = delivery(['shopify-topic', 'orders/paid']);
    expect(canonicalHeaders(undefined, given)).toBe(given);
  });
});
