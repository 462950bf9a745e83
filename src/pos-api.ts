/**
 * Reads a POS's own API (Square orders and customers, Clover orders and customers, Loyverse
 * customers) for webhooks that carry only ids and payloads that carry only a customer id.
 * Bearer token, JSON, one timeout; a failure is an UpstreamPosError (502) so the POS redelivers.
 */
import axios, { type AxiosInstance } from 'axios';
import { BridgeError } from './errors.js';
import type { PosApi, PosSettings } from './pos/contract.js';

export class PosApiError extends BridgeError {
  constructor(message: string) {
    super(message, 502, 'pos_api_failed');
  }
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
        throw new PosApiError(`${pos} API GET ${path} failed: ${(error as Error).message}`);
      }
      if (response.status === 404) throw new PosApiError(`${pos} API GET ${path} answered 404`);
      if (response.status !== 200) throw new PosApiError(`${pos} API GET ${path} answered ${response.status}`);
      return response.data as unknown;
    },
  };
}
