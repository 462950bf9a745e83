/**
 * Everything a ledger holds, as text, to search for what must never be stored in clear: every file
 * under a file ledger's folder (each read whole), or every row of every table of a PostgreSQL
 * schema (each row cast to text, all its columns).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

export interface StoredText {
  /** One entry per file or row. */
  texts: string[];
  /** The files read, or the tables. */
  sources: string[];
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? walk(join(dir, name)) : [join(dir, name)]));
}

/** Every file under `dir`. */
export function filesText(dir: string): StoredText {
  const files = walk(dir);
  return { texts: files.map((f) => readFileSync(f, 'utf8')), sources: files };
}

/** Every row of every table of the schema a `?schema=` URL names. */
export async function tablesText(schemaUrl: string): Promise<StoredText> {
  const url = new URL(schemaUrl);
  const schema = url.searchParams.get('schema');
  if (!schema) throw new Error('the URL names no schema');
  url.searchParams.delete('schema');
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  try {
    const tables = (await db.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [schema])).rows.map((r) => r.table_name);
    const texts: string[] = [];
    for (const table of tables) {
      const { rows } = await db.query<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${table}" t`);
      texts.push(...rows.map((r) => r.row));
    }
    return { texts, sources: tables };
  } finally {
    await db.end();
  }
}
