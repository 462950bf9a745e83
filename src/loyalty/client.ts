/**
 * The loyalty service client. It speaks the point-of-sale group (`X-App-Token`) and, for verifying
 * in-doubt accruals only, the history endpoints (`X-API-Key`). Every call ends in one classified
 * outcome; nothing here decides ledger state.
 *
 * Retry policy, exactly the upstream's Errors rule 3: 429 (an HTML page from the front proxy, no
 * Retry-After) is retried after 1, 2, 4, 8 units with jitter: at most 4 retries, 5 requests in a
 * round. 5xx: at most 3 requests. Other 4xx: never retried. A timeout or a connection lost after
 * the request was sent is never retried: no operation is idempotent, so the outcome is unknown and
 * must be verified before anything is sent again.
 */
import http from 'node:http';
import https from 'node:https';
import axios, { AxiosError, type AxiosInstance, type AxiosRequestConfig, type AxiosResponse, type InternalAxiosRequestConfig } from 'axios';
import axiosRetry from 'axios-retry';
import { z } from 'zod';
import { backoffMs, DOUBLING } from '../kernel/backoff.js';
import type { Attempt, UpstreamOperation } from './calls.js';
import { operationsOfCard } from './history-reader.js';
import {
  AccrualResult,
  Card,
  CardWithOwner,
  RegisterCardBody,
  Credential,
  MAX_ITEMS_PER_PAGE,
  Operation,
  PageMeta,
  PosErrorBody,
  PosResponse,
  envelopeList,
  envelopeOne,
  type AccrueRequest,
  type OperationsQuery,
  type ReverseRequest,
} from './contract.js';

export type CallOutcome =
  /** HTTP 200 and every per-card result has `isSuccess: true`. */
  | { kind: 'succeeded'; results: AccrualResult[] }
  /** HTTP 200 with no results or at least one `isSuccess: false`; each `errorMessage` is kept. */
  | { kind: 'results_failed'; results: AccrualResult[]; errors: string[] }
  /** 400 / 403 / other 4xx: the loyalty service refused; sending the same again cannot help. */
  | { kind: 'refused'; status: number; errors: string[] }
  /** Provably not carried out (429, 5xx, connection refused) and the round's retries are spent. */
  | { kind: 'retryable'; reason: string }
  /** Sent, but no usable answer: it may or may not have happened upstream. */
  | { kind: 'unknown'; reason: string };

export interface CallReport {
  outcome: CallOutcome;
  attempts: Attempt[];
}

export interface LoyaltyClientOptions {
  baseUrl: string;
  appToken: string;
  apiKey?: string;
  timeoutMs: number;
  retryBaseMs: number;
  random?: () => number;
  /**
   * How the back-off between retries waits (by default a real timer). Tests give one that records
   * each delay asked of it and ends at once, so the 1, 2, 4, 8 units are asserted exactly rather
   * than timed.
   */
  sleep?: (ms: number) => Promise<void>;
  /**
   * Connection pools shared by every merchant's client (one client per app token): a thousand
   * merchants must not mean a thousand pools of idle sockets to the same host.
   */
  agents?: { http: http.Agent; https: https.Agent };
  /**
   * Requests of this client out at once, at most (further ones wait their turn here, before they
   * are sent). With shared pools, one merchant whose calls hang (the loyalty service slow for its
   * app token alone) would otherwise hold every socket, and every other merchant's calls would
   * queue behind its timeouts; capped below the pool, a share of it is always left to the others.
   */
  maxInFlight?: number;
  /** Told of every request (retries included) once it is answered or fails: the latency histogram. */
  onRequest?: (sample: UpstreamRequestSample) => void;
}

/** One request to the loyalty service, as the metrics see it. */
export interface UpstreamRequestSample {
  /** accrue, reverse, resolve_credentials, operations, cards, card (one card by its serial), other. */
  operation: string;
  /** ok (2xx), refused (another 4xx), rate_limited (429), server_error (5xx), timeout, network. */
  outcome: 'ok' | 'refused' | 'rate_limited' | 'server_error' | 'timeout' | 'network';
  seconds: number;
}

/**
 * The operation a request's path names, from a fixed set: it labels a metric served without a
 * token, so a path's own values (a card serial, or a phone typed where a serial goes) never become
 * a label, and the labels stay few.
 */
