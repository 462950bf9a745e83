/**
 * The three-way report (bridge-contract "Backfill and the three-way report"): for one merchant and
 * a range, reads its POS accounts' orders and refunds, its ledger records and its operations
 * history, and hands the three to `classify`. It only reads: nothing in the POS, the ledger or the
 * loyalty service changes because a report was made.
 *
 * What it reads:
 * - POS: every POS account of the merchant the POS listing can read, orders and refunds changed in
 *   [from, to). An account it cannot read is named in `sources`, and the report is not `complete`.
 * - Ledger: the merchant's records created in the range, and the records (with their remainders) of
 *   every order the POS listed. Records that claim an operation read are loaded to explain it.
 * - History: every operation of the merchant's account on the days of the range, one day of margin
 *   each side (the upstream filters by date in a time zone it does not state), read whole from a
 *   list that may move (`history-reader.ts`).
 * - A second look, by card: a record whose operation was not found in the range's history (it may
 *   lie outside the days read), and a reversal nobody explains (its order may be older than the
 *   range), are looked up in that card's own history before they are reported.
 */
import { BridgeError, echoed, NotFoundError, ValidationError } from '../kernel/errors.js';
import { ledgerKey, type LedgerRecord } from '../state/record.js';
import type { RecordStore, SettingStore } from '../ledger/store.js';
import { readShape } from '../core/reversal-shape.js';
import type { Operation } from '../loyalty/contract.js';
import { DEFAULT_MERCHANT } from '../state/merchant.js';
import type { ActiveMerchant } from '../merchants/registry.js';
import { classify, DIFFERENCE_KINDS, successfulCards, type Difference, type DifferenceKind } from './classify.js';
import { readOperations, type HistoryProgress, type HistoryReadOptions, type OperationsPages } from '../loyalty/history-reader.js';
import type { PosEntry, PosOrderSource } from './pos-source.js';

/** The widest range one report covers: a month and a day, so that any calendar month fits. */
export const MAX_RANGE_DAYS = 32;
const DAY_MS = 86_400_000;
/** How far back a card's history is searched for the accrual an unexplained reversal undoes. */
const REVERSAL_LOOKBACK_DAYS = 400;
/** Records read from the ledger per page. */
const LEDGER_PAGE = 500;
/** The merchant's records in doubt a report reads at most (`#readDoubtful`). */
const DOUBTFUL_READ = 5000;

export interface ReportRange {
  from: Date;
  to: Date;
}

/** The earliest day a report may start: the loyalty history serves no earlier one, and a year 0 is a typo. */
export const EARLIEST_REPORT_DAY = '2000-01-01';

/**
 * `from` and `to` as a day (`2026-11-24`: the whole UTC day, `to`'s included) or a date-time with
 * an offset; `to` after `from`, at most MAX_RANGE_DAYS apart, `from` not before EARLIEST_REPORT_DAY
 * and not after `now`. A ValidationError (400) names the field: a range the loyalty history cannot
 * serve is the client's mistake, which asking again will not fix; only a history that fails to
 * answer is a 502 (docs/backfill-and-reconcile.md). The year 9999 used to reach the loyalty service
 * and come back as 502 history_unavailable.
 */
