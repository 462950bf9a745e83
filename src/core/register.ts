/**
 * At the register (contract v1.5 "At the register"): what a cashier's POS asks while the sale is
 * still open, answered within the POS's time limit whatever the loyalty service does.
 *
 * - **Toast's loyalty integration** (`POST /v1/toast/loyalty`, adapters/toast/loyalty.ts): the
 *   restaurant names the merchant, the key the integration was set up with is checked in constant
 *   time, then SEARCH finds the guest's cards by phone or email, INQUIRE reads one card's points,
 *   REDEEM is answered with every redemption rejected (the loyalty service publishes none a point of
 *   sale can make), ACCRUE records the check's sale and delivers it in the background, REVERSE takes
 *   back the accrue it names. Idempotence is Toast's: the same call id (Toast-Transaction-GUID) gets
 *   the first answer and calls nothing again; an ACCRUE Toast retries under a new id is the same
 *   check, so the same sale; a REVERSE retried with its id changes nothing.
 * - **A guest lookup** for any other register (`POST /v1/lookup`): the same card reads, by phone,
 *   email or card serial, with the merchant's POS token.
 *
 * Reads go through `CardReads`: one request, no retry, within the budget; a short-lived cache per
 * merchant, forgotten for a card whenever the bridge accrues to it or reverses it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { BridgeError, ConflictError, ValidationError } from '../kernel/errors.js';
import { parseJsonBody } from '../kernel/json-body.js';
import type { Logger } from '../kernel/logger.js';
import { RegisterReadError, type RegisterCard } from '../loyalty/client.js';
import type { WebhookEventStore } from '../ledger/store.js';
import { accountKey, isSuspended, type MerchantStatus } from '../state/merchant.js';
import type { Metrics } from './metrics.js';
import type { AdapterContext, PosAdapter, PosSettings, RegisterAnswer, RegisterCall } from '../pos/contract.js';
import { ledgerKey } from '../state/record.js';
import { saleTransactionId } from '../kernel/transaction-id.js';
import { keptPayload } from './arrival.js';
import type { Ingest } from './ingest.js';
import type { IntakeService } from './intake.js';
import { sameSecret } from '../kernel/constant-time.js';

/** What a register read needs of a merchant's loyalty client. */
export interface RegisterReader {
  readonly canVerify: boolean;
  registerCards(query: { phone?: string; email?: string }, budgetMs: number): Promise<RegisterCard[]>;
  registerCard(serial: string, budgetMs: number): Promise<RegisterCard | undefined>;
}

/** A merchant as the register sees it (the registry's `ActiveMerchant`). */
export interface RegisterMerchant {
  id: string;
  status: MerchantStatus;
  client: RegisterReader;
  context: AdapterContext;
  pos: Record<string, PosSettings>;
}

export interface RegisterDirectory {
  get(id: string): Promise<RegisterMerchant | undefined>;
  byAccount(pos: string, account: string | undefined): Promise<RegisterMerchant | undefined>;
}

export interface CardReadOptions {
  /** How long a register may wait for the loyalty service, in all (Toast: 500 ms on average, 5 s is a timeout). */
  budgetMs: number;
  /** How long a card read stands in the cache (forgotten sooner when the bridge changes the card). */
  cacheMs: number;
  /** Entries kept per merchant: past it, the oldest go. */
  cacheEntries: number;
  /** The bridge's clock (epoch ms). */
  now: () => number;
}

interface Cached<T> {
  atMs: number;
  value: Promise<T>;
  /** The cards the answer names (a card read's own serial from the start): what `forget` finds it by. */
  serials: readonly string[];
}

/**
 * One merchant's cached reads, with an index from each card to the reads that name it, so that
 * forgetting a card costs what that card's reads are, not what the whole cache holds (every accrual
 * forgets its card: a scan of the cache there cost each checkout half a millisecond at 5,000 entries).
 */
class MerchantReads {
  readonly entries = new Map<string, Cached<RegisterCard[]>>();
  readonly #bySerial = new Map<string, Set<string>>();

  put(key: string, entry: Cached<RegisterCard[]>): void {
    this.delete(key);
    this.entries.set(key, entry);
    this.#link(key, entry.serials);
  }

