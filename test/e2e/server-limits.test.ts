/**
 * The HTTP server itself (security review, issue 9): slow clients are cut off within the configured
 * headers timeout, not Node's 30 s check interval; sandbox listens on loopback only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startBridge } from '../../src/bridge.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { ADMIN_TOKEN, startHarness, testConfig, type Harness } from '../support/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ overrides: { headersTimeoutMs: 500 } });
});
afterAll(async () => {
  await h.close();
});

/**
 * Opens a raw connection, sends `bytes` and nothing more, and resolves with what the server wrote
 * once it closed the connection, or `closed: false` if it still held it after `boundMs`.
 */
function stall(bytes: string, boundMs: number): Promise<{ closed: boolean; answer: string; ms: number }> {
  const { port } = new URL(h.bridge.url);
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      if (bytes) socket.write(bytes);
    });
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => undefined);
    const bound = setTimeout(() => {
      socket.destroy();
      resolve({ closed: false, answer, ms: Date.now() - started });
    }, boundMs);
    socket.on('close', () => {
      clearTimeout(bound);
      resolve({ closed: true, answer, ms: Date.now() - started });
    });
  });
}

describe('slow clients', () => {
  // With a 500 ms headers timeout checked every 500 ms, the cut comes within about 1 s; the bound
  // is 5 s so a busy machine cannot fail it, and Node's default check interval (30 s) would.
  it.each([
    ['half a request line', 'POST /v1/checkouts/gen'],
    ['a request line and part of the headers', 'POST /v1/checkouts/generic HTTP/1.1\r\nHost: bridge\r\nContent-Type: appl'],
    ['nothing at all', ''],
  ])('a client that sends %s and stops is cut off within the headers timeout', async (_name, bytes) => {
    const result = await stall(bytes, 5000);
    expect(result.closed).toBe(true);
    if (bytes) expect(result.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(await h.bridge.store.count()).toBe(0);
  });

  it('a client that sends its headers in time is served', async () => {
    const res = await fetch(`${h.bridge.url}/healthz`);
    expect(res.status).toBe(200);
  });
});

describe('the listen address', () => {
  it('sandbox listens on 127.0.0.1 only', () => {
    expect(h.config.sandbox).toBe(true);
    expect((h.bridge.server.address() as AddressInfo).address).toBe('127.0.0.1');
  });

  it.each([
    ['HOST=0.0.0.0 in sandbox', { HOST: '0.0.0.0' }, '0.0.0.0'],
    ['outside sandbox, by default', { LOYALTY_BASE_URL: 'http://127.0.0.1:1', LOYALTY_APP_TOKEN: 'sim-app-token' }, '0.0.0.0'],
  ])('%s → every interface, and its url still reaches it', async (_name, env, address) => {
    const dir = mkdtempSync(join(tmpdir(), 'bridge-host-'));
    const bridge = await startBridge(testConfig(env, dir), silentLogger, { loyaltyBaseUrl: h.simServer.url, loyaltyAppToken: h.sim.appToken, adminToken: ADMIN_TOKEN, defaultMetrics: false, startWorker: false });
    try {
      expect((bridge.server.address() as AddressInfo).address).toBe(address);
      expect((await fetch(`${bridge.url}/healthz`)).status).toBe(200);
    } finally {
      await bridge.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
