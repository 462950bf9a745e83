#!/usr/bin/env node
/**
 * `npm run build` (and the first step of `npm start`, `npm run migrate`, …): compiles src/, adapters/,
 * simulator/, model-check/, scripts/ and bench/ to dist/ when dist/ is not current, and only then. Plain JavaScript, so that it runs
 * where TypeScript is not installed (the image), where it never builds: it runs what is there.
 *
 * dist/ holds the compiled JavaScript and, copied as they are, the operator console's static files
 * (src/console/: HTML, CSS and hand-written ES modules, which the compiler does not touch).
 *
 * Current: dist/.build-stamp (written last) holds a hash of every file under src/, adapters/,
 * simulator/, model-check/, scripts/ and bench/, of tsconfig*.json, package.json, package-lock.json and of the compiler's version; dist/
 * is current when that hash is today's. Content, not mtimes: a checkout or a copy that touches
 * every file rebuilds nothing, and an edit that keeps the mtime is still seen.
 *
 * Never half-written: tsc writes into dist.tmp-<pid>/, then the stamp is written (and everything
 * fsynced), then dist/ is moved aside and dist.tmp-<pid>/ renamed into its place, and the old copy
 * removed. A build that fails or is interrupted leaves dist/ as it was. The two renames are not one
 * atomic step (Linux's RENAME_EXCHANGE is not reachable from Node): should the process die between
 * them, which is microseconds, dist/ is missing and the next run under the lock renames the finished
 * build (it has its stamp) into place, or builds again.
 *
 * One builder at a time: dist.lock is taken before the check that decides to build. It appears
 * whole (written to a file of its own, then linked into place, failing when it exists) and names
 * the holder's pid, the machine's boot id and the holder's start time, so that a lock whose holder
 * is gone (killed, or from an earlier boot, or a pid since reused) is taken over; takeovers go
 * through a guard file so that two waiters never both remove a lock. A second `npm start` at the same
 * moment waits for the first one's build, then finds dist/ current and builds nothing.
 *
 * Exit codes of the command: 0 built or already current; 1 the compiler failed (dist/ unchanged) or
 * dist/ is missing and cannot be built; 2 a bad argument; 128+n interrupted by signal n.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  cpSync,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { constants as osConstants } from 'node:os';

/** The project: the folder above scripts/. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** What tsconfig.build.json compiles, and what else decides its output. */
const SOURCE_DIRS = ['src', 'adapters', 'simulator', 'model-check', 'scripts', 'bench'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
/** Files the compiler does not produce, copied as they are to the same place under dist/ (the console's page, styles and scripts). */
const COPIED_DIRS = ['src/console'];
export const STAMP = '.build-stamp';
const LEFTOVER = /^dist\.(tmp|old)-\d+$/;
/** A waiter says it is still waiting this often, and gives up after LOCK_GIVE_UP_MS. */
const WAIT_NOTICE_MS = 30_000;
const LOCK_GIVE_UP_MS = 10 * 60_000;
const POLL_MS = 100;

export class BuildError extends Error {
  constructor(message, exitCode = 1) {
    super(message);
    this.name = 'BuildError';
    this.exitCode = exitCode;
  }
}

/** The typescript package's `tsc` (a path to run with node), or undefined where it is not installed. */
export function findCompiler(root = ROOT) {
  try {
    const require = createRequire(join(root, 'package.json'));
    const manifestPath = require.resolve('typescript/package.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    const bin = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin?.tsc;
    if (!bin) return undefined;
    const path = join(dirname(manifestPath), bin);
    return existsSync(path) ? { path, version: String(manifest.version) } : undefined;
  } catch {
    return undefined;
  }
}

/** The hash dist/ must have been built from, or undefined where the sources are not here (the image). */
export function sourceHash(root = ROOT, compilerVersion = findCompiler(root)?.version ?? 'none') {
  if (!existsSync(join(root, 'src'))) return undefined;
  const files = [];
  const walk = (dir) => {
    let entries;
    try {
      entries = readdirSync(join(root, dir), { withFileTypes: true });
    } catch (error) {
      if (error.code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  for (const dir of SOURCE_DIRS) walk(dir);
  for (const file of SOURCE_FILES) if (existsSync(join(root, file))) files.push(file);
  files.sort();
  const hash = createHash('sha256');
  hash.update(`typescript ${compilerVersion}\0`);
  for (const file of files) {
    const content = readFileSync(join(root, file));
    hash.update(`${file.split('\\').join('/')}\0${content.length}\0`);
    hash.update(content);
  }
  return hash.digest('hex');
}

/** dist/'s stamp, or undefined where there is none (never built by this script, or not whole). */
export function readStamp(dir) {
  try {
    const stamp = JSON.parse(readFileSync(join(dir, STAMP), 'utf8'));
    return typeof stamp?.hash === 'string' ? stamp : undefined;
  } catch {
    return undefined;
  }
}

/* ---------------------------------------------------------------- the lock */

function bootId() {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** A process's start time in clock ticks since boot (Linux), telling a reused pid from its first owner. */
function startTime(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

function parseOwner(text) {
  const [pid = '', boot = '', started = ''] = text.split('\n');
  return { pid: Number(pid), boot, started, text };
}

/** A lock's holder is gone: its pid is dead, it was taken on an earlier boot, or its pid now names another process. */
function isStale(owner) {
  if (!Number.isInteger(owner.pid) || owner.pid <= 0) return true;
  const boot = bootId();
  if (owner.boot && boot && owner.boot !== boot) return true;
  if (!alive(owner.pid)) return true;
  const started = startTime(owner.pid);
  return Boolean(owner.started && started && owner.started !== started);
}

function readOwner(path) {
  try {
    return parseOwner(readFileSync(path, 'utf8'));
  } catch (error) {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Creates `path` whole, naming this process, only if it does not exist. */
function claim(path) {
  const content = `${process.pid}\n${bootId()}\n${startTime(process.pid)}\n`;
  const candidate = `${path}.${process.pid}`;
  writeFileSync(candidate, content);
  try {
    linkSync(candidate, path);
    return content;
  } catch (error) {
    if (error.code === 'EEXIST') return undefined;
    throw error;
  } finally {
    rmSync(candidate, { force: true });
  }
}

function releaseIfOurs(path, content) {
  try {
    if (readFileSync(path, 'utf8') === content) unlinkSync(path);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
}

/**
 * Removes the lock at `path` if it still is the stale `owner` seen, under a guard so that a waiter
 * that saw the same stale lock cannot remove the fresh one another waiter has taken since. A guard
 * whose own holder is gone (killed inside the few statements below) is removed.
 */
function takeOver(path, owner) {
  const guardPath = `${path}.takeover`;
  const guard = claim(guardPath);
  if (!guard) {
    const holder = readOwner(guardPath);
    if (holder && isStale(holder)) releaseIfOurs(guardPath, holder.text);
    return;
  }
  try {
    const now = readOwner(path);
    if (now && now.text === owner.text && isStale(now)) unlinkSync(path);
  } finally {
    releaseIfOurs(guardPath, guard);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function acquire(path, log, signal) {
  const started = Date.now();
  let noticed = 0;
  for (;;) {
    signal?.throwIfAborted();
    const mine = claim(path);
    if (mine) return mine;
    const owner = readOwner(path);
    if (!owner) continue;
    if (isStale(owner)) {
      log(`build: taking over ${relative(process.cwd(), path) || path}, left by process ${owner.pid || '?'} which is gone`);
      takeOver(path, owner);
      continue;
    }
    const waited = Date.now() - started;
    if (waited >= LOCK_GIVE_UP_MS) {
      throw new BuildError(`waited ${Math.round(waited / 1000)} s for process ${owner.pid}, which holds ${path}; if that process is not building, remove the file`);
    }
    if (waited >= noticed) {
      log(`build: waiting for process ${owner.pid}, which is building dist/`);
      noticed = waited + WAIT_NOTICE_MS;
    }
    await sleep(POLL_MS);
  }
}

/* ---------------------------------------------------------------- the build */

/** fsyncs every file and folder under `dir`, so that an OS crash after the rename cannot leave a stamped dist/ with empty files. */
function syncTree(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) syncTree(path);
    else if (entry.isFile()) syncPath(path);
  }
  syncPath(dir);
}

function syncPath(path) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } catch (error) {
    // Some file systems refuse fsync on a folder; the files themselves were synced.
    if (error.code !== 'EINVAL' && error.code !== 'EISDIR') throw error;
  } finally {
    closeSync(fd);
  }
}

function runCompiler(compiler, root, outDir, signal) {
  return new Promise((resolvePromise, reject) => {
    // Its own process group, so that an interruption ends the compiler and the native binary it starts.
    const child = spawn(process.execPath, [compiler.path, '-p', 'tsconfig.build.json', '--outDir', outDir], {
      cwd: root,
      stdio: 'inherit',
      detached: true,
    });
    const kill = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    signal?.addEventListener('abort', kill, { once: true });
    child.once('error', reject);
    child.once('exit', (code, sig) => {
      signal?.removeEventListener('abort', kill);
      resolvePromise(sig ? 128 + (osConstants.signals[sig] ?? 0) : (code ?? 1));
    });
  });
}

/**
 * Leftovers of builds that were killed (only the lock's holder makes them, and it holds the lock
 * now): if dist/ itself is missing (killed between the two renames), a leftover stamped with `hash`
 * (a finished build of these sources) is renamed into place; the rest are removed.
 */
function recoverLeftovers(root, hash, log) {
  const leftovers = readdirSync(root).filter((name) => LEFTOVER.test(name));
  if (!existsSync(join(root, 'dist'))) {
    const pick = leftovers.map((name) => ({ name, stamp: readStamp(join(root, name)) })).find(({ stamp }) => stamp?.hash === hash);
    if (pick) {
      renameSync(join(root, pick.name), join(root, 'dist'));
      log(`build: dist/ was missing (a build was interrupted while swapping); restored it from ${pick.name}`);
      leftovers.splice(leftovers.indexOf(pick.name), 1);
    }
  }
  for (const name of leftovers) {
    try {
      rmSync(join(root, name), { recursive: true, force: true, maxRetries: 3 });
    } catch (error) {
      log(`build: could not remove ${name} (${error.code ?? error.message}); it is not used`);
    }
  }
}

/**
 * Makes dist/ current if it is not and a compiler is installed. Answers what it found or did:
 * `{ action: 'current' | 'built' | 'no-compiler' | 'no-sources' }`. Throws BuildError when the
 * compiler fails (dist/ unchanged) or dist/ is missing and cannot be built.
 *
 * options: root, force (build even when current), log (one line), signal (an AbortSignal whose
 * abort ends the compiler, removes the partial build and releases the lock; then this throws).
 */
export async function ensureBuilt(options = {}) {
  const root = options.root ?? ROOT;
  const log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
  const { signal, force = false } = options;
  const dist = join(root, 'dist');
  const compiler = findCompiler(root);
  const hash = sourceHash(root, compiler?.version ?? 'none');

  if (!hash || !compiler) {
    // Nothing to build from, or nothing to build with: run what is there.
    if (!existsSync(join(dist, 'src', 'main.js'))) {
      throw new BuildError(
        !compiler
          ? 'dist/ is missing and TypeScript is not installed to build it: run `npm ci` (with dev dependencies), then `npm run build`'
          : 'dist/ is missing and the sources (src/) are not here to build it from',
      );
    }
    const stamp = readStamp(dist);
    if (hash && stamp?.hash !== hash) log('build: TypeScript is not installed, so dist/ is run as it is, though it was not built from these sources');
    return { action: hash ? 'no-compiler' : 'no-sources', hash };
  }

  if (!force && readStamp(dist)?.hash === hash) return { action: 'current', hash };

  const lockPath = join(root, 'dist.lock');
  const lock = await acquire(lockPath, log, signal);
  const tmp = join(root, `dist.tmp-${process.pid}`);
  const old = join(root, `dist.old-${process.pid}`);
  const releaseOnExit = () => {
    rmSync(tmp, { recursive: true, force: true });
    releaseIfOurs(lockPath, lock);
  };
  process.once('exit', releaseOnExit);
  try {
    // The sources may have changed while this process waited for the lock.
    const now = sourceHash(root, compiler.version);
    recoverLeftovers(root, now, log);
    // Another process may have built while this one waited.
    if (!force && readStamp(dist)?.hash === now) return { action: 'current', hash: now };
    signal?.throwIfAborted();

    const started = Date.now();
    log(`build: compiling to dist/ (typescript ${compiler.version})${force ? ', forced' : existsSync(dist) ? ', sources changed' : ''}`);
    const code = await runCompiler(compiler, root, tmp, signal);
    signal?.throwIfAborted();
    if (code !== 0) throw new BuildError(`build: tsc failed (exit ${code}); dist/ is unchanged`);
    for (const dir of COPIED_DIRS) if (existsSync(join(root, dir))) cpSync(join(root, dir), join(tmp, dir), { recursive: true });
    // The hash taken before the compiler read the sources: should they have changed under it, the
    // next run finds a different hash and builds again.
    writeFileSync(join(tmp, STAMP), `${JSON.stringify({ hash: now, typescript: compiler.version, node: process.version, builtAt: new Date().toISOString() })}\n`);
    syncTree(tmp);
    signal?.throwIfAborted();
    if (existsSync(dist)) renameSync(dist, old);
    renameSync(tmp, dist);
    syncPath(root);
    rmSync(old, { recursive: true, force: true });
    const changed = sourceHash(root, compiler.version) !== now;
    log(`build: dist/ built in ${((Date.now() - started) / 1000).toFixed(1)} s${changed ? ' (sources changed during the build: the next run builds again)' : ''}`);
    return { action: 'built', hash: now };
  } finally {
    process.off('exit', releaseOnExit);
    releaseOnExit();
  }
}

/**
 * Runs `fn(signal)` with SIGINT, SIGTERM and SIGHUP turned into an abort of `signal` (the build
 * cleans up and throws), instead of killing the process with the lock held.
 */
export async function withInterrupts(fn) {
  const controller = new AbortController();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const onSignal = (name) => controller.abort(Object.assign(new BuildError(`build: interrupted by ${name}; dist/ is unchanged`, 128 + (osConstants.signals[name] ?? 0)), { signalName: name }));
  for (const s of signals) process.on(s, onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
}

/** The exit code for an error thrown by ensureBuilt, after printing it. */
export function reportBuildError(error, prefix = 'build') {
  if (error instanceof BuildError) {
    process.stderr.write(`${error.message.startsWith('build:') ? '' : `${prefix}: `}${error.message}\n`);
    return error.exitCode;
  }
  process.stderr.write(`${prefix}: ${error?.stack ?? String(error)}\n`);
  return 1;
}

async function main(argv) {
  const unknown = argv.filter((a) => a !== '--force');
  if (unknown.length) {
    process.stderr.write(`build: unknown argument ${JSON.stringify(unknown[0])}; usage: npm run build [-- --force]\n`);
    return 2;
  }
  try {
    const result = await withInterrupts((signal) => ensureBuilt({ force: argv.includes('--force'), signal }));
    if (result.action === 'current') process.stderr.write('build: dist/ is current\n');
    if (result.action === 'no-sources') process.stderr.write('build: no sources here; dist/ is used as it is\n');
    return 0;
  } catch (error) {
    return reportBuildError(error);
  }
}

if (process.argv[1] && pathToFileURL(resolve(process.argv[1])).href === import.meta.url) {
  process.exitCode = await main(process.argv.slice(2));
}
