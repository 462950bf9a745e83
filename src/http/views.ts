/**
 * How ledger records are shown to a POS and to operators. Each view is typed as the schema
 * `/openapi.json` documents (`schemas.ts`), so a field added here and not there fails to compile.
 */
import type { Response } from 'express';
import { merchantOf, type LedgerRecord } from '../state/record.js';
import { maskCardSerial, maskContacts, maskContactsInJson } from '../kernel/mask.js';
import { formatCents, formatMajor, moneyInText } from '../kernel/money.js';
import type { Evidence } from '../core/history-verifier.js';
import type { Answer, AnswerOutcome } from '../core/answer.js';
import type { KeptPayload as StoredPayload, DeadLetter as StoredDeadLetter } from '../ledger/store.js';
import type { DeadLetter, EvidenceAnswer, KeptPayload, PosAnswer, RecordDetail, RecordSummary } from './schemas.js';

/** The one mapping of the core's outcomes to HTTP (bridge-contract: 200 final now, 202 still being delivered, 404 an order nobody knows). */
const ANSWER_STATUS: Record<AnswerOutcome, number> = { settled: 200, in_progress: 202, unknown_order: 404 };

export function answerStatus(answer: Pick<Answer, 'outcome'>): number {
  return ANSWER_STATUS[answer.outcome];
}

/**
 * Sends the POS's answer with its status. A 404 (a refund of an order nobody knows) is an answer,
 * not an error, but a refusal all the same: the request log says why (`res.locals.refusal`).
 */
export function sendAnswer(res: Response, answer: Answer): void {
  const status = answerStatus(answer);
  if (answer.outcome === 'unknown_order') res.locals.refusal = { code: 'unknown_order', message: `neither the ledger nor the loyalty service knows the order of ${answer.record.transactionId}` };
  res.status(status).json(posAnswer(answer));
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
  const check = record.accrual.check;
  return {
    transactionId: record.transactionId,
    merchantId: merchantOf(record),
    status: record.status,
    pos: record.pos,
    orderId: record.orderId,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    check,
    results: record.accrual.results,
    // The bridge's own words about amounts are shown as money, once, here (money.ts moneyInText).
    errors: [...record.accrual.errors, ...record.reversal.errors].map((e) => moneyInText(e, check?.currency)),
    accrual: { state: record.accrual.state, settledBy: record.accrual.settledBy, operationIds: record.accrual.operationIds, inDoubtSince: record.accrual.inDoubtSince },
    reversal: {
      state: record.reversal.state,
      refundIds: record.reversal.refundIds,
      results: record.reversal.results,
      inDoubtSince: record.reversal.inDoubtSince,
      ...(record.reversal.operationIds ? { operationIds: record.reversal.operationIds } : {}),
      ...(record.reversal.shape ? { shape: record.reversal.shape } : {}),
      ...(record.reversal.unproven ? { unproven: record.reversal.unproven } : {}),
    },
    nextAttemptAt: record.nextAttemptAt,
    parentTransactionId: record.parentTransactionId,
    remainderTransactionId: record.remainderTransactionId,
    partialRefund: record.reversal.partial,
    closed: record.closed,
    acknowledged: record.acknowledged,
    ...(check ? { amountText: formatCents(check.amount, check.currency) } : {}),
  };
}

/** A record's amounts besides the Check's, as a person reads them (`RecordMoneyText`). */
function moneyTextOf(record: LedgerRecord): RecordDetail['moneyText'] {
  const check = record.accrual.check;
  const currency = check?.currency;
  const text = (cents: number | undefined) => (cents === undefined ? undefined : formatCents(cents, currency));
  const repeats = record.changedRepeats;
  return {
    tax: text(check?.taxAmount),
    discount: text(check?.discountAmount),
    tip: text(check?.tipAmount),
    service: text(check?.serviceAmount),
    selections: (check?.selections ?? []).map((s) => ({ price: text(s.price), totalPrice: text(s.totalPrice) })),
    partialRefunded: text(record.reversal.partial?.refundedCents),
    ...(repeats ? { changedRepeats: { first: repeats.first.map((d) => formatCents(d.amountCents, currency)), latest: repeats.latest.map((d) => formatCents(d.amountCents, currency)) } } : {}),
  };
}

/**
 * The evidence as operators read it: each operation's purchase sum as money in the record's
 * currency, and every amount the bridge's words give in cents as money (money.ts).
 */
