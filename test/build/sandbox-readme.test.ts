/**
 * The README's sandbox commands, run as written: the shell blocks of "Signing a webhook by hand"
 * and "Creating an order in the fake POS" are taken from README.md and run with bash (curl, openssl,
 * base64) against a started sandbox, so the documented headers, signing recipes, URLs and ids cannot
 * drift from what the bridge accepts. What a reader puts in place is put in place first: the
 * banner's simulator address in `SIM`, demo-cafe's admin token in `CAFE_ADMIN`, this bridge's port
 * for the documented 8080, and the sandbox is started as the missed-webhook demo says
 * (BACKFILL_INTERVAL_MS=0: no scheduled pass comes between a sale and the pass the demo asks for).
 * Every answer a command documents (`# {…}`) is checked against the one it gives
 * (test/support/documented-answer.ts). The table of the demo merchants' POS accounts is checked
 * against what sandbox installs.
 * Needs `npm run build` first (npm test does it).
 */
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SANDBOX_WEBHOOK_SECRET } from '../../src/config.js';
import { DEMO_MERCHANTS, demoPosToken } from '../../src/sandbox.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { answerMismatches, parseDocumentedAnswer } from '../support/documented-answer.js';
import { ADMIN_TOKEN } from '../support/harness.js';
import { simulatorBooks, startSandbox, type Banner } from '../support/sandbox.js';

const README = readFileSync(join(process.cwd(), 'README.md'), 'utf8');

/** The text of the README section under `### <title>`, up to the next heading. */
function section(title: string): string {
  const start = README.indexOf(`\n### ${title}\n`);
  if (start < 0) throw new Error(`README has no section "### ${title}"`);
  const rest = README.slice(start + 1);
  const end = rest.slice(1).search(/\n#{2,3} /);
  return end < 0 ? rest : rest.slice(0, end + 1);
}

/** The ```sh blocks of a section, in order. */
function shellBlocks(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

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

/** How the missed-webhook demo says to start the sandbox, beside ADMIN_TOKEN (see beforeAll). */
const DEMO_ENV = { BACKFILL_INTERVAL_MS: '0' };

describe('README: the sandbox commands for signing webhooks and making orders in the fake POSes', () => {
  let dir: string;
  let bridge: BridgeProcess;
  let banner: Banner;
  const signing = shellBlocks(section('Signing a webhook by hand'));
  const preface = signing[0]!;
  const byPos = new Map(signing.slice(1).map((block) => [/\/v1\/webhooks\/([a-z]+)/.exec(block)![1]!, block]));

  /**
   * Runs the README's preface and then `steps` in one shell, as a reader would, with this sandbox's
   * addresses and demo-cafe's admin token; answers what each step printed, trimmed.
   */
  const run = async (steps: Step[]): Promise<string[]> => {
    const setSim = /^SIM=\S+/m;
    const setCafeAdmin = /^CAFE_ADMIN=\S+/m;
    expect(preface).toMatch(setSim);
    const end = '@@end-of-step@@';
    const commands = steps.map((step) => `${step.commands.replace(setCafeAdmin, `CAFE_ADMIN=${banner.demos['demo-cafe']!.adminToken}`)}\nprintf '\\n${end}\\n'`);
    const script = [preface.replace(setSim, `SIM=${banner.simulator}`), ...commands].join('\n').replaceAll('localhost:8080', `localhost:${bridge.port}`);
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, timeout: 30_000 });
    const outputs = stdout.split(`\n${end}\n`).map((output) => output.trim());
    expect(outputs).toHaveLength(steps.length + 1);
    return outputs.slice(0, -1);
  };
  const books = (merchantId: string) => simulatorBooks(banner, merchantId);

  beforeAll(async () => {
    ({ dir, bridge, banner } = await startSandbox('bridge-sandbox-readme-', DEMO_ENV));
  }, 30_000);
  afterAll(async () => {
    await bridge?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('documents the secret, the demo merchants\' POS accounts and their access tokens as sandbox has them', () => {
    expect(preface).toContain(`SECRET=${SANDBOX_WEBHOOK_SECRET} `);
    const table = section("The sandbox's fake POSes");
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
    const [output] = await run(steps);
    expect(undocumented(steps[0]!, output!)).toEqual([]);
    const [result] = JSON.parse(output!).results;
    expect((await books(result.merchantId)).transactions[result.transactionId]).toMatchObject({ accruals: 1, reversals: 0, amount: 850 });
  }, 30_000);

  it('"Creating an order in the fake POS": the missed-webhook demo runs as written, each command answering as its comment says', async () => {
    const text = section('Creating an order in the fake POS');
    // Started as the demo says: no scheduled pass between the sale and the passes it asks for.
    expect(text).toContain(`BACKFILL_INTERVAL_MS=${DEMO_ENV.BACKFILL_INTERVAL_MS} npm start`);
    expect(text).toMatch(/^CAFE_ADMIN=\S+/m);
    const steps = documentedSteps(shellBlocks(text).join('\n'));
    expect(steps.every((step) => step.answer)).toBe(true);
    const outputs = await run(steps);
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
    // Every pass of the account was one the demo asked for.
    const status = await (await fetch(`${bridge.url}/v1/admin/backfill?merchantId=demo-cafe`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
    expect(status.scheduled).toBe(false);
    expect(status.items.find((item: { pos: string }) => item.pos === 'square').lastPass).toMatchObject({ by: 'request', new: 1, known: 1 });
  }, 60_000);
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