  /** The answer is in: the read is found by the cards it names from now on. */
  named(key: string, entry: Cached<RegisterCard[]>, serials: readonly string[]): void {
    if (this.entries.get(key) !== entry) return;
    this.#unlink(key, entry.serials);
    entry.serials = serials;
    this.#link(key, serials);
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.#unlink(key, entry.serials);
  }

  forget(serials: readonly string[]): void {
    for (const serial of serials) for (const key of [...(this.#bySerial.get(serial) ?? [])]) this.delete(key);
  }

  #link(key: string, serials: readonly string[]): void {
    for (const serial of serials) {
      let keys = this.#bySerial.get(serial);
      if (!keys) this.#bySerial.set(serial, (keys = new Set()));
      keys.add(key);
    }
  }

  #unlink(key: string, serials: readonly string[]): void {
    for (const serial of serials) {
      const keys = this.#bySerial.get(serial);
      keys?.delete(key);
      if (keys?.size === 0) this.#bySerial.delete(serial);
    }
  }
}

/**
 * The card reads a register makes, each merchant's apart: one request at a time per question
 * (cashiers pressing Rewards together share it), answered from a short-lived cache, bounded.
 */
export class CardReads {
  readonly #byMerchant = new Map<string, MerchantReads>();

  constructor(readonly options: CardReadOptions) {}

  /** The cards of the customer with this phone or email (none: the service knows no such customer). */
  cards(merchant: RegisterMerchant, contact: { phone?: string; email?: string }): Promise<RegisterCard[]> {
    const key = contact.phone ? `phone:${contact.phone}` : `email:${contact.email}`;
    return this.#read(merchant, key, [], () => merchant.client.registerCards(contact, this.options.budgetMs));
  }

  /** One card by its serial; undefined when the service has none. */
  async card(merchant: RegisterMerchant, serial: string): Promise<RegisterCard | undefined> {
    const cards = await this.#read(merchant, `card:${serial}`, [serial], async () => {
      const card = await merchant.client.registerCard(serial, this.options.budgetMs);
      return card ? [card] : [];
    });
    return cards[0];
  }

  /** The bridge accrued to these cards or reversed them: their balances changed, so nothing cached of them stands. */
  forget(merchantId: string, serials: readonly string[]): void {
    this.#byMerchant.get(merchantId)?.forget(serials);
  }

  /** `serials`: the cards the read is about before its answer is in (a card read's own). */
  async #read(merchant: RegisterMerchant, key: string, serials: readonly string[], read: () => Promise<RegisterCard[]>): Promise<RegisterCard[]> {
    let reads = this.#byMerchant.get(merchant.id);
    if (!reads) this.#byMerchant.set(merchant.id, (reads = new MerchantReads()));
    const now = this.options.now();
    const cached = reads.entries.get(key);
    if (cached && now - cached.atMs < this.options.cacheMs) return cached.value;
    const entry: Cached<RegisterCard[]> = { atMs: now, value: read(), serials };
    reads.put(key, entry);
    while (reads.entries.size > this.options.cacheEntries) reads.delete(reads.entries.keys().next().value!);
    try {
      const value = await entry.value;
      reads.named(key, entry, [...new Set([...serials, ...value.map((c) => c.serialNumber)])]);
      // Nobody found is not kept: a guest who signs up at the counter is found by the next search.
      if (value.length === 0 && reads.entries.get(key) === entry) reads.delete(key);
      return value;
    } catch (error) {
      // A failed read is not kept: the next question asks the loyalty service again.
      if (reads.entries.get(key) === entry) reads.delete(key);
      throw error;
    }
  }
}

/** A call's first answer, kept for its repeats (SEARCH and INQUIRE: ACCRUE, REDEEM and REVERSE are kept in the ledger). */
interface KeptAnswer {
  atMs: number;
  answer: { status: number; body: unknown };
}

/** How long a read's answer is given again for its id, and how many are kept. */
const REPEAT_MS = 10 * 60_000;
const REPEATS_KEPT = 10_000;

/** What a register call is bound to (`bindDelivery`), under the pseudo-POS of the register's calls. */
const BOUND_ACCRUE = 'accrue:';
const BOUND_REDEEM = 'redeem:';

