/**
 * From a POS's own payload to intake: translate with the POS's adapter, fill in
 * the customer from the POS's API where the payload only names one, and for webhooks verify the
 * signature, attribute each part of the delivery to the merchant it names, deduplicate on the POS's
 * event identity, fetch id-only objects, and keep what cannot be carried out as a dead letter.
 * Used by `/v1/checkouts|refunds|webhooks/{pos}` and by replays.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { withMerchant } from '../kernel/log-context.js';
import { hasContact } from '../kernel/customer.js';
import { BridgeError, ConflictError, echoed, NotFoundError, ValidationError, type FieldIssue } from '../kernel/errors.js';
import { parseJsonBody } from '../kernel/json-body.js';
import { FINAL_STATUSES, type LedgerStatus } from '../state/record.js';
import { accountKey, DEFAULT_MERCHANT } from '../state/merchant.js';
import type { DeadLetter, DeadLetterStore, WebhookEventStore } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import { KeyedMutex } from '../kernel/keyed-mutex.js';
import type { AdapterContext, CheckoutIntent, PosAdapter, PosApi, PosObjectRef, PosSettings, RefundIntent, WebhookAction, WebhookPart, WebhookSpec } from '../pos/contract.js';
import { isObjectRefusal, posApi, PosApiError, PosApiNotConfiguredError, PosObjectRefusedError } from '../pos/api.js';
import { canonicalHeaders } from '../webhooks/headers.js';
import { singleHeader, verifySignature } from '../webhooks/signature.js';
import type { Answer } from './answer.js';
import type { DeadLetterRunner } from './dead-letter-retry.js';
import { afterRun, claimForRun, keep, keepCause, passesByItself, type DeadLetterRetryPolicy, type KeepCause, type RunResult } from './dead-letter-transitions.js';
import type { IntakeService } from './intake.js';
import { headersToKeep, keptPayload, storedBody, type Arrival } from './arrival.js';
import { isSuspended } from '../state/merchant.js';

export interface WebhookResult {
  key: string;
  action: 'checkout' | 'refund' | 'ignored' | 'dead_lettered';
  merchantId?: string;
  deadLetterId?: string;
  duplicate?: boolean;
  reason?: string;
  /** dead_lettered for a payload the bridge cannot translate: each field and why. */
  issues?: FieldIssue[];
  /** dead_lettered with a transient cause: when the bridge runs the letter again by itself. */
  retryAt?: string;
  transactionId?: string;
  status?: LedgerStatus;
}

/** What kept one dead letter in one run of a delivery: its cause, and whether it may pass by itself. */
export interface KeptLetter {
  letterId: string;
  reason: string;
  issues?: FieldIssue[];
  transient: boolean;
}

export interface WebhookOutcome {
  pos: string;
  results: WebhookResult[];
  /** Some action is still being delivered in the background, or was kept as a dead letter (the POS is answered 202). */
  inProgress: boolean;
  /** The dead letters this run kept (or, run from a dead letter, failed again), each with its cause. */
  kept: KeptLetter[];
}

/**
 * Authentic deliveries the bridge cannot carry out now, kept whole as dead letters and answered
 * 2xx: payloads it cannot translate, a POS API it has no token for or that failed, and refunds it
 * must refuse (more than remains, an order it never saw, a refund whose earlier reversal was
 * refused). A 4xx or 5xx would make the POS deliver it again and again (Square for 24 h, Shopify 8
 * times in 4 h), then drop it or disable the subscription (Shopify, Toast): what the bridge cannot
 * do now is the bridge's to keep, not the POS's to repeat.
 */
function isKept(error: unknown): error is BridgeError {
  if (error instanceof ValidationError || error instanceof PosApiNotConfiguredError || error instanceof PosApiError) return true;
  return error instanceof BridgeError && (error.status === 404 || error.status === 409) && error.code !== 'unknown_pos';
}

/** One action (or a whole part) of a delivery that could not be carried out, under the key its result is given. */
interface Failure {
  key: string;
  error: BridgeError;
}

/** A dead letter run again: its signature was checked when it arrived; it keeps its merchant and its id. */
export interface WebhookReplay {
  merchantId?: string;
  letterId: string;
}

/** How ingest keeps and runs dead letters. `owner`: this instance, as named in the claims it takes. */
export type DeadLetterOptions = DeadLetterRetryPolicy & { owner: string };

/** A fetched object may itself be id-only or need another fetch; this bounds the chain. */
const MAX_FETCH_DEPTH = 3;

/**
 * An authentic delivery with no body at all: kept as a dead letter like any delivery the bridge
 * cannot read, and the answer says so in plain words. Shopify's own library refuses such a
 * delivery outright (missing_body); keeping it lets a person see what arrived.
 */
