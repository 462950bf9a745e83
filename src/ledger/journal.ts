/**
 * An append-only journal of JSON lines in numbered segment files, for the embedded ledger.
 *
 * Why: on this kind of disk, creating a file costs ~600 µs and a temp-file-and-rename ~500 µs,
 * while appending a line to an open file costs ~5 µs. A write is therefore one `writeSync` of one
 * line, whatever the ledger's size. Reading a line back is one positioned read.
 *
 * Line format: `<header JSON>\t<body JSON>\n`. JSON text never contains a raw tab, so the first tab
 * ends the header. Headers are small (what an index needs) and are all that start-up parses.
 *
 * A line is written in one call and the page cache outlives a killed process, so a SIGKILL leaves
 * either the whole line or, at worst, a torn tail without its newline, which `scan` cuts off (that
 * write was never acknowledged). A plain append is not synced: an operating-system crash or power
 * loss can lose the last writes and leave zero-filled or garbled blocks anywhere in a segment.
 * `durable()` puts everything appended so far on disk (fdatasync off the event loop, one at a time
 * per segment, shared by every caller that arrives while one runs: group commit); the store calls it
 * before each upstream call, so a call is never made on a line a crash could take back. `scan` skips such
 * stretches, reads on after them, reports them in `damage`, and copies the damaged segment beside
 * itself; it never changes a damaged segment (the store compacts it away once it has been acted on).
 *
 * The store keeps an index of the journal on disk (file-index.ts) and tells it how far it has read:
 * `scan` can start at a position (the lines before it are indexed already), `stamp` marks a
 * segment's size and modification time so that a change behind the index's back shows, and
 * `takeBack` removes the line just appended when the index could not take it.
 */
