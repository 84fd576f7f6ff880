// The trail's files on disk: their names (sorted by the sequence number of their first record),
// where the chain left off in the last one (so a restarted gateway continues it), and retention.
import { open, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

const FILE_NAME = /^audit-(\d{16})-(\d{8}T\d{6}Z)\.jsonl$/;

/** `audit-<first seq, 16 digits>-<UTC time>.jsonl`: names sort as the chain runs. */
export function trailFileName(firstSeq: number, now: Date): string {
  const time = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `audit-${String(firstSeq).padStart(16, '0')}-${time}.jsonl`;
}

export const isTrailFileName = (name: string): boolean => FILE_NAME.test(name);

/** The sequence number a trail file's name says its first record has. */
export const firstSeqOf = (name: string): number => Number(FILE_NAME.exec(name)?.[1] ?? NaN);

/** The trail files in `directory`, oldest first. */
export async function trailFiles(directory: string): Promise<string[]> {
  const names = await readdir(directory);
  return names.filter(isTrailFileName).sort();
}

export interface ChainEnd {
  readonly file: string;
  readonly seq: number;
  readonly hash: string;
}

export interface TrailStart {
  /** Where the chain ends in the newest file with a record (undefined: a new trail). */
  readonly end: ChainEnd | undefined;
  /**
   * The newest file when it holds no record and its name begins at the next seq: begun and never
   * written (a crash or a failure as it was begun). The next file is begun in it, so that no empty
   * file is left in the middle of the trail (verify would take it for one emptied).
   */
  readonly reuse: string | undefined;
}

/** The tail read to find a file's last record: records are far smaller. */
const TAIL_BYTES = 4 * 1024 * 1024;

interface LastRecord {
  readonly seq: number;
  readonly hash: string;
  /** The file its end record names next (a rotation), when the file ends with one. */
  readonly promised?: string;
}

/** The last complete record of a file: its seq and the hash of its line (undefined: none). */
async function lastRecord(path: string, hashOf: (line: string) => string): Promise<LastRecord | undefined> {
  const { size } = await stat(path);
  const start = Math.max(0, size - TAIL_BYTES);
  const handle = await open(path, 'r');
  let text: string;
  try {
    const buffer = Buffer.alloc(size - start);
    await handle.read(buffer, 0, buffer.length, start);
    text = buffer.toString('utf8');
  } finally {
    await handle.close();
  }
  const lines = text.split('\n');
  let last: { seq: number; hash: string } | undefined;
  // The text after the last newline is a record cut short (or nothing): it was never acknowledged.
  for (let j = lines.length - 2; j >= (start === 0 ? 0 : 1); j--) {
    const line = lines[j]!;
    let record: { seq?: unknown; kind?: unknown; next?: unknown };
    try {
      record = JSON.parse(line) as typeof record;
    } catch {
      continue; // not a record: look further back
    }
    if (typeof record.seq !== 'number') continue;
    last ??= { seq: record.seq, hash: hashOf(line) };
    // A file's end record comes last, or right before the final digest.
    if (record.kind === 'end' && typeof record.next === 'string') return { ...last, promised: record.next };
    if (record.kind !== 'digest' || record.seq < last.seq) return last;
  }
  return last;
}

/** Where the chain ends in the directory, and the file to begin next when it was named or begun and never written. */
export async function trailStart(directory: string, hashOf: (line: string) => string): Promise<TrailStart> {
  const files = await trailFiles(directory);
  for (let i = files.length - 1; i >= 0; i--) {
    const file = files[i]!;
    const last = await lastRecord(join(directory, file), hashOf);
    if (last === undefined) continue;
    const end = { file, seq: last.seq, hash: last.hash };
    // A rotation names the next file before it is begun: a crash between leaves it to begin.
    if (last.promised !== undefined && isTrailFileName(last.promised)) return { end, reuse: last.promised };
    const newest = files[files.length - 1]!;
    const unwritten = i === files.length - 2 && firstSeqOf(newest) === last.seq + 1;
    return { end, reuse: unwritten ? newest : undefined };
  }
  return { end: undefined, reuse: files.length === 1 && firstSeqOf(files[0]!) === 1 ? files[0] : undefined };
}

export interface FileSize {
  readonly name: string;
  readonly bytes: number;
}

/** The trail files with their sizes, oldest first. */
export async function trailFileSizes(directory: string): Promise<FileSize[]> {
  const names = await trailFiles(directory);
  const sizes: FileSize[] = [];
  for (const name of names) {
    try {
      sizes.push({ name, bytes: (await stat(join(directory, name))).size });
    } catch {
      // removed meanwhile
    }
  }
  return sizes;
}

/**
 * The oldest files to remove so that at most `keepFiles` files (0: any number) and `maxBytes` bytes
 * (0: any size) remain; never `current`, nor any file after it.
 */
export function filesPastRetention(
  files: readonly FileSize[],
  current: string,
  keepFiles: number,
  maxBytes: number,
): FileSize[] {
  const older = files.filter((file) => file.name < current);
  let count = files.length;
  let total = files.reduce((sum, file) => sum + file.bytes, 0);
  const removed: FileSize[] = [];
  for (const file of older) {
    const overCount = keepFiles > 0 && count > keepFiles;
    const overBytes = maxBytes > 0 && total > maxBytes;
    if (!overCount && !overBytes) break;
    removed.push(file);
    count--;
    total -= file.bytes;
  }
  return removed;
}

/** Removes the named files (one already gone is no matter). */
export async function removeFiles(directory: string, files: readonly FileSize[]): Promise<void> {
  for (const file of files) await unlink(join(directory, file.name)).catch(() => undefined);
}
