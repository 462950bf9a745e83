/** checkStructure: the one pass over accepted JSON text that finds duplicate keys and hostile depth. */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { checkStructure, MAX_JSON_DEPTH, parseJsonBody, TOO_DEEP } from '../src/json-body.js';
import { ValidationError } from '../src/errors.js';

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
