/**
 * `npm run backfill -- --merchant <id> --pos <pos> --since <ISO 8601> [--until <ISO 8601>]` runs one
 * backfill pass from a shell (docs/backfill-and-reconcile.md): it reads the merchant's account on the POS back for
 * the window, records what the POS's webhooks left out, and prints what it found as JSON (the answer
 * of POST /v1/admin/backfill), with a progress line on stderr while pages are read. The window ends
 * at now at most, whatever --until says (the pass cuts it there): a watermark never moves past now.
 *
 * It runs the bridge's own code on the configured ledger (LEDGER_URL and every other variable, as
 * `npm start` reads them), without serving HTTP or running the scheduled work: a file ledger is
 * refused while a bridge holds it ("in use by process N": ask the running bridge with POST
 * /v1/admin/backfill instead); on PostgreSQL it takes the account's lease like any instance. New
 * orders are accrued within the answer budget as a webhook's would be; any still pending when it
 * ends are delivered by the bridge's worker. Not in sandbox (its loyalty service lives in the
 * bridge's own process): there, use POST /v1/admin/backfill.
 *
 * Exit codes: 0 the window was read to its end; 1 the pass stopped (the POS kept refusing a page,
 * another pass holds the account, the merchant cannot be backfilled): the watermark did not move;
 * 2 a missing or bad argument or configuration.
 */
import pino from 'pino';
import { posSettingDeclarations } from '../adapters/index.js';
import { startBridge } from '../src/bridge.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { createLogger } from '../src/kernel/logger.js';
import { CommandError, describeError, isEntryPoint, parseOptions, StatusLine } from './cli.js';

const USAGE = 'usage: npm run backfill -- --merchant <id> --pos <square|shopify|clover|toast|loyverse> --since <ISO 8601> [--until <ISO 8601>]';

export interface BackfillCommand {
  merchantId: string;
  pos: string;
  since: Date;
  until?: Date;
}

/** The command line, or a usage error (exit 2) naming what is wrong. */
export function parseBackfillArgs(argv: readonly string[]): BackfillCommand {
  const options = parseOptions(argv, ['merchant', 'pos', 'since', 'until']);
  const time = (name: string) => {
    const text = options.get(name);
    if (text === undefined) return undefined;
    const at = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(text) ? new Date(text) : undefined;
    if (!at || Number.isNaN(at.getTime())) throw new CommandError(`--${name} must be an ISO 8601 date-time with its offset, e.g. 2026-03-01T10:00:00Z`, 2);
    return at;
  };
  const pos = options.get('pos');
  const since = time('since');
  if (!pos || !since) throw new CommandError(`--pos and --since are required\n${USAGE}`, 2);
  const until = time('until');
  return { merchantId: options.get('merchant') ?? 'default', pos, since, ...(until ? { until } : {}) };
}

/** The progress line's text after `pages` pages. */
function progressText({ pages, found }: { pages: number; found: number }): string {
  return `backfill: ${pages} page${pages === 1 ? '' : 's'} read, ${found} order${found === 1 ? '' : 's'} and refunds found`;
}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const command = parseBackfillArgs(process.argv.slice(2));
  let config;
  try {
    config = loadConfig(posSettingDeclarations);
  } catch (error) {
    if (error instanceof ConfigError) throw new CommandError(error.message, 2);
    throw error;
  }
  if (config.sandbox) throw new CommandError('sandbox (no LOYALTY_BASE_URL): its loyalty service lives in the bridge process; ask it with POST /v1/admin/backfill', 2);
  // Its log lines go to stderr beside the progress line: stdout is the answer alone.
  const logger = createLogger(config.logLevel, pino.destination(2));
  const bridge = await startBridge({ ...config, port: 0, host: '127.0.0.1' }, logger, {
    startWorker: false,
    startDeadLetterRetrier: false,
    startBackfill: false,
    defaultMetrics: false,
  });
  // Redrawn in place on a terminal, a line every few seconds elsewhere (scripts/cli.ts StatusLine).
  const status = new StatusLine();
  try {
    const result = await bridge.backfill.runPass({ ...command, by: 'request', onProgress: (progress) => status.update(progressText(progress)) });
    // One line, as docs/backfill-and-reconcile.md shows it (and `| jq` pretty-prints it).
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    status.finish();
    await bridge.close();
  }
}

if (isEntryPoint(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`backfill: ${describeError(error)}\n`);
    process.exit(error instanceof CommandError ? error.exitCode : 1);
  });
}
