// @ts-check
/**
 * One record's page: its status and links, where it came from (the POS's payload, its webhook
 * event, its dead letter), what the loyalty history shows for a call in doubt, the actions allowed
 * on it (the others disabled with the API's reason), the Check with its selections, every attempt
 * with what was sent and what came back, and its history as a timeline.
 */
import { ruleOf } from '../actions.js';
import { api, ApiError, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { deliveryBox } from '../delivery.js';
import { actionItem, age, count, deadLetterHref, facts, h, json, prose, recordHref, recordLink, replace, statusBadge, statusLabel, table, time, when } from '../dom.js';
import { resolveOutcomes } from '../vocabulary.js';
import { kindLabel } from './attention.js';

/**
 * @import { ActionRule, AttentionAnswer, Child, EvidenceAnswer, KeptPayload, OriginVia, RecordActionName, RecordDetail, ResolveOutcome, ViewContext } from '../types.js'
 * @typedef {RecordDetail['accrual'] | RecordDetail['reversal']} Side
 * @typedef {{ section: HTMLElement, answer: Promise<EvidenceAnswer | undefined> }} Evidence
 */

/**
 * What each action does, as docs/operators.md's admin API says it; shown before the operator confirms.
 * @type {Readonly<Record<RecordActionName, string>>}
 */
export const ACTION_EFFECTS = {
  retry: 'The bridge delivers again what provably did not happen upstream (a refused or pending call). It refuses where a retry could double an accrual or a reversal.',
  reverse: 'The bridge reverses the whole accrual at the loyalty service: the points this order earned are taken back (what remains of it after partial refunds, on its last remainder record).',
  resolve: 'The bridge records the outcome you established in the loyalty service.',
  close: 'The record is closed as one that cannot succeed (the loyalty service never knew its order): kept in the ledger with your reason, never deleted, its status unchanged, and it leaves the attention queue. Nothing is sent to the loyalty service.',
  ask: 'The bridge asks the loyalty service whether this accrual happened, by reversing its transactionId: the service reverses only an accrual it made. Refused as unknown, it never happened, and the bridge sends it again. Reversed, it had: the bridge claims its operation from the answer and accrues the purchase again as a linked record (~r1), so the customer keeps the points, and their history shows a reversal and an accrual. A lost answer is never asked again blindly: the reversal then waits for the history or for you.',
  acknowledge: 'What the attention queue shows of this record (a refusal the loyalty service will keep giving, or deliveries with another amount) is marked as seen and settled outside the bridge, with your reason: nothing is sent, and the record leaves the attention queue until it needs a person again.',
};

/** @type {readonly [RecordActionName, string][]} */
const ACTIONS = [
  ['retry', 'Retry'],
  ['reverse', 'Reverse'],
  ['resolve', 'Resolve…'],
  ['close', 'Close'],
  ['acknowledge', 'Acknowledge'],
  ['ask', 'Ask the service…'],
];

/**
 * What the loyalty history shows, in words (`reading` of the evidence).
 * @type {Readonly<Record<EvidenceAnswer['reading'], string>>}
 */
const READINGS = {
  accrued: 'The history shows the accrual',
  not_accrued: 'The history shows no accrual',
  reversed: 'The history shows the reversal',
  not_reversed: 'The history shows no reversal',
  ambiguous: 'Ambiguous: more than one operation could be it',
  unknown: 'Unknown: the history cannot tell',
};

/**
 * How a record came to be (`origin.via`).
 * @type {Readonly<Record<OriginVia, string>>}
 */
const ORIGINS = {
  pos: 'a direct post from the POS',
  webhook: 'a webhook delivery from the POS',
  backfill: 'backfill: read back from the POS\u2019s API (its webhook never arrived)',
  replay: 'a replay of a dead letter',
  remainder: 'the remainder of a partial refund',
  operator: 'an operator',
  register: 'the register, while the sale was open (Toast\u2019s loyalty integration)',
};

/**
 * The record's page. The API masks the customer's phone number and email (in the customer and in
 * every attempt) unless asked for them, which it records in the audit log: the page asks only when
 * the operator presses the button, for this showing of the page only (a reload masks them again).
 *
 * @param {ViewContext} context
 * @param {string} merchantId
 * @param {string} transactionId
 */
export function recordView(context, merchantId, transactionId) {
  return showRecord(context, merchantId, transactionId, false);
}

/**
 * @param {ViewContext} context
 * @param {string} merchantId
 * @param {string} transactionId
 * @param {boolean} unmask
 */
async function showRecord(context, merchantId, transactionId, unmask) {
  const { section, announce, refresh } = context;
  replace(section, h('h1', {}, `Record ${transactionId}`), h('p', { class: 'loading' }, 'Loading…'));
  /** @type {RecordDetail} */
  let record;
  try {
    record = /** @type {RecordDetail} */ (await api(`/v1/admin/transactions/${encodeURIComponent(transactionId)}`, { query: { merchantId, unmask: unmask ? 'true' : undefined } }));
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    replace(
      section,
      h('h1', {}, 'No such record'),
      h('p', { class: 'problem', role: 'alert' }, `The ledger has no record ${transactionId} of merchant ${merchantId}. ${describeError(error)}`),
      h('p', {}, 'An order the POS has and the ledger does not (its webhook never arrived) is recorded by a backfill: ', h('a', { href: `#/backfill?${new URLSearchParams({ merchantId })}` }, 'Start a backfill'), '.'),
    );
    return;
  }
  if (!section.isConnected) return;
  const check = record.check;
  const outcome = h('div', { class: 'action-result' });
  const unmaskButton = record.masked
    ? h(
        'p',
        {},
        h('button', { type: 'button', class: 'secondary', 'aria-describedby': 'unmask-hint', onclick: () => showRecord(context, merchantId, transactionId, true).catch((error) => section.append(h('p', { class: 'problem', role: 'alert' }, describeError(error)))) }, 'Show phone numbers and emails'),
        h('span', { class: 'hint', id: 'unmask-hint' }, ' Recorded in the audit log with your name.'),
      )
    : null;
  // What the loyalty history shows for a call in doubt: read now, while the page is shown.
  const evidence = needsEvidence(record) ? readEvidence(record) : undefined;

  const done = lastDone?.key === `${record.merchantId}/${record.transactionId}` ? lastDone : undefined;
  lastDone = undefined;

  replace(
    section,
    h('h1', {}, `Record ${record.transactionId}`),
    done ? doneNote(done.text, record, context) : null,
    leadSection(record),
    facts([
      ['Status', statusBadge(record.status)],
      ['Merchant', record.merchantId],
      ['POS', record.pos],
      ['POS order id', record.orderId],
      ['Amount', record.amountText],
      ['Created', time(record.createdAt)],
      ['Updated', time(record.updatedAt)],
      ['Next attempt', record.nextAttemptAt && record.lead?.bridge.acts ? when(record.nextAttemptAt) : undefined],
      ['Call in flight', record.inFlight ? [`${record.inFlight.operation} since `, time(record.inFlight.startedAt), ` on ${record.inFlight.owner}`] : undefined],
      ['Accrual', describeSide(record.accrual)],
      ['Reversal', record.reversal && record.reversal.state !== 'none' ? describeSide(record.reversal) : undefined],
      ['Refund ids', record.reversal?.refundIds?.length ? record.reversal.refundIds.join(', ') : undefined],
      ['Parent record', record.parentTransactionId ? recordLink(record.merchantId, record.parentTransactionId) : undefined],
      ['Remainder record', record.remainderTransactionId ? recordLink(record.merchantId, record.remainderTransactionId) : undefined],
      ['Partial refund', record.partialRefund ? `${record.partialRefund.refundId}: ${record.moneyText?.partialRefunded ?? ''} refunded; the rest is accrued as ${record.partialRefund.remainderTransactionId}` : undefined],
      ['Closed', record.closed ? [time(record.closed.at), ` by ${record.closed.actor}: ${record.closed.reason}`] : undefined],
      ['Acknowledged', record.acknowledged ? [time(record.acknowledged.at), ` by ${record.acknowledged.actor}: ${record.acknowledged.reason}`] : undefined],
      ['Customer', customer(record.customer)],
    ]),
    unmaskButton,
    evidence ? evidence.section : null,
    actionsSection(record, outcome, { announce, refresh, evidence }),
    outcome,
    originSection(record, section),
    checkSection(record),
    resultsSection(record),
    attemptsSection(record),
    historySection(record),
    changedRepeatsSection(record),
  );
}

/**
 * What this page last did to a record, shown once on its next rendering with the next item of the
 * queue: after acting, the operator goes on without going back to the queue.
 * @type {{ key: string, text: string } | undefined}
 */
let lastDone;

/**
 * What the page leads with (`lead` of the detail): why the record needs a person, whether the
 * bridge will move it by itself and when, and what each action allowed now would do.
 * @param {RecordDetail} record
 * @returns {HTMLElement}
 */
function leadSection(record) {
  const needs = record.lead?.needsPerson ?? [];
  const bridge = record.lead?.bridge;
  const allowed = ACTIONS.filter(([name]) => ruleOf(record.actions, name).allowed);
  return h(
    'section',
    { class: `lead ${needs.length ? 'lead-person' : 'lead-none'}`, 'aria-labelledby': 'lead-heading' },
    h('h2', { id: 'lead-heading' }, needs.length ? 'Why it needs a person' : 'Nothing here needs a person'),
    needs.length ? h('ul', {}, needs.map((n) => h('li', {}, h('strong', {}, kindLabel(n.kind)), `, for ${age(n.since)}: `, prose(n.why)))) : null,
    bridge
      ? h('p', { class: 'bridge-next' }, h('strong', {}, bridge.acts ? 'The bridge acts by itself: ' : 'The bridge will not act by itself: '), prose(bridge.what), bridge.at ? [', ', when(bridge.at)] : null, '.')
      : null,
    allowed.length
      ? [h('h3', {}, 'What each action would do'), h('ul', { class: 'effects' }, allowed.map(([name, label]) => h('li', {}, h('strong', {}, label.replace('…', '')), ': ', ACTION_EFFECTS[name])))]
      : h('p', {}, 'No action is open on it now (see Actions below for why).'),
  );
}

/**
 * What was just done, and the queue's next item to go on with (the oldest other one, as the queue orders them).
 * @param {string} text
 * @param {RecordDetail} record
 * @param {ViewContext} context
 * @returns {HTMLElement}
 */
function doneNote(text, record, context) {
  const next = h('span', { class: 'next-item' }, ' Looking for the next item…');
  const merchantId = context.principal.scope === 'merchant' ? context.principal.merchantId : undefined;
  api('/v1/admin/attention', { query: { merchantId, limit: '10' } }).then(
    (answer) => {
      const items = /** @type {AttentionAnswer} */ (answer).items ?? [];
      const item = items.find((i) => !(i.transactionId === record.transactionId && i.merchantId === record.merchantId));
      if (!item) replace(next, ' Nothing else needs a person.');
      else if (item.deadLetterId) replace(next, ' Next item: ', h('a', { href: deadLetterHref(item.deadLetterId) }, `dead letter ${item.deadLetterId}`), ` (${kindLabel(item.kind)}).`);
      else replace(next, ' Next item: ', h('a', { href: recordHref(item.merchantId, item.transactionId ?? '') }, item.transactionId ?? ''), ` (${kindLabel(item.kind)}, merchant ${item.merchantId}).`);
    },
    () => replace(next, ' ', h('a', { href: '#/attention' }, 'Back to the queue'), '.'),
  );
  return h('p', { class: 'done', role: 'status' }, text, next);
}

/**
 * @param {Side | undefined} side
 * @returns {Child[] | undefined}
 */
function describeSide(side) {
  if (!side) return undefined;
  /** @type {Child[]} */
  const parts = [side.state];
  if (side.inDoubtSince) parts.push('; in doubt since ', time(side.inDoubtSince));
  if ('settledBy' in side && side.settledBy) parts.push(`; settled by ${side.settledBy}`);
  if (side.operationIds?.length) parts.push(`; operations ${side.operationIds.join(', ')}`);
  return parts;
}

/**
 * The customer as the API gives it: phone and email withheld and the card serial cut to its end,
 * unless the operator asked for them (the bridge masks; the page shows what it was given).
 * @param {RecordDetail['customer']} c
 * @returns {string | undefined}
 */
function customer(c) {
  if (!c) return undefined;
  const parts = [c.phone && `phone ${c.phone}`, c.email && `email ${c.email}`, c.serialNumber && `card ${c.serialNumber}`];
  return parts.filter(Boolean).join(', ') || undefined;
}

/**
 * A call in doubt, or an outcome a person may settle: where the loyalty history is the evidence.
 * @param {RecordDetail} record
 */
function needsEvidence(record) {
  return record.accrual?.state === 'in_doubt' || record.reversal?.state === 'in_doubt' || ruleOf(record.actions, 'resolve').allowed;
}

/**
 * The evidence section, filled once the API has read the loyalty history
 * (`GET …/{id}/evidence`, which changes nothing). `answer` settles to the evidence, or undefined.
 *
 * @param {RecordDetail} record
 * @returns {Evidence}
 */
function readEvidence(record) {
  const body = h('div', { class: 'evidence-body' }, h('p', { class: 'loading' }, 'Reading the loyalty service\u2019s operations history…'));
  const section = h(
    'section',
    { class: 'evidence', 'aria-labelledby': 'evidence-heading' },
    h('h2', { id: 'evidence-heading' }, 'Evidence from the loyalty history'),
    h('p', { class: 'hint' }, 'What the loyalty service\u2019s operations history shows around this record\u2019s uncertain call, read now. Reading it changes nothing.'),
    body,
  );
  const answer = api(`/v1/admin/transactions/${encodeURIComponent(record.transactionId)}/evidence`, { query: { merchantId: record.merchantId } }).then(
    (answer) => {
      const evidence = /** @type {EvidenceAnswer} */ (answer);
      replace(body, evidenceView(evidence, record));
      return evidence;
    },
    (error) => {
      const missing = error instanceof ApiError && error.status === 404 && /^no route/i.test(error.message);
      replace(body, h('p', { class: 'problem' }, missing ? 'This bridge does not read the loyalty history for a record yet.' : `The history could not be read: ${describeError(error)}`));
      return undefined;
    },
  );
  return { section, answer };
}

/**
 * @param {EvidenceAnswer} evidence
 * @param {RecordDetail} record
 * @returns {Child[]}
 */
function evidenceView(evidence, record) {
  const operations = evidence.operations ?? [];
  const cards = evidence.cards ?? [];
  const shape = evidence.reversalShape;
  return [
    h(
      'p',
      { class: `reading reading-${evidence.reading}` },
      h('strong', {}, evidence.question === 'none' ? 'Nothing about this record is uncertain now.' : `${READINGS[evidence.reading] ?? evidence.reading}.`),
      ' ',
      prose(evidence.why),
    ),
    facts([
      ['Uncertain call', evidence.question === 'reversal' ? 'the reversal' : evidence.question === 'accrual' ? 'the accrual' : 'none (the operations around its last call)'],
      ['History read', evidence.window ? ['from ', time(evidence.window.from), ' to ', time(evidence.window.to)] : undefined],
      ['Cards', cards.length ? cards.map((c) => `${c.serialNumber}${c.balance === undefined || c.balance === null ? '' : ` (balance ${c.balance})`}`).join(', ') : 'none named'],
      [
        'A reversal looks like',
        shape ? [`event ${shape.eventId}, ${shape.sign < 0 ? 'a negative' : 'a positive'} sum on the same card (learned from `, recordLink(record.merchantId, shape.learnedFrom), ' at ', time(shape.at), ')'] : evidence.question === 'reversal' ? 'not known yet: no reversal this loyalty service confirmed has been read back' : undefined,
      ],
    ]),
    rivalsSaid(evidence, record),
    operations.length
      ? table(
          `Operations on its cards in that time (${count(operations.filter((o) => o.candidate).length, 'candidate')})`,
          ['Operation', 'At', 'Card', 'What it is', 'Purchase', 'Points', 'Balance', 'Claimed by', 'Could be of', 'Candidate', 'Why'],
          operations.map((o) => [
            String(o.id),
            time(o.at),
            o.cardId ?? '',
            operationWhat(o),
            o.purchaseText ?? '',
            points(o.amount),
            balanceSum(o),
            o.claimedBy ? recordLink(record.merchantId, o.claimedBy) : '',
            (o.mayBeOf ?? []).flatMap((id, i) => [i ? ', ' : '', recordLink(record.merchantId, id)]),
            h('span', { class: `badge ${o.candidate ? 'candidate' : 'not-candidate'}` }, o.candidate ? 'candidate' : 'not a candidate'),
            prose(o.why),
          ]),
          { class: 'operations' },
        )
      : h('p', {}, noOperationsSaid(evidence)),
  ];
}

/** What each operation kind is called: a reversal shows as one, whatever the service named its event. */
const OPERATION_KINDS = { accrual: 'Accrual', reversal: 'Reversal', other: 'Other' };

/**
 * An operation as what it is, with the service's own event name and id beside it.
 * @param {EvidenceAnswer['operations'][number]} o
 * @returns {string}
 */
function operationWhat(o) {
  const kind = OPERATION_KINDS[o.kind] ?? o.kind ?? 'Operation';
  return `${kind} (the service's event ${o.eventName ? `\u201c${o.eventName}\u201d, ` : ''}${o.eventId})`;
}

/**
 * The card's balance with the arithmetic behind it, as the API gives it: `21 + 13 = 34`.
 * @param {EvidenceAnswer['operations'][number]} o
 * @returns {string}
 */
function balanceSum(o) {
  if (typeof o.balanceBefore !== 'number' || typeof o.amount !== 'number') return points(o.balance);
  return `${points(o.balanceBefore)} ${o.amount < 0 ? '\u2212' : '+'} ${points(Math.abs(o.amount))} = ${points(o.balance)}`;
}

/**
 * The rivals of an ambiguity, named: each other record in doubt that could own this record's
 * candidates, and which. Nothing where none stands.
 * @param {EvidenceAnswer} evidence
 * @param {RecordDetail} record
 * @returns {HTMLElement | null}
 */
function rivalsSaid(evidence, record) {
  const rivals = evidence.rivals ?? [];
  if (!rivals.length) return null;
  const mine = (evidence.operations ?? []).filter((o) => o.candidate).map((o) => String(o.id));
  return h(
    'div',
    { class: 'rivals' },
    h('h3', {}, `Rival records (${rivals.length})`),
    h('p', {}, `This record could own ${mine.length ? `operation ${mine.join(', ')}` : 'no operation shown'}. So could:`),
    h(
      'ul',
      {},
      rivals.map((r) => h('li', {}, recordLink(record.merchantId, r.transactionId), r.operationIds.length ? `: operation ${r.operationIds.join(', ')}` : ': named as its rival by the count (no operation of this record\u2019s window)')),
    ),
    h('p', { class: 'hint' }, 'Fewer operations than records that could own them: each one a record claims is no longer the others\u2019. Settle one only when the loyalty service shows which it is, or ask the service.'),
  );
}

/**
 * What an empty list of operations means: none on the cards in that time only when the history was
 * read. Unread, it says nothing about whether the call happened, and a person must not take it for proof.
 * @param {EvidenceAnswer} evidence
 * @returns {string}
 */
function noOperationsSaid(evidence) {
  switch (evidence.history) {
    case 'read':
      return 'No operation on its cards in that time.';
    case 'unreadable':
      return 'The loyalty history could not be read, so this shows nothing about whether the call happened: do not decide from it. Reload the page to read it again.';
    case 'not_configured':
      return 'The loyalty history cannot be read without the merchant\u2019s API key, so this shows nothing about whether the call happened: check the loyalty service itself before deciding.';
    default:
      // A bridge newer than this page: whatever it is, not a history read.
      return 'The loyalty history was not read, so this shows nothing about whether the call happened: do not decide from it.';
  }
}

/**
 * Points (an operation's amount, a balance) as a number, negative with a minus sign as money shows one.
 * @param {number | undefined} n
 * @returns {string}
 */
function points(n) {
  return typeof n === 'number' && Number.isFinite(n) ? String(n).replace(/^-/, '\u2212') : '';
}

/** At most this many operations are listed in the resolve dialog; the page's evidence lists them all. */
const DIALOG_OPERATIONS = 6;

/**
 * What the resolve dialog shows first: the reading and the operations it read (candidates first), or that the history is still being read.
 * @param {Evidence | undefined} evidence
 * @param {RecordDetail} record
 * @returns {Promise<Child[] | null>}
 */
async function evidenceSummary(evidence, record) {
  if (!evidence) return null;
  /** @type {Promise<'pending'>} */
  const stillReading = new Promise((resolve) => setTimeout(() => resolve('pending'), 3000));
  const read = await Promise.race([evidence.answer, stillReading]);
  if (read === 'pending') return [h('h3', {}, 'What the loyalty history shows'), h('p', {}, 'Still being read: see the page\u2019s evidence once it is there.')];
  if (!read) return [h('h3', {}, 'What the loyalty history shows'), h('p', {}, 'It could not be read: see the page\u2019s evidence section for why.')];
  const operations = [...(read.operations ?? [])].sort((a, b) => Number(b.candidate) - Number(a.candidate));
  const shown = operations.slice(0, DIALOG_OPERATIONS);
  return [
    h('h3', {}, 'What the loyalty history shows'),
    h('p', {}, h('strong', {}, `${READINGS[read.reading] ?? read.reading}.`), ' ', prose(read.why)),
    shown.length
      ? h(
          'ul',
          { class: 'candidates' },
          shown.map((o) =>
            h(
              'li',
              {},
              `Operation ${o.id} on card ${o.cardId}: `,
              o.purchaseText || `${points(o.amount)} points`,
              ' at ',
              time(o.at),
              o.claimedBy ? `, claimed by ${o.claimedBy}` : '',
              o.candidate ? ' \u2014 a candidate' : [' \u2014 not a candidate: ', prose(o.why)],
            ),
          ),
        )
      : h('p', {}, noOperationsSaid(read)),
    operations.length > shown.length ? h('p', {}, `And ${count(operations.length - shown.length, 'more operation')}: see the page\u2019s evidence.`) : null,
  ];
}

/**
 * The actions as the API rules them now (`actions` of the detail): each allowed one a button, the
 * others disabled with the API's reason. One the API gave no rule for is disabled too, saying so.
 *
 * @param {RecordDetail} record
 * @param {HTMLElement} outcome
 * @param {{ announce: ViewContext['announce'], refresh: ViewContext['refresh'], evidence: Evidence | undefined }} options
 */
function actionsSection(record, outcome, { announce, refresh, evidence }) {
  // Acknowledging is offered where there is something to acknowledge (a refusal, changed repeats),
  // or was (so its page says by whom); elsewhere it would only ever be disabled.
  // Asking the service is offered only where it can be done (an ambiguous accrual past the grace period).
  const offered = ACTIONS.filter(([name]) => (name !== 'acknowledge' || record.changedRepeats?.count || record.acknowledged || ruleOf(record.actions, name).allowed) && (name !== 'ask' || ruleOf(record.actions, name).allowed));
  const buttons = offered.map(([name, label]) => {
    const rule = ruleOf(record.actions, name);
    return actionItem({ id: name, label, allowed: rule.allowed, why: prose(rule.why ?? 'the bridge does not allow it in this state'), onclick: () => act(name, label.replace('…', ''), rule) });
  });

  /**
   * @param {RecordActionName} name
   * @param {string} label
   * @param {ActionRule} rule
   */
  async function act(name, label, rule) {
    const outcomes = name === 'resolve' ? resolveOutcomes().filter((o) => !rule.outcomes || rule.outcomes.includes(o.value)) : undefined;
    const confirmed = await confirmAction({
      title: `${label} ${record.transactionId}`,
      intro: name === 'resolve' ? await evidenceSummary(evidence, record) : undefined,
      choices: outcomes,
      effect: (choice) => [
        h('p', {}, `Now: ${statusLabel(record.status)}.`),
        h('p', {}, ACTION_EFFECTS[name]),
        name === 'resolve' ? h('p', {}, resolveOutcomes().find((o) => o.value === choice)?.effect ?? 'Choose the outcome to see what it does.') : null,
      ],
      confirmLabel: label,
    });
    if (!confirmed) return;
    const body = { reason: confirmed.reason, ...(name === 'resolve' ? { outcome: confirmed.choice } : {}) };
    try {
      const answer = /** @type {Partial<RecordDetail> | undefined} */ (await api(`/v1/admin/transactions/${encodeURIComponent(record.transactionId)}/${name}`, { method: 'POST', body, query: { merchantId: record.merchantId } }));
      const text = `${label} ${record.transactionId}: now ${statusLabel(answer?.status ?? 'unknown')}.`;
      announce(text);
      lastDone = { key: `${record.merchantId}/${record.transactionId}`, text };
      await refresh();
    } catch (error) {
      outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, `${label} was refused: ${describeError(error)}`));
    }
  }

  return h('section', { 'aria-labelledby': 'actions-heading' }, h('h2', { id: 'actions-heading' }, 'Actions'), h('ul', { class: 'actions' }, buttons));
}

