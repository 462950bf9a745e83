/**
 * Hostile input at every admin route, property-based, on both ledger stores (the file ledger and
 * PostgreSQL), as test/e2e/fuzz.test.ts does for the POS routes (issue 19; docs/security.md,
 * "Hostile input"): NUL, lone surrogates, C0 and C1 controls, bytes that are not UTF-8 and
 * 15,000-character ids in path parameters and query values; keys given twice, NUL and lone
 * surrogates in bodies; Content-Types other than JSON. Never a 5xx, and nothing recorded changes:
 * the records, the dead letters, the merchants, the backfill state and the loyalty service's books
 * are as they were, and the audit trail holds nothing but the read-only entries asked for
 * (reconcile runs, reports, customer searches, unmasking).
 *
 * Every request of the first property carries at least one hostility the bridge refuses before any
 * route acts (so that a generated request can never happen to be a valid action); the second sends
 * ids no record, letter or merchant has (huge, odd Unicode, encoded slashes) with any body; the
 * third sends any query to the routes that only read.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { shopifyAdapter } from '../../adapters/shopify/index.js';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness } from '../support/harness.js';
import { describeWithDatabase, freshSchema } from '../support/postgres.js';
import { postRaw, signature } from '../support/webhooks.js';

const { url: pgBase, describeIf: describeIfPg } = await describeWithDatabase();
const STORES = [
  { name: 'file', describe: describe as typeof describe },
  { name: 'PostgreSQL', describe: describeIfPg },
];

const POS_TOKEN = 'pos-token-fuzz-admin-0123456789';
const SHOPIFY = { webhookSecret: SANDBOX_WEBHOOK_SECRET, apiBaseUrl: '' };

/** Every admin route (src/http/routes/admin.ts, backfill.ts, reports.ts), `{}` where its path parameter goes. */
const ROUTES: { method: string; path: string; keys: string[]; query: string[] }[] = [
  { method: 'GET', path: '/v1/admin/whoami', keys: [], query: [] },
  { method: 'GET', path: '/v1/admin/transactions', keys: [], query: ['merchantId', 'status', 'pos', 'orderId', 'refundId', 'customer', 'from', 'to', 'cursor', 'page', 'limit'] },
  { method: 'GET', path: '/v1/admin/attention', keys: [], query: ['merchantId', 'limit'] },
  { method: 'GET', path: '/v1/admin/audit', keys: [], query: ['merchantId', 'actor', 'from', 'to', 'page', 'limit'] },
  { method: 'POST', path: '/v1/admin/transactions/bulk', keys: ['action', 'ids', 'merchantId', 'filter', 'outcome', 'reason'], query: [] },
  { method: 'GET', path: '/v1/admin/transactions/{}', keys: [], query: ['merchantId', 'unmask'] },
  { method: 'GET', path: '/v1/admin/transactions/{}/evidence', keys: [], query: ['merchantId'] },
  { method: 'GET', path: '/v1/admin/transactions/{}/payload', keys: [], query: ['merchantId', 'unmask'] },
  { method: 'POST', path: '/v1/admin/reconcile', keys: [], query: ['merchantId', 'budgetMs'] },
  { method: 'POST', path: '/v1/admin/transactions/{}/retry', keys: ['reason'], query: ['merchantId'] },
  { method: 'POST', path: '/v1/admin/transactions/{}/reverse', keys: ['reason'], query: ['merchantId'] },
  { method: 'POST', path: '/v1/admin/transactions/{}/resolve', keys: ['outcome', 'operationId', 'reason', 'note'], query: ['merchantId'] },
  { method: 'POST', path: '/v1/admin/transactions/{}/close', keys: ['reason'], query: ['merchantId'] },
  { method: 'POST', path: '/v1/admin/transactions/{}/acknowledge', keys: ['reason'], query: ['merchantId'] },
  { method: 'GET', path: '/v1/admin/dead-letters', keys: [], query: ['merchantId', 'pos', 'open', 'awaiting', 'page', 'limit'] },
  { method: 'GET', path: '/v1/admin/dead-letters/{}', keys: [], query: ['unmask'] },
  { method: 'POST', path: '/v1/admin/dead-letters/{}/replay', keys: ['reason'], query: [] },
  { method: 'POST', path: '/v1/admin/dead-letters/{}/dismiss', keys: ['reason'], query: [] },
  { method: 'POST', path: '/v1/admin/merchants', keys: ['id', 'name', 'loyalty', 'pos', 'currency', 'phoneRegion'], query: [] },
  { method: 'GET', path: '/v1/admin/merchants', keys: [], query: ['page', 'limit'] },
  { method: 'GET', path: '/v1/admin/merchants/{}', keys: [], query: [] },
  { method: 'PATCH', path: '/v1/admin/merchants/{}', keys: ['name', 'status', 'loyalty', 'pos', 'currency', 'phoneRegion'], query: [] },
  { method: 'POST', path: '/v1/admin/merchants/{}/tokens', keys: [], query: [] },
  { method: 'POST', path: '/v1/admin/merchants/{}/refresh', keys: [], query: [] },
  { method: 'POST', path: '/v1/admin/backfill', keys: ['merchantId', 'pos', 'since', 'until'], query: [] },
  { method: 'GET', path: '/v1/admin/backfill', keys: [], query: ['merchantId'] },
  { method: 'GET', path: '/v1/admin/reports/reconcile', keys: [], query: ['merchantId', 'from', 'to'] },
];
const WITH_ID = ROUTES.filter((r) => r.path.includes('{}'));
const READ_ONLY = ROUTES.filter((r) => r.method === 'GET' || r.path === '/v1/admin/reconcile');

