// @ts-check
/**
 * Reconcile: run one pass over the open work now and read what it fixed and left open; and the
 * three-way report (POS ↔ ledger ↔ loyalty history) where the bridge serves it.
 */
import { api, ApiError, describeError } from '../api.js';
import { count, h, prose, recordLink, replace, statusBadge, table, time } from '../dom.js';
import { merchantField, merchantList } from '../merchants.js';
import { backfillHref } from './backfill.js';
import { differenceLabel } from '../vocabulary.js';

/** @import { Merchant, ReconcileReport, ThreeWayDifference, ThreeWayReport, ViewContext, WhoAmI } from '../types.js' */

/** @param {ViewContext} context */
export async function reconcileView({ section, params, principal, announce, navigate }) {
  replace(section, h('h1', {}, 'Reconcile'), h('p', { class: 'loading' }, 'Loading…'));
  const merchants = principal.scope === 'global' ? await merchantList(principal) : undefined;
  if (!section.isConnected) return;
  const report = h('div', { class: 'report' });
  const run = h(
    'button',
    {
      type: 'button',
      class: 'primary',
      onclick: async () => {
        run.disabled = true;
        replace(report, h('p', { class: 'loading' }, 'Running a pass (at most 20 seconds)…'));
        try {
          const result = /** @type {ReconcileReport} */ (await api('/v1/admin/reconcile', { method: 'POST' }));
          replace(report, passReport(result));
          announce(`Reconcile examined ${count(result.examined, 'record')}: ${result.fixed.length} fixed, ${result.open.length} open.`);
        } catch (error) {
          replace(report, h('p', { class: 'problem', role: 'alert' }, describeError(error)));
        } finally {
          run.disabled = false;
        }
      },
    },
    'Run reconcile now',
  );

  replace(
    section,
    h('h1', {}, 'Reconcile'),
    h(
      'section',
      { 'aria-labelledby': 'pass-heading' },
      h('h2', { id: 'pass-heading' }, 'A pass over open work'),
      h(
        'p',
        {},
        `What will happen: the bridge examines every open record${principal.scope === 'merchant' ? ` of merchant ${principal.merchantId}` : ''} now, as its worker does on its own: it settles in-doubt accruals from the loyalty service's operations history, delivers what is due, and reports what it fixed and what stays open, with why. It never guesses an outcome. A pass stops after 20 seconds; run it again for the rest.`,
      ),
      run,
      report,
    ),
    threeWaySection({ params, principal, merchants, navigate }),
  );
}

/** @param {ReconcileReport} result */
function passReport(result) {
  return [
    h('p', { class: 'summary' }, `Examined ${count(result.examined, 'record')} between `, time(result.startedAt), ' and ', time(result.finishedAt), '. ', result.complete ? 'Every open record was examined.' : h('strong', {}, 'Not complete: run it again for the rest.')),
    result.fixed.length
      ? table(`Fixed (${result.fixed.length})`, ['Record', 'Merchant', 'From', 'To', 'Why'], result.fixed.map((f) => [recordLink(f.merchantId, f.transactionId), f.merchantId, statusBadge(f.from), statusBadge(f.to), prose(f.why)]))
      : h('p', {}, 'Nothing was fixed by this pass.'),
    result.open.length
      ? table(`Still open (${result.open.length})`, ['Record', 'Merchant', 'Status', 'Why'], result.open.map((o) => [recordLink(o.merchantId, o.transactionId), o.merchantId, statusBadge(o.status), prose(o.why)]))
      : h('p', {}, 'Nothing is left open.'),
  ];
}

/**
 * The three-way report's form and answer. The merchant and range are in the page's address, so a
 * report can be read again (after a backfill it started, say) and the browser's Back returns to it.
 *
 * @param {{ params: URLSearchParams, principal: WhoAmI, merchants: Merchant[] | undefined, navigate: ViewContext['navigate'] }} options
 */
function threeWaySection({ params, principal, merchants, navigate }) {
  const out = h('div', { class: 'report' });
  const today = new Date().toISOString().slice(0, 10);
  const asked = params.get('from') && params.get('to');
  const merchantId = (principal.scope === 'merchant' ? principal.merchantId : params.get('merchantId')) ?? 'default';
  const from = params.get('from') ?? today;
  const to = params.get('to') ?? today;
  const form = h(
    'form',
    {
      class: 'filters inline',
      'aria-label': 'Three-way report',
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        navigate('/reconcile', {
          merchantId: principal.scope === 'merchant' ? undefined : String(data.get('merchantId') ?? '').trim(),
          from: String(data.get('from')),
          to: String(data.get('to')),
        });
      },
    },
    principal.scope === 'global' ? merchantField({ id: 'three-merchant', merchants, value: merchantId, any: null, required: true }) : null,
    h('div', { class: 'field' }, h('label', { for: 'three-from' }, 'From'), h('input', { id: 'three-from', name: 'from', type: 'date', value: from, required: true })),
    h('div', { class: 'field' }, h('label', { for: 'three-to' }, 'To'), h('input', { id: 'three-to', name: 'to', type: 'date', value: to, required: true })),
    h('button', { type: 'submit', class: 'secondary' }, 'Read report'),
  );
  if (asked) {
    replace(out, h('p', { class: 'loading' }, 'Reading the POS, the ledger and the loyalty history…'));
    const query = { merchantId, from, to };
    api('/v1/admin/reports/reconcile', { query }).then(
      (result) => replace(out, threeWayReport(/** @type {ThreeWayReport} */ (result), merchantId, query)),
      (error) => {
        const missing = error instanceof ApiError && error.status === 404 && /^no route/.test(error.message);
        replace(out, missing ? h('p', { role: 'status' }, 'This bridge does not serve the three-way report yet.') : h('p', { class: 'problem', role: 'alert' }, describeError(error)));
      },
    );
  }
  return h(
    'section',
    { 'aria-labelledby': 'three-heading' },
    h('h2', { id: 'three-heading' }, 'Three-way report'),
    h('p', {}, 'Compares the POS\u2019s orders and refunds, the ledger and the loyalty service\u2019s operations history for one merchant and a date range, and names every difference with why and the next step. It only reads: it fixes nothing.'),
    form,
    out,
  );
}

