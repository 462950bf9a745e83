/**
 * Customer search never holds or scans personal data in clear (issue 18 "Finding things": "It looks
 * up a keyed hash, never a scan of personal data in clear"; src/state/customer-index.ts). On each
 * ledger store, a checkout whose customer has a phone, an email and a card serial is recorded over
 * HTTP; then:
 * - a search by phone (with or without its country code), email (any case) and card serial finds it;
 * - the customer index the store keeps holds exactly the keyed hashes (HMAC-SHA256 with the ledger's
 *   own search key) of the customer's identifiers, and no clear identifier: PostgreSQL's
 *   `ledger_customers` read with SQL; the file ledger's files read from disk (its SQLite index, every
 *   table and its raw bytes, and the journal lines' headers, which the index is rebuilt from). The
 *   record itself keeps its customer (read back as a control: the identifiers looked for are the
 *   ones the ledger holds, so their absence from the index means something);
 * - the search goes through that index: with the record's index entries removed, the same searches
 *   find nothing while the record is still there (found by its order id).
 * The memory store is a test double that keeps no index (memory-store.ts: it reads every record for
 * every query): a search there finds the record, and no LEDGER_URL opens it, so a deployed bridge
 * never searches that way.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DatabaseSync } from '@photostructure/sqlite';
import pg from 'pg';
import request from 'supertest';
import { emptyMemoryLedger, MemoryLedgerStore } from '../../src/ledger/memory-store.js';
import { openStore } from '../../src/ledger/open-store.js';
import { CUSTOMER_SEARCH_KEY, customerHash } from '../../src/state/customer-index.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const POS_TOKEN = 'pos-token-privacy-0123456789';
const ORDER_ID = 'PRIV-7001';
const TRANSACTION_ID = `generic:${ORDER_ID}`;
const PHONE = '+14155550172';
const EMAIL = 'Priya.Quell@Example.test';
const NAMES = { firstName: 'Zebulon', lastName: 'Marchetti' };

/** The customer's card serial: one the loyalty simulator issued (a serial the service does not know fails the accrual). */
let serial = '';
/** The customer's identifiers as the ledger compares them (customer-index.ts identitiesOf). */
const identities = () => [`phone:${PHONE}`, `email:${EMAIL.toLowerCase()}`, `card:${serial}`];
/**
 * Any of these in an index, in any case, is personal data in clear: the phone's digits, the email or
 * its local part, the serial with or without its dashes, the names.
 */
const clear = () => ['4155550172', EMAIL.toLowerCase(), 'priya.quell', serial, serial.replace(/\D/g, ''), 'zebulon', 'marchetti'];
/** The searches an operator types: phone with and without its country code or said as one, email in another case, the serial as typed or said as one. */
const searches = () => [PHONE, '(415) 555-0172', 'phone:+1 415 555 0172', 'PRIYA.QUELL@example.TEST', serial, `card:${serial}`];

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();

/** The clear identifiers `text` holds (compared in lower case). */
const clearIn = (text: string): string[] => clear().filter((needle) => text.toLowerCase().includes(needle));

/** A bridge on the ledger `env` and `extra` name, with the checkout of a customer with a phone, an email and a card serial recorded. */
async function recorded(env: Record<string, string>, extra: Parameters<typeof startHarness>[0] = {}): Promise<Harness> {
  const h = await startHarness({
    env: { POS_TOKEN, DEFAULT_PHONE_REGION: 'US', ...env },
    ...extra,
    overrides: { startWorker: false, secretsKey: randomBytes(32).toString('base64'), ...extra.overrides },
  });
  try {
    serial = h.sim.addCustomer({ phone: PHONE, email: EMAIL, firstName: NAMES.firstName }).cardIds[0]!;
    expect(serial).toMatch(/^\d+-\d{6,}-\d$/);
    const customer = { phone: PHONE, email: EMAIL, cardSerial: serial, ...NAMES };
    const res = await request(h.bridge.url)
      .post('/v1/checkouts/generic')
      .set('content-type', 'application/json')
      .set('authorization', `Bearer ${POS_TOKEN}`)
      .send(JSON.stringify(checkout({ orderId: ORDER_ID, customer })));
    expect([res.status, res.body.status]).toEqual([200, 'accrued']);
    return h;
  } catch (error) {
    await h.close();
    throw error;
  }
}

