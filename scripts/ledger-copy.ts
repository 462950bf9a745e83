/**
 * `npm run ledger:copy -- --from file:./data/ledger.json --to postgres://user@host:5432/db[?schema=name]`
 *
 * Copies a JSON-file ledger into PostgreSQL, so that a shop outgrowing one machine keeps its history:
 * the merchants (their POS accounts, their secrets still sealed with SECRETS_KEY, their token
 * hashes), every record exactly as it is (version, status, attempts, history, merchant) with its
 * operation claims, and the dead letters. Merchants and records PostgreSQL already holds at the same
 * or a newer version are skipped, so running it again after an interruption resumes where it
 * stopped. Deliveries bound to their accounts (docs/security.md) are copied; webhook dedupe events
 * are not (see WEBHOOK_NOTE).
 *
 * The file ledger must not be in use: its lock keeps a running bridge and this copy apart ("stop the
 * bridge first"). The PostgreSQL ledger may be in use; its migrations are applied first if needed.
 * At the end a count check compares the merchants, records and dead letters in the file ledger with
 * those present in PostgreSQL for the same ids (records by ledger key: their transactionId within
 * their merchant, since two merchants may hold equal transactionIds).
 *
 * Exit codes: 0 copied and counts match; 1 failed, or the counts differ; 2 bad arguments; 130
 * interrupted (Ctrl-C: the batch under way is rolled back, the rest stays). Passwords are never printed.
 */
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { FileLedgerStore } from '../src/ledger/file-store.js';
import { parsePgUrl, PostgresLedgerStore, redactUrl } from '../src/ledger/pg-store.js';
import { keyOf, type LedgerRecord } from '../src/state/record.js';
import type { StoredMerchant } from '../src/state/merchant.js';
import type { AuditEntry, DeadLetter, LedgerStore, ListCursor } from '../src/ledger/store.js';
import { command, CommandError, describeError, hidePasswords, isEntryPoint, parseOptions, ProgressBar, type ProgressOptions } from './cli.js';

const USAGE = 'usage: npm run ledger:copy -- --from file:./data/ledger.json --to postgres://user@host:5432/db[?schema=name]';

export const SECRETS_NOTE =
  "merchants' secrets are copied sealed, as they are: bridges on the PostgreSQL ledger need the same SECRETS_KEY as the file ledger's";

export const WEBHOOK_NOTE =
  'webhook dedupe events are not copied: the file ledger keeps only hashes of them, they matter for a few days, ' +
  "and a merchant's own redelivered event is harmless (checkouts and refunds are idempotent by transactionId/refundId); " +
  'the deliveries bound to their accounts, which keep a copy naming another merchant a duplicate, are copied';

/** Records read from the file ledger per page (one `list()` each); written in transactions of 500. */
const PAGE = 1000;
/** Pages being written at once (each on its own connection). */
const IN_FLIGHT = 2;
/** Ids per query of the count check. */
const CHECK_CHUNK = 10_000;

export interface CopyOptions {
  /** `file:<path>` of the JSON-file ledger's manifest. */
  from: string;
  /** `postgres://…[?schema=name]`. */
  to: string;
  /** Hears one line at a time (default: stdout). */
  log?: (line: string) => void;
  /** The progress bar (default: on stderr); false for none. */
  progress?: ProgressOptions | false;
  pageSize?: number;
  /** Aborting stops the copy between two pages. */
  signal?: AbortSignal;
}

export interface CopyCounts {
  /** In the file ledger. */
  inFile: number;
  /** Written to PostgreSQL by this run. */
  imported: number;
  /** Left alone: PostgreSQL holds them at the same or a newer version (dead letters: as far along). */
  skipped: number;
  /** Of the file ledger's ids, how many PostgreSQL holds afterwards (records: at the file's version or newer). */
  inPostgres: number;
}

export interface CopyResult {
  merchants: CopyCounts;
  records: CopyCounts;
  deadLetters: CopyCounts;
  /** The operators' audit trail (entries). */
  audit: CopyCounts;
  /** Backfill states: one per merchant and POS account. */
  backfill: CopyCounts;
  /** Deliveries bound to the account they were first taken for (a copy naming another is a duplicate). */
  bindings: CopyCounts;
  /** The count check: PostgreSQL holds everything the file ledger holds (merchants and records at the file's version or newer). */
  ok: boolean;
  migrationsApplied: number[];
  seconds: number;
}

