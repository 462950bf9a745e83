/**
 * What `/openapi.json` states of an input beyond the JSON Schema zod writes for it, read from the
 * parsers themselves, so that a request valid by the document is not refused for a reason the
 * document could have stated:
 * - a refinement zod cannot translate, recognised by the function it runs (`isIsoCurrency`: the
 *   `Currency` enum);
 * - a decimal given as text or a number, converted by a transform (money) or checked by one
 *   (quantities): what it accepts is asked of the schema itself, and stated as a pattern and bounds;
 * - text that is trimmed before its length is checked, or that refuses control characters, asked
 *   the same way;
 * - what every `/v1/admin` request is checked for before its route reads it (`adminInput`): no
 *   control character in a query value, no NUL in a body.
 * And what zod writes that says nothing: the 200-character calendar pattern beside `format: date`
 * (the format says it), and ±(2^53 − 1) on every integer.
 */
import { z } from 'zod';
import { CURRENCY_EXPONENTS, isIsoCurrency } from '../kernel/currencies.js';
import { MAX_AMOUNT_TEXT_LENGTH } from '../kernel/money.js';
import { CONTROL_CLASS } from './body.js';

export type JsonSchema = Record<string, unknown>;

/** Every ISO 4217 code the bridge converts money of (currencies.ts): the document's `Currency`. */
export const Currency = z.enum([...CURRENCY_EXPONENTS.keys()] as [string, ...string[]]).meta({ description: 'An ISO 4217 code in capitals, e.g. USD; one the bridge knows the minor unit of.' });

/**
 * Money in major units as text: digits, an optional fraction; at most 13 digits before the point,
 * so that the cents are always sent exactly (the parser also reads exponents and leading zeros
 * past that, which no POS sends: money.ts). As a JSON number: from 0 up to, not including, 10^13.
 */
export const AMOUNT_TEXT = '^[0-9]{1,13}(?:\\.[0-9]+)?$';
const AMOUNT_BELOW = 10_000_000_000_000;
/** A quantity greater than 0 as text: a whole number of at most 9 digits with at most 9 decimals, or a fraction of one. */
export const QUANTITY_TEXT = '^(?:[1-9][0-9]{0,8}(?:\\.[0-9]{1,9})?|0\\.[0-9]{0,8}[1-9])$';
const QUANTITY_BELOW = 1_000_000_000;

/** The one character no admin body may hold (PostgreSQL text cannot). */
const NUL_CLASS = '\\u0000';

/** Where an input is read: what the checks in front of its route refuse besides its schema. */
export type InputContext = 'plain' | 'admin query' | 'admin body';

const ZOD_DATE = z.iso.date()._zod.def.pattern?.source.slice(1, -1);

/** Marks, on a JSON Schema node, text rules found here; `statedText` makes them a pattern once the node's context is known. */
const TEXT_RULES = 'x-text-rules';
interface TextRules {
  nonBlank?: true;
  noControls?: true;
}

type ZodNode = z.core.$ZodType;

/** `z.toJSONSchema`'s `override`: called on every node zod writes. */
export function precise(ctx: { zodSchema: ZodNode; jsonSchema: JsonSchema }): void {
  const json = ctx.jsonSchema;
  const def = ctx.zodSchema._zod.def as { type: string; checks?: { _zod: { def: { check: string; fn?: unknown } } }[]; format?: string; in?: ZodNode };
  if (json.minimum === Number.MIN_SAFE_INTEGER) delete json.minimum;
  if (json.maximum === Number.MAX_SAFE_INTEGER) delete json.maximum;
  if (json.format === 'date' && def.format === 'date') delete json.pattern;
  // zod's date-time pattern holds the calendar (what the format says) and the time as zod reads it (upper-case T and Z, seconds, an offset): only the latter is kept.
  if (json.format === 'date-time' && def.format === 'datetime' && typeof json.pattern === 'string' && ZOD_DATE) json.pattern = json.pattern.replace(ZOD_DATE, '\\d{4}-\\d{2}-\\d{2}');
  const custom = def.checks?.filter((c) => c._zod.def.check === 'custom' || c._zod.def.check === 'overwrite') ?? [];
  if (def.type === 'string' && custom.some((c) => c._zod.def.fn === isIsoCurrency)) {
    for (const key of Object.keys(json)) if (key !== 'description') delete json[key];
    json.$ref = '#/components/schemas/Currency';
    return;
  }
  const schema = ctx.zodSchema as z.ZodType;
  if ((def.type === 'union' && custom.length > 0 && isStringOrNumber(ctx.zodSchema)) || (def.type === 'pipe' && def.in && isStringOrNumber(def.in))) {
    Object.assign(json, decimalForm(schema));
    return;
  }
  if (def.type === 'string' && custom.length > 0 && json.pattern === undefined && json.format === undefined) {
    const rules = textRules(schema);
    if (rules.nonBlank || rules.noControls) json[TEXT_RULES] = rules;
  }
}

