/**
 * Backfill on request and its state (docs/backfill-and-reconcile.md): `POST /v1/admin/backfill` runs one pass of
 * one merchant's account on one POS now; `GET /v1/admin/backfill` shows every account's watermark,
 * last pass and next pass. ADMIN_TOKEN names the merchant (`merchantId`, default `default`); a
 * merchant's admin token acts for its own merchant only (another named is a 404, as for records).
 */
import { Router } from 'express';
import { z } from 'zod';
import type { BackfillPoller } from '../../backfill/poller.js';
import type { NamedAdminToken } from '../../config.js';
import { ValidationError } from '../../errors.js';
import { DEFAULT_MERCHANT } from '../../ledger/record.js';
import { MERCHANT_ID } from '../../merchants/merchant.js';
import { parseWith } from '../../validation.js';
import { adminAuth, type TokenDirectory } from '../auth.js';
import { adminInput } from '../body.js';
import { scopeOf } from './admin.js';

const timestamp = z.iso.datetime({ offset: true });
const merchantId = z.string().regex(MERCHANT_ID, 'must be a merchant id');

export const BackfillRequest = z
  .strictObject({
    merchantId: merchantId.optional().meta({ description: "Whose account (ADMIN_TOKEN; default `default`). A merchant's admin token reads its own, and may name only itself." }),
    pos: z.string().min(1).max(32).meta({ description: 'The POS to read back, e.g. square (one whose API lists orders: square, shopify, clover, toast, loyverse).' }),
    since: timestamp.meta({ description: 'Start of the window (ISO 8601), included: orders and refunds the POS changed at or after it. Not later than now.' }),
    until: timestamp.optional().meta({ description: 'End of the window (ISO 8601), excluded; default now, and never later (400): a watermark never moves past now.' }),
  })
  .meta({ description: 'One backfill pass now.' });

export const BackfillQuery = z.strictObject({
  merchantId: merchantId.optional().meta({ description: "One merchant's accounts (ADMIN_TOKEN; a merchant's admin token sees its own, whatever this says)." }),
});

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

export function backfillRoutes(deps: { adminToken: string; namedAdminTokens?: readonly NamedAdminToken[]; tokens: Pick<TokenDirectory, 'byAdminToken'>; backfill: BackfillPoller; intervalMs: number; overlapMs: number }): Router {
  const router = Router();
  router.use('/v1/admin/backfill', adminAuth({ token: deps.adminToken, named: deps.namedAdminTokens }, deps.tokens), adminInput());

  router.post('/v1/admin/backfill', async (req, res) => {
    const body = parseWith(BackfillRequest, req.body ?? {});
    // A watermark never moves past now (docs/backfill-and-reconcile.md): a window reaching into the
    // future is refused rather than cut short, so the operator sees what was read. An until of
    // 2099 used to become the watermark, and scheduled passes never read the present again.
    const now = new Date();
    const since = new Date(body.since);
    const until = body.until ? new Date(body.until) : undefined;
    if (since.getTime() > now.getTime()) throw ValidationError.field('since', `must not be later than now (${now.toISOString()})`);
    if (until && until.getTime() > now.getTime()) throw ValidationError.field('until', `must not be later than now (${now.toISOString()}): leave it out to read up to now`);
    const result = await deps.backfill.runPass({
      merchantId: scopeOf(req, body.merchantId) ?? DEFAULT_MERCHANT,
      pos: body.pos,
      since,
      ...(until ? { until } : {}),
      by: 'request',
    });
    res.json(result satisfies z.infer<typeof BackfillAnswer>);
  });

  router.get('/v1/admin/backfill', async (req, res) => {
    const q = parseWith(BackfillQuery, req.query);
    const items = await deps.backfill.status(scopeOf(req, q.merchantId));
    res.json({ scheduled: deps.intervalMs > 0, intervalMs: deps.intervalMs, overlapMs: deps.overlapMs, items } satisfies z.infer<typeof BackfillStatusList>);
  });

  return router;
}
