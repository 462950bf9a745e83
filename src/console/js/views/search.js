/**
 * Finding records: by the POS's own order id, the transactionId, a refund id, merchant, several
 * statuses, POS and dates; and bulk actions on the records selected or on every record the search
 * matches, confirmed with their count.
 */
import { api, ApiError, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { count, h, LEDGER_STATUSES, money, POS_NAMES, recordLink, pager, replace, statusBadge, statusLabel, table, time } from '../dom.js';
import { ACTION_EFFECTS, RESOLVE_OUTCOMES } from './record.js';

const PAGE_SIZE = 50;
const FIELDS = ['orderId', 'transactionId', 'refundId', 'merchantId', 'pos', 'from', 'to'];

export async function searchView({ section, params, principal, navigate, announce, refresh }) {
  const query = Object.fromEntries(FIELDS.map((name) => [name, params.get(name) ?? '']));
  if (principal.scope === 'merchant') query.merchantId = principal.merchantId;
  const statuses = (params.get('status') ?? '').split(',').filter(Boolean);
  const page = Math.max(1, Number(params.get('page')) || 1);

  const form = searchForm(query, statuses, principal, (values) => navigate('/search', values));
  const results = h('div', { class: 'results' });
  // With no filter, the newest records: what a person looking around expects to see first.
  replace(section, h('h1', {}, 'Search records'), form, results);

  replace(results, h('p', { class: 'loading' }, 'Searching…'));
  const found = await find(query, statuses, page);
  if (!section.isConnected) return;
  // transactionId → merchant: a bulk action names records within one merchant.
  const selected = new Map();
  const pages = Math.max(1, Math.ceil(found.total / PAGE_SIZE));
  const rows = found.items.map((record) => {
    const box = h('input', {
      type: 'checkbox',
      'aria-label': `Select ${record.transactionId}`,
      onchange: (event) => (event.target.checked ? selected.set(record.transactionId, record.merchantId) : selected.delete(record.transactionId)),
    });
    return [
      box,
      recordLink(record.merchantId, record.transactionId),
      record.merchantId ?? '',
      statusBadge(record.status),
      record.pos,
      record.orderId,
      money(record.check?.amount, record.check?.currency),
      time(record.createdAt),
      time(record.updatedAt),
    ];
  });
  const selectAll = h('input', {
    type: 'checkbox',
    id: 'select-all',
    onchange: (event) => {
      for (const box of results.querySelectorAll('tbody input[type="checkbox"]')) {
        box.checked = event.target.checked;
        box.dispatchEvent(new Event('change'));
      }
    },
  });
  const pageHref = (n) => `#/search?${new URLSearchParams({ ...Object.fromEntries(params), page: String(n) })}`;
  replace(
    results,
    h('h2', { id: 'results-heading' }, matchHeading(found)),
    // The bridge counts matches up to a cap (counting millions would cost what the ledger holds): past it, pages reach as far as the cap.
    found.totalCapped ? h('p', {}, `Counting stopped at ${thousands(found.total)}: narrow the search (merchant, status, dates) to reach records beyond the first ${thousands(found.total)}.`) : null,
    found.items.length
      ? [
          h('p', {}, h('label', {}, selectAll, ' Select every record on this page')),
          table('Records, newest first', ['Select', 'Transaction', 'Merchant', 'Status', 'POS', 'POS order', 'Amount', 'Created', 'Updated'], rows, { class: 'records' }),
          pager(page, pages, pageHref),
          bulkForm({ query, statuses, total: found.total, selected, byFilter: found.byFilter, announce, refresh }),
        ]
      : null,
  );
}

/** The records the search names: one record by its transactionId, or a page of the list. */
async function find(query, statuses, page) {
  if (query.transactionId) {
    try {
      const record = await api(`/v1/admin/transactions/${encodeURIComponent(query.transactionId)}`, { query: { merchantId: query.merchantId } });
      return { items: [record], total: 1, byFilter: false };
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return { items: [], total: 0, byFilter: false };
      throw error;
    }
  }
  const list = await api('/v1/admin/transactions', {
    query: { status: statuses.join(','), orderId: query.orderId, refundId: query.refundId, merchantId: query.merchantId, pos: query.pos, from: query.from, to: query.to, page, limit: PAGE_SIZE },
  });
  // A bulk filter names status, POS, merchant and dates only: a search by order or refund id acts on the selection.
  return { items: list.items, total: list.total, totalCapped: list.totalCapped === true, byFilter: !query.orderId && !query.refundId };
}

/** "3 records match", or "More than 1,000 records match" when the bridge stopped counting. */
function matchHeading(found) {
  if (found.total === 0) return 'No records match';
  if (found.totalCapped) return `More than ${thousands(found.total)} records match`;
  return `${thousands(found.total)} ${found.total === 1 ? 'record matches' : 'records match'}`;
}

const thousands = (n) => n.toLocaleString('en-US');

function searchForm(query, statuses, principal, submit) {
  const input = (name, label, attributes = {}) =>
    h('div', { class: 'field' }, h('label', { for: `search-${name}` }, label), h('input', { id: `search-${name}`, name, value: query[name], ...attributes }));
  return h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Search records',
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        const values = Object.fromEntries(FIELDS.map((name) => [name, String(data.get(name) ?? '').trim()]));
        values.status = data.getAll('status').join(',');
        submit(values);
      },
    },
    h(
      'div',
      { class: 'grid' },
      input('orderId', 'POS order id'),
      input('transactionId', 'Transaction id', { placeholder: 'e.g. generic:A-1001' }),
      input('refundId', 'Refund id'),
      principal.scope === 'global' ? input('merchantId', 'Merchant', { placeholder: 'all merchants' }) : null,
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'search-pos' }, 'POS'),
        h('select', { id: 'search-pos', name: 'pos' }, h('option', { value: '' }, 'any POS'), POS_NAMES.map((pos) => h('option', { value: pos, selected: pos === query.pos ? true : undefined }, pos))),
      ),
      input('from', 'Created from', { type: 'date' }),
      input('to', 'Created to (inclusive)', { type: 'date' }),
    ),
    h(
      'fieldset',
      { class: 'statuses' },
      h('legend', {}, 'Statuses (any of)'),
      LEDGER_STATUSES.map((status) => h('label', {}, h('input', { type: 'checkbox', name: 'status', value: status, checked: statuses.includes(status) ? true : undefined }), ` ${statusLabel(status)}`)),
    ),
    h('button', { type: 'submit', class: 'primary' }, 'Search'),
  );
}

