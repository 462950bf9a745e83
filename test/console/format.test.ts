/**
 * The console's formatting of ages and contact details (src/console/js/dom.js): the page formats
 * no money (the bridge writes every amount, money.ts), and masks customers' phone numbers and emails.
 * And what the page names and allows comes from the bridge: the vocabulary it serves
 * (`/admin/vocabulary.json`: statuses with their words, POS names, each from its one owner), which
 * the page reads instead of keeping copies, and the rule the API gives for each action, an action
 * it gave none for being not allowed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import request from 'supertest';
// @ts-expect-error: the console's own ES module, plain JavaScript for the browser (type-checked by tsconfig.console.json, not here).
import { age, prose, statusLabel } from '../../src/console/js/dom.js';
// @ts-expect-error: the console's own ES module.
import { differenceLabel, ledgerStatuses, listingPosNames, posNames, resolveOutcomes, statusWords, useVocabulary, webhookPosNames } from '../../src/console/js/vocabulary.js';
import { RESOLVE_OUTCOMES } from '../../src/core/transitions.js';
import { DIFFERENCE_KINDS, DIFFERENCE_LABELS } from '../../src/reconcile/classify.js';
// @ts-expect-error: the console's own ES module.
import { NO_RULE, ruleOf } from '../../src/console/js/actions.js';
// @ts-expect-error: the console's own ES module.
import { BULK_MAX as CONSOLE_BULK_MAX } from '../../src/console/js/views/search.js';
import { BULK_MAX } from '../../src/http/routes/admin.js';
import { CONSOLE_DIR, CONSOLE_HEADERS, consoleRoutes, type ConsoleVocabulary } from '../../src/http/routes/console.js';
import { POS_NAMES, VENDOR_POS_NAMES } from '../../src/pos/contract.js';
import { LEDGER_STATUSES } from '../../src/state/record.js';
import { RESOLVE_OUTCOME_WORDS, STATUS_DESCRIPTIONS, STATUS_LABELS } from '../../src/http/words.js';

describe('money is the bridge\'s to write', () => {
  it('the page formats no amount: the API writes every one as money (money.ts), and no console script computes with an amount', () => {
    const dir = join(CONSOLE_DIR, 'js');
    const scripts = [...readdirSync(dir), ...readdirSync(join(dir, 'views')).map((f) => join('views', f))].filter((f) => f.endsWith('.js'));
    expect(scripts.length).toBeGreaterThan(10);
    for (const file of scripts) {
      const source = readFileSync(join(dir, file), 'utf8');
      // Cents to decimals (× or ÷ 100, toFixed, Intl's currency formatting) is the bridge's work, done once.
      expect({ file, found: source.match(/[*/]\s*100\b|\.toFixed\(|NumberFormat|\bmoney\(|majorMoney/g) ?? [] }).toEqual({ file, found: [] });
    }
  });

  it("prose leaves the API's words as they came but for times: amounts in them are already money", () => {
    expect(prose('partial refund RP-1 of 19.99 USD: the remaining 39.98 USD as generic:P-1~r1')).toEqual(['partial refund RP-1 of 19.99 USD: the remaining 39.98 USD as generic:P-1~r1']);
    expect(prose('operation 5 on card 21-100003-4, 3 records')).toEqual(['operation 5 on card 21-100003-4, 3 records']);
    expect(prose(undefined)).toBe('');
    expect(prose('')).toEqual([]);
  });
});

describe('age', () => {
  const now = Date.parse('2026-11-24T12:00:00Z');
  it.each([
    ['2026-11-24T11:59:15Z', '45 s'],
    ['2026-11-24T08:48:00Z', '3 h 12 min'],
    ['2026-11-24T10:00:00Z', '2 h'],
    ['2026-11-22T08:00:00Z', '2 d 4 h'],
    ['2026-11-24T12:00:05Z', '0 s'],
  ])('since %p is %p', (since, text) => {
    expect(age(since, now)).toBe(text);
  });
});

