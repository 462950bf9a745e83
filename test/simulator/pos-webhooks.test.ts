/**
 * The fake POS APIs' webhook helpers (docs/simulator-pos-apis.md, "Webhooks"): each delivery passes
 * the bridge's own signature check with that POS's adapter description, names its account, and is
 * classified by the adapter into the action its object calls for; where the webhook carries only
 * ids, the adapter's fetch reads the object from the fake API.
 */
import { describe, expect, it } from '@jest/globals';
import type { IncomingHttpHeaders } from 'node:http';
import { adapters } from '../../adapters/index.js';
import { posApi } from '../../src/pos/api.js';
import type { PosAdapter, PosSettings, WebhookAction } from '../../src/pos/contract.js';
import type { SignedDelivery } from '../../simulator/index.js';
import { fakePosApis, TWO_LINES, US, verifyDelivery } from '../support/pos-http.js';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const SECRET = 'sandbox-webhook-secret';

function adapter(name: string): PosAdapter {
  return adapters.get(name)!;
}

function headersOf(delivery: SignedDelivery): IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(delivery.headers).map(([k, v]) => [k.toLowerCase(), v]));
}

/** Verifies like the bridge, then classifies like the bridge: the delivery's account and actions. */
function receive(name: string, settings: PosSettings, delivery: SignedDelivery): { account: string | undefined; actions: WebhookAction[] } {
  const spec = adapter(name).webhook!;
  verifyDelivery(spec.signature, settings, delivery, new Date(T0));
  const body: unknown = JSON.parse(delivery.body);
  const [part] = spec.accounts ? spec.accounts(body, headersOf(delivery)) : [{ account: undefined, body }];
  return { account: part!.account ?? part!.headerAccount, actions: spec.classify(part!.body, headersOf(delivery)) };
}

/** A signed delivery with one byte changed no longer verifies. */
function tampered(delivery: SignedDelivery): SignedDelivery {
  return { ...delivery, body: delivery.body.replace('"', ' "') };
}

