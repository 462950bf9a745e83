/** Operator endpoints under `/v1/admin`, behind `Authorization: Bearer $ADMIN_TOKEN`. */
import express, { Router } from 'express';
import { z } from 'zod';
import type { Ingest } from '../../core/ingest.js';
import type { OperatorActions } from '../../core/operator.js';
import type { Worker } from '../../core/worker.js';
import { NotFoundError } from '../../errors.js';
import { bearerAuth } from '../auth.js';
import { LEDGER_STATUSES } from '../../ledger/record.js';
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

export const ListQuery = z.strictObject({
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
  pos: z.string().max(32).optional().meta({ description: 'Only dead letters of this POS.' }),
  open: z.enum(['true', 'false']).optional().meta({ description: 'true: not yet replayed successfully; false: resolved.' }),
  page: z.coerce.number().int().min(1).default(1),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

export function adminRoutes(deps: { adminToken: string; store: LedgerStore; operator: OperatorActions; worker: Worker; ingest: Ingest }): Router {
  const router = Router();
  router.use('/v1/admin', bearerAuth(deps.adminToken), express.json({ limit: '16kb' }));

  router.get('/v1/admin/transactions', async (req, res) => {
    const q = parseWith(ListQuery, req.query);
    const { items, total } = await deps.store.list({
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
    const record = await deps.store.get(req.params.transactionId as string);
    if (!record) throw new NotFoundError(`no ledger record ${req.params.transactionId}`);
    res.json(recordDetail(record));
  });

  router.post('/v1/admin/reconcile', async (req, res) => {
    const { budgetMs } = parseWith(ReconcileQuery, req.query);
    res.json((await deps.worker.reconcile(true, budgetMs)) satisfies ReconcileReport);
  });

  router.post('/v1/admin/transactions/:transactionId/retry', async (req, res) => {
    const answer = await deps.operator.retry(req.params.transactionId as string);
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

  router.post('/v1/admin/transactions/:transactionId/reverse', async (req, res) => {
    const body = parseWith(ReverseBody, req.body ?? {});
    const answer = await deps.operator.reverse(req.params.transactionId as string, body.reason);
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

  router.post('/v1/admin/transactions/:transactionId/resolve', async (req, res) => {
    const body = parseWith(ResolveBody, req.body);
    const answer = await deps.operator.resolve(req.params.transactionId as string, body);
    res.status(answerStatus(answer)).json(posAnswer(answer));
  });

  router.get('/v1/admin/dead-letters', async (req, res) => {
    const q = parseWith(DeadLetterQuery, req.query);
    const { items, total } = await deps.store.listDeadLetters({ pos: q.pos, open: q.open === undefined ? undefined : q.open === 'true', offset: (q.page - 1) * q.limit, limit: q.limit });
    res.json({ items, total, page: q.page, limit: q.limit } satisfies DeadLetterList);
  });

  router.get('/v1/admin/dead-letters/:id', async (req, res) => {
    const letter = await deps.store.getDeadLetter(req.params.id as string);
    if (!letter) throw new NotFoundError(`no dead letter ${req.params.id}`);
    res.json(letter satisfies DeadLetter);
  });

  router.post('/v1/admin/dead-letters/:id/replay', async (req, res) => {
    const { letter, outcome, error } = await deps.ingest.replayDeadLetter(req.params.id as string);
    res.status(error ? 422 : 200).json({ deadLetter: letter, ...(outcome ? { results: outcome.results } : {}), ...(error ? { error } : {}) } satisfies ReplayAnswer);
  });

  return router;
}
