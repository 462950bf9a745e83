#!/usr/bin/env node
/**
 * `… | node scripts/deliver.mjs <url>`: posts a webhook delivery the simulator built and signed
 * (`POST /__sim/pos/<pos>/accounts/<account>/webhooks` answers `{headers, body}`,
 * docs/simulator-pos-apis.md "Webhooks") to `<url>`, the body byte for byte with those headers, as
 * the POS would; prints the answer's body. The walk-through in the README uses it, so that a reader
 * needs no signing tools: the simulator signs as each POS signs.
 *
 * Plain JavaScript (Node's own fetch): it runs without a build. Exit 0 when the bridge answered
 * (whatever its status: the answer says what happened), 1 when it could not be reached, 2 for bad input.
 */
const url = process.argv[2];
if (!url || process.argv.length > 3) {
  process.stderr.write('usage: curl -s -X POST $SIM/__sim/pos/<pos>/accounts/<account>/webhooks … | node scripts/deliver.mjs <bridge URL>/v1/webhooks/<pos>\n');
  process.exit(2);
}
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const text = Buffer.concat(chunks).toString('utf8');
let delivery;
try {
  delivery = JSON.parse(text);
} catch {
  delivery = undefined;
}
if (!delivery || typeof delivery.body !== 'string' || typeof delivery.headers !== 'object') {
  // The simulator's refusal (an unknown account or order) is what came in: say it as it is.
  process.stderr.write(`deliver: expected the simulator's {headers, body}, got ${text.slice(0, 300) || 'nothing'}\n`);
  process.exit(2);
}
const target = /^https?:\/\//.test(url) ? url : `http://${url}`;
try {
  const answer = await fetch(target, { method: 'POST', headers: delivery.headers, body: delivery.body });
  process.stdout.write(await answer.text());
} catch (error) {
  process.stderr.write(`deliver: ${target}: ${error.cause?.message ?? error.message}\n`);
  process.exit(1);
}
