/** POS-facing endpoints: `/v1/checkouts/{pos}`, `/v1/refunds/{pos}`, `/v1/webhooks/{pos}`. */
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { z } from 'zod';
import { keptPayload, type Arrival } from '../../core/arrival.js';
import { UnauthorizedError } from '../../kernel/errors.js';
import { parseJsonBody } from '../../kernel/json-body.js';
import type { PosCatalogue } from '../../pos/contract.js';
import { rawBody, requireJson } from '../body.js';
import { toBridgeError } from '../error-handler.js';
import { answerOrError, BAD_PATH, error, named, OUTCOME_ANSWERS, route, type HttpDeps, type Route } from '../route.js';
import { WebhookAnswer } from '../schemas.js';
import { sendAnswer } from '../views.js';

/** Refunds of the generic checkout example, whole and in part: the document shows them (test/openapi.test.ts parses each as the route does). */
const REFUND_EXAMPLES = {
  full: { summary: 'A full refund (generic)', value: { orderId: 'A-1001', refundId: 'R-1' } },
  amount: { summary: 'A partial refund of an amount (generic)', value: { orderId: 'A-1001', refundId: 'R-2', amount: '19.99' } },
  items: { summary: 'A partial refund of lines (generic)', value: { orderId: 'A-1001', refundId: 'R-3', items: [{ id: 'sku-1', quantity: 1, total: '19.99' }] } },
};

const POS_OBJECT_REFUSED = error(
  "The POS's API answered that the object the post names is not the merchant's (404, 410: pos_object_not_found, e.g. another seller's order or customer) or not one it reads (400: pos_object_refused). Nothing was recorded; posting it again changes nothing, so it is not a 5xx the POS retries.",
);

/** Unknown POS first (404 without reading the body), then content type (415), then size (413). */
function readBody(deps: HttpDeps): RequestHandler[] {
  const knownPos: RequestHandler = (req, _res, next) => {
    deps.ingest.adapter(req.params.pos as string);
    next();
  };
  return [knownPos, requireJson(), rawBody(deps.bodyLimitBytes)];
}

/** What a record this request creates keeps of it: the request's id and the body as it came. */
function arrival(req: Request, via: 'pos' | 'webhook'): Arrival {
  const receivedAt = new Date().toISOString();
  const pos = req.params.pos as string;
  return { via, receivedAt, requestId: req.id, ...(via === 'pos' ? { payload: keptPayload(pos, req.rawBody ?? Buffer.alloc(0), receivedAt, req.headers) } : {}) };
}

const enumOf = (names: readonly string[]) => z.enum(names as [string, ...string[]]);

