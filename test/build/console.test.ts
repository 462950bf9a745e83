/**
 * The built bridge (`npm run build`, then dist/src/main.js as `npm start` and the image run it)
 * serves the console from dist/, byte for byte as src/console/ holds it, with its headers.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from '@jest/globals';
import { CONSOLE_CSP } from '../../src/http/routes/console.js';
import { spawnBridge } from '../support/bridge-process.js';

const SOURCES = fileURLToPath(new URL('../../src/console/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'bridge-console-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function files(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? files(join(folder, entry.name)) : [join(folder, entry.name)]));
}

it('serves every file of src/console/ at /admin/ from the build, with the console headers', async () => {
  const bridge = await spawnBridge({ LEDGER_URL: `file:${join(dir, 'ledger.json')}`, LOYALTY_BASE_URL: 'http://127.0.0.1:9', LOYALTY_APP_TOKEN: 'app-token-console-build' });
  try {
    const paths = files(SOURCES).map((file) => relative(SOURCES, file).split('\\').join('/'));
    expect(paths).toEqual(expect.arrayContaining(['index.html', 'console.css', 'js/main.js']));
    for (const path of paths) {
      const res = await fetch(`${bridge.url}/admin/${path}`);
      expect([path, res.status]).toEqual([path, 200]);
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(SOURCES, path)))).toBe(true);
    }
    const page = await fetch(`${bridge.url}/admin/`);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  } finally {
    expect(await bridge.kill('SIGTERM')).toBe(0);
  }
}, 30_000);
