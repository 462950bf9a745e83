/** Dead letters: authentic POS deliveries the bridge could not carry out; replay one, or dismiss it with a reason. */
import { api, ApiError, describeError } from '../api.js';
import { confirmAction } from '../confirm.js';
import { count, deadLetterHref, facts, h, pager, POS_NAMES, replace, table, time } from '../dom.js';

const PAGE_SIZE = 50;

function stateOf(letter) {
  if (letter.dismissed) return 'dismissed';
  if (letter.resolvedAt) return 'resolved';
  return 'open';
}

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
        const data = new FormData(event.target);
        navigate('/dead-letters', { show: data.get('show'), pos: data.get('pos') });
      },
    },
    h('label', { for: 'dl-show' }, 'Show'),
    h(
      'select',
      { id: 'dl-show', name: 'show' },
      [
        ['open', 'Open'],
        ['closed', 'Resolved or dismissed'],
        ['all', 'All'],
      ].map(([value, label]) => h('option', { value, selected: value === show ? true : undefined }, label)),
    ),
    h('label', { for: 'dl-pos' }, 'POS'),
    h('select', { id: 'dl-pos', name: 'pos' }, h('option', { value: '' }, 'any POS'), POS_NAMES.filter((p) => p !== 'generic').map((p) => h('option', { value: p, selected: p === pos ? true : undefined }, p))),
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
  );
  replace(section, h('h1', {}, 'Dead letters'), form, h('p', { class: 'loading' }, 'Loading…'));
  const list = await api('/v1/admin/dead-letters', { query: { open: show === 'all' ? undefined : String(show === 'open'), pos, page, limit: PAGE_SIZE } });
  const pages = Math.max(1, Math.ceil(list.total / PAGE_SIZE));
  const pageHref = (n) => `#/dead-letters?${new URLSearchParams({ show, pos, page: String(n) })}`;
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
            letter.reason,
          ]),
        )
      : null,
    pager(page, pages, pageHref),
  );
}

export async function deadLetterView({ section, announce, refresh }, id) {
  replace(section, h('h1', {}, `Dead letter ${id}`), h('p', { class: 'loading' }, 'Loading…'));
  const letter = await api(`/v1/admin/dead-letters/${encodeURIComponent(id)}`);
  const state = stateOf(letter);
  const outcome = h('div', { class: 'action-result' });
  // What the API allows now, and why not (a letter resolved, dismissed, or being run).
  const ruleOf = (name) => letter.actions?.[name] ?? { allowed: true };

  async function act(name, label, effect) {
    const confirmed = await confirmAction({ title: `${label} dead letter ${letter.id}`, effect: h('p', {}, effect), confirmLabel: label });
    if (!confirmed) return;
    try {
      await api(`/v1/admin/dead-letters/${encodeURIComponent(letter.id)}/${name}`, { method: 'POST', body: { reason: confirmed.reason } });
      announce(`${label} dead letter ${letter.id}: done.`);
      await refresh();
    } catch (error) {
      // A replay that failed again is kept among the letter's runs: show them, with why.
      if (error instanceof ApiError && error.code === 'replay_failed') {
        announce(`Replay of dead letter ${letter.id} failed again: ${error.message}`);
        return refresh();
      }
      outcome.replaceChildren(h('p', { class: 'problem', role: 'alert' }, `${label} was refused: ${describeError(error)}`));
    }
  }

  const button = (name, label, effect) => {
    const rule = ruleOf(name);
    return h(
      'li',
      {},
      h('button', { type: 'button', class: 'action', disabled: !rule.allowed, 'aria-describedby': rule.allowed ? undefined : `why-${name}`, onclick: () => act(name, label, effect) }, label),
      rule.allowed ? null : h('span', { class: 'why', id: `why-${name}` }, `Not available: ${rule.why ?? 'the bridge does not allow it now'}`),
    );
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
      ['Reason', letter.reason],
      ['Resolved', letter.resolvedAt ? time(letter.resolvedAt) : undefined],
      ['Dismissed', letter.dismissed ? [time(letter.dismissed.at), ` by ${letter.dismissed.actor}: ${letter.dismissed.reason}`] : undefined],
      ['Next run by the bridge', letter.retry?.nextAt ? time(letter.retry.nextAt) : undefined],
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
    letter.issues?.length ? h('section', {}, h('h2', {}, 'Fields that could not be translated'), h('ul', {}, letter.issues.map((i) => h('li', {}, `${i.field}: ${i.message}`)))) : null,
    h(
      'section',
      { 'aria-labelledby': 'runs-heading' },
      h('h2', { id: 'runs-heading' }, 'Runs'),
      letter.replays?.length ? table('Every run since it was kept, oldest first', ['At', 'By', 'Outcome'], letter.replays.map((r) => [time(r.at), r.by ?? '', r.outcome])) : h('p', {}, 'Not run again yet.'),
    ),
    h(
      'section',
      { 'aria-labelledby': 'body-heading' },
      h('h2', { id: 'body-heading' }, 'Delivery'),
      letter.headers ? table('Headers the bridge reads', ['Header', 'Value'], Object.entries(letter.headers).map(([k, v]) => [k, v])) : null,
      letter.body !== undefined ? body(letter) : null,
    ),
  );
}

/** The delivery's body, masked as the API gives it; a person may ask for it in clear, which the API records in the audit log. */
function body(letter) {
  const box = h('div', {});
  const show = (shown) => {
    const heading = h('h3', {}, `Body (${shown.bodyEncoding ?? 'utf8'}${shown.masked ? '; customers\u2019 phone numbers and emails masked' : ''})`);
    const text = shown.masked && shown.bodyEncoding === 'base64' ? 'Withheld while masked: a base64 body cannot be searched for contact details.' : prettyBody(shown);
    const unmask = shown.masked
      ? h(
          'p',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'aria-describedby': 'unmask-hint',
              onclick: async () => show(await api(`/v1/admin/dead-letters/${encodeURIComponent(letter.id)}`, { query: { unmask: 'true' } })),
            },
            'Show phone numbers and emails',
          ),
          h('span', { class: 'hint', id: 'unmask-hint' }, ' Recorded in the audit log with your name.'),
        )
      : null;
    replace(box, heading, unmask, h('pre', { class: 'json', tabindex: '0' }, text));
  };
  show(letter);
  return box;
}

function prettyBody(letter) {
  if (letter.bodyEncoding === 'base64') return letter.body;
  try {
    return JSON.stringify(JSON.parse(letter.body), null, 2);
  } catch {
    return letter.body;
  }
}
