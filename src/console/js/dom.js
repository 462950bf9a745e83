// @ts-check
/**
 * Building the page. Every text the API gives is set as text (`textContent`), never parsed as HTML:
 * an order id or a dead letter's body is data, and a `<script>` or `<img onerror>` in it stays text.
 */
import { statusWords } from './vocabulary.js';

/** @import { Attributes, Child, LedgerStatus } from './types.js' */

/**
 * An element: `h('a', { href: '#/x', class: 'link' }, 'text', child)`. Attributes whose value is
 * `undefined`, `null` or `false` are left out; `true` sets an empty attribute. `on*` functions
 * become listeners. Children are nodes or text; arrays are flattened; `null`/`undefined`/`false`
 * are skipped.
 *
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attributes<HTMLElementTagNameMap[K]>} [attributes]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2), /** @type {EventListener} */ (value));
    else if (typeof value === 'function') throw new TypeError(`${name}: only on* attributes take a function`);
    // Properties, not attributes: what the control holds now (a checkbox ticked, an option chosen).
    else if (name === 'checked' && element instanceof HTMLInputElement) element.checked = value === true;
    else if (name === 'selected' && element instanceof HTMLOptionElement) element.selected = value === true;
    else if (name === 'value' && (element instanceof HTMLInputElement || element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement || element instanceof HTMLOptionElement)) element.value = String(value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

/**
 * @param {ParentNode} parent
 * @param {readonly Child[]} children
 */
function append(parent, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.append(child instanceof Node ? child : String(child));
  }
}

/**
 * Replaces what `parent` holds with `children`.
 * @param {ParentNode} parent
 * @param {...Child} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/**
 * A table with a caption and header cells: `rows` are arrays of cells (nodes or text). Each cell
 * carries its column's name (`data-label`): on a narrow screen the stylesheet lays a row out as a
 * card, each cell under its column's name, instead of a table wider than the screen.
 *
 * @param {Child} caption
 * @param {readonly string[]} headers
 * @param {readonly (readonly Child[])[]} rows
 * @param {{ class?: string }} [attributes]
 * @returns {HTMLTableElement}
 */
export function table(caption, headers, rows, attributes = {}) {
  return h(
    'table',
    { ...attributes, class: ['reflow', attributes.class].filter(Boolean).join(' ') },
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headers.map((text) => h('th', { scope: 'col' }, text)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell, i) => h('td', { 'data-label': headers[i] || undefined }, cell))))),
  );
}

/**
 * A definition list of label → value, leaving out values that are absent.
 * @param {readonly (readonly [string, Child])[]} pairs
 * @returns {HTMLDListElement}
 */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== '').map(([label, value]) => [h('dt', {}, label), h('dd', {}, value)]),
  );
}

/**
 * A timestamp as UTC text in a `<time>` element (operators in several time zones read the same).
 * @param {string | null | undefined} iso
 * @returns {HTMLTimeElement | string}
 */
export function time(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return h('time', { datetime: iso }, `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`);
}

/**
 * How long ago `iso` was, in the two largest units: `3 h 12 min`, `2 d 4 h`, `45 s`.
 * @param {string} iso
 * @param {number} [now]
 * @returns {string}
 */
export function age(iso, now = Date.now()) {
  const ms = now - new Date(iso).getTime();
  if (!Number.isFinite(ms)) return '';
  let seconds = Math.max(0, Math.floor(ms / 1000));
  /** @type {[string, number][]} */
  const units = [
    ['d', 86400],
    ['h', 3600],
    ['min', 60],
    ['s', 1],
  ];
  /** @type {string[]} */
  const parts = [];
  for (const [name, size] of units) {
    const n = Math.floor(seconds / size);
    seconds -= n * size;
    if (n > 0 || (parts.length === 0 && name === 's')) parts.push(`${n} ${name}`);
    if (parts.length === 2) break;
  }
  // Once a larger unit is named, a zero after it is left out ("2 h", not "2 h 0 min").
  return parts.join(' ');
}

/**
 * A time the operator reads as ahead or gone by: `in 3 min (2026-11-24 09:12:00 UTC)`, or
 * `3 min ago (…)` once it has passed, so a "next attempt" already behind never reads as still to come.
 * @param {string | null | undefined} iso
 * @param {number} [now]
 * @returns {Child[] | string}
 */
export function when(iso, now = Date.now()) {
  if (!iso) return '';
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return String(iso);
  const distance = age(new Date(now - Math.abs(at - now)).toISOString(), now);
  return [at > now ? `in ${distance} (` : `${distance} ago (`, time(iso), ')'];
}

