// The trail's writer: records are appended to a JSON Lines file in batches, one synchronous-data
// write (O_DSYNC) for every record waiting (group commit: while one batch is synced, the next gathers),
// so a caller waits for one sync, not for its turn behind every other. Each record is chained to the
// line before it as it is written, a signed digest follows at a bounded interval and ends each file,
// and past rotateBytes the next file is begun (chain-writer.ts). A failed write or sync fails its
// batch and every record waiting (their callers decide: refuse or forward, audit-trail.ts), and the
// trail tries a new file every retryIntervalMs, on its own timer: never a record acknowledged that
// is not on disk, and none left waiting in memory past a close (written then, or reported failed).
import { mkdir } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { lineHash, type DigestSigner } from './chain.js';
import { ChainWriter, type ChainObserver, type RecordText } from './chain-writer.js';
import { trailStart } from './trail-files.js';

export { LINE_OVERHEAD_BYTES, recordText, type RecordText } from './chain-writer.js';

export interface TrailWriterOptions {
  readonly directory: string;
  readonly durable: boolean;
  readonly maxPendingRecords: number;
  /** The bytes of the records waiting at most (their JSON text). */
  readonly maxPendingBytes: number;
  readonly maxBatchRecords: number;
  readonly rotateBytes: number;
  readonly retainFiles: number;
  readonly maxTrailBytes: number;
  readonly retryIntervalMs: number;
  readonly digestIntervalMs: number;
  /** A record not written within this long is failed (TrailUnavailable); it may still be written later. */
  readonly writeTimeoutMs: number;
  readonly signer: DigestSigner | undefined;
  /** Each line once it is written (the best-effort stdout copy). */
  readonly echo?: (line: string) => void;
  readonly observe?: TrailObserver;
}

export interface TrailObserver extends ChainObserver {
  /** The trail could not be written (it retries every retryIntervalMs); `records` waiting were failed. */
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
  append(record: RecordText): Promise<void>;
  /**
   * Queues a record that nobody waits for (an outcome): written with the next batch, or within
   * LATER_MS; a failure (the trail unwritable until its deadline or the close) is reported to `failed`.
   */
  appendLater(record: RecordText, failed: () => void): void;
  /** False from a failure until a new file is begun. */
  readonly writable: boolean;
  /** The file being written, if any. */
  readonly currentFile: string | undefined;
  /** The size of the trail's files in its directory. */
  readonly bytesOnDisk: number;
  /** The bytes of the records waiting in memory. */
  readonly pendingBytes: number;
  /** Writes what waits (a last try after a failure; what still cannot be written is failed), seals the trail and closes the file. */
  close(): Promise<void>;
}

/** A record waiting to be written: settled once, by its write or its deadline, whichever comes first. */
class Entry {
  private settled = false;

  constructor(
    readonly record: RecordText | null, // null: a digest
    private readonly onWritten: () => void,
    private readonly onFailed: (error: Error) => void,
    /** performance.now() past which the record is failed if still not written. */
    readonly deadline: number,
  ) {}

  resolve(): void {
    if (this.settled) return;
    this.settled = true;
    this.onWritten();
  }

  reject(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.onFailed(error);
  }
}

/** How long a record nobody waits for may wait for a batch to join (it costs no write of its own then). */
const LATER_MS = 20;

const noop = () => undefined;

const turnEnd = () => new Promise<void>((resolve) => setImmediate(resolve));

export async function openTrailWriter(options: TrailWriterOptions): Promise<TrailWriter> {
  await mkdir(options.directory, { recursive: true });
  const chain = new ChainWriter(options, await trailStart(options.directory, lineHash));
  const commit = new GroupCommit(options, chain);
  await commit.beginFirstFile();
  return {
    append: (record) => commit.enqueue(record),
    appendLater: (record, failed) => commit.enqueueLater(record, failed),
    get writable() {
      return commit.writable;
    },
    get currentFile() {
      return chain.currentFile;
    },
    get bytesOnDisk() {
      return chain.bytesOnDisk;
    },
    get pendingBytes() {
      return commit.pendingBytes;
    },
    close: () => commit.close(),
  };
}

/**
 * The queue of records waiting and the batches written from it, one at a time: whatever waits
 * while a batch is on its way to disk becomes the next batch. Owns failure and retry, deadlines,
 * and the timers that keep a quiet trail signed and an unwritable one retried.
 */