/**
 * A row's next step when it is a backfill: `backfill: POST /v1/admin/backfill {"merchantId":…,
 * "pos":…,"since":…} …` (src/reconcile/classify.ts) read as its merchant, POS and time.
 *
 * @param {string | undefined} next
 * @returns {{ merchantId?: string, pos: string, since: string } | undefined}
 */
function backfillOf(next) {
  const match = /^backfill: POST \/v1\/admin\/backfill (\{[^}]*\})/.exec(next ?? '');
  if (!match?.[1]) return undefined;
  try {
    const step = JSON.parse(match[1]);
    if (!step || typeof step.pos !== 'string' || typeof step.since !== 'string') return undefined;
    return { merchantId: typeof step.merchantId === 'string' ? step.merchantId : undefined, pos: step.pos, since: step.since };
  } catch {
    return undefined;
  }
}

/** The kinds of difference whose record is not in the ledger: nothing to link to. */
const NOT_IN_LEDGER = new Set(['missing_in_ledger']);

/**
 * @param {ThreeWayReport} result
 * @param {string} merchantId
 * @param {{ merchantId: string, from: string, to: string }} query
 */
function threeWayReport(result, merchantId, query) {
  const examined = result.examined ?? {};
  const differences = result.differences ?? [];
  const counts = Object.entries(result.counts ?? {}).filter(([, n]) => n > 0);
  const unread = (result.sources ?? []).filter((source) => !source.read);
  const next = (/** @type {ThreeWayDifference} */ d) => {
    const step = backfillOf(d.next);
    if (!step) return prose(d.next);
    // Back from the backfill, the same report is read again.
    return [
      h('a', { class: 'button-link', href: backfillHref({ merchantId: step.merchantId ?? merchantId, pos: step.pos, since: step.since, report: { from: query.from, to: query.to } }) }, `Backfill ${step.pos} since `, time(step.since), '…'),
      h('span', { class: 'hint' }, ' Reads the POS back and records what the ledger lacks.'),
    ];
  };
  return [
    h(
      'p',
      { class: 'summary' },
      `Merchant ${result.merchantId ?? merchantId}, from `,
      time(result.from),
      ' to ',
      time(result.to),
      ` (not included): ${count(examined.pos ?? 0, 'POS order or refund', 'POS orders and refunds')}, ${count(examined.ledger ?? 0, 'ledger record')} and ${count(examined.history ?? 0, 'operation')} examined; ${count(differences.length, 'difference')}.`,
    ),
    result.complete === false ? h('p', { role: 'status' }, h('strong', {}, 'Incomplete: '), unread.length ? `not read: ${unread.map((s) => `${s.pos} (${s.why ?? 'unknown'})`).join('; ')}.` : 'the operations history moved while it was read; read the report again.') : null,
    counts.length ? table('Differences by kind', ['Kind', 'Count'], counts.map(([kind, n]) => [h('span', { title: kind }, differenceLabel(kind)), String(n)]), { class: 'compact' }) : null,
    differences.length
      ? table(
          'Differences',
          ['Kind', 'Record', 'POS order', 'Operation', 'Why', 'Next step'],
          differences.map((d) => [
            h('span', { title: d.kind }, differenceLabel(d.kind)),
            d.transactionId ? (NOT_IN_LEDGER.has(d.kind) ? h('span', { class: 'id' }, d.transactionId, h('span', { class: 'hint' }, ' (not in the ledger)')) : recordLink(merchantId, d.transactionId)) : '',
            d.orderId ?? '',
            d.operationId === undefined || d.operationId === null ? '' : String(d.operationId),
            prose(d.why),
            next(d),
          ]),
          { class: 'differences' },
        )
      : null,
    h('p', {}, h('button', { type: 'button', class: 'secondary', onclick: (event) => downloadCsv(event.currentTarget, query) }, 'Download as CSV')),
  ];
}

/**
 * The same report as CSV (the API answers it for Accept: text/csv), saved through a link to its text: the token never leaves the page.
 * @param {HTMLButtonElement} button
 * @param {{ merchantId: string, from: string, to: string }} query
 */
async function downloadCsv(button, query) {
  button.disabled = true;
  try {
    const text = String(await api('/v1/admin/reports/reconcile', { query, accept: 'text/csv' }));
    const link = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'text/csv' })), download: `reconcile-${query.merchantId || 'default'}-${query.from}-${query.to}.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    URL.revokeObjectURL(link.href);
  } finally {
    button.disabled = false;
  }
}
