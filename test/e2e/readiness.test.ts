/**
 * Ready means ready (docs/configuration.md, "Ready means ready"): start-up and /readyz ask the loyalty
 * service whether it takes each active merchant's app token (resolve-credentials), over real HTTP
 * against the simulator. A wrong LOYALTY_APP_TOKEN, or a LOYALTY_BASE_URL that does not lead to the
 * API, is a 503 naming the variable, and a line in the log at start-up; a created merchant whose
 * install was revoked is named by its id while the bridge stays ready for the others; a fix shows
 * without a restart once the loyalty service takes the token again; and however often /readyz is
 * asked, the loyalty service is asked no more often than the checks are paced.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from '@jest/globals';
import { startBridge, type Bridge, type BridgeOverrides } from '../../src/bridge.js';
import { createLogger, silentLogger } from '../../src/kernel/logger.js';
import type { CredentialsAnswer, LoyaltyClient } from '../../src/loyalty/client.js';
import type { StoredMerchant } from '../../src/state/merchant.js';
import { UpstreamCheck } from '../../src/merchants/upstream-check.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';
import { ADMIN_TOKEN, eventually, testConfig } from '../support/harness.js';

/** Checks that expire fast, so that a fix (or a revocation) shows within a test's wait. */
const FAST = { freshMs: 150, failingMs: 150, roundGapMs: 50 };

interface Running {
  sim: Simulator;
  simServer: ListeningSimulator;
  bridge: Bridge;
  dir: string;
}

const running: Running[] = [];
const servers: LocalServer[] = [];
const logLines: string[] = [];

afterEach(async () => {
  for (const r of running.splice(0)) {
    await r.bridge.close();
    await r.simServer.close();
    rmSync(r.dir, { recursive: true, force: true });
  }
  for (const s of servers.splice(0)) await s.close();
  logLines.length = 0;
});

/**
 * A simulator, then a bridge whose upstream `upstream(simUrl)` says (by default the simulator, with
 * its app token), logging to `logLines`, with fast checks.
 */
async function start(upstream: (sim: Simulator, url: string) => Partial<BridgeOverrides> = () => ({}), env: Record<string, string> = {}): Promise<Running> {
  const sim = createSimulator();
  const simServer = await sim.listen();
  const config = testConfig(env);
  const dir = config.ledgerUrl.replace(/^file:/, '').replace(/\/ledger\.json$/, '');
  const logger = createLogger('info', { write: (line: string) => void logLines.push(line) });
  const bridge = await startBridge(config, logger, {
    loyaltyBaseUrl: simServer.url,
    loyaltyAppToken: sim.appToken,
    loyaltyApiKey: sim.apiKey,
    adminToken: ADMIN_TOKEN,
    defaultMetrics: false,
    startWorker: false,
    upstreamCheck: FAST,
    ...upstream(sim, simServer.url),
  });
  const r = { sim, simServer, bridge, dir };
  running.push(r);
  return r;
}

type Readyz = { status: number; body: { status: string; checks: { ledger: string; upstream: string } } };

/** /readyz as an operator reads it: with the admin token, which the details need. */
async function readyz(bridge: Bridge): Promise<Readyz> {
  const res = await fetch(`${bridge.url}/readyz`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Readyz['body'] };
}

