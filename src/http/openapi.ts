/**
 * The bridge's public interface (bridge-contract.md) as an OpenAPI 3.1 document, served at
 * /openapi.json, generated from the route table the router mounts (`route.ts`): every path and
 * method it serves, and no other. Every schema in it is generated from the zod schema the bridge
 * itself parses or answers with (`z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 takes it):
 * path parameters, queries and bodies on their input side (what a client sends, before transforms
 * and defaults), stated as precisely as the parsers accept them (`json-schema.ts`); answers from
 * `schemas.ts`. Every status a route can answer is listed: its own, those of the middleware its
 * access and its body put in front of it, and Node's server (408).
 */
import { z } from 'zod';
import { RETRY_AFTER_SECONDS, SHED_PATHS } from './load-shedding.js';
import { answerSide, Currency, precise, statedText, type InputContext, type JsonSchema } from './json-schema.js';
import { isAdmin, TAGS, type AnswerSpec, type Named, type Route, type SharedAnswer, type Shown } from './route.js';
import * as S from './schemas.js';

/** The answers' schemas (and their parts used more than once), each emitted once under components.schemas; request bodies are named by their routes. */
export const COMPONENT_SCHEMAS = {
  LedgerStatus: S.LedgerStatus,
  Currency,
  Check: S.Check,
  AccrualResult: S.AccrualResult,
  FieldIssue: S.FieldIssue,
  Answer: S.PosAnswer,
  Error: S.ErrorEnvelope,
  RecordSummary: S.RecordSummary,
  RecordDetail: S.RecordDetail,
  Evidence: S.EvidenceAnswer,
  KeptPayload: S.KeptPayload,
  TransactionList: S.TransactionList,
  ReconcileReport: S.ReconcileReport,
  ThreeWayReport: S.ThreeWayReport,
  DeadLetter: S.DeadLetter,
  DeadLetterList: S.DeadLetterList,
  WebhookResult: S.WebhookResult,
  WebhookAnswer: S.WebhookAnswer,
  ReplayAnswer: S.ReplayAnswer,
  ReplayFailure: S.ReplayFailure,
  DeadLetterSummary: S.DeadLetterSummary,
  ActionAllowed: S.ActionAllowed,
  WhoAmI: S.WhoAmI,
  AttentionAnswer: S.AttentionAnswer,
  BulkAnswer: S.BulkAnswer,
  AuditList: S.AuditList,
  Health: S.Health,
  Readiness: S.Readiness,
  MerchantView: S.MerchantView,
  MerchantWithTokens: S.MerchantWithTokens,
  MerchantList: S.MerchantList,
  BackfillAnswer: S.BackfillAnswer,
  BackfillStatusList: S.BackfillStatusList,
  ToastLoyaltyAnswer: S.ToastLoyaltyAnswer,
  LookupAnswer: S.LookupAnswer,
} satisfies Record<string, z.ZodType>;

const REQUEST_ID = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };
const json = (schema: object) => ({ 'application/json': { schema } });
const ERROR = { $ref: '#/components/schemas/Error' };

/** Shared answers, referred to from the operations that can give them. */
const RESPONSES: Record<SharedAnswer, object> = {
  Unauthorized: {
    description: 'The bearer token is missing or wrong (the same answer either way), with a WWW-Authenticate: Bearer challenge (RFC 6750); nothing of the body was read.',
    headers: { 'WWW-Authenticate': { description: 'Bearer realm="loyalty-bridge admin" or "loyalty-bridge pos".', schema: { type: 'string' } }, ...REQUEST_ID },
    content: json(ERROR),
  },
  RequestTimeout: {
    description: "Node's server cut off a client that took more than 10 s to send its headers or 30 s to send the whole request; no body, and the connection is closed.",
  },
  PayloadTooLarge: { description: 'The body is larger than the limit (BODY_LIMIT_BYTES on POS endpoints, 16 KB on /v1/admin); error.limitBytes says it.', content: json(ERROR) },
  UnsupportedMediaType: {
    description: 'The body is not JSON (POS endpoints, and admin requests that carry a body, need Content-Type application/json or application/*+json; a body with another type, or none, is refused unread and the action does not run), declares a charset other than UTF-8, or comes in a Content-Encoding other than identity, gzip, deflate and br.',
    content: json(ERROR),
  },
  InternalError: { description: 'A failure the bridge did not foresee (e.g. the ledger cannot write); the message is hidden, the log has it.', content: json(ERROR) },
  Overloaded: {
    description: `POS_MAX_IN_FLIGHT POS requests are being handled: refused before a byte of the body was read, nothing recorded or sent upstream. Send the same request again after Retry-After seconds (${RETRY_AFTER_SECONDS}).`,
    headers: { 'Retry-After': { description: 'Seconds to wait before sending again.', schema: { type: 'integer', minimum: 0 } }, ...REQUEST_ID },
    content: json(ERROR),
  },
};

