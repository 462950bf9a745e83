/**
 * Reads one merchant's orders and refunds back from one POS's own API, for a window of the POS's
 * modification times (docs/backfill-and-reconcile.md). Read-only: it changes nothing in the ledger or upstream.
 * Used by the backfill poller (which feeds what it finds through the webhooks' path) and by the
 * three-way reconcile report (which compares it with the ledger).
 *
 * How each POS lists and pages is the adapter's `backfill` spec (`adapters/<pos>/backfill.ts`);
 * this walks every page of every listing, asking the POS again after a 429 or 5xx (waiting what
 * its `Retry-After` says, or backing off), and gives each object as the adapter parses it.
 */
import { BridgeError, ValidationError } from '../kernel/errors.js';
import type { AdapterContext, BackfillWindow, CheckoutIntent, PosAdapter, PosListingApi, PosRequest, PosSettings, RefundIntent } from '../pos/contract.js';
import { posApi, PosApiError } from '../pos/api.js';
import { saleTransactionId } from '../kernel/transaction-id.js';
import { backoffMs, DOUBLING } from '../kernel/backoff.js';

/** One order or refund the POS listed, as the adapter parsed it. */
export interface FoundItem {
  pos: string;
  kind: 'checkout' | 'refund';
  /** The POS's own order id (for a refund: its sale's). */
  orderId: string;
  /** The POS's own refund id (refunds only; absent for a full reversal the POS names no refund for). */
  refundId?: string;
  /** When the POS last changed it (ISO 8601). */
  updatedAt: string;
  /** A sale the POS counts as paid (always true for a refund). An unpaid sale is listed, not parsed: nothing accrues for it. */
  paid: boolean;
  /**
   * The transactionId the ledger keys the sale by (for a refund: its sale's, where the first record
   * of the order is). Absent when the object was not parsed (unpaid) or the adapter refused it.
   */
  transactionId?: string;
  /** The adapter's reading: a CheckoutIntent for a sale, a RefundIntent for a refund. Absent as `transactionId` is. */
  intent?: CheckoutIntent | RefundIntent;
  /** Why the adapter refused it (a paid object it cannot translate exactly): the field and the reason. */
  refused?: string;
  /** The POS's object as listed, as the adapter reads it (what a webhook's payload would be). */
  payload: unknown;
}

/** Whose orders: a merchant as the merchant registry gives it (`ActiveMerchant` fits). */
export interface ListingMerchant {
  id: string;
  context: AdapterContext;
  pos: Record<string, PosSettings>;
}

/** How long to wait before asking again after a 429 or a 5xx, and how often. */
export interface ListingRetry {
  /** Tries of one page in all (1: no second try). */
  attempts: number;
  /** The first wait when the POS names none (Retry-After absent); doubled each time. */
  baseMs: number;
  /** No wait is longer, whatever Retry-After asks for. */
  maxMs: number;
}

export const DEFAULT_LISTING_RETRY: ListingRetry = { attempts: 4, baseMs: 1000, maxMs: 30_000 };

export interface ListingOptions {
  adapters: ReadonlyMap<string, PosAdapter>;
  merchant: ListingMerchant;
  pos: string;
  window: BackfillWindow;
  /** Objects per page wanted (each POS caps it at its own limit). Default 100. */
  pageSize?: number;
  /** Each request's timeout. Default 10 s. */
  timeoutMs?: number;
  retry?: ListingRetry;
  /** Waits between tries (tests pass one that does not). */
  sleep?: (ms: number) => Promise<void>;
  /** Called after each page read, with the pages read so far and the objects found so far. */
  onPage?: (pages: number, found: number) => void;
}

/** 422: a merchant that cannot be backfilled from this POS (no account, no token, no listing API), naming what to set. */
export class BackfillNotPossibleError extends BridgeError {
  constructor(message: string) {
    super(message, 422, 'backfill_not_possible');
  }
}