/** Checks the two locations; throws CommandError with exit code 2 when they are wrong. */
export function checkLocations(from: string | undefined, to: string | undefined): { from: string; to: string } {
  if (!from) throw new CommandError('--from is required: the JSON-file ledger to copy, e.g. --from file:./data/ledger.json', 2);
  if (!to) throw new CommandError('--to is required: the PostgreSQL ledger to copy into, e.g. --to postgres://user@host:5432/db', 2);
  if (from === to) throw new CommandError(`--from and --to name the same ledger (${redactUrl(from)})`, 2);
  if (!from.startsWith('file:') || from.length === 'file:'.length) {
    throw new CommandError(`--from must be a JSON-file ledger, file:<path> (e.g. file:./data/ledger.json), not ${redactUrl(from)}`, 2);
  }
  if (!/^postgres(ql)?:\/\/./.test(to)) throw new CommandError(`--to must be a PostgreSQL ledger, postgres://…, not ${redactUrl(to)}`, 2);
  try {
    parsePgUrl(to);
  } catch (error) {
    throw new CommandError(`--to ${redactUrl(to)}: ${hidePasswords(describeError(error), to).replace(/^LEDGER_URL /, '')}`, 2);
  }
  const manifest = FileLedgerStore.fromUrl(from).manifestPath;
  if (!existsSync(manifest)) throw new CommandError(`--from ${from}: there is no ledger at ${manifest}`, 2);
  return { from, to };
}

