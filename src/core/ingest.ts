/**
 * From a POS's own payload to intake: translate with the POS's adapter, fill in
 * the customer from the POS's API where the payload only names one, and for webhooks verify the
 * signature, attribute each part of the delivery to the merchant it names, deduplicate on the POS's
 * event identity, fetch id-only objects, and keep what cannot be carried out as a dead letter.
 * Used by `/v1/checkouts|refunds|webhooks/{pos}` and by replays.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { hasContact } from '../customer.js';
import { BridgeError, NotFoundError, ValidationError, type FieldIssue } from '../errors.js';
import { parseJsonBody } from '../json-body.js';
import { DEFAULT_MERCHANT, FINAL_STATUSES, type LedgerStatus } from '../ledger/record.js';
import type { DeadLetter, LedgerStore } from '../ledger/store.js';
import type { Logger } from '../logger.js';
import type { AdapterContext, CheckoutIntent, PosAdapter, PosApi, PosSettings, WebhookAction } from '../pos/contract.js';
import { posApi, PosApiNotConfiguredError } from '../pos-api.js';
import { singleHeader, verifySignature } from '../webhooks/signature.js';
import type { Answer } from './answer.js';
import type { IntakeService } from './intake.js';

/** An authentic delivery that could not be translated: kept whole, answered with a clear 4xx. */
export class DeadLetteredError extends BridgeError {
  constructor(reason: string, status: number, deadLetterId: string, issues?: FieldIssue[]) {
    super(reason, status, 'dead_lettered', { deadLetterId, ...(issues ? { issues } : {}) });
  }
}

export interface WebhookResult {
  key: string;
  action: 'checkout' | 'refund' | 'ignored' | 'dead_lettered';
  merchantId?: string;
  deadLetterId?: string;
  duplicate?: boolean;
  reason?: string;
  transactionId?: string;
  status?: LedgerStatus;
}

export interface WebhookOutcome {
  pos: string;
  results: WebhookResult[];
  /** Some action is still being delivered in the background (the POS is answered 202). */
  inProgress: boolean;
}

/**
 * Authentic deliveries the bridge cannot carry out as they are, kept for an operator: payloads it
 * cannot translate, a missing POS API token, and refunds it must refuse (more than remains, an
 * order it never saw, a refund whose earlier reversal was refused). A POS stops redelivering after
 * a while (Toast after 10 minutes, Shopify after 4 hours), so answering 4xx alone would lose them.
 */
function isUntranslatable(error: unknown): error is BridgeError {
  if (error instanceof ValidationError || error instanceof PosApiNotConfiguredError) return true;
  return error instanceof BridgeError && (error.status === 404 || error.status === 409) && error.code !== 'unknown_pos';
}

/** A fetched object may itself be id-only or need another fetch; this bounds the chain. */
const MAX_FETCH_DEPTH = 3;
/**
 * Headers never kept with a dead letter: credentials and signatures. A replay is not verified
 * again (it was when the delivery arrived), so nothing is lost by dropping them, while keeping them
 * would let anyone who reads the dead letters forge deliveries: Clover's `X-Clover-Auth` is that
 * POS's static secret itself. Each POS's own signature header is dropped by name as well.
 */
const CREDENTIAL_HEADER = /auth|cookie|signature|hmac|token|secret|key|password|session/i;
/** What is kept of the rest: event type and ids are short; anything longer is not a header processing needs. */
const MAX_KEPT_HEADER_CHARS = 1024;

export function headersToKeep(headers: IncomingHttpHeaders | Record<string, string>, signatureHeader?: string): Record<string, string> {
  const signature = signatureHeader?.toLowerCase();
  return Object.fromEntries(
    Object.entries(headers).filter(([name, value]) => typeof value === 'string' && value.length <= MAX_KEPT_HEADER_CHARS && name !== signature && !CREDENTIAL_HEADER.test(name)),
  ) as Record<string, string>;
}

/** The merchants ingest needs to know of (the merchant registry). */
export interface MerchantDirectory {
  get(id: string): Promise<IngestMerchant | undefined>;
  byAccount(pos: string, account: string | undefined): Promise<IngestMerchant | undefined>;
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
    super(account ? `no merchant has the ${pos} account ${JSON.stringify(account.slice(0, 80))}` : `the ${pos} delivery names no account, and merchants are bound to accounts`, 202, 'unknown_merchant');
  }
}

