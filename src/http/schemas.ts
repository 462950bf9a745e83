/**
 * The shapes of the bridge's answers, once, as zod schemas. `views.ts` and the routes build their
 * answers typed against them (`z.infer`), `openapi.ts` documents them (`z.toJSONSchema`), and the
 * tests validate real answers against what the document says: so the document cannot drift from
 * what the bridge sends. Objects are not closed (`additionalProperties`) in the document: the
 * contract lets the bridge add fields, and a client should ignore those it does not know.
 */
import { z } from 'zod';
import { LEDGER_STATUSES } from '../state/record.js';
import { AccrualResult as UpstreamResult, Check as UpstreamCheck } from '../loyalty/contract.js';
import { DIFFERENCE_KINDS } from '../reconcile/classify.js';
import { STATUS_DESCRIPTIONS } from './words.js';
import { RESOLVE_OUTCOMES } from '../core/transitions.js';

const timestamp = z.iso.datetime({ offset: true });
const cents = z.number().int();

/** The statuses with their words (http/words.ts, which the console shows too). */
export const LedgerStatus = z.enum(LEDGER_STATUSES).meta({
  description: LEDGER_STATUSES.map((status) => `${status}: ${STATUS_DESCRIPTIONS[status]}`).join(' '),
});

export const Check = UpstreamCheck.meta({ description: 'The Check as sent to the loyalty service: every money field in integer cents (the decimal amount × 100, whatever the currency).' });

export const AccrualResult = UpstreamResult.meta({ description: "One per card the loyalty service touched, as it answered; a 200 can hold results with isSuccess false. Fields the loyalty service adds are passed on." });

export const FieldIssue = z.object({
  field: z.string().meta({ description: 'Dotted path of the field, e.g. items.0.quantity; empty for the body itself.' }),
  message: z.string().meta({ description: 'What is missing or wrong, in words: "is required", "must be a string, got a number", "unknown field \\"x\\"".' }),
});

export const PosAnswer = z
  .object({
    transactionId: z.string().meta({ description: 'The upstream transactionId, derived from the POS ids: the same order gives the same id.' }),
    status: LedgerStatus,
    pos: z.string(),
    orderId: z.string(),
    repeat: z.boolean().meta({ description: 'The order or refund was already recorded: this is its recorded outcome, and nothing new was sent upstream.' }),
    refundId: z.string().optional(),
    remainder: z
      .object({ transactionId: z.string(), status: LedgerStatus })
      .optional()
      .meta({ description: "After a partial refund: the record that accrues what remains of the order." }),
    results: z.array(AccrualResult).optional(),
    errors: z.array(z.string()).optional().meta({ description: "The loyalty service's refusal reasons." }),
  })
  .meta({ description: 'What the bridge did with one order or refund.' });
export type PosAnswer = z.infer<typeof PosAnswer>;

export const ErrorEnvelope = z
  .object({
    error: z.object({
      code: z.string().meta({
        description:
          'invalid_payload, invalid_path, invalid_body, invalid_body_encoding, request_aborted (400); unauthorized (401); not_found, unknown_pos, unknown_order (404); conflict, refund_exceeds_remainder (409); payload_too_large (413); unsupported_media_type (415); pos_api_not_configured, replay_failed, pos_object_not_found, pos_object_refused (422); internal (500); pos_api_failed (502: a direct post needing the POS API, which failed); overloaded (503). A webhook is never answered with these for what it carries: what the bridge cannot carry out is kept as a dead letter and answered 202 (WebhookResult dead_lettered).',
      }),
      message: z.string(),
      issues: z.array(FieldIssue).optional().meta({ description: 'invalid_payload: each field and why, at most 20 listed, the rest counted.' }),
      deadLetterId: z.string().optional().meta({ description: 'conflict from a dead-letter replay: the letter (resolved already, or being run now).' }),
      limitBytes: z.number().int().optional().meta({ description: 'payload_too_large: the limit.' }),
      reason: z.string().optional().meta({ description: 'overloaded: why (in_flight).' }),
      retryAfterSeconds: z.number().int().optional().meta({ description: 'overloaded: as the Retry-After header.' }),
      remainingCents: cents.optional().meta({ description: 'refund_exceeds_remainder: what remains, in cents.' }),
      remaining: z.string().optional().meta({ description: "refund_exceeds_remainder: what remains, in the order's currency major units." }),
      refunded: z.string().optional().meta({ description: "refund_exceeds_remainder: the refund, in the order's currency major units." }),
      currency: z.string().optional().meta({ description: "refund_exceeds_remainder: the order's currency." }),
      orderId: z.string().optional(),
      transactionId: z.string().optional(),
    }),
    requestId: z.string().meta({ description: 'As the X-Request-Id header: a plain X-Request-Id the caller sent, or one made up.' }),
  })
  .meta({ description: 'Every error, in one envelope.' });
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

const Closed = z.object({ at: timestamp, actor: z.string(), reason: z.string() });

const Customer = z.object({ phone: z.string().optional(), email: z.string().optional(), serialNumber: z.string().optional(), firstName: z.string().optional(), lastName: z.string().optional() });

