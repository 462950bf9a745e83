/**
 * Requests made from /openapi.json alone, as a client's tools make them (request generators,
 * contract testers): for every operation, values generated from the schemas the served document
 * states for its path parameters, query and body, sent over HTTP to a running bridge. A request
 * valid by the document must not be refused as invalid (400, 415, 422) for a reason the document
 * could have stated: what is refused for another reason (the data the bridge holds, the time now,
 * a rule across fields, the rules of the POS payload that its adapter checks after parsing) is
 * listed below with why. Three kinds of request per operation: the minimal one (required fields
 * only), the full one (every field), and a seeded random sample.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import request from 'supertest';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';

type Json = Record<string, any>;
type Mode = 'minimal' | 'full' | 'random';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const POS_TOKEN = 'pos-token-spec-requests-0123456789';
const RANDOM_RUNS = 8;
const SEED = 20_261_121;

/**
 * Refusals that the document cannot state, each with why. Anything else refused with 400, 415 or
 * 422 is a place where the document is looser than the server.
 */
const NOT_STATABLE: { op: RegExp; status: number; field?: RegExp; message?: RegExp; code?: string; why: string }[] = [
  { op: /^post(Checkout|Refund)$/, status: 400, field: /^customer\.phone$/, why: 'whether text is a phone number is the numbering plan (libphonenumber), which no pattern states' },
  { op: /^postCheckout$/, status: 400, field: /^customer\.email$/, message: /not an email address/, why: "the generic payload's customer is checked after parsing (src/kernel/customer.ts): adapters/generic/schema.ts states no email format" },
  { op: /^postCheckout$/, status: 400, field: /^items\.\d+\.total$/, message: /required when the unit price is not given/, why: 'a rule across two fields of a line, checked after parsing (src/loyalty/selection.ts)' },
  { op: /^postCheckout$/, status: 400, field: /^items\.\d+\.(total|quantity)$/, message: /too large/, why: 'unitPrice × quantity must be exact in cents: a bound on the product of two fields' },
  { op: /^postRefund$/, status: 400, field: /^refundId$/, message: /required for a partial refund/, why: "a rule across fields of the generic refund (its schema's refine), which adapters/generic/schema.ts does not state" },
  { op: /^listTransactions$/, status: 400, field: /^customer$/, message: /not a phone number, an email or a card serial/, why: 'whether text is a phone number is the numbering plan' },
  { op: /^listTransactions$/, status: 400, field: /^merchantId$/, message: /is required with customer/, why: "a rule across two parameters that depends on the token: the bridge's operator names the merchant a customer search is scoped to (a merchant's token is scoped already)" },
  { op: /^listTransactions$/, status: 400, field: /^cursor$/, why: 'a cursor is a nextCursor the bridge gave (opaque), and is given instead of page: a rule across two parameters' },
  { op: /^listTransactions$/, status: 400, field: /^(orderId|refundId)$/, message: /more than 1,000/, why: 'how many ids share a start is the ledger’s data' },
  { op: /^reconcileReport$/, status: 400, field: /^(from|to)$/, message: /2000-01-01 or later|later than now|must be after from|at most \d+ days/, why: 'the range is judged against now and across from and to' },
  { op: /^runBackfill$/, status: 400, field: /^(since|until)$/, message: /later than now|must be after since/, why: 'the window is judged against now and across since and until' },
  { op: /^runBackfill$/, status: 422, code: 'backfill_not_possible', why: "whether the merchant has an account on the POS is the ledger's data" },
  { op: /^(createMerchant|updateMerchant)$/, status: 400, field: /^loyalty\.appToken$/, message: /refused this app token/, why: 'whether a token is an install of the app is the loyalty service’s to say' },
  { op: /^postToastLoyalty$/, status: 400, why: "Toast's own protocol: whether the restaurant and key its headers name are a merchant's is the ledger's data, and the body is Toast's LoyaltyTransaction (its OpenAPI), read by the Toast adapter" },
  { op: /^postLookup$/, status: 400, field: /^phone$/, why: 'whether text is a phone number is the numbering plan (libphonenumber), which no pattern states' },
  { op: /^postLookup$/, status: 400, field: /^email$/, message: /not an email address/, why: 'an email is checked after parsing, as the generic payload\'s customer is' },
  { op: /^(bulkAction|previewBulkAction)$/, status: 400, field: /^filter$/, message: /matches \d+ records/, why: 'how many records a filter matches is the ledger’s data' },
];

