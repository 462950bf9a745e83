/**
 * Whether the loyalty service takes the bridge's credentials, asked the way onboarding asks it:
 * `resolve-credentials` with each active merchant's app token (a read: it books nothing and no
 * queued fault of the simulator applies to it). What it finds is what `/readyz` answers and what
 * start-up says (docs/configuration.md, "Ready means ready"):
 *
 * - the default merchant (the variables' `LOYALTY_APP_TOKEN`, at `LOYALTY_BASE_URL`) refused (401,
 *   403) or the address wrong (404, any other 4xx, a redirect, a 200 that is not the answer's JSON):
 *   **not ready**, with a line naming the variable to fix. That is this instance's configuration: a
 *   load balancer that leaves it out is right to, since the next checkout here would fail the same way.
 * - a created merchant refused (its install revoked): named with its id in `/readyz` and logged, but
 *   **still ready**: the same is true on every instance, so taking instances out of rotation would stop
 *   every other merchant's checkouts and fix nothing. Its own checkouts are recorded and refused.
 * - the loyalty service not answering (a timeout, a 5xx, 429s past the retries): ready, said so;
 *   checkouts are recorded durably and delivered once it answers, which is what the bridge is for.
 *
 * Cheap by construction: `/readyz` reads what the last checks found and never waits for one. A
 * round runs every `roundGapMs` (on a timer, and when `/readyz` finds a check stale), at most one at
 * a time, and asks only about stale checks (older than `freshMs`, or `failingMs` for one that
 * failed): the default merchant, then up to `perRound` created merchants (those that failed first,
 * then the next ones in creation order, going round). So the loyalty service sees at most
 * `perRound + 1` calls per `roundGapMs` from an instance, however often `/readyz` is asked; with
 * 3,000 merchants each is checked about every 50 minutes, with a few, every minute.
 */
import type { MerchantStore } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import type { CredentialsAnswer, LoyaltyClient } from '../loyalty/client.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import { unreachable } from '../kernel/unreachable.js';

export interface UpstreamCheckOptions {
  /** How long a check that found the credential taken stands (default 60 s). */
  freshMs: number;
  /** How long a check that failed stands before it is asked again (default 15 s): a fix shows soon. */
  failingMs: number;
  /** Created merchants checked per round, at most (default 10). */
  perRound: number;
  /** Rounds start at most this often (default 10 s). */
  roundGapMs: number;
  clock: () => number;
}

export const UPSTREAM_CHECK_DEFAULTS: Omit<UpstreamCheckOptions, 'clock'> = { freshMs: 60_000, failingMs: 15_000, perRound: 10, roundGapMs: 10_000 };

/** What one resolve-credentials answer says of a merchant's credential. */
export type CredentialVerdict =
  | { kind: 'ok' }
  /** 401/403: the app token is not (or no longer) an install of the point-of-sale app. */
  | { kind: 'refused'; detail: string }
  /** Not the loyalty service's API at that address: 404 and other 4xx, a redirect, a body that is not its JSON. */
  | { kind: 'wrong_address'; detail: string }
  /** No answer to judge by (network, timeout, 5xx, 429s): nothing is known to be wrong. */
  | { kind: 'unreachable'; detail: string };

export interface CredentialCheck {
  merchantId: string;
  verdict: CredentialVerdict;
  /** When the answer came. */
  at: number;
}

/** The readiness the `/readyz` route answers: `upstream` is its `checks.upstream` text, `register` its `checks.register`. */
export interface UpstreamReadiness {
  ready: boolean;
  upstream: string;
  /**
   * `ok`, or the merchants whose register is set up (a POS's register key) but who have no loyalty
   * API key: their registers are refused every guest search and points read. Never a reason to be
   * not ready: it is the same on every instance, and their sales still accrue.
   */
  register: string;
}

/** A merchant as a check sees it: its client, and whether a register of one of its POS accounts calls the bridge. */
interface CheckedMerchant {
  client: LoyaltyClient;
  pos?: Readonly<Record<string, { registerKey?: string }>>;
}

