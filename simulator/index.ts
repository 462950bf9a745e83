/**
 * An in-repo fake of the loyalty service, spoken to over real HTTP: the upstream in sandbox mode
 * and in end-to-end tests. It follows loyalty-service-api.md strictly for the point-of-sale group
 * and the two history reads, and keeps "books" that expose any double accrual or reversal.
 *
 * It holds one or more merchants (merchant.ts), each with its own app token, API key, books and
 * faults. createSimulator() makes the "default" one from its options; the Simulator's own faults,
 * books(), addCustomer() and reset() are that merchant's, so a single-merchant caller sees no change.
 *
 * The same server also serves fake APIs of the POSes the bridge reads from (`sim.pos`, mounted
 * under /square, /shopify/{shop}, /clover, /toast and /loyverse; docs/simulator-pos-apis.md).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { SimContext } from './context.js';
import { controlRouter } from './control.js';
import type { FaultQueue } from './faults.js';
import { historyRouter } from './history.js';
import { DEFAULT_MERCHANT_ID, type MerchantOptions, Merchants, type NewCustomerInput, type SimMerchant } from './merchant.js';
import { posRouter } from './pos.js';
import { FakePosApis } from './pos-apis/index.js';
import { type Books, COMPANY_ID } from './state.js';

export { FaultQueue, FAULT_KINDS } from './faults.js';
export type { Fault, FaultKind, FaultSpec, FaultTarget } from './faults.js';
export type { Books, TransactionBook } from './state.js';
export { DEFAULT_MERCHANT_ID } from './merchant.js';
export type { MerchantOptions, NewCustomerInput, SimMerchant } from './merchant.js';
export * from './pos-apis/index.js';

export interface SimulatorOptions {
  /** The default merchant's app token; default `sim-app-token`. */
  appToken?: string;
  /** The default merchant's API key; default `sim-api-key`. */
  apiKey?: string;
  /** The default merchant's; default [1]. Every customer gets one card per template (contract: one card per template per customer). */
  templateIds?: number[];
  now?: () => Date;
  /** More merchants besides the default one, as if added with addMerchant() in this order. */
  merchants?: MerchantOptions[];
  /**
   * The id of each merchant's first operation; default 1. The sandbox's ledger outlives the
   * simulator, which starts empty at every run: numbered from 1 again, a new run's operations would
   * carry ids the ledger's records already claim, and the bridge would refuse them as taken.
   */
  firstOperationId?: number;
}

export interface ListeningSimulator {
  /** http://host:port, no trailing slash. */
  url: string;
  /** Stops listening and destroys every open socket, including ones held by a slow fault. */
  close(): Promise<void>;
}

export interface Simulator {
  app: express.Express;
  /** The default merchant's. */
  appToken: string;
  /** The default merchant's. */
  apiKey: string;
  listen(port?: number, host?: string): Promise<ListeningSimulator>;
  /** The default merchant's. */
  faults: FaultQueue;
  /** The default merchant's. */
  books(): Books;
  /** The default merchant's. */
  addCustomer(c: NewCustomerInput): { customerId: string; cardIds: string[] };
  /** The default merchant back to as created; other merchants are left as they are (each has its own reset()). */
  reset(): void;
  /** A new merchant, served at once; throws RangeError on an invalid or taken id, credential or companyId. */
  addMerchant(opts: MerchantOptions): SimMerchant;
  /** A merchant by id (`default` included); throws RangeError when there is none. */
  merchant(id: string): SimMerchant;
  /** Every merchant, the default one first. */
  merchants(): SimMerchant[];
  /**
   * The fake POS APIs served beside the loyalty service (docs/simulator-pos-apis.md): their
   * accounts, orders, refunds, customers and faults. Independent of the loyalty merchants: a bridge
   * merchant names its POS account, and the fake knows nothing of loyalty.
   */
  pos: FakePosApis;
}

export function createSimulator(opts: SimulatorOptions = {}): Simulator {
  const now = opts.now ?? (() => new Date());
  const timers = new Set<NodeJS.Timeout>();
  if (opts.firstOperationId !== undefined && (!Number.isSafeInteger(opts.firstOperationId) || opts.firstOperationId < 1)) throw new RangeError('firstOperationId must be a positive safe integer');
  const merchants = new Merchants(now, opts.firstOperationId);
  const defaultMerchant = merchants.add({
    id: DEFAULT_MERCHANT_ID,
    appToken: opts.appToken ?? 'sim-app-token',
    apiKey: opts.apiKey ?? 'sim-api-key',
    companyId: COMPANY_ID,
    ...(opts.templateIds === undefined ? {} : { templateIds: opts.templateIds }),
  });
  for (const more of opts.merchants ?? []) merchants.add(more);

  const ctx: SimContext = {
    now,
    merchants,
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
    appToken: defaultMerchant.appToken,
    apiKey: defaultMerchant.apiKey,
    faults: defaultMerchant.faults,
    books: () => defaultMerchant.books(),
    addCustomer: (c) => defaultMerchant.addCustomer(c),
    reset: () => defaultMerchant.reset(),
    addMerchant: (options) => merchants.add(options),
    merchant(id) {
      const found = merchants.get(id);
      if (found === undefined) throw new RangeError(`no merchant ${id}`);
      return found;
    },
    merchants: () => merchants.list(),
    pos: new FakePosApis(ctx),
    listen: (port = 0, host = '127.0.0.1') => listen(app, port, host, () => {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    }),
  };

  app.use('/api/v2/marketplace', posRouter(ctx));
  app.use('/api/v2', historyRouter(ctx));
  // Under prefixes of their own (/square, /shopify/{shop}, …), never /api or /__sim.
  sim.pos.mount(app);
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
