/**
 * Start-up failures of the real process (the built dist/src/main.js, as `npm start` runs it): one
 * line naming the variable and what to do, a non-zero exit, no stack trace. Needs `npm run build`
 * first (npm test does it).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/** The process run to its end with only these variables: its exit code and what it printed. */
function run(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(process.cwd(), 'dist', 'src', 'main.js')], { env: { PATH: process.env.PATH!, HOME: tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('start-up failures name the variable', () => {
  let dir: string;
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'startup-failures-'));
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    port = (holder.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a PORT already in use: one line naming PORT, exit 78, no stack trace', async () => {
    const env = { PORT: String(port), LEDGER_URL: `file:${join(dir, 'ledger.json')}` };
    const { code, stderr } = await run(env);
    expect(code).toBe(78);
    expect(stderr).toBe(`loyalty-bridge: PORT ${port} is in use on 127.0.0.1: stop what holds it (another bridge?), or set PORT to another port\n`);
  }, 60_000);
});
