/**
 * The chaos campaign: a bridge process against the simulator with random upstream faults (429,
 * 5xx, timeouts after commit, resets before and after commit, per-result failures), random
 * duplicate and concurrent deliveries, random full and partial refunds, and SIGKILL restarts.
 * Afterwards it reconciles, plays the operator for what only an operator may settle (an in-doubt
 * reverse: the operator checks the card), and compares three views: what the POS asked for, what
 * the ledger says, and what the simulator booked.
 *
 * Collisions are forced: few customers and few prices, so that one customer's accruals of one
 * amount are often unsettled at the same time (the case the operations history cannot tell
 * apart). It counts how often the bridge held one back (overlaps), and checks every record against
 * the books under its own transactionId (mis-attributed).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSimulator, type FaultSpec } from '../simulator/index.js';
import { POS_POST_HEADERS, spawnBridge, type BridgeProcess } from './bridge-process.js';

export interface ChaosOptions {
  orders: number;
  /** SIGKILL restarts during the run (at least 2 by default). */
  kills: number;
  concurrency: number;
  /** Chance that a fault is queued before each POS request. */
  faultRate: number;
  seed: number;
  /** Distinct customers (phones) the orders are drawn from: few, so that orders collide. */
  customers: number;
  /** Distinct order totals the orders are drawn from: few, so that orders collide. */
  prices: number;
  /** The merchant's policy for an accrual the history leaves ambiguous (AMBIGUITY_POLICY); person when not given. */
  ambiguity?: 'person' | 'probe';
  log?: (line: string) => void;
}

export interface ChaosReport {
  orders: number;
  refunds: { full: number; partial: number };
  deliveries: number;
  faultsInjected: number;
  kills: number;
  operatorResolutions: number;
  /** How many transactions the simulator booked 0, 1, 2… accruals for. */
  accrualsPerTransaction: Record<string, number>;
  doubleAccruals: string[];
  doubleReversals: string[];
  lost: { orderId: string; why: string }[];
  /** Open records with work left that are not held back (a call to make, a doubt to settle, a person's). */
  open: { transactionId: string; status: string; why: string }[];
  /** Records still held back at the end behind an unsettled accrual of the same customer and amount. */
  held: { transactionId: string; status: string; why: string }[];
  /** The longest any accrual was held back, and the longest a hold lasted past the moment the faults stopped (ms). */
  longestHoldMs: number;
  longestHoldAfterFaultsMs: number;
  refusedByService: number;
  cards: { card: string; expected: number; actual: number }[];
  cardsMismatched: number;
  /** Accruals held back behind an unsettled accrual of the same customer and amount (each record, each holder, once). */
  overlaps: number;
  /** Records ever held back so, of all records. */
  heldRecords: number;
  /**
   * What each hold waited for: only the holder's answer (its call in flight, or pending a retry),
   * or also its outcome in doubt. Says which rule a smaller held share has to change.
   */
  heldBehind: { unanswered: number; inDoubt: number };
  records: number;
  /** History verdicts that found an operation more than one unsettled record could have made. */
  ambiguous: number;
  /** Records whose status disagrees with the books under their own transactionId, or that claim another's operation. */
  misAttributed: { transactionId: string; why: string }[];
  durationMs: number;
}

interface PlannedOrder {
  orderId: string;
  phone: string;
  cents: number;
  items: { id: string; quantity: number; cents: number }[];
  refunds: ({ kind: 'full'; refundId: string } | { kind: 'partial'; refundId: string; cents: number })[];
}

const ADMIN_TOKEN = 'chaos-admin-token-0123456789';
/** Statuses of a record with work left: open, not lost (the ledger's own words). */
const OPEN_STATUSES = new Set(['pending', 'in_doubt', 'reversal_pending']);
const FAULTS: FaultSpec[] = [
  { kind: 'rate_limit', times: 2 },
  { kind: 'rate_limit', times: 5 },
  { kind: 'server_error', times: 1 },
  { kind: 'server_error', times: 3 },
  { kind: 'slow_after_commit', delayMs: 700 },
  { kind: 'drop_before_commit' },
  { kind: 'drop_after_commit' },
  { kind: 'result_failure', on: 'accrue' },
];