const PartialRefund = z.object({
  refundId: z.string(),
  refundedCents: cents,
  remainderTransactionId: z.string(),
  remainderCheck: Check,
  remainderInDoubtSince: timestamp.optional(),
});

export const RecordSummary = z
  .object({
    transactionId: z.string(),
    merchantId: z.string().meta({ description: 'Whose record: `default` for the merchant built from the variables.' }),
    status: LedgerStatus,
    pos: z.string(),
    orderId: z.string(),
    createdAt: timestamp,
    updatedAt: timestamp,
    check: Check.optional(),
    results: z.array(AccrualResult),
    errors: z.array(z.string()),
    accrual: z.object({
      state: z.enum(['none', 'skipped', 'pending', 'in_doubt', 'accrued', 'partially_accrued', 'failed']),
      settledBy: z.enum(['upstream', 'history', 'operator']).optional(),
      operationIds: z.array(z.number().int()),
      inDoubtSince: timestamp.optional(),
      countedWith: z
        .array(z.string())
        .optional()
        .meta({ description: 'Settled by counting: these accruals were in doubt with it and the history held as many unclaimed matching operations as them, so all happened; which operation is whose among them cannot be told (the same card and sum), so each claims one.' }),
    }),
    reversal: z.object({
      state: z.enum(['none', 'pending', 'in_doubt', 'reversed', 'failed', 'not_needed']),
      refundIds: z.array(z.string()),
      results: z.array(AccrualResult),
      inDoubtSince: timestamp.optional(),
      operationIds: z.array(z.number().int()).optional().meta({ description: "Its entries in the operations history, once seen there (claimed, as an accrual's operations are)." }),
      shape: z
        .object({ eventId: z.number().int(), sign: z.union([z.literal(1), z.literal(-1)]), learnedFrom: z.string(), at: timestamp })
        .optional()
        .meta({ description: 'How the history showed this confirmed reversal: what the bridge looks for when a reversal of this merchant is in doubt.' }),
      unproven: z
        .object({ at: timestamp, why: z.string() })
        .optional()
        .meta({ description: 'In doubt, and the history did not prove it: a person decides, shown the evidence.' }),
      countedWith: z
        .array(z.string())
        .optional()
        .meta({ description: 'Settled by counting: these reversals were in doubt with it and its card held as many unclaimed reversal entries of the sum as them, so all happened; which entry is whose cannot be told, so each claims one.' }),
    }),
    nextAttemptAt: timestamp.optional(),
    parentTransactionId: z.string().optional().meta({ description: 'On a record that accrues what a partial refund left: the original.' }),
    remainderTransactionId: z.string().optional().meta({ description: "Once a partial refund's remainder exists: its record." }),
    partialRefund: PartialRefund.optional(),
    closed: Closed.optional().meta({ description: 'Closed by an operator (an orphan reverse_failed: the loyalty service never knew the order). The status stays; the record leaves the attention queue.' }),
    acknowledged: Closed.optional().meta({ description: 'An operator acknowledged what the attention queue showed (a refusal, deliveries with another amount): out of the queue until the record needs a person again.' }),
    amountText: z.string().optional().meta({ description: "The Check's amount as a person reads it, by its currency's exponent (59.97 USD, 500 JPY): what the console shows, which does no arithmetic on amounts." }),
  })
  .meta({ description: 'One ledger record: the Check sent and the results, without the attempt log.' });
export type RecordSummary = z.infer<typeof RecordSummary>;

const Attempt = z.object({
  operation: z.enum(['accrue', 'reverse']),
  startedAt: timestamp,
  finishedAt: timestamp,
  request: z.unknown(),
  response: z.object({ status: z.number().int(), body: z.unknown() }).optional().meta({ description: 'Absent when no answer came (network error, timeout).' }),
  error: z.string().optional(),
});

const ChangedDelivery = z.object({ at: timestamp, amountCents: cents });

export const ActionAllowed = z
  .object({
    allowed: z.boolean(),
    why: z.string().optional().meta({ description: 'Why not, when not allowed: what the action would answer (409).' }),
    outcomes: z.array(z.enum(RESOLVE_OUTCOMES)).optional().meta({ description: 'resolve: the outcomes it accepts now.' }),
  })
  .meta({ description: 'Whether an operator action is allowed now, and why not.' });


export const RecordOrigin = z
  .object({
    via: z.enum(['pos', 'webhook', 'backfill', 'replay', 'remainder', 'operator', 'register']).meta({
      description:
        "pos: a direct post to /v1/checkouts|refunds/{pos}; webhook: a POS's webhook delivery; backfill: found reading the POS back (its webhook never came); replay: a dead letter run again; remainder: what a partial refund left; operator: an operator's reversal of an order the ledger never saw; register: the POS's register called while the sale was open (Toast's loyalty integration: POST /v1/toast/loyalty).",
    }),
    receivedAt: timestamp,
    requestId: z.string().optional().meta({ description: "The HTTP request's id (its X-Request-Id): the request log's line for it." }),
    webhookKey: z.string().optional().meta({ description: "The webhook event's key, as redeliveries are recognised by." }),
    deadLetterId: z.string().optional().meta({ description: 'The dead letter whose replay created it.' }),
    payload: z.boolean().meta({ description: 'The payload as it arrived is kept: GET /v1/admin/transactions/{transactionId}/payload.' }),
  })
  .meta({ description: 'How the order reached the bridge: the delivery or request that created the record.' });

