/**
 * From a POS's own payload to intake: translate with the POS's adapter, fill in
 * the customer from the POS's API where the payload only names one, and for webhooks verify the
 * signature, deduplicate on the POS's event identity, fetch id-only objects, and keep what cannot
 * be translated as a dead letter. Used by `/v1/checkouts|refunds|webhooks/{pos}` and by replays.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { hasContact } from '../customer.js';
import { BridgeError, NotFoundError, ValidationError, type FieldIssue } from '../errors.js';
import { parseJsonBody } from '../json-body.js';
import { FINAL_STATUSES, type LedgerStatus } from '../ledger/record.js';
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
  action: 'checkout' | 'refund' | 'ignored';
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

export class Ingest {
  readonly #apis = new Map<string, PosApi | undefined>();

  constructor(
    private readonly adapters: ReadonlyMap<string, PosAdapter>,
    private readonly intake: IntakeService,
    private readonly store: LedgerStore,
    private readonly settings: Record<string, PosSettings>,
    private readonly context: AdapterContext,
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

  async checkout(adapter: PosAdapter, payload: unknown): Promise<Answer> {
    const intent = await this.#withCustomer(adapter, adapter.parseCheckout(payload, this.context));
    return this.intake.checkout(adapter.name, intent);
  }

  async refund(adapter: PosAdapter, payload: unknown): Promise<Answer> {
    return this.intake.refund(adapter.name, adapter.parseRefund(payload, this.context));
  }

  /** `verified`: the signature was checked when the delivery first arrived (dead-letter replay). */
  async webhook(pos: string, raw: Buffer, headers: IncomingHttpHeaders, rawHeaders: string[], verified = false): Promise<WebhookOutcome> {
    const adapter = this.adapter(pos);
    if (!adapter.webhook) throw new NotFoundError(`${pos} has no webhooks; post its payloads to /v1/checkouts/${pos} and /v1/refunds/${pos}`, 'unknown_pos');
    const settings = this.#settings(pos);
    // Only while no secret is configured: the handshake exists because Clover shows its auth code
    // after it, so once a secret is set an unsigned body is a forgery like any other.
    const handshake = settings.webhookSecret ? undefined : this.#handshake(adapter, raw, rawHeaders);
    if (handshake !== undefined) {
      this.logger.warn({ pos, verificationCode: handshake }, `${pos} webhook set-up handshake received: enter this code in ${pos}'s dashboard`);
      return { pos, results: [{ key: 'handshake', action: 'ignored', reason: 'set-up handshake acknowledged' }], inProgress: false };
    }
    if (!verified) verifySignature(adapter.webhook.signature, settings, raw, headers, rawHeaders, this.clock());
    const results: WebhookResult[] = [];
    let failure: BridgeError | undefined;
    try {
      // Each action is tried even when another fails: a bad one must not hold back the rest of a
      // batch (Clover, Loyverse). Those done are remembered, so a redelivery or replay skips them.
      for (const action of adapter.webhook.classify(parseJsonBody(raw), headers)) {
        try {
          results.push(...(await this.#act(adapter, action)));
        } catch (error) {
          if (!isUntranslatable(error)) throw error;
          failure ??= error;
        }
      }
    } catch (error) {
      if (!isUntranslatable(error)) throw error;
      failure = error;
    }
    if (failure) {
      const letter = await this.#deadLetter(pos, raw, headers, failure);
      this.logger.warn({ pos, deadLetterId: letter.id, deliveries: letter.deliveries, reason: failure.code }, 'webhook kept as a dead letter');
      throw new DeadLetteredError(`could not carry out this ${pos} delivery: ${failure.message}`, failure.status, letter.id, failure instanceof ValidationError ? failure.issues : undefined);
    }
    const pending = results.some((r) => r.status && !FINAL_STATUSES.has(r.status));
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
      const outcome = await this.webhook(letter.pos, raw, letter.headers, [], true);
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

  async #act(adapter: PosAdapter, action: WebhookAction, depth = 0): Promise<WebhookResult[]> {
    if (action.kind === 'ignored') return [{ key: action.key, action: 'ignored', reason: action.reason }];
    if (await this.store.hasWebhookEvent(adapter.name, action.key)) return [{ key: action.key, action: action.kind === 'fetch' ? 'checkout' : action.kind, duplicate: true }];
    if (action.kind === 'fetch') {
      if (depth >= MAX_FETCH_DEPTH) throw ValidationError.field('', 'the POS API kept answering with references instead of objects');
      const api = this.#api(adapter.name);
      if (!api) throw new PosApiNotConfiguredError(adapter.name);
      const decided = action.decide(await action.fetch(api));
      const next = Array.isArray(decided) ? decided : [decided];
      // Several actions from one fetch (e.g. two refunds seen at once) are each remembered under their
      // own key; a redelivered notification fetches again and skips those already done.
      const results: WebhookResult[] = [];
      for (const n of next) results.push(...(await this.#act(adapter, { ...n, key: next.length === 1 ? action.key : `${action.key}/${n.key}` } as WebhookAction, depth + 1)));
      return results;
    }
    const answer = action.kind === 'checkout' ? await this.checkout(adapter, action.payload) : await this.refund(adapter, action.payload);
    await this.store.rememberWebhookEvent(adapter.name, action.key);
    return [{ key: action.key, action: action.kind, transactionId: answer.record.transactionId, status: answer.record.status, ...(answer.repeat ? { duplicate: true } : {}) }];
  }

  async #withCustomer(adapter: PosAdapter, intent: CheckoutIntent): Promise<CheckoutIntent> {
    if (hasContact(intent.customer) || !intent.customerRef || !adapter.fetchCustomer) return intent;
    const api = this.#api(adapter.name);
    // Without the POS's API token the customer cannot be found: the checkout is recorded as skipped.
    if (!api) return intent;
    const customer = await adapter.fetchCustomer(intent.customerRef, api, this.context);
    return { ...intent, customer: { ...customer, ...intent.customer } };
  }

  #settings(pos: string): PosSettings {
    return this.settings[pos] ?? { apiBaseUrl: '' };
  }

  #api(pos: string): PosApi | undefined {
    if (!this.#apis.has(pos)) this.#apis.set(pos, posApi(pos, this.#settings(pos), this.posApiTimeoutMs));
    return this.#apis.get(pos);
  }

  async #deadLetter(pos: string, raw: Buffer, headers: IncomingHttpHeaders, error: BridgeError): Promise<DeadLetter> {
    const id = createHash('sha256').update(`${pos}\u0000`).update(raw).digest('hex').slice(0, 24);
    const now = new Date().toISOString();
    const existing = await this.store.getDeadLetter(id);
    const text = raw.toString('utf8');
    const letter: DeadLetter = existing
      ? { ...existing, lastReceivedAt: now, deliveries: existing.deliveries + 1, reason: error.message }
      : {
          id,
          pos,
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
