/**
 * The PostgreSQL store against a real server: the shared contract suite, then what only a shared
 * store must do: migrations safe when instances start at once, disjoint worker claims under a
 * lease, and operation claims unique across records; then migration 2 (due times) on a ledger
 * that an earlier build created and may still be writing to.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { ConflictError } from '../../src/errors.js';
import { MIGRATIONS } from '../../src/ledger/pg-migrations.js';
import { dueSql, jsonb, PostgresLedgerStore } from '../../src/ledger/pg-store.js';
import { isOpen, type LedgerRecord } from '../../src/ledger/record.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { ledgerStoreContract, makeLetter, makeRecord, minutes, nextVersion } from './store-contract.js';

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
            expect(plan).toMatch(/Index Only Scan using ledger_records_merchant_due on ledger_records/);
            expect(plan).toMatch(/Limit[^\n]*\n\s*->\s+Index (Only )?Scan using ledger_records_merchant_due on ledger_records r[^\n]*\n\s*Index Cond: \(\(merchant_id = m(_\d+)?\.merchant_id\) AND \(due_at <= /);
            expect(plan).not.toMatch(/Seq Scan/);
          }
        }
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
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

  describeIf('migration 2: due times on a ledger an earlier build created', () => {
    let schema: { url: string; drop(): Promise<void> };
    /** A connection to the schema as version 1 left it; it stands for an instance of the earlier build. */
    let earlier: pg.Client;
    const now = Date.parse(minutes(2000));

    /** How the earlier build inserts (no due columns) and updates (7 arguments). */
    const insertAsBefore = (r: LedgerRecord) =>
      earlier.query(
        `INSERT INTO ledger_records (transaction_id, version, pos, order_id, status, open, created_at, updated_at, record)
         VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (transaction_id) DO NOTHING`,
        [r.transactionId, r.pos, r.orderId, r.status, isOpen(r), r.createdAt, r.updatedAt, jsonb(r)],
      );
    const updateAsBefore = async (r: LedgerRecord) =>
      (
        await earlier.query<{ ok: boolean }>('SELECT ledger_update($1, $2, $3, $4, $5, $6, $7) AS ok', [
          r.transactionId, r.version - 1, r.status, isOpen(r), r.updatedAt, jsonb(r), r.accrual.operationIds,
        ])
      ).rows[0]!.ok;

    beforeAll(async () => {
      schema = await freshSchema(base!, 'from_v1');
      const name = new URL(schema.url).searchParams.get('schema')!;
      earlier = new pg.Client({ connectionString: base });
      await earlier.connect();
      await earlier.query(`CREATE SCHEMA ${name}; SET search_path TO ${name}`);
      await earlier.query('CREATE TABLE ledger_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
      await earlier.query(MIGRATIONS[0]!.sql);
      await earlier.query('INSERT INTO ledger_schema_migrations (version, name) VALUES (1, $1)', [MIGRATIONS[0]!.name]);
    });
    afterAll(async () => {
      await earlier.end();
      await schema.drop();
    });

    it('fills in the due times of existing open records, and keeps working with writes of the earlier build', async () => {
      // The oldest rows are what starved the worker: an operator's, a verifier's, an hour away.
      const before = [
        makeRecord('generic:reversal-in-doubt', { at: 0, accrual: 'accrued', reversal: 'in_doubt' }),
        makeRecord('generic:accrual-in-doubt', { at: 1, accrual: 'in_doubt', nextAttemptAt: 20 }),
        makeRecord('generic:next-round-later', { at: 2, accrual: 'pending', nextAttemptAt: 5000 }),
        makeRecord('generic:settled', { at: 3, accrual: 'accrued' }),
        makeRecord('generic:due', { at: 4, accrual: 'pending' }),
      ];
      for (const r of before) await insertAsBefore(r);
      const v2 = await updateAsBefore(nextVersion(before[4]!, (r) => (r.rounds = 1)));
      expect(v2).toBe(true);

      const store = new PostgresLedgerStore(schema.url, { poolSize: 2 });
      try {
        await store.init();
        const { rows } = await store.pool.query<{ version: number }>('SELECT version FROM ledger_schema_migrations ORDER BY version');
        expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
        const due = async (canVerify: boolean, at = now) => (await store.listDue({ nowMs: at, limit: 500, canVerify })).map((r) => r.transactionId);
        expect(await due(false)).toEqual(['generic:due']);
        expect(await due(true)).toEqual(['generic:accrual-in-doubt', 'generic:due']);
        expect(await due(true, Date.parse(minutes(19)))).toEqual([]);
        expect((await store.listOpen(500)).map((r) => r.transactionId)).toEqual(['generic:reversal-in-doubt', 'generic:accrual-in-doubt', 'generic:next-round-later', 'generic:due']);

        // Instances of the earlier build still running during the rollout: what they write is due at
        // once (looked at, never forgotten) until this build writes it again.
        await insertAsBefore(makeRecord('generic:inserted-by-earlier-build', { at: 900 }));
        const operator = (await store.get('generic:reversal-in-doubt'))!;
        expect(await updateAsBefore(nextVersion(operator, (r) => r.history.push({ at: minutes(901), event: 'note' })))).toBe(true);
        expect(await due(false, Date.parse(minutes(-1)))).toEqual(expect.arrayContaining(['generic:inserted-by-earlier-build', 'generic:reversal-in-doubt']));
        await store.update(nextVersion((await store.get('generic:reversal-in-doubt'))!));
        expect(await due(false)).not.toContain('generic:reversal-in-doubt');

        // An operator-bound row the earlier build wrote, never written again by this one: the next
        // start-up of this build dates it, so it stops taking a place in every batch.
        const again = (await store.get('generic:reversal-in-doubt'))!;
        expect(await updateAsBefore(nextVersion(again, (r) => r.history.push({ at: minutes(902), event: 'note' })))).toBe(true);
        expect(await due(false, Date.parse(minutes(-1)))).toContain('generic:reversal-in-doubt');
      } finally {
        await store.close();
      }
      const restarted = new PostgresLedgerStore(schema.url, { poolSize: 2 });
      try {
        await restarted.init();
        const due = (await restarted.listDue({ nowMs: now, limit: 500, canVerify: false })).map((r) => r.transactionId);
        expect(due).not.toContain('generic:reversal-in-doubt');
        expect(due).toContain('generic:inserted-by-earlier-build');
      } finally {
        await restarted.close();
      }
    });
  });
});
