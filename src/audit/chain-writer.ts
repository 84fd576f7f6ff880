// The chain as it is written to the trail's files: each line names the hash of the line before it
// (chain.ts); seq and hash move on only once a batch is on disk, so a failed write leaves the chain
// where it was. A signed digest follows when due. Each file ends with an end record, signed by a
// last digest: past rotateBytes it names the next file (begun right after, so removing the files
// after it shows), at a clean close it names none (the trail is sealed: verify tells a trail cut
// after a crash from one that ended). Retention removes the oldest files past retainFiles or
// maxTrailBytes, after a retention record says which, so that a trail that starts later than its
// first record verifies only when the gateway removed what is missing. The trail writer
// (trail-writer.ts) decides when to write and what to do when a write fails.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AUDIT_RECORD_VERSION, GENESIS_HASH, lineHash, type DigestSigner } from './chain.js';
import {
  filesPastRetention,
  removeFiles,
  trailFileName,
  trailFileSizes,
  type ChainEnd,
  type TrailStart,
} from './trail-files.js';

/** A record as the trail's callers hand it over: its JSON object (`{"kind":...,"time":...,...}`) and its UTF-8 size. */
export interface RecordText {
  readonly text: string;
  readonly bytes: number;
}

/** A record's fields: its kind and its time first, then its own. */
export interface RecordFields {
  readonly kind: string;
  readonly time: string;
  readonly [field: string]: unknown;
}

/** A record's text from its fields. */
export function recordText(body: RecordFields): RecordText {
  const text = JSON.stringify(body);
  return { text, bytes: Buffer.byteLength(text) };
}

export interface ChainObserver {
  written(records: number, bytes: number): void;
  synced(seconds: number): void;
  /** Files removed by retention (their records had been signed and a retention record names them). */
  removed?(files: number, bytes: number): void;
}

export interface ChainWriterOptions {
  readonly directory: string;
  readonly durable: boolean;
  readonly rotateBytes: number;
  readonly retainFiles: number;
  /** The trail's files together at most this size (0: no bound); the oldest removed past it. */
  readonly maxTrailBytes: number;
  readonly digestIntervalMs: number;
  readonly signer: DigestSigner | undefined;
  /** Each line once it is written (the best-effort stdout copy). */
  readonly echo?: (line: string) => void;
  readonly observe?: ChainObserver;
}

/** Append, create, and return from each write once it is on disk (O_DSYNC: the data and what reading it back needs). */
const DURABLE_APPEND = constants.O_APPEND | constants.O_CREAT | constants.O_WRONLY | constants.O_DSYNC;

const noop = () => undefined;

/** What a record's line adds to its text at most: its version, seq (up to 16 digits), prev and newline. */
export const LINE_OVERHEAD_BYTES = 104;

/** One line of the trail: the record's version, its place in the chain, then the record's own fields. */
const chainedLine = (at: number, prev: string, text: string) =>
  `{"v":${AUDIT_RECORD_VERSION},"seq":${at},"prev":"${prev}",${text.slice(1)}`;

/** A line to write: a record's text, or null for a digest (signed as it is chained). */
type Pending = (RecordText & { readonly own?: true }) | null;

/** One of the chain's own records (file, retention, end): not counted as an audit record written. */
const ownRecord = (body: RecordFields) => ({ ...recordText(body), own: true as const });

export class ChainWriter {
  private seq: number;
  private lastHash: string;
  private previousFile: string | null;
  private handle: FileHandle | undefined;
  private file: string | undefined;
  private fileBytes = 0;
  /** The name the next file takes: named by the last file's end record, or begun and never written. */
  private nextName: string | undefined;
  /** When a digest was last written: the next is due digestIntervalMs later. */
  private lastDigestAt = performance.now();
  private undigested = 0; // records since the last digest
  private firstUndigested: number;
  private trailBytes = 0;

  /** Continues the chain from where the directory's newest file left it (a new trail when it has none). */
  constructor(
    private readonly options: ChainWriterOptions,
    start: TrailStart,
  ) {
    const end: ChainEnd | undefined = start.end;
    this.seq = end?.seq ?? 0;
    this.lastHash = end?.hash ?? GENESIS_HASH;
    this.previousFile = end?.file ?? null;
    this.firstUndigested = this.seq + 1;
    this.nextName = start.reuse;
  }

  get isOpen(): boolean {
    return this.handle !== undefined;
  }

  /** The file being written, if any. */
  get currentFile(): string | undefined {
    return this.file;
  }

  get hasUndigested(): boolean {
    return this.undigested > 0;
  }

  /** The size of the trail's files in the directory (known once the first file is begun). */
  get bytesOnDisk(): number {
    return this.trailBytes;
  }

  /** The open file has reached rotateBytes: it is to be ended before the next write. */
  get fileFull(): boolean {
    return this.fileBytes >= this.options.rotateBytes;
  }

  /** Writes a batch of records (null: a digest), followed by a digest when one is due. */
  writeBatch(records: readonly Pending[]): Promise<number> {
    const due =
      this.options.signer !== undefined && performance.now() - this.lastDigestAt >= this.options.digestIntervalMs;
    return this.writeLines(records, due);
  }

