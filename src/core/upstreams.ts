/**
 * The core's way to each merchant's loyalty service (UpstreamDirectory), over the merchants the
 * registry serves: the merchant's client for its point-of-sale calls, a history verifier over that
 * client's history reads, and whether the merchant is suspended. The verifier is built here, in the
 * core that owns verification, not by the registry, which only holds merchants and their clients.
 */
import type { LoyaltyClient } from '../loyalty/client.js';
import { isSuspended, type MerchantStatus } from '../merchants/merchant.js';
import type { Logger } from '../logger.js';
import { HistoryVerifier, type VerifierOptions, type VerifierStore } from './history-verifier.js';
import type { Upstream, UpstreamDirectory } from './delivery.js';

/** What this needs of the registry (merchants/registry.ts `MerchantRegistry`). */
export interface ServedMerchants {
  readonly default: { client: LoyaltyClient };
  get(id: string): Promise<{ client: LoyaltyClient; status: MerchantStatus } | undefined>;
  anyCreated(): Promise<boolean>;
}

export function merchantUpstreams(merchants: ServedMerchants, store: VerifierStore, options: VerifierOptions, logger: Logger): UpstreamDirectory {
  // A verifier holds nothing of its own (its client, the store, the options), so one is made per
  // lookup; the client, with its pools and retry state, is the registry's, kept per merchant version.
  const upstreamOf = (merchant: { client: LoyaltyClient; status: MerchantStatus }): Upstream => ({
    calls: merchant.client,
    verifier: new HistoryVerifier(merchant.client, store, options),
    suspended: isSuspended(merchant),
  });
  return {
    async upstreamOf(merchantId) {
      const merchant = await merchants.get(merchantId).catch((error: unknown) => {
        logger.error({ merchantId, err: error }, 'merchant could not be loaded');
        return undefined;
      });
      return merchant && upstreamOf(merchant);
    },
    async canVerifyAny() {
      return merchants.default.client.canVerify || (await merchants.anyCreated());
    },
  };
}
