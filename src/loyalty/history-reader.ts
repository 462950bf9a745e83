/**
 * Reads the whole of a merchant's operations history for a date range, from a list that may move
 * while it is read. The upstream's Limits: `page` and `itemsPerPage` (at most 1000) only, no cursor,
 * no sort parameter and no declared order, so "paging through a changing collection can skip or
 * repeat rows". What this does about it:
 *
 * - Overlap: every page after the first starts some rows before the end of the one before
 *   (`pageWindow`), so a row that moved up by fewer rows than the overlap between two requests is
 *   still read. Only page and page size can be chosen, so the overlap comes from a page size that
 *   puts a page boundary just before where the next page should start.
 * - Dedupe: rows are kept by operation id; a row read twice (moved down, or in the overlap) counts once.
 * - Passes: the whole list is read again until a pass adds no operation not seen before, at most
 *   `maxPasses` times; `settled` says whether the last pass added nothing (when false, a moving list
 *   may still hide rows from the report, which says so).
 * - 429: each request goes through the loyalty client, which backs off 1, 2, 4, 8 s (the README's
 *   loyalty rules); a page it still cannot read fails the whole read, never a part of it silently.
 */
import { MAX_ITEMS_PER_PAGE, type Operation, type OperationsQuery } from './contract.js';

export interface OperationsPages {
  operationsPage(query: OperationsQuery, page: number, itemsPerPage: number): Promise<{ data: Operation[]; meta: { totalItems: number } }>;
}

export interface HistoryReadOptions {
  /** Largest page asked for (the upstream's maximum, 1000, by default). */
  maxItemsPerPage?: number;
  /** Rows each page repeats of the one before, at least. */
  overlap?: number;
  /** Full reads of the list at most (the first included); at least 2, so that a pass can confirm the one before. */
  maxPasses?: number;
  /** Called after every page: for a progress line. */
  onPage?: (progress: HistoryProgress) => void;
}

export interface HistoryProgress {
  pass: number;
  /** Pages requested so far, every pass counted. */
  requests: number;
  /** Distinct operations found so far. */
  found: number;
  /** What the last page said the list holds. */
  totalItems: number;
}

export interface HistoryRead {
  /** Every distinct operation read, by id, in the order first read. */
  operations: Operation[];
  passes: number;
  requests: number;
  /** The last pass found no operation the passes before it had not: the list held still long enough to be read whole. */
  settled: boolean;
}

export const DEFAULT_OVERLAP = 50;
export const DEFAULT_MAX_PASSES = 4;

/** A page the upstream can be asked for: `page` (from 1) of `itemsPerPage` rows, starting at row `offset`. */
export interface PageWindow {
  page: number;
  itemsPerPage: number;
  offset: number;
}

/**
 * The page to ask for next when rows up to `readUpTo` (exclusive) were read: one that starts at
 * least `overlap` rows before it, as close to that as a page boundary allows, and still reaches
 * past it. Page sizes from half the largest to the largest are tried (a page of size L starts at a
 * multiple of L); when none overlaps and reaches further, the largest page holding row `readUpTo`.
 */
export function pageWindow(readUpTo: number, overlap: number, maxItemsPerPage: number): PageWindow {
  if (readUpTo === 0) return { page: 1, itemsPerPage: maxItemsPerPage, offset: 0 };
  const start = Math.max(0, readUpTo - overlap);
  let best: PageWindow | undefined;
  for (let size = maxItemsPerPage; size >= Math.ceil(maxItemsPerPage / 2); size--) {
    const offset = Math.floor(start / size) * size;
    if (offset + size <= readUpTo) continue;
    if (!best || offset > best.offset) best = { page: offset / size + 1, itemsPerPage: size, offset };
    if (offset === start) break;
  }
  if (best) return best;
  const page = Math.floor(readUpTo / maxItemsPerPage);
  return { page: page + 1, itemsPerPage: maxItemsPerPage, offset: page * maxItemsPerPage };
}

/** Every operation of `query`, read as described above. */
export async function readOperations(source: OperationsPages, query: OperationsQuery, options: HistoryReadOptions = {}): Promise<HistoryRead> {
  const maxSize = Math.min(options.maxItemsPerPage ?? MAX_ITEMS_PER_PAGE, MAX_ITEMS_PER_PAGE);
  const overlap = Math.min(options.overlap ?? DEFAULT_OVERLAP, Math.floor(maxSize / 4));
  const maxPasses = Math.max(2, options.maxPasses ?? DEFAULT_MAX_PASSES);
  const byId = new Map<number, Operation>();
  let requests = 0;
  for (let pass = 1; pass <= maxPasses; pass++) {
    let added = 0;
    let readUpTo = 0;
    for (let pages = 0; ; pages++) {
      // However the list grows while it is read, a pass ends: each page reaches at least one row further.
      if (pages > MAX_PAGES_PER_PASS) throw new Error(`the operations history kept growing while it was read (${MAX_PAGES_PER_PASS} pages in one pass)`);
      const window = pageWindow(readUpTo, overlap, maxSize);
      const { data, meta } = await source.operationsPage(query, window.page, window.itemsPerPage);
      requests++;
      for (const operation of data) {
        if (byId.has(operation.id)) continue;
        byId.set(operation.id, operation);
        added++;
      }
      // One page that holds the whole list is one answer, read at one moment: nothing could move
      // between pages, so there is nothing for another pass to confirm.
      if (pass === 1 && pages === 0 && data.length >= meta.totalItems) return { operations: [...byId.values()], passes: 1, requests, settled: true };
      const before = readUpTo;
      readUpTo = window.offset + data.length;
      options.onPage?.({ pass, requests, found: byId.size, totalItems: meta.totalItems });
      // meta has no totalPages or hasMore: the list ends where totalItems says (upstream Limits), or
      // where a page ends short of the rows already read (it shrank meanwhile).
      if (data.length === 0 || readUpTo >= meta.totalItems || readUpTo <= before) break;
    }
    if (pass > 1 && added === 0) return { operations: [...byId.values()], passes: pass, requests, settled: true };
  }
  return { operations: [...byId.values()], passes: maxPasses, requests, settled: false };
}

const MAX_PAGES_PER_PASS = 10_000;

/**
 * Every operation of one card between two UTC dates (inclusive), read as above, for a reader that
 * decides on them (the history verifier): a list that never held still is an error, not an answer,
 * since an operation it missed could make an accrual that happened look as if it had not.
 */
export async function operationsOfCard(source: OperationsPages, cardId: string, startDate: string, endDate: string, options: HistoryReadOptions = {}): Promise<Operation[]> {
  const read = await readOperations(source, { cardId, startDate, endDate }, options);
  if (!read.settled) throw new Error(`the operations of card ${cardId} kept moving while they were read (${read.passes} passes): not deciding on them`);
  return read.operations;
}