/** The copy itself: answers the counts; throws CommandError for what stops it. */
export async function copyLedger(options: CopyOptions): Promise<CopyResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const pageSize = options.pageSize ?? PAGE;
  const { from, to } = checkLocations(options.from, options.to);
  const started = performance.now();

  const file = FileLedgerStore.fromUrl(from);
  try {
    await file.init();
  } catch (error) {
    const message = describeError(error);
    const owner = /in use by process (\d+)/.exec(message)?.[1];
    if (owner) throw new CommandError(`the file ledger ${file.manifestPath} is in use by process ${owner}: stop the bridge first, then run the copy again`);
    throw new CommandError(`cannot open the file ledger ${file.manifestPath}: ${message}`);
  }
  if (file.recovery) {
    // Damage (or a machine restart under the ledger) means lost lines, perhaps in-flight markers:
    // copied as they read, pending records would be accrued again. The bridge's start-up puts them
    // in doubt first (recoverAfterJournalDamage).
    await file.close();
    throw new CommandError(
      `the file ledger ${file.manifestPath} ${file.recovery.corruptLines || file.recovery.staleLines ? `has a damaged journal (${file.recovery.corruptLines} unreadable, ${file.recovery.staleLines} stale line(s))` : 'was left by a bridge on an earlier boot of the machine (its last writes may be lost)'}: start the bridge on it once, so that records which may have lost a call in flight are put in doubt, stop it, then run the copy again`,
    );
  }
  const { schema } = parsePgUrl(to);
  const pg = new PostgresLedgerStore(to, { poolSize: IN_FLIGHT });
  try {
    const total = await file.count();
    // Every letter, a page at a time (a list's total stops counting at LIST_COUNT_CAP). Few, kept whole.
    const letters: DeadLetter[] = [];
    for (let offset = 0; ; offset += 100) {
      const { items } = await file.listDeadLetters({ offset, limit: 100 });
      letters.push(...items);
      if (items.length < 100) break;
    }
    const letterTotal = letters.length;
    const merchantTotal = (await file.listMerchants({ offset: 0, limit: 0 })).total;
    log(`from: file ledger ${file.manifestPath}: ${fmt(merchantTotal)} merchants, ${fmt(total)} records (${fmt(await file.countOpen())} with work left), ${fmt(letterTotal)} dead letters`);
    await pg.init();
    const migrationsApplied = pg.migrationsApplied;
    log(
      `to:   PostgreSQL ledger ${redactUrl(to)}${schema ? ` (schema ${schema})` : ''}: ` +
        (migrationsApplied.length ? `applied migration(s) ${migrationsApplied.join(', ')}` : 'schema up to date') +
        `, ${fmt(await pg.count())} records already there`,
    );
    log(WEBHOOK_NOTE);

    // Merchants first: a bridge already running on PostgreSQL then knows a merchant's tokens and POS
    // accounts before its records arrive. Few, each written whole in one transaction.
    const merchantList: StoredMerchant[] = [];
    for (let offset = 0; offset < merchantTotal; offset += 100) merchantList.push(...(await file.listMerchants({ offset, limit: 100 })).items);
    const merchants = { inFile: merchantTotal, imported: 0, skipped: 0, inPostgres: 0 };
    for (const merchant of merchantList) {
      try {
        if (await pg.importMerchant(merchant)) merchants.imported++;
        else merchants.skipped++;
      } catch (error) {
        throw new CommandError(`${describeError(error)}: nothing of this merchant was written; settle it in PostgreSQL (or in the file ledger), then run the copy again`);
      }
    }
    log(`merchants: ${fmt(merchants.imported)} imported, ${fmt(merchants.skipped)} skipped (already in PostgreSQL at the same or a newer version)`);
    if (merchantTotal) log(SECRETS_NOTE);

    // Records, a page at a time, each after the last record of the page before (keyset: a page
    // costs what it holds, however far into a million records). list() answers newest first;
    // nothing changes the file ledger while this process holds its lock, so the pages neither
    // overlap nor miss a record. Up to IN_FLIGHT pages are being written at once, so that
    // PostgreSQL parses one while this process reads the next.
    const versions = new Map<string, number>();
    const records = { inFile: total, imported: 0, skipped: 0, inPostgres: 0 };
    const bar = options.progress === false ? undefined : new ProgressBar(total, options.progress);
    const writing = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    let done = 0;
    try {
      let after: ListCursor | undefined;
      for (let read = 0; read < total; read += pageSize) {
        if (options.signal?.aborted) {
          await Promise.all(writing);
          throw new CommandError(
            `interrupted after ${fmt(done)} of ${fmt(total)} records (${fmt(records.imported)} imported): what was copied stays; run the same command again to resume`,
            130,
          );
        }
        const { items } = await file.list({ after, offset: 0, limit: pageSize });
        if (items.length === 0) break;
        const last = items.at(-1)!;
        after = { createdAt: last.createdAt, key: keyOf(last) };
        // By ledger key: two merchants' records may share a transactionId.
        for (const r of items) versions.set(keyOf(r), r.version);
        const write: Promise<void> = pg.importRecords(items).then(
          (outcome) => {
            records.imported += outcome.imported;
            records.skipped += outcome.skipped;
            done += items.length;
            bar?.update(done);
          },
          (error: unknown) => {
            failure ??= { error: explainImportError(error, items) };
          },
        );
        writing.add(write);
        void write.finally(() => writing.delete(write));
        if (writing.size >= IN_FLIGHT) await Promise.race(writing);
        if (failure) break;
      }
      await Promise.all(writing);
      if (failure) throw failure.error;
      bar?.finish();
    } catch (error) {
      await Promise.all(writing);
      bar?.interrupt();
      throw error;
    }
    log(`records: ${fmt(records.imported)} imported, ${fmt(records.skipped)} skipped (already in PostgreSQL at the same or a newer version)`);

    // Dead letters: few, kept whole. One PostgreSQL already holds is replaced only when the file's
    // copy is further along (more deliveries or replays, or resolved), so a re-run changes nothing.
    const deadLetters = { inFile: letterTotal, imported: 0, skipped: 0, inPostgres: 0 };
    for (const letter of letters) {
      const stored = await pg.getDeadLetter(letter.id);
      if (stored && progressOf(stored) >= progressOf(letter)) {
        deadLetters.skipped++;
        continue;
      }
      await pg.saveDeadLetter(letter);
      deadLetters.imported++;
    }
    log(`dead letters: ${fmt(deadLetters.imported)} imported, ${fmt(deadLetters.skipped)} skipped (already in PostgreSQL)`);

    // The operators' audit trail, oldest first, each entry once: one PostgreSQL already holds (the
    // same entry, field for field) is not written again, so a re-run adds nothing.
    const audit = { inFile: 0, imported: 0, skipped: 0, inPostgres: 0 };
    const entries = await everyAuditEntry(file);
    const held = new Set((await everyAuditEntry(pg)).map(auditKey));
    audit.inFile = entries.length;
    for (const entry of entries) {
      if (held.has(auditKey(entry))) {
        audit.skipped++;
        continue;
      }
      await pg.appendAudit(entry);
      held.add(auditKey(entry));
      audit.imported++;
    }
    audit.inPostgres = entries.filter((e) => held.has(auditKey(e))).length;
    if (audit.inFile) log(`audit trail: ${fmt(audit.imported)} entries imported, ${fmt(audit.skipped)} skipped (already in PostgreSQL)`);

    // Backfill watermarks (docs/backfill-and-reconcile.md), without their leases (no pass runs while the file
    // ledger is held for the copy). PostgreSQL's state of an account is kept when its watermark is
    // as far along already (a re-run, or a bridge on PostgreSQL that read further).
    const backfill = { inFile: 0, imported: 0, skipped: 0, inPostgres: 0 };
    for (const state of await file.listBackfillStates()) {
      backfill.inFile++;
      const { lease: _lease, ...copied } = state;
      let imported = false;
      await pg.updateBackfillState(state.merchantId, state.pos, (current) => {
        if (current && current.account === state.account && Date.parse(current.watermark ?? '') >= Date.parse(state.watermark ?? '')) return undefined;
        imported = true;
        return copied;
      });
      if (imported) backfill.imported++;
      else backfill.skipped++;
    }
    backfill.inPostgres = backfill.imported + backfill.skipped;
    if (backfill.inFile) log(`backfill watermarks: ${fmt(backfill.imported)} imported, ${fmt(backfill.skipped)} skipped (as far along in PostgreSQL already)`);

    // Deliveries bound to the account they were first taken for (docs/security.md): a copy of one
    // must stay a duplicate for every other merchant after the move, so every binding goes along.
    // Insert-once on both sides: one PostgreSQL holds already (a re-run) answers its own account.
    const bindings = { inFile: 0, imported: 0, skipped: 0, inPostgres: 0 };
    for (const binding of file.deliveryBindings()) {
      bindings.inFile++;
      const held = await pg.bindDelivery(binding.pos, binding.key, binding.account);
      if (held === binding.account) bindings.imported++;
      else bindings.skipped++;
    }
    // One held for another account is a conflict the count check reports, never overwritten.
    bindings.inPostgres = bindings.imported;
    if (bindings.inFile) log(`delivery bindings: ${fmt(bindings.imported)} copied${bindings.skipped ? `, ${fmt(bindings.skipped)} held by PostgreSQL for another account already` : ''}`);

    // The count check: of the file ledger's ids, how many PostgreSQL holds (records: at the file's
    // version or newer).
    const ids = [...versions.keys()];
    let present = 0;
    for (let i = 0; i < ids.length; i += CHECK_CHUNK) {
      const chunk = ids.slice(i, i + CHECK_CHUNK);
      const { rows } = await pg.pool.query<{ present: number; current: number }>(
        `SELECT count(*)::integer AS present, count(*) FILTER (WHERE r.version >= f.version)::integer AS current
           FROM unnest($1::text[], $2::integer[]) AS f (transaction_id, version)
           JOIN ledger_keys k ON k.transaction_id = f.transaction_id
           JOIN ledger_records r ON r.created_at = k.created_at AND r.transaction_id = k.transaction_id`,
        [chunk, chunk.map((id) => versions.get(id)!)],
      );
      present += rows[0]!.present;
      records.inPostgres += rows[0]!.current;
    }
    const letterIds = letters.map((l) => l.id);
    deadLetters.inPostgres = letterIds.length
      ? (await pg.pool.query<{ n: number }>('SELECT count(*)::integer AS n FROM ledger_dead_letters WHERE id = ANY ($1::text[])', [letterIds])).rows[0]!.n
      : 0;
    merchants.inPostgres = merchantList.length
      ? (
          await pg.pool.query<{ n: number }>(
            `SELECT count(*)::integer AS n FROM unnest($1::text[], $2::integer[]) AS f (id, version) JOIN ledger_merchants m ON m.id = f.id AND m.version >= f.version`,
            [merchantList.map((m) => m.id), merchantList.map((m) => m.version)],
          )
        ).rows[0]!.n
      : 0;
    const ok =
      merchants.inFile === merchants.inPostgres && records.inFile === records.inPostgres && deadLetters.inFile === deadLetters.inPostgres && audit.inFile === audit.inPostgres && bindings.inFile === bindings.inPostgres;
    const stale = present - records.inPostgres;
    log(
      `count check: merchants: file ledger ${fmt(merchants.inFile)}, PostgreSQL ${fmt(merchants.inPostgres)}; ` +
        `records: file ledger ${fmt(records.inFile)}, PostgreSQL ${fmt(records.inPostgres)}` +
        `${stale ? ` (and ${fmt(stale)} at an older version than the file's)` : ''}; ` +
        `dead letters: file ledger ${fmt(deadLetters.inFile)}, PostgreSQL ${fmt(deadLetters.inPostgres)}` +
        `${bindings.inFile ? `; delivery bindings: file ledger ${fmt(bindings.inFile)}, PostgreSQL ${fmt(bindings.inPostgres)}` : ''}: ${ok ? 'OK' : 'THEY DIFFER'}`,
    );
    const seconds = (performance.now() - started) / 1000;
    log(`${ok ? 'copied' : 'copy incomplete'} in ${seconds.toFixed(1)} s (${fmt(seconds > 0 ? total / seconds : total)} records/s)`);
    return { merchants, records, deadLetters, audit, backfill, bindings, ok, migrationsApplied, seconds };
  } finally {
    await file.close().catch(() => undefined);
    await pg.close().catch(() => undefined);
  }
}

