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

/** The tail read to find a file's last record: records are far smaller. */
const TAIL_BYTES = 1024 * 1024;

/**
 * Where the chain ends in the newest file: its last complete record's seq and the hash of its line.
 * Undefined for an empty directory, or a newest file with no complete record (the next file then
 * names the one before it).
 */
export async function chainEnd(directory: string, hashOf: (line: string) => string): Promise<ChainEnd | undefined> {
  const files = await trailFiles(directory);
  for (let i = files.length - 1; i >= 0; i--) {
    const file = files[i]!;
    const path = join(directory, file);
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
    // The text after the last newline is a record cut short (or nothing): it was never acknowledged.
    for (let j = lines.length - 2; j >= (start === 0 ? 0 : 1); j--) {
      const line = lines[j]!;
      try {
        const record = JSON.parse(line) as { seq?: unknown };
        if (typeof record.seq === 'number') return { file, seq: record.seq, hash: hashOf(line) };
      } catch {
        // not a record: look further back
      }
    }
  }
  return undefined;
}

/** Removes the oldest trail files past `keep` (0: keep all), never `current`. */
export async function applyRetention(directory: string, keep: number, current: string): Promise<string[]> {
  if (keep === 0) return [];
  const files = await trailFiles(directory);
  const removed: string[] = [];
  for (const file of files.slice(0, Math.max(0, files.length - keep))) {
    if (file === current) continue;
    await unlink(join(directory, file));
    removed.push(file);
  }
  return removed;
}
