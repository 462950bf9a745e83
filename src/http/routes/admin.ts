/**
 * Operator endpoints under `/v1/admin`. ADMIN_TOKEN sees every merchant (`?merchantId=` narrows, and
 * names the merchant of a record; default: `default`) and alone manages merchants; a merchant's
 * admin token sees its own records, dead letters and reconcile only: another merchant's record is
 * a 404, never a 403, so its existence is not told.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { NamedAdminToken } from '../../config.js';
import type { Ingest } from '../../core/ingest.js';
import type { OperatorActions } from '../../core/operator.js';
import type { Worker } from '../../core/worker.js';
import { attentionQueue } from '../../core/attention-queue.js';
import { BridgeError, echoed, NotFoundError, ValidationError } from '../../errors.js';
import { adminAuth, requireGlobalAdmin, type AdminPrincipal, type TokenDirectory } from '../auth.js';
import { adminInput } from '../body.js';
import { DEFAULT_MERCHANT, keyOf as recordKeyOf, LEDGER_STATUSES, ledgerKey, merchantOf, type LedgerRecord, type LedgerStatus, type OperatorAct } from '../../ledger/record.js';
import type { MerchantAdmin } from '../../merchants/admin.js';
import { MERCHANT_ID } from '../../merchants/merchant.js';
import type { Request } from 'express';
import { PAYLOAD_KEPT_BYTES, type LedgerStore, type ListCursor } from '../../ledger/store.js';
import { parseWith } from '../../validation.js';
import type { AttentionAnswer, AuditList, BulkAnswer, DeadLetter, DeadLetterList, EvidenceAnswer, KeptPayload, ReconcileReport, ReplayAnswer, ReplayFailure, TransactionList, WhoAmI } from '../schemas.js';
import { deadLetterDetail, deadLetterSummary, keptPayloadView, posAnswer, recordDetail, recordSummary, sendAnswer } from '../views.js';
import { searchIdentities } from '../../ledger/customer-index.js';
import { unreachable } from '../../unreachable.js';

/** Well inside the server's 30 s request timeout (bridge.ts), so the report always reaches the operator. */
export const RECONCILE_BUDGET_MS = 20_000;
/** The route schemas are exported for `/openapi.json`, which documents them as they are parsed. */
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

/** At most this many records one bulk action touches; a filter matching more is refused (400) with its count. */
export const BULK_MAX = 100;
/** A bulk action stops taking new records after this long, inside the server's 30 s request timeout; the rest are refused as not attempted. */
export const BULK_BUDGET_MS = 20_000;

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A bound on a date: a day (`2026-01-01`, UTC) or an ISO 8601 date-time. A day as `from` is its
 * first instant; as `to`, its last, so `from=D&to=D` is the whole day.
 */
function dateBound(end: 'start' | 'end', description: string) {
  return z
    .string()
    .refine((text) => (DAY.test(text) && !Number.isNaN(Date.parse(`${text}T00:00:00Z`)) && new Date(`${text}T00:00:00Z`).toISOString().startsWith(text)) || z.iso.datetime({ offset: true }).safeParse(text).success, 'must be a day (2026-01-01) or an ISO 8601 date-time (2026-01-01T09:30:00Z)')
    .transform((text) => (DAY.test(text) ? new Date(`${text}T${end === 'start' ? '00:00:00.000' : '23:59:59.999'}Z`) : new Date(text)))
    .optional()
    .meta({ description });
}

const fromParam = dateBound('start', 'At or after: a day (its first instant, UTC) or an ISO 8601 date-time.');
const toParam = dateBound('end', 'At or before: a day (up to its end, UTC) or an ISO 8601 date-time.');

/** `status=a,b`: one or several ledger statuses; an unknown one is named. */
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
  .optional()
  .meta({ description: `Only records in these statuses, comma-separated: ${LEDGER_STATUSES.join(', ')}.` });

const pageParams = { page: z.coerce.number().int().min(1).default(1), limit: z.coerce.number().int().min(1).max(500).default(50) };
export const PageQuery = z.strictObject(pageParams);

