/**
 * The PostgreSQL store against a real server: the shared contract suite, then what only a shared
 * store must do: migrations safe when instances start at once, disjoint worker claims under a
 * lease, and operation claims unique across records.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { ConflictError } from '../../src/errors.js';
import { MIGRATIONS } from '../../src/ledger/pg-migrations.js';
import { PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { ledgerStoreContract, makeRecord } from './store-contract.js';

const { url: base, describeIf } = await describeWithDatabase();

describeIf('PostgreSQL', () => {
  ledgerStoreContract('PostgresLedgerStore', async () => {
    const schema = await freshSchema(base!, 'contract');
    let current = new PostgresLedgerStore(schema.url);
    await current.init();
    return {
      store: current as LedgerStore,
      async reopen() {
        await current.close();
        current = new PostgresLedgerStore(schema.url);
        await current.init();
        return current;
      },
      async cleanup() {
        await current.close().catch(() => undefined);
        await schema.drop();
      },
    };
  });

  describeIf('PostgresLedgerStore on a shared database', () => {
    let schema: { url: string; drop(): Promise<void> };
    const stores: PostgresLedgerStore[] = [];
    const open = async () => {
      const s = new PostgresLedgerStore(schema.url, { poolSize: 3 });
      await s.init();
      stores.push(s);
      return s;
    };
    beforeAll(async () => {
      schema = await freshSchema(base!, 'shared');
    });
    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
      await schema.drop();
    });

    it('applies each migration once when several instances start at once', async () => {
      const started = await Promise.all(Array.from({ length: 5 }, () => open()));
      const { rows } = await started[0]!.pool.query('SELECT version FROM ledger_schema_migrations ORDER BY version');
      expect(rows.map((r: { version: number }) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    });

    it('hands each worker a disjoint batch of open records, and takes them back when the lease runs out', async () => {
      const [a, b] = [stores[0]!, stores[1]!];
      for (let i = 0; i < 10; i++) await a.insert(makeRecord(`generic:L-${i}`, { accrual: 'pending', at: i }));
      const [mine, theirs] = await Promise.all([a.listOpen(6, { owner: 'A', leaseMs: 60_000 }), b.listOpen(6, { owner: 'B', leaseMs: 60_000 })]);
      const ids = [...mine, ...theirs].map((r) => r.transactionId);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toHaveLength(10);
      // B holds its batch: A's next pass gets only its own back.
      expect((await a.listOpen(10, { owner: 'A', leaseMs: 60_000 })).map((r) => r.transactionId).sort()).toEqual(mine.map((r) => r.transactionId).sort());
      // A short lease runs out, and then anyone may take the records.
      await b.listOpen(10, { owner: 'B', leaseMs: 1 });
      await new Promise((r) => setTimeout(r, 20));
      expect((await a.listOpen(10, { owner: 'A', leaseMs: 60_000 })).length).toBeGreaterThanOrEqual(theirs.length);
    });

    it('lets exactly one of many instances insert one transaction, and one win each compare-and-set', async () => {
      const record = makeRecord('generic:RACE-1', { accrual: 'pending' });
      const inserts = await Promise.all(stores.map((s) => s.insert(record)));
      expect(inserts.filter((i) => i.created)).toHaveLength(1);
      const next = { ...record, version: 2, status: 'accrued' as const };
      const updates = await Promise.allSettled(stores.map((s) => s.update(next)));
      expect(updates.filter((u) => u.status === 'fulfilled')).toHaveLength(1);
    });

    it('stores text with a NUL character (which jsonb cannot hold) as U+FFFD instead of failing', async () => {
      const s = stores[0]!;
      const record = makeRecord('generic:NUL-1', { accrual: 'pending' });
      const withNul = { ...record, accrual: { ...record.accrual, customer: { firstName: 'A\u0000B' } } };
      expect((await s.insert(withNul)).created).toBe(true);
      expect((await s.get('generic:NUL-1'))!.accrual.customer).toEqual({ firstName: 'A\uFFFDB' });
    });

    it('refuses an operation id another record already claimed, and writes nothing of that update', async () => {
      const s = stores[0]!;
      const first = makeRecord('generic:OP-1', { operationIds: [4242] });
      await s.insert(first);
      const second = makeRecord('generic:OP-2', { accrual: 'pending' });
      await s.insert(second);
      await expect(s.update({ ...second, version: 2, accrual: { ...second.accrual, state: 'accrued', operationIds: [4242] } })).rejects.toBeInstanceOf(ConflictError);
      expect(await s.get('generic:OP-2')).toEqual(second);
      expect(await s.findOperationClaim(4242)).toBe('generic:OP-1');
    });
  });
});
