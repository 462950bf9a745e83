// @ts-check
/**
 * Finding records: by the POS's own order id or a refund id (prefix, any case: the server matches
 * them so), the transactionId, a customer (phone, email or card serial, within one merchant), the
 * merchant picked from a list, several statuses, POS and dates; and bulk actions on the records
 * ticked (kept across pages and searches) or on every record the search matches, confirmed with
 * their count, and refused before any confirmation when they are more than a bulk action takes.
 */
import { api, ApiError, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { count, h, recordLink, pager, replace, statusBadge, statusLabel, table, time } from '../dom.js';
import { merchantField, merchantList } from '../merchants.js';
import { selection } from '../selection.js';
import { ledgerStatuses, posNames, resolveOutcomes, statusWords } from '../vocabulary.js';
import { ACTION_EFFECTS } from './record.js';

/**
 * @import { Attributes, BulkAnswer, BulkPreview, BulkRequest, Merchant, RecordActionName, RecordSummary, TransactionList, ViewContext, WhoAmI } from '../types.js'
 * @import { Ticked } from '../selection.js'
 * @typedef {Record<string, string>} Query The search's fields, as the route holds them (and the customer, which it does not).
 * @typedef {{ items: RecordSummary[], total: number, totalCapped?: boolean, byFilter: boolean }} Found
 */

const PAGE_SIZE = 50;
const FIELDS = ['orderId', 'transactionId', 'refundId', 'merchantId', 'pos', 'from', 'to'];
/** The most records one bulk action takes: the bridge's BULK_MAX (src/http/routes/admin.ts), which refuses more. */
export const BULK_MAX = 100;

/**
 * The customer searched for: kept in this page only, never in its address (which the browser keeps
 * in its history), so a phone number or email does not outlive the tab. The address says only that
 * the search was by customer (`customer=1`).
 */
let customerQuery = '';

export function forgetSearch() {
  customerQuery = '';
}

/** @param {ViewContext} context */
export async function searchView({ section, params, principal, navigate, announce, refresh }) {
  /** @type {Query} */
  const query = Object.fromEntries(FIELDS.map((name) => [name, params.get(name) ?? '']));
  if (principal.scope === 'merchant') query.merchantId = principal.merchantId ?? '';
  const byCustomer = params.get('customer') === '1';
  query.customer = byCustomer ? customerQuery : '';
  const statuses = (params.get('status') ?? '').split(',').filter(Boolean);
  const page = Math.max(1, Number(params.get('page')) || 1);

  replace(section, h('h1', {}, 'Search records'), h('p', { class: 'loading' }, 'Loading…'));
  const merchants = await merchantList(principal);
  if (!section.isConnected) return;
  const results = h('div', { class: 'results' });
  const form = searchForm(query, statuses, principal, merchants, results, (values) => navigate('/search', values));
  // With no filter, the newest records: what a person looking around expects to see first.
  replace(section, h('h1', {}, 'Search records'), form, results);

  if (byCustomer && !query.customer) {
    replace(results, h('p', { role: 'status' }, 'Enter the customer again: a phone number, email or card serial is not kept in the page\u2019s address.'));
    return;
  }
  replace(results, h('p', { class: 'loading' }, 'Searching…'));
  const found = await find(query, statuses, page);
  if (!section.isConnected) return;
  const pages = Math.max(1, Math.ceil(found.total / PAGE_SIZE));
  const ticks = h('p', { class: 'ticked', id: 'ticked-count', 'aria-live': 'polite' });
  const bulk = found.items.length ? bulkForm({ query, statuses, found, ticks, announce, refresh, onCleared: () => syncBoxes() }) : null;
  const boxes = found.items.map((record) =>
    h('input', {
      type: 'checkbox',
      'aria-label': `Select ${record.transactionId}`,
      checked: selection.has(record.merchantId, record.transactionId) ? true : undefined,
      onchange: (event) => {
        selection.set(record.merchantId, record.transactionId, event.currentTarget.checked);
        syncAll();
        bulk?.showCount();
      },
    }),
  );
  const rows = found.items.map((record, i) => [
    boxes[i],
    recordLink(record.merchantId, record.transactionId),
    record.merchantId ?? '',
    statusBadge(record.status),
    record.pos,
    record.orderId,
    record.amountText ?? '',
    time(record.createdAt),
    time(record.updatedAt),
  ]);
  const selectAll = h('input', {
    type: 'checkbox',
    id: 'select-all',
    onchange: (event) => {
      const on = event.currentTarget.checked;
      found.items.forEach((record, i) => {
        selection.set(record.merchantId, record.transactionId, on);
        const box = boxes[i];
        if (box) box.checked = on;
      });
      bulk?.showCount();
    },
  });
  const syncAll = () => {
    selectAll.checked = found.items.length > 0 && found.items.every((r) => selection.has(r.merchantId, r.transactionId));
  };
  const syncBoxes = () => {
    found.items.forEach((record, i) => {
      const box = boxes[i];
      if (box) box.checked = selection.has(record.merchantId, record.transactionId);
    });
    syncAll();
  };
  syncAll();
  const pageHref = (/** @type {number} */ n) => `#/search?${new URLSearchParams({ ...Object.fromEntries(params), page: String(n) })}`;
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
          bulk?.section,
        ]
      : selection.size
        ? h('p', {}, `${count(selection.size, 'record')} ticked in earlier searches (kept until you clear them).`)
        : null,
  );
  bulk?.showCount();
}

