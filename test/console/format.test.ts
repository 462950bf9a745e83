/**
 * The console's formatting of money, ages and contact details (src/console/js/dom.js): the page
 * shows integer cents as decimals without rounding, and masks customers' phone numbers and emails.
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
import { age, majorMoney, maskContact, money, prose, statusLabel } from '../../src/console/js/dom.js';
// @ts-expect-error: the console's own ES module.
import { differenceLabel, ledgerStatuses, listingPosNames, posNames, statusWords, useVocabulary, webhookPosNames } from '../../src/console/js/vocabulary.js';
import { DIFFERENCE_KINDS, DIFFERENCE_LABELS } from '../../src/reconcile/classify.js';
// @ts-expect-error: the console's own ES module.
import { NO_RULE, ruleOf } from '../../src/console/js/actions.js';
// @ts-expect-error: the console's own ES module.
import { BULK_MAX as CONSOLE_BULK_MAX } from '../../src/console/js/views/search.js';
import { BULK_MAX } from '../../src/http/routes/admin.js';
import { CONSOLE_DIR, CONSOLE_HEADERS, consoleRoutes, type ConsoleVocabulary } from '../../src/http/routes/console.js';
import { POS_NAMES, VENDOR_POS_NAMES } from '../../src/pos/contract.js';
import { LEDGER_STATUSES } from '../../src/state/record.js';
import { STATUS_DESCRIPTIONS, STATUS_LABELS } from '../../src/ledger/status-words.js';

describe('money', () => {
  it.each([
    [5997, 'USD', '59.97 USD'],
    [5, 'USD', '0.05 USD'],
    [100, 'JPY', '1.00 JPY'],
    [-1999, 'EUR', '−19.99 EUR'],
    [0, undefined, '0.00'],
    // Past what a double holds in cents after a division: computed on integers, exact.
    [900719925474099, 'USD', '9007199254740.99 USD'],
  ])('%p cents in %p is %p', (cents, currency, text) => {
    expect(money(cents, currency)).toBe(text);
  });

  it('shows nothing for what is not a whole number of cents', () => {
    expect(money(12.5, 'USD')).toBe('');
    expect(money(undefined, 'USD')).toBe('');
  });
});

describe('majorMoney', () => {
  it("shows the loyalty history's decimal sums as money, rounded to the cent once", () => {
    expect(majorMoney(-8.4, 'USD')).toBe('−8.40 USD');
    expect(majorMoney(59.97, 'USD')).toBe('59.97 USD');
    expect(majorMoney(0.1 + 0.2, 'EUR')).toBe('0.30 EUR');
    expect(majorMoney(undefined, 'USD')).toBe('');
    expect(majorMoney(null, 'USD')).toBe('');
  });
});

describe('prose', () => {
  it("writes the API's counts of cents as money, with the record's currency or without one", () => {
    expect(prose('partial refund RP-1 of 1999 cents: the remaining 3998 cents as generic:P-1~r1', 'USD')).toEqual(['partial refund RP-1 of ', '19.99 USD', ': the remaining ', '39.98 USD', ' as generic:P-1~r1']);
    expect(prose('so 1101 cents of the 5666-cent Check, pro rata', 'USD')).toEqual(['so ', '11.01 USD', ' of the ', '56.66 USD', ' Check, pro rata']);
    expect(prose('1 cent', 'EUR')).toEqual(['0.01 EUR']);
    // The attention queue names no currency: the amounts alone, the one it is compared with too.
    expect(prose('delivered again with another amount (latest 999 cents, recorded 5997; 1 such deliveries in all)')).toEqual(['delivered again with another amount (latest ', '9.99', ', recorded ', '59.97', '; 1 such deliveries in all)']);
    // Anything else stays as it is: ids with digits, a count of records, a reversal in major units.
    expect(prose('operation 5 on card 21-100003-4, a reversal of -59.97, 3 records', 'USD')).toEqual(['operation 5 on card 21-100003-4, a reversal of -59.97, 3 records']);
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

describe('maskContact', () => {
  it('keeps the last four digits of a phone number and the domain of an email', () => {
    expect(maskContact('+15550003333', 'phone')).toBe('••••••3333');
    expect(maskContact('ann.lee@example.test', 'email')).toBe('••••••e@example.test');
    // At most half is shown: a one-letter name is not shown at all.
    expect(maskContact('a@b.test', 'email')).toBe('•@b.test');
    expect(maskContact('12', 'card')).toBe('•2');
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
