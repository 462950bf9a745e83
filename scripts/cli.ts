/**
 * What the operator commands (`npm run migrate`, `npm run ledger:copy`, `npm run ledger:archive`,
 * `npm run secrets:rotate`, `npm run reconcile-report`, `npm run backfill`) share: the command's
 * skeleton (--help, exit codes, the one error line), an error that carries its exit code, telling
 * whether a module is the process's entry point, keeping passwords out of what is printed, and a
 * progress bar without a dependency.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ledgerStartProblem } from '../src/ledger/open-store.js';
import { redactUrl } from '../src/ledger/pg-store.js';

/** An error to print as one line and exit with `exitCode` (2: the command line is wrong). */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

/*
 * The skeleton of a command: `--help` or `-h` anywhere prints the usage and exits 0; otherwise the
 * command runs, and its exit code is what it answers (0 when it answers nothing). What stops it is
 * one line on stderr, `<name>: <message>`, and its exit code: a CommandError's own (2: the command
 * line is wrong), else 1, when the line says `failed:` first. The line never holds a password of the
 * URLs the command names (hideUrl) or of the variables it reads them from, nor its secrets.
 */
export interface CommandSpec {
  /** How its error lines begin: `migrate`, `secrets:rotate`. */
  name: string;
  usage: string;
  /** Where the usage goes (stdout). */
  log?: (line: string) => void;
  /** Variables holding URLs (LEDGER_URL) whose passwords the error line masks whenever they are set. */
  hiddenVariables?: readonly string[];
  /** Values the error line never shows (keys), each replaced by `***`. */
  secrets?: (argv: readonly string[], env: NodeJS.ProcessEnv) => readonly string[];
  /**
   * The command opens the ledger it names with `hideUrl` (LEDGER_URL, or its `--url`): a ledger out
   * of reach, a database missing or a ledger another bridge holds is then said as the bridge says it
   * at start-up, naming the variable and what to do, not in the driver's words.
   */
  opensLedger?: boolean;
  /** What the command does: answers its exit code (or nothing: 0); throws for what stops it. */
  run(context: CommandContext): Promise<number | void>;
}

export interface CommandContext {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  /** From now on, an error line masks `url`'s password wherever it appears. */
  hideUrl(url: string): void;
}

/** Runs a command as its spec says; answers the exit code, never throws. */
export async function runCommand(spec: CommandSpec, argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    (spec.log ?? ((line: string) => process.stdout.write(`${line}\n`)))(spec.usage);
    return 0;
  }
  const urls: string[] = [];
  try {
    return (await spec.run({ argv, env, hideUrl: (url) => void urls.push(url) })) ?? 0;
  } catch (error) {
    const code = error instanceof CommandError ? error.exitCode : 1;
    const variables = (spec.hiddenVariables ?? []).flatMap((name) => (env[name] ? [env[name]] : []));
    const ledgerUrl = spec.opensLedger && !(error instanceof CommandError) ? urls.at(-1) : undefined;
    const ledgerProblem = ledgerUrl ? ledgerStartProblem(error, ledgerUrl) : undefined;
    if (ledgerProblem) {
      process.stderr.write(`${spec.name}: ${hidePasswords(ledgerProblem, ...urls, ...variables)}\n`);
      return 1;
    }
    let message = hidePasswords(describeError(error), ...urls, ...variables);
    for (const secret of spec.secrets?.(argv, env) ?? []) if (secret) message = message.split(secret).join('***');
    process.stderr.write(`${spec.name}: ${error instanceof CommandError ? '' : 'failed: '}${message}\n`);
    return code;
  }
}

/** A command's `main(argv, env)`: answers the exit code. */
export function command(spec: CommandSpec): (argv?: readonly string[], env?: NodeJS.ProcessEnv) => Promise<number> {
  return (argv, env) => runCommand(spec, argv, env);
}

/** True when the module at `moduleUrl` (its `import.meta.url`) is the script node was started with. */
export function isEntryPoint(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return moduleUrl === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

/** One line for an error, including what an AggregateError (several addresses refused) holds. */
export function describeError(error: unknown): string {
  if (error instanceof AggregateError && !error.message) return error.errors.map(describeError).join('; ');
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.replace(/\s*\n\s*/g, ' ');
}

/**
 * `--name value` and `--name=value` options; anything else is a usage error. Answers the values by name
 * (flags without a value answer 'true').
 */
export function parseOptions(argv: readonly string[], valued: readonly string[], flags: readonly string[] = []): Map<string, string> {
  const found = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    const name = m?.[1];
    if (!m || !name || (!valued.includes(name) && !flags.includes(name))) throw new CommandError(`unknown argument ${JSON.stringify(hidePasswords(arg))}`, 2);
    if (flags.includes(name)) {
      found.set(name, 'true');
      continue;
    }
    const value = m[2] ?? argv[++i];
    if (value === undefined || (m[2] === undefined && value.startsWith('--'))) throw new CommandError(`--${name} needs a value`, 2);
    if (found.has(name)) throw new CommandError(`--${name} is given twice`, 2);
    found.set(name, value);
  }
  return found;
}

