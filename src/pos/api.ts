/**
 * Reads a POS's own API (Square orders and customers, Clover orders and customers, Loyverse
 * customers) for webhooks that carry only ids and payloads that carry only a customer id, and lists
 * each POS's orders for backfill (GET or POST, the POS's own paging). The access token goes as
 * `Authorization: Bearer` or in the POS's own header (Shopify); JSON; one timeout. A failure is a
 * PosApiError: a direct post is answered 502 (its sender posts again), or 422 when the POS answered
 * that the object the post names is not the merchant's (PosObjectRefusedError); a webhook delivery
 * is kept as a dead letter, which the bridge runs again by itself when the failure is transient
 * (see docs/operators.md, "Dead letters").
 *
 * The token goes to the configured origin only (security review, issue 19): no redirect is followed
 * (a 3xx is a failure naming where it pointed), as the loyalty client follows none, and a whole URL
 * the POS gave out (Shopify's `Link` header for the next page) is requested only on that origin.
 */
import axios, { type AxiosInstance } from 'axios';
import { BridgeError, echoed } from '../kernel/errors.js';
import type { PosAnswer, PosListingApi, PosObjectRef, PosRequest, PosSettings } from './contract.js';

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

/** The POS answered that the object asked for is not the account's (404, 410) or not one it can read (400): asking again changes nothing. */
export function isObjectRefusal(status: number): boolean {
  return status === 404 || status === 410 || status === 400;
}

/**
 * 422: a direct post names an object (a Square refund's order, a customer) that the merchant's
 * account on the POS answers it does not have: another merchant's order, or an id that is not one.
 * A 5xx would have the POS post it again for ever; nothing was recorded.
 */
export class PosObjectRefusedError extends BridgeError {
  constructor(pos: string, object: PosObjectRef, posStatus: number) {
    const why = posStatus === 400 ? `refuses to read the ${object.kind} ${JSON.stringify(echoed(object.id))} (it answered ${posStatus})` : `has no ${object.kind} ${JSON.stringify(echoed(object.id))} for this merchant's account (it answered ${posStatus})`;
    super(`${pos}'s API ${why}: nothing was recorded, and posting it again changes nothing`, 422, posStatus === 400 ? 'pos_object_refused' : 'pos_object_not_found', {
      object: { kind: object.kind, id: echoed(object.id) },
      posStatus,
    });
  }
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
  const origin = originOf(baseURL, baseURL);
  const credential = settings.accessTokenHeader ? { [settings.accessTokenHeader]: settings.accessToken } : { Authorization: `Bearer ${settings.accessToken}` };
  const http: AxiosInstance = axios.create({
    baseURL,
    timeout: timeoutMs,
    headers: { ...credential, Accept: 'application/json' },
    validateStatus: () => true,
    // The POS's API answers where it is asked; a redirect would carry the access token elsewhere.
    maxRedirects: 0,
    // Repeated parameters stay repeated (Clover's filter=…&filter=…), and `+` is always %2B (Toast's offsets).
    paramsSerializer: { serialize: serializeQuery },
  });
  const send = async (request: PosRequest): Promise<PosAnswer> => {
    const what = `${pos} API ${request.method} ${request.path.split('?')[0]}`;
    const elsewhere = originElsewhere(request.path, baseURL, origin);
    if (elsewhere) throw new PosApiError(`${pos} API: a link the POS gave out points at ${JSON.stringify(echoed(elsewhere))}, not at the configured API origin ${origin}: not followed, and nothing was sent there`, false);
    let response;
    try {
      response = await http.request({ method: request.method, url: request.path, params: request.query, data: request.body, headers: request.headers });
    } catch (error) {
      // No answer at all (timeout, refused or reset connection, DNS): nothing says a later try fails too.
      throw new PosApiError(`${what} failed: ${(error as Error).message}`, true);
    }
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.location;
      const to = typeof location === 'string' ? `to ${JSON.stringify(echoed(originOf(location, baseURL)))}` : 'without a Location';
      throw new PosApiError(`${pos} API ${request.method} ${request.path.split('?')[0]} answered ${response.status}, a redirect ${to}: not followed (the access token goes to the configured API origin only)`, false, undefined, response.status);
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

/** A path axios would send to another origin than the configured one: that origin; undefined for a path on it. */
function originElsewhere(path: string, baseURL: string, origin: string): string | undefined {
  // axios takes a path with a scheme, or starting `//`, as a whole URL and ignores baseURL for it.
  if (!/^([a-z][a-z\d+\-.]*:)?\/\//i.test(path)) return undefined;
  const target = originOf(path, baseURL);
  return target === origin ? undefined : target;
}

/** A URL's origin as resolved against the base (`null` for a scheme without one); the text itself when it is no URL. */
function originOf(url: string, baseURL: string): string {
  try {
    return new URL(url, baseURL).origin;
  } catch {
    return url;
  }
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
