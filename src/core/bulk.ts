/**
 * One operator action on many records (`POST /v1/admin/transactions/bulk`): the records named by
 * ids, or every record a filter matches (at most BULK_MAX: a filter matching more is refused with
 * its count), each through the same operator action and rules as alone, with the actor and the
 * reason. Retry and resolve leave delivery to the worker (delivering each within the answer budget
 * would take minutes); reverse delivers as a single one does. A bulk action stops taking records
 * once its time budget (BULK_BUDGET_MS, read on the core's clock) is spent: what it leaves is
 * refused as not attempted, to be sent again.
 *
 * Safe bulk (contract v1.5, docs/operators.md "Bulk actions"): one request must never reach further
 * than the person meant.
 * - A filter states `expectCount`, the number of records it matches as the person saw it; any other
 *   number (or none) is refused (409, `matched`) and nothing is done: records that came or went since
 *   the person looked are never acted on unseen.
 * - A reverse over a filter that spans several merchants names them (`merchants`), exactly: an empty
 *   search over every merchant is not a way to take points back from all of them by accident.
 * - `previewBulk` says what a request would do (how many, whose, in which statuses, how much, and
 *   which would be refused and why), doing nothing: what the console shows before it asks.
 */
import { createHash } from 'node:crypto';
import { BridgeError, ConflictError, echoed, ValidationError } from '../kernel/errors.js';
import { keyOf, ledgerKey, merchantOf, type LedgerRecord, type LedgerStatus, type OperatorAct } from '../state/record.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import type { LedgerStore } from '../ledger/store.js';
import { formatCents } from '../kernel/money.js';
import { unreachable } from '../kernel/unreachable.js';
import type { ActionAllowed, OperatorActionName, ResolveInput } from './transitions.js';

/** At most this many records one bulk action touches; a filter matching more is refused (400) with its count. */
export const BULK_MAX = 100;
/** A bulk action takes no new record after this long, inside the server's 30 s request timeout; the rest are refused as not attempted. */
export const BULK_BUDGET_MS = 20_000;

