/**
 * The simulator as a child process of the benchmark: `node dist/bench/simulator-process.js [port]`.
 * Prints `SIMULATOR_URL=<url>` once listening; stops on SIGTERM/SIGINT or when its stdin closes
 * (the benchmark died without cleaning up).
 */
import { createSimulator } from '../simulator/index.js';

const port = Number(process.argv[2] ?? 0);
const simulator = createSimulator();
const listening = await simulator.listen(port);
process.stdout.write(`SIMULATOR_URL=${listening.url}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void listening.close().then(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
