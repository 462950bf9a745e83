// @ts-check
/**
 * Backfill (docs/backfill-and-reconcile.md): one pass of a merchant's account on one POS now, which reads back
 * the orders and refunds the POS changed since a time and records those whose webhooks never
 * arrived (`POST /v1/admin/backfill`); and every account's watermark and last pass
 * (`GET /v1/admin/backfill`). Reached from the menu, or prefilled from a three-way report's row or
 * a dead letter that names a missing order.
 */
import { api, describeError } from '../api.js';
import { count, deadLetterHref, h, prose, recordLink, replace, table, time } from '../dom.js';
import { merchantField, merchantList } from '../merchants.js';
import { listingPosNames } from '../vocabulary.js';

/** @import { BackfillAnswer, BackfillRequest, BackfillStatusList, WhoAmI, ViewContext } from '../types.js' */

/**
 * The backfill page's address, prefilled: `since` an ISO time; `report` the report to read again after, `deadLetterId` the letter to replay after.
 * @param {{ merchantId?: string, pos?: string, since?: string, report?: { from: string, to: string }, deadLetterId?: string }} prefill
 * @returns {string}
 */
export function backfillHref({ merchantId, pos, since, report, deadLetterId }) {
  const params = { merchantId, pos, since, deadLetterId, ...(report ? { reportFrom: report.from, reportTo: report.to } : {}) };
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
  return `#/backfill?${query}`;
}

/**
 * An ISO time as a `datetime-local` field holds it, in UTC: `2026-11-24T09:12:00`.
 * @param {string | null | undefined} iso
 * @returns {string}
 */
function localValue(iso) {
  const ms = Date.parse(iso ?? '');
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString().slice(0, 19);
}

/** @param {ViewContext} context */
export async function backfillView({ section, params, principal, announce }) {
  const merchantId = principal.scope === 'merchant' ? principal.merchantId : (params.get('merchantId') ?? '');
  const pos = params.get('pos') ?? '';
  const since = localValue(params.get('since')) || localValue(new Date(Date.now() - 86_400_000).toISOString());
  const reportFrom = params.get('reportFrom');
  const reportTo = params.get('reportTo');
  const deadLetterId = params.get('deadLetterId');
  replace(section, h('h1', {}, 'Backfill'), h('p', { class: 'loading' }, 'Loading…'));
  const merchants = principal.scope === 'global' ? await merchantList(principal) : undefined;
  if (!section.isConnected) return;

  const answer = h('div', { class: 'backfill-answer' });
  const start = h('button', { type: 'submit', class: 'primary' }, 'Start backfill');
  const form = h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Backfill',
      onsubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        const sinceValue = String(data.get('since') ?? '');
        const untilValue = String(data.get('until') ?? '');
        const chosenPos = String(data.get('pos') ?? '');
        const sinceIso = utc(sinceValue);
        if (!chosenPos || !sinceIso) {
          replace(answer, h('p', { class: 'problem', role: 'alert' }, 'Choose the POS and the time to read back from.'));
          return;
        }
        /** @type {BackfillRequest} */
        const body = {
          merchantId: principal.scope === 'merchant' ? principal.merchantId : String(data.get('merchantId') ?? '') || undefined,
          pos: chosenPos,
          since: sinceIso,
          until: untilValue ? utc(untilValue) : undefined,
        };
        start.disabled = true;
        replace(answer, h('p', { class: 'loading', role: 'status' }, `Reading ${body.pos} back for merchant ${body.merchantId ?? 'default'}…`));
        try {
          const result = /** @type {BackfillAnswer} */ (await api('/v1/admin/backfill', { method: 'POST', body }));
          if (!section.isConnected) return;
          replace(answer, passAnswer(result, { reportFrom, reportTo, deadLetterId }));
          announce(`Backfill of ${result.pos} for merchant ${result.merchantId}: ${result.new.length} new, ${result.known} known, ${result.refused.length} refused.`);
          accounts.refresh();
        } catch (error) {
          replace(answer, h('p', { class: 'problem', role: 'alert' }, `The backfill did not run: ${describeError(error)}`));
        } finally {
          start.disabled = false;
        }
      },
    },
    h(
      'div',
      { class: 'grid' },
      principal.scope === 'global' ? merchantField({ id: 'backfill-merchant', merchants, value: merchantId || 'default', any: null }) : null,
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'backfill-pos' }, 'POS'),
        h('select', { id: 'backfill-pos', name: 'pos' }, h('option', { value: '' }, 'choose a POS'), listingPosNames().map((p) => h('option', { value: p, selected: p === pos ? true : undefined }, p))),
      ),
      h('div', { class: 'field' }, h('label', { for: 'backfill-since' }, 'Since (UTC)'), h('input', { id: 'backfill-since', name: 'since', type: 'datetime-local', step: '1', value: since, required: true })),
      h('div', { class: 'field' }, h('label', { for: 'backfill-until' }, 'Until (UTC, optional)'), h('input', { id: 'backfill-until', name: 'until', type: 'datetime-local', step: '1', 'aria-describedby': 'backfill-until-hint' }), h('p', { class: 'hint', id: 'backfill-until-hint' }, 'Empty: now.')),
    ),
    start,
  );
  const accounts = accountsSection(merchantId, principal);
  replace(
    section,
    h('h1', {}, 'Backfill'),
    h(
      'p',
      {},
      'What will happen: the bridge reads back from the POS\u2019s API every order and refund of the merchant\u2019s account that changed since that time, and records those the ledger lacks (their webhooks never arrived), which it then delivers like any other. What the ledger has already is left as it is, so a backfill run twice records nothing twice. It needs the account and its access token on the POS.',
    ),
    form,
    answer,
    accounts.section,
  );
}