/** What the audit trail may gain from the fuzz: read-only actions, which are audited because they read personal data or the history. */
const READ_ONLY_AUDIT = new Set(['reconcile', 'report', 'search customer', 'unmask', 'unmask record', 'unmask payload']);

const HUGE = 'x'.repeat(15_000);
/** Pieces of hostile text: controls (C0, DEL, C1), NUL, lone surrogates of both halves, a surrogate pair, odd punctuation, a huge run. */
const PIECES = ['\u0000', '\u0001', '\u001b', '\u001f', '\u007f', '\u0080', '\u0085', '\u009b', '\u009f', '\ud800', '\udbff', '\udc00', '\udfff', '😀', '\n', '\t', ' ', '%', '/', '\\', '"', "'", '..', '<script>', '=cmd', HUGE];
/** Pieces no store can keep or no id holds, each of which the bridge refuses before a route acts (in a query value, a path segment, or an admin body). */
const REFUSED_PIECES = ['\u0000', '\u0001', '\u001b', '\u007f', '\u0085', '\u009b', '\ud800', '\udfff'];
/** Ids that name something (records, merchants; the dead letter's is added once kept): hostile text around them still names nothing. */
const NAMED_IDS = ['generic:FZ-1', 'generic:FZ-2', 'shop-a', 'default'];

const text = (pieces: string[]) => fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 6, unit: 'binary' })), { minLength: 1, maxLength: 4 }).map((parts) => parts.join(''));
const hostileText = text(PIECES);
/**
 * Text with at least one piece the bridge refuses before any route acts: printable ASCII around it,
 * so that a lone surrogate stays lone (random text after it could complete a pair).
 */
const refusedText = fc.tuple(fc.string({ maxLength: 4 }), fc.constantFrom(...REFUSED_PIECES), hostileText).map(([a, piece, b]) => `${a}${piece}x${b}`);

/** NUL or a lone surrogate: what no admin body may hold. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Percent-encoding of any UTF-16 text, lone surrogates included (as the three bytes WTF-8 gives
 * them: ED A0 80 for U+D800, which is not UTF-8): what a hostile client can put in a URL.
 */
function percentEncode(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    const pair = unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length && value.charCodeAt(i + 1) >= 0xdc00 && value.charCodeAt(i + 1) <= 0xdfff;
    if (pair) {
      out += encodeURIComponent(value.slice(i, i + 2));
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      out += [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else out += encodeURIComponent(value[i]!);
  }
  return out;
}

/** A JSON value of any shape, its strings hostile. */
const hostileJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, hostileText, fc.constantFrom(...NAMED_IDS, 'retry', 'reverse', 'resolve', 'close', 'acknowledge', 'accrued', 'square', '2026-11-01T00:00:00Z'), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 3 })),
})).value;

