/**
 * The worlds the model checker explores (docs/correctness.md, "The world"): who the customers are,
 * which orders and refunds the POS may deliver and how often, which fates a call may meet, and how
 * many crashes, time steps and operator actions a path may hold. A scenario is small on purpose:
 * the search is exhaustive within it.
 */
import { FATES, type Fate, type ModelCustomer } from './fake-loyalty.js';

/** One order the POS may deliver: its customer as the order names them, its amount, how many times it is delivered at most. */
export interface OrderSpec {
  id: string;
  customer: string;
  /** Which identifier the order carries (the loyalty service knows them all for its customer): a Toast register attaches the card. */
  by: 'phone' | 'email' | 'card';
  amountCents: number;
  deliveries: number;
  /**
   * How many times the register's ACCRUE carries it at most (Toast's loyalty integration: answered
   * once recorded, delivered in the background; a failed ACCRUE comes again under a new call id, the
   * same check). 0 or absent: the POS's webhook or post only.
   */
  register?: number;
}

export interface RefundSpec {
  order: string;
  /** How many times the POS delivers it at most (the same refundId each time). */
  deliveries: number;
  /** Delivered as the register's REVERSE of the accrue (a void at the register: answered once recorded, delivered in the background), retried with the same call id. */
  register?: boolean;
}

export interface Scenario {
  name: string;
  description: string;
  /** 2: two bridge instances share the ledger as on PostgreSQL (in-flight leases apply); 1: one instance owns it, as the file ledger. */
  instances: 1 | 2;
  /** The merchant's policy for an accrual the history leaves ambiguous (merchant.ts `AmbiguityPolicy`); person when not given. */
  ambiguity?: 'person' | 'probe';
  customers: ModelCustomer[];
  /**
   * The merchant's reversal shape is learned before the world begins (reversal-shape.ts), as on a
   * merchant live for a while: the first reversal in doubt is then looked for in the history at once.
   */
  reversalShapeKnown?: boolean;
  orders: OrderSpec[];
  fullRefund?: RefundSpec;
  partialRefund?: RefundSpec & { cents: number };
  /** The fates a live call may meet (FATES: all of them). */
  fates: readonly Fate[];
  /** The fates a live accrue may meet, where they differ from `fates` (a scenario about reversals leaves the accruals' faults to the others). */
  accrueFates?: readonly Fate[];
  crashes: number;
  /** "Time passes" events on one path (each to the next deadline). */
  timeSteps: number;
  operatorActions: number;
}

/** The bridge's timing, as its defaults (src/config.ts): the units every deadline of the model is counted in. */
export const TIMING = {
  retryBaseMs: 1_000,
  inDoubtVerifyAfterMs: 5_000,
  graceMs: 60_000,
  clockSkewMs: 60_000,
  inFlightLeaseMs: 120_000,
  /** LOYALTY_TIMEOUT_MS: a live call is answered (or given up on) within it. */
  loyaltyTimeoutMs: 10_000,
} as const;

export const CUSTOMERS: ModelCustomer[] = [
  { name: 'C1', phone: '+15550000001', email: 'c1@example.test', card: '11-100001-2' },
  { name: 'C2', phone: '+15550000002', email: 'c2@example.test', card: '11-100002-3' },
];

const ALL_FATES: readonly Fate[] = FATES;
/** The fates that decide what a record does next when several records meet: booked and known, not booked and unknown, booked and unknown. */
const CORE_FATES: readonly Fate[] = ['answered', 'reset_before_commit', 'reset_after_commit'];

function order(id: string, customer: string, by: OrderSpec['by'], deliveries = 1, register = 0): OrderSpec {
  return { id, customer, by, amountCents: 1000, deliveries, ...(register ? { register } : {}) };
}

/**
 * The bounds `npm run model-check` explores on every CI run, and the larger ones of `--deep`. Each
 * CI scenario is small and aimed at part of issue 20's world (item 2); together they reach every
 * situation `REQUIRED_COVERAGE` names (coverage.ts), which the test checks. Each scenario's bounds and
 * figures are printed; docs/correctness.md keeps them and says which scenario covers what.
 */