/** The subset of the merchant registry a check needs. */
export interface CheckedMerchants {
  readonly default: CheckedMerchant;
  get(id: string): Promise<({ status: 'active' | 'suspended' } & CheckedMerchant) | undefined>;
}

/** A register is set up for the merchant, and its card reads cannot be made (no API key). */
function registerCannotRead(merchant: CheckedMerchant): boolean {
  return !merchant.client.canVerify && Object.values(merchant.pos ?? {}).some((account) => account.registerKey);
}

/** Reads one resolve-credentials answer. */
export function credentialVerdict(answer: CredentialsAnswer): CredentialVerdict {
  if (answer.kind === 'resolved') return { kind: 'ok' };
  if (answer.kind === 'refused') {
    const detail = `${answer.status}: ${answer.errors.join('; ').slice(0, 200)}`;
    return answer.status === 401 || answer.status === 403 ? { kind: 'refused', detail } : { kind: 'wrong_address', detail };
  }
  // 200 with a body that is not `{credentials: [...]}` (a web page, another API), or a redirect.
  if (/answered 200 with an unexpected body|answered HTTP 3\d\d/.test(answer.reason)) return { kind: 'wrong_address', detail: answer.reason.replace(/^resolve-credentials /, '') };
  return { kind: 'unreachable', detail: answer.reason.replace(/^resolve-credentials:? /, '') };
}

