/**
 * The core's way to each merchant's loyalty service (UpstreamDirectory), over the merchants the
 * registry serves: the merchant's client for its point-of-sale calls, a history verifier over that
 * client's history reads, and whether the merchant is suspended. The verifier is built here, in the
 * core that owns verification, not by the registry, which only holds merchants and their clients.
 */
import type { CallReport, LoyaltyClient } from '../loyalty/client.js';
import { isSuspended, type AmbiguityPolicy, type MerchantStatus } from '../state/merchant.js';
import type { Logger } from '../kernel/logger.js';
import { HistoryVerifier, type VerifierOptions, type VerifierStore } from './history-verifier.js';
import type { Upstream, UpstreamDirectory } from './delivery.js';

/** What this needs of the registry (merchants/registry.ts `MerchantRegistry`). */
export interface ServedMerchants {
  readonly default: { client: LoyaltyClient };
  get(id: string): Promise<{ client: LoyaltyClient; status: MerchantStatus; ambiguity: AmbiguityPolicy } | undefined>;
  anyCreated(): Promise<boolean>;
}

/**
 * `cardsChanged`: told of the cards a merchant's accrue or reverse reached (its answer's results, or
 * the card its request named), whatever came of it, so what a register was shown of them is read
 * again (register.ts `CardReads.forget`).
 */
export function merchantUpstreams(merchants: ServedMerchants, store: VerifierStore, options: VerifierOptions, logger: Logger, cardsChanged: (merchantId: string, serials: string[]) => void = () => {}): UpstreamDirectory {
  // A verifier holds nothing of its own (its client, the store, the options), so one is made per
  // lookup; the client, with its pools and retry state, is the registry's, kept per merchant version.
  const upstreamOf = (merchantId: string, merchant: { client: LoyaltyClient; status: MerchantStatus; ambiguity: AmbiguityPolicy }): Upstream => ({
    calls: {
      accrue: async (body) => touched(merchantId, body.serialNumber, await merchant.client.accrue(body)),
      reverse: async (body) => touched(merchantId, undefined, await merchant.client.reverse(body)),
    },
    verifier: new HistoryVerifier(merchant.client, store, options),
    suspended: isSuspended(merchant),
    ambiguity: merchant.ambiguity,
  });
  const touched = (merchantId: string, named: string | undefined, report: CallReport): CallReport => {
    const results = 'results' in report.outcome ? report.outcome.results : [];
    const serials = [...new Set([...(named ? [named] : []), ...results.flatMap((r) => (r.serialNumber ? [r.serialNumber] : []))])];
    if (serials.length) cardsChanged(merchantId, serials);
    return report;
  };
  return {
    async upstreamOf(merchantId) {
      const merchant = await merchants.get(merchantId).catch((error: unknown) => {
        logger.error({ merchantId, err: error }, 'merchant could not be loaded');
        return undefined;
      });
      return merchant && upstreamOf(merchantId, merchant);
    },
    async canVerifyAny() {
      return merchants.default.client.canVerify || (await merchants.anyCreated());
    },
  };
}