import { chmodSync, closeSync, constants, copyFileSync, existsSync, fdatasync, fstatSync, fsyncSync, ftruncateSync, futimesSync, mkdirSync, openSync, readdirSync, readSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { PRIVATE_DIR, PRIVATE_FILE } from './private-files.js';

export interface Location {
  segment: number;
  offset: number;
  length: number;
}

export interface ScannedLine<H> {
  header: H;
  location: Location;
}

/** A point in the journal: the byte `offset` of `segment` (the end of a line, or the start of one). */
export interface Position {
  segment: number;
  offset: number;
}

/**
 * What a segment's file looked like when it was last stamped (`stamp`): its size and its
 * modification time in nanoseconds (as a decimal string: the file system's own value, compared
 * exactly). A file whose size or mtime differs was changed since.
 */
export interface SegmentStamp {
  size: number;
  mtimeNs: string;
}

/** Bytes of a segment that hold no readable line. */
export interface Region {
  offset: number;
  length: number;
}

export interface WriteFailure {
  error: NodeJS.ErrnoException;
  /** When the first of the failures since the last successful write happened. */
  sinceMs: number;
}

export interface SegmentDamage {
  segment: number;
  /** One region per unreadable line (a zero-filled block without a newline is one line). */
  regions: Region[];
  /** The segment's file as `scan` found it, kept for forensics. */
  copy: string;
}

const NUL = 0x00;
const TAB = 0x09;
const NEWLINE = 0x0a;
const OPEN_BRACE = 0x7b;
const SCAN_CHUNK = 1024 * 1024;
/** How far before a damaged stretch's last tab a line's header may begin (headers are a few hundred bytes). */
const MAX_HEADER_BYTES = 16 * 1024;

/** How bytes reach a file: `writeSync`'s positioned form (a test replaces it to make the disk full). */
export type WriteFile = (fd: number, buffer: Buffer, offset: number, length: number, position: number) => number;

/** Written and synced by `probe`: more than a record line, so a disk that takes it takes the next append. */
const PROBE_BYTES = 64 * 1024;
/** The probe's file, beside the segments (the same file system); it is left empty between probes. */
const PROBE_FILE = '.write-probe';

/** fsync of a directory: makes the names created or renamed in it durable (Linux; a no-op where a directory cannot be opened so). */
export function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    /* not supported here */
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function segmentName(n: number): string {
  return `${String(n).padStart(6, '0')}.jsonl`;
}

/** Group commit of one segment: the fdatasync running, and the one that will follow it. */
interface SegmentSync {
  running?: Promise<void>;
  next?: Promise<void>;
}

export class Journal {
  readonly #fds = new Map<number, number>();
  readonly #sizes = new Map<number, number>();
  /** Segments appended to since their last fdatasync began. */
  readonly #unsynced = new Set<number>();
  readonly #syncs = new Map<number, SegmentSync>();
  #segments: number[] = [];
  #damage: SegmentDamage[] = [];
  #writeFailure?: WriteFailure;
  /** A segment whose last append was cut short and whose partial line could not be cut off then. */
  #cutShort?: { segment: number; size: number };
  /**
   * Lines whose header `scan` or `linesIn` has looked at (readable or not) since the journal was
   * opened: how a test tells that a start-up read nothing before the position its index had applied.
   */
  linesRead = 0;

  constructor(
    readonly dir: string,
    /** How a segment's data reaches the disk (a test holds it to see who waits for what). */
    private readonly syncFile: (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void = fdatasync,
    private readonly writeFile: WriteFile = writeSync,
  ) {}

  /**
   * The first error of the appends and syncs failing since the last one that succeeded (or the last
   * successful `probe`): a full disk, a read-only remount, an I/O error. Readiness reports it.
   */
  get writeFailure(): WriteFailure | undefined {
    return this.#writeFailure;
  }

  /**
   * Writes and syncs `PROBE_BYTES` in the journal's folder and forgets the write failure once that
   * succeeds; throws what the disk answers otherwise. Only called while a failure is remembered:
   * with no request written (a load balancer sends none to a bridge that is not ready), nothing
   * else would ever find out that the disk has room again.
   */
  async probe(): Promise<void> {
    const fd = openSync(join(this.dir, PROBE_FILE), 'w', PRIVATE_FILE);
    try {
      const block = Buffer.alloc(PROBE_BYTES);
      for (let written = 0; written < block.length; ) written += this.writeFile(fd, block, written, block.length - written, written);
      await new Promise<void>((resolve, reject) => this.syncFile(fd, (error) => (error ? reject(error) : resolve())));
    } finally {
      // Gives the space back at once, whatever happened.
      try {
        ftruncateSync(fd, 0);
      } finally {
        closeSync(fd);
      }
    }
    this.#writeFailure = undefined;
  }

  #failed(error: unknown): void {
    this.#writeFailure ??= { error: error as NodeJS.ErrnoException, sinceMs: Date.now() };
  }

  get segments(): readonly number[] {
    return this.#segments;
  }

  get active(): number {
    return this.#segments.at(-1)!;
  }

  /** What the last `scan` found unreadable, by segment. */
  get damage(): readonly SegmentDamage[] {
    return this.#damage;
  }

  sizeOf(segment: number): number {
    return this.#sizes.get(segment) ?? 0;
  }

  /**
   * Opens the listed segments (creating the first), removes segment files no manifest lists (not the
   * copies of damaged ones). The folder and every file in it are made private first: a journal
   * written by an earlier build has 0644 segments in a 0755 folder (see `private-files.ts`).
   */
  open(segments: number[]): void {
    mkdirSync(this.dir, { recursive: true, mode: PRIVATE_DIR });
    chmodSync(this.dir, PRIVATE_DIR);
    this.#segments = segments.length ? [...segments] : [1];
    const listed = new Set(this.#segments.map(segmentName));
    for (const file of readdirSync(this.dir)) {
      // A segment not in the manifest is what a crash during compaction or rolling left behind.
      if (file.endsWith('.jsonl') && !listed.has(file)) unlinkSync(join(this.dir, file));
      else chmodSync(join(this.dir, file), PRIVATE_FILE);
    }
    for (const segment of this.#segments) {
      const fd = openSync(join(this.dir, segmentName(segment)), existsSync(join(this.dir, segmentName(segment))) ? 'r+' : 'w+', PRIVATE_FILE);
      this.#fds.set(segment, fd);
      this.#sizes.set(segment, fstatSync(fd).size);
    }
    syncDirectory(this.dir);
  }

  /**
   * Resolves once every line appended so far is on disk: a new sync where lines wait for one, else
   * the sync already under way, which may have started after this caller's line and before its call.
   */
  async durable(): Promise<void> {
    const segments = new Set([...this.#unsynced, ...this.#syncs.keys()]);
    await Promise.all([...segments].map((segment) => (this.#unsynced.has(segment) ? this.#sync(segment) : (this.#syncs.get(segment)?.next ?? this.#syncs.get(segment)?.running))));
  }

  /** Waits for the syncs under way (before closing or dropping files). */
  async settle(): Promise<void> {
    await Promise.all([...this.#syncs.values()].flatMap((s) => [s.running, s.next]).map((p) => p?.catch(() => undefined)));
  }

  #sync(segment: number): Promise<void> {
    const state = this.#syncs.get(segment) ?? {};
    this.#syncs.set(segment, state);
    // One is already waiting to start: it will cover this caller's lines too.
    if (state.next) return state.next;
    const next = (state.running ?? Promise.resolve()).then(() => {
      // From here on, lines appended need a later sync; those before are covered by this one.
      state.next = undefined;
      this.#unsynced.delete(segment);
      const fd = this.#fds.get(segment);
      const running = fd === undefined ? Promise.resolve() : new Promise<void>((resolve, reject) => this.syncFile(fd, (error) => (error ? reject(error) : resolve())));
      running.catch((error: unknown) => {
        this.#failed(error);
        // Its lines are not known to be on disk: the next durable() must sync again, not resolve at once.
        this.#unsynced.add(segment);
      });
      state.running = running;
      return running.finally(() => {
        if (state.running === running) state.running = undefined;
      });
    });
    state.next = next;
    return next;
  }

  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
    this.#sizes.clear();
  }

  append(header: unknown, body: string): Location {
    return this.appendRaw(Buffer.from(`${JSON.stringify(header)}\t${body}\n`, 'utf8'));
  }

  /**
   * Appends a whole line (header, tab, body, newline) as it is: compaction copies lines byte for
   * byte. A write that fails (the disk full part-way through the line) is not acknowledged, and
   * what it wrote is cut off again, so the segment ends with the last whole line: left there, a kill
   * before the next append covered it would leave a fragment that start-up counts as damage (it
   * starts inside the file, not as a torn last line), putting open records in doubt for nothing.
   */
  appendRaw(line: Buffer): Location {
    const segment = this.active;
    const offset = this.#sizes.get(segment)!;
    const fd = this.#fds.get(segment)!;
    let written = 0;
    try {
      if (this.#cutShort) this.#cutOff();
      while (written < line.length) written += this.writeFile(fd, line, written, line.length - written, offset + written);
    } catch (error) {
      this.#failed(error);
      if (written > 0) {
        this.#cutShort = { segment, size: offset };
        try {
          this.#cutOff();
        } catch {
          /* tried again before the next append */
        }
      }
      throw error;
    }
    this.#writeFailure = undefined;
    this.#sizes.set(segment, offset + line.length);
    this.#unsynced.add(segment);
    return { segment, offset, length: line.length };
  }

  #cutOff(): void {
    const { segment, size } = this.#cutShort!;
    const fd = this.#fds.get(segment);
    if (fd !== undefined) ftruncateSync(fd, size);
    this.#cutShort = undefined;
  }

  /**
   * Takes back the line just appended at `location` (the last of the active segment): the store
   * appended it and then could not index it, so the write is refused whole, never acknowledged, as a
   * line the disk took only part of is (`appendRaw`). Cut off again before the next append should
   * the cut fail now.
   */
  takeBack(location: Location): void {
    if (location.segment !== this.active || location.offset + location.length !== this.#sizes.get(location.segment)) {
      throw new Error(`journal: only the last line appended can be taken back (segment ${location.segment} offset ${location.offset})`);
    }
    this.#sizes.set(location.segment, location.offset);
    this.#cutShort = { segment: location.segment, size: location.offset };
    try {
      this.#cutOff();
    } catch {
      /* tried again before the next append */
    }
  }

  /** The segment's size and modification time as its open file reports them. */
  statOf(segment: number): SegmentStamp {
    const stat = fstatSync(this.#fds.get(segment)!, { bigint: true });
    return { size: Number(stat.size), mtimeNs: stat.mtimeNs.toString() };
  }

  /**
   * Sets the segment's modification time to a whole second at least one second in the past, and
   * answers its size and mtime so: any later write to the file, ours or anyone's, sets the mtime
   * to the present, which differs. Needed because a write's mtime comes from a coarse clock (a
   * timer tick, up to 10 ms): an edit made moments after our last append could otherwise leave
   * size and mtime as they were. Where the file system refuses to set times, the mtime is kept.
   */
  stamp(segment: number): SegmentStamp {
    const fd = this.#fds.get(segment)!;
    const seconds = Math.floor(Date.now() / 1000) - 1;
    try {
      futimesSync(fd, Date.now() / 1000, seconds);
    } catch {
      /* a file system without settable times: its own mtime is the stamp */
    }
    return this.statOf(segment);
  }

  readLine(location: Location): Buffer {
    const buffer = Buffer.allocUnsafe(location.length);
    let read = 0;
    while (read < location.length) {
      const n = readSync(this.#fds.get(location.segment)!, buffer, read, location.length - read, location.offset + read);
      if (n === 0) throw new Error(`journal segment ${location.segment} ends before offset ${location.offset + location.length}`);
      read += n;
    }
    return buffer;
  }

  readBody(location: Location): string {
    const line = this.readLine(location);
    return line.toString('utf8', line.indexOf(TAB) + 1, line.length - 1);
  }

  /** Starts a new segment for appends; the caller records the new list in the manifest. */
  roll(): number {
    const next = this.active + 1;
    const fd = openSync(join(this.dir, segmentName(next)), 'w+', PRIVATE_FILE);
    // The new file's name must survive a crash before lines in it are relied upon.
    syncDirectory(this.dir);
    this.#fds.set(next, fd);
    this.#sizes.set(next, 0);
    this.#segments.push(next);
    return next;
  }

  /** Stops using a segment; its file is deleted by `deleteDropped` once the manifest no longer lists it. */
  drop(segment: number): void {
    const fd = this.#fds.get(segment);
    if (fd !== undefined) closeSync(fd);
    this.#fds.delete(segment);
    this.#sizes.delete(segment);
    this.#unsynced.delete(segment);
    this.#segments = this.#segments.filter((s) => s !== segment);
  }

  /** Deletes a dropped segment's file. A crash before this leaves an unlisted file that `open` removes. */
  deleteDropped(segment: number): void {
    if (!this.#segments.includes(segment)) unlinkSync(join(this.dir, segmentName(segment)));
  }

  /**
   * Every readable line's header, in append order; `accept` says whether a parsed header is one.
   * A line is readable when it holds no NUL byte (JSON text never does; zero-filled blocks are what
   * a crashed operating system leaves) and its header parses and is accepted. An unreadable line is
   * skipped and recorded in `damage`, and reading goes on: a readable line that ends the stretch is
   * recovered (a zero-filled block without a newline runs into the line after it).
   *
   * A torn tail of the last segment (a write cut short by a kill: never acknowledged) is cut off, as
   * long as the segment is otherwise intact. Any other tail (zeros, a sealed segment's, a damaged
   * segment's) is damage. A damaged segment is copied beside itself before anything can change it.
   */
  *scan<H>(accept: (header: unknown) => header is H, from?: Position): Generator<ScannedLine<H>> {
    this.#damage = [];
    for (const segment of this.#segments) {
      // Before `from`: read by an earlier scan, whose results the caller kept (its index).
      if (from && segment < from.segment) continue;
      const regions: Region[] = [];
      const tail = yield* this.#scanSegment(segment, accept, regions, from && segment === from.segment ? from.offset : 0);
      if (tail.bytes.length > 0) {
        if (segment === this.active && regions.length === 0 && isTornWrite(tail.bytes)) {
          ftruncateSync(this.#fds.get(segment)!, tail.offset);
          this.#sizes.set(segment, tail.offset);
        } else regions.push({ offset: tail.offset, length: tail.bytes.length });
      }
      if (regions.length > 0) this.#damage.push({ segment, regions, copy: this.#preserve(segment) });
    }
  }

  /**
   * The readable lines of one segment, in order, without recording or copying anything: how
   * compaction finds the lines it may have to move (those its index still points at).
   */
  *linesIn<H>(segment: number, accept: (header: unknown) => header is H): Generator<ScannedLine<H>> {
    yield* this.#scanSegment(segment, accept, []);
  }

  /** Yields a segment's readable lines from `start` (a line's first byte), records its unreadable ones; answers what follows the last newline. */
  *#scanSegment<H>(segment: number, accept: (header: unknown) => header is H, regions: Region[], start = 0): Generator<ScannedLine<H>, { offset: number; bytes: Buffer }> {
    const fd = this.#fds.get(segment)!;
    const size = this.#sizes.get(segment)!;
    // Bytes after the last newline read so far, kept as pieces: a long stretch without a newline
    // (a zero-filled region) is joined once, not once per chunk.
    let pieces: Buffer[] = [];
    let piecesOffset = start;
    for (let position = start; position < size; ) {
      const chunk = Buffer.allocUnsafe(Math.min(SCAN_CHUNK, size - position));
      const n = readSync(fd, chunk, 0, chunk.length, position);
      if (n === 0) break;
      position += n;
      const read = chunk.subarray(0, n);
      const lastNewline = read.lastIndexOf(NEWLINE);
      if (lastNewline === -1) {
        pieces.push(read);
        continue;
      }
      const lines = pieces.length > 0 ? Buffer.concat([...pieces, read.subarray(0, lastNewline + 1)]) : read.subarray(0, lastNewline + 1);
      yield* linesOf(lines, segment, piecesOffset, accept, regions, () => this.linesRead++);
      piecesOffset += lines.length;
      pieces = lastNewline + 1 < read.length ? [read.subarray(lastNewline + 1)] : [];
    }
    return { offset: piecesOffset, bytes: Buffer.concat(pieces) };
  }

  /**
   * Copies a damaged segment to `<segment>.corrupt-<time>` (a reflink where the file system has
   * them). A damaged segment is never changed, so start-ups that find the same damage again reuse
   * the copy of the same size instead of filling the disk with copies.
   */
  #preserve(segment: number): string {
    const name = segmentName(segment);
    const size = this.#sizes.get(segment)!;
    const existing = readdirSync(this.dir).find((f) => f.startsWith(`${name}.corrupt-`) && statSync(join(this.dir, f)).size === size);
    if (existing) return join(this.dir, existing);
    const copy = join(this.dir, `${name}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    // The copy is created with its source's mode, private since `open` (it holds the same records).
    copyFileSync(join(this.dir, name), copy, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE);
    return copy;
  }
}

/** Yields the readable lines of `block` (whole lines, starting at `base` in the segment), records the others. */
function* linesOf<H>(block: Buffer, segment: number, base: number, accept: (header: unknown) => header is H, regions: Region[], counted: () => void): Generator<ScannedLine<H>> {
  let nul = block.indexOf(NUL);
  for (let start = 0; start < block.length; ) {
    const end = block.indexOf(NEWLINE, start);
    counted();
    if (nul !== -1 && nul < start) nul = block.indexOf(NUL, start);
    const header = nul === -1 || nul > end ? headerOf(block.subarray(start, end), accept) : undefined;
    if (header !== undefined) {
      yield { header, location: { segment, offset: base + start, length: end + 1 - start } };
    } else {
      const found = recoverLine(block, start, end, accept);
      regions.push({ offset: base + start, length: (found?.start ?? end + 1) - start });
      if (found) yield { header: found.header, location: { segment, offset: base + found.start, length: end + 1 - found.start } };
    }
    start = end + 1;
  }
}

/** The header of a line without its newline, when it is a readable line's. */
function headerOf<H>(line: Buffer, accept: (header: unknown) => header is H): H | undefined {
  const tab = line.indexOf(TAB);
  if (tab === -1) return undefined;
  let header: unknown;
  try {
    header = JSON.parse(line.toString('utf8', 0, tab));
  } catch {
    return undefined;
  }
  return accept(header) ? header : undefined;
}

/**
 * A whole line at the end of the unreadable stretch `block[start, end)`, e.g. the line that follows
 * a zero-filled block. Bodies hold no raw tab, so its header ends at the stretch's last tab; it
 * begins with `{` after any earlier tab or NUL. What is recovered from damage must prove itself:
 * its body must parse too.
 */
function recoverLine<H>(block: Buffer, start: number, end: number, accept: (header: unknown) => header is H): { start: number; header: H } | undefined {
  const stretch = block.subarray(start, end);
  const tab = stretch.lastIndexOf(TAB);
  if (tab <= 0) return undefined;
  // From 1: the stretch as a whole is already known to be unreadable.
  const from = Math.max(1, stretch.lastIndexOf(TAB, tab - 1) + 1, stretch.lastIndexOf(NUL) + 1, tab - MAX_HEADER_BYTES);
  for (let open = stretch.lastIndexOf(OPEN_BRACE, tab); open >= from; open = stretch.lastIndexOf(OPEN_BRACE, open - 1)) {
    const header = headerOf(stretch.subarray(open), accept);
    if (header === undefined) continue;
    try {
      JSON.parse(stretch.toString('utf8', tab + 1));
    } catch {
      return undefined;
    }
    return { start: start + open, header };
  }
  return undefined;
}

/** The first bytes of a line, as a write cut short leaves them (never zeros: those are the OS's). */
function isTornWrite(tail: Buffer): boolean {
  return tail[0] === OPEN_BRACE && !tail.includes(NUL);
}
