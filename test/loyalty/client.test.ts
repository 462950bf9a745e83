/**
 * LoyaltyClient against the in-repo simulator over real HTTP. The simulator's books count every
 * point-of-sale request it received (`accrueRequests`), so "how many requests went out" is measured on
 * the server side, independently of the client's own attempt log. The simulator counts a request as
 * it arrives, before it answers or drops it: once a call has returned, every request of its round is
 * in the count.
 *
 * The back-off goes through the client's `sleep`: here one that records each wait asked of it and
 * ends it at once. A retry can only go out after such a wait, so the list of waits is the round's
 * whole schedule, asserted exactly: no retry is left to come after a call has returned, and no test
 * measures elapsed time to find that out.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { LoyaltyClient, sharedAgents, type CallOutcome, type CallReport, type LoyaltyClientOptions } from '../../src/loyalty/client.js';
import type { AccrueRequest } from '../../src/loyalty/contract.js';
import { createSimulator, type ListeningSimulator, type Simulator } from '../../simulator/index.js';
import { listenLocally, type LocalServer } from '../support/local-server.js';

const UNIT = 5;

function accrueBody(transactionId: string, extra: Partial<AccrueRequest> = {}): AccrueRequest {
  return {
    transactionId,
    phone: '+15550001111',
    firstName: 'Ann',
    check: {
      amount: 5997,
      currency: 'USD',
      taxAmount: 480,
      selections: [{ id: 'sku-1', groupId: 'coffee', displayName: 'Latte', quantity: 3, price: 1999, totalPrice: 5997 }],
    },
    ...extra,
  };
}

function expectKind<K extends CallOutcome['kind']>(report: CallReport, kind: K): Extract<CallOutcome, { kind: K }> {
  expect(report.outcome.kind).toBe(kind);
  return report.outcome as Extract<CallOutcome, { kind: K }>;
}

/** Milliseconds between the end of attempt i and the start of attempt i + 1 (the back-off). */
function gaps(report: CallReport): number[] {
  const out: number[] = [];
  for (let i = 1; i < report.attempts.length; i++) {
    out.push(Date.parse(report.attempts[i]!.startedAt) - Date.parse(report.attempts[i - 1]!.finishedAt));
  }
  return out;
}

/** A back-off timer for the client that waits for nothing: it keeps every delay asked of it, in order. */
function recordingSleep(): { asked: number[]; sleep: (ms: number) => Promise<void> } {
  const asked: number[] = [];
  return {
    asked,
    sleep: async (ms) => {
      asked.push(ms);
    },
  };
}

