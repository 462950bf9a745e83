/**
 * Starts the simulator and a bridge over real HTTP on ephemeral ports, with a fresh JSON-file
 * ledger in a temporary folder and fast retry units, so end-to-end tests run in milliseconds.
 */
import { expect } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { posSettingDeclarations } from '../../adapters/index.js';
import { loadConfig, type Config } from '../../src/config.js';
import { startBridge, type Bridge, type BridgeOverrides } from '../../src/bridge.js';
import { silentLogger, type Logger } from '../../src/kernel/logger.js';
import { createSimulator, type Simulator, type ListeningSimulator, type SimulatorOptions } from '../../simulator/index.js';
import request from 'supertest';
import { EXAMPLE_CHECKOUT } from '../../adapters/generic/example.js';
import { eventually } from './eventually.js';

// Polling has one owner, eventually.ts; the many tests that take it from here keep doing so.
export { eventually };

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface Harness {
  sim: Simulator;
  simServer: ListeningSimulator;
  bridge: Bridge;
  config: Config;
  dir: string;
  /** Stops the bridge (keeping the ledger folder) and starts a new one on the same ledger. */
  restart(overrides?: Partial<BridgeOverrides>): Promise<Bridge>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Give the bridge the simulator's API key so it can verify in-doubt accruals (default true). */
  withApiKey?: boolean;
  overrides?: Partial<BridgeOverrides>;
  logger?: Logger;
  /** E.g. `templateIds: [1, 2]` gives every customer two cards, so one call has two results. */
  simulator?: SimulatorOptions;
}

export function testConfig(env: Record<string, string> = {}, dir = mkdtempSync(join(tmpdir(), 'bridge-test-'))): Config {
  return loadConfig(posSettingDeclarations, {
    NODE_ENV: 'test',
    PORT: '0',
    LEDGER_URL: `file:${join(dir, 'ledger.json')}`,
    LOYALTY_TIMEOUT_MS: '400',
    LOYALTY_RETRY_BASE_MS: '5',
    LOG_LEVEL: 'silent',
    ANSWER_BUDGET_MS: '1500',
    WORKER_INTERVAL_MS: '50',
    IN_DOUBT_VERIFY_AFTER_MS: '0',
    IN_DOUBT_GRACE_MS: '300',
    // No LOYALTY_BASE_URL here (the harness passes the simulator's address as an override), so the
    // config is the sandbox's, whose backfill runs a scheduled round every minute: a round landing
    // mid-test imported an order a console test had added to be found missing (a fresh clone's CI,
    // 2026-12-03). Tests that want scheduled rounds set it.
    BACKFILL_INTERVAL_MS: '0',
    ...env,
  });
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'bridge-e2e-'));
  const config = testConfig(options.env, dir);
  const sim = createSimulator(options.simulator);
  const simServer = await sim.listen();
  const logger = options.logger ?? silentLogger;
  const overrides = (extra: Partial<BridgeOverrides> = {}): BridgeOverrides => ({
    loyaltyBaseUrl: simServer.url,
    loyaltyAppToken: sim.appToken,
    ...(options.withApiKey === false ? {} : { loyaltyApiKey: sim.apiKey }),
    adminToken: ADMIN_TOKEN,
    defaultMetrics: false,
    ...options.overrides,
    ...extra,
  });
  const harness: Harness = {
    sim,
    simServer,
    config,
    dir,
    bridge: await startBridge(config, logger, overrides()),
    async restart(extra) {
      await harness.bridge.close();
      harness.bridge = await startBridge(config, logger, overrides(extra));
      return harness.bridge;
    },
    async close() {
      await harness.bridge.close();
      await simServer.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** The generic payload's example, found by phone and email alone (a test that needs a card serial names one). */
export function checkout(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const { cardSerial: _, ...customer } = structuredClone(EXAMPLE_CHECKOUT).customer;
  return { ...structuredClone(EXAMPLE_CHECKOUT), customer, ...overrides };
}

/** POSTs `body` as JSON text (exact bytes, content type application/json), as a POS does. */
export function postJson(baseUrl: string, path: string, body: unknown): request.Test {
  return request(baseUrl).post(path).set('content-type', 'application/json').send(JSON.stringify(body));
}

/**
 * Waits until each transaction was accrued at the loyalty simulator, then asserts exactly once each
 * and no double anywhere (an accrual a kill caught in flight may take the history verifier a while).
 */
export async function accruedOnce(sim: Simulator, transactionIds: readonly string[], timeoutMs = 5000): Promise<void> {
  await eventually(
    () => transactionIds.map((id) => sim.books().transactions[id]?.accruals ?? 0),
    (counts) => counts.every((n) => n >= 1),
    timeoutMs,
  );
  expect(transactionIds.map((id) => sim.books().transactions[id]!.accruals)).toEqual(transactionIds.map(() => 1));
  expect(sim.books().doubleAccruals).toEqual([]);
}
