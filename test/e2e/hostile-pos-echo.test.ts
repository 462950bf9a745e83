/**
 * Row 11 of the hostile probe (issue 19) for POS input: an answer repeats at most 200 characters of
 * any one value a POS sent. For each POS, a real sale and its refund as the simulator's fake POS
 * lists them (the payloads a webhook or a direct post carries), and the generic payloads, are posted
 * directly with one value at a time (every string and number, at any depth) replaced by 12 KB of
 * text: whatever the bridge answers, it is not a 5xx and it does not echo the value whole.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { adapters } from '../../adapters/index.js';
import { listPosChanges, type FoundItem } from '../../src/backfill/index.js';
import { BACKFILL_POSES, sale, settingsFor } from '../support/backfill-pos.js';
import { checkout, startHarness, type Harness } from '../support/harness.js';

const HOUR = 3_600_000;
const HUGE = 'Z'.repeat(12 * 1024);
/** More of the value than any answer may repeat. */
const ECHOED_WHOLE = 'Z'.repeat(201);

/** `value` with one leaf (a string or a number) replaced by HUGE, for every leaf, with the leaf's path. */
function* withOneHugeValue(value: unknown, path: string[] = []): Generator<{ path: string; value: unknown }> {
  if (typeof value === 'string' || typeof value === 'number') {
    yield { path: path.join('.'), value: HUGE };
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) for (const m of withOneHugeValue(value[i], [...path, String(i)])) yield { path: m.path, value: value.map((v, j) => (j === i ? m.value : v)) };
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, v] of Object.entries(value)) for (const m of withOneHugeValue(v, [...path, key])) yield { path: m.path, value: { ...value, [key]: m.value } };
  }
}

/** Posts every variant of `payload` to `path`; answers those whose answer was a 5xx or repeated the value whole. */
async function echoes(h: Harness, path: string, payload: unknown): Promise<string[]> {
  const found: string[] = [];
  for (const variant of withOneHugeValue(payload)) {
    const res = await request(h.bridge.url).post(path).set('content-type', 'application/json').send(JSON.stringify(variant.value));
    if (res.status >= 500 || res.text.includes(ECHOED_WHOLE)) found.push(`${path} ${variant.path}: ${res.status}, ${res.text.length} bytes`);
  }
  return found;
}

describe.each(BACKFILL_POSES)('a 12 KB value in a $pos payload posted directly', (p) => {
  let h: Harness;
  let account: { account: string; accessToken: string };
  beforeAll(async () => {
    h = await startHarness({ overrides: { startWorker: false } });
    account = p.addAccount(h.sim);
    await h.restart({ posSettings: { [p.pos]: settingsFor(p, h.simServer.url, account) }, startWorker: false });
  });
  afterAll(async () => {
    await h.close();
  });

  it('is never echoed whole, and is never a 5xx', async () => {
    const orderId = p.orderId(h.sim.pos[p.pos].addOrder(account.account, sale('+14155550100', new Date().toISOString())));
    h.sim.pos[p.pos].addRefund(account.account, { orderId, at: new Date().toISOString() });
    const merchant = { id: 'default', context: { defaultCurrency: 'USD', defaultPhoneRegion: 'US' }, pos: { [p.pos]: settingsFor(p, h.simServer.url, account) } };
    const listed: FoundItem[] = [];
    for await (const item of listPosChanges({ adapters, merchant, pos: p.pos, window: { since: new Date(Date.now() - HOUR), until: new Date(Date.now() + HOUR) } })) listed.push(item);
    expect(listed.map((item) => item.kind).sort()).toEqual(['checkout', 'refund']);
    const found: string[] = [];
    for (const item of listed) found.push(...(await echoes(h, `/v1/${item.kind === 'checkout' ? 'checkouts' : 'refunds'}/${p.pos}`, item.payload)));
    expect(found).toEqual([]);
  }, 60_000);
});

describe('a 12 KB value in a generic payload posted directly', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ overrides: { startWorker: false } });
  });
  afterAll(async () => {
    await h.close();
  });

  it('is never echoed whole, and is never a 5xx', async () => {
    const found = [
      ...(await echoes(h, '/v1/checkouts/generic', checkout({ orderId: 'ECHO-1' }))),
      ...(await echoes(h, '/v1/refunds/generic', { orderId: 'ECHO-1', refundId: 'R-1', amount: '19.99', items: [{ id: 'sku-1', quantity: 1, total: '19.99' }] })),
    ];
    expect(found).toEqual([]);
  }, 60_000);
});
