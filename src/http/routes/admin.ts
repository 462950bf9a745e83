/**
 * Operator endpoints under `/v1/admin`: records, the operator's actions on them, the attention
 * queue, the audit trail and dead letters. ADMIN_TOKEN sees every merchant (`?merchantId=` narrows,
 * and names the merchant of a record; default: `default`); a merchant's admin token sees its own
 * records, dead letters and reconcile only: another merchant's record is a 404, never a 403, so its
 * existence is not told. Merchants themselves are `merchants.ts`'s.
 */
import { createHmac } from 'node:crypto';
import type { Request } from 'express';
import { z } from 'zod';
import { attentionQueue } from '../../core/attention-queue.js';
import { BULK_ACTIONS, BULK_MAX, CountMismatchError, type BulkRequest } from '../../core/bulk.js';
import { echoed, NotFoundError, ValidationError } from '../../kernel/errors.js';
import { CARD_SERIAL_PATTERN, searchIdentities } from '../../state/customer-index.js';
import { keyOf as recordKeyOf, LEDGER_STATUSES, ledgerKey, merchantOf, type LedgerRecord, type LedgerStatus, type OperatorAct } from '../../state/record.js';
import { DEFAULT_MERCHANT } from '../../state/merchant.js';
import { PAYLOAD_KEPT_BYTES, type LedgerStore, type ListCursor } from '../../ledger/store.js';
import { MERCHANT_ID } from '../../state/merchant.js';
import type { AdminPrincipal } from '../auth.js';
import { answerOrError, BAD_PATH, error, OUTCOME_ANSWERS, route, type PathParam, type Route } from '../route.js';
import {
  AttentionAnswer,
  AuditList,
  BulkAnswer,
  BulkPreview,
  BulkRefusal,
  DeadLetter,
  DeadLetterList,
  EvidenceAnswer,
  KeptPayload,
  RecordDetail,
  ReconcileReport,
  ReplayAnswer,
  ReplayFailure,
  TransactionList,
  WhoAmI,
  PosAnswer,
} from '../schemas.js';
import { deadLetterDetail, deadLetterSummary, evidenceView, keptPayloadView, posAnswer, recordDetail, recordSummary, sendAnswer } from '../views.js';
import { sameSecret } from '../../kernel/constant-time.js';
import { RESOLVE_OUTCOMES } from '../../core/transitions.js';

export { BULK_MAX };

/** Well inside the server's 30 s request timeout (bridge.ts), so the report always reaches the operator. */
export const RECONCILE_BUDGET_MS = 20_000;
/** The route schemas are exported for the tests, which parse with them as the routes do. */
export const ReconcileQuery = z.strictObject({
  budgetMs: z.coerce
    .number()
    .int()
    .min(0)
    .max(RECONCILE_BUDGET_MS)
    .default(RECONCILE_BUDGET_MS)
    .meta({ description: `Milliseconds the pass may take (at most ${RECONCILE_BUDGET_MS}, inside the server's 30 s request timeout); what it leaves is reported open with complete: false.` }),
});

const merchantIdParam = z.string().regex(MERCHANT_ID, 'must be a merchant id').optional().meta({ description: "A merchant's records only (ADMIN_TOKEN; a merchant's admin token sees its own, whatever this says)." });
/** On a record's own routes: whose record (ADMIN_TOKEN; default `default`). */
export const ScopeQuery = z.strictObject({ merchantId: merchantIdParam });
export const ReconcileScopedQuery = ReconcileQuery.extend({ merchantId: merchantIdParam });

const DAY_OR_DATE_TIME = 'must be a day (2026-01-01) or an ISO 8601 date-time (2026-01-01T09:30:00Z)';

/**
 * A bound on a date: a day (`2026-01-01`, UTC, a real one) or an ISO 8601 date-time with an offset.
 * A day as `from` is its first instant; as `to`, its last, so `from=D&to=D` is the whole day.
 */
function dateBound(end: 'start' | 'end', description: string) {
  return z
    .union([z.iso.date(), z.iso.datetime({ offset: true })], { error: (issue) => (typeof issue.input === 'string' ? DAY_OR_DATE_TIME : undefined) })
    .transform((text) => (text.length === 10 ? new Date(`${text}T${end === 'start' ? '00:00:00.000' : '23:59:59.999'}Z`) : new Date(text)))
    .optional()
    .meta({ description });
}

const fromParam = dateBound('start', 'At or after: a day (its first instant, UTC) or an ISO 8601 date-time.');
const toParam = dateBound('end', 'At or before: a day (up to its end, UTC) or an ISO 8601 date-time.');

/**
 * `status=a,b`: one or several ledger statuses; an unknown one is named. Read leniently (spaces
 * and empty items between the commas are dropped); the document states the plain form, which every
 * client can send: statuses joined by commas.
 */
const statusList = z
  .string()
  .transform((text, ctx) => {
    const statuses = text.split(',').map((s) => s.trim()).filter(Boolean);
    const unknown = statuses.filter((s) => !(LEDGER_STATUSES as readonly string[]).includes(s));
    if (unknown.length || statuses.length === 0) {
      ctx.addIssue({ code: 'custom', message: `${unknown.length ? `unknown status ${unknown.map((u) => JSON.stringify(u)).join(', ')}` : 'names no status'}; one or more of ${LEDGER_STATUSES.join(', ')}, comma-separated` });
      return z.NEVER;
    }
    return statuses as LedgerStatus[];
  })
  .meta({ pattern: `^(?:${LEDGER_STATUSES.join('|')})(?:,(?:${LEDGER_STATUSES.join('|')}))*$` })
  .optional()
  .meta({ description: `Only records in these statuses, comma-separated: ${LEDGER_STATUSES.join(', ')}.` });