function operationOf(url: string | undefined): string {
  const path = (url ?? '').split('?')[0]!;
  if (/^\/api\/v2\/cards\/[^/]+$/.test(path)) return 'card';
  const last = path.split('/').filter(Boolean).at(-1) ?? 'unknown';
  const operation = last.replace(/-/g, '_');
  return KNOWN_OPERATIONS.has(operation) ? operation : 'other';
}

const KNOWN_OPERATIONS: ReadonlySet<string> = new Set(['accrue', 'reverse', 'resolve_credentials', 'operations', 'cards']);

function outcomeOf(response: AxiosResponse | undefined, error: AxiosError | undefined): UpstreamRequestSample['outcome'] {
  if (response) return response.status === 429 ? 'rate_limited' : response.status >= 500 ? 'server_error' : response.status >= 400 ? 'refused' : 'ok';
  const code = error?.code ?? '';
  return code === 'ECONNABORTED' || code === 'ETIMEDOUT' || code === 'ERR_CANCELED' || error?.name === 'CanceledError' ? 'timeout' : 'network';
}

/** Sockets to the loyalty service in each shared pool. */
export const SHARED_SOCKETS = 64;
/** One merchant's requests at most (LoyaltyClientOptions.maxInFlight): three quarters of the pool, a quarter always left to the others. */
export const MERCHANT_SOCKET_SHARE = 48;

/** One keep-alive pool per protocol: SHARED_SOCKETS sockets to the loyalty service, shared by the clients given it. */
export function sharedAgents(): { http: http.Agent; https: https.Agent } {
  return { http: new http.Agent({ keepAlive: true, maxSockets: SHARED_SOCKETS }), https: new https.Agent({ keepAlive: true, maxSockets: SHARED_SOCKETS }) };
}

