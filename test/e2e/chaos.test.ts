/**
 * The chaos campaign's short run (`npm run chaos` runs 1,000 orders by hand): 200 orders, 30 % of
 * upstream calls faulted, duplicate and concurrent deliveries, full and partial refunds, one SIGKILL
 * restart. Zero is the only acceptable figure for doubles, losses, records left open or held back,
 * and balance mismatches: every sale finishes with no operator action on an accrual.
 */
import { expect, it } from '@jest/globals';
import { formatChaosReport, runChaos, type ChaosOptions } from '../../scripts/chaos-lib.js';

it('loses nothing, doubles nothing and leaves nothing open or held under random faults, repeats and a SIGKILL', async () => {
  const options: ChaosOptions = { orders: 200, kills: 1, concurrency: 6, faultRate: 0.3, seed: 20261121, customers: 5, prices: 3 };
  const report = await runChaos(options);
  const printed = formatChaosReport(report, options);
  expect(report.kills).toBe(1);
  expect(report.faultsInjected).toBeGreaterThan(20);
  expect({ doubleAccruals: report.doubleAccruals, doubleReversals: report.doubleReversals, lost: report.lost, open: report.open, held: report.held, cardsMismatched: report.cardsMismatched, misAttributed: report.misAttributed }).toEqual({
    doubleAccruals: [],
    doubleReversals: [],
    lost: [],
    open: [],
    held: [],
    cardsMismatched: 0,
    misAttributed: [],
  });
  // Five customers and three prices: one customer's accruals of one amount did overlap, and were held back.
  expect(report.overlaps).toBeGreaterThan(0);
  expect(printed).toMatch(/double accruals +0/);
  expect(printed).toMatch(/records left held +0/);
  expect(printed).toMatch(/longest hold +\d+\.\d s; past the end of the faults \d+\.\d s/);
  expect(printed).toMatch(/mis-attributed 0/);
  expect(report.cards.length).toBeGreaterThan(0);
}, 120_000);