export const EvidenceAnswer = z
  .object({
    transactionId: z.string(),
    merchantId: z.string(),
    question: z.enum(['accrual', 'reversal', 'none']).meta({ description: 'The call whose outcome is in question: an accrual or a reversal in doubt (or out now); none: its outcome is known, the operations around its last call are shown.' }),
    window: z.object({ from: timestamp, to: timestamp }).meta({ description: 'From when the call began (less the clock-skew margin) to now.' }),
    cards: z.array(z.object({ serialNumber: z.string(), balance: z.number().optional().meta({ description: 'After the latest operation shown.' }) })).meta({ description: "The cards the record names: those its accrual credited and those the customer's phone, email or card serial reach." }),
    operations: z.array(
      z.object({
        id: z.number().int(),
        at: timestamp,
        cardId: z.string(),
        eventId: z.number().int(),
        eventName: z.string().optional(),
        amount: z.number().optional(),
        purchaseSum: z.number().nullable().optional().meta({ description: 'Account-currency units, not cents (as the history gives it).' }),
        purchaseText: z.string().meta({ description: "purchaseSum as a person reads it, in the record's currency, read exactly from its text ('' when none)." }),
        balance: z.number().optional(),
        claimedBy: z.string().optional().meta({ description: "The record that claimed it (its accrual's or its reversal's)." }),
        mayBeOf: z
          .array(z.string())
          .optional()
          .meta({ description: 'Unclaimed: the records whose accrue or reverse is in doubt and could have made it (as the three-way report names them, kind in_doubt): theirs to settle, never a double to take back by hand.' }),
        candidate: z.boolean().meta({ description: 'It could settle the call in question, by the rules the bridge itself settles by.' }),
        why: z.string().meta({ description: 'Why it is, or is not, a candidate.' }),
        kind: z.enum(['accrual', 'reversal', 'other']).meta({ description: "What it is, read from the history's own fields (a reversal: the learned reversal shape, or a negative purchase sum), whatever the service's event name says." }),
        balanceBefore: z.number().optional().meta({ description: "The card's balance before it: balanceBefore + amount = balance." }),
      }),
    ),
    rivals: z
      .array(z.object({ transactionId: z.string(), operationIds: z.array(z.number().int()).meta({ description: "This record's candidate operations it could own as well." }) }))
      .meta({ description: 'The other records in doubt that could own the operations this record could own: the rivals of an ambiguity; empty where none stands.' }),
    reading: z.enum([...RESOLVE_OUTCOMES, 'ambiguous', 'unknown']).meta({ description: 'What the history shows, as the bridge reads it. The bridge settles accruals and reversals it proves by itself; a person decides the rest (resolve names no outcome by default).' }),
    why: z.string(),
    history: z.enum(['read', 'unreadable', 'not_configured']).meta({ description: 'Whether the operations were read: unreadable (the history failed) and not_configured (no API key) leave operations empty, which then says nothing about whether the call happened.' }),
    reversalShape: z
      .object({ eventId: z.number().int(), sign: z.union([z.literal(1), z.literal(-1)]), learnedFrom: z.string(), at: timestamp })
      .optional()
      .meta({ description: "How this merchant's loyalty service shows a reversal in its history, learned from one it confirmed (learnedFrom)." }),
  })
  .meta({ description: 'The loyalty history around a record\'s uncertain call, read live with the merchant\'s API key; reading it changes nothing.' });
export type EvidenceAnswer = z.infer<typeof EvidenceAnswer>;

export const KeptPayload = z
  .object({
    receivedAt: timestamp,
    pos: z.string(),
    headers: z.record(z.string(), z.string()).meta({ description: 'The headers processing reads (content type, event type and ids); never credentials or signatures.' }),
    body: z.string().meta({ description: 'As it arrived: UTF-8 text, or base64 when it is not (withheld while masked).' }),
    bodyEncoding: z.enum(['utf8', 'base64']),
    masked: z.boolean().meta({ description: "True when customers' phone numbers and emails in the body are masked (the default; ?unmask=true shows them, and is audited as unmask payload)." }),
  })
  .meta({ description: 'The POS payload a record was created from (a direct post, a webhook delivery or its part of a batch, a dead letter run again, an object backfill found).' });
export type KeptPayload = z.infer<typeof KeptPayload>;

export const AttentionItem = z.object({
  kind: z.enum(['in_doubt', 'ambiguous', 'held', 'failed', 'partially_accrued', 'reverse_failed', 'changed_repeats', 'dead_letter']),
  transactionId: z.string().optional(),
  deadLetterId: z.string().optional(),
  merchantId: z.string().meta({ description: 'Whose; (none) for a dead letter of no known merchant.' }),
  since: timestamp.meta({ description: 'Since when it has needed a person.' }),
  why: z.string(),
  status: LedgerStatus.optional(),
  pos: z.string().optional(),
  orderId: z.string().optional(),
});

