/**
 * The two history reads a bridge needs to verify an ambiguous write (contract, Errors rule 3:
 * "verify via GET /api/v2/operations or the card balance"): operations and cards, behind X-API-Key,
 * in the standard envelope with paging meta.
 */
import { randomUUID } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { MAX_ITEMS_PER_PAGE } from '../src/loyalty/contract.js';
import type { SimContext } from './context.js';
import type { Merchant } from './merchant.js';
import { rateLimitPage, serverErrorPage } from './pos.js';
import { isoWithOffset } from './state.js';

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

class QueryError extends Error {}

function single(req: Request, name: string): string | undefined {
  const value: unknown = (req.query as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new QueryError(`${name}: expected a single value.`);
  return value;
}

function integer(req: Request, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const raw = single(req, name);
  if (raw === undefined) return undefined;
  const value = /^-?\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new QueryError(`${name}: expected an integer between ${min} and ${max === Number.MAX_SAFE_INTEGER ? 'infinity' : max}.`);
  }
  return value;
}

function uuid(req: Request, name: string): string | undefined {
  const raw = single(req, name);
  if (raw !== undefined && !UUID.test(raw)) throw new QueryError(`${name}: expected a UUID.`);
  return raw;
}

/** Contract, Statistics/Operations: dates are Y-m-d; the simulator reads them as UTC calendar days, bounds inclusive. */
function date(req: Request, name: string): string | undefined {
  const raw = single(req, name);
  if (raw === undefined) return undefined;
  const parsed = new Date(`${raw}T00:00:00Z`);
  if (!DATE.test(raw) || Number.isNaN(parsed.getTime()) || parsed.toISOString().slice(0, 10) !== raw) {
    throw new QueryError(`${name}: expected a date in Y-m-d format.`);
  }
  return raw;
}

/**
 * The list turned by `rotation` rows: the row at position n is served at n − rotation (wrapping).
 * The contract declares no order, so any order is one the real service could serve; turning it
 * between two page requests moves rows to earlier pages, where a reader already was.
 */
function turned<T>(list: { total: number; page(offset: number, limit: number): T[] }, rotation: number): { total: number; page(offset: number, limit: number): T[] } {
  const by = list.total === 0 ? 0 : rotation % list.total;
  if (by === 0) return list;
  const rows = list.page(0, list.total);
  const order = [...rows.slice(by), ...rows.slice(0, by)];
  return { total: list.total, page: (offset, limit) => order.slice(offset, offset + limit) };
}

/** A wall-clock wait: a read's latency is the client's to feel, whatever the simulator's clock says. */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export function historyRouter(ctx: SimContext): express.Router {
  const router = express.Router();

  /**
   * Routes by X-API-Key: the key "resolves to exactly one account" (contract, Authentication 2), so
   * a merchant's key reads that merchant's cards and operations and nothing of another's. Missing or
   * unknown key, and any app token (Authentication 4-5), are 401 {message}. A revoked install keeps
   * its key: uninstalling the point-of-sale app does not revoke the account's API key.
   */
  function authorise(req: Request, res: Response): Merchant | undefined {
    const key = req.get('x-api-key');
    const merchant = ctx.merchants.byApiKey(key);
    if (merchant !== undefined) return merchant;
    const message =
      key === undefined || key === ''
        ? 'X-API-Key header is required.'
        : ctx.merchants.isAppToken(key)
          ? 'An app token is not accepted here; use X-API-Key.'
          : 'Invalid API key.';
    res.status(401).json({ message });
    return undefined;
  }

  function list(
    res: Response,
    req: Request,
    query: () => { total: number; page(offset: number, limit: number): unknown[] },
  ): void {
    let page: number;
    let itemsPerPage: number;
    let result: ReturnType<typeof query>;
    try {
      page = integer(req, 'page', 1) ?? 1;
      itemsPerPage = integer(req, 'itemsPerPage', 1, MAX_ITEMS_PER_PAGE) ?? 30;
      result = query();
    } catch (err) {
      if (err instanceof QueryError) return void res.status(400).json({ message: err.message });
      throw err;
    }
    res.json({
      responseId: randomUUID(),
      createdAt: isoWithOffset(ctx.now()),
      code: 200,
      data: result.page((page - 1) * itemsPerPage, itemsPerPage),
      meta: { totalItems: result.total, itemsPerPage, currentPage: page },
    });
  }

  /**
   * A card read's latency and faults (on: 'cards'), after the key: false when a fault answered it.
   * The wait is a timer, never a busy loop: other requests are served meanwhile.
   */
  async function cardRead(merchant: Merchant, res: Response): Promise<boolean> {
    const fault = merchant.faults.takeCards();
    const wait = merchant.faults.cardReadLatencyMs + (fault?.kind === 'slow' ? (fault.delayMs ?? 5000) : 0);
    if (wait > 0) await pause(wait);
    if (fault?.kind === 'rate_limit') return void rateLimitPage(res), false;
    if (fault?.kind === 'server_error') return void serverErrorPage(res, fault), false;
    return true;
  }

  router.get('/operations', async (req, res) => {
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    // Faults aimed at history reads (faults.ts): after the key, as the real service checks it first.
    const fault = merchant.faults.takeHistory();
    if (fault?.kind === 'rate_limit') return void rateLimitPage(res);
    if (fault?.kind === 'server_error') return void serverErrorPage(res, fault);
    if (fault?.kind === 'history_moves') merchant.faults.historyRotation += fault.shift!;
    if (fault?.kind === 'slow') await pause(fault.delayMs ?? 5000);
    list(res, req, () =>
      turned(
        merchant.ledger.listOperations({
          cardId: single(req, 'cardId'),
          customerId: uuid(req, 'customerId'),
          templateId: integer(req, 'templateId', 1),
          startDate: date(req, 'startDate'),
          endDate: date(req, 'endDate'),
        }),
        merchant.faults.historyRotation,
      ),
    );
  });

  router.get('/cards', async (req, res) => {
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    if (!(await cardRead(merchant, res))) return;
    list(res, req, () =>
      merchant.ledger.listCards(
        {
          templateId: integer(req, 'templateId', 1),
          customerId: uuid(req, 'customerId'),
          customerEmail: single(req, 'customerEmail'),
          customerPhone: single(req, 'customerPhone'),
        },
      ),
    );
  });

  router.get('/cards/:id', async (req, res) => {
    const merchant = authorise(req, res);
    if (merchant === undefined) return;
    if (!(await cardRead(merchant, res))) return;
    const card = merchant.ledger.card(String(req.params.id));
    // 404's body is not shown by the contract (Errors): a message, as its other refusals carry.
    if (!card) return void res.status(404).json({ message: `Card ${String(req.params.id).slice(0, 100)} not found.` });
    res.json({ responseId: randomUUID(), createdAt: isoWithOffset(ctx.now()), code: 200, data: card });
  });

  return router;
}
