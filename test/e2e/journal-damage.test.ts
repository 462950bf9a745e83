/**
 * An OS crash that damaged the file ledger's journal (it does not fsync): lines that marked calls
 * in flight and recorded their outcomes are gone, while the loyalty service carried the calls out.
 * The bridge starts anyway, and nothing the surviving lines show as `pending` is resent blindly:
 * it is in doubt, verified in the operations history (an accrual) or left to an operator (a
 * reversal). The simulator's books must show every operation exactly once.
 */
import { readdirSync } from 'node:fs';
import { open, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { LedgerRecord } from '../../src/state/record.js';
import { createLogger } from '../../src/kernel/logger.js';
import { makeRecord } from '../ledger/contracts/factories.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness, postJson } from '../support/harness.js';

/** The grace period after a call (IN_DOUBT_GRACE_MS) within which a confirmed reversal's entry may still be noted. */
const GRACE_MS = 300;

let h: Harness;
let logLines: string[];

beforeEach(async () => {
  logLines = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  // No background worker: each step is driven by hand, so what start-up left is seen before it is acted on.
  h = await startHarness({ logger: createLogger('info', sink), env: { IN_DOUBT_GRACE_MS: String(GRACE_MS) }, overrides: { startWorker: false } });
});
afterEach(async () => {
  await h.close();
});

const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

interface JournalLine {
  offset: number;
  length: number;
  id: string;
  v: number;
}

function journalDir(): string {
  return join(h.dir, 'ledger.journal');
}

async function journalLines(file: string): Promise<JournalLine[]> {
  const bytes = await readFile(file);
  const lines: JournalLine[] = [];
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0x0a, start);
    const header = JSON.parse(bytes.toString('utf8', start, bytes.indexOf(0x09, start))) as { id?: string; v?: number };
    lines.push({ offset: start, length: end + 1 - start, id: header.id ?? '', v: header.v ?? 0 });
    start = end + 1;
  }
  return lines;
}

/** Zero-fills the lines `[first, last]` of the journal, which must lie one after the other, as a crashed OS leaves unwritten pages. */
async function zeroFill(file: string, lines: JournalLine[], first: JournalLine, last: JournalLine): Promise<void> {
  const from = lines.indexOf(first);
  const to = lines.indexOf(last);
  expect(from).toBeGreaterThan(-1);
  expect(to).toBeGreaterThanOrEqual(from);
  const handle = await open(file, 'r+');
  await handle.write(Buffer.alloc(last.offset + last.length - first.offset), 0, undefined, first.offset);
  await handle.close();
}

function line(lines: JournalLine[], id: string, v: number): JournalLine {
  const found = lines.find((l) => l.id === id && l.v === v);
  expect(found).toBeDefined();
  return found!;
}

async function record(id: string): Promise<LedgerRecord> {
  return (await h.bridge.store.get(id))!;
}

