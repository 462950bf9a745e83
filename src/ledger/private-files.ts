/**
 * The file ledger's files hold customers' phones, emails and names (records, dead letters' bodies),
 * so they are readable by the bridge's user only (0600) and its folders open to it only (0700),
 * whatever the umask (which can only take bits away).
 */
import { chmod, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Adapter } from 'lowdb';

export const PRIVATE_FILE = 0o600;
export const PRIVATE_DIR = 0o700;

/**
 * A lowdb adapter like `JSONFile`, whose file is created 0600. `JSONFile` (steno) writes a temporary
 * file with the default mode (0644 under the usual umask) and renames it into place, so every
 * manifest and dead letter it wrote was world-readable, the temporary copy included. Here the
 * temporary file is created anew (O_EXCL, after removing any left by a crash or by steno, which
 * may be 0644 and may even be open in a reader already) with mode 0600 before a byte is written.
 * Writes to one file are made one at a time, in order, as steno does.
 */
export class PrivateJSONFile<T> implements Adapter<T> {
  readonly #temporary: string;
  #writing: Promise<void> = Promise.resolve();

  constructor(
    readonly path: string,
    /** Put the data on disk before it is renamed into place (the caller syncs the folder, for the rename). */
    private readonly options: { syncData?: boolean } = {},
  ) {
    this.#temporary = join(dirname(path), `.${basename(path)}.tmp`);
  }

  async read(): Promise<T | null> {
    try {
      return JSON.parse(await readFile(this.path, 'utf8')) as T;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  write(data: T): Promise<void> {
    const text = JSON.stringify(data, null, 2);
    const written = this.#writing.catch(() => undefined).then(() => this.#replace(text));
    this.#writing = written;
    return written;
  }

  async #replace(text: string): Promise<void> {
    await unlink(this.#temporary).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
    const handle = await open(this.#temporary, 'wx', PRIVATE_FILE);
    try {
      await handle.writeFile(text, 'utf8');
      if (this.options.syncData) await handle.datasync();
    } catch (error) {
      await handle.close();
      await unlink(this.#temporary).catch(() => undefined);
      throw error;
    }
    await handle.close();
    await rename(this.#temporary, this.path);
  }
}

/**
 * Sets `mode` on a file or folder of the ledger that is there already: ledgers written by builds
 * before this one have 0644 files and 0755 folders, and become private when opened. Answers false
 * when there is nothing at `path`.
 */
export async function makePrivate(path: string, mode: number): Promise<boolean> {
  try {
    await chmod(path, mode);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
