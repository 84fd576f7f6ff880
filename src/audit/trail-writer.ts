// The trail's writer: records are appended to a JSON Lines file in batches, one synchronous-data
// write (O_DSYNC) for every record waiting (group commit: while one batch is synced, the next gathers),
// so a caller waits for one sync, not for its turn behind every other. Each record is chained to
// the line before it as it is written (chain.ts); a signed digest follows at a bounded interval and
// ends each file. Past rotateBytes a file is closed and the next begun, its first record naming the
// last hash of the one before. A failed write or sync fails its batch and every record waiting
// (their callers decide: refuse or forward, stage.ts), and the trail tries a new file after
// retryIntervalMs: never a record acknowledged that is not on disk.
import { constants } from 'node:fs';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AUDIT_RECORD_VERSION, GENESIS_HASH, lineHash, type DigestSigner } from './chain.js';
import { applyRetention, chainEnd, trailFileName } from './trail-files.js';

/** A record as the trail's callers build it: its kind, its time and its own fields. */
export interface RecordBody {
  readonly kind: string;
  readonly time: string;
  readonly [field: string]: unknown;
}

export interface TrailWriterOptions {
  readonly directory: string;
  readonly durable: boolean;
  readonly maxPendingRecords: number;
  readonly maxBatchRecords: number;
  readonly rotateBytes: number;
  readonly retainFiles: number;
  readonly retryIntervalMs: number;
  readonly digestIntervalMs: number;
  /** A record not written within this long is failed (TrailUnavailable); it may still be written later. */
  readonly writeTimeoutMs: number;
  readonly signer: DigestSigner | undefined;
  /** Each line once it is written (the best-effort stdout copy). */
  readonly echo?: (line: string) => void;
  readonly observe?: TrailObserver;
}

export interface TrailObserver {
  written(records: number, bytes: number): void;
  synced(seconds: number): void;
  /** The trail could not be written (it retries after retryIntervalMs); `records` waiting were failed. */
  failed(error: Error, records: number): void;
  /** A file was begun after a failure. */
  recovered(file: string): void;
}

/** Why a record was not written: the message names the cause (never a record's content). */
export class TrailUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TrailUnavailable';
  }
}

export interface TrailWriter {
  /** Resolves once the record is written (synced when durable); rejects with TrailUnavailable. */
  append(body: RecordBody): Promise<void>;
  /**
   * Queues a record that nobody waits for (an outcome): written with the next batch, or within
   * LATER_MS; a failure is reported to `failed`.
   */
  appendLater(body: RecordBody, failed: () => void): void;
  /** False from a failure until a new file is begun. */
  readonly writable: boolean;
  /** The file being written, if any. */
  readonly currentFile: string | undefined;
  /** Writes what waits, a last signed digest, and closes the file. */
  close(): Promise<void>;
}

interface Entry {
  readonly body: RecordBody | null; // null: a digest
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  /** performance.now() past which the record is failed if still not written. */
  readonly deadline: number;
}

/** An entry whose resolve and reject run at most once between them (a deadline and the write race). */
function entry(body: RecordBody | null, resolve: () => void, reject: (error: Error) => void, deadline: number): Entry {
  let settled = false;
  return {
    body,
    deadline,
    resolve: () => {
      if (settled) return;
      settled = true;
      resolve();
    },
    reject: (error) => {
      if (settled) return;
      settled = true;
      reject(error);
    },
  };
}

/** Append, create, and return from each write once it is on disk (O_DSYNC: the data and what reading it back needs). */
const DURABLE_APPEND = constants.O_APPEND | constants.O_CREAT | constants.O_WRONLY | constants.O_DSYNC;

/** How long a record nobody waits for may wait for a batch to join (it costs no write of its own then). */
const LATER_MS = 20;

const noop = () => undefined;

