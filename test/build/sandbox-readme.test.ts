/**
 * The documented commands, run as written, in the order printed: the README's "Five minutes with the
 * sandbox"; docs/pos-systems.md's "Signing a webhook by hand" (one block per POS); the missed-webhook
 * demo of docs/backfill-and-reconcile.md and its three-way report "Trying it in the sandbox";
 * docs/merchants.md's demo merchants side by side and "Onboarding"; and docs/backfill-and-reconcile.md's
 * "From a shell, against the simulator" (npm run simulator, npm run backfill and npm run
 * reconcile-report, outside sandbox). Every ```sh block of the README and docs/ is run here, or
 * listed in NOT_RUN with why it cannot be (checked: no block is skipped silently). Each shell block is
 * taken from its file and run with bash (curl, openssl, base64, node) against a started sandbox or
 * simulator, so the documented headers, signing recipes, URLs, ids and order cannot drift from what
 * the bridge does. What a reader puts in place is put in place first: the banner's simulator address
 * in `SIM`, the demo merchants' tokens, this bridge's port for the documented 8080, this simulator's
 * for 4010, and `node dist/scripts/<name>.js` for `npm run <name> --` (npm would build first, in the
 * shared checkout). Every answer a command documents (`# {…}`) is checked against the one it gives
 * (test/support/documented-answer.ts). The table of the demo merchants' POS accounts is checked
 * against what sandbox installs.
 * Needs `npm run build` first (npm test does it).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { DEMO_MERCHANTS, demoPosToken } from '../../src/sandbox.js';
import { freePort, type BridgeProcess } from '../support/bridge-process.js';
import { answerMismatches, parseDocumentedAnswer } from '../support/documented-answer.js';
import { eventually } from '../support/harness.js';
import { simulatorBooks, startSandbox, type Banner } from '../support/sandbox.js';

const CHECKOUT = process.cwd();
const read = (file: string) => readFileSync(join(CHECKOUT, file), 'utf8');

/** The text of the section of `file` under the heading `title` (any level), up to the next heading of its level or higher; code blocks are not headings. */
function section(file: string, title: string): string {
  const lines = read(file).split('\n');
  let fence = false;
  let start = -1;
  let level = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('```')) fence = !fence;
    const heading = fence ? undefined : /^(#{1,6}) (.*)$/.exec(line);
    if (!heading) continue;
    if (start < 0 && heading[2] === title) {
      start = i;
      level = heading[1]!.length;
    } else if (start >= 0 && heading[1]!.length <= level) {
      return lines.slice(start, i).join('\n');
    }
  }
  if (start < 0) throw new Error(`${file} has no section "${title}"`);
  return lines.slice(start).join('\n');
}

/** The ```sh blocks of a section, in order. */
function shellBlocks(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** Every ```sh block a test below runs (the README's `npm start` line: the sandbox started as it says), by its text. */
const RUN = new Set<string>();

/** `blocks`, marked as run by a test below. */
function runs(blocks: string[]): string[] {
  for (const block of blocks) RUN.add(block);
  return blocks;
}

/** Where the documented shell blocks are: the README and every page under docs/. */
const DOCUMENTS = ['README.md', ...readdirSync(join(CHECKOUT, 'docs')).filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`)];

/**
 * The ```sh blocks no test here runs, each with why it cannot run against a sandbox or the
 * simulator, and `marks`: what in the block makes it so (the block must still hold it, or the
 * reason is out of date). Named by file and first line.
 */
const NOT_RUN: { file: string; first: string; marks: string; why: string }[] = [
  {
    file: 'README.md',
    first: 'npm ci && npm start     # a sandbox bridge on http://localhost:8080 (nothing to configure)',
    marks: 'npm ci && npm test',
    why: 'installs the dependencies and runs every test, this one among them; npm start is the sandbox every describe below starts (test/build/start.test.ts starts it through npm start)',
  },
  {
    file: 'docs/backfill-and-reconcile.md',
    first: 'curl -s "$BRIDGE/v1/admin/reports/reconcile?merchantId=demo-cafe&from=2026-11-01&to=2026-11-30" -H "Authorization: Bearer $ADMIN_TOKEN"',
    marks: '"…same…"',
    why: "an example of the answer for a merchant's month in production (412 POS orders, 530 operations, against any bridge: $BRIDGE), and its CSV request with the same URL left out (…same…): no sandbox has that month; the sandbox's own report is the section's 'Trying it in the sandbox' block, run below",
  },
  {
    file: 'docs/simulator-pos-apis.md',
    first: 'npm run simulator                                   # port 4010',
    marks: 'SIMULATOR_PORT=4100 npm run simulator',
    why: 'three ways to start the simulator, each a server that runs until stopped; test/build/simulator.test.ts starts it each way (default port, --port 0 --write-env, SIMULATOR_PORT), and "From a shell, against the simulator" below starts it as that section prints',
  },
];

