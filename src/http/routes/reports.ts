/**
 * Reports under `/v1/admin/reports`: the three-way reconcile (bridge-contract "Backfill and the
 * three-way report"). JSON, or CSV with `Accept: text/csv`. ADMIN_TOKEN names the merchant
 * (`merchantId`, default `default`); a merchant's admin token sees its own only, and a merchantId
 * naming another is a 404, as on every admin route. Making a report changes nothing.
 */
import { Router } from 'express';
import { z } from 'zod';
import { DEFAULT_MERCHANT } from '../../ledger/record.js';
import { MERCHANT_ID } from '../../merchants/merchant.js';
import { MAX_RANGE_DAYS, parseRange, reportCsv, type ReconcileReporter } from '../../reconcile/report.js';
import { parseWith } from '../../validation.js';
import type { NamedAdminToken } from '../../config.js';
import { adminAuth, type AdminPrincipal, type TokenDirectory } from '../auth.js';
import { adminInput } from '../body.js';
import type { OperatorActions } from '../../core/operator.js';
import { scopeOf } from './admin.js';
import type { ThreeWayReport } from '../schemas.js';

const bound = (side: string) =>
  z.string().max(40).meta({ description: `${side} of the range: a day (2026-11-24, UTC) or a date-time with an offset (2026-11-24T10:00:00Z). At most ${MAX_RANGE_DAYS} days from from to to.` });

/** Exported for `/openapi.json`, which documents it as it is parsed. */
export const ReconcileReportQuery = z.strictObject({
  merchantId: z.string().regex(MERCHANT_ID, 'must be a merchant id').optional().meta({ description: "Whose report (ADMIN_TOKEN; default `default`). A merchant's admin token gets its own, and a 404 for another's." }),
  from: bound('Start (inclusive)'),
  to: bound('End (exclusive; a day is included whole)'),
});

export const REPORT_PATH = '/v1/admin/reports/reconcile';

export function reportRoutes(deps: { adminToken: string; namedAdminTokens?: readonly NamedAdminToken[]; tokens: Pick<TokenDirectory, 'byAdminToken'>; reporter: ReconcileReporter; operator: Pick<OperatorActions, 'audit'> }): Router {
  const router = Router();
  // As every /v1/admin route: the same auth, and the same checks of its query, path and body (a GET carries none).
  router.use('/v1/admin/reports', adminAuth({ token: deps.adminToken, named: deps.namedAdminTokens }, deps.tokens), adminInput());

  router.get(REPORT_PATH, async (req, res) => {
    const q = parseWith(ReconcileReportQuery, req.query);
    const range = parseRange(q.from, q.to);
    const merchantId = scopeOf(req, q.merchantId) ?? DEFAULT_MERCHANT;
    const report = (await deps.reporter.report(merchantId, range)) satisfies ThreeWayReport;
    // It reads the loyalty service's history of every card the merchant's records name: who asked, and for which days.
    await deps.operator.audit('report', { actor: (req.adminPrincipal as AdminPrincipal).actor }, { id: `reconcile ${range.from.toISOString()}..${range.to.toISOString()}`, merchantId });
    res.vary('Accept');
    if (req.accepts(['application/json', 'text/csv']) === 'text/csv') {
      const name = `reconcile-${merchantId}-${range.from.toISOString().slice(0, 10)}-${range.to.toISOString().slice(0, 10)}.csv`;
      res.type('text/csv; charset=utf-8').attachment(name).send(reportCsv(report));
      return;
    }
    res.json(report);
  });

  return router;
}
