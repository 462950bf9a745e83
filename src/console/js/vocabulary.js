// @ts-check
/**
 * The bridge's own lists and words: every ledger status with its label and what it means, every
 * POS, those with webhooks and those backfill can read. The page keeps no copy of them: it reads them once from the bridge
 * (`GET /admin/vocabulary.json`, made by src/http/routes/console.ts from the ledger's and the POS
 * contract's own lists) before it renders anything, so a status or POS the bridge adds is on the
 * page the next time it loads.
 */
import { api } from './api.js';

/** @import { ConsoleVocabulary, LedgerStatus, ResolveOutcome } from './types.js' */

/** Where the bridge serves it: beside the page, under the same headers. */
export const VOCABULARY_URL = '/admin/vocabulary.json';

/** @type {ConsoleVocabulary | undefined} */
let loaded;

/**
 * Reads the vocabulary from the bridge and keeps it for the page's life. Throws when it cannot be
 * read, or when what came is not a vocabulary: the page cannot show statuses or POSes without it.
 * @returns {Promise<ConsoleVocabulary>}
 */
export async function loadVocabulary() {
  // Nothing secret: it is read before anyone signs in, with no token.
  return useVocabulary(await api(VOCABULARY_URL, { token: null }));
}

/**
 * Keeps `answer` as the page's vocabulary once it is one.
 * @param {unknown} answer
 * @returns {ConsoleVocabulary}
 */
export function useVocabulary(answer) {
  if (!isVocabulary(answer)) throw new Error('The bridge answered something other than its vocabulary (statuses and POS names).');
  loaded = answer;
  return answer;
}

/**
 * @param {unknown} value
 * @returns {value is ConsoleVocabulary}
 */
function isVocabulary(value) {
  if (!value || typeof value !== 'object') return false;
  const v = /** @type {Partial<Record<keyof ConsoleVocabulary, unknown>>} */ (value);
  const strings = (/** @type {unknown} */ list) => Array.isArray(list) && list.length > 0 && list.every((item) => typeof item === 'string');
  return (
    Array.isArray(v.statuses) &&
    v.statuses.length > 0 &&
    v.statuses.every((s) => s && typeof s === 'object' && typeof s.status === 'string' && typeof s.label === 'string' && typeof s.description === 'string') &&
    strings(v.pos) &&
    strings(v.webhookPos) &&
    strings(v.listingPos) &&
    Array.isArray(v.differenceKinds) &&
    v.differenceKinds.every((d) => d && typeof d === 'object' && typeof d.kind === 'string' && typeof d.label === 'string') &&
    Array.isArray(v.resolveOutcomes) &&
    v.resolveOutcomes.length > 0 &&
    v.resolveOutcomes.every((o) => o && typeof o === 'object' && typeof o.outcome === 'string' && typeof o.label === 'string' && typeof o.effect === 'string')
  );
}

/**
 * The vocabulary read at start.
 * @returns {ConsoleVocabulary}
 */
export function vocabulary() {
  if (!loaded) throw new Error('The console has not read the bridge\u2019s vocabulary yet.');
  return loaded;
}

/**
 * Every outcome a person may resolve a record with, as the bridge names them, with what each does:
 * the choices of the console's resolve.
 * @returns {{ value: ResolveOutcome, label: string, effect: string }[]}
 */
export function resolveOutcomes() {
  return vocabulary().resolveOutcomes.map(({ outcome, label, effect }) => ({ value: outcome, label, effect }));
}

/**
 * Every ledger status, in the ledger's order.
 * @returns {LedgerStatus[]}
 */
export function ledgerStatuses() {
  return vocabulary().statuses.map((s) => s.status);
}

/**
 * Every POS whose payloads the bridge takes, generic first: what a record's POS may be.
 * @returns {string[]}
 */
export function posNames() {
  return [...vocabulary().pos];
}

/**
 * The POSes whose webhooks the bridge takes: what a dead letter's POS may be.
 * @returns {string[]}
 */
export function webhookPosNames() {
  return [...vocabulary().webhookPos];
}

/**
 * The POSes whose API lists orders: what backfill can read.
 * @returns {string[]}
 */
export function listingPosNames() {
  return [...vocabulary().listingPos];
}

/**
 * A status's words: its label and what it means; `undefined` for one the bridge did not name (or
 * before the vocabulary is read), which the page then shows as the API wrote it.
 * @param {string | null | undefined} status
 * @returns {{ label: string, description: string, delivering?: boolean } | undefined}
 */
export function statusWords(status) {
  return loaded?.statuses.find((s) => s.status === status);
}

/**
 * A three-way report's kind of difference in words; the kind as the API wrote it for one the bridge did not name.
 * @param {string} kind
 * @returns {string}
 */
export function differenceLabel(kind) {
  return loaded?.differenceKinds.find((d) => d.kind === kind)?.label ?? kind;
}