/** One step of a documented shell block: its commands, and the answer the `# {…}` comment after them documents (continued on `#  ` lines). */
interface Step {
  commands: string;
  answer?: string;
}

/** A shell block cut after each documented answer. */
function documentedSteps(block: string): Step[] {
  const steps: Step[] = [];
  const lines = block.split('\n');
  let commands: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line.startsWith('# {')) {
      commands.push(line);
      continue;
    }
    const answer = [line.slice(2)];
    while (lines[i + 1]?.startsWith('#  ')) answer.push(lines[++i]!.slice(1));
    steps.push({ commands: commands.join('\n'), answer: answer.join(' ') });
    commands = [];
  }
  if (commands.some((l) => l.trim() && !l.startsWith('#'))) steps.push({ commands: commands.join('\n') });
  return steps;
}

/** Where an answer differs from its documented one, each line prefixed with the command's first line. */
function undocumented(step: Step, output: string): string[] {
  const command = step.commands.split('\n').find((l) => l.trim() && !l.startsWith('#'))!;
  if (!step.answer) return output ? [`${command}: answered ${output.slice(0, 200)}, documented nothing`] : [];
  let actual: unknown;
  try {
    actual = JSON.parse(output);
  } catch {
    return [`${command}: answered ${JSON.stringify(output.slice(0, 200))}, not one JSON answer`];
  }
  return answerMismatches(actual, parseDocumentedAnswer(step.answer)).map((m) => `${command}: ${m}`);
}

const END = '@@end-of-step@@';

/**
 * Runs `script` (the reader's preface, with what they put in place) and then `steps` in one bash, as
 * a reader would; answers what each step printed (trimmed) and its exit code. With `stopOnError`
 * false a failing command does not end the script: an exit code can be the documented outcome.
 */
async function runSteps(preface: string, steps: Step[], options: { cwd: string; replace?: [string | RegExp, string][]; stopOnError?: boolean }): Promise<{ output: string; code: number }[]> {
  const commands = steps.map((step) => `${step.commands}\nprintf '\\n${END} %s\\n' "$?"`);
  let script = [preface, ...commands].join('\n');
  for (const [from, to] of options.replace ?? []) script = script.replaceAll(from, to);
  const flags = options.stopOnError === false ? '-uo' : '-euo';
  const { stdout } = await promisify(execFile)('bash', [flags, 'pipefail', '-c', script], { cwd: options.cwd, timeout: 60_000 });
  const parts = stdout.split(new RegExp(`\\n${END} (\\d+)\\n`));
  const results: { output: string; code: number }[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) results.push({ output: parts[i]!.trim(), code: Number(parts[i + 1]) });
  expect(results).toHaveLength(steps.length);
  return results;
}

/** The reader's shell after starting the sandbox: the documented `NAME=…` lines replaced by this sandbox's values. */
function withValues(block: string, values: Record<string, string>): string {
  let out = block;
  for (const [name, value] of Object.entries(values)) {
    const line = new RegExp(`^${name}=\\S+`, 'm');
    expect([name, line.test(out)]).toEqual([name, true]);
    out = out.replace(line, `${name}=${value}`);
  }
  return out;
}

const ADMIN = 'local-admin-token-123';

