/**
 * What an operator does to a record through the admin API: deliver again what provably did not
 * happen, reverse an accrual, settle by hand a call whose outcome is unknown, close what cannot
 * succeed, acknowledge deliveries with another amount. Each waits for a pass over the same record
 * that runs here (short unless a call is out) and is decided by the pure transitions on the record
 * as it then is. Each carries who did it and why (`OperatorAct`): written into the record's history
 * and, once it is done, into the audit trail.
 */
import { ConflictError, echoed, NotFoundError, type BridgeError } from '../kernel/errors.js';
import { keyOf, merchantOf, transactionIdOf, type LedgerRecord, type OperatorAct } from '../state/record.js';
import { leadOf, type RecordLead } from '../state/lead.js';
import type { AuditEntry, DeadLetter } from '../ledger/store.js';
import { answerFor, type Answer } from './answer.js';
import type { DeliveryService } from './delivery.js';
import type { Evidence } from './history-verifier.js';
import { chainOf, MOVED, type IntakeService } from './intake.js';
import type { RecordWriter } from './record-writer.js';
import { acknowledge, close, operatorActions, resolve, retry, startProbe, type ActionAllowed, type OperatorActionName, type ResolveInput } from './transitions.js';
import { dismiss, dismissRefusal, replayRefusal } from './dead-letter-transitions.js';
import { previewBulk, runBulk, type BulkOutcome, type BulkPreview, type BulkRequest } from './bulk.js';
import { contactIdentities } from '../state/customer-index.js';

export type { ResolveInput };

export interface ActOptions {
  /** false: the record is changed and left to the worker, instead of delivered within the answer budget (bulk actions). */
  deliver?: boolean;
  /** Part of a bulk action: audited as `bulk:<action>`. */
  bulk?: boolean;
}

export class OperatorActions {
  constructor(
    private readonly writer: RecordWriter,
    private readonly delivery: DeliveryService,
    private readonly intake: IntakeService,
  ) {}

  /** Each action names the record by its ledger key (`ledgerKey`: the transactionId within its merchant). */
  async retry(key: string, act: OperatorAct, options: ActOptions = {}): Promise<Answer> {
    await this.delivery.passFinished(key);
    const changed = await this.writer.change(key, (r) => retry(r, act));
    return this.#done('retry', act, changed, options);
  }

  async reverse(key: string, act: OperatorAct, options: ActOptions = {}): Promise<Answer> {
    const refundId = `operator:${this.writer.now().toISOString()}${act.reason ? `:${act.reason.slice(0, 40)}` : ''}`;
    // What remains of the order may have moved to remainder records: the operator reverses the last.
    const answer = await this.intake.reverseSale(key, refundId, `asked by ${act.actor}`, { act });
    if (!answer) throw new NotFoundError(`no ledger record ${echoed(transactionIdOf(key))}`);
    await this.audit(`${options.bulk ? 'bulk:' : ''}reverse`, act, answer.record);
    return answer;
  }

  /**
   * "Ask the service": a person starts the probe of an accrual the history leaves ambiguous
   * (transitions.ts `startProbe`), whatever the merchant's policy; the pass then makes its reverse.
   */
  async ask(key: string, act: OperatorAct, options: ActOptions = {}): Promise<Answer> {
    await this.delivery.passFinished(key);
    const changed = await this.writer.change(key, (r) => startProbe(r, this.writer.now(), act));
    return this.#done('ask', act, changed, options);
  }

  async resolve(key: string, input: ResolveInput, act: OperatorAct, options: ActOptions = {}): Promise<Answer> {
    await this.delivery.passFinished(key);
    const record = await this.writer.require(key);
    const named = input.operationId === undefined && input.outcome === 'accrued' && record.accrual.state === 'in_doubt' ? await this.#onlyCandidate(key) : undefined;
    const settled = named === undefined ? input : { ...input, operationId: named, note: `${input.note ? `${input.note}; ` : ''}operation ${named}, the only one the history shows for it, claimed` };
    const claimedBy = settled.operationId !== undefined ? await this.writer.store.findOperationClaim(merchantOf(record), settled.operationId) : undefined;
    const changed = await this.writer.change(key, (r) => resolve(r, settled, claimedBy, act, this.writer.now()));
    return this.#done(`resolve ${input.outcome}`, act, changed, options);
  }

