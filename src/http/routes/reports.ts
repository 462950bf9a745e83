/**
 * Reports under `/v1/admin/reports`: the three-way reconcile (bridge-contract "Backfill and the
 * three-way report"). JSON, or CSV with `Accept: text/csv`. ADMIN_TOKEN names the merchant
 * (`merchantId`, default `default`); a merchant's admin token sees its own only, and a merchantId
 * naming another is a 404, as on every admin route. Making a report changes nothing.
 */
import { z } from 'zod';
import { echoed } from '../../kernel/errors.js';
import { DEFAULT_MERCHANT } from '../../state/merchant.js';
import { MERCHANT_ID } from '../../state/merchant.js';
import { MAX_RANGE_DAYS, parseRange, reportCsv } from '../../reconcile/report.js';
import type { AdminPrincipal } from '../auth.js';
import { error, route, type Route } from '../route.js';
import { ThreeWayReport } from '../schemas.js';
import { scopeOf } from './admin.js';

/** A date-time as the report reads one (src/reconcile/report.ts `parseRange`): seconds and their fraction optional, an offset required. */
const REPORT_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A bound of the range: a real day, or a date-time with an offset that is a real instant; refused as parseRange refuses it. */
const bound = (side: string) =>
  z
    .union([z.iso.date(), z.string().regex(REPORT_DATE_TIME).refine((text) => !Number.isNaN(new Date(text).getTime())).meta({ format: 'date-time' })], {
      error: (issue) => (typeof issue.input === 'string' ? `must be a day (2026-11-24) or a date-time with an offset (2026-11-24T10:00:00Z), got ${JSON.stringify(echoed(issue.input, 40))}` : undefined),
    })
    .meta({ description: `${side} of the range: a day (2026-11-24, UTC) or a date-time with an offset (2026-11-24T10:00:00Z). At most ${MAX_RANGE_DAYS} days from from to to.` });

/** Exported for the tests, which parse with it as the route does. */
export const ReconcileReportQuery = z.strictObject({
  merchantId: z.string().regex(MERCHANT_ID, 'must be a merchant id').optional().meta({ description: "Whose report (ADMIN_TOKEN; default `default`). A merchant's admin token gets its own, and a 404 for another's." }),
  from: bound('Start (inclusive)'),
  to: bound('End (exclusive; a day is included whole)'),
});

export const REPORT_PATH = '/v1/admin/reports/reconcile';

export const reportRoutes: readonly Route[] = [
  route({
    method: 'get',
    path: REPORT_PATH,
    operationId: 'reconcileReport',
    tag: 'Reports',
    summary: 'The three-way reconcile: POS ↔ ledger ↔ loyalty history for one merchant and range',
    description:
      "Lists the merchant's POS orders and refunds changed in the range, its ledger records and its operations history (read whole even while it moves), and classifies every difference with why and the next step. Reads only: nothing changes. CSV with Accept: text/csv.",
    access: 'admin',
    query: ReconcileReportQuery,
    answers: {
      200: {
        description: 'The report (complete false: a POS account could not be listed, or the history kept moving; differences may be missing, never invented).',
        json: ThreeWayReport,
        media: {
          'text/csv': {
            jsonSchema: {
              type: 'string',
              description:
                'kind,transactionId,orderId,operationId,why,next; RFC 4180 quoting (also of every cell holding ; or a formula character), CRLF line ends; a formula character (= + - @ tab CR) that begins a cell, or a part of it after ; , or a line feed, is preceded by an apostrophe.',
            },
          },
        },
      },
      400: error(`from or to is missing or not a day or a date-time with an offset, from is before 2000-01-01 or later than now, to is not after from, the range spans more than ${MAX_RANGE_DAYS} days, merchantId is not a merchant id, or another parameter was given (invalid_payload, the field named): a range the loyalty history cannot serve is the client's to fix, never a 502.`),
      404: error("No such merchant, or another merchant's, asked with a merchant's admin token (not_found)."),
      422: error('The merchant has no loyalty API key: its operations history cannot be read (history_unavailable).'),
      502: error('The operations history could not be read: the loyalty service kept answering 429 past the back-off, or failed (history_unavailable).'),
    },
    async handle({ req, res, query: q, deps }) {
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
    },
  }),
];
