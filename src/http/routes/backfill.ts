/**
 * Backfill on request and its state (docs/backfill-and-reconcile.md): `POST /v1/admin/backfill` runs one pass of
 * one merchant's account on one POS now; `GET /v1/admin/backfill` shows every account's watermark,
 * last pass and next pass. ADMIN_TOKEN names the merchant (`merchantId`, default `default`); a
 * merchant's admin token acts for its own merchant only (another named is a 404, as for records).
 */
import { z } from 'zod';
import { BridgeError, ValidationError } from '../../kernel/errors.js';
import { DEFAULT_MERCHANT } from '../../state/merchant.js';
import { MERCHANT_ID } from '../../state/merchant.js';
import type { PosCatalogue } from '../../pos/contract.js';
import { error, route, type Route } from '../route.js';
import { BackfillAnswer, BackfillStatusList } from '../schemas.js';
import { actOf, SCOPE_INVALID, scopeOf } from './admin.js';

const timestamp = z.iso.datetime({ offset: true });
const merchantId = z.string().regex(MERCHANT_ID, 'must be a merchant id');

/** One pass: `pos` is one of the POSes whose API lists orders, the only ones backfill can read. */
export function backfillRequest(listingNames: readonly string[]) {
  return z
    .strictObject({
      merchantId: merchantId.optional().meta({ description: "Whose account (ADMIN_TOKEN; default `default`). A merchant's admin token reads its own, and may name only itself." }),
      pos: z.enum(listingNames as [string, ...string[]]).meta({ description: `The POS to read back: one whose API lists orders (${listingNames.join(', ')}).` }),
      since: timestamp.meta({ description: 'Start of the window (ISO 8601), included: orders and refunds the POS changed at or after it. Not later than now.' }),
      until: timestamp.optional().meta({ description: 'End of the window (ISO 8601), excluded; default now, and never later (400): a watermark never moves past now.' }),
    })
    .meta({ description: 'One backfill pass now.' });
}

export const BackfillQuery = z.strictObject({
  merchantId: merchantId.optional().meta({ description: "One merchant's accounts (ADMIN_TOKEN; a merchant's admin token sees its own, whatever this says)." }),
});

export function backfillRoutes(catalogue: PosCatalogue): Route[] {
  return [
    route({
      method: 'post',
      path: '/v1/admin/backfill',
      operationId: 'runBackfill',
      tag: 'Backfill',
      summary: "One backfill pass now: read one merchant's account on one POS back for a window and record what its webhooks left out",
      description:
        "Lists every order and refund the POS changed in [since, until) from its own API (Square SearchOrders, Shopify orders.json?status=any, Clover orders, Toast ordersBulk, Loyverse receipts), page by page, and feeds each through the same path as its webhook: an order recorded already changes nothing (known), one missing is recorded and accrued (new, its history says backfill found it), one that cannot be translated is reported (refused). A 429 or 5xx from the POS is asked again (after its Retry-After, or backing off); a page still refused ends the pass (502) and the account's watermark stays where it was. The watermark moves to `until` when the window started at or before it. ADMIN_TOKEN names the merchant (merchantId, default `default`); a merchant's admin token reads its own accounts only.",
      access: 'admin',
      body: { schema: backfillRequest(catalogue.listingNames), component: 'BackfillRequest', required: true, emptyWhenAbsent: true },
      answers: {
        200: { description: 'The pass read the whole window: what it found.', json: BackfillAnswer },
        400: error('The body is not valid: pos missing or not one whose API lists orders, since or until not an ISO 8601 date-time or later than now (a watermark never moves past now), until not after since, an unknown field (invalid_payload, each named).'),
        403: error('The merchant is suspended (merchant_suspended): nothing is read or recorded for it.'),
        404: error("No such merchant, or a merchant's admin token named another (unknown_merchant, not_found)."),
        409: error('A pass of this account is running (on this instance or another on the same ledger): ask again once it is done (conflict).'),
        422: error('The merchant has no account or no access token on this POS (backfill_not_possible).'),
        502: error("The POS's API kept refusing a page (429, 5xx, a timeout) or refused the token: the pass stopped, what it recorded stays recorded, the watermark did not move (pos_api_failed)."),
      },
      async handle({ req, res, body, deps }) {
        // A watermark never moves past now (docs/backfill-and-reconcile.md): a window reaching into the
        // future is refused rather than cut short, so the operator sees what was read. An until of
        // 2099 used to become the watermark, and scheduled passes never read the present again.
        const now = new Date();
        const since = new Date(body.since);
        const until = body.until ? new Date(body.until) : undefined;
        if (since.getTime() > now.getTime()) throw ValidationError.field('since', `must not be later than now (${now.toISOString()})`);
        if (until && until.getTime() > now.getTime()) throw ValidationError.field('until', `must not be later than now (${now.toISOString()}): leave it out to read up to now`);
        const merchant = scopeOf(req, body.merchantId) ?? DEFAULT_MERCHANT;
        // Who asked for which window, and what came of it, in the audit trail like every other operator action.
        const target = { id: `backfill ${body.pos} ${since.toISOString()}..${(until ?? now).toISOString()}`, merchantId: merchant };
        let result: BackfillAnswer;
        try {
          result = await deps.backfill.poller.runPass({ merchantId: merchant, pos: body.pos, since, ...(until ? { until } : {}), by: 'request' });
        } catch (failure) {
          await deps.operator.audit('backfill', actOf(req, undefined), target, `failed: ${failure instanceof BridgeError ? failure.code : 'error'}`);
          throw failure;
        }
        await deps.operator.audit('backfill', actOf(req, undefined), target, `${result.examined} examined, ${result.new.length} new, ${result.known} known, ${result.refused.length} refused`);
        res.json(result satisfies BackfillAnswer);
      },
    }),
    route({
      method: 'get',
      path: '/v1/admin/backfill',
      operationId: 'getBackfill',
      tag: 'Backfill',
      summary: "Every merchant's POS accounts backfill reads: watermark, last pass, its counts, next pass",
      access: 'admin',
      query: BackfillQuery,
      answers: {
        200: { description: 'One row per merchant and POS account with an access token.', json: BackfillStatusList },
        400: error(`${SCOPE_INVALID}, or another parameter was given.`),
        404: error("A merchant's admin token named another merchant (not_found)."),
      },
      async handle({ req, res, query: q, deps }) {
        const items = await deps.backfill.poller.status(scopeOf(req, q.merchantId));
        res.json({ scheduled: deps.backfill.intervalMs > 0, intervalMs: deps.backfill.intervalMs, overlapMs: deps.backfill.overlapMs, items } satisfies BackfillStatusList);
      },
    }),
  ];
}
