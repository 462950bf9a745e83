/**
 * Wires one bridge from its configuration: ledger store, loyalty client, core, worker and HTTP
 * app. `main.ts` runs it as a process; tests and the benchmark run it in-process.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { adapters as allAdapters, posSettingDeclarations } from '../adapters/index.js';
import { EXAMPLE_CHECKOUT } from '../adapters/generic/example.js';
import { GenericCheckout, GenericRefund } from '../adapters/generic/schema.js';
import { BackfillPoller, type BackfillOptions } from './backfill/poller.js';
import { ConfigError, type Config } from './config.js';
import { DeadLetterRetrier } from './core/dead-letter-retry.js';
import { Ingest } from './core/ingest.js';
import { createCore, type Core } from './core/core.js';
import { Worker } from './core/worker.js';
import { CardReads, RegisterService } from './core/register.js';
import { merchantUpstreams } from './core/upstreams.js';
import { armFailpoints } from './kernel/failpoints.js';
import { createApp } from './http/app.js';
import { FileLedgerStore } from './ledger/file-store.js';
import type { LedgerStore } from './ledger/store.js';
import { ledgerStartProblem, openStore } from './ledger/open-store.js';
import { isLedgerUnreachable } from './ledger/pg-store.js';
import type { Logger } from './kernel/logger.js';
import { ledgerReading } from './core/attention-queue.js';
import { LoyaltyClient, MERCHANT_SOCKET_SHARE, sharedAgents, type UpstreamRequestSample } from './loyalty/client.js';
import { MerchantAdmin } from './merchants/admin.js';
import { sealedSecretsOf } from './state/merchant.js';
import { MerchantRegistry } from './merchants/registry.js';
import { UpstreamCheck, type UpstreamCheckOptions } from './merchants/upstream-check.js';
import { parseSecretsKey, SecretBox } from './merchants/secrets.js';
import type { PosSettingDeclarations } from './pos/settings.js';
import { createMetrics, LedgerReadings } from './core/metrics.js';
import type { PosAdapter, PosSettings } from './pos/contract.js';
import { backfillListing, type PosOrderSource } from './reconcile/pos-source.js';
import type { HistoryReadOptions } from './loyalty/history-reader.js';
import { ReconcileReporter } from './reconcile/report.js';

export interface Bridge {
  url: string;
  server: http.Server;
  store: LedgerStore;
  core: Core;
  worker: Worker;
  /** Runs dead letters with a transient cause again, on their schedule. */
  deadLetterRetrier: DeadLetterRetrier;
  /** Reads POS accounts back from the POSes' APIs (docs/backfill-and-reconcile.md): on request, and every BACKFILL_INTERVAL_MS when set. */
  backfill: BackfillPoller;
  /** The ledger gauges' counts, taken every METRICS_REFRESH_MS (`refresh()` counts now). */
  readings: LedgerReadings;
  adminToken: string;
  registry: MerchantRegistry;
  merchants: MerchantAdmin;
  /** Whether the loyalty service takes the merchants' app tokens: what /readyz and start-up say (src/merchants/upstream-check.ts). */
  upstream: UpstreamCheck;
  /** Graceful: stop taking requests, finish or record in-flight work, close the ledger. */
  close(): Promise<void>;
}