/**
 * Where the record came from (`origin`): how it was created, when, and links to what created it:
 * its dead letter, its webhook event, the POS's payload as it arrived (masked; shown in clear on
 * request, which the API records in the audit log).
 *
 * @param {RecordDetail} record
 * @param {HTMLElement} page
 */
function originSection(record, page) {
  const origin = record.origin;
  const heading = h('h2', { id: 'origin-heading' }, 'Where it came from');
  if (!origin) return h('section', { 'aria-labelledby': 'origin-heading' }, heading, h('p', {}, 'Not recorded: the bridge kept no origin for this record (it was created before the bridge kept them).'));
  const payload = h('div', { class: 'payload' });
  if (origin.payload) {
    replace(payload, h('p', { class: 'loading' }, 'Loading what the POS sent…'));
    const url = `/v1/admin/transactions/${encodeURIComponent(record.transactionId)}/payload`;
    const problem = (/** @type {unknown} */ error) => payload.append(h('p', { class: 'problem', role: 'alert' }, describeError(error)));
    const read = async (/** @type {boolean} */ unmask) => /** @type {KeptPayload} */ (await api(url, { query: { merchantId: record.merchantId, unmask: unmask ? 'true' : undefined } }));
    read(false).then(
      (shown) => {
        if (!page.isConnected) return;
        // Folded: the raw payload is what an operator reads last, and it is most of the page's length.
        replace(
          payload,
          h(
            'details',
            { class: 'payload-fold' },
            h('summary', {}, 'What the POS sent'),
            h('p', {}, `Received `, time(shown.receivedAt), shown.pos ? ` from ${shown.pos}` : '', '.'),
            deliveryBox(shown, () => read(true), { id: 'payload', buttonLabel: 'Show the payload unmasked', headersCaption: 'Headers the bridge kept', onError: problem }),
          ),
        );
      },
      (error) => {
        if (!page.isConnected) return;
        replace(payload, error instanceof ApiError && error.status === 404 ? h('p', {}, 'The payload was not kept.') : h('p', { class: 'problem' }, `The payload could not be read: ${describeError(error)}`));
      },
    );
  } else {
    replace(payload, h('p', {}, 'The bridge kept no payload for this record.'));
  }
  return h(
    'section',
    { 'aria-labelledby': 'origin-heading' },
    heading,
    facts([
      ['Created by', ORIGINS[origin.via] ?? origin.via],
      ['Received', time(origin.receivedAt)],
      ['Request id', origin.requestId],
      ['Webhook event', origin.webhookKey],
      ['Dead letter', origin.deadLetterId ? h('a', { href: deadLetterHref(origin.deadLetterId) }, `dead letter ${origin.deadLetterId}`) : undefined],
    ]),
    payload,
  );
}

