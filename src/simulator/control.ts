/**
 * Control API for processes that only see the simulator over HTTP (the bridge under test, a
 * benchmark driver). Deliberately outside /api/v2 so it can never be mistaken for the contract.
 */
import express from 'express';
import { z } from 'zod';
import { FAULT_KINDS } from './faults.js';
import type { Simulator } from './index.js';

const FaultBody = z.object({
  kind: z.enum(FAULT_KINDS),
  times: z.number().int().positive().optional(),
  on: z.enum(['accrue', 'reverse', 'any']).optional(),
  delayMs: z.number().int().nonnegative().optional(),
  status: z.number().int().min(500).max(599).optional(),
  message: z.string().optional(),
});

const CustomerBody = z.object({
  phone: z.string().optional(),
  email: z.string().optional(),
  firstName: z.string().optional(),
});

function problems(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`);
}

export function controlRouter(sim: Pick<Simulator, 'books' | 'faults' | 'reset' | 'addCustomer'>): express.Router {
  const router = express.Router();
  router.use(express.json());

  router.get('/books', (_req, res) => {
    res.json(sim.books());
  });

  router.get('/faults', (_req, res) => {
    res.json({ pending: sim.faults.pending() });
  });

  router.post('/faults', (req, res) => {
    const parsed = FaultBody.safeParse(req.body);
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    sim.faults.inject(parsed.data);
    res.status(201).json({ pending: sim.faults.pending() });
  });

  router.delete('/faults', (_req, res) => {
    sim.faults.clear();
    res.json({ pending: 0 });
  });

  router.post('/reset', (_req, res) => {
    sim.reset();
    res.json({ ok: true });
  });

  router.post('/customers', (req, res) => {
    const parsed = CustomerBody.safeParse(req.body ?? {});
    if (!parsed.success) return void res.status(400).json({ errors: problems(parsed.error) });
    res.status(201).json(sim.addCustomer(parsed.data));
  });

  return router;
}