const EMPTY_BODY = 'empty body: the delivery is authentic (its signature matches) but carries nothing to act on; kept as a dead letter';

/**
 * A read of the POS's API that a direct post asked for. The POS answering that the object the post
 * names is not the merchant's (404, 410: another merchant's order) or not one it can read (400) is
 * the sender's to fix: a 422 naming the object, which the POS does not retry. Anything else (a
 * timeout, 429 or 5xx, or the bridge's own token refused, 401 or 403, which an operator fixes)
 * stays a 502: nothing was recorded, and the sender posts it again.
 */
async function readForDirectPost<T>(pos: string, object: PosObjectRef, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof PosApiError && error.posStatus !== undefined && isObjectRefusal(error.posStatus)) throw new PosObjectRefusedError(pos, object, error.posStatus);
    throw error;
  }
}

/** The merchants ingest needs to know of (the merchant registry). */
export interface MerchantDirectory {
  get(id: string): Promise<IngestMerchant | undefined>;
  byAccount(pos: string, account: string | undefined): Promise<IngestMerchant | undefined>;
  /** The only account configured on this POS across the bridge; undefined when there is none or there are several. */
  onlyAccount(pos: string): Promise<string | undefined>;
  /** The POS apps' own settings (webhook secrets, addresses): the same for every merchant. */
  readonly default: IngestMerchant;
}

/** What ingest reads of a merchant. */
export interface IngestMerchant {
  id: string;
  status: 'active' | 'suspended';
  context: AdapterContext;
  pos: Record<string, PosSettings>;
}

/** 403: a suspended merchant's direct posts are refused (its webhooks are kept as dead letters). */
export class MerchantSuspendedError extends BridgeError {
  constructor(merchantId: string) {
    super(`merchant ${merchantId} is suspended: nothing is recorded or sent for it until it is active again`, 403, 'merchant_suspended');
  }
}

/** A delivery's part that names no merchant the bridge serves (kept as a dead letter, answered 2xx). */
class UnknownMerchantError extends BridgeError {
  constructor(pos: string, account: string | undefined) {
    super(account ? `no merchant has the ${pos} account ${JSON.stringify(echoed(account))}` : `the ${pos} delivery names no account, and merchants are bound to accounts`, 202, 'unknown_merchant');
  }
}

/**
 * Where a webhook action is remembered once done (`remember`), and every key under which it counts
 * as done already (`known`). Per merchant: two merchants' deliveries may carry equal event ids (a
 * Square event id is only its seller's), so a merchant's keys are prefixed with its id; the default
 * merchant's are bare, as they were before merchants existed, so what it remembered still counts.
 * A key the POS issues once across its accounts (`uniqueAcrossAccounts`: Shopify's event ids) is
 * remembered bare, for every merchant, so a copy naming another account is a duplicate (contract
 * v1.4); what this merchant remembered under its prefix before that rule still counts.
 */
function eventKeys(merchant: IngestMerchant, action: WebhookAction): { remember: string; known: string[] } {
  const own = merchant.id === DEFAULT_MERCHANT ? action.key : `${merchant.id}/${action.key}`;
  if (!action.uniqueAcrossAccounts) return { remember: own, known: [own] };
  return { remember: action.key, known: own === action.key ? [own] : [action.key, own] };
}

/**
 * The account a part of a delivery speaks for. Only the signature can be trusted (a POS app's
 * secret is every merchant's): where the signed body names the account, a header naming another is
 * a forgery or a mistake, refused before anything is done; where only a header names it, the core
 * binds the signed bytes to that account (`Ingest.#bind`). `bindable`: named by the header alone.
 */
function accountOf(pos: string, part: WebhookPart): { account?: string; bindable: boolean } {
  if (part.account !== undefined && part.headerAccount !== undefined && accountKey(pos, part.account) !== accountKey(pos, part.headerAccount)) throw new AccountMismatchError(pos, part.account, part.headerAccount);
  return { account: part.account ?? part.headerAccount, bindable: part.account === undefined && part.headerAccount !== undefined };
}

/**
 * The key builds before bindings remembered a Shopify delivery's signed bytes under (bare, and
 * prefixed with the merchant that took them), for 7 days like every webhook event: read, never
 * written, so a copy of a delivery taken just before an upgrade is still a duplicate for another
 * merchant. Nothing holds it a week after the upgrade; then this can go.
 */
function legacySignedKey(partRaw: Buffer): string {
  return `signed:${createHash('sha256').update(partRaw).digest('base64url')}`;
}