/**
 * The Check as sent, its amounts as the API writes them (`amountText`, `moneyText`): the page does no arithmetic on money.
 * @param {RecordDetail} record
 */
function checkSection(record) {
  const check = record.check;
  if (!check) return h('section', { 'aria-labelledby': 'check-heading' }, h('h2', { id: 'check-heading' }, 'Check'), h('p', {}, 'No Check: this record was created by a refund of an order the bridge never saw.'));
  const shown = record.moneyText;
  return h(
    'section',
    { 'aria-labelledby': 'check-heading' },
    h('h2', { id: 'check-heading' }, 'Check'),
    facts([
      ['Amount', record.amountText],
      ['Tax', shown?.tax],
      ['Discount', shown?.discount],
      ['Tip', shown?.tip],
      ['Service charge', shown?.service],
      ['Opened', check.checkOpenedAt ? time(check.checkOpenedAt) : undefined],
      ['Closed', check.checkClosedAt ? time(check.checkClosedAt) : undefined],
    ]),
    table(
      'Selections',
      ['Item', 'Group', 'Quantity', 'Unit price', 'Total'],
      (check.selections ?? []).map((s, i) => [s.displayName ?? s.id ?? '', s.groupId ?? '', s.quantity === undefined || s.quantity === null ? '' : String(s.quantity), shown?.selections[i]?.price ?? '', shown?.selections[i]?.totalPrice ?? '']),
    ),
  );
}

