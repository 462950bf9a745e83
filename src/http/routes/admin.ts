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
import { answerStatus, posAnswer, recordDetail, recordSummary } from '../views.js';

/** Well inside the server's 30 s request timeout (bridge.ts), so the report always reaches the operator. */
export const RECONCILE_BUDGET_MS = 20_000;
const ReconcileQuery = z.strictObject({ budgetMs: z.coerce.number().int().min(0).max(RECONCILE_BUDGET_MS).default(RECONCILE_BUDGET_MS) });

const ListQuery = z.strictObject({
  status: z.enum(LEDGER_STATUSES).optional(),
  pos: z.string().max(32).optional(),
  from: z.iso.datetime({ offset: true }).optional(),
  to: z.iso.datetime({ offset: true }).optional(),
  page: z.coerce.number().int().min(1).default(1),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

const ResolveBody = z.strictObject({
  outcome: z.enum(['accrued', 'not_accrued', 'reversed', 'not_reversed']),
  operationId: z.number().int().positive().optional(),
  note: z.string().max(500).optional(),
});

const ReverseBody = z.strictObject({ reason: z.string().max(200).optional() });

const DeadLetterQuery = z.strictObject({
  pos: z.string().max(32).optional(),
  open: z.enum(['true', 'false']).optional(),
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
    res.json({ items: items.map(recordSummary), total, page: q.page, limit: q.limit });
  });

  router.get('/v1/admin/transactions/:transactionId', async (req, res) => {
    const record = await deps.store.get(req.params.transactionId as string);
    if (!record) throw new NotFoundError(`no ledger record ${req.params.transactionId}`);
    res.json(recordDetail(record));
  });

  router.post('/v1/admin/reconcile', async (req, res) => {
    const { budgetMs } = parseWith(ReconcileQuery, req.query);
    res.json(await deps.worker.reconcile(true, budgetMs));
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
    res.json({ items, total, page: q.page, limit: q.limit });
  });

  router.get('/v1/admin/dead-letters/:id', async (req, res) => {
    const letter = await deps.store.getDeadLetter(req.params.id as string);
    if (!letter) throw new NotFoundError(`no dead letter ${req.params.id}`);
    res.json(letter);
  });

  router.post('/v1/admin/dead-letters/:id/replay', async (req, res) => {
    const { letter, outcome, error } = await deps.ingest.replayDeadLetter(req.params.id as string);
    res.status(error ? 422 : 200).json({ deadLetter: letter, ...(outcome ? { results: outcome.results } : {}), ...(error ? { error } : {}) });
  });

  return router;
}
