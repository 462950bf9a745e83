/**
 * How ledger records are shown to a POS and to operators. Each view is typed as the schema
 * `/openapi.json` documents (`schemas.ts`), so a field added here and not there fails to compile.
 */
import { merchantOf, type LedgerRecord } from '../ledger/record.js';
import type { Answer, AnswerOutcome } from '../core/answer.js';
import type { PosAnswer, RecordDetail, RecordSummary } from './schemas.js';

/** The one mapping of the core's outcomes to HTTP (bridge-contract: 200 final now, 202 still being delivered, 404 an order nobody knows). */
const ANSWER_STATUS: Record<AnswerOutcome, number> = { settled: 200, in_progress: 202, unknown_order: 404 };

export function answerStatus(answer: Pick<Answer, 'outcome'>): number {
  return ANSWER_STATUS[answer.outcome];
}

/** The POS's answer: at least `transactionId` and `status`, plus the upstream results when there are any. */
export function posAnswer(answer: Answer): PosAnswer {
  const { record } = answer;
  const reversalSide = record.reversal.state !== 'none' && record.reversal.state !== 'not_needed';
  const side = reversalSide ? record.reversal : record.accrual;
  return {
    transactionId: record.transactionId,
    status: record.status,
    pos: record.pos,
    orderId: record.orderId,
    repeat: answer.repeat,
    ...(answer.refundId ? { refundId: answer.refundId } : {}),
    ...(answer.remainder ? { remainder: answer.remainder } : {}),
    ...(side.results.length ? { results: side.results } : {}),
    ...(side.errors.length ? { errors: side.errors } : {}),
  };
}

/** One row of the admin list: the Check sent and the results, without the attempt log. */
export function recordSummary(record: LedgerRecord): RecordSummary {
  return {
    transactionId: record.transactionId,
    merchantId: merchantOf(record),
    status: record.status,
    pos: record.pos,
    orderId: record.orderId,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    check: record.accrual.check,
    results: record.accrual.results,
    errors: [...record.accrual.errors, ...record.reversal.errors],
    accrual: { state: record.accrual.state, settledBy: record.accrual.settledBy, operationIds: record.accrual.operationIds, inDoubtSince: record.accrual.inDoubtSince },
    reversal: { state: record.reversal.state, refundIds: record.reversal.refundIds, results: record.reversal.results, inDoubtSince: record.reversal.inDoubtSince },
    nextAttemptAt: record.nextAttemptAt,
    parentTransactionId: record.parentTransactionId,
    remainderTransactionId: record.remainderTransactionId,
    partialRefund: record.reversal.partial,
  };
}

/** One record in full: customer, every attempt and the history of status changes. */
export function recordDetail(record: LedgerRecord): RecordDetail {
  return { ...recordSummary(record), version: record.version, customer: record.accrual.customer, inFlight: record.inFlight, rounds: record.rounds, attempts: record.attempts, attemptsOmitted: record.attemptsOmitted, history: record.history, changedRepeats: record.changedRepeats };
}