export function parseRange(from: string, to: string, now: Date = new Date()): ReportRange {
  const start = parseBound('from', from, 'start');
  const end = parseBound('to', to, 'end');
  if (start.getTime() < Date.parse(`${EARLIEST_REPORT_DAY}T00:00:00Z`)) throw ValidationError.field('from', `must be ${EARLIEST_REPORT_DAY} or later, got ${echoed(from, 40)}`);
  if (start.getTime() > now.getTime()) throw ValidationError.field('from', `must not be later than now (${now.toISOString()}): there is nothing to report yet, got ${echoed(from, 40)}`);
  if (end.getTime() <= start.getTime()) throw ValidationError.field('to', `must be after from (${start.toISOString()}), got ${echoed(to, 40)}`);
  const days = (end.getTime() - start.getTime()) / DAY_MS;
  if (days > MAX_RANGE_DAYS) throw ValidationError.field('to', `the range may span at most ${MAX_RANGE_DAYS} days, got ${Math.ceil(days)}: make one report per month`);
  return { from: start, to: end };
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

function parseBound(field: string, value: string, side: 'start' | 'end'): Date {
  if (DAY.test(value)) {
    const day = new Date(`${value}T00:00:00Z`);
    if (!Number.isNaN(day.getTime()) && day.toISOString().startsWith(value)) return side === 'start' ? day : new Date(day.getTime() + DAY_MS);
  } else if (DATE_TIME.test(value)) {
    const at = new Date(value);
    if (!Number.isNaN(at.getTime())) return at;
  }
  throw ValidationError.field(field, `must be a day (2026-11-24) or a date-time with an offset (2026-11-24T10:00:00Z), got ${JSON.stringify(echoed(value, 40))}`);
}

export interface PosSourceState {
  pos: string;
  read: boolean;
  /** Orders and refunds listed (when read). */
  entries?: number;
  /** Why it was not read. */
  why?: string;
}

export interface ThreeWayReport {
  merchantId: string;
  from: string;
  to: string;
  examined: { pos: number; ledger: number; history: number };
  /** Each POS account of the merchant, and whether its orders could be listed. */
  sources: PosSourceState[];
  history: { passes: number; requests: number; settled: boolean };
  /** Every POS account was read and the history held still long enough to be read whole. */
  complete: boolean;
  counts: Record<DifferenceKind, number>;
  differences: Difference[];
}

export interface ReportProgress {
  phase: 'pos' | 'ledger' | 'history' | 'second look';
  detail: string;
}

export interface ReconcileReporterDeps {
  /** The merchants the bridge serves (the registry): whose client reads the history, whose POS accounts are listed. */
  merchants: { get(id: string): Promise<ActiveMerchant | undefined> };
  store: Pick<RecordStore, 'get' | 'list' | 'findOperationClaim'>;
  /** Where the merchant's learned reversal shape is read (reversal-shape.ts). */
  settings: Pick<SettingStore, 'getSetting'>;
  /** Where the POS's orders come from (the backfill's listing). */
  posSource: PosOrderSource;
  clockSkewMs: number;
  /** Page size and overlap of history reads (default the upstream's largest page; tests make pages small). */
  historyRead?: Pick<HistoryReadOptions, 'maxItemsPerPage' | 'overlap'>;
  /** The bridge's clock (epoch ms): how far forward a card's history is read again. */
  now?: () => number;
}

export class ReconcileReporter {
  constructor(private readonly deps: ReconcileReporterDeps) {}

  async report(merchantId: string, range: ReportRange, onProgress: (progress: ReportProgress) => void = () => {}): Promise<ThreeWayReport> {
    const merchant = await this.deps.merchants.get(merchantId);
    if (!merchant) throw new NotFoundError(`no merchant ${echoed(merchantId)}`);
    if (!merchant.client.canVerify) {
      // Said with what to do: the operator reading this at the console has no other page that says it.
      const fix =
        merchant.id === DEFAULT_MERCHANT
          ? 'set LOYALTY_API_KEY (the loyalty service issues it with the app token) and restart the bridge'
          : `give it one: PATCH /v1/admin/merchants/${merchant.id} with {"loyalty":{"apiKey":"…"}} (the loyalty service issues it with the app token)`;
      throw new BridgeError(`merchant ${merchant.id} has no loyalty API key, so its operations history cannot be read and the ledger cannot be compared with the loyalty service: ${fix}, then read the report again`, 422, 'history_unavailable', { field: 'loyalty.apiKey' });
    }
    const { pos, sources } = await this.#readPos(merchant, range, onProgress);
    const ledger = await this.#readLedger(merchant.id, range, pos, onProgress);
    const history = new Map<number, Operation>();
    const read = await this.#readHistory(merchant.client, { startDate: day(range.from.getTime() - DAY_MS), endDate: day(range.to.getTime() + DAY_MS) }, history, (p) =>
      onProgress({ phase: 'history', detail: `pass ${p.pass}, ${p.requests} pages read, ${p.found} operations of ${p.totalItems}` }),
    );
    const claimants = new Map<string, LedgerRecord>();
    const asked = new Set<number>();
    await this.#loadClaimants(merchant.id, history, ledger, claimants, asked);
    const doubtful = await this.#readDoubtful(merchant.id);
    const reversalShape = await readShape(this.deps.settings, merchant.id);
    const input = () => ({
      merchantId: merchant.id,
      from: range.from,
      to: range.to,
      pos,
      ledger: [...ledger.values()],
      claimants: [...claimants.values()],
      history: [...history.values()],
      doubtful,
      ...(reversalShape ? { reversalShape } : {}),
      clockSkewMs: this.deps.clockSkewMs,
    });
    let differences = classify(input());
    const second = await this.#secondLook(merchant, differences, ledger, history, claimants, asked, onProgress);
    if (second.looked) differences = classify(input());

    const inRange = [...history.values()].filter((op) => Date.parse(op.createdAt) >= range.from.getTime() && Date.parse(op.createdAt) < range.to.getTime()).length;
    const counts = Object.fromEntries(DIFFERENCE_KINDS.map((k) => [k, differences.filter((d) => d.kind === k).length])) as Record<DifferenceKind, number>;
    return {
      merchantId: merchant.id,
      from: range.from.toISOString(),
      to: range.to.toISOString(),
      examined: { pos: pos.length, ledger: ledger.size, history: inRange },
      sources,
      history: read,
      // A card read again that never held still decides differences too.
      complete: read.settled && second.settled && sources.every((s) => s.read),
      counts,
      differences,
    };
  }

  async #readPos(merchant: ActiveMerchant, range: ReportRange, onProgress: (p: ReportProgress) => void): Promise<{ pos: PosEntry[]; sources: PosSourceState[] }> {
    const pos: PosEntry[] = [];
    const sources: PosSourceState[] = [];
    // The merchant's POS accounts: those it names an account on, or holds an access token for.
    const names = Object.entries(merchant.pos)
      .filter(([, settings]) => settings.account || settings.accessToken)
      .map(([name]) => name)
      .sort();
    for (const name of names) {
      const entries: PosEntry[] = [];
      try {
        for await (const entry of this.deps.posSource.list(merchant, name, range.from, range.to)) {
          entries.push(entry);
          if (entries.length % 100 === 0) onProgress({ phase: 'pos', detail: `${name}: ${entries.length} orders and refunds` });
        }
      } catch (error) {
        // What was listed before the failure is left out whole: a report on part of a POS would look complete.
        // A BridgeError says what is missing (no account, no token: backfill_not_possible); anything else failed.
        const why = error instanceof BridgeError && error.status < 500 ? error.message : `listing failed: ${(error as Error).message}`;
        sources.push({ pos: name, read: false, why });
        continue;
      }
      onProgress({ phase: 'pos', detail: `${name}: ${entries.length} orders and refunds` });
      sources.push({ pos: name, read: true, entries: entries.length });
      pos.push(...entries);
    }
    return { pos, sources };
  }

  /** Records created in the range, and every record of an order the POS listed, with its remainders. */
  async #readLedger(merchantId: string, range: ReportRange, pos: readonly PosEntry[], onProgress: (p: ReportProgress) => void): Promise<Map<string, LedgerRecord>> {
    const byTransaction = new Map<string, LedgerRecord>();
    // The store's bounds are inclusive; `to` is not part of the range. Pages are newest first and
    // records are never removed: one created while this reads pushes the rest down, so a record is
    // at worst read twice (kept once by id), never skipped.
    const to = new Date(range.to.getTime() - 1);
    for (let offset = 0; ; offset += LEDGER_PAGE) {
      const { items, total } = await this.deps.store.list({ merchantId, from: range.from, to, offset, limit: LEDGER_PAGE });
      for (const record of items) byTransaction.set(record.transactionId, record);
      onProgress({ phase: 'ledger', detail: `${Math.min(offset + items.length, total)} of ${total} records created in the range` });
      if (items.length < LEDGER_PAGE) break;
    }
    // Each entry's own record, and the one an earlier build may have kept for it instead (`recordedAs`).
    for (const transactionId of new Set(pos.flatMap((e) => (e.kind === 'unreadable' ? [] : [e.transactionId, ...(e.recordedAs ?? [])])))) {
      for (let id: string | undefined = transactionId, depth = 0; id && depth < 1000; depth++) {
        const record: LedgerRecord | undefined = byTransaction.get(id) ?? (await this.deps.store.get(ledgerKey(merchantId, id)));
        if (!record) break;
        byTransaction.set(id, record);
        id = record.remainderTransactionId;
      }
    }
    return byTransaction;
  }

  async #readHistory(client: OperationsPages, query: { cardId?: string; startDate: string; endDate: string }, into: Map<number, Operation>, onPage?: (p: HistoryProgress) => void) {
    let read;
    try {
      read = await readOperations(client, query, { ...this.deps.historyRead, onPage });
    } catch (error) {
      throw new BridgeError(`the operations history could not be read: ${(error as Error).message}`, 502, 'history_unavailable');
    }
    for (const op of read.operations) into.set(op.id, op);
    return { passes: read.passes, requests: read.requests, settled: read.settled };
  }

  /**
   * The merchant's records in doubt, wherever they were created (an operation of the range may be
   * the reversal of an older order's record): what the history may hold of them is theirs to settle.
   * Few by nature (each needs the verifier or a person); at most DOUBTFUL_READ, the newest.
   */
  async #readDoubtful(merchantId: string): Promise<LedgerRecord[]> {
    const doubtful: LedgerRecord[] = [];
    for (let offset = 0; offset < DOUBTFUL_READ; offset += LEDGER_PAGE) {
      const { items } = await this.deps.store.list({ merchantId, status: 'in_doubt', offset, limit: LEDGER_PAGE });
      doubtful.push(...items);
      if (items.length < LEDGER_PAGE) break;
    }
    return doubtful;
  }

  /**
   * The records that claim an operation read and are not examined (they explain it), and examined
   * records read again when the store says they claim one their copy does not: the worker may have
   * settled them while the report read the rest. Keyed by transactionId. `asked`: the operations
   * the store was asked about already (after the second look, only the new ones are asked).
   */
  async #loadClaimants(merchantId: string, history: Map<number, Operation>, ledger: Map<string, LedgerRecord>, claimants: Map<string, LedgerRecord>, asked: Set<number>): Promise<void> {
    const claimed = new Set<number>();
    for (const r of [...ledger.values(), ...claimants.values()]) for (const id of r.accrual.operationIds) claimed.add(id);
    for (const op of history.values()) {
      if (op.purchaseSum == null || claimed.has(op.id) || asked.has(op.id)) continue;
      asked.add(op.id);
      const transactionId = await this.deps.store.findOperationClaim(merchantId, op.id);
      if (!transactionId || claimants.has(transactionId)) continue;
      const record = await this.deps.store.get(ledgerKey(merchantId, transactionId));
      if (!record) continue;
      (ledger.has(transactionId) ? ledger : claimants).set(transactionId, record);
      for (const id of record.accrual.operationIds) claimed.add(id);
    }
  }

  /**
   * Reads again, by card, what the first classification found missing: each card's history from
   * the record's time (or, for an unexplained reversal, REVERSAL_LOOKBACK_DAYS back) to now. Answers
   * whether it read anything, and whether every card's list held still while it was read.
   */
  async #secondLook(merchant: ActiveMerchant, differences: Difference[], ledger: Map<string, LedgerRecord>, history: Map<number, Operation>, claimants: Map<string, LedgerRecord>, asked: Set<number>, onProgress: (p: ReportProgress) => void): Promise<{ looked: boolean; settled: boolean }> {
    const endDate = day((this.deps.now ?? Date.now)() + DAY_MS);
    /** Card → the earliest day to read it from. */
    const cards = new Map<string, number>();
    const want = (card: string, fromMs: number) => cards.set(card, Math.min(cards.get(card) ?? Infinity, fromMs));
    for (const d of differences) {
      const record = d.transactionId ? ledger.get(d.transactionId) : undefined;
      if (record && (d.kind === 'not_in_history' || (d.kind === 'refund_not_reversed' && record.reversal.state === 'reversed'))) {
        for (const card of successfulCards(record)) want(card, Date.parse(record.createdAt) - DAY_MS);
      }
      const op = d.operationId !== undefined ? history.get(d.operationId) : undefined;
      if (d.kind === 'unclaimed_operation' && op && (op.purchaseSum ?? 0) < 0) want(op.cardId, Date.parse(op.createdAt) - REVERSAL_LOOKBACK_DAYS * DAY_MS);
    }
    let done = 0;
    let settled = true;
    for (const [card, fromMs] of [...cards].sort(([a], [b]) => a.localeCompare(b))) {
      settled = (await this.#readHistory(merchant.client, { cardId: card, startDate: day(fromMs), endDate }, history)).settled && settled;
      onProgress({ phase: 'second look', detail: `${++done} of ${cards.size} cards read again` });
    }
    if (cards.size > 0) await this.#loadClaimants(merchant.id, history, ledger, claimants, asked);
    return { looked: cards.size > 0, settled };
  }
}