export const BULK_ACTIONS = ['retry', 'reverse', 'resolve', 'close', 'acknowledge'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

/** Which records a filter names, as the record list filters them. */
export interface BulkFilter {
  status?: readonly LedgerStatus[];
  pos?: string;
  from?: Date;
  to?: Date;
}

export type BulkRequest = {
  /** Who does it, and why: in each record's history and the audit trail (`bulk:<action>`). */
  act: OperatorAct & { reason: string };
  /**
   * Whose records: the merchant a plain id belongs to (undefined: `default`), and the only one a
   * filter matches (undefined: every merchant's).
   */
  merchantId?: string;
  /**
   * The bridge's operator (ADMIN_TOKEN): an id `<merchantId>/<transactionId>` names that merchant's
   * record, and a filter's records of a merchant other than `default` are named so in the answer.
   * A merchant's own admin is never global: its ids are its own merchant's, slash or not.
   */
  global: boolean;
  /** The number of records the request names, as the person saw it: required with a filter (`CountMismatchError` otherwise). */
  expectCount?: number;
  /** A reverse over a filter spanning several merchants: exactly those merchants, picked by the person. Given with any request, its records must be exactly those merchants'. */
  merchants?: readonly string[];
  /** The preview's `digest` of the records it names: another set of records now (even of the same count) is refused. */
  expectDigest?: string;
} & ({ action: Exclude<BulkAction, 'resolve'> } | { action: 'resolve'; outcome: ResolveInput['outcome'] }) &
  ({ ids: readonly string[] } | { filter: BulkFilter });

/** 409: the request's `expectCount` (or none) is not the number of records it names now; nothing was done. */
export class CountMismatchError extends BridgeError {
  constructor(
    readonly matched: number,
    expected: number | undefined,
  ) {
    super(
      expected === undefined
        ? `a bulk action over a filter states expectCount, the number of records it matches (${matched} now): nothing was done`
        : `the request names ${matched} records now, not the ${expected} expected: nothing was done; look at them again and send the count you saw`,
      409,
      'count_mismatch',
      { matched },
    );
  }
}

/** 409: the records the request names now are not the ones the preview showed (`expectDigest`); nothing was done. */
export class RecordsChangedError extends BridgeError {
  constructor(matched: number, digest: string) {
    super(`the ${matched} records the request names now are not the ones previewed (some came and others went): nothing was done; preview again`, 409, 'records_changed', { matched, digest });
  }
}

/** Which records a request names, as one short text: equal for the same records, whatever their order. */
function digestOf(targets: readonly Target[]): string {
  return createHash('sha256').update([...targets.map((t) => t.key)].sort().join('\n')).digest('base64url').slice(0, 22);
}

/** What a bulk request would do, doing nothing (`previewBulk`). */
export interface BulkPreview {
  matched: number;
  /** Which records they are, as a short text: sent back as the action's `expectDigest`, it refuses any other set. */
  digest: string;
  /** How many of them the action would be taken on (the others are in `refused`). */
  acted: number;
  byMerchant: { merchantId: string; count: number }[];
  byStatus: { status: LedgerStatus; count: number }[];
  /** The Checks' amounts of the records it would act on, per currency (cents), and the points their accruals earned. */
  amounts: { currency: string; cents: number; text: string }[];
  points: number;
  refused: { id: string; why: string }[];
}

/** What was done to each record: as the request named it, done, or refused with why. */
export interface BulkOutcome {
  done: string[];
  refused: { id: string; why: string }[];
}

/** How a bulk action calls a single-record one: audited as `bulk:<action>`, delivery left to the worker. */
export interface BulkActOptions {
  deliver: false;
  bulk: true;
}

/**
 * The single-record actions a bulk action goes through, each record by their rules: operator.ts'
 * OperatorActions answers them. Named here, so that bulk needs nothing of the class that runs it.
 */
export interface BulkActions {
  retry(key: string, act: OperatorAct, options: BulkActOptions): Promise<unknown>;
  reverse(key: string, act: OperatorAct, options: BulkActOptions): Promise<unknown>;
  resolve(key: string, input: ResolveInput, act: OperatorAct, options: BulkActOptions): Promise<unknown>;
  close(key: string, act: OperatorAct & { reason: string }, options: BulkActOptions): Promise<unknown>;
  acknowledge(key: string, act: OperatorAct & { reason: string }, options: BulkActOptions): Promise<unknown>;
  allowed(record: LedgerRecord): Promise<Record<OperatorActionName, ActionAllowed>>;
}

export interface BulkDeps {
  /** The single-record actions, whose rules each record goes through. */
  actions: Pick<BulkActions, BulkAction>;
  store: Pick<LedgerStore, 'list'>;
  /** The core's clock: the budget is read on it. */
  now: () => Date;
  budgetMs?: number;
}

interface Target {
  /** As the answer names it. */
  id: string;
  key: string;
  merchantId: string;
  /** The record as the filter found it (ids: read when a preview needs it). */
  record?: LedgerRecord;
}

/** The records a request names, its count and merchants checked (the safe-bulk rules above): refused before anything is done. */
async function targetsOf(request: BulkRequest, store: BulkDeps['store']): Promise<Target[]> {
  const targets = 'ids' in request ? named(request.ids, request) : await matching(request.filter, request, store);
  if (('filter' in request || request.expectCount !== undefined) && request.expectCount !== targets.length) throw new CountMismatchError(targets.length, request.expectCount);
  if (request.expectDigest !== undefined && request.expectDigest !== digestOf(targets)) throw new RecordsChangedError(targets.length, digestOf(targets));
  // Whose records they are: a reverse over a filter across merchants names them, and merchants named
  // are held to, whatever the action (naming one merchant's never acts on another's).
  const spanned = [...new Set(targets.map((t) => t.merchantId))].sort();
  const picked = request.merchants === undefined ? undefined : [...new Set(request.merchants)].sort();
  const mustName = request.action === 'reverse' && 'filter' in request && spanned.length > 1;
  if ((mustName || picked !== undefined) && spanned.join('\u0000') !== (picked ?? []).join('\u0000')) {
    const what = mustName ? `a reverse over a filter matching the records of ${spanned.length} merchants (${spanned.join(', ')}) names them in merchants, exactly` : `the records are of ${spanned.join(', ') || 'no merchant'}, not of the merchants named (${picked!.join(', ')})`;
    throw new ConflictError(`${what}: nothing was done`, { merchants: spanned });
  }
  return targets;
}

/** What the request would do, doing nothing: its records counted by merchant, status and money, and which the action would refuse now, with why. */
/** `anyOutcome`: a resolve whose outcome is not chosen yet: refused only where resolve is refused whatever the outcome. */
export async function previewBulk(request: BulkRequest, deps: { actions: Pick<BulkActions, 'allowed'>; store: Pick<LedgerStore, 'list' | 'get'> }, options: { anyOutcome?: boolean } = {}): Promise<BulkPreview> {
  const targets = 'ids' in request ? named(request.ids, request) : await matching(request.filter, request, deps.store);
  const byMerchant = new Map<string, number>();
  const byStatus = new Map<LedgerStatus, number>();
  const amounts = new Map<string, number>();
  const refused: BulkPreview['refused'] = [];
  let points = 0;
  for (const target of targets) {
    const record = target.record ?? (await deps.store.get(target.key));
    if (!record) {
      refused.push({ id: target.id, why: `no ledger record ${echoed(target.id)}` });
      continue;
    }
    byMerchant.set(merchantOf(record), (byMerchant.get(merchantOf(record)) ?? 0) + 1);
    byStatus.set(record.status, (byStatus.get(record.status) ?? 0) + 1);
    const allowed = (await deps.actions.allowed(record))[request.action];
    const outcomeRefused = request.action === 'resolve' && !options.anyOutcome && allowed.outcomes && !allowed.outcomes.includes(request.outcome);
    const why = !allowed.allowed ? allowed.why : outcomeRefused ? `resolve ${request.action === 'resolve' ? request.outcome : ''} is not possible now: it takes ${allowed.outcomes!.join(' or ')}` : undefined;
    if (why) {
      refused.push({ id: target.id, why });
      continue;
    }
    const check = record.accrual.check;
    if (check) amounts.set(check.currency, (amounts.get(check.currency) ?? 0) + check.amount);
    points += record.accrual.results.reduce((sum, r) => sum + (r.isSuccess && typeof r.accruedValue === 'number' ? r.accruedValue : 0), 0);
  }
  const sorted = <K extends string>(m: Map<K, number>) => [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    matched: targets.length,
    digest: digestOf(targets),
    acted: targets.length - refused.length,
    byMerchant: sorted(byMerchant).map(([merchantId, count]) => ({ merchantId, count })),
    byStatus: sorted(byStatus).map(([status, count]) => ({ status, count })),
    // Written here by the money module's rule, so a page shows it as it is and does no arithmetic on it.
    amounts: sorted(amounts).map(([currency, cents]) => ({ currency, cents, text: formatCents(cents, currency) })),
    points,
    refused,
  };
}

export async function runBulk(request: BulkRequest, deps: BulkDeps): Promise<BulkOutcome> {
  const targets = await targetsOf(request, deps.store);
  const budgetMs = deps.budgetMs ?? BULK_BUDGET_MS;
  const deadline = deps.now().getTime() + budgetMs;
  const outcome: BulkOutcome = { done: [], refused: [] };
  for (const target of targets) {
    if (deps.now().getTime() > deadline) {
      outcome.refused.push({ id: target.id, why: `not attempted: the bulk action's ${budgetMs / 1000} s budget ran out; send it again` });
      continue;
    }
    try {
      await act(deps.actions, request, target.key);
      outcome.done.push(target.id);
    } catch (error) {
      if (!(error instanceof BridgeError) || error.status >= 500) throw error;
      outcome.refused.push({ id: target.id, why: error.status === 404 ? `no ledger record ${echoed(target.id)}` : error.message });
    }
  }
  return outcome;
}

/** Ids as given: the request's merchant's transactionIds, or `<merchantId>/<transactionId>` for the bridge's operator. */
function named(ids: readonly string[], request: BulkRequest): Target[] {
  const merchant = request.merchantId ?? DEFAULT_MERCHANT;
  const targets = ids.map((id) => {
    const slash = id.indexOf('/');
    const [merchantId, transactionId] = slash > 0 && request.global ? [id.slice(0, slash), id.slice(slash + 1)] : [merchant, id];
    return { id, key: ledgerKey(merchantId, transactionId), merchantId };
  });
  // A record named twice (the same id, or `default/<id>` beside `<id>`) is acted on once: a
  // second reverse or retry of one record in one request is never what an operator meant.
  return [...new Map(targets.map((t) => [t.key, t] as const)).values()];
}

/** Every record the filter matches in the request's merchant (or every merchant's), newest first; more than BULK_MAX is refused. */
async function matching(filter: BulkFilter, request: BulkRequest, store: BulkDeps['store']): Promise<Target[]> {
  const found = await store.list({ merchantId: request.merchantId, status: filter.status, pos: filter.pos, from: filter.from, to: filter.to, offset: 0, limit: BULK_MAX });
  if (found.total > BULK_MAX) throw ValidationError.field('filter', `matches ${found.total} records; a bulk action takes at most ${BULK_MAX}: narrow it (merchantId, pos, from, to) and repeat`);
  return found.items.map((r) => {
    const key = keyOf(r);
    return { id: request.global && merchantOf(r) !== DEFAULT_MERCHANT ? key : r.transactionId, key, merchantId: merchantOf(r), record: r };
  });
}

/** The single-record action, told it is part of a bulk one: audited as such, delivery left to the worker. */
async function act(actions: BulkDeps['actions'], request: BulkRequest, key: string): Promise<void> {
  const options: BulkActOptions = { deliver: false, bulk: true };
  switch (request.action) {
    case 'retry':
      await actions.retry(key, request.act, options);
      return;
    case 'reverse':
      await actions.reverse(key, request.act, options);
      return;
    case 'resolve':
      await actions.resolve(key, { outcome: request.outcome, note: request.act.reason }, request.act, options);
      return;
    case 'close':
      await actions.close(key, request.act, options);
      return;
    case 'acknowledge':
      await actions.acknowledge(key, request.act, options);
      return;
    default:
      unreachable(request);
  }
}
