/**
 * What the store contract suites (and the tests of the core, the reconciler and the stores) build
 * their ledgers from: records, merchants and dead letters as the bridge writes them, at fixed times.
 */
import { deriveStatus, keyOf, type AccrualState, type LedgerRecord, type ReversalState } from '../../../src/state/record.js';
import type { DeadLetter } from '../../../src/ledger/store.js';
import type { StoredMerchant } from '../../../src/state/merchant.js';


/** All test records are created at T0 + n minutes, so times never tie unless a test says so. */
const T0 = Date.parse('2026-03-01T09:00:00.000Z');
export const minutes = (n: number): string => new Date(T0 + n * 60_000).toISOString();

export interface RecordOptions {
  pos?: string;
  orderId?: string;
  /** Minutes after T0. */
  at?: number;
  accrual?: AccrualState;
  reversal?: ReversalState;
  operationIds?: number[];
  inFlight?: boolean;
  /** Minutes after T0: the end of the pause before the next round. */
  nextAttemptAt?: number;
  /** Default: a customer of this record's own, so records never share an accrual key unless a test says so. */
  customer?: LedgerRecord['accrual']['customer'];
  /** Default 5997. */
  amount?: number;
  /** A reversal in doubt the operations history did not prove (`reversal.unproven`): a person's to settle. */
  reversalUnproven?: boolean;
}

/** A phone and email of this transactionId's own. */
function customerOf(transactionId: string): NonNullable<LedgerRecord['accrual']['customer']> {
  const digits = String([...transactionId].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 10_000_000, 7)).padStart(7, '0');
  return { phone: `+1555${digits}`, email: `${transactionId.replace(/[^A-Za-z0-9]/g, '-')}@example.test`, firstName: 'Ann' };
}

/** A valid, fully populated LedgerRecord at version 1; `status` is derived as the bridge derives it. */
export function makeRecord(transactionId: string, options: RecordOptions = {}): LedgerRecord {
  const pos = options.pos ?? 'generic';
  const createdAt = minutes(options.at ?? 0);
  const accrualState = options.accrual ?? 'pending';
  const reversalState = options.reversal ?? 'none';
  const operationIds = options.operationIds ?? [];
  const record: LedgerRecord = {
    transactionId,
    version: 1,
    pos,
    orderId: options.orderId ?? transactionId.split(':').pop()!,
    status: 'pending',
    createdAt,
    updatedAt: createdAt,
    accrual: {
      state: accrualState,
      check: {
        amount: options.amount ?? 5997,
        currency: 'USD',
        externalTransactionId: transactionId,
        taxAmount: 480,
        selections: [{ id: 'sku-1', groupId: 'coffee', displayName: 'Latte ☕', quantity: 3, price: 1999, totalPrice: 5997 }],
      },
      customer: options.customer ?? customerOf(transactionId),
      results: operationIds.map((operationId) => ({
        isSuccess: true,
        errorMessage: null,
        serialNumber: '11-100001-2',
        checkAmount: 5997,
        accruedValue: 59,
        operationId,
        createdAt: '2026-03-01T09:00:01+00:00',
        reversedAt: null,
      })),
      errors: [],
      operationIds,
    },
    reversal: { state: reversalState, refundIds: [], results: [], errors: [] },
    rounds: 0,
    attempts: [
      {
        operation: 'accrue',
        startedAt: createdAt,
        finishedAt: createdAt,
        request: { transactionId, check: { amount: 5997, currency: 'USD', selections: [] }, phone: '+15550001111' },
        response: { status: 429, body: '<html>429 Too Many Requests</html>' },
      },
    ],
    history: [{ at: createdAt, event: 'received', to: 'pending', detail: 'test record' }],
  };
  if (accrualState === 'in_doubt') record.accrual.inDoubtSince = createdAt;
  if (options.inFlight) record.inFlight = { operation: 'accrue', startedAt: createdAt, owner: 'test-worker' };
  if (options.nextAttemptAt !== undefined) record.nextAttemptAt = minutes(options.nextAttemptAt);
  if (options.reversalUnproven) record.reversal.unproven = { at: createdAt, why: 'no entry of the learned shape' };
  record.status = deriveStatus(record);
  return record;
}

/** A stored merchant with sealed-looking secrets and token hashes of its own; `accounts` by POS. */
export function makeMerchant(id: string, accounts: Record<string, string> = {}): StoredMerchant {
  const sealed = (what: string) => ({ alg: 'aes-256-gcm' as const, key: '0123456789abcdef', iv: 'aXY=', tag: 'dGFn', data: Buffer.from(`${id}:${what}`).toString('base64'), hint: '…abcd' });
  return {
    id,
    version: 1,
    name: `Merchant ${id}`,
    status: 'active',
    loyalty: { appToken: sealed('app'), apiKey: sealed('key') },
    currency: 'EUR',
    pos: Object.fromEntries(Object.entries(accounts).map(([pos, account]) => [pos, { account, accessToken: sealed(pos) }])),
    tokens: { pos: `pos-hash-${id}`, admin: `admin-hash-${id}` },
    createdAt: minutes(0),
    updatedAt: minutes(0),
  };
}

export interface LetterOptions {
  pos?: string;
  merchantId?: string;
  /** Minutes after T0. */
  at?: number;
  resolved?: boolean;
  /** Minutes after T0: when the bridge runs it again by itself; absent: it waits for a person. */
  nextAt?: number;
  attempts?: number;
  /** Held by this owner until this many minutes after T0. */
  claim?: { owner: string; until: number };
}

/** A dead letter as ingest keeps one: a body that is not UTF-8-clean kept in base64, headers without credentials. */
export function makeLetter(id: string, options: LetterOptions = {}): DeadLetter {
  const at = minutes(options.at ?? 0);
  return {
    id,
    pos: options.pos ?? 'square',
    ...(options.merchantId ? { merchantId: options.merchantId } : {}),
    receivedAt: at,
    lastReceivedAt: at,
    deliveries: 1,
    reason: 'square API GET /v2/orders/SALE-1 answered 503',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{"event_id":"EV-1","note":"caf\u00e9 \u0000"}').toString('base64'),
    bodyEncoding: 'base64',
    replays: [],
    ...(options.resolved ? { resolvedAt: minutes((options.at ?? 0) + 1) } : {}),
    retry: {
      transient: options.nextAt !== undefined,
      attempts: options.attempts ?? 0,
      ...(options.nextAt !== undefined ? { nextAt: minutes(options.nextAt) } : {}),
      ...(options.claim ? { claim: { owner: options.claim.owner, until: minutes(options.claim.until) } } : {}),
    },
  };
}


/** The next version of `record` after `change` (applied to a deep copy), with status re-derived. */
export function nextVersion(record: LedgerRecord, change: (r: LedgerRecord) => void = () => {}): LedgerRecord {
  const next = structuredClone(record);
  change(next);
  next.version = record.version + 1;
  next.updatedAt = minutes(1000 + next.version);
  next.status = deriveStatus(next);
  return next;
}

/** Settles the accrual: leaves the open set. */
export const settle = (record: LedgerRecord): LedgerRecord =>
  nextVersion(record, (r) => {
    r.accrual.state = 'accrued';
    delete r.accrual.inDoubtSince;
    delete r.inFlight;
  });

export const ids = (records: LedgerRecord[]): string[] => records.map((r) => r.transactionId);
export const keys = (records: LedgerRecord[]): string[] => records.map((r) => keyOf(r));