/**
 * An action's button as the API rules it: allowed, it runs `onclick`; not allowed, it stays in the
 * Tab order (`aria-disabled`, not `disabled`, which a keyboard skips) with the API's reason beside
 * it and read with it, and pressing it does nothing.
 * @param {{ id: string, label: string, allowed: boolean, why?: Child, onclick: () => unknown }} action
 * @returns {HTMLLIElement}
 */
export function actionItem({ id, label, allowed, why, onclick }) {
  const whyId = `why-${id}`;
  return h(
    'li',
    {},
    h('button', { type: 'button', class: 'action', 'aria-disabled': allowed ? undefined : 'true', 'aria-describedby': allowed ? undefined : whyId, onclick: () => (allowed ? onclick() : undefined) }, label),
    allowed ? null : h('span', { class: 'why', id: whyId }, 'Not available: ', why ?? 'the bridge does not allow it now'),
  );
}

/** A timestamp with its offset (2026-11-24T09:12:00.000Z) inside the API's text. */
const IN_TEXT = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})/g;

/**
 * The API's words (a history event, a why) as nodes: every timestamp in them shown as `time` shows
 * one, so the page never shows a raw ISO time. Amounts come already written as money by the bridge
 * (money.ts `moneyInText`): the page does no arithmetic on them. The rest stays text.
 *
 * @param {string | null | undefined} text
 * @returns {(string | HTMLTimeElement)[] | ''}
 */
export function prose(text) {
  if (text === undefined || text === null) return '';
  const source = String(text);
  /** @type {(string | HTMLTimeElement)[]} */
  const parts = [];
  let last = 0;
  for (const match of source.matchAll(IN_TEXT)) {
    if (Number.isNaN(Date.parse(match[0]))) continue;
    parts.push(source.slice(last, match.index), time(match[0]));
    last = match.index + match[0].length;
  }
  parts.push(source.slice(last));
  return parts.filter((part) => part !== '');
}

/**
 * JSON shown as indented text (what was sent, what came back), as the API gives it: contact details masked unless asked for.
 * @param {unknown} value
 * @returns {HTMLPreElement}
 */
export function json(value) {
  // Nothing kept (no body came back, an empty one) is said in words, not as the JSON word "null".
  const empty = value === undefined || value === null || value === '';
  return h('pre', { class: 'json', tabindex: '0' }, empty ? '(nothing)' : JSON.stringify(value, null, 2));
}

/**
 * A ledger status as a person names it, in the bridge's words (its vocabulary); one it did not
 * name, as the API wrote it.
 * @param {LedgerStatus | string | null | undefined} status
 * @returns {string}
 */
export function statusLabel(status) {
  return statusWords(status)?.label ?? String(status ?? '');
}

/**
 * `n` and the noun that goes with it: `1 record`, `2 records`.
 * @param {number} n
 * @param {string} singular
 * @param {string} [plural]
 * @returns {string}
 */
export function count(n, singular, plural = `${singular}s`) {
  return `${n} ${n === 1 ? singular : plural}`;
}

/**
 * A status as a badge whose colour is backed by its text (never colour alone), what it means as its title.
 * @param {LedgerStatus | string} status
 * @returns {HTMLSpanElement}
 */
export function statusBadge(status) {
  return h('span', { class: `badge status-${status}`, title: statusWords(status)?.description }, statusLabel(status));
}

/**
 * The hash route of a record's page: the merchant is part of a record's identity.
 * @param {string | null | undefined} merchantId
 * @param {string} transactionId
 * @returns {string}
 */
export function recordHref(merchantId, transactionId) {
  return `#/transactions/${encodeURIComponent(merchantId ?? 'default')}/${encodeURIComponent(transactionId)}`;
}

/**
 * @param {string | null | undefined} merchantId
 * @param {string} transactionId
 * @returns {HTMLAnchorElement}
 */
export function recordLink(merchantId, transactionId) {
  return h('a', { href: recordHref(merchantId, transactionId) }, transactionId);
}

/**
 * @param {string} id
 * @returns {string}
 */
export function deadLetterHref(id) {
  return `#/dead-letters/${encodeURIComponent(id)}`;
}

/**
 * Previous/next links between result pages; nothing when there is one page. `hrefOf(n)` is page n's route.
 * @param {number} page
 * @param {number} pages
 * @param {(page: number) => string} hrefOf
 * @returns {HTMLElement | null}
 */
export function pager(page, pages, hrefOf) {
  if (pages <= 1) return null;
  return h(
    'nav',
    { class: 'pager', 'aria-label': 'Result pages' },
    page > 1 ? h('a', { href: hrefOf(page - 1) }, 'Previous page') : null,
    h('span', {}, ` Page ${page} of ${pages} `),
    page < pages ? h('a', { href: hrefOf(page + 1) }, 'Next page') : null,
  );
}