export const RecordLead = z
  .object({
    needsPerson: z
      .array(z.object({ kind: AttentionItem.shape.kind, since: timestamp.meta({ description: 'Since when it has needed a person.' }), why: z.string() }))
      .meta({ description: "Each reason a person is needed now, as the attention queue words it for this merchant's case; empty when none." }),
    bridge: z
      .object({
        acts: z.boolean().meta({ description: 'False: the bridge will not move the record by itself (a person, or nothing, is left).' }),
        what: z.string().meta({ description: 'Acting: what it does next by itself. Not acting: why not ("the record is settled").' }),
        at: timestamp.optional().meta({ description: 'Not before then; absent: at its next pass.' }),
      })
      .meta({ description: 'What the bridge does next by itself, decided by the rules its worker follows.' }),
  })
  .meta({ description: "What a record's page leads with: why it needs a person, and whether the bridge will act itself, and when." });

const MoneyText = z.string().optional();
export const RecordMoneyText = z
  .object({
    tax: MoneyText,
    discount: MoneyText,
    tip: MoneyText,
    service: MoneyText,
    selections: z.array(z.object({ price: MoneyText, totalPrice: MoneyText })).meta({ description: "Each selection's, in the Check's order." }),
    partialRefunded: MoneyText,
    changedRepeats: z.object({ first: z.array(z.string()), latest: z.array(z.string()) }).optional(),
  })
  .meta({ description: "The record's other amounts as a person reads them (money.ts formatCents), beside the integer cents they show." });

export const RecordDetail = RecordSummary.extend({
  version: z.number().int(),
  lead: RecordLead,
  moneyText: RecordMoneyText,
  origin: RecordOrigin.optional().meta({ description: 'Where it came from; absent on records made before this was kept.' }),
  customer: Customer.optional(),
  inFlight: z.object({ operation: z.enum(['accrue', 'reverse']), startedAt: timestamp, owner: z.string() }).optional().meta({ description: 'A call to the loyalty service under way, and the instance making it.' }),
  rounds: z.number().int(),
  attempts: z.array(Attempt).meta({ description: 'Every request to the loyalty service: what was sent, what came back, when (the first and latest kept).' }),
  attemptsOmitted: z.number().int().optional(),
  history: z.array(
    z.object({
      at: timestamp,
      event: z.string(),
      from: LedgerStatus.optional(),
      to: LedgerStatus.optional(),
      detail: z.string().optional().meta({ description: "An operator's action: their reason." }),
      actor: z.string().optional().meta({ description: "An operator's action: who (admin, a name from ADMIN_TOKENS, merchant:<id>)." }),
      omitted: z.number().int().optional(),
    }),
  ),
  changedRepeats: z
    .object({ count: z.number().int(), first: z.array(ChangedDelivery), latest: z.array(ChangedDelivery) })
    .optional()
    .meta({ description: 'Deliveries of this order with another amount (a reopened check): counted, nothing sent.' }),
  actions: z.object({ retry: ActionAllowed, reverse: ActionAllowed, resolve: ActionAllowed, close: ActionAllowed, acknowledge: ActionAllowed, ask: ActionAllowed }).meta({ description: 'What an operator may do to this record now, decided by the same rules the actions enforce.' }),
  masked: z.boolean().meta({ description: "True when the customer's phone number and email, in customer and in the attempts' request and response bodies, are masked (the default; ?unmask=true shows them, and is audited as unmask record)." }),
}).meta({ description: 'One ledger record in full: customer, every attempt, the history of its status, and the actions allowed now.' });
export type RecordDetail = z.infer<typeof RecordDetail>;

const page = {
  total: z.number().int().meta({ description: 'How many match, counted up to 1000: past it totalCapped is true and total is 1000 (counting every match of millions would cost what the ledger holds).' }),
  totalCapped: z.literal(true).optional().meta({ description: 'More than total match.' }),
  page: z.number().int(),
  limit: z.number().int(),
};

export const TransactionList = z
  .object({ items: z.array(RecordSummary), ...page, nextCursor: z.string().optional().meta({ description: 'Pass as cursor for the next page (absent on the last page): keyset paging, which costs the same at any depth.' }) })
  .meta({ description: 'Records, newest first.' });
export type TransactionList = z.infer<typeof TransactionList>;

export const ReconcileReport = z
  .object({
    startedAt: timestamp,
    finishedAt: timestamp,
    examined: z.number().int(),
    complete: z.boolean().meta({ description: 'False when the time budget ended the pass before every open record was examined: call again for the rest.' }),
    fixed: z.array(z.object({ transactionId: z.string(), merchantId: z.string(), from: LedgerStatus, to: LedgerStatus, why: z.string() })),
    open: z.array(
      z.object({
        transactionId: z.string(),
        merchantId: z.string(),
        status: LedgerStatus,
        why: z.string(),
        settled: z.literal(true).optional().meta({ description: 'The bridge has settled it and will do nothing more (failed, partially_accrued, reverse_failed): only a person moves it. Absent: work the bridge still does, or a call in doubt.' }),
      }),
    ),
  })
  .meta({ description: 'What one reconciliation pass examined, fixed and left open, and why.' });
export type ReconcileReport = z.infer<typeof ReconcileReport>;

