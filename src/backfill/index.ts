/**
 * Backfill (docs/backfill-and-reconcile.md): reading each POS account's orders back from the POS, because
 * webhooks are not guaranteed. `listPosChanges` is the read-only listing (also what the reconcile
 * report reads "the POS's orders and refunds" with).
 */
export { BackfillNotPossibleError, DEFAULT_LISTING_RETRY, listingSource, listPosChanges, type FoundItem, type ListingMerchant, type ListingOptions, type ListingRetry } from './listing.js';
