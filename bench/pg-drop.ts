/**
 * `node dist/bench/pg-drop.js <database-url> <schema>`: drops the benchmark's schema.
 * The benchmark drops it itself at the end of part D; this is the last resort its synchronous
 * clean-up runs (spawnSync) on an error, SIGINT or an exit before that. Retries briefly while a
 * killed bridge's backends still hold locks. Exit code 0 when the schema is gone.
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';

const SCHEMA_NAME = /^bench_[a-z0-9_]{1,56}$/;

export async function dropBenchSchema(connectionString: string, schema: string, attempts = 5): Promise<void> {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`refusing to drop ${JSON.stringify(schema)}: not a benchmark schema name`);
  let last: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const client = new pg.Client({ connectionString, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query("SET lock_timeout = '3s'");
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      return;
    } catch (error) {
      last = error;
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  throw last;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [url, schema] = process.argv.slice(2);
  if (!url || !schema) {
    process.stderr.write('usage: pg-drop.js <database-url> <schema>\n');
    process.exit(2);
  }
  dropBenchSchema(url, schema).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`pg-drop: ${(error as Error).message}\n`);
      process.exit(1);
    },
  );
}