/**
 * The records the search names: one record by its transactionId, or a page of the list.
 * @param {Query} query
 * @param {string[]} statuses
 * @param {number} page
 * @returns {Promise<Found>}
 */
async function find(query, statuses, page) {
  if (query.transactionId) {
    try {
      const record = /** @type {RecordSummary} */ (await api(`/v1/admin/transactions/${encodeURIComponent(query.transactionId)}`, { query: { merchantId: query.merchantId } }));
      return { items: [record], total: 1, byFilter: false };
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return { items: [], total: 0, byFilter: false };
      throw error;
    }
  }
  const list = /** @type {TransactionList} */ (
    await api('/v1/admin/transactions', {
      query: { status: statuses.join(','), orderId: query.orderId, refundId: query.refundId, customer: query.customer, merchantId: query.merchantId, pos: query.pos, from: query.from, to: query.to, page, limit: PAGE_SIZE },
    })
  );
  // A bulk filter names status, POS, merchant and dates only: a search by order, refund id or customer acts on the selection.
  return { items: list.items, total: list.total, totalCapped: list.totalCapped === true, byFilter: !query.orderId && !query.refundId && !query.customer };
}

/**
 * "3 records match", or "More than 1,000 records match" when the bridge stopped counting.
 * @param {Found} found
 */
function matchHeading(found) {
  if (found.total === 0) return 'No records match';
  if (found.totalCapped) return `More than ${thousands(found.total)} records match`;
  return `${thousands(found.total)} ${found.total === 1 ? 'record matches' : 'records match'}`;
}

const thousands = (/** @type {number} */ n) => n.toLocaleString('en-US');

/**
 * @param {Query} query
 * @param {string[]} statuses
 * @param {WhoAmI} principal
 * @param {Merchant[] | undefined} merchants
 * @param {HTMLElement} results
 * @param {(values: Record<string, string>) => void} submit
 */
