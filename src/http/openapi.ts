/**
 * The bridge's public interface (bridge-contract.md) as an OpenAPI 3.1 document, served at
 * /openapi.json. Every schema in it is generated from the zod schema the bridge itself parses or
 * answers with (`z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 takes it): request bodies and
 * queries on their input side (what a client sends, before transforms and defaults), answers from
 * `schemas.ts`. Every status each route can answer is listed, read from the code: the error
 * handler, the middleware in front of each route, and Node's server (408).
 */
import { z } from 'zod';
import { GenericCheckout, GenericRefund } from '../../adapters/generic/schema.js';
import { EXAMPLE_CHECKOUT } from '../../adapters/generic/example.js';
import { RETRY_AFTER_SECONDS } from './load-shedding.js';
import { posSettingDeclarations } from '../../adapters/index.js';
import { merchantSchemas } from '../merchants/admin.js';
import { AttentionQuery, AuditQuery, BULK_MAX, BulkBody, DeadLetterDetailQuery, DeadLetterQuery, ListQuery, PageQuery, ReasonBody, ReconcileScopedQuery, RecordDetailQuery, ResolveBody, RetryBody, ReverseBody, ScopeQuery } from './routes/admin.js';
import { BackfillAnswer, BackfillQuery, BackfillRequest, BackfillStatusList } from './routes/backfill.js';
import { ReconcileReportQuery, REPORT_PATH } from './routes/reports.js';
import { MAX_RANGE_DAYS } from '../reconcile/report.js';
import * as S from './schemas.js';
import { POS_NAMES, VENDOR_POS_NAMES } from '../pos/contract.js';


/** The merchant bodies as the bridge parses them, with the POS accounts of the adapters it registers. */
const merchantBodies = merchantSchemas(posSettingDeclarations);

/** Named schemas, each emitted once under components.schemas and referred to wherever it is used. */
export const COMPONENT_SCHEMAS = {
  LedgerStatus: S.LedgerStatus,
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
  RetryBody,
  ReasonBody,
  BulkBody,
  Health: S.Health,
  Readiness: S.Readiness,
  GenericCheckout,
  GenericRefund,
  ResolveBody,
  ReverseBody,
  MerchantView: S.MerchantView,
  MerchantWithTokens: S.MerchantWithTokens,
  MerchantList: S.MerchantList,
  MerchantCreate: merchantBodies.create,
  MerchantUpdate: merchantBodies.update,
  BackfillRequest,
  BackfillAnswer,
  BackfillStatusList,
} satisfies Record<string, z.ZodType>;
type SchemaName = keyof typeof COMPONENT_SCHEMAS;

type JsonSchema = Record<string, unknown>;

/**
 * zod's JSON Schema, made plain for readers: no 200-character pattern beside `format: date-time`,
 * which says the same, and no ±(2^53 − 1) on every integer (zod's safe-integer bounds: true of any
 * integer a JSON parser reads exactly, and noise on each of them).
 */
function plain(ctx: { jsonSchema: JsonSchema }): void {
  const schema = ctx.jsonSchema;
  if (schema.format === 'date-time') delete schema.pattern;
  if (schema.minimum === Number.MIN_SAFE_INTEGER) delete schema.minimum;
  if (schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
}

/** The document's dialect is OpenAPI 3.1's, and a component's name is its key: no `$schema` or `$id` on each. */
function stripIdentity(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, $id: _id, ...rest } = schema;
  return rest;
}

/** Input side: a request is documented as sent; answers have no transforms, so both sides agree. */
const toJson = { io: 'input', override: plain } as const;

function componentSchemas(): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(COMPONENT_SCHEMAS)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { ...toJson, uri: (id) => `#/components/schemas/${id}` });
  // zod puts schemas used twice without a name under __shared: give them a name above instead.
  if ('__shared' in schemas) throw new Error('a schema is shared without a name: add it to COMPONENT_SCHEMAS in openapi.ts');
  return Object.fromEntries(Object.entries(schemas).map(([id, schema]) => [id, stripIdentity(schema as JsonSchema)]));
}

const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });

/** The contract's own example (bridge-contract "The generic payload"); test/openapi.test.ts parses each example as the route does. */
export const EXAMPLES = {
  checkout: {
    generic: {
      summary: 'The generic payload',
      value: EXAMPLE_CHECKOUT,
    },
  },
  refund: {
    full: { summary: 'A full refund (generic)', value: { orderId: 'A-1001', refundId: 'R-1' } },
    amount: { summary: 'A partial refund of an amount (generic)', value: { orderId: 'A-1001', refundId: 'R-2', amount: '19.99' } },
    items: { summary: 'A partial refund of lines (generic)', value: { orderId: 'A-1001', refundId: 'R-3', items: [{ id: 'sku-1', quantity: 1, total: '19.99' }] } },
  },
};
const json = (schema: object) => ({ 'application/json': { schema } });
const errorResponse = (description: string) => ({ description, content: json(ref('Error')) });
/** A 404 or the like that is either an error, or the record an answer is about (an order nobody knows). */
const answerOrError = (description: string) => ({ description, content: json({ anyOf: [ref('Answer'), ref('Error')] }) });

