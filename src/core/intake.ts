/**
 * Intake: a POS's checkouts and refunds become ledger records, then delivery starts at once and
 * the answer waits for it within the answer budget; what is not finished by then continues in the
 * background. The intent is in the ledger before anything is sent. A repeat (the same order, the
 * same refund id) answers what is recorded and sends nothing.
 */
import { AccrualKeyHeldError, ConflictError, NotFoundError, ValidationError, VersionConflictError } from '../kernel/errors.js';
import { failpoint } from '../kernel/failpoints.js';
import { hasContact } from '../kernel/customer.js';
import { isOpen, keyOf, ledgerKey, merchantOf, type LedgerRecord, type OperatorAct } from '../state/record.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import type { Logger } from '../kernel/logger.js';
import type { Metrics } from './metrics.js';
import { formatCents, proRataCents } from '../kernel/money.js';
import { checkId, saleTransactionId } from '../kernel/transaction-id.js';
import type { CheckoutIntent, RefundIntent } from '../pos/contract.js';
import { answerFor, type Answer } from './answer.js';
import type { DeliveryService } from './delivery.js';
import type { RecordWriter } from './record-writer.js';
import type { Arrival } from './arrival.js';
import { linkRemainder, newCheckout, newRefundOfUnknownOrder, noteChangedRepeat, refundAlreadySeen, requestPartialReversal, requestReversal, type RecordIds, type Transition, type TransitionOptions } from './transitions.js';

/** The refund reached a record whose remainder now holds what is left of the order: walk the chain again. */
const MOVED = Symbol('moved to the remainder');

export class IntakeService {
  constructor(
    private readonly writer: RecordWriter,
    private readonly delivery: DeliveryService,
    private readonly options: TransitionOptions,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {}

  /**
   * `merchantId`: whose order (the POS token's or the webhook's merchant). `arrival`: what brought it
   * (the record keeps where it came from and the payload; its note goes in the record's history).
   */
  /**
   * `options.background`: recorded durably and answered at once, delivery going on here in the
   * background (a register's ACCRUE, which Toast wants answered well within its half second): the
   * record is claimed as it is inserted, as an inline delivery's is, so the pass costs no more than
   * a checkout's; a crash leaves it in flight, recovered as any inline delivery (in doubt, verified).
   * During a rate-limit probe it is left to the worker.
   */
  async checkout(pos: string, intent: CheckoutIntent, merchantId: string = DEFAULT_MERCHANT, arrival?: Arrival, options: { background?: boolean } = {}): Promise<Answer> {
    const ids: RecordIds = { transactionId: saleTransactionId(pos, intent), merchantId, pos, orderId: intent.orderId };
    // A sale an earlier build recorded under another transactionId (a Toast order kept whole) is
    // that record's: answered as its repeat, nothing recorded or sent.
    const earlier = await this.#recordedEarlier(intent.recordedAs, merchantId);
    if (earlier) {
      this.metrics.checkouts.inc({ pos, result: 'repeat', ...this.metrics.merchant(merchantId) });
      return answerFor(this.writer.store, earlier, true);
    }
    const now = this.writer.now();
    const contact = hasContact(intent.customer);
    failpoint('checkout:before-ledger-write');
    // Delivered as it arrives, except while the merchant's app token is being rate-limited and
    // another of its checkouts is probing (rate-limits.ts): then recorded for the worker.
    const asked = contact ? this.delivery.mayDeliverInline(merchantId) : 'later';
    // A probe's outcome is what tells whether the rate limit lifted: a background sale never probes.
    const delivery = options.background && asked === 'probe' ? 'later' : asked;
    if (delivery !== asked) this.delivery.inlineDone(merchantId);
    try {
      return await this.#record(pos, intent, ids, contact, now, delivery !== 'later', arrival, options.background === true);
    } finally {
      if (delivery === 'probe') this.delivery.inlineDone(merchantId);
    }
  }

  async #record(pos: string, intent: CheckoutIntent, ids: RecordIds, contact: boolean, now: Date, inline: boolean, arrival: Arrival | undefined, background = false): Promise<Answer> {
    const { transactionId, merchantId } = ids;
    const key = ledgerKey(merchantId, transactionId);
    // A new order is recorded already marked in flight (see newCheckout), but only when no call for
    // this record is out from here: then the insert can only find the order, never race our own call.
    const claiming = inline && !this.delivery.calling.has(key);
    if (claiming) this.delivery.calling.enter(key);
    let inserted: { record: LedgerRecord; created: boolean };
    try {
      inserted = await this.writer.insert(newCheckout(ids, intent, contact, now, claiming ? this.delivery.instanceId : undefined, arrival), { payload: arrival?.payload });
    } catch (error) {
      if (claiming) this.delivery.calling.leave(key);
      // Another accrual of this customer and amount is unsettled: recorded pending; delivery makes it wait behind that one.
      if (!(error instanceof AccrualKeyHeldError)) throw error;
      inserted = await this.writer.insert(newCheckout(ids, intent, contact, now, undefined, arrival), { payload: arrival?.payload });
      if (inserted.created) this.logger.info({ transactionId, behind: error.holder }, 'checkout recorded; it waits behind an unsettled accrual of the same customer and amount');
      return this.#afterInsert(pos, intent, inserted.record, inserted.created, undefined, inline && !background);
    }
    const claimed = claiming && inserted.created;
    if (claiming && !inserted.created) this.delivery.calling.leave(key);
    const claim = claimed ? { record: inserted.record, operation: 'accrue' as const } : undefined;
    if (background && claim) {
      // Answered as recorded; the pass over the claimed record goes on without the answer waiting for it.
      void this.delivery.advance(key, false, claim).catch((error: unknown) => this.logger.error({ key, err: error }, 'background delivery failed; the worker will pick it up'));
      return this.#afterInsert(pos, intent, inserted.record, inserted.created, undefined, false);
    }
    return this.#afterInsert(pos, intent, inserted.record, inserted.created, claim, inline && !background);
  }

