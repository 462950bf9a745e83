/**
 * A body's bytes as JSON: valid UTF-8, valid JSON, no deeper than MAX_JSON_DEPTH (hostile nesting
 * cannot exhaust the stack of whatever walks it later), no key twice in one object
 * (`{"total":"1","total":"1000"}` would silently take the last), and no string (key or value) that
 * holds a lone UTF-16 surrogate. Used by the HTTP routes (POS and admin bodies) and by webhook
 * intake, which must parse the exact bytes their signature covers; neutral of all three.
 */
import { echoed, ValidationError } from './errors.js';

export const MAX_JSON_DEPTH = 32;
const utf8 = new TextDecoder('utf-8', { fatal: true });

export interface JsonBodyOptions {
  /**
   * Refuse control characters in any string as well: NUL, the other C0 controls but tab and line
   * breaks, DEL and the C1 controls (U+0080–U+009F). Admin bodies do: what they carry is ids looked
   * up in the store and reasons kept in the audit trail and shown to people (PostgreSQL text cannot
   * hold NUL; a C1 control such as CSI can steer a terminal that shows an exported trail), as admin
   * queries and paths refuse them. POS bodies do not: their ids are refused with any control
   * character by the adapters, and the stores keep free text with NUL (PostgreSQL as U+FFFD).
   */
  refuseControls?: boolean;
}

export function parseJsonBody(raw: Buffer | undefined, options: JsonBodyOptions = {}): unknown {
  if (!raw || raw.length === 0) throw ValidationError.field('', 'body is empty; a JSON object is required');
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw ValidationError.field('', 'body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw ValidationError.field('', `body is not valid JSON: ${(error as Error).message.slice(0, 120)}`);
  }
  const problem = checkStructure(text);
  if (problem === TOO_DEEP) throw ValidationError.field('', `body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (problem !== undefined) throw ValidationError.field(problem, 'appears more than once');
  // Valid UTF-8 cannot encode a surrogate, and JSON allows no raw C0 control in a string: both can
  // only come as a \u escape, so a body without one needs no walk; DEL and C1 controls may come raw.
  const refuseControls = options.refuseControls === true;
  if (text.includes('\\u') || (refuseControls && RAW_CONTROL.test(text))) {
    const unstorable = unstorableString(value, [], refuseControls);
    if (unstorable) throw ValidationError.field(unstorable.field, unstorable.message);
  }
  return value;
}

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Control characters an admin body may not hold: C0 but tab, line feed and carriage return; DEL; C1. */
const CONTROL = String.raw`[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]`;
const LONE_SURROGATE_OR_CONTROL = new RegExp(`${LONE_SURROGATE.source}|${CONTROL}`);
/** The controls that can stand in JSON text unescaped. */
const RAW_CONTROL = /[\u007F-\u009F]/;

/**
 * The first string (a key or a value) holding a lone UTF-16 surrogate (`"\ud800"`), or a control
 * character when `refuseControls`: its path, dotted as the other issues' (`items.0.name`), and why. JSON.parse accepts a
 * lone surrogate, but it is no Unicode text: PostgreSQL's jsonb refuses it ("invalid input syntax
 * for type json"), so the same order was a 500 there and recorded on the file ledger
 * (docs/security.md, "Hostile input"); every store now answers 400. The path names a key with
 * such a character in \u notation, never the character itself: the message may be kept (a dead
 * letter's reason), and must be storable too.
 */
function unstorableString(value: unknown, path: string[], refuseControls: boolean): { field: string; message: string } | undefined {
  const bad = refuseControls ? LONE_SURROGATE_OR_CONTROL : LONE_SURROGATE;
  const message = `must not contain ${refuseControls ? 'a control character (NUL, C0 but tab and line breaks, DEL, C1) or ' : ''}a lone UTF-16 surrogate (\\ud800-\\udfff)`;
  if (typeof value === 'string') return bad.test(value) ? { field: fieldPath(path), message } : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableString(value[i], [...path, String(i)], refuseControls);
      if (found) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, member] of Object.entries(value)) {
      if (bad.test(key)) return { field: fieldPath([...path, key]), message: `(a key) ${message}` };
      const found = unstorableString(member, [...path, key], refuseControls);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * A path as an issue names it: dotted, cut at MAX_PATH_TEXT, every surrogate and control character
 * of its keys in \u notation, so that the message itself is storable anywhere (a dead letter keeps it).
 */
function fieldPath(path: readonly string[]): string {
  return echoed(path.join('.').replace(/[\uD800-\uDFFF\u0000-\u001F\u007F-\u009F]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`), MAX_PATH_TEXT);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
