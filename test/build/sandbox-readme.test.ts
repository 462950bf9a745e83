/**
 * The README's sandbox commands, run as written: the shell blocks of "Signing a webhook by hand"
 * and "Creating an order in the fake POS" are taken from README.md and run with bash (curl, openssl,
 * base64) against a started sandbox, so the documented headers, signing recipes, URLs and ids cannot
 * drift from what the bridge accepts. Two things are put in place first, as a reader would: the
 * banner's simulator address in `SIM`, and this bridge's port for the documented 8080. The table of
 * the demo merchants' POS accounts is checked against what sandbox installs.
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

/** The answer a documented command's comment says it gives (`# {"pos":…}`, its last such line). */
function documentedAnswer(block: string): { pos: string; results: Record<string, string>[] } {
  const lines = block.split('\n').filter((l) => l.startsWith('# {'));
  return JSON.parse(lines.at(-1)!.slice(2));
}

/** What the comment states, as a matcher: each `…` in a value stands for whatever the run made (its ids). */
function asMatcher(documented: Record<string, string>): Record<string, unknown> {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return Object.fromEntries(
    Object.entries(documented).map(([key, value]) => [key, value.includes('…') ? expect.stringMatching(new RegExp(`^${value.split('…').map(escape).join('.+')}$`)) : value]),
  );
}

describe('README: the sandbox commands for signing webhooks and making orders in the fake POSes', () => {
  let dir: string;
  let bridge: BridgeProcess;
  let banner: Banner;
  const signing = shellBlocks(section('Signing a webhook by hand'));
  const preface = signing[0]!;
  const byPos = new Map(signing.slice(1).map((block) => [/\/v1\/webhooks\/([a-z]+)/.exec(block)![1]!, block]));

  /** Runs the README's preface and `block` as a reader would, with this sandbox's addresses. */
  const run = async (block: string): Promise<string[]> => {
    const setSim = /^SIM=\S+/m;
    expect(preface).toMatch(setSim);
    const script = `${preface.replace(setSim, `SIM=${banner.simulator}`)}\n${block}`.replaceAll('localhost:8080', `localhost:${bridge.port}`);
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, timeout: 20_000 });
    return stdout.split('\n').filter(Boolean);
  };
  const books = (merchantId: string) => simulatorBooks(banner, merchantId);

  beforeAll(async () => {
    ({ dir, bridge, banner } = await startSandbox('bridge-sandbox-readme-'));
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
    const block = byPos.get(pos)!;
    const expected = documentedAnswer(block);
    const answer = JSON.parse((await run(block)).at(-1)!);
    expect(answer).toEqual({ pos: expected.pos, results: expected.results.map(asMatcher) });
    const [result] = answer.results;
    expect((await books(result.merchantId)).transactions[result.transactionId]).toMatchObject({ accruals: 1, reversals: 0, amount: 850 });
  }, 30_000);

  it('"Creating an order in the fake POS": the documented calls make a sale and a refund the bridge never hears of', async () => {
    const [block] = shellBlocks(section('Creating an order in the fake POS'));
    const [orderLine, refundLine] = await run(block!);
    const order = JSON.parse(orderLine!);
    expect(order).toMatchObject({ id: expect.stringMatching(/^MISSED-\d+$/), state: 'COMPLETED', location_id: expect.any(String) });
    const refund = JSON.parse(refundLine!);
    expect(refund.refund).toMatchObject({ order_id: refund.order.id, status: 'COMPLETED' });
    expect(refund.order.returns[0].source_order_id).toBe(order.id);
    // Nothing reached the bridge or the loyalty service.
    expect((await books('demo-cafe')).transactions[`square:${order.id}`]).toBeUndefined();
    const record = await fetch(`${bridge.url}/v1/admin/transactions/square:${order.id}?merchantId=demo-cafe`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(record.status).toBe(404);
  }, 30_000);
});