/** The parameters of a query schema, one per property, as strictly as it is parsed. */
function queryParameters(schema: z.ZodObject): object[] {
  const { properties = {}, required = [] } = z.toJSONSchema(schema, toJson) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(properties).map(([name, { description, ...rest }]) => ({
    name,
    in: 'query',
    required: required.includes(name),
    ...(description ? { description } : {}),
    schema: rest,
  }));
}

const pathParameter = (name: string, description: string, values?: readonly string[]) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string', ...(values ? { enum: values } : {}) },
});

const REQUEST_ID = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };

/** Shared answers, referred to from the operations that can give them. */
const RESPONSES = {
  Unauthorized: {
    description: 'The bearer token is missing or wrong (the same answer either way), with a WWW-Authenticate: Bearer challenge (RFC 6750); nothing of the body was read.',
    headers: { 'WWW-Authenticate': { description: 'Bearer realm="loyalty-bridge admin" or "loyalty-bridge pos".', schema: { type: 'string' } }, ...REQUEST_ID },
    content: json(ref('Error')),
  },
  RequestTimeout: {
    description: "Node's server cut off a client that took more than 10 s to send its headers or 30 s to send the whole request; no body, and the connection is closed.",
  },
  PayloadTooLarge: { description: 'The body is larger than the limit (BODY_LIMIT_BYTES on POS endpoints, 16 KB on /v1/admin); error.limitBytes says it.', content: json(ref('Error')) },
  UnsupportedMediaType: {
    description: 'The body is not JSON (POS endpoints, and admin requests that carry a body, need Content-Type application/json or application/*+json; a body with another type, or none, is refused unread and the action does not run), declares a charset other than UTF-8, or comes in a Content-Encoding other than identity, gzip, deflate and br.',
    content: json(ref('Error')),
  },
  InternalError: { description: 'A failure the bridge did not foresee (e.g. the ledger cannot write); the message is hidden, the log has it.', content: json(ref('Error')) },
  Overloaded: {
    description: `POS_MAX_IN_FLIGHT POS requests are being handled: refused before a byte of the body was read, nothing recorded or sent upstream. Send the same request again after Retry-After seconds (${RETRY_AFTER_SECONDS}).`,
    headers: { 'Retry-After': { description: 'Seconds to wait before sending again.', schema: { type: 'integer', minimum: 0 } }, ...REQUEST_ID },
    content: json(ref('Error')),
  },
} as const;
const use = (name: keyof typeof RESPONSES) => ({ $ref: `#/components/responses/${name}` });

/** Direct POS posts, as opposed to webhooks (which their signature vouches for). */
const direct = {
  security: [{ posToken: [] }],
  parameters: [pathParameter('pos', 'The POS whose payload this is; any other name is a 404.', POS_NAMES)],
};
const BAD_PATH = 'a path parameter that is not valid percent-encoding (invalid_path)';
const SCOPE_INVALID = 'merchantId is not a merchant id (invalid_payload)';
/** What every /v1/admin request is checked for before its route reads it (src/http/body.ts adminInput). */
const ADMIN_INPUT =
  'Every /v1/admin request, before its route reads it: a query value (or name) holding a control character or bytes that are not UTF-8 is a 400 naming the parameter; a path id holding a control character is a 404; a body must be JSON (415), at most 16 KB (413), and a key given twice, NUL or a lone UTF-16 surrogate in it is a 400 naming the field. Errors repeat at most 200 characters of what was sent.';

/** What a POS post can be refused for besides its own outcome. */
const posErrors = {
  '401': use('Unauthorized'),
  '422': errorResponse(
    "The POS's API answered that the object the post names is not the merchant's (404, 410: pos_object_not_found, e.g. another seller's order or customer) or not one it reads (400: pos_object_refused). Nothing was recorded; posting it again changes nothing, so it is not a 5xx the POS retries.",
  ),
  '403': errorResponse("The token's merchant is suspended (merchant_suspended); nothing of the body was read, nothing recorded."),
  '408': use('RequestTimeout'),
  '413': use('PayloadTooLarge'),
  '415': use('UnsupportedMediaType'),
  '500': use('InternalError'),
  '503': use('Overloaded'),
};

const answers = {
  '200': { description: 'Final now: accrued, partially_accrued, reversed, reverse_failed, skipped or failed (the loyalty service refused it; retrying cannot help), or a repeat of an order or refund already recorded (its recorded outcome, nothing sent again).', content: json(ref('Answer')) },
  '202': { description: 'Recorded durably; delivery continues in the background (pending, in_doubt, reversal_pending). The answer comes within 2 s whatever the upstream does.', content: json(ref('Answer')) },
};

const adminCommon = {
  '401': use('Unauthorized'),
  '408': use('RequestTimeout'),
  '413': use('PayloadTooLarge'),
  '415': use('UnsupportedMediaType'),
  '500': use('InternalError'),
};
const admin = { security: [{ adminToken: [] }] };
/** Merchant management is the global ADMIN_TOKEN's alone. */
const merchantErrors = { ...adminCommon, '403': errorResponse("A merchant's admin token: only the global ADMIN_TOKEN manages merchants (forbidden).") };
const merchantIdPath = pathParameter('merchantId', 'The merchant id (lower-case letters, digits and dashes).');
const transactionId = pathParameter('transactionId', 'The transactionId, e.g. generic:A-1001 (percent-encode a / in it).');
const deadLetterId = pathParameter('id', 'The dead letter id, as error.deadLetterId named it.');

