/**
 * Realistic payloads and ledger records for the benchmark, built the way the bridge builds them:
 * the generic adapter parses a POS checkout into an intent, the transactionId is derived from the
 * order id, and the record carries what TransactionService writes for an accrued checkout (the
 * Check with its selections, the customer, one `accrue` attempt with the request sent and the
 * simulator-shaped answer, and the history events).
 */
import { genericAdapter } from '../adapters/generic/index.js';
import type { AccrueRequest } from '../src/loyalty/contract.js';
import type { LedgerRecord } from '../src/state/record.js';
import { deriveTransactionId } from '../src/kernel/transaction-id.js';
import { EXAMPLE_CHECKOUT } from '../adapters/generic/example.js';

export const ADAPTER_CONTEXT = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };

/** Distinct loyalty customers the load cycles through (the simulator finds-or-creates them by phone). */
export const CUSTOMER_POOL = 1000;

export function phoneOf(n: number): string {
  return `+1555${String(10_000_000 + (n % CUSTOMER_POOL)).slice(1)}`;
}

/** A generic-adapter checkout: two items, tax and tip, a customer with phone and email. */
export function checkoutPayload(orderId: string, n: number): Record<string, unknown> {
  const c = n % CUSTOMER_POOL;
  return {
    ...EXAMPLE_CHECKOUT,
    orderId,
    customer: { phone: phoneOf(n), email: `guest${c}@example.test`, firstName: 'Ann', lastName: `Lee${c}` },
    items: [
      { id: 'sku-1', groupId: 'coffee', name: 'Latte', quantity: 2, unitPrice: '19.99', total: '39.98' },
      { id: 'sku-7', groupId: 'bakery', name: 'Almond croissant', quantity: 1, unitPrice: '19.99', total: '19.99' },
    ],
  };
}

/** What the bridge sends upstream for that checkout (LoyaltyClient.accrue's body). */
export function accrueBodyFor(payload: Record<string, unknown>): AccrueRequest {
  const intent = genericAdapter.parseCheckout(payload, ADAPTER_CONTEXT);
  return { transactionId: deriveTransactionId('generic', intent.orderId, intent.scope), check: intent.check, ...intent.customer };
}

const BASE_MS = Date.parse('2026-01-01T00:00:00Z');

/**
 * The record of the n-th checkout once accrued: as TransactionService leaves it after insert,
 * the recorded answer (2 writes: the insert carries the in-flight mark), except `version`, which the caller chooses
 * (the store only accepts version 1 on insert).
 */
export function accruedRecord(orderId: string, n: number, version = 1): LedgerRecord {
  const payload = checkoutPayload(orderId, n);
  const intent = genericAdapter.parseCheckout(payload, ADAPTER_CONTEXT);
  const transactionId = deriveTransactionId('generic', intent.orderId, intent.scope);
  const request: AccrueRequest = { transactionId, check: intent.check, ...intent.customer };
  const t0 = BASE_MS + n * 1000;
  const iso = (ms: number) => new Date(ms).toISOString();
  const simTime = `${iso(t0 + 12).slice(0, 19)}+00:00`;
  const operationId = n + 1;
  const result = {
    installationId: (n % CUSTOMER_POOL) + 1,
    templateId: 1,
    companyId: 1,
    cardType: 1,
    serialNumber: `1${String(100001 + (n % CUSTOMER_POOL))}`,
    checkAmount: intent.check.amount,
    createdAt: simTime,
    reversedAt: null,
    isSuccess: true,
    errorMessage: null,
    accrualAmount: intent.check.amount,
    accruedValue: Math.floor(intent.check.amount / 100),
    operationId,
  };
  return {
    transactionId,
    version,
    pos: 'generic',
    orderId: intent.orderId,
    status: 'accrued',
    createdAt: iso(t0),
    updatedAt: iso(t0 + 15),
    accrual: {
      state: 'accrued',
      check: intent.check,
      customer: intent.customer,
      results: [result],
      errors: [],
      operationIds: [operationId],
      settledBy: 'upstream',
    },
    reversal: { state: 'none', refundIds: [], results: [], errors: [] },
    rounds: 0,
    attempts: [
      {
        operation: 'accrue',
        startedAt: iso(t0 + 2),
        finishedAt: iso(t0 + 14),
        request,
        response: { status: 200, body: { transactionId, results: [result] } },
      },
    ],
    history: [
      { at: iso(t0), event: 'checkout recorded', to: 'pending' },
      { at: iso(t0 + 15), event: 'accrue succeeded for 1 card(s)', from: 'pending', to: 'accrued' },
    ],
  };
}
