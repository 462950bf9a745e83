/**
 * Control API for processes that only see the simulator over HTTP (the bridge under test, a
 * benchmark driver). Deliberately outside /api/v2 so it can never be mistaken for the contract.
 *
 * Every merchant's books, faults and customers are under /__sim/merchants/<id>/...; the default
 * merchant's are also at the paths that predate merchants (/__sim/books, /__sim/faults, ...). The
 * fake POS APIs are driven under /__sim/pos/... (docs/simulator-pos-apis.md).
 */
import express, { type Response } from 'express';
import { z } from 'zod';
import { FAULT_KINDS, FAULT_TARGETS } from './faults.js';
import { DEFAULT_MERCHANT_ID, type MerchantOptions, type SimMerchant } from './merchant.js';
import type { FakePosApis } from './pos-apis/index.js';
import { posControlRouter } from './pos-apis/control.js';

const FaultBody = z.object({
  kind: z.enum(FAULT_KINDS),
  times: z.number().int().positive().optional(),
  on: z.enum(FAULT_TARGETS).optional(),
  delayMs: z.number().int().nonnegative().optional(),
  status: z.number().int().min(500).max(599).optional(),
  message: z.string().optional(),
  shift: z.number().int().positive().optional(),
});

const StormBody = z.object({ on: z.boolean() });
const LatencyBody = z.strictObject({ ms: z.number().int().min(0).max(60_000) });

const CustomerBody = z.object({
  phone: z.string().optional(),
  email: z.string().optional(),
  firstName: z.string().optional(),
  surname: z.string().optional(),
});

const MerchantBody = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/),
  appToken: z.string().trim().min(1).optional(),
  apiKey: z.string().trim().min(1).optional(),
  companyId: z.number().int().positive().optional(),
  templateIds: z
    .array(z.number().int().positive())
    .min(1)
    .refine((ids) => new Set(ids).size === ids.length, 'must not repeat')
    .optional(),
  credentials: z.union([z.array(z.object({ name: z.string().min(1), value: z.string() })), z.record(z.string().min(1), z.string())]).optional(),
});

const CredentialsPatch = z.record(z.string().min(1), z.string().nullable());

function problems(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`);
}

/** Secrets included on purpose: a driver over HTTP needs the tokens to call the merchant. */
function describe(m: SimMerchant) {
  return {
    id: m.id,
    appToken: m.appToken,
    apiKey: m.apiKey,
    companyId: m.companyId,
    templateIds: m.templateIds,
    credentials: m.credentials,
    revoked: m.revoked,
    faults: faultState(m),
  };
}

function faultState(m: SimMerchant) {
  return { pending: m.faults.pending(), rateLimitAll: m.faults.rateLimitAll, ...(m.faults.cardReadLatencyMs ? { cardReadLatencyMs: m.faults.cardReadLatencyMs } : {}) };
}

/** One merchant's routes; `merchantOf` names the merchant of the request (fixed, or from the path). */
function merchantRouter(merchantOf: (res: Response) => SimMerchant): express.Router {
  const router = express.Router();

  router.get('/books', (_req, res) => {
    res.json(merchantOf(res).books());
  });

  router.get('/faults', (_req, res) => {
    res.json(faultState(merchantOf(res)));
  });

  router.post('/faults', (req, res) => {
    const parsed = FaultBody.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    const merchant = merchantOf(res);
    try {
      merchant.faults.inject(parsed.data);
    } catch (err) {
      // The shape was checked above: what inject still refuses is a fault aimed where it cannot apply.
      if (err instanceof RangeError) return void res.status(400).json({ errors: [err.message] });
      throw err;
    }
    res.status(201).json(faultState(merchant));
  });

  router.delete('/faults', (_req, res) => {
    const merchant = merchantOf(res);
    merchant.faults.clear();
    res.json(faultState(merchant));
  });

  /** The rate-limit storm of FaultQueue.rateLimitAll: `{ "on": true }` starts it, `{ "on": false }` ends it. */
  router.put('/faults/rate-limit-all', (req, res) => {
    const parsed = StormBody.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    const merchant = merchantOf(res);
    merchant.faults.rateLimitAll = parsed.data.on;
    res.json(faultState(merchant));
  });

  /** Every card read's latency (FaultQueue.cardReadLatencyMs): `{ "ms": 100 }`; 0 ends it. */
  router.put('/faults/card-read-latency', (req, res) => {
    const parsed = LatencyBody.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    const merchant = merchantOf(res);
    merchant.faults.cardReadLatencyMs = parsed.data.ms;
    res.json(faultState(merchant));
  });

  router.post('/reset', (_req, res) => {
    merchantOf(res).reset();
    res.json({ ok: true });
  });

  router.post('/customers', (req, res) => {
    const parsed = CustomerBody.safeParse(req.body ?? {});
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    res.status(201).json(merchantOf(res).addCustomer(parsed.data));
  });

  router.patch('/credentials', (req, res) => {
    const parsed = CredentialsPatch.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    const merchant = merchantOf(res);
    merchant.setCredentials(parsed.data);
    res.json({ credentials: merchant.credentials });
  });

  router.post('/revoke', (_req, res) => {
    const merchant = merchantOf(res);
    merchant.revoke();
    res.json(describe(merchant));
  });

  router.post('/restore', (_req, res) => {
    const merchant = merchantOf(res);
    merchant.restore();
    res.json(describe(merchant));
  });

  return router;
}

/** What the control endpoints act on: the simulator's merchants and its fake POS APIs (index.ts' Simulator has them all). */
export interface ControlledSimulator {
  addMerchant(opts: MerchantOptions): SimMerchant;
  merchant(id: string): SimMerchant;
  merchants(): SimMerchant[];
  pos: FakePosApis;
}

export function controlRouter(sim: ControlledSimulator): express.Router {
  const router = express.Router();
  router.use(express.json());

  // The fake POS APIs' accounts, orders, refunds, customers, faults and webhooks (pos-apis/control.ts).
  router.use('/pos', posControlRouter(sim.pos));

  router.get('/merchants', (_req, res) => {
    res.json({ merchants: sim.merchants().map(describe) });
  });

  router.post('/merchants', (req, res) => {
    const parsed = MerchantBody.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    let merchant: SimMerchant;
    try {
      merchant = sim.addMerchant(parsed.data);
    } catch (err) {
      // The body's shape was checked above: what addMerchant still refuses is a clash with another merchant.
      if (err instanceof RangeError) return void res.status(409).json({ errors: [err.message] });
      throw err;
    }
    res.status(201).json(describe(merchant));
  });

  const byPath = express.Router({ mergeParams: true });
  byPath.use((req, res, next) => {
    const id = (req.params as { merchantId: string }).merchantId;
    const merchant = sim.merchants().find((m) => m.id === id);
    if (merchant === undefined) return void res.status(404).json({ message: `No merchant ${id}` });
    res.locals.merchant = merchant;
    next();
  });
  byPath.get('/', (_req, res) => {
    res.json(describe(res.locals.merchant as SimMerchant));
  });
  byPath.use(merchantRouter((res) => res.locals.merchant as SimMerchant));
  router.use('/merchants/:merchantId', byPath);

  // The default merchant at the paths that predate merchants.
  const defaultMerchant = sim.merchant(DEFAULT_MERCHANT_ID);
  router.use(merchantRouter(() => defaultMerchant));

  return router;
}