export class Ingest {
  /** POS API clients by merchant (its access token) and POS; a merchant changed is a new object, so a new client. */
  readonly #apis = new WeakMap<IngestMerchant, Map<string, PosApi | undefined>>();

  constructor(
    private readonly adapters: ReadonlyMap<string, PosAdapter>,
    private readonly intake: IntakeService,
    private readonly store: LedgerStore,
    private readonly merchants: MerchantDirectory,
    private readonly posApiTimeoutMs: number,
    private readonly logger: Logger,
    /** Judges signed times (replay windows); the service's clock. */
    private readonly clock: () => Date = () => new Date(),
  ) {}

  adapter(pos: string | undefined): PosAdapter {
    const adapter = pos ? this.adapters.get(pos) : undefined;
    if (!adapter) throw new NotFoundError(`unknown POS ${JSON.stringify(pos?.slice(0, 32))}; known: ${[...this.adapters.keys()].join(', ')}`, 'unknown_pos');
    return adapter;
  }

  /** A direct post's merchant (its token's): 403 when suspended. */
  async merchant(id: string): Promise<IngestMerchant> {
    const merchant = await this.merchants.get(id);
    if (!merchant) throw new NotFoundError(`no merchant ${id}`, 'unknown_merchant');
    if (merchant.status === 'suspended') throw new MerchantSuspendedError(id);
    return merchant;
  }

  async checkout(adapter: PosAdapter, payload: unknown, merchant: IngestMerchant): Promise<Answer> {
    const intent = await this.#withCustomer(adapter, adapter.parseCheckout(payload, merchant.context), merchant);
    return this.intake.checkout(adapter.name, intent, merchant.id);
  }

  async refund(adapter: PosAdapter, payload: unknown, merchant: IngestMerchant): Promise<Answer> {
    return this.intake.refund(adapter.name, adapter.parseRefund(payload, merchant.context), merchant.id);
  }