export const DeadLetter = z
  .object({
    id: z.string(),
    pos: z.string(),
    merchantId: z.string().optional().meta({ description: 'Whose delivery; absent when no merchant is known for it.' }),
    receivedAt: timestamp,
    lastReceivedAt: timestamp,
    deliveries: z.number().int().meta({ description: 'How often the POS delivered it.' }),
    reason: z.string(),
    reasonCode: z.string().optional().meta({ description: "The first cause's code (unknown_merchant, merchant_suspended, invalid_payload, pos_api_failed, pos_api_not_configured, …), as the dead-letter gauge labels it; absent on letters kept before it." }),
    issues: z.array(FieldIssue).optional(),
    headers: z.record(z.string(), z.string()).meta({ description: 'The headers processing reads (event type, ids); never credentials or signatures.' }),
    body: z.string().meta({ description: 'The delivery, byte for byte: UTF-8 text, or base64 when it is not.' }),
    bodyEncoding: z.enum(['utf8', 'base64']),
    replays: z
      .array(
        z.object({
          at: timestamp,
          outcome: z.string().meta({ description: 'processed: what each event came to; or failed: why.' }),
          by: z.enum(['operator', 'bridge']).optional().meta({ description: "Who ran it: an operator's replay, or the bridge by itself (a transient cause)." }),
          created: z.array(z.string()).optional().meta({ description: 'The checkouts this run recorded (their transactionIds; not repeats): each record names this letter as its origin.' }),
          actedOn: z.array(z.string()).optional().meta({ description: 'The records that existed and that this run acted on or matched (a refund reversing its order, a repeat of a recorded checkout).' }),
        }),
      )
      .meta({ description: 'Every run since it was kept, oldest first.' }),
    resolvedAt: timestamp.optional().meta({ description: 'Set when a run went through, or when an operator dismissed it; a resolved letter is never run again.' }),
    dismissed: Closed.optional().meta({ description: 'An operator dismissed it (nothing to carry out): kept whole, never run again.' }),
    masked: z.boolean().optional().meta({ description: "True when customer phone numbers and emails in the body are masked (the default; ?unmask=true shows them, and is audited). A base64 body is withheld while masked." }),
    actions: z.object({ replay: ActionAllowed, dismiss: ActionAllowed }).meta({ description: 'What an operator may do to this letter now, and why not: word for word the 409 the action would answer.' }),
    retry: z
      .object({
        transient: z
          .boolean()
          .meta({ description: "The latest cause may pass by itself (the POS API timed out, or answered 5xx or 429): the bridge runs the letter again on its own. False: a person must act (missing configuration such as an access token, an unknown or suspended merchant, a payload that cannot be translated), then replay it." }),
        attempts: z.number().int().meta({ description: 'Automatic runs made so far (DEAD_LETTER_RETRY_MAX_ATTEMPTS at most; then it waits for an operator).' }),
        nextAt: timestamp.optional().meta({ description: 'When the bridge runs it again by itself, after 1, 2, 5, 10, 30, 60, 120, 240 × DEAD_LETTER_RETRY_BASE_MS; absent when it will not (it waits for an operator, or is resolved).' }),
        claim: z
          .object({ owner: z.string().meta({ description: 'The bridge instance running it.' }), until: timestamp })
          .optional()
          .meta({ description: 'A run under way: no other instance or replay runs it until it is written, or until this time.' }),
      })
      .optional()
      .meta({ description: 'Who moves it on: absent on letters kept before the bridge ran any by itself (an operator).' }),
  })
  .meta({ description: 'An authentic webhook delivery the bridge could not carry out, kept whole: run again by the bridge when the cause is transient, otherwise by an operator.' });
export type DeadLetter = z.infer<typeof DeadLetter>;

export const DeadLetterSummary = DeadLetter.omit({ headers: true, body: true, bodyEncoding: true, masked: true, actions: true }).meta({ description: 'A dead letter without its delivery (no body, no headers): GET /v1/admin/dead-letters/{id} has them.' });

export const DeadLetterList = z.object({ items: z.array(DeadLetterSummary), ...page }).meta({ description: 'Dead letters, newest first, as summaries.' });
export type DeadLetterList = z.infer<typeof DeadLetterList>;

export const WebhookResult = z.object({
  key: z.string().meta({ description: "The POS's identity of the event or object: a delivery with a key already done is a duplicate." }),
  action: z.enum(['checkout', 'refund', 'ignored', 'dead_lettered']),
  merchantId: z.string().optional().meta({ description: 'The merchant the event was for, when not the default one.' }),
  deadLetterId: z.string().optional().meta({ description: 'dead_lettered: the letter that keeps the delivery (see /v1/admin/dead-letters/{id}).' }),
  duplicate: z.boolean().optional(),
  reason: z.string().optional().meta({ description: 'ignored, dead_lettered: why.' }),
  issues: z.array(FieldIssue).optional().meta({ description: 'dead_lettered for a payload that cannot be translated: each field and why.' }),
  retryAt: timestamp.optional().meta({ description: 'dead_lettered with a transient cause (the POS API timed out or answered 5xx/429): when the bridge runs it again by itself. Absent: it waits for an operator.' }),
  transactionId: z.string().optional(),
  status: LedgerStatus.optional(),
});

export const WebhookAnswer = z
  .object({ pos: z.string(), results: z.array(WebhookResult) })
  .meta({ description: 'What the bridge did with each event of one delivery; events it could not carry out are dead_lettered, each naming the dead letter that keeps it.' });