const pageParams = { page: z.coerce.number().int().min(1).default(1), limit: z.coerce.number().int().min(1).max(500).default(50) };
export const PageQuery = z.strictObject(pageParams);

/**
 * `cursor`: where the next page of a list starts (the answer's `nextCursor`), opaque to clients: the
 * last record's creation time and ledger key, so a page costs what it returns however deep it is,
 * and a MAC of them under a key of the ledger's own (`keyFor`: the same in every instance on it), so
 * only a cursor the bridge gave is taken (contract v1.5): anything else is a 400 invalid_cursor.
 */
const listCursor = z
  .string()
  .optional()
  .meta({ description: "The previous answer's nextCursor, unchanged: the page after it (keyset paging; page is then 1). Anything else is a 400 invalid_cursor." });

/** A creation time as the ledger writes it: ISO, to the millisecond, in UTC, of a year the bridge can have written (from 2000). */
const CURSOR_TIME = /^(2\d{3}|[3-9]\d{3})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** The longest cursor `cursorOf` writes (a ledger key is at most a few hundred characters). */
const CURSOR_MAX = 900;
/** What a cursor's MAC is made under (`LedgerStore.keyFor`). */
const CURSOR_PURPOSE = 'list cursors';

function cursorMac(key: Buffer, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('base64url').slice(0, 22);
}

/** The opaque, signed `nextCursor` of a page ending at this record. */
export function cursorOf(record: Pick<LedgerRecord, 'createdAt' | 'transactionId' | 'merchantId'>, store: Pick<LedgerStore, 'keyFor'>): string {
  const payload = Buffer.from(JSON.stringify([record.createdAt, recordKeyOf(record)])).toString('base64url');
  return `${payload}.${cursorMac(store.keyFor(CURSOR_PURPOSE), payload)}`;
}

/**
 * A cursor the bridge gave, or a 400 invalid_cursor naming none of what was sent: its MAC must be
 * this ledger's (compared in constant time), and what it holds exactly what `cursorOf` writes.
 * (A lenient date parser took `2026-01-01 (ann@example.com)`, which PostgreSQL then refused with a
 * 500 that logged the text; year 0000 was a 500 there too.)
 */
export function parseListCursor(text: string, store: Pick<LedgerStore, 'keyFor'>): ListCursor {
  const refused = () => new ValidationError([{ field: 'cursor', message: 'is not a cursor this bridge gave: pass the nextCursor of the page before, unchanged' }], undefined, 'invalid_cursor');
  const match = text.length <= CURSOR_MAX ? /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{22})$/.exec(text) : null;
  if (!match) throw refused();
  const [, payload, mac] = match as unknown as [string, string, string];
  if (!sameSecret(mac, cursorMac(store.keyFor(CURSOR_PURPOSE), payload))) throw refused();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw refused();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw refused();
  const [createdAt, key] = parsed as unknown[];
  if (typeof createdAt !== 'string' || !CURSOR_TIME.test(createdAt) || Number.isNaN(Date.parse(createdAt)) || new Date(createdAt).toISOString() !== createdAt) throw refused();
  if (typeof key !== 'string' || key.length === 0 || key.length > CURSOR_MAX) throw refused();
  return { createdAt, key };
}

/**
 * The shape of what a customer search takes (customer-index.ts `searchIdentities` decides what it
 * is): an email, a card serial (letters, digits and dashes, with a digit) or phone-like text,
 * optionally said which. Stated in the document, so a client knows; whether phone-like text is a
 * phone number is the numbering plan's, checked after.
 */
const CUSTOMER_SEARCH_TEXT = new RegExp(`^(?:(?:phone|email|card|Phone|Email|Card|PHONE|EMAIL|CARD): ?)?(?:[^@\\s]{1,64}@[^@\\s]{1,189}|${CARD_SERIAL_PATTERN}|\\+?[0-9 \\u00a0().\\/-]{7,30})$`);

export const ListQuery = z.strictObject({
  merchantId: merchantIdParam,
  status: statusList,
  pos: z.string().max(32).optional().meta({ description: 'Only records of this POS, e.g. square.' }),
  orderId: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .meta({ description: "Records whose POS order id starts with this, A-Z in any case (H-1 finds generic:H-1 and H-10, the order whatever its transactionId, hashed or not, with its remainders). A start more than 1,000 order ids share is refused (400): give more of it." }),
  refundId: z.string().min(1).max(256).optional().meta({ description: 'The records a refund whose id starts with this acted on, A-Z in any case; a start more than 1,000 refund ids share is refused (400).' }),
  customer: z
    .string()
    .trim()
    .min(1)
    .max(254)
    .regex(CUSTOMER_SEARCH_TEXT, 'must be a phone number, an email or a card serial (phone:, email: or card: may say which)')
    .optional()
    .meta({
      description:
        "A customer's records: a phone number (in the merchant's phone region unless it starts with +), an email (any case) or a card serial (letters, digits and dashes, with a digit); phone:, email: or card: says which. Text that could be a phone or a card serial finds both; a card serial also finds the records of its owner's phone and email as the loyalty service knows them (with the merchant's API key). Scoped to one merchant: the bridge's operator names it with merchantId (a 400 without). Found through a keyed-hash index, and recorded in the audit trail as search customer (the phone's last digits or the email's domain only).",
    }),
  from: fromParam,
  to: toParam,
  cursor: listCursor,
  ...pageParams,
}).refine((q) => !q.cursor || q.page === 1, { message: 'cursor and page are two ways to page: give one', path: ['cursor'] });

export const AttentionQuery = z.strictObject({
  merchantId: merchantIdParam,
  limit: z.coerce.number().int().min(1).max(500).default(100).meta({ description: 'Items listed, oldest first; counts cover everything.' }),
});