/** Y-m-d of a UTC time: how the upstream's startDate and endDate are written. */
function day(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * A formula character (OWASP, "CSV injection": = + - @ tab CR) where a spreadsheet may read a cell
 * as beginning: the cell's start, or right after a list separator or a line feed inside it, spaces
 * between allowed. Opened where the list separator is `;` (much of Europe), a line is split at
 * every `;`, quotes or not, and `a;=HYPERLINK(…)` becomes a cell that begins with `=`; where it is
 * `,` the same with commas, and with line feeds, in a tool that ignores the quotes.
 */
const FORMULA_AT_A_START = /(^|[;,\n])( *)([=+\-@\t\r])/g;
/** What makes a cell quoted: a separator of either kind, a quote, a line break, or a formula character anywhere. */
const NEEDS_QUOTES = /[;,"\r\n=+\-@\t]/;

/**
 * One CSV cell (RFC 4180, its quotes doubled), kept as text by every spreadsheet
 * (docs/backfill-and-reconcile.md): a formula character that begins the cell, or begins any part of
 * it after a `;`, a `,` or a line feed, is preceded by `'`; a cell holding a separator, a quote, a line break or a
 * formula character anywhere is quoted. The first character alone used to be checked, so a cell
 * `x;=cmd` ran `=cmd` in a `;` locale.
 */
export function csvField(value: string | number | undefined): string {
  if (value === undefined) return '';
  const text = String(value).replace(FORMULA_AT_A_START, "$1$2'$3");
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export const CSV_COLUMNS = ['kind', 'transactionId', 'orderId', 'operationId', 'why', 'next'] as const;

/** The differences as CSV: a header line, then one line per difference, CRLF line ends (RFC 4180). */
export function reportCsv(report: Pick<ThreeWayReport, 'differences'>): string {
  const lines = [CSV_COLUMNS.join(','), ...report.differences.map((d) => CSV_COLUMNS.map((c) => csvField(d[c])).join(','))];
  return `${lines.join('\r\n')}\r\n`;
}