export interface BridgeOverrides {
  /** The upstream's address and token when they come from elsewhere (sandbox simulator). */
  loyaltyBaseUrl?: string;
  loyaltyAppToken?: string;
  loyaltyApiKey?: string;
  adminToken?: string;
  store?: LedgerStore;
  adapters?: ReadonlyMap<string, PosAdapter>;
  /** Per-POS settings that replace the configured ones (tests point POS APIs at local fakes). */
  posSettings?: Record<string, PosSettings>;
  clock?: () => Date;
  /** Default true; tests that drive reconciliation by hand turn the background worker off. */
  startWorker?: boolean;
  /** Default true; the loop that runs dead letters with a transient cause again (tests that run it by hand turn it off). */
  startDeadLetterRetrier?: boolean;
  /** Default true; scheduled backfill passes (when BACKFILL_INTERVAL_MS is set); tests that run passes by hand turn them off. */
  startBackfill?: boolean;
  /** Backfill's page size, retries and waits between a page's tries (tests page by 2 and do not wait). */
  backfill?: Pick<BackfillOptions, 'pageSize' | 'retry' | 'sleep' | 'leaseMs'>;
  /** Default true; several apps in one process (tests) skip process-wide default metrics. */
  defaultMetrics?: boolean;
  /** How long a client may take to send a request's headers (default 10 s); tests use a short one. */
  headersTimeoutMs?: number;
  /** SECRETS_KEY when it comes from elsewhere (sandbox keeps one beside its ledger). */
  secretsKey?: string;
  posDeclarations?: PosSettingDeclarations;
  /** Where the three-way report lists the POS's orders (tests give a fake). */
  posOrderSource?: PosOrderSource;
  /** The reconcile report's history page size and overlap (tests make pages small, to read across several). */
  reconcileHistoryRead?: Pick<HistoryReadOptions, 'maxItemsPerPage' | 'overlap'>;
  /** How long the credential checks behind /readyz stand, and how they are paced (tests make them short). */
  upstreamCheck?: Partial<UpstreamCheckOptions>;
}

export const VERSION: string = (() => {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
})();

/** How long a bridge told to stop may take to finish its in-flight work before it exits anyway (main.ts). */
export const SHUTDOWN_LIMIT_MS = 15_000;

/**
 * How long a start waits for a file ledger's lock held by a bridge that is still stopping (a
 * supervisor's restart right after a kill): its shutdown limit and a margin. A bridge that is not
 * stopping still holds it after that, and the start is refused as before.
 */
export const LEDGER_LOCK_WAIT_MS = SHUTDOWN_LIMIT_MS + 5_000;