export function evidenceView(evidence: Evidence, currency: string | undefined): EvidenceAnswer {
  return {
    ...evidence,
    why: moneyInText(evidence.why, currency),
    operations: evidence.operations.map((o) => ({ ...o, purchaseText: formatMajor(o.purchaseSum, currency), why: moneyInText(o.why, currency) })),
  };
}

/** A record's customer as an operator is shown it unless they ask: phone and email withheld, the card serial's end kept to recognise it. */
function maskedCustomer(customer: NonNullable<LedgerRecord['accrual']['customer']>): NonNullable<LedgerRecord['accrual']['customer']> {
  const masked = maskContactsInJson(customer) as typeof customer;
  return customer.serialNumber ? { ...masked, serialNumber: maskCardSerial(customer.serialNumber) } : masked;
}

/**
 * One record in full: customer, every attempt, the history of status changes, and what an operator
 * may do now. Masked (the default), as a dead letter's body is: the customer's phone number and
 * email, and those in what each attempt sent and got back, are replaced, and the card serial cut to its end (docs/operators.md: no
 * personal data unless asked for explicitly). `unmask`: as kept.
 */
export function recordDetail(record: LedgerRecord, actions: RecordDetail['actions'], lead: RecordDetail['lead'], unmask = false): RecordDetail {
  const customer = record.accrual.customer;
  const currency = record.accrual.check?.currency;
  return {
    ...recordSummary(record),
    actions,
    lead: { needsPerson: lead.needsPerson.map((n) => ({ ...n, why: moneyInText(n.why, currency) })), bridge: { ...lead.bridge, what: moneyInText(lead.bridge.what, currency) } },
    moneyText: moneyTextOf(record),
    version: record.version,
    customer: customer && !unmask ? maskedCustomer(customer) : customer,
    inFlight: record.inFlight,
    rounds: record.rounds,
    attempts: unmask ? record.attempts : record.attempts.map((a) => ({ ...a, request: maskContactsInJson(a.request), ...(a.response ? { response: { ...a.response, body: maskContactsInJson(a.response.body) } } : {}) })),
    attemptsOmitted: record.attemptsOmitted,
    // The bridge's own lines worded as money; an operator's reason (`detail`) stays as they wrote it.
    history: record.history.map((e) => ({ ...e, event: moneyInText(e.event, currency) })),
    changedRepeats: record.changedRepeats,
    ...(record.origin ? { origin: record.origin } : {}),
    masked: !unmask,
  };
}

/** A record's kept payload: masked as a dead letter's body is (see `deadLetterDetail`), unless `unmask`. */
export function keptPayloadView(payload: StoredPayload, unmask: boolean): KeptPayload {
  return { ...payload, ...(unmask ? {} : { body: maskedBody(payload.body, payload.bodyEncoding) }), masked: !unmask };
}

/** A dead letter in a list: what it is and where it stands, without the delivery (no body, headers or signatures). */
export function deadLetterSummary(letter: StoredDeadLetter): Omit<StoredDeadLetter, 'headers' | 'body' | 'bodyEncoding'> {
  const { headers: _headers, body: _body, bodyEncoding: _encoding, ...summary } = letter;
  return summary;
}

/**
 * A dead letter's detail. Masked (the default), customers' phone numbers and emails in the body are
 * replaced: in JSON, every value under a key that names a phone or an email, and anything written
 * like one in other strings; in other text, anything written like one. A base64 body cannot be read
 * for them and is withheld. `unmask`: the delivery as kept, byte for byte. `actions`: what an
 * operator may do to it now (OperatorActions.deadLetterActions).
 */
export function deadLetterDetail(letter: StoredDeadLetter, unmask: boolean, actions: DeadLetter['actions']): DeadLetter {
  if (unmask) return { ...letter, masked: false, actions };
  return { ...letter, body: maskedBody(letter.body, letter.bodyEncoding), masked: true, actions };
}

/** A kept body with customers' contacts masked: JSON by key and by shape, other text by shape; base64 withheld (it cannot be read for them). */
function maskedBody(body: string, encoding: 'utf8' | 'base64'): string {
  if (encoding === 'base64') return '';
  try {
    return JSON.stringify(maskContactsInJson(JSON.parse(body)));
  } catch {
    return maskContacts(body);
  }
}
