/**
 * One record's page: its status and links, the actions allowed on it (the others disabled with the
 * API's reason), the Check with its selections, every attempt with what was sent and what came
 * back, and its history as a timeline.
 */
import { api, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { count, facts, h, json, maskContact, money, recordLink, replace, statusBadge, statusLabel, table, time } from '../dom.js';

/** What each action does, as the README's admin API says it; shown before the operator confirms. */
export const ACTION_EFFECTS = {
  retry: 'The bridge delivers again what provably did not happen upstream (a refused or pending call). It refuses where a retry could double an accrual or a reversal.',
  reverse: 'The bridge reverses the whole accrual at the loyalty service: the points this order earned are taken back (what remains of it after partial refunds, on its last remainder record).',
  resolve: 'The bridge records the outcome you established in the loyalty service.',
  close: 'The record is closed as one that cannot succeed (the loyalty service never knew its order): kept in the ledger with your reason, never deleted, its status unchanged, and it leaves the attention queue. Nothing is sent to the loyalty service.',
  acknowledge: 'What the attention queue shows of this record (a refusal the loyalty service will keep giving, or deliveries with another amount) is marked as seen and settled outside the bridge, with your reason: nothing is sent, and the record leaves the attention queue until it needs a person again.',
};

export const RESOLVE_OUTCOMES = [
  { value: 'accrued', label: 'Accrued', effect: 'The accrual happened upstream (you found its operation): the record becomes accrued. Nothing is sent.' },
  { value: 'not_accrued', label: 'Not accrued', effect: 'Nothing was booked upstream: the accrual goes back to pending and the bridge sends it again.' },
  { value: 'reversed', label: 'Reversed', effect: 'The reversal happened upstream, or you finished its failed cards by hand: the record becomes reversed (a partial refund then accrues what remains). Nothing is sent.' },
  { value: 'not_reversed', label: 'Not reversed', effect: 'The reversal did not happen upstream: it goes back to pending and the bridge sends it again.' },
];

const ACTIONS = [
  ['retry', 'Retry'],
  ['reverse', 'Reverse'],
  ['resolve', 'Resolve…'],
  ['close', 'Close'],
  ['acknowledge', 'Acknowledge'],
];

/**
 * The record's page. The API masks the customer's phone number and email (in the customer and in
 * every attempt) unless asked for them, which it records in the audit log: the page asks only when
 * the operator presses the button, for this showing of the page only (a reload masks them again).
 */
export async function recordView(context, merchantId, transactionId, unmask = false) {
  const { section, announce, refresh } = context;
  replace(section, h('h1', {}, `Record ${transactionId}`), h('p', { class: 'loading' }, 'Loading…'));
  const record = await api(`/v1/admin/transactions/${encodeURIComponent(transactionId)}`, { query: { merchantId, unmask: unmask ? 'true' : undefined } });
  const check = record.check;
  const outcome = h('div', { class: 'action-result' });
  const unmaskButton = record.masked
    ? h(
        'p',
        {},
        h('button', { type: 'button', class: 'secondary', 'aria-describedby': 'unmask-hint', onclick: () => recordView(context, merchantId, transactionId, true).catch((error) => section.append(h('p', { class: 'problem', role: 'alert' }, describeError(error)))) }, 'Show phone numbers and emails'),
        h('span', { class: 'hint', id: 'unmask-hint' }, ' Recorded in the audit log with your name.'),
      )
    : null;

  replace(
    section,
    h('h1', {}, `Record ${record.transactionId}`),
    facts([
      ['Status', statusBadge(record.status)],
      ['Merchant', record.merchantId],
      ['POS', record.pos],
      ['POS order id', record.orderId],
      ['Amount', check ? money(check.amount, check.currency) : undefined],
      ['Created', time(record.createdAt)],
      ['Updated', time(record.updatedAt)],
      ['Next attempt', record.nextAttemptAt ? time(record.nextAttemptAt) : undefined],
      ['Call in flight', record.inFlight ? [`${record.inFlight.operation} since `, time(record.inFlight.startedAt), ` on ${record.inFlight.owner}`] : undefined],
      ['Accrual', describeSide(record.accrual)],
      ['Reversal', record.reversal && record.reversal.state !== 'none' ? describeSide(record.reversal) : undefined],
      ['Refund ids', record.reversal?.refundIds?.length ? record.reversal.refundIds.join(', ') : undefined],
      ['Parent record', record.parentTransactionId ? recordLink(record.merchantId, record.parentTransactionId) : undefined],
      ['Remainder record', record.remainderTransactionId ? recordLink(record.merchantId, record.remainderTransactionId) : undefined],
      ['Partial refund', record.partialRefund ? `${record.partialRefund.refundId}: ${money(record.partialRefund.refundedCents, check?.currency)} refunded; the rest is accrued as ${record.partialRefund.remainderTransactionId}` : undefined],
      ['Closed', record.closed ? [time(record.closed.at), ` by ${record.closed.actor}: ${record.closed.reason}`] : undefined],
      ['Customer', customer(record.customer)],
    ]),
    unmaskButton,
    actionsSection(record, outcome, { announce, refresh }),
    outcome,
    checkSection(check),
    resultsSection(record),
    attemptsSection(record),
    historySection(record),
    changedRepeatsSection(record, check?.currency),
  );
}

function describeSide(side) {
  if (!side) return undefined;
  const parts = [side.state];
  if (side.settledBy) parts.push(`settled by ${side.settledBy}`);
  if (side.inDoubtSince) parts.push(`in doubt since ${side.inDoubtSince}`);
  if (side.operationIds?.length) parts.push(`operations ${side.operationIds.join(', ')}`);
  return parts.join('; ');
}

/** The customer as the API gives it: phone and email masked unless the operator asked for them. */
function customer(c) {
  if (!c) return undefined;
  const parts = [c.phone && `phone ${c.phone}`, c.email && `email ${c.email}`, c.serialNumber && `card ${maskContact(c.serialNumber, 'card')}`];
  return parts.filter(Boolean).join(', ') || undefined;
}

function actionsSection(record, outcome, { announce, refresh }) {
  const allowedOf = (name) => record.actions?.[name] ?? { allowed: true };
  // Acknowledging is offered where there is something to acknowledge (a refusal, changed repeats),
  // or was (so its page says by whom); elsewhere it would only ever be disabled.
  const offered = ACTIONS.filter(([name]) => name !== 'acknowledge' || record.changedRepeats?.count || record.acknowledged || allowedOf(name).allowed);
  const buttons = offered.map(([name, label]) => {
    const rule = allowedOf(name);
    const whyId = `why-${name}`;
    return h(
      'li',
      {},
      h('button', { type: 'button', class: 'action', disabled: !rule.allowed, 'aria-describedby': rule.allowed ? undefined : whyId, onclick: () => act(name, label.replace('…', ''), rule) }, label),
      rule.allowed ? null : h('span', { class: 'why', id: whyId }, `Not available: ${rule.why ?? 'the bridge does not allow it in this state'}`),
    );
  });

  async function act(name, label, rule) {
    const outcomes = name === 'resolve' ? RESOLVE_OUTCOMES.filter((o) => !rule.outcomes || rule.outcomes.includes(o.value)) : undefined;
    const confirmed = await confirmAction({
      title: `${label} ${record.transactionId}`,
      choices: outcomes,
      effect: (choice) => [
        h('p', {}, `Now: ${statusLabel(record.status)}.`),
        h('p', {}, ACTION_EFFECTS[name]),
        name === 'resolve' ? h('p', {}, RESOLVE_OUTCOMES.find((o) => o.value === choice)?.effect ?? '') : null,
      ],
      confirmLabel: label,
    });
    if (!confirmed) return;
    const body = { reason: confirmed.reason, ...(name === 'resolve' ? { outcome: confirmed.choice } : {}) };
    try {
      const answer = await api(`/v1/admin/transactions/${encodeURIComponent(record.transactionId)}/${name}`, { method: 'POST', body, query: { merchantId: record.merchantId } });
      const text = `${label} ${record.transactionId}: now ${statusLabel(answer?.status ?? 'unknown')}.`;
      announce(text);
      await refresh();
    } catch (error) {
      outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, `${label} was refused: ${describeError(error)}`));
    }
  }

  return h('section', { 'aria-labelledby': 'actions-heading' }, h('h2', { id: 'actions-heading' }, 'Actions'), h('ul', { class: 'actions' }, buttons));
}

