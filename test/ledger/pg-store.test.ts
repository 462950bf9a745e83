/**
 * The PostgreSQL store against a real server: the shared contract suite, then what only a shared
 * store must do: migrations safe when instances start at once, disjoint worker claims under a
 * lease, and operation claims unique across records; then migration 2 (due times) on a ledger
 * that an earlier build created and may still be writing to.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { AccrualKeyHeldError, ConflictError, VersionConflictError } from '../../src/kernel/errors.js';
import { accrualKeyColumns, dueColumns, MIGRATIONS, partitionName } from '../../src/ledger/pg-migrations.js';
import { dueSql, jsonb, PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { isOpen, keyOf, merchantOf, type LedgerRecord } from '../../src/state/record.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { eventually } from '../support/eventually.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { ledgerStoreContract } from './store-contract.js';
import { makeLetter, makeRecord, minutes, nextVersion } from './contracts/factories.js';

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
      const [mine, theirs] = await Promise.all([a.listOpen({ limit: 6, claim: { owner: 'A', leaseMs: 60_000 } }), b.listOpen({ limit: 6, claim: { owner: 'B', leaseMs: 60_000 } })]);
      const ids = [...mine, ...theirs].map((r) => r.transactionId);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toHaveLength(10);
      // B holds its batch: A's next pass gets only its own back.
      expect((await a.listOpen({ limit: 10, claim: { owner: 'A', leaseMs: 60_000 } })).map((r) => r.transactionId).sort()).toEqual(mine.map((r) => r.transactionId).sort());
      // A short lease runs out, and then anyone may take the records: A's claims, polled until
      // the server's clock has passed B's 1 ms lease, end with every one of the ten.
      expect((await b.listOpen({ limit: 10, claim: { owner: 'B', leaseMs: 1 } })).map((r) => r.transactionId).sort()).toEqual(theirs.map((r) => r.transactionId).sort());
      const all = Array.from({ length: 10 }, (_, i) => `generic:L-${i}`).sort();
      const taken = await eventually(
        async () => (await a.listOpen({ limit: 10, claim: { owner: 'A', leaseMs: 60_000 } })).map((r) => r.transactionId).sort(),
        (ids) => ids.length === all.length,
      );
      expect(taken).toEqual(all);
    });

    it('hands each worker a disjoint batch of due records, earliest due first, and none that is not due', async () => {
      const due = await freshSchema(base!, 'due');
      const [a, b] = [new PostgresLedgerStore(due.url, { poolSize: 2 }), new PostgresLedgerStore(due.url, { poolSize: 2 })];
      try {
        await a.init();
        await b.init();
        // Due in the reverse order of their age: the claim follows due times.
        for (let i = 0; i < 10; i++) await a.insert(makeRecord(`generic:D-${i}`, { accrual: 'pending', at: i, nextAttemptAt: 100 - i }));
        await a.insert(makeRecord('generic:D-later', { accrual: 'pending', at: -5, nextAttemptAt: 5000 }));
        await a.insert(makeRecord('generic:D-operator', { accrual: 'accrued', reversal: 'in_doubt', at: -4 }));
        await a.insert(makeRecord('generic:D-verify', { accrual: 'in_doubt', at: -3 }));
        const query = (owner: string) => ({ nowMs: Date.parse(minutes(1000)), limit: 6, canVerify: false, claim: { owner, leaseMs: 60_000 } });
        const [mine, theirs] = await Promise.all([a.listDue(query('A')), b.listDue(query('B'))]);
        const ids = [...mine, ...theirs].map((r) => r.transactionId);
        expect(new Set(ids).size).toBe(10);
        expect(ids.every((id) => /^generic:D-\d$/.test(id))).toBe(true);
        for (const batch of [mine, theirs]) {
          const dueTimes = batch.map((r) => r.nextAttemptAt!);
          expect(dueTimes).toEqual([...dueTimes].sort());
        }
        // B holds its batch: A's next pass gets only its own back.
        expect((await a.listDue(query('A'))).map((r) => r.transactionId)).toEqual(mine.map((r) => r.transactionId));
      } finally {
        await Promise.all([a.close(), b.close()]);
        await due.drop();
      }
    });

    it("leaves a record whose call another live instance has in flight to that instance: its worker takes it at once, the other's never holds it out", async () => {
      const flight = await freshSchema(base!, 'in_flight');
      const [a, b] = [new PostgresLedgerStore(flight.url, { poolSize: 2 }), new PostgresLedgerStore(flight.url, { poolSize: 2 })];
      try {
        await a.init();
        await b.init();
        // Marked in flight by A just now (its outcome lost, say: a failover took back the commit), by A long ago (A is gone), and not at all.
        const now = new Date().toISOString();
        await a.insert({ ...makeRecord('generic:F-mine', { accrual: 'pending', at: 1 }), inFlight: { owner: 'A', operation: 'accrue', startedAt: now } });
        await a.insert({ ...makeRecord('generic:F-gone', { accrual: 'pending', at: 2 }), inFlight: { owner: 'A', operation: 'accrue', startedAt: minutes(3) } });
        await a.insert(makeRecord('generic:F-free', { accrual: 'pending', at: 3 }));
        const query = (owner: string) => ({ nowMs: Date.now() + 60_000, limit: 10, canVerify: false, claim: { owner, leaseMs: 60_000 } });
        // B's worker comes first: it takes what is free and what A's lease no longer covers, never A's live call.
        expect((await b.listDue(query('B'))).map((r) => r.transactionId).sort()).toEqual(['generic:F-free', 'generic:F-gone']);
        expect((await b.listOpen({ limit: 10, claim: { owner: 'B', leaseMs: 60_000 } })).map((r) => r.transactionId).sort()).toEqual(['generic:F-free', 'generic:F-gone']);
        // A's worker then finds its own call's record, not held out by B's claims.
        expect((await a.listDue(query('A'))).map((r) => r.transactionId)).toEqual(['generic:F-mine']);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await flight.drop();
      }
    });

    it('hands each worker a disjoint batch of due records, the merchants taking turns, at most perMerchant of each', async () => {
      const due = await freshSchema(base!, 'turns');
      const [a, b] = [new PostgresLedgerStore(due.url, { poolSize: 2 }), new PostgresLedgerStore(due.url, { poolSize: 2 })];
      try {
        await a.init();
        await b.init();
        for (let i = 0; i < 10; i++) await a.insert({ ...makeRecord(`generic:A-${i}`, { accrual: 'pending', at: i }), merchantId: 'm-a' });
        for (let i = 0; i < 4; i++) await a.insert({ ...makeRecord(`generic:B-${i}`, { accrual: 'pending', at: 20 + i }), merchantId: 'm-b' });
        const query = (owner: string) => ({ nowMs: Date.parse(minutes(1000)), limit: 100, perMerchant: 3, canVerify: false, claim: { owner, leaseMs: 60_000 } });
        const [mine, theirs] = await Promise.all([a.listDue(query('A')), b.listDue(query('B'))]);
        const keys = (batch: LedgerRecord[]) => batch.map((r) => `${r.merchantId}/${r.transactionId}`);
        // Whichever claimed first took the first three of each; the other the next three of A's and B's last.
        const [first, second] = mine.length === 6 ? [mine, theirs] : [theirs, mine];
        expect(keys(first)).toEqual(['m-a/generic:A-0', 'm-b/generic:B-0', 'm-a/generic:A-1', 'm-b/generic:B-1', 'm-a/generic:A-2', 'm-b/generic:B-2']);
        expect(keys(second)).toEqual(['m-a/generic:A-3', 'm-b/generic:B-3', 'm-a/generic:A-4', 'm-a/generic:A-5']);
        // Each holds its batch for the lease: its next claim is its own batch again, the rest of A's stays with whoever comes next.
        expect(keys(await a.listDue(query('A')))).toEqual(keys(mine));
        expect(keys(await a.listDue({ ...query('C'), perMerchant: 50 }))).toEqual(['m-a/generic:A-6', 'm-a/generic:A-7', 'm-a/generic:A-8', 'm-a/generic:A-9']);
        // A merchant left out is not claimed either.
        expect(await b.listDue({ ...query('D'), skipMerchants: ['m-a'] })).toEqual([]);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await due.drop();
      }
    });

    it("claims through the index of each merchant's due times, reading a merchant's due rows only up to the cap", async () => {
      const client = await stores[0]!.pool.connect();
      try {
        await client.query('BEGIN');
        // The table is tiny here: the planner is told to prefer an index, so what is checked is that one serves.
        await client.query('SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off');
        for (const canVerify of [true, false]) {
          for (const claim of [undefined, { owner: 'plan', leaseMs: 60_000, idleMs: 1500 }]) {
            const { text, values } = dueSql({ nowMs: Date.now(), limit: 500, perMerchant: 50, canVerify, skipMerchants: ['m-x'], claim });
            const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, values);
            const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
            // The walk between merchants and each merchant's due rows, in due order, under a Limit: no sort of all due rows.
            expect(plan).toMatch(/Index Only Scan using ledger_work_merchant_due on ledger_work/);
            expect(plan).toMatch(/Limit[^\n]*\n\s*->\s+Index (Only )?Scan using ledger_work_merchant_due on ledger_work w[^\n]*\n\s*Index Cond: \(\(merchant_id = m(_\d+)?\.merchant_id\) AND \(due_at <= /);
            // Each chosen record read by its primary key, once per row (a nested loop: at run time only its month's partition is probed).
            expect(plan).toMatch(/Index Scan using ledger_records_\d{4}_\d{2}_pkey on ledger_records_\d{4}_\d{2}[^\n]*\n\s*Index Cond: \(\(created_at = \w+\.created_at\) AND \(transaction_id = \w+\.transaction_id\)\)/);
            expect(plan).not.toMatch(/Seq Scan|Merge Join/);
          }
        }
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    });

    it('commits writes that come at once together, each with its own outcome: one refused in a batch leaves the others written', async () => {
      const store = stores[0]!;
      const before = structuredClone(store.batchStats);
      const twinCustomer = { phone: '+15550007777' };
      const holder = makeRecord('generic:B-holder', { at: 1, accrual: 'pending', inFlight: true, customer: twinCustomer });
      await store.insert(holder);
      const claimed = makeRecord('generic:B-claimed', { at: 2, accrual: 'accrued', operationIds: [880] });
      await store.insert(claimed);
      const fine = Array.from({ length: 30 }, (_, i) => makeRecord(`generic:B-${i}`, { at: 10 + i, accrual: 'pending' }));
      const twin = makeRecord('generic:B-twin', { at: 3, accrual: 'pending', inFlight: true, customer: twinCustomer });
      const thief = makeRecord('generic:B-thief', { at: 4, accrual: 'accrued', operationIds: [880] });
      const inserted = await Promise.allSettled([...fine, twin, thief].map((r) => store.insert(r)));
      expect(inserted.slice(0, 30).every((o) => o.status === 'fulfilled' && o.value.created)).toBe(true);
      expect(inserted[30]).toMatchObject({ status: 'rejected', reason: expect.any(AccrualKeyHeldError) });
      expect(inserted[31]).toMatchObject({ status: 'rejected', reason: expect.any(ConflictError) });
      // The refused wrote nothing; the rest are all there, and their updates batch the same way.
      expect(await store.get('generic:B-twin')).toBeUndefined();
      expect(await store.get('generic:B-thief')).toBeUndefined();
      await Promise.all(fine.map((r) => store.update(nextVersion(r, (x) => (x.accrual.state = 'accrued')), { synchronous: false })));
      for (const r of fine) expect((await store.get(keyOf(r)))!.status).toBe('accrued');
      // A stale version in a batch is refused alone; the others of its batch are written.
      const again = await Promise.allSettled([store.update({ ...fine[0]!, version: 2 }), ...fine.slice(1, 10).map((r) => store.update(nextVersion({ ...r, version: 2 }, (x) => (x.rounds = 1))))]);
      expect(again[0]).toMatchObject({ status: 'rejected', reason: expect.any(VersionConflictError) });
      expect(again.slice(1).every((o) => o.status === 'fulfilled')).toBe(true);
      expect((await store.get(keyOf(fine[1]!)))!.version).toBe(3);
      const after = store.batchStats;
      expect(after.inserts.batches).toBeGreaterThan(before.inserts.batches);
      expect(after.asyncUpdates.batches).toBeGreaterThan(before.asyncUpdates.batches);
    });

    it('lets exactly one of many instances insert one transaction, and one win each compare-and-set', async () => {
      const record = makeRecord('generic:RACE-1', { accrual: 'pending' });
      const inserts = await Promise.all(stores.map((s) => s.insert(record)));
      expect(inserts.filter((i) => i.created)).toHaveLength(1);
      const next = { ...record, version: 2, status: 'accrued' as const };
      const updates = await Promise.allSettled(stores.map((s) => s.update(next)));
      expect(updates.filter((u) => u.status === 'fulfilled')).toHaveLength(1);
    });

    it('lets exactly one of many instances claim a due dead letter, and counts every instance\'s deliveries of one letter', async () => {
      await stores[0]!.saveDeadLetter(makeLetter('dl-race', { nextAt: 0 }));
      const now = Date.parse(minutes(1));
      const due = await Promise.all(stores.map((s) => s.listDueDeadLetters({ nowMs: now, limit: 10 })));
      expect(due.every((letters) => letters.some((l) => l.id === 'dl-race'))).toBe(true);
      // Every instance saw it due; each tries to claim it as the retry loop does.
      const claimed = await Promise.all(
        stores.map((s, i) =>
          s.updateDeadLetter('dl-race', (l) => (l && !l.resolvedAt && !(l.retry?.claim && Date.parse(l.retry.claim.until) > now) ? { ...l, retry: { ...l.retry!, claim: { owner: `instance-${i}`, until: minutes(5) } } } : undefined)),
        ),
      );
      expect(new Set(claimed.map((l) => l!.retry!.claim!.owner)).size).toBe(1);
      expect(await stores[0]!.listDueDeadLetters({ nowMs: now, limit: 10 })).toEqual([]);
      // A delivery no instance has kept yet, kept by all at once: counted by each, once.
      await Promise.all(stores.map((s) => s.updateDeadLetter('dl-new-race', (l) => (l ? { ...l, deliveries: l.deliveries + 1 } : makeLetter('dl-new-race')))));
      expect((await stores[0]!.getDeadLetter('dl-new-race'))!.deliveries).toBe(stores.length);
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
      expect(await s.findOperationClaim('default', 4242)).toBe('generic:OP-1');
    });
  });

  describeIf('migration 10 on a populated ledger at version 9', () => {
    let schema: { url: string; drop(): Promise<void> };
    /** A connection to the schema as migration 9 left it; it stands for the build before migration 10. */
    let earlier: pg.Client;
    const now = Date.parse(minutes(2000));

    /** How the build before migration 10 inserted a record, its claims and accrual keys. */
    const insertAsBefore = async (r: LedgerRecord) => {
      const key = keyOf(r);
      const due = dueColumns(r);
      const { keys, unsettledAmount } = accrualKeyColumns(r);
      await earlier.query(
        `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record, due_at, due_needs_verifier, accrual_keys, unsettled_amount, merchant_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
        [key, r.version, r.pos, r.orderId, r.status, isOpen(r), r.createdAt, r.updatedAt, jsonb(r), due.dueAt, due.needsVerifier, keys, unsettledAmount, merchantOf(r)],
      );
      for (const op of r.accrual.operationIds) await earlier.query('INSERT INTO ledger_operation_claims (merchant_id, operation_id, transaction_id) VALUES ($1, $2, $3)', [merchantOf(r), op, key]);
      for (const k of keys) await earlier.query('INSERT INTO ledger_accrual_keys (key, transaction_id) VALUES ($1, $2)', [k, key]);
    };

    beforeAll(async () => {
      schema = await freshSchema(base!, 'from_v9');
      const name = new URL(schema.url).searchParams.get('schema')!;
      earlier = new pg.Client({ connectionString: base });
      await earlier.connect();
      await earlier.query(`CREATE SCHEMA ${name}; SET search_path TO ${name}`);
      await earlier.query('CREATE TABLE ledger_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
      for (const m of MIGRATIONS.filter((m) => m.version <= 9)) {
        await earlier.query(m.sql);
        await earlier.query('INSERT INTO ledger_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      }
    });
    afterAll(async () => {
      await earlier.end();
      await schema.drop();
    });

    it('keeps every record findable by key, order, refund, status and merchant; moves open work, claims, keys and attention; new records go to month partitions', async () => {
      const refunded = makeRecord('generic:refunded', { at: 2, accrual: 'accrued', reversal: 'reversed', operationIds: [71] });
      refunded.reversal.refundIds = ['R-9'];
      refunded.status = 'reversed';
      const failed = makeRecord('generic:failed', { at: 4, accrual: 'failed' });
      const before = [
        makeRecord('generic:settled', { at: 0, accrual: 'accrued', operationIds: [70] }),
        makeRecord('generic:reversal-in-doubt', { at: 1, accrual: 'accrued', reversal: 'in_doubt' }),
        refunded,
        makeRecord('generic:accrual-in-doubt', { at: 3, accrual: 'in_doubt', nextAttemptAt: 20, customer: { phone: '+15550001234' } }),
        failed,
        { ...makeRecord('generic:H-1', { at: 5, accrual: 'pending', orderId: 'H-1' }), merchantId: 'bakery-17' },
        makeRecord('generic:due', { at: 6, accrual: 'pending' }),
      ];
      for (const r of before) await insertAsBefore(r);

      const store = new PostgresLedgerStore(schema.url, { poolSize: 2 });
      try {
        await store.init();
        const { rows } = await store.pool.query<{ version: number }>('SELECT version FROM ledger_schema_migrations ORDER BY version');
        expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
        for (const r of before) expect(await store.get(keyOf(r))).toEqual(r);
        expect((await store.list({ orderId: 'H-1', offset: 0, limit: 10 })).items).toEqual([before[5]]);
        expect((await store.list({ refundId: 'R-9', offset: 0, limit: 10 })).items).toEqual([refunded]);
        expect((await store.list({ status: 'failed', offset: 0, limit: 10 })).items).toEqual([failed]);
        expect((await store.list({ merchantId: 'bakery-17', offset: 0, limit: 10 })).items).toEqual([before[5]]);
        expect((await store.list({ offset: 0, limit: 10 })).items.map((r) => r.transactionId)).toEqual(before.map((r) => r.transactionId).reverse());
        expect(await store.findOperationClaim('default', 71)).toBe('generic:refunded');
        // Open work: what the worker may take, what start-up recovery reads, what the gauge counts.
        const due = async (canVerify: boolean) => (await store.listDue({ nowMs: now, limit: 500, canVerify })).map((r) => r.transactionId);
        expect(await due(false)).toEqual(['generic:H-1', 'generic:due']);
        // A reversal in doubt is looked for in the history (by the merchant's learned reversal shape) where it can be read.
        expect(await due(true)).toEqual(['generic:reversal-in-doubt', 'generic:H-1', 'generic:due', 'generic:accrual-in-doubt']);
        expect((await store.listOpen({ limit: 10, dueOnly: true })).map((r) => r.transactionId)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:H-1', 'generic:due']);
        expect((await store.listOpen({ limit: 10 })).map((r) => r.transactionId)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:H-1', 'generic:due']);
        expect(await store.countOpenByStatus()).toEqual({ in_doubt: 2, pending: 2 });
        // The attention index, from the records that needed a person.
        expect((await store.listAttention({ limit: 10 })).map((e) => [e.entry.key, e.entry.kind])).toEqual([
          ['generic:reversal-in-doubt', 'in_doubt'],
          ['generic:accrual-in-doubt', 'in_doubt'],
          ['generic:failed', 'failed'],
        ]);
        // The in-doubt accrual still holds its customer's key: a second accrual of that customer and amount waits.
        const twin = makeRecord('generic:twin', { at: 1500, accrual: 'pending', customer: { phone: '+15550001234' }, inFlight: true });
        await expect(store.insert(twin)).rejects.toThrow(AccrualKeyHeldError);
        // The first partition holds the rest of this month; a record of the month after goes to that
        // month's partition, and the old rows stay where they were, unrewritten.
        const nextMonth = new Date();
        nextMonth.setUTCMonth(nextMonth.getUTCMonth() + 1, 15);
        const fresh = { ...makeRecord('generic:fresh', { accrual: 'accrued' }), createdAt: nextMonth.toISOString() };
        expect((await store.insert(fresh)).created).toBe(true);
        const where = await store.pool.query<{ partition: string; n: string }>('SELECT tableoid::regclass::text AS partition, count(*) AS n FROM ledger_records GROUP BY 1 ORDER BY 1');
        expect(where.rows).toEqual([
          { partition: partitionName(Date.UTC(nextMonth.getUTCFullYear(), nextMonth.getUTCMonth(), 1)), n: '1' },
          { partition: 'ledger_records_before_10', n: String(before.length) },
        ]);
        // The build before this one cannot write here any more: it fails at its first write, loudly.
        await expect(earlier.query('SELECT ledger_update($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)', ['generic:due', 1, 'pending', true, minutes(7), '{}', [], minutes(7), false, [], null, 'default'])).rejects.toThrow(
          /function ledger_update\(.*\) does not exist/,
        );
      } finally {
        await store.close();
      }
    });
  });
});