export const AuditQuery = z.strictObject({
  merchantId: merchantIdParam,
  actor: z.string().min(1).max(80).optional().meta({ description: 'The start of the actor: admin, a name from ADMIN_TOKENS, merchant:<id>; merchant: finds every merchant token, ali finds alice.' }),
  from: fromParam,
  to: toParam,
  ...pageParams,
});

const reasonRequired = z.string().trim().min(1).max(500).meta({ description: 'Why: kept in the history and the audit trail.' });
const reasonOptional = z.string().trim().min(1).max(500).optional().meta({ description: 'Why: kept in the history and the audit trail.' });

export const ResolveBody = z
  .strictObject({
    outcome: z.enum(RESOLVE_OUTCOMES).meta({
      description: "What happened upstream, as the operator established it. reversed also closes a reverse_failed record whose failed cards were finished by hand (a partial refund's remainder is then accrued); never an orphan (close it).",
    }),
    operationId: z.number().int().positive().optional().meta({ description: "accrued: the loyalty service's operation that shows it; no other record may claim it." }),
    reason: reasonOptional,
    note: z.string().max(500).optional().meta({ description: 'The reason, as earlier builds named it (reason wins).' }),
  })
  .meta({ description: 'Settles an in-doubt call by hand.' });

export const ReverseBody = z.strictObject({ reason: reasonOptional }).meta({ description: 'Optional.' });
export const RetryBody = z.strictObject({ reason: reasonOptional }).meta({ description: 'Optional.' });
export const ReasonBody = z.strictObject({ reason: reasonRequired }).meta({ description: 'Why (required).' });

/** What names a bulk action's records and what it does: its body, and its preview's. */
const bulkTargets = {
  action: z.enum(BULK_ACTIONS),
  ids: z.array(z.string().min(1).max(300)).min(1).max(BULK_MAX).optional().meta({ description: `At most ${BULK_MAX} transactionIds of merchantId (the token's merchant, else default), or <merchantId>/<transactionId> with ADMIN_TOKEN.` }),
  merchantId: merchantIdParam.meta({ description: 'Whose records ids names (ADMIN_TOKEN; default: default).' }),
  filter: z
    .strictObject({ status: statusList, pos: z.string().max(32).optional(), merchantId: merchantIdParam, from: fromParam, to: toParam })
    .optional()
    .meta({ description: `Every record matching it, at most ${BULK_MAX}: a filter matching more is refused (400) with its count.` }),
  merchants: z
    .array(z.string().regex(MERCHANT_ID, 'must be a merchant id'))
    .min(1)
    .max(BULK_MAX)
    .optional()
    .meta({ description: 'A reverse over a filter matching several merchants: exactly those merchants, picked by the person (409 naming them otherwise).' }),
  outcome: ResolveBody.shape.outcome.optional().meta({ description: 'resolve: required.' }),
};

/** Both rules of a bulk body, checked as it is parsed (and stated in the document beside it: `oneOf`, `anyOf`). */
function bulkRules(body: { ids?: unknown; filter?: unknown; action: string; outcome?: unknown }, ctx: z.RefinementCtx): void {
  if (Boolean(body.ids) === Boolean(body.filter)) ctx.addIssue({ code: 'custom', path: [], message: 'name the records by ids or by filter (one of the two)' });
  else if (body.action === 'resolve' && !body.outcome) ctx.addIssue({ code: 'custom', path: ['outcome'], message: 'is required for resolve' });
}
const bulkDocumented = {
  oneOf: [{ required: ['ids'] }, { required: ['filter'] }],
  // resolve names its outcome: an action other than resolve, or an outcome.
  anyOf: [{ properties: { action: { not: { const: 'resolve' } } } }, { required: ['outcome'] }],
};

/**
 * One action on several records, named by ids or by a filter: one of the two, and resolve with its
 * outcome. A filter states expectCount (contract v1.5, safe bulk).
 */
export const BulkBody = z
  .strictObject({
    ...bulkTargets,
    expectCount: z
      .number()
      .int()
      .min(0)
      .max(BULK_MAX)
      .optional()
      .meta({ description: 'The number of records the request names, as you saw it (the preview\'s matched): required with a filter; any other number is a 409 with matched, and nothing is done.' }),
    expectDigest: z
      .string()
      .regex(/^[A-Za-z0-9_-]{22}$/, "must be a preview's digest")
      .optional()
      .meta({ description: "The preview's digest: any other set of records now, even of the same count, is a 409 records_changed, and nothing is done." }),
    reason: reasonRequired,
  })
  .superRefine(bulkRules)
  .meta({ description: 'One action on several records: named by ids or by a filter (one of the two).', ...bulkDocumented });

/** The same request, to see what it would do before doing it. */
export const BulkPreviewBody = z
  .strictObject(bulkTargets)
  .superRefine((body, ctx) => {
    if (Boolean(body.ids) === Boolean(body.filter)) ctx.addIssue({ code: 'custom', path: [], message: 'name the records by ids or by filter (one of the two)' });
  })
  .meta({ description: 'A bulk action to preview: named by ids or by a filter (one of the two); a resolve needs no outcome yet. Nothing is done.', oneOf: bulkDocumented.oneOf });

export const DeadLetterDetailQuery = z.strictObject({
  unmask: z.enum(['true', 'false']).optional().meta({ description: "true: the body as kept, customers' phone numbers and emails in clear (recorded in the audit trail)." }),
});