/**
 * Masks the credentials of every URL in `text` (`scheme://user:password@` → `scheme://***@`), and
 * the password of each of `urls` wherever else it appears (an error may quote it on its own).
 */
export function hidePasswords(text: string, ...urls: string[]): string {
  let out = text;
  for (const url of urls) {
    out = out.split(url).join(redactUrl(url));
    let password = '';
    try {
      password = new URL(url).password;
    } catch {
      password = /^[a-z+.-]+:\/\/[^:@/]*:([^@]*)@/i.exec(url)?.[1] ?? '';
    }
    const decoded = safeDecode(password);
    // A password of one or two characters would mask half of every message; such a one is not worth hiding.
    for (const p of new Set([password, decoded])) if (p.length >= 3) out = out.split(p).join('***');
  }
  return out.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, '$1***@');
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/*
 * The progress bar: on a terminal it redraws one line (`\r[#####.....] 12,345 / 100,000 records  3,210/s`)
 * at most ~10 times a second; when the stream is not a terminal (a log file, a CI job) it writes
 * plain lines, a few seconds apart, and the last one when finished.
 */
export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

export interface ProgressOptions {
  stream?: ProgressStream;
  /** What is counted, after the numbers. */
  unit?: string;
  /** Least time between two redraws on a terminal. */
  intervalMs?: number;
  /** Least time between two plain lines elsewhere. */
  plainIntervalMs?: number;
  width?: number;
  now?: () => number;
}

const number = new Intl.NumberFormat('en-US');

export function formatProgress(done: number, total: number, perSecond: number, unit = 'records', width = 30): string {
  const share = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(share * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${number.format(done)} / ${number.format(total)} ${unit}  ${number.format(Math.round(perSecond))}/s`;
}

export class ProgressBar {
  readonly #stream: ProgressStream;
  readonly #tty: boolean;
  readonly #unit: string;
  readonly #interval: number;
  readonly #width: number;
  readonly #now: () => number;
  readonly #started: number;
  #last = -Infinity;
  #done = 0;
  #drawn = false;

  constructor(
    readonly total: number,
    options: ProgressOptions = {},
  ) {
    this.#stream = options.stream ?? process.stderr;
    this.#tty = this.#stream.isTTY === true;
    this.#unit = options.unit ?? 'records';
    this.#interval = this.#tty ? (options.intervalMs ?? 100) : (options.plainIntervalMs ?? 2000);
    this.#width = options.width ?? 30;
    this.#now = options.now ?? (() => performance.now());
    this.#started = this.#now();
  }

  /** Records that `done` items are finished; draws when the last drawing is old enough. */
  update(done: number): void {
    this.#done = done;
    const now = this.#now();
    if (now - this.#last < this.#interval) return;
    this.#last = now;
    this.#draw(now);
  }

  /** Draws the final state and ends the line. */
  finish(): void {
    this.#draw(this.#now());
    if (this.#tty) this.#stream.write('\n');
  }

  /** Ends a terminal's bar line so that other output starts on a line of its own. */
  interrupt(): void {
    if (this.#tty && this.#drawn) this.#stream.write('\n');
    this.#drawn = false;
  }

  #draw(now: number): void {
    const seconds = (now - this.#started) / 1000;
    const line = formatProgress(this.#done, this.total, seconds > 0 ? this.#done / seconds : 0, this.#unit, this.#width);
    this.#stream.write(this.#tty ? `\r${line}` : `${line}\n`);
    this.#drawn = true;
  }
}

/**
 * A one-line status for work whose total is not known ahead (phases, each with what it has done):
 * on a terminal it redraws the line at most ~10 times a second; elsewhere it writes plain lines, a
 * few seconds apart, and the last one when finished.
 */
export class StatusLine {
  readonly #stream: ProgressStream;
  readonly #tty: boolean;
  readonly #interval: number;
  readonly #now: () => number;
  #last = -Infinity;
  #text = '';
  #written = '';
  #finished = false;

  constructor(options: Pick<ProgressOptions, 'stream' | 'intervalMs' | 'plainIntervalMs' | 'now'> = {}) {
    this.#stream = options.stream ?? process.stderr;
    this.#tty = this.#stream.isTTY === true;
    this.#interval = this.#tty ? (options.intervalMs ?? 100) : (options.plainIntervalMs ?? 2000);
    this.#now = options.now ?? (() => performance.now());
  }

  update(text: string): void {
    this.#text = text;
    const now = this.#now();
    if (now - this.#last < this.#interval) return;
    this.#last = now;
    this.#draw();
  }

  /** Writes the latest status (unless it was the last written) and ends the line; once. */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    if (this.#text !== this.#written) this.#draw();
    if (this.#tty && this.#written) this.#stream.write('\n');
  }

  #draw(): void {
    // \x1b[K clears what a longer earlier line left on a terminal.
    this.#stream.write(this.#tty ? `\r${this.#text}\x1b[K` : `${this.#text}\n`);
    this.#written = this.#text;
  }
}