export const TOO_DEEP = Symbol('nested deeper than MAX_JSON_DEPTH');
/** Keys of one object kept in an array up to this many (a few compares beat hashing), then a Set. */
const SMALL_OBJECT = 8;
/** Characters of a duplicate key's path named in the error (a key can be as long as the body). */
const MAX_PATH_TEXT = 200;

/** One open object (`keys`, its latest `key`) or array (`index` of the element being read). */
interface Frame {
  keys?: string[] | Set<string>;
  key: string;
  index: number;
}

/**
 * One pass over text JSON.parse has just accepted: TOO_DEEP when it nests deeper than MAX_JSON_DEPTH
 * (hostile nesting would exhaust the stack of whatever walks the value later), else the path of the
 * first key that appears twice in one object, else undefined. JSON.parse silently keeps the last of
 * duplicate names (RFC 8259 §4 leaves their meaning to each parser), so
 * `{"total":"1","total":"1000"}` would accrue 1000 where a POS, a proxy or a log reader may have
 * seen 1: such a body is refused instead. Keys are compared decoded (`"\u0074otal"` is `total`).
 * Being valid JSON, the text needs no checking here: outside strings only the brackets, commas and
 * the quotes opening a key matter, and strings are skipped with indexOf. It is on the checkout's hot
 * path: about 3 µs for a 2 kB checkout (`node dist/bench/json-keys.js`).
 */
export function checkStructure(text: string): string | typeof TOO_DEEP | undefined {
  const frames: Frame[] = [];
  let expectKey = false;
  for (let i = 0, n = text.length; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = closingQuote(text, i);
      if (expectKey) {
        const frame = frames[frames.length - 1]!;
        let key = text.slice(i + 1, end);
        if (key.includes('\\')) key = JSON.parse(text.slice(i, end + 1)) as string;
        if (!remember(frame, key)) return pathOf(frames, key);
        frame.key = key;
        expectKey = false;
      }
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (frames.length === MAX_JSON_DEPTH) return TOO_DEEP;
      frames.push(c === OPEN_OBJECT ? { keys: [], key: '', index: 0 } : { key: '', index: 0 });
      expectKey = c === OPEN_OBJECT;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      frames.pop();
      expectKey = false;
    } else if (c === COMMA) {
      const frame = frames[frames.length - 1]!;
      if (frame.keys) expectKey = true;
      else frame.index++;
    }
  }
  return undefined;
}

/** The index of the quote closing the string opened at `open`: the first one not escaped. */
function closingQuote(text: string, open: number): number {
  let end = text.indexOf('"', open + 1);
  while (text.charCodeAt(end - 1) === BACKSLASH) {
    let first = end - 1;
    while (text.charCodeAt(first - 1) === BACKSLASH) first--;
    if ((end - first) % 2 === 0) break; // an even run of backslashes escapes itself, not the quote
    end = text.indexOf('"', end + 1);
  }
  return end;
}

/** Adds `key` to the object's keys; false when it was there already. */
function remember(frame: Frame, key: string): boolean {
  const keys = frame.keys!;
  if (Array.isArray(keys)) {
    if (keys.includes(key)) return false;
    keys.push(key);
    if (keys.length > SMALL_OBJECT) frame.keys = new Set(keys);
    return true;
  }
  if (keys.has(key)) return false;
  keys.add(key);
  return true;
}

function pathOf(frames: Frame[], key: string): string {
  return fieldPath([...frames.slice(0, -1).map((f) => (f.keys ? f.key : String(f.index))), key]);
}
