import { describe, expect, it } from '@jest/globals';
import { sameSecret, secretMatcher } from '../src/kernel/constant-time.js';

describe('comparing secrets in constant time', () => {
  it('answers exactly equal text the same, and anything else not: another length, the last character, case, nothing', () => {
    for (const compare of [sameSecret, (given: string, expected: string) => secretMatcher(expected)(given)]) {
      expect(compare('pos_a-0123456789abcdef', 'pos_a-0123456789abcdef')).toBe(true);
      expect(compare('', '')).toBe(true);
      expect(compare('pos_a-0123456789abcdef', 'pos_a-0123456789abcdeg')).toBe(false);
      expect(compare('pos_a-0123456789abcdef', 'pos_a-0123456789abcde')).toBe(false);
      expect(compare('pos_a-0123456789abcdef', 'POS_A-0123456789ABCDEF')).toBe(false);
      expect(compare('', 'pos_a')).toBe(false);
      expect(compare('pos_a', '')).toBe(false);
      // Text compared as UTF-8: one code point is not its look-alike.
      expect(compare('caf\u00e9', 'cafe\u0301')).toBe(false);
    }
  });
});
