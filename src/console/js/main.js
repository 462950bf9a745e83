// @ts-check
/**
 * The console's shell: signing in with an admin token, the navigation, and `#/…` routes. A route
 * holds only what is shown (a view and its filters), never the token, so a copied or logged URL
 * gives nobody access. Before anything is shown, the page reads the bridge's vocabulary (its
 * statuses and POS names, vocabulary.js), which every view names things by.
 */
import { api, ApiError, describeError, session, whenTokenRefused } from './api.js';
import { h, replace } from './dom.js';
import { forgetMerchants } from './merchants.js';
import { selection } from './selection.js';
import { attentionView } from './views/attention.js';
import { auditView } from './views/audit.js';
import { backfillView } from './views/backfill.js';
import { deadLetterView, deadLettersView } from './views/dead-letters.js';
import { reconcileView } from './views/reconcile.js';
import { recordView } from './views/record.js';
import { forgetSearch, searchView } from './views/search.js';
import { loadVocabulary } from './vocabulary.js';

/** @import { QueryValue, View, ViewContext, WhoAmI } from './types.js' */

/** @type {[RegExp, View][]} */
const ROUTES = [
  [/^\/attention$/, attentionView],
  [/^\/search$/, searchView],
  [/^\/transactions\/([^/]+)\/([^/]+)$/, recordView],
  [/^\/dead-letters$/, deadLettersView],
  [/^\/dead-letters\/([^/]+)$/, deadLetterView],
  [/^\/reconcile$/, reconcileView],
  [/^\/backfill$/, backfillView],
  [/^\/audit$/, auditView],
];
const HOME = '/attention';

/** @type {[string, string][]} */
const NAV = [
  ['#/attention', 'Needs attention'],
  ['#/search', 'Search'],
  ['#/dead-letters', 'Dead letters'],
  ['#/reconcile', 'Reconcile'],
  ['#/backfill', 'Backfill'],
  ['#/audit', 'Audit log'],
];

/**
 * A page under no tab of its own (a record, a dead letter) keeps the tab it was reached from; opened directly, this one.
 * @type {[RegExp, string][]}
 */
