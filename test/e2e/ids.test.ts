/**
 * Order ids key the ledger and the upstream transactionId: two different orders must never share
 * one. Ids holding control characters are refused with a 400 naming the field, before anything is
 * recorded, whichever adapter read them.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { checkout, postJson, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

describe('ids with control characters', () => {
  it('an order whose id would hash like another store\'s order is refused, and the first is left alone', async () => {
    const first = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'c', storeId: 'store 7' }));
    expect(first.status).toBe(200);
    expect(first.body.repeat).toBe(false);
    const recorded = await h.bridge.store.get(first.body.transactionId);
    const books = JSON.stringify(h.sim.books());

    const lookalike = await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'store 7\u0000c' }));
    expect(lookalike.status).toBe(400);
    expect(lookalike.body.error.issues).toContainEqual({ field: 'orderId', message: 'must not contain control characters' });
    const refund = await postJson(h.bridge.url, '/v1/refunds/generic', { orderId: 'store 7\u0000c', refundId: 'R-1' });
    expect(refund.status).toBe(400);

    expect(await h.bridge.store.count()).toBe(1);
    expect(await h.bridge.store.get(first.body.transactionId)).toEqual(recorded);
    expect(JSON.stringify(h.sim.books())).toBe(books);
  });

  it('the core refuses them from any adapter, naming the id (a Loyverse receipt number)', async () => {
    const receipt = JSON.parse(readFileSync(new URL('../fixtures/loyverse/receipts_update_webhook_pipedream_test_event.json', import.meta.url), 'utf8')).receipts[0];
    const before = await h.bridge.store.count();
    const res = await postJson(h.bridge.url, '/v1/checkouts/loyverse', { ...receipt, receipt_number: '1001\u001f2' });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/control characters/);
    expect(await h.bridge.store.count()).toBe(before);
  });

  it('a refund id with a control character is refused before the order is touched', async () => {
    await postJson(h.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-1' }));
    const res = await postJson(h.bridge.url, '/v1/refunds/generic', { orderId: 'D-1', refundId: 'R\u00001' });
    expect(res.status).toBe(400);
    expect((await h.bridge.store.get('generic:D-1'))!.status).toBe('accrued');
  });
});
