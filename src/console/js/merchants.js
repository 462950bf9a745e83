// @ts-check
/**
 * The merchants an operator picks from, instead of typing their ids: `GET /v1/admin/merchants` for a
 * global token (every merchant created, and `default`, the merchant of the bridge's variables, which
 * is not stored among them); a merchant's own token sees only itself. Read once a minute at most,
 * and forgotten on signing out.
 */
import { api } from './api.js';
import { h } from './dom.js';

/** @import { Merchant, MerchantList, WhoAmI } from './types.js' */

const FRESH_MS = 60_000;
/** The most merchants listed (pages of 500); past it, the field takes a typed id. */
const MOST = 5_000;

/** @type {{ at: number, list: Promise<Merchant[] | undefined> } | undefined} */
let cached;

export function forgetMerchants() {
  cached = undefined;
}

/**
 * `[{ id, name?, status? }]`, or `undefined` when the list cannot be read (the field then takes a typed id).
 * @param {WhoAmI} principal
 * @returns {Promise<Merchant[] | undefined>}
 */
export async function merchantList(principal) {
  if (principal.scope === 'merchant') return principal.merchantId ? [{ id: principal.merchantId }] : undefined;
  if (!cached || Date.now() - cached.at > FRESH_MS) {
    const loading = { at: Date.now(), list: load().catch(() => undefined) };
    cached = loading;
  }
  return cached.list;
}

/** @returns {Promise<Merchant[] | undefined>} */
async function load() {
  /** @type {Merchant[]} */
  const items = [];
  for (let page = 1; items.length < MOST; page++) {
    const answer = /** @type {MerchantList} */ (await api('/v1/admin/merchants', { query: { page, limit: 500 } }));
    items.push(...answer.items);
    if (answer.items.length === 0 || items.length >= answer.total) break;
  }
  if (items.length >= MOST) return undefined;
  if (!items.some((m) => m.id === 'default')) items.unshift({ id: 'default' });
  return items.map((m) => ({ id: m.id, name: m.name, status: m.status }));
}

/**
 * The merchant field: a `<select>` of `merchants` (with `any` first, a choice of none, unless it is
 * `null`), or a text input where the list could not be read. `value` is selected; one not in the
 * list (an address naming a merchant since removed) is kept as an option of its own.
 *
 * @param {{ id: string, name?: string, label?: string, merchants: Merchant[] | undefined, value?: string, any?: string | null, hint?: string, required?: boolean }} options
 * @returns {HTMLDivElement}
 */
export function merchantField({ id, name = 'merchantId', label = 'Merchant', merchants, value = '', any = 'all merchants', hint, required = false }) {
  const described = hint ? `${id}-hint` : undefined;
  /** @type {HTMLInputElement | HTMLSelectElement} */
  let control;
  if (!merchants) {
    control = h('input', { id, name, value, placeholder: any ?? undefined, required: required || undefined, 'aria-describedby': described, autocomplete: 'off' });
  } else {
    const known = merchants.some((m) => m.id === value);
    control = h(
      'select',
      { id, name, required: required || undefined, 'aria-describedby': described },
      any !== null ? h('option', { value: '' }, any) : null,
      merchants.map((m) => h('option', { value: m.id, selected: m.id === value ? true : undefined }, merchantLabel(m))),
      value && !known ? h('option', { value, selected: true }, value) : null,
    );
  }
  return h('div', { class: 'field' }, h('label', { for: id }, label), hint ? h('p', { class: 'hint', id: described }, hint) : null, control);
}

/**
 * @param {Merchant} m
 * @returns {string}
 */
function merchantLabel(m) {
  return `${m.id}${m.name && m.name !== m.id ? ` (${m.name})` : ''}${m.status === 'suspended' ? ', suspended' : ''}`;
}