export type WebhookAnswer = z.infer<typeof WebhookAnswer>;

export const ReplayFailure = ErrorEnvelope.extend({
  deadLetter: DeadLetter,
  results: z.array(WebhookResult).optional(),
}).meta({ description: 'A replay that failed again (422, error.code replay_failed): the error envelope, the letter as kept (its replays record this run), and what each event came to.' });
export type ReplayFailure = z.infer<typeof ReplayFailure>;

export const WhoAmI = z
  .object({
    actor: z.string().meta({ description: 'admin (ADMIN_TOKEN), a name from ADMIN_TOKENS, or merchant:<id>: the actor recorded for this token\'s actions.' }),
    scope: z.enum(['global', 'merchant']),
    merchantId: z.string().optional().meta({ description: "scope merchant: the merchant whose data this token sees." }),
  })
  .meta({ description: 'Who the bearer token is.' });
export type WhoAmI = z.infer<typeof WhoAmI>;


export const AttentionAnswer = z
  .object({
    items: z.array(AttentionItem).meta({ description: 'Oldest first, at most limit.' }),
    counts: z.record(z.string(), z.number().int()).meta({ description: 'Per kind, over everything that needs a person (not only the items listed).' }),
    perMerchant: z.record(z.string(), z.number().int()),
    oldestSince: timestamp.optional(),
    total: z.number().int(),
  })
  .meta({ description: 'Everything that needs a person, oldest first.' });
export type AttentionAnswer = z.infer<typeof AttentionAnswer>;

export const BulkAnswer = z
  .object({
    done: z.array(z.string()).meta({ description: 'The ids acted on.' }),
    refused: z.array(z.object({ id: z.string(), why: z.string() })).meta({ description: 'The ids not acted on, each with why (what the action answered).' }),
  })
  .meta({ description: 'What a bulk action did to each record.' });
export type BulkAnswer = z.infer<typeof BulkAnswer>;

export const BulkRefusal = z
  .object({
    error: z.object({ code: z.string(), message: z.string(), matched: z.number().int().optional() }).loose(),
    matched: z.number().int().optional().meta({ description: 'count_mismatch: the number of records the request names now.' }),
    requestId: z.string().optional(),
  })
  .meta({ description: 'A bulk action refused whole: nothing was done.' });
export type BulkRefusal = z.infer<typeof BulkRefusal>;

export const BulkPreview = z
  .object({
    matched: z.number().int().meta({ description: 'The records the request names now: the action\'s expectCount.' }),
    digest: z.string().meta({ description: "Which records they are: the action's expectDigest, which refuses any other set." }),
    acted: z.number().int().meta({ description: 'How many of them the action would be taken on.' }),
    byMerchant: z.array(z.object({ merchantId: z.string(), count: z.number().int() })),
    byStatus: z.array(z.object({ status: z.enum(LEDGER_STATUSES), count: z.number().int() })),
    amounts: z
      .array(z.object({ currency: z.string(), cents: z.number().int(), text: z.string().meta({ description: 'The amount as a person reads it (59.97 USD).' }) }))
      .meta({ description: "The Checks' amounts of the records it would act on, per currency, in cents." }),
    points: z.number().meta({ description: 'The points their accruals earned (the successful results\' accruedValue).' }),
    refused: z.array(z.object({ id: z.string(), why: z.string() })).meta({ description: 'The records the action would refuse now, each with why.' }),
  })
  .meta({ description: 'What a bulk action would do; nothing was done.' });
export type BulkPreview = z.infer<typeof BulkPreview>;

export const AuditEntry = z.object({
  at: timestamp,
  actor: z.string(),
  action: z.string().meta({ description: 'retry, reverse, resolve <outcome>, close, acknowledge, dismiss, replay, unmask; bulk:<action> for each record of a bulk action.' }),
  target: z.string().meta({ description: 'The transactionId or dead-letter id.' }),
  reason: z.string().optional(),
  merchantId: z.string().optional(),
  outcome: z.string().optional().meta({ description: 'What came of it: the status after, or the replay outcome.' }),
});

export const AuditList = z.object({ items: z.array(AuditEntry), ...page }).meta({ description: 'Operator actions, newest first.' });
export type AuditList = z.infer<typeof AuditList>;

export const ReplayAnswer = z
  .object({
    deadLetter: DeadLetter,
    results: z.array(WebhookResult).optional().meta({ description: 'What each event of the delivery came to this time (dead_lettered: failed again).' }),
    error: z.string().optional().meta({ description: 'When it failed again: why (the dead letter keeps it among its replays).' }),
  })
  .meta({ description: 'A dead letter run through again.' });
export type ReplayAnswer = z.infer<typeof ReplayAnswer>;

export const Health = z.object({ status: z.literal('ok'), instance: z.string().meta({ description: 'This instance, as named in the records it has a call in flight for.' }), version: z.string() });
export type Health = z.infer<typeof Health>;