  /** `inline`: deliver now, within the answer budget; otherwise the record is answered as recorded and the worker delivers it. */
  async #afterInsert(pos: string, intent: CheckoutIntent, record: LedgerRecord, created: boolean, claimed: Parameters<DeliveryService['deliverWithinBudget']>[1], inline: boolean): Promise<Answer> {
    if (created) {
      failpoint('checkout:after-ledger-write');
      this.logger.info({ transactionId: record.transactionId, pos, status: record.status }, 'checkout recorded');
    }
    const changed = !created && record.accrual.check?.amount !== intent.check.amount;
    if (changed) await this.#noteChangedRepeat(keyOf(record), intent.check.amount, record.accrual.check?.amount);
    const answer = !created
      ? await answerFor(this.writer.store, record, true)
      : await answerFor(this.writer.store, record.accrual.state === 'skipped' || !inline ? record : await this.delivery.deliverWithinBudget(keyOf(record), claimed), false);
    this.metrics.checkouts.inc({ pos, result: answer.repeat ? (changed ? 'repeat_changed' : 'repeat') : answer.record.status, ...this.metrics.merchant(merchantOf(record)) });
    return answer;
  }

  /** Informational: the answer stands whatever happens to the note (another instance may write the record meanwhile). */
  async #noteChangedRepeat(key: string, amount: number, recorded: number | undefined): Promise<void> {
    this.logger.warn({ key, amountCents: amount, recordedCents: recorded }, 'an order already recorded was delivered again with a different amount; nothing sent');
    try {
      await this.writer.change(key, (r) => noteChangedRepeat(r, amount, this.writer.now()));
    } catch (error) {
      if (!(error instanceof VersionConflictError)) throw error;
    }
  }

  /** `arrival`: as for `checkout`; its note is said in the history event the refund writes. */
  async refund(pos: string, intent: RefundIntent, merchantId: string = DEFAULT_MERCHANT, arrival?: Arrival): Promise<Answer> {
    const via = arrival?.note;
    const rootId = saleTransactionId(pos, intent);
    const { refundId } = intent;
    if (refundId !== undefined) checkId('refundId', refundId);
    // Earlier partial refunds moved what remains of the order to remainder records: act on the
    // last. If a remainder appears while this refund is applied, walk the chain again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const own = await chainOf(this.writer, ledgerKey(merchantId, rootId));
      // Nothing under the sale's own id: an earlier build may have kept its order whole (`recordedAs`).
      const earlier = own.length === 0 ? await this.#recordedEarlier(intent.recordedAs, merchantId) : undefined;
      const chain = earlier ? await chainOf(this.writer, keyOf(earlier)) : own;
      const seen = chain.find((r) => refundAlreadySeen(r, refundId));
      if (seen) return answerFor(this.writer.store, seen, true, refundId);
      // A full refund of one part met by the order's whole record takes back the part's share, not the rest of the order.
      const partOfWhole = earlier && intent.partCents !== undefined && intent.amountCents === undefined && !intent.items && (earlier.accrual.check?.amount ?? 0) > intent.partCents;
      const asPart: RefundIntent = partOfWhole ? { ...intent, amountCents: intent.partCents, refundId: intent.refundId ?? `part:${intent.part}` } : intent;
      const measuredAs: MeasuredRefund = asPart.paidBack ? measureFromLedger(asPart, asPart.paidBack, chain) : asPart;
      const measured: MeasuredRefund = via ? { ...measuredAs, note: measuredAs.note ? `${measuredAs.note}; ${via}` : via } : measuredAs;
      const partial = measured.amountCents !== undefined || measured.items !== undefined;
      const current = chain.at(-1);
      if (partial && !current) throw new NotFoundError(`no order ${intent.orderId} in the ledger: a partial refund needs the original to know what remains`, 'unknown_order');
      const answer = partial
        ? await this.#partialReversal(keyOf(current!), asPart.refundId!, measured)
        : await this.reversal({ transactionId: current?.transactionId ?? rootId, merchantId, pos, orderId: intent.orderId }, asPart.refundId, measured.note, { arrival });
      if (answer !== MOVED) return answer;
    }
    throw new ConflictError('the order kept changing while this refund was applied; deliver it again', { orderId: intent.orderId });
  }

  /**
   * A full reversal of the sale recorded under `key` and what remains of it: its last remainder,
   * where partial refunds moved the rest (an operator's /reverse, a register's REVERSE). Undefined
   * when the ledger holds no such record.
   */
  async reverseSale(key: string, refundId: string, note: string | undefined, by: { act?: OperatorAct; arrival?: Arrival; background?: boolean } = {}): Promise<Answer | undefined> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = (await chainOf(this.writer, key)).at(-1);
      if (!current) return undefined;
      const answer = await this.reversal({ transactionId: current.transactionId, merchantId: merchantOf(current), pos: current.pos, orderId: current.orderId }, refundId, note, by);
      if (answer !== MOVED) return answer;
    }
    throw new ConflictError('the record kept changing; try again');
  }

  /**
   * A full reversal of `ids.transactionId` (a refund, or an operator's /reverse); MOVED when a
   * remainder holds the order now. `note`: how the refund was measured, kept in the record's history.
   */
  /**
   * `by.act`: an operator's reversal, its actor and reason on the history line. `by.arrival`: what
   * brought the refund, kept by a record it creates (of an order the ledger never saw).
   */
  async reversal(ids: RecordIds, refundId: string | undefined, note?: string, by: { act?: OperatorAct; arrival?: Arrival; background?: boolean } = {}): Promise<Answer | typeof MOVED> {
    const key = ledgerKey(ids.merchantId, ids.transactionId);
    const unknown = await this.writer.locked(key, async () => {
      if (await this.writer.store.get(key)) return undefined;
      const arrival = by.arrival ?? (by.act ? { via: 'operator' as const, receivedAt: this.writer.now().toISOString() } : undefined);
      const { record, created } = await this.writer.insert(newRefundOfUnknownOrder(ids, refundId, this.writer.now(), arrival), { payload: arrival?.payload });
      return { record, repeat: !created };
    });
    if (unknown) return this.#deliverRefund(ids.pos, unknown.record, unknown.repeat, refundId, by.background);
    // Set by the last decision (a lost race decides again).
    const decided: { result: 'moved' | 'repeat' | 'recorded' } = { result: 'recorded' };
    const record = await this.writer.change(key, async (r) => {
      const moved = await this.#remainderHolds(r);
      decided.result = moved ? 'moved' : 'recorded';
      if (moved) return moved === true ? undefined : moved;
      const transition = requestReversal(r, refundId, this.writer.now());
      if (!transition) decided.result = 'repeat';
      const noted = withNote(transition, note);
      return noted && by.act ? { ...noted, act: by.act } : noted;
    });
    if (decided.result === 'moved') return MOVED;
    return this.#deliverRefund(ids.pos, record, decided.result === 'repeat', refundId, by.background);
  }

  async #partialReversal(key: string, refundId: string, intent: MeasuredRefund): Promise<Answer | typeof MOVED> {
    const decided = { moved: false };
    const record = await this.writer.change(key, async (r) => {
      const holds = await this.#remainderHolds(r);
      decided.moved = Boolean(holds);
      if (holds) return holds === true ? undefined : holds;
      return withNote(requestPartialReversal(r, refundId, intent, this.writer.now(), this.options), intent.note);
    });
    if (decided.moved) return MOVED;
    return this.#deliverRefund(record.pos, record, false, refundId);
  }

  /**
   * Decided under the record's lock, right before the refund's write: does what remains of the
   * order live in a remainder record now? `true`: linked already. A transition: created but not
   * linked yet (a crash between the two steps, or another instance creating it this moment),
   * linked by this write. Undefined: the refund applies to this record.
   */
  async #remainderHolds(record: LedgerRecord): Promise<true | Transition | undefined> {
    if (record.remainderTransactionId) return true;
    const partial = record.reversal.partial;
    if (!partial || !(await this.writer.store.get(ledgerKey(merchantOf(record), partial.remainderTransactionId)))) return undefined;
    return linkRemainder(record, partial.remainderTransactionId);
  }

  /** The first record of `transactionIds` (an earlier build's ids of the same sale) the merchant's ledger holds. */
  async #recordedEarlier(transactionIds: readonly string[] | undefined, merchantId: string): Promise<LedgerRecord | undefined> {
    for (const transactionId of transactionIds ?? []) {
      const record = await this.writer.store.get(ledgerKey(merchantId, transactionId));
      if (record) return record;
    }
    return undefined;
  }

  /** `background`: answered as recorded, delivery left to the worker (a register's REVERSE). */
  async #deliverRefund(pos: string, record: LedgerRecord, repeat: boolean, refundId: string | undefined, background = false): Promise<Answer> {
    if (!repeat) failpoint('refund:after-ledger-write');
    const merchantId = merchantOf(record);
    const delivery = !repeat && !background && isOpen(record) ? this.delivery.mayDeliverInline(merchantId) : 'later';
    let delivered = record;
    try {
      if (delivery !== 'later') delivered = await this.delivery.deliverWithinBudget(keyOf(record));
    } finally {
      if (delivery === 'probe') this.delivery.inlineDone(merchantId);
    }
    this.metrics.refunds.inc({ pos, result: repeat ? 'repeat' : delivered.status, ...this.metrics.merchant(merchantOf(record)) });
    return answerFor(this.writer.store, delivered, repeat, refundId);
  }
}

