/**
 * The fake POS APIs' control routes, under /__sim/pos (docs/simulator-pos-apis.md, "Control API"):
 * what `sim.pos.<pos>` offers in process, for drivers that only see the simulator over HTTP.
 *
 *   POST   /__sim/pos/reset
 *   GET    /__sim/pos/<pos>/accounts                 POST the same: a new account
 *   POST   /__sim/pos/<pos>/accounts/<id>/orders     an order (model.ts OrderInput) → the POS's object
 *   POST   /__sim/pos/<pos>/accounts/<id>/orders/<orderId>/touch   { "at"? }
 *   POST   /__sim/pos/<pos>/accounts/<id>/refunds    a refund (RefundInput) → the POS's object(s)
 *   POST   /__sim/pos/<pos>/accounts/<id>/customers  a customer (CustomerInput)
 *   GET | POST | DELETE /__sim/pos/<pos>/accounts/<id>/faults
 *   POST   /__sim/pos/<pos>/accounts/<id>/webhooks   → { headers, body }: a signed delivery to POST
 *   POST   /__sim/pos/toast/accounts/<id>/loyalty    → { guid, headers, body }: a register's call to POST (Toast's loyalty API)
 *
 * 400 for a body of the wrong shape, 404 for an account or object the fake does not hold, 409 for a
 * clash (a taken id, a refund of more than is left).
 */
import express, { type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { POS_FAULT_KINDS, POS_FAULT_TARGETS } from './faults.js';
import type { FakePosApis } from './index.js';
import { NotHeldError, pathParam, type FakePos } from './kit.js';

const FaultBody = z.strictObject({
  kind: z.enum(POS_FAULT_KINDS),
  times: z.number().int().positive().optional(),
  on: z.enum(POS_FAULT_TARGETS).optional(),
  retryAfter: z.number().nonnegative().nullable().optional(),
  status: z.number().int().min(500).max(599).optional(),
  delayMs: z.number().int().nonnegative().optional(),
  after: z.number().int().nonnegative().optional(),
});

const TouchBody = z.strictObject({ at: z.string().optional() });

/** Runs `fn`, answering its refusals: zod's 400, NotHeldError's 404, RangeError's 409. */
function answer(status: number, fn: (req: Request, res: Response) => unknown): RequestHandler {
  return (req, res) => {
    try {
      res.status(status).json(fn(req, res));
    } catch (error) {
      if (error instanceof z.ZodError) return void res.status(400).json({ errors: error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`) });
      if (error instanceof NotHeldError) return void res.status(404).json({ errors: [error.message] });
      if (error instanceof RangeError) return void res.status(409).json({ errors: [error.message] });
      throw error;
    }
  };
}

export function posControlRouter(apis: FakePosApis): express.Router {
  const router = express.Router();
  router.post('/reset', (_req, res) => {
    apis.reset();
    res.json({ ok: true });
  });

  const one = express.Router({ mergeParams: true });
  router.use('/:pos', (req, res, next) => {
    const pos = apis.byName(pathParam(req, 'pos'));
    if (!pos) return void res.status(404).json({ errors: [`no fake POS ${pathParam(req, 'pos')}`] });
    res.locals.fakePos = pos;
    next();
  }, one);
  const posOf = (res: Response) => res.locals.fakePos as FakePos;
  const account = (req: Request) => pathParam(req, 'account');

  one.get('/accounts', answer(200, (_req, res) => ({ accounts: posOf(res).accounts() })));
  one.post('/accounts', answer(201, (req, res) => posOf(res).addAccount(req.body ?? {})));
  one.post('/accounts/:account/orders', answer(201, (req, res) => posOf(res).addOrder(account(req), req.body)));
  one.post('/accounts/:account/orders/:orderId/touch', answer(200, (req, res) => posOf(res).touchOrder(account(req), pathParam(req, 'orderId'), TouchBody.parse(req.body ?? {}).at)));
  one.post('/accounts/:account/refunds', answer(201, (req, res) => posOf(res).addRefund(account(req), req.body)));
  one.post('/accounts/:account/customers', answer(201, (req, res) => posOf(res).addCustomer(account(req), req.body ?? {})));
  one.get('/accounts/:account/faults', answer(200, (req, res) => ({ pending: posOf(res).faults(account(req)).pending() })));
  one.post(
    '/accounts/:account/faults',
    answer(201, (req, res) => {
      const faults = posOf(res).faults(account(req));
      faults.inject(FaultBody.parse(req.body));
      return { pending: faults.pending() };
    }),
  );
  one.delete(
    '/accounts/:account/faults',
    answer(200, (req, res) => {
      const faults = posOf(res).faults(account(req));
      faults.clear();
      return { pending: faults.pending() };
    }),
  );
  one.post('/accounts/:account/webhooks', answer(200, (req, res) => posOf(res).webhook(account(req), req.body)));
  one.post(
    '/accounts/:account/loyalty',
    answer(200, (req, res) => {
      const pos = posOf(res);
      if (!pos.loyaltyCall) throw new NotHeldError(`${pos.name} has no register protocol the fake plays (only toast has)`);
      return pos.loyaltyCall(account(req), req.body ?? {});
    }),
  );
  return router;
}
