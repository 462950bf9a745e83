/**
 * `npm run simulator [-- --port 4010] [--write-env sim.env]`: the loyalty-service simulator on its own,
 * with its fake POS APIs (docs/simulator-pos-apis.md), as an upstream a bridge started outside
 * sandbox points at (`LOYALTY_BASE_URL`), exactly as it would at the real loyalty service.
 *
 * It prints its address and the variables a bridge needs: the default merchant's install
 * (`LOYALTY_BASE_URL`, `LOYALTY_APP_TOKEN`, `LOYALTY_API_KEY`) and its accounts at the fake POS APIs
 * (each POS's API address, account and access token, which backfill and the three-way report read),
 * and the app tokens of the two demo merchants installed for onboarding (`POST /v1/admin/merchants`
 * with nothing but the app token: resolve-credentials answers the rest, as in sandbox).
 * `--write-env <path>` also writes those variables to a file (`set -a; . ./sim.env; set +a`, or
 * `docker run --env-file`; not `--env-file`, which Node 20 takes for its own even after the script). Every token here is public test data: it listens on 127.0.0.1 only.
 *
 * The port: `--port`, else SIMULATOR_PORT, else 4010 (0 picks a free one). Its books start empty at
 * every start, like sandbox's simulator: a bridge's ledger kept from an earlier run holds accruals
 * these books never saw (docs/backfill-and-reconcile.md says what that does to a report). Stops on
 * SIGTERM or SIGINT (Ctrl-C).
 *
 * Exit codes: 0 stopped; 1 it could not listen (the port is taken); 2 a bad argument.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { posSettingDeclarations } from '../adapters/index.js';
import { demoPosToken, DEMO_MERCHANTS, installDemoMerchants, installPosAccounts } from '../src/sandbox.js';
import { createSimulator, POS_API_BASE_PATHS, type PosName } from '../simulator/index.js';
import { CommandError, describeError, isEntryPoint, parseOptions } from './cli.js';
import { launcherGone } from '../src/launcher.js';

const USAGE = 'usage: npm run simulator -- [--port 4010] [--write-env sim.env]   (SIMULATOR_PORT sets the port too; 0 picks a free one)';
export const DEFAULT_SIMULATOR_PORT = 4010;

/**
 * The default merchant's accounts at the fake POSes: what its variables (SQUARE_MERCHANT_ID, …) name.
 * Each account id is in the POS's own format, like the demo merchants' (src/sandbox.ts).
 */
export const DEFAULT_MERCHANT_ACCOUNTS: Readonly<Record<PosName, string>> = {
  square: 'SIMDEFAULTSQ1',
  shopify: 'sim-default.myshopify.com',
  clover: 'SIMDEFAULTCL1',
  toast: 'd0000000-0000-4000-8000-000000000001',
  loyverse: 'd0000000-0000-4000-8000-000000000002',
};
const DEFAULT_MERCHANT_CURRENCY = 'USD';

/** The port: --port, else SIMULATOR_PORT, else 4010. */
export function simulatorPort(options: Map<string, string>, env: NodeJS.ProcessEnv): number {
  const text = options.get('port') ?? env.SIMULATOR_PORT ?? String(DEFAULT_SIMULATOR_PORT);
  const port = /^\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  if (!Number.isInteger(port) || port > 65535) throw new CommandError(`${options.has('port') ? '--port' : 'SIMULATOR_PORT'} must be a port number from 0 to 65535, e.g. ${DEFAULT_SIMULATOR_PORT} (got ${JSON.stringify(text)})`, 2);
  return port;
}

/** The variables a bridge needs to use the simulator at `url` as its loyalty service, with the default merchant's POS accounts there. */
export function bridgeVariables(url: string, tokens: { appToken: string; apiKey: string }): [name: string, value: string][] {
  const variables: [string, string][] = [
    ['LOYALTY_BASE_URL', url],
    ['LOYALTY_APP_TOKEN', tokens.appToken],
    ['LOYALTY_API_KEY', tokens.apiKey],
  ];
  for (const [pos, account] of Object.entries(DEFAULT_MERCHANT_ACCOUNTS) as [PosName, string][]) {
    const declared = posSettingDeclarations[pos]!;
    variables.push([declared.apiBaseUrl!.variable, `${url}${POS_API_BASE_PATHS[pos]}`], [declared.account!.variable, account], [declared.accessToken!, demoPosToken('default', pos)]);
  }
  return variables;
}

