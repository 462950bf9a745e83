/**
 * `npm run reconcile-report -- --merchant <id> --from <day|date-time> --to <day|date-time> [--csv]`:
 * the three-way report (GET /v1/admin/reports/reconcile) from a shell, with the bridge's own
 * configuration (LEDGER_URL, LOYALTY_*, SECRETS_KEY for created merchants, the POS variables). The
 * report goes to stdout (JSON, or CSV with --csv); what it is doing goes to stderr, one line.
 * It reads only: nothing in the POS, the ledger or the loyalty service changes.
 *
 * A JSON-file ledger serves one process: while the bridge runs on one, ask the bridge instead
 * (curl the endpoint with an admin token). On PostgreSQL it runs beside the bridges.
 *
 * Exit codes: 0 the report found no difference; 3 it found differences (or could not read
 * everything: `complete` is false); 1 it could not be made; 2 a missing or bad argument or variable.
 */
import { adapters, posSettingDeclarations } from '../adapters/index.js';
import { merchantRegistry } from '../src/bridge.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { ValidationError } from '../src/kernel/errors.js';
import { ledgerStartProblem, openStore } from '../src/ledger/open-store.js';
import { silentLogger } from '../src/kernel/logger.js';
import { parseSecretsKey, SecretBox, SecretsKeyError } from '../src/merchants/secrets.js';
import { backfillListing, type PosOrderSource } from '../src/reconcile/pos-source.js';
import { parseRange, ReconcileReporter, reportCsv, type ThreeWayReport } from '../src/reconcile/report.js';
import { CommandError, describeError, hidePasswords, isEntryPoint, parseOptions, StatusLine, type ProgressStream } from './cli.js';

const USAGE = 'usage: npm run reconcile-report -- --merchant <id> --from <2026-11-01 | 2026-11-01T00:00:00Z> --to <2026-11-30 | …> [--csv]   (default merchant: default)';

export interface ReportCommandIo {
  stdout: ProgressStream;
  stderr: ProgressStream;
  /** Where the POS's orders are listed from (default: the backfill's listing of each POS's API). */
  posSource?: PosOrderSource;
}

/** The command: answers the exit code. */
export async function main(argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env, io: ReportCommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const status = new StatusLine({ stream: io.stderr });
  try {
    const options = parseOptions(argv, ['merchant', 'from', 'to'], ['csv']);
    const from = options.get('from');
    const to = options.get('to');
    if (!from || !to) throw new CommandError(`--from and --to are required\n${USAGE}`, 2);
    const range = usage(() => parseRange(from, to));
    const merchantId = options.get('merchant') ?? 'default';
    const config = usage(() => loadConfig(posSettingDeclarations, env));
    const store = openStore(config.ledgerUrl);
    try {
      await store.init();
    } catch (error) {
      const owner = /in use by process (\d+)/.exec(describeError(error))?.[1];
      if (owner) throw new CommandError(`the file ledger is in use by process ${owner} (the bridge): ask it instead, GET /v1/admin/reports/reconcile with an admin token, or stop it first`);
      throw error;
    }
    try {
      const box = config.secretsKey ? new SecretBox(usage(() => parseSecretsKey(config.secretsKey!))) : undefined;
      const { registry } = usage(() => merchantRegistry(config, store, box, silentLogger));
      const posSource = io.posSource ?? backfillListing(adapters, { timeoutMs: config.posApiTimeoutMs });
      const reporter = new ReconcileReporter({ merchants: registry, store, settings: store, posSource, clockSkewMs: config.inDoubt.clockSkewMs });
      const report = await reporter.report(merchantId, range, (p) => status.update(`${p.phase}: ${p.detail}`));
      status.update(summary(report));
      status.finish();
      io.stdout.write(options.has('csv') ? reportCsv(report) : `${JSON.stringify(report)}\n`);
      return report.differences.length === 0 && report.complete ? 0 : 3;
    } finally {
      await store.close().catch(() => undefined);
    }
  } catch (error) {
    status.finish();
    const code = error instanceof CommandError ? error.exitCode : 1;
    // A ledger it cannot open is said as the bridge says it at start-up (naming LEDGER_URL and what to do).
    const ledgerProblem = error instanceof CommandError || !env.LEDGER_URL ? undefined : ledgerStartProblem(error, env.LEDGER_URL);
    const message = ledgerProblem ?? hidePasswords(describeError(error), ...(env.LEDGER_URL ? [env.LEDGER_URL] : []));
    io.stderr.write(`reconcile-report: ${code === 1 && !ledgerProblem ? 'failed: ' : ''}${message}\n`);
    return code;
  }
}

/** A bad argument or variable is the command line's fault (exit 2), said in the words the bridge uses. */
function usage<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof ValidationError) throw new CommandError(`--${error.issues.map((i) => `${i.field}: ${i.message}`).join('; --')}`, 2);
    if (error instanceof SecretsKeyError) throw new CommandError(`SECRETS_KEY ${describeError(error)}`, 2);
    if (error instanceof ConfigError) throw new CommandError(describeError(error), 2);
    throw error;
  }
}

function summary(report: ThreeWayReport): string {
  const kinds = Object.entries(report.counts).filter(([, n]) => n > 0);
  const found = kinds.length ? kinds.map(([k, n]) => `${n} ${k}`).join(', ') : 'no difference';
  const unread = report.sources.filter((s) => !s.read).map((s) => `${s.pos} not read: ${s.why}`);
  const incomplete = report.complete ? '' : `; incomplete (${[...unread, ...(report.history.settled ? [] : ['the history kept moving'])].join('; ')})`;
  return `${report.merchantId} ${report.from} … ${report.to}: ${report.examined.pos} POS entries, ${report.examined.ledger} ledger records, ${report.examined.history} operations; ${found}${incomplete}`;
}

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