/** How one action is acted on: `legacyKey` (`legacySignedKey`) for a delivery bound to its account; `fromLetter`: a dead letter's run. */
interface ActingHow {
  legacyKey?: string;
  fromLetter: boolean;
}

/**
 * A copy of a delivery first taken for another account: each action it asks for answered as a
 * duplicate (nothing done, no merchant named: none of them holds a record of it), or the part as
 * one duplicate when its actions cannot be read.
 */
function duplicatesOf(spec: WebhookSpec, body: unknown, headers: IncomingHttpHeaders, partKey: string): WebhookResult[] {
  const reason = 'first taken for another account: a copy naming another is a duplicate';
  try {
    return spec.classify(body, headers).map((a) => ({ key: echoed(a.key), action: a.kind === 'fetch' ? 'checkout' : a.kind === 'ignored' ? 'ignored' : a.kind, duplicate: true, reason }));
  } catch {
    return [{ key: partKey, action: 'ignored', duplicate: true, reason }];
  }
}

/** The digest of a part's signed bytes: what a delivery is bound to its account by (`bindDelivery`). */
function deliveryDigest(partRaw: Buffer): string {
  return createHash('sha256').update(partRaw).digest('base64url');
}

/** 400: the signed body names one account and an unsigned header another. */
export class AccountMismatchError extends BridgeError {
  constructor(pos: string, signed: string, header: string) {
    super(`the ${pos} delivery's signed body names account ${JSON.stringify(echoed(signed))} and its header ${JSON.stringify(echoed(header))}: the header is not covered by the signature, so the delivery is refused`, 400, 'account_mismatch');
  }
}

/**
 * 409: these signed bytes were first taken for another account (contract v1.5, "One captured
 * delivery, one merchant"). A live copy is answered as a duplicate; a dead letter's run fails with it.
 */
class TakenForAnotherAccountError extends BridgeError {
  constructor(pos: string) {
    super(`this ${pos} delivery was first taken for another account: its signed bytes are bound to that account, and a copy naming another is a duplicate`, 409, 'taken_for_another_account');
  }
}

export class Ingest implements DeadLetterRunner {
  /** POS API clients by merchant (its access token) and POS; a merchant changed is a new object, so a new client. */
  readonly #apis = new WeakMap<IngestMerchant, Map<string, PosApi | undefined>>();
  /**
   * One action of a given event key at a time in this process: two copies arriving together (a POS
   * retry racing the original, or a copy naming another shop) are one taken and one duplicate, not
   * two. Across instances the ledger's own dedupe on the order is what remains.
   */
  readonly #eventLocks = new KeyedMutex();
  /**
   * The dead letters this instance is running now. A letter's claim names the instance, and keeps
   * only other instances out (lease.ts): this is what keeps the retry loop and an operator's replay
   * here from running one letter twice at once.
   */
  readonly #letterRuns = new Set<string>();

  constructor(
    private readonly adapters: ReadonlyMap<string, PosAdapter>,
    private readonly intake: IntakeService,
    /** Only the webhooks' and dead letters' stores: every record is written through intake's writer. */
    private readonly store: WebhookEventStore & DeadLetterStore,
    private readonly merchants: MerchantDirectory,
    private readonly posApiTimeoutMs: number,
    private readonly logger: Logger,
    /** Judges signed times (replay windows) and schedules dead letters' runs; the service's clock. */
    private readonly clock: () => Date = () => new Date(),
    private readonly deadLetters: DeadLetterOptions = { baseMs: 60_000, maxAttempts: 8, leaseMs: 120_000, owner: 'ingest' },
  ) {}

  adapter(pos: string | undefined): PosAdapter {
    const adapter = pos ? this.adapters.get(pos) : undefined;
    if (!adapter) throw new NotFoundError(`unknown POS ${JSON.stringify(pos?.slice(0, 32))}; known: ${[...this.adapters.keys()].join(', ')}`, 'unknown_pos');
    return adapter;
  }

  /** The phone region numbers without a country code are read in: the merchant's, else the bridge's default (DEFAULT_PHONE_REGION). */
  async phoneRegion(merchantId: string | undefined): Promise<string> {
    const merchant = merchantId ? await this.merchants.get(merchantId) : undefined;
    return (merchant ?? this.merchants.default).context.defaultPhoneRegion;
  }

  /** A direct post's merchant (its token's): 403 when suspended. */
  async merchant(id: string): Promise<IngestMerchant> {
    const merchant = await this.merchants.get(id);
    if (!merchant) throw new NotFoundError(`no merchant ${id}`, 'unknown_merchant');
    if (isSuspended(merchant)) throw new MerchantSuspendedError(id);
    return merchant;
  }