export const Readiness = z.object({
  status: z.enum(['ready', 'not ready']),
  checks: z
    .object({
      ledger: z.string().meta({ description: 'ok, or failing: why' }),
      upstream: z.string().meta({ description: 'ok; checking (resolve-credentials has not answered yet); failing: the variable to fix; or ok with the created merchants whose app token is refused (src/merchants/upstream-check.ts)' }),
      register: z.string().optional().meta({ description: "Only when something is wrong: the merchants whose register is set up (a Toast loyalty key) but who have no loyalty API key, so that their registers cannot find guests or show points: never a reason to be not ready (created merchants are found as they are checked, a few per round)." }),
    })
    .optional()
    .meta({ description: "With the bridge's admin token only." }),
});
export type Readiness = z.infer<typeof Readiness>;

const MaskedAccount = z.record(z.string(), z.string()).meta({ description: "A POS account: its id there under the POS's field name (merchantId, shopDomain, restaurantGuid) and its access token masked." });

export const MerchantView = z
  .object({
    id: z.string(),
    name: z.string().optional(),
    status: z.enum(['active', 'suspended']),
    loyalty: z.object({ appToken: z.string(), apiKey: z.string().optional() }).meta({ description: 'Masked: the last four characters only.' }),
    currency: z.string().optional(),
    phoneRegion: z.string().optional(),
    ambiguity: z.enum(['person', 'probe']).optional().meta({ description: "What settles an accrual the history leaves ambiguous: person (the attention queue) or probe (the bridge asks the loyalty service by reversing it, and accrues it again where it had happened). Unset: the bridge's AMBIGUITY_POLICY." }),
    pos: z.record(z.string(), MaskedAccount),
    createdAt: timestamp,
    updatedAt: timestamp,
    resolvedAt: timestamp.optional().meta({ description: 'When its settings were last read from the loyalty service (resolve-credentials).' }),
  })
  .meta({ description: 'A merchant, secrets masked; its tokens are never shown again.' });
export type MerchantView = z.infer<typeof MerchantView>;

export const MerchantWithTokens = z
  .object({
    merchant: MerchantView,
    posToken: z.string().meta({ description: "Bearer token for the merchant's direct POS posts. Shown this once." }),
    adminToken: z.string().meta({ description: "Bearer token for the merchant's own admin API. Shown this once." }),
  })
  .meta({ description: 'A merchant created, or given new tokens (the old ones stop working).' });

export const MerchantList = z.object({ items: z.array(MerchantView), ...page }).meta({ description: 'Merchants, oldest first.' });

export const ThreeWayDifference = z
  .object({
    kind: z.enum(DIFFERENCE_KINDS).meta({
      description:
        'missing_in_ledger: a paid POS order (or a refund of an order) the ledger lacks. not_in_history: a ledger accrual with no matching operation, or one in doubt. unclaimed_operation: a purchase operation on the merchant\'s cards that no record claims. amount_mismatch: the POS total differs from the ledger Check (a reopened check), or the ledger from the operation. refund_not_reversed: a POS refund whose reversal is missing in the ledger or the history. pos_amount_differs: what the POS says the order stands at after its refunds and edits differs from what the ledger accrued less what it reversed.',
    }),
    transactionId: z.string().optional(),
    orderId: z.string().optional().meta({ description: "The POS's own order id." }),
    operationId: z.number().int().optional().meta({ description: "The loyalty service's operation id." }),
    why: z.string().meta({ description: 'What differs, and where each side stands.' }),
    next: z.string().meta({ description: 'The next step: a command or a check, by whom.' }),
  })
  .meta({ description: 'One difference between the POS, the ledger and the operations history.' });

export const ThreeWayReport = z
  .object({
    merchantId: z.string(),
    from: timestamp.meta({ description: 'Start of the range (inclusive).' }),
    to: timestamp.meta({ description: 'End of the range (exclusive; a day given as `to` is included whole).' }),
    examined: z
      .object({
        pos: z.number().int().meta({ description: 'Orders and refunds the POS listed as changed in the range.' }),
        ledger: z.number().int().meta({ description: 'Ledger records created in the range, or of an order the POS listed.' }),
        history: z.number().int().meta({ description: 'Operations created in the range.' }),
      })
      .meta({ description: 'How much of each side was compared.' }),
    sources: z
      .array(z.object({ pos: z.string(), read: z.boolean(), entries: z.number().int().optional(), why: z.string().optional().meta({ description: 'Why it was not read.' }) }))
      .meta({ description: "Each of the merchant's POS accounts, and whether its orders could be listed." }),
    history: z
      .object({ passes: z.number().int(), requests: z.number().int(), settled: z.boolean().meta({ description: 'The last full read found nothing the one before had not: the list held still long enough.' }) })
      .meta({ description: 'How the operations history was read.' }),
    complete: z.boolean().meta({ description: 'Every POS account was read and the history settled; when false, differences may be missing (never invented).' }),
    counts: z.record(z.string(), z.number().int()).meta({ description: 'Differences by kind.' }),
    differences: z.array(ThreeWayDifference),
  })
  .meta({ description: 'POS ↔ ledger ↔ loyalty history for one merchant and range. Made by reading only: nothing was changed.' });
export type ThreeWayReport = z.infer<typeof ThreeWayReport>;