/** A small deterministic generator, so a campaign is reproducible from its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

const cents = (n: number) => `${Math.floor(n / 100)}.${String(n % 100).padStart(2, '0')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function plan(options: ChaosOptions, random: () => number): PlannedOrder[] {
  const phones = Array.from({ length: options.customers }, (_, i) => `+1555${String(2000000 + i).padStart(7, '0')}`);
  // Each price is a coffee and a cake; every order of one price has the same two lines.
  const prices = Array.from({ length: options.prices }, () => [100 + Math.floor(random() * 900), 100 + Math.floor(random() * 9900)] as const);
  return Array.from({ length: options.orders }, (_, i) => {
    const [a, b] = prices[Math.floor(random() * prices.length)]!;
    const order: PlannedOrder = { orderId: `C-${i + 1}`, phone: phones[Math.floor(random() * phones.length)]!, cents: a + b, items: [{ id: 'coffee', quantity: 1, cents: a }, { id: 'cake', quantity: 1, cents: b }], refunds: [] };
    const r = random();
    if (r < 0.15) order.refunds.push({ kind: 'full', refundId: `${order.orderId}-R1` });
    else if (r < 0.3) {
      let left = order.cents;
      const first = 1 + Math.floor(random() * (left - 1));
      order.refunds.push({ kind: 'partial', refundId: `${order.orderId}-R1`, cents: first });
      left -= first;
      const next = random();
      if (next < 0.3 && left > 1) order.refunds.push({ kind: 'partial', refundId: `${order.orderId}-R2`, cents: 1 + Math.floor(random() * (left - 1)) });
      else if (next < 0.5) order.refunds.push({ kind: 'full', refundId: `${order.orderId}-R2` });
    }
    return order;
  });
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const random = rng(options.seed);
  const orders = plan(options, random);
  const sim = createSimulator();
  const simServer = await sim.listen();
  const dir = mkdtempSync(join(tmpdir(), 'bridge-chaos-'));
  const env = {
    LOYALTY_BASE_URL: simServer.url,
    LOYALTY_APP_TOKEN: sim.appToken,
    LOYALTY_API_KEY: sim.apiKey,
    LEDGER_URL: `file:${join(dir, 'ledger.json')}`,
    ADMIN_TOKEN,
    LOYALTY_TIMEOUT_MS: '300',
    LOYALTY_RETRY_BASE_MS: '2',
    IN_DOUBT_GRACE_MS: '1000',
    ANSWER_BUDGET_MS: '1000',
    AMBIGUITY_POLICY: options.ambiguity ?? 'person',
  };
  let bridge: BridgeProcess = await spawnBridge(env);
  let restarting: Promise<void> | undefined;
  const counters = { deliveries: 0, faults: 0, kills: 0, operator: 0 };

  const maybeFault = () => {
    if (random() >= options.faultRate) return;
    const fault = FAULTS[Math.floor(random() * FAULTS.length)]!;
    sim.faults.inject({ on: fault.on ?? (random() < 0.7 ? 'accrue' : 'reverse'), ...fault });
    counters.faults++;
  };

  /** Delivers like a POS: until it gets an answer that is not a 5xx, through restarts. */
  const deliver = async (path: string, body: unknown): Promise<{ status: number; body: any }> => {
    for (let attempt = 0; ; attempt++) {
      await restarting;
      maybeFault();
      counters.deliveries++;
      try {
        const res = await fetch(`${bridge.url}${path}`, { method: 'POST', headers: POS_POST_HEADERS, body: JSON.stringify(body) });
        const answer = { status: res.status, body: await res.json() };
        // 409 "still being carried out": an earlier partial refund of the order is in progress.
        if (res.status < 500 && !(res.status === 409 && answer.body?.error?.code === 'conflict')) return answer;
      } catch {
        /* no answer: the bridge was killed or the connection dropped; deliver again */
      }
      await sleep(Math.min(20 * 2 ** Math.min(attempt, 5), 500));
    }
  };

  /** Sometimes the same delivery arrives twice or three times at once. */
  const deliverWithRepeats = async (path: string, body: unknown) => {
    const copies = random() < 0.2 ? 2 + Math.floor(random() * 2) : 1;
    const answers = await Promise.all(Array.from({ length: copies }, () => deliver(path, body)));
    return answers[0]!;
  };

  const runOrder = async (order: PlannedOrder) => {
    await deliverWithRepeats('/v1/checkouts/generic', {
      orderId: order.orderId,
      currency: 'USD',
      total: cents(order.cents),
      customer: { phone: order.phone },
      items: order.items.map((i) => ({ id: i.id, quantity: i.quantity, total: cents(i.cents) })),
    });
    for (const refund of order.refunds) {
      await deliverWithRepeats('/v1/refunds/generic', refund.kind === 'full' ? { orderId: order.orderId, refundId: refund.refundId } : { orderId: order.orderId, refundId: refund.refundId, amount: cents(refund.cents) });
    }
  };

  const killAt = new Set(Array.from({ length: options.kills }, (_, k) => Math.floor(((k + 1) * orders.length) / (options.kills + 1))));
  let next = 0;
  const lanes = Array.from({ length: options.concurrency }, async () => {
    for (let i = next++; i < orders.length; i = next++) {
      if (killAt.has(i)) {
        killAt.delete(i);
        restarting = (async () => {
          log(`SIGKILL the bridge at order ${i}`);
          await bridge.kill('SIGKILL');
          counters.kills++;
          bridge = await spawnBridge(env, bridge.port);
        })();
      }
      await runOrder(orders[i]!);
    }
  });
  await Promise.all(lanes);
  await restarting;
  log(`workload done: ${orders.length} orders, ${counters.deliveries} deliveries, ${counters.faults} faults, ${counters.kills} kills`);

  // Settle: no more faults; reconcile until nothing is open, playing the operator for in-doubt reverses.
  // Records the bridge has settled (`settled`: refused by the loyalty service, as some faults make
  // it) stay listed for a person, and are outcomes, not work left.
  sim.faults.clear();
  const faultsStoppedAt = Date.now();
  const admin = async (path: string, method = 'GET', body?: unknown) => {
    const res = await fetch(`${bridge.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    return res.json() as Promise<any>;
  };
  let report: any;
  for (let round = 0; round < 120; round++) {
    report = await admin('/v1/admin/reconcile', 'POST');
    report.open = (report.open as { settled?: boolean }[]).filter((o) => !o.settled);
    for (const open of report.open as { transactionId: string; why: string }[]) {
      if (!/reverse outcome unknown/.test(open.why)) continue;
      const booked = sim.books().transactions[open.transactionId]?.reversals ?? 0;
      await admin(`/v1/admin/transactions/${encodeURIComponent(open.transactionId)}/resolve`, 'POST', { outcome: booked > 0 ? 'reversed' : 'not_reversed', note: 'chaos operator checked the card' });
      counters.operator++;
    }
    if (report.open.length === 0) break;
    await sleep(250);
  }

  const records = new Map<string, any>();
  // By cursor, to the last page: totals are capped (`totalCapped`), so a count cannot say when to stop.
  for (let cursor: string | undefined, first = true; first || cursor; first = false) {
    const list = await admin(`/v1/admin/transactions?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    for (const item of list.items) records.set(item.transactionId, item);
    cursor = list.nextCursor;
  }
  const books = sim.books();
  const lost: ChaosReport['lost'] = [];
  const expectedByPhone = new Map<string, number>();
  let refusedByService = 0;
  for (const order of orders) {
    const root = `generic:${order.orderId}`;
    if (!records.has(root)) {
      lost.push({ orderId: order.orderId, why: 'no ledger record' });
      continue;
    }
    let live = records.get(root);
    while (live?.remainderTransactionId) live = records.get(live.remainderTransactionId);
    const fullyRefunded = order.refunds.some((r) => r.kind === 'full');
    const remaining = fullyRefunded ? 0 : order.cents - order.refunds.reduce((sum, r) => sum + (r.kind === 'partial' ? r.cents : 0), 0);
    let points = 0;
    if (live.status === 'failed') refusedByService++;
    else if (remaining > 0 && live.status === 'accrued') points = Math.floor(remaining / 100);
    // Still open (work left, or held back): counted among the open or the held, not as lost.
    else if (remaining > 0 && !OPEN_STATUSES.has(live.status)) lost.push({ orderId: order.orderId, why: `${remaining} cents remain but ${live.transactionId} is ${live.status}` });
    if (live.status === 'accrued' && (books.transactions[live.transactionId]?.accruals ?? 0) !== 1) lost.push({ orderId: order.orderId, why: `${live.transactionId} is accrued in the ledger but booked ${books.transactions[live.transactionId]?.accruals ?? 0} times` });
    if (live.status === 'accrued' && live.check.amount !== remaining) lost.push({ orderId: order.orderId, why: `${live.transactionId} accrued ${live.check.amount} cents, ${remaining} remain` });
    expectedByPhone.set(order.phone, (expectedByPhone.get(order.phone) ?? 0) + points);
  }

  const cards: ChaosReport['cards'] = [];
  for (const [phone, expected] of expectedByPhone) {
    const res = await fetch(`${simServer.url}/api/v2/cards?customerPhone=${encodeURIComponent(phone)}`, { headers: { 'X-API-Key': sim.apiKey } });
    const found = ((await res.json()) as { data: { id: string }[] }).data;
    const actual = found.reduce((sum, card) => sum + (books.cardBalances[card.id] ?? 0), 0);
    cards.push({ card: found.map((c) => c.id).join(',') || phone, expected, actual });
  }
  // Every record against the books under its own id; and how often accruals were held back.
  const misAttributed: ChaosReport['misAttributed'] = [];
  let overlaps = 0;
  let heldRecords = 0;
  let ambiguous = 0;
  let longestHoldMs = 0;
  let longestHoldAfterFaultsMs = 0;
  const settledAt = Date.now();
  const ids = [...records.keys()];
  const allDetails: any[] = [];
  for (let i = 0; i < ids.length; i += 50) allDetails.push(...(await Promise.all(ids.slice(i, i + 50).map((id) => admin(`/v1/admin/transactions/${encodeURIComponent(id)}`)))));
  const detailOf = new Map(allDetails.map((d) => [d.transactionId as string, d]));
  const heldBehind = { unanswered: 0, inDoubt: 0 };
  const countedWithOf = (id: string) => allDetails.filter((d) => ((d.accrual.countedWith as string[] | undefined) ?? []).includes(id)).map((d) => d.transactionId as string);
  {
    for (const r of allDetails) {
      const book = books.transactions[r.transactionId];
      const booked = book?.accruals ?? 0;
      const accrued = r.accrual.state === 'accrued' || r.accrual.state === 'partially_accrued';
      if (accrued && booked !== 1) misAttributed.push({ transactionId: r.transactionId, why: `says ${r.accrual.state}, booked ${booked} times` });
      if (!accrued && booked !== 0) misAttributed.push({ transactionId: r.transactionId, why: `says ${r.accrual.state}, booked ${booked} times` });
      // Settled by the count rule, its operation may be any of its counted group's (record.ts `countedWith`).
      // The group is mutual: the one counted first names the others, who may then settle plainly.
      const group = [r.transactionId, ...((r.accrual.countedWith as string[] | undefined) ?? []), ...countedWithOf(r.transactionId)];
      for (const op of r.accrual.operationIds as number[]) if (!group.some((id) => books.transactions[id]?.operationIds.includes(op))) misAttributed.push({ transactionId: r.transactionId, why: `claims operation ${op}, which another transaction made` });
      const events = (r.history as { event: string }[]).map((e) => e.event);
      overlaps += events.filter((e) => e.startsWith('waits behind ')).length;
      if (events.some((e) => e.startsWith('waits behind '))) heldRecords++;
      ambiguous += events.filter((e) => e.startsWith('ambiguous with ')).length;
      for (const hold of holdsOf(r.history, settledAt)) {
        // Into the holder's doubt: its outcome was unknown at some moment of the hold, not only its answer awaited.
        const doubted = ((detailOf.get(hold.holder)?.history ?? []) as { at: string; to?: string }[]).some((h) => h.to === 'in_doubt' && Date.parse(h.at) < hold.to);
        heldBehind[doubted ? 'inDoubt' : 'unanswered']++;
        longestHoldMs = Math.max(longestHoldMs, hold.to - hold.from);
        longestHoldAfterFaultsMs = Math.max(longestHoldAfterFaultsMs, hold.to - Math.max(hold.from, faultsStoppedAt));
      }
    }
  }

  const histogram: Record<string, number> = {};
  for (const id of records.keys()) {
    const n = String(books.transactions[id]?.accruals ?? 0);
    histogram[n] = (histogram[n] ?? 0) + 1;
  }
  const left = (report?.open ?? []).map((o: any) => ({ transactionId: o.transactionId, status: o.status, why: o.why }));
  const isHeld = (o: { why: string }) => /waits behind /.test(o.why);
  const open = left.filter((o: { why: string }) => !isHeld(o));
  const held = left.filter(isHeld);

  await bridge.kill('SIGTERM');
  await simServer.close();
  rmSync(dir, { recursive: true, force: true });
  return {
    orders: orders.length,
    refunds: { full: orders.flatMap((o) => o.refunds).filter((r) => r.kind === 'full').length, partial: orders.flatMap((o) => o.refunds).filter((r) => r.kind === 'partial').length },
    deliveries: counters.deliveries,
    faultsInjected: counters.faults,
    kills: counters.kills,
    operatorResolutions: counters.operator,
    accrualsPerTransaction: histogram,
    doubleAccruals: books.doubleAccruals,
    doubleReversals: books.doubleReversals,
    lost,
    open,
    held,
    longestHoldMs,
    longestHoldAfterFaultsMs,
    refusedByService,
    cards,
    cardsMismatched: cards.filter((c) => c.expected !== c.actual).length,
    overlaps,
    heldRecords,
    heldBehind,
    records: records.size,
    ambiguous,
    misAttributed,
    durationMs: Date.now() - began,
  };
}