const REFUSED = new Set([400, 415, 422]);

let h: Harness;
let served: Json;

beforeAll(async () => {
  h = await startHarness({ env: { POS_TOKEN }, overrides: { secretsKey: randomBytes(32).toString('base64') } });
  served = (await request(h.bridge.url).get('/openapi.json')).body as Json;
});
afterAll(async () => {
  await h.close();
});

/** fast-check arbitraries of values valid by the served document's schemas (the subset of JSON Schema it uses). */
class Values {
  constructor(private readonly components: Record<string, Json>) {}

  resolve(schema: Json): Json {
    let resolved = schema;
    while (resolved.$ref) {
      const { $ref, ...rest } = resolved;
      resolved = { ...this.components[($ref as string).split('/').pop()!], ...rest };
    }
    return resolved;
  }

  of(schema: Json, mode: Mode): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    const arb = this.#of(s, mode);
    return s.not ? arb.filter((value) => !('const' in s.not) || value !== s.not.const) : arb;
  }

  #of(s: Json, mode: Mode): fc.Arbitrary<unknown> {
    if ('const' in s) return fc.constant(s.const);
    if (s.enum) return mode === 'random' ? fc.constantFrom(...(s.enum as unknown[])) : fc.constant(s.enum[0]);
    if (s.type === 'object' || s.properties) return this.#object(s, mode);
    if (s.anyOf && s.type === undefined) {
      const branches = (s.anyOf as Json[]).map((branch) => this.of(branch, mode));
      return mode === 'random' ? fc.oneof(...branches) : branches[0]!;
    }
    const types = (Array.isArray(s.type) ? s.type : [s.type]) as string[];
    const arbs = types.map((type) => this.#typed(type, s, mode));
    return arbs.length === 1 ? arbs[0]! : fc.oneof(...arbs);
  }

  #typed(type: string, s: Json, mode: Mode): fc.Arbitrary<unknown> {
    switch (type) {
      case 'string':
        return this.#string(s, mode);
      case 'integer':
        return fc.integer({ min: s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : -1000), max: s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : 1_000_000) });
      case 'number':
        return fc.double({
          min: s.minimum ?? s.exclusiveMinimum ?? -1e6,
          max: s.maximum ?? s.exclusiveMaximum ?? 1e6,
          minExcluded: s.exclusiveMinimum !== undefined,
          maxExcluded: s.exclusiveMaximum !== undefined,
          noNaN: true,
          noDefaultInfinity: true,
        });
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array':
        return fc.array(this.of(s.items ?? {}, mode), { minLength: s.minItems ?? 0, maxLength: mode === 'minimal' ? (s.minItems ?? 0) : Math.min(s.maxItems ?? 3, 3) });
      default:
        throw new Error(`no values for type ${type}`);
    }
  }

  #string(s: Json, mode: Mode): fc.Arbitrary<string> {
    const day = 86_400_000;
    // Times from a year ago to a minute ago in the minimal and full requests; any time in the random ones.
    const span = mode === 'random' ? { min: new Date('1990-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z') } : { min: new Date(Date.now() - 365 * day), max: new Date(Date.now() - 60_000) };
    const dates = fc.date({ ...span, noInvalidDate: true });
    if (s.format === 'date') return dates.map((d) => d.toISOString().slice(0, 10));
    if (s.format === 'date-time') {
      return fc.tuple(dates, fc.constantFrom('Z', '+02:00', '-05:30', '+00:00')).map(([d, offset]) => {
        if (offset === 'Z') return d.toISOString();
        const shift = (offset.startsWith('-') ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4))) * 60_000;
        return `${new Date(d.getTime() + shift).toISOString().slice(0, 19)}${offset}`;
      });
    }
    const min = s.minLength ?? 0;
    const max = s.maxLength ?? 40;
    if (s.pattern) {
      const pattern = new RegExp(s.pattern);
      // A long minimum (a key of 24 characters or more) is seldom met by text made from the pattern
      // alone, whose repetitions are short: such text is made long first, then held to the pattern.
      if (min > 8) return fc.string({ minLength: min, maxLength: Math.max(min, Math.min(max, 40)) }).filter((text) => pattern.test(text));
      return fc.stringMatching(pattern).filter((text) => text.length >= min && text.length <= max);
    }
    return fc.string({ minLength: min, maxLength: Math.min(max, 40), ...(mode === 'random' ? { unit: 'grapheme' as const } : {}) });
  }

  #object(s: Json, mode: Mode): fc.Arbitrary<Record<string, unknown>> {
    const properties = (s.properties ?? {}) as Record<string, Json>;
    const required = new Set<string>(s.required ?? []);
    const excluded = new Set<string>();
    // Rules across fields stated as lists of required fields: oneOf (exactly one), anyOf (at least one, the first list taken).
    const oneOf = ((s.oneOf ?? []) as Json[]).filter((b) => b.required && Object.keys(b).length === 1);
    const anyOf = ((s.anyOf ?? []) as Json[]).filter((b) => b.required && Object.keys(b).length === 1);
    for (const names of anyOf.slice(0, 1).map((b) => b.required as string[])) for (const name of names) required.add(name);
    const build = (choice: number) => {
      const chosen = new Set(required);
      oneOf.forEach((branch, i) => (branch.required as string[]).forEach((name) => (i === choice ? chosen.add(name) : excluded.add(name))));
      const keys = Object.keys(properties).filter((key) => !excluded.has(key) || chosen.has(key));
      const model = Object.fromEntries(keys.map((key) => [key, this.of(properties[key]!, mode)]));
      const optional = keys.filter((key) => !chosen.has(key));
      if (mode === 'minimal') return fc.record(Object.fromEntries(keys.filter((key) => chosen.has(key)).map((key) => [key, model[key]!])));
      if (mode === 'full') return fc.record(model);
      return fc.record(model, { requiredKeys: keys.filter((key) => chosen.has(key) || !optional.includes(key)) });
    };
    if (oneOf.length === 0) return build(-1);
    return mode === 'random' ? fc.integer({ min: 0, max: oneOf.length - 1 }).chain(build) : build(0);
  }
}