  /**
   * A POS's webhook delivery. `replay`: a dead letter run again; its signature was checked when it
   * arrived, and its merchant, when one was known, is kept.
   */
  async webhook(pos: string, raw: Buffer, headers: IncomingHttpHeaders, rawHeaders: string[], replay?: { merchantId?: string }): Promise<WebhookOutcome> {
    const adapter = this.adapter(pos);
    const spec = adapter.webhook;
    if (!spec) throw new NotFoundError(`${pos} has no webhooks; post its payloads to /v1/checkouts/${pos} and /v1/refunds/${pos}`, 'unknown_pos');
    // Webhook secrets are per POS app, the same for every merchant that installed it.
    const app = this.merchants.default.pos[pos] ?? { apiBaseUrl: '' };
    // Only while no secret is configured: the handshake exists because Clover shows its auth code
    // after it, so once a secret is set an unsigned body is a forgery like any other.
    const handshake = app.webhookSecret ? undefined : this.#handshake(adapter, raw, rawHeaders);
    if (handshake !== undefined) {
      this.logger.warn({ pos, verificationCode: handshake }, `${pos} webhook set-up handshake received: enter this code in ${pos}'s dashboard`);
      return { pos, results: [{ key: 'handshake', action: 'ignored', reason: 'set-up handshake acknowledged' }], inProgress: false };
    }
    if (!replay) verifySignature(spec.signature, app, raw, headers, rawHeaders, this.clock());
    const results: WebhookResult[] = [];
    let failure: { error: BridgeError; letter: DeadLetter } | undefined;
    let body: unknown;
    try {
      body = parseJsonBody(raw);
    } catch (error) {
      if (!isUntranslatable(error)) throw error;
      failure = { error, letter: await this.#deadLetter(pos, undefined, raw, headers, error) };
    }
    // A replay keeps the merchant its letter names; a letter kept for no known merchant is attributed
    // again by the account the delivery names, so that it reaches a merchant created for it since.
    const parts = failure ? [] : replay?.merchantId ? [{ account: undefined, body, merchantId: replay.merchantId }] : (spec.accounts?.(body, headers) ?? [{ body }]);
    for (const part of parts) {
      // A part of a batch (Clover) is kept on its own: its bytes are its JSON, not the delivery's.
      const partRaw = parts.length === 1 ? raw : Buffer.from(JSON.stringify(part.body));
      const known = 'merchantId' in part && part.merchantId ? await this.merchants.get(part.merchantId) : await this.merchants.byAccount(pos, part.account);
      if (!known || known.status === 'suspended') {
        // Authentic, but nobody's to carry out: kept for an operator and answered 2xx, so the POS
        // does not disable the subscription; nothing is sent upstream.
        const why = known ? new MerchantSuspendedError(known.id) : new UnknownMerchantError(pos, part.account);
        // A replay is not a new delivery: its letter stays as it is, open, and the replay fails with the reason.
        if (replay) throw why;
        const letter = await this.#deadLetter(pos, known?.id, partRaw, headers, why);
        this.logger.warn({ pos, merchantId: known?.id, deadLetterId: letter.id, reason: why.code }, 'webhook kept as a dead letter');
        results.push({ key: part.account ?? 'delivery', action: 'dead_lettered', ...(known ? { merchantId: known.id } : {}), deadLetterId: letter.id, reason: why.message });
        continue;
      }
      // Each action is tried even when another fails: a bad one must not hold back the rest of a
      // batch (Clover, Loyverse). Those done are remembered, so a redelivery or replay skips them.
      let partFailure: BridgeError | undefined;
      try {
        for (const action of spec.classify(part.body, headers)) {
          try {
            results.push(...(await this.#act(adapter, known, action)));
          } catch (error) {
            if (!isUntranslatable(error)) throw error;
            partFailure ??= error;
          }
        }
      } catch (error) {
        if (!isUntranslatable(error)) throw error;
        partFailure = error;
      }
      if (partFailure) {
        // Every failing part is kept (each its own merchant's); the answer names the first.
        const letter = await this.#deadLetter(pos, known.id, partRaw, headers, partFailure);
        failure ??= { error: partFailure, letter };
      }
    }
    if (failure) {
      const { error, letter } = failure;
      this.logger.warn({ pos, merchantId: letter.merchantId, deadLetterId: letter.id, deliveries: letter.deliveries, reason: error.code }, 'webhook kept as a dead letter');
      throw new DeadLetteredError(`could not carry out this ${pos} delivery: ${error.message}`, error.status, letter.id, error instanceof ValidationError ? error.issues : undefined);
    }
    const pending = results.some((r) => r.action === 'dead_lettered' || (r.status && !FINAL_STATUSES.has(r.status)));
    return { pos, results, inProgress: pending };
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
        await this.store.saveDeadLetter({ ...letter, headers: kept });
        scrubbed++;
      }
      if (items.length < 500) return scrubbed;
    }
  }

  async replayDeadLetter(id: string): Promise<{ letter: DeadLetter; outcome?: WebhookOutcome; error?: string }> {
    const letter = await this.store.getDeadLetter(id);
    if (!letter) throw new NotFoundError(`no dead letter ${id}`);
    const raw = Buffer.from(letter.body, letter.bodyEncoding);
    const at = new Date().toISOString();
    try {
      const outcome = await this.webhook(letter.pos, raw, letter.headers, [], { merchantId: letter.merchantId });
      const resolved = { ...(await this.store.getDeadLetter(id))!, resolvedAt: at };
      resolved.replays = [...resolved.replays, { at, outcome: `processed: ${outcome.results.map((r) => r.status ?? r.reason ?? r.action).join(', ')}` }];
      await this.store.saveDeadLetter(resolved);
      return { letter: resolved, outcome };
    } catch (error) {
      if (!(error instanceof BridgeError)) throw error;
      const failed = (await this.store.getDeadLetter(id))!;
      failed.replays = [...failed.replays, { at, outcome: `failed: ${error.message}` }];
      await this.store.saveDeadLetter(failed);
      return { letter: failed, error: error.message };
    }
  }

  async #act(adapter: PosAdapter, merchant: IngestMerchant, action: WebhookAction, depth = 0): Promise<WebhookResult[]> {
    // Named in the answer when it is not the default merchant (a single-merchant bridge answers as it always did).
    const ids = merchant.id === DEFAULT_MERCHANT ? {} : { merchantId: merchant.id };
    if (action.kind === 'ignored') return [{ key: action.key, action: 'ignored', reason: action.reason, ...ids }];
    // Per merchant: two merchants' deliveries may carry equal event ids. The default merchant's keys
    // are as they were before merchants existed, so what it remembered still counts.
    const eventKey = merchant.id === DEFAULT_MERCHANT ? action.key : `${merchant.id}/${action.key}`;
    if (await this.store.hasWebhookEvent(adapter.name, eventKey)) return [{ key: action.key, action: action.kind === 'fetch' ? 'checkout' : action.kind, duplicate: true, ...ids }];
    if (action.kind === 'fetch') {
      if (depth >= MAX_FETCH_DEPTH) throw ValidationError.field('', 'the POS API kept answering with references instead of objects');
      const api = this.#api(adapter.name, merchant);
      if (!api) throw new PosApiNotConfiguredError(adapter.name);
      const decided = action.decide(await action.fetch(api));
      const next = Array.isArray(decided) ? decided : [decided];
      // Several actions from one fetch (e.g. two refunds seen at once) are each remembered under their
      // own key; a redelivered notification fetches again and skips those already done.
      const results: WebhookResult[] = [];
      for (const n of next) results.push(...(await this.#act(adapter, merchant, { ...n, key: next.length === 1 ? action.key : `${action.key}/${n.key}` } as WebhookAction, depth + 1)));
      return results;
    }
    const answer = action.kind === 'checkout' ? await this.checkout(adapter, action.payload, merchant) : await this.refund(adapter, action.payload, merchant);
    await this.store.rememberWebhookEvent(adapter.name, eventKey);
    return [{ key: action.key, action: action.kind, transactionId: answer.record.transactionId, status: answer.record.status, ...(answer.repeat ? { duplicate: true } : {}), ...ids }];
  }

  async #withCustomer(adapter: PosAdapter, intent: CheckoutIntent, merchant: IngestMerchant): Promise<CheckoutIntent> {
    if (hasContact(intent.customer) || !intent.customerRef || !adapter.fetchCustomer) return intent;
    const api = this.#api(adapter.name, merchant);
    // Without the POS's API token the customer cannot be found: the checkout is recorded as skipped.
    if (!api) return intent;
    const customer = await adapter.fetchCustomer(intent.customerRef, api, merchant.context);
    return { ...intent, customer: { ...customer, ...intent.customer } };
  }

  #api(pos: string, merchant: IngestMerchant): PosApi | undefined {
    let apis = this.#apis.get(merchant);
    if (!apis) this.#apis.set(merchant, (apis = new Map()));
    if (!apis.has(pos)) apis.set(pos, posApi(pos, merchant.pos[pos] ?? { apiBaseUrl: '' }, this.posApiTimeoutMs));
    return apis.get(pos);
  }

