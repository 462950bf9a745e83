/**
 * Reads a POS's own API (Square orders and customers, Clover orders and customers, Loyverse
 * customers) for webhooks that carry only ids and payloads that carry only a customer id, and lists
 * each POS's orders for backfill (GET or POST, the POS's own paging). The access token goes as
 * `Authorization: Bearer` or in the POS's own header (Shopify); JSON; one timeout. A failure is a PosApiError: a direct post is answered 502 (its
 * sender posts again); a webhook delivery is kept as a dead letter, which the bridge runs again by
 * itself when the failure is transient (see docs/operators.md, "Dead letters").
 */
import axios, { type AxiosInstance } from 'axios';
import { BridgeError } from './errors.js';
import type { PosAnswer, PosListingApi, PosRequest, PosSettings } from './pos/contract.js';

export class PosApiError extends BridgeError {
  constructor(
    message: string,
    /**
     * The same request may well succeed later: it timed out, the connection failed, or the POS
     * answered 5xx or 429. Any other answer (401, 403, 404, …) needs a person to look: a token, a
     * permission or an object that a later try would find just as wrong.
     */
    readonly transient: boolean,
    /** A 429's or 503's `Retry-After`, in milliseconds, where the POS sent one. */
    readonly retryAfterMs?: number,
    /** The POS's status, when it answered at all. */
    readonly posStatus?: number,
  ) {
    super(message, 502, 'pos_api_failed');
  }
}

/** `Retry-After` in seconds (Shopify sends decimals, "2.0") or as an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number = Date.now()): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** A status that says "later", not "no": the POS is down, overloaded, or asks the bridge to slow down. */
export function isTransientStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

export class PosApiNotConfiguredError extends BridgeError {
  constructor(pos: string) {
    super(`${pos.toUpperCase()}_ACCESS_TOKEN is not set: the bridge cannot fetch what this ${pos} webhook refers to`, 422, 'pos_api_not_configured');
  }
}

/**
 * The client of one POS account's API, or undefined without a token or an address. `{shop}` in the
 * address stands for the account (Shopify's shop domain, SHOPIFY_API_BASE_URL `https://{shop}`).
 */
export function posApi(pos: string, settings: PosSettings, timeoutMs: number): PosListingApi | undefined {
  if (!settings.accessToken || !settings.apiBaseUrl) return undefined;
  if (settings.apiBaseUrl.includes(SHOP_PLACEHOLDER) && !settings.account) return undefined;
  const baseURL = settings.apiBaseUrl.replaceAll(SHOP_PLACEHOLDER, encodeURIComponent(settings.account ?? ''));
  const credential = settings.accessTokenHeader ? { [settings.accessTokenHeader]: settings.accessToken } : { Authorization: `Bearer ${settings.accessToken}` };
  const http: AxiosInstance = axios.create({
    baseURL,
    timeout: timeoutMs,
    headers: { ...credential, Accept: 'application/json' },
    validateStatus: () => true,
    // Repeated parameters stay repeated (Clover's filter=…&filter=…), and `+` is always %2B (Toast's offsets).
    paramsSerializer: { serialize: serializeQuery },
  });
  const send = async (request: PosRequest): Promise<PosAnswer> => {
    const what = `${pos} API ${request.method} ${request.path.split('?')[0]}`;
    let response;
    try {
      response = await http.request({ method: request.method, url: request.path, params: request.query, data: request.body, headers: request.headers });
    } catch (error) {
      // No answer at all (timeout, refused or reset connection, DNS): nothing says a later try fails too.
      throw new PosApiError(`${what} failed: ${(error as Error).message}`, true);
    }
    if (response.status !== 200) {
      const header = response.headers['retry-after'];
      const wait = retryAfterMs(typeof header === 'string' ? header : undefined);
      throw new PosApiError(`${what} answered ${response.status}`, isTransientStatus(response.status), wait, response.status);
    }
    const headers = Object.fromEntries(Object.entries(response.headers).flatMap(([name, value]) => (typeof value === 'string' ? [[name.toLowerCase(), value]] : [])));
    return { data: response.data as unknown, headers };
  };
  return {
    async get(path, query) {
      return (await send({ method: 'GET', path, ...(query ? { query } : {}) })).data;
    },
    request: send,
  };
}

/** What `{shop}` in a POS API address stands for: the merchant's account there (SHOPIFY_API_BASE_URL). */
export const SHOP_PLACEHOLDER = '{shop}';

function serializeQuery(query: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) params.append(name, String(one));
  }
  // URLSearchParams writes a space as `+`; %20 reads the same everywhere.
  return params.toString().replaceAll('+', '%20');
}