const PARENT_TAB = [
  [/^\/transactions\//, '/search'],
  [/^\/dead-letters\//, '/dead-letters'],
];

/**
 * One of the page's fixed parts (index.html).
 * @param {string} id
 * @returns {HTMLElement}
 */
function part(id) {
  const found = document.getElementById(id);
  if (!found) throw new Error(`The console's page has no #${id}.`);
  return found;
}

const main = part('main');
const who = part('who');
const nav = part('nav');
const status = part('status');

/**
 * Who the token is: `{ actor, scope: 'global' | 'merchant', merchantId? }`, once signed in.
 * @type {WhoAmI | undefined}
 */
let principal;
/**
 * The tab of the last page shown that has one: what a record or dead letter opened from it is under.
 * @type {string | undefined}
 */
let lastTab;

/**
 * `#/search?status=a,b` → `{ path: '/search', params }`.
 * @returns {{ path: string, params: URLSearchParams }}
 */
function currentRoute() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(1) : HOME;
  const [path = HOME, query = ''] = hash.split('?');
  return { path, params: new URLSearchParams(query) };
}

/**
 * Goes to `path` with `params` (empty values left out).
 * @param {string} path
 * @param {Record<string, QueryValue>} [params]
 */
function navigate(path, params = {}) {
  /** @type {[string, string][]} */
  const kept = [];
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') kept.push([name, String(value)]);
  const query = new URLSearchParams(kept);
  const hash = `#${path}${query.size ? `?${query}` : ''}`;
  if (location.hash === hash) render();
  else location.hash = hash;
}

/**
 * A message for screen readers and eyes alike, in the page's status region. A problem (an action
 * that failed) is drawn as one and says so in words, never looking like a success.
 * @param {string} text
 * @param {'done' | 'problem'} [tone]
 */
function announce(text, tone = 'done') {
  status.textContent = '';
  status.classList.toggle('problem', tone === 'problem');
  // Set on the next frame, so that the same text twice is announced twice.
  requestAnimationFrame(() => {
    status.textContent = tone === 'problem' ? `Failed: ${text}` : text;
  });
}

/** @returns {Promise<void>} */
async function render() {
  if (!session.token() || !principal) return renderSignIn();
  const { path, params } = currentRoute();
  const match = ROUTES.map(([pattern, view]) => /** @type {const} */ ([pattern.exec(path), view])).find(([m]) => m);
  highlightTab(path);
  // A view renders into a section of its own: should the operator move on before it has loaded,
  // it writes into a section no longer on the page.
  const section = h('section', { class: 'view' });
  replace(main, section);
  if (!match) {
    replace(section, h('h1', { tabindex: '-1' }, 'Not found'), h('p', {}, 'There is no such page in the console. ', h('a', { href: `#${HOME}` }, 'Go to the attention queue.')));
    return focusHeading(section);
  }
  const [m, view] = match;
  /** @type {ViewContext} */
  const context = { section, params, principal, navigate, announce, refresh: render };
  try {
    await view(context, ...(m?.slice(1) ?? []).map((part) => decodeURIComponent(part ?? '')));
  } catch (error) {
    if (!section.isConnected) return;
    if (!section.querySelector('h1')) section.prepend(h('h1', { tabindex: '-1' }, 'Could not load this page'));
    // What was loading is not any more: the page says why instead.
    for (const loading of section.querySelectorAll('.loading')) loading.remove();
    section.append(h('p', { class: 'problem', role: 'alert' }, describeError(error)));
  }
  if (section.isConnected) focusHeading(section);
}

/**
 * Marks the tab of the page shown (`aria-current`): a top-level page's own; a record's or dead
 * letter's, the tab it was reached from (the attention queue, a search, the audit log, a report),
 * or its natural list when opened directly.
 *
 * @param {string} path
 */
function highlightTab(path) {
  const tabs = NAV.map(([href]) => href.slice(1));
  let current = tabs.find((tab) => path === tab);
  if (current) lastTab = current;
  else {
    const parent = PARENT_TAB.find(([pattern]) => pattern.test(path))?.[1];
    current = parent ? (lastTab ?? parent) : undefined;
  }
  for (const link of nav.querySelectorAll('a')) {
    if ((link.getAttribute('href') ?? '').slice(1) === current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

/**
 * Moves focus to the page's heading, so keyboard and screen-reader users start at the new content,
 * and names the tab after it.
 *
 * @param {HTMLElement} section
 */
function focusHeading(section) {
  const heading = section.querySelector('h1');
  if (!heading) return;
  document.title = `${heading.textContent} · loyalty-bridge console`;
  heading.setAttribute('tabindex', '-1');
  heading.focus({ preventScroll: false });
}

/** @param {string} [problem] */
function renderSignIn(problem) {
  replace(who);
  nav.hidden = true;
  const token = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', 'aria-required': 'true', 'aria-describedby': 'token-hint' });
  const message = h('p', { class: 'problem', role: 'alert' }, problem ?? '');
  const form = h(
    'form',
    {
      class: 'sign-in',
      onsubmit: async (event) => {
        event.preventDefault();
        const given = token.value.trim();
        if (!given) return void (message.textContent = 'Enter an admin token.');
        try {
          await signIn(given);
          token.value = '';
        } catch (error) {
          session.signOut();
          message.textContent = error instanceof ApiError && error.status === 401 ? 'The bridge does not accept this token.' : describeError(error);
          token.focus();
        }
      },
    },
    h('label', { for: 'token' }, 'Admin token'),
    h('p', { id: 'token-hint', class: 'hint' }, 'The bridge\u2019s ADMIN_TOKEN, a named operator\u2019s token, or a merchant\u2019s admin token. It is kept in this browser tab only, until you sign out or close the tab.'),
    token,
    message,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  replace(main, h('section', { class: 'view' }, h('h1', { tabindex: '-1' }, 'Sign in to the operator console'), form));
  document.title = 'Sign in · loyalty-bridge console';
  token.focus();
}

/**
 * Asks the bridge who the token is; keeps it for this tab only when the bridge accepts it. What was
 * said before signing in ("Signed out.", a refusal) is not about the page that follows.
 *
 * @param {string} token
 */
async function signIn(token) {
  const answer = /** @type {WhoAmI} */ (await api('/v1/admin/whoami', { token }));
  principal = answer;
  session.signIn(token);
  status.textContent = '';
  showPrincipal(answer);
  if (!location.hash.startsWith('#/')) location.hash = `#${HOME}`;
  else render();
}

/**
 * Forgets everything of the session that ends: who it was, the page it was on (the address's route,
 * so the next person signing in starts at the attention queue, not at the last one's record), the
 * records ticked, the customer searched and the merchants listed.
 */
function forgetSession() {
  session.signOut();
  principal = undefined;
  lastTab = undefined;
  selection.clear();
  forgetSearch();
  forgetMerchants();
}

/** @param {WhoAmI} signedIn */
function showPrincipal(signedIn) {
  const scope = signedIn.scope === 'merchant' ? `merchant ${signedIn.merchantId} only` : 'all merchants';
  replace(
    who,
    h('span', {}, 'Signed in as ', h('strong', {}, signedIn.actor), ` (${scope})`),
    h(
      'button',
      {
        type: 'button',
        class: 'secondary',
        onclick: () => {
          forgetSession();
          // The route is left out of the address (and of the tab's history entry): nothing of this page is kept.
          history.replaceState(null, '', `${location.pathname}${location.search}`);
          announce('Signed out.');
          renderSignIn();
        },
      },
      'Sign out',
    ),
  );
  replace(
    nav,
    h(
      'ul',
      {},
      NAV.map(([href, text]) => h('li', {}, h('a', { href }, text))),
    ),
  );
  nav.hidden = false;
}

whenTokenRefused(() => {
  // Signing in answers a refusal itself; this is for a token refused while in use.
  if (!principal) return;
  forgetSession();
  renderSignIn('The bridge no longer accepts your token (it may have been rotated). Sign in again.');
});

window.addEventListener('hashchange', () => {
  // What was said about the last page is not about the next one.
  status.textContent = '';
  render();
});

/** Once the vocabulary is read: a reload of the tab keeps the session, so ask again who the kept token is. */
function start() {
  const kept = session.token();
  if (kept) {
    signIn(kept).catch((error) => {
      session.signOut();
      renderSignIn(describeError(error));
    });
  } else {
    renderSignIn();
  }
}

loadVocabulary().then(start, (error) => {
  // Without the bridge's statuses and POS names the page would show and search for nothing right: it says so instead.
  replace(
    main,
    h(
      'section',
      { class: 'view' },
      h('h1', { tabindex: '-1' }, 'The console could not start'),
      h('p', { class: 'problem', role: 'alert' }, `The bridge\u2019s vocabulary (its record statuses and POS names) could not be read: ${describeError(error)}`),
      h('p', {}, 'Reload the page to try again.'),
    ),
  );
  document.title = 'Could not start · loyalty-bridge console';
});