/**
 * The spells a record's accrual was held back: from a "waits behind" line of its history to the
 * next line that is not one (its accrual went out and was answered), or to `until` while it waits.
 */
function holdsOf(history: { at: string; event: string }[], until: number): { from: number; to: number; holder: string }[] {
  const holds: { from: number; to: number; holder: string }[] = [];
  let open: { from: number; holder: string } | undefined;
  for (const line of history) {
    const holder = /^waits behind (\S+?):/.exec(line.event)?.[1];
    if (holder && open === undefined) open = { from: Date.parse(line.at), holder };
    if (!holder && open !== undefined) {
      holds.push({ ...open, to: Date.parse(line.at) });
      open = undefined;
    }
  }
  if (open !== undefined) holds.push({ ...open, to: until });
  return holds;
}

export function formatChaosReport(r: ChaosReport, options: ChaosOptions): string {
  const lines = [
    `chaos campaign: ${r.orders} orders, seed ${options.seed}, ${options.concurrency} concurrent, fault rate ${options.faultRate}, ${options.customers} customers, ${options.prices} prices, ambiguity ${options.ambiguity ?? 'person'}, ${(r.durationMs / 1000).toFixed(1)} s`,
    `  refunds sent                 ${r.refunds.full} full, ${r.refunds.partial} partial`,
    `  POS deliveries (with repeats) ${r.deliveries}`,
    `  upstream faults injected     ${r.faultsInjected}`,
    `  SIGKILL restarts             ${r.kills}`,
    `  operator resolutions         ${r.operatorResolutions} (in-doubt reverses, checked against the card)`,
    `  accruals booked per transaction: ${Object.entries(r.accrualsPerTransaction).map(([n, count]) => `${count} × ${n}`).join(', ')}`,
    `  double accruals              ${r.doubleAccruals.length}${r.doubleAccruals.length ? `  ${r.doubleAccruals.slice(0, 10).join(', ')}` : ''}`,
    `  double reversals             ${r.doubleReversals.length}${r.doubleReversals.length ? `  ${r.doubleReversals.slice(0, 10).join(', ')}` : ''}`,
    `  overlaps                     ${r.overlaps} (an accrual held back behind an unsettled one of the same customer and amount)`,
    `  records ever held back       ${r.heldRecords} of ${r.records} (${r.records ? ((100 * r.heldRecords) / r.records).toFixed(1) : '0.0'} %)`,
    `  holds, by what they awaited  ${r.heldBehind.unanswered} only the holder's answer, ${r.heldBehind.inDoubt} also the holder's outcome in doubt`,
    `  ambiguous verdicts           ${r.ambiguous} (an operation more than one unsettled record could have made: claimed by none)`,
    `  mis-attributed ${r.misAttributed.length}${r.misAttributed.length ? `\n${r.misAttributed.slice(0, 10).map((m) => `    ${m.transactionId}: ${m.why}`).join('\n')}` : ''}`,
    `  records lost                 ${r.lost.length}${r.lost.length ? `\n${r.lost.slice(0, 10).map((l) => `    ${l.orderId}: ${l.why}`).join('\n')}` : ''}`,
    `  records left open            ${r.open.length}${r.open.length ? `\n${r.open.slice(0, 10).map((o) => `    ${o.transactionId} ${o.status}: ${o.why}`).join('\n')}` : ''}`,
    `  records left held            ${r.held.length} (waiting behind an unsettled accrual of the same customer and amount)${r.held.length ? `\n${r.held.slice(0, 10).map((o) => `    ${o.transactionId} ${o.status}: ${o.why}`).join('\n')}` : ''}`,
    `  longest hold                 ${(r.longestHoldMs / 1000).toFixed(1)} s; past the end of the faults ${(r.longestHoldAfterFaultsMs / 1000).toFixed(1)} s`,
    `  refused by the service       ${r.refusedByService} (per-result failures: expected 0 points)`,
    `  card balances                ${r.cards.length - r.cardsMismatched} of ${r.cards.length} cards equal the balance the orders and refunds should give`,
    ...r.cards.map((c) => `    ${c.card.padEnd(16)} expected ${String(c.expected).padStart(6)}  actual ${String(c.actual).padStart(6)}${c.expected === c.actual ? '' : '  MISMATCH'}`),
  ];
  return lines.join('\n');
}
