/**
 * How every benchmark prints its figures: a number to a few digits, a plain-text table, the
 * columns of a measured phase, a table of figures beside their aims, and a table of figures by
 * size with their growth. One place, so that every part's tables read alike.
 */
/** A number to `digits` decimals; `-` where there is none. */
export function fmt(value: number | undefined, digits = 2): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  return value.toFixed(digits);
}

/** A ratio as a factor: `1.23×`. */
export function times(ratio: number | undefined, digits = 2): string {
  return `${fmt(ratio, digits)}×`;
}

/** How `last` compares with `first`, as a factor; `-` where `first` is not above zero. */
export function growth(first: number, last: number): string {
  return first > 0 ? times(last / first) : '-';
}

/** A p50 with its p99 beside it, in ms: `1.23 (4.5)`. */
export function p50p99(figures: { p50: number; p99: number }): string {
  return `${fmt(figures.p50, 2)} (${fmt(figures.p99, 1)})`;
}

export function verdict(met: boolean): string {
  return met ? 'met' : 'not met';
}

/** A plain-text table: first row is the header; numbers are right-aligned, text left-aligned. */
export function table(rows: string[][], indent = '  '): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  const numeric = (s: string) => /^[-+]?[\d.,]+(\s?[a-zA-Z%×µ/]+)?$|^-$/.test(s);
  const line = (row: string[]) =>
    indent +
    row
      .map((cell, i) => (i > 0 && numeric(cell) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [line(rows[0]!), indent + widths.map((w) => '-'.repeat(w)).join('  ')];
  for (const row of rows.slice(1)) out.push(line(row));
  return out.join('\n');
}

/** A column of a table: its heading, and its cell in a row. */
export type Column<T> = readonly [heading: string, cell: (row: T) => string];

/** A table with a line for each of `rows`: the cells `columns` make of it, or for a row given as cells, those. */
export function tableOf<T extends object>(rows: readonly (T | readonly string[])[], columns: readonly Column<T>[]): string {
  return table([columns.map(([heading]) => heading), ...rows.map((row) => (isCells(row) ? [...row] : columns.map(([, cell]) => cell(row))))]);
}

function isCells(row: object): row is readonly string[] {
  return Array.isArray(row);
}

/** What a phase's columns read: a measured phase (PhaseResult), or the medians of several (roundMedians). */
export interface PhaseFigures {
  throughput: number;
  latency: { p50: number; p99: number; max: number; mean: number };
  unexpected: number;
  errors: number;
}

/** The figures of a phase, named as every benchmark heads them. */
export type PhaseFigure = 'req/s' | 'p50' | 'p99' | 'max' | 'mean' | 'not-200-ok';

const PHASE_FIGURES: Record<PhaseFigure, Column<PhaseFigures>> = {
  'req/s': ['req/s', (r) => fmt(r.throughput, 0)],
  p50: ['p50 ms', (r) => fmt(r.latency.p50)],
  p99: ['p99 ms', (r) => fmt(r.latency.p99)],
  max: ['max ms', (r) => fmt(r.latency.max)],
  mean: ['mean ms', (r) => fmt(r.latency.mean)],
  'not-200-ok': ['not-200-ok', (r) => String(r.unexpected + r.errors)],
};

/** The usual columns of a phase: req/s, p50, p99, max and the answers that were not the expected success; or those named. */
export function phaseColumns<T extends PhaseFigures>(...figures: PhaseFigure[]): Column<T>[] {
  return (figures.length ? figures : (['req/s', 'p50', 'p99', 'max', 'not-200-ok'] as const)).map((figure) => PHASE_FIGURES[figure]);
}

/** The phase's name and round, the columns its lines begin with. */
export function roundColumns<T extends { round: number }>(name: (row: T) => string, heading = 'phase'): Column<T>[] {
  return [
    [heading, name],
    ['round', (row) => String(row.round)],
  ];
}

/**
 * A figure, its value and, where it has one, its aim and whether this run met it (`true`/`false`,
 * or a status of its own).
 */
export type Figure = readonly [figure: string, value: string, aim?: string, met?: boolean | string];

/** The figures a part ends with; with an aim column (headed `target` unless `headings.aim` says) when one is named or any figure has an aim. */
export function figureTable(figures: readonly Figure[], headings: { figure?: string; aim?: string } = {}): string {
  const aims = headings.aim !== undefined || figures.some(([, , aim]) => aim !== undefined);
  const status = (met: boolean | string | undefined) => (met === undefined ? '' : typeof met === 'string' ? met : verdict(met));
  return table([
    aims ? [headings.figure ?? 'figure', 'value', headings.aim ?? 'target', 'status'] : [headings.figure ?? 'figure', 'value'],
    ...figures.map(([figure, value, aim, met]) => (aims ? [figure, value, aim ?? '', status(met)] : [figure, value])),
  ]);
}

/**
 * A line of a table by size: its name, its cell at each size, and (with `value`) how that value
 * grew from the first size to the last.
 */
export interface GrowthRow<T> {
  name: string;
  cell: (figures: T) => string;
  value?: (figures: T) => number;
}

/** Figures measured at several sizes, smallest first: a column a size, and the last column the growth from the first size to the last. */
export function growthTable<T extends { size: number }>(heading: string, measured: readonly T[], rows: readonly GrowthRow<T>[]): string {
  const first = measured[0]!;
  const last = measured.at(-1)!;
  const size = (f: T) => f.size.toLocaleString('en-US');
  return table([
    [heading, ...measured.map(size), `${size(last)}/${size(first)}`],
    ...rows.map(({ name, cell, value }) => [name, ...measured.map(cell), value ? growth(value(first), value(last)) : '']),
  ]);
}