/** A body for `keys`: some of them, and others, with hostile values. */
const bodyFor = (keys: string[]) => fc.dictionary(keys.length ? fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 8 })) : fc.string({ maxLength: 8 }), hostileJson, { maxKeys: 6 });

/** A query string for `names`: some of them, and others, each value percent-encoded (lone surrogates too) or raw bad escapes. */
const queryFor = (names: string[], values: fc.Arbitrary<string>) =>
  fc
    .array(fc.tuple(names.length ? fc.oneof(fc.constantFrom(...names), fc.string({ maxLength: 6 })) : fc.string({ maxLength: 6 }), fc.oneof(values.map(percentEncode), fc.constantFrom('%ff', '%c3%28', '%zz', '%', '%ED%A0%80'))), { maxLength: 3 })
    .map((pairs) => pairs.map(([name, value]) => `${percentEncode(name)}=${value}`).join('&'));

/** A request that a route would read as valid input, but for the one hostility in it. */
interface Hostile {
  route: (typeof ROUTES)[number];
  id: string;
  query: string;
  body?: string;
  contentType?: string;
  token: 'global' | 'merchant';
}

/** The text of `object` as JSON with its first key given twice (the first time with `earlier`). */
function withRepeatedKey(object: Record<string, unknown>, earlier: unknown): string {
  const keys = Object.keys(object);
  const key = keys[0] ?? 'reason';
  const rest = JSON.stringify(keys.length ? object : { reason: 'x' }).slice(1);
  return `{${JSON.stringify(key)}:${JSON.stringify(earlier)},${rest}`;
}

/** Anywhere in a body: a string holding NUL or a lone surrogate, as a value or as a key. */
const unstorableBody = (keys: string[]) =>
  fc.tuple(bodyFor(keys), fc.oneof(fc.constantFrom(...keys, 'reason'), fc.string({ maxLength: 4 })), refusedText.filter((t) => UNSTORABLE.test(t)), fc.boolean()).map(([object, key, bad, asKey]) => JSON.stringify(asKey ? { ...object, [bad]: 1 } : { ...object, [key]: { deep: [bad] } }));

const hostileRequest = (ids: string[]): fc.Arbitrary<Hostile> => fc.constantFrom(...ROUTES).chain((route) => {
  const id = fc.oneof(fc.constantFrom(...ids), hostileText);
  const someQuery = queryFor(route.query, fc.oneof(hostileText, fc.constantFrom('accrued', 'true', '5', 'shop-a', '2026-11-01')));
  const someBody = bodyFor(route.keys).map((o) => JSON.stringify(o));
  const token = fc.constantFrom<'global' | 'merchant'>('global', 'merchant');
  const modes: fc.Arbitrary<Hostile>[] = [
    // A query value with a control character, a lone surrogate or bytes that are not UTF-8: 400.
    fc.record({ route: fc.constant(route), id, query: fc.tuple(someQuery, fc.oneof(fc.constantFrom(...route.query, 'x'), fc.string({ maxLength: 4 })), refusedText).map(([q, name, value]) => [q, `${percentEncode(name)}=${percentEncode(value)}`].filter(Boolean).join('&')), body: fc.option(someBody, { nil: undefined }), token }),
    // A body with NUL or a lone surrogate: 400.
    fc.record({ route: fc.constant(route), id, query: someQuery, body: unstorableBody(route.keys), token }),
    // A body with a key given twice: 400.
    fc.record({ route: fc.constant(route), id, query: someQuery, body: fc.tuple(bodyFor(route.keys), hostileJson).map(([o, earlier]) => withRepeatedKey(o, earlier)), token }),
    // A body that is not JSON, or says it is not: 415.
    fc.record({ route: fc.constant(route), id, query: someQuery, body: fc.oneof(someBody, hostileText.map((t) => t.replace(/[\ud800-\udfff]/g, '')).filter((t) => t.length > 0)), contentType: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'text/json', ''), token }),
  ];
  // A path id with a control character or a lone surrogate: 404 (400 for the surrogate's bytes, which are not UTF-8).
  if (route.path.includes('{}')) modes.push(fc.record({ route: fc.constant(route), id: refusedText, query: someQuery, body: fc.option(someBody, { nil: undefined }), token }));
  return fc.oneof(...modes);
});