/** What every /v1/admin request is checked for before its route reads it (src/http/body.ts adminInput). */
const ADMIN_INPUT =
  'Every /v1/admin request, before its route reads it: a query value (or name) holding a control character or bytes that are not UTF-8 is a 400 naming the parameter; a path id holding a control character is a 404; a body must be JSON (415), at most 16 KB (413), and a key given twice, NUL or a lone UTF-16 surrogate in it is a 400 naming the field. Errors repeat at most 200 characters of what was sent.';

/** The answers the middleware in front of a route gives, by its access and whether it reads a raw body; the route's own come on top. */
function middlewareAnswers(route: Route): Record<number, AnswerSpec | SharedAnswer> {
  const answers: Record<number, AnswerSpec | SharedAnswer> = {};
  if (isAdmin(route)) Object.assign(answers, { 401: 'Unauthorized', 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType' });
  if (route.access === 'globalAdmin') answers[403] = { description: "A merchant's admin token: only the global ADMIN_TOKEN manages merchants (forbidden).", json: S.ErrorEnvelope };
  if (route.access === 'pos') Object.assign(answers, { 401: 'Unauthorized', 403: { description: "The token's merchant is suspended (merchant_suspended); nothing of the body was read, nothing recorded.", json: S.ErrorEnvelope } });
  if (route.body !== undefined && 'raw' in route.body) Object.assign(answers, { 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType' });
  // app.ts sheds POSTs under these before any route runs.
  if (route.method === 'post' && SHED_PATHS.some((prefix) => route.path.startsWith(`${prefix}/`))) answers[503] = 'Overloaded';
  return { ...answers, 408: 'RequestTimeout', 500: 'InternalError' };
}

const SECURITY: Record<Route['access'], object[]> = { none: [], signed: [], pos: [{ posToken: [] }], admin: [{ adminToken: [] }], globalAdmin: [{ adminToken: [] }] };

const documents = new WeakMap<readonly Route[], Map<string, object>>();

/** Built once per route table and version: generating every schema is work not worth repeating for each request. */
export function openApiDocument(routes: readonly Route[], version: string): object {
  let byVersion = documents.get(routes);
  if (!byVersion) documents.set(routes, (byVersion = new Map()));
  let document = byVersion.get(version);
  if (!document) byVersion.set(version, (document = buildDocument(routes, version)));
  return document;
}

function buildDocument(routes: readonly Route[], version: string) {
  const components = new Components(routes);
  const paths: Record<string, Record<string, object>> = {};
  for (const route of routes) {
    if (paths[route.path]?.[route.method]) throw new Error(`${route.method.toUpperCase()} ${route.path} is declared twice`);
    (paths[route.path] ??= {})[route.method] = operation(route, components);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'loyalty-bridge',
      version,
      description:
        "Point-of-sale checkouts and refunds to the loyalty service's accrue and reverse, through a durable ledger. Every answer carries X-Request-Id; every error is one envelope, {\"error\": {\"code\", \"message\", …}, \"requestId\"}. Money from a POS is in major units; the bridge sends integer cents.",
    },
    servers: [{ url: '{scheme}://{host}', description: 'A bridge (npm start listens on PORT, 8080 by default).', variables: { scheme: { default: 'http', enum: ['http', 'https'] }, host: { default: 'localhost:8080' } } }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: `ADMIN_TOKEN (in sandbox, generated and printed once at start-up): every merchant's records; or a merchant's admin token: its own only. ${ADMIN_INPUT}` },
        posToken: { type: 'http', scheme: 'bearer', description: "POS_TOKEN (the default merchant), or a merchant's POS token: the token names the merchant. Direct POS posts run open only in sandbox or with POS_AUTH=off; without a token they are otherwise all refused." },
      },
      headers: { 'X-Request-Id': { description: "The caller's own plain X-Request-Id (letters, digits, . _ -, at most 128), or one made up.", schema: { type: 'string' } } },
      responses: RESPONSES,
      schemas: components.schemas(),
    },
  };
}

function operation(route: Route, components: Components): object {
  const context: InputContext = isAdmin(route) ? 'admin query' : 'plain';
  const body = route.body;
  const answers = { ...middlewareAnswers(route), ...route.answers };
  return {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    security: SECURITY[route.access],
    ...(route.params || route.query
      ? {
          parameters: [
            // A path id with a control character is a 404 (adminInput), as any id nothing has: not stated.
            ...Object.entries(route.params ?? {}).map(([name, param]) => ({ name, in: 'path', required: true, description: param.description, schema: inputSchema(param.schema, 'plain') })),
            ...(route.query ? queryParameters(route.query, context) : []),
          ],
        }
      : {}),
    ...(body
      ? {
          requestBody:
            'raw' in body
              ? { required: true, description: body.description, content: { 'application/json': { schema: components.shown(body.raw), ...(body.examples ? { examples: body.examples } : {}) } } }
              : { required: body.required, content: json(components.shown({ component: body.component, schema: body.schema })) },
        }
      : {}),
    responses: Object.fromEntries(
      Object.entries(answers)
        .sort(([a], [b]) => Number(a) - Number(b))
        .map(([status, answer]) => [status, typeof answer === 'string' ? { $ref: `#/components/responses/${answer}` } : response(answer, components)]),
    ),
  };
}

function response(answer: AnswerSpec, components: Components): object {
  const media = { ...(answer.json ? { 'application/json': answer.json } : {}), ...answer.media };
  return {
    description: answer.description,
    ...(Object.keys(media).length ? { content: Object.fromEntries(Object.entries(media).map(([type, schema]) => [type, { schema: components.shown(schema) }])) } : {}),
  };
}

/** Input side: a request is documented as sent; answers have no transforms, so both sides agree. */
const toJson = { io: 'input', override: precise } as const;

/** A path parameter's or query's schema, standalone: no `$schema`, and what its context refuses stated. */
function inputSchema(schema: z.ZodType, context: InputContext): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, toJson) as JsonSchema;
  statedText(rest, context);
  return rest;
}