  /**
   * The one operation the history shows that could be this in-doubt accrual's, when there is
   * exactly one: a person's `resolve accrued` claims it, so that no later accrual of the customer
   * and amount takes it for its own (found by the model check, docs/correctness.md). None when the
   * history cannot be read or shows none or several; the person's word stands either way, and an
   * unclaimed operation then counts as that record's for the verifier (history-verifier.ts).
   */
  async #onlyCandidate(key: string): Promise<number | undefined> {
    try {
      const evidence = await this.delivery.evidence(key, false);
      const candidates = evidence.question === 'accrual' ? evidence.operations.filter((op) => op.candidate) : [];
      return candidates.length === 1 ? candidates[0]!.id : undefined;
    } catch {
      return undefined;
    }
  }

  /** An orphan `reverse_failed` (a refund of an order the loyalty service never knew): kept, marked closed, audited. */
  async close(key: string, act: OperatorAct & { reason: string }, options: ActOptions = {}): Promise<Answer> {
    await this.delivery.passFinished(key);
    const changed = await this.writer.change(key, (r) => close(r, act, this.writer.now()));
    return this.#done('close', act, changed, { ...options, deliver: false });
  }

  /** A refusal or deliveries with another amount settled outside the bridge: out of the attention queue until the record needs a person again. */
  async acknowledge(key: string, act: OperatorAct & { reason: string }, options: ActOptions = {}): Promise<Answer> {
    const changed = await this.writer.change(key, (r) => acknowledge(r, act, this.writer.now()));
    return this.#done('acknowledge', act, changed, { ...options, deliver: false });
  }

  /** One action on many records (`runBulk`), each through the action above, within the bulk budget on the core's clock. */
  bulk(request: BulkRequest): Promise<BulkOutcome> {
    return runBulk(request, { actions: this, store: this.writer.store, now: () => this.writer.now() });
  }

  /** What the bulk request would do, doing nothing (`previewBulk`): the console shows it before it asks. */
  previewBulk(request: BulkRequest, options: { anyOutcome?: boolean } = {}): Promise<BulkPreview> {
    return previewBulk(request, { actions: this, store: this.writer.store }, options);
  }

  /**
   * Closes a dead letter without running it (an event there is nothing to do about): kept whole,
   * marked resolved and dismissed with who and why, never run again by anyone. Refused while a run
   * holds it, and once resolved.
   */
  async dismissDeadLetter(id: string, act: OperatorAct & { reason: string }): Promise<DeadLetter> {
    const nowMs = this.writer.now().getTime();
    let refused: BridgeError | undefined;
    const letter = await this.writer.store.updateDeadLetter(id, (current) => {
      const result = dismiss(current, act, nowMs);
      if (result.kind === 'dismissed') return result.letter;
      refused = result.kind === 'missing' ? new NotFoundError(`no dead letter ${echoed(id)}`) : new ConflictError(result.why, { deadLetterId: id });
      return undefined;
    });
    if (refused || !letter) throw refused ?? new NotFoundError(`no dead letter ${echoed(id)}`);
    await this.audit('dismiss', act, { id, merchantId: letter.merchantId }, 'dismissed');
    return letter;
  }

  /** What may be done to the dead letter now, and why not (the same rules replay and dismiss apply). */
  deadLetterActions(letter: DeadLetter): { replay: ActionAllowed; dismiss: ActionAllowed } {
    const nowMs = this.writer.now().getTime();
    const rule = (why: string | undefined): ActionAllowed => (why ? { allowed: false, why } : { allowed: true });
    return { replay: rule(replayRefusal(letter, nowMs)), dismiss: rule(dismissRefusal(letter, nowMs)) };
  }

  /** Whether the bridge can read the merchant's operations history, so its words say which case applies. */
  canVerify(merchantId: string): Promise<boolean | undefined> {
    return this.delivery.canVerify(merchantId);
  }

  /** What the record's page leads with: why it needs a person, and what the bridge does next by itself (state/lead.ts). */
  async lead(record: LedgerRecord): Promise<RecordLead> {
    return leadOf(record, { canVerify: await this.canVerify(merchantOf(record)), nowMs: this.writer.now().getTime() });
  }

  /** What may be done to the record now, and why not (the same transitions the actions run). */
  async allowed(record: LedgerRecord): Promise<Record<OperatorActionName, ActionAllowed>> {
    const chainLast = record.remainderTransactionId ? (await chainOf(this.writer, keyOf(record))).at(-1) : undefined;
    return operatorActions(record, this.writer.now(), chainLast ?? record);
  }

  /**
   * The identifiers a customer search by card serial also looks under: the phone and email of the
   * card's owner as the loyalty service knows them, so that a customer the POS named by phone or
   * email is found by the card the accrual credited (the index holds what the POS sent). Each `card:`
   * identity is asked once of the merchant's loyalty service (its API key); a card it does not know,
   * or a service it cannot ask, adds nothing, and `asked` says how it went for the audit trail.
   */
  async cardOwnerIdentities(merchantId: string, identities: readonly string[], region: string): Promise<{ identities: string[]; asked: 'found' | 'unknown_card' | 'not_read' | 'no_card' }> {
    const serials = identities.filter((i) => i.startsWith('card:')).map((i) => i.slice('card:'.length));
    if (serials.length === 0) return { identities: [], asked: 'no_card' };
    const found: string[] = [];
    let asked: 'found' | 'unknown_card' | 'not_read' = 'unknown_card';
    for (const serial of serials) {
      let owner: { phone?: string; email?: string } | undefined;
      try {
        owner = await this.delivery.cardOwner(merchantId, serial);
      } catch {
        asked = asked === 'found' ? asked : 'not_read';
        continue;
      }
      if (!owner) continue;
      asked = 'found';
      found.push(...contactIdentities(owner, region));
    }
    return { identities: [...new Set(found)], asked };
  }

  /** What the loyalty history shows around the record's uncertain call, for the person deciding it; changes nothing. */
  evidence(key: string): Promise<Evidence> {
    return this.delivery.evidence(key);
  }

  /** Keeps an operator action in the audit trail. */
  async audit(action: string, act: OperatorAct, target: { transactionId?: string; id?: string; merchantId?: string; status?: string }, outcome?: string): Promise<void> {
    const entry: AuditEntry = {
      at: this.writer.now().toISOString(),
      actor: act.actor,
      action,
      target: target.transactionId ?? target.id ?? '',
      ...(act.reason ? { reason: act.reason } : {}),
      ...(target.transactionId ? { merchantId: merchantOf(target) } : target.merchantId ? { merchantId: target.merchantId } : {}),
      ...(outcome ?? target.status ? { outcome: outcome ?? target.status } : {}),
    };
    await this.writer.store.appendAudit(entry);
  }

  async #done(action: string, act: OperatorAct, changed: LedgerRecord, options: ActOptions): Promise<Answer> {
    const key = keyOf(changed);
    const record = options.deliver === false ? changed : await this.delivery.deliverWithinBudget(key);
    await this.audit(`${options.bulk ? 'bulk:' : ''}${action}`, act, record);
    return answerFor(this.writer.store, record, false);
  }
}