/** PostgreSQL's own wording does not say which record it choked on: this names them where it can. */
function explainImportError(error: unknown, page: LedgerRecord[]): unknown {
  if ((error as { code?: string }).code !== '22P05') return error;
  const ids = page.filter((r) => JSON.stringify(r).includes('\\u0000')).map((r) => r.transactionId);
  if (ids.length === 0) return error;
  return new CommandError(
    `${ids.length === 1 ? 'record' : 'records'} ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ` and ${ids.length - 5} more` : ''} ` +
      `${ids.length === 1 ? 'holds' : 'hold'} a NUL character (\\u0000), which PostgreSQL cannot store in jsonb; their batch was not written (${describeError(error)})`,
  );
}

/** A store's whole audit trail, oldest first (it is listed newest first, the later written first among equal times). */
async function everyAuditEntry(store: Pick<LedgerStore, 'listAudit'>): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  for (let offset = 0; ; offset += 500) {
    const { items } = await store.listAudit({ offset, limit: 500 });
    entries.push(...items);
    if (items.length < 500) break;
  }
  return entries.reverse();
}

/** An audit entry's identity: all of it, fields in one order. */
function auditKey(entry: AuditEntry): string {
  return JSON.stringify([entry.at, entry.actor, entry.action, entry.target, entry.reason ?? null, entry.merchantId ?? null, entry.outcome ?? null]);
}

/** How far a dead letter has come: POS redeliveries, replays, resolution only ever add. */
function progressOf(letter: DeadLetter): number {
  return letter.deliveries + letter.replays.length + (letter.resolvedAt ? 1 : 0);
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** The command: answers the exit code. */
export const main = command({
  name: 'ledger:copy',
  usage: USAGE,
  async run({ argv, hideUrl }) {
    for (const url of argv.filter((a) => a.includes('://')).map((a) => a.replace(/^--[a-z-]+=/, ''))) hideUrl(url);
    const aborter = new AbortController();
    const onSignal = () => {
      process.stderr.write('\nstopping after the batch under way…\n');
      aborter.abort();
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      const options = parseOptions(argv, ['from', 'to']);
      const result = await copyLedger({ from: options.get('from') ?? '', to: options.get('to') ?? '', signal: aborter.signal });
      return result.ok ? 0 : 1;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
});

if (isEntryPoint(import.meta.url)) process.exitCode = await main();