  /**
   * Begins the next file: its file record and a signed digest; when older files are past the
   * bounds, a retention record naming them and a digest; then removes them.
   */
  async beginFile(): Promise<void> {
    const { directory, durable } = this.options;
    const name = this.nextName ?? trailFileName(this.seq + 1, new Date());
    this.nextName = name; // a failed begin is retried in the same file: no empty file is left behind
    const opened = await open(join(directory, name), durable ? DURABLE_APPEND : 'a');
    this.handle = opened;
    this.file = name;
    let retired: { name: string; bytes: number }[];
    try {
      // A file begun before and never written may hold a record cut short: nothing acknowledged.
      await opened.truncate(0);
      this.fileBytes = 0;
      // A new file's entry in the directory is durable only once the directory is synced.
      if (durable) await syncDirectory(directory);
      const sizes = await trailFileSizes(directory);
      this.trailBytes = sizes.reduce((sum, file) => sum + file.bytes, 0);
      const { retainFiles, maxTrailBytes } = this.options;
      retired = filesPastRetention(sizes, name, retainFiles, maxTrailBytes);
      const time = new Date().toISOString();
      await this.writeLines([ownRecord({ kind: 'file', time, file: name, previousFile: this.previousFile })], true);
      // Signed before any file is removed: a trail that starts later verifies only by this record.
      if (retired.length > 0) {
        const bytes = retired.reduce((sum, file) => sum + file.bytes, 0);
        const through = retired[retired.length - 1]!.name;
        await this.writeLines([ownRecord({ kind: 'retention', time, through, files: retired.length, bytes })], true);
      }
    } catch (error) {
      this.handle = undefined;
      this.file = undefined;
      await opened
        .truncate(0)
        .catch(noop)
        .finally(() => opened.close().catch(noop));
      throw error;
    }
    this.previousFile = name;
    this.nextName = undefined;
    if (retired.length > 0) await this.retire(retired);
  }

  /**
   * Ends the open file with its end record and a last digest: `rotate` names the next file (begun
   * by the next beginFile), a close names none (the trail is sealed). Then closes it.
   */
  async endFile(rotate: boolean): Promise<void> {
    const ending = this.handle!;
    const signed = this.options.signer !== undefined;
    // The next file's first record follows the end record and its digest.
    const next = rotate ? trailFileName(this.seq + (signed ? 3 : 2), new Date()) : null;
    await this.writeLines(
      [ownRecord({ kind: 'end', time: new Date().toISOString(), bytes: this.fileBytes, next })],
      signed,
    );
    this.nextName = next ?? undefined;
    this.handle = undefined;
    this.file = undefined;
    await ending.close();
  }

  /** After a failed write: what it may have left of its batch is cut off, where the disk allows. */
  abandonFile(): void {
    const broken = this.handle;
    this.handle = undefined;
    this.file = undefined;
    if (broken !== undefined) {
      void broken
        .truncate(this.fileBytes)
        .catch(noop)
        .finally(() => broken.close().catch(noop));
    }
  }

  private async retire(files: readonly { name: string; bytes: number }[]): Promise<void> {
    await removeFiles(this.options.directory, files);
    const bytes = files.reduce((sum, file) => sum + file.bytes, 0);
    this.trailBytes -= bytes;
    this.options.observe?.removed?.(files.length, bytes);
  }

  private digestText(at: number, prev: string): string {
    const signer = this.options.signer!;
    const time = new Date().toISOString();
    return JSON.stringify({
      kind: 'digest',
      time,
      keyId: signer.keyId,
      from: this.firstUndigested,
      signature: signer.sign(at, time, prev),
    });
  }

  /** Writes lines chained from `lastHash`; commits seq and hash only once they are on disk (synced when durable). */
  private async writeLines(records: readonly Pending[], digestAfter: boolean): Promise<number> {
    const { signer, durable, observe, echo } = this.options;
    let at = this.seq;
    let prev = this.lastHash;
    let counted = 0;
    let since = this.undigested; // records after the last digest, once these lines are written
    let digested = false;
    const lines: string[] = [];
    const add = (record: Pending) => {
      at++;
      const text = chainedLine(at, prev, record === null ? this.digestText(at, prev) : record.text);
      if (record === null) {
        this.firstUndigested = at + 1;
        since = 0;
        digested = true;
      } else if (record.own !== true) {
        counted++;
        since++;
      }
      prev = lineHash(text);
      lines.push(text);
    };
    const undigestedBefore = this.firstUndigested;
    for (const record of records) if (record !== null || signer !== undefined) add(record);
    if (digestAfter && signer !== undefined) add(null);
    if (lines.length === 0) return 0;
    const buffer = Buffer.from(`${lines.join('\n')}\n`);
    try {
      const started = performance.now();
      // A short write (a file size limit reached) is followed by one that fails. Durable, the file is
      // open with O_DSYNC: each write returns once its data is on disk, as write + fdatasync would,
      // in one system call instead of two (a third less CPU per batch, measured: docs/performance.md).
      for (let written = 0; written < buffer.length;)
        written += (await this.handle!.write(buffer, written, buffer.length - written, null)).bytesWritten;
      if (durable) observe?.synced((performance.now() - started) / 1000);
    } catch (error) {
      this.firstUndigested = undigestedBefore;
      throw error;
    }
    this.seq = at;
    this.lastHash = prev;
    this.undigested = since;
    this.fileBytes += buffer.length;
    this.trailBytes += buffer.length;
    if (digested) this.lastDigestAt = performance.now();
    observe?.written(counted, buffer.length);
    if (echo !== undefined) for (const text of lines) echo(text);
    return counted;
  }
}

async function syncDirectory(directory: string): Promise<void> {
  const dir = await open(directory, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