describe('README: five minutes with the sandbox, as printed', () => {
  let dir: string;
  let bridge: BridgeProcess;
  let banner: Banner;
  const text = section('README.md', 'Five minutes with the sandbox');
  const [start, preface, ...blocks] = runs(shellBlocks(text));

  beforeAll(async () => {
    // As the README starts it; POS_TOKEN unset (spawnBridge sets one): sandbox takes direct posts without a token.
    ({ dir, bridge, banner } = await startSandbox('bridge-readme-five-', { ADMIN_TOKEN: ADMIN, POS_TOKEN: '' }));
  }, 30_000);
  afterAll(async () => {
    await bridge?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts the sandbox with the admin token every later command uses', () => {
    expect(start!.trim()).toBe(`ADMIN_TOKEN=${ADMIN} npm start`);
    expect(blocks.join('\n')).not.toMatch(/Bearer (?!local-admin-token-123)[a-z]/);
  });

  it('every command answers as its comment says, in the order printed', async () => {
    const steps = blocks.flatMap(documentedSteps);
    expect(steps.every((step) => step.answer)).toBe(true);
    const outputs = await runSteps(withValues(preface!, { SIM: banner.simulator }), steps, { cwd: CHECKOUT, replace: [['localhost:8080', `localhost:${bridge.port}`]] });
    expect(steps.flatMap((step, i) => undocumented(step, outputs[i]!.output))).toEqual([]);
    // What the comments cannot say with their "…": the webhook's sale is accrued once in demo-cafe's books, and the record is the walk-through's.
    const sale = JSON.parse(outputs.find((o) => o.output.includes('"pos":"shopify"'))!.output).results[0];
    expect((await simulatorBooks(banner, 'demo-cafe')).transactions[sale.transactionId]).toMatchObject({ accruals: 1, amount: 700 });
    // The register's check: accrued once in demo-bakery's books, then reversed once (the void's REVERSE).
    const bakery = await eventually(
      () => simulatorBooks(banner, 'demo-bakery'),
      (b) => Object.entries(b.transactions as Record<string, { reversals: number }>).some(([id, t]) => id.startsWith('toast:') && t.reversals === 1),
      5000,
      { what: "the register's check reversed in demo-bakery's books" },
    );
    expect(Object.entries(bakery.transactions).filter(([id]) => id.startsWith('toast:')).map(([, t]) => t)).toEqual([expect.objectContaining({ accruals: 1, reversals: 1, amount: 700 })]);
    const record = JSON.parse(outputs.find((o) => o.output.includes('"history"'))!.output);
    expect(record.history.map((h: { to: string }) => h.to)).toEqual(['pending', 'accrued', 'reversal_pending', 'reversed']);
  }, 60_000);
});