interface Answer {
  status: number;
  text: string;
}

/**
 * Sends exactly this path (percent-encoding as given) and body; `contentType` '' sends none, and
 * undefined sends JSON's when there is a body.
 */
function send(baseUrl: string, method: string, path: string, token: string, body?: string, contentType?: string): Promise<Answer> {
  const target = new URL(baseUrl);
  const bytes = body === undefined ? undefined : Buffer.from(body, 'utf8');
  const headers: Record<string, string | number> = { authorization: `Bearer ${token}` };
  if (bytes) {
    headers['content-length'] = bytes.length;
    const type = contentType ?? 'application/json';
    if (type) headers['content-type'] = type;
  }
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname: target.hostname, port: target.port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(bytes);
  });
}

for (const store of STORES) {
  store.describe(`hostile input at every admin route on the ${store.name} ledger`, () => {
    let h: Harness;
    let schema: { url: string; drop(): Promise<void> } | undefined;
    let merchantToken: string;
    /** The ids that name something here: records, merchants, the dead letter. */
    let ids: string[];
    let baseline: Awaited<ReturnType<typeof state>>;

    /** Everything the fuzz must leave as it was. */
    async function state() {
      const audit = await h.bridge.store.listAudit({ offset: 0, limit: 5_000 });
      return {
        records: JSON.stringify((await h.bridge.store.list({ offset: 0, limit: 500 })).items),
        count: await h.bridge.store.count(),
        letters: JSON.stringify((await h.bridge.store.listDeadLetters({ offset: 0, limit: 500 })).items),
        merchants: JSON.stringify((await h.bridge.store.listMerchants({ offset: 0, limit: 500 })).items),
        backfill: JSON.stringify(await h.bridge.store.listBackfillStates()),
        audit: JSON.stringify(audit.items.filter((e) => !READ_ONLY_AUDIT.has(e.action))),
        books: JSON.stringify(h.sim.books()),
      };
    }

    const pathOf = (route: (typeof ROUTES)[number], id: string, query: string) => `${route.path.replace('{}', percentEncode(id))}${query ? `?${query}` : ''}`;
    const expectNo5xx = (answer: Answer, what: string) => {
      if (answer.status >= 500) throw new Error(`${what} → ${answer.status} ${answer.text.slice(0, 300)}`);
    };

    beforeAll(async () => {
      if (store.name === 'PostgreSQL') schema = await freshSchema(pgBase!, 'fuzz_admin');
      h = await startHarness({
        env: { POS_TOKEN, ...(schema ? { LEDGER_URL: schema.url } : {}) },
        overrides: { startWorker: false, startDeadLetterRetrier: false, startBackfill: false, posSettings: { shopify: SHOPIFY }, secretsKey: randomBytes(32).toString('base64') },
      });
      const installed = h.sim.addMerchant({ id: 'shop-a' });
      const created = await send(h.bridge.url, 'POST', '/v1/admin/merchants', ADMIN_TOKEN, JSON.stringify({ id: 'shop-a', loyalty: { appToken: installed.appToken } }));
      expect(created.status).toBe(201);
      merchantToken = (JSON.parse(created.text) as { adminToken: string }).adminToken;
      const post = (body: unknown) => postRaw(`${h.bridge.url}/v1/checkouts/generic`, JSON.stringify(body), [['authorization', `Bearer ${POS_TOKEN}`]]);
      expect((await post(checkout({ orderId: 'FZ-1' }))).body.status).toBe('accrued');
      h.sim.faults.inject({ kind: 'result_failure', on: 'accrue' });
      expect((await post(checkout({ orderId: 'FZ-2' }))).body.status).toBe('failed');
      // A dead letter waiting for an operator (a key given twice: no run of it can succeed by itself).
      const text = '{"id":91003,"financial_status":"paid","total_price":"1.00","total_price":"2.00"}';
      const letter = await postRaw(`${h.bridge.url}/v1/webhooks/shopify`, text, [signature(shopifyAdapter, SHOPIFY, text), ['X-Shopify-Topic', 'orders/paid'], ['X-Shopify-Event-Id', 'evt-fuzz-admin']]);
      expect(letter.body.results[0].action).toBe('dead_lettered');
      ids = [...NAMED_IDS, letter.body.results[0].deadLetterId as string];
      baseline = await state();
    }, 30_000);

    afterAll(async () => {
      await h?.close();
      await schema?.drop();
    });

    it('a hostility the bridge refuses before any route acts, at every route: a 4xx, nothing changed', async () => {
      await fc.assert(
        fc.asyncProperty(hostileRequest(ids), async (r) => {
          const path = pathOf(r.route, r.id, r.query);
          const answer = await send(h.bridge.url, r.route.method, path, r.token === 'global' ? ADMIN_TOKEN : merchantToken, r.body, r.contentType);
          expectNo5xx(answer, `${r.route.method} ${path.slice(0, 200)}`);
          expect(answer.status).toBeGreaterThanOrEqual(400);
          // What a refusal repeats of the input is cut short: never a 15 KB answer.
          expect(answer.text.length).toBeLessThan(12_000);
        }),
        { numRuns: 1500 },
      );
      expect(await state()).toEqual(baseline);
    }, 60_000);

    it('ids no record, dead letter or merchant has (huge, odd Unicode, encoded slashes), with any body: never a 5xx, nothing changed', async () => {
      const strangeId = fc.oneof(
        fc.constant(HUGE),
        fc.constantFrom(...ids).map((id) => `${id}${HUGE}`),
        fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }).filter((s) => !ids.includes(s)),
        fc.constantFrom('shop-a/generic:FZ-1', 'default/generic:FZ-1', '..', '.', '%', 'generic%3AFZ-1', '\u00a0', '😀'),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...WITH_ID), strangeId, fc.option(bodyFor(['reason', 'outcome', 'name']).map((o) => JSON.stringify(o)), { nil: undefined }), fc.constantFrom(ADMIN_TOKEN, 'merchant'), async (route, id, body, token) => {
          const path = pathOf(route, id, '');
          const answer = await send(h.bridge.url, route.method, path, token === 'merchant' ? merchantToken : token, body);
          expectNo5xx(answer, `${route.method} ${path.slice(0, 200)}`);
          expect(answer.status).toBeGreaterThanOrEqual(400);
          expect(answer.text.length).toBeLessThan(2_000);
        }),
        { numRuns: 500 },
      );
      expect(await state()).toEqual(baseline);
    }, 60_000);

    it('any query on the routes that only read: never a 5xx; nothing changed but the read-only audit entries', async () => {
      const values = fc.oneof(
        hostileText,
        fc.constantFrom('accrued', 'failed,accrued', 'true', 'false', 'bridge', '1', '0', '500', '501', 'shop-a', 'default', 'generic', 'FZ-', '+15550001111', 'card:11-100001-2', '2026-11-01', new Date().toISOString().slice(0, 10), '2026-11-01T00:00:00Z', '9999-12-31', '1999-01-01'),
      );
      const statuses = new Map<number, number>();
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...READ_ONLY).chain((route) => fc.tuple(fc.constant(route), fc.oneof(fc.constantFrom(...ids), hostileText), queryFor(route.query, values))),
          fc.constantFrom(ADMIN_TOKEN, 'merchant'),
          async ([route, id, query], token) => {
            const path = pathOf(route, id, route.path === '/v1/admin/reconcile' ? `budgetMs=200${query ? `&${query}` : ''}` : query);
            const answer = await send(h.bridge.url, route.method, path, token === 'merchant' ? merchantToken : token);
            expectNo5xx(answer, `${route.method} ${path.slice(0, 200)}`);
            statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          },
        ),
        { numRuns: 800 },
      );
      expect(await state()).toEqual(baseline);
      // Not refusals alone: many of the queries were valid enough for the routes to answer them.
      expect(statuses.get(200) ?? 0).toBeGreaterThan(40);
      expect((await send(h.bridge.url, 'GET', '/healthz', ADMIN_TOKEN)).status).toBe(200);
    }, 60_000);
  });
}
