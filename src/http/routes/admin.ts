/**
 * Operator endpoints under `/v1/admin`. ADMIN_TOKEN sees every merchant (`?merchantId=` narrows, and
 * names the merchant of a record; default: `default`) and alone manages merchants; a merchant's
 * admin token sees its own records, dead letters and reconcile only: another merchant's record is
 * a 404, never a 403, so its existence is not told.
 */
import express, { Router } from 'express';
import { z } from 'zod';
import type { Ingest } from '../../core/ingest.js';
import type { OperatorActions } from '../../core/operator.js';
import type { Worker } from '../../core/worker.js';
import { NotFoundError } from '../../errors.js';
import { adminAuth, requireGlobalAdmin, type AdminPrincipal, type TokenDirectory } from '../auth.js';
import { DEFAULT_MERCHANT, LEDGER_STATUSES, ledgerKey } from '../../ledger/record.js';
import type { MerchantAdmin } from '../../merchants/admin.js';
import { MERCHANT_ID } from '../../merchants/merchant.js';
import type { Request } from 'express';
import type { LedgerStore } from '../../ledger/store.js';
import { parseWith } from '../../validation.js';
import type { DeadLetter, DeadLetterList, ReconcileReport, ReplayAnswer, TransactionList } from '../schemas.js';
import { answerStatus, posAnswer, recordDetail, recordSummary } from '../views.js';

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
export const PageQuery = z.strictObject({ page: z.coerce.number().int().min(1).default(1), limit: z.coerce.number().int().min(1).max(500).default(50) });

