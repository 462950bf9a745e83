/**
 * Building the page. Every text the API gives is set as text (`textContent`), never parsed as HTML:
 * an order id or a dead letter's body is data, and a `<script>` or `<img onerror>` in it stays text.
 */

/**
 * An element: `h('a', { href: '#/x', class: 'link' }, 'text', child)`. Attributes whose value is
 * `undefined`, `null` or `false` are left out; `true` sets an empty attribute. `on*` functions
 * become listeners. Children are nodes or text; arrays are flattened; `null`/`undefined`/`false`
 * are skipped.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (name === 'checked' || name === 'value' || name === 'selected') element[name] = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

function append(parent, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces what `parent` holds with `children`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/**
 * A table with a caption and header cells: `rows` are arrays of cells (nodes or text). Each cell
 * carries its column's name (`data-label`): on a narrow screen the stylesheet lays a row out as a
 * card, each cell under its column's name, instead of a table wider than the screen.
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

/** A definition list of label → value, leaving out values that are absent. */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== '').map(([label, value]) => [h('dt', {}, label), h('dd', {}, value)]),
  );
}

/** A timestamp as UTC text in a `<time>` element (operators in several time zones read the same). */
export function time(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return h('time', { datetime: iso }, `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`);
}

/** How long ago `iso` was, in the two largest units: `3 h 12 min`, `2 d 4 h`, `45 s`. */
export function age(iso, now = Date.now()) {
  const ms = now - new Date(iso).getTime();
  if (!Number.isFinite(ms)) return '';
  let seconds = Math.max(0, Math.floor(ms / 1000));
  const units = [
    ['d', 86400],
    ['h', 3600],
    ['min', 60],
    ['s', 1],
  ];
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
 * Integer cents (the loyalty service's Check: the decimal amount × 100 in every currency) as the
 * decimal amount with its currency, computed on integers so nothing is rounded: `5997` → `59.97 USD`.
 */
export function money(cents, currency) {
  if (typeof cents !== 'number' || !Number.isInteger(cents)) return '';
  const sign = cents < 0 ? '−' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}${currency ? ` ${currency}` : ''}`;
}

/**
 * A decimal amount in the currency's major units (the loyalty history's `purchaseSum`: 8.4 is
 * 8.40) as `money` shows cents; rounded to the cent once, as the bridge reads it.
 */
export function majorMoney(amount, currency) {
  if (typeof amount !== 'number' || !Number.isFinite(amount)) return '';
  return money(Math.round(amount * 100), currency);
}

/**
 * A timestamp with its offset (2026-11-24T09:12:00.000Z), or so many cents (325 cents, a 5666-cent
 * Check, and the amount the attention queue compares it with: "latest 999 cents, recorded 5997"),
 * inside the API's text.
 */
const IN_TEXT = /(?<iso>\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))|(?<cents>-?\b\d+)(?<unit> cents?\b|-cent\b)|(?<=\d cents, recorded )(?<recorded>\d+)\b/g;

/**
 * The API's words (a history event, a why) as nodes: every timestamp in them shown as `time` shows
 * one, and every "325 cents" as the money it is (`3.25 USD`, or `3.25` where the currency is not
 * known), so the page never shows a raw ISO time or a count of cents beside formatted money. The
 * rest stays text.
 */
export function prose(text, currency) {
  if (text === undefined || text === null) return '';
  const source = String(text);
  const parts = [];
  let last = 0;
  for (const match of source.matchAll(IN_TEXT)) {
    const { iso, cents, recorded } = match.groups;
    let node;
    if (iso) node = Number.isNaN(Date.parse(iso)) ? null : time(iso);
    // Without a currency (a queue item names none), the amount alone: 9.99.
    else node = money(Number(cents ?? recorded), currency);
    if (node === null || node === undefined) continue;
    parts.push(source.slice(last, match.index), node);
    last = match.index + match[0].length;
  }
  parts.push(source.slice(last));
  return parts.filter((part) => part !== '');
}

/**
 * A customer's phone number or email masked to its last characters: enough to tell customers apart
 * on a screen (or a screenshot), not to reach them.
 */
export function maskContact(text, kind) {
  if (typeof text !== 'string' || !text) return text;
  // At most half of it shown, so a short one is not shown whole.
  const tail = (value, keep) => {
    const shown = Math.min(keep, Math.floor(value.length / 2));
    return `${'•'.repeat(Math.max(1, Math.min(6, value.length - shown)))}${shown ? value.slice(-shown) : ''}`;
  };
  if (kind === 'email') {
    const at = text.lastIndexOf('@');
    return at < 0 ? tail(text, 2) : `${tail(text.slice(0, at), 1)}${text.slice(at)}`;
  }
  return tail(text, 4);
}

/** JSON shown as indented text (what was sent, what came back), as the API gives it: contact details masked unless asked for. */
export function json(value) {
  // Nothing kept (no body came back, an empty one) is said in words, not as the JSON word "null".
  const empty = value === undefined || value === null || value === '';
  return h('pre', { class: 'json', tabindex: '0' }, empty ? '(nothing)' : JSON.stringify(value, null, 2));
}

const STATUS_LABELS = {
  skipped: 'Skipped',
  pending: 'Pending',
  in_doubt: 'In doubt',
  accrued: 'Accrued',
  partially_accrued: 'Partially accrued',
  failed: 'Failed',
  reversal_pending: 'Reversal pending',
  reversed: 'Reversed',
  reverse_failed: 'Reverse failed',
  closed: 'Closed',
};
export const LEDGER_STATUSES = ['skipped', 'pending', 'in_doubt', 'accrued', 'partially_accrued', 'failed', 'reversal_pending', 'reversed', 'reverse_failed'];
export const POS_NAMES = ['generic', 'square', 'shopify', 'clover', 'toast', 'loyverse'];

export function statusLabel(status) {
  return STATUS_LABELS[status] ?? String(status ?? '');
}

/** `n` and the noun that goes with it: `1 record`, `2 records`. */
export function count(n, singular, plural = `${singular}s`) {
  return `${n} ${n === 1 ? singular : plural}`;
}

/** A status as a badge whose colour is backed by its text (never colour alone). */
export function statusBadge(status) {
  return h('span', { class: `badge status-${status}` }, statusLabel(status));
}

/** The hash route of a record's page: the merchant is part of a record's identity. */
export function recordHref(merchantId, transactionId) {
  return `#/transactions/${encodeURIComponent(merchantId ?? 'default')}/${encodeURIComponent(transactionId)}`;
}

export function recordLink(merchantId, transactionId) {
  return h('a', { href: recordHref(merchantId, transactionId) }, transactionId);
}

export function deadLetterHref(id) {
  return `#/dead-letters/${encodeURIComponent(id)}`;
}

/** Previous/next links between result pages; nothing when there is one page. `hrefOf(n)` is page n's route. */
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
