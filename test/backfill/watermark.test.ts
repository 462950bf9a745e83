/**
 * How a complete pass moves an account's watermark (src/backfill/poller.ts `advanced`): to the
 * window's end when nothing between the watermark and the window is left unread, never back.
 */
import { describe, expect, it } from '@jest/globals';
import { advanced } from '../../src/backfill/poller.js';

const at = (hour: number) => new Date(Date.UTC(2026, 2, 1, hour)).toISOString();

describe('the watermark after a complete pass', () => {
  it('is the window end for an account never read before', () => {
    expect(advanced(undefined, at(5), at(9))).toBe(at(9));
  });

  it('moves to the window end when the window starts at or before it (the overlap)', () => {
    expect(advanced(at(8), at(5), at(10))).toBe(at(10));
    expect(advanced(at(8), at(8), at(10))).toBe(at(10));
  });

  it('stays when the window starts after it: the stretch between them was not read', () => {
    expect(advanced(at(8), at(9), at(12))).toBe(at(8));
  });

  it('never moves back (a pass over an older window)', () => {
    expect(advanced(at(8), at(1), at(3))).toBe(at(8));
  });
});