/**
 * A `datetime-local` value read as UTC, as an ISO 8601 time.
 * @param {string} value
 * @returns {string | undefined}
 */
function utc(value) {
  const ms = Date.parse(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

/**
 * @param {BackfillAnswer} result
 * @param {{ reportFrom: string | null, reportTo: string | null, deadLetterId: string | null }} after
 */
function passAnswer(result, { reportFrom, reportTo, deadLetterId }) {
  // An order and its refund found in one pass are one record: named once.
  const fresh = [...new Set(result.new ?? [])];
  const refused = result.refused ?? [];
  return [
    h('h2', {}, 'What the pass found'),
    h(
      'p',
      { class: 'summary' },
      `Merchant ${result.merchantId}, ${result.pos}, from `,
      time(result.since),
      ' to ',
      time(result.until),
      ` (not included): ${count(result.examined, 'order or refund', 'orders and refunds')} read in ${count(result.pages, 'page')}; ${fresh.length} new, ${result.known} already known, ${refused.length} refused, ${result.unpaid} unpaid.`,
    ),
    fresh.length ? [h('h3', {}, `New records (${fresh.length})`), h('ul', { class: 'plain' }, fresh.map((id) => h('li', {}, recordLink(result.merchantId, id))))] : h('p', {}, 'Nothing new: the ledger had every order and refund the POS listed.'),
    refused.length ? table(`Refused (${refused.length})`, ['POS id', 'Why'], refused.map((r) => [r.id, prose(r.why)])) : null,
    result.watermark ? h('p', {}, 'The account\u2019s watermark is now ', time(result.watermark), ': every change before it has been read.') : null,
    reportFrom && reportTo ? h('p', {}, h('a', { href: `#/reconcile?${new URLSearchParams({ merchantId: result.merchantId, from: reportFrom, to: reportTo })}` }, 'Read the three-way report again')) : null,
    deadLetterId ? h('p', {}, h('a', { href: deadLetterHref(deadLetterId) }, `Back to dead letter ${deadLetterId}`), ' to replay it now that its order is in the ledger.') : null,
  ];
}

/**
 * Every account backfill can read, with its watermark, last pass and next one.
 * @param {string | undefined} merchantId
 * @param {WhoAmI} principal
 */
function accountsSection(merchantId, principal) {
  const body = h('div', {});
  const section = h('section', { 'aria-labelledby': 'accounts-heading' }, h('h2', { id: 'accounts-heading' }, 'Accounts backfill can read'), body);
  const refresh = async () => {
    replace(body, h('p', { class: 'loading' }, 'Loading…'));
    try {
      const list = /** @type {BackfillStatusList} */ (await api('/v1/admin/backfill', { query: { merchantId: principal.scope === 'global' ? merchantId || undefined : undefined } }));
      const items = list.items ?? [];
      replace(
        body,
        h('p', {}, list.scheduled ? `Scheduled passes run every ${Math.round(list.intervalMs / 1000)} s.` : 'Scheduled passes are off: passes run only when asked for.'),
        items.length
          ? table(
              'Accounts, with their watermark and last pass',
              ['Merchant', 'POS', 'Account', 'Watermark', 'Last pass', 'Next pass'],
              items.map((a) => [
                a.merchantId,
                a.pos,
                a.account,
                a.watermark ? time(a.watermark) : 'none yet',
                a.lastPass ? [time(a.lastPass.finishedAt), ` (${a.lastPass.by}): ${a.lastPass.examined} read, ${a.lastPass.new} new, ${a.lastPass.refused} refused`, a.lastPass.error ? ['; stopped: ', prose(a.lastPass.error)] : ''] : 'none yet',
                a.running ? [`running on ${a.running.owner} until `, time(a.running.until)] : a.nextPassAt ? time(a.nextPassAt) : 'when asked for',
              ]),
            )
          : h('p', {}, 'No account: a merchant needs an account and its access token on a POS whose API lists orders.'),
      );
    } catch (error) {
      replace(body, h('p', { class: 'problem' }, describeError(error)));
    }
  };
  refresh();
  return { section, refresh };
}
