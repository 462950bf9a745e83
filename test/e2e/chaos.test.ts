/**
 * A small run of the chaos campaign (`npm run chaos` runs 1,000 orders): random upstream faults,
 * duplicate and concurrent deliveries, full and partial refunds, two SIGKILL restarts. Zero is the
 * only acceptable figure for doubles, losses, open records and balance mismatches.
 */
import { expect, it } from '@jest/globals';
import { formatChaosReport, runChaos, type ChaosOptions } from '../../scripts/chaos-lib.js';

it('loses nothing and doubles nothing under random faults, repeats and two SIGKILLs', async () => {
  const options: ChaosOptions = { orders: 150, kills: 2, concurrency: 6, faultRate: 0.35, seed: 20261121, customers: 5, prices: 3 };
  const report = await runChaos(options);
  const printed = formatChaosReport(report, options);
  expect(report.kills).toBe(2);
  expect(report.faultsInjected).toBeGreaterThan(20);
  expect({ doubleAccruals: report.doubleAccruals, doubleReversals: report.doubleReversals, lost: report.lost, open: report.open, cardsMismatched: report.cardsMismatched, misAttributed: report.misAttributed }).toEqual({
    doubleAccruals: [],
    doubleReversals: [],
    lost: [],
    open: [],
    cardsMismatched: 0,
    misAttributed: [],
  });
  // Five customers and three prices: one customer's accruals of one amount did overlap, and were held back.
  expect(report.overlaps).toBeGreaterThan(0);
  expect(printed).toMatch(/double accruals +0/);
  expect(printed).toMatch(/mis-attributed 0/);
  expect(report.cards.length).toBeGreaterThan(0);
}, 120_000);
