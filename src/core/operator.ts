/**
 * What an operator does to a record through the admin API: deliver again what provably did not
 * happen, reverse an accrual, settle by hand a call whose outcome is unknown. Each waits for a pass
 * over the same record that runs here (short unless a call is out) and is decided by the pure
 * transitions on the record as it then is.
 */
import { ConflictError, NotFoundError } from '../errors.js';
import { merchantOf } from '../ledger/record.js';
import { answerFor, type Answer } from './answer.js';
import type { DeliveryService } from './delivery.js';
import { chainOf, MOVED, type IntakeService } from './intake.js';
import type { RecordWriter } from './record-writer.js';
import { resolve, retry, type ResolveInput } from './transitions.js';

export type { ResolveInput };

export class OperatorActions {
  constructor(
    private readonly writer: RecordWriter,
    private readonly delivery: DeliveryService,
    private readonly intake: IntakeService,
  ) {}

  /** Each action names the record by its ledger key (`ledgerKey`: the transactionId within its merchant). */
  async retry(key: string): Promise<Answer> {
    await this.delivery.passFinished(key);
    await this.writer.change(key, (r) => retry(r));
    return answerFor(this.writer.store, await this.delivery.deliverWithinBudget(key), false);
  }

  async reverse(key: string, reason?: string): Promise<Answer> {
    const refundId = `operator:${this.writer.now().toISOString()}${reason ? `:${reason.slice(0, 40)}` : ''}`;
    // What remains of the order may have moved to remainder records: the operator reverses the last.
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = (await chainOf(this.writer, key)).at(-1);
      if (!current) throw new NotFoundError(`no ledger record ${key}`);
      const answer = await this.intake.reversal({ transactionId: current.transactionId, merchantId: merchantOf(current), pos: current.pos, orderId: current.orderId }, refundId);
      if (answer !== MOVED) return answer;
    }
    throw new ConflictError('the record kept changing; try again');
  }

  async resolve(key: string, input: ResolveInput): Promise<Answer> {
    await this.delivery.passFinished(key);
    const record = await this.writer.require(key);
    const claimedBy = input.operationId !== undefined ? await this.writer.store.findOperationClaim(merchantOf(record), input.operationId) : undefined;
    await this.writer.change(key, (r) => resolve(r, input, claimedBy));
    return answerFor(this.writer.store, await this.delivery.deliverWithinBudget(key), false);
  }
}
