// The chain as it is written to the trail's files: each line names the hash of the line before it
// (chain.ts); seq and hash move on only once a batch is on disk, so a failed write leaves the chain
// where it was. A signed digest follows when due and ends each file. Past rotateBytes a file is
// ended and the next begun, its first record naming the one before. The trail writer
// (trail-writer.ts) decides when to write and what to do when a write fails.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AUDIT_RECORD_VERSION, GENESIS_HASH, lineHash, type DigestSigner } from './chain.js';
import { applyRetention, trailFileName, type ChainEnd } from './trail-files.js';

/** A record as the trail's callers build it: its kind, its time and its own fields. */
export interface RecordBody {
  readonly kind: string;
  readonly time: string;
  readonly [field: string]: unknown;
}

export interface ChainObserver {
  written(records: number, bytes: number): void;
  synced(seconds: number): void;
}

export interface ChainWriterOptions {
  readonly directory: string;
  readonly durable: boolean;
  readonly rotateBytes: number;
  readonly retainFiles: number;
  readonly digestIntervalMs: number;
  readonly signer: DigestSigner | undefined;
  /** Each line once it is written (the best-effort stdout copy). */
  readonly echo?: (line: string) => void;
  readonly observe?: ChainObserver;
}

/** Append, create, and return from each write once it is on disk (O_DSYNC: the data and what reading it back needs). */
const DURABLE_APPEND = constants.O_APPEND | constants.O_CREAT | constants.O_WRONLY | constants.O_DSYNC;

const noop = () => undefined;

/** One line of the trail: the record's version, its place in the chain, then the caller's fields. */
const chainedLine = (at: number, prev: string, body: RecordBody) =>
  `{"v":${AUDIT_RECORD_VERSION},"seq":${at},"prev":"${prev}",${JSON.stringify(body).slice(1)}`;

export class ChainWriter {
  private seq: number;
  private lastHash: string;
  private previousFile: string | null;
  private handle: FileHandle | undefined;
  private file: string | undefined;
  private fileBytes = 0;
  /** When a digest was last written: the next is due digestIntervalMs later. */
  private lastDigestAt = performance.now();
  private undigested = 0; // records since the last digest
  private firstUndigested: number;

  /** Continues the chain from where the directory's newest file left it (undefined: a new trail). */
  constructor(
    private readonly options: ChainWriterOptions,
    end: ChainEnd | undefined,
  ) {
    this.seq = end?.seq ?? 0;
    this.lastHash = end?.hash ?? GENESIS_HASH;
    this.previousFile = end?.file ?? null;
    this.firstUndigested = this.seq + 1;
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

  /** The open file has reached rotateBytes: it is to be ended before the next write. */
  get fileFull(): boolean {
    return this.fileBytes >= this.options.rotateBytes;
  }

  /** Writes a batch of records (null: a digest), followed by a digest when one is due. */
  writeBatch(bodies: readonly (RecordBody | null)[]): Promise<number> {
    const due =
      this.options.signer !== undefined && performance.now() - this.lastDigestAt >= this.options.digestIntervalMs;
    return this.writeLines(bodies, due);
  }

  async beginFile(): Promise<void> {
    const { directory, durable } = this.options;
    const name = trailFileName(this.seq + 1, new Date());
    const opened = await open(join(directory, name), durable ? DURABLE_APPEND : 'a');
    this.handle = opened;
    this.file = name;
    this.fileBytes = 0;
    try {
      // A new file's entry in the directory is durable only once the directory is synced.
      if (durable) {
        const dir = await open(directory, 'r');
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
      }
      const first = { kind: 'file', time: new Date().toISOString(), file: name, previousFile: this.previousFile };
      await this.writeLines([first], true);
    } catch (error) {
      this.handle = undefined;
      this.file = undefined;
      await opened.close().catch(noop);
      throw error;
    }
    this.previousFile = name;
  }

  /** Signs what the file holds unsigned, closes it, and removes the files past retainFiles. */
  async endFile(): Promise<void> {
    const ending = this.handle!;
    if (this.undigested > 0 && this.options.signer !== undefined) await this.writeLines([], true);
    this.handle = undefined;
    this.file = undefined;
    await ending.close();
    const { directory, retainFiles } = this.options;
    if (retainFiles > 0) await applyRetention(directory, retainFiles, this.previousFile ?? '');
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

  private digestBody(at: number, prev: string): RecordBody {
    const signer = this.options.signer!;
    const time = new Date().toISOString();
    return {
      kind: 'digest',
      time,
      keyId: signer.keyId,
      from: this.firstUndigested,
      signature: signer.sign(at, time, prev),
    };
  }

  /** Writes lines chained from `lastHash` and syncs them; commits seq and hash only once they are on disk. */
  private async writeLines(bodies: readonly (RecordBody | null)[], digestAfter: boolean): Promise<number> {
    const { signer, durable, observe, echo } = this.options;
    let at = this.seq;
    let prev = this.lastHash;
    let records = 0;
    let since = this.undigested; // records after the last digest, once these lines are written
    let digested = false;
    const lines: string[] = [];
    const add = (body: RecordBody | null) => {
      at++;
      const text = body === null ? chainedLine(at, prev, this.digestBody(at, prev)) : chainedLine(at, prev, body);
      if (body === null) {
        this.firstUndigested = at + 1;
        since = 0;
        digested = true;
      } else if (body.kind !== 'file') {
        records++;
        since++;
      }
      prev = lineHash(text);
      lines.push(text);
    };
    const undigestedBefore = this.firstUndigested;
    for (const body of bodies) if (body !== null || signer !== undefined) add(body);
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
    if (digested) this.lastDigestAt = performance.now();
    observe?.written(records, buffer.length);
    if (echo !== undefined) for (const text of lines) echo(text);
    return records;
  }
}