/** At most `limit` tasks running at once; the rest start in the order they came. */
class Gate {
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.limit) await new Promise<void>((start) => this.#waiting.push(start));
    else this.#running++;
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiting task, if any.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

/** What `resolve-credentials` answered (a read: no fault makes it uncertain). */
export type CredentialsAnswer =
  | { kind: 'resolved'; credentials: Credential[] }
  /** 403: the app token is not an install of the point-of-sale app (or no longer is). */
  | { kind: 'refused'; status: number; errors: string[] }
  | { kind: 'failed'; reason: string };

/** Socket errors raised before a byte was sent: the upstream cannot have acted. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const MAX_429_RETRIES = 4;
const MAX_5XX_REQUESTS = 3;
/** Non-JSON bodies (proxy HTML pages) are kept in the ledger only this long. */
const MAX_TEXT_BODY = 500;

/** A class, not a plain object: axios deep-copies plain objects in request config, which would detach the log. */
class AttemptLog {
  readonly attempts: Attempt[] = [];
  startedAt?: number;
  constructor(readonly operation: UpstreamOperation) {}
}
type TrackedConfig = InternalAxiosRequestConfig & { attemptLog?: AttemptLog; sentAtMs?: number };
declare module 'axios' {
  interface AxiosRequestConfig {
    attemptLog?: AttemptLog;
    /** When this request (this retry) went out: the latency sample's start. */
    sentAtMs?: number;
    /** A deadline shorter than LOYALTY_TIMEOUT_MS for this request (a register's read within its budget). */
    deadlineMs?: number;
  }
}

/** What a register shows of one card: its serial, template, points, balance and owner's names (contract v1.5 "At the register"). */
export interface RegisterCard {
  serialNumber: string;
  templateId?: number;
  /** The card's points (`balance.bonusBalance`), when it has them. */
  pointsBalance?: number;
  /** The card's balance object as the loyalty service gives it. */
  balance: Record<string, unknown>;
  customer: { firstName?: string; surname?: string; phone?: string; email?: string };
}

/**
 * A register's read the loyalty service did not answer within its budget: rate-limited (a 429,
 * never waited out here: a cashier is waiting), timed out, failing (5xx, a network error, an
 * answer it cannot read), or not possible (no API key).
 */
export class RegisterReadError extends Error {
  constructor(
    readonly reason: 'rate_limited' | 'timeout' | 'unavailable' | 'no_api_key',
    message: string,
  ) {
    super(message);
    this.name = 'RegisterReadError';
  }
}

function registerCardOf(card: z.infer<typeof RegisterCardBody>): RegisterCard {
  const owner = card.customer;
  const customer = {
    ...(owner?.firstName ? { firstName: owner.firstName } : {}),
    ...(owner?.surname ? { surname: owner.surname } : {}),
    ...(owner?.phone ? { phone: owner.phone } : {}),
    ...(owner?.email ? { email: owner.email } : {}),
  };
  const points = card.balance?.bonusBalance;
  return { serialNumber: card.id, ...(card.templateId !== undefined ? { templateId: card.templateId } : {}), ...(typeof points === 'number' ? { pointsBalance: points } : {}), balance: { ...(card.balance ?? {}) }, customer };
}

export class LoyaltyClient {
  readonly #http: AxiosInstance;
  readonly #apiKey?: string;
  readonly #gate?: Gate;

  constructor(readonly options: LoyaltyClientOptions) {
    this.#apiKey = options.apiKey;
    this.#gate = options.maxInFlight ? new Gate(options.maxInFlight) : undefined;
    this.#http = axios.create({
      baseURL: options.baseUrl,
      timeout: options.timeoutMs,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-App-Token': options.appToken },
      // Statuses are classified here, not thrown; only network failures reject.
      validateStatus: () => true,
      // Bodies are parsed by `parseBody` so an HTML 429 page stays text.
      transformResponse: (data: unknown) => data,
      // The point-of-sale endpoints answer; they never redirect a POST, so no redirect-following layer.
      maxRedirects: 0,
      httpAgent: options.agents?.http ?? new http.Agent({ keepAlive: true, maxSockets: SHARED_SOCKETS }),
      httpsAgent: options.agents?.https ?? new https.Agent({ keepAlive: true, maxSockets: SHARED_SOCKETS }),
    });
    const observe = (config: TrackedConfig, response: AxiosResponse | undefined, error: AxiosError | undefined) =>
      options.onRequest?.({ operation: operationOf(config.url), outcome: outcomeOf(response, error), seconds: (Date.now() - (config.sentAtMs ?? Date.now())) / 1000 });
    this.#http.interceptors.request.use((config: TrackedConfig) => {
      config.sentAtMs = Date.now();
      if (config.attemptLog) config.attemptLog.startedAt = config.sentAtMs;
      // A hard deadline for each request (retries included, each gets its own): axios's `timeout`
      // only fires on an idle socket, and a round must end well inside the in-flight lease.
      config.signal = AbortSignal.timeout(Math.min(options.timeoutMs, config.deadlineMs ?? Infinity));
      return config;
    });
    // Registered before axios-retry's interceptor so every single request is logged, retries included.
    this.#http.interceptors.response.use(
      (response) => {
        logAttempt(response.config as TrackedConfig, response, undefined);
        observe(response.config as TrackedConfig, response, undefined);
        if (shouldRetryStatus(response)) throw new RetryableStatus(response);
        return response;
      },
      (error: AxiosError) => {
        if (error.config && !(error instanceof RetryableStatus)) {
          logAttempt(error.config as TrackedConfig, undefined, error);
          observe(error.config as TrackedConfig, undefined, error);
        }
        throw error;
      },
    );
    const random = options.random ?? Math.random;
    const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    axiosRetry(this.#http, {
      retries: MAX_429_RETRIES,
      shouldResetTimeout: true,
      retryCondition: (error) => {
        if (!(error instanceof RetryableStatus)) return false;
        const done = error.config?.['axios-retry']?.retryCount ?? 0;
        return error.response!.status === 429 || done + 1 < MAX_5XX_REQUESTS;
      },
      // The back-off is waited out in onRetry, through `sleep`, so axios-retry's own timer waits nothing.
      retryDelay: () => 0,
      // 1, 2, 4, 8 units, each stretched by up to 20% of jitter so stores do not retry in step.
      onRetry: (retryCount) => sleep(backoffMs(DOUBLING, options.retryBaseMs, retryCount) * (1 + 0.2 * random())),
    });
  }

  /** Through this client's share of the pool (`maxInFlight`), when it has one. */
  #send<T>(request: () => Promise<T>): Promise<T> {
    return this.#gate ? this.#gate.run(request) : request();
  }

  get canVerify(): boolean {
    return this.#apiKey !== undefined;
  }

  accrue(body: AccrueRequest): Promise<CallReport> {
    return this.#posCall('accrue', body);
  }

  reverse(body: ReverseRequest): Promise<CallReport> {
    return this.#posCall('reverse', body);
  }

  /**
   * The merchant's own settings, as the install holds them (`resolve-credentials`; all of them when
   * `names` is empty). A 429 or 5xx is retried as the point-of-sale calls are; a 4xx is a refusal.
   */
  async resolveCredentials(names: string[] = []): Promise<CredentialsAnswer> {
    try {
      const response = await this.#send(() => this.#http.post('/api/v2/marketplace/resolve-credentials', { names }));
      const body = parseBody(response);
      if (response.status === 200) {
        const parsed = z.object({ credentials: z.array(Credential) }).safeParse(body);
        return parsed.success ? { kind: 'resolved', credentials: parsed.data.credentials } : { kind: 'failed', reason: 'resolve-credentials answered 200 with an unexpected body' };
      }
      const errors = PosErrorBody.safeParse(body);
      if (response.status >= 400 && response.status < 500) return { kind: 'refused', status: response.status, errors: errors.success ? errors.data.errors : [`HTTP ${response.status}`] };
      return { kind: 'failed', reason: `resolve-credentials answered HTTP ${response.status}` };
    } catch (error) {
      if (error instanceof RetryableStatus) return { kind: 'failed', reason: `resolve-credentials answered HTTP ${error.response!.status}, retries spent` };
      return { kind: 'failed', reason: `resolve-credentials: ${(error as Error).message}` };
    }
  }

  /** Cards of a customer found by phone or email (history verification; needs the API key). */
  async findCards(query: { phone?: string; email?: string }): Promise<Card[]> {
    const params: Record<string, string> = {};
    if (query.phone) params.customerPhone = query.phone;
    else if (query.email) params.customerEmail = query.email;
    else return [];
    return this.#listAll('/api/v2/cards', params, Card);
  }

  /**
   * The phone and email of the customer a card belongs to (GET /api/v2/cards/{id}, the card's
   * serial; needs the API key), for a customer search by card serial: the records of a customer the
   * POS named by phone or email are found by the card too. Undefined when the service has no such card (404).
   */
  async cardOwner(serial: string): Promise<{ phone?: string; email?: string } | undefined> {
    // Named without the serial in errors: it is what an operator typed, and may be a phone.
    const named = 'GET /api/v2/cards/{id}';
    const response = await this.#keyed(`/api/v2/cards/${encodeURIComponent(serial)}`, named);
    if (response.status === 404) return undefined;
    if (response.status !== 200) throw new Error(`${named} answered ${response.status}`);
    const parsed = envelopeOne(CardWithOwner).safeParse(parseBody(response));
    if (!parsed.success) throw new Error(`${named} answered an unexpected body: ${parsed.error.issues[0]?.message}`);
    const owner = parsed.data.data.customer;
    return { ...(owner?.phone ? { phone: owner.phone } : {}), ...(owner?.email ? { email: owner.email } : {}) };
  }

  /**
   * The cards of the customer with this phone or email, for a register (SEARCH, a lookup): one
   * request with the API key, no retry, answered within `budgetMs` or a RegisterReadError.
   */
  async registerCards(query: { phone?: string; email?: string }, budgetMs: number): Promise<RegisterCard[]> {
    const params: Record<string, string> | undefined = query.phone ? { customerPhone: query.phone } : query.email ? { customerEmail: query.email } : undefined;
    if (!params) return [];
    const response = await this.#registerGet('/api/v2/cards', { ...params, page: 1, itemsPerPage: MAX_ITEMS_PER_PAGE }, budgetMs);
    const parsed = envelopeList(RegisterCardBody).safeParse(parseBody(response));
    if (!parsed.success) throw new RegisterReadError('unavailable', 'GET /api/v2/cards answered a body that is not a list of cards');
    return parsed.data.data.map(registerCardOf);
  }

  /** One card by its serial, for a register (INQUIRE, a lookup); undefined when the service has none (404). As `registerCards`. */
  async registerCard(serial: string, budgetMs: number): Promise<RegisterCard | undefined> {
    const response = await this.#registerGet(`/api/v2/cards/${encodeURIComponent(serial)}`, undefined, budgetMs, true);
    if (response.status === 404) return undefined;
    const parsed = envelopeOne(RegisterCardBody).safeParse(parseBody(response));
    if (!parsed.success) throw new RegisterReadError('unavailable', 'GET /api/v2/cards/{id} answered a body that is not a card');
    return registerCardOf(parsed.data.data);
  }

  /**
   * A register's GET: with the API key, once (a cashier is waiting: a 429 is not waited out), and
   * answered within `budgetMs` however long this client's share of the pool is queued. Errors never
   * name the path's values (a serial may be a phone typed where it goes).
   */
  async #registerGet(path: string, params: Record<string, string | number> | undefined, budgetMs: number, notFoundIsAnswer = false): Promise<AxiosResponse> {
    if (!this.#apiKey) throw new RegisterReadError('no_api_key', "the loyalty service's cards cannot be read without the merchant's API key (loyalty.apiKey)");
    const deadline = Date.now() + budgetMs;
    const named = path.startsWith('/api/v2/cards/') ? 'GET /api/v2/cards/{id}' : `GET ${path}`;
    let timer: NodeJS.Timeout | undefined;
    const outOfTime = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RegisterReadError('timeout', `${named}: no answer within ${budgetMs} ms`)), budgetMs);
      timer.unref();
    });
    const sent = this.#send(() => {
      const left = deadline - Date.now();
      if (left <= 0) return Promise.reject(new RegisterReadError('timeout', `${named}: no answer within ${budgetMs} ms`));
      return this.#http.get(path, { ...(params ? { params } : {}), headers: { 'X-API-Key': this.#apiKey, 'X-App-Token': undefined }, 'axios-retry': { retries: 0 }, deadlineMs: left });
    });
    try {
      const response = await Promise.race([sent, outOfTime]);
      if (response.status === 200 || (notFoundIsAnswer && response.status === 404)) return response;
      throw new RegisterReadError('unavailable', `${named} answered ${response.status}`);
    } catch (error) {
      if (error instanceof RegisterReadError) throw error;
      if (error instanceof RetryableStatus) {
        const status = error.response!.status;
        throw new RegisterReadError(status === 429 ? 'rate_limited' : 'unavailable', `${named} answered ${status}${status === 429 ? ' (rate-limited)' : ''}`);
      }
      const code = (error as AxiosError).code ?? '';
      throw new RegisterReadError(code === 'ERR_CANCELED' || code === 'ECONNABORTED' ? 'timeout' : 'unavailable', `${named}: ${code === 'ERR_CANCELED' ? `no answer within ${budgetMs} ms` : code || (error as Error).message}`);
    } finally {
      clearTimeout(timer);
      // A request the budget gave up on still ends (its deadline is the budget's): nothing is left hanging.
      sent.catch(() => undefined);
    }
  }

  /**
   * Every operation of a card between two UTC dates (inclusive). One page holds most cards' days
   * (1000 rows). A longer list can move while it is paged (no cursor, no declared order: upstream
   * Limits), and an operation the verifier does not see would let it call an accrual that happened
   * "not accrued" and send it again: so it is read as the three-way report reads the history
   * (overlapping pages, deduplicated by id, read again until a pass adds nothing), and a list that
   * never holds still is an error (the record stays in doubt) rather than an answer.
   */
  async listOperations(cardId: string, startDate: string, endDate: string): Promise<Operation[]> {
    return operationsOfCard(this, cardId, startDate, endDate);
  }

  /**
   * One page of the operations history as it stands (the standard envelope's `data` and `meta`).
   * For readers that page themselves (the three-way report reads a list that may move between pages):
   * a 429 is retried here as every call of this client is (1, 2, 4, 8 units), and what is left of it
   * after that, or any other status, throws.
   */
  async operationsPage(query: OperationsQuery, page: number, itemsPerPage: number): Promise<{ data: Operation[]; meta: z.infer<typeof PageMeta> }> {
    return this.#page('/api/v2/operations', { ...query }, Operation, page, itemsPerPage);
  }

  async #listAll<T extends z.ZodType>(path: string, params: Record<string, string>, item: T): Promise<z.infer<T>[]> {
    const all: z.infer<T>[] = [];
    // meta has no totalPages: the last page is ceil(totalItems / itemsPerPage) (upstream Limits).
    for (let page = 1; ; page++) {
      const { data, meta } = await this.#page(path, params, item, page, MAX_ITEMS_PER_PAGE);
      all.push(...data);
      if (page >= Math.ceil(meta.totalItems / meta.itemsPerPage) || data.length === 0) return all;
    }
  }

  async #page<T extends z.ZodType>(path: string, params: Record<string, string>, item: T, page: number, itemsPerPage: number): Promise<{ data: z.infer<T>[]; meta: z.infer<typeof PageMeta> }> {
    const response = await this.#keyed(path, `GET ${path}`, { ...params, page, itemsPerPage });
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`);
    const parsed = envelopeList(item).safeParse(parseBody(response));
    if (!parsed.success) throw new Error(`GET ${path} answered an unexpected body: ${parsed.error.issues[0]?.message}`);
    return { data: parsed.data.data as z.infer<T>[], meta: parsed.data.meta };
  }

  /**
   * A GET with the API key (every endpoint but the three point-of-sale ones), retried as every call
   * of this client is; `named`: how errors name it. Answers any status the retries leave; a 429 or
   * 5xx still there after them throws.
   */
  async #keyed(path: string, named: string, params?: Record<string, string | number>): Promise<AxiosResponse> {
    if (!this.#apiKey) throw new Error('LOYALTY_API_KEY is not set: the history and cards cannot be read');
    try {
      return await this.#send(() => this.#http.get(path, { ...(params ? { params } : {}), headers: { 'X-API-Key': this.#apiKey, 'X-App-Token': undefined } }));
    } catch (error) {
      if (error instanceof RetryableStatus) throw new Error(`${named} answered ${error.response!.status}, retries spent`);
      throw error;
    }
  }

  async #posCall(operation: UpstreamOperation, body: AccrueRequest | ReverseRequest): Promise<CallReport> {
    const attemptLog = new AttemptLog(operation);
    let outcome: CallOutcome;
    try {
      const response = await this.#send(() => this.#http.post(`/api/v2/marketplace/${operation}`, body, { attemptLog } as AxiosRequestConfig));
      outcome = classifyResponse(response);
    } catch (error) {
      outcome = classifyError(error, this.options.timeoutMs);
    }
    return { outcome, attempts: attemptLog.attempts };
  }
}

class RetryableStatus extends AxiosError {
  constructor(response: AxiosResponse) {
    super(`loyalty service answered ${response.status}`, 'ERR_BAD_RESPONSE', response.config, response.request, response);
  }
}

function shouldRetryStatus(response: AxiosResponse): boolean {
  return response.status === 429 || response.status >= 500;
}

function classifyResponse(response: AxiosResponse): CallOutcome {
  const body = parseBody(response);
  if (response.status === 200) {
    const parsed = PosResponse.safeParse(body);
    // A 200 we cannot read may still have been carried out: unknown, never "failed".
    if (!parsed.success) return { kind: 'unknown', reason: 'HTTP 200 with a body that is not an accrue/reverse answer' };
    const { results } = parsed.data;
    const failures = results.filter((r) => !r.isSuccess);
    if (results.length > 0 && failures.length === 0) return { kind: 'succeeded', results };
    const errors = results.length === 0 ? ['no card results in the answer'] : failures.map((r) => `${r.serialNumber ?? 'card'}: ${r.errorMessage ?? 'failed without a message'}`);
    return { kind: 'results_failed', results, errors };
  }
  if (response.status >= 400 && response.status < 500) {
    const parsed = PosErrorBody.safeParse(body);
    return { kind: 'refused', status: response.status, errors: parsed.success ? parsed.data.errors : [`HTTP ${response.status}`] };
  }
  return { kind: 'unknown', reason: `unexpected HTTP ${response.status}` };
}

function classifyError(error: unknown, timeoutMs: number): CallOutcome {
  if (error instanceof RetryableStatus) return { kind: 'retryable', reason: `HTTP ${error.response!.status}, retries of this round spent` };
  const code = (error as AxiosError).code ?? '';
  // Only the request's own deadline cancels it (nothing else here aborts a request).
  if (code === 'ERR_CANCELED') return { kind: 'unknown', reason: `timeout: no answer within ${timeoutMs} ms` };
  const message = (error as Error).message ?? String(error);
  if (NOT_SENT_CODES.has(code)) return { kind: 'retryable', reason: `${code}: not sent` };
  return { kind: 'unknown', reason: code ? `${code}: ${message}` : message };
}

function parseBody(response: AxiosResponse): unknown {
  const data = response.data;
  if (typeof data !== 'string') return data;
  try {
    return JSON.parse(data);
  } catch {
    return data.length > MAX_TEXT_BODY ? `${data.slice(0, MAX_TEXT_BODY)}…` : data;
  }
}

function logAttempt(config: TrackedConfig, response: AxiosResponse | undefined, error: AxiosError | undefined): void {
  const log = config.attemptLog;
  if (!log) return;
  const finishedAt = Date.now();
  log.attempts.push({
    operation: log.operation,
    startedAt: new Date(log.startedAt ?? finishedAt).toISOString(),
    finishedAt: new Date(finishedAt).toISOString(),
    request: typeof config.data === 'string' ? safeJson(config.data) : config.data,
    ...(response ? { response: { status: response.status, body: parseBody(response) } } : {}),
    ...(error ? { error: error.code ? `${error.code}: ${error.message}` : error.message } : {}),
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
