/**
 * `npm run migrate`: applies the PostgreSQL ledger's migrations (src/ledger/pg-migrations.ts) to
 * LEDGER_URL, or to `--url postgres://…[?schema=name]`, and exits. Bridges apply them at start-up
 * too; this is for doing it ahead of a deployment, on purpose. Safe while bridges run: `migrate()`
 * holds an advisory lock, so it and any bridge starting at the same moment apply each version once.
 *
 * Exit codes: 0 applied or already up to date; 2 LEDGER_URL missing or not postgres://, or a bad
 * argument; 1 the migration failed. The password in the URL is never printed.
 */
import { migrate, parsePgUrl, PostgresLedgerStore, redactUrl } from '../src/ledger/pg-store.js';
import { MIGRATIONS } from '../src/ledger/pg-migrations.js';
import { command, CommandError, hidePasswords, isEntryPoint, parseOptions } from './cli.js';

const USAGE = 'usage: npm run migrate [-- --url postgres://user@host:5432/db[?schema=name]]   (default: LEDGER_URL)';

export interface MigrateResult {
  /** Versions applied by this run, in order (empty: it was up to date). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
}

/** Which URL to migrate: `--url`, else LEDGER_URL. Throws CommandError (exit 2) when there is none or it is not PostgreSQL. */
export function resolveLedgerUrl(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, command = 'npm run migrate', fileLedgerHas = 'a file: ledger has no migrations'): string {
  const options = parseOptions(argv, ['url']);
  const fromArgs = options.get('url');
  const url = fromArgs ?? env.LEDGER_URL;
  if (!url) throw new CommandError(`LEDGER_URL is not set: ${command} needs LEDGER_URL=postgres://… (or --url postgres://…)`, 2);
  if (!/^postgres(ql)?:\/\//.test(url)) {
    const source = fromArgs !== undefined ? '--url' : 'LEDGER_URL';
    throw new CommandError(
      `${source} must be a postgres://… URL for ${command} (it is ${redactUrl(url.slice(0, 200))}); ${fileLedgerHas}`,
      2,
    );
  }
  try {
    parsePgUrl(url);
  } catch (error) {
    throw new CommandError(`${fromArgs !== undefined ? '--url' : 'LEDGER_URL'}: ${hidePasswords((error as Error).message, url)}`, 2);
  }
  return url;
}

/** Applies the migrations that `url`'s schema lacks; `log` hears what was done. */
export async function migrateLedger(options: { url: string; log?: (line: string) => void }): Promise<MigrateResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const { schema } = parsePgUrl(options.url);
  const store = new PostgresLedgerStore(options.url, { poolSize: 1 });
  try {
    log(`PostgreSQL ledger ${redactUrl(options.url)}${schema ? ` (schema ${schema})` : ''}`);
    const applied = await migrate(store.pool, schema);
    const { rows } = await store.pool.query<{ version: number | null }>('SELECT max(version) AS version FROM ledger_schema_migrations');
    const version = rows[0]?.version ?? 0;
    const names = new Map(MIGRATIONS.map((m) => [m.version, m.name]));
    if (applied.length === 0) log(`up to date: schema version ${version}, nothing applied`);
    for (const v of applied) log(`applied migration ${v}: ${names.get(v) ?? ''}`);
    if (applied.length) log(`schema version ${version}`);
    return { applied, version };
  } finally {
    await store.close().catch(() => undefined);
  }
}

/** The command: answers the exit code. */
export const main = command({
  name: 'migrate',
  opensLedger: true,
  usage: USAGE,
  hiddenVariables: ['LEDGER_URL'],
  async run({ argv, env, hideUrl }) {
    const url = resolveLedgerUrl(argv, env);
    hideUrl(url);
    await migrateLedger({ url });
  },
});

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