describe('the vocabulary the bridge serves the console', () => {
  const app = express().use(consoleRoutes());
  const served = async () => {
    const res = await request(app).get('/admin/vocabulary.json');
    expect(res.status).toBe(200);
    return res;
  };

  it("is the ledger's statuses with their words, and the POS contract's names, under the console's headers", async () => {
    const res = await served();
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    for (const [name, value] of Object.entries(CONSOLE_HEADERS)) expect(res.headers[name.toLowerCase()]).toBe(value);
    const vocabulary = res.body as ConsoleVocabulary;
    expect(vocabulary.statuses.map((s) => s.status)).toEqual([...LEDGER_STATUSES]);
    for (const { status, label, description } of vocabulary.statuses) {
      expect(label).toBe(STATUS_LABELS[status]);
      expect(description).toBe(STATUS_DESCRIPTIONS[status]);
      expect(label).not.toBe('');
      expect(description).not.toBe('');
    }
    expect(vocabulary.pos).toEqual([...POS_NAMES]);
    expect(vocabulary.webhookPos).toEqual([...VENDOR_POS_NAMES]);
    expect(vocabulary.listingPos).toEqual([...VENDOR_POS_NAMES]);
    expect(vocabulary.differenceKinds).toEqual(DIFFERENCE_KINDS.map((kind) => ({ kind, label: DIFFERENCE_LABELS[kind] })));
    // The outcomes /resolve takes, the same list its schema and the rules take, each with its words.
    expect(vocabulary.resolveOutcomes).toEqual(RESOLVE_OUTCOMES.map((outcome) => ({ outcome, ...RESOLVE_OUTCOME_WORDS[outcome] })));
    expect(vocabulary.resolveOutcomes.every(({ label, effect }) => label !== '' && effect !== '')).toBe(true);
    // Only read: nothing else is answered at that address.
    expect((await request(app).post('/admin/vocabulary.json')).status).toBe(404);
  });

  it('is served by middleware, as the page is, not by a route of the JSON API that /openapi.json documents', () => {
    const layers = (consoleRoutes() as unknown as { stack: { route?: unknown }[] }).stack;
    expect(layers.length).toBeGreaterThan(0);
    expect(layers.filter((layer) => layer.route)).toEqual([]);
  });

  it('is what the console names statuses and POSes by, once read', async () => {
    const vocabulary = useVocabulary((await served()).body);
    expect(ledgerStatuses()).toEqual([...LEDGER_STATUSES]);
    expect(posNames()).toEqual([...POS_NAMES]);
    expect(webhookPosNames()).toEqual([...VENDOR_POS_NAMES]);
    expect(listingPosNames()).toEqual([...VENDOR_POS_NAMES]);
    expect(statusLabel('in_doubt')).toBe(STATUS_LABELS.in_doubt);
    expect(statusWords('reverse_failed')).toMatchObject({ label: 'Reverse failed', description: STATUS_DESCRIPTIONS.reverse_failed });
    // A status the bridge did not name is shown as the API wrote it, never given another's words.
    expect(statusLabel('no_such_status')).toBe('no_such_status');
    expect(statusWords('no_such_status')).toBeUndefined();
    // A report's kinds of difference in words; one the bridge did not name, as the API wrote it.
    expect(differenceLabel('refund_not_reversed')).toBe('Refunded in the POS, not reversed');
    expect(differenceLabel('no_such_kind')).toBe('no_such_kind');
    // The resolve's choices, in the bridge's words.
    expect(resolveOutcomes().map((o: { value: string }) => o.value)).toEqual([...RESOLVE_OUTCOMES]);
    expect(resolveOutcomes()[1]).toEqual({ value: 'not_accrued', label: 'Not accrued', effect: expect.stringMatching(/sends it again/) });
    // What is not a vocabulary is refused, and the one read is kept.
    expect(() => useVocabulary({ statuses: [], pos: ['generic'], webhookPos: [], listingPos: [] })).toThrow(/vocabulary/);
    expect(() => useVocabulary('<html>')).toThrow(/vocabulary/);
    expect(useVocabulary(vocabulary)).toBe(vocabulary);
    expect(ledgerStatuses()).toEqual([...LEDGER_STATUSES]);
  });

  it("keeps no copy of the bridge's statuses or POS names in the page's scripts", () => {
    const scripts = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? scripts(join(dir, entry.name)) : entry.name.endsWith('.js') ? [join(dir, entry.name)] : []));
    const files = scripts(join(CONSOLE_DIR, 'js'));
    expect(files.length).toBeGreaterThan(10);
    // Statuses no other list of the page shares (attention kinds and evidence readings share the others), and every POS.
    const names = ['skipped', 'reversal_pending', ...POS_NAMES];
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const name of names) expect({ file, name, quoted: new RegExp(`['"\`]${name}['"\`]`).test(text) }).toEqual({ file, name, quoted: false });
    }
  });
});

describe('the rule the API gives for each action', () => {
  it('is taken as it is', () => {
    expect(ruleOf({ retry: { allowed: true } }, 'retry')).toEqual({ allowed: true });
    expect(ruleOf({ resolve: { allowed: true, outcomes: ['accrued'] } }, 'resolve')).toEqual({ allowed: true, outcomes: ['accrued'] });
    expect(ruleOf({ replay: { allowed: false, why: 'dead letter x was resolved at …' } }, 'replay')).toEqual({ allowed: false, why: 'dead letter x was resolved at …' });
  });

  it('is "not allowed", with why, for an action the API gave no rule for: never allowed by default', () => {
    const none = { allowed: false, why: NO_RULE };
    expect(ruleOf(undefined, 'retry')).toEqual(none);
    expect(ruleOf(null, 'retry')).toEqual(none);
    expect(ruleOf({}, 'retry')).toEqual(none);
    expect(ruleOf({ reverse: { allowed: true } }, 'retry')).toEqual(none);
    // Not a rule: no boolean `allowed`.
    expect(ruleOf({ retry: {} }, 'retry')).toEqual(none);
    expect(ruleOf({ retry: { allowed: 'yes' } }, 'retry')).toEqual(none);
    expect(ruleOf({ retry: null }, 'retry')).toEqual(none);
    // Only the answer's own fields: nothing inherited is a rule.
    expect(ruleOf({}, 'constructor')).toEqual(none);
  });
});

describe("the console's limits are the bridge's own", () => {
  it("refuses a bulk action over the bridge's own limit before asking to confirm it", () => {
    expect(CONSOLE_BULK_MAX).toBe(BULK_MAX);
  });
});