class GroupCommit {
  private queue: Entry[] = [];
  private queuedBytes = 0;
  private inFlight: readonly Entry[] = []; // the batch being written
  private writing: Promise<void> | undefined;
  private failure: TrailUnavailable | undefined;
  private retryAt = 0;
  private closed = false;
  private laterTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly deadlineTimer: NodeJS.Timeout;
  private readonly digestTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: TrailWriterOptions,
    private readonly chain: ChainWriter,
  ) {
    // Records past their deadline are failed where they wait (a hung disk holds no caller longer).
    this.deadlineTimer = setInterval(
      () => this.failOverdue(),
      Math.max(10, Math.floor(options.writeTimeoutMs / 4)),
    ).unref();
    // A quiet trail's last records are signed too, within digestIntervalMs.
    this.digestTimer =
      options.signer === undefined
        ? undefined
        : setInterval(() => {
            if (chain.hasUndigested && chain.isOpen && this.writing === undefined) this.enqueue(null).catch(noop);
          }, options.digestIntervalMs).unref();
  }

  /** False from a failure until a new file is begun. */
  get writable(): boolean {
    return this.failure === undefined;
  }

  get pendingBytes(): number {
    return this.queuedBytes;
  }

  /** A first file that cannot be begun fails nothing but the trail: it is retried on the retry timer. */
  async beginFirstFile(): Promise<void> {
    try {
      await this.chain.beginFile();
    } catch (error) {
      this.failAll(error, []);
    }
  }

  enqueue(record: RecordText | null): Promise<void> {
    const refused = this.refusal(record);
    if (refused !== undefined) return Promise.reject(refused);
    return new Promise<void>((resolve, reject) => {
      this.push(new Entry(record, resolve, reject, performance.now() + this.options.writeTimeoutMs));
      this.kick();
    });
  }

  enqueueLater(record: RecordText, failed: () => void): void {
    if (this.refusal(record) !== undefined) {
      failed();
      return;
    }
    this.push(new Entry(record, noop, failed, performance.now() + this.options.writeTimeoutMs));
    // While the trail is unwritable, the retry timer writes it (or fails it) within retryIntervalMs.
    if (this.writing === undefined)
      this.laterTimer ??= setTimeout(() => {
        this.laterTimer = undefined;
        if (this.queue.length > 0 && this.failure === undefined) this.kick();
      }, LATER_MS);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.digestTimer !== undefined) clearInterval(this.digestTimer);
    clearInterval(this.deadlineTimer);
    if (this.laterTimer !== undefined) clearTimeout(this.laterTimer);
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    // A last try, whatever the retry's time: what waits is written, or failed (its caller counts it).
    if (this.writing === undefined && (this.queue.length > 0 || this.failure !== undefined)) this.kick();
    while (this.writing !== undefined) await this.writing;
    const left = this.queue.splice(0);
    for (const failed of left) failed.reject(new TrailUnavailable('the audit trail closed before it was written'));
    if (this.chain.isOpen) await this.chain.endFile(false).catch(noop);
  }

  private push(entry: Entry): void {
    this.queue.push(entry);
    this.queuedBytes += entry.record?.bytes ?? 0;
  }

  private refusal(record: RecordText | null): TrailUnavailable | undefined {
    if (this.closed) return new TrailUnavailable('the audit trail is closed');
    if (this.failure !== undefined && performance.now() < this.retryAt) return this.failure;
    const { maxPendingRecords, maxPendingBytes } = this.options;
    if (this.queue.length >= maxPendingRecords)
      return new TrailUnavailable(`the audit trail has ${maxPendingRecords} records waiting (audit.maxPendingRecords)`);
    if (record !== null && this.queuedBytes + record.bytes > maxPendingBytes)
      return new TrailUnavailable(`the audit trail has ${this.queuedBytes} bytes waiting (audit.maxPendingBytes)`);
    return undefined;
  }

  private kick(): void {
    // The write waits for the end of this turn of the event loop, so every record the turn makes
    // (the calls it read, the answers it passed on) joins one batch rather than the next one.
    this.writing ??= turnEnd()
      .then(() => this.drain())
      .finally(() => {
        this.writing = undefined;
        if (this.queue.length > 0 && this.failure === undefined) this.kick();
      });
  }

  /** Begins a file (after a failure: the trail is writable again), then writes what waits, batch by batch. */
  private async drain(): Promise<void> {
    let batch: Entry[] = [];
    try {
      if (!this.chain.isOpen) await this.beginFile();
      while (this.queue.length > 0) {
        batch = this.queue.splice(0, this.options.maxBatchRecords);
        for (const taken of batch) this.queuedBytes -= taken.record?.bytes ?? 0;
        this.inFlight = batch;
        await this.chain.writeBatch(batch.map((waiting) => waiting.record));
        this.inFlight = [];
        for (const written of batch) written.resolve();
        batch = [];
        if (this.chain.fileFull) {
          await this.chain.endFile(true);
          await this.beginFile(); // the file the end record named, at once: the trail never ends on a promise
        }
      }
    } catch (error) {
      this.failAll(error, batch);
    }
  }

  private async beginFile(): Promise<void> {
    const recovering = this.failure !== undefined;
    await this.chain.beginFile();
    this.failure = undefined;
    if (recovering) this.options.observe?.recovered(this.chain.currentFile!);
  }

  /** Fails the batch and every record waiting; the retry timer tries a new file after retryIntervalMs. */
  private failAll(error: unknown, batch: readonly Entry[]): void {
    const cause =
      error instanceof Error
        ? `${(error as NodeJS.ErrnoException).code ?? error.name}: ${error.message}`
        : String(error);
    const failure = new TrailUnavailable(`the audit trail cannot be written (${cause})`);
    this.failure = failure;
    this.retryAt = performance.now() + this.options.retryIntervalMs;
    const waiting = [...batch, ...this.queue];
    this.queue = [];
    this.queuedBytes = 0;
    this.inFlight = [];
    this.chain.abandonFile();
    this.options.observe?.failed(failure, waiting.filter((failed) => failed.record !== null).length);
    for (const failed of waiting) failed.reject(failure);
    if (!this.closed)
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = undefined;
        if (!this.closed) this.kick();
      }, this.options.retryIntervalMs).unref();
  }

  private failOverdue(): void {
    const now = performance.now();
    if (this.inFlight.length === 0 && (this.queue.length === 0 || this.queue[0]!.deadline > now)) return;
    const overdue = new TrailUnavailable(`not written within audit.writeTimeoutMs (${this.options.writeTimeoutMs} ms)`);
    // A batch the disk holds: its callers are failed now (settled once, its late success is ignored).
    if (this.inFlight.length > 0 && this.inFlight[0]!.deadline <= now)
      for (const held of this.inFlight) held.reject(overdue);
    if (this.queue.length === 0 || this.queue[0]!.deadline > now) return;
    const kept: Entry[] = [];
    for (const waiting of this.queue) {
      if (waiting.deadline <= now) {
        waiting.reject(overdue);
        this.queuedBytes -= waiting.record?.bytes ?? 0;
      } else kept.push(waiting);
    }
    this.queue = kept;
  }
}
