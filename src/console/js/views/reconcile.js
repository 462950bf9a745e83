/**
 * Reconcile: run one pass over the open work now and read what it fixed and left open; and the
 * three-way report (POS ↔ ledger ↔ loyalty history) where the bridge serves it.
 */
import { api, ApiError, describeError } from '../api.js';
import { count, h, recordLink, replace, statusBadge, table, time } from '../dom.js';

export async function reconcileView({ section, principal, announce }) {
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
          const result = await api('/v1/admin/reconcile', { method: 'POST' });
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
    threeWaySection(principal),
  );
}

function passReport(result) {
  return [
    h('p', { class: 'summary' }, `Examined ${count(result.examined, 'record')} between `, time(result.startedAt), ' and ', time(result.finishedAt), '. ', result.complete ? 'Every open record was examined.' : h('strong', {}, 'Not complete: run it again for the rest.')),
    result.fixed.length
      ? table(`Fixed (${result.fixed.length})`, ['Record', 'Merchant', 'From', 'To', 'Why'], result.fixed.map((f) => [recordLink(f.merchantId, f.transactionId), f.merchantId, statusBadge(f.from), statusBadge(f.to), f.why]))
      : h('p', {}, 'Nothing was fixed by this pass.'),
    result.open.length
      ? table(`Still open (${result.open.length})`, ['Record', 'Merchant', 'Status', 'Why'], result.open.map((o) => [recordLink(o.merchantId, o.transactionId), o.merchantId, statusBadge(o.status), o.why]))
      : h('p', {}, 'Nothing is left open.'),
  ];
}

function threeWaySection(principal) {
  const out = h('div', { class: 'report' });
  const today = new Date().toISOString().slice(0, 10);
  const form = h(
    'form',
    {
      class: 'filters inline',
      'aria-label': 'Three-way report',
      onsubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        replace(out, h('p', { class: 'loading' }, 'Reading the POS, the ledger and the loyalty history…'));
        try {
          const merchantId = principal.scope === 'merchant' ? principal.merchantId : String(data.get('merchantId') ?? '').trim();
          const query = { merchantId, from: String(data.get('from')), to: String(data.get('to')) };
          const result = await api('/v1/admin/reports/reconcile', { query });
          replace(out, threeWayReport(result, merchantId, query));
        } catch (error) {
          const missing = error instanceof ApiError && error.status === 404 && /^no route/.test(error.message);
          replace(out, missing ? h('p', { role: 'status' }, 'This bridge does not serve the three-way report yet.') : h('p', { class: 'problem', role: 'alert' }, describeError(error)));
        }
      },
    },
    principal.scope === 'global' ? [h('label', { for: 'three-merchant' }, 'Merchant'), h('input', { id: 'three-merchant', name: 'merchantId', value: 'default', required: true })] : null,
    h('label', { for: 'three-from' }, 'From'),
    h('input', { id: 'three-from', name: 'from', type: 'date', value: today, required: true }),
    h('label', { for: 'three-to' }, 'To'),
    h('input', { id: 'three-to', name: 'to', type: 'date', value: today, required: true }),
    h('button', { type: 'submit', class: 'secondary' }, 'Read report'),
  );
  return h(
    'section',
    { 'aria-labelledby': 'three-heading' },
    h('h2', { id: 'three-heading' }, 'Three-way report'),
    h('p', {}, 'Compares the POS\u2019s orders and refunds, the ledger and the loyalty service\u2019s operations history for one merchant and a date range, and names every difference with why and the next step. It only reads: it fixes nothing.'),
    form,
    out,
  );
}

function threeWayReport(result, merchantId, query) {
  const examined = result.examined ?? {};
  const differences = result.differences ?? [];
  const counts = Object.entries(result.counts ?? {}).filter(([, n]) => n > 0);
  const unread = (result.sources ?? []).filter((source) => !source.read);
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
    counts.length ? table('Differences by kind', ['Kind', 'Count'], counts.map(([kind, n]) => [kind, String(n)]), { class: 'compact' }) : null,
    differences.length
      ? table(
          'Differences',
          ['Kind', 'Record', 'POS order', 'Operation', 'Why', 'Next step'],
          differences.map((d) => [d.kind, d.transactionId ? recordLink(merchantId, d.transactionId) : '', d.orderId ?? '', d.operationId === undefined ? '' : String(d.operationId), d.why, d.next]),
        )
      : null,
    h('p', {}, h('button', { type: 'button', class: 'secondary', onclick: (event) => downloadCsv(event.target, query) }, 'Download as CSV')),
  ];
}

/** The same report as CSV (the API answers it for Accept: text/csv), saved through a link to its text: the token never leaves the page. */
async function downloadCsv(button, query) {
  button.disabled = true;
  try {
    const text = await api('/v1/admin/reports/reconcile', { query, accept: 'text/csv' });
    const link = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'text/csv' })), download: `reconcile-${query.merchantId || 'default'}-${query.from}-${query.to}.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    URL.revokeObjectURL(link.href);
  } finally {
    button.disabled = false;
  }
}