/** The delays of a round of 429s, `base` the unit and `random` the jitter drawn each time: 1, 2, 4, 8 units stretched by up to 20%. */
const backoff = (base: number, retries: number, random = 0) => Array.from({ length: retries }, (_, i) => base * 2 ** i * (1 + 0.2 * random));

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('LoyaltyClient against the simulator', () => {
  let sim: Simulator;
  let server: ListeningSimulator;
  /** This test's back-off timer: what each client made by `client()` was asked to wait. */
  let timer = recordingSleep();
  const client = (options: Partial<LoyaltyClientOptions> = {}) =>
    new LoyaltyClient({ baseUrl: server.url, appToken: sim.appToken, apiKey: sim.apiKey, timeoutMs: 300, retryBaseMs: UNIT, random: () => 0, sleep: timer.sleep, ...options });

  beforeAll(async () => {
    sim = createSimulator();
    server = await sim.listen();
  });
  afterAll(() => server.close());
  beforeEach(() => {
    sim.reset();
    timer = recordingSleep();
  });

  describe('success', () => {
    it('accrue: succeeded with the results, one attempt recording the request and the response', async () => {
      const body = accrueBody('generic:A-1');
      const report = await client().accrue(body);
      const outcome = expectKind(report, 'succeeded');
      expect(outcome.results).toHaveLength(1);
      expect(outcome.results[0]).toMatchObject({ isSuccess: true, checkAmount: 5997, accruedValue: 59, reversedAt: null });
      expect(outcome.results[0]!.operationId).toEqual(expect.any(Number));

      expect(report.attempts).toHaveLength(1);
      const [attempt] = report.attempts;
      expect(attempt).toMatchObject({ operation: 'accrue', request: body, response: { status: 200 } });
      expect(attempt!.error).toBeUndefined();
      expect(attempt!.response!.body).toEqual({ transactionId: 'generic:A-1', results: outcome.results });
      expect(Date.parse(attempt!.startedAt)).toBeLessThanOrEqual(Date.parse(attempt!.finishedAt));

      const books = sim.books();
      expect(books.accrueRequests).toBe(1);
      expect(books.transactions['generic:A-1']).toMatchObject({ accruals: 1, amount: 5997 });
    });

    it('reverse: succeeded with reversedAt filled, one request', async () => {
      await client().accrue(accrueBody('generic:R-1'));
      const report = await client().reverse({ transactionId: 'generic:R-1' });
      const outcome = expectKind(report, 'succeeded');
      expect(outcome.results[0]!.reversedAt).toEqual(expect.any(String));
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]).toMatchObject({ operation: 'reverse', request: { transactionId: 'generic:R-1' }, response: { status: 200 } });
      expect(sim.books()).toMatchObject({ reverseRequests: 1, transactions: { 'generic:R-1': { accruals: 1, reversals: 1, points: 0 } } });
    });
  });

  describe('429 from the front proxy (HTML, no Retry-After)', () => {
    it('×4 then success: succeeded after exactly 5 requests, each 429 logged with its HTML body', async () => {
      sim.faults.inject({ kind: 'rate_limit', times: 4 });
      const report = await client().accrue(accrueBody('generic:RL-4'));
      expectKind(report, 'succeeded');
      expect(sim.books().accrueRequests).toBe(5);
      expect(report.attempts).toHaveLength(5);
      for (const attempt of report.attempts.slice(0, 4)) {
        expect(attempt.response!.status).toBe(429);
        expect(attempt.response!.body).toEqual(expect.stringContaining('429 Too Many Requests'));
      }
      expect(report.attempts[4]!.response!.status).toBe(200);
      expect(timer.asked).toEqual(backoff(UNIT, 4));
      expect(sim.books().transactions['generic:RL-4']).toMatchObject({ accruals: 1 });
      expect(sim.books().doubleAccruals).toEqual([]);
    });

    it('×5: retryable after exactly 5 requests, never a 6th', async () => {
      sim.faults.inject({ kind: 'rate_limit', times: 6 });
      const report = await client().accrue(accrueBody('generic:RL-5'));
      const outcome = expectKind(report, 'retryable');
      expect(outcome.reason).toContain('429');
      expect(report.attempts).toHaveLength(5);
      expect(report.attempts.every((a) => a.response?.status === 429)).toBe(true);
      // Four waits, one before each retry, and no fifth: the round ended with the fifth answer, so
      // no sixth request can follow it.
      expect(timer.asked).toEqual(backoff(UNIT, 4));
      expect(sim.books().accrueRequests).toBe(5);
      expect(sim.faults.pending()).toBe(1);
      expect(sim.books().transactions).toEqual({});
    });

    it('waits 1, 2, 4, 8 units between requests (random 0: no jitter)', async () => {
      sim.faults.inject({ kind: 'rate_limit', times: 4 });
      const random = jest.fn(() => 0);
      const report = await client({ retryBaseMs: 20, random }).accrue(accrueBody('generic:RL-T0'));
      expectKind(report, 'succeeded');
      expect(random).toHaveBeenCalledTimes(4);
      expect(timer.asked).toEqual([20, 40, 80, 160]);
    });

    it('stretches each delay by at most 20% of jitter (random 0.999)', async () => {
      sim.faults.inject({ kind: 'rate_limit', times: 4 });
      const report = await client({ retryBaseMs: 20, random: () => 0.999 }).accrue(accrueBody('generic:RL-T1'));
      expectKind(report, 'succeeded');
      expect(timer.asked).toHaveLength(4);
      [20, 40, 80, 160].forEach((delay, i) => expect(timer.asked[i]).toBeCloseTo(delay * 1.1998, 9));
    });

    it('without a timer given, the real one waits out each delay before the retry goes out', async () => {
      sim.faults.inject({ kind: 'rate_limit', times: 2 });
      const report = await client({ retryBaseMs: 20, sleep: undefined }).accrue(accrueBody('generic:RL-REAL'));
      expectKind(report, 'succeeded');
      expect(timer.asked).toEqual([]);
      // Only lower bounds: a timer does not end early, and a late one is no fault of the client. The
      // attempt times are whole milliseconds, hence 2 ms of slack.
      const g = gaps(report);
      expect(g).toHaveLength(2);
      [20, 40].forEach((delay, i) => expect(g[i]).toBeGreaterThanOrEqual(delay - 2));
    });
  });

  describe('mixed answers in one round', () => {
    it('a 429 then a dropped connection: unknown after 2 requests, not retried further', async () => {
      sim.faults.inject({ kind: 'rate_limit' });
      sim.faults.inject({ kind: 'drop_after_commit' });
      sim.faults.inject({ kind: 'rate_limit', times: 5 });
      const report = await client().accrue(accrueBody('generic:MIX-1'));
      expectKind(report, 'unknown');
      expect(report.attempts).toHaveLength(2);
      expect(report.attempts[0]!.response!.status).toBe(429);
      expect(report.attempts[1]!.response).toBeUndefined();
      // One wait, after the 429; none after the drop, so nothing more is sent in this round.
      expect(timer.asked).toEqual(backoff(UNIT, 1));
      expect(sim.books().accrueRequests).toBe(2);
      expect(sim.books().transactions['generic:MIX-1']).toMatchObject({ accruals: 1 });
    });

    it('a 5xx then 429s: never more than 5 requests in the round', async () => {
      sim.faults.inject({ kind: 'server_error' });
      sim.faults.inject({ kind: 'rate_limit', times: 10 });
      const report = await client().accrue(accrueBody('generic:MIX-2'));
      expectKind(report, 'retryable');
      expect(report.attempts.map((a) => a.response?.status)).toEqual([503, 429, 429, 429, 429]);
      // Four waits for five requests: the last 429 was not waited on, the round is spent.
      expect(timer.asked).toEqual(backoff(UNIT, 4));
      expect(sim.books().accrueRequests).toBe(5);
    });

    it('each call is its own round: a new call after a spent round gets the full allowance again', async () => {
      sim.faults.inject({ kind: 'server_error', times: 5 });
      const c = client();
      expectKind(await c.accrue(accrueBody('generic:MIX-3')), 'retryable');
      const second = await c.accrue(accrueBody('generic:MIX-3'));
      expectKind(second, 'succeeded');
      expect(second.attempts.map((a) => a.response?.status)).toEqual([503, 503, 200]);
      expect(sim.books().accrueRequests).toBe(6);
    });
  });

  describe('5xx', () => {
    it('×2 then success: succeeded after 3 requests', async () => {
      sim.faults.inject({ kind: 'server_error', times: 2 });
      const report = await client().accrue(accrueBody('generic:5-2'));
      expectKind(report, 'succeeded');
      expect(sim.books().accrueRequests).toBe(3);
      expect(report.attempts.map((a) => a.response?.status)).toEqual([503, 503, 200]);
      expect(report.attempts[0]!.response!.body).toEqual(expect.stringContaining('Service Temporarily Unavailable'));
    });

    it('×3: retryable after exactly 3 requests, never a 4th', async () => {
      sim.faults.inject({ kind: 'server_error', status: 500, times: 4, message: 'boom' });
      const report = await client().accrue(accrueBody('generic:5-3'));
      const outcome = expectKind(report, 'retryable');
      expect(outcome.reason).toContain('500');
      expect(report.attempts).toHaveLength(3);
      // A JSON 500 from the app is kept parsed.
      expect(report.attempts[0]!.response).toEqual({ status: 500, body: { message: 'boom' } });
      // Two waits for three requests, and no third: the fourth fault is never reached.
      expect(timer.asked).toEqual(backoff(UNIT, 2));
      expect(sim.books().accrueRequests).toBe(3);
      expect(sim.faults.pending()).toBe(1);
      expect(sim.books().transactions).toEqual({});
    });

    it('reverse follows the same 5xx rule', async () => {
      await client().accrue(accrueBody('generic:5-R'));
      sim.faults.inject({ kind: 'server_error', status: 502, times: 3, on: 'reverse' });
      const report = await client().reverse({ transactionId: 'generic:5-R' });
      expectKind(report, 'retryable');
      expect(sim.books().reverseRequests).toBe(3);
      expect(sim.books().transactions['generic:5-R']).toMatchObject({ reversals: 0 });
    });
  });

  describe('refusals (4xx): never retried', () => {
    it('400 for an invalid body: refused with the upstream errors, 1 request', async () => {
      const body = accrueBody('generic:BAD');
      body.check.selections[0]!.quantity = 0;
      const report = await client().accrue(body);
      const outcome = expectKind(report, 'refused');
      expect(outcome.status).toBe(400);
      expect(outcome.errors).toEqual([expect.stringContaining('check.selections.0.quantity')]);
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]!.response).toEqual({ status: 400, body: { errors: outcome.errors } });
      expect(sim.books().accrueRequests).toBe(1);
    });

    it('400 hides a wrong token (the body is validated first)', async () => {
      const body = accrueBody('generic:BAD2', { phone: undefined, email: undefined });
      const report = await client({ appToken: 'wrong' }).accrue(body);
      expect(expectKind(report, 'refused').status).toBe(400);
      expect(sim.books().accrueRequests).toBe(1);
    });

    it('403 for a wrong app token: refused, 1 request, nothing booked', async () => {
      const report = await client({ appToken: 'not-the-token' }).accrue(accrueBody('generic:TOK'));
      const outcome = expectKind(report, 'refused');
      expect(outcome.status).toBe(403);
      expect(outcome.errors).toEqual(['Invalid app token.']);
      expect(report.attempts).toHaveLength(1);
      expect(sim.books().accrueRequests).toBe(1);
      expect(sim.books().transactions).toEqual({});
    });

    it('403 for the API key used as app token', async () => {
      const report = await client({ appToken: sim.apiKey }).accrue(accrueBody('generic:TOK2'));
      expect(expectKind(report, 'refused')).toMatchObject({ status: 403, errors: [expect.stringContaining('API key')] });
    });

    it('reverse of a transaction the service does not know: refused 400, 1 request', async () => {
      const report = await client().reverse({ transactionId: 'generic:NEVER' });
      const outcome = expectKind(report, 'refused');
      expect(outcome.status).toBe(400);
      expect(outcome.errors).toEqual(['transaction generic:NEVER not found']);
      expect(sim.books().reverseRequests).toBe(1);
    });
  });

  describe('HTTP 200 with failed results', () => {
    it('result_failure: results_failed, errorMessage kept, results kept', async () => {
      sim.faults.inject({ kind: 'result_failure', message: 'Card is blocked by the merchant' });
      const report = await client().accrue(accrueBody('generic:RF'));
      const outcome = expectKind(report, 'results_failed');
      expect(outcome.results).toHaveLength(1);
      expect(outcome.results[0]).toMatchObject({ isSuccess: false, errorMessage: 'Card is blocked by the merchant' });
      expect(outcome.errors).toHaveLength(1);
      expect(outcome.errors[0]).toContain('Card is blocked by the merchant');
      expect(outcome.errors[0]).toContain(outcome.results[0]!.serialNumber!);
      expect(report.attempts).toHaveLength(1);
      expect(sim.books().accrueRequests).toBe(1);
    });

    it('an unknown card serial: results_failed with "Card not found"', async () => {
      const report = await client().accrue(accrueBody('generic:SERIAL', { phone: undefined, serialNumber: '11-999999-9' }));
      const outcome = expectKind(report, 'results_failed');
      expect(outcome.errors).toEqual([expect.stringContaining('Card not found')]);
    });
  });

  describe('sent, no usable answer: unknown, never retried', () => {
    it('drop_before_commit: unknown after exactly 1 request, nothing booked', async () => {
      sim.faults.inject({ kind: 'drop_before_commit', times: 2 });
      const report = await client().accrue(accrueBody('generic:DB'));
      expectKind(report, 'unknown');
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]!.response).toBeUndefined();
      expect(report.attempts[0]!.error).toEqual(expect.any(String));
      // No wait was asked for: a dropped connection is never retried, so the count is final.
      expect(timer.asked).toEqual([]);
      expect(sim.books().accrueRequests).toBe(1);
      expect(sim.faults.pending()).toBe(1);
      expect(sim.books().transactions).toEqual({});
    });

    it('drop_after_commit: unknown after exactly 1 request, the accrual is booked once', async () => {
      sim.faults.inject({ kind: 'drop_after_commit', times: 2 });
      const report = await client().accrue(accrueBody('generic:DA'));
      expectKind(report, 'unknown');
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]!.response).toBeUndefined();
      expect(timer.asked).toEqual([]);
      const books = sim.books();
      expect(books.accrueRequests).toBe(1);
      expect(sim.faults.pending()).toBe(1);
      expect(books.transactions['generic:DA']).toMatchObject({ accruals: 1 });
      expect(books.doubleAccruals).toEqual([]);
    });

    it('drop on reverse: unknown after 1 request', async () => {
      await client().accrue(accrueBody('generic:DR'));
      sim.faults.inject({ kind: 'drop_after_commit', on: 'reverse' });
      const report = await client().reverse({ transactionId: 'generic:DR' });
      expectKind(report, 'unknown');
      expect(timer.asked).toEqual([]);
      expect(sim.books().reverseRequests).toBe(1);
      expect(sim.books().doubleReversals).toEqual([]);
    });

    it('slow_after_commit beyond the timeout: unknown, 1 request, committed in the books', async () => {
      sim.faults.inject({ kind: 'slow_after_commit', delayMs: 2000 });
      const started = Date.now();
      const report = await client({ timeoutMs: 300 }).accrue(accrueBody('generic:SLOW'));
      const elapsed = Date.now() - started;
      const outcome = expectKind(report, 'unknown');
      // A timeout ended the call (the request's deadline or axios's idle timer, both 300 ms, whichever
      // fires first): the answer, due at 2000 ms, would have been a success. So no upper bound on the
      // time taken is needed to know that the call did not wait for it.
      expect(outcome.reason).toMatch(/^(timeout: no answer within 300 ms|ECONNABORTED: timeout of 300ms exceeded)$/);
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(timer.asked).toEqual([]);
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]!.response).toBeUndefined();
      expect(report.attempts[0]!.error).toEqual(expect.any(String));
      expect(sim.books().accrueRequests).toBe(1);
      expect(sim.books().transactions['generic:SLOW']).toMatchObject({ accruals: 1 });
    });
  });

  describe('not sent', () => {
    it('connection refused: retryable, one logged attempt with the error', async () => {
      const port = await closedPort();
      const report = await client({ baseUrl: `http://127.0.0.1:${port}` }).accrue(accrueBody('generic:REFUSED'));
      const outcome = expectKind(report, 'retryable');
      expect(outcome.reason).toContain('ECONNREFUSED');
      expect(report.attempts).toHaveLength(1);
      expect(report.attempts[0]!.error).toContain('ECONNREFUSED');
      expect(report.attempts[0]!.response).toBeUndefined();
    });
  });
});