export async function openTrailWriter(options: TrailWriterOptions): Promise<TrailWriter> {
  const { directory, signer, observe } = options;
  await mkdir(directory, { recursive: true });
  const end = await chainEnd(directory, lineHash);
  let seq = end?.seq ?? 0;
  let lastHash = end?.hash ?? GENESIS_HASH;
  let previousFile: string | null = end?.file ?? null;

  let handle: FileHandle | undefined;
  let file: string | undefined;
  let fileBytes = 0;
  let queue: Entry[] = [];
  let inFlight: readonly Entry[] = []; // the batch being written
  let writing: Promise<void> | undefined;
  let failure: TrailUnavailable | undefined;
  let retryAt = 0;
  let closed = false;
  let lastDigestAt = performance.now();
  let undigested = 0; // records since the last digest
  let firstUndigested = seq + 1;

  const line = (at: number, prev: string, body: RecordBody) =>
    `{"v":${AUDIT_RECORD_VERSION},"seq":${at},"prev":"${prev}",${JSON.stringify(body).slice(1)}`;

  function digestBody(at: number, prev: string): RecordBody {
    const time = new Date().toISOString();
    return {
      kind: 'digest',
      time,
      keyId: signer!.keyId,
      from: firstUndigested,
      signature: signer!.sign(at, time, prev),
    };
  }

  /** Writes lines chained from `lastHash` and syncs them; commits seq and hash only once they are on disk. */
  async function writeLines(bodies: readonly (RecordBody | null)[], digestAfter: boolean): Promise<number> {
    let at = seq;
    let prev = lastHash;
    let records = 0;
    let since = undigested; // records after the last digest, once these lines are written
    const lines: string[] = [];
    const add = (body: RecordBody | null) => {
      at++;
      const text = body === null ? line(at, prev, digestBody(at, prev)) : line(at, prev, body);
      if (body === null) {
        firstUndigested = at + 1;
        since = 0;
      } else if (body.kind !== 'file') {
        records++;
        since++;
      }
      prev = lineHash(text);
      lines.push(text);
    };
    const undigestedBefore = firstUndigested;
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
        written += (await handle!.write(buffer, written, buffer.length - written, null)).bytesWritten;
      if (options.durable) observe?.synced((performance.now() - started) / 1000);
    } catch (error) {
      firstUndigested = undigestedBefore;
      throw error;
    }
    seq = at;
    lastHash = prev;
    undigested = since;
    fileBytes += buffer.length;
    observe?.written(records, buffer.length);
    if (options.echo !== undefined) for (const text of lines) options.echo(text);
    return records;
  }

  async function beginFile(): Promise<void> {
    const name = trailFileName(seq + 1, new Date());
    const opened = await open(join(directory, name), options.durable ? DURABLE_APPEND : 'a');
    handle = opened;
    file = name;
    fileBytes = 0;
    try {
      // A new file's entry in the directory is durable only once the directory is synced.
      if (options.durable) {
        const dir = await open(directory, 'r');
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
      }
      await writeLines([{ kind: 'file', time: new Date().toISOString(), file: name, previousFile }], true);
      lastDigestAt = performance.now();
    } catch (error) {
      handle = undefined;
      file = undefined;
      await opened.close().catch(noop);
      throw error;
    }
    previousFile = name;
  }

  async function endFile(): Promise<void> {
    const ending = handle!;
    if (undigested > 0 && signer !== undefined) await writeLines([], true);
    handle = undefined;
    file = undefined;
    await ending.close();
    if (options.retainFiles > 0) await applyRetention(directory, options.retainFiles, previousFile ?? '');
  }

  function failAll(error: unknown, batch: readonly Entry[]): void {
    const cause =
      error instanceof Error
        ? `${(error as NodeJS.ErrnoException).code ?? error.name}: ${error.message}`
        : String(error);
    failure = new TrailUnavailable(`the audit trail cannot be written (${cause})`);
    retryAt = performance.now() + options.retryIntervalMs;
    const waiting = [...batch, ...queue];
    queue = [];
    inFlight = [];
    const broken = handle;
    handle = undefined;
    file = undefined;
    if (broken !== undefined) {
      // What a failed write may have left of its batch is cut off, where the disk allows.
      void broken
        .truncate(fileBytes)
        .catch(noop)
        .finally(() => broken.close().catch(noop));
    }
    observe?.failed(failure, waiting.filter((entry) => entry.body !== null).length);
    for (const entry of waiting) entry.reject(failure);
  }

  async function drain(): Promise<void> {
    while (queue.length > 0) {
      let batch: Entry[] = [];
      try {
        if (handle === undefined) {
          const recovering = failure !== undefined;
          await beginFile();
          failure = undefined;
          if (recovering) observe?.recovered(file!);
        }
        batch = queue.splice(0, options.maxBatchRecords);
        inFlight = batch;
        const due = signer !== undefined && performance.now() - lastDigestAt >= options.digestIntervalMs;
        await writeLines(
          batch.map((entry) => entry.body),
          due,
        );
        if (due || batch.some((entry) => entry.body === null)) lastDigestAt = performance.now();
        inFlight = [];
        for (const entry of batch) entry.resolve();
        if (fileBytes >= options.rotateBytes) await endFile();
      } catch (error) {
        failAll(error, batch);
        return;
      }
    }
  }

  function kick(): void {
    writing ??= drain().finally(() => {
      writing = undefined;
      if (queue.length > 0 && failure === undefined) kick();
    });
  }

  function refusal(): TrailUnavailable | undefined {
    if (closed) return new TrailUnavailable('the audit trail is closed');
    if (failure !== undefined && performance.now() < retryAt) return failure;
    if (queue.length >= options.maxPendingRecords)
      return new TrailUnavailable(
        `the audit trail has ${options.maxPendingRecords} records waiting (audit.maxPendingRecords)`,
      );
    return undefined;
  }

  function enqueue(body: RecordBody | null): Promise<void> {
    const refused = refusal();
    if (refused !== undefined) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      queue.push(entry(body, resolve, reject, performance.now() + options.writeTimeoutMs));
      kick();
    });
  }

  let laterTimer: NodeJS.Timeout | undefined;
  function enqueueLater(body: RecordBody, failed: () => void): void {
    if (refusal() !== undefined) {
      failed();
      return;
    }
    queue.push(entry(body, noop, failed, performance.now() + options.writeTimeoutMs));
    if (writing === undefined)
      laterTimer ??= setTimeout(() => {
        laterTimer = undefined;
        if (queue.length > 0 && failure === undefined) kick();
      }, LATER_MS);
  }

  // Records past their deadline are failed where they wait (a hung disk holds no caller longer).
  const deadlineTimer = setInterval(
    () => {
      const now = performance.now();
      if (inFlight.length === 0 && (queue.length === 0 || queue[0]!.deadline > now)) return;
      const overdue = new TrailUnavailable(`not written within audit.writeTimeoutMs (${options.writeTimeoutMs} ms)`);
      // A batch the disk holds: its callers are failed now (settled once, its late success is ignored).
      if (inFlight.length > 0 && inFlight[0]!.deadline <= now) for (const held of inFlight) held.reject(overdue);
      if (queue.length === 0 || queue[0]!.deadline > now) return;
      const kept: Entry[] = [];
      for (const waiting of queue) {
        if (waiting.deadline <= now) waiting.reject(overdue);
        else kept.push(waiting);
      }
      queue = kept;
    },
    Math.max(10, Math.floor(options.writeTimeoutMs / 4)),
  ).unref();

  // A quiet trail's last records are signed too, within digestIntervalMs.
  const digestTimer =
    signer === undefined
      ? undefined
      : setInterval(() => {
          if (undigested > 0 && handle !== undefined && writing === undefined) enqueue(null).catch(noop);
        }, options.digestIntervalMs).unref();

  await (async () => {
    try {
      await beginFile();
    } catch (error) {
      failAll(error, []);
    }
  })();

  return {
    append: (body) => enqueue(body),
    appendLater: (body, failed) => enqueueLater(body, failed),
    get writable() {
      return failure === undefined;
    },
    get currentFile() {
      return file;
    },
    async close() {
      if (closed) return;
      closed = true;
      if (digestTimer !== undefined) clearInterval(digestTimer);
      clearInterval(deadlineTimer);
      if (laterTimer !== undefined) clearTimeout(laterTimer);
      if (queue.length > 0 && writing === undefined && failure === undefined) kick();
      while (writing !== undefined) await writing;
      if (handle !== undefined) await endFile().catch(noop);
    },
  };
}
