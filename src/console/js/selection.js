// @ts-check
/**
 * The records ticked in search results: kept across result pages and new searches until the
 * operator clears them (or signs out), so a bulk action can gather records from several searches.
 * Held in this page only, never in its address or the browser's storage.
 */

/** @typedef {{ merchantId: string, transactionId: string }} Ticked */

/** @type {Map<string, Ticked>} */
const ticked = new Map();

const keyOf = (/** @type {string | undefined} */ merchantId, /** @type {string} */ transactionId) => `${merchantId ?? 'default'}/${transactionId}`;

export const selection = {
  /**
   * @param {string | undefined} merchantId
   * @param {string} transactionId
   */
  has(merchantId, transactionId) {
    return ticked.has(keyOf(merchantId, transactionId));
  },
  /**
   * @param {string | undefined} merchantId
   * @param {string} transactionId
   * @param {boolean} on
   */
  set(merchantId, transactionId, on) {
    if (on) ticked.set(keyOf(merchantId, transactionId), { merchantId: merchantId ?? 'default', transactionId });
    else ticked.delete(keyOf(merchantId, transactionId));
  },
  /**
   * `[{ merchantId, transactionId }]`, in the order they were ticked.
   * @returns {Ticked[]}
   */
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