/** @param {RecordDetail} record */
function resultsSection(record) {
  /** @type {(readonly ['accrual' | 'reversal', RecordDetail['results'][number]])[]} */
  const results = [...(record.results ?? []).map((r) => /** @type {const} */ (['accrual', r])), ...(record.reversal?.results ?? []).map((r) => /** @type {const} */ (['reversal', r]))];
  const errors = record.errors ?? [];
  if (!results.length && !errors.length) return null;
  return h(
    'section',
    { 'aria-labelledby': 'card-results-heading' },
    h('h2', { id: 'card-results-heading' }, 'Results per card'),
    results.length
      ? table(
          'What the loyalty service answered for each card',
          ['Call', 'Card', 'Succeeded', 'Accrued', 'Operation', 'Error', 'Reversed at'],
          results.map(([call, r]) => [
            call,
            r.serialNumber ?? '',
            r.isSuccess ? 'yes' : 'no',
            r.accruedValue === undefined || r.accruedValue === null ? '' : String(r.accruedValue),
            r.operationId === undefined || r.operationId === null ? '' : String(r.operationId),
            r.errorMessage ? prose(r.errorMessage) : '',
            r.reversedAt ? time(r.reversedAt) : '',
          ]),
        )
      : null,
    errors.length ? [h('h3', {}, 'Errors'), h('ul', {}, errors.map((e) => h('li', {}, prose(e))))] : null,
  );
}

