// Gateway keys kept in a file (a Kubernetes Secret, written by `ledger-gateway keys`): JSON
// `{ "keys": [records] }`. The gateway reads it every consumers.keys.refreshIntervalMs and swaps in
// what changed; a file it cannot read or parse keeps the last good keys (logged), as a TLS file does.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { readKeyRecords, KeyRing, type KeyRecord } from './gateway-keys.js';
import type { KeyWatch, KeyWatchOptions } from './key-store.js';

/** A key file larger than this is refused (a Secret holds at most 1 MiB anyway). */
const MAX_KEY_FILE_BYTES = 1024 * 1024;

/** The records of a key file's text, and the problems of those left out; throws when the text is not a key file. */
export function parseKeyFile(text: string): { records: KeyRecord[]; problems: string[] } {
  if (text.length > MAX_KEY_FILE_BYTES) throw new Error(`larger than ${MAX_KEY_FILE_BYTES} bytes`);
  const parsed = JSON.parse(text) as { keys?: unknown } | null;
  if (parsed === null || typeof parsed !== 'object' || !Array.isArray(parsed.keys))
    throw new Error('not a key file: { "keys": [...] } expected');
  return readKeyRecords(parsed.keys);
}

export function keyFileText(records: readonly KeyRecord[]): string {
  return `${JSON.stringify({ keys: records }, null, 2)}\n`;
}

/** Reads a key file for the command line; a missing file is an empty one. */
export function readKeyFileSync(path: string): KeyRecord[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const { records, problems } = parseKeyFile(text);
  if (problems.length > 0) throw new Error(`${path}: ${problems.join('; ')}`);
  return records;
}

/** Writes the file whole and renames it into place: a reader never sees half of it. */
export function writeKeyFileSync(path: string, records: readonly KeyRecord[]): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, keyFileText(records), { mode: 0o600 });
  renameSync(temporary, path);
}

/** Keeps a KeyRing of the file current: read once at once, then every `refreshIntervalMs`. */
export function watchKeyFile(path: string, options: KeyWatchOptions): KeyWatch {
  let ring = new KeyRing([], 0);
  let loaded = false;
  let lastText: string | undefined;
  let closed = false;
  let reading: Promise<void> | undefined;

  function apply(text: string): void {
    if (text === lastText) return;
    const { records, problems } = parseKeyFile(text);
    for (const problem of problems) options.log.warn({ file: path, problem }, 'gateway key left out');
    lastText = text;
    ring = new KeyRing(records, ring.generation + 1);
    if (!loaded) options.log.info({ file: path, keys: records.length }, 'gateway keys loaded');
    loaded = true;
  }
  // Never the text: a message names the file and what failed.
  const failed = (error: unknown) =>
    options.log.warn(
      { file: path, error: (error as Error).message.slice(0, 200) },
      'gateway key file not read; the last keys stay',
    );
  const tick = () => {
    reading ??= readFile(path, 'utf8')
      .then(apply)
      .catch(failed)
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };
  // The first read before the first call: a gateway that starts with a key file serves its keys at once.
  try {
    apply(readFileSync(path, 'utf8'));
  } catch (error) {
    failed(error);
  }
  const timer = setInterval(() => void tick(), options.refreshIntervalMs);
  timer.unref();
  return {
    get ring() {
      return ring;
    },
    get loaded() {
      return loaded;
    },
    ready: () => reading ?? Promise.resolve(),
    close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
    },
  };
}
