/**
 * An in-repo fake of the loyalty service, spoken to over real HTTP: the upstream in sandbox mode
 * and in end-to-end tests. It follows loyalty-service-api.md strictly for the point-of-sale group
 * and the two history reads, and keeps "books" that expose any double accrual or reversal.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { SimContext } from './context.js';
import { controlRouter } from './control.js';
import { FaultQueue } from './faults.js';
import { historyRouter } from './history.js';
import { posRouter } from './pos.js';
import { type Books, Ledger } from './state.js';

export { FaultQueue, FAULT_KINDS } from './faults.js';
export type { Fault, FaultKind, FaultSpec, FaultTarget } from './faults.js';
export type { Books, TransactionBook } from './state.js';

export interface SimulatorOptions {
  appToken?: string;
  apiKey?: string;
  /** Default [1]. Every customer gets one card per template (contract: one card per template per customer). */
  templateIds?: number[];
  now?: () => Date;
}

export interface ListeningSimulator {
  /** http://host:port, no trailing slash. */
  url: string;
  /** Stops listening and destroys every open socket, including ones held by a slow fault. */
  close(): Promise<void>;
}

export interface Simulator {
  app: express.Express;
  appToken: string;
  apiKey: string;
  listen(port?: number, host?: string): Promise<ListeningSimulator>;
  faults: FaultQueue;
  books(): Books;
  addCustomer(c: { phone?: string; email?: string; firstName?: string }): { customerId: string; cardIds: string[] };
  reset(): void;
}

export function createSimulator(opts: SimulatorOptions = {}): Simulator {
  const appToken = opts.appToken ?? 'sim-app-token';
  const apiKey = opts.apiKey ?? 'sim-api-key';
  const templateIds = [...(opts.templateIds ?? [1])];
  if (templateIds.length === 0) throw new RangeError('templateIds must not be empty');
  const now = opts.now ?? (() => new Date());
  const timers = new Set<NodeJS.Timeout>();

  const ctx: SimContext = {
    appToken,
    apiKey,
    now,
    faults: new FaultQueue(),
    ledger: new Ledger(templateIds, now),
    credentials: [
      { name: 'companyId', value: '1' },
      { name: 'locationId', value: '1' },
      { name: 'templateId', value: String(templateIds[0]) },
    ],
    later(ms, fn) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        fn();
      }, ms);
      timer.unref();
      timers.add(timer);
    },
  };

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  // Contract, general wire rules: X-Request-ID on every response.
  app.use((_req, res, next) => {
    res.setHeader('X-Request-ID', randomUUID());
    next();
  });

  const sim: Simulator = {
    app,
    appToken,
    apiKey,
    faults: ctx.faults,
    books: () => ctx.ledger.books(),
    addCustomer(c) {
      const customer = ctx.ledger.addCustomer(c);
      return { customerId: customer.id, cardIds: customer.cards.map((card) => card.serial) };
    },
    reset() {
      ctx.ledger = new Ledger(templateIds, now);
      ctx.faults.clear();
    },
    listen: (port = 0, host = '127.0.0.1') => listen(app, port, host, () => {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    }),
  };

  app.use('/api/v2/marketplace', posRouter(ctx));
  app.use('/api/v2', historyRouter(ctx));
  app.use('/__sim', controlRouter(sim));
  app.use((req, res) => {
    res.status(404).json({ message: `No route for ${req.method} ${req.path}` });
  });
  app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const status = (err as { status?: number }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return void res.status(status).json({ message: err instanceof Error ? err.message : 'Bad request' });
    }
    res.status(500).json({ message: err instanceof Error ? err.message : 'Internal Server Error' });
  });

  return sim;
}

function listen(app: express.Express, port: number, host: string, cancelTimers: () => void): Promise<ListeningSimulator> {
  return new Promise((resolve, reject) => {
    const server = http.createServer(app);
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const { port: bound } = server.address() as AddressInfo;
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
      let closing: Promise<void> | undefined;
      resolve({
        url,
        close: () =>
          (closing ??= new Promise<void>((done) => {
            cancelTimers();
            server.close(() => done());
            server.closeAllConnections();
          })),
      });
    });
  });
}