/** @param {RecordDetail} record */
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

/**
 * @param {RecordDetail} record
 */
function historySection(record) {
  return h(
    'section',
    { 'aria-labelledby': 'history-heading' },
    h('h2', { id: 'history-heading' }, 'History'),
    h(
      'ol',
      { class: 'timeline' },
      collapseRepeats(record.history ?? []).map(({ event, repeats, lastAt }) =>
        h(
          'li',
          {},
          time(event.at),
          repeats ? [' to ', time(lastAt)] : null,
          ' ',
          event.from || event.to ? h('span', { class: 'transition' }, `${event.from ? statusLabel(event.from) : '—'} → ${event.to ? statusLabel(event.to) : '—'}`) : null,
          h(
            'p',
            {},
            prose(event.event),
            event.actor ? ` — by ${event.actor}` : '',
            event.detail && !String(event.event ?? '').includes(event.detail) ? [' (', prose(event.detail), ')'] : '',
            repeats ? h('strong', { class: 'repeats' }, ` (${count(repeats + 1, 'time')} in a row)`) : null,
          ),
        ),
      ),
    ),
  );
}

/**
 * The history with each run of the same line (a pass looking the record up again, and again)
 * shown once with how many times and until when: the same event, move, actor and detail.
 * @param {RecordDetail['history']} history
 * @returns {{ event: RecordDetail['history'][number], repeats: number, lastAt: string }[]}
 */
