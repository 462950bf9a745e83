// @ts-check
/** Dead letters: authentic POS deliveries the bridge could not carry out; replay one, or dismiss it with a reason. */
import { ruleOf } from '../actions.js';
import { api, ApiError, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { deliveryBox } from '../delivery.js';
import { actionItem, count, deadLetterHref, facts, h, pager, prose, recordLink, replace, table, time, when } from '../dom.js';
import { webhookPosNames } from '../vocabulary.js';
import { backfillHref } from './backfill.js';

/** @import { DeadLetter, DeadLetterList, ReplayAnswer, ViewContext } from '../types.js' */

const PAGE_SIZE = 50;

/**
 * The merchant of each record a replay run here created, from the replay's answer: a letter kept
 * for a shop no merchant had names no merchant, and its runs name their records by transactionId
 * only. Records created by a run not seen in this page are named, unlinked, when the letter names
 * no merchant.
 * @type {Map<string, string>}
 */
const merchantOfCreated = new Map();

/**
 * @param {Pick<DeadLetter, 'dismissed' | 'resolvedAt'>} letter
 * @returns {'dismissed' | 'resolved' | 'open'}
 */
function stateOf(letter) {
  if (letter.dismissed) return 'dismissed';
  if (letter.resolvedAt) return 'resolved';
  return 'open';
}

/** @param {ViewContext} context */
export async function deadLettersView({ section, params, navigate }) {
  const show = params.get('show') ?? 'open';
  const pos = params.get('pos') ?? '';
  const page = Math.max(1, Number(params.get('page')) || 1);
  const form = h(
    'form',
    {
      class: 'filters inline',
      'aria-label': 'Filter dead letters',
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        navigate('/dead-letters', { show: String(data.get('show') ?? ''), pos: String(data.get('pos') ?? '') });
      },
    },
    h('label', { for: 'dl-show' }, 'Show'),
    h(
      'select',
      { id: 'dl-show', name: 'show' },
      /** @type {[string, string][]} */ ([
        ['open', 'Open'],
        ['closed', 'Resolved or dismissed'],
        ['all', 'All'],
      ]).map(([value, label]) => h('option', { value, selected: value === show ? true : undefined }, label)),
    ),
    h('label', { for: 'dl-pos' }, 'POS'),
    h('select', { id: 'dl-pos', name: 'pos' }, h('option', { value: '' }, 'any POS'), webhookPosNames().map((p) => h('option', { value: p, selected: p === pos ? true : undefined }, p))),
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
  );
  replace(section, h('h1', {}, 'Dead letters'), form, h('p', { class: 'loading' }, 'Loading…'));
  const list = /** @type {DeadLetterList} */ (await api('/v1/admin/dead-letters', { query: { open: show === 'all' ? undefined : String(show === 'open'), pos, page, limit: PAGE_SIZE } }));
  const pages = Math.max(1, Math.ceil(list.total / PAGE_SIZE));
  const pageHref = (/** @type {number} */ n) => `#/dead-letters?${new URLSearchParams({ show, pos, page: String(n) })}`;
  replace(
    section,
    h('h1', {}, 'Dead letters'),
    form,
    h('p', { class: 'summary' }, `${count(list.total, 'dead letter')}.`),
    list.items.length
      ? table(
          'Dead letters, newest first',
          ['Dead letter', 'POS', 'Merchant', 'Received', 'Deliveries', 'State', 'Reason'],
          list.items.map((letter) => [
            h('a', { href: deadLetterHref(letter.id) }, letter.id),
            letter.pos,
            letter.merchantId ?? 'unknown',
            time(letter.receivedAt),
            String(letter.deliveries ?? 1),
            stateOf(letter),
            prose(letter.reason),
          ]),
        )
      : null,
    pager(page, pages, pageHref),
  );
}

/**
 * @param {ViewContext} context
 * @param {string} id
 */
