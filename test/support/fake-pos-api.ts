/**
 * A local fake of a POS's own REST API over real HTTP: canned JSON answers by path, and a log of
 * every request (path, query, Authorization) so tests can assert what the bridge fetched.
 */
import { listenLocally } from './local-server.js';

export interface FakePosApi {
  url: string;
  requests: { path: string; query: Record<string, string>; authorization?: string }[];
  /** Answers `body` with `status` (default 200) for GET `path` (exact, without query). */
  answer(path: string, body: unknown, status?: number): void;
  close(): Promise<void>;
}

export async function startFakePosApi(): Promise<FakePosApi> {
  const routes = new Map<string, { status: number; body: unknown }>();
  const requests: FakePosApi['requests'] = [];
  const server = await listenLocally((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams), authorization: req.headers.authorization });
    const route = routes.get(url.pathname);
    res.writeHead(route?.status ?? 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(route?.body ?? { errors: [{ code: 'NOT_FOUND', detail: `no fake answer for ${url.pathname}` }] }));
  });
  return {
    url: server.url,
    requests,
    answer(path, body, status = 200) {
      routes.set(path, { status, body });
    },
    close: server.close,
  };
}