/** A refund as the core carries it out: its amount and/or lines, and how it was measured when the ledger measured it. */
type MeasuredRefund = Pick<RefundIntent, 'amountCents' | 'items'> & { note?: string };

/** The transition with `note` added to the history event it writes. */
function withNote<T extends Transition | undefined>(transition: T, note: string | undefined): T {
  if (!transition || !note) return transition;
  return { ...transition, event: transition.event ? `${transition.event} (${note})` : note };
}

/**
 * A refund that states only the money given back, tax and tip included (`paidBack`), measured
 * against the order as the ledger recorded it (`chain`: the original record, then the remainders of
 * earlier partial refunds). All that was paid, the original Check + tax + tip, is a full refund.
 * Less is a partial refund of that share of the original Check, tax and tip excluded like every
 * refund: `proRataCents(paid back, paid, Check)`, rounded once, half away from zero. Each earlier
 * partial refund so measured may have rounded up by half a cent, so a refund that would take up to
 * that many cents more than remains is the rest of the payment: what remains, in full.
 */
function measureFromLedger(intent: RefundIntent, paidBack: NonNullable<RefundIntent['paidBack']>, chain: LedgerRecord[]): MeasuredRefund {
  const root = chain[0];
  if (!root) throw new NotFoundError(`no order ${intent.orderId} in the ledger to measure this refund against: ${paidBack.unknownOrder}`, 'unknown_order');
  const check = root.accrual.check;
  // Recorded by a refund of an order the ledger never saw: no Check, and the order is reversed already.
  if (!check) return { note: `${paidBack.note}: the order was recorded without its sale, so the refund is taken as full` };
  if (paidBack.currency !== check.currency) {
    throw ValidationError.field('currency', `the refund is in ${paidBack.currency}, but order ${intent.orderId} was recorded in ${check.currency}`);
  }
  const paid = check.amount + (check.taxAmount ?? 0) + (check.tipAmount ?? 0);
  const money = (cents: number) => formatCents(cents, check.currency);
  const basis = `${money(paidBack.cents)} given back of the ${money(paid)} paid (Check ${money(check.amount)}, tax ${money(check.taxAmount ?? 0)}, tip ${money(check.tipAmount ?? 0)} as recorded)`;
  if (paidBack.cents === paid) return { note: `${paidBack.note}: ${basis}, all of it: a full refund` };
  if (paidBack.cents > paid) {
    throw new ConflictError(`refund of ${money(paidBack.cents)} is more than the ${money(paid)} paid for order ${intent.orderId} (its Check, tax and tip as recorded)`, { orderId: intent.orderId, paidCents: paid, paidBackCents: paidBack.cents });
  }
  let amountCents = proRataCents(paidBack.cents, paid, check.amount, 'refund');
  if (amountCents === 0) throw ValidationError.field('refund', `${basis} is less than half a cent of the Check once tax and tip are taken out pro rata: nothing to reverse`);
  const current = chain.at(-1)!;
  const remaining = current.reversal.partial?.remainderCheck.amount ?? (current.accrual.check?.amount ?? 0) - (current.reversal.partialRefundedCents ?? 0);
  let rest = '';
  if (amountCents > remaining && amountCents - remaining <= chain.length - 1) {
    rest = ` (${amountCents - remaining} cent${amountCents - remaining === 1 ? '' : 's'} over what remains, from earlier refunds rounded up: the rest of the payment)`;
    amountCents = remaining;
  }
  return { amountCents, note: `${paidBack.note}: ${basis}, so ${amountCents} cents of the ${check.amount}-cent Check, pro rata, rounded half away from zero${rest}` };
}

/** The order's original record (by ledger key) followed by the remainders of its partial refunds, in order. */
export async function chainOf(writer: RecordWriter, rootKey: string): Promise<LedgerRecord[]> {
  const chain: LedgerRecord[] = [];
  for (let key: string | undefined = rootKey; key && chain.length < 1000; ) {
    const record: LedgerRecord | undefined = await writer.store.get(key);
    if (!record) break;
    chain.push(record);
    key = record.remainderTransactionId ? ledgerKey(merchantOf(record), record.remainderTransactionId) : undefined;
  }
  return chain;
}

export { MOVED };
