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
 * either the whole line or, at worst, a torn tail without its newline, which `open` cuts off (that
 * write was never acknowledged). There is no fsync: an operating-system crash can lose the last
 * writes (deployments that need that use PostgreSQL).
 */
import { closeSync, existsSync, fstatSync, ftruncateSync, mkdirSync, openSync, readdirSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export interface Location {
  segment: number;
  offset: number;
  length: number;
}

export interface ScannedLine<H> {
  header: H;
  location: Location;
}

const TAB = 0x09;
const NEWLINE = 0x0a;
const SCAN_CHUNK = 1024 * 1024;

function segmentName(n: number): string {
  return `${String(n).padStart(6, '0')}.jsonl`;
}

export class Journal {
  readonly #fds = new Map<number, number>();
  readonly #sizes = new Map<number, number>();
  #segments: number[] = [];

  constructor(readonly dir: string) {}

  get segments(): readonly number[] {
    return this.#segments;
  }

  get active(): number {
    return this.#segments.at(-1)!;
  }

  sizeOf(segment: number): number {
    return this.#sizes.get(segment) ?? 0;
  }

  /** Opens the listed segments (creating the first), removes files no manifest lists, cuts torn tails. */
  open(segments: number[]): void {
    mkdirSync(this.dir, { recursive: true });
    this.#segments = segments.length ? [...segments] : [1];
    const listed = new Set(this.#segments.map(segmentName));
    // A segment not in the manifest is what a crash during compaction or rolling left behind.
    for (const file of readdirSync(this.dir)) if (file.endsWith('.jsonl') && !listed.has(file)) unlinkSync(join(this.dir, file));
    for (const segment of this.#segments) {
      const fd = openSync(join(this.dir, segmentName(segment)), existsSync(join(this.dir, segmentName(segment))) ? 'r+' : 'w+');
      this.#fds.set(segment, fd);
      this.#sizes.set(segment, fstatSync(fd).size);
    }
  }

  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
    this.#sizes.clear();
  }

  append(header: unknown, body: string): Location {
    return this.appendRaw(Buffer.from(`${JSON.stringify(header)}\t${body}\n`, 'utf8'));
  }

  /** Appends a whole line (header, tab, body, newline) as it is: compaction copies lines byte for byte. */
  appendRaw(line: Buffer): Location {
    const segment = this.active;
    const offset = this.#sizes.get(segment)!;
    let written = 0;
    while (written < line.length) written += writeSync(this.#fds.get(segment)!, line, written, line.length - written, offset + written);
    this.#sizes.set(segment, offset + line.length);
    return { segment, offset, length: line.length };
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
    const fd = openSync(join(this.dir, segmentName(next)), 'w+');
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
    this.#segments = this.#segments.filter((s) => s !== segment);
  }

  /** Deletes a dropped segment's file. A crash before this leaves an unlisted file that `open` removes. */
  deleteDropped(segment: number): void {
    if (!this.#segments.includes(segment)) unlinkSync(join(this.dir, segmentName(segment)));
  }

  /** Every complete line's header, in append order. A torn last line of a segment is cut off. */
  *scan<H>(): Generator<ScannedLine<H>> {
    for (const segment of this.#segments) {
      const fd = this.#fds.get(segment)!;
      const size = this.#sizes.get(segment)!;
      let carry = Buffer.alloc(0);
      let carryOffset = 0;
      for (let position = 0; position < size; ) {
        const chunk = Buffer.allocUnsafe(Math.min(SCAN_CHUNK, size - position));
        const n = readSync(fd, chunk, 0, chunk.length, position);
        position += n;
        const data = carry.length ? Buffer.concat([carry, chunk.subarray(0, n)]) : chunk.subarray(0, n);
        let start = 0;
        for (let end = data.indexOf(NEWLINE, start); end !== -1; end = data.indexOf(NEWLINE, start)) {
          const tab = data.indexOf(TAB, start);
          if (tab === -1 || tab > end) throw new Error(`journal segment ${segment} is corrupt at offset ${carryOffset + start}`);
          yield { header: JSON.parse(data.toString('utf8', start, tab)) as H, location: { segment, offset: carryOffset + start, length: end + 1 - start } };
          start = end + 1;
        }
        carry = data.subarray(start);
        carryOffset += start;
      }
      if (carry.length > 0) {
        // A write cut short by a crash: never acknowledged, so it is cut off.
        ftruncateSync(fd, carryOffset);
        this.#sizes.set(segment, carryOffset);
      }
    }
  }
}
