/** Validation errors in words: what is missing or wrong, said of the field, never the validator's own text. */
import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { GenericCheckout, GenericRefund } from '../adapters/generic/schema.js';
import { parseWith } from '../src/kernel/validation.js';
import { validationIssues } from './support/validation.js';

const issuesOf = (schema: z.ZodType, input: unknown) => validationIssues(() => parseWith(schema, input));
const messageOf = (schema: z.ZodType, input: unknown) => {
  const issues = issuesOf(schema, input);
  expect(issues).toHaveLength(1);
  return issues[0]!.message;
};

describe('each zod issue code in words', () => {
  it.each<[string, z.ZodType, unknown, string]>([
    ['a missing field', z.object({ a: z.string() }), {}, 'is required'],
    ['a wrong type', z.object({ a: z.string() }), { a: 5 }, 'must be a string, got a number'],
    ['a fraction where a whole number is wanted', z.object({ a: z.number().int() }), { a: 1.5 }, 'must be a whole number, got 1.5'],
    ['text where true or false is wanted', z.object({ a: z.boolean() }), { a: 'yes' }, 'must be true or false, got a string'],
    ['null where an object is wanted', z.object({ a: z.object({}) }), { a: null }, 'must be an object, got null'],
    ['an empty string', z.object({ a: z.string().min(1) }), { a: '' }, 'must not be empty'],
    ['a short string', z.object({ a: z.string().min(3) }), { a: 'ab' }, 'must be at least 3 characters'],
    ['a long string', z.object({ a: z.string().max(3) }), { a: 'abcd' }, 'must be at most 3 characters'],
    ['an empty array', z.object({ a: z.array(z.string()).min(1) }), { a: [] }, 'must have at least one item'],
    ['a long array', z.object({ a: z.array(z.string()).max(2) }), { a: ['1', '2', '3'] }, 'must have at most 2 items'],
    ['a number below its minimum', z.object({ a: z.number().min(1) }), { a: 0 }, 'must be at least 1'],
    ['a number not above an exclusive minimum', z.object({ a: z.number().positive() }), { a: 0 }, 'must be greater than 0'],
    ['a number above its maximum', z.object({ a: z.number().max(500) }), { a: 501 }, 'must be at most 500'],
    ['a value outside an enum', z.object({ a: z.enum(['accrued', 'not_accrued']) }), { a: 'maybe' }, 'must be one of "accrued", "not_accrued"'],
    ['a wrong literal', z.object({ a: z.literal('x') }), { a: 'y' }, 'must be "x"'],
    ['a date-time that is not one', z.object({ a: z.iso.datetime({ offset: true }) }), { a: 'yesterday' }, 'must be an ISO 8601 date-time such as 2026-11-21T10:20:00Z'],
    ['an email that is not one', z.object({ a: z.email() }), { a: 'x' }, 'must be an email address'],
    ['text against a pattern', z.object({ a: z.string().regex(/^[A-Z]{3}$/) }), { a: 'usd' }, 'must match the pattern /^[A-Z]{3}$/'],
    ['a union of plain types', z.object({ a: z.union([z.string(), z.number()]) }), { a: true }, 'must be a string or a number, got true'],
    ['a query number that is not one', z.object({ a: z.coerce.number() }), { a: 'abc' }, 'must be a number'],
    ['a refinement without a message', z.object({ a: z.string().refine(() => false) }), { a: 'x' }, 'is not valid'],
  ])('%s', (_name, schema, input, message) => {
    expect(messageOf(schema, input)).toBe(message);
  });

  it('a tagged union names the tags it knows, on the tag', () => {
    const schema = z.object({ a: z.discriminatedUnion('kind', [z.object({ kind: z.literal('checkout') }), z.object({ kind: z.literal('refund') })]) });
    expect(issuesOf(schema, { a: { kind: 'void' } })).toEqual([{ field: 'a.kind', message: 'must be one of "checkout", "refund"' }]);
  });

  it('an unknown field is named, on the object that holds it', () => {
    expect(issuesOf(z.strictObject({ customer: z.strictObject({ phone: z.string() }) }), { customer: { phone: '1', nickname: 'x' } })).toEqual([{ field: 'customer', message: 'unknown field "nickname"' }]);
    expect(messageOf(z.strictObject({}), { a: 1, b: 2 })).toBe('unknown fields "a", "b"');
  });

  it("a schema's own message wins; a missing field still says it is required, with what to send", () => {
    const schema = z.object({ currency: z.string({ error: 'must be an ISO 4217 code' }), kind: z.string({ error: 'the kind of event' }) });
    expect(issuesOf(schema, { currency: 1, kind: 2 })).toEqual([
      { field: 'currency', message: 'must be an ISO 4217 code' },
      { field: 'kind', message: 'the kind of event' },
    ]);
    expect(issuesOf(schema, {})).toEqual([
      { field: 'currency', message: 'is required: an ISO 4217 code' },
      { field: 'kind', message: 'is required' },
    ]);
  });

  it('never echoes text the sender sent (it can be a phone number or an email)', () => {
    const issues = issuesOf(z.object({ phone: z.number(), email: z.email() }), { phone: '+15550001111', email: 'ann@example' });
    expect(JSON.stringify(issues)).not.toMatch(/5550001111|ann@/);
  });
});

describe('the generic payload', () => {
  it('names what a bare checkout lacks (not its currency: the merchant\'s is taken)', () => {
    expect(issuesOf(GenericCheckout, {})).toEqual([
      { field: 'orderId', message: 'is required' },
      { field: 'total', message: 'is required: a decimal amount (string or number)' },
    ]);
  });

  it('says what each wrong field should be', () => {
    expect(issuesOf(GenericCheckout, { orderId: 7, currency: 'USD', total: '1', customer: { phone: 15550001111 }, items: [{ id: 'a', quantity: 1, colour: 'red' }] })).toEqual([
      { field: 'orderId', message: 'must be a string, got a number' },
      { field: 'customer.phone', message: 'must be a string, got a number' },
      { field: 'items.0', message: 'unknown field "colour"' },
    ]);
  });

  it('a refund line with a fractional quantity and no total', () => {
    expect(issuesOf(GenericRefund, { orderId: 'A-1', refundId: 'R-1', items: [{ id: 'sku-1', quantity: 1.5 }] })).toEqual([
      { field: 'items.0.quantity', message: 'must be a whole number' },
      { field: 'items.0.total', message: 'is required: a decimal amount (string or number)' },
    ]);
  });
});
