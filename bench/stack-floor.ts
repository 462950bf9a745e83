/**
 * The stack's own ceiling, for part A of the benchmark: `node dist/bench/stack-floor.js <upstream-url>`.
 * One express + axios hop that does nothing else: express.json() reads an accrue body, axios (with
 * axios-retry attached, a keep-alive agent, no status throwing: configured as the bridge's client)
 * posts it to the simulator, and the answer goes back as JSON. No validation, no ledger, no logging.
 * Whatever throughput this reaches is the most any bridge built on express + axios can reach on the
 * machine, so the bridge's ratio is read against it. Prints `FLOOR_URL=<url>`; stops on SIGTERM or
 * when its stdin closes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import axios from 'axios';
import axiosRetry from 'axios-retry';
import express from 'express';

const upstream = process.argv[2];
if (!upstream) throw new Error('usage: stack-floor.js <upstream-url>');
const client = axios.create({
  baseURL: upstream,
  headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-App-Token': 'sim-app-token' },
  validateStatus: () => true,
  maxRedirects: 0,
  httpAgent: new http.Agent({ keepAlive: true, maxSockets: 64 }),
});
axiosRetry(client, { retries: 4 });

const app = express();
app.disable('x-powered-by');
app.post('/accrue', express.json(), async (req, res) => {
  const answer = await client.post('/api/v2/marketplace/accrue', req.body);
  res.status(answer.status).json(answer.data);
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`FLOOR_URL=http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.once('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
