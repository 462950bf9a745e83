/**
 * The order in which `listDue` hands out due work (store.ts): merchants take turns. Each merchant's
 * records are ranked earliest first and cut at `perMerchant`; then come every merchant's first
 * records, earliest first, then every merchant's second, and so on, up to `limit`. The memory and
 * file stores use this; the PostgreSQL store says the same in SQL (pg-store.ts `listDue`).
 */
export function takeTurns<T>(due: Iterable<T>, options: { merchantOf: (item: T) => string; earlier: (a: T, b: T) => number; perMerchant?: number; limit: number }): T[] {
  const byMerchant = new Map<string, T[]>();
  for (const item of due) {
    const merchant = options.merchantOf(item);
    const items = byMerchant.get(merchant);
    if (items) items.push(item);
    else byMerchant.set(merchant, [item]);
  }
  const cap = Math.min(options.perMerchant ?? options.limit, options.limit);
  const turns: { item: T; turn: number }[] = [];
  for (const items of byMerchant.values()) {
    items.sort(options.earlier);
    for (let turn = 0; turn < Math.min(cap, items.length); turn++) turns.push({ item: items[turn]!, turn });
  }
  return turns
    .sort((a, b) => a.turn - b.turn || options.earlier(a.item, b.item))
    .slice(0, options.limit)
    .map((t) => t.item);
}