describe('fake POS webhooks, as the bridge receives them', () => {

  const apis = fakePosApis({ now: () => new Date(T0) });
  const { sim } = apis;

  it('Square: signed over the notification URL and body; order.updated is fetched from the fake and decided a checkout, refund.updated a refund', async () => {
    const { merchantId, accessToken } = sim.pos.square.addAccount({});
    const sale = sim.pos.square.addOrder(merchantId, { lines: TWO_LINES, tip: 100 });
    const settings: PosSettings = { webhookSecret: SECRET, notificationUrl: 'https://bridge.example/v1/webhooks/square', apiBaseUrl: `${apis.url}/square`, accessToken };
    const delivery = sim.pos.square.webhook(merchantId, { event: 'order.updated', id: sale.id, signatureKey: SECRET, notificationUrl: settings.notificationUrl! });
    const { account, actions } = receive('square', settings, delivery);
    expect(account).toBe(merchantId);
    const api = posApi('square', settings, 2000)!;
    const [fetch] = actions;
    if (fetch?.kind !== 'fetch') throw new Error(`expected a fetch, got ${fetch?.kind}`);
    const decided = fetch.decide(await fetch.fetch(api)) as WebhookAction;
    expect(decided.kind).toBe('checkout');
    expect(adapter('square').parseCheckout((decided as { payload: unknown }).payload, US).check.amount).toBe(1599);
    expect(() => receive('square', { ...settings, notificationUrl: 'https://elsewhere.example/hook' }, delivery)).toThrow(/does not match/);
    expect(() => receive('square', settings, tampered(delivery))).toThrow(/does not match/);

    const { refund } = sim.pos.square.addRefund(merchantId, { orderId: sale.id, lines: [{ line: 1 }] });
    const refundDelivery = sim.pos.square.webhook(merchantId, { event: 'refund.updated', id: refund.id, signatureKey: SECRET, notificationUrl: settings.notificationUrl! });
    const [refundFetch] = receive('square', settings, refundDelivery).actions;
    if (refundFetch?.kind !== 'fetch') throw new Error('expected a fetch');
    const reversal = refundFetch.decide(await refundFetch.fetch(api)) as { kind: string; payload: unknown };
    expect(reversal.kind).toBe('refund');
    expect(adapter('square').parseRefund(reversal.payload, US)).toMatchObject({ orderId: sale.id, amountCents: 299 });
  });

  it('Shopify: HMAC of the body in base64, topic and shop in headers; orders/paid is decided a checkout, refunds/create a refund', () => {
    const { shop } = sim.pos.shopify.addAccount({ shop: 'cafe-9.myshopify.com' });
    const order = sim.pos.shopify.addOrder(shop, { lines: TWO_LINES });
    const settings: PosSettings = { webhookSecret: SECRET, apiBaseUrl: 'https://{shop}' };
    const paid = receive('shopify', settings, sim.pos.shopify.webhook(shop, { topic: 'orders/paid', id: order.id, secret: SECRET }));
    expect(paid.account).toBe(shop);
    expect(paid.actions.map((a) => a.kind)).toEqual(['checkout']);
    expect(adapter('shopify').parseCheckout((paid.actions[0] as { payload: unknown }).payload, US).check.amount).toBe(1599);
    const refund = sim.pos.shopify.addRefund(shop, { orderId: String(order.id), lines: [{ line: 0, quantity: 2 }] });
    const created = receive('shopify', settings, sim.pos.shopify.webhook(shop, { topic: 'refunds/create', id: refund.id, secret: SECRET }));
    expect(adapter('shopify').parseRefund((created.actions[0] as { payload: unknown }).payload, US)).toMatchObject({ amountCents: 866 });
    expect(() => receive('shopify', { ...settings, webhookSecret: 'other' }, sim.pos.shopify.webhook(shop, { topic: 'orders/paid', id: order.id, secret: SECRET }))).toThrow(/does not match/);
  });

  it('Clover: ids only, keyed by merchant, with the static X-Clover-Auth code; the adapter fetches the order from the fake and decides a checkout', async () => {
    const { merchantId, accessToken } = sim.pos.clover.addAccount({});
    const order = sim.pos.clover.addOrder(merchantId, { lines: TWO_LINES });
    const settings: PosSettings = { webhookSecret: 'clover-auth-code', apiBaseUrl: `${apis.url}/clover`, accessToken };
    const delivery = sim.pos.clover.webhook(merchantId, { id: order.id as string, authCode: 'clover-auth-code' });
    const { account, actions } = receive('clover', settings, delivery);
    expect(account).toBe(merchantId);
    const [fetch] = actions;
    if (fetch?.kind !== 'fetch') throw new Error('expected a fetch');
    const decided = fetch.decide(await fetch.fetch(posApi('clover', settings, 2000)!)) as { kind: string; payload: unknown };
    expect(decided.kind).toBe('checkout');
    expect(adapter('clover').parseCheckout(decided.payload, US).check.amount).toBe(1599);
    expect(() => receive('clover', settings, sim.pos.clover.webhook(merchantId, { id: order.id as string, authCode: 'guess' }))).toThrow(/does not match/);
  });

  it('Toast: the whole order in details.order, Toast-Signature over body and timestamp; a paid order is decided a checkout and a refund on it a refund', () => {
    const { restaurantGuid } = sim.pos.toast.addAccount({});
    const order = sim.pos.toast.addOrder(restaurantGuid, { lines: TWO_LINES });
    const settings: PosSettings = { webhookSecret: SECRET, apiBaseUrl: 'https://ws-api.toasttab.com' };
    const paid = receive('toast', settings, sim.pos.toast.webhook(restaurantGuid, { id: order.guid, secret: SECRET }));
    expect(paid.account).toBe(restaurantGuid);
    expect(paid.actions.map((a) => a.kind)).toEqual(['checkout']);
    sim.pos.toast.addRefund(restaurantGuid, { orderId: order.guid, lines: [{ line: 1 }] });
    const refunded = receive('toast', settings, sim.pos.toast.webhook(restaurantGuid, { id: order.guid, secret: SECRET }));
    expect(refunded.actions.map((a) => a.kind)).toEqual(['checkout', 'refund']);
    expect(adapter('toast').parseRefund((refunded.actions[1] as { payload: unknown }).payload, US)).toMatchObject({ amountCents: 299 });
  });

  it('Loyverse: receipts.update with the receipt, HMAC-SHA1 of the body in hex or base64', () => {
    const { merchantId } = sim.pos.loyverse.addAccount({});
    const sale = sim.pos.loyverse.addOrder(merchantId, { lines: TWO_LINES });
    const settings: PosSettings = { webhookSecret: SECRET, apiBaseUrl: 'https://api.loyverse.com' };
    for (const encoding of ['hex', 'base64'] as const) {
      const { account, actions } = receive('loyverse', settings, sim.pos.loyverse.webhook(merchantId, { id: sale.receipt_number, secret: SECRET, encoding }));
      expect(account).toBe(merchantId);
      expect(actions.map((a) => a.kind)).toEqual(['checkout']);
    }
    const refund = sim.pos.loyverse.addRefund(merchantId, { orderId: sale.receipt_number });
    const { actions } = receive('loyverse', settings, sim.pos.loyverse.webhook(merchantId, { id: refund.receipt_number, secret: SECRET }));
    expect(adapter('loyverse').parseRefund((actions[0] as { payload: unknown }).payload, US)).toMatchObject({ orderId: sale.receipt_number, amountCents: 1599 });
    expect(() => receive('loyverse', settings, tampered(sim.pos.loyverse.webhook(merchantId, { id: sale.receipt_number, secret: SECRET })))).toThrow(/does not match/);
  });
});
