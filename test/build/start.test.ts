/**
 * How the project is built and started, run as a person or the image runs it, on copies of the
 * project in a temporary folder (the checkout's own dist/ is never touched):
 *
 * - `npm start` (scripts/start.mjs over scripts/build.mjs): two starts at once both come up and
 *   dist/ is built once; a start with nothing changed compiles nothing; a changed source is
 *   compiled; a build killed mid-way, or stopped with SIGTERM, leaves the previous dist/ in place and
 *   usable; SIGTERM and a terminal's Ctrl-C reach the bridge through npm, once, so it stops gracefully.
 *   (npm or the launcher SIGKILLed, and a second Ctrl-C: launcher-parent-death.test.ts.)
 * - The image: what the Dockerfile ships (dist/, package.json, config/, scripts/*.mjs and
 *   production-only node_modules from `npm ci --omit=dev`, so no TypeScript), where `npm start`,
 *   `npm run migrate`, `npm run secrets:rotate` and `npm run ledger:copy` run against a real PostgreSQL.
 *
 * Linux: processes are found through /proc. Needs PostgreSQL (see test/support/postgres.ts); fails,
 * rather than skips, without one.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../../scripts/bridge-process.js';
import { freshSchema, testDatabase } from '../support/postgres.js';
import { commandLine, copyProject, descendants, healthy, killAll, runJob, running, shellEnv, waitFor, type Job } from '../support/jobs.js';

const CHECKOUT = process.cwd();
const ADMIN_TOKEN = 'build-test-admin-token-0123456789';
/** What the image holds of scripts/: the start script and the build step it imports (which builds nothing there). */
const IMAGE_SCRIPTS = ['build.mjs', 'start.mjs'];

const cleanEnv = (extra: Record<string, string> = {}) => shellEnv(ADMIN_TOKEN, extra);
const started: Job[] = [];
const run = (command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) => runJob(started, command, args, cwd, env);

function runSync(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = cleanEnv()): { status: number | null; output: string; ms: number } {
  const t0 = performance.now();
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 150_000 });
  const ms = performance.now() - t0;
  // A command killed at the timeout prints nothing of its own: say so, or its failure reads as empty.
  const ended = result.error ? `\n(${command} did not finish: ${result.error.message}, after ${ms.toFixed(0)} ms)` : result.signal ? `\n(${command} ended by ${result.signal} after ${ms.toFixed(0)} ms)` : '';
  return { status: result.status, output: `${result.stdout ?? ''}${result.stderr ?? ''}${ended}`, ms };
}

/** Waits until the bridge at `url` answers /healthz; fails if `proc` ends first. */
async function waitHealthy(proc: Job, url: string): Promise<void> {
  await waitFor(
    `${url}/healthz to answer 200`,
    async () => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) throw new Error(`process ended before ${url} was up:\n${proc.output()}`);
      return healthy(url);
    },
    60_000,
    proc.output,
  );
}

function stampOf(dir: string): { text: string; ino: number; dirIno: number } {
  const path = join(dir, 'dist', '.build-stamp');
  return { text: readFileSync(path, 'utf8'), ino: statSync(path).ino, dirIno: statSync(join(dir, 'dist')).ino };
}

/** What a build left beside dist/: its temporary and old folders, and the lock. */
function leftovers(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.startsWith('dist.'));
}

function count(text: string, pattern: RegExp): number {
  return text.match(new RegExp(pattern.source, 'g'))?.length ?? 0;
}

async function stopGracefully(proc: Job, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  process.kill(proc.pid, signal);
  const { code, signal: endedBy } = await proc.exited;
  expect({ code, endedBy }).toEqual({ code: 0, endedBy: null });
  expect(proc.output()).toContain(`"signal":"${signal}","msg":"shutting down`);
  expect(proc.output()).toContain('"msg":"stopped"');
}

afterAll(() => {
  for (const proc of started) if (proc.child.exitCode === null && proc.child.signalCode === null) killAll([...descendants(proc.pid), proc.pid], 'SIGKILL');
});

