/**
 * A local fake of a POS's own REST API over real HTTP: canned JSON answers by path, and a log of
 * every request (path, query, Authorization) so tests can assert what the bridge fetched. A path
 * can also be given answers for its next requests only (`queue`), each after a delay if need be,
 * to play a POS that fails for a while (5xx, 429, or too slow to answer within the timeout).
 */
import { listenLocally } from './local-server.js';

export interface FakeAnswer {
  status?: number;
  body?: unknown;
  /** Milliseconds before the answer: longer than POS_API_TIMEOUT_MS plays a timeout. */
  delayMs?: number;
}

export interface FakePosApi {
  url: string;
  requests: { path: string; query: Record<string, string>; authorization?: string }[];
  /** Answers `body` with `status` (default 200) for GET `path` (exact, without query). */
  answer(path: string, body: unknown, status?: number): void;
  /** The next requests of `path` get these answers, one each, in order; then the standing answer again. */
  queue(path: string, ...answers: FakeAnswer[]): void;
  /** How many requests reached `path`. */
  count(path: string): number;
  close(): Promise<void>;
}

export async function startFakePosApi(): Promise<FakePosApi> {
  const routes = new Map<string, { status: number; body: unknown }>();
  const queued = new Map<string, FakeAnswer[]>();
  const requests: FakePosApi['requests'] = [];
  const server = await listenLocally((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams), authorization: req.headers.authorization });
    const next = queued.get(url.pathname)?.shift();
    const route = routes.get(url.pathname);
    const status = next ? (next.status ?? 200) : (route?.status ?? 404);
    const body = next && 'body' in next ? next.body : next ? { errors: [{ code: 'SERVICE_UNAVAILABLE', detail: 'a queued failure' }] } : (route?.body ?? { errors: [{ code: 'NOT_FOUND', detail: `no fake answer for ${url.pathname}` }] });
    const send = () => {
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (next?.delayMs) setTimeout(send, next.delayMs).unref();
    else send();
  });
  return {
    url: server.url,
    requests,
    answer(path, body, status = 200) {
      routes.set(path, { status, body });
    },
    queue(path, ...answers) {
      queued.set(path, [...(queued.get(path) ?? []), ...answers]);
    },
    count(path) {
      return requests.filter((r) => r.path === path).length;
    },
    close: server.close,
  };
}