const operationsEndpoint = (operationId: string, summary: string, description: string, responses: object) => ({
  get: { operationId, tags: ['Operations'], summary, description, security: [], responses: { ...responses, '408': use('RequestTimeout'), '500': use('InternalError') } },
});

const documents = new Map<string, ReturnType<typeof buildDocument>>();

/** Built once per version: generating every schema is work not worth repeating for each request. */
export function openApiDocument(version: string) {
  let document = documents.get(version);
  if (!document) documents.set(version, (document = buildDocument(version)));
  return document;
}

function buildDocument(version: string) {
  return {
    openapi: '3.1.0',
    info: {
      title: 'loyalty-bridge',
      version,
      description:
        "Point-of-sale checkouts and refunds to the loyalty service's accrue and reverse, through a durable ledger. Every answer carries X-Request-Id; every error is one envelope, {\"error\": {\"code\", \"message\", …}, \"requestId\"}. Money from a POS is in major units; the bridge sends integer cents.",
    },
    servers: [{ url: '{scheme}://{host}', description: 'A bridge (npm start listens on PORT, 8080 by default).', variables: { scheme: { default: 'http', enum: ['http', 'https'] }, host: { default: 'localhost:8080' } } }],
    tags: [
      { name: 'POS', description: 'Checkouts and refunds posted by a POS or its integration.' },
      { name: 'Webhooks', description: "A POS's own webhook deliveries, verified by their signature." },
      { name: 'Transactions', description: 'Ledger records and what an operator can do with them.' },
      { name: 'Dead letters', description: 'Authentic webhook deliveries the bridge could not carry out, kept whole: retried by the bridge itself when the cause is transient, replayed by an operator otherwise.' },
      { name: 'Reports', description: 'Read-only comparisons of the POS, the ledger and the loyalty service.' },
      { name: 'Backfill', description: "Reading each merchant's POS accounts back from the POSes' own APIs, because webhooks are not guaranteed: what a lost webhook left out is recorded, what is recorded changes nothing." },
      { name: 'Merchants', description: 'The merchants one bridge serves (global ADMIN_TOKEN only): their loyalty app install, POS accounts and tokens.' },
      { name: 'Operations', description: 'Health, readiness, metrics and this document.' },
    ],
    paths: {
      '/v1/checkouts/{pos}': {
        post: {
          operationId: 'postCheckout',
          tags: ['POS'],
          summary: 'Record a closed order, then accrue',
          description:
            'Needs Authorization: Bearer POS_TOKEN, except in sandbox or with POS_AUTH=off (a private network). Records the order durably, then sends accrue; the same order again is answered from the ledger. A checkout with no phone, email or card serial is recorded as skipped.',
          ...direct,
          requestBody: {
            required: true,
            description:
              "generic: the generic payload below. square: an Order; shopify: an order; clover: an order; toast: an Order; loyverse: a receipt; each the POS's bare object, or its API's wrapper ({\"order\": …}, {\"receipts\": […]}).",
            content: { 'application/json': { schema: { anyOf: [ref('GenericCheckout'), { type: 'object', description: "The POS's own order object." }] }, examples: EXAMPLES.checkout } },
          },
          responses: {
            ...answers,
            '400': errorResponse(`The payload is not valid (invalid_payload: error.issues names each field and why), or ${BAD_PATH}. Nothing is recorded.`),
            '404': answerOrError('An unknown {pos} (unknown_pos), or a repeat of an order known only from a refund neither the ledger nor the loyalty service knew (its record).'),
            '502': errorResponse("The POS's API failed when the bridge fetched the customer the order names only by id (Square, Clover, Loyverse with an access token): a timeout, 429 or 5xx, or the bridge's own token refused (pos_api_failed)."),
            ...posErrors,
          },
        },
      },
      '/v1/refunds/{pos}': {
        post: {
          operationId: 'postRefund',
          tags: ['POS'],
          summary: 'Record a refund, then reverse (full) or reverse and accrue the remainder (partial)',
          description:
            "Needs Authorization: Bearer POS_TOKEN, except in sandbox or with POS_AUTH=off. The loyalty service's reverse is all-or-nothing: a partial refund reverses the whole accrual, then accrues what remains under a linked transactionId (remainder in the answer). A refund of a skipped order is answered 200 skipped and calls nothing. Refunds are measured tax and tip excluded. A Square PaymentRefund posted without its order: with SQUARE_ACCESS_TOKEN the bridge reads the order its order_id names (the return order) and measures it exactly; without the token it is measured against the sale as the ledger recorded it: all that was paid (Check + tax + tip) is a full refund, less is that share of the recorded Check (rounded half away from zero), noted on the record as measured without the return order. A Clover refund (or order) naming no merchant is read in the posting merchant's Clover account (CLOVER_MERCHANT_ID, or its pos.clover.merchantId), or the only Clover account the bridge has configured; otherwise it is a 400 naming merchant.id.",
          ...direct,
          requestBody: {
            required: true,
            description:
              "generic: the generic refund below (amount and/or items make it partial). square: a return order, a PaymentRefund with its order ({\"refund\": …, \"order\": …}), or a PaymentRefund alone; shopify: a refund; clover: a refund, or an order with its refunds; toast: an Order with refunds; loyverse: a refund receipt; each bare or in its API's wrapper.",
            content: { 'application/json': { schema: { anyOf: [ref('GenericRefund'), { type: 'object', description: "The POS's own refund object." }] }, examples: EXAMPLES.refund } },
          },
          responses: {
            ...answers,
            '400': errorResponse(`The payload is not valid (invalid_payload, each field named), or ${BAD_PATH}. Nothing is recorded.`),
            '404': answerOrError(
              'An unknown {pos} (unknown_pos); a partial refund, or a Square PaymentRefund measured from the ledger, of an order the ledger never saw (unknown_order: its remainder is unknown); or a refund of an order neither the ledger nor the loyalty service knows (the record, reverse_failed).',
            ),
            '409': errorResponse(
              "More than remains of the order (refund_exceeds_remainder: message and details in the order's currency major units, remainingCents in cents), or a Square PaymentRefund of more than was paid (conflict); an earlier refund's reversal was refused and waits for an operator; or the order kept changing while the refund was applied (conflict: send it again).",
            ),
            '502': errorResponse("The POS's API failed when the bridge read what the refund names (a Square PaymentRefund's order, with SQUARE_ACCESS_TOKEN): nothing was recorded; post it again (pos_api_failed)."),
            ...posErrors,
          },
        },
      },
      '/v1/webhooks/{pos}': {
        post: {
          operationId: 'postWebhook',
          tags: ['Webhooks'],
          summary: "Receive a POS's own webhook delivery",
          description:
            "The raw delivery as the POS sends it: its signature is verified over the exact bytes (Square, Shopify, Clover, Toast and Loyverse schemes; each POS's secret variable must be set outside sandbox), then each event is routed to checkout or refund, deduplicated on the POS's event identity; other events are acknowledged and ignored. Each event belongs to the merchant whose POS account it names (Square merchant_id, Shopify shop domain, Clover merchant id, Toast restaurant GUID, Loyverse merchant_id). An authentic delivery is never refused for what it carries: whatever the bridge cannot carry out now is kept whole as a dead letter and answered 202, its result dead_lettered with the deadLetterId and the reason, so that the POS neither delivers it again nor disables the subscription. A transient cause (the POS API timed out or answered 5xx or 429 when the bridge fetched what the delivery names) is the bridge's to retry: the result's retryAt says when it runs the letter again by itself (after 1, 2, 5, 10, 30, 60, 120, 240 × DEAD_LETTER_RETRY_BASE_MS, DEAD_LETTER_RETRY_MAX_ATTEMPTS runs at most). Any other cause (no access token, no merchant or a suspended one, an untranslatable payload, a refund of more than remains) waits for an operator's replay.",
          security: [],
          parameters: [pathParameter('pos', 'The POS that sent the delivery; generic has no webhooks (404), like any other name.', VENDOR_POS_NAMES)],
          requestBody: { required: true, description: "The POS's webhook body, byte for byte.", content: json({ type: 'object' }) },
          responses: {
            '200': { description: 'Every event handled, each outcome final now (or a duplicate, or ignored).', content: json(ref('WebhookAnswer')) },
            '202': {
              description:
                "Handled and kept: some action is still being delivered in the background, or was kept as a dead letter (dead_lettered, with deadLetterId, reason, issues for a payload that cannot be translated, and retryAt when the bridge retries it by itself). Since the bridge owns the retry of a POS API failure, that is a 202 too, not a 502: a 5xx would only make the POS deliver it again while the bridge already keeps it.",
              content: json(ref('WebhookAnswer')),
            },
            '400': errorResponse(`The request is broken before a delivery can be read from it: a body that is not what its Content-Encoding says (invalid_body_encoding), or ${BAD_PATH}. Nothing is kept.`),
            '401': errorResponse('The signature is missing, wrong, outside its replay window, or this POS has no signing secret configured.'),
            '404': errorResponse('An unknown {pos} or one without webhooks (unknown_pos).'),
            '408': use('RequestTimeout'),
            '413': use('PayloadTooLarge'),
            '415': use('UnsupportedMediaType'),
            '500': use('InternalError'),
            '503': use('Overloaded'),
          },
        },
      },
      '/v1/admin/transactions': {
        get: {
          operationId: 'listTransactions',
          tags: ['Transactions'],
          summary: "List ledger records, newest first: by status, POS, days, the start of an order or refund id (A-Z in any case), or a customer's phone, email or card serial (audited)",
          ...admin,
          parameters: queryParameters(ListQuery),
          responses: {
            '200': { description: 'One page of records: the Check sent and the results of each.', content: json(ref('TransactionList')) },
            '400': errorResponse('A query parameter is not valid, or unknown, or an order or refund id start more than 1,000 ids share (invalid_payload, each named).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/evidence': {
        get: {
          operationId: 'getEvidence',
          tags: ['Transactions'],
          summary: "The loyalty history around the record's uncertain call, read live (the merchant's API key): its cards, their operations, each marked a candidate or not and why, and what the bridge reads from them. Changes nothing",
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          responses: {
            '200': { description: 'The evidence (reading unknown, with why, when the history cannot be read).', content: json(ref('Evidence')) },
            '400': errorResponse(`${BAD_PATH}, ${SCOPE_INVALID}.`),
            '404': errorResponse("No such record (not_found), or not this merchant's."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/payload': {
        get: {
          operationId: 'getPayload',
          tags: ['Transactions'],
          summary: "The POS payload the record was created from (a direct post, a webhook delivery or its part, a replayed dead letter, an object backfill found); customers' phone numbers and emails masked unless unmask=true, which is audited",
          ...admin,
          parameters: [transactionId, ...queryParameters(RecordDetailQuery)],
          responses: {
            '200': { description: 'The payload as it arrived (masked unless unmasked).', content: json(ref('KeptPayload')) },
            '400': errorResponse(`${BAD_PATH}, ${SCOPE_INVALID}.`),
            '404': errorResponse('No such record, or none was kept for it (a remainder, a record from before payloads were kept, a delivery over 64 KiB): the message says which.'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/whoami': {
        get: {
          operationId: 'whoami',
          tags: ['Operators'],
          summary: 'Who this token is: its actor and scope',
          ...admin,
          responses: {
            '200': { description: 'The actor recorded for its actions, and what it sees.', content: json(ref('WhoAmI')) },
            '400': errorResponse('A query value holding a control character or bytes that are not UTF-8 (invalid_payload, the parameter named).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/attention': {
        get: {
          operationId: 'attention',
          tags: ['Operators'],
          summary: 'Everything that needs a person, oldest first',
          description:
            'Records in doubt (ambiguous: the history matches several), failed, partially accrued, reverse_failed (not closed), with deliveries of another amount not yet acknowledged, and open dead letters. Counts per kind and per merchant cover everything; items are bounded by limit.',
          ...admin,
          parameters: queryParameters(AttentionQuery),
          responses: {
            '200': { description: 'The queue.', content: json(ref('AttentionAnswer')) },
            '400': errorResponse('A query parameter is not valid, or unknown (invalid_payload, each named).'),
            '404': errorResponse("A merchant's admin token naming another merchant (not_found)."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/audit': {
        get: {
          operationId: 'audit',
          tags: ['Operators'],
          summary: 'Operator actions: who did what, when, why, to which record or letter',
          description: "Newest first. A merchant's admin token sees its own merchant's only.",
          ...admin,
          parameters: queryParameters(AuditQuery),
          responses: {
            '200': { description: 'One page of the audit trail.', content: json(ref('AuditList')) },
            '400': errorResponse('A query parameter is not valid, or unknown (invalid_payload, each named).'),
            '404': errorResponse("A merchant's admin token naming another merchant (not_found)."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/bulk': {
        post: {
          operationId: 'bulkAction',
          tags: ['Transactions'],
          summary: 'One action on several records, each with the actor and the reason',
          description: `Records named by ids, or every record a filter matches (at most ${BULK_MAX}: a filter matching more is a 400 naming its count). Each record goes through the same action and rules as alone; retry and resolve leave delivery to the worker. The answer names each id done or refused, with why.`,
          ...admin,
          requestBody: { required: true, content: json(ref('BulkBody')) },
          responses: {
            '200': { description: 'What was done to each.', content: json(ref('BulkAnswer')) },
            '400': errorResponse('The body is not valid (invalid_payload, each field named): no reason, neither or both of ids and filter, resolve without outcome, or a filter matching too many records.'),
            '404': errorResponse("A merchant's admin token naming another merchant (not_found)."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/close': {
        post: {
          operationId: 'closeTransaction',
          tags: ['Transactions'],
          summary: 'Close an orphan reverse_failed record: a refund of an order the loyalty service never knew',
          description: 'The record is kept whole in its status, marked closed with the actor and reason, and leaves the attention queue; recorded in the audit trail.',
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          requestBody: { required: true, content: json(ref('ReasonBody')) },
          responses: {
            '200': { description: 'Closed: the record as it stands.', content: json(ref('Answer')) },
            '400': errorResponse(`No reason, or the body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
            '404': errorResponse("No such record (not_found), or not this merchant's."),
            '409': errorResponse('Anything but an open orphan reverse_failed: the message says why (conflict).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/acknowledge': {
        post: {
          operationId: 'acknowledgeTransaction',
          tags: ['Transactions'],
          summary: 'Acknowledge a refusal (failed, partially accrued) or deliveries with another amount, settled outside the bridge',
          description: 'The record leaves the attention queue until it needs a person again (a later failure, another such delivery); recorded in the history and the audit trail. Doubts and reversals are settled by resolve, retry or close instead.',
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          requestBody: { required: true, content: json(ref('ReasonBody')) },
          responses: {
            '200': { description: 'Acknowledged: the record as it stands.', content: json(ref('Answer')) },
            '400': errorResponse(`No reason, or the body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
            '404': errorResponse("No such record (not_found), or not this merchant's."),
            '409': errorResponse('Nothing to acknowledge: no refusal or delivery with another amount waits for a person (conflict).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/dead-letters/{id}/dismiss': {
        post: {
          operationId: 'dismissDeadLetter',
          tags: ['Dead letters'],
          summary: 'Dismiss a dead letter with a reason: kept, never run again',
          ...admin,
          parameters: [deadLetterId],
          requestBody: { required: true, content: json(ref('ReasonBody')) },
          responses: {
            '200': { description: 'Dismissed: the letter, masked.', content: json(ref('DeadLetter')) },
            '400': errorResponse(`No reason, or the body is not valid (invalid_payload), or ${BAD_PATH}.`),
            '404': errorResponse('No such dead letter (not_found).'),
            '409': errorResponse('Resolved or dismissed already, or a run of it is under way (conflict, with deadLetterId).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}': {
        get: {
          operationId: 'getTransaction',
          tags: ['Transactions'],
          summary: "One record with every attempt, its history, and the actions allowed now (and why not); the customer's phone number and email masked unless unmask=true, which is audited",
          ...admin,
          parameters: [transactionId, ...queryParameters(RecordDetailQuery)],
          responses: {
            '200': { description: 'The record in full.', content: json(ref('RecordDetail')) },
            '400': errorResponse(`${BAD_PATH}, ${SCOPE_INVALID}.`),
            '404': errorResponse("No such record (not_found), or not this merchant's."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/retry': {
        post: {
          operationId: 'retryTransaction',
          tags: ['Transactions'],
          summary: 'Deliver again what provably did not happen',
          description: 'For a record the loyalty service refused, or one still pending: sends its accrue or reverse now.',
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          requestBody: { required: false, content: json(ref('RetryBody')) },
          responses: {
            ...answers,
            '400': errorResponse(`${BAD_PATH}, ${SCOPE_INVALID}.`),
            '404': answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
            '409': errorResponse('A retry could double: the last call may have reached the loyalty service (settle it with /resolve), a call is in flight, or some cards succeeded.'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/reverse': {
        post: {
          operationId: 'reverseTransaction',
          tags: ['Transactions'],
          summary: 'Reverse the whole accrual',
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          requestBody: { required: false, content: json(ref('ReverseBody')) },
          responses: {
            ...answers,
            '400': errorResponse(`The body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
            '404': answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
            '409': errorResponse('The record cannot be reversed in its state.'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/transactions/{transactionId}/resolve': {
        post: {
          operationId: 'resolveTransaction',
          tags: ['Transactions'],
          summary: 'Settle an in-doubt call by hand',
          description: 'Or, with outcome reversed, close a reverse_failed record whose failed cards were finished by hand.',
          ...admin,
          parameters: [transactionId, ...queryParameters(ScopeQuery)],
          requestBody: { required: true, content: json(ref('ResolveBody')) },
          responses: {
            ...answers,
            '400': errorResponse(`The body is not valid (invalid_payload, each field named), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
            '404': answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
            '409': errorResponse('Not in doubt (nor a failed reverse, for outcome reversed), or the operation is claimed by another record.'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/reconcile': {
        post: {
          operationId: 'reconcile',
          tags: ['Transactions'],
          summary: "One reconciliation pass over all open work now (one merchant's with merchantId, or a merchant's admin token)",
          description: 'Due and not-yet-due work alike; in-doubt calls are verified through the operations history where LOYALTY_API_KEY is set.',
          ...admin,
          parameters: queryParameters(ReconcileScopedQuery),
          responses: {
            '200': { description: 'The report; complete false: call again for the rest.', content: json(ref('ReconcileReport')) },
            '400': errorResponse('budgetMs is not a whole number from 0 to the maximum, merchantId is not a merchant id, or another parameter was given (invalid_payload).'),
            ...adminCommon,
          },
        },
      },
      [REPORT_PATH]: {
        get: {
          operationId: 'reconcileReport',
          tags: ['Reports'],
          summary: 'The three-way reconcile: POS ↔ ledger ↔ loyalty history for one merchant and range',
          description:
            "Lists the merchant's POS orders and refunds changed in the range, its ledger records and its operations history (read whole even while it moves), and classifies every difference with why and the next step. Reads only: nothing changes. CSV with Accept: text/csv.",
          ...admin,
          parameters: queryParameters(ReconcileReportQuery),
          responses: {
            '200': {
              description: 'The report (complete false: a POS account could not be listed, or the history kept moving; differences may be missing, never invented).',
              content: { ...json(ref('ThreeWayReport')), 'text/csv': { schema: { type: 'string', description: 'kind,transactionId,orderId,operationId,why,next; RFC 4180 quoting (also of every cell holding ; or a formula character), CRLF line ends; a formula character (= + - @ tab CR) that begins a cell, or a part of it after ; , or a line feed, is preceded by an apostrophe.' } } },
            },
            '400': errorResponse(`from or to is missing or not a day or a date-time with an offset, from is before 2000-01-01 or later than now, to is not after from, the range spans more than ${MAX_RANGE_DAYS} days, merchantId is not a merchant id, or another parameter was given (invalid_payload, the field named): a range the loyalty history cannot serve is the client's to fix, never a 502.`),
            '404': errorResponse("No such merchant, or another merchant's, asked with a merchant's admin token (not_found)."),
            '422': errorResponse("The merchant has no loyalty API key: its operations history cannot be read (history_unavailable)."),
            '502': errorResponse('The operations history could not be read: the loyalty service kept answering 429 past the back-off, or failed (history_unavailable).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/dead-letters': {
        get: {
          operationId: 'listDeadLetters',
          tags: ['Dead letters'],
          summary: 'List dead letters, newest first',
          ...admin,
          parameters: queryParameters(DeadLetterQuery),
          responses: {
            '200': { description: 'One page of dead letters.', content: json(ref('DeadLetterList')) },
            '400': errorResponse('A query parameter is not valid, or unknown (invalid_payload, each named).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/dead-letters/{id}': {
        get: {
          operationId: 'getDeadLetter',
          tags: ['Dead letters'],
          summary: "One dead letter, with the delivery kept whole (customers' phone numbers and emails masked unless unmask=true, which is audited)",
          ...admin,
          parameters: [deadLetterId, ...queryParameters(DeadLetterDetailQuery)],
          responses: {
            '200': { description: 'The dead letter.', content: json(ref('DeadLetter')) },
            '400': errorResponse(BAD_PATH),
            '404': errorResponse('No such dead letter (not_found).'),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/dead-letters/{id}/replay': {
        post: {
          operationId: 'replayDeadLetter',
          tags: ['Dead letters'],
          summary: 'Run a dead letter through again',
          description:
            "After fixing configuration, or once its order arrived; also a letter the bridge is retrying by itself, ahead of its schedule (a transient failure then keeps its schedule; the operator's run does not count among the automatic attempts). Its signature is not checked again: it was when the delivery arrived. What was carried out before is skipped (each event is remembered by its key), so a replay never accrues or reverses twice.",
          ...admin,
          parameters: [deadLetterId],
          requestBody: { required: false, content: json(ref('RetryBody')) },
          responses: {
            '200': { description: 'It went through: the dead letter is resolved, with the results.', content: json(ref('ReplayAnswer')) },
            '400': errorResponse(BAD_PATH),
            '404': errorResponse('No such dead letter (not_found).'),
            '409': errorResponse('The letter is resolved already (a resolved letter is never run again), or a run of it is under way (the bridge retrying it, on this or another instance): conflict, with deadLetterId.'),
            '422': { description: 'It failed again (replay_failed): error says why; the dead letter keeps the run among its replays, and its retry says whether the bridge will run it again by itself.', content: json(ref('ReplayFailure')) },
            ...adminCommon,
          },
        },
      },
      '/v1/admin/backfill': {
        post: {
          operationId: 'runBackfill',
          tags: ['Backfill'],
          summary: "One backfill pass now: read one merchant's account on one POS back for a window and record what its webhooks left out",
          description:
            "Lists every order and refund the POS changed in [since, until) from its own API (Square SearchOrders, Shopify orders.json?status=any, Clover orders, Toast ordersBulk, Loyverse receipts), page by page, and feeds each through the same path as its webhook: an order recorded already changes nothing (known), one missing is recorded and accrued (new, its history says backfill found it), one that cannot be translated is reported (refused). A 429 or 5xx from the POS is asked again (after its Retry-After, or backing off); a page still refused ends the pass (502) and the account's watermark stays where it was. The watermark moves to `until` when the window started at or before it. ADMIN_TOKEN names the merchant (merchantId, default `default`); a merchant's admin token reads its own accounts only.",
          ...admin,
          requestBody: { required: true, content: json(ref('BackfillRequest')) },
          responses: {
            '200': { description: 'The pass read the whole window: what it found.', content: json(ref('BackfillAnswer')) },
            '400': errorResponse('The body is not valid: pos missing or unknown, since or until not an ISO 8601 date-time or later than now (a watermark never moves past now), until not after since, an unknown field (invalid_payload, each named).'),
            '403': errorResponse('The merchant is suspended (merchant_suspended): nothing is read or recorded for it.'),
            '404': errorResponse("No such merchant, or a merchant's admin token named another (unknown_merchant, not_found)."),
            '409': errorResponse('A pass of this account is running (on this instance or another on the same ledger): ask again once it is done (conflict).'),
            '422': errorResponse('The merchant has no account or no access token on this POS, or the POS has no API to list orders from (backfill_not_possible).'),
            '502': errorResponse("The POS's API kept refusing a page (429, 5xx, a timeout) or refused the token: the pass stopped, what it recorded stays recorded, the watermark did not move (pos_api_failed)."),
            ...adminCommon,
          },
        },
        get: {
          operationId: 'getBackfill',
          tags: ['Backfill'],
          summary: "Every merchant's POS accounts backfill reads: watermark, last pass, its counts, next pass",
          ...admin,
          parameters: queryParameters(BackfillQuery),
          responses: {
            '200': { description: 'One row per merchant and POS account with an access token.', content: json(ref('BackfillStatusList')) },
            '400': errorResponse(`${SCOPE_INVALID}, or another parameter was given.`),
            '404': errorResponse("A merchant's admin token named another merchant (not_found)."),
            ...adminCommon,
          },
        },
      },
      '/v1/admin/merchants': {
        post: {
          operationId: 'createMerchant',
          tags: ['Merchants'],
          summary: 'Add a merchant from its loyalty app install',
          description:
            "Reads the install's settings from the loyalty service (resolve-credentials) to fill what the body leaves out, seals every secret with SECRETS_KEY, and answers with the merchant's POS and admin tokens, shown this once.",
          ...admin,
          requestBody: { required: true, content: json(ref('MerchantCreate')) },
          responses: {
            '201': { description: 'Created, with its tokens.', content: json(ref('MerchantWithTokens')) },
            '400': errorResponse('The body is not valid (invalid_payload, each field named), the id is "default", or the loyalty service refused the app token (loyalty.appToken named).'),
            ...merchantErrors,
            '409': errorResponse('The id, or one of its POS accounts, is taken (conflict); or SECRETS_KEY is not set (secrets_key_missing).'),
            '502': errorResponse("The loyalty service could not be asked for the install's settings (upstream_unavailable): nothing was stored; send it again."),
          },
        },
        get: {
          operationId: 'listMerchants',
          tags: ['Merchants'],
          summary: 'List merchants, oldest first',
          ...admin,
          parameters: queryParameters(PageQuery),
          responses: {
            '200': { description: 'One page of merchants, secrets masked.', content: json(ref('MerchantList')) },
            '400': errorResponse('A query parameter is not valid, or unknown (invalid_payload, each named).'),
            ...merchantErrors,
          },
        },
      },
      '/v1/admin/merchants/{merchantId}': {
        get: {
          operationId: 'getMerchant',
          tags: ['Merchants'],
          summary: 'One merchant, secrets masked',
          ...admin,
          parameters: [merchantIdPath],
          responses: {
            '200': { description: 'The merchant.', content: json(ref('MerchantView')) },
            '400': errorResponse(BAD_PATH),
            '404': errorResponse('No such merchant (not_found); the default merchant is built from the variables and not managed here.'),
            ...merchantErrors,
          },
        },
        patch: {
          operationId: 'updateMerchant',
          tags: ['Merchants'],
          summary: 'Change a merchant',
          description: 'Only what the body names changes; null removes an optional setting or a POS account. status suspended stops its posts (403), routes its webhooks to dead letters and sends nothing upstream for it; active resumes.',
          ...admin,
          parameters: [merchantIdPath],
          requestBody: { required: true, content: json(ref('MerchantUpdate')) },
          responses: {
            '200': { description: 'The merchant as changed.', content: json(ref('MerchantView')) },
            '400': errorResponse(`The body is not valid (invalid_payload, each field named), a new app token the loyalty service refused (loyalty.appToken), or ${BAD_PATH}.`),
            '404': errorResponse('No such merchant (not_found).'),
            '409': errorResponse('A POS account taken by another merchant, a change made meanwhile (send it again), or SECRETS_KEY not set.'),
            '502': errorResponse('A new app token could not be checked with the loyalty service (upstream_unavailable); nothing changed.'),
            ...merchantErrors,
          },
        },
      },
      '/v1/admin/merchants/{merchantId}/tokens': {
        post: {
          operationId: 'rotateMerchantTokens',
          tags: ['Merchants'],
          summary: 'Give a merchant new POS and admin tokens',
          description: 'The old ones stop working at once (on every instance within seconds); the new ones are shown this once.',
          ...admin,
          parameters: [merchantIdPath],
          responses: {
            '200': { description: 'The merchant, with its new tokens.', content: json(ref('MerchantWithTokens')) },
            '400': errorResponse(BAD_PATH),
            '404': errorResponse('No such merchant (not_found).'),
            '409': errorResponse('A change made meanwhile: send it again.'),
            ...merchantErrors,
          },
        },
      },
      '/v1/admin/merchants/{merchantId}/refresh': {
        post: {
          operationId: 'refreshMerchant',
          tags: ['Merchants'],
          summary: "Read the merchant's settings from the loyalty service again",
          description: 'resolve-credentials with its app token: fills the currency, phone region and POS accounts it has not been given explicitly.',
          ...admin,
          parameters: [merchantIdPath],
          responses: {
            '200': { description: 'The merchant as refreshed.', content: json(ref('MerchantView')) },
            '400': errorResponse(`The loyalty service refused its app token (loyalty.appToken), or ${BAD_PATH}.`),
            '404': errorResponse('No such merchant (not_found).'),
            '409': errorResponse('A change made meanwhile: send it again.'),
            '502': errorResponse('The loyalty service could not be asked (upstream_unavailable); nothing changed.'),
            ...merchantErrors,
          },
        },
      },
      '/healthz': operationsEndpoint('getHealth', 'Alive', 'The process answers; names this instance and its version.', { '200': { description: 'Alive.', content: json(ref('Health')) } }),
      '/readyz': operationsEndpoint('getReadiness', 'Ready to take checkouts', 'The ledger is reachable and can write, and the upstream is configured.', {
        '200': { description: 'Ready.', content: json(ref('Readiness')) },
        '503': { description: 'Not ready: checks says which and why.', content: json(ref('Readiness')) },
      }),
      '/metrics': operationsEndpoint('getMetrics', 'Prometheus metrics', 'Counts and timings, no customer data; keep it off the internet if counts are private.', {
        '200': { description: 'Prometheus text exposition.', content: { 'text/plain': { schema: { type: 'string' } } } },
      }),
      '/openapi.json': operationsEndpoint('getOpenApi', 'This document', 'The interface as OpenAPI 3.1.', { '200': { description: 'This document.', content: json({ type: 'object' }) } }),
    },
    components: {
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: `ADMIN_TOKEN (in sandbox, generated and printed once at start-up): every merchant's records; or a merchant's admin token: its own only. ${ADMIN_INPUT}` },
        posToken: { type: 'http', scheme: 'bearer', description: "POS_TOKEN (the default merchant), or a merchant's POS token: the token names the merchant. Direct POS posts run open only in sandbox or with POS_AUTH=off; without a token they are otherwise all refused." },
      },
      headers: { 'X-Request-Id': { description: "The caller's own plain X-Request-Id (letters, digits, . _ -, at most 128), or one made up.", schema: { type: 'string' } } },
      responses: RESPONSES,
      schemas: componentSchemas(),
    },
  };
}