export interface RegisterDeps {
  adapters: ReadonlyMap<string, PosAdapter>;
  merchants: RegisterDirectory;
  ingest: Pick<Ingest, 'checkoutIntent'>;
  intake: Pick<IntakeService, 'reverseSale'>;
  store: Pick<WebhookEventStore, 'bindDelivery' | 'deliveryBinding'>;
  reads: CardReads;
  metrics: Metrics;
  logger: Logger;
  now: () => Date;
}

/** A register's call refused before anything is read or recorded: what the adapter says in the POS's words. */
class Refused extends Error {
  constructor(readonly answer: Extract<RegisterAnswer, { kind: 'refused' }>) {
    super(answer.message);
  }
}

const refuse = (reason: Extract<RegisterAnswer, { kind: 'refused' }>['reason'], message: string) => new Refused({ kind: 'refused', reason, message });

export class RegisterService {
  readonly #repeats = new Map<string, KeptAnswer>();

  constructor(private readonly deps: RegisterDeps) {}

  /** One register call of `pos` (its adapter's `register` spec), its body as it came: the answer in the POS's shape, with its status. Never throws for what the POS sent. */
  async call(pos: string, headers: IncomingHttpHeaders, raw: Buffer): Promise<{ status: number; body: unknown }> {
    const adapter = this.deps.adapters.get(pos);
    const spec = adapter?.register;
    if (!adapter || !spec) throw new BridgeError(`${pos} has no register protocol`, 404, 'unknown_pos');
    const started = performance.now();
    let kind = 'unknown';
    let answer: RegisterAnswer;
    /** A read's key among the kept answers, once the call is known to be one. */
    let readKey: string | undefined;
    try {
      const merchant = await this.#merchantOf(pos, spec.accountHeader, spec.keyHeader, headers);
      let call: RegisterCall;
      try {
        call = spec.parse(parseJsonBody(raw), headers, merchant.context);
      } catch (error) {
        if (error instanceof ValidationError) throw refuse('input', error.message);
        throw error;
      }
      kind = call.kind;
      const repeatKey = `${pos}\u0000${merchant.id}\u0000${call.id}`;
      const repeat = this.#repeats.get(repeatKey);
      if (repeat && Date.now() - repeat.atMs < REPEAT_MS) return repeat.answer;
      if (call.kind === 'search' || call.kind === 'inquire') readKey = repeatKey;
      answer = await this.#answer(adapter, merchant, call, headers, raw);
      const written = spec.answer(answer);
      // A read's first answer stands for its repeats; writes are the ledger's to repeat.
      if (readKey) this.#keep(readKey, written);
      this.#observe(pos, kind, answer, started);
      return written;
    } catch (error) {
      if (error instanceof Refused) answer = error.answer;
      else if (error instanceof ConflictError) {
        // The ledger cannot take this sale or refund right now (a probe asks the loyalty service
        // about the accrual, or the record kept changing): answered in the POS's own words, as its
        // catch-all error, so the register retries it later rather than reading a body it does not know.
        this.deps.logger.warn({ pos, kind, why: error.message }, 'register call refused for now');
        answer = { kind: 'refused', reason: 'unavailable', message: 'The loyalty program is settling this check right now: try again in a minute.' };
      } else throw error;
    }
    this.#observe(pos, kind, answer, started);
    const written = spec.answer(answer);
    // "No such guest" is a read's answer too, and stands for its repeats (Toast: the same GUID gets
    // the first answer). A read the loyalty service did not answer in time is not kept: its repeat
    // asks again, which is what Toast's retry of a failed call is for.
    if (readKey && answer.kind === 'refused' && answer.reason === 'no_card') this.#keep(readKey, written);
    return written;
  }

