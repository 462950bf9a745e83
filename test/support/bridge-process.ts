/**
 * A bridge as a real child process (the built `dist/src/main.js`, which `npm test` builds first),
 * so crash tests can SIGKILL it at any instant and start another on the same ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN_TOKEN } from './harness.js';

const MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'src', 'main.js');

export interface BridgeProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  /** Resolves with the signal or exit code when the process ends. */
  exited: Promise<NodeJS.Signals | number | null>;
  kill(signal?: NodeJS.Signals): Promise<NodeJS.Signals | number | null>;
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function spawnBridge(env: Record<string, string>): Promise<BridgeProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'test',
      PORT: String(port),
      ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
      LOYALTY_TIMEOUT_MS: '500',
      LOYALTY_RETRY_BASE_MS: '5',
      WORKER_INTERVAL_MS: '50',
      IN_DOUBT_VERIFY_AFTER_MS: '0',
      IN_DOUBT_GRACE_MS: '300',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ready = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`bridge did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    child,
    output: () => output,
    exited,
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
