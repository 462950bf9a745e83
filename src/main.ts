/**
 * The bridge as a process. With no LOYALTY_BASE_URL it runs in sandbox: the built-in simulator is
 * the upstream, and startup says so loudly. SIGTERM/SIGINT stop it gracefully (a second signal of
 * the same kind stops it at once), and so does the end of the launcher that started it
 * (scripts/start.mjs, `npm start`), however that ends: see src/launcher.ts.
 */
import { posSettingDeclarations } from '../adapters/index.js';
import { configuredValue, loadConfig, ConfigError, SANDBOX_WEBHOOK_SECRET, type Config } from './config.js';
import { createLogger, type Logger } from './kernel/logger.js';
import { LEDGER_LOCK_WAIT_MS, SHUTDOWN_LIMIT_MS, startBridge, type Bridge } from './bridge.js';
import { demoPosToken, ensureDemoMerchants, installDemoMerchants, prepareSandboxLedger, sandboxKeyPath, sandboxSecretsKey, withSandboxPosApis, type DemoMerchant, type SandboxLedger } from './sandbox.js';
import { createSimulator, type Simulator } from '../simulator/index.js';
import { ledgerStartProblem } from './ledger/open-store.js';
import { launcherGone } from './launcher.js';

/** A start-up problem of the configuration or the ledger: one line naming the variable, exit 78 (EX_CONFIG), no stack trace. */
function stopOnConfigProblem(problem: string): never {
  process.stderr.write(`loyalty-bridge: ${problem}\n`);
  process.exit(78);
}