function isStringOrNumber(node: ZodNode): boolean {
  const def = node._zod.def as { type: string; options?: ZodNode[] };
  const types = def.type === 'union' ? def.options!.map((o) => o._zod.def.type).sort() : [];
  return types.length === 2 && types[0] === 'number' && types[1] === 'string';
}

const accepts = (schema: z.ZodType, value: unknown) => schema.safeParse(value).success;

/**
 * A decimal as text or a number, stated as the schema parses it: money (0 and more) or a quantity
 * (more than 0), each in the plain form every POS sends. Nothing is stated of a form it reads otherwise.
 */
function decimalForm(schema: z.ZodType): JsonSchema {
  const decimal = accepts(schema, '1.5') && accepts(schema, 2) && !accepts(schema, '-1') && !accepts(schema, -1) && !accepts(schema, '1,5') && !accepts(schema, ' 1');
  if (!decimal) return {};
  if (accepts(schema, '0') && accepts(schema, 0)) return { pattern: AMOUNT_TEXT, maxLength: MAX_AMOUNT_TEXT_LENGTH, minimum: 0, exclusiveMaximum: AMOUNT_BELOW };
  if (!accepts(schema, '0') && !accepts(schema, 0) && accepts(schema, '0.5')) return { pattern: QUANTITY_TEXT, exclusiveMinimum: 0, exclusiveMaximum: QUANTITY_BELOW };
  return {};
}

/** Text trimmed before its length is checked needs a character that is not white space; and some text refuses control characters. */
function textRules(schema: z.ZodType): TextRules {
  if (!accepts(schema, 'a')) return {};
  return {
    ...(!accepts(schema, ' ') && accepts(schema, ' a ') ? { nonBlank: true as const } : {}),
    ...(['a\u0001', 'a\u007f', 'a\u0085'].every((text) => !accepts(schema, text)) ? { noControls: true as const } : {}),
  };
}

/**
 * Turns the text rules found on each node under `schema` (not through `$ref`s) into its pattern,
 * with what the node's context refuses besides: every free text (no pattern, format, enum or const
 * of its own) of an admin query or body. Changes `schema` in place.
 */
export function statedText(schema: unknown, context: InputContext): void {
  if (Array.isArray(schema)) return schema.forEach((item) => statedText(item, context));
  if (!schema || typeof schema !== 'object') return;
  const node = schema as JsonSchema;
  const rules = (node[TEXT_RULES] ?? {}) as TextRules;
  delete node[TEXT_RULES];
  const isText = node.type === 'string' && node.pattern === undefined && node.format === undefined && node.enum === undefined && node.const === undefined;
  if (isText) {
    const excluded = context === 'admin query' || rules.noControls ? CONTROL_CLASS : context === 'admin body' ? NUL_CLASS : '';
    const pattern = excluded ? (rules.nonBlank ? `^[^${excluded}]*[^\\s${excluded}][^${excluded}]*$` : `^[^${excluded}]*$`) : rules.nonBlank ? '\\S' : undefined;
    if (pattern) node.pattern = pattern;
  }
  for (const [key, value] of Object.entries(node)) if (key !== 'enum' && key !== 'const' && key !== 'examples') statedText(value, context);
}

/** An answer's schema: what the bridge sends needs no pattern beside `format: date-time` to be read. Changes `schema` in place. */
export function answerSide(schema: unknown): void {
  if (Array.isArray(schema)) return schema.forEach(answerSide);
  if (!schema || typeof schema !== 'object') return;
  const node = schema as JsonSchema;
  if (node.format === 'date-time') delete node.pattern;
  delete node[TEXT_RULES];
  for (const [key, value] of Object.entries(node)) if (key !== 'enum' && key !== 'const' && key !== 'examples') answerSide(value);
}
