/** The reconcile command's status line: redrawn in place on a terminal, plain spaced lines elsewhere, the last always shown. */
import { describe, expect, it } from '@jest/globals';
import { StatusLine } from '../../scripts/cli.js';

function stream(isTTY: boolean) {
  const written: string[] = [];
  return { written, isTTY, write: (chunk: string) => void written.push(chunk) };
}

describe('StatusLine', () => {
  it('on a terminal: redraws one line at most every interval, and ends it when finished', () => {
    let now = 0;
    const out = stream(true);
    const line = new StatusLine({ stream: out, intervalMs: 100, now: () => now });
    line.update('history: pass 1, 1 pages read');
    now = 50;
    line.update('history: pass 1, 2 pages read');
    now = 150;
    line.update('history: pass 1, 3 pages read');
    now = 160;
    line.update('done');
    line.finish();
    line.finish();
    expect(out.written).toEqual(['\rhistory: pass 1, 1 pages read\x1b[K', '\rhistory: pass 1, 3 pages read\x1b[K', '\rdone\x1b[K', '\n']);
  });

  it('elsewhere (a log, a pipe): plain lines a few seconds apart, and the last one', () => {
    let now = 0;
    const out = stream(false);
    const line = new StatusLine({ stream: out, plainIntervalMs: 2000, now: () => now });
    line.update('ledger: 500 of 900');
    now = 1000;
    line.update('ledger: 900 of 900');
    line.finish();
    line.finish();
    expect(out.written).toEqual(['ledger: 500 of 900\n', 'ledger: 900 of 900\n']);
  });
});
