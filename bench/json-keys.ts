/**
 * What the duplicate-key and depth check (checkStructure in src/kernel/json-body.ts) costs on the
 * checkout's hot path: `npm run build && node dist/bench/json-keys.js`.
 *
 * A typical checkout body of about 2 kB (sixteen lines, customer, totals, compact as POS systems send it) is parsed many times: JSON.parse
 * alone, the walk over the parsed value that checked the depth before (what checkStructure
 * replaced), and checkStructure; then the whole parseJsonBody. Then hostile bodies of 1 MB, the
 * default BODY_LIMIT_BYTES, to show the cost stays linear. Figures only.
 */
import { performance } from 'node:perf_hooks';
import { checkStructure, parseJsonBody } from '../src/kernel/json-body.js';
import { checkoutPayload } from './records.js';
import { fmt, table } from './table.js';

function typicalBody(): string {
  const payload = checkoutPayload('A-20261121-000123', 7);
  payload.items = Array.from({ length: 16 }, (_, i) => ({ id: `sku-${100 + i}`, groupId: i % 2 ? 'bakery' : 'coffee', name: ['Latte', 'Almond croissant', 'Flat white', 'Scone', 'Espresso', 'Muffin'][i % 6], quantity: 1 + (i % 3), unitPrice: '3.49', total: (3.49 * (1 + (i % 3))).toFixed(2) }));
  (payload as Record<string, unknown>).storeId = 'store-0042-downtown';
  (payload as Record<string, unknown>).note = 'Table 12, two guests; pay at counter. Loyalty: ask for the phone number at checkout.';
  return JSON.stringify(payload);
}

/** The walk over the parsed value the depth was checked with before checkStructure. */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) max = d;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

let sink = 0;
/** Mean µs per call over `rounds` rounds of `n` calls; the median round is reported. */
function measure(n: number, fn: () => unknown, rounds = 7): number {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(); // warm-up, so the optimising compiler has run
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) sink += fn() === undefined ? 0 : 1;
    perRound.push(((performance.now() - t0) * 1000) / n);
  }
  return perRound.sort((a, b) => a - b)[rounds >> 1]!;
}

const body = typicalBody();
const buffer = Buffer.from(body);
const value: unknown = JSON.parse(body);
const N = 50_000;
const parse = measure(N, () => JSON.parse(body));
const walk = measure(N, () => depthOf(value));
const scan = measure(N, () => checkStructure(body));
const whole = measure(N, () => parseJsonBody(buffer));

const mb = 1_000_000;
const manyKeys = `{${Array.from({ length: 70_000 }, (_, i) => `"k${i}":1`).join(',')}}`.slice(0, mb);
const hostile: [string, string][] = [
  ['one object, ~70k keys', manyKeys.slice(0, manyKeys.lastIndexOf(',')) + '}'],
  ['~1 MB of escaped quotes in strings', JSON.stringify(Array.from({ length: 2000 }, () => '\\"'.repeat(120)))],
  ['~1 MB of small objects in an array', JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ id: i, q: 1, t: '1.00' })))],
];

process.stdout.write(`checkStructure: duplicate keys and depth in one pass (node ${process.version})\n\n`);
process.stdout.write(`typical checkout body: ${buffer.length} bytes, ${N} calls per round, median of 7 rounds\n`);
process.stdout.write(
  `${table([
    ['step', 'µs per body'],
    ['JSON.parse', fmt(parse)],
    ['depth walk over the parsed value (before)', fmt(walk)],
    ['checkStructure (now: depth + duplicate keys)', fmt(scan)],
    ['parseJsonBody as a whole (UTF-8, parse, check)', fmt(whole)],
  ])}\n`,
);
process.stdout.write(`   added per checkout: ${fmt(scan - walk)} µs (checkStructure replaces the walk)\n\n`);
process.stdout.write(
  `${table([
    ['hostile body', 'bytes', 'JSON.parse ms', 'checkStructure ms'],
    ...hostile.map(([name, text]) => [name, String(text.length), fmt(measure(3, () => JSON.parse(text), 3) / 1000), fmt(measure(3, () => checkStructure(text), 3) / 1000)]),
  ])}\n`,
);
if (sink < 0) process.stdout.write('');
