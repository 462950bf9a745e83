/**
 * The file ledger's lines are synced to disk before every upstream call (group commit): the line
 * that marks a call in flight, for a new checkout the record itself, must not be taken back by an
 * OS crash while the call went out, or the redelivered order would be accrued again. A process
 * kill cannot show this (the page cache survives it), so the order of operations is checked: the
 * store is made durable after the write that precedes each call and before the loyalty service
 * sees the request.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { checkout, startHarness, type Harness, postJson } from '../support/harness.js';

let h: Harness;
let dir: string;
let log: string[];

/** The file store, with each write and each `durable()` logged beside the upstream's request count at that moment. */
function loggingStore(inner: FileLedgerStore, upstreamCalls: () => number): LedgerStore {
  return new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'insert' || prop === 'update' || prop === 'durable') {
        return async (...args: unknown[]) => {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          log.push(`${String(prop)}@${upstreamCalls()}`);
          return result;
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

beforeEach(async () => {
  log = [];
  dir = mkdtempSync(join(tmpdir(), 'durability-'));
  const store = new FileLedgerStore(join(dir, 'ledger.json'));
  let calls = () => 0;
  h = await startHarness({ overrides: { store: loggingStore(store, () => calls()), startWorker: false } });
  calls = () => h.sim.books().accrueRequests + h.sim.books().reverseRequests;
});
afterEach(async () => {
  await h.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = (path: string, body: unknown) => postJson(h.bridge.url, path, body);

describe('file ledger durability before upstream calls', () => {
  it('a checkout: insert (carrying the in-flight marker), durable, then the accrue, then the outcome', async () => {
    expect((await post('/v1/checkouts/generic', checkout())).body.status).toBe('accrued');
    expect(log).toEqual(['insert@0', 'durable@0', 'update@1']);
  });

  it('a refund of an order never seen: insert, marker, durable, then the reverse', async () => {
    await post('/v1/refunds/generic', { orderId: 'NEVER-SEEN' });
    expect(log.slice(0, 3)).toEqual(['insert@0', 'update@0', 'durable@0']);
    expect(log[3]).toBe('update@1');
  });

  it('a retry round after 429s: the marker is made durable before the round goes out', async () => {
    h.sim.faults.inject({ kind: 'rate_limit', on: 'accrue', times: 5 });
    expect((await post('/v1/checkouts/generic', checkout())).body.status).toBe('pending');
    log = [];
    expect((await h.bridge.core.delivery.advance('generic:A-1001', true)).after).toBe('accrued');
    expect(log).toEqual(['update@5', 'durable@5', 'update@6']);
  });
});
