/** checkStructure: the one pass over accepted JSON text that finds duplicate keys and hostile depth. */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { checkStructure, MAX_JSON_DEPTH, parseJsonBody, TOO_DEEP } from '../src/kernel/json-body.js';
import { ValidationError } from '../src/kernel/errors.js';

/** Depth as the old walk over the parsed value counted it. */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

describe('checkStructure', () => {
  it('finds nothing in any JSON.stringify output (it never repeats a key), whatever the strings hold', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.constantFrom(undefined, 1, '\t'), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        expect(checkStructure(text)).toBe(depthOf(value) > MAX_JSON_DEPTH ? TOO_DEEP : undefined);
      }),
      { numRuns: 2000 },
    );
  });

  it('finds a key given twice anywhere, and names its path', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.array(fc.oneof(fc.string(), fc.nat(3)), { maxLength: 4 }), fc.string(), fc.jsonValue({ maxDepth: 2 }), (filler, path, key, value) => {
        // An object holding `key` twice, nested along `path` (strings: object members, numbers: array slots).
        let text = `{"pad":${JSON.stringify(filler)},${JSON.stringify(key)}:${JSON.stringify(value)},${JSON.stringify(key)}:1}`;
        for (const step of [...path].reverse()) {
          text = typeof step === 'string' ? `{"pad":${JSON.stringify(filler)},${JSON.stringify(step === 'pad' ? 'pad2' : step)}:${text}}` : `[${Array.from({ length: step }, () => JSON.stringify(filler)).concat(text).join(',')}]`;
        }
        const joined = [...path.map((s) => (s === 'pad' ? 'pad2' : String(s))), key].join('.');
        expect(checkStructure(text)).toBe(joined.length > 200 ? `${joined.slice(0, 199)}…` : joined);
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    ['{"a":1,"a":2}', 'a'],
    ['{"a":1,"\\u0061":2}', 'a'],
    ['{"a\\\\":1,"a\\\\":2}', 'a\\'],
    ['{"a\\"":1,"a\\"":2}', 'a"'],
    ['{"x":"}{\\"","y":{"k":1,"k":2}}', 'y.k'],
    ['[{"k":1},{"k":1},{"j":1,"j":1}]', '2.j'],
    ['{"a":[],"b":{},"c":[{}],"a":1}', 'a'],
    ['{"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k10":1,"k3":1}', 'k3'],
  ])('%s → %s', (text, path) => {
    expect(checkStructure(text)).toBe(path);
  });

  it('accepts the same keys in sibling and nested objects', () => {
    expect(checkStructure('{"a":{"a":{"a":1}},"b":[{"a":1,"b":2},{"a":1,"b":2}],"c":"\\"a\\":1"}')).toBeUndefined();
  });

  it('stops at MAX_JSON_DEPTH', () => {
    expect(checkStructure(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`)).toBeUndefined();
    expect(checkStructure(`${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`)).toBe(TOO_DEEP);
  });
});

describe('parseJsonBody', () => {
  it('refuses duplicate keys with a ValidationError naming the path', () => {
    try {
      parseJsonBody(Buffer.from('{"total":"1","total":"1000"}'));
      throw new Error('accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues).toEqual([{ field: 'total', message: 'appears more than once' }]);
      expect((error as ValidationError).message).toBe('total: appears more than once');
    }
  });
});

describe('parseJsonBody: text no store can keep (docs/security.md, "Hostile input")', () => {
  /** The one issue a body is refused with, or undefined when it is accepted. */
  const issueOf = (text: string, options?: { refuseControls?: boolean }) => {
    try {
      parseJsonBody(Buffer.from(text), options);
      return undefined;
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues).toHaveLength(1);
      return (error as ValidationError).issues[0];
    }
  };
  const SURROGATE = 'must not contain a lone UTF-16 surrogate (\\ud800-\\udfff)';
  const SURROGATE_OR_CONTROL = 'must not contain a control character (NUL, C0 but tab and line breaks, DEL, C1) or a lone UTF-16 surrogate (\\ud800-\\udfff)';

  it.each([
    ['{"orderId":"\\ud800"}', 'orderId'],
    ['{"orderId":"A-\\udc00-1"}', 'orderId'],
    ['{"items":[{"id":"a"},{"id":"b","name":"x\\uDBFF"}]}', 'items.1.name'],
    ['{"a":{"b":["ok","\\udfff"]}}', 'a.b.1'],
    ['{"a":"\\udc00\\ud800"}', 'a'],
    ['["\\ud83d"]', '0'],
    ['"\\ud800"', ''],
  ])('a lone surrogate: %s → 400 naming %j', (text, field) => {
    expect(issueOf(text)).toEqual({ field, message: SURROGATE });
  });

  it('a key holding one is named in \\u notation, so that the message itself is storable', () => {
    const issue = issueOf('{"customer":{"na\\ud800me":"Ann"}}')!;
    expect(issue).toEqual({ field: 'customer.na\\ud800me', message: `(a key) ${SURROGATE}` });
    expect(isWellFormed(issue.field)).toBe(true);
  });

  it('a duplicate key holding one is named in \\u notation too', () => {
    expect(issueOf('{"\\ud800":1,"\\ud800":2}')).toEqual({ field: '\\ud800', message: 'appears more than once' });
  });

  it('surrogate pairs, written raw or escaped, are text like any other', () => {
    expect(issueOf('{"name":"Latte 😀","note":"\\ud83d\\ude00","\\ud83d\\ude00":1}')).toBeUndefined();
    expect(parseJsonBody(Buffer.from('{"n":"\\ud83d\\ude00"}'))).toEqual({ n: '😀' });
  });

  it('control characters: accepted in a POS body (its ids are refused by the adapters), refused where asked (admin bodies), naming the field, escaped or raw', () => {
    expect(issueOf('{"note":"a\\u0000b"}')).toBeUndefined();
    expect(issueOf('{"note":"a\u0085b"}')).toBeUndefined();
    const refuse = { refuseControls: true };
    expect(issueOf('{"note":"a\\u0000b"}', refuse)).toEqual({ field: 'note', message: SURROGATE_OR_CONTROL });
    expect(issueOf('{"ids":["x","\\u0000"]}', refuse)).toEqual({ field: 'ids.1', message: SURROGATE_OR_CONTROL });
    expect(issueOf('{"a\\u0000":1}', refuse)).toEqual({ field: 'a\\u0000', message: `(a key) ${SURROGATE_OR_CONTROL}` });
    // C0 (escaped: JSON allows none raw), DEL and C1 (escaped or raw, as UTF-8 carries them).
    for (const text of ['\\u0007', '\\u001b', '\\u007f', '\u007f', '\\u0085', '\u0085', '\u009b', '\\u009f']) {
      expect(issueOf(`{"reason":"x${text}y"}`, refuse)).toEqual({ field: 'reason', message: SURROGATE_OR_CONTROL });
    }
    expect(issueOf('{"k\u009b":1}', refuse)).toEqual({ field: 'k\\u009b', message: `(a key) ${SURROGATE_OR_CONTROL}` });
    // Tab and line breaks are text a reason may hold; U+00A0 and later are not controls.
    expect(issueOf('{"reason":"line one\\nline two\\r\\n\\tthree \u00a0é"}', refuse)).toBeUndefined();
  });

  it('an escaped backslash followed by u is not an escape: "\\\\ud800" is six characters of text', () => {
    expect(parseJsonBody(Buffer.from('{"a":"\\\\ud800","b":"\\\\u0000"}'), { refuseControls: true })).toEqual({ a: '\\ud800', b: '\\u0000' });
  });

  it('any JSON value, its strings of any UTF-16 code units: refused exactly when a string (key or value) holds a lone surrogate', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }), (value) => {
        // JSON.stringify writes a lone surrogate as a \u escape, as a hostile client would.
        expect(issueOf(JSON.stringify(value)) !== undefined).toBe(hasLoneSurrogate(value));
      }),
      { numRuns: 1000 },
    );
  });
});

/** Whether a string is well-formed UTF-16: every surrogate in a pair (String.prototype.isWellFormed, spelled out for the ES2022 library). */
function isWellFormed(text: string): boolean {
  try {
    encodeURIComponent(text); // throws URIError on a lone surrogate
    return true;
  } catch {
    return false;
  }
}

/** Whether any string (key or value) of a parsed JSON value holds a lone surrogate: what the parser must refuse. */
function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return !isWellFormed(value);
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  if (value && typeof value === 'object') return Object.entries(value).some(([k, v]) => !isWellFormed(k) || hasLoneSurrogate(v));
  return false;
}