  /**
   * A guest lookup for any register (`POST /v1/lookup`): the merchant's cards of this phone, email
   * or card serial, with their points. Undefined: the loyalty service knows none.
   */
  async lookup(merchantId: string, query: { phone?: string; email?: string; cardSerial?: string }): Promise<RegisterCard[] | undefined> {
    const merchant = await this.deps.merchants.get(merchantId);
    if (!merchant) throw new BridgeError(`no merchant ${merchantId}`, 404, 'unknown_merchant');
    if (!merchant.client.canVerify) throw new BridgeError("this merchant's loyalty service cannot be read without its API key: set loyalty.apiKey (LOYALTY_API_KEY for the default merchant)", 409, 'api_key_missing', { field: 'loyalty.apiKey' });
    const started = performance.now();
    try {
      const cards = query.cardSerial ? [await this.deps.reads.card(merchant, query.cardSerial)].filter((c): c is RegisterCard => c !== undefined) : await this.deps.reads.cards(merchant, query);
      this.deps.metrics.registerCalls.inc({ pos: 'lookup', type: 'lookup', status: cards.length ? 'found' : 'not_found' });
      return cards.length ? cards : undefined;
    } catch (error) {
      if (!(error instanceof RegisterReadError)) throw error;
      this.deps.metrics.registerCalls.inc({ pos: 'lookup', type: 'lookup', status: error.reason });
      throw new BridgeError(`the loyalty service did not answer in time (${error.reason}): try again`, 503, 'upstream_unavailable');
    } finally {
      // Every answer timed, a refusal too: a slow upstream shows in the latency, not only in the count.
      this.deps.metrics.registerSeconds.observe({ pos: 'lookup', type: 'lookup' }, (performance.now() - started) / 1000);
    }
  }