function searchForm(query, statuses, principal, merchants, results, submit) {
  /**
   * @param {string} name
   * @param {string} label
   * @param {Attributes<HTMLInputElement>} [attributes]
   * @param {string} [hint]
   */
  const input = (name, label, attributes = {}, hint) =>
    h(
      'div',
      { class: 'field' },
      h('label', { for: `search-${name}` }, label),
      h('input', { id: `search-${name}`, name, value: query[name], 'aria-describedby': hint ? `search-${name}-hint` : undefined, ...attributes }),
      hint ? h('p', { class: 'hint', id: `search-${name}-hint` }, hint) : null,
    );
  const problem = h('p', { class: 'problem', role: 'alert' });
  return h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Search records',
      onsubmit: (event) => {
        event.preventDefault();
        const form = event.currentTarget;
        const data = new FormData(form);
        /** @type {Record<string, string>} */
        const values = Object.fromEntries(FIELDS.map((name) => [name, String(data.get(name) ?? '').trim()]));
        values.status = data.getAll('status').join(',');
        const customer = String(data.get('customer') ?? '').trim();
        if (customer && principal.scope === 'global' && !values.merchantId) {
          problem.textContent = 'Choose the merchant: a customer is looked up within one merchant.';
          // The records of the search before are not this search's answer: not left under the question.
          replace(results);
          const merchantControl = form.querySelector('#search-merchantId');
          if (merchantControl instanceof HTMLElement) merchantControl.focus();
          return;
        }
        problem.textContent = '';
        customerQuery = customer;
        values.customer = customer ? '1' : '';
        // A new search starts at its first page; the records ticked stay ticked.
        submit(values);
      },
    },
    h(
      'div',
      { class: 'grid' },
      input('orderId', 'POS order id', {}, 'Its beginning is enough, in any case: h-1 finds H-1 and H-10.'),
      input('transactionId', 'Transaction id', { placeholder: 'e.g. generic:A-1001' }, 'The whole id, exactly.'),
      input('refundId', 'Refund id', {}, 'Its beginning is enough, in any case.'),
      h(
        'div',
        { class: 'field wide' },
        h('label', { for: 'search-customer' }, 'Customer'),
        h('input', { id: 'search-customer', name: 'customer', value: query.customer, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'search-customer-hint' }),
        h(
          'p',
          { class: 'hint', id: 'search-customer-hint' },
          `A phone number, email or card serial, looked up within ${principal.scope === 'global' ? 'the merchant chosen' : 'your merchant'} (a national number in its region; phone:, email: or card: before it says which). Recorded in the audit log; not kept in the page\u2019s address.`,
        ),
      ),
      principal.scope === 'global' ? merchantField({ id: 'search-merchantId', merchants, value: query.merchantId }) : null,
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'search-pos' }, 'POS'),
        h('select', { id: 'search-pos', name: 'pos' }, h('option', { value: '' }, 'any POS'), posNames().map((pos) => h('option', { value: pos, selected: pos === query.pos ? true : undefined }, pos))),
      ),
      input('from', 'Created from', { type: 'date' }),
      input('to', 'Created to (inclusive)', { type: 'date' }),
    ),
    h(
      'fieldset',
      { class: 'statuses' },
      h('legend', {}, 'Statuses (any of)'),
      ledgerStatuses().map((status) => h('label', { title: statusWords(status)?.description }, h('input', { type: 'checkbox', name: 'status', value: status, checked: statuses.includes(status) ? true : undefined }), ` ${statusLabel(status)}`)),
    ),
    problem,
    h('button', { type: 'submit', class: 'primary' }, 'Search'),
  );
}

/** @type {readonly [Exclude<RecordActionName, 'ask'>, string][]} */
const BULK_ACTIONS = [
  ['retry', 'Retry'],
  ['reverse', 'Reverse'],
  ['resolve', 'Resolve'],
  ['acknowledge', 'Acknowledge'],
  ['close', 'Close'],
];

/** From this many records on, the operator types the count to go ahead (docs/operators.md "Bulk actions"). */
export const TYPE_THE_COUNT_FROM = 10;

/**
 * What a bulk action would do, as the bridge previewed it: how many, whose, in which statuses, how
 * much (the amounts as the bridge wrote them: the page does no arithmetic on money) and which it
 * would refuse, with why.
 *
 * @param {BulkPreview} preview
 */
function bulkBreakdown(preview) {
  return [
    h('p', {}, `${count(preview.matched, 'record')} now; the action would be taken on ${preview.acted}${preview.refused.length ? `, and refused for ${preview.refused.length}` : ''}.`),
    table('By merchant', ['Merchant', 'Records'], preview.byMerchant.map((m) => [m.merchantId, String(m.count)]), { class: 'compact' }),
    table('By status', ['Status', 'Records'], preview.byStatus.map((s) => [statusLabel(s.status), String(s.count)]), { class: 'compact' }),
    h('p', {}, `Amount of the records it acts on: ${preview.amounts.length ? preview.amounts.map((a) => a.text).join(', ') : 'none'}; points their accruals earned: ${thousands(preview.points)}.`),
    preview.refused.length ? table('It would refuse', ['Record', 'Why'], preview.refused.map((r) => [r.id, r.why])) : null,
  ];
}

/** How long the page follows what it queued, and how often it looks. */
const FOLLOW_MS = 60_000;
const FOLLOW_EVERY_MS = 2000;