export const DeadLetterQuery = z.strictObject({
  merchantId: merchantIdParam,
  pos: z.string().max(32).optional().meta({ description: 'Only dead letters of this POS.' }),
  open: z.enum(['true', 'false']).optional().meta({ description: 'true: not yet replayed successfully nor dismissed; false: resolved.' }),
  awaiting: z
    .enum(['bridge', 'operator'])
    .optional()
    .meta({ description: 'Open letters only: bridge, those the bridge runs again by itself (a transient cause, runs left); operator, those waiting for a person.' }),
  ...pageParams,
});

export const RecordDetailQuery = ScopeQuery.extend({
  unmask: z.enum(['true', 'false']).optional().meta({ description: "true: the customer's phone number and email in clear, in customer and the attempts (recorded in the audit trail as unmask record)." }),
});

/**
 * The merchant a request acts for: a merchant's admin token, its own (a `merchantId` naming another
 * is the same 404 as a record it cannot see); ADMIN_TOKEN, the one `?merchantId=` names, or all
 * (`undefined`) where listing allows it.
 */
export function scopeOf(req: Request, requested: string | undefined): string | undefined {
  const principal = req.adminPrincipal as AdminPrincipal;
  if (principal.scope === 'global') return requested;
  if (requested && requested !== principal.merchantId) throw new NotFoundError(`no merchant ${echoed(requested)}`);
  return principal.merchantId;
}

/**
 * A customer search as the audit trail names it: each kind of identifier the text was searched as,
 * masked but telling searches apart (a phone's last 4 digits, a card serial's last 6 characters, an
 * email's first letter and domain), never the whole contact. `identities` are what the search
 * looked under (customer-index.ts `searchIdentities`: `phone:…`, `email:…`, `card:…`).
 */
export function searchedAs(identities: readonly string[]): string {
  const shown = identities.map((identity) => {
    const [kind, ...rest] = identity.split(':');
    const value = rest.join(':');
    if (kind === 'phone') return `phone …${value.replace(/\D/g, '').slice(-4)}`;
    if (kind === 'email') return `email ${value.slice(0, 1)}…@${value.split('@').pop()!.slice(0, 80)}`;
    return `card …${value.slice(-Math.min(6, Math.floor(value.length / 2)))}`;
  });
  return `customer ${shown.join(' or ')}`;
}

/** The ledger key of the record `:transactionId` names, in the request's merchant (default: `default`). */
function keyOf(req: Request, query: { merchantId?: string }): string {
  return ledgerKey(scopeOf(req, query.merchantId) ?? DEFAULT_MERCHANT, req.params.transactionId as string);
}

/** Who acts, from the token, and why, from the body. */
export function actOf(req: Request, reason: string | undefined): OperatorAct {
  return { actor: (req.adminPrincipal as AdminPrincipal).actor, ...(reason ? { reason } : {}) };
}

/** A dead letter the request may see: a merchant's admin, its own only (404 otherwise). */
async function letterOf(req: Request, store: Pick<LedgerStore, 'getDeadLetter'>) {
  const letter = await store.getDeadLetter(req.params.id as string);
  const principal = req.adminPrincipal as AdminPrincipal;
  if (!letter || (principal.scope === 'merchant' && letter.merchantId !== principal.merchantId)) throw new NotFoundError(`no dead letter ${echoed(req.params.id as string)}`);
  return letter;
}

/** A bulk filter as the core takes it, in the merchant the request may act for. */
function filtered(req: Request, { merchantId, ...filter }: NonNullable<z.output<typeof BulkBody>['filter']>, bodyMerchantId: string | undefined) {
  return { filter, merchantId: scopeOf(req, merchantId ?? bodyMerchantId) };
}

/** A bulk body as the core's request: the principal's actor and scope, ids or the filter in the request's merchant. */
function bulkRequestOf(req: Request, body: z.output<typeof BulkPreviewBody> & { reason: string; expectCount?: number; expectDigest?: string }): BulkRequest {
  const principal = req.adminPrincipal as AdminPrincipal;
  const common = {
    act: { actor: principal.actor, reason: body.reason },
    global: principal.scope === 'global',
    ...(body.expectCount !== undefined ? { expectCount: body.expectCount } : {}),
    ...('expectDigest' in body && body.expectDigest !== undefined ? { expectDigest: body.expectDigest } : {}),
    ...(body.merchants ? { merchants: body.merchants } : {}),
    ...(body.ids ? { ids: body.ids, merchantId: scopeOf(req, body.merchantId) } : filtered(req, body.filter!, body.merchantId)),
  };
  return body.action === 'resolve' ? { ...common, action: 'resolve', outcome: body.outcome! } : { ...common, action: body.action };
}

export const SCOPE_INVALID = 'merchantId is not a merchant id (invalid_payload)';
/** A merchant's admin token naming another merchant: the same 404 as a merchant that does not exist. */
export const OTHER_MERCHANT = error("A merchant's admin token naming another merchant (not_found).");

/** A path segment is never empty: `/v1/admin/transactions/` is the list's path, not a record's. */
const transactionId: Record<string, PathParam> = { transactionId: { description: 'The transactionId, e.g. generic:A-1001 (percent-encode a / in it).', schema: z.string().min(1) } };
const deadLetterId: Record<string, PathParam> = { id: { description: 'The dead letter id, as error.deadLetterId named it.', schema: z.string().min(1) } };