export function scenarios(depth: 'ci' | 'deep'): Scenario[] {
  const deep = depth === 'deep';
  return [
    {
      name: 'every-fate',
      description: `one bridge: one order and its full refund, delivered twice (also before the sale settled), each call meeting every fate; a crash and restart${deep ? '; a person acting at any moment' : ''}`,
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone')],
      fullRefund: { order: 'O1', deliveries: 2 },
      fates: ALL_FATES,
      crashes: 1,
      timeSteps: 3,
      operatorActions: deep ? 1 : 0,
    },
    {
      name: 'partial-refund',
      description: 'one bridge: one order delivered twice, a partial refund of it (before or after its sale settled), then a full refund of what remains',
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone', 2)],
      partialRefund: { order: 'O1', cents: 400, deliveries: 1 },
      fullRefund: { order: 'O1', deliveries: 1 },
      // The two retryable fates (429, 5xx) only delay a round, which every-fate covers.
      fates: deep ? ALL_FATES : ['answered', 'results_failed', 'reset_before_commit', 'reset_after_commit', 'timeout'],
      crashes: 0,
      timeSteps: 3,
      operatorActions: 0,
    },
    {
      name: 'same-customer-and-amount',
      description: 'one bridge: two orders of one customer and one amount (the accrual keys hold the second back; the history lists their operations in either order) and one of another customer',
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'phone'), order('O3', 'C2', 'phone')],
      fates: deep ? [...CORE_FATES, 'timeout'] : CORE_FATES,
      crashes: 0,
      timeSteps: deep ? 3 : 2,
      operatorActions: 0,
    },
    {
      name: 'refunds-of-one-customer',
      description: 'one bridge: two orders of one customer and one amount, a full refund of one and a partial refund of the other (two reversals of one card and sum, whose history entries could be either\'s)',
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'phone')],
      fullRefund: { order: 'O1', deliveries: 1 },
      partialRefund: { order: 'O2', cents: 400, deliveries: 1 },
      fates: deep ? CORE_FATES : ['answered', 'reset_after_commit'],
      crashes: 0,
      timeSteps: 2,
      operatorActions: 0,
    },
    {
      name: 'reversals-in-doubt',
      description: 'one bridge whose merchant\'s reversal shape is known: two orders of one customer and one amount, a full refund of one and a partial refund of the other, so that two reversals in doubt can share one history entry, neither provable until the other settles; finding 3 of docs/correctness.md',
      instances: 1,
      reversalShapeKnown: true,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'phone')],
      fullRefund: { order: 'O1', deliveries: 1 },
      partialRefund: { order: 'O2', cents: 400, deliveries: 1 },
      fates: CORE_FATES,
      accrueFates: ['answered'],
      crashes: 0,
      timeSteps: 2,
      operatorActions: 0,
    },
    {
      name: 'operator',
      description: 'one bridge: two orders of one customer and one amount, and a person acting through the console at any moment (retry, reverse, resolve as the books say, acknowledge; alone or in bulk over both); finding 1 of docs/correctness.md',
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'phone')],
      fates: deep ? [...CORE_FATES, 'results_failed', 'timeout'] : [...CORE_FATES, 'results_failed'],
      crashes: 0,
      timeSteps: 3,
      operatorActions: 1,
    },
    {
      name: 'one-person-two-identifiers',
      description: `one bridge: O1 of C1 by phone and O2 of C1 by email (the bridge cannot tell they are one person), the same amount, both out at once; ${deep ? 'a full refund of O1 and a partial refund of O2 (reversals whose entries could be either\'s)' : 'a person acting at any moment'}; finding 2`,
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'email')],
      ...(deep ? { fullRefund: { order: 'O1', deliveries: 1 }, partialRefund: { order: 'O2', cents: 400, deliveries: 1 } } : {}),
      fates: CORE_FATES,
      crashes: 0,
      timeSteps: deep ? 3 : 2,
      operatorActions: deep ? 0 : 1,
    },
    {
      name: 'probe',
      description: `one bridge whose merchant asks the service (ambiguity: probe): O1 of C1 by phone and O2 of C1 by email, the same amount, both out at once, so that the history can show one operation for two accruals in doubt; the probe's reverse faulted as any call${deep ? ', and a full refund of O1' : ''}; a person acting at any moment`,
      instances: 1,
      ambiguity: 'probe',
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'email')],
      ...(deep ? { fullRefund: { order: 'O1', deliveries: 1 } } : {}),
      fates: CORE_FATES,
      crashes: 0,
      timeSteps: deep ? 4 : 3,
      operatorActions: deep ? 1 : 0,
    },
    {
      name: 'register',
      description: `one bridge: a check that comes by the orders webhook and by the register's ACCRUE (twice: Toast's retry under a new call id), to the card the register attached, delivered in the background; the register's REVERSE of it, retried with its id${deep ? '; a second check of the customer and amount by the register alone' : ''}; a crash and restart`,
      instances: 1,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'card', 1, 2), ...(deep ? [order('O2', 'C1', 'card', 0, 1)] : [])],
      fullRefund: { order: 'O1', deliveries: 2, register: true },
      fates: CORE_FATES,
      crashes: 1,
      timeSteps: deep ? 3 : 2,
      operatorActions: 0,
    },
    {
      name: 'two-instances',
      description: `two bridges sharing the ledger (PostgreSQL): two orders of one customer and one amount, each delivered to either${deep ? ', and a full refund of O1' : ''}; a crash of either, its calls taken over by the other once their lease ends, or by its restart`,
      instances: 2,
      customers: CUSTOMERS,
      orders: [order('O1', 'C1', 'phone'), order('O2', 'C1', 'phone')],
      ...(deep ? { fullRefund: { order: 'O1', deliveries: 1 } } : {}),
      fates: CORE_FATES,
      crashes: 1,
      timeSteps: 3,
      operatorActions: 0,
    },
  ];
}