describe('npm start: build only when needed, whole, once', () => {
  let dir: string;
  let firstBuildMs = 0;

  beforeAll(() => {
    dir = copyProject('bridge-build-');
    // An entry that counts the signals it receives, and stops 1.5 s after the first: as a bridge with
    // work in flight does, which a second SIGINT or SIGTERM would stop at once.
    writeFileSync(
      join(dir, 'signal-probe.js'),
      `for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => { process.stdout.write('probe got ' + s + '\\n'); setTimeout(() => process.exit(0), 1500); });
process.stdout.write('probe up\\n');
setInterval(() => undefined, 1000);
`,
    );
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    manifest.scripts['signal-probe'] = 'exec node scripts/start.mjs signal-probe.js';
    writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('two starts at once on a fresh copy both come up, and dist/ is built once', async () => {
    expect(existsSync(join(dir, 'dist'))).toBe(false);
    const ports = [await freePort(), await freePort()];
    const t0 = performance.now();
    const starts = ports.map((port, i) =>
      run(process.execPath, ['scripts/start.mjs'], dir, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${join(dir, `ledger-${i}`, 'ledger.json')}` })),
    );
    await Promise.all(starts.map((proc, i) => waitHealthy(proc, `http://127.0.0.1:${ports[i]}`)));
    firstBuildMs = performance.now() - t0;

    const outputs = starts.map((p) => p.output());
    expect(count(outputs.join('\n'), /build: compiling to dist\//)).toBe(1);
    expect(count(outputs.join('\n'), /build: dist\/ built in/)).toBe(1);
    // The other one waited for the lock, then found dist/ current.
    const waiter = outputs.find((o) => !o.includes('build: compiling'))!;
    expect(waiter).toMatch(/build: waiting for process \d+, which is building dist\//);
    expect(readFileSync(join(dir, 'dist', 'src', 'main.js'), 'utf8')).toContain('loyalty-bridge listening');
    expect(JSON.parse(stampOf(dir).text)).toMatchObject({ hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(leftovers(dir)).toEqual([]);

    await Promise.all(starts.map((proc) => stopGracefully(proc)));
  }, 90_000);

  it('a start with nothing changed compiles nothing', async () => {
    const before = stampOf(dir);
    const build = runSync(process.execPath, ['scripts/build.mjs'], dir);
    expect(build).toMatchObject({ status: 0 });
    expect(build.output).toContain('build: dist/ is current');
    process.stdout.write(`build test: first start (build and bridge up) ${firstBuildMs.toFixed(0)} ms; build check with nothing changed ${build.ms.toFixed(0)} ms\n`);
    // That nothing was compiled is what the line above and the unchanged stamp below say; the time is printed only.

    const port = await freePort();
    const start = run(process.execPath, ['scripts/start.mjs'], dir, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger-0', 'ledger.json')}` }));
    await waitHealthy(start, `http://127.0.0.1:${port}`);
    expect(start.output()).not.toContain('build:');
    // The same stamp file, in the same dist/: nothing was compiled or swapped.
    expect(stampOf(dir)).toEqual(before);
    await stopGracefully(start);
  }, 60_000);

  it('a changed source is compiled at the next start', async () => {
    const before = stampOf(dir);
    const probe = `build-probe-${Date.now()}`;
    appendFileSync(join(dir, 'src', 'kernel', 'money.ts'), `\nexport const BUILD_PROBE = '${probe}';\n`);
    const port = await freePort();
    const start = run(process.execPath, ['scripts/start.mjs'], dir, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger-0', 'ledger.json')}` }));
    await waitHealthy(start, `http://127.0.0.1:${port}`);
    expect(start.output()).toMatch(/build: compiling to dist\/ \(typescript [^)]+\), sources changed/);
    expect(readFileSync(join(dir, 'dist', 'src', 'kernel', 'money.js'), 'utf8')).toContain(probe);
    const after = stampOf(dir);
    expect(JSON.parse(after.text).hash).not.toBe(JSON.parse(before.text).hash);
    expect(leftovers(dir)).toEqual([]);
    await stopGracefully(start);
  }, 60_000);

  it('a build killed mid-way leaves the previous dist/ usable; the next start takes the lock over and builds', async () => {
    // The kill must land after the compiler has begun writing and before the swap; should a build
    // finish before the kill lands (a fast machine), it is tried again with another change.
    let killed: { pid: number; tmp: string } | undefined;
    let before = stampOf(dir);
    for (let attempt = 1; attempt <= 5 && !killed; attempt++) {
      before = stampOf(dir);
      appendFileSync(join(dir, 'src', 'kernel', 'money.ts'), `\nexport const KILL_PROBE_${attempt} = ${attempt};\n`);
      const start = run(process.execPath, ['scripts/start.mjs'], dir, cleanEnv({ PORT: String(await freePort()), LEDGER_URL: `file:${join(dir, 'ledger-k', 'ledger.json')}` }));
      const tmp = join(dir, `dist.tmp-${start.pid}`);
      await waitFor('the build to begin writing dist.tmp-<pid>/', () => existsSync(tmp) || start.output().includes('build: dist/ built'), 60_000, start.output);
      // Everything at once, the compiler too, as a power cut or `kill -9` of the group would.
      killAll([start.pid, ...descendants(start.pid)], 'SIGKILL');
      const ended = await start.exited;
      expect(ended.signal).toBe('SIGKILL');
      if (stampOf(dir).text === before.text && existsSync(tmp)) {
        killed = { pid: start.pid, tmp };
        process.stdout.write(`build test: build killed while writing on attempt ${attempt}\n`);
      }
    }
    expect(killed).toBeDefined();

    // The previous dist/ is in place, whole, and runs.
    expect(stampOf(dir)).toEqual(before);
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(['dist.lock', `dist.tmp-${killed!.pid}`]));
    expect(readFileSync(join(dir, 'dist.lock'), 'utf8').split('\n')[0]).toBe(String(killed!.pid));
    const port = await freePort();
    const direct = run(process.execPath, ['dist/src/main.js'], dir, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger-0', 'ledger.json')}` }));
    await waitHealthy(direct, `http://127.0.0.1:${port}`);
    await stopGracefully(direct);

    // The next start: the dead builder's lock is taken over, its leftovers removed, the change built.
    const port2 = await freePort();
    const next = run(process.execPath, ['scripts/start.mjs'], dir, cleanEnv({ PORT: String(port2), LEDGER_URL: `file:${join(dir, 'ledger-0', 'ledger.json')}` }));
    await waitHealthy(next, `http://127.0.0.1:${port2}`);
    expect(next.output()).toContain(`build: taking over dist.lock, left by process ${killed!.pid} which is gone`);
    expect(next.output()).toMatch(/build: dist\/ built in/);
    expect(readFileSync(join(dir, 'dist', 'src', 'kernel', 'money.js'), 'utf8')).toContain('KILL_PROBE_');
    expect(leftovers(dir)).toEqual([]);
    await stopGracefully(next);
  }, 120_000);

  it('a build stopped with SIGTERM ends its compiler, removes its folder and lock, and leaves dist/ as it was', async () => {
    const before = stampOf(dir);
    appendFileSync(join(dir, 'src', 'kernel', 'money.ts'), `\nexport const TERM_PROBE = 1;\n`);
    const build = run(process.execPath, ['scripts/build.mjs'], dir, cleanEnv());
    // The line is printed just before the compiler is spawned: wait for the process itself.
    await waitFor('the build to start its compiler', () => (build.output().includes('build: compiling') && descendants(build.pid).length > 0) || build.child.exitCode !== null, 60_000, build.output);
    const compiler = descendants(build.pid);
    expect(compiler.length).toBeGreaterThan(0);
    process.kill(build.pid, 'SIGTERM');
    expect(await build.exited).toEqual({ code: 143, signal: null });
    expect(build.output()).toContain('build: interrupted by SIGTERM; dist/ is unchanged');
    await waitFor(`the compiler's processes ${compiler.join(', ')} to be gone`, () => compiler.every((pid) => !running(pid)), 5_000);
    expect(stampOf(dir)).toEqual(before);
    expect(leftovers(dir)).toEqual([]);
  }, 60_000);

  it('a build that does not compile leaves dist/ unchanged; a dist/ lost between the two renames is restored from the finished build', async () => {
    const money = join(dir, 'src', 'kernel', 'money.ts');
    const source = readFileSync(money, 'utf8');
    const before = stampOf(dir);
    appendFileSync(money, `\nexport const NOT_A_NUMBER: number = 'text';\n`);
    const failed = runSync(process.execPath, ['scripts/build.mjs'], dir);
    expect(failed.output).toContain('build: tsc failed (exit');
    expect(failed.status).toBe(1);
    expect(stampOf(dir)).toEqual(before);
    expect(leftovers(dir)).toEqual([]);

    // A builder killed after its first rename (dist/ moved aside) and before its second.
    writeFileSync(money, source);
    expect(runSync(process.execPath, ['scripts/build.mjs'], dir)).toMatchObject({ status: 0 });
    const built = stampOf(dir);
    renameSync(join(dir, 'dist'), join(dir, 'dist.tmp-999999'));
    const restored = runSync(process.execPath, ['scripts/build.mjs'], dir);
    expect(restored.output).toContain('build: dist/ was missing (a build was interrupted while swapping); restored it from dist.tmp-999999');
    expect(restored.output).not.toContain('build: compiling');
    expect(restored.status).toBe(0);
    expect(stampOf(dir).text).toBe(built.text);
    expect(leftovers(dir)).toEqual([]);
  }, 60_000);

  it('through npm, SIGTERM and a Ctrl-C reach the bridge once, and it stops gracefully', async () => {
    // Up to date again first, so that what follows is only about signals.
    expect(runSync(process.execPath, ['scripts/build.mjs'], dir)).toMatchObject({ status: 0 });
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const port = await freePort();
      const npm = run('npm', ['start'], dir, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger-0', 'ledger.json')}` }));
      await waitHealthy(npm, `http://127.0.0.1:${port}`);
      const bridge = descendants(npm.pid).find((pid) => commandLine(pid).includes('dist/src/main.js'));
      expect(bridge).toBeDefined();
      if (signal === 'SIGTERM') process.kill(npm.pid, 'SIGTERM');
      // A terminal's Ctrl-C signals the whole foreground job: npm, the start script, all of it.
      else process.kill(-npm.pid, 'SIGINT');
      const { code, signal: endedBy } = await npm.exited;
      expect({ signal, code, endedBy }).toEqual({ signal, code: 0, endedBy: null });
      expect(count(npm.output(), /"msg":"shutting down/)).toBe(1);
      expect(npm.output()).toContain(`"signal":"${signal}","msg":"shutting down`);
      expect(npm.output()).toContain('"msg":"stopped"');
      await waitFor(`the bridge (pid ${bridge}) to be gone`, () => !running(bridge!), 5_000);
      expect(await healthy(`http://127.0.0.1:${port}`)).toBe(false);
    }
    // The start script receives a Ctrl-C twice, from the terminal and again from npm; the entry gets it once.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const npm = run('npm', ['run', 'signal-probe'], dir, cleanEnv());
      await waitFor('the probe to be up', () => npm.output().includes('probe up'), 30_000, npm.output);
      process.kill(signal === 'SIGINT' ? -npm.pid : npm.pid, signal);
      expect(await npm.exited).toEqual({ code: 0, signal: null });
      expect({ signal, received: npm.output().match(/probe got \w+/g) }).toEqual({ signal, received: [`probe got ${signal}`] });
    }
  }, 60_000);
});

describe('the image: dist/, config/ and production-only node_modules, no TypeScript', () => {
  let source: string;
  let image: string;
  let database: string;

  beforeAll(async () => {
    const db = await testDatabase();
    if (!db.url) throw new Error(`this test needs PostgreSQL: ${db.source}`);
    database = db.url;
    // What the Dockerfile's build stage produces: `npm run build` on the sources.
    source = copyProject('bridge-build-');
    const build = runSync('npm', ['run', 'build'], source);
    if (build.status !== 0) throw new Error(`build failed:\n${build.output}`);
    // What its final stage holds: the same files, and `npm ci --omit=dev` from the lockfile.
    image = mkdtempSync(join(tmpdir(), 'bridge-image-'));
    for (const name of ['dist', 'package.json', 'config']) cpSync(join(source, name), join(image, name), { recursive: true });
    mkdirSync(join(image, 'scripts'));
    for (const name of IMAGE_SCRIPTS) cpSync(join(source, 'scripts', name), join(image, 'scripts', name));
    // The deps stage: `npm ci --omit=dev` beside package.json and package-lock.json; the lockfile itself is not shipped.
    cpSync(join(source, 'package-lock.json'), join(image, 'package-lock.json'));
    const install = runSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], image);
    if (install.status !== 0) throw new Error(`npm ci --omit=dev failed:\n${install.output}`);
    rmSync(join(image, 'package-lock.json'));
    process.stdout.write(`build test: npm ci --omit=dev took ${install.ms.toFixed(0)} ms\n`);
  }, 180_000);
  afterAll(() => {
    for (const d of [source, image]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it('is what the Dockerfile builds: the steps simulated here are its steps', () => {
    const dockerfile = readFileSync(join(CHECKOUT, 'Dockerfile'), 'utf8');
    const steps = dockerfile.split('\n').filter((line) => /^(FROM|RUN|COPY|CMD) /.test(line));
    expect(steps).toEqual([
      'FROM node:24-bookworm-slim AS build',
      'COPY package.json package-lock.json ./',
      'RUN npm ci --no-audit --no-fund',
      'COPY tsconfig.json tsconfig.build.json ./',
      'COPY src ./src',
      'COPY adapters ./adapters',
      'COPY simulator ./simulator',
      'COPY model-check ./model-check',
      'COPY scripts ./scripts',
      'RUN npm run build',
      'FROM node:24-bookworm-slim AS deps',
      'COPY package.json package-lock.json ./',
      'RUN npm ci --omit=dev --no-audit --no-fund',
      'FROM node:24-bookworm-slim',
      'COPY package.json ./',
      'COPY --from=deps /app/node_modules ./node_modules',
      'COPY --from=build /app/dist ./dist',
      `COPY ${IMAGE_SCRIPTS.map((name) => `scripts/${name}`).join(' ')} ./scripts/`,
      'COPY config ./config',
      'RUN mkdir -p /data && chown node:node /data',
      'CMD ["node", "dist/src/main.js"]',
    ]);
    // Everything under scripts/ that the start script loads is shipped.
    const imports = [...readFileSync(join(CHECKOUT, 'scripts', 'start.mjs'), 'utf8').matchAll(/from '\.\/([^']+)'/g)].map((m) => m[1]);
    expect(IMAGE_SCRIPTS).toEqual(expect.arrayContaining(imports));
    const dockerignore = readFileSync(join(CHECKOUT, '.dockerignore'), 'utf8').split('\n');
    expect(dockerignore).toEqual(expect.arrayContaining(['node_modules', 'dist', 'data', '.git']));
  });

  it('has no TypeScript', () => {
    expect(existsSync(join(image, 'node_modules', 'typescript'))).toBe(false);
    expect(existsSync(join(image, 'node_modules', '.bin', 'tsc'))).toBe(false);
    expect(existsSync(join(image, 'src'))).toBe(false);
    expect(existsSync(join(image, 'node_modules', 'pg'))).toBe(true);
    // The file ledger's SQLite driver, with its prebuilt binary for this platform (nothing is compiled: the image has no compiler).
    expect(existsSync(join(image, 'node_modules', '@photostructure', 'sqlite', 'prebuilds', `${process.platform}-${process.arch}`))).toBe(true);
  });

  it('npm run migrate runs the built script: --help, then a real migration', async () => {
    const help = runSync('npm', ['run', 'migrate', '--', '--help'], image);
    expect(help.output).toContain('usage: npm run migrate');
    expect(help.output).not.toMatch(/tsc|build:/);
    expect(help.status).toBe(0);

    const schema = await freshSchema(database, 'image_migrate');
    try {
      const migrate = runSync('npm', ['run', 'migrate'], image, cleanEnv({ LEDGER_URL: schema.url }));
      expect(migrate.output).toContain('applied migration 1:');
      expect(migrate.output).toMatch(/schema version \d+/);
      expect(migrate.status).toBe(0);
    } finally {
      await schema.drop();
    }
  }, 60_000);

  it('npm start runs dist/ as it is; npm run secrets:rotate re-seals its demo merchants; npm run ledger:copy copies what it recorded into PostgreSQL', async () => {
    const ledger = join(image, 'data', 'ledger.json');
    const port = await freePort();
    const bridge = run('npm', ['start'], image, cleanEnv({ PORT: String(port), LEDGER_URL: `file:${ledger}` }));
    const url = `http://127.0.0.1:${port}`;
    await waitHealthy(bridge, url);
    // The banner comes once sandbox has made its demo merchants, after the bridge listens.
    await waitFor('the banner naming both demo merchants', () => /demo-bakery[\s\S]*demo-cafe|demo-cafe[\s\S]*demo-bakery/.test(bridge.output()), 20_000, bridge.output);
    expect(bridge.output()).not.toContain('build:');
    const checkout = await fetch(`${url}/v1/checkouts/generic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ orderId: 'IMG-1', currency: 'USD', total: '12.50', customer: { phone: '+15550001111' } }),
    });
    expect(checkout.status).toBe(200);
    expect(await checkout.json()).toMatchObject({ transactionId: 'generic:IMG-1', status: 'accrued' });
    await stopGracefully(bridge);

    // Sandbox made its demo merchants, their secrets sealed with its own key file: rotated in the image too.
    const newKey = Buffer.alloc(32, 7).toString('base64');
    const rotate = runSync('npm', ['run', 'secrets:rotate', '--', '--to', newKey], image, cleanEnv({ LEDGER_URL: `file:${ledger}` }));
    expect(rotate.output).toMatch(/2 merchant\(s\) re-sealed/);
    expect(rotate.output).not.toMatch(/tsc|build:/);
    expect(rotate.status).toBe(0);
    expect(readFileSync(join(image, 'data', 'sandbox-secrets.key'), 'utf8').trim()).toBe(newKey);

    const schema = await freshSchema(database, 'image_copy');
    try {
      const copy = runSync('npm', ['run', 'ledger:copy', '--', '--from', `file:${ledger}`, '--to', schema.url], image);
      expect(copy.output).toContain('records: 1 imported');
      expect(copy.output).toMatch(/count check: merchants: file ledger 2, PostgreSQL 2; records: file ledger 1, PostgreSQL 1; .*: OK/);
      expect(copy.status).toBe(0);
    } finally {
      await schema.drop();
    }
  }, 60_000);
});