async function main(): Promise<void> {
  // Watched from the first instant: a launcher killed while this process starts must stop it too.
  const launcher = launcherGone();
  let config;
  try {
    config = loadConfig(posSettingDeclarations);
  } catch (error) {
    if (error instanceof ConfigError) stopOnConfigProblem(error.message);
    throw error;
  }
  const logger = createLogger(config.logLevel);
  let closeSimulator: (() => Promise<void>) | undefined;
  let sandbox:
    | { url: string; appToken: string; apiKey: string; simulator: Simulator; posApis: Record<string, string>; secretsKey?: string; keyFile?: { path: string; created: boolean }; ledger: SandboxLedger }
    | undefined;
  if (config.sandbox) {
    // The simulator below starts with empty books: the ledger starts empty too, unless told to keep it.
    const ledgerUrl: string = config.ledgerUrl;
    const ledger = await prepareSandboxLedger(ledgerUrl, config.sandboxLedger === 'keep', { lockWaitMs: LEDGER_LOCK_WAIT_MS }).catch((error: unknown) => {
      const problem = ledgerStartProblem(error, ledgerUrl);
      if (!problem) throw error;
      return stopOnConfigProblem(problem);
    });
    // Each run's operations are numbered past any earlier run's (microseconds since 1970: a run
    // would need more than a thousand operations a millisecond to reach the next run's first id),
    // since the ledger keeps the ids earlier runs' records claimed.
    const simulator = createSimulator({ firstOperationId: Date.now() * 1000 });
    installDemoMerchants(simulator);
    const simulatorPort = config.sandboxSimulatorPort;
    const listening = await simulator.listen(simulatorPort ?? 0).catch((error: unknown) => {
      if ((error as { code?: string }).code !== 'EADDRINUSE') throw error;
      return stopOnConfigProblem(`SANDBOX_SIMULATOR_PORT ${simulatorPort} is in use: stop what holds it (another sandbox?), or set SANDBOX_SIMULATOR_PORT to another port (or leave it unset for any free one)`);
    });
    closeSimulator = listening.close;
    // The bridge reads the POSes' APIs at the simulator's fakes, where the demo merchants' POS accounts are.
    const posApis = withSandboxPosApis(config.pos, posSettingDeclarations, listening.url, (variable) => configuredValue(variable) !== undefined);
    config = { ...config, pos: posApis.pos };
    sandbox = { url: listening.url, appToken: simulator.appToken, apiKey: simulator.apiKey, simulator, posApis: posApis.pointed, ledger };
    if (!config.secretsKey) {
      // Sandbox makes its own SECRETS_KEY (docs/merchants.md), kept so its merchants open again next time.
      const path = sandboxKeyPath(config.ledgerUrl);
      const { key, created } = await sandboxSecretsKey(path);
      sandbox.secretsKey = key;
      sandbox.keyFile = { path, created };
    }
  }
  let bridge: Bridge;
  try {
    bridge = await startBridge(
      config,
      logger,
      sandbox
        ? {
            loyaltyBaseUrl: sandbox.url,
            loyaltyAppToken: sandbox.appToken,
            loyaltyApiKey: config.loyalty.apiKey ?? sandbox.apiKey,
            ...(sandbox.secretsKey ? { secretsKey: sandbox.secretsKey } : {}),
          }
        : {},
    );
  } catch (error) {
    // What start-up finds wrong with the configuration (SECRETS_KEY missing for a ledger with merchants) is one line.
    if (error instanceof ConfigError) stopOnConfigProblem(error.message);
    throw error;
  }
  // Armed as soon as the bridge listens: a SIGTERM during what follows (sandbox's demo merchants) stops it gracefully too.
  let stopping = false;
  const shutdown = (why: { signal: string } | { launcher: string }) => {
    // Once: a second signal of the same kind finds no handler left (process.once) and stops the process at once.
    if (stopping) return;
    stopping = true;
    logger.info(why, 'shutting down: no new requests; finishing in-flight work');
    const force = setTimeout(() => {
      logger.error('shutdown took too long; in-flight records will be recovered as in doubt at the next start');
      process.exit(1);
    }, SHUTDOWN_LIMIT_MS);
    force.unref();
    void bridge
      .close()
      .then(() => closeSimulator?.())
      .then(() => {
        logger.info('stopped');
        process.exit(0);
      });
  };
  process.once('SIGTERM', () => shutdown({ signal: 'SIGTERM' }));
  process.once('SIGINT', () => shutdown({ signal: 'SIGINT' }));
  void launcher?.then(() => shutdown({ launcher: 'scripts/start.mjs, which started this bridge, is gone (killed, or its process group was)' }));

  const demos = sandbox ? await ensureDemoMerchants(bridge.merchants, sandbox.simulator) : [];

  if (sandbox) {
    // Printed, not logged: the sandbox's generated admin token is shown exactly once, to the operator at the terminal.
    const line = '='.repeat(78);
    process.stdout.write(
      [
        line,
        ' SANDBOX MODE: LOYALTY_BASE_URL is not set. The upstream is the built-in simulator;',
        ' no real loyalty card is touched. Set LOYALTY_BASE_URL and LOYALTY_APP_TOKEN for real.',
        ` bridge:     ${bridge.url.replace('127.0.0.1', 'localhost')}`,
        ` simulator:  ${sandbox.url}   (books: ${sandbox.url}/__sim/books)`,
        ...ledgerLines(config.ledgerUrl, sandbox.ledger),
        config.adminToken ? ' admin token: ADMIN_TOKEN' : ` admin token (generated for this run): ${bridge.adminToken}`,
        ...posApiLines(sandbox.posApis, config.pos.square?.notificationUrl),
        ...demoLines(demos, sandbox.url),
        sandbox.keyFile ? ` secrets key: ${sandbox.keyFile.path} (${sandbox.keyFile.created ? 'generated now' : 'generated at an earlier start'}; SECRETS_KEY is not set)` : ' secrets key: SECRETS_KEY',
        line,
        '',
      ].join('\n'),
    );
  }
  logger.info({ port: bridge.server.address(), sandbox: config.sandbox, ledger: bridge.store.kind }, 'loyalty-bridge listening');
  if (sandbox?.ledger.action === 'kept' && sandbox.ledger.warning) {
    logger.warn({ why: sandbox.ledger.why }, "sandbox kept an earlier run's ledger, but its simulator starts with empty books: reports will list the earlier records as differences");
  }
  logPosAuth(config.posAuth, logger);
  sayIfNotReady(bridge);

}

/**
 * The banner's lines on the ledger: emptied at this start (as the simulator's books are), new, or
 * kept, and then loudly what a kept ledger does to the reports, since its records name accruals this
 * run's simulator never booked.
 */