export async function deadLetterView({ section, announce, refresh }, id) {
  replace(section, h('h1', {}, `Dead letter ${id}`), h('p', { class: 'loading' }, 'Loading…'));
  const letter = /** @type {DeadLetter} */ (await api(`/v1/admin/dead-letters/${encodeURIComponent(id)}`));
  const state = stateOf(letter);
  const outcome = h('div', { class: 'action-result' });

  /**
   * @param {'replay' | 'dismiss'} name
   * @param {string} label
   * @param {string} effect
   */
  async function act(name, label, effect) {
    const confirmed = await confirmAction({ title: `${label} dead letter ${letter.id}`, effect: h('p', {}, effect), confirmLabel: label });
    if (!confirmed) return;
    try {
      // A replay answers what each event came to; a dismissal, the letter.
      const answer = /** @type {Partial<ReplayAnswer> | undefined} */ (await api(`/v1/admin/dead-letters/${encodeURIComponent(letter.id)}/${name}`, { method: 'POST', body: { reason: confirmed.reason } }));
      // A webhook result names its merchant when it is not the default one.
      for (const result of answer?.results ?? []) if (result.transactionId) merchantOfCreated.set(result.transactionId, result.merchantId ?? 'default');
      announce(`${label} dead letter ${letter.id}: done.`);
      await refresh();
    } catch (error) {
      // A replay that failed again is kept among the letter's runs: show them, with why.
      if (error instanceof ApiError && error.code === 'replay_failed') {
        announce(`Replay of dead letter ${letter.id} failed again: ${error.message}`, 'problem');
        return refresh();
      }
      outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, `${label} was refused: ${describeError(error)}`));
    }
  }

  /**
   * @param {'replay' | 'dismiss'} name
   * @param {string} label
   * @param {string} effect
   */
  const button = (name, label, effect) => {
    // What the API allows now, and why not (a letter resolved, dismissed, or being run); an action it gave no rule for is not offered.
    const rule = ruleOf(letter.actions, name);
    return actionItem({ id: name, label, allowed: rule.allowed, why: rule.why ? prose(rule.why) : undefined, onclick: () => act(name, label, effect) });
  };

  replace(
    section,
    h('h1', {}, `Dead letter ${letter.id}`),
    facts([
      ['State', state],
      ['POS', letter.pos],
      ['Merchant', letter.merchantId ?? 'unknown'],
      ['Received', time(letter.receivedAt)],
      ['Last received', time(letter.lastReceivedAt)],
      ['Deliveries', String(letter.deliveries ?? 1)],
      ['Reason', prose(letter.reason)],
      ['Resolved', letter.resolvedAt ? time(letter.resolvedAt) : undefined],
      ['Dismissed', letter.dismissed ? [time(letter.dismissed.at), ` by ${letter.dismissed.actor}: ${letter.dismissed.reason}`] : undefined],
      ['Next run by the bridge', letter.retry?.nextAt ? when(letter.retry.nextAt) : undefined],
    ]),
    h(
      'section',
      { 'aria-labelledby': 'actions-heading' },
      h('h2', { id: 'actions-heading' }, 'Actions'),
      h(
        'ul',
        { class: 'actions' },
        button('replay', 'Replay', 'The bridge runs this delivery through again, as if the POS had just sent it (after a configuration fix, or once its order arrived). What each event comes to is recorded among its runs.'),
        button('dismiss', 'Dismiss', 'The dead letter is marked dismissed with your reason: kept, never deleted, never run again, and it leaves the attention queue. Nothing is sent.'),
      ),
    ),
    outcome,
    nextStep(letter),
    letter.issues?.length ? h('section', {}, h('h2', {}, 'Fields that could not be translated'), h('ul', {}, letter.issues.map((i) => h('li', {}, `${i.field}: ${i.message}`)))) : null,
    h(
      'section',
      { 'aria-labelledby': 'runs-heading' },
      h('h2', { id: 'runs-heading' }, 'Runs'),
      letter.replays?.length
        ? table(
            'Every run since it was kept, oldest first',
            ['At', 'By', 'Outcome', 'Records it created', 'Records it acted on'],
            letter.replays.map((r) => [
              time(r.at),
              r.by ?? '',
              prose(r.outcome),
              recordLinks(letter, r.created),
              recordLinks(letter, r.actedOn),
            ]),
          )
        : h('p', {}, 'Not run again yet.'),
    ),
    h(
      'section',
      { 'aria-labelledby': 'body-heading' },
      h('h2', { id: 'body-heading' }, 'Delivery'),
      letter.body !== undefined
        ? deliveryBox(letter, async () => /** @type {DeadLetter} */ (await api(`/v1/admin/dead-letters/${encodeURIComponent(letter.id)}`, { query: { unmask: 'true' } })), {
            id: 'letter',
            buttonLabel: 'Show phone numbers and emails',
            onError: (error) => outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, describeError(error))),
          })
        : null,
    ),
  );
}

/**
 * The records a run names (created, or acted on), each a link; nothing when it names none.
 * @param {DeadLetter} letter
 * @param {string[] | undefined} ids
 */
function recordLinks(letter, ids) {
  return ids?.length ? h('ul', { class: 'plain' }, ids.map((id) => h('li', {}, createdLink(letter, id)))) : '';
}

/**
 * A record a run created, linked to its page where its merchant is known.
 * @param {DeadLetter} letter
 * @param {string} transactionId
 */
function createdLink(letter, transactionId) {
  const merchantId = letter.merchantId ?? merchantOfCreated.get(transactionId);
  return merchantId ? recordLink(merchantId, transactionId) : [transactionId, h('span', { class: 'hint' }, ' (the letter names no merchant: find it by Search)')];
}

/** A letter whose refund came before its order ("no order … in the ledger"): the order is read back from the POS by a backfill, then the letter replayed. */
const ORDER_MISSING = /\bno order .* in the ledger\b/;

/** @param {DeadLetter} letter */
function nextStep(letter) {
  if (stateOf(letter) !== 'open' || !ORDER_MISSING.test(letter.reason ?? '') || !letter.merchantId) return null;
  // The order was changed at or before the refund came: a day before the letter arrived, which the operator may move earlier.
  const since = new Date(Date.parse(letter.receivedAt) - 86_400_000).toISOString();
  return h(
    'section',
    { 'aria-labelledby': 'next-heading' },
    h('h2', { id: 'next-heading' }, 'Next step: backfill its order'),
    h('p', {}, `The ledger has not got the order this delivery refers to: its webhook never arrived. A backfill of merchant ${letter.merchantId}'s ${letter.pos} account reads it back from the POS; then replay this letter.`),
    h('p', {}, h('a', { class: 'button-link', href: backfillHref({ merchantId: letter.merchantId, pos: letter.pos, since, deadLetterId: letter.id }) }, `Backfill ${letter.pos} for merchant ${letter.merchantId}…`)),
  );
}
