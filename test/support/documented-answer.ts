/**
 * The answers the README writes after its commands (`# {"status":"accrued",…}`), read as patterns
 * an actual answer is checked against, so the documented answers cannot drift from the real ones.
 *
 * A documented answer is JSON in which `…` (or `...`) stands for what the reader's run makes or
 * what the README leaves out:
 * - inside a string (a value or a key), for any text of one character or more (`"square:MISSED-…"`);
 * - as a member of an object (`{"status":"accrued",…}`), for any other members: without one, the
 *   object has exactly the members written;
 * - as an item of an array (`[…,{"event":…}]`), for any other items: each item written matches one
 *   of the answer's; without one, the array has exactly the items written, in order;
 * - as a value (`"results":…`), for any value.
 */

export type DocumentedAnswer =
  | { kind: 'any' }
  | { kind: 'text'; text: string }
  | { kind: 'literal'; value: number | boolean | null }
  | { kind: 'object'; members: [key: string, value: DocumentedAnswer][]; open: boolean }
  | { kind: 'array'; items: DocumentedAnswer[]; open: boolean };

const ELLIPSES = ['…', '...'];

/** Reads a documented answer; a malformed one throws, naming where. */
export function parseDocumentedAnswer(text: string): DocumentedAnswer {
  let at = 0;
  const fail = (expected: string): never => {
    throw new Error(`documented answer: ${expected} expected at ${at}: ${JSON.stringify(text.slice(at, at + 40))} in ${text}`);
  };
  const skipSpace = () => {
    while (/\s/.test(text[at] ?? '')) at++;
  };
  const ellipsis = (): boolean => {
    skipSpace();
    const found = ELLIPSES.find((e) => text.startsWith(e, at));
    if (found) at += found.length;
    return Boolean(found);
  };
  const string = (): string => {
    skipSpace();
    const token = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(at))?.[0] ?? fail('a string');
    at += token.length;
    return JSON.parse(token);
  };
  /** The items of `{…}` or `[…]` up to `close`, and whether a `…` item left it open. */
  const list = <T>(close: string, item: () => T): { items: T[]; open: boolean } => {
    at++;
    const items: T[] = [];
    let open = false;
    skipSpace();
    if (text[at] === close) {
      at++;
      return { items, open };
    }
    for (;;) {
      if (ellipsis()) open = true;
      else items.push(item());
      skipSpace();
      if (text[at] === ',') at++;
      else if (text[at] === close) {
        at++;
        return { items, open };
      } else fail(`"," or "${close}"`);
    }
  };
  const value = (): DocumentedAnswer => {
    if (ellipsis()) return { kind: 'any' };
    const next = text[at];
    if (next === '{') {
      const { items, open } = list('}', () => {
        const key = string();
        skipSpace();
        if (text[at] !== ':') fail('":"');
        at++;
        return [key, value()] as [string, DocumentedAnswer];
      });
      return { kind: 'object', members: items, open };
    }
    if (next === '[') {
      const { items, open } = list(']', value);
      return { kind: 'array', items, open };
    }
    if (next === '"') return { kind: 'text', text: string() };
    const literal = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(at))?.[0] ?? fail('a value');
    at += literal.length;
    return { kind: 'literal', value: JSON.parse(literal) };
  };
  const answer = value();
  skipSpace();
  if (at !== text.length) fail('the end');
  return answer;
}

/** A documented string as a pattern: each `…` stands for one character or more. */
function textPattern(text: string): RegExp {
  const escape = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${text.split(/…|\.\.\./).map(escape).join('.+')}$`, 's');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Where `actual` differs from what the README documents, one line each, by JSON path; [] when it matches. */
export function answerMismatches(actual: unknown, documented: DocumentedAnswer, path = '$'): string[] {
  const shown = (value: unknown) => JSON.stringify(value)?.slice(0, 200);
  switch (documented.kind) {
    case 'any':
      return [];
    case 'literal':
      return actual === documented.value ? [] : [`${path}: documented ${shown(documented.value)}, got ${shown(actual)}`];
    case 'text':
      return typeof actual === 'string' && textPattern(documented.text).test(actual) ? [] : [`${path}: documented ${shown(documented.text)}, got ${shown(actual)}`];
    case 'array': {
      if (!Array.isArray(actual)) return [`${path}: documented an array, got ${shown(actual)}`];
      if (documented.open) {
        return documented.items.flatMap((item, i) => (actual.some((a) => answerMismatches(a, item).length === 0) ? [] : [`${path}: no item matches documented item ${i}`]));
      }
      if (actual.length !== documented.items.length) return [`${path}: documented ${documented.items.length} items, got ${actual.length}: ${shown(actual)}`];
      return documented.items.flatMap((item, i) => answerMismatches(actual[i], item, `${path}[${i}]`));
    }
    case 'object': {
      if (!isObject(actual)) return [`${path}: documented an object, got ${shown(actual)}`];
      const used = new Set<string>();
      const problems = documented.members.flatMap(([key, item]) => {
        const pattern = textPattern(key);
        const candidates = Object.keys(actual).filter((k) => pattern.test(k));
        // A key with `…` may name several (square:MISSED-1 and square:MISSED-1~r1): the one whose value matches.
        const match = candidates.find((k) => !used.has(k) && answerMismatches(actual[k], item).length === 0);
        if (match !== undefined) {
          used.add(match);
          return [];
        }
        if (candidates.length === 1) return answerMismatches(actual[candidates[0]!], item, `${path}.${candidates[0]}`);
        return [candidates.length ? `${path}: no key like ${shown(key)} has the documented value` : `${path}: documented ${shown(key)}, absent`];
      });
      const extra = documented.open ? [] : Object.keys(actual).filter((k) => !documented.members.some(([key]) => textPattern(key).test(k)));
      return [...problems, ...extra.map((k) => `${path}: ${shown(k)} is not documented (no "…" member)`)];
    }
  }
}