export async function startBridge(config: Config, logger: Logger, overrides: BridgeOverrides = {}): Promise<Bridge> {
  const baseUrl = overrides.loyaltyBaseUrl ?? config.loyalty.baseUrl;
  const appToken = overrides.loyaltyAppToken ?? config.loyalty.appToken;
  if (!baseUrl || !appToken) throw new Error('the loyalty service address and app token are required (LOYALTY_BASE_URL, LOYALTY_APP_TOKEN)');
  const adminToken = overrides.adminToken ?? config.adminToken ?? randomBytes(24).toString('base64url');

  armFailpoints(config.failpoints);
  // A bridge stopped just before this one holds a file ledger's lock while it finishes its in-flight work: waited for.
  const store = overrides.store ?? openStore(config.ledgerUrl, { fileLockWaitMs: LEDGER_LOCK_WAIT_MS, poolSize: config.ledgerPoolSize });
  try {
    await store.init();
  } catch (error) {
    const problem = ledgerStartProblem(error, config.ledgerUrl);
    if (!problem) throw error;
    await store.close().catch(() => undefined);
    throw new ConfigError(problem);
  }
  // A rebuild of the file ledger's index takes seconds per million records: said, with why.
  const indexed = store instanceof FileLedgerStore ? store.indexStartup : undefined;
  if (indexed && indexed.mode !== 'trusted') logger.info({ mode: indexed.mode, reason: indexed.reason, linesRead: indexed.linesRead, ms: Math.round(indexed.ms) }, indexed.mode === 'rebuilt' ? "the file ledger's index was rebuilt from its journal" : "the file ledger's index caught up with its journal");
  const secretsKey = overrides.secretsKey ?? config.secretsKey;
  // Merchants' secrets can only be opened with the key they were sealed with: without one, a ledger
  // that holds merchants cannot serve them (start-up says which variable is missing).
  if (!secretsKey && (await store.listMerchants({ offset: 0, limit: 1 })).total > 0) {
    await store.close();
    throw new ConfigError('SECRETS_KEY is required: this ledger holds merchants whose secrets are sealed with it');
  }
  const box = secretsKey ? new SecretBox(parseSecretsKey(secretsKey)) : undefined;
  if (box) {
    // A merchant sealed with another key could not be served (every request of its would fail): one
    // line at start-up says so instead, e.g. after secrets:rotate when SECRETS_KEY was not changed.
    const others = await sealedWithAnotherKey(store, box.fingerprint);
    if (others.length) {
      await store.close();
      throw new ConfigError(
        `SECRETS_KEY (key ${box.fingerprint}) does not open the secrets of merchant(s) ${others.slice(0, 5).map((o) => `${o.id} (key ${o.key})`).join(', ')}${others.length > 5 ? ` and ${others.length - 5} more` : ''}: set SECRETS_KEY to the key they are sealed with (after npm run secrets:rotate, the new one)`,
      );
    }
  }
  const readings = new LedgerReadings(() => ledgerReading(store, () => Date.now()), config.metricsRefreshMs, (error) => {
    // Counted on its timer whether or not requests come: an idle instance shows its database gone too.
    if (isLedgerUnreachable(error)) metrics.ledgerErrors.inc({ where: 'gauges' });
    logger.error({ err: error }, 'counting the ledger gauges failed; /metrics shows the last count');
  });
  const metrics = createMetrics(readings, overrides.defaultMetrics ?? true, config.metricsMerchantLabel);
  const { registry, clientOptions } = merchantRegistry(config, store, box, logger, {
    ...overrides,
    loyaltyBaseUrl: baseUrl,
    loyaltyAppToken: appToken,
    onUpstreamRequest: (sample) => metrics.upstreamLatency.observe({ operation: sample.operation, outcome: sample.outcome }, sample.seconds),
  });
  // A register's card reads (src/core/register.ts): cached briefly, forgotten for a card whenever the bridge accrues to it or reverses it.
  const cardReads = new CardReads({ ...config.register, cacheEntries: 5_000, now: () => (overrides.clock?.() ?? new Date()).getTime() });
  const core = createCore({
    store,
    upstreams: merchantUpstreams(registry, store, { graceMs: config.inDoubt.graceMs, clockSkewMs: config.inDoubt.clockSkewMs }, logger, (merchantId, serials) => cardReads.forget(merchantId, serials)),
    options: { answerBudgetMs: config.answerBudgetMs, retryBaseMs: config.loyalty.retryBaseMs, inDoubtVerifyAfterMs: config.inDoubt.verifyAfterMs, holdAttentionAfterMs: config.inDoubt.holdAttentionAfterMs, partialRefundPolicy: config.partialRefundPolicy, inFlightLeaseMs: config.inFlightLeaseMs },
    logger,
    metrics,
    clock: overrides.clock,
  });
  const recovered = await core.recovery.recoverInterrupted();
  if (recovered) logger.warn({ recovered }, 'records were mid-call when the bridge last stopped: now in doubt, to be verified');
  if (store instanceof FileLedgerStore && store.recovery) {
    // The damage is compacted away only once records are in doubt: a crash before that finds it again.
    const damaged = store.recovery.corruptLines > 0 || store.recovery.staleLines > 0;
    const cause = damaged ? 'journal damage found at start-up' : 'the machine restarted since this ledger was last held without a clean stop';
    const inDoubt = await core.recovery.recoverAfterJournalDamage(cause);
    logger.warn(
      { ...store.recovery, inDoubt },
      damaged
        ? 'the ledger journal was damaged (an OS crash or power loss?): unreadable lines skipped, a copy kept; records that may have lost a call in flight are now in doubt'
        : 'the machine restarted while the bridge held the ledger (an OS crash or power loss?): its last writes may be lost; records that may have lost a call in flight are now in doubt',
    );
    await store.compactDamaged();
  }
  // The background passes count the ledger's outages too: an instance no POS is calling shows them.
  const countOutage = (where: 'worker' | 'dead_letters') => (error: unknown) => {
    if (isLedgerUnreachable(error)) metrics.ledgerErrors.inc({ where });
  };
  const worker = new Worker(store, core.delivery, { ...config.worker, leaseMs: config.inFlightLeaseMs, idleMs: config.answerBudgetMs, onPassFailed: countOutage('worker') }, logger);

  const ingest = new Ingest(overrides.adapters ?? allAdapters, core.intake, store, registry, config.posApiTimeoutMs, logger, overrides.clock, {
    ...config.deadLetterRetry,
    leaseMs: config.inFlightLeaseMs,
    owner: core.delivery.instanceId,
  });
  const deadLetterRetrier = new DeadLetterRetrier(store, ingest, { intervalMs: config.worker.intervalMs, onPassFailed: countOutage('dead_letters') }, logger, overrides.clock);
  const backfill = new BackfillPoller(
    overrides.adapters ?? allAdapters,
    store,
    ingest,
    registry,
    metrics,
    logger,
    { ...config.backfill, owner: core.delivery.instanceId, posApiTimeoutMs: config.posApiTimeoutMs, ...overrides.backfill },
    overrides.clock,
  );
  const merchants = new MerchantAdmin(store, registry, overrides.posDeclarations ?? posSettingDeclarations, clientOptions, logger);
  const scrubbed = await ingest.scrubDeadLetterHeaders();
  if (scrubbed) logger.warn({ scrubbed }, 'dead letters kept webhook credentials or signatures (an earlier build kept them): removed; rotate the webhook secrets of the POS systems concerned if others could read the dead letters');
  // Whether the loyalty service takes the merchants' app tokens: what /readyz answers (started below, before listening).
  const upstream = new UpstreamCheck(registry, store, logger, overrides.upstreamCheck);
  const register = new RegisterService({
    adapters: overrides.adapters ?? allAdapters,
    merchants: registry,
    ingest,
    intake: core.intake,
    store,
    reads: cardReads,
    metrics,
    logger,
    now: () => overrides.clock?.() ?? new Date(),
  });
  const app = createApp({
    ingest,
    operator: core.operator,
    register,
    instanceId: core.delivery.instanceId,
    worker,
    store,
    logger,
    metrics,
    adminToken,
    namedAdminTokens: config.namedAdminTokens,
    posAuth: config.posAuth,
    merchants,
    tokens: registry,
    reporter: new ReconcileReporter({
      merchants: registry,
      store,
      settings: store,
      posSource: overrides.posOrderSource ?? backfillListing(overrides.adapters ?? allAdapters, { timeoutMs: config.posApiTimeoutMs }),
      clockSkewMs: config.inDoubt.clockSkewMs,
      historyRead: overrides.reconcileHistoryRead,
      now: () => (overrides.clock?.() ?? new Date()).getTime(),
    }),
    bodyLimitBytes: config.bodyLimitBytes,
    posMaxInFlight: config.posMaxInFlight,
    upstreamReadiness: () => upstream.readiness(),
    version: VERSION,
    backfill: { poller: backfill, ...config.backfill },
    // What the routes and /openapi.json need of the POSes: HTTP imports no adapter.
    catalogue: {
      names: [...(overrides.adapters ?? allAdapters).keys()],
      webhookNames: [...(overrides.adapters ?? allAdapters).values()].filter((a) => a.webhook).map((a) => a.name),
      listingNames: [...(overrides.adapters ?? allAdapters).values()].filter((a) => a.backfill).map((a) => a.name),
      settingDeclarations: overrides.posDeclarations ?? posSettingDeclarations,
      schemas: { checkout: GenericCheckout, refund: GenericRefund },
      examples: { checkout: EXAMPLE_CHECKOUT },
    },
  });
  // Slow clients are cut off (408): headers within 10 s, the whole request within 30 s; Node's
  // default 16 KiB header cap applies. Node checks both only every connectionsCheckingInterval
  // (default 30 s), so a client that sent half a request line held its socket ~35 s; checked every
  // second, the limits hold to within a second (security review, issue 9).
  const headersTimeout = overrides.headersTimeoutMs ?? 10_000;
  // Start-up asks the loyalty service whether it takes the app tokens (at most LOYALTY_TIMEOUT_MS, up
  // to 10 s, before listening; longer, it goes on in the background): a wrong LOYALTY_APP_TOKEN or
  // LOYALTY_BASE_URL is logged now, naming the variable, and /readyz answers 503 until it is fixed.
  await upstream.start(Math.min(config.loyalty.timeoutMs, 10_000));
  const server = http.createServer({ headersTimeout, requestTimeout: 30_000, connectionsCheckingInterval: Math.min(1000, headersTimeout) }, app);
  try {
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(config.port, config.host, resolve));
  } catch (error) {
    // Nothing was served yet: what start-up opened is closed, and the cause named in one line.
    upstream.stop();
    await store.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ConfigError(`PORT ${config.port} is in use on ${config.host}: stop what holds it (another bridge?), or set PORT to another port`);
    if (code === 'EACCES') throw new ConfigError(`PORT ${config.port} may not be opened by this user on ${config.host}: set PORT to 1024 or above`);
    if (code === 'EADDRNOTAVAIL') throw new ConfigError(`HOST ${config.host} is not an address of this machine: set HOST to one of its addresses, or 0.0.0.0 for all`);
    throw error;
  }
  const address = server.address() as AddressInfo;
  const { port } = address;
  // Listening on every interface: this process reaches itself on loopback.
  const local = address.address === '0.0.0.0' || address.address === '::' ? '127.0.0.1' : address.family === 'IPv6' ? `[${address.address}]` : address.address;
  // Counted once before the first scrape; a count that fails here is logged and tried again on the timer.
  await readings.refresh().catch((error: unknown) => logger.error({ err: error }, 'counting the ledger gauges failed; /metrics shows them once a count succeeds'));
  readings.start();
  if (overrides.startWorker ?? true) worker.start();
  if (overrides.startDeadLetterRetrier ?? true) deadLetterRetrier.start();
  if (overrides.startBackfill ?? true) backfill.start();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      upstream.stop();
      await readings.stop();
      await deadLetterRetrier.stop();
      await backfill.stop();
      await worker.stop();
      await stopped;
      await store.close();
    })());

  return { url: `http://${local}:${port}`, server, store, core, worker, deadLetterRetrier, backfill, readings, adminToken, registry, merchants, upstream, close };
}