describe('docs: signing webhooks, the missed-webhook demo, the demo merchants and onboarding, in one sandbox', () => {
  let dir: string;
  let bridge: BridgeProcess;
  let banner: Banner;
  const signing = runs(shellBlocks(section('docs/pos-systems.md', 'Signing a webhook by hand')));
  const signingPreface = signing[0]!;
  const byPos = new Map(signing.slice(1).map((block) => [/\/v1\/webhooks\/([a-z]+)/.exec(block)![1]!, block]));
  const demoText = section('docs/backfill-and-reconcile.md', 'Trying it: the missed-webhook demo');
  const demoBlocks = runs(shellBlocks(demoText));
  const threeWayText = section('docs/backfill-and-reconcile.md', 'Three-way reconcile');
  /** "Trying it in the sandbox": the section's block that speaks to the sandbox's simulator. */
  const reportBlocks = runs(shellBlocks(threeWayText).filter((block) => block.includes('$SIM/')));
  const [sideBySidePreface, sideBySide] = runs(shellBlocks(section('docs/merchants.md', "Trying it: the sandbox's two demo merchants")));
  const onboarding = runs(shellBlocks(section('docs/merchants.md', 'Onboarding')));
  /** How the missed-webhook demo says to start the sandbox. */
  const DEMO_ENV = { ADMIN_TOKEN: ADMIN, BACKFILL_INTERVAL_MS: '0' };
  const tokens = () => ({
    SIM: banner.simulator,
    CAFE_ADMIN: banner.demos['demo-cafe']!.adminToken,
    CAFE_POS: banner.demos['demo-cafe']!.posToken,
    BAKERY_POS: banner.demos['demo-bakery']!.posToken,
  });
  const port = (): [string, string][] => [['localhost:8080', `localhost:${bridge.port}`]];
  const books = (merchantId: string) => simulatorBooks(banner, merchantId);

  beforeAll(async () => {
    ({ dir, bridge, banner } = await startSandbox('bridge-sandbox-readme-', DEMO_ENV));
  }, 30_000);
  afterAll(async () => {
    await bridge?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("documents the secret, the demo merchants' POS accounts and their access tokens as sandbox has them", () => {
    expect(signingPreface).toContain(`SECRET=${SANDBOX_WEBHOOK_SECRET} `);
    const table = section('docs/pos-systems.md', "The sandbox's fake POSes");
    for (const demo of DEMO_MERCHANTS) {
      const row = table.split('\n').find((l) => l.startsWith(`| \`${demo.id}\` |`))!;
      const cells = row.split('|').slice(2, -1).map((c) => c.trim().replaceAll('`', ''));
      expect(cells).toEqual([demo.accounts.square, demo.accounts.shopify, demo.accounts.clover, demo.accounts.toast, demo.accounts.loyverse]);
    }
    expect(table).toContain(`\`${demoPosToken('demo-bakery', 'square')}\``);
    expect(demoPosToken('<merchant>', '<pos>')).toBe('sandbox-<pos>-token-<merchant>');
    expect(table).toContain('`sandbox-<pos>-token-<merchant>`');
  });

  it('has one command block for each POS, each posting to its webhook route', () => {
    expect([...byPos.keys()].sort()).toEqual(['clover', 'loyverse', 'shopify', 'square', 'toast']);
  });

  it.each(['square', 'shopify', 'clover', 'toast', 'loyverse'])('%s: the documented commands deliver a signed webhook that accrues 8.50 once, as the comment says', async (pos) => {
    const steps = documentedSteps(byPos.get(pos)!);
    expect(steps).toHaveLength(1);
    const { output } = (await runSteps(withValues(signingPreface, { SIM: banner.simulator }), steps, { cwd: dir, replace: port() }))[0]!;
    expect(undocumented(steps[0]!, output)).toEqual([]);
    const [result] = JSON.parse(output).results;
    expect((await books(result.merchantId)).transactions[result.transactionId]).toMatchObject({ accruals: 1, reversals: 0, amount: 850 });
  }, 30_000);

  it('the missed-webhook demo runs as written, each command answering as its comment says, and the three sides agree at the end', async () => {
    // Started as the demo says: no scheduled pass between the sale and the passes it asks for.
    expect(demoText).toContain(`ADMIN_TOKEN=${ADMIN} BACKFILL_INTERVAL_MS=${DEMO_ENV.BACKFILL_INTERVAL_MS} npm start`);
    const [preface, ...blocks] = demoBlocks;
    const steps = documentedSteps(blocks.join('\n'));
    expect(steps.every((step) => step.answer)).toBe(true);
    const outputs = (await runSteps(withValues(preface!, { SIM: banner.simulator }), steps.map((s) => ({ ...s, commands: withCafeAdmin(s.commands) })), { cwd: dir, replace: port() })).map((o) => o.output);
    expect(steps.flatMap((step, i) => undocumented(step, outputs[i]!))).toEqual([]);

    // What the comments cannot say with their "…": every answer is about this run's sale.
    const answers = outputs.map((output) => JSON.parse(output));
    const sale = answers[0];
    const transactionId = `square:${sale.id}`;
    expect(sale.id).toMatch(/^MISSED-\d+$/);
    const passes = answers.filter((_, i) => steps[i]!.commands.includes('/v1/admin/backfill'));
    expect(passes.map((pass) => ({ new: pass.new, known: pass.known }))).toEqual([
      { new: [transactionId], known: 0 }, // the sale, found
      { new: [], known: 1 }, // again: nothing new
      { new: [transactionId], known: 1 }, // its refund, found; the sale known
    ]);
    const records = answers.filter((_, i) => steps[i]!.commands.includes('/v1/admin/transactions/'));
    expect(records.map((record) => record.transactionId ?? record.error.code)).toEqual(['not_found', transactionId, transactionId]);
    const refund = answers.find((answer) => answer.refund);
    expect(refund.refund.order_id).toBe(refund.order.id);
    expect(refund.order.returns[0].source_order_id).toBe(sale.id);
    // Accrued once, reversed once, the remainder accrued once.
    const cafe = await books('demo-cafe');
    expect(cafe.transactions[transactionId]).toMatchObject({ accruals: 1, reversals: 1, amount: 660 });
    expect(cafe.transactions[`${transactionId}~r1`]).toMatchObject({ accruals: 1, reversals: 0, amount: 440 });
    // The last answer is the report's: the three sides agree, as the demo promises.
    expect(answers.at(-1)).toMatchObject({ merchantId: 'demo-cafe', complete: true, differences: [] });
    // Every pass of the account was one the demo asked for.
    const status = await (await fetch(`${bridge.url}/v1/admin/backfill?merchantId=demo-cafe`, { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    expect(status.scheduled).toBe(false);
    expect(status.items.find((item: { pos: string }) => item.pos === 'square').lastPass).toMatchObject({ by: 'request', new: 1, known: 1 });
  }, 60_000);

  /** demo-cafe's admin token where the demo has the reader set it. */
  const withCafeAdmin = (commands: string) => commands.replace(/^CAFE_ADMIN=\S+/m, `CAFE_ADMIN=${banner.demos['demo-cafe']!.adminToken}`);

  it("the demo merchants side by side (docs/merchants.md): each command answers as its comment says", async () => {
    const steps = documentedSteps(sideBySide!);
    expect(steps.every((step) => step.answer)).toBe(true);
    const outputs = await runSteps(withValues(sideBySidePreface!, tokens()), steps, { cwd: dir, replace: port() });
    expect(steps.flatMap((step, i) => undocumented(step, outputs[i]!.output))).toEqual([]);
    // demo-cafe's admin token listed its own records only.
    const own = JSON.parse(outputs.find((o) => o.output.startsWith('{"items"'))!.output);
    expect(new Set(own.items.map((r: { merchantId: string }) => r.merchantId))).toEqual(new Set(['demo-cafe']));
  }, 30_000);

  it('onboarding (docs/merchants.md) runs in the order printed: the install at the simulator first, then the merchant from its app token alone', async () => {
    const [block] = onboarding;
    expect(block!.indexOf('$SIM/__sim/merchants')).toBeLessThan(block!.indexOf('/v1/admin/merchants'));
    const steps = documentedSteps(block!);
    expect(steps).toHaveLength(2);
    const outputs = await runSteps(`SIM=${banner.simulator}`, steps, { cwd: dir, replace: port() });
    expect(steps.flatMap((step, i) => undocumented(step, outputs[i]!.output))).toEqual([]);
    const created = JSON.parse(outputs[1]!.output);
    // Its POS token works: a checkout of the new merchant lands in its own books, in its currency.
    const res = await fetch(`${bridge.url}/v1/checkouts/generic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${created.posToken}` },
      body: JSON.stringify({ orderId: 'CS-1', currency: 'CAD', total: '4.00', customer: { phone: '+14165550123' } }),
    });
    expect(await res.json()).toMatchObject({ status: 'accrued' });
    expect((await books('corner-shop')).transactions['generic:CS-1']).toMatchObject({ accruals: 1, amount: 400 });
  }, 30_000);

  it('the three-way report in the sandbox (docs/backfill-and-reconcile.md "Trying it in the sandbox"): a Clover sale whose webhook never came, named, as printed', async () => {
    // What the reader puts in place, as the text says; run last here: the missed-webhook demo above ends with the report agreeing.
    expect(threeWayText).toContain("(`$SIM` is the simulator's address from the banner, `$ADMIN_TOKEN` the admin token)");
    expect(reportBlocks).toHaveLength(1);
    const steps = documentedSteps(reportBlocks[0]!);
    expect(steps).toHaveLength(2);
    expect(steps.every((step) => step.answer)).toBe(true);
    const outputs = (await runSteps(`SIM=${banner.simulator}\nADMIN_TOKEN=${ADMIN}`, steps, { cwd: dir, replace: port() })).map((o) => o.output);
    expect(steps.flatMap((step, i) => undocumented(step, outputs[i]!))).toEqual([]);
    // What the comments cannot say with their "…": the one difference is this run's sale, and its next step a backfill of it.
    const [order, report] = outputs.map((output) => JSON.parse(output));
    expect(report.differences).toEqual([expect.objectContaining({ transactionId: `clover:DEMOCAFECL001:${order.id}`, orderId: order.id })]);
    expect(report.differences[0].next).toMatch(/^backfill: POST \/v1\/admin\/backfill \{"merchantId":"demo-cafe","pos":"clover","since":"/);
  }, 30_000);
});

describe('docs: from a shell, against the simulator (npm run simulator, backfill, reconcile-report)', () => {
  let dir: string;
  let simulator: ReturnType<typeof spawn> | undefined;
  const text = section('docs/backfill-and-reconcile.md', 'From a shell, against the simulator');
  const [startSimulator, block] = runs(shellBlocks(text));
  /** `npm run <name> --` as the built script npm would run after building (the shared checkout is not rebuilt here). */
  const built: [RegExp, string][] = [[/npm run ([a-z-]+) --/g, `node ${join(CHECKOUT, 'dist', 'scripts')}/$1.js`]];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docs-shell-'));
  });
  afterAll(() => {
    simulator?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('the simulator, then a missing sale reported (exit 3), backfilled, and the report agreeing (exit 0), as printed', async () => {
    expect(startSimulator!.trim()).toBe('npm run simulator -- --port 4010 --write-env sim.env');
    const port = await freePort();
    let command = startSimulator!.trim().replace('--port 4010', `--port ${port}`);
    for (const [from, to] of built) command = command.replace(from, to);
    const [node, ...args] = command.split(' ');
    simulator = spawn(node === 'node' ? process.execPath : node!, args, { cwd: dir, env: { PATH: process.env.PATH! }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    simulator.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => out, (o) => o.includes('Ctrl-C stops it'), 15_000);

    expect(text).toContain('(exit code `3`: differences)');
    expect(text).toContain('(exit code `0`)');
    const steps = documentedSteps(block!);
    expect(steps.every((step) => step.answer)).toBe(true);
    const results = await runSteps('', steps, { cwd: dir, replace: [...built, ['4010', String(port)]], stopOnError: false });
    expect(steps.flatMap((step, i) => undocumented(step, results[i]!.output))).toEqual([]);
    expect(results.map((r) => r.code)).toEqual([3, 0, 0]);
    const [before, pass] = results.map((r) => JSON.parse(r.output));
    expect(pass.new).toEqual([before.differences[0].transactionId]);
  }, 60_000);
});

describe('docs: every documented shell block is run, or says why not', () => {
  const blocksOf = (file: string) => shellBlocks(read(file));
  const firstLine = (block: string) => block.split('\n')[0]!;

  it('each block of the README and docs/ is run by a test here, or listed in NOT_RUN', () => {
    const exempt = new Set(NOT_RUN.map((n) => `${n.file}: ${n.first}`));
    const skipped = DOCUMENTS.flatMap((file) => blocksOf(file).filter((block) => !RUN.has(block)).map((block) => `${file}: ${firstLine(block)}`));
    expect(skipped.filter((block) => !exempt.has(block))).toEqual([]);
  });

  it.each(NOT_RUN.map((n) => [`${n.file}: ${n.first}`, n] as const))('%s: is there, not run, and still what its reason says', (_, n) => {
    const matching = blocksOf(n.file).filter((block) => firstLine(block) === n.first);
    expect(matching).toHaveLength(1);
    expect(RUN.has(matching[0]!)).toBe(false);
    expect(matching[0]).toContain(n.marks);
    expect(n.why.length).toBeGreaterThan(40);
  });
});

describe('README answers: how a documented answer is read', () => {
  const check = (actual: unknown, documented: string) => answerMismatches(actual, parseDocumentedAnswer(documented));

  it('"…" in a string stands for some text, in an object for other members, in an array for other items', () => {
    expect(check({ id: 'MISSED-17', state: 'COMPLETED', total: 7 }, '{"id":"MISSED-…",…,"state":"COMPLETED",…}')).toEqual([]);
    expect(check({ id: 'MISSED-', state: 'COMPLETED' }, '{"id":"MISSED-…",…}')).toEqual(['$.id: documented "MISSED-…", got "MISSED-"']);
    expect(check({ a: 1, b: 2 }, '{"a":1}')).toEqual(['$: "b" is not documented (no "…" member)']);
    expect(check({ h: [{ e: 'x' }, { e: 'y' }, { e: 'z' }] }, '{"h":[…,{"e":"y"},…]}')).toEqual([]);
    expect(check({ h: [{ e: 'x' }, { e: 'y' }] }, '{"h":[{"e":"y"}]}')).toEqual(['$.h: documented 1 items, got 2: [{"e":"x"},{"e":"y"}]']);
    expect(check({ n: [] }, '{"n":[…]}')).toEqual([]);
    expect(check({ r: { x: 1 } }, '{"r":...}')).toEqual([]);
  });

  it('a key with "…" matches the key whose value is the documented one', () => {
    const books = { transactions: { 'square:M-1': { accruals: 1, reversals: 1 }, 'square:M-1~r1': { accruals: 1, reversals: 0 } } };
    expect(check(books, '{"transactions":{"square:M-…":{"accruals":1,"reversals":1},"square:M-…~r1":{"accruals":1,"reversals":0}}}')).toEqual([]);
    expect(check(books, '{"transactions":{"square:M-…":{"accruals":2,"reversals":1},…}}')).toEqual(['$.transactions: no key like "square:M-…" has the documented value']);
  });

  it('numbers, booleans and null are exact, and a malformed answer names where', () => {
    expect(check({ a: 660, b: false, c: null }, '{"a":660,"b":false,"c":null}')).toEqual([]);
    expect(check({ a: '660' }, '{"a":660}')).toEqual(['$.a: documented 660, got "660"']);
    expect(() => parseDocumentedAnswer('{"a":1')).toThrow(/"," or "}" expected at 6/);
  });
});