/** What one backfill pass found (`POST /v1/admin/backfill`). */
export const BackfillAnswer = z
  .object({
    merchantId: z.string(),
    pos: z.string(),
    since: timestamp.meta({ description: 'The window read, from (included) …' }),
    until: timestamp.meta({ description: '… to (excluded).' }),
    examined: z.number().int().meta({ description: 'Orders and refunds the POS listed in the window (each once).' }),
    new: z.array(z.string()).meta({ description: 'transactionIds this pass recorded: orders and refunds whose webhooks never arrived.' }),
    known: z.number().int().meta({ description: 'Already recorded: nothing changed.' }),
    refused: z.array(z.object({ id: z.string().meta({ description: "The POS's order id (order/refund for a refund)." }), why: z.string() })).meta({ description: 'Found but not recorded, and why (needs a person).' }),
    unpaid: z.number().int().meta({ description: 'Unpaid sales listed and left alone (they accrue once paid).' }),
    pages: z.number().int().meta({ description: 'Pages read from the POS.' }),
    watermark: timestamp.optional().meta({ description: "The account's watermark after the pass: every change before it has been read." }),
  })
  .meta({ description: 'What one backfill pass found.' });

const PassSummary = z.object({
  startedAt: timestamp,
  finishedAt: timestamp,
  since: timestamp,
  until: timestamp,
  by: z.enum(['scheduled', 'request']),
  examined: z.number().int(),
  new: z.number().int(),
  known: z.number().int(),
  refused: z.number().int(),
  unpaid: z.number().int(),
  error: z.string().optional().meta({ description: 'Why the pass stopped before the end of its window (the watermark did not move).' }),
});

/** Every POS account backfill reads, and its state (`GET /v1/admin/backfill`). */
export const BackfillStatusList = z
  .object({
    scheduled: z.boolean().meta({ description: 'Scheduled passes run (BACKFILL_INTERVAL_MS is not 0).' }),
    intervalMs: z.number().int(),
    overlapMs: z.number().int().meta({ description: 'How far before the watermark each pass starts (BACKFILL_OVERLAP_MS).' }),
    items: z.array(
      z.object({
        merchantId: z.string(),
        pos: z.string(),
        account: z.string().meta({ description: "The merchant's account on the POS." }),
        watermark: timestamp.optional(),
        lastPass: PassSummary.optional(),
        nextPassAt: timestamp.optional().meta({ description: 'When the next scheduled pass runs (absent when none is scheduled).' }),
        running: z.object({ owner: z.string(), until: timestamp }).optional().meta({ description: 'The instance running a pass now, and until when its lease holds.' }),
      }),
    ),
  })
  .meta({ description: "Every merchant's POS accounts backfill can read (an account and an access token set), and their backfill." });
export type BackfillAnswer = z.infer<typeof BackfillAnswer>;
export type BackfillStatusList = z.infer<typeof BackfillStatusList>;

/** Toast's AccountInfo as the bridge writes it: a card, its points, its owner's names and masked contacts. */
const ToastAccountInfo = z.object({
  identifier: z.string().meta({ description: "The card's serial: what Toast keeps on the check as its loyaltyIdentifier." }),
  firstName: z.string().optional(),
  lastName: z.string().optional(),
  phone: z.string().optional().meta({ description: 'Masked: its last four digits.' }),
  email: z.string().optional().meta({ description: 'Masked: its first letter and its domain.' }),
  pointsBalance: z.number().optional(),
});

export const ToastLoyaltyAnswer = z
  .object({
    transactionStatus: z.string().meta({
      description:
        'ACCEPT, or Toast\'s ERROR_INVALID_TOKEN, ERROR_INVALID_RESTAURANT, ERROR_INVALID_INPUT_PROPERTIES, ERROR_ACCOUNT_INVALID, ERROR_TRANSACTION_DOES_NOT_EXIST, ERROR_TRANSACTION_CANNOT_BE_REVERSED, ERROR_INVALID_TOAST_TRANSACTION_TYPE, ERROR.',
    }),
    message: z.string().optional().meta({ description: 'Why it was refused, in words the cashier is shown.' }),
    searchResponse: z.object({ accounts: z.array(ToastAccountInfo) }).optional(),
    checkResponse: z
      .object({
        accountInfo: ToastAccountInfo.optional(),
        pointsBalance: z.number().optional(),
        offers: z.array(z.unknown()).optional(),
        rejectedRedemptions: z.array(z.object({ redemption: z.unknown(), message: z.string() })).optional(),
        appliedRedemptions: z.array(z.unknown()).optional(),
      })
      .optional(),
  })
  .meta({ description: "Toast's LoyaltyTransactionResponse." });

export const LookupAnswer = z
  .object({
    cards: z.array(
      z.object({
        serialNumber: z.string(),
        templateId: z.number().int().optional(),
        pointsBalance: z.number().optional().meta({ description: "The card's points, as the loyalty service counts them." }),
        balance: z.record(z.string(), z.unknown()).meta({ description: "The card's balance object as the loyalty service gives it (bonusBalance, balance, numberRewardsUnused, ...)." }),
        customer: z.object({ firstName: z.string().optional(), surname: z.string().optional() }).meta({ description: 'Names only: the contact the guest was found by is the caller\'s already, and no other is shown.' }),
      }),
    ),
  })
  .meta({ description: "A guest's cards, with their points." });
export type LookupAnswer = z.infer<typeof LookupAnswer>;
