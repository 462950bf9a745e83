// @ts-check
/** The audit log: who did what, when, why, to which record. */
import { api } from '../api.js';
import { count, deadLetterHref, h, pager, prose, recordLink, replace, table, time } from '../dom.js';
import { merchantField, merchantList } from '../merchants.js';

/** @import { Attributes, AuditEntry, AuditList, ViewContext } from '../types.js' */

const PAGE_SIZE = 50;
const FIELDS = ['actor', 'merchantId', 'from', 'to'];
/** Actions on a dead letter (their target is its id). */
const LETTER_ACTIONS = new Set(['replay', 'dismiss', 'unmask']);
/** Actions on a record (their target is its transactionId), alone or in bulk; the others (a reconcile pass, a report, a customer search) name no record. */
const RECORD_ACTION = /^(bulk:)?(retry|reverse|resolve|close|acknowledge)\b|^unmask (record|payload)$/;

/** @param {ViewContext} context */
export async function auditView({ section, params, principal, navigate }) {
  /** @type {Record<string, string>} */
  const query = Object.fromEntries(FIELDS.map((name) => [name, params.get(name) ?? '']));
  if (principal.scope === 'merchant') query.merchantId = principal.merchantId ?? '';
  const page = Math.max(1, Number(params.get('page')) || 1);
  const merchants = principal.scope === 'global' ? await merchantList(principal) : undefined;
  const input = (/** @type {string} */ name, /** @type {string} */ label, /** @type {Attributes<HTMLInputElement>} */ attributes = {}) => h('div', { class: 'field' }, h('label', { for: `audit-${name}` }, label), h('input', { id: `audit-${name}`, name, value: query[name], ...attributes }));
  const form = h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Filter the audit log',
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        navigate('/audit', Object.fromEntries(FIELDS.map((name) => [name, String(data.get(name) ?? '').trim()])));
      },
    },
    h(
      'div',
      { class: 'grid' },
      input('actor', 'Actor starts with', { placeholder: 'e.g. alice, merchant:' }),
      principal.scope === 'global' ? merchantField({ id: 'audit-merchantId', merchants, value: query.merchantId }) : null,
      input('from', 'From', { type: 'date' }),
      input('to', 'To (inclusive)', { type: 'date' }),
    ),
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
  );
  replace(section, h('h1', {}, 'Audit log'), form, h('p', { class: 'loading' }, 'Loading…'));
  const log = /** @type {AuditList} */ (await api('/v1/admin/audit', { query: { ...query, page, limit: PAGE_SIZE } }));
  const pages = Math.max(1, Math.ceil(log.total / PAGE_SIZE));
  const pageHref = (/** @type {number} */ n) => `#/audit?${new URLSearchParams({ ...Object.fromEntries(params), page: String(n) })}`;
  replace(
    section,
    h('h1', {}, 'Audit log'),
    form,
    h('p', { class: 'summary' }, `${count(log.total, 'entry', 'entries')}.`),
    log.items.length
      ? table(
          'Operator actions, newest first',
          ['When', 'Actor', 'Action', 'Target', 'Reason', 'Outcome', 'Merchant'],
          log.items.map((entry) => [time(entry.at), entry.actor, entry.action, target(entry), entry.reason ?? '', prose(entry.outcome ?? ''), entry.merchantId ?? '']),
          { class: 'audit' },
        )
      : null,
    pager(page, pages, pageHref),
  );
}

/**
 * The record or dead letter an entry names, linked; what other actions name (a pass, a report's range), as text.
 * @param {AuditEntry} entry
 */
function target(entry) {
  if (!entry.target) return '';
  if (LETTER_ACTIONS.has(entry.action)) return h('a', { href: deadLetterHref(entry.target) }, entry.target);
  if (RECORD_ACTION.test(entry.action)) return recordLink(entry.merchantId, entry.target);
  return prose(entry.target);
}
