/**
 * Property: whatever the interleaving of one or two customers' orders drawn from three prices,
 * delivered concurrently, some twice, with the loyalty service resetting, timing out, rate-limiting
 * or answering late at random, every order ends accrued exactly once under its own transactionId:
 * no double, no record that says accrued while another transaction's operation is what it claims.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { LedgerRecord } from '../../src/state/record.js';
import type { FaultSpec } from '../../simulator/index.js';
import { checkout, eventually, postJson, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { LOYALTY_TIMEOUT_MS: '150', IN_DOUBT_GRACE_MS: '200', HISTORY_CLOCK_SKEW_MS: '1000', WORKER_INTERVAL_MS: '20' } });
});
afterAll(async () => {
  await h.close();
});

const PRICES = ['4.50', '5.25', '59.97'];
const FAULTS: (FaultSpec | undefined)[] = [
  undefined,
  { kind: 'drop_before_commit', on: 'accrue' },
  { kind: 'drop_after_commit', on: 'accrue' },
  { kind: 'slow_after_commit', on: 'accrue', delayMs: 300 },
  { kind: 'rate_limit', on: 'accrue', times: 5 },
  { kind: 'server_error', on: 'accrue', times: 3 },
];

const order = fc.record({ customer: fc.integer({ min: 0, max: 1 }), price: fc.integer({ min: 0, max: PRICES.length - 1 }), fault: fc.integer({ min: 0, max: FAULTS.length - 1 }), twice: fc.boolean() });
const scenario = fc.record({ orders: fc.array(order, { minLength: 2, maxLength: 6 }), batches: fc.integer({ min: 1, max: 3 }) });

let run = 0;

describe('one customer, few prices, random faults and interleavings', () => {
  it('every order is booked once under its own id', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ orders, batches }) => {
        run++;
        h.sim.faults.clear();
        const phones = [`+1555${String(run).padStart(4, '0')}001`, `+1555${String(run).padStart(4, '0')}002`];
        const ids = orders.map((_, i) => `generic:P${run}-${i}`);
        for (const o of orders) if (FAULTS[o.fault]) h.sim.faults.inject(FAULTS[o.fault]!);
        // The orders go in `batches` waves; within a wave, concurrently (and some twice).
        const size = Math.ceil(orders.length / batches);
        for (let start = 0; start < orders.length; start += size) {
          await Promise.all(
            orders.slice(start, start + size).flatMap((o, k) => {
              const body = checkout({ orderId: `P${run}-${start + k}`, total: PRICES[o.price], items: [], customer: { phone: phones[o.customer] } });
              const send = () => postJson(h.bridge.url, '/v1/checkouts/generic', body);
              return o.twice ? [send(), send()] : [send()];
            }),
          );
        }
        const settled = await eventually(
          () => Promise.all(ids.map((id) => h.bridge.store.get(id) as Promise<LedgerRecord>)),
          (rs) => rs.every((r) => r?.status === 'accrued'),
          15_000,
        );
        const books = h.sim.books();
        expect(books.doubleAccruals).toEqual([]);
        for (const r of settled) {
          expect([r.transactionId, books.transactions[r.transactionId]?.accruals]).toEqual([r.transactionId, 1]);
          for (const op of r.accrual.operationIds) expect(books.transactions[r.transactionId]!.operationIds).toContain(op);
        }
      }),
      { numRuns: 25 },
    );
  }, 240_000);
});