const list = async (h: Harness, query: string): Promise<string[]> => {
  const res = await request(h.bridge.url).get(`/v1/admin/transactions?${query}`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
  expect(res.status).toBe(200);
  return res.body.items.map((i: { transactionId: string }) => i.transactionId);
};
/** A customer search within the default merchant (a customer search is scoped to one merchant). */
const search = (h: Harness, text: string) => list(h, `customer=${encodeURIComponent(text)}&merchantId=default`);

/** Every search finds the record, and a customer the ledger does not have finds nothing. */
async function expectFound(h: Harness): Promise<void> {
  for (const text of searches()) expect([text, await search(h, text)]).toEqual([text, [TRANSACTION_ID]]);
  expect(await search(h, '+14155550199')).toEqual([]);
  expect(await search(h, 'priya.other@example.test')).toEqual([]);
}

/** Every search finds nothing, while the record is there. */
async function expectNotFound(h: Harness): Promise<void> {
  for (const text of searches()) expect([text, await search(h, text)]).toEqual([text, []]);
  expect(await list(h, `orderId=${ORDER_ID}`)).toEqual([TRANSACTION_ID]);
}

/** The index entries the record must have: one keyed hash per identifier, with the ledger's key. */
function expectedHashes(searchKey: string): string[] {
  // A key of the ledger's own (32 random bytes), not a constant every ledger shares.
  expect(Buffer.from(searchKey, 'base64url').length).toBeGreaterThanOrEqual(32);
  return identities().map((identity) => customerHash(searchKey, identity)).sort();
}

describe('customer search on the memory store (a test double, with no index)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await recorded({}, { overrides: { store: new MemoryLedgerStore(emptyMemoryLedger()) } });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
  });

  it('finds the record by phone, email or card serial', async () => {
    await expectFound(h);
  });

  it('cannot be deployed: no LEDGER_URL opens it, so a running bridge never searches by reading records', () => {
    for (const url of ['memory:', 'memory://ledger', 'mem:ledger']) expect(() => openStore(url)).toThrow(/is not supported: use file:<path> or postgres:/);
  });
});