  /** `direct`: a post to /v1/checkouts/{pos} (its context is the poster's account); `arrival`: what brought it (a record it creates keeps it). */
  async checkout(adapter: PosAdapter, payload: unknown, merchant: IngestMerchant, direct = false, arrival?: Arrival): Promise<Answer> {
    const context = direct ? await this.#directContext(adapter, merchant) : merchant.context;
    const intent = adapter.parseCheckout(payload, context);
    return this.intake.checkout(adapter.name, await this.#withCustomer(adapter, intent, merchant, direct), merchant.id, arrival);
  }

  /**
   * A sale the adapter has read already (backfill reads it while listing): its customer filled in
   * from the POS's API as for a webhook, then intake. `arrival`: kept by the record it creates.
   */
  async checkoutIntent(adapter: PosAdapter, intent: CheckoutIntent, merchant: IngestMerchant, arrival?: Arrival, options: { background?: boolean } = {}): Promise<Answer> {
    return this.intake.checkout(adapter.name, await this.#withCustomer(adapter, intent, merchant, false), merchant.id, arrival, options);
  }

  /** A refund the adapter has read already, as a webhook's refund goes to intake. */
  async refundIntent(adapter: PosAdapter, intent: RefundIntent, merchant: IngestMerchant, arrival?: Arrival): Promise<Answer> {
    return this.intake.refund(adapter.name, intent, merchant.id, arrival);
  }

  /**
   * A direct post's context: the posting merchant's account on the POS (its binding), else the only
   * one the bridge has configured on it, for payloads that name no merchant scope (a Clover refund).
   * A webhook names its account itself. The same for a sale and its refund, so both derive one
   * transactionId. The record stays the poster's whatever the account: a scope that is not the
   * order's finds no order in its ledger and is refused, never another merchant's record.
   */
  async #directContext(adapter: PosAdapter, merchant: IngestMerchant): Promise<AdapterContext> {
    const posAccount = merchant.pos[adapter.name]?.account ?? (await this.merchants.onlyAccount(adapter.name));
    return posAccount ? { ...merchant.context, posAccount } : merchant.context;
  }

  async refund(adapter: PosAdapter, payload: unknown, merchant: IngestMerchant, direct = false, arrival?: Arrival): Promise<Answer> {
    // A refund that names what measures it is read from the POS when its token is set (a failure is
    // a 502: nothing was recorded, and the sender posts it again; an object the merchant's account
    // does not have is a 422); without the token the adapter measures it as well as the payload allows.
    const needs = direct ? adapter.refundFetch?.(payload) : undefined;
    const api = needs ? this.#api(adapter.name, merchant) : undefined;
    const body = needs && api ? needs.payload(await readForDirectPost(adapter.name, needs.reads, () => needs.fetch(api))) : payload;
    const context = direct ? await this.#directContext(adapter, merchant) : merchant.context;
    return this.intake.refund(adapter.name, adapter.parseRefund(body, context), merchant.id, arrival);
  }

  /**
   * A POS's webhook delivery. `replay`: a dead letter run again (by an operator or by the bridge);
   * its signature was checked when it arrived, and its merchant, when one was known, is kept.
   * Whatever of it cannot be carried out now is kept as a dead letter and named in the results
   * (`dead_lettered`, with the letter's id): the answer is 2xx either way. `arrival`: what a record
   * it creates keeps of where it came from (its payload: the delivery, or the part of a batch).
   */
  async webhook(pos: string, raw: Buffer, headers: IncomingHttpHeaders, rawHeaders: string[], replay?: WebhookReplay, arrival?: Omit<Arrival, 'payload'>): Promise<WebhookOutcome> {
    const adapter = this.adapter(pos);
    const spec = adapter.webhook;
    if (!spec) throw new NotFoundError(`${pos} has no webhooks; post its payloads to /v1/checkouts/${pos} and /v1/refunds/${pos}`, 'unknown_pos');
    // Read under the names the adapter reads (Shopify's without `X-` as well), before anything checks them.
    ({ headers, rawHeaders } = canonicalHeaders(spec.headerAliases, { headers, rawHeaders }));
    // Webhook secrets are per POS app, the same for every merchant that installed it.
    const app = this.merchants.default.pos[pos] ?? { apiBaseUrl: '' };
    // Only while no secret is configured: the handshake exists because Clover shows its auth code
    // after it, so once a secret is set an unsigned body is a forgery like any other.
    const handshake = app.webhookSecret ? undefined : this.#handshake(adapter, raw, rawHeaders);
    if (handshake !== undefined) {
      this.logger.warn({ pos, verificationCode: handshake }, `${pos} webhook set-up handshake received: enter this code in ${pos}'s dashboard`);
      return { pos, results: [{ key: 'handshake', action: 'ignored', reason: 'set-up handshake acknowledged' }], inProgress: false, kept: [] };
    }
    if (!replay) verifySignature(spec.signature, app, raw, headers, rawHeaders, this.clock());
    const results: WebhookResult[] = [];
    const kept: KeptLetter[] = [];
    // Each failure's result goes where its action stands among the results (`at`), in the delivery's order.
    const keep = async (merchantId: string | undefined, partRaw: Buffer, failures: (Failure & { at: number })[]) => {
      const letter = await this.#keep(pos, merchantId, partRaw, headers, failures, replay);
      kept.push(letter.kept);
      for (let i = failures.length - 1; i >= 0; i--) results.splice(failures[i]!.at, 0, letter.results[i]!);
    };
    let body: unknown;
    try {
      if (raw.length === 0) throw ValidationError.field('', EMPTY_BODY);
      body = parseJsonBody(raw);
    } catch (error) {
      if (!isKept(error)) throw error;
      await keep(replay?.merchantId, raw, [{ key: 'delivery', error, at: 0 }]);
      return { pos, results, inProgress: true, kept };
    }
    // Read from the signed bytes of every part before anything is done: a part whose header
    // disagrees with its signed body refuses the whole delivery (400), and nothing is taken.
    const parts = (spec.accounts?.(body, headers) ?? [{ body }]).map((part) => ({ ...part, ...accountOf(pos, part) }));
    for (const part of parts) {
      // A part of a batch (Clover) is kept on its own: its bytes are its JSON, not the delivery's.
      const partRaw = parts.length === 1 ? raw : Buffer.from(JSON.stringify(part.body));
      const partKey = part.account === undefined ? 'delivery' : echoed(part.account);
      const partArrival = arrival && { ...arrival, payload: keptPayload(pos, partRaw, arrival.receivedAt, headers, spec.signature.header) };
      // Bound before anything is decided, dead letters included: a copy naming another account while
      // the first waits as a letter is a duplicate too, and the letter's run acts for its own merchant.
      if (part.bindable && !(await this.#bind(pos, partRaw, part.account!))) {
        if (replay) await keep(replay.merchantId, partRaw, [{ key: partKey, error: new TakenForAnotherAccountError(pos), at: results.length }]);
        else results.push(...duplicatesOf(spec, part.body, headers, partKey));
        continue;
      }
      // A letter keeps its merchant; one kept for no merchant is attributed again by the account it
      // names: the merchant an operator has created for it since is found.
      const known = replay?.merchantId ? await this.merchants.get(replay.merchantId) : await this.merchants.byAccount(pos, part.account);
      if (!known || isSuspended(known)) {
        // Authentic, but nobody's to carry out: kept for an operator; nothing is sent upstream.
        const why = known ? new MerchantSuspendedError(known.id) : new UnknownMerchantError(pos, part.account);
        await keep(known?.id, partRaw, [{ key: partKey, error: why, at: results.length }]);
        continue;
      }
      // Each action is tried even when another fails: a bad one must not hold back the rest of a
      // batch (Clover, Loyverse). Those done are remembered, so a redelivery or replay skips them.
      const failures: (Failure & { at: number })[] = [];
      const legacyKey = part.bindable ? legacySignedKey(partRaw) : undefined;
      try {
        for (const action of spec.classify(part.body, headers)) {
          try {
            // Its lines name the merchant of this part, which for a batch (Clover) is not the whole delivery's.
            results.push(...(await withMerchant(known.id, () => this.#actOnce(adapter, known, action, partArrival, { legacyKey, fromLetter: replay !== undefined }))));
          } catch (error) {
            if (!isKept(error)) throw error;
            failures.push({ key: echoed(action.key), error, at: results.length });
          }
        }
      } catch (error) {
        if (!isKept(error)) throw error;
        failures.push({ key: partKey, error, at: results.length });
      }
      // Every failing part is kept (each its own merchant's), as one letter for all its failures.
      if (failures.length > 0) await keep(known.id, partRaw, failures);
    }
    const pending = results.some((r) => r.action === 'dead_lettered' || (r.status && !FINAL_STATUSES.has(r.status)));
    return { pos, results, inProgress: pending, kept };
  }

  #handshake(adapter: PosAdapter, raw: Buffer, rawHeaders: string[]): string | undefined {
    const spec = adapter.webhook!;
    if (!spec.unsignedHandshake || singleHeader(rawHeaders, spec.signature.header) !== undefined || raw.length > 1024) return undefined;
    try {
      return spec.unsignedHandshake(JSON.parse(raw.toString('utf8')));
    } catch {
      return undefined;
    }
  }

  /**
   * Drops credentials and signatures from dead letters kept before they were dropped on arrival
   * (an earlier build kept Clover's auth code with them). Run at start-up; rewrites only those
   * that held one. Answers how many it rewrote.
   */
  async scrubDeadLetterHeaders(): Promise<number> {
    let scrubbed = 0;
    for (let offset = 0; ; offset += 500) {
      const { items } = await this.store.listDeadLetters({ offset, limit: 500 });
      for (const letter of items) {
        const kept = headersToKeep(letter.headers, this.adapters.get(letter.pos)?.webhook?.signature.header);
        if (Object.keys(kept).length === Object.keys(letter.headers).length) continue;
        await this.store.updateDeadLetter(letter.id, (current) => current && { ...current, headers: headersToKeep(current.headers, this.adapters.get(current.pos)?.webhook?.signature.header) });
        scrubbed++;
      }
      if (items.length < 500) return scrubbed;
    }
  }

  /**
   * An operator's replay: runs the letter again now, whatever its schedule. Refused (409) when it
   * is resolved already, or another run holds it (the bridge's own, or another operator's).
   */
  async replayDeadLetter(id: string): Promise<{ letter: DeadLetter; outcome?: WebhookOutcome; error?: string }> {
    const run = await this.#run(id, 'operator');
    if ('refused' in run) throw run.refused;
    return run;
  }

  /** The bridge's own run of a letter due (dead-letter-retry.ts); `ran: false` when it was not due, or another run holds it. */
  async retryDeadLetter(id: string): Promise<{ ran: boolean; resolved?: boolean }> {
    const run = await this.#run(id, 'bridge');
    return 'refused' in run ? { ran: false } : { ran: true, resolved: run.error === undefined };
  }

  /**
   * Claims the letter, runs its delivery again and writes what came of it, giving the claim back.
   * The claim is what keeps two instances from running one letter at once (lease.ts), `#letterRuns`
   * the loop and an operator here; and a resolved letter is never run again.
   */
  async #run(id: string, by: 'operator' | 'bridge'): Promise<{ refused: BridgeError } | { letter: DeadLetter; outcome?: WebhookOutcome; error?: string }> {
    // Refused (claimForRun), naming the run under way.
    if (this.#letterRuns.has(id)) return this.#claimAndRun(id, by, true);
    this.#letterRuns.add(id);
    try {
      return await this.#claimAndRun(id, by, false);
    } finally {
      this.#letterRuns.delete(id);
    }
  }

  async #claimAndRun(id: string, by: 'operator' | 'bridge', underWay: boolean): Promise<{ refused: BridgeError } | { letter: DeadLetter; outcome?: WebhookOutcome; error?: string }> {
    const claimedAtMs = this.clock().getTime();
    const claimant = { owner: this.deadLetters.owner, leaseMs: this.deadLetters.leaseMs, underWay };
    let refused: BridgeError | undefined;
    const claimed = await this.store.updateDeadLetter(id, (letter) => {
      const result = claimForRun(letter, by, claimant, claimedAtMs);
      if (result.kind === 'claimed') return result.letter;
      refused = result.kind === 'missing' ? new NotFoundError(`no dead letter ${echoed(id)}`) : new ConflictError(result.why, { deadLetterId: id });
      return undefined;
    });
    if (refused || !claimed?.retry?.claim) return { refused: refused ?? new NotFoundError(`no dead letter ${echoed(id)}`) };
    const claim = claimed.retry.claim;

    const at = this.clock().toISOString();
    let outcome: WebhookOutcome | undefined;
    let failure: Omit<KeptLetter, 'letterId'> | undefined;
    let thrown: unknown;
    try {
      outcome = await this.webhook(claimed.pos, Buffer.from(claimed.body, claimed.bodyEncoding), claimed.headers, [], { merchantId: claimed.merchantId, letterId: id }, { via: 'replay', receivedAt: at, deadLetterId: id });
      failure = outcome.kept.find((k) => k.letterId === id);
    } catch (error) {
      thrown = error;
      // Not a cause the letter can be kept for (the ledger failed, say): the bridge's own trouble,
      // which passes; the run counts and the next is scheduled.
      failure = { reason: error instanceof BridgeError ? error.message : `the run failed: ${(error as Error).message}`, transient: !(error instanceof BridgeError) };
    }
    const doneMs = this.clock().getTime();
    // The checkouts this run recorded (each names this letter as its origin); a refund acts on a record that exists.
    const results = outcome?.results ?? [];
    const created = results.filter((r) => r.action === 'checkout' && r.transactionId && !r.duplicate).map((r) => r.transactionId!);
    // The records it found and acted on (a refund's order) or matched (a repeat): linked from the letter as well.
    const actedOn = [...new Set(results.filter((r) => r.transactionId && !created.includes(r.transactionId)).map((r) => r.transactionId!))];
    const found = { created, ...(actedOn.length ? { actedOn } : {}) };
    const result: RunResult = failure
      ? { kind: 'failed', reason: failure.reason, ...(failure.issues ? { issues: failure.issues } : {}), transient: failure.transient, ...found }
      : { kind: 'processed', outcome: results.map((r) => r.status ?? r.reason ?? r.action).join(', '), ...found };
    const written = await this.store.updateDeadLetter(id, (letter) => letter && afterRun(letter, by, claim, at, result, this.deadLetters, doneMs));
    if (thrown !== undefined && !(thrown instanceof BridgeError)) throw thrown;
    if (failure) this.logger.warn({ deadLetterId: id, by, transient: failure.transient, nextAt: written?.retry?.nextAt }, 'dead letter run again: failed again');
    else this.logger.info({ deadLetterId: id, by }, 'dead letter run again: resolved');
    return { letter: written!, ...(outcome ? { outcome } : {}), ...(failure ? { error: failure.reason } : {}) };
  }

  /**
   * One action of a delivery, alone among those of its event key (or, for a delivery bound to its
   * account, its signed bytes') in this process (`#eventLocks`).
   */
  #actOnce(adapter: PosAdapter, merchant: IngestMerchant, action: WebhookAction, arrival: Arrival | undefined, how: ActingHow): Promise<WebhookResult[]> {
    return this.#eventLocks.run(`${adapter.name}\u0000${how.legacyKey ?? eventKeys(merchant, action).remember}`, () => this.#act(adapter, merchant, action, arrival, how));
  }

  /**
   * Whether the action was taken already: under one of its event keys (a POS's redelivery, the
   * common duplicate), or by another merchant under its signed bytes' key of a build before
   * deliveries were bound (`legacySignedKey`).
   */
  async #taken(pos: string, merchant: IngestMerchant, known: string[], legacyKey: string | undefined): Promise<boolean> {
    for (const done of known) if (await this.store.hasWebhookEvent(pos, done)) return true;
    return legacyKey !== undefined && (await this.store.hasWebhookEvent(pos, legacyKey)) && !(await this.store.hasWebhookEvent(pos, `${merchant.id}/${legacyKey}`));
  }

  /**
   * Binds the part's signed bytes to `account` (`bindDelivery`): true when they are this account's
   * (bound now, or before), false when they were first taken for another.
   */
  async #bind(pos: string, partRaw: Buffer, account: string): Promise<boolean> {
    const key = accountKey(pos, account);
    return (await this.store.bindDelivery(pos, deliveryDigest(partRaw), key)) === key;
  }