/** Answers that the simulator cannot produce, from a bare HTTP server. */
describe('LoyaltyClient against a misbehaving upstream', () => {
  let server: LocalServer;
  let url: string;
  let reply: (res: http.ServerResponse) => void = (res) => res.end();
  let requests = 0;

  beforeAll(async () => {
    server = await listenLocally((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => reply(res));
    });
    url = server.url;
  });
  afterAll(() => server.close());
  beforeEach(() => {
    requests = 0;
  });
  const client = () => new LoyaltyClient({ baseUrl: url, appToken: 't', timeoutMs: 300, retryBaseMs: 1, random: () => 0 });

  it('200 with a body that is not an accrue answer: unknown (it may have happened), 1 request', async () => {
    reply = (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>ok</html>');
    expectKind(await client().accrue(accrueBody('x')), 'unknown');
    expect(requests).toBe(1);
  });

  it('200 with no results: results_failed', async () => {
    reply = (res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ transactionId: 'x', results: [] }));
    const outcome = expectKind(await client().accrue(accrueBody('x')), 'results_failed');
    expect(outcome.errors).toEqual(['no card results in the answer']);
  });

  it('404 with an HTML body: refused 404, not retried', async () => {
    reply = (res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>');
    const outcome = expectKind(await client().reverse({ transactionId: 'x' }), 'refused');
    expect(outcome).toEqual({ kind: 'refused', status: 404, errors: ['HTTP 404'] });
    expect(requests).toBe(1);
  });

  it('a long HTML page is kept truncated in the attempt', async () => {
    reply = (res) => res.writeHead(429, { 'content-type': 'text/html' }).end(`<html>${'x'.repeat(5000)}</html>`);
    const report = await client().accrue(accrueBody('x'));
    expectKind(report, 'retryable');
    expect(requests).toBe(5);
    const body = report.attempts[0]!.response!.body as string;
    expect(body.length).toBeLessThanOrEqual(501);
  });
});

