/**
 * The simulator's in-memory world: customers, their cards, the operations history and the "books"
 * that count every committed accrual and reversal per transactionId. Plain maps, no I/O: it must keep
 * up with benchmarks pushing thousands of requests per second.
 */
import { randomUUID } from 'node:crypto';
import type { AccrualResult, AccrueRequest, Card, Operation, PosResponse } from '../src/loyalty/contract.js';

/** The default merchant's account; every other merchant of the simulator is its own account (own companyId). */
export const COMPANY_ID = 1;
/** "Points earned" (contract, Events recorded in the operations history). */
const POINTS_EARNED = { eventId: 24, eventName: 'Points earned' } as const;

/** How a reversal is written in the history: an event, and the sign of its purchaseSum (the Check's sum). */
export interface ReversalEntry {
  eventId: number;
  eventName: string;
  sign: 1 | -1;
}

/** By default a reversal reuses "Points earned" with the purchase taken back (negative purchaseSum and amount). */
export const DEFAULT_REVERSAL_ENTRY: ReversalEntry = { ...POINTS_EARNED, sign: -1 };
/** Card type of every result: the contract shows the integer but not its meaning, any constant will do. */
const CARD_TYPE = 1;

export interface Books {
  /** Every point-of-sale request received, including refused and faulted ones. */
  accrueRequests: number;
  reverseRequests: number;
  /** Committed only: a transaction appears once an accrue credited at least one card. */
  transactions: Record<string, TransactionBook>;
  doubleAccruals: string[];
  doubleReversals: string[];
  cardBalances: Record<string, number>;
}

export interface TransactionBook {
  accruals: number;
  reversals: number;
  /** check.amount (cents) of the last committed accrual. */
  amount: number;
  cards: string[];
  /** Net points currently credited for this transaction (accrued minus reversed). */
  points: number;
  /** Every operation id an accrue of this transaction created: a ledger record's claims must be among its own. */
  operationIds: number[];
}

export interface NewCustomer {
  phone?: string | undefined;
  email?: string | undefined;
  firstName?: string | undefined;
  surname?: string | undefined;
}

interface CustomerRec {
  id: string;
  phone: string | null;
  email: string | null;
  firstName: string | null;
  surname: string | null;
  createdAt: string;
  cards: CardRec[];
}

interface CardRec {
  serial: string;
  installationId: number;
  templateId: number;
  customer: CustomerRec;
  balance: number;
  createdAt: string;
  updatedAt: string;
}

interface OperationRec {
  id: number;
  eventId: number;
  eventName: string;
  card: CardRec;
  amount: number;
  purchaseSum: number;
  balance: number;
  createdAt: string;
  /** UTC calendar date of createdAt, what startDate/endDate filter on. */
  day: string;
}

interface Credited {
  card: CardRec;
  result: AccrualResult;
}

interface TransactionRec {
  accruals: number;
  reversals: number;
  amount: number;
  cards: Set<string>;
  points: number;
  /** Successful results of the last committed accrual: what a reverse undoes. */
  credited: Credited[];
  operationIds: number[];
}

export interface OperationFilter {
  cardId?: string;
  customerId?: string;
  templateId?: number;
  startDate?: string;
  endDate?: string;
}

export interface CardFilter {
  templateId?: number;
  customerId?: string;
  customerEmail?: string;
  customerPhone?: string;
}

export type ReverseOutcome = { ok: true; body: PosResponse } | { ok: false; errors: string[] };

/** The part of a card serial before the first dash: the account's companyId, then the templateId. */
export function serialPrefix(companyId: number, templateId: number): string {
  return `${companyId}${templateId}`;
}

/** Operations carry "ISO 8601 with offset" (contract, Operation), so print +00:00 rather than Z. */
export function isoWithOffset(date: Date): string {
  return `${date.toISOString().slice(0, 19)}+00:00`;
}