/** A URL as it may be shown: without a user or password in it. */
function shown(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

/** The sentence that says what is wrong and what to change, naming the variable (default merchant) or the merchant. */
export function credentialProblem(check: CredentialCheck, baseUrl: string): string | undefined {
  const { verdict, merchantId } = check;
  const address = shown(baseUrl);
  switch (verdict.kind) {
    case 'ok':
      return undefined;
    case 'refused':
      return merchantId === DEFAULT_MERCHANT
        ? `LOYALTY_APP_TOKEN is refused by the loyalty service at ${address} (${verdict.detail}): it is not the app token of an install of the point-of-sale app, or the app was uninstalled; set LOYALTY_APP_TOKEN to the token the install gave`
        : `merchant ${merchantId}: its app token is refused by the loyalty service (${verdict.detail}): the app was uninstalled, or the token is not an install's; install it again and PATCH /v1/admin/merchants/${merchantId} {"loyalty":{"appToken":"…"}}, or suspend the merchant`;
    case 'wrong_address':
      return `LOYALTY_BASE_URL (${address}) does not lead to the loyalty service's API: POST ${address}/api/v2/marketplace/resolve-credentials answered ${verdict.detail}; set LOYALTY_BASE_URL to the service's address before /api/v2/ (the bridge adds /api/v2/ itself)${merchantId === DEFAULT_MERCHANT ? '' : ` (found checking merchant ${merchantId})`}`;
    case 'unreachable':
      return `the loyalty service at ${address} did not answer resolve-credentials${merchantId === DEFAULT_MERCHANT ? '' : ` for merchant ${merchantId}`} (${verdict.detail}): checkouts are recorded and delivered once it answers`;
    default:
      return unreachable(verdict);
  }
}

/** Is this verdict this instance's configuration, which no retry will fix? */
function blocksReadiness(check: CredentialCheck | undefined): boolean {
  return check !== undefined && (check.verdict.kind === 'wrong_address' || (check.merchantId === DEFAULT_MERCHANT && check.verdict.kind === 'refused'));
}

export class UpstreamCheck {
  readonly #options: UpstreamCheckOptions;
  #default?: CredentialCheck;
  /** Created merchants' last checks, by id: active ones only (a suspended merchant calls nothing upstream). */
  readonly #created = new Map<string, CredentialCheck>();
  /** Where in the merchants' creation order the next round goes on from. */
  #cursor = 0;
  #round?: Promise<void>;
  /** Merchants (checked so far) whose register cannot read cards: see UpstreamReadiness.register. */
  readonly #registerCannotRead = new Set<string>();
  #lastRoundAt = Number.NEGATIVE_INFINITY;
  #stopped = false;
  #timer?: NodeJS.Timeout;
  readonly #startedAt: number;

  constructor(
    private readonly merchants: CheckedMerchants,
    private readonly store: Pick<MerchantStore, 'listMerchants'>,
    private readonly logger: Logger,
    options: Partial<UpstreamCheckOptions> = {},
  ) {
    this.#options = { ...UPSTREAM_CHECK_DEFAULTS, clock: Date.now, ...options };
    this.#startedAt = this.#options.clock();
  }

  get baseUrl(): string {
    return this.merchants.default.client.options.baseUrl;
  }

  /** The default merchant's last check (undefined before its first answer). */
  get defaultCheck(): CredentialCheck | undefined {
    return this.#default;
  }

  /** Created merchants' last checks, in the order they were made. */
  get createdChecks(): CredentialCheck[] {
    return [...this.#created.values()];
  }

  /**
   * Start-up: one round (the default merchant, then the first created merchants), waited for at
   * most `deadlineMs`; a round still out then goes on in the background and says what it finds.
   */
  async start(deadlineMs: number): Promise<void> {
    // Rounds also come on a timer, so a change is logged when it happens even where nothing asks /readyz.
    this.#timer = setInterval(() => {
      if (this.#due()) void this.#startRound();
    }, this.#options.roundGapMs);
    this.#timer.unref();
    const round = this.#startRound();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([round, new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)))]);
    clearTimeout(timer);
  }

  /** One round now, waited for (tests; start-up goes through start()). */
  async refresh(): Promise<void> {
    await (this.#round ?? this.#startRound());
  }

  /** No round starts any more, and one under way stops before its next call or ledger read (the bridge is closing). */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
  }

  /** What /readyz answers: from the last checks, never waiting for one; a stale one starts a round in the background. */
  readiness(): UpstreamReadiness {
    return { ...this.#upstreamReadiness(), register: this.#registerReadiness() };
  }

  #registerReadiness(): string {
    const blind = [...(registerCannotRead(this.merchants.default) ? [DEFAULT_MERCHANT] : []), ...this.#registerCannotRead];
    if (blind.length === 0) return 'ok';
    const more = blind.length > 5 ? ` and ${blind.length - 5} more` : '';
    return `no loyalty API key, so their registers cannot find guests or show points (set loyalty.apiKey; LOYALTY_API_KEY for default): ${blind.slice(0, 5).join(', ')}${more}`;
  }

  #upstreamReadiness(): Omit<UpstreamReadiness, 'register'> {
    if (this.#due()) void this.#startRound();
    const at = (ms: number) => new Date(ms).toISOString();
    const own = this.#default;
    if (!own) return { ready: true, upstream: `checking: resolve-credentials has not answered yet (asked at ${at(this.#startedAt)})` };
    const refusedCreated = [...this.#created.values()].filter((c) => c.verdict.kind === 'refused');
    const wrongAddress = [...this.#created.values()].find((c) => c.verdict.kind === 'wrong_address');
    const blocking = blocksReadiness(own) ? own : blocksReadiness(wrongAddress) ? wrongAddress : undefined;
    if (blocking) return { ready: false, upstream: `failing: ${credentialProblem(blocking, this.baseUrl)!} (checked at ${at(blocking.at)})` };
    // Everything taken: exactly "ok", as before these checks (monitors match it). What was checked
    // when is said where something is wrong, beside what it is.
    const head = own.verdict.kind === 'unreachable' ? `unreachable: ${credentialProblem(own, this.baseUrl)!} (checked at ${at(own.at)})` : 'ok';
    if (refusedCreated.length === 0) return { ready: true, upstream: head };
    const checked = this.#created.size;
    const named = refusedCreated.slice(0, 5).map((c) => `${credentialProblem(c, this.baseUrl)!} (checked at ${at(c.at)})`);
    const more = refusedCreated.length > 5 ? `; and ${refusedCreated.length - 5} more` : '';
    return {
      ready: true,
      upstream: `${head}; refused for ${refusedCreated.length} of the ${checked} created merchant${checked === 1 ? '' : 's'} checked (the bridge stays ready for the others): ${named.join('; ')}${more}`,
    };
  }

  /** A check is stale, and no round is out or began within the gap. */
  #due(): boolean {
    const now = this.#options.clock();
    if (this.#stopped || this.#round || now - this.#lastRoundAt < this.#options.roundGapMs) return false;
    return this.#stale(this.#default, now) || [...this.#created.values()].some((c) => this.#stale(c, now)) || this.#cursor > 0 || this.#created.size === 0;
  }

  #stale(check: CredentialCheck | undefined, now: number): boolean {
    if (!check) return true;
    return now - check.at >= (check.verdict.kind === 'ok' ? this.#options.freshMs : this.#options.failingMs);
  }

  #startRound(): Promise<void> {
    this.#lastRoundAt = this.#options.clock();
    const round = this.#runRound()
      .catch((error: unknown) => {
        if (!this.#stopped) this.logger.error({ err: error }, 'checking the loyalty service credentials failed');
      })
      .finally(() => {
        this.#round = undefined;
        this.#lastRoundAt = this.#options.clock();
      });
    this.#round = round;
    return round;
  }

  async #runRound(): Promise<void> {
    const now = this.#options.clock();
    if (this.#stale(this.#default, now)) this.#default = this.#record(this.#default, await this.#check(DEFAULT_MERCHANT, this.merchants.default.client));
    // Created merchants: the failing ones due again first (a fix shows within failingMs), then the next in rotation.
    const budget = { left: this.#options.perRound };
    for (const check of [...this.#created.values()].filter((c) => c.verdict.kind !== 'ok' && this.#stale(c, now))) {
      if (budget.left-- <= 0 || this.#stopped) return;
      await this.#checkCreated(check.merchantId);
    }
    if (budget.left <= 0 || this.#stopped) return;
    const { items } = await this.store.listMerchants({ offset: this.#cursor, limit: budget.left });
    this.#cursor = items.length < budget.left ? 0 : this.#cursor + items.length;
    for (const stored of items) {
      if (this.#stopped) return;
      if (stored.status !== 'active') {
        this.#created.delete(stored.id);
        this.#registerCannotRead.delete(stored.id);
      } else if (this.#stale(this.#created.get(stored.id), now)) await this.#checkCreated(stored.id);
    }
  }

  async #checkCreated(id: string): Promise<void> {
    const merchant = await this.merchants.get(id).catch((error: unknown) => {
      this.logger.error({ merchantId: id, err: error }, 'merchant could not be loaded to check its credential');
      return undefined;
    });
    if (!merchant || merchant.status !== 'active') {
      this.#created.delete(id);
      this.#registerCannotRead.delete(id);
      return;
    }
    if (registerCannotRead(merchant)) this.#registerCannotRead.add(id);
    else this.#registerCannotRead.delete(id);
    this.#created.set(id, this.#record(this.#created.get(id), await this.#check(id, merchant.client)));
  }

  async #check(merchantId: string, client: LoyaltyClient): Promise<CredentialCheck> {
    const verdict = credentialVerdict(await client.resolveCredentials(['currency']));
    return { merchantId, verdict, at: this.#options.clock() };
  }

  /** Keeps `next`, saying so in the log when it differs in kind from `previous` (once per change, not every round). */
  #record(previous: CredentialCheck | undefined, next: CredentialCheck): CredentialCheck {
    if (previous?.verdict.kind === next.verdict.kind) return next;
    const problem = credentialProblem(next, this.baseUrl);
    const context = { merchantId: next.merchantId, verdict: next.verdict.kind };
    if (!problem) {
      if (previous) this.logger.info(context, 'the loyalty service takes the app token again');
    } else if (blocksReadiness(next)) {
      this.logger.error(context, `not ready: ${problem}`);
    } else if (next.verdict.kind === 'refused') {
      this.logger.error(context, problem);
    } else {
      this.logger.warn(context, problem);
    }
    return next;
  }
}
