/** Each credential goes only to the endpoints that take it (upstream Authentication 1 and 5). */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { LoyaltyClient } from '../../src/loyalty/client.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';

const seen: { path: string; appToken?: string; apiKey?: string }[] = [];
let server: LocalServer;
let client: LoyaltyClient;

beforeAll(async () => {
  server = await listenLocally((req, res) => {
    seen.push({ path: req.url!.split('?')[0]!, appToken: req.headers['x-app-token'] as string | undefined, apiKey: req.headers['x-api-key'] as string | undefined });
    res.setHeader('content-type', 'application/json');
    res.end(req.url!.startsWith('/api/v2/') && req.method === 'GET' ? JSON.stringify({ code: 200, data: [], meta: { totalItems: 0, itemsPerPage: 1000, currentPage: 1 } }) : JSON.stringify({ transactionId: 't', results: [{ isSuccess: true }] }));
  });
  client = new LoyaltyClient({ baseUrl: server.url, appToken: 'APP-TOKEN', apiKey: 'API-KEY', timeoutMs: 1000, retryBaseMs: 1 });
});
afterAll(() => server.close());

it('sends the app token to accrue and reverse only, and the API key to the history only', async () => {
  await client.accrue({ transactionId: 't', phone: '+15550001111', check: { amount: 1, currency: 'USD', selections: [] } });
  await client.reverse({ transactionId: 't' });
  await client.findCards({ phone: '+15550001111' });
  await client.listOperations('11-1-1', '2026-01-01', '2026-01-02');
  expect(seen).toEqual([
    { path: '/api/v2/marketplace/accrue', appToken: 'APP-TOKEN', apiKey: undefined },
    { path: '/api/v2/marketplace/reverse', appToken: 'APP-TOKEN', apiKey: undefined },
    { path: '/api/v2/cards', appToken: undefined, apiKey: 'API-KEY' },
    { path: '/api/v2/operations', appToken: undefined, apiKey: 'API-KEY' },
  ]);
});