  async #deadLetter(pos: string, merchantId: string | undefined, raw: Buffer, headers: IncomingHttpHeaders, error: BridgeError): Promise<DeadLetter> {
    // By POS, merchant and bytes: the POS redelivering it finds the same letter; two merchants' equal parts are two letters.
    const id = createHash('sha256').update(`${pos}\u0000${merchantId ?? ''}\u0000`).update(raw).digest('hex').slice(0, 24);
    const now = new Date().toISOString();
    const existing = await this.store.getDeadLetter(id);
    const text = raw.toString('utf8');
    const letter: DeadLetter = existing
      ? { ...existing, lastReceivedAt: now, deliveries: existing.deliveries + 1, reason: error.message }
      : {
          id,
          pos,
          ...(merchantId ? { merchantId } : {}),
          receivedAt: now,
          lastReceivedAt: now,
          deliveries: 1,
          reason: error.message,
          ...(error instanceof ValidationError ? { issues: error.issues } : {}),
          headers: headersToKeep(headers, this.adapters.get(pos)?.webhook?.signature.header),
          // Kept as text when that is byte-exact and storable everywhere (PostgreSQL's jsonb refuses NUL).
          ...(Buffer.from(text, 'utf8').equals(raw) && !text.includes('\u0000') ? { body: text, bodyEncoding: 'utf8' as const } : { body: raw.toString('base64'), bodyEncoding: 'base64' as const }),
          replays: [],
        };
    await this.store.saveDeadLetter(letter);
    return letter;
  }
}