function nonBlank(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

/** Contract, Customer: no phone matching rule is declared; compare exactly, emails case-insensitively. */
function emailKey(email: string): string {
  return email.toLowerCase();
}

export class Ledger {
  accrueRequests = 0;
  reverseRequests = 0;
  /** See SimMerchant.reversalEntry. */
  reversalEntry: ReversalEntry = DEFAULT_REVERSAL_ENTRY;

  #customers = new Map<string, CustomerRec>();
  #byPhone = new Map<string, CustomerRec>();
  #byEmail = new Map<string, CustomerRec>();
  #cards = new Map<string, CardRec>();
  #operations: OperationRec[] = [];
  #operationsByCard = new Map<string, OperationRec[]>();
  #transactions = new Map<string, TransactionRec>();
  #doubleAccruals = new Set<string>();
  #doubleReversals = new Set<string>();
  #nextOperationId: number;
  #nextCardNumber = 100001;

  constructor(
    private readonly templateIds: readonly number[],
    private readonly now: () => Date,
    /** The account these books belong to: it appears in results, cards, operations and card serials. */
    readonly companyId: number = COMPANY_ID,
    /** The id of the first operation in the history (see SimulatorOptions.firstOperationId). */
    firstOperationId = 1,
  ) {
    this.#nextOperationId = firstOperationId;
  }

  /** Find-or-create by phone, then email; a new customer gets one card per template (contract: one card per template). */
  addCustomer(input: NewCustomer): CustomerRec {
    const phone = nonBlank(input.phone);
    const email = nonBlank(input.email);
    const existing = this.#findCustomer(phone, email);
    if (existing) return existing;
    const createdAt = isoWithOffset(this.now());
    const customer: CustomerRec = {
      id: randomUUID(),
      phone: phone ?? null,
      email: email ?? null,
      firstName: nonBlank(input.firstName) ?? null,
      surname: nonBlank(input.surname) ?? null,
      createdAt,
      cards: [],
    };
    for (const templateId of this.templateIds) {
      const card: CardRec = {
        serial: this.#newSerial(templateId),
        installationId: this.#cards.size + 1,
        templateId,
        customer,
        balance: 0,
        createdAt,
        updatedAt: createdAt,
      };
      customer.cards.push(card);
      this.#cards.set(card.serial, card);
    }
    this.#customers.set(customer.id, customer);
    if (phone) this.#byPhone.set(phone, customer);
    if (email) this.#byEmail.set(emailKey(email), customer);
    return customer;
  }

  /**
   * Contract, Point of sale: phone, email or serialNumber "find or register the card". A serial
   * addresses exactly one card and is never registered; phone/email reach every card of the customer.
   * No idempotency (contract, Limits: "there is no idempotency key on any operation"): a repeated
   * transactionId is credited again and lands in doubleAccruals.
   */
  accrue(request: AccrueRequest, failFirst?: string): PosResponse {
    const { transactionId, check } = request;
    const at = this.now();
    const createdAt = isoWithOffset(at);
    const serial = nonBlank(request.serialNumber);
    let cards: CardRec[];
    if (serial) {
      const card = this.#cards.get(serial);
      if (!card) {
        return {
          transactionId,
          results: [
            {
              companyId: this.companyId,
              isSuccess: false,
              errorMessage: 'Card not found',
              serialNumber: serial,
              checkAmount: check.amount,
              accrualAmount: 0,
              accruedValue: 0,
              operationId: null,
              createdAt: null,
              reversedAt: null,
            },
          ],
        };
      }
      cards = [card];
    } else {
      cards = this.addCustomer({
        phone: request.phone,
        email: request.email,
        firstName: request.firstName,
        surname: request.lastName,
      }).cards;
    }

    // One point per whole currency unit; a negative check earns nothing rather than debiting.
    const points = Math.max(0, Math.floor(check.amount / 100));
    const credited: Credited[] = [];
    const results = cards.map((card, index): AccrualResult => {
      const base = {
        installationId: card.installationId,
        templateId: card.templateId,
        companyId: this.companyId,
        cardType: CARD_TYPE,
        serialNumber: card.serial,
        checkAmount: check.amount,
        createdAt,
        reversedAt: null,
      };
      if (index === 0 && failFirst !== undefined) {
        return { ...base, isSuccess: false, errorMessage: failFirst, accrualAmount: 0, accruedValue: 0, operationId: null };
      }
      const operation = this.#record(card, points, check.amount / 100, at, POINTS_EARNED);
      const result: AccrualResult = {
        ...base,
        isSuccess: true,
        errorMessage: null,
        accrualAmount: check.amount,
        accruedValue: points,
        operationId: operation.id,
      };
      credited.push({ card, result: { ...result } });
      return result;
    });

    if (credited.length > 0) {
      let tx = this.#transactions.get(transactionId);
      if (!tx) {
        tx = { accruals: 0, reversals: 0, amount: 0, cards: new Set(), points: 0, credited: [], operationIds: [] };
        this.#transactions.set(transactionId, tx);
      }
      tx.accruals += 1;
      tx.amount = check.amount;
      tx.credited = credited;
      tx.operationIds.push(...credited.map((c) => c.result.operationId!));
      for (const c of credited) {
        tx.cards.add(c.card.serial);
        tx.points += points;
      }
      if (tx.accruals > 1) this.#doubleAccruals.add(transactionId);
    }
    return { transactionId, results };
  }

  /**
   * Contract, States and transitions: reverse needs "a prior accrual for that transactionId" and
   * answers the accrual's results with reversedAt filled. It undoes the last committed accrual and,
   * like the real service, does so again on every repeat (doubleReversals).
   */
  reverse(transactionId: string, failFirst?: string): ReverseOutcome {
    const tx = this.#transactions.get(transactionId);
    if (!tx) return { ok: false, errors: [`transaction ${transactionId} not found`] };
    const at = this.now();
    const reversedAt = isoWithOffset(at);
    let reversed = 0;
    const results = tx.credited.map(({ card, result }, index): AccrualResult => {
      if (index === 0 && failFirst !== undefined) {
        return { ...result, isSuccess: false, errorMessage: failFirst, reversedAt: null };
      }
      const value = result.accruedValue ?? 0;
      const entry = this.reversalEntry;
      this.#record(card, -value, entry.sign * (tx.amount / 100), at, entry);
      tx.points -= value;
      result.reversedAt = reversedAt;
      reversed += 1;
      return { ...result };
    });
    if (reversed > 0) {
      tx.reversals += 1;
      if (tx.reversals > 1) this.#doubleReversals.add(transactionId);
    }
    return { ok: true, body: { transactionId, results } };
  }

  listOperations(filter: OperationFilter): { total: number; page(offset: number, limit: number): Operation[] } {
    const source = filter.cardId !== undefined ? (this.#operationsByCard.get(filter.cardId) ?? []) : this.#operations;
    const { customerId, templateId, startDate, endDate } = filter;
    const rows =
      customerId === undefined && templateId === undefined && startDate === undefined && endDate === undefined
        ? source
        : source.filter(
            (op) =>
              (customerId === undefined || op.card.customer.id === customerId) &&
              (templateId === undefined || op.card.templateId === templateId) &&
              (startDate === undefined || op.day >= startDate) &&
              (endDate === undefined || op.day <= endDate),
          );
    return { total: rows.length, page: (offset, limit) => rows.slice(offset, offset + limit).map((op) => operationOut(op, this.companyId)) };
  }

  /** One card by its serial (GET /api/v2/cards/{id}), with its customer; undefined when there is none. */
  card(serial: string): Card | undefined {
    const card = this.#cards.get(serial);
    return card ? cardOut(card, this.companyId) : undefined;
  }

  listCards(filter: CardFilter): { total: number; page(offset: number, limit: number): Card[] } {
    const { templateId, customerId, customerPhone } = filter;
    const email = filter.customerEmail === undefined ? undefined : emailKey(filter.customerEmail);
    const rows: CardRec[] = [];
    for (const card of this.#cards.values()) {
      const c = card.customer;
      if (templateId !== undefined && card.templateId !== templateId) continue;
      if (customerId !== undefined && c.id !== customerId) continue;
      if (customerPhone !== undefined && c.phone !== customerPhone) continue;
      if (email !== undefined && (c.email === null || emailKey(c.email) !== email)) continue;
      rows.push(card);
    }
    return { total: rows.length, page: (offset, limit) => rows.slice(offset, offset + limit).map((card) => cardOut(card, this.companyId)) };
  }

  books(): Books {
    return {
      accrueRequests: this.accrueRequests,
      reverseRequests: this.reverseRequests,
      transactions: Object.fromEntries(
        Array.from(this.#transactions, ([id, tx]) => [
          id,
          { accruals: tx.accruals, reversals: tx.reversals, amount: tx.amount, cards: [...tx.cards], points: tx.points, operationIds: [...tx.operationIds] },
        ]),
      ),
      doubleAccruals: [...this.#doubleAccruals],
      doubleReversals: [...this.#doubleReversals],
      cardBalances: Object.fromEntries(Array.from(this.#cards, ([serial, card]) => [serial, card.balance])),
    };
  }

  #findCustomer(phone: string | undefined, email: string | undefined): CustomerRec | undefined {
    return (phone && this.#byPhone.get(phone)) || (email && this.#byEmail.get(emailKey(email))) || undefined;
  }

  /**
   * Contract, Card: the id is a dash-separated serial, not a UUID (e.g. 11-100001-2). The prefix is
   * companyId then templateId, so a serial seen in a log names its account (merchant) and program.
   */
  #newSerial(templateId: number): string {
    const number = this.#nextCardNumber++;
    let digitSum = 0;
    for (const digit of String(number)) digitSum += Number(digit);
    return `${serialPrefix(this.companyId, templateId)}-${number}-${digitSum % 10}`;
  }

  #record(card: CardRec, amount: number, purchaseSum: number, at: Date, event: { eventId: number; eventName: string }): OperationRec {
    card.balance += amount;
    const createdAt = isoWithOffset(at);
    card.updatedAt = createdAt;
    const op: OperationRec = {
      id: this.#nextOperationId++,
      eventId: event.eventId,
      eventName: event.eventName,
      card,
      amount,
      purchaseSum,
      balance: card.balance,
      createdAt,
      day: createdAt.slice(0, 10),
    };
    this.#operations.push(op);
    const perCard = this.#operationsByCard.get(card.serial);
    if (perCard) perCard.push(op);
    else this.#operationsByCard.set(card.serial, [op]);
    return op;
  }
}

/** Contract, Customer: only id and segments are guaranteed. */
function customerOut(c: CustomerRec) {
  return {
    id: c.id,
    phone: c.phone,
    email: c.email,
    firstName: c.firstName,
    surname: c.surname,
    createdAt: c.createdAt,
    updatedAt: c.createdAt,
    segments: [],
  };
}

function operationOut(op: OperationRec, companyId: number): Operation {
  const { card } = op;
  return {
    id: op.id,
    companyId,
    templateId: card.templateId,
    customerId: card.customer.id,
    customer: customerOut(card.customer),
    cardId: card.serial,
    cardDevice: 'PWA',
    eventId: op.eventId,
    eventName: op.eventName,
    managerId: null,
    locationId: null,
    amount: op.amount,
    purchaseSum: op.purchaseSum,
    balance: op.balance,
    source: 'api',
    comment: null,
    createdAt: op.createdAt,
    updatedAt: op.createdAt,
  };
}

function cardOut(card: CardRec, companyId: number): Card {
  const link = `https://sim.loyalty.invalid/c/${card.serial}`;
  return {
    id: card.serial,
    companyId,
    templateId: card.templateId,
    customerId: card.customer.id,
    type: 'points',
    device: 'PWA',
    status: 'active',
    customFields: [],
    customer: customerOut(card.customer),
    balance: {
      currentNumberOfUses: 0,
      numberStampsTotal: null,
      numberRewardsUnused: 0,
      balance: card.balance,
      discountPercentage: 0,
      discountAmount: 0,
      bonusBalance: card.balance,
      stampsBeforeReward: null,
    },
    installLink: link,
    shareLink: `${link}/share`,
    qrLink: `${link}/qr`,
    directInstallLink: { universal: link, apple: `${link}/apple`, google: `${link}/google`, pwa: `${link}/pwa` },
    couponRedeemed: false,
    countVisits: 0,
    totalRewardsRedeemed: 0,
    totalRewardsEarned: 0,
    createdAt: card.createdAt,
    updatedAt: card.updatedAt,
  };
}