  /**
   * The merchant whose account the account header names, exactly (the default merchant only where
   * its own variable names that account), with its key checked: a wrong key or an unknown account is
   * refused before anything is read or recorded.
   */
  async #merchantOf(pos: string, accountHeader: string, keyHeader: string, headers: IncomingHttpHeaders): Promise<RegisterMerchant> {
    const account = typeof headers[accountHeader] === 'string' ? (headers[accountHeader] as string).trim() : '';
    if (!account) throw refuse('account', `the ${accountHeader} header names no ${pos} account`);
    const merchant = await this.deps.merchants.byAccount(pos, account);
    const bound = merchant?.pos[pos]?.account;
    if (!merchant || !bound || accountKey(pos, bound) !== accountKey(pos, account)) throw refuse('account', `no merchant of this bridge has this ${pos} account`);
    const expected = merchant.pos[pos]?.registerKey;
    const given = typeof headers[keyHeader] === 'string' ? (headers[keyHeader] as string).trim() : '';
    // Both compared, whichever is missing: the time taken says nothing of which check failed.
    const matches = sameSecret(given, expected ?? '\u0000no key');
    if (!expected || !given || !matches) throw refuse('key', 'the key in the Authorization header is not the one this restaurant was set up with');
    if (isSuspended(merchant)) throw refuse('account', 'this merchant is suspended: nothing is read or recorded for it until it is active again');
    return merchant;
  }

  async #answer(adapter: PosAdapter, merchant: RegisterMerchant, call: RegisterCall, headers: IncomingHttpHeaders, raw: Buffer): Promise<RegisterAnswer> {
    const pos = adapter.name;
    const bindings = `${pos}-register`;
    const callKey = (id: string) => `${merchant.id}/${id}`;
    switch (call.kind) {
      case 'search': {
        if (!call.phone && !call.email) throw refuse('no_card', 'the loyalty service finds guests by phone or email: a name alone finds nothing');
        const cards = await this.#read(merchant, () => this.deps.reads.cards(merchant, call));
        if (cards.length === 0) throw refuse('no_card', 'no guest of this loyalty program has that phone or email');
        return { kind: 'accounts', accounts: cards };
      }
      case 'inquire': {
        const card = await this.#read(merchant, () => this.deps.reads.card(merchant, call.identifier));
        if (!card) throw refuse('no_card', 'this loyalty program has no card with that identifier');
        return { kind: 'account', account: card, rejected: call.redemptions };
      }
      case 'redeem':
        // Nothing is redeemed: remembered, so a REVERSE of it is known (and undoes nothing).
        await this.deps.store.bindDelivery(bindings, callKey(call.id), BOUND_REDEEM);
        return { kind: 'accepted', rejected: call.redemptions };
      case 'accrue': {
        const transactionId = saleTransactionId(pos, call.sale);
        const receivedAt = this.deps.now().toISOString();
        const arrival = { via: 'register' as const, receivedAt, payload: keptPayload(pos, raw, receivedAt, headers, 'authorization') };
        // The call's id bound to the sale, and the sale recorded, together (one group commit): both are
        // durable before ACCEPT, so a REVERSE naming this id finds the sale; without ACCEPT Toast sends
        // the check again under a new id.
        const [bound, recorded] = await Promise.all([
          this.deps.store.bindDelivery(bindings, callKey(call.id), `${BOUND_ACCRUE}${transactionId}`),
          this.deps.ingest.checkoutIntent(adapter, call.sale, merchant, arrival, { background: true }).catch((error: unknown) => {
            if (error instanceof ValidationError) throw refuse('input', error.message);
            throw error;
          }),
        ]);
        // Toast sends one id per call: an id taken for another check first is that call's, and its sale stays whose it was.
        if (bound !== `${BOUND_ACCRUE}${transactionId}`) this.deps.logger.warn({ merchantId: merchant.id, transactionId }, 'a register call id came again with another check: the first stays bound');
        // A check accrues once, also after its REVERSE: an ACCRUE that follows one is Toast's late retry
        // of a call it thought failed (retried under a new id, or sent when an offline device is back)
        // or the check paid again after a payment void, and nothing tells the two apart. Accruing it
        // again would credit a voided check in the first case, so nothing is sent; said for the operator.
        if (recorded.repeat && recorded.record.reversal.requestedAt !== undefined) {
          this.deps.logger.warn({ merchantId: merchant.id, transactionId, status: recorded.record.status }, 'a register ACCRUE came for a check already reversed: a check accrues once, so nothing was accrued (docs/pos-systems.md, "A check reversed, then sent again")');
        }
        const serial = call.sale.customer.serialNumber;
        if (serial) this.deps.reads.forget(merchant.id, [serial]);
        return { kind: 'accepted', rejected: call.redemptions };
      }
      case 'reverse': {
        const bound = await this.deps.store.deliveryBinding(bindings, callKey(call.reverses));
        if (bound === undefined) throw refuse('unknown_call', 'no accrue or redeem with that transaction id was taken for this restaurant');
        if (bound === BOUND_REDEEM) return { kind: 'accepted', rejected: call.redemptions };
        const transactionId = bound.slice(BOUND_ACCRUE.length);
        const receivedAt = this.deps.now().toISOString();
        const answer = await this.deps.intake.reverseSale(ledgerKey(merchant.id, transactionId), `${pos}-register:${call.id}`, 'reversed at the register', {
          arrival: { via: 'register', receivedAt },
          background: true,
        });
        if (!answer) throw refuse('unknown_call', 'the accrue that transaction id names is not in the ledger');
        this.deps.reads.forget(merchant.id, answer.record.accrual.results.flatMap((r) => (r.serialNumber ? [r.serialNumber] : [])));
        return { kind: 'accepted', rejected: call.redemptions };
      }
      case 'unsupported':
        throw refuse('unsupported', `${call.type} is not a transaction this loyalty program takes`);
      default: {
        const never: never = call;
        throw new Error(`unhandled register call ${JSON.stringify(never)}`);
      }
    }
  }

  /** A card read for a register: a merchant without its API key cannot be read; a read that fails or runs out of time is the POS's catch-all error. */
  async #read<T>(merchant: RegisterMerchant, read: () => Promise<T>): Promise<T> {
    if (!merchant.client.canVerify) throw refuse('account', "this restaurant's loyalty program cannot be read: the merchant has no loyalty API key (loyalty.apiKey) set up");
    try {
      return await read();
    } catch (error) {
      if (!(error instanceof RegisterReadError)) throw error;
      this.deps.logger.warn({ merchantId: merchant.id, reason: error.reason }, 'a register read was not answered in time');
      throw refuse('unavailable', error.reason === 'rate_limited' ? 'The loyalty program is busy: try again in a moment.' : 'The loyalty program did not answer in time: try again in a moment.');
    }
  }

  #keep(key: string, answer: { status: number; body: unknown }): void {
    this.#repeats.delete(key);
    this.#repeats.set(key, { atMs: Date.now(), answer });
    while (this.#repeats.size > REPEATS_KEPT) this.#repeats.delete(this.#repeats.keys().next().value!);
  }

  #observe(pos: string, type: string, answer: RegisterAnswer, started: number): void {
    const status = answer.kind === 'refused' ? answer.reason : 'accepted';
    this.deps.metrics.registerCalls.inc({ pos, type, status });
    if (type === 'search' || type === 'inquire') this.deps.metrics.registerSeconds.observe({ pos, type }, (performance.now() - started) / 1000);
  }
}