/**
 * `cursor`: where the next page of a list starts (the answer's `nextCursor`), opaque to clients: the
 * last record's creation time and ledger key, so a page costs what it returns however deep it is.
 */
const listCursor = z
  .string()
  .max(600)
  .transform((text, ctx) => {
    try {
      const [createdAt, key] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown[];
      if (typeof createdAt === 'string' && typeof key === 'string' && !Number.isNaN(Date.parse(createdAt))) return { createdAt, key } satisfies ListCursor;
    } catch {
      // Not base64url JSON: named below.
    }
    ctx.addIssue({ code: 'custom', message: 'is not a cursor this bridge gave: pass the nextCursor of the page before, unchanged' });
    return z.NEVER;
  })
  .optional()
  .meta({ description: "The previous answer's nextCursor: the page after it (keyset paging; page is then 1)." });

/** The opaque `nextCursor` of a page ending at this record. */
export function cursorOf(record: Pick<LedgerRecord, 'createdAt' | 'transactionId' | 'merchantId'>): string {
  return Buffer.from(JSON.stringify([record.createdAt, recordKeyOf(record)])).toString('base64url');
}

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
    .optional()
    .meta({
      description:
        "A customer's records: a phone number (in the merchant's phone region unless it starts with +), an email (any case) or a card serial; phone:, email: or card: says which. Text that could be a phone or a card serial finds both. Found through a keyed-hash index, and recorded in the audit trail as search customer (the phone's last digits or the email's domain only).",
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
  actor: z.string().min(1).max(80).optional().meta({ description: 'admin, a name from ADMIN_TOKENS, or merchant:<id>.' }),
  from: fromParam,
  to: toParam,
  ...pageParams,
});

const reasonRequired = z.string().trim().min(1).max(500).meta({ description: 'Why: kept in the history and the audit trail.' });
const reasonOptional = z.string().trim().min(1).max(500).optional().meta({ description: 'Why: kept in the history and the audit trail.' });