describe('merchants sharing one pool of sockets', () => {
  let server: LocalServer;
  /** Requests the server holds unanswered, by app token, and how to answer them. */
  const held: { token: string; answer: () => void }[] = [];
  let arrived: () => void = () => undefined;

  beforeAll(async () => {
    server = await listenLocally((req, res) => {
      req.resume();
      req.on('end', () => {
        const token = String(req.headers['x-app-token']);
        const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ transactionId: 'x', results: [{ isSuccess: true, errorMessage: null, serialNumber: '1', checkAmount: 1, accruedValue: 0, operationId: 1, createdAt: '2026-01-01T00:00:00Z', reversedAt: null }] }));
        // One merchant's app token hangs; the other's is answered at once.
        if (token === 'hanging') held.push({ token, answer });
        else answer();
        arrived();
      });
    });
  });
  afterAll(() => server.close());

  const arrivals = (count: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${held.length} requests held, waited for ${count}`)), 2000);
      arrived = () => {
        if (held.length >= count) {
          clearTimeout(timer);
          resolve();
        }
      };
      arrived();
    });

  it("one merchant's hanging calls take at most its share: another merchant's calls still find sockets", async () => {
    const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 4 }), https: sharedAgents().https };
    const options = { baseUrl: server.url, timeoutMs: 5000, retryBaseMs: 1, random: () => 0, agents, maxInFlight: 3 };
    const hanging = new LoyaltyClient({ ...options, appToken: 'hanging' });
    const healthy = new LoyaltyClient({ ...options, appToken: 'healthy' });
    const stuck = Array.from({ length: 6 }, (_, i) => hanging.accrue(accrueBody(`h-${i}`)));
    await arrivals(3);
    // Three of six are out (its share); the other three wait in its own queue, not on the pool.
    expect(held).toHaveLength(3);
    const fine = await Promise.all([healthy.accrue(accrueBody('ok-1')), healthy.accrue(accrueBody('ok-2'))]);
    expect(fine.map((r) => r.outcome.kind)).toEqual(['succeeded', 'succeeded']);
    // As its calls are answered, its waiting ones go out in turn.
    for (const h of held.splice(0)) h.answer();
    await arrivals(3);
    for (const h of held.splice(0)) h.answer();
    expect((await Promise.all(stuck)).map((r) => r.outcome.kind)).toEqual(Array(6).fill('succeeded'));
    agents.http.destroy();
  });
});

describe('LoyaltyClient history reads', () => {
  const DAY = '2026-03-10';
  let sim: Simulator;
  let server: LocalServer;
  let url: string;
  const seen: URL[] = [];

  beforeAll(async () => {
    sim = createSimulator({ now: () => new Date(`${DAY}T12:00:00Z`), templateIds: [1, 2] });
    // The simulator's app behind our own server, so every request the client makes is visible.
    server = await listenLocally((req, res) => {
      seen.push(new URL(req.url!, 'http://x'));
      sim.app(req, res);
    });
    url = server.url;
  });
  afterAll(() => server.close());
  beforeEach(() => {
    seen.length = 0;
  });

  /** `null`: no API key at all. */
  const client = (apiKey: string | null = sim.apiKey) =>
    new LoyaltyClient({ baseUrl: url, appToken: sim.appToken, ...(apiKey === null ? {} : { apiKey }), timeoutMs: 2000, retryBaseMs: 1, random: () => 0 });

  it('findCards by phone or email answers every card of the customer', async () => {
    const ann = sim.addCustomer({ phone: '+15550002222', email: 'Ann@Example.test' });
    sim.addCustomer({ phone: '+15550003333' });
    const c = client();
    expect(c.canVerify).toBe(true);
    const byPhone = await c.findCards({ phone: '+15550002222' });
    expect(byPhone.map((card) => card.id).sort()).toEqual([...ann.cardIds].sort());
    expect(byPhone.every((card) => card.customerId === ann.customerId)).toBe(true);
    const byEmail = await c.findCards({ email: 'ann@example.test' });
    expect(byEmail.map((card) => card.id).sort()).toEqual([...ann.cardIds].sort());
    expect(await c.findCards({ phone: '+19999999999' })).toEqual([]);
    expect(await c.findCards({})).toEqual([]);
    const cardRequests = seen.filter((u) => u.pathname === '/api/v2/cards');
    expect(cardRequests).toHaveLength(3);
    expect(cardRequests[0]!.searchParams.get('customerPhone')).toBe('+15550002222');
    expect(cardRequests[1]!.searchParams.get('customerEmail')).toBe('ann@example.test');
  });

  it('listOperations reads more than 1000 operations of one card whole: overlapping pages of at most 1000, read again until a pass adds nothing', async () => {
    const c = client();
    const phone = '+15550004444';
    const N = 1005;
    // One customer with two templates: each accrual credits both cards, so card 1 gets N operations.
    for (let i = 0; i < N; i += 100) {
      const batch = Array.from({ length: Math.min(100, N - i) }, (_, j) =>
        c.accrue(accrueBody(`generic:H-${i + j}`, { phone, check: { amount: 100 * (i + j + 1), currency: 'USD', selections: [{ quantity: 1, totalPrice: 100 * (i + j + 1) }] } })),
      );
      const reports = await Promise.all(batch);
      expect(reports.every((r) => r.outcome.kind === 'succeeded')).toBe(true);
    }
    const cards = await c.findCards({ phone });
    expect(cards).toHaveLength(2);
    const card = cards.find((k) => k.templateId === 1)!;
    // Another card's operations must not leak in.
    await c.accrue(accrueBody('generic:H-other', { phone: '+15550005555' }));

    seen.length = 0;
    const ops = await c.listOperations(card.id, DAY, DAY);
    expect(ops).toHaveLength(N);
    expect(new Set(ops.map((o) => o.id)).size).toBe(N);
    expect(ops.every((o) => o.cardId === card.id)).toBe(true);
    expect(ops.map((o) => o.purchaseSum).sort((a, b) => a! - b!)).toEqual(Array.from({ length: N }, (_, i) => i + 1));

    const opRequests = seen.filter((u) => u.pathname === '/api/v2/operations');
    // Two passes of overlapping pages (the second confirms the first): page 1 of 1000, then a page
    // starting at least 50 rows before where it ended.
    const asked = opRequests.map((u) => ({ page: Number(u.searchParams.get('page')), size: Number(u.searchParams.get('itemsPerPage')) }));
    expect(asked[0]).toEqual({ page: 1, size: 1000 });
    expect(asked).toHaveLength(4);
    for (const { page, size } of asked.slice(1)) {
      expect(size).toBeLessThanOrEqual(1000);
      if (page > 1) expect((page - 1) * size).toBeLessThanOrEqual(950);
    }
    for (const u of opRequests) {
      expect(u.searchParams.get('cardId')).toBe(card.id);
      expect(u.searchParams.get('startDate')).toBe(DAY);
      expect(u.searchParams.get('endDate')).toBe(DAY);
    }

    // A window that excludes the day: nothing, one request.
    seen.length = 0;
    expect(await c.listOperations(card.id, '2026-03-11', '2026-03-12')).toEqual([]);
    expect(seen.filter((u) => u.pathname === '/api/v2/operations')).toHaveLength(1);
  });

  it('without an API key the history cannot be read', async () => {
    const c = client(null);
    expect(c.canVerify).toBe(false);
    await expect(c.findCards({ phone: '+15550002222' })).rejects.toThrow(/API_KEY/);
    await expect(c.listOperations('11-100001-2', DAY, DAY)).rejects.toThrow(/API_KEY/);
    expect(seen).toHaveLength(0);
  });

  it('a wrong API key is an error, not an empty history', async () => {
    const c = client('wrong-key');
    await expect(c.listOperations('11-100001-2', DAY, DAY)).rejects.toThrow(/401/);
    await expect(c.findCards({ phone: '+15550002222' })).rejects.toThrow(/401/);
  });
});