/** The parameters of a query schema, one per property, as strictly as it is parsed. */
function queryParameters(schema: z.ZodType, context: InputContext): object[] {
  const { properties = {}, required = [] } = inputSchema(schema, context) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(properties).map(([name, { description, ...rest }]) => ({
    name,
    in: 'query',
    required: required.includes(name),
    ...(description ? { description } : {}),
    schema: rest,
  }));
}

/**
 * The document's named schemas: the answers' (COMPONENT_SCHEMAS) and those the routes name (their
 * bodies, the generic payload), each emitted once and referred to wherever it is used.
 */
class Components {
  readonly #byName = new Map<string, z.ZodType>(Object.entries(COMPONENT_SCHEMAS));
  readonly #names = new Map<z.ZodType, string>(Object.entries(COMPONENT_SCHEMAS).map(([name, schema]) => [schema, name]));
  /** Each component read as a request body, and what its route refuses besides its schema. */
  readonly #contexts = new Map<string, InputContext>();

  constructor(routes: readonly Route[]) {
    for (const route of routes) {
      const body = route.body;
      const context: InputContext = isAdmin(route) ? 'admin body' : 'plain';
      if (body && 'raw' in body) this.#collect(body.raw, context);
      else if (body) this.#add({ component: body.component, schema: body.schema }, context);
      for (const answer of Object.values(route.answers)) if (typeof answer !== 'string') for (const shown of [answer.json, ...Object.values(answer.media ?? {})]) if (shown) this.#collect(shown, 'plain');
    }
  }

  /** The JSON Schema of a shown schema: a named one by reference. */
  shown(shown: Shown): object {
    if (shown instanceof z.ZodType) {
      const name = this.#names.get(shown);
      return name ? { $ref: `#/components/schemas/${name}` } : inputSchema(shown, 'plain');
    }
    if ('component' in shown) return { $ref: `#/components/schemas/${shown.component}` };
    if ('anyOf' in shown) return { anyOf: shown.anyOf.map((s) => this.shown(s)) };
    return shown.jsonSchema;
  }

  schemas(): Record<string, JsonSchema> {
    const registry = z.registry<{ id: string }>();
    for (const [id, schema] of this.#byName) registry.add(schema, { id });
    const { schemas } = z.toJSONSchema(registry, { ...toJson, uri: (id) => `#/components/schemas/${id}` });
    // zod puts schemas used twice without a name under __shared: give them a name instead.
    if ('__shared' in schemas) throw new Error('a schema is shared without a name: add it to COMPONENT_SCHEMAS in openapi.ts');
    return Object.fromEntries(
      Object.entries(schemas).map(([id, schema]) => {
        // The document's dialect is OpenAPI 3.1's, and a component's name is its key: no `$schema` or `$id` on each.
        const { $schema: _dialect, $id: _id, ...rest } = schema as JsonSchema;
        const context = this.#contexts.get(id);
        if (context) statedText(rest, context);
        else answerSide(rest);
        return [id, rest];
      }),
    );
  }

  #collect(shown: Shown, context: InputContext): void {
    if (shown instanceof z.ZodType) return;
    if ('component' in shown) this.#add(shown, context);
    else if ('anyOf' in shown) for (const s of shown.anyOf) this.#collect(s, context);
  }

  #add({ component, schema }: Named, context: InputContext): void {
    const known = this.#byName.get(component);
    if (known && known !== schema) throw new Error(`two schemas are named ${component}`);
    const read = this.#contexts.get(component);
    if (read && read !== context) throw new Error(`${component} is read both as ${read} and as ${context}: name each its own`);
    this.#byName.set(component, schema);
    this.#names.set(schema, component);
    this.#contexts.set(component, context);
  }
}