/** The log's lines at error level and above. */
const errors = () => logLines.map((l) => JSON.parse(l) as { level: number; msg: string; merchantId?: string }).filter((l) => l.level >= 50);

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe("the default merchant's credential, at start-up and in /readyz", () => {
  it('a right app token: 200, upstream "ok" (as before these checks: monitors match it), nothing logged as wrong', async () => {
    const { bridge } = await start();
    const { status, body } = await readyz(bridge);
    expect(status).toBe(200);
    expect(body).toEqual({ status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } });
    expect(bridge.upstream.defaultCheck).toEqual({ merchantId: 'default', verdict: { kind: 'ok' }, at: expect.any(Number) });
    expect(errors()).toEqual([]);
  });

  it('a wrong LOYALTY_APP_TOKEN: logged at start-up naming the variable, then 503 naming it with the loyalty service\'s answer; the token itself is nowhere', async () => {
    const wrong = `wrong-app-token-${randomBytes(6).toString('hex')}`;
    const { bridge, simServer } = await start(() => ({ loyaltyAppToken: wrong }));
    // Said at start-up, before any checkout could fail with "Invalid app token.".
    expect(errors()).toEqual([expect.objectContaining({ merchantId: 'default', msg: expect.stringMatching(/^not ready: LOYALTY_APP_TOKEN is refused by the loyalty service/) })]);
    const { status, body } = await readyz(bridge);
    expect(status).toBe(503);
    expect(body).toEqual({
      status: 'not ready',
      checks: {
        ledger: 'ok',
        upstream: expect.stringMatching(new RegExp(`^failing: LOYALTY_APP_TOKEN is refused by the loyalty service at ${escape(simServer.url)} \\(403: Invalid app token\\.\\): .*set LOYALTY_APP_TOKEN to the token the install gave \\(checked at [^)]+\\)$`)),
      },
    });
    expect(`${logLines.join('\n')}${body.checks.upstream}`).not.toContain(wrong);
  });

  it('LOYALTY_BASE_URL that does not lead to /api/v2 (the service is behind a path the address leaves out): 503 naming LOYALTY_BASE_URL and the 404', async () => {
    const { bridge, simServer } = await start((_sim, url) => ({ loyaltyBaseUrl: `${url}/loyalty` }));
    const { status, body } = await readyz(bridge);
    expect(status).toBe(503);
    expect(body.checks.upstream).toMatch(
      new RegExp(`^failing: LOYALTY_BASE_URL \\(${escape(simServer.url)}/loyalty\\) does not lead to the loyalty service's API: POST ${escape(simServer.url)}/loyalty/api/v2/marketplace/resolve-credentials answered 404: HTTP 404; set LOYALTY_BASE_URL to the service's address before /api/v2/ \\(the bridge adds /api/v2/ itself\\) \\(checked at [^)]+\\)$`),
    );
    expect(errors()).toEqual([expect.objectContaining({ msg: expect.stringMatching(/^not ready: LOYALTY_BASE_URL/) })]);
  });

  it('LOYALTY_BASE_URL answering a web page (200, not JSON): 503 naming LOYALTY_BASE_URL', async () => {
    const webApp = await listenLocally((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Loyalty: sign in</title>');
    });
    servers.push(webApp);
    const { bridge } = await start(() => ({ loyaltyBaseUrl: webApp.url }));
    const { status, body } = await readyz(bridge);
    expect(status).toBe(503);
    expect(body.checks.upstream).toMatch(new RegExp(`^failing: LOYALTY_BASE_URL \\(${escape(webApp.url)}\\) does not lead to the loyalty service's API: .* answered 200 with an unexpected body; set LOYALTY_BASE_URL`));
  });

  it('a loyalty service that does not answer: ready (checkouts are recorded and delivered later), and the answer says so', async () => {
    const closed = await listenLocally(() => undefined);
    const address = closed.url;
    await closed.close();
    const { bridge } = await start(() => ({ loyaltyBaseUrl: address }));
    const { status, body } = await readyz(bridge);
    expect(status).toBe(200);
    expect(body.checks.upstream).toMatch(new RegExp(`^unreachable: the loyalty service at ${escape(address)} did not answer resolve-credentials \\(.*ECONNREFUSED.*\\): checkouts are recorded and delivered once it answers`));
  });

  it('recovers without a restart once the loyalty service takes the token again: revoked, 503; restored, 200', async () => {
    const { bridge, sim } = await start();
    expect((await readyz(bridge)).status).toBe(200);
    sim.merchant('default').revoke();
    const revoked = await eventually(() => readyz(bridge), (r) => r.status === 503, 5000);
    expect(revoked.body.checks.upstream).toMatch(/^failing: LOYALTY_APP_TOKEN is refused by the loyalty service at .* \(403: Invalid app token: the app was uninstalled\.\)/);
    sim.merchant('default').restore();
    const restored = await eventually(() => readyz(bridge), (r) => r.status === 200, 5000);
    expect(restored.body.checks.upstream).toBe('ok');
    // Each change is logged once, not at every check.
    const lines = logLines.map((l) => JSON.parse(l) as { msg: string });
    expect(lines.filter((l) => /^not ready: LOYALTY_APP_TOKEN/.test(l.msg))).toHaveLength(1);
    expect(lines.filter((l) => l.msg === 'the loyalty service takes the app token again')).toHaveLength(1);
  });
});