const BULK_ACTIONS = [
  ['retry', 'Retry'],
  ['reverse', 'Reverse'],
  ['resolve', 'Resolve'],
  ['close', 'Close'],
];

/** A bulk action on the selected records, or on every record the search matches (its filter). */
function bulkForm({ query, statuses, total, selected, byFilter, announce, refresh }) {
  const outcome = h('div', { class: 'bulk-result' });
  const action = h('select', { id: 'bulk-action', name: 'action' }, BULK_ACTIONS.map(([value, label]) => h('option', { value }, label)));
  const filterNote = byFilter ? null : h('p', { class: 'hint', id: 'bulk-filter-why' }, 'A bulk action by filter names statuses, POS, merchant and dates: this search by an order or refund id acts on the records you select.');
  return h(
    'section',
    { class: 'bulk', 'aria-labelledby': 'bulk-heading' },
    h('h2', { id: 'bulk-heading' }, 'Bulk action'),
    h(
      'form',
      {
        onsubmit: async (event) => {
          event.preventDefault();
          const data = new FormData(event.target);
          const name = String(data.get('action'));
          const scope = String(data.get('scope'));
          const ids = [...selected.keys()];
          if (scope === 'selected' && ids.length === 0) {
            outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, 'Select at least one record first.'));
            return;
          }
          const targets = scope === 'selected' ? ids.length : total;
          const label = BULK_ACTIONS.find(([value]) => value === name)[1];
          const noun = count(targets, 'record');
          const target =
            scope === 'selected'
              ? h('p', {}, `The ${noun} selected: ${ids.join(', ')}.`)
              : h('p', {}, `Every record matching this search now: ${noun} (${describeFilter(query, statuses)}).`);
          const confirmed = await confirmAction({
            title: `${label} ${noun}`,
            choices: name === 'resolve' ? RESOLVE_OUTCOMES : undefined,
            effect: (choice) => [target, h('p', {}, name === 'resolve' ? RESOLVE_OUTCOMES.find((o) => o.value === choice)?.effect : ACTION_EFFECTS[name]), h('p', {}, 'Each record is decided on its own: any the bridge refuses is listed with why, and the others go ahead.'), name === 'retry' || name === 'resolve' ? h('p', {}, 'What is to be sent goes out on the bridge\u2019s next delivery passes (Reconcile runs one now).') : null],
            confirmLabel: `${label} ${noun}`,
          });
          if (!confirmed) return;
          const body = { action: name, reason: confirmed.reason, ...(name === 'resolve' ? { outcome: confirmed.choice } : {}) };
          if (scope === 'selected') Object.assign(body, idsOf(selected));
          else body.filter = filterOf(query, statuses);
          try {
            const answer = await api('/v1/admin/transactions/bulk', { method: 'POST', body });
            const done = answer.done ?? [];
            const refused = answer.refused ?? [];
            const text = `${label}: ${done.length} done, ${refused.length} refused.`;
            outcome.replaceChildren(
              h('p', { role: 'status' }, text),
              refused.length ? table('Refused', ['Record', 'Why'], refused.map((r) => [r.id, r.why])) : null,
              h('p', {}, h('button', { type: 'button', class: 'secondary', onclick: () => refresh() }, 'Search again')),
            );
            announce(text);
          } catch (error) {
            outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, describeError(error)));
          }
        },
      },
      h('div', { class: 'field' }, h('label', { for: 'bulk-action' }, 'Action'), action),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Apply to'),
        h('label', {}, h('input', { type: 'radio', name: 'scope', value: 'selected', checked: true }), ' The records I select'),
        h('label', {}, h('input', { type: 'radio', name: 'scope', value: 'filter', disabled: !byFilter, 'aria-describedby': filterNote ? 'bulk-filter-why' : undefined }), ` Every record matching this search (${total})`),
        filterNote,
      ),
      h('button', { type: 'submit', class: 'primary' }, 'Review bulk action…'),
    ),
    outcome,
  );
}

/**
 * The selected records as the bulk API names them: transactionIds of one merchant with its id, or,
 * across merchants (ADMIN_TOKEN only), each as `<merchantId>/<transactionId>`.
 */
function idsOf(selected) {
  const merchants = new Set(selected.values());
  if (merchants.size === 1) return { ids: [...selected.keys()], merchantId: [...merchants][0] };
  return { ids: [...selected].map(([id, merchantId]) => `${merchantId}/${id}`) };
}

function filterOf(query, statuses) {
  const filter = { status: statuses.length ? statuses.join(',') : undefined, pos: query.pos || undefined, merchantId: query.merchantId || undefined, from: query.from || undefined, to: query.to || undefined };
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined));
}

function describeFilter(query, statuses) {
  const parts = [
    statuses.length ? `status ${statuses.map(statusLabel).join(' or ')}` : 'any status',
    query.merchantId ? `merchant ${query.merchantId}` : 'every merchant',
    query.pos ? `POS ${query.pos}` : null,
    query.from ? `created from ${query.from}` : null,
    query.to ? `to ${query.to}` : null,
  ];
  return parts.filter(Boolean).join(', ');
}