export const adminRoutes: readonly Route[] = [
  route({
    method: 'get',
    path: '/v1/admin/transactions',
    operationId: 'listTransactions',
    tag: 'Transactions',
    summary: "List ledger records, newest first: by status, POS, days, the start of an order or refund id (A-Z in any case), or a customer's phone, email or card serial (audited)",
    access: 'admin',
    query: ListQuery,
    answers: {
      200: { description: 'One page of records: the Check sent and the results of each.', json: TransactionList },
      400: error('A query parameter is not valid, or unknown, or an order or refund id start more than 1,000 ids share (invalid_payload, each named).'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, query: q, deps }) {
      // A cursor is read before anything else is: one the bridge did not give is refused at once.
      const after = q.cursor === undefined ? undefined : parseListCursor(q.cursor, deps.store);
      const merchantId = scopeOf(req, q.merchantId);
      let customer: string[] | undefined;
      let owner: Awaited<ReturnType<typeof deps.operator.cardOwnerIdentities>> | undefined;
      let typed: string[] = [];
      if (q.customer !== undefined) {
        // A customer is a merchant's customer: the search reads the number in that merchant's phone
        // region, looks in its records only, and is audited against it. A merchant's token is scoped already.
        if (merchantId === undefined) throw ValidationError.field('merchantId', 'is required with customer: a customer search is scoped to one merchant (its records, its phone region, its audit trail)');
        const region = await deps.ingest.phoneRegion(merchantId);
        typed = searchIdentities(q.customer, region);
        if (typed.length === 0) throw ValidationError.field('customer', 'is not a phone number, an email or a card serial');
        // A card serial finds the records of its owner too, however the POS named them (the loyalty service says whose card it is).
        owner = await deps.operator.cardOwnerIdentities(merchantId, typed, region);
        customer = [...new Set([...typed, ...owner.identities])];
      }
      // One more than asked: whether a next page exists, without counting beyond it.
      const { items, total, totalCapped } = await deps.store.list({
        merchantId,
        status: q.status,
        pos: q.pos,
        orderId: q.orderId,
        refundId: q.refundId,
        customer,
        from: q.from,
        to: q.to,
        after,
        offset: (q.page - 1) * q.limit,
        limit: q.limit + 1,
      });
      const page = items.slice(0, q.limit);
      // Looking a customer up is reading personal data like unmasking is: who, when, whom (partly: the audit trail is no place for contacts).
      if (q.customer !== undefined) {
        const byOwner = owner?.asked === 'found' ? ", and the card owner's" : owner?.asked === 'not_read' ? " (the card's owner could not be asked)" : '';
        await deps.operator.audit('search customer', actOf(req, undefined), { id: searchedAs(typed), merchantId }, `${totalCapped ? 'more than ' : ''}${total} record${total === 1 ? '' : 's'}${byOwner}`);
      }
      res.json({
        items: page.map(recordSummary),
        total,
        ...(totalCapped ? { totalCapped } : {}),
        page: q.page,
        limit: q.limit,
        ...(items.length > q.limit ? { nextCursor: cursorOf(page.at(-1)!, deps.store) } : {}),
      } satisfies TransactionList);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/transactions/{transactionId}/evidence',
    operationId: 'getEvidence',
    tag: 'Transactions',
    summary: "The loyalty history around the record's uncertain call, read live (the merchant's API key): its cards, their operations, each marked a candidate or not and why, and what the bridge reads from them. Changes nothing",
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    answers: {
      200: { description: 'The evidence (reading unknown, with why, when the history cannot be read).', json: EvidenceAnswer },
      400: error(`${BAD_PATH}, ${SCOPE_INVALID}.`),
      404: error("No such record (not_found), or not this merchant's."),
    },
    /** What the loyalty history shows around the record's uncertain call, read live; changes nothing (contract v1.4). */
    async handle({ req, res, query, deps }) {
      const key = keyOf(req, query);
      const record = await deps.store.get(key);
      if (!record) throw new NotFoundError(`no ledger record ${echoed(req.params.transactionId as string)}`);
      res.json(evidenceView(await deps.operator.evidence(key), record.accrual.check?.currency) satisfies EvidenceAnswer);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/transactions/{transactionId}/payload',
    operationId: 'getPayload',
    tag: 'Transactions',
    summary: "The POS payload the record was created from (a direct post, a webhook delivery or its part, a replayed dead letter, an object backfill found); customers' phone numbers and emails masked unless unmask=true, which is audited",
    access: 'admin',
    params: transactionId,
    query: RecordDetailQuery,
    answers: {
      200: { description: 'The payload as it arrived (masked unless unmasked).', json: KeptPayload },
      400: error(`${BAD_PATH}, ${SCOPE_INVALID}.`),
      404: error('No such record, or none was kept for it (a remainder, a record from before payloads were kept, a delivery over 64 KiB): the message says which.'),
    },
    /** The payload the record was created from, masked as a dead letter's body is unless ?unmask=true (audited as unmask payload). */
    async handle({ req, res, query: q, deps }) {
      const key = keyOf(req, q);
      const payload = await deps.store.getPayload(key);
      if (!payload) {
        const record = await deps.store.get(key);
        throw new NotFoundError(record ? `record ${echoed(req.params.transactionId as string)} has no payload kept (${record.origin ? (record.origin.via === 'remainder' ? 'a remainder comes from no delivery' : `its delivery was over ${PAYLOAD_KEPT_BYTES / 1024} KiB`) : 'it was recorded before payloads were kept'})` : `no ledger record ${echoed(req.params.transactionId as string)}`);
      }
      const unmask = q.unmask === 'true';
      if (unmask) await deps.operator.audit('unmask payload', actOf(req, undefined), { transactionId: req.params.transactionId as string, merchantId: scopeOf(req, q.merchantId) ?? DEFAULT_MERCHANT });
      res.json(keptPayloadView(payload, unmask) satisfies KeptPayload);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/whoami',
    operationId: 'whoami',
    tag: 'Operators',
    summary: 'Who this token is: its actor and scope',
    access: 'admin',
    answers: {
      200: { description: 'The actor recorded for its actions, and what it sees.', json: WhoAmI },
      400: error('A query value holding a control character or bytes that are not UTF-8 (invalid_payload, the parameter named).'),
    },
    handle({ req, res }) {
      const principal = req.adminPrincipal as AdminPrincipal;
      res.json({ actor: principal.actor, scope: principal.scope, ...(principal.scope === 'merchant' ? { merchantId: principal.merchantId } : {}) } satisfies WhoAmI);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/attention',
    operationId: 'attention',
    tag: 'Operators',
    summary: 'Everything that needs a person, oldest first',
    description:
      'Records in doubt (ambiguous: the history matches several), failed, partially accrued, reverse_failed (not closed), with deliveries of another amount not yet acknowledged, and open dead letters. Counts per kind and per merchant cover everything; items are bounded by limit.',
    access: 'admin',
    query: AttentionQuery,
    answers: {
      200: { description: 'The queue.', json: AttentionAnswer },
      400: error('A query parameter is not valid, or unknown (invalid_payload, each named).'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, query: q, deps }) {
      res.json((await attentionQueue(deps.store, { merchantId: scopeOf(req, q.merchantId), limit: q.limit }, (id) => deps.operator.canVerify(id))) satisfies AttentionAnswer);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/audit',
    operationId: 'audit',
    tag: 'Operators',
    summary: 'Operator actions: who did what, when, why, to which record or letter',
    description: "Newest first. A merchant's admin token sees its own merchant's only.",
    access: 'admin',
    query: AuditQuery,
    answers: {
      200: { description: 'One page of the audit trail.', json: AuditList },
      400: error('A query parameter is not valid, or unknown (invalid_payload, each named).'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, query: q, deps }) {
      const { items, total, totalCapped } = await deps.store.listAudit({ merchantId: scopeOf(req, q.merchantId), actor: q.actor, from: q.from, to: q.to, offset: (q.page - 1) * q.limit, limit: q.limit });
      res.json({ items, total, ...(totalCapped ? { totalCapped } : {}), page: q.page, limit: q.limit } satisfies AuditList);
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/bulk/preview',
    operationId: 'previewBulkAction',
    tag: 'Transactions',
    summary: 'What a bulk action would do, doing nothing',
    description: `The records the request names (at most ${BULK_MAX}) counted by merchant, status, amount and points, and those the action would refuse now, with why. Send its matched as the action's expectCount.`,
    access: 'admin',
    body: { schema: BulkPreviewBody, component: 'BulkPreviewBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'What the action would do.', json: BulkPreview },
      400: error('The body is not valid (invalid_payload, each field named), or a filter matching too many records.'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, body, deps }) {
      // A resolve's outcome is the person's to choose after seeing this: what it would refuse is what resolve refuses whatever the outcome.
      res.json((await deps.operator.previewBulk(bulkRequestOf(req, { ...body, outcome: body.outcome ?? 'accrued', reason: 'preview' }), { anyOutcome: body.outcome === undefined })) satisfies BulkPreview);
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/bulk',
    operationId: 'bulkAction',
    tag: 'Transactions',
    summary: 'One action on several records, each with the actor and the reason',
    description: `Records named by ids, or every record a filter matches (at most ${BULK_MAX}: a filter matching more is a 400 naming its count). A filter states expectCount, the number it matches as you saw it (POST /v1/admin/transactions/bulk/preview says it); a reverse over a filter matching several merchants names them in merchants. Each record goes through the same action and rules as alone; retry and resolve leave delivery to the worker (done means queued: the record page shows what came of it). The answer names each id done or refused, with why.`,
    access: 'admin',
    body: { schema: BulkBody, component: 'BulkBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'What was done to each.', json: BulkAnswer },
      400: error('The body is not valid (invalid_payload, each field named): no reason, neither or both of ids and filter, resolve without outcome, or a filter matching too many records.'),
      404: OTHER_MERCHANT,
      409: {
        description:
          'Nothing was done: expectCount missing with a filter or not the number matched now (count_mismatch, with matched); expectDigest not the records named now (records_changed); or a reverse over several merchants not naming them, or merchants not the records\' (conflict, with merchants).',
        json: BulkRefusal,
      },
    },
    async handle({ req, res, body, deps }) {
      try {
        res.json((await deps.operator.bulk(bulkRequestOf(req, body))) satisfies BulkAnswer);
      } catch (error) {
        if (!(error instanceof CountMismatchError)) throw error;
        // (records_changed and the merchants' conflict go through the one error handler, their details in error.)
        // The contract's 409 { matched }: beside the one error envelope, so a client reads the count at once.
        res.locals.refusal = { code: error.code, message: error.message };
        res.status(409).json({ error: { code: error.code, message: error.message, matched: error.matched }, matched: error.matched, requestId: req.id } satisfies BulkRefusal);
      }
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/close',
    operationId: 'closeTransaction',
    tag: 'Transactions',
    summary: 'Close an orphan reverse_failed record: a refund of an order the loyalty service never knew',
    description: 'The record is kept whole in its status, marked closed with the actor and reason, and leaves the attention queue; recorded in the audit trail.',
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: ReasonBody, component: 'ReasonBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'Closed: the record as it stands.', json: PosAnswer },
      400: error(`No reason, or the body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
      404: error("No such record (not_found), or not this merchant's."),
      409: error('Anything but an open orphan reverse_failed: the message says why (conflict).'),
    },
    async handle({ req, res, query, body, deps }) {
      const answer = await deps.operator.close(keyOf(req, query), { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
      res.status(200).json(posAnswer(answer));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/acknowledge',
    operationId: 'acknowledgeTransaction',
    tag: 'Transactions',
    summary: 'Acknowledge a refusal (failed, partially accrued) or deliveries with another amount, settled outside the bridge',
    description: 'The record leaves the attention queue until it needs a person again (a later failure, another such delivery); recorded in the history and the audit trail. Doubts and reversals are settled by resolve, retry or close instead.',
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: ReasonBody, component: 'ReasonBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'Acknowledged: the record as it stands.', json: PosAnswer },
      400: error(`No reason, or the body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
      404: error("No such record (not_found), or not this merchant's."),
      409: error('Nothing to acknowledge: no refusal or delivery with another amount waits for a person (conflict).'),
    },
    async handle({ req, res, query, body, deps }) {
      const answer = await deps.operator.acknowledge(keyOf(req, query), { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
      res.status(200).json(posAnswer(answer));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/dead-letters/{id}/dismiss',
    operationId: 'dismissDeadLetter',
    tag: 'Dead letters',
    summary: 'Dismiss a dead letter with a reason: kept, never run again',
    access: 'admin',
    params: deadLetterId,
    body: { schema: ReasonBody, component: 'ReasonBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'Dismissed: the letter, masked.', json: DeadLetter },
      400: error(`No reason, or the body is not valid (invalid_payload), or ${BAD_PATH}.`),
      404: error('No such dead letter (not_found).'),
      409: error('Resolved or dismissed already, or a run of it is under way (conflict, with deadLetterId).'),
    },
    async handle({ req, res, body, deps }) {
      await letterOf(req, deps.store);
      const letter = await deps.operator.dismissDeadLetter(req.params.id as string, { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
      res.json(deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)) satisfies DeadLetter);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/transactions/{transactionId}',
    operationId: 'getTransaction',
    tag: 'Transactions',
    summary: "One record with every attempt, its history, and the actions allowed now (and why not); the customer's phone number and email masked unless unmask=true, which is audited",
    access: 'admin',
    params: transactionId,
    query: RecordDetailQuery,
    answers: {
      200: { description: 'The record in full.', json: RecordDetail },
      400: error(`${BAD_PATH}, ${SCOPE_INVALID}.`),
      404: error("No such record (not_found), or not this merchant's."),
    },
    async handle({ req, res, query: q, deps }) {
      const record = await deps.store.get(keyOf(req, q));
      if (!record) throw new NotFoundError(`no ledger record ${echoed(req.params.transactionId as string)}`);
      const unmask = q.unmask === 'true';
      // Reading a customer's contact details in clear is an action like any other: who, when, which record.
      if (unmask) await deps.operator.audit('unmask record', actOf(req, undefined), { transactionId: record.transactionId, merchantId: merchantOf(record) });
      res.json(recordDetail(record, await deps.operator.allowed(record), await deps.operator.lead(record), unmask));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/retry',
    operationId: 'retryTransaction',
    tag: 'Transactions',
    summary: 'Deliver again what provably did not happen',
    description: 'For a record the loyalty service refused, or one still pending: sends its accrue or reverse now.',
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: RetryBody, component: 'RetryBody', required: false, emptyWhenAbsent: true },
    answers: {
      ...OUTCOME_ANSWERS,
      400: error(`${BAD_PATH}, ${SCOPE_INVALID}.`),
      404: answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
      409: error('A retry could double: the last call may have reached the loyalty service (settle it with /resolve), a call is in flight, or some cards succeeded.'),
    },
    async handle({ req, res, query, body, deps }) {
      sendAnswer(res, await deps.operator.retry(keyOf(req, query), actOf(req, body.reason)));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/ask',
    operationId: 'askAboutTransaction',
    tag: 'Transactions',
    summary: 'Ask the loyalty service whether an ambiguous accrual happened',
    description:
      "For an accrual in doubt that the operations history leaves ambiguous (its actions' ask says when): reverses its transactionId. The service reverses only an accrual it made: refused as unknown, the accrual never happened and is sent again; reversed, it had, its operation is claimed from the answer and the purchase accrued again as <id>~r<n>. A lost answer is never asked again blindly. Whatever the merchant's ambiguity policy.",
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: RetryBody, component: 'AskBody', required: false, emptyWhenAbsent: true },
    answers: {
      ...OUTCOME_ANSWERS,
      400: error(`${BAD_PATH}, ${SCOPE_INVALID}.`),
      404: answerOrError('No such record (not_found).'),
      409: error('Nothing to ask: the accrual is not in doubt, a reversal is already asked for, a call is in flight, or the history has not shown it ambiguous past the grace period.'),
    },
    async handle({ req, res, query, body, deps }) {
      sendAnswer(res, await deps.operator.ask(keyOf(req, query), actOf(req, body.reason)));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/reverse',
    operationId: 'reverseTransaction',
    tag: 'Transactions',
    summary: 'Reverse the whole accrual',
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: ReverseBody, component: 'ReverseBody', required: false, emptyWhenAbsent: true },
    answers: {
      ...OUTCOME_ANSWERS,
      400: error(`The body is not valid (invalid_payload), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
      404: answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
      409: error('The record cannot be reversed in its state.'),
    },
    async handle({ req, res, query, body, deps }) {
      sendAnswer(res, await deps.operator.reverse(keyOf(req, query), actOf(req, body.reason)));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/transactions/{transactionId}/resolve',
    operationId: 'resolveTransaction',
    tag: 'Transactions',
    summary: 'Settle an in-doubt call by hand',
    description: 'Or, with outcome reversed, close a reverse_failed record whose failed cards were finished by hand.',
    access: 'admin',
    params: transactionId,
    query: ScopeQuery,
    body: { schema: ResolveBody, component: 'ResolveBody', required: true },
    answers: {
      ...OUTCOME_ANSWERS,
      400: error(`The body is not valid (invalid_payload, each field named), ${SCOPE_INVALID}, or ${BAD_PATH}.`),
      404: answerOrError('No such record (not_found), or the loyalty service does not know the transaction (the record).'),
      409: error('Not in doubt (nor a failed reverse, for outcome reversed), or the operation is claimed by another record.'),
    },
    async handle({ req, res, query, body, deps }) {
      const reason = body.reason ?? body.note;
      sendAnswer(res, await deps.operator.resolve(keyOf(req, query), { outcome: body.outcome, operationId: body.operationId, note: reason }, actOf(req, reason)));
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/reconcile',
    operationId: 'reconcile',
    tag: 'Transactions',
    summary: "One reconciliation pass over all open work now (one merchant's with merchantId, or a merchant's admin token)",
    description: 'Due and not-yet-due work alike; in-doubt calls are verified through the operations history where LOYALTY_API_KEY is set.',
    access: 'admin',
    query: ReconcileScopedQuery,
    answers: {
      200: { description: 'The report; complete false: call again for the rest.', json: ReconcileReport },
      400: error('budgetMs is not a whole number from 0 to the maximum, merchantId is not a merchant id, or another parameter was given (invalid_payload).'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, query: q, deps }) {
      const merchantId = scopeOf(req, q.merchantId);
      const report = await deps.worker.reconcile(true, q.budgetMs, merchantId);
      // A pass can settle records (fixed): who asked for it, and what it did, is kept.
      await deps.operator.audit('reconcile', actOf(req, undefined), { id: merchantId ?? 'all merchants', merchantId }, `${report.examined} examined, ${report.fixed.length} fixed, ${report.open.length} open${report.complete ? '' : ', incomplete'}`);
      res.json(report satisfies ReconcileReport);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/dead-letters',
    operationId: 'listDeadLetters',
    tag: 'Dead letters',
    summary: 'List dead letters, newest first',
    access: 'admin',
    query: DeadLetterQuery,
    answers: {
      200: { description: 'One page of dead letters.', json: DeadLetterList },
      400: error('A query parameter is not valid, or unknown (invalid_payload, each named).'),
      404: OTHER_MERCHANT,
    },
    async handle({ req, res, query: q, deps }) {
      const { items, total } = await deps.store.listDeadLetters({
        merchantId: scopeOf(req, q.merchantId),
        pos: q.pos,
        open: q.open === undefined ? undefined : q.open === 'true',
        awaiting: q.awaiting,
        offset: (q.page - 1) * q.limit,
        limit: q.limit,
      });
      res.json({ items: items.map(deadLetterSummary), total, page: q.page, limit: q.limit } satisfies DeadLetterList);
    },
  }),
  route({
    method: 'get',
    path: '/v1/admin/dead-letters/{id}',
    operationId: 'getDeadLetter',
    tag: 'Dead letters',
    summary: "One dead letter, with the delivery kept whole (customers' phone numbers and emails masked unless unmask=true, which is audited)",
    access: 'admin',
    params: deadLetterId,
    query: DeadLetterDetailQuery,
    answers: {
      200: { description: 'The dead letter.', json: DeadLetter },
      400: error(BAD_PATH),
      404: error('No such dead letter (not_found).'),
    },
    async handle({ req, res, query: q, deps }) {
      const letter = await letterOf(req, deps.store);
      const unmask = q.unmask === 'true';
      // Reading customers' contact details in clear is an action like any other: who, when, which letter.
      if (unmask) await deps.operator.audit('unmask', actOf(req, undefined), { id: letter.id, merchantId: letter.merchantId });
      res.json(deadLetterDetail(letter, unmask, deps.operator.deadLetterActions(letter)) satisfies DeadLetter);
    },
  }),
  route({
    method: 'post',
    path: '/v1/admin/dead-letters/{id}/replay',
    operationId: 'replayDeadLetter',
    tag: 'Dead letters',
    summary: 'Run a dead letter through again',
    description:
      "After fixing configuration, or once its order arrived; also a letter the bridge is retrying by itself, ahead of its schedule (a transient failure then keeps its schedule; the operator's run does not count among the automatic attempts). Its signature is not checked again: it was when the delivery arrived. It acts for its own merchant: what was carried out before is answered by that merchant's ledger as a repeat, with the record it holds, so a replay never accrues or reverses twice and is never marked processed without a record; a letter whose signed bytes were first taken for another account fails (replay_failed).",
    access: 'admin',
    params: deadLetterId,
    body: { schema: RetryBody, component: 'RetryBody', required: false, emptyWhenAbsent: true },
    answers: {
      200: { description: 'It went through: the dead letter is resolved, with the results.', json: ReplayAnswer },
      400: error(BAD_PATH),
      404: error('No such dead letter (not_found).'),
      409: error('The letter is resolved already (a resolved letter is never run again), or a run of it is under way (the bridge retrying it, on this or another instance): conflict, with deadLetterId.'),
      422: { description: 'It failed again (replay_failed): error says why; the dead letter keeps the run among its replays, and its retry says whether the bridge will run it again by itself.', json: ReplayFailure },
    },
    async handle({ req, res, body, deps }) {
      const seen = await letterOf(req, deps.store);
      const { letter, outcome, error: failed } = await deps.ingest.replayDeadLetter(req.params.id as string);
      await deps.operator.audit('replay', actOf(req, body.reason), { id: seen.id, merchantId: seen.merchantId }, failed ? `failed: ${failed}` : 'processed');
      const results = outcome ? { results: outcome.results } : {};
      if (!failed) {
        res.json({ deadLetter: deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)), ...results } satisfies ReplayAnswer);
        return;
      }
      // The one error envelope, with the letter as kept (its replays record this run); the request log says why.
      res.locals.refusal = { code: 'replay_failed', message: failed };
      res.status(422).json({ error: { code: 'replay_failed', message: failed, deadLetterId: letter.id }, requestId: req.id, deadLetter: deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)), ...results } satisfies ReplayFailure);
    },
  }),
];