describe('journal damage found at start-up', () => {
  it('leaves every record that may have lost its in-flight marker in doubt, and nothing is done twice', async () => {
    const A = 'generic:A-1';
    const B = 'generic:B-1';
    const C = 'generic:C-1';
    const D = 'generic:D-1';
    // A's first round meets only 429s (pending, v2); the next round accrues it (marker v3, outcome v4).
    h.sim.faults.inject({ kind: 'rate_limit', times: 5, on: 'accrue' });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'A-1' }))).body.status).toBe('pending');
    const pendingA = await record(A);
    expect((await h.bridge.core.delivery.advance(A, true)).after).toBe('accrued');
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'B-1' }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'B-1', refundId: 'R-B' })).body.status).toBe('reversed');
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'D-1' }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'D-1', refundId: 'R-D', amount: '9.97' })).body.remainder).toEqual({ transactionId: `${D}~r1`, status: 'accrued' });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'C-1' }))).body.status).toBe('accrued');
    const before = h.sim.books();
    // A: five 429s and one accrue; B, C: one each; D: the order and its remainder.
    expect(before).toMatchObject({ accrueRequests: 10, reverseRequests: 2 });
    await h.bridge.close();

    const segment = join(journalDir(), '000001.jsonl');
    const lines = await journalLines(segment);
    // A: its second round's in-flight marker (v3) and outcome (v4) are lost; v2 reads `pending`.
    await zeroFill(segment, lines, line(lines, A, 3), line(lines, A, 4));
    // B: the reverse's marker (v4), its outcome (v5) and the note of its history entry read after it
    // (v6: how this service records a reversal, learned from it) are lost; v3 reads `reversal_pending`.
    await zeroFill(segment, lines, line(lines, B, 4), line(lines, B, 5));
    await zeroFill(segment, lines, line(lines, B, 6), line(lines, B, 6));
    // D: the remainder's record, D's link to it, and the remainder's accrual are lost.
    const lastOfD = lines.filter((l) => l.id === D || l.id === `${D}~r1`).at(-1)!;
    await zeroFill(segment, lines, line(lines, `${D}~r1`, 1), lastOfD);

    await h.restart({ startWorker: false });
    expect(await record(A)).toMatchObject({ status: 'in_doubt', version: 3, accrual: { state: 'in_doubt', inDoubtSince: pendingA.updatedAt } });
    expect((await record(A)).history.at(-1)!.event).toMatch(/journal damage found at start-up/);
    expect(await record(B)).toMatchObject({ status: 'in_doubt', version: 4, accrual: { state: 'accrued' }, reversal: { state: 'in_doubt' } });
    expect((await record(B)).history.at(-1)!.event).toMatch(/journal damage found at start-up.*in-flight reverse/);
    expect(await record(D)).toMatchObject({ status: 'reversed', reversal: { partial: { remainderTransactionId: `${D}~r1` } } });
    expect((await record(D)).remainderTransactionId).toBeUndefined();
    expect(await record(`${D}~r1`)).toMatchObject({ status: 'in_doubt', accrual: { state: 'in_doubt', inDoubtSince: (await record(D)).updatedAt } });
    expect(await record(C)).toMatchObject({ status: 'accrued' });

    // Logged once, at warn, with what was found and no customer contact.
    const warnings = logLines.filter((l) => /journal was damaged/.test(l));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, corruptLines: 3, segments: [1], inDoubt: 3, copies: [expect.stringContaining('000001.jsonl.corrupt-')] });
    expect(warnings[0]).not.toMatch(/5550001111|a@b\.test|Ann|Lee/);
    // The damaged segment is compacted away once the records are in doubt; its copy stays.
    expect(readdirSync(journalDir()).filter((f) => f.startsWith('000001.jsonl'))).toEqual([expect.stringMatching(/^000001\.jsonl\.corrupt-/)]);

    // The history proves the accruals happened: settled without a second accrue.
    expect((await h.bridge.core.delivery.advance(A, true)).after).toBe('accrued');
    expect((await record(A)).accrual.settledBy).toBe('history');
    expect((await h.bridge.core.delivery.advance(D, true)).note).toMatch(/remainder generic:D-1~r1: accrued/);
    expect(await record(`${D}~r1`)).toMatchObject({ status: 'accrued', accrual: { settledBy: 'history' } });
    // The reversal shape learned before the damage (kept with the ledger, not in the journal) finds two
    // unclaimed reversal entries of this sum on the card: B's and D's (D's note of its own was lost
    // with its lines, but D's answer confirmed it). Two entries for the two reversals that could have
    // made them: both happened (the count rule), and B claims one; nothing is resent.
    // D was confirmed a moment ago: until the grace period has passed its entry may still be noted,
    // and the count waits for that. It is counted once that time is over.
    const confirmedD = Math.max(...(await record(D)).reversal.results.map((r) => Date.parse(r.reversedAt ?? '')).filter(Number.isFinite));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, confirmedD + GRACE_MS + 20 - Date.now())));
    const passB = await h.bridge.core.delivery.advance(B, true);
    expect(passB).toMatchObject({ after: 'reversed', note: expect.stringMatching(/2 unclaimed reversal entries for the 2 reversals in doubt that could have made them \(generic:B-1, generic:D-1\): all happened/) });
    expect(await record(B)).toMatchObject({ status: 'reversed', reversal: { state: 'reversed', operationIds: [expect.any(Number)], countedWith: [D] } });

    const after = h.sim.books();
    expect(after).toMatchObject({ accrueRequests: 10, reverseRequests: 2, doubleAccruals: [], doubleReversals: [] });

    // A later start finds no damage and changes nothing.
    logLines.length = 0;
    await h.restart({ startWorker: false });
    expect(logLines.filter((l) => /journal was damaged/.test(l))).toEqual([]);
    expect(await record(B)).toMatchObject({ status: 'reversed', version: 5 });
    expect(await record(A)).toMatchObject({ status: 'accrued' });
  });

  it('puts in doubt exactly the sides that could have been called, once', async () => {
    const { store } = h.bridge;
    const service = h.bridge.core.recovery;
    await store.insert(makeRecord('generic:pending', { accrual: 'pending' }));
    await store.insert(makeRecord('generic:refund-of-unknown', { accrual: 'none', reversal: 'pending' }));
    await store.insert(makeRecord('generic:refund-waits', { accrual: 'pending', reversal: 'pending' }));
    // A refused or skipped accrual is never reversed: the worker only marks the refund not needed.
    await store.insert(makeRecord('generic:refused', { accrual: 'failed', reversal: 'pending' }));
    await store.insert(makeRecord('generic:skipped', { accrual: 'skipped', reversal: 'pending' }));
    await store.insert(makeRecord('generic:settled', { accrual: 'accrued', operationIds: [7] }));
    await store.insert(makeRecord('generic:doubted', { accrual: 'in_doubt' }));

    expect(await service.recoverAfterJournalDamage()).toBe(3);
    const states = async (id: string) => {
      const r = await record(id);
      return [r.status, r.accrual.state, r.reversal.state];
    };
    expect(await states('generic:pending')).toEqual(['in_doubt', 'in_doubt', 'none']);
    expect(await states('generic:refund-of-unknown')).toEqual(['in_doubt', 'none', 'in_doubt']);
    expect(await states('generic:refund-waits')).toEqual(['in_doubt', 'in_doubt', 'in_doubt']);
    for (const id of ['generic:refused', 'generic:skipped', 'generic:settled', 'generic:doubted']) expect([id, (await record(id)).version]).toEqual([id, 1]);
    expect(await record('generic:pending')).toMatchObject({ version: 2, accrual: { inDoubtSince: makeRecord('x').updatedAt } });

    expect(await service.recoverAfterJournalDamage()).toBe(0);
  });

  it('a partial refund whose reverse and remainder were lost: the remainder, created after an operator resolves the reversal, is verified, not accrued again', async () => {
    const D = 'generic:D-1';
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'D-1' }))).body.status).toBe('accrued');
    expect((await post('/v1/refunds/generic', { orderId: 'D-1', refundId: 'R-D', amount: '9.97' })).body.remainder).toEqual({ transactionId: `${D}~r1`, status: 'accrued' });
    expect(h.sim.books()).toMatchObject({ accrueRequests: 2, reverseRequests: 1 });
    await h.bridge.close();
    // Everything after the version that recorded the refund (v3: reversal pending, plan set) is lost:
    // the reverse's marker and outcome, the remainder's record and accrual, the link.
    const segment = join(journalDir(), '000001.jsonl');
    const lines = await journalLines(segment);
    await zeroFill(segment, lines, line(lines, D, 4), lines.at(-1)!);

    await h.restart({ startWorker: false });
    const parent = await record(D);
    expect(parent).toMatchObject({ version: 4, reversal: { state: 'in_doubt', partial: { remainderTransactionId: `${D}~r1`, remainderInDoubtSince: expect.any(String) } } });
    expect(parent.history.at(-1)!.event).toMatch(/in-flight reverse and the accrual of remainder generic:D-1~r1/);
    expect(await h.bridge.store.get(`${D}~r1`)).toBeUndefined();

    // The operator sees the reversal in the loyalty service and says so: the remainder is created in
    // doubt and found in the operations history, never accrued a second time.
    const resolved = await request(h.bridge.url).post(`/v1/admin/transactions/${encodeURIComponent(D)}/resolve`).set('authorization', `Bearer ${ADMIN_TOKEN}`).send({ outcome: 'reversed' });
    expect(resolved.status).toBe(200);
    expect(await record(`${D}~r1`)).toMatchObject({ status: 'accrued', accrual: { settledBy: 'history' } });
    expect(h.sim.books()).toMatchObject({ accrueRequests: 2, reverseRequests: 1, doubleAccruals: [], doubleReversals: [] });
  });

  it('without damage, start-up leaves pending records pending', async () => {
    h.sim.faults.inject({ kind: 'server_error', on: 'accrue', status: 503, times: 100 });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'P-1' }))).status).toBe(202);
    await h.restart({ startWorker: false });
    expect((await record('generic:P-1')).status).toBe('pending');
    expect(logLines.filter((l) => /journal was damaged/.test(l))).toEqual([]);
  });

  it('a lock left on an earlier boot (the machine restarted: the tail may be lost with no damaged bytes) puts pending records in doubt too', async () => {
    h.sim.faults.inject({ kind: 'server_error', on: 'accrue', status: 503, times: 100 });
    expect((await post('/v1/checkouts/generic', checkout({ orderId: 'P-2' }))).status).toBe(202);
    const pending = await record('generic:P-2');
    expect(pending.status).toBe('pending');
    // A bridge that never stopped cleanly, on a boot of the machine before this one.
    await h.bridge.close();
    await writeFile(join(h.dir, 'ledger.json.lock'), '999999999\nan-earlier-boot-id\n');
    logLines.length = 0;
    await h.restart({ startWorker: false });
    expect(await record('generic:P-2')).toMatchObject({ status: 'in_doubt', accrual: { state: 'in_doubt', inDoubtSince: pending.updatedAt } });
    expect((await record('generic:P-2')).history.at(-1)!.event).toMatch(/^the machine restarted since this ledger was last held without a clean stop: lines written after this version may be lost/);
    const warnings = logLines.filter((l) => /the machine restarted while the bridge held the ledger/.test(l));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, machineRestarted: true, corruptLines: 0, inDoubt: 1 });
    // Acted on: the next start is an ordinary one.
    logLines.length = 0;
    await h.restart({ startWorker: false });
    expect(logLines.filter((l) => /machine restarted/.test(l))).toEqual([]);
  });
});