/** The merchant's POS account and its API client; refused (422) when the merchant has no such account or token. */
export function listingSource(options: Pick<ListingOptions, 'adapters' | 'merchant' | 'pos' | 'timeoutMs'>): { adapter: PosAdapter; account: string; api: PosListingApi } {
  const adapter = options.adapters.get(options.pos);
  if (!adapter) throw ValidationError.field('pos', `is not a POS the bridge knows; known: ${[...options.adapters.keys()].join(', ')}`);
  if (!adapter.backfill) throw new BackfillNotPossibleError(`${options.pos} has no API to list orders from: its payloads are posted directly`);
  const settings = options.merchant.pos[options.pos];
  const account = settings?.account;
  if (!settings || !account) throw new BackfillNotPossibleError(`merchant ${options.merchant.id} has no ${options.pos} account: set it (the merchant's pos.${options.pos}, or for the default merchant its ${options.pos.toUpperCase()} account variable)`);
  const api = posApi(options.pos, settings, options.timeoutMs ?? 10_000);
  if (!api) throw new BackfillNotPossibleError(`merchant ${options.merchant.id} has no ${options.pos} access token (or ${options.pos.toUpperCase()}_API_BASE_URL is empty): the bridge cannot read its orders`);
  return { adapter, account, api };
}

/**
 * Every order and refund the POS lists as changed in `window` ([since, until)), page by page, each
 * as its adapter parsed it. A POS's bounds may add a little either side (some include both ends,
 * some read whole seconds); nothing in the window is left out. An object can appear twice (offset
 * paging over a live list, or two listings): consumers key by transactionId and refundId.
 *
 * Throws PosApiError when a page still fails after the retries, and BackfillNotPossibleError when
 * the merchant has no account or token on the POS: then whatever was yielded is only a part.
 */
export async function* listPosChanges(options: ListingOptions): AsyncGenerator<FoundItem> {
  const { adapter, account, api } = listingSource(options);
  const spec = adapter.backfill!;
  const retry = options.retry ?? DEFAULT_LISTING_RETRY;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const prepared = spec.prepare ? await withRetry(() => spec.prepare!(api, account), retry, sleep) : undefined;
  let pages = 0;
  let found = 0;
  for (const first of spec.listings(options.window, account, options.pageSize ?? 100, prepared)) {
    for (let request: PosRequest | undefined = first; request; ) {
      const current: PosRequest = request;
      const listed = await withRetry(() => api.request(current), retry, sleep);
      const answer = spec.completePage ? await withRetry(() => spec.completePage!(api, listed, current), retry, sleep) : listed;
      const page = spec.page(answer, current);
      pages++;
      for (const object of page.found) {
        found++;
        yield parsed(adapter, options.merchant.context, object);
      }
      options.onPage?.(pages, found);
      request = page.next;
    }
  }
}

function parsed(adapter: PosAdapter, context: AdapterContext, object: { kind: 'checkout' | 'refund'; payload: unknown; orderId: string; refundId?: string; updatedAt: string; paid: boolean }): FoundItem {
  const item: FoundItem = { pos: adapter.name, ...object };
  if (!object.paid) return item;
  try {
    const intent = object.kind === 'checkout' ? adapter.parseCheckout(object.payload, context) : adapter.parseRefund(object.payload, context);
    return { ...item, intent, transactionId: saleTransactionId(adapter.name, intent) };
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    return { ...item, refused: error.message };
  }
}

/** One request, asked again after a transient failure: after the POS's Retry-After, else after a doubling wait. */
async function withRetry<T>(send: () => Promise<T>, retry: ListingRetry, sleep: (ms: number) => Promise<void>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      if (!(error instanceof PosApiError) || !error.transient || attempt >= retry.attempts) throw error;
      await sleep(Math.min(retry.maxMs, error.retryAfterMs ?? backoffMs(DOUBLING, retry.baseMs, attempt)));
    }
  }
}