function ledgerLines(ledgerUrl: string, ledger: SandboxLedger): string[] {
  if (ledger.action !== 'kept') {
    const what = ledger.action === 'new' ? 'new; emptied at every sandbox start' : 'emptied at this start';
    return [` ledger:     ${ledgerUrl} (${what}, as the simulator's books are; SANDBOX_LEDGER=keep keeps it)`];
  }
  if (!ledger.warning) return [` ledger:     ${ledgerUrl} (kept: ${ledger.why})`];
  return [
    ` ledger:     ${ledgerUrl} (KEPT from an earlier run: ${ledger.why})`,
    ' !!! WARNING: the simulator starts with empty books at every start, but this ledger keeps the',
    ' !!! earlier runs\' records: the loyalty side never booked their accruals, so a three-way report',
    ' !!! lists them as differences and refunds of those orders fail. For a sandbox whose sides agree,',
    ` !!! start it on a new ledger (LEDGER_URL=file:./data/sandbox-$(date +%s)/ledger.json npm start)${ledger.why === 'SANDBOX_LEDGER=keep' ? ' or without SANDBOX_LEDGER=keep' : ''}.`,
  ];
}

/** The banner's lines on the POS APIs sandbox points at the simulator, and how webhooks are signed (Square: which URL). */
function posApiLines(pointed: Record<string, string>, squareNotificationUrl: string | undefined): string[] {
  const square = squareNotificationUrl ? `; Square signs ${squareNotificationUrl} + the body` : '';
  return [
    ...(Object.keys(pointed).length ? [` POS APIs:   ${Object.values(pointed).join(', ')} (the simulator's fakes)`] : []),
    ` webhooks:   signed with ${SANDBOX_WEBHOOK_SECRET}${square} (docs/pos-systems.md, "Signing a webhook by hand")`,
  ];
}

/** The banner's lines on the demo merchants: their tokens for this run (printed, never logged). */
function demoLines(demos: DemoMerchant[], simulatorUrl: string): string[] {
  if (demos.length === 0) return [];
  return [
    ' demo merchants (docs/merchants.md; their tokens are issued anew at every start):',
    ...demos.flatMap((d) => {
      if ('problem' in d) return [`   ${d.id}: not available: ${d.problem}`];
      const m = d.merchant;
      // The account only: a token's or a register key's hint would say nothing more (the tokens are the lines below).
      const accounts = Object.entries(m.pos).map(([pos, { accessToken: _hint, loyaltyKey: _keyHint, ...account }]) => `${pos} ${Object.values(account).join(' ')}`);
      return [
        `   ${d.id}${d.created ? ' (created now)' : ''}: ${[...accounts, m.currency, m.phoneRegion].filter(Boolean).join(', ')}`,
        `     POS token:   ${d.posToken}`,
        `     admin token: ${d.adminToken}`,
        `     books:       ${simulatorUrl}/__sim/merchants/${d.id}/books`,
        `     POS API tokens (public, at the simulator's fake POSes): ${demoPosToken(d.id, '<pos>')}`,
      ];
    }),
  ];
}

/**
 * A wrong LOYALTY_APP_TOKEN or LOYALTY_BASE_URL, said where a person starting the bridge looks (the
 * log has it too, as JSON): the bridge runs, not ready, and /readyz answers 503 with the same line
 * until the loyalty service takes the credential (docs/configuration.md, "Ready means ready": why it
 * starts rather than refusing to).
 */
function sayIfNotReady(bridge: Bridge): void {
  const { ready, upstream } = bridge.upstream.readiness();
  if (ready) return;
  const line = '!'.repeat(78);
  process.stderr.write(
    [line, ' NOT READY: the loyalty service refuses this configuration.', ` ${upstream.replace(/^failing: /, '')}`, ' /readyz answers 503 until it is fixed (the bridge asks the loyalty service again about every 15 s).', line, ''].join('\n'),
  );
}

/** Says at every start who may post checkouts and refunds directly, loudest where anyone may. */
function logPosAuth(posAuth: Config['posAuth'], logger: Logger): void {
  if (posAuth.mode === 'token' && posAuth.token) return;
  if (posAuth.mode === 'token') {
    logger.warn('POS_TOKEN is not set: every direct POS post to /v1/checkouts and /v1/refunds is refused (401); webhooks still work. Set POS_TOKEN, or POS_AUTH=off behind a private network');
  } else if (posAuth.because === 'POS_AUTH=off') {
    logger.warn('POS_AUTH=off: /v1/checkouts and /v1/refunds accept any caller without a credential; anyone who can reach them can accrue points and reverse any customer\'s points. Keep them on a private network');
  } else {
    logger.info('sandbox: /v1/checkouts and /v1/refunds need no credential (set POS_TOKEN to require one)');
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`loyalty-bridge failed to start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
