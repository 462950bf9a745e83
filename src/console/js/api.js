/**
 * The admin API as the console calls it. The operator's token is kept only in this tab's
 * `sessionStorage` (gone when the tab closes, never in a URL, a cookie or `localStorage`) and sent
 * as `Authorization: Bearer` on each call: the bridge holds no session for the page.
 */

const TOKEN_KEY = 'loyalty-bridge.console.adminToken';

export const session = {
  token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  signIn(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** An answer that is not a success: the API's error envelope `{ error: { code, message, issues? } }` when it sent one. */
export class ApiError extends Error {
  constructor(status, code, message, issues) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** Listeners told when the bridge refuses the token (401): the page asks for it again. */
const onRefused = new Set();
export function whenTokenRefused(listener) {
  onRefused.add(listener);
}

/**
 * Calls `path` with the session's token. `query` entries that are empty are left out. Answers the
 * body of a 2xx (parsed when it is JSON); throws ApiError otherwise, with the API's own message.
 */
export async function api(path, { method = 'GET', query, body, token = session.token(), accept = 'application/json' } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  const headers = { Accept: accept };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  const text = await response.text();
  // JSON when the answer says so (every answer and error of the API); other text as it is (a CSV report).
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

function errorOf(response, data) {
  const envelope = data && typeof data === 'object' ? data.error : undefined;
  if (envelope && typeof envelope === 'object') return new ApiError(response.status, envelope.code, envelope.message ?? response.statusText, envelope.issues);
  // Not the envelope (an older bridge's bare text, or an answer with a status): say what came.
  const message = typeof envelope === 'string' ? envelope : typeof data === 'string' && data ? data.slice(0, 300) : data ? JSON.stringify(data).slice(0, 300) : response.statusText;
  return new ApiError(response.status, `http_${response.status}`, message);
}

/** The API's message for an error, with each field it names: what a person reads. */
export function describeError(error) {
  if (!(error instanceof ApiError)) return `The request did not complete: ${error?.message ?? error}`;
  const issues = (error.issues ?? []).map((issue) => `${issue.field ? `${issue.field}: ` : ''}${issue.message}`);
  const text = `${error.message}${issues.length && !issues.every((i) => error.message.includes(i)) ? ` (${issues.join('; ')})` : ''}`;
  return `${text} [${error.status} ${error.code}]`;
}