interface Operation {
  method: (typeof METHODS)[number];
  path: string;
  operation: Json;
}

interface Made {
  path: string;
  query: Record<string, string>;
  body?: unknown;
}

/**
 * A request of the operation from its documented parameters and body. The POS routes take the
 * generic payload, the one the document states (any other POS's is its vendor's own object).
 */
function requests(values: Values, { path, operation }: Operation, mode: Mode): fc.Arbitrary<Made> {
  const parameters = (operation.parameters ?? []) as Json[];
  const pos = /^\/v1\/(checkouts|refunds)\//.test(path);
  const param = (p: Json) => (pos && p.name === 'pos' ? fc.constant('generic') : values.of(p.schema, mode));
  const pathParams = fc.record(Object.fromEntries(parameters.filter((p) => p.in === 'path').map((p) => [p.name as string, param(p)])));
  // Minimal: the required parameters only (fc.record would add optional ones at random); full: all; random: any.
  const queryParams = parameters.filter((p) => p.in === 'query' && (mode !== 'minimal' || p.required));
  const query = fc.record(
    Object.fromEntries(queryParams.map((p) => [p.name as string, param(p)])),
    { requiredKeys: mode === 'full' ? queryParams.map((p) => p.name) : queryParams.filter((p) => p.required).map((p) => p.name) },
  );
  const media = operation.requestBody?.content?.['application/json'];
  const bodySchema = media ? (pos ? media.schema.anyOf[0] : media.schema) : undefined;
  const body = bodySchema ? (operation.requestBody.required || mode !== 'minimal' ? values.of(bodySchema, mode) : fc.constant(undefined)) : fc.constant(undefined);
  return fc.record({ pathParams, query, body }).map(({ pathParams: p, query: q, body: b }) => ({
    path: path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(p[name]))),
    query: Object.fromEntries(Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)])),
    ...(b === undefined ? {} : { body: b }),
  }));
}