export function posRoutes(catalogue: PosCatalogue): Route[] {
  const posParam = { pos: { description: 'The POS whose payload this is; any other name is a 404.', schema: enumOf(catalogue.names) } };
  return [
    route({
      method: 'post',
      path: '/v1/checkouts/{pos}',
      operationId: 'postCheckout',
      tag: 'POS',
      summary: 'Record a closed order, then accrue',
      description:
        'Needs Authorization: Bearer POS_TOKEN, except in sandbox or with POS_AUTH=off (a private network). Records the order durably, then sends accrue; the same order again is answered from the ledger. A checkout with no phone, email or card serial is recorded as skipped.',
      access: 'pos',
      params: posParam,
      body: {
        raw: { anyOf: [named('GenericCheckout', catalogue.schemas.checkout), { jsonSchema: { type: 'object', description: "The POS's own order object." } }] },
        description:
          "generic: the generic payload below. square: an Order; shopify: an order; clover: an order; toast: an Order; loyverse: a receipt; each the POS's bare object, or its API's wrapper ({\"order\": …}, {\"receipts\": […]}).",
        examples: { generic: { summary: 'The generic payload', value: catalogue.examples.checkout } },
      },
      answers: {
        ...OUTCOME_ANSWERS,
        400: error(`The payload is not valid (invalid_payload: error.issues names each field and why), or ${BAD_PATH}. Nothing is recorded.`),
        404: answerOrError('An unknown {pos} (unknown_pos), or a repeat of an order known only from a refund neither the ledger nor the loyalty service knew (its record).'),
        422: POS_OBJECT_REFUSED,
        502: error("The POS's API failed when the bridge fetched the customer the order names only by id (Square, Clover, Loyverse with an access token): a timeout, 429 or 5xx, or the bridge's own token refused (pos_api_failed)."),
      },
      before: readBody,
      async handle({ req, res, deps }) {
        const answer = await deps.ingest.checkout(deps.ingest.adapter(req.params.pos as string), parseJsonBody(req.rawBody), req.posMerchant!, true, arrival(req, 'pos'));
        sendAnswer(res, answer);
      },
    }),
    route({
      method: 'post',
      path: '/v1/refunds/{pos}',
      operationId: 'postRefund',
      tag: 'POS',
      summary: 'Record a refund, then reverse (full) or reverse and accrue the remainder (partial)',
      description:
        "Needs Authorization: Bearer POS_TOKEN, except in sandbox or with POS_AUTH=off. The loyalty service's reverse is all-or-nothing: a partial refund reverses the whole accrual, then accrues what remains under a linked transactionId (remainder in the answer). A refund of a skipped order is answered 200 skipped and calls nothing. Refunds are measured tax and tip excluded. A Square PaymentRefund posted without its order: with SQUARE_ACCESS_TOKEN the bridge reads the order its order_id names (the return order) and measures it exactly; without the token it is measured against the sale as the ledger recorded it: all that was paid (Check + tax + tip) is a full refund, less is that share of the recorded Check (rounded half away from zero), noted on the record as measured without the return order. A Clover refund (or order) naming no merchant is read in the posting merchant's Clover account (CLOVER_MERCHANT_ID, or its pos.clover.merchantId), or the only Clover account the bridge has configured; otherwise it is a 400 naming merchant.id.",
      access: 'pos',
      params: posParam,
      body: {
        raw: { anyOf: [named('GenericRefund', catalogue.schemas.refund), { jsonSchema: { type: 'object', description: "The POS's own refund object." } }] },
        description:
          "generic: the generic refund below (amount and/or items make it partial). square: a return order, a PaymentRefund with its order ({\"refund\": …, \"order\": …}), or a PaymentRefund alone; shopify: a refund; clover: a refund, or an order with its refunds; toast: an Order with refunds; loyverse: a refund receipt; each bare or in its API's wrapper.",
        examples: REFUND_EXAMPLES,
      },
      answers: {
        ...OUTCOME_ANSWERS,
        400: error(`The payload is not valid (invalid_payload, each field named), or ${BAD_PATH}. Nothing is recorded.`),
        404: answerOrError(
          'An unknown {pos} (unknown_pos); a partial refund, or a Square PaymentRefund measured from the ledger, of an order the ledger never saw (unknown_order: its remainder is unknown); or a refund of an order neither the ledger nor the loyalty service knows (the record, reverse_failed).',
        ),
        409: error(
          "More than remains of the order (refund_exceeds_remainder: message and details in the order's currency major units, remainingCents in cents), or a Square PaymentRefund of more than was paid (conflict); an earlier refund's reversal was refused and waits for an operator; or the order kept changing while the refund was applied (conflict: send it again).",
        ),
        422: POS_OBJECT_REFUSED,
        502: error("The POS's API failed when the bridge read what the refund names (a Square PaymentRefund's order, with SQUARE_ACCESS_TOKEN): nothing was recorded; post it again (pos_api_failed)."),
      },
      before: readBody,
      async handle({ req, res, deps }) {
        const answer = await deps.ingest.refund(deps.ingest.adapter(req.params.pos as string), parseJsonBody(req.rawBody), req.posMerchant!, true, arrival(req, 'pos'));
        sendAnswer(res, answer);
      },
    }),
    route({
      method: 'post',
      path: '/v1/webhooks/{pos}',
      operationId: 'postWebhook',
      tag: 'Webhooks',
      summary: "Receive a POS's own webhook delivery",
      description:
        "The raw delivery as the POS sends it: its signature is verified over the exact bytes (Square, Shopify, Clover, Toast and Loyverse schemes; each POS's secret variable must be set outside sandbox), then each event is routed to checkout or refund, deduplicated on the POS's event identity; other events are acknowledged and ignored. Each event belongs to the merchant whose POS account it names (Square merchant_id, Shopify shop domain, Clover merchant id, Toast restaurant GUID, Loyverse merchant_id). An authentic delivery is never refused for what it carries: whatever the bridge cannot carry out now is kept whole as a dead letter and answered 202, its result dead_lettered with the deadLetterId and the reason, so that the POS neither delivers it again nor disables the subscription. A transient cause (the POS API timed out or answered 5xx or 429 when the bridge fetched what the delivery names) is the bridge's to retry: the result's retryAt says when it runs the letter again by itself (after 1, 2, 5, 10, 30, 60, 120, 240 × DEAD_LETTER_RETRY_BASE_MS, DEAD_LETTER_RETRY_MAX_ATTEMPTS runs at most). Any other cause (no access token, no merchant or a suspended one, an untranslatable payload, a refund of more than remains) waits for an operator's replay.",
      access: 'signed',
      params: { pos: { description: 'The POS that sent the delivery; generic has no webhooks (404), like any other name.', schema: enumOf(catalogue.webhookNames) } },
      body: { raw: { jsonSchema: { type: 'object' } }, description: "The POS's webhook body, byte for byte." },
      answers: {
        200: { description: 'Every event handled, each outcome final now (or a duplicate, or ignored).', json: WebhookAnswer },
        202: {
          description:
            "Handled and kept: some action is still being delivered in the background, or was kept as a dead letter (dead_lettered, with deadLetterId, reason, issues for a payload that cannot be translated, and retryAt when the bridge retries it by itself). Since the bridge owns the retry of a POS API failure, that is a 202 too, not a 502: a 5xx would only make the POS deliver it again while the bridge already keeps it.",
          json: WebhookAnswer,
        },
        400: error(`The request is broken before a delivery can be read from it: a body that is not what its Content-Encoding says (invalid_body_encoding), or ${BAD_PATH}. Nothing is kept.`),
        401: error('The signature is missing, wrong, outside its replay window, or this POS has no signing secret configured.'),
        404: error('An unknown {pos} or one without webhooks (unknown_pos).'),
      },
      before: readBody,
      async handle({ req, res, deps }) {
        // The signature is computed over these exact bytes, so nothing may parse or re-encode them first;
        // each part of the delivery is attributed to the merchant it names. The payload each record keeps
        // is the delivery's (or its part's, in a batch): ingest makes it.
        const outcome = await deps.ingest.webhook(req.params.pos as string, req.rawBody ?? Buffer.alloc(0), req.headers, req.rawHeaders, undefined, arrival(req, 'webhook'));
        const pos = outcome.pos;
        const handshake = outcome.results.length === 1 && outcome.results[0]!.key === 'handshake';
        if (!handshake) deps.metrics.webhookOutcomes.inc({ pos, outcome: 'verified', reason: '' });
        for (const result of outcome.results) {
          const counted = result.action === 'checkout' || result.action === 'refund' ? 'processed' : result.action;
          deps.metrics.webhookOutcomes.inc({ pos, outcome: counted, reason: '' });
        }
        res.status(outcome.inProgress ? 202 : 200).json({ pos: outcome.pos, results: outcome.results } satisfies WebhookAnswer);
      },
      onError: countRefusedWebhook,
    }),
  ];
}

/** A delivery refused before anything of it was carried out (bad signature, too large, not JSON): counted by reason, then answered by the error handler. */
function countRefusedWebhook(deps: HttpDeps): ErrorRequestHandler {
  /** A known POS's name, or `unknown`: a label's values stay the POS systems the bridge has. */
  const posLabel = (pos: string) => {
    try {
      return deps.ingest.adapter(pos).name;
    } catch {
      return 'unknown';
    }
  };
  return (error, req, _res, next) => {
    // Body-parser's own errors (a body over BODY_LIMIT_BYTES) as the answer will name them.
    const known = toBridgeError(error, req);
    if (known.status < 500) {
      const reason = known instanceof UnauthorizedError && known.reason ? known.reason : known.code;
      deps.metrics.webhookOutcomes.inc({ pos: posLabel(req.params.pos as string), outcome: 'refused', reason });
    }
    next(error);
  };
}
