// Prepared transactions decoded off the event loop: one up to a 1 MiB body could hold it for
// milliseconds (docs/performance.md, "Prepared transactions"), and the protobuf bindings load every
// message of the Ledger API, so every one goes to a bounded pool of worker threads (piscina), the only
// threads that load them. Every wait is bounded: a full queue or a slow decode refuses the call
// (PreparedDecoderBusy), never queues it without end. A governed caller's large body is made into
// its decision document by the same workers, under the same bounds (large-body-document.ts). Each
// worker's heap is bounded (resourceLimits), as the request rules' workers' are: a body or a
// transaction that passes it kills only its worker, and is refused as too large.
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { Errors, GatewayError } from '../errors.js';
import type { BodyDocumentOutcome, BodyDocumentTask } from './body-document-worker.js';
import { PreparedTransactionError, type PreparedLimits, type PreparedSummary } from './prepared-summary.js';
import type { PreparedOutcome, PreparedTask } from './prepared-worker.js';

export interface PreparedDecoderOptions {
  readonly workerThreads: number;
  /** Transactions waiting for a worker at most; past it a call is refused. */
  readonly maxQueue: number;
  /** Bound on one decode, waiting included. */
  readonly timeoutMs: number;
  /** A worker's heap: its old generation, in MiB (its young generation is an eighth of it, at least 4). */
  readonly heapMb: number;
  readonly limits: PreparedLimits;
}

/**
 * The shipped workers' heap: the protobuf bindings of the Ledger API, and the worst tree the request
 * rules' worker admits (32 MiB heap, policy/large-body-pool.ts) with the decision document built from
 * it (docs/performance.md, "Prepared transactions").
 */
export const PREPARED_WORKER_HEAP_MB = 64;

/** The pool could not take or finish the decode in time: the call is refused as unavailable (retry). */
export class PreparedDecoderBusy extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PreparedDecoderBusy';
  }
}

export interface PreparedDecoder {
  /**
   * The summary, or throws PreparedTransactionError (not a prepared transaction), PreparedDecoderBusy,
   * or GATEWAY_REQUEST_TOO_LARGE (its decode passed the worker's heap).
   */
  decode(encoded: unknown): Promise<PreparedSummary>;
  /**
   * A large body's decision document (body-document-worker.ts), or throws PreparedDecoderBusy or
   * GATEWAY_REQUEST_TOO_LARGE (the bytes, moved to the worker, are then lost: the call is refused).
   * The decode's bounds are this pool's.
   */
  documentOfBody(task: Omit<BodyDocumentTask, 'prepared'>, executes: boolean): Promise<BodyDocumentOutcome>;
  close(): Promise<void>;
}

/** The worker's file: its built twin in dist/ when these sources run as TypeScript (vitest builds dist/ first). */
function workerFile(): string {
  const here = import.meta.url;
  const url = here.endsWith('.ts')
    ? new URL('../../dist/ledger-policy/prepared-worker.js', here)
    : new URL('./prepared-worker.js', here);
  return fileURLToPath(url);
}

/** A task that passed the worker's heap (`bodyBytes`: a body's, else a prepared transaction): the caller's to make smaller (413), not to retry. */
function tooLarge(bodyBytes: number | undefined, heapMb: number): GatewayError {
  const what = bodyBytes === undefined ? 'The prepared transaction' : `The request body (${bodyBytes} bytes)`;
  return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, {
    cause: `${what} needs more memory to read than a ledger policy worker has (${heapMb} MiB).`,
  });
}

export function createPreparedDecoder(options: PreparedDecoderOptions): PreparedDecoder {
  // Counted here: piscina does not hold abortable tasks to its maxQueue (5.3, measured).
  const most = options.workerThreads + options.maxQueue;
  let inFlight = 0;
  let pool: Piscina<PreparedTask | BodyDocumentTask, unknown> | undefined;
  const poolOf = () =>
    (pool ??= new Piscina<PreparedTask | BodyDocumentTask, unknown>({
      filename: workerFile(),
      minThreads: 0,
      maxThreads: options.workerThreads,
      idleTimeout: 30_000,
      resourceLimits: {
        maxOldGenerationSizeMb: options.heapMb,
        maxYoungGenerationSizeMb: Math.max(4, Math.round(options.heapMb / 8)),
      },
    }));

  /** One task of the worker's export `name`, bounded in number and in time. */
  async function offThread<Outcome>(
    task: PreparedTask | BodyDocumentTask,
    run: { readonly name: string; readonly transferList?: ArrayBuffer[] },
  ): Promise<Outcome> {
    if (inFlight >= most)
      throw new PreparedDecoderBusy(`${inFlight} prepared transactions or large bodies are being decoded or wait`);
    inFlight++;
    const bodyBytes = 'bytes' in task ? task.bytes.byteLength : undefined; // moved to the worker, so counted now
    try {
      return (await poolOf().run(task, { ...run, signal: AbortSignal.timeout(options.timeoutMs) })) as Outcome;
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY') throw tooLarge(bodyBytes, options.heapMb);
      throw new PreparedDecoderBusy(`not decoded in a worker: ${(error as Error).message}`);
    } finally {
      inFlight--;
    }
  }

  return {
    async decode(encoded) {
      if (typeof encoded !== 'string') throw new PreparedTransactionError('preparedTransaction is not a base64 string');
      const outcome = await offThread<PreparedOutcome>({ encoded, limits: options.limits }, { name: 'default' });
      if ('invalid' in outcome) throw new PreparedTransactionError(outcome.invalid);
      return outcome.summary;
    },
    documentOfBody(task, executes) {
      const prepared = executes ? { ...options.limits, withArguments: task.withArguments } : undefined;
      return offThread<BodyDocumentOutcome>(
        { ...task, prepared },
        { name: 'documentOfBody', transferList: [task.bytes.buffer as ArrayBuffer] },
      );
    },
    async close() {
      await pool?.destroy();
    },
  };
}