  async #act(adapter: PosAdapter, merchant: IngestMerchant, action: WebhookAction, arrival: Arrival | undefined, how: ActingHow, depth = 0): Promise<WebhookResult[]> {
    // Named in the answer when it is not the default merchant (a single-merchant bridge answers as it always did).
    const ids = merchant.id === DEFAULT_MERCHANT ? {} : { merchantId: merchant.id };
    // The key as the answer names it: it is the POS's input, of any length.
    const key = echoed(action.key);
    if (action.kind === 'ignored') return [{ key, action: 'ignored', reason: action.reason, ...ids }];
    const { remember, known } = eventKeys(merchant, action);
    // A dead letter's run goes on to the ledger, which answers a repeat with the record behind it: a
    // letter is never marked processed on an event key alone (which could be another merchant's).
    if (!how.fromLetter && (await this.#taken(adapter.name, merchant, known, how.legacyKey))) return [{ key, action: action.kind === 'fetch' ? 'checkout' : action.kind, duplicate: true, ...ids }];
    // What a fetch decides is as unique as the event that asked for it.
    const unique = action.uniqueAcrossAccounts ? { uniqueAcrossAccounts: true as const } : {};
    if (action.kind === 'fetch') {
      if (depth >= MAX_FETCH_DEPTH) throw ValidationError.field('', 'the POS API kept answering with references instead of objects');
      const api = this.#api(adapter.name, merchant);
      if (!api && action.withoutApi) return this.#act(adapter, merchant, { ...action.withoutApi(), key: action.key, ...unique }, arrival, how, depth + 1);
      if (!api) throw new PosApiNotConfiguredError(adapter.name);
      const decided = action.decide(await action.fetch(api));
      const next = Array.isArray(decided) ? decided : [decided];
      // Several actions from one fetch (e.g. two refunds seen at once) are each remembered under their
      // own key; a redelivered notification fetches again and skips those already done.
      const results: WebhookResult[] = [];
      for (const n of next) results.push(...(await this.#act(adapter, merchant, { ...n, key: next.length === 1 ? action.key : `${action.key}/${n.key}`, ...unique } as WebhookAction, arrival, how, depth + 1)));
      return results;
    }
    const from = arrival && { ...arrival, webhookKey: remember };
    const answer = action.kind === 'checkout' ? await this.checkout(adapter, action.payload, merchant, false, from) : await this.refund(adapter, action.payload, merchant, false, from);
    await this.store.rememberWebhookEvent(adapter.name, remember);
    return [{ key, action: action.kind, transactionId: answer.record.transactionId, status: answer.record.status, ...(answer.repeat ? { duplicate: true } : {}), ...ids }];
  }

  /** `direct`: for a direct post, a customer the merchant's POS account does not have is a 422 (`readForDirectPost`). */
  async #withCustomer(adapter: PosAdapter, intent: CheckoutIntent, merchant: IngestMerchant, direct: boolean): Promise<CheckoutIntent> {
    const { customerRef } = intent;
    if (hasContact(intent.customer) || !customerRef || !adapter.fetchCustomer) return intent;
    const api = this.#api(adapter.name, merchant);
    // Without the POS's API token the customer cannot be found: the checkout is recorded as skipped.
    if (!api) return intent;
    const read = () => adapter.fetchCustomer!(customerRef, api, merchant.context);
    const customer = direct ? await readForDirectPost(adapter.name, { kind: 'customer', id: customerRef }, read) : await read();
    return { ...intent, customer: { ...customer, ...intent.customer } };
  }

  #api(pos: string, merchant: IngestMerchant): PosApi | undefined {
    let apis = this.#apis.get(merchant);
    if (!apis) this.#apis.set(merchant, (apis = new Map()));
    if (!apis.has(pos)) apis.set(pos, posApi(pos, merchant.pos[pos] ?? { apiBaseUrl: '' }, this.posApiTimeoutMs));
    return apis.get(pos);
  }

  /**
   * Keeps a part of a delivery that could not be carried out as a dead letter (one for all of the
   * part's failures), or, run from a dead letter, names that letter: the run's caller writes what
   * came of it. Answers the cause and a result per failure.
   */
  async #keep(pos: string, merchantId: string | undefined, raw: Buffer, headers: IncomingHttpHeaders, kept: Failure[], replay: WebhookReplay | undefined): Promise<{ kept: KeptLetter; results: WebhookResult[] }> {
    // What the letter and the answer repeat of each cause is bounded where the cause is raised (errors.ts).
    const cause = keepCause(kept.map((f) => f.error));
    const { reason, issues, transient } = cause;
    const letter = replay ? { id: replay.letterId, retry: undefined } : await this.#deadLetter(pos, merchantId, raw, headers, cause);
    const retryAt = letter.retry?.nextAt;
    if (!replay) this.logger.warn({ pos, merchantId, deadLetterId: letter.id, transient, retryAt, reasons: kept.map((f) => f.error.code) }, 'webhook kept as a dead letter');
    const ids = merchantId && merchantId !== DEFAULT_MERCHANT ? { merchantId } : {};
    return {
      kept: { letterId: letter.id, reason, ...(issues.length ? { issues } : {}), transient },
      results: kept.map(({ key, error }) => ({
        key,
        action: 'dead_lettered' as const,
        ...ids,
        deadLetterId: letter.id,
        reason: error.message,
        ...(error instanceof ValidationError ? { issues: error.issues } : {}),
        ...(retryAt && passesByItself(error) ? { retryAt } : {}),
      })),
    };
  }

  async #deadLetter(pos: string, merchantId: string | undefined, raw: Buffer, headers: IncomingHttpHeaders, cause: KeepCause): Promise<DeadLetter> {
    // By POS, merchant and bytes: the POS delivering it again finds the same letter; two merchants' equal parts are two letters.
    const id = createHash('sha256').update(`${pos}\u0000${merchantId ?? ''}\u0000`).update(raw).digest('hex').slice(0, 24);
    const delivery = { id, pos, ...(merchantId ? { merchantId } : {}), headers: headersToKeep(headers, this.adapters.get(pos)?.webhook?.signature.header), ...storedBody(raw) };
    const letter = await this.store.updateDeadLetter(id, (existing) => keep(existing, delivery, cause, this.deadLetters, this.clock().getTime()));
    return letter!;
  }
}
