/**
 * `npm run ledger:archive` against a real PostgreSQL (scripts/ledger-archive.ts): a month of settled
 * history leaves in one step (its partition detached, or dropped), refused while a record of it has
 * work left or needs a person, or while it is too recent; the ledger keeps the archived records'
 * keys, so a redelivery is refused as archived, never recorded and accrued again.
 */
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { ArchivedRecordError } from '../../src/kernel/errors.js';
import { partitionName } from '../../src/ledger/pg-migrations.js';
import { PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { keyOf, type LedgerRecord } from '../../src/state/record.js';
import { archiveMonths, partitionOf, listPartitions, main, MIN_AGE_DAYS } from '../../scripts/ledger-archive.js';
import { resolveLedgerUrl } from '../../scripts/migrate.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { makeRecord, nextVersion } from './contracts/factories.js';

const { url: base, describeIf } = await describeWithDatabase();

/** A record created in August 2026 (minutes after its start). */
const august = (id: string, minute: number, options: Parameters<typeof makeRecord>[1] = {}): LedgerRecord => ({
  ...makeRecord(id, options),
  createdAt: new Date(Date.UTC(2026, 7, 1) + minute * 60_000).toISOString(),
});

it('without a PostgreSQL URL, the refusal names ledger:archive (not migrate) and what a file: ledger lacks', () => {
  expect(() => resolveLedgerUrl([], {}, 'npm run ledger:archive', 'a file: ledger has no monthly partitions to archive')).toThrow('LEDGER_URL is not set: npm run ledger:archive needs LEDGER_URL=postgres://… (or --url postgres://…)');
  expect(() => resolveLedgerUrl([], { LEDGER_URL: 'file:/data/ledger.json' }, 'npm run ledger:archive', 'a file: ledger has no monthly partitions to archive')).toThrow(
    'LEDGER_URL must be a postgres://… URL for npm run ledger:archive (it is file:/data/ledger.json); a file: ledger has no monthly partitions to archive',
  );
});

describeIf('npm run ledger:archive', () => {
  let schema: { url: string; drop(): Promise<void> };
  let store: PostgresLedgerStore;
  const lines: string[] = [];
  beforeEach(async () => {
    schema = await freshSchema(base!, 'archive');
    store = new PostgresLedgerStore(schema.url, { poolSize: 2 });
    await store.init();
    lines.length = 0;
  });
  afterEach(async () => {
    await store.close();
    await schema.drop();
  });

  const run = (...argv: string[]) => main(['--url', schema.url, ...argv], {}, (line) => lines.push(line));

  it('detaches a settled month in one step; its keys stay, so a redelivery is refused as archived and nothing is recorded again', async () => {
    const settled = [august('generic:A-1', 1, { accrual: 'accrued', operationIds: [501] }), august('generic:A-2', 2, { accrual: 'accrued', reversal: 'reversed' })];
    const later = { ...makeRecord('generic:B-1', { accrual: 'accrued' }), createdAt: new Date().toISOString() };
    await store.importRecords([...settled, later]);
    expect((await listPartitions(store.pool)).map((p) => p.name)).toContain('ledger_records_2026_08');

    expect(await run('--month', '2026-08')).toBe(0);
    expect(lines.at(-1)).toMatch(/archived ledger_records_2026_08: 2 records detached; the table ledger_records_2026_08 stands alone: pg_dump -t \S+\.ledger_records_2026_08/);
    expect((await listPartitions(store.pool)).map((p) => p.name)).not.toContain('ledger_records_2026_08');
    // The detached table holds the month whole, for pg_dump.
    expect(Number((await store.pool.query('SELECT count(*) AS n FROM ledger_records_2026_08')).rows[0].n)).toBe(2);

    // Gone from every read; the rest of the ledger as it was.
    expect(await store.get(keyOf(settled[0]!))).toBeUndefined();
    expect((await store.list({ offset: 0, limit: 10 })).items).toEqual([later]);
    expect(await store.get(keyOf(later))).toEqual(later);
    // Its key and claims stay: a redelivery is refused, not recorded (and so never accrued) again.
    await expect(store.insert(august('generic:A-1', 1, { accrual: 'pending' }))).rejects.toThrow(ArchivedRecordError);
    expect(await store.findOperationClaim('default', 501)).toBe('generic:A-1');
    expect(await store.count()).toBe(3);
  });

  it('takes the payloads its records were created from with the month; with --drop they go too', async () => {
    const payload = { receivedAt: '2026-08-01T00:01:00.000Z', pos: 'generic', headers: { 'content-type': 'application/json' }, body: '{"orderId":"A-1"}', bodyEncoding: 'utf8' as const };
    const record = august('generic:A-1', 1, { accrual: 'accrued' });
    await store.insert(record, { payload });
    expect(await store.getPayload(keyOf(record))).toEqual(payload);
    expect(await run('--month', '2026-08')).toBe(0);
    expect(await store.getPayload(keyOf(record))).toBeUndefined();
    // Detached beside the records' month, for pg_dump.
    expect((await store.pool.query('SELECT transaction_id FROM ledger_payloads_2026_08')).rows).toEqual([{ transaction_id: 'generic:A-1' }]);

    const other = { ...makeRecord('generic:S-1', { accrual: 'accrued' }), createdAt: '2026-07-03T00:00:00.000Z' };
    await store.insert(other, { payload });
    expect(await run('--month', '2026-07', '--drop')).toBe(0);
    expect((await store.pool.query("SELECT to_regclass('ledger_payloads_2026_07') AS t")).rows[0].t).toBeNull();
  });

  it('drops the month with --drop', async () => {
    await store.importRecords([august('generic:A-1', 1, { accrual: 'accrued' })]);
    expect(await run('--month', '2026-08', '--drop')).toBe(0);
    expect(lines.at(-1)).toBe('archived ledger_records_2026_08: 1 records detached and dropped; their keys stay, so a redelivery of one is answered 409 archived');
    expect((await store.pool.query("SELECT to_regclass('ledger_records_2026_08') AS t")).rows[0].t).toBeNull();
  });

  it('refuses a month with a record that has work left or needs a person, naming them, and leaves it whole', async () => {
    const open = august('generic:A-open', 1, { accrual: 'pending' });
    const failed = august('generic:A-failed', 2, { accrual: 'failed' });
    await store.importRecords([open, failed, august('generic:A-fine', 3, { accrual: 'accrued' })]);
    await expect(archiveMonths(store.pool, { months: ['2026-08'], drop: true })).rejects.toThrow(/ledger_records_2026_08 still has records at work or waiting for a person: .*generic:A-open has work left \(pending\).*generic:A-failed needs a person \(failed\)/);
    expect(await store.get(keyOf(open))).toEqual(open);
    expect((await store.list({ offset: 0, limit: 10 })).total).toBe(3);
    // Settled and acknowledged, the month may go.
    await store.update(nextVersion(open, (r) => (r.accrual.state = 'accrued')));
    await store.update(nextVersion(failed, (r) => (r.acknowledged = { at: new Date().toISOString(), actor: 'alice', reason: 'credited by hand' })));
    expect((await archiveMonths(store.pool, { months: ['2026-08'], drop: false }))[0]!.records).toBe(3);
  });

  it("refuses a month holding part of a partial refund's chain whose rest stays; the months go together", async () => {
    const parent = { ...makeRecord('generic:P-1', { accrual: 'accrued', reversal: 'reversed' }), createdAt: new Date(Date.UTC(2026, 6, 20)).toISOString(), remainderTransactionId: 'generic:P-1~r1' };
    const remainder = { ...august('generic:P-1~r1', 5, { accrual: 'accrued' }), parentTransactionId: 'generic:P-1' };
    await store.importRecords([parent, remainder]);
    await expect(archiveMonths(store.pool, { months: ['2026-07'], drop: false })).rejects.toThrow(/part of a partial refund's chain .*generic:P-1 → generic:P-1~r1 \(in ledger_records_2026_08\)/);
    await expect(archiveMonths(store.pool, { months: ['2026-08'], drop: false })).rejects.toThrow(/generic:P-1~r1 → generic:P-1 \(in ledger_records_2026_07\)/);
    expect(await store.get('generic:P-1~r1')).toEqual(remainder);
    expect(await run('--month', '2026-07,2026-08')).toBe(0);
    expect(lines.slice(-2).map((l) => l.split(':')[0])).toEqual(['archived ledger_records_2026_07', 'archived ledger_records_2026_08']);
    expect(await store.get('generic:P-1')).toBeUndefined();
  });

  it(`refuses a month that ended less than ${MIN_AGE_DAYS} days ago, a month with no partition, and a bad --month`, async () => {
    const now = new Date();
    const thisMonth = `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
    expect(await run('--month', thisMonth)).toBe(3);
    expect(await run('--month', '2001-01')).toBe(3);
    expect(await run('--month', 'August')).toBe(2);
    // A year before 2000 is a usage error, naming the rule: 0099-12 used to be read as 1999-12.
    for (const typo of ['0099-12', '1999-12']) {
      expect(await run('--month', typo)).toBe(2);
      expect(() => partitionOf(typo)).toThrow('--month must be YYYY-MM with a year of 2000 or later');
    }
    expect(await run('--list', '--month', '2026-08')).toBe(2);
    expect(partitionName(Date.UTC(2026, 7, 1))).toBe('ledger_records_2026_08');
  });

  it('lists the partitions with their ranges', async () => {
    await store.importRecords([august('generic:A-1', 1, { accrual: 'accrued' })]);
    expect(await run('--list')).toBe(0);
    expect(lines.join('\n')).toMatch(/ledger_records_2026_08 {2}FOR VALUES FROM \('2026-08-01 00:00:00\+00'\) TO \('2026-09-01 00:00:00\+00'\)/);
  });
});
