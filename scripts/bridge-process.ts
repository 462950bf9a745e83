/**
 * A bridge as a real child process (the built `dist/src/main.js`), so crash tests and the chaos
 * campaign can SIGKILL it at any instant and start another on the same ledger and port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/scripts/ when built, scripts/ when run from sources: both sit beside dist/src/main.js's root. */
const ROOT = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  return here.endsWith(join('dist', 'scripts')) ? join(here, '..', '..') : join(here, '..');
})();
const MAIN = join(ROOT, 'dist', 'src', 'main.js');

export interface BridgeProcess {
  url: string;
  port: number;
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

/** The credential spawned bridges take for direct POS posts (not sandbox: they would refuse every one without it). */
export const BRIDGE_PROCESS_POS_TOKEN = 'bridge-process-pos-token-0123456789';
/** Headers of a direct POS post to a spawned bridge. */
export const POS_POST_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${BRIDGE_PROCESS_POS_TOKEN}` } as const;

/** Defaults suit tests: fast retry units, a short grace for in-doubt verification, quiet logs. */
export async function spawnBridge(env: Record<string, string>, port?: number): Promise<BridgeProcess> {
  const listenPort = port ?? (await freePort());
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'test',
      PORT: String(listenPort),
      LOG_LEVEL: 'warn',
      LOYALTY_TIMEOUT_MS: '500',
      LOYALTY_RETRY_BASE_MS: '5',
      WORKER_INTERVAL_MS: '50',
      IN_DOUBT_VERIFY_AFTER_MS: '0',
      IN_DOUBT_GRACE_MS: '300',
      POS_TOKEN: BRIDGE_PROCESS_POS_TOKEN,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const url = `http://127.0.0.1:${listenPort}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ready = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    if (ready) break;
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`bridge did not start:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    port: listenPort,
    child,
    output: () => output,
    exited,
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
