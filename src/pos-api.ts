/**
 * Reads a POS's own API (Square orders and customers, Clover orders and customers, Loyverse
 * customers) for webhooks that carry only ids and payloads that carry only a customer id.
 * Bearer token, JSON, one timeout. A failure is a PosApiError: a direct post is answered 502 (its
 * sender posts again); a webhook delivery is kept as a dead letter, which the bridge runs again by
 * itself when the failure is transient (see the README, "Dead letters").
 */
import axios, { type AxiosInstance } from 'axios';
import { BridgeError } from './errors.js';
import type { PosApi, PosSettings } from './pos/contract.js';

export class PosApiError extends BridgeError {
  constructor(
    message: string,
    /**
     * The same request may well succeed later: it timed out, the connection failed, or the POS
     * answered 5xx or 429. Any other answer (401, 403, 404, …) needs a person to look: a token, a
     * permission or an object that a later try would find just as wrong.
     */
    readonly transient: boolean,
  ) {
    super(message, 502, 'pos_api_failed');
  }
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

export function posApi(pos: string, settings: PosSettings, timeoutMs: number): PosApi | undefined {
  if (!settings.accessToken || !settings.apiBaseUrl) return undefined;
  const http: AxiosInstance = axios.create({
    baseURL: settings.apiBaseUrl,
    timeout: timeoutMs,
    headers: { Authorization: `Bearer ${settings.accessToken}`, Accept: 'application/json' },
    validateStatus: () => true,
  });
  return {
    async get(path, query) {
      let response;
      try {
        response = await http.get(path, { params: query });
      } catch (error) {
        // No answer at all (timeout, refused or reset connection, DNS): nothing says a later try fails too.
        throw new PosApiError(`${pos} API GET ${path} failed: ${(error as Error).message}`, true);
      }
      if (response.status !== 200) throw new PosApiError(`${pos} API GET ${path} answered ${response.status}`, isTransientStatus(response.status));
      return response.data as unknown;
    },
  };
}