/**
 * The records a bulk retry or resolve queued, each with its status as it lands: read again every
 * few seconds until none is still going, or a minute has passed (then it says so).
 *
 * @param {string[]} ids As the bulk answer named them (`<merchantId>/<transactionId>` or plain).
 * @param {string} merchantOfPlain The merchant a plain id is of.
 */
function outcomesAsTheyLand(ids, merchantOfPlain) {
  const rows = h('tbody', {});
  const note = h('p', { class: 'hint', role: 'status' }, 'Following what came of each\u2026');
  const section = h('section', { class: 'landing', 'aria-labelledby': 'landing-heading' }, h('h3', { id: 'landing-heading' }, 'What came of each'), h('table', {}, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Record'), h('th', { scope: 'col' }, 'Status now'))), rows), note);
  const started = Date.now();
  const targets = ids.map((id) => {
    const slash = id.indexOf('/');
    return slash > 0 ? { id, merchantId: id.slice(0, slash), transactionId: id.slice(slash + 1) } : { id, merchantId: merchantOfPlain, transactionId: id };
  });
  const look = async () => {
    if (!section.isConnected && Date.now() - started > FOLLOW_EVERY_MS) return;
    const statuses = await Promise.all(
      targets.map(async (t) => {
        try {
          const record = /** @type {{ status: string }} */ (await api(`/v1/admin/transactions/${encodeURIComponent(t.transactionId)}`, { query: { merchantId: t.merchantId } }));
          return record.status;
        } catch {
          return undefined;
        }
      }),
    );
    replace(rows, targets.map((t, i) => h('tr', {}, h('td', {}, recordLink(t.merchantId, t.transactionId)), h('td', {}, statuses[i] ? statusBadge(statuses[i]) : 'could not be read'))));
    // Still going: a status the bridge delivers by itself (the vocabulary says which), or not read.
    const going = statuses.filter((s) => s === undefined || statusWords(s)?.delivering !== false).length;
    if (going === 0) return void (note.textContent = 'Every record has landed.');
    if (Date.now() - started > FOLLOW_MS) return void (note.textContent = `${count(going, 'record')} still queued after a minute: the bridge delivers on its passes; look again later.`);
    note.textContent = `${count(going, 'record')} still queued; looking again in a moment.`;
    setTimeout(look, FOLLOW_EVERY_MS);
  };
  void look();
  return { section };
}

/**
 * The merchant a bulk request's plain ids are of: the ids' merchant, the filter's, else default.
 *
 * @param {Omit<BulkRequest, 'reason'>} named
 */
function merchantOfIds(named) {
  return named.merchantId ?? named.filter?.merchantId ?? 'default';
}

/**
 * A bulk action on the records ticked, or on every record the search matches (its filter). More
 * than BULK_MAX is refused here, before any confirmation, asking for a narrower selection.
 *
 * @param {{ query: Query, statuses: string[], found: Found, ticks: HTMLElement, announce: ViewContext['announce'], refresh: ViewContext['refresh'], onCleared: () => void }} options
 * @returns {{ section: HTMLElement, showCount: () => void }}
 */
function bulkForm({ query, statuses, found, ticks, announce, refresh, onCleared }) {
  const { total, byFilter } = found;
  const outcome = h('div', { class: 'bulk-result' });
  const action = h('select', { id: 'bulk-action', name: 'action' }, BULK_ACTIONS.map(([value, label]) => h('option', { value }, label)));
  const tooMany = total > BULK_MAX || found.totalCapped;
  const filterNote = !byFilter
    ? h('p', { class: 'hint', id: 'bulk-filter-why' }, 'A bulk action by filter names statuses, POS, merchant and dates: this search by an order id, a refund id or a customer acts on the records you tick.')
    : tooMany
      ? h('p', { class: 'hint', id: 'bulk-filter-why' }, `More than ${BULK_MAX} match: a bulk action takes at most ${BULK_MAX}. Narrow the search first.`)
      : null;
  const clear = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      onclick: () => {
        selection.clear();
        onCleared();
        showCount();
        announce('Selection cleared.');
      },
    },
    'Clear the selection',
  );
  const tickedLabel = h('span', {});
  function showCount() {
    const n = selection.size;
    tickedLabel.textContent = ` The records ticked (${n})`;
    replace(ticks, n ? `${count(n, 'record')} ticked, kept across pages and searches until you clear them${n > BULK_MAX ? `: more than the ${BULK_MAX} a bulk action takes` : ''}.` : 'No record ticked.', ' ', n ? clear : null);
  }

  const refuse = (/** @type {string} */ text) => {
    replace(outcome, h('p', { class: 'problem', role: 'alert' }, text));
  };

  const section = h(
    'section',
    { class: 'bulk', 'aria-labelledby': 'bulk-heading' },
    h('h2', { id: 'bulk-heading' }, 'Bulk action'),
    ticks,
    h(
      'form',
      {
        'aria-describedby': 'ticked-count',
        onsubmit: async (event) => {
          event.preventDefault();
          const data = new FormData(event.currentTarget);
          const chosen = BULK_ACTIONS.find(([value]) => value === data.get('action'));
          if (!chosen) return refuse('Choose an action.');
          const [name, label] = chosen;
          const scope = String(data.get('scope'));
          const picked = selection.all();
          if (scope === 'selected' && picked.length === 0) return refuse('Tick at least one record first.');
          if (scope === 'selected' && picked.length > BULK_MAX) {
            return refuse(`${count(picked.length, 'record')} ticked: a bulk action takes at most ${BULK_MAX}. Untick some (or clear the selection and tick fewer), then review again.`);
          }
          if (scope === 'filter' && tooMany) {
            return refuse(
              `${found.totalCapped ? `More than ${thousands(total)}` : thousands(total)} records match this search: a bulk action takes at most ${BULK_MAX}. Narrow the search (a merchant, a POS, statuses or dates) until at most ${BULK_MAX} match, or tick the records to act on.`,
            );
          }
          replace(outcome);
          /** @type {Omit<BulkRequest, 'reason'>} */
          const named = { action: name, ...(scope === 'selected' ? idsOf(picked) : { filter: filterOf(query, statuses) }) };
          // What it would do, as the bridge sees it now: counted by merchant, status and money, and what it would refuse.
          /** @type {BulkPreview} */
          let preview;
          try {
            preview = /** @type {BulkPreview} */ (await api('/v1/admin/transactions/bulk/preview', { method: 'POST', body: named }));
          } catch (error) {
            return refuse(describeError(error));
          }
          const noun = count(preview.matched, 'record');
          const several = new Set(picked.map((p) => p.merchantId)).size > 1;
          const target =
            scope === 'selected'
              ? h('p', {}, `The ${noun} selected: ${picked.map((p) => (several ? `${p.merchantId}/${p.transactionId}` : p.transactionId)).join(', ')}.`)
              : h('p', {}, `Every record matching this search now: ${noun} (${describeFilter(query, statuses)}).`);
          // A reverse over a filter across merchants names each of them: ticked by the person, none for them.
          const spans = preview.byMerchant.map((m) => m.merchantId);
          const pickMerchants = name === 'reverse' && scope === 'filter' && spans.length > 1;
          const confirmed = await confirmAction({
            title: `${label} ${noun}`,
            intro: bulkBreakdown(preview),
            choices: name === 'resolve' ? resolveOutcomes() : undefined,
            effect: (choice) => [
              target,
              name === 'resolve' ? h('p', {}, resolveOutcomes().find((o) => o.value === choice)?.effect ?? 'Choose the outcome you established.') : h('p', {}, ACTION_EFFECTS[name]),
              h('p', {}, 'Each record is decided on its own: any the bridge refuses is listed with why, and the others go ahead.'),
              name === 'retry' || name === 'resolve' ? h('p', {}, 'What is to be sent is queued: it goes out on the bridge\u2019s next delivery passes (Reconcile runs one now), and this page shows what came of each as it lands.') : null,
            ],
            confirmLabel: `${label} ${noun}`,
            typedCount: preview.matched > TYPE_THE_COUNT_FROM ? preview.matched : undefined,
            picks: pickMerchants
              ? {
                  legend: `The ${spans.length} merchants whose records this reverses`,
                  hint: 'Tick each merchant whose customers lose these points. To reverse only some merchants\u2019 records, cancel and pick one merchant in the search.',
                  options: preview.byMerchant.map((m) => ({ value: m.merchantId, label: `${m.merchantId}: ${count(m.count, 'record')}` })),
                }
              : undefined,
          });
          if (!confirmed) return;
          /** @type {BulkRequest} */
          const body = {
            ...named,
            reason: confirmed.reason,
            expectCount: preview.matched,
            expectDigest: preview.digest,
            ...(pickMerchants ? { merchants: confirmed.picked } : {}),
            ...(name === 'resolve' ? { outcome: resolveOutcomes().find((o) => o.value === confirmed.choice)?.value } : {}),
          };
          try {
            const answer = /** @type {BulkAnswer} */ (await api('/v1/admin/transactions/bulk', { method: 'POST', body }));
            const done = answer.done ?? [];
            const refused = answer.refused ?? [];
            // What was done leaves the selection; what was refused stays ticked for another look.
            if (scope === 'selected') {
              const doneIds = new Set(done);
              for (const p of picked) if (doneIds.has(p.transactionId) || doneIds.has(`${p.merchantId}/${p.transactionId}`)) selection.set(p.merchantId, p.transactionId, false);
              onCleared();
              showCount();
            }
            // Retry and resolve only hand the records to delivery: "queued", and what came of each is shown as it lands.
            const queued = name === 'retry' || name === 'resolve';
            const text = `${label}: ${done.length} ${queued ? 'queued' : 'done'}, ${refused.length} refused.`;
            const landing = queued && done.length ? outcomesAsTheyLand(done, merchantOfIds(named)) : null;
            replace(
              outcome,
              h('p', { role: 'status', class: refused.length && !done.length ? 'problem' : undefined }, text),
              refused.length ? table('Refused', ['Record', 'Why'], refused.map((r) => [r.id, r.why])) : null,
              landing?.section ?? null,
              h('p', {}, h('button', { type: 'button', class: 'secondary', onclick: () => refresh() }, 'Search again')),
            );
            // Nothing done and something refused is a failure, said as one (as a failed replay is).
            announce(text, refused.length && !done.length ? 'problem' : 'done');
          } catch (error) {
            // The count changed since the preview (records came or went): nothing was done; look again.
            if (error instanceof ApiError && (error.code === 'count_mismatch' || error.code === 'records_changed')) return refuse(`Nothing was done: ${error.message}. Review the bulk action again to see the records as they are now.`);
            refuse(describeError(error));
          }
        },
      },
      h('div', { class: 'field' }, h('label', { for: 'bulk-action' }, 'Action'), action),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Apply to'),
        h('label', {}, h('input', { type: 'radio', name: 'scope', value: 'selected', checked: true }), tickedLabel),
        h('label', {}, h('input', { type: 'radio', name: 'scope', value: 'filter', disabled: !byFilter, 'aria-describedby': filterNote ? 'bulk-filter-why' : undefined }), ` Every record matching this search (${found.totalCapped ? `more than ${thousands(total)}` : thousands(total)})`),
        filterNote,
      ),
      h('button', { type: 'submit', class: 'primary' }, 'Review bulk action…'),
    ),
    outcome,
  );
  return { section, showCount };
}

/**
 * The ticked records as the bulk API names them: transactionIds of one merchant with its id, or,
 * across merchants (ADMIN_TOKEN only), each as `<merchantId>/<transactionId>`.
 *
 * @param {Ticked[]} picked
 * @returns {{ ids: string[], merchantId?: string }}
 */
function idsOf(picked) {
  const merchants = new Set(picked.map((p) => p.merchantId));
  if (merchants.size === 1) return { ids: picked.map((p) => p.transactionId), merchantId: [...merchants][0] };
  return { ids: picked.map((p) => `${p.merchantId}/${p.transactionId}`) };
}

/**
 * @param {Query} query
 * @param {string[]} statuses
 * @returns {NonNullable<BulkRequest['filter']>}
 */
function filterOf(query, statuses) {
  const filter = { status: statuses.length ? statuses.join(',') : undefined, pos: query.pos || undefined, merchantId: query.merchantId || undefined, from: query.from || undefined, to: query.to || undefined };
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined));
}

/**
 * @param {Query} query
 * @param {string[]} statuses
 */
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