describe("created merchants' credentials", () => {
  const secretsKey = randomBytes(32).toString('base64');

  async function withMerchants(ids: string[]): Promise<Running> {
    const r = await start(() => ({ secretsKey }));
    for (const id of ids) {
      const appToken = `app-${id}-${randomBytes(6).toString('hex')}`;
      r.sim.addMerchant({ id, appToken });
      const res = await fetch(`${r.bridge.url}/v1/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id, loyalty: { appToken } }),
      });
      expect(res.status).toBe(201);
    }
    return r;
  }

  it('a revoked install is named by its merchant id, while the bridge stays ready for the others; reinstalled, it leaves the answer', async () => {
    const { bridge, sim } = await withMerchants(['corner-shop', 'bakery']);
    // Merchants created after start-up are checked by the next rounds.
    await eventually(async () => (await readyz(bridge), bridge.upstream.createdChecks.map((c) => c.merchantId).sort()), (ids) => ids.join() === 'bakery,corner-shop', 5000);
    expect(await readyz(bridge)).toEqual({ status: 200, body: { status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } } });

    sim.merchant('corner-shop').revoke();
    const named = await eventually(() => readyz(bridge), (r) => /refused for 1 of the 2/.test(r.body.checks.upstream), 5000);
    expect(named.status).toBe(200);
    expect(named.body.status).toBe('ready');
    expect(named.body.checks.upstream).toMatch(
      /^ok; refused for 1 of the 2 created merchants checked \(the bridge stays ready for the others\): merchant corner-shop: its app token is refused by the loyalty service \(403: Invalid app token: the app was uninstalled\.\): .*PATCH \/v1\/admin\/merchants\/corner-shop .*\(checked at [^)]+\)$/,
    );
    expect(named.body.checks.upstream).not.toMatch(/bakery/);
    expect(errors()).toEqual([expect.objectContaining({ merchantId: 'corner-shop', msg: expect.stringMatching(/^merchant corner-shop: its app token is refused/) })]);

    sim.merchant('corner-shop').restore();
    const fixed = await eventually(() => readyz(bridge), (r) => !/refused/.test(r.body.checks.upstream), 5000);
    expect(fixed).toEqual({ status: 200, body: { status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } } });
    expect(bridge.upstream.createdChecks.map((c) => [c.merchantId, c.verdict.kind]).sort()).toEqual([['bakery', 'ok'], ['corner-shop', 'ok']]);
  });

  it('a suspended merchant is not checked (nothing goes upstream for it)', async () => {
    const { bridge, sim } = await withMerchants(['paused']);
    await eventually(async () => (await readyz(bridge), bridge.upstream.createdChecks.length), (n) => n === 1, 5000);
    sim.merchant('paused').revoke();
    await eventually(() => readyz(bridge), (r) => /merchant paused: its app token is refused/.test(r.body.checks.upstream), 5000);
    const res = await fetch(`${bridge.url}/v1/admin/merchants/paused`, { method: 'PATCH', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ status: 'suspended' }) });
    expect(res.status).toBe(200);
    const after = await eventually(() => readyz(bridge), (r) => r.body.checks.upstream === 'ok', 5000);
    expect(after.status).toBe(200);
    expect(bridge.upstream.createdChecks).toEqual([]);
  });
});

describe('/readyz stays cheap', () => {
  /** resolve-credentials requests the bridge made, by its own upstream histogram. */
  const asked = async (bridge: Bridge) => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    return [...text.matchAll(/^bridge_upstream_request_duration_seconds_count\{operation="resolve_credentials",outcome="[a-z_]+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  };

  it('asked 200 times in a row, it answers from the last check and asks the loyalty service nothing more', async () => {
    const { bridge } = await start(() => ({ upstreamCheck: {} }));
    const before = await asked(bridge);
    expect(before).toBe(1); // start-up's
    const answers = await Promise.all(Array.from({ length: 200 }, () => readyz(bridge)));
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200]));
    expect(await asked(bridge)).toBe(before);
  });
});

describe('thousands of merchants: a bounded, rotating set per round', () => {
  /** A client that answers resolve-credentials as told, counting the calls. */
  const client = (calls: string[], id: string, answer: () => CredentialsAnswer = () => ({ kind: 'resolved', credentials: [] })) =>
    ({ options: { baseUrl: 'https://loyalty.example.test' }, resolveCredentials: async () => (calls.push(id), answer()) }) as unknown as LoyaltyClient;

  it('each round asks about the default merchant and at most 10 created ones, going round them in creation order; nothing fresh is asked again', async () => {
    const calls: string[] = [];
    const ids = Array.from({ length: 25 }, (_, i) => `m-${String(i).padStart(2, '0')}`);
    const revoked = new Set(['m-03']);
    const merchants = {
      default: { client: client(calls, 'default') },
      get: async (id: string) => ({ status: 'active' as const, client: client(calls, id, () => (revoked.has(id) ? { kind: 'refused', status: 403, errors: ['Invalid app token.'] } : { kind: 'resolved', credentials: [] })) }),
    };
    const store = { listMerchants: async ({ offset, limit }: { offset: number; limit: number }) => ({ items: ids.slice(offset, offset + limit).map((id) => ({ id, status: 'active' }) as StoredMerchant), total: ids.length }) };
    let now = 0;
    const check = new UpstreamCheck(merchants, store, silentLogger, { clock: () => now, freshMs: 60_000, failingMs: 15_000, perRound: 10, roundGapMs: 10_000 });

    const round = async () => {
      calls.length = 0;
      await check.refresh();
      return [...calls];
    };
    expect(await round()).toEqual(['default', ...ids.slice(0, 10)]);
    expect(await round()).toEqual(ids.slice(10, 20));
    expect(await round()).toEqual(ids.slice(20, 25)); // the last five, and back to the start
    expect(check.createdChecks).toHaveLength(25);
    expect(await round()).toEqual([]); // every check fresh: nothing asked
    // 15 s on, the refused one is due again first; the others stand for their 60 s.
    now += 15_000;
    expect(await round()).toEqual(['m-03']);
    expect(check.readiness()).toMatchObject({ ready: true, upstream: expect.stringMatching(/^ok; refused for 1 of the 25 created merchants checked .*merchant m-03: its app token is refused/) });
    // A minute on, everything is stale: the default, the failing one first, then the rotation goes
    // on where it was (the fresh ones it passed meanwhile were not asked), ten at a time.
    now += 60_000;
    expect(await round()).toEqual(['default', 'm-03', ...ids.slice(19, 25)]);
    expect(await round()).toEqual(ids.slice(0, 10).filter((id) => id !== 'm-03'));
  });
});