export const ListQuery = z.strictObject({
  merchantId: merchantIdParam,
  status: z.enum(LEDGER_STATUSES).optional().meta({ description: 'Only records in this status.' }),
  pos: z.string().max(32).optional().meta({ description: 'Only records of this POS, e.g. square.' }),
  from: z.iso.datetime({ offset: true }).optional().meta({ description: 'Created at or after (ISO 8601 date-time).' }),
  to: z.iso.datetime({ offset: true }).optional().meta({ description: 'Created at or before (ISO 8601 date-time).' }),
  page: z.coerce.number().int().min(1).default(1),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

export const ResolveBody = z
  .strictObject({
    outcome: z.enum(['accrued', 'not_accrued', 'reversed', 'not_reversed']).meta({
      description: "What happened upstream, as the operator established it. reversed also closes a reverse_failed record whose failed cards were finished by hand (a partial refund's remainder is then accrued).",
    }),
    operationId: z.number().int().positive().optional().meta({ description: "accrued: the loyalty service's operation that shows it; no other record may claim it." }),
    note: z.string().max(500).optional().meta({ description: "Kept in the record's history." }),
  })
  .meta({ description: 'Settles an in-doubt call by hand.' });

export const ReverseBody = z.strictObject({ reason: z.string().max(200).optional().meta({ description: "Kept in the record's history." }) }).meta({ description: 'Optional.' });

export const DeadLetterQuery = z.strictObject({
  merchantId: merchantIdParam,
  pos: z.string().max(32).optional().meta({ description: 'Only dead letters of this POS.' }),
  open: z.enum(['true', 'false']).optional().meta({ description: 'true: not yet replayed successfully; false: resolved.' }),
  awaiting: z
    .enum(['bridge', 'operator'])
    .optional()
    .meta({ description: 'Open letters only: bridge, those the bridge runs again by itself (a transient cause, runs left); operator, those waiting for a person.' }),
  page: z.coerce.number().int().min(1).default(1),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

/**
 * The merchant a request acts for: a merchant's admin token, its own (a `merchantId` naming another
 * is the same 404 as a record it cannot see); ADMIN_TOKEN, the one `?merchantId=` names, or all
 * (`undefined`) where listing allows it.
 */
function scopeOf(req: Request, requested: string | undefined): string | undefined {
  const principal = req.adminPrincipal as AdminPrincipal;
  if (principal.scope === 'global') return requested;
  if (requested && requested !== principal.merchantId) throw new NotFoundError(`no merchant ${requested}`);
  return principal.merchantId;
}

/** The ledger key of the record `:transactionId` names, in the request's merchant (default: `default`). */
function keyOf(req: Request): string {
  const { merchantId } = parseWith(ScopeQuery, req.query);
  return ledgerKey(scopeOf(req, merchantId) ?? DEFAULT_MERCHANT, req.params.transactionId as string);
}

export function adminRoutes(deps: { adminToken: string; store: LedgerStore; operator: OperatorActions; worker: Worker; ingest: Ingest; merchants: MerchantAdmin; tokens: Pick<TokenDirectory, 'byAdminToken'> }): Router {
  const router = Router();
  router.use('/v1/admin', adminAuth(deps.adminToken, deps.tokens), express.json({ limit: '16kb' }));

  router.get('/v1/admin/transactions', async (req, res) => {
    const q = parseWith(ListQuery, req.query);
    const { items, total } = await deps.store.list({
      merchantId: scopeOf(req, q.merchantId),
      status: q.status,
      pos: q.pos,
      from: q.from ? new Date(q.from) : undefined,
      to: q.to ? new Date(q.to) : undefined,
      offset: (q.page - 1) * q.limit,
      limit: q.limit,
    });
    res.json({ items: items.map(recordSummary), total, page: q.page, limit: q.limit } satisfies TransactionList);
  });

  router.get('/v1/admin/transactions/:transactionId', async (req, res) => {
    const record = await deps.store.get(keyOf(req));
    if (!record) throw new NotFoundError(`no ledger record ${req.params.transactionId}`);
    res.json(recordDetail(record));
  });

  router.post('/v1/admin/reconcile', async (req, res) => {
    const q = parseWith(ReconcileScopedQuery, req.query);
    res.json((await deps.worker.reconcile(true, q.budgetMs, scopeOf(req, q.merchantId))) satisfies ReconcileReport);
  });

  router.post('/v1/admin/transactions/:transactionId/retry', async (req, res) => {
    const answer = await deps.operator.retry(keyOf(req));
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

  router.post('/v1/admin/transactions/:transactionId/reverse', async (req, res) => {
    const body = parseWith(ReverseBody, req.body ?? {});
    const answer = await deps.operator.reverse(keyOf(req), body.reason);
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

  router.post('/v1/admin/transactions/:transactionId/resolve', async (req, res) => {
    const body = parseWith(ResolveBody, req.body);
    const answer = await deps.operator.resolve(keyOf(req), body);
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

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
    res.json({ items, total, page: q.page, limit: q.limit } satisfies DeadLetterList);
  });

  /** A dead letter the request may see: a merchant's admin, its own only (404 otherwise). */
  async function letterOf(req: Request) {
    const letter = await deps.store.getDeadLetter(req.params.id as string);
    const principal = req.adminPrincipal as AdminPrincipal;
    if (!letter || (principal.scope === 'merchant' && letter.merchantId !== principal.merchantId)) throw new NotFoundError(`no dead letter ${req.params.id}`);
    return letter;
  }

  router.get('/v1/admin/dead-letters/:id', async (req, res) => {
    res.json((await letterOf(req)) satisfies DeadLetter);
  });

  router.post('/v1/admin/dead-letters/:id/replay', async (req, res) => {
    await letterOf(req);
    const { letter, outcome, error } = await deps.ingest.replayDeadLetter(req.params.id as string);
    res.status(error ? 422 : 200).json({ deadLetter: letter, ...(outcome ? { results: outcome.results } : {}), ...(error ? { error } : {}) } satisfies ReplayAnswer);
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
    res.json(await deps.merchants.get(req.params.merchantId as string));
  });

  router.patch('/v1/admin/merchants/:merchantId', global, async (req, res) => {
    res.json(await deps.merchants.update(req.params.merchantId as string, req.body));
  });

  router.post('/v1/admin/merchants/:merchantId/tokens', global, async (req, res) => {
    res.json(await deps.merchants.rotateTokens(req.params.merchantId as string));
  });

  router.post('/v1/admin/merchants/:merchantId/refresh', global, async (req, res) => {
    res.json(await deps.merchants.refresh(req.params.merchantId as string));
  });

  return router;
}