async function send({ method, operation }: Operation, made: Made) {
  const security = (operation.security ?? []) as Json[];
  let req = request(h.bridge.url)[method](`${made.path}${Object.keys(made.query).length ? `?${new URLSearchParams(made.query)}` : ''}`);
  if (security.some((s) => 'adminToken' in s)) req = req.set('authorization', `Bearer ${ADMIN_TOKEN}`);
  if (security.some((s) => 'posToken' in s)) req = req.set('authorization', `Bearer ${POS_TOKEN}`);
  if (made.body !== undefined) req = req.set('content-type', 'application/json').send(JSON.stringify(made.body));
  return req;
}

/** Why a refusal is one the document cannot state, or undefined. */
function notStatable(operationId: string, status: number, body: Json): string | undefined {
  const error = (body?.error ?? {}) as Json;
  const issues = ((error.issues ?? []) as Json[]).filter((issue) => !/^and \d+ more/.test(issue.message));
  const match = (rule: (typeof NOT_STATABLE)[number], issue?: Json) =>
    rule.op.test(operationId) && rule.status === status && (!rule.code || rule.code === error.code) && (!rule.field || rule.field.test(issue?.field ?? '')) && (!rule.message || rule.message.test(issue?.message ?? error.message ?? ''));
  if (issues.length === 0) return NOT_STATABLE.find((rule) => match(rule))?.why;
  // Each issue named must be one the document cannot state.
  const whys = issues.map((issue) => NOT_STATABLE.find((rule) => match(rule, issue))?.why);
  return whys.every(Boolean) ? whys[0] : undefined;
}

describe('requests generated from /openapi.json', () => {
  const operations = (): Operation[] =>
    Object.entries(served.paths as Json).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((method) => ({ method, path, operation: item[method] as Json })));

  it('every operation is exercised, and no request the document allows is refused for a reason it could state', async () => {
    const values = new Values(served.components.schemas);
    const violations: string[] = [];
    const answered = new Map<string, Set<number>>();
    for (const op of operations()) {
      const id = op.operation.operationId as string;
      const made = [
        ...fc.sample(requests(values, op, 'minimal'), { numRuns: 1, seed: SEED }),
        ...fc.sample(requests(values, op, 'full'), { numRuns: 1, seed: SEED }),
        ...fc.sample(requests(values, op, 'random'), { numRuns: RANDOM_RUNS, seed: SEED }),
      ];
      for (const one of made) {
        const res = await send(op, one);
        answered.set(id, (answered.get(id) ?? new Set()).add(res.status));
        if (res.status >= 500 || (REFUSED.has(res.status) && !notStatable(id, res.status, res.body))) {
          violations.push(`${op.method.toUpperCase()} ${one.path} ${JSON.stringify(one.query)} ${JSON.stringify(one.body)?.slice(0, 300)} → ${res.status} ${JSON.stringify(res.body?.error ?? res.text).slice(0, 400)}`);
        }
      }
    }
    expect(violations).toEqual([]);
    // The generated requests reached every operation's own code: each answered something besides a refusal of its input,
    // but those whose every valid request depends on what no document states: a range around now, an install's app token,
    // a Toast restaurant and its key (Toast's own headers).
    const onlyRefused = [...answered].filter(([, statuses]) => [...statuses].every((s) => REFUSED.has(s))).map(([id]) => id);
    expect(onlyRefused.sort()).toEqual(['createMerchant', 'postToastLoyalty', 'reconcileReport']);
    if (process.env.SPEC_REQUESTS_VERBOSE) console.log([...answered].map(([id, statuses]) => `${id}: ${[...statuses].sort().join(' ')}`).join('\n'));
  }, 240_000);
});