export function collapseRepeats(history) {
  /** @type {{ event: RecordDetail['history'][number], repeats: number, lastAt: string }[]} */
  const runs = [];
  for (const event of history) {
    const last = runs.at(-1);
    const same = last && last.event.event === event.event && last.event.from === event.from && last.event.to === event.to && last.event.actor === event.actor && last.event.detail === event.detail;
    if (last && same) {
      last.repeats += 1;
      last.lastAt = event.at;
    } else runs.push({ event, repeats: 0, lastAt: event.at });
  }
  return runs;
}

/**
 * @param {RecordDetail} record
 */
function changedRepeatsSection(record) {
  const changed = record.changedRepeats;
  if (!changed?.count) return null;
  const deliveries = [...changed.first, ...changed.latest];
  const amounts = [...(record.moneyText?.changedRepeats?.first ?? []), ...(record.moneyText?.changedRepeats?.latest ?? [])];
  return h(
    'section',
    { 'aria-labelledby': 'repeats-heading' },
    h('h2', { id: 'repeats-heading' }, `Delivered again with another amount (${count(changed.count, 'time')}${record.acknowledged ? `, acknowledged by ${record.acknowledged.actor}` : ''})`),
    table('Deliveries kept (the first and the latest)', ['At', 'Amount'], deliveries.map((d, i) => [time(d.at), amounts[i] ?? ''])),
  );
}
