/**
 * A full disk under the file ledger: every checkout fails, and /readyz must say so (503, naming the
 * ledger) so that a load balancer stops sending checkouts here; once there is room again /readyz is
 * 200 and checkouts go through, with nothing recorded before lost or changed. As root (here and in
 * CI) the ledger lives on a small tmpfs that is filled for real; where no tmpfs can be mounted, the
 * journal's write is replaced by one that fails as a full disk does.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { FileLedgerStore } from '../../src/ledger/file-store.js';
import { ADMIN_TOKEN, checkout, startHarness, type Harness, postJson } from '../support/harness.js';

interface Disk {
  /** Takes every free byte of the ledger's file system. */
  fill(): void;
  /** Gives it back. */
  free(): void;
}

let dir: string;
let mounted = false;
let h: Harness | undefined;
let disk: Disk;
/** Where the stores of the fallback write (undefined on a real tmpfs). */
let injected: { full: boolean; write: (fd: number, buffer: Buffer, offset: number, length: number, position: number) => number } | undefined;

function enospc(): Error {
  return Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'disk-full-'));
  if (process.getuid?.() === 0) {
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', dir], { stdio: 'pipe' });
      mounted = true;
    } catch (error) {
      console.warn(`no tmpfs could be mounted (${(error as Error).message.split('\n')[0]}): the journal's write is made to fail instead`);
    }
  }
  const ledger = join(dir, 'ledger.json');
  if (mounted) {
    const filler = join(dir, 'filler');
    disk = {
      fill() {
        const fd = openSync(filler, 'w');
        const chunk = Buffer.alloc(64 * 1024, 1);
        try {
          for (;;) writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
        } finally {
          closeSync(fd);
        }
      },
      free: () => unlinkSync(filler),
    };
    h = await startHarness({ env: { LEDGER_URL: `file:${ledger}` } });
  } else {
    const state = {
      full: false,
      write(fd: number, buffer: Buffer, offset: number, length: number, position: number): number {
        if (state.full) throw enospc();
        return writeSync(fd, buffer, offset, length, position);
      },
    };
    injected = state;
    disk = { fill: () => (state.full = true), free: () => (state.full = false) };
    h = await startHarness({ overrides: { store: new FileLedgerStore(ledger, { writeFile: state.write }) } });
  }
});

afterAll(async () => {
  await h?.close().catch(() => undefined);
  if (mounted) {
    try {
      execFileSync('umount', [dir], { stdio: 'pipe' });
    } catch {
      // Something still holds a file there (a failed test's bridge): detach it now, freed when released.
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** An order whose ledger line is far larger than a memory page: it cannot fit in what is left of the journal's last page. */
function largeOrder(orderId: string): Record<string, unknown> {
  const items = Array.from({ length: 300 }, (_, i) => ({ id: `sku-${i}`, groupId: 'coffee', name: `Latte ${i} `.padEnd(200, '.'), quantity: 1, unitPrice: '0.10', total: '0.10' }));
  return checkout({ orderId, total: '30.00', tax: '0', tip: '0', items });
}

const readyz = () => request(h!.bridge.url).get('/readyz').set('authorization', `Bearer ${ADMIN_TOKEN}`);
const record = async (id: string) => (await request(h!.bridge.url).get(`/v1/admin/transactions/${id}`).set('authorization', `Bearer ${ADMIN_TOKEN}`)).body;

describe('the file ledger on a full disk', () => {
  it('checkouts fail and /readyz is 503 naming the ledger while the disk is full; both recover once there is room, with nothing lost', async () => {
    expect((await postJson(h!.bridge.url, '/v1/checkouts/generic', checkout({ orderId: 'D-1' }))).body.status).toBe('accrued');
    expect((await readyz()).status).toBe(200);
    const settled = await record('generic:D-1');
    const segment = join(dir, 'ledger.journal', '000001.jsonl');
    const recorded = statSync(segment).size;

    disk.fill();
    const refused = await postJson(h!.bridge.url, '/v1/checkouts/generic', largeOrder('D-2'));
    expect(refused.status).toBe(500);
    expect(h!.sim.books().accrueRequests).toBe(1); // nothing was sent for an order the ledger could not record
    // The disk took part of its line before it filled up: that part is cut off again, so the journal
    // still ends with D-1's last line and a kill now leaves nothing that start-up would read as damage.
    expect(statSync(segment).size).toBe(recorded);
    const notReady = await readyz();
    expect(notReady.status).toBe(503);
    expect(notReady.body).toEqual({ status: 'not ready', checks: { ledger: expect.stringMatching(/^failing: the file ledger cannot write to disk \(ENOSPC\), failing since /), upstream: 'ok' } });
    // Still full: still not ready (each readiness check tries a write, and it fails).
    expect((await readyz()).status).toBe(503);
    expect(await record('generic:D-1')).toEqual(settled);

    disk.free();
    expect((await readyz()).body).toEqual({ status: 'ready', checks: { ledger: 'ok', upstream: 'ok' } });
    // The POS delivers the order again: recorded and accrued, once.
    expect((await postJson(h!.bridge.url, '/v1/checkouts/generic', largeOrder('D-2'))).body.status).toBe('accrued');
    expect(h!.sim.books().accrueRequests).toBe(2);
    const accrued = await record('generic:D-2');

    // Every line of the journal is whole.
    await h!.bridge.close();
    const lines = readFileSync(segment, 'utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.map((line) => line.split('\t').map((part) => typeof JSON.parse(part)))).toEqual(lines.map(() => ['object', 'object']));
    await h!.restart(injected ? { store: new FileLedgerStore(join(dir, 'ledger.json'), { writeFile: injected.write }) } : {});
    expect(await record('generic:D-1')).toEqual(settled);
    expect(await record('generic:D-2')).toEqual(accrued);
    expect((await h!.bridge.store.list({ offset: 0, limit: 10 })).total).toBe(2);
  });
});