function checkSection(check) {
  if (!check) return h('section', { 'aria-labelledby': 'check-heading' }, h('h2', { id: 'check-heading' }, 'Check'), h('p', {}, 'No Check: this record was created by a refund of an order the bridge never saw.'));
  const m = (cents) => (cents === undefined ? undefined : money(cents, check.currency));
  return h(
    'section',
    { 'aria-labelledby': 'check-heading' },
    h('h2', { id: 'check-heading' }, 'Check'),
    facts([
      ['Amount', m(check.amount)],
      ['Tax', m(check.taxAmount)],
      ['Discount', m(check.discountAmount)],
      ['Tip', m(check.tipAmount)],
      ['Service charge', m(check.serviceAmount)],
      ['Opened', check.checkOpenedAt ? time(check.checkOpenedAt) : undefined],
      ['Closed', check.checkClosedAt ? time(check.checkClosedAt) : undefined],
    ]),
    table(
      'Selections',
      ['Item', 'Group', 'Quantity', 'Unit price', 'Total'],
      (check.selections ?? []).map((s) => [s.displayName ?? s.id ?? '', s.groupId ?? '', String(s.quantity), m(s.price) ?? '', m(s.totalPrice) ?? '']),
    ),
  );
}

function resultsSection(record) {
  const results = [...(record.results ?? []).map((r) => ['accrual', r]), ...(record.reversal?.results ?? []).map((r) => ['reversal', r])];
  const errors = record.errors ?? [];
  if (!results.length && !errors.length) return null;
  return h(
    'section',
    { 'aria-labelledby': 'results-heading' },
    h('h2', { id: 'results-heading' }, 'Results per card'),
    results.length
      ? table(
          'What the loyalty service answered for each card',
          ['Call', 'Card', 'Succeeded', 'Accrued', 'Operation', 'Error', 'Reversed at'],
          results.map(([call, r]) => [call, r.serialNumber ?? '', r.isSuccess ? 'yes' : 'no', r.accruedValue === undefined ? '' : String(r.accruedValue), r.operationId == null ? '' : String(r.operationId), r.errorMessage ?? '', r.reversedAt ? time(r.reversedAt) : '']),
        )
      : null,
    errors.length ? [h('h3', {}, 'Errors'), h('ul', {}, errors.map((e) => h('li', {}, e)))] : null,
  );
}