/**
 * The merchants a bridge serves, from its configuration and ledger (`box` opens created merchants'
 * secrets), with the loyalty client options every merchant's client shares. Also what an operator
 * command that acts for merchants (`npm run reconcile-report`) serves them from.
 */
export function merchantRegistry(
  config: Config,
  store: LedgerStore,
  box: SecretBox | undefined,
  logger: Logger,
  overrides: Pick<BridgeOverrides, 'loyaltyBaseUrl' | 'loyaltyAppToken' | 'loyaltyApiKey' | 'posSettings' | 'posDeclarations'> & {
    /** Each loyalty call's duration and outcome (the bridge's upstream latency histogram). */
    onUpstreamRequest?: (sample: UpstreamRequestSample) => void;
  } = {},
) {
  const baseUrl = overrides.loyaltyBaseUrl ?? config.loyalty.baseUrl;
  const appToken = overrides.loyaltyAppToken ?? config.loyalty.appToken;
  if (!baseUrl || !appToken) throw new ConfigError('the loyalty service address and app token are required (LOYALTY_BASE_URL, LOYALTY_APP_TOKEN)');
  const clientOptions = {
    baseUrl,
    timeoutMs: config.loyalty.timeoutMs,
    retryBaseMs: config.loyalty.retryBaseMs,
    agents: sharedAgents(),
    maxInFlight: MERCHANT_SOCKET_SHARE,
    onRequest: overrides.onUpstreamRequest,
  };
  const registry = new MerchantRegistry({
    store,
    box,
    declarations: overrides.posDeclarations ?? posSettingDeclarations,
    posSettings: { ...config.pos, ...overrides.posSettings },
    connect: (credentials) => new LoyaltyClient({ ...clientOptions, ...credentials }),
    defaults: { defaultCurrency: config.defaultCurrency, defaultPhoneRegion: config.defaultPhoneRegion },
    defaultMerchant: { appToken, apiKey: overrides.loyaltyApiKey ?? config.loyalty.apiKey, posToken: config.posAuth.mode === 'token' ? config.posAuth.token : undefined },
    ambiguity: config.inDoubt.ambiguity,
    logger,
  });
  return { registry, clientOptions };
}

/** The stored merchants with a secret sealed under a key other than `fingerprint`'s, and that key. */
async function sealedWithAnotherKey(store: LedgerStore, fingerprint: string): Promise<{ id: string; key: string }[]> {
  const found: { id: string; key: string }[] = [];
  for (let offset = 0; ; offset += 500) {
    const { items } = await store.listMerchants({ offset, limit: 500 });
    for (const m of items) {
      const other = sealedSecretsOf(m).find(({ sealed }) => sealed.key !== fingerprint);
      if (other) found.push({ id: m.id, key: other.sealed.key });
    }
    if (items.length < 500) return found;
  }
}