describe('customer search on the file ledger', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await recorded({});
    await expectFound(h);
    // The index is one process's (an exclusive SQLite lock): stopped cleanly, its files are read as they are on disk.
    await h.bridge.close();
  }, 30_000);
  afterAll(async () => {
    await h?.close();
  });

  const file = (name: string) => join(h.dir, name);
  const searchKey = () => (JSON.parse(readFileSync(file('ledger.json'), 'utf8')) as { searchKey: string }).searchKey;

  it('its SQLite index holds the keyed hashes of the identifiers and nothing of them in clear, in any table or byte', () => {
    const db = new DatabaseSync(file('ledger.index.sqlite'), { readOnly: true });
    try {
      const hashes = expectedHashes(searchKey());
      expect(db.prepare('SELECT hash, key FROM customers ORDER BY hash').all()).toEqual(hashes.map((hash) => ({ hash, key: TRANSACTION_ID })));
      const row = db.prepare('SELECT customers FROM records WHERE key = ?').get(TRANSACTION_ID) as { customers: string };
      expect((JSON.parse(row.customers) as string[]).sort()).toEqual(hashes);
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
      expect(tables).toEqual(expect.arrayContaining(['customers', 'records']));
      for (const table of tables) expect([table, clearIn(JSON.stringify(db.prepare(`SELECT * FROM "${table}"`).all()))]).toEqual([table, []]);
    } finally {
      db.close();
    }
    // Bytes too (free pages, the write-ahead log): nothing of the customer was ever written there.
    const indexFiles = readdirSync(h.dir).filter((name) => name.startsWith('ledger.index.sqlite'));
    expect(indexFiles).toContain('ledger.index.sqlite');
    for (const name of indexFiles) expect([name, clearIn(readFileSync(file(name)).toString('latin1'))]).toEqual([name, []]);
  });

  it("its journal lines' headers (what the index is rebuilt from) hold the same hashes and no clear identifier; the record's body keeps its customer", () => {
    const journal = file('ledger.journal');
    const lines = readdirSync(journal)
      .filter((name) => name.endsWith('.jsonl'))
      .flatMap((name) => readFileSync(join(journal, name), 'utf8').split('\n').filter(Boolean));
    const recordLines = lines
      .map((line) => ({ header: JSON.parse(line.slice(0, line.indexOf('\t'))) as { k: string; id?: string; ch?: string[] }, headerText: line.slice(0, line.indexOf('\t')), body: line.slice(line.indexOf('\t') + 1) }))
      .filter((l) => l.header.k === 'r' && l.header.id === TRANSACTION_ID);
    expect(recordLines.length).toBeGreaterThanOrEqual(1);
    const hashes = expectedHashes(searchKey());
    for (const line of recordLines) {
      expect([...(line.header.ch ?? [])].sort()).toEqual(hashes);
      expect(clearIn(line.headerText)).toEqual([]);
    }
    // The control: the record keeps its customer, so these are the identifiers the ledger holds.
    expect(clearIn(recordLines.at(-1)!.body)).toEqual(expect.arrayContaining(['4155550172', 'priya.quell@example.test', serial]));
  });

  it('a search goes through that index: with the entries removed from it, the same searches find nothing', async () => {
    const db = new DatabaseSync(file('ledger.index.sqlite'));
    try {
      expect(db.prepare('DELETE FROM customers WHERE key = ?').run(TRANSACTION_ID).changes).toBe(identities().length);
    } finally {
      db.close();
    }
    await h.restart();
    await expectNotFound(h);
  });
});

describeIfPg('customer search on the PostgreSQL ledger', () => {
  let h: Harness;
  let schema: { url: string; drop(): Promise<void> };
  let db: pg.Client;
  let name: string;
  beforeAll(async () => {
    schema = await freshSchema(pgBase!, 'privacy');
    name = new URL(schema.url).searchParams.get('schema')!;
    h = await recorded({ LEDGER_URL: schema.url });
    db = new pg.Client({ connectionString: pgBase! });
    await db.connect();
  }, 30_000);
  afterAll(async () => {
    await db?.end();
    await h?.close();
    await schema?.drop();
  });

  it('finds the record by phone, email or card serial', async () => {
    await expectFound(h);
  });

  it('ledger_customers holds the keyed hashes of the identifiers and no column holds any of them in clear', async () => {
    const key = (await db.query<{ value: string }>(`SELECT value FROM "${name}".ledger_settings WHERE name = $1`, [CUSTOMER_SEARCH_KEY])).rows[0]!.value;
    const hashes = expectedHashes(key);
    const rows = (await db.query(`SELECT * FROM "${name}".ledger_customers ORDER BY hash`)).rows as Record<string, unknown>[];
    expect(rows.map((r) => ({ hash: r.hash, transaction_id: r.transaction_id }))).toEqual(hashes.map((hash) => ({ hash, transaction_id: TRANSACTION_ID })));
    for (const row of rows) for (const [column, value] of Object.entries(row)) expect([column, clearIn(value instanceof Date ? value.toISOString() : String(value))]).toEqual([column, []]);
    // The control: the record keeps its customer, so these are the identifiers the ledger holds.
    const record = (await db.query<{ record: unknown }>(`SELECT record FROM "${name}".ledger_records WHERE transaction_id = $1`, [TRANSACTION_ID])).rows[0]!.record;
    expect(clearIn(JSON.stringify(record))).toEqual(expect.arrayContaining(['4155550172', 'priya.quell@example.test', serial]));
  });

  it('a search goes through that index: with the entries removed from it, the same searches find nothing', async () => {
    expect((await db.query(`DELETE FROM "${name}".ledger_customers WHERE transaction_id = $1`, [TRANSACTION_ID])).rowCount).toBe(identities().length);
    await expectNotFound(h);
  });
});