function attemptsSection(record) {
  const attempts = record.attempts ?? [];
  return h(
    'section',
    { 'aria-labelledby': 'attempts-heading' },
    h('h2', { id: 'attempts-heading' }, `Attempts (${attempts.length}${record.attemptsOmitted ? ` shown, ${record.attemptsOmitted} earlier omitted` : ''})`),
    attempts.length === 0 ? h('p', {}, 'No call to the loyalty service yet.') : null,
    h(
      'ol',
      { class: 'attempts' },
      attempts.map((a) =>
        h(
          'li',
          {},
          h('h3', {}, `${a.operation} at `, time(a.startedAt), ` — ${a.response ? `answered ${a.response.status}` : `no answer${a.error ? `: ${a.error}` : ''}`}`),
          h('details', {}, h('summary', {}, 'What was sent'), json(a.request)),
          a.response ? h('details', {}, h('summary', {}, `What came back (${a.response.status})`), json(a.response.body)) : null,
        ),
      ),
    ),
  );
}

function historySection(record) {
  return h(
    'section',
    { 'aria-labelledby': 'history-heading' },
    h('h2', { id: 'history-heading' }, 'History'),
    h(
      'ol',
      { class: 'timeline' },
      (record.history ?? []).map((event) =>
        h(
          'li',
          {},
          time(event.at),
          ' ',
          event.from || event.to ? h('span', { class: 'transition' }, `${event.from ? statusLabel(event.from) : '—'} → ${event.to ? statusLabel(event.to) : '—'}`) : null,
          h('p', {}, event.event, event.actor ? ` — by ${event.actor}` : '', event.detail && !event.event.includes(event.detail) ? ` (${event.detail})` : ''),
        ),
      ),
    ),
  );
}

function changedRepeatsSection(record, currency) {
  const changed = record.changedRepeats;
  if (!changed?.count) return null;
  const deliveries = [...changed.first, ...changed.latest];
  return h(
    'section',
    { 'aria-labelledby': 'repeats-heading' },
    h('h2', { id: 'repeats-heading' }, `Delivered again with another amount (${count(changed.count, 'time')}${record.acknowledged ? `, acknowledged by ${record.acknowledged.actor}` : ''})`),
    table('Deliveries kept (the first and the latest)', ['At', 'Amount'], deliveries.map((d) => [time(d.at), money(d.amountCents, currency)])),
  );
}
