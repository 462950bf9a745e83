/**
 * Processes as a person's shell or a supervisor runs them, for the tests of building and starting
 * (test/build/start.test.ts, launcher-parent-death.test.ts): a copy of the project, a shell's
 * environment, jobs in process groups of their own, and what /proc says of them. Linux only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './eventually.js';

const CHECKOUT = process.cwd();
/** What a fresh clone holds that building and starting read. */
const PROJECT_FILES = ['src', 'adapters', 'simulator', 'model-check', 'scripts', 'config', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

/** A copy of the project's sources with the checkout's node_modules: what a fresh clone has after `npm ci`. */
export function copyProject(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const name of PROJECT_FILES) cpSync(join(CHECKOUT, name), join(dir, name), { recursive: true });
  symlinkSync(realpathSync(join(CHECKOUT, 'node_modules')), join(dir, 'node_modules'));
  return dir;
}

/** The environment of a person's shell: none of jest's or the outer npm's settings; `ADMIN_TOKEN` and `extra` set. */
export function shellEnv(adminToken: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('npm_') || key.startsWith('JEST') || key === 'NODE_OPTIONS' || key === 'NODE_ENV' || key === 'INIT_CWD') continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'info', ADMIN_TOKEN: adminToken, ...extra };
}

export interface Job {
  child: ChildProcess;
  pid: number;
  /** Its stdout and stderr so far (read on after npm and the launcher are gone: the bridge keeps writing to these pipes). */
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `command` in a process group of its own (its pid is the group's id), as a shell starts a job; `started` keeps it for the clean-up. */
export function runJob(started: Job[], command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Job {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const job = { child, pid: child.pid!, output: () => output, exited };
  started.push(job);
  return job;
}

/**
 * Waits for `check` to answer true; fails naming what it waited for, with `context()`, once `timeoutMs`
 * have passed. The build tests' way of saying it: the polling itself is `eventually`'s.
 */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, context?: () => string): Promise<void> {
  await eventually(check, (held) => held, timeoutMs, { what, context });
}

/** Whether a bridge answers /healthz with 200 at `url`. */
export async function healthy(url: string): Promise<boolean> {
  return fetch(`${url}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
}

/** The fields of /proc/<pid>/stat after the command name (state first, then the parent's pid), or undefined once the process is gone. */
export function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** The process exists and is not a zombie waiting to be reaped. */
export function running(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== 'Z';
}

/** Every process below `pid` (from /proc), deepest last. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const fields = statFields(Number(name));
    if (!fields) continue; // gone meanwhile
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      found.push(c);
      walk(c);
    }
  };
  walk(pid);
  return found;
}

export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

export function killAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}
