// @ts-check
/**
 * The admin API as the console calls it. The operator's token is kept only in this tab's
 * `sessionStorage` (gone when the tab closes, never in a URL, a cookie or `localStorage`) and sent
 * as `Authorization: Bearer` on each call: the bridge holds no session for the page.
 */

/** @import { ErrorEnvelope, FieldIssue, QueryValue } from './types.js' */

const TOKEN_KEY = 'loyalty-bridge.console.adminToken';

export const session = {
  /** @returns {string | null} */
  token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  /** @param {string} token */
  signIn(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** An answer that is not a success: the API's error envelope `{ error: { code, message, issues? } }` when it sent one. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {FieldIssue[]} [issues]
   */
  constructor(status, code, message, issues) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** Listeners told when the bridge refuses the token (401): the page asks for it again. */
/** @type {Set<() => void>} */
const onRefused = new Set();
/** @param {() => void} listener */
export function whenTokenRefused(listener) {
  onRefused.add(listener);
}

/**
 * @typedef {object} CallOptions
 * @property {string} [method]
 * @property {Record<string, QueryValue>} [query]
 * @property {unknown} [body] Sent as JSON.
 * @property {string | null} [token] The session's token unless given; `null` sends none.
 * @property {string} [accept]
 */

/**
 * Calls `path` with the session's token. `query` entries that are empty are left out. Answers the
 * body of a 2xx (parsed when it is JSON); throws ApiError otherwise, with the API's own message.
 * What came is `unknown` to the page until the caller says, with a JSDoc type cast, which answer
 * of the API it is (the types of src/console/js/types.js: the bridge's own schemas).
 *
 * @param {string} path
 * @param {CallOptions} [options]
 * @returns {Promise<unknown>}
 */
export async function api(path, { method = 'GET', query, body, token = session.token(), accept = 'application/json' } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  /** @type {Record<string, string>} */
  const headers = { Accept: accept };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  const text = await response.text();
  // JSON when the answer says so (every answer and error of the API); other text as it is (a CSV report).
  /** @type {unknown} */
  let data = text;
  if (/^application\/(.+\+)?json/.test(response.headers.get('content-type') ?? '')) {
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = text;
    }
  }
  if (response.ok) return data;
  if (response.status === 401) for (const listener of onRefused) listener();
  throw errorOf(response, data);
}

/**
 * @param {Response} response
 * @param {unknown} data
 * @returns {ApiError}
 */
function errorOf(response, data) {
  /** @type {unknown} */
  const envelope = data && typeof data === 'object' && 'error' in data ? data.error : undefined;
  if (envelope && typeof envelope === 'object') {
    const error = /** @type {Partial<ErrorEnvelope['error']>} */ (envelope);
    return new ApiError(response.status, String(error.code ?? `http_${response.status}`), error.message ?? response.statusText, error.issues);
  }
  // Not the envelope (an older bridge's bare text, or an answer with a status): say what came.
  const message = typeof envelope === 'string' ? envelope : typeof data === 'string' && data ? data.slice(0, 300) : data ? JSON.stringify(data).slice(0, 300) : response.statusText;
  return new ApiError(response.status, `http_${response.status}`, message);
}

/**
 * The API's message for an error, with each field it names: what a person reads.
 * @param {unknown} error
 * @returns {string}
 */
export function describeError(error) {
  if (!(error instanceof ApiError)) return `The request did not complete: ${error instanceof Error ? error.message : String(error)}`;
  const issues = (error.issues ?? []).map((issue) => `${issue.field ? `${issue.field}: ` : ''}${issue.message}`);
  const text = `${error.message}${issues.length && !issues.every((i) => error.message.includes(i)) ? ` (${issues.join('; ')})` : ''}`;
  return `${text} [${error.status} ${error.code}]`;
}