async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const options = parseOptions(argv, ['port', 'write-env']);
  const port = simulatorPort(options, env);
  // Numbered past any earlier run's operations (as sandbox's): a bridge's ledger outlives this
  // process, and operation ids its records claimed must not come back as new ones.
  const simulator = createSimulator({ firstOperationId: Date.now() * 1000 });
  installDemoMerchants(simulator);
  installPosAccounts(simulator, 'default', DEFAULT_MERCHANT_ACCOUNTS, DEFAULT_MERCHANT_CURRENCY);
  const listening = await simulator.listen(port).catch((error: unknown) => {
    const taken = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
    throw new CommandError(taken ? `port ${port} is in use: stop what holds it, or choose another with --port (0 picks a free one)` : `could not listen on 127.0.0.1:${port}: ${describeError(error)}`);
  });
  const variables = bridgeVariables(listening.url, simulator);
  const envFile = options.get('write-env');
  if (envFile) {
    writeFileSync(envFile, `# npm run simulator at ${listening.url}: a bridge's loyalty service and the default merchant's POS accounts (public test data)\n${variables.map(([k, v]) => `${k}=${v}`).join('\n')}\n`, { mode: 0o600 });
    chmodSync(envFile, 0o600);
  }
  // Armed before the banner says it runs: a SIGTERM sent on reading it must find the handler there.
  const stopped = new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    // A SIGKILL of `npm run simulator` (or of its group) ends it too, as it ends a bridge (src/launcher.ts).
    void launcherGone()?.then(stop);
  });
  const line = '='.repeat(78);
  const pad = (text: string, width: number) => text.padEnd(width);
  process.stdout.write(
    [
      line,
      ` loyalty simulator: ${listening.url}`,
      ' A fake loyalty service and fake POS APIs (Square, Shopify, Clover, Toast, Loyverse): test data only.',
      ' A bridge that uses it as its loyalty service, as the default merchant (docs/simulator-pos-apis.md, "The simulator on its own"):',
      ...variables.slice(0, 3).map(([k, v]) => `   ${k}=${v}`),
      " The default merchant's accounts at the fake POS APIs (backfill and the three-way report read them):",
      ...chunks(variables.slice(3), 3).map((group) => `   ${group.map(([k, v]) => `${k}=${v}`).join(' ')}`),
      ...(envFile ? [` These variables are also in ${envFile} (set -a; . ${envFile}; set +a).`] : []),
      ' Installed for onboarding (POST /v1/admin/merchants {"id":…,"loyalty":{"appToken":…}}; resolve-credentials fills in the rest):',
      ...DEMO_MERCHANTS.map((demo) => {
        const m = simulator.merchant(demo.id);
        return `   ${pad(demo.id, 12)} app token ${pad(m.appToken, 28)} API key ${m.apiKey}`;
      }),
      ` books:    ${listening.url}/__sim/books (the default merchant's), ${listening.url}/__sim/merchants/<id>/books`,
      ` control:  ${listening.url}/__sim/… (faults, merchants, the fake POSes' orders and signed webhooks: docs/simulator-pos-apis.md)`,
      ' Ctrl-C stops it; its books start empty at every start.',
      line,
      '',
    ].join('\n'),
  );

  await stopped;
  await listening.close();
  process.stdout.write('loyalty simulator stopped\n');
  // The launcher's IPC channel, listened to for its end, would keep this process alive after a
  // SIGTERM or Ctrl-C (and npm and the launcher with it): let go of it.
  if (process.connected) process.disconnect();
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

if (isEntryPoint(import.meta.url)) {
  main(process.argv.slice(2), process.env).catch((error: unknown) => {
    process.stderr.write(`simulator: ${describeError(error)}\n`);
    process.exit(error instanceof CommandError ? error.exitCode : 1);
  });
}