export const ResolveBody = z
  .strictObject({
    outcome: z.enum(['accrued', 'not_accrued', 'reversed', 'not_reversed']).meta({
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

export const BulkBody = z
  .strictObject({
    action: z.enum(['retry', 'reverse', 'resolve', 'close', 'acknowledge']),
    ids: z.array(z.string().min(1).max(300)).min(1).max(BULK_MAX).optional().meta({ description: `At most ${BULK_MAX} transactionIds of merchantId (the token's merchant, else default), or <merchantId>/<transactionId> with ADMIN_TOKEN.` }),
    merchantId: merchantIdParam.meta({ description: 'Whose records ids names (ADMIN_TOKEN; default: default).' }),
    filter: z
      .strictObject({ status: statusList, pos: z.string().max(32).optional(), merchantId: merchantIdParam, from: fromParam, to: toParam })
      .optional()
      .meta({ description: `Every record matching it, at most ${BULK_MAX}: a filter matching more is refused (400) with its count.` }),
    outcome: ResolveBody.shape.outcome.optional().meta({ description: 'resolve: required.' }),
    reason: reasonRequired,
  })
  .meta({ description: 'One action on several records: named by ids or by a filter (one of the two).' });

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

export const RecordDetailQuery = ScopeQuery.extend({
  unmask: z.enum(['true', 'false']).optional().meta({ description: "true: the customer's phone number and email in clear, in customer and the attempts (recorded in the audit trail as unmask record)." }),
});

/** A customer search as the audit trail names it: the kind and a part that says whom to those who know (a phone's last 4 digits, an email's domain), never the whole contact. */
export function searchedAs(text: string): string {
  const value = text.trim().replace(/^(phone|email|card):/i, '');
  if (value.includes('@')) return `customer email …@${value.split('@').pop()!.slice(0, 80)}`;
  const digits = value.replace(/\D/g, '');
  return /^\+|^phone:/i.test(text.trim()) || digits.length >= 7 ? `customer phone or card …${digits.slice(-4)}` : `customer card ${value.slice(0, 40)}`;
}

/** The ledger key of the record `:transactionId` names, in the request's merchant (default: `default`). */
function keyOf(req: Request, query: { merchantId?: string } = parseWith(ScopeQuery, req.query)): string {
  return ledgerKey(scopeOf(req, query.merchantId) ?? DEFAULT_MERCHANT, req.params.transactionId as string);
}

/** The merchant `:merchantId` names; one no merchant can have (not a merchant id) is the same 404 as an unknown one, its text cut short. */
function merchantIdOf(req: Request): string {
  const id = req.params.merchantId as string;
  if (!MERCHANT_ID.test(id)) throw new NotFoundError(`no merchant ${echoed(id)}`);
  return id;
}

/** Who acts, from the token, and why, from the body. */
function actOf(req: Request, reason: string | undefined): OperatorAct {
  return { actor: (req.adminPrincipal as AdminPrincipal).actor, ...(reason ? { reason } : {}) };
}

export function adminRoutes(deps: { adminToken: string; namedAdminTokens?: readonly NamedAdminToken[]; store: LedgerStore; operator: OperatorActions; worker: Worker; ingest: Ingest; merchants: MerchantAdmin; tokens: Pick<TokenDirectory, 'byAdminToken'> }): Router {
  const router = Router();
  router.use('/v1/admin', adminAuth({ token: deps.adminToken, named: deps.namedAdminTokens }, deps.tokens), adminInput());

  router.get('/v1/admin/whoami', (req, res) => {
    const principal = req.adminPrincipal as AdminPrincipal;
    res.json({ actor: principal.actor, scope: principal.scope, ...(principal.scope === 'merchant' ? { merchantId: principal.merchantId } : {}) } satisfies WhoAmI);
  });

  router.get('/v1/admin/transactions', async (req, res) => {
    const q = parseWith(ListQuery, req.query);
    const merchantId = scopeOf(req, q.merchantId);
    const customer = q.customer === undefined ? undefined : searchIdentities(q.customer, await deps.ingest.phoneRegion(merchantId));
    if (customer?.length === 0) throw ValidationError.field('customer', 'is not a phone number, an email or a card serial');
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
      after: q.cursor,
      offset: (q.page - 1) * q.limit,
      limit: q.limit + 1,
    });
    const page = items.slice(0, q.limit);
    // Looking a customer up is reading personal data like unmasking is: who, when, whom (partly: the audit trail is no place for contacts).
    if (q.customer !== undefined) await deps.operator.audit('search customer', actOf(req, undefined), { id: searchedAs(q.customer), merchantId }, `${totalCapped ? 'more than ' : ''}${total} record${total === 1 ? '' : 's'}`);
    res.json({
      items: page.map(recordSummary),
      total,
      ...(totalCapped ? { totalCapped } : {}),
      page: q.page,
      limit: q.limit,
      ...(items.length > q.limit ? { nextCursor: cursorOf(page.at(-1)!) } : {}),
    } satisfies TransactionList);
  });

  router.get('/v1/admin/attention', async (req, res) => {
    const q = parseWith(AttentionQuery, req.query);
    res.json((await attentionQueue(deps.store, { merchantId: scopeOf(req, q.merchantId), limit: q.limit })) satisfies AttentionAnswer);
  });

  router.get('/v1/admin/audit', async (req, res) => {
    const q = parseWith(AuditQuery, req.query);
    const { items, total, totalCapped } = await deps.store.listAudit({ merchantId: scopeOf(req, q.merchantId), actor: q.actor, from: q.from, to: q.to, offset: (q.page - 1) * q.limit, limit: q.limit });
    res.json({ items, total, ...(totalCapped ? { totalCapped } : {}), page: q.page, limit: q.limit } satisfies AuditList);
  });

  router.post('/v1/admin/transactions/bulk', async (req, res) => {
    const body = parseWith(BulkBody, req.body ?? {});
    res.json((await bulk(req, body)) satisfies BulkAnswer);
  });

  router.get('/v1/admin/transactions/:transactionId', async (req, res) => {
    const q = parseWith(RecordDetailQuery, req.query);
    const record = await deps.store.get(keyOf(req, q));
    if (!record) throw new NotFoundError(`no ledger record ${echoed(req.params.transactionId as string)}`);
    const unmask = q.unmask === 'true';
    // Reading a customer's contact details in clear is an action like any other: who, when, which record.
    if (unmask) await deps.operator.audit('unmask record', actOf(req, undefined), { transactionId: record.transactionId, merchantId: merchantOf(record) });
    res.json(recordDetail(record, await deps.operator.allowed(record), unmask));
  });

  /** What the loyalty history shows around the record's uncertain call, read live; changes nothing (contract v1.4). */
  router.get('/v1/admin/transactions/:transactionId/evidence', async (req, res) => {
    const key = keyOf(req, parseWith(ScopeQuery, req.query));
    if (!(await deps.store.get(key))) throw new NotFoundError(`no ledger record ${echoed(req.params.transactionId as string)}`);
    res.json((await deps.operator.evidence(key)) satisfies EvidenceAnswer);
  });

  /** The payload the record was created from, masked as a dead letter's body is unless ?unmask=true (audited as unmask payload). */
  router.get('/v1/admin/transactions/:transactionId/payload', async (req, res) => {
    const q = parseWith(RecordDetailQuery, req.query);
    const key = keyOf(req, q);
    const payload = await deps.store.getPayload(key);
    if (!payload) {
      const record = await deps.store.get(key);
      throw new NotFoundError(record ? `record ${echoed(req.params.transactionId as string)} has no payload kept (${record.origin ? (record.origin.via === 'remainder' ? 'a remainder comes from no delivery' : `its delivery was over ${PAYLOAD_KEPT_BYTES / 1024} KiB`) : 'it was recorded before payloads were kept'})` : `no ledger record ${echoed(req.params.transactionId as string)}`);
    }
    const unmask = q.unmask === 'true';
    if (unmask) await deps.operator.audit('unmask payload', actOf(req, undefined), { transactionId: req.params.transactionId as string, merchantId: scopeOf(req, q.merchantId) ?? DEFAULT_MERCHANT });
    res.json(keptPayloadView(payload, unmask) satisfies KeptPayload);
  });

  router.post('/v1/admin/reconcile', async (req, res) => {
    const q = parseWith(ReconcileScopedQuery, req.query);
    const merchantId = scopeOf(req, q.merchantId);
    const report = await deps.worker.reconcile(true, q.budgetMs, merchantId);
    // A pass can settle records (fixed): who asked for it, and what it did, is kept.
    await deps.operator.audit('reconcile', actOf(req, undefined), { id: merchantId ?? 'all merchants', merchantId }, `${report.examined} examined, ${report.fixed.length} fixed, ${report.open.length} open${report.complete ? '' : ', incomplete'}`);
    res.json(report satisfies ReconcileReport);
  });

  router.post('/v1/admin/transactions/:transactionId/retry', async (req, res) => {
    const body = parseWith(RetryBody, req.body ?? {});
    const answer = await deps.operator.retry(keyOf(req), actOf(req, body.reason));
    sendAnswer(res, answer);
  });

  router.post('/v1/admin/transactions/:transactionId/reverse', async (req, res) => {
    const body = parseWith(ReverseBody, req.body ?? {});
    const answer = await deps.operator.reverse(keyOf(req), actOf(req, body.reason));
    sendAnswer(res, answer);
  });

  router.post('/v1/admin/transactions/:transactionId/resolve', async (req, res) => {
    const body = parseWith(ResolveBody, req.body);
    const reason = body.reason ?? body.note;
    const answer = await deps.operator.resolve(keyOf(req), { outcome: body.outcome, operationId: body.operationId, note: reason }, actOf(req, reason));
    sendAnswer(res, answer);
  });

  router.post('/v1/admin/transactions/:transactionId/close', async (req, res) => {
    const body = parseWith(ReasonBody, req.body ?? {});
    const answer = await deps.operator.close(keyOf(req), { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
    res.status(200).json(posAnswer(answer));
  });

  router.post('/v1/admin/transactions/:transactionId/acknowledge', async (req, res) => {
    const body = parseWith(ReasonBody, req.body ?? {});
    const answer = await deps.operator.acknowledge(keyOf(req), { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
    res.status(200).json(posAnswer(answer));
  });

  /**
   * One action on many records, one by one through the same operator actions (and rules) as a
   * single one, each with the actor and the reason. Retry and resolve leave delivery to the worker
   * (delivering each within the answer budget would take minutes); reverse delivers as a single one
   * does. Bounded by BULK_MAX records and BULK_BUDGET_MS: what the budget leaves is refused as not
   * attempted, to be sent again.
   */
  async function bulk(req: Request, body: z.infer<typeof BulkBody>): Promise<BulkAnswer> {
    if (Boolean(body.ids) === Boolean(body.filter)) throw ValidationError.field('', 'name the records by ids or by filter (one of the two)');
    if (body.action === 'resolve' && !body.outcome) throw ValidationError.field('outcome', 'is required for resolve');
    const principal = req.adminPrincipal as AdminPrincipal;
    const targets: { id: string; key: string }[] = [];
    if (body.ids) {
      const merchant = scopeOf(req, body.merchantId) ?? DEFAULT_MERCHANT;
      for (const id of body.ids) {
        const slash = id.indexOf('/');
        const named = slash > 0 && principal.scope === 'global' ? { merchantId: id.slice(0, slash), transactionId: id.slice(slash + 1) } : { merchantId: merchant, transactionId: id };
        targets.push({ id, key: ledgerKey(named.merchantId, named.transactionId) });
      }
    } else {
      const f = body.filter!;
      const merchantId = scopeOf(req, f.merchantId ?? body.merchantId);
      const found = await deps.store.list({ merchantId, status: f.status, pos: f.pos, from: f.from, to: f.to, offset: 0, limit: BULK_MAX });
      if (found.total > BULK_MAX) throw ValidationError.field('filter', `matches ${found.total} records; a bulk action takes at most ${BULK_MAX}: narrow it (merchantId, pos, from, to) and repeat`);
      for (const r of found.items) {
        const key = ledgerKey(r.merchantId ?? DEFAULT_MERCHANT, r.transactionId);
        targets.push({ id: principal.scope === 'global' && (r.merchantId ?? DEFAULT_MERCHANT) !== DEFAULT_MERCHANT ? key : r.transactionId, key });
      }
    }
    const act: OperatorAct & { reason: string } = { actor: principal.actor, reason: body.reason };
    const answer: BulkAnswer = { done: [], refused: [] };
    const deadline = Date.now() + BULK_BUDGET_MS;
    for (const target of targets) {
      if (Date.now() > deadline) {
        answer.refused.push({ id: target.id, why: `not attempted: the bulk action's ${BULK_BUDGET_MS / 1000} s budget ran out; send it again` });
        continue;
      }
      try {
        const options = { deliver: false, bulk: true };
        switch (body.action) {
          case 'retry':
            await deps.operator.retry(target.key, act, options);
            break;
          case 'reverse':
            await deps.operator.reverse(target.key, act, options);
            break;
          case 'resolve':
            await deps.operator.resolve(target.key, { outcome: body.outcome!, note: body.reason }, act, options);
            break;
          case 'close':
            await deps.operator.close(target.key, act, options);
            break;
          case 'acknowledge':
            await deps.operator.acknowledge(target.key, act, options);
            break;
          default:
            unreachable(body.action);
        }
        answer.done.push(target.id);
      } catch (error) {
        if (!(error instanceof BridgeError) || error.status >= 500) throw error;
        answer.refused.push({ id: target.id, why: error.status === 404 ? `no ledger record ${echoed(target.id)}` : error.message });
      }
    }
    return answer;
  }

  router.get('/v1/admin/dead-letters', async (req, res) => {
    const q = parseWith(DeadLetterQuery, req.query);
    const { items, total } = await deps.store.listDeadLetters({
      merchantId: scopeOf(req, q.merchantId),
      pos: q.pos,
      open: q.open === undefined ? undefined : q.open === 'true',
      awaiting: q.awaiting,
      offset: (q.page - 1) * q.limit,
      limit: q.limit,
    });
    res.json({ items: items.map(deadLetterSummary), total, page: q.page, limit: q.limit } satisfies DeadLetterList);
  });

  /** A dead letter the request may see: a merchant's admin, its own only (404 otherwise). */
  async function letterOf(req: Request) {
    const letter = await deps.store.getDeadLetter(req.params.id as string);
    const principal = req.adminPrincipal as AdminPrincipal;
    if (!letter || (principal.scope === 'merchant' && letter.merchantId !== principal.merchantId)) throw new NotFoundError(`no dead letter ${echoed(req.params.id as string)}`);
    return letter;
  }

  router.get('/v1/admin/dead-letters/:id', async (req, res) => {
    const q = parseWith(DeadLetterDetailQuery, req.query);
    const letter = await letterOf(req);
    const unmask = q.unmask === 'true';
    // Reading customers' contact details in clear is an action like any other: who, when, which letter.
    if (unmask) await deps.operator.audit('unmask', actOf(req, undefined), { id: letter.id, merchantId: letter.merchantId });
    res.json(deadLetterDetail(letter, unmask, deps.operator.deadLetterActions(letter)) satisfies DeadLetter);
  });

  router.post('/v1/admin/dead-letters/:id/replay', async (req, res) => {
    const body = parseWith(RetryBody, req.body ?? {});
    const seen = await letterOf(req);
    const { letter, outcome, error } = await deps.ingest.replayDeadLetter(req.params.id as string);
    await deps.operator.audit('replay', actOf(req, body.reason), { id: seen.id, merchantId: seen.merchantId }, error ? `failed: ${error}` : 'processed');
    const results = outcome ? { results: outcome.results } : {};
    if (!error) {
      res.json({ deadLetter: deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)), ...results } satisfies ReplayAnswer);
      return;
    }
    // The one error envelope, with the letter as kept (its replays record this run); the request log says why.
    res.locals.refusal = { code: 'replay_failed', message: error };
    res.status(422).json({ error: { code: 'replay_failed', message: error, deadLetterId: letter.id }, requestId: req.id, deadLetter: deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)), ...results } satisfies ReplayFailure);
  });

  router.post('/v1/admin/dead-letters/:id/dismiss', async (req, res) => {
    const body = parseWith(ReasonBody, req.body ?? {});
    await letterOf(req);
    const letter = await deps.operator.dismissDeadLetter(req.params.id as string, { actor: (req.adminPrincipal as AdminPrincipal).actor, reason: body.reason });
    res.json(deadLetterDetail(letter, false, deps.operator.deadLetterActions(letter)) satisfies DeadLetter);
  });

  // ---------------------------------------------------------------- merchants (ADMIN_TOKEN only)
  const global = requireGlobalAdmin();

  router.post('/v1/admin/merchants', global, async (req, res) => {
    res.status(201).json(await deps.merchants.create(req.body));
  });

  router.get('/v1/admin/merchants', global, async (req, res) => {
    const q = parseWith(PageQuery, req.query);
    const { items, total } = await deps.merchants.list((q.page - 1) * q.limit, q.limit);
    res.json({ items, total, page: q.page, limit: q.limit });
  });

  router.get('/v1/admin/merchants/:merchantId', global, async (req, res) => {
    res.json(await deps.merchants.get(merchantIdOf(req)));
  });

  router.patch('/v1/admin/merchants/:merchantId', global, async (req, res) => {
    res.json(await deps.merchants.update(merchantIdOf(req), req.body));
  });

  router.post('/v1/admin/merchants/:merchantId/tokens', global, async (req, res) => {
    res.json(await deps.merchants.rotateTokens(merchantIdOf(req)));
  });

  router.post('/v1/admin/merchants/:merchantId/refresh', global, async (req, res) => {
    res.json(await deps.merchants.refresh(merchantIdOf(req)));
  });

  return router;
}
