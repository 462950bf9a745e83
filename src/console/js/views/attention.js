// @ts-check
/** Everything that needs a person, oldest first: why, how long it has waited, and counts per kind and per merchant. */
import { api } from '../api.js';
import { age, deadLetterHref, h, prose, recordLink, replace, statusBadge, table, time } from '../dom.js';
import { merchantField, merchantList } from '../merchants.js';

/** @import { AttentionAnswer, AttentionKind, Child, Readiness, ViewContext } from '../types.js' */

/**
 * Every kind the queue names (AttentionItem's kinds, src/http/schemas.ts), in words: a kind the
 * bridge adds fails the console's type-check until it is named here.
 * @type {Readonly<Record<AttentionKind, string>>}
 */
const KIND_LABELS = {
  in_doubt: 'In doubt',
  failed: 'Failed',
  partially_accrued: 'Partially accrued',
  reverse_failed: 'Reverse failed',
  ambiguous: 'Ambiguous match',
  held: 'Held back',
  changed_repeats: 'Changed repeats',
  dead_letter: 'Open dead letter',
};

/** How the API counts open dead letters that belong to no merchant (src/core/attention-queue.ts). */
const NO_MERCHANT = '(none)';

/**
 * A kind in words; one the console does not know, as the API wrote it.
 * @param {string} kind
 * @returns {string}
 */
export function kindLabel(kind) {
  return /** @type {Readonly<Record<string, string | undefined>>} */ (KIND_LABELS)[kind] ?? kind;
}

/** How often the queue reads itself again while it is shown: "Waiting" keeps counting, new items come in. */
export const REFRESH_MS = 30_000;

/** @param {ViewContext} context */
export async function attentionView({ section, params, principal, navigate }) {
  const merchantId = principal.scope === 'merchant' ? principal.merchantId : (params.get('merchantId') ?? '');
  replace(section, h('h1', {}, 'Needs attention'), h('p', { class: 'loading' }, 'Loading the queue…'));
  const merchants = principal.scope === 'global' ? await merchantList(principal) : undefined;
  const merchantFilter =
    principal.scope === 'global'
      ? h(
          'form',
          {
            class: 'filters inline',
            'aria-label': 'Show the queue of one merchant',
            onsubmit: (event) => {
              event.preventDefault();
              navigate('/attention', { merchantId: String(new FormData(event.currentTarget).get('merchantId') ?? '').trim() });
            },
          },
          merchantField({ id: 'attention-merchant', merchants, value: merchantId }),
          h('button', { type: 'submit', class: 'secondary' }, 'Show'),
        )
      : null;
  const body = h('div', { class: 'queue-body' });
  const read = h('span', { class: 'refreshed', role: 'status' });
  const refreshButton = h('button', { type: 'button', class: 'secondary', onclick: () => fill().catch(shown) }, 'Refresh');
  /** @param {unknown} error */
  const shown = (error) => replace(read, h('span', { class: 'problem' }, `The queue could not be read again: ${error instanceof Error ? error.message : String(error)}`));

  // Reads the queue and shows it; the filter above stays as the operator left it.
  const fill = async () => {
    const queue = /** @type {AttentionAnswer} */ (await api('/v1/admin/attention', { query: { merchantId } }));
    const register = principal.scope === 'global' ? await registerProblem() : undefined;
    if (!section.isConnected) return;
    replace(body, ...queueParts(queue, { merchantId: merchantId ?? '', principal, register }));
    replace(read, 'Read ', time(new Date().toISOString()), `; read again every ${REFRESH_MS / 1000} s while shown.`);
  };
  await fill();
  replace(section, h('h1', {}, 'Needs attention'), merchantFilter, body, h('p', {}, refreshButton, ' ', read));
  const timer = setInterval(() => {
    // Once the operator has moved on, the section is gone and the timer with it; while a dialog is open, the page stays still.
    if (!section.isConnected) return clearInterval(timer);
    if (document.querySelector('dialog[open]')) return;
    fill().catch(shown);
  }, REFRESH_MS);
}

/**
 * The queue's summary, counts and items.
 * @param {AttentionAnswer} queue
 * @param {{ merchantId: string, principal: ViewContext['principal'], register: string | undefined }} options
 * @returns {Child[]}
 */
function queueParts(queue, { merchantId, principal, register }) {
  const total = queue.total ?? Object.values(queue.counts ?? {}).reduce((sum, n) => sum + n, 0);
  const summary =
    total === 0
      ? h('p', { class: 'summary' }, `Nothing needs a person${merchantId ? ` for merchant ${merchantId}` : ''}.`)
      : h(
          'p',
          { class: 'summary' },
          `${total} ${total === 1 ? 'item needs' : 'items need'} a person${merchantId ? ` for merchant ${merchantId}` : ''}.`,
          queue.oldestSince ? [' The oldest has waited ', h('strong', {}, age(queue.oldestSince)), ' (since ', time(queue.oldestSince), ').'] : null,
        );

  const counts = Object.entries(queue.counts ?? {}).filter(([, n]) => n > 0);
  const perMerchant = Object.entries(queue.perMerchant ?? {}).sort(([, a], [, b]) => b - a);
  const items = queue.items ?? [];
  return [
    register ? h('p', { class: 'problem', role: 'status' }, h('strong', {}, 'Registers: '), `merchants with ${register}`) : null,
    summary,
    h(
      'div',
      { class: 'columns' },
      counts.length ? table('By kind', ['Kind', 'Count'], counts.map(([kind, n]) => [kindLabel(kind), String(n)]), { class: 'compact' }) : null,
      principal.scope === 'global' && perMerchant.length
        ? table(
            'By merchant',
            ['Merchant', 'Count'],
            // Dead letters no merchant was found for are counted under "(none)": not a merchant to show the queue of.
            perMerchant.map(([id, n]) => [id === NO_MERCHANT ? id : h('a', { href: `#/attention?merchantId=${encodeURIComponent(id)}` }, id), String(n)]),
            { class: 'compact' },
          )
        : null,
    ),
    items.length
      ? table(
          `Oldest first${items.length < total ? ` (the first ${items.length} of ${total})` : ''}`,
          ['Kind', 'Record', 'Merchant', 'Status', 'POS', 'POS order', 'Waiting', 'Why'],
          items.map((item) => [
            kindLabel(item.kind),
            item.deadLetterId ? h('a', { href: deadLetterHref(item.deadLetterId) }, `dead letter ${item.deadLetterId}`) : item.transactionId ? recordLink(item.merchantId, item.transactionId) : '',
            item.merchantId ?? '',
            item.status ? statusBadge(item.status) : '',
            item.pos ?? '',
            item.orderId ?? '',
            h('span', { title: item.since }, age(item.since)),
            prose(item.why),
          ]),
          { class: 'queue' },
        )
      : null,
  ];
}

/**
 * What /readyz's `checks.register` says (the bridge's admin token sees it), when it is not `ok`: the
 * merchants whose registers cannot find guests. Undefined when all is well or /readyz cannot say.
 * @returns {Promise<string | undefined>}
 */
async function registerProblem() {
  /** @type {unknown} */
  let answer;
  try {
    answer = await api('/readyz');
  } catch {
    // Not ready is a 503 whose body is still the readiness: only its checks matter here.
    return undefined;
  }
  const register = /** @type {Readiness} */ (answer).checks?.register;
  return register && register !== 'ok' ? register : undefined;
}
