/**
 * The records ticked in search results: kept across result pages and new searches until the
 * operator clears them (or signs out), so a bulk action can gather records from several searches.
 * Held in this page only, never in its address or the browser's storage.
 */

const ticked = new Map();

const keyOf = (merchantId, transactionId) => `${merchantId ?? 'default'}/${transactionId}`;

export const selection = {
  has(merchantId, transactionId) {
    return ticked.has(keyOf(merchantId, transactionId));
  },
  set(merchantId, transactionId, on) {
    if (on) ticked.set(keyOf(merchantId, transactionId), { merchantId: merchantId ?? 'default', transactionId });
    else ticked.delete(keyOf(merchantId, transactionId));
  },
  /** `[{ merchantId, transactionId }]`, in the order they were ticked. */
  all() {
    return [...ticked.values()];
  },
  get size() {
    return ticked.size;
  },
  clear() {
    ticked.clear();
  },
};
